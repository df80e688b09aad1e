"""Rows are typed at the door: a store refuses a malformed row when it is written, naming the
row and the field, and writes nothing of that batch."""

from pathlib import Path

import pytest

from longctx.row_schema import row_fault
from longctx.store import MalformedRowError, ResultsStore
from rows import stored_row

ROOT = Path(__file__).resolve().parents[1]

ATTENTION_ROW = {
    "key": "a1",
    "model": "m",
    "model_fingerprint": "fp",
    "prompt_mode": "auto",
    "layer": -1,
    "prompt": "p",
    "format": "json",
    "tokens": 12,
    "abs": 0.25,
    "seconds": 0.1,
    "device": "cpu",
    "longctx_version": "0.1",
}


def test_what_the_runner_and_attention_store_passes():
    assert row_fault(stored_row("k1")) is None
    assert row_fault(ATTENTION_ROW) is None
    assert row_fault({**ATTENTION_ROW, "attention": [0.5, 0.5]}) is None
    # fields rows of earlier versions lack are optional; an integer is a number
    old = {k: v for k, v in stored_row("k1").items() if k not in ("backend", "request")}
    assert row_fault({**old, "batch_seconds": 1}) is None
    assert row_fault({**old, "stop_reason": None}) is None


@pytest.mark.parametrize(
    "row, fault",
    [
        ({k: v for k, v in stored_row("k1").items() if k != "prompt_tokens"},
         "row 'k1' (generation) lacks the field 'prompt_tokens'"),
        (stored_row("k1", prompt_tokens="12"),
         "row 'k1' (generation) has 'prompt_tokens' as a string, not an integer"),
        (stored_row("k1", stopped_by_rule=1),
         "row 'k1' (generation) has 'stopped_by_rule' as an integer, not true or false"),
        (stored_row("k1", new_tokens=True),
         "row 'k1' (generation) has 'new_tokens' as true or false, not an integer"),
        ({**stored_row("k1"), "condition": None},
         "row 'k1' (generation) has 'condition' as null, not an object"),
        (stored_row("k1", example_id=7),
         "row 'k1' (generation) has 'example_id' as an integer, not a string"),
        ({**ATTENTION_ROW, "abs": "0.3"},
         "row 'a1' (attention) has 'abs' as a string, not a number"),
        ({"key": "k9", "prompt": "p"},
         "row 'k9' has neither 'output' (generation) nor 'abs' (attention)"),
        ({"output": "x"}, "a row (generation) lacks the field 'key'"),
        (["not", "a", "row"], "a row is a JSON object, not a list"),
    ],
)  # fmt: skip
def test_a_fault_names_the_row_and_the_field(row, fault):
    assert row_fault(row) == fault


def test_a_store_refuses_a_malformed_row_and_writes_nothing_of_its_batch(tmp_path):
    store = ResultsStore(tmp_path, "m", "exp")
    store.append([stored_row("k1")])
    before = store.path.read_bytes()
    bad = stored_row("k3", prompt_tokens=None)
    with pytest.raises(MalformedRowError) as err:
        store.append([stored_row("k2"), bad])
    message = str(err.value)
    assert "\n" not in message and "'k3'" in message and "'prompt_tokens'" in message
    assert "make_row" in message  # what builds a row the store accepts
    assert store.path.read_bytes() == before
    assert store.keys() == {"k1"}


def test_every_committed_row_matches_its_schema():
    """The schema is the one the committed rows were written in, old rows included."""
    root = ROOT / "data" / "results"
    faults, n = [], 0
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        for experiment in sorted(p.name for p in folder.iterdir() if p.is_dir()):
            for row in ResultsStore(root, folder.name, experiment).rows():
                n += 1
                if fault := row_fault(row):
                    faults.append(f"{folder.name}/{experiment}: {fault}")
    assert n > 1000 and not faults, faults[:5]
