"""The Every Eval Ever export: every committed reader's records validate against the vendored
0.3.0 schemas, carry the matrix's numbers, and a record that drifts fails in one line."""

import json
import lzma
from pathlib import Path

import pytest

from longctx import export
from longctx.cli import main
from longctx.errors import DataFileError
from longctx.matrix import build

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """The matrix of the committed rows and its export, written once."""
    out = tmp_path_factory.mktemp("eee")
    matrix = build(ROOT / "data" / "results")
    return matrix, out, export.write_every_eval_ever(matrix, ROOT / "data" / "results", out)


def test_every_committed_reader_exports_valid_records_with_the_matrix_numbers(committed):
    matrix, out, written = committed
    assert len(matrix.columns) >= 3 and len(written) == 2 * len(matrix.columns)
    for col in matrix.columns:
        aggregate_name, instances_name = export.file_names(col)
        aggregate = json.loads((out / aggregate_name).read_text())
        export.validate(aggregate, "aggregate", aggregate_name)  # as read back
        judged = {
            c.id: matrix.cell(c.id, col.folder)
            for c in matrix.claims
            if matrix.cell(c.id, col.folder).status == "judged"
            and matrix.cell(c.id, col.folder).estimate.difference
            == matrix.cell(c.id, col.folder).estimate.difference
        }
        results = {r["evaluation_result_id"]: r for r in aggregate["evaluation_results"]}
        assert set(results) == set(judged) and results
        for claim_id, cell in judged.items():
            score = results[claim_id]["score_details"]
            assert score["score"] == cell.estimate.difference
            assert score["uncertainty"]["num_samples"] == cell.estimate.n
            interval = score["uncertainty"]["confidence_interval"]
            assert (interval["lower"], interval["upper"]) == (
                cell.estimate.ci_low,
                cell.estimate.ci_high,
            )
            assert score["details"]["verdict"] == cell.judgement.verdict
        with lzma.open(out / instances_name, "rt", encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
        assert records, col.folder
        for record in records:
            export.validate(record, "instance", instances_name)
            assert record["evaluation_id"] == aggregate["evaluation_id"]
            assert record["model_id"] == aggregate["model_info"]["id"]


def test_the_shipped_readers_are_named_by_their_upstream_weights(committed):
    matrix, _, _ = committed
    ids = {export.model_id(c.model) for c in matrix.columns}
    assert "Qwen/Qwen2.5-Coder-0.5B-Instruct" in ids
    assert export.model_id("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"


def test_a_record_the_schema_refuses_fails_in_one_line_naming_the_field():
    record = {
        "schema_version": export.SCHEMA_VERSION,
        "evaluation_id": "x",
        "model_id": "m",
        "evaluation_name": "e",
        "sample_id": "1",
        "interaction_type": "single_turn",
        "input": {"raw": "p", "reference": ["a"]},
        "output": {"raw": ["a"]},
        "answer_attribution": [],
        "evaluation": {"score": "high", "is_correct": True},
    }
    with pytest.raises(DataFileError, match=r"^row 7: .*instance record at evaluation/score: "):
        export.validate(record, "instance", "row 7")
    record["evaluation"]["score"] = 1.0
    assert export.validate(record, "instance", "row 7") is record


def test_longctx_export_writes_the_records(tmp_path, capsys):
    results = tmp_path / "results"
    folder = results / "smollm2-135m-instruct" / "kv_retrieval"
    folder.mkdir(parents=True)
    source = ROOT / "data" / "results" / "smollm2-135m-instruct" / "kv_retrieval"
    for f in source.glob("generations.jsonl.xz"):
        (folder / f.name).write_bytes(f.read_bytes())
    assert main(["export", "--results-dir", str(results), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "smollm2-135m-instruct.eee.json" in printed
    assert (tmp_path / "out" / "smollm2-135m-instruct.eee-instances.jsonl.xz").exists()
    empty = ["export", "--results-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]
    assert main(empty) == 2
    assert capsys.readouterr().err.strip().endswith("nothing to export")
