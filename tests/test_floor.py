"""The numerics floor: a fixed sample of a reader's stored answers, the same on any machine
and in any row order, asked again in another batch composition; what changed, in a report
and in the findings page's table."""

import json
import random

import pytest

from longctx.errors import DataFileError
from longctx.floor import dtype_groups as floor_dtype_groups
from longctx.floor import floor_report, floor_sample, floor_summary, floor_table
from longctx.reader import Reader
from longctx.replay import replay
from longctx.store import ResultsStore
from rows import stored_row

MODEL = "qwen2.5-coder-0.5b-instruct"


def _row(i, *, output="Paris", tokens=100):
    return stored_row(
        f"k{i:03d}",
        model=MODEL,
        fingerprint=Reader(MODEL).ref.fingerprint,
        task="multidoc_qa",
        condition={"gold_index": i},
        example_id=f"q{i}",
        gold=["Paris"],
        prompt=f"prompt {i}",
        prompt_tokens=tokens,
        output=output,
        host="vm",
        params={
            "max_new_tokens": 16,
            "batch_size": 8,
            "stop": {"newline": True, "answer_pattern": None, "echoes": []},
        },
    )


def test_the_sample_is_seeded_by_the_keys_not_the_order_and_leaves_long_prompts_out(tmp_path):
    rows = [_row(i, tokens=5000 if i % 10 == 0 else 100) for i in range(60)]
    shuffled = list(rows)
    random.Random(3).shuffle(shuffled)
    ResultsStore(tmp_path / "a", MODEL, "multidoc_qa").append(rows)
    ResultsStore(tmp_path / "b", MODEL, "multidoc_qa").append(shuffled)
    reader = Reader(MODEL)
    a, eligible = floor_sample(tmp_path / "a", reader, ["multidoc_qa"], n=20)
    b, _ = floor_sample(tmp_path / "b", reader, ["multidoc_qa"], n=20)
    assert eligible == 54 and [r["key"] for r in a] == [r["key"] for r in b]
    assert len(a) == 20 and all(r["prompt_tokens"] <= 4096 for r in a)
    with pytest.raises(DataFileError, match="no stored answers"):
        floor_sample(tmp_path / "a", reader, ["multidoc_qa"], max_prompt_tokens=50)


class Flipper:
    """Answers 'Paris' except to the prompts it is told to answer otherwise."""

    backend = "hf"

    def __init__(self, other):
        self.other = other

    def generate(self, call):
        from longctx.requests import Generation

        return [
            Generation(self.other.get(p, "Paris"), "raw", 10, 2, True, 0.5, 1) for p in call.prompts
        ]

    def run_params(self):
        return {"backend": "hf", "batch_size": 3}


def test_the_report_counts_answers_and_scores_that_changed_and_the_table_reads_it(tmp_path):
    rows = [_row(i) for i in range(10)]
    # one answer reworded (same score), one flipped to a wrong answer
    lm = Flipper({"prompt 3": "Paris, France", "prompt 7": "Lyon"})
    report = floor_report(replay(rows, lm, progress=False), folder=MODEL, eligible=40, batch_size=3)
    assert floor_summary(report) == {
        "n": 10,
        "answers_changed": 2,
        "scored": 10,
        "scores_changed": 1,
    }
    assert report["stored_batch_sizes"] == [8] and report["batch_size"] == 3
    (tmp_path / "data" / "bench").mkdir(parents=True)
    path = tmp_path / "data" / "bench" / f"floor-{MODEL}.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    table = floor_table(tmp_path).iloc[0]
    assert table["reader"] == MODEL and table["answers re-asked"] == "10 of 40"
    assert table["answers changed (%, 95% CI)"].startswith("20.0 [")
    assert table["scores changed (%, 95% CI)"].startswith("10.0 [")
    assert table["batch stored → here"] == "8 → 3"
    assert table["stored reusing a prefix"] == "none"  # no rows stored under tmp_path
    # a stored answer made reusing the previous prompt's prefix is counted from the rows
    store = ResultsStore(tmp_path / "data" / "results", MODEL, "qa")
    store.append([{**rows[3], "engine": {"prefix_reused": True}}])
    assert floor_table(tmp_path).iloc[0]["stored reusing a prefix"] == "1 of 10"


def test_each_hf_row_is_asked_again_in_the_dtype_it_was_made_in():
    rows = [{**_row(i), "params": {**_row(i)["params"], "dtype": d}} for i, d in
            enumerate(["bfloat16", "float32", "bfloat16"])]  # fmt: skip
    groups = floor_dtype_groups(rows, "hf")
    assert {d: [r["key"] for r in g] for d, g in groups.items()} == {
        "bfloat16": ["k000", "k002"],
        "float32": ["k001"],
    }
    assert list(floor_dtype_groups(rows, "hf", "float32")) == ["float32"]
    assert list(floor_dtype_groups(rows, "llamacpp")) == ["auto"]
