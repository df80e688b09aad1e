import gzip
import json
from pathlib import Path

import pytest

from longctx.errors import DataFileError, ParameterError
from longctx.reader import Reader
from longctx.tasks import get_task
from longctx.tasks import kv_retrieval as kv


def test_synthetic_examples_are_deterministic_and_unique():
    a = kv.synthetic_examples(3, 12, seed=7)
    assert a == kv.synthetic_examples(3, 12, seed=7)
    assert a != kv.synthetic_examples(3, 12, seed=8)
    for ex in a:
        ids = [x for pair in ex.pairs for x in pair]
        assert len(ids) == len(set(ids)) == 24
        assert all(len(x) == 36 and x[14] == "4" for x in ids)  # version-4 UUID strings


def test_with_gold_at_moves_only_the_gold_pair():
    ex = kv.synthetic_examples(1, 6, seed=1)[0]
    others = [p for p in ex.pairs if p[0] != ex.key]
    for idx in range(6):
        moved = ex.with_gold_at(idx)
        assert moved.gold_index == idx
        assert [p for p in moved.pairs if p[0] != ex.key] == others
    with pytest.raises(ParameterError):
        ex.with_gold_at(6)


def test_prompt_matches_paper_template_exactly():
    ex = kv.KVExample(
        "t",
        (("test key1", "test value1"), ("test key2", "test value2"), ("test key3", "test value3")),
        "test key2",
        "test value2",
    )
    records = (
        '{"test key1": "test value1",\n "test key2": "test value2",\n "test key3": "test value3"}'
    )
    head = "Extract the value corresponding to the specified key in the JSON object below.\n\n"
    tail = 'Key: "test key2"\nCorresponding value:'
    assert kv.build_prompt(ex) == head + "JSON data:\n" + records + "\n\n" + tail
    assert (
        kv.build_prompt(ex, query_aware=True)
        == head + tail.split("\n")[0] + "\n\nJSON data:\n" + records + "\n\n" + tail
    )


def test_position_indices():
    # Round(4.5) = 4 (banker's rounding)
    assert kv.position_indices(10, [0.0, 0.5, 1.0]) == [0, 4, 9]
    assert kv.position_indices(30, [1, 15, 30]) == [0, 14, 29]
    assert kv.position_indices(5, [0.0, 1, 0.0]) == [0]
    with pytest.raises(ParameterError):
        kv.position_indices(5, [6])
    with pytest.raises(ParameterError):
        kv.position_indices(5, [1.5])


def test_make_requests_conditions_and_stop_rule():
    exs = kv.synthetic_examples(2, 5, seed=0)
    reqs = kv.make_requests(exs, [0.0, 1.0], query_aware=True)
    assert len(reqs) == 4
    assert {r.condition["gold_index"] for r in reqs} == {0, 4}
    assert all(r.condition["query_aware"] and r.condition["num_pairs"] == 5 for r in reqs)
    r = reqs[0]
    assert r.prompt.count(exs[0].key) == 3  # before the data, in the data, after the data
    echo = f'The value of "{exs[0].key}" is "{exs[0].value}".\nMore text'
    assert r.stop.cut(echo)[0] == f'The value of "{exs[0].key}" is "{exs[0].value}'
    # lines before the value never end the answer (SmolLM2 writes a lead-in and a code fence)
    fenced = f'The value is:\n\n```json\n"{exs[0].value}"\n```'
    assert r.stop.cut(fenced) == (f'The value is:\n\n```json\n"{exs[0].value}', True)
    assert r.stop.cut("I cannot find it.\nThe key") == ("I cannot find it.\nThe key", False)
    assert get_task("kv_retrieval") is kv


def _write_release(path: Path, n: int = 3, k: int = 8) -> list[kv.KVExample]:
    exs = kv.synthetic_examples(n, k, seed=42)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for ex in exs:
            f.write(
                json.dumps(
                    {
                        "ordered_kv_records": [list(p) for p in ex.pairs],
                        "key": ex.key,
                        "value": ex.value,
                    }
                )
                + "\n"
            )
    return exs


def test_release_reader_on_project_fixture(tmp_path):
    path = tmp_path / "kv-retrieval-8_keys.jsonl.gz"
    exs = _write_release(path)
    read = kv.read_release_file(path)
    assert [e.pairs for e in read] == [e.pairs for e in exs]
    assert [e.example_id for e in read] == [
        "kv-retrieval-8_keys-0",
        "kv-retrieval-8_keys-1",
        "kv-retrieval-8_keys-2",
    ]
    trimmed = read[0].trimmed(3)
    assert trimmed.num_pairs == 3 and (read[0].key, read[0].value) in trimmed.pairs
    assert len(kv.read_release_file(path, limit=2)) == 2


def test_release_reader_rejects_corrupt_file(tmp_path):
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"not gzip at all")
    with pytest.raises(DataFileError, match="not a valid key-value release file"):
        kv.read_release_file(bad)


def test_release_examples_from_mirror(public_data):
    exs = kv.release_examples(75, limit=4, num_pairs=20)
    assert len(exs) == 4 and all(e.num_pairs == 20 for e in exs)
    full = kv.release_examples(75, limit=1)
    assert full[0].num_pairs == 75


def test_returned_offset_finds_the_neighbouring_pair():
    ex = kv.synthetic_examples(1, 6, seed=2)[0].with_gold_at(3)
    prompt = kv.build_prompt(ex)
    row = {
        "prompt": prompt,
        "gold": [ex.value],
        "output": f'The value of "{ex.key}" is "{ex.pairs[2][1]}"',
    }
    assert kv.returned_offset(row) == -1
    assert kv.returned_index(row) == 2
    row["output"] = f'"{ex.key}": "{ex.value.upper()}"'
    assert kv.returned_offset(row) == 0
    row["output"] = "I cannot find it"
    assert kv.returned_offset(row) is None
    assert kv.returned_index(row) is None
    # The first pair's value: what query-aware prompts tempt models into
    row["output"] = f'"{ex.pairs[0][1]}"'
    assert kv.returned_index(row) == 0 and kv.returned_offset(row) == -3


def test_classify_error_names_where_a_wrong_value_came_from():
    ex = kv.synthetic_examples(1, 10, seed=4)[0].with_gold_at(5)
    row = {"prompt": kv.build_prompt(ex), "gold": [ex.value]}
    cases = {
        ex.pairs[0][1]: "first pair's value",
        ex.pairs[4][1]: "a pair within 3 of the gold pair",
        ex.pairs[9][1]: "another pair's value",
        "00000000-0000-4000-8000-000000000000": "no value from the context",
    }
    for value, kind in cases.items():
        assert kv.classify_error({**row, "output": f'The value is "{value}"'}) == kind


def test_the_paper_grid_reads_the_gpu_rows_and_names_the_same_numbers_without_them():
    """The key-value chapter's paper-scale grid: the committed GPU rows fill every cell with
    100 records and the chapter's words hold on them; a reader without such rows gets the
    same glue keys, marked n/a, so its page still builds."""
    from longctx.chapters import scale
    from longctx.chapters.kv_retrieval import numbers
    from longctx.paths import resolve

    params = scale("kv_retrieval", "paper")
    view = numbers.paper_grid(params, Reader(), resolve("data/results"))
    assert view.available and view.n_rows == view.expected == 2000
    assert set(view.summary["n"]) == {100} and all(view.said.values())
    # Hand-read from the rows: 94 of 100 first, 45 of 100 in the middle (75 pairs, query at end)
    cells = view.summary.set_index(["num_pairs", "query", "depth"])["accuracy"]
    assert cells[75, "query at end", 0.0] == 0.94 and cells[75, "query at end", 0.5] == 0.45
    assert "cuda, bfloat16" in view.note
    empty = numbers.paper_grid(params, Reader("smollm2-135m-instruct"), resolve("data/results"))
    assert not empty.available and set(empty.quoted) == set(view.quoted)
