"""Replaying stored rows on this machine: the seeded sample, the settings each row is
answered again with, the comparison, and the command."""

import json
from pathlib import Path

import pytest

from longctx.cli import main
from longctx.errors import DataFileError, ParameterError
from longctx.reader import Reader
from longctx.replay import replay, sample_rows
from longctx.requests import Generation, Request, StopRule
from longctx.runner import generate_missing, stop_rule
from longctx.store import ResultsStore

ROOT = Path(__file__).resolve().parents[1]


def _row(i, *, output="Paris", budget=16, model="m", backend="llamacpp", stop=None):
    return {
        "key": f"k{i}",
        "model": model,
        "model_fingerprint": "fp",
        "backend": backend,
        "task": "multidoc_qa",
        "condition": {"gold_index": i},
        "example_id": f"q{i}",
        "gold": ["Paris"],
        "prompt": f"prompt {i}",
        "output": output,
        "params": {
            "max_new_tokens": budget,
            "stop": stop or {"newline": True, "answer_pattern": None, "echoes": []},
        },
    }


class EchoReader:
    """Answers 'Paris' except to the prompts it is told to get wrong; records every call."""

    backend = "llamacpp"

    def __init__(self, wrong=()):
        self.wrong, self.calls = set(wrong), []

    def generate(self, call):
        self.calls.append((list(call.prompts), call.max_new_tokens, list(call.stop_rules)))
        return [
            Generation("Lyon" if p in self.wrong else "Paris", "raw", 10, 2, True, 0.5, 1)
            for p in call.prompts
        ]

    def run_params(self):
        return {"backend": "llamacpp", "threads": 2}


def test_sample_is_seeded_in_stored_order_and_capped():
    rows = [_row(i) for i in range(50)]
    first, again = sample_rows(rows, 8, seed=3), sample_rows(rows, 8, seed=3)
    assert first == again and len(first) == 8
    assert [r["key"] for r in first] == sorted((r["key"] for r in first), key=lambda k: int(k[1:]))
    assert sample_rows(rows, 8, seed=4) != first
    assert len(sample_rows(rows[:5], 8)) == 5
    with pytest.raises(ParameterError):
        sample_rows(rows, 0)
    with pytest.raises(DataFileError):
        sample_rows([], 3)


def test_stop_rule_is_rebuilt_from_the_row():
    rule = stop_rule(
        _row(0, stop={"newline": False, "answer_pattern": "[0-9a-f-]{36}", "echoes": ["abc"]})
    )
    assert rule == StopRule(newline=False, answer_pattern="[0-9a-f-]{36}", echoes=("abc",))


def test_replay_answers_each_prompt_with_its_own_budget_and_reports_changes():
    rows = [_row(0), _row(1, budget=32), _row(2), _row(3, output="Lyon")]
    reader = EchoReader(wrong={"prompt 2"})
    result = replay(rows, reader)
    # one call per token budget, each with the rows' own prompts and stop rules
    assert sorted((c[1], c[0]) for c in reader.calls) == [
        (16, ["prompt 0", "prompt 2", "prompt 3"]),
        (32, ["prompt 1"]),
    ]
    assert all(isinstance(r, StopRule) for c in reader.calls for r in c[2])
    assert [r["output"] for r in result.replayed] == ["Paris", "Paris", "Lyon", "Paris"]
    assert [(a["key"], b["output"]) for a, b in result.changed()] == [
        ("k2", "Lyon"),
        ("k3", "Paris"),
    ]
    summary = result.summary(lambda r: float(r["output"] == "Paris"))
    assert summary["n"] == 4 and summary["identical"] == 0.5
    assert summary["accuracy_stored"] == 0.75 and summary["accuracy_replayed"] == 0.75
    assert result.run_params == {"backend": "llamacpp", "threads": 2}
    assert result.summary(None) == {"n": 4, "identical": 0.5}
    report = result.report(None, seed=3)
    assert report["seed"] == 3 and report["model"] == "m" and report["backend"] == "llamacpp"
    assert [r["identical"] for r in report["rows"]] == [True, True, False, False]


def test_row_scorer_is_the_tasks_own_or_none():
    from longctx.replay import row_scorer
    from longctx.tasks import multidoc_qa

    assert row_scorer([_row(0)]) is multidoc_qa.score
    competition = {**_row(0), "task": "semantic_competition", "gold": ["Paris"]}
    assert row_scorer([competition]) is None  # EM, F1 and inclusion at once
    code = {
        **_row(0),
        "task": "length_alone",
        "condition": {"subtask": "humaneval", "mode": "solve"},
    }
    assert row_scorer([code]) is None  # HumanEval needs the problem's tests


class StoredAnswers:
    """A backend that gives back each stored answer (the rows' own machine, in effect)."""

    def __init__(self, rows, backend):
        self.by_prompt, self.backend = {r["prompt"]: r for r in rows}, backend

    def generate(self, call):
        return [
            Generation(
                self.by_prompt[p]["output"], self.by_prompt[p]["raw_output"], 1, 1, True, 0.1, 1
            )
            for p in call.prompts
        ]

    def run_params(self):
        return {"backend": self.backend}


COMMITTED = ROOT / "data" / "results"


@pytest.mark.parametrize(
    "store", ResultsStore.all_under(COMMITTED), ids=lambda s: f"{s.dir.parent.name}/{s.dir.name}"
)
def test_replay_works_on_the_rows_of_every_committed_experiment(store):
    """Every committed results file is either replayed (its task found, every row's budget and
    stop rule rebuilt, its task's scorer where one number scores the rows) or, for attention
    measurements, refused in one line before any model loads."""
    from longctx.replay import check_replayable, row_scorer

    sample = sample_rows(store.rows(), 6, seed=0)
    if "abs" in sample[0]:  # final-token attention rows (cnorm's, the mitigations' arms)
        with pytest.raises(DataFileError, match="attention measurements, not generations"):
            check_replayable(sample, str(store.dir))
        return
    check_replayable(sample, str(store.dir))
    result = replay(sample, StoredAnswers(sample, sample[0].get("backend", "hf")), progress=False)
    summary = result.report(row_scorer(sample), results=str(store.dir))["summary"]
    assert summary["n"] == len(sample) and summary["identical"] == 1.0
    if "accuracy_stored" in summary:
        assert summary["accuracy_stored"] == summary["accuracy_replayed"]


def test_rows_of_two_readers_are_refused():
    with pytest.raises(DataFileError, match="2 readers"):
        replay([_row(0), _row(1, model="other")], EchoReader())


def test_missing_results_file_is_a_one_line_error(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "generations.jsonl")]) == 2
    assert "is not a results file" in capsys.readouterr().err


@pytest.mark.model
def test_replay_on_the_machine_that_made_the_rows_finds_every_answer_again(tmp_path):
    """hf on CPU in float32 is deterministic, so rows made here come back byte for byte."""
    model = "smollm2-135m-instruct"
    store = ResultsStore(tmp_path, model, "toy")
    requests = [
        Request(
            "multidoc_qa",
            f"q{i}",
            f"What is the capital of {c}? Answer in one word.",
            (a,),
            condition={"i": i},
            max_new_tokens=8,
        )
        for i, (c, a) in enumerate([("France", "Paris"), ("Italy", "Rome"), ("Spain", "Madrid")])
    ]
    generate_missing(requests, store, Reader(model, device="cpu", dtype="float32"), progress=False)
    report = tmp_path / "replay.json"
    assert (
        main(["replay", str(store.path), "--n", "2", "--json", str(report), "--device", "cpu"]) == 0
    )
    data = json.loads(report.read_text())
    assert (
        data["rows_stored"] == 3
        and data["summary"]["n"] == 2
        and data["summary"]["identical"] == 1.0
    )
    assert all(r["identical"] for r in data["rows"]) and data["run_params"]["dtype"] == "float32"
    assert data["stored_dtype"] == "float32"
    # rows made before a date only: none here, which is a one-line error
    assert main(["replay", str(store.path), "--created-before", "2000-01-01"]) == 2


def test_report_text_counts_identical_answers_and_names_the_changed_ones(tmp_path):
    from longctx.replay import describe_report, replay_summary

    report = {
        "rows_stored": 648,
        "created_before": "2026-11-25",
        "model": "m",
        "backend": "llamacpp",
        "machine": {"cpu": "Some CPU"},
        "summary": {"accuracy_stored": 0.75, "accuracy_replayed": 0.5},
        "rows": [
            {"example_id": "q1", "identical": True, "stored": "Paris", "replayed": "Paris"},
            {"example_id": "q2", "identical": False, "stored": "Paris", "replayed": "Lyon"},
        ],
    }
    text = describe_report(report)
    assert text.startswith("1 of 2 replayed answers came back byte for byte on Some CPU")
    assert "648 rows made before 2026-11-25" in text and "75.0% as stored, 50.0% replayed" in text
    assert 'q2: "Paris" became "Lyon"' in text and "q1" not in text
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    assert replay_summary(path) == text
    with pytest.raises(DataFileError, match="longctx replay"):
        replay_summary(tmp_path / "none.json")
    # replayed in another dtype than the rows were made in: the text says so
    other = {**report, "stored_dtype": "bfloat16", "run_params": {"dtype": "float32"}}
    assert describe_report(other).startswith(
        "1 of 2 replayed answers came back byte for byte on Some CPU, in float32 where the rows "
        "were made in bfloat16 (`llamacpp`"
    )
    long = {**report, "rows": [{**report["rows"][1], "replayed": "Lyon " + "x" * 80}]}
    assert f'became "Lyon {"x" * 55}…"' in describe_report(long)  # cut answers say so
    same = {**report, "stored_dtype": "bfloat16", "run_params": {"dtype": "bfloat16"}}
    assert describe_report(same) == text


def test_committed_reports_are_listed_each_with_its_file(tmp_path):
    from longctx.replay import describe_report, reports_markdown

    assert reports_markdown(tmp_path) == ""
    bench = tmp_path / "data" / "bench"
    bench.mkdir(parents=True)
    report = {
        "rows_stored": 3,
        "model": "m",
        "backend": "hf",
        "machine": {"cpu": "Some CPU"},
        "summary": {},
        "rows": [{"example_id": "q1", "identical": True, "stored": "a", "replayed": "a"}],
    }
    (bench / "replay-b.json").write_text(json.dumps(report))
    (bench / "replay-a.json").write_text(json.dumps({**report, "model": "n"}))
    (bench / "readers-cpu.json").write_text("{}")  # a benchmark, not a replay report
    lines = reports_markdown(tmp_path).splitlines()
    assert [line.split("`")[1] for line in lines] == [
        "data/bench/replay-a.json",
        "data/bench/replay-b.json",
    ]
    assert lines[1] == f"* `data/bench/replay-b.json`: {describe_report(report)}"
