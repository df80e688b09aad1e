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


class Interrupted(Exception):
    pass


class CountingFlipper(Flipper):
    """A :class:`Flipper` that records the prompts of each call and stops, as a killed run
    does, on call number ``stop_at``."""

    def __init__(self, other, stop_at=None):
        super().__init__(other)
        self.calls, self.stop_at = [], stop_at

    def generate(self, call):
        if self.stop_at is not None and len(self.calls) + 1 == self.stop_at:
            raise Interrupted
        self.calls.append(list(call.prompts))
        return super().generate(call)


def test_an_interrupted_floor_resumes_asking_only_what_is_left_in_the_same_batches(tmp_path):
    from longctx.floor import CHUNK_BATCHES, partial_path, replay_resumably

    rows = [_row(i) for i in range(20)]
    groups = {"bfloat16": rows[:14], "float32": rows[14:]}
    other = {"prompt 3": "Lyon", "prompt 16": "Paris, France"}
    whole = CountingFlipper(other)
    done = replay_resumably(
        groups, lambda dtype: whole, tmp_path / "whole.partial.jsonl", batch_size=2, progress=False
    )
    # chunks of CHUNK_BATCHES batches within each group: 8 + 6 and 6 prompts
    assert [len(c) for c in whole.calls] == [2 * CHUNK_BATCHES, 6, 6]

    partial = partial_path(tmp_path / "floor-x.json")
    assert partial.name == "floor-x.partial.jsonl"
    killed = CountingFlipper(other, stop_at=2)
    with pytest.raises(Interrupted):
        replay_resumably(groups, lambda dtype: killed, partial, batch_size=2, progress=False)
    assert len(partial.read_text().splitlines()) == 2 * CHUNK_BATCHES  # the first chunk kept
    again = CountingFlipper(other)
    resumed = replay_resumably(groups, lambda dtype: again, partial, batch_size=2, progress=False)
    assert again.calls == whole.calls[1:]  # the rest, in the same batches
    assert [r["output"] for r in resumed.replayed] == [r["output"] for r in done.replayed]
    assert resumed.stored == done.stored and resumed.run_params == done.run_params
    assert floor_summary(
        floor_report(resumed, folder=MODEL, eligible=20, batch_size=2)
    ) == floor_summary(floor_report(done, folder=MODEL, eligible=20, batch_size=2))
    # a saved answer outside the sample means another run made the file
    with pytest.raises(DataFileError, match="outside this sample"):
        replay_resumably(
            {"bfloat16": rows[:5]}, lambda dtype: again, partial, batch_size=2, progress=False
        )
