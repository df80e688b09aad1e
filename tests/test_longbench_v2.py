"""LongBench-v2 reader, prompt, official answer extraction and breakdowns on a project-written fixture."""

import json

import pandas as pd
import pytest

from longctx.errors import DataFileError, ParameterError
from longctx.tasks import longbench_v2 as lb


def _record(i, answer="B", difficulty="easy", length="short", **extra):
    return {
        "_id": f"id{i}",
        "domain": "Single-Document QA",
        "sub_domain": "Academic",
        "difficulty": difficulty,
        "length": length,
        "question": f"Question {i}? ",
        "choice_A": "alpha",
        "choice_B": "beta",
        "choice_C": "gamma",
        "choice_D": "delta",
        "answer": answer,
        "context": f"Context of {i}. It is long. " * 3,
        **extra,
    }


@pytest.fixture
def data_file(tmp_path):
    recs = [
        _record(0),
        _record(1, "D", "hard", "medium"),
        _record(
            2,
            "A",
            "hard",
            "long",
            retrieved_context=[
                {"c_idx": 7, "content": "late chunk"},
                {"c_idx": 2, "content": "early chunk"},
            ],
        ),
    ]
    path = tmp_path / "data.json"
    path.write_text(json.dumps(recs))
    return path


def test_reader_json_and_jsonl(data_file, tmp_path):
    exs = lb.read_file(data_file)
    assert [e.example_id for e in exs] == ["id0", "id1", "id2"] and exs[1].answer == "D"
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("\n".join(json.dumps(_record(i)) for i in range(2)))
    assert len(lb.read_file(jsonl)) == 2 and len(lb.load(jsonl, limit=1)) == 1


def test_reader_errors(tmp_path):
    with pytest.raises(DataFileError, match="does not exist"):
        lb.read_file(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{k: v for k, v in _record(0).items() if k != "answer"}]))
    with pytest.raises(DataFileError, match="lacks answer"):
        lb.read_file(bad)
    bad.write_text(json.dumps([_record(0, answer="E")]))
    with pytest.raises(ParameterError, match="A-D"):
        lb.read_file(bad)


@pytest.mark.parametrize(
    "response,expected",
    [
        ("The correct answer is (C)", "C"),
        ("**The correct answer is (B)**", "B"),  # markdown bold stripped first
        ("The correct answer is D.", "D"),
        ("I think (A). The correct answer is (B)", "B"),
        ("The answer is (A)", None),  # not the requested format: no answer
        ("the correct answer is (A)", None),  # case-sensitive, as the official regex
    ],
)
def test_official_extraction(response, expected):
    assert lb.extract_answer(response) == expected


def test_prompt_and_rag_context(data_file):
    ex = lb.read_file(data_file)[2]
    prompt = lb.build_prompt(ex, ex.context)
    assert prompt.startswith("Please read the following text") and "(D) delta" in prompt
    assert "What is the correct answer to this question: Question 2?\n" in prompt
    assert prompt.endswith('"The correct answer is (insert answer here)".')
    # chunks return to document order
    assert (
        lb.rag_context(ex, 2) == "Retrieved chunk 1: early chunk\n\nRetrieved chunk 2: late chunk"
    )
    with pytest.raises(DataFileError, match="retrieved_context"):
        lb.rag_context(lb.read_file(data_file)[0], 4)


def test_truncate_middle():
    assert lb.truncate_middle(list(range(10)), 4) == [0, 1, 8, 9]
    assert lb.truncate_middle([1, 2], 4) == [1, 2]


def test_requests_score_and_breakdown(data_file):
    exs = lb.read_file(data_file)
    reqs = lb.make_requests(exs, delimiter="&", ratio=1.0, method="C-NORM")
    assert "Context&of&0." in reqs[0].prompt and reqs[0].condition["difficulty"] == "easy"
    assert reqs[0].stop.cut("The correct answer is (B) because")[0] == "The correct answer is (B"
    rows = [
        {"output": "The correct answer is (B)", "gold": ["B"]},
        {"output": "The correct answer is (A)", "gold": ["D"]},
        {"output": "no idea", "gold": ["A"]},
    ]
    assert [lb.score(r) for r in rows] == [1.0, 0.0, 0.0]
    table = pd.DataFrame(
        {
            "setting": "base",
            "method": "baseline",
            "difficulty": ["easy", "hard", "hard"],
            "length": ["short", "medium", "long"],
            "correct": [1.0, 0.0, 1.0],
        }
    )
    out = lb.breakdown(table).iloc[0]
    assert (
        out.Overall == pytest.approx(200 / 3)
        and out.Easy == 100
        and out.Hard == 50
        and out.Medium == 0
    )
