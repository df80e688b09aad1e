"""The downloads the book offers: a store's rows as CSV and the links each chapter shows."""

import json

import pandas as pd

from longctx import downloads
from longctx.store import ResultsStore


def _row(i, **over):
    row = {
        "key": f"k{i}",
        "task": "kv_retrieval",
        "example_id": f"e{i}",
        "condition": {"gold_index": i, "num_pairs": 10},
        "gold": ["v"],
        "output": "v" if i else "no",
        "prompt": "a long prompt",
        "prompt_tokens": 100,
        "new_tokens": 3,
        "model": "m",
        "params": {"device": "cpu", "dtype": "float32"},
        "longctx_version": "0.1.0",
    }
    return {**row, **over}


def test_rows_keep_condition_provenance_and_an_elided_prompt_for_the_browser(tmp_path):
    long = _row(0, prompt="a" * 5000 + "the question")
    frame = downloads.rows_frame([long, _row(1)])
    assert list(frame.columns) == [*downloads.COLUMNS, "prompt"]
    shown = frame.loc[0, "prompt"]
    assert shown.startswith("a" * 400) and shown.endswith("the question")
    assert "characters left out" in shown and len(shown) < 1000
    assert json.loads(frame.loc[1, "condition"]) == {"gold_index": 1, "num_pairs": 10}
    assert frame.loc[0, "dtype"] == "float32" and frame.loc[0, "backend"] == "hf"
    assert frame["score"].tolist() == [0.0, 1.0]  # the task's own metric
    path = tmp_path / "rows.csv"
    frame.to_csv(path, index=False)
    assert pd.read_csv(path)["output"].tolist() == ["no", "v"]


def test_each_chapter_links_its_own_stores(tmp_path):
    store = ResultsStore(tmp_path, "m", "kv_retrieval")
    store.dir.mkdir(parents=True)
    (store.dir / ResultsStore.FILENAME).write_text(json.dumps(_row(0)) + "\n")
    ResultsStore(tmp_path, "m", "crossing").dir.mkdir(parents=True)  # empty: no link
    text = downloads.chapter_links("kv_retrieval", tmp_path)
    assert '<a href="../downloads/m__kv_retrieval.csv">CSV</a>' in text
    assert '<a href="../downloads/m__kv_retrieval.jsonl">JSONL</a>' in text
    assert '<a href="../downloads/m__kv_retrieval.html">browse</a>' in text
    assert '<a href="../downloads/notebooks/kv_retrieval.ipynb">' in text
    assert downloads.chapter_links("crossing", tmp_path).startswith(
        "No rows of this chapter are stored yet. The executed notebook"
    )


def test_measurement_rows_keep_scalars_and_drop_vectors():
    rows = [{"key": "a", "abs": 0.8, "attention": [0.1] * 100, "prompt": "p", "tokens": 40}]
    frame = downloads.measurements_frame(rows)
    assert list(frame.columns) == ["key", "abs", "tokens"] and frame.loc[0, "abs"] == 0.8


def test_the_sample_browser_carries_its_rows_and_cannot_be_broken_by_an_answer():
    rows = [_row(0, output="</script><b>x</b>"), _row(1)]
    page = downloads.browser_page("m__kv_retrieval", downloads.rows_frame(rows))
    payload = page.split('<script id="rows" type="application/json">')[1].split("</script>")[0]
    data = json.loads(payload)
    assert data["columns"][:5] == ["condition", "example", "score", "gold", "answer"]
    assert "<p>In every row: num_pairs: 10.</p>" in page  # said once, not in every row
    assert data["rows"][0][:5] == [
        "gold_index: 0",
        "e0",
        0.0,
        "v",
        "</script><b>x</b>",
    ]
    assert '<script src="../_static/samples.js">' in page  # vendored: no CDN
    assert data["columns"][-1] == "prompt" and data["rows"][0][-1] == rows[0]["prompt"]


def test_executed_notebooks_are_copied_for_download(tmp_path):
    (tmp_path / "exec").mkdir()
    (tmp_path / "exec" / "kv_retrieval.ipynb").write_text("{}")
    (tmp_path / "exec" / "kv_retrieval.glue.json").write_text("{}")
    written = downloads.write_notebooks(tmp_path / "exec", tmp_path / "site")
    assert [p.relative_to(tmp_path / "site").as_posix() for p in written] == [
        "downloads/notebooks/kv_retrieval.ipynb"
    ]


def test_shared_fields_keep_what_every_condition_holds_at_one_value():
    from longctx.tables import shared_fields

    conditions = [
        {"task": "kv", "pairs": 75, "gold": 0, "fmt": {"sep": ":"}},
        {"task": "kv", "pairs": 75, "gold": 9, "fmt": {"sep": ":"}},
        {"task": "kv", "pairs": 75, "fmt": {"sep": ":"}},
    ]
    # "gold" differs and is missing from one; the nested field matches as JSON
    assert shared_fields(conditions) == {"task": "kv", "pairs": 75, "fmt": {"sep": ":"}}
    assert shared_fields([]) == {}
    frame = pd.Series([json.dumps(c) for c in conditions])
    assert downloads.fixed_fields(frame) == {"fmt": {"sep": ":"}, "pairs": 75}
