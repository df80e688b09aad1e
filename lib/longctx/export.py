"""Rows and findings in a shared schema: Every Eval Ever (EvalEval, version 0.3.0).

Per reader (a model and backend with committed rows), :func:`write_every_eval_ever` writes

* ``<reader>.eee.json``: one **aggregate** record whose ``evaluation_results`` are that
  reader's judged claims: the paired difference (points, or r), its 95% interval and n (the
  claim's independent unit), the exact p, the verdict and its premise, and where the paper
  stands; a claim the reader has no complete rows for is left out (the findings page says
  what to run);
* ``<reader>.eee-instances.jsonl.xz``: one **instance** record per stored generation with a
  task score: the rendered prompt, the gold answers, the raw output, the score, the tokens
  and the time, and the row's condition and provenance as metadata (xz-compressed: the
  prompts run to tens of megabytes).

Every record is validated against the schema files vendored in ``longctx/schemas``
(:func:`validate`) before it is written, so an export that drifts from the schema fails
where it is made, in one line naming the record and the field.
"""

from __future__ import annotations

import json
import lzma
import time
from collections.abc import Iterable, Iterator
from functools import cache
from importlib.resources import files
from pathlib import Path

from jsonschema import Draft7Validator

from . import __version__
from .claims import Claim, Estimate, Judgement
from .errors import DataFileError
from .matrix import Column, Matrix
from .models import ALIASES
from .reader import row_backend
from .store import ResultsStore
from .tasks import row_score

SCHEMA = "every-eval-ever"
SCHEMA_VERSION = "0.3.0"
SCHEMA_FILES = {"aggregate": "eval.schema.json", "instance": "instance_level_eval.schema.json"}


@cache
def validator(kind: str) -> Draft7Validator:
    """The vendored schema of ``kind`` (``aggregate`` or ``instance``), ready to validate."""
    text = files("longctx").joinpath("schemas", "every_eval_ever", SCHEMA_FILES[kind]).read_text()
    return Draft7Validator(json.loads(text))


def validate(record: dict, kind: str, where: str) -> dict:
    """``record`` unchanged, or a one-line :class:`DataFileError` naming its first error."""
    error = next(iter(validator(kind).iter_errors(record)), None)
    if error is not None:
        path = "/".join(str(p) for p in error.absolute_path) or "(top)"
        raise DataFileError(
            f"{where}: not an Every Eval Ever {SCHEMA_VERSION} {kind} record at {path}: "
            f"{error.message}"
        )
    return record


def model_id(model: str) -> str:
    """The Hugging Face id of the weights a reader names: a shipped alias's upstream model,
    otherwise the name itself (a hub id, or a local file's name)."""
    spec = ALIASES.get(model)
    return spec.upstream if spec and spec.upstream else model


def _strings(values: dict) -> dict[str, str]:
    """The schema's ``additional_details``: every value a string (JSON for non-strings)."""
    return {
        k: v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False)
        for k, v in values.items()
        if v is not None
    }


def model_info(col: Column) -> dict:
    spec = ALIASES.get(col.model)
    return {
        "name": col.label,
        "id": model_id(col.model),
        "developer": model_id(col.model).split("/")[0] if "/" in model_id(col.model) else "",
        "inference_platform": "local" if not col.backend.startswith("openai") else "server",
        "inference_engine": {"name": col.backend},
        "additional_details": _strings(
            {
                "deployment_type": "self_deployed",
                "model_availability": "open_weights",
                "longctx_model": col.model,
                "weights": spec.description if spec else col.model,
                "fingerprint": col.reader.ref.fingerprint,
            }
        ),
    }


def evaluation_id(col: Column) -> str:
    return f"longctx-claims/{col.folder}"


def claim_result(claim: Claim, est: Estimate, judgement: Judgement) -> dict:
    """One claim on one reader as an ``evaluation_results`` entry."""
    correlation = claim.scale == "r"
    return {
        "evaluation_result_id": claim.id,
        "evaluation_name": claim.id,
        "source_data": {
            "dataset_name": claim.setting,
            "source_type": "other",
            "additional_details": _strings({"paper": claim.paper, "experiment": claim.experiment}),
        },
        "metric_config": {
            "evaluation_description": f"{claim.claim} Ours: {claim.comparison}.",
            "metric_id": f"longctx.{claim.id}",
            "metric_name": claim.comparison,
            "metric_kind": "correlation" if correlation else "paired_difference",
            "metric_unit": "r" if correlation else "points",
            "lower_is_better": claim.direction < 0,
            "score_type": "continuous",
            "min_score": -1 if correlation else -100,
            "max_score": 1 if correlation else 100,
            "additional_details": _strings(
                {
                    "kind": claim.kind,
                    "paper_value": claim.paper_value,
                    "paper_effect": claim.paper_effect,
                    "margin": claim.margin,
                }
            ),
        },
        "score_details": {
            "score": est.difference,
            "details": _strings(
                {
                    "p": est.p,
                    "detail": est.detail,
                    "verdict": judgement.verdict,
                    "direction": judgement.direction,
                    "magnitude": judgement.magnitude,
                    "premise": judgement.premise,
                    "premise_met": judgement.premise_met,
                    "control": est.control,
                    "treatment": est.treatment,
                }
            ),
            "uncertainty": {
                "confidence_interval": {
                    "lower": est.ci_low,
                    "upper": est.ci_high,
                    "confidence_level": 0.95,
                    "method": "percentile bootstrap over the claim's independent units",
                },
                "num_samples": est.n,
            },
        },
    }


def aggregate_record(matrix: Matrix, col: Column, now: float | None = None) -> dict:
    """The reader's judged claims as one aggregate record: a claim whose rows are still
    being written (fewer units than the claim's n) gives no number, as on the findings page,
    and neither does an undefined statistic (JSON has no NaN)."""
    now = time.time() if now is None else now
    results = [
        claim_result(claim, cell.estimate, cell.judgement)
        for claim in matrix.claims
        if (cell := matrix.cell(claim.id, col.folder)).status == "judged"
        and cell.estimate.difference == cell.estimate.difference
    ]
    return validate(
        {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": evaluation_id(col),
            "retrieved_timestamp": str(int(now)),
            "source_metadata": {
                "source_name": "longctx: paper claims on long and retrieved contexts",
                "source_type": "evaluation_run",
                "source_organization_name": "longctx",
                "evaluator_relationship": "third_party",
            },
            "eval_library": {"name": "longctx", "version": __version__},
            "model_info": model_info(col),
            "evaluation_results": results,
        },
        "aggregate",
        evaluation_id(col),
    )


def instance_record(row: dict, col: Column, experiment: str, score: float) -> dict:
    """One stored generation as an instance record."""
    seconds = row.get("seconds_per_prompt")
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id(col),
        "model_id": model_id(col.model),
        "evaluation_name": f"{experiment}/{row['task']}",
        "sample_id": str(row["example_id"]),
        "sample_hash": row["key"],
        "interaction_type": "single_turn",
        "input": {
            "raw": row.get("prompt") or "",
            "formatted": None,  # the prompt is stored rendered: raw holds it, chat template and all
            "reference": [str(g) for g in row.get("gold") or []],
        },
        "output": {"raw": [row.get("raw_output") or row.get("output") or ""]},
        "answer_attribution": [
            {
                "turn_idx": 0,
                "source": "output.raw",
                "extracted_value": row.get("output") or "",
                "extraction_method": "longctx stop rule, then the task's scorer",
                "is_terminal": True,
            }
        ],
        "evaluation": {"score": float(score), "is_correct": bool(score >= 1)},
        "token_usage": {
            "input_tokens": int(row.get("prompt_tokens") or 0),
            "output_tokens": int(row.get("new_tokens") or 0),
            "total_tokens": int(row.get("prompt_tokens") or 0) + int(row.get("new_tokens") or 0),
        },
        "performance": {"latency_ms": 1000 * seconds if seconds is not None else None},
        "metadata": _strings(
            {
                "condition": row.get("condition"),
                "backend": row.get("backend", "hf"),
                "stop_reason": row.get("stop_reason"),
                "longctx_version": row.get("longctx_version"),
                "created": row.get("created"),
            }
        ),
    }


def instance_records(col: Column, results_dir: str | Path) -> Iterator[dict]:
    """Every generation of the reader's stores that its task scores, validated."""
    for store in ResultsStore.all_under(results_dir):
        if store.dir.parent.name != col.folder:
            continue
        for row in store.rows():
            if "task" not in row or row_backend(row) != col.backend:
                continue
            score = row_score(row)
            if score is None:
                continue
            where = f"{col.folder}/{store.dir.name} row {row['key'][:12]}"
            yield validate(instance_record(row, col, store.dir.name, score), "instance", where)


def write_every_eval_ever(
    matrix: Matrix, results_dir: str | Path, out: str | Path, now: float | None = None
) -> list[Path]:
    """Each reader's aggregate and instance records under ``out``; the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for col in matrix.columns:
        aggregate, instances = (out / name for name in file_names(col))
        aggregate.write_text(
            json.dumps(
                aggregate_record(matrix, col, now), indent=1, ensure_ascii=False, allow_nan=False
            )
            + "\n",
            encoding="utf-8",
        )
        _write_lines(instances, instance_records(col, results_dir))
        written += [aggregate, instances]
    return written


def _write_lines(path: Path, records: Iterable[dict]) -> None:
    with lzma.open(path, "wt", encoding="utf-8", preset=1) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def file_names(col: Column) -> tuple[str, str]:
    """The aggregate and the instance file of a reader, as :func:`write_every_eval_ever` names them."""
    return f"{col.folder}.eee.json", f"{col.folder}.eee-instances.jsonl.xz"


def download_line(matrix: Matrix, prefix: str = "../", folder: str = "downloads") -> str:
    """Links to each reader's records in the built site (``longctx.downloads`` writes them)."""
    links = "; ".join(
        f'{col.label}: <a href="{prefix}{folder}/{aggregate}">claims</a> · '
        f'<a href="{prefix}{folder}/{instances}">rows</a>'
        for col in matrix.columns
        for aggregate, instances in [file_names(col)]
    )
    return (
        f"**The same results in a shared schema** ([Every Eval Ever]"
        f"(https://pypi.org/project/every-eval-ever/) {SCHEMA_VERSION}, validated against its "
        f"schema files): per reader, its judged claims as one aggregate record (difference, "
        f"95% interval, n, p, verdict) and every scored row as an instance record "
        f"(xz-compressed JSON Lines). {links}."
    )
