"""The numerics floor: how many answers change when nothing but the batch changes.

A greedy answer is a function of the prompt only in exact arithmetic. On a real backend the
prompts batched with it (their padding, the kernel's reduction order) and the machine can
flip a near-tie between two tokens, and a claim whose arms differ by fewer answers than that
measures the arithmetic, not the paper. Per reader (one model on one backend), a fixed
sample of its stored answers at the ``claims`` scale is answered again here with the same
prompts, budgets and stop rules in another batch composition (another batch size, so each
prompt shares its batch with other prompts) and in the dtype each row was made in, and the
report gives the share of answers and of scores that changed.

    longctx floor --model qwen2.5-coder-0.5b-instruct --n 100 --batch-size 3

The sample is drawn with a seed taken from the sorted keys of the reader's rows, so it is
the same sample on any machine; prompts longer than ``--max-prompt-tokens`` are left out so
that the floor is affordable on a CPU (the report says how many were eligible). The answers
are asked in fixed chunks of the sample, each saved as it ends beside the report
(``floor-<reader>.partial.jsonl``), so an interrupted run asks only what is left when it is
started again, and in the same batches.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

from .errors import DataFileError, ParameterError
from .metrics import content_seed, wilson_interval
from .reader import Reader, model_label, row_backend
from .replay import Replay, machine, replay
from .report import pct_ci
from .store import ResultsStore
from .tasks import get_task

FLOOR_PROMPTS = 100
FLOOR_MAX_PROMPT_TOKENS = 4096
CHUNK_BATCHES = 4  # batches asked between two saves of a floor run
REPORTS = "data/bench/floor-*.json"  # where `longctx floor` reports are committed


def report_path(folder: str) -> str:
    """Where the floor report of a reader's results folder is committed."""
    return f"data/bench/floor-{folder}.json"


def partial_path(report: str | Path) -> Path:
    """Where a floor run saves the answers it has asked so far: beside its ``report``."""
    report = Path(report)
    return report.with_name(report.name.removesuffix(".json") + ".partial.jsonl")


# What a saved answer keeps of its replayed row (the rest is the stored row's)
REPLAYED_FIELDS = (
    "output",
    "raw_output",
    "prompt_tokens",
    "new_tokens",
    "stop_reason",
    "seconds_per_prompt",
)


def replay_resumably(
    groups: dict[str, list[dict]],
    load: Callable[[str], object],
    partial: str | Path,
    *,
    batch_size: int,
    progress: bool = True,
) -> Replay:
    """Each dtype group of ``groups`` answered again by the backend ``load(dtype)`` gives,
    in chunks of ``CHUNK_BATCHES`` batches (so a resumed run asks the same batches as an
    uninterrupted one), each chunk's answers appended to ``partial`` as it ends; answers
    already there are not asked again (a backend is loaded only for a group with answers
    left). One :class:`Replay` in the groups' order, the backends' parameters as ``runs``."""
    partial = Path(partial)
    saved: dict[str, dict] = {}
    if partial.exists():
        for line in partial.read_text(encoding="utf-8").splitlines():
            if line.strip():
                entry = json.loads(line)
                saved[entry["key"]] = entry
    wanted = {r["key"] for rows in groups.values() for r in rows}
    if saved and (stray := sorted(set(saved) - wanted)):
        raise DataFileError(
            f"{partial} holds answers to {len(stray)} prompts outside this sample "
            f"(e.g. {stray[0]}): another --n, --max-prompt-tokens or reader made it; "
            "delete it to start again"
        )
    chunk = CHUNK_BATCHES * batch_size
    runs = []
    for dtype, rows in groups.items():
        left = [r for r in rows if r["key"] not in saved]
        run_params = next((saved[r["key"]]["run_params"] for r in rows if r["key"] in saved), None)
        if left:
            lm = load(dtype)
            run_params = lm.run_params()
            partial.parent.mkdir(parents=True, exist_ok=True)
            for start in range(0, len(rows), chunk):
                asked = [r for r in rows[start : start + chunk] if r["key"] not in saved]
                if not asked:
                    continue
                done = replay(asked, lm, batch_size=batch_size, progress=progress)
                entries = [
                    {"key": r["key"], "run_params": run_params}
                    | {f: r.get(f) for f in REPLAYED_FIELDS}
                    for r in done.replayed
                ]
                with partial.open("a", encoding="utf-8") as out:
                    out.writelines(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
                saved.update((e["key"], e) for e in entries)
            del lm
        runs.append(run_params)
    stored = [r for rows in groups.values() for r in rows]
    replayed = [{**r, **{f: saved[r["key"]][f] for f in REPLAYED_FIELDS}} for r in stored]
    return Replay(stored, replayed, {"runs": runs})


def floor_sample(
    results_dir: str | Path,
    reader: Reader,
    experiments: Iterable[str],
    n: int = FLOOR_PROMPTS,
    max_prompt_tokens: int = FLOOR_MAX_PROMPT_TOKENS,
) -> tuple[list[dict], int]:
    """``n`` of ``reader``'s stored answers in ``experiments`` (generations with at most
    ``max_prompt_tokens`` prompt tokens), drawn with a seed from the sorted keys of all those
    eligible; and how many were eligible."""
    if n < 1:
        raise ParameterError(f"--n must be at least 1, not {n}")
    folder = reader.results_folder(results_dir)
    rows = [
        r
        for experiment in sorted(set(experiments))
        for r in ResultsStore(results_dir, folder, experiment).rows()
        if "params" in r and "task" in r and r.get("prompt_tokens", 0) <= max_prompt_tokens
    ]
    if not rows:
        raise DataFileError(
            f"{folder} has no stored answers of at most {max_prompt_tokens:,} prompt tokens in "
            f"{', '.join(sorted(set(experiments)))}: run its claims first "
            f"(`longctx reproduce --scale claims --model {reader.model}`)"
        )
    rows = sorted({r["key"]: r for r in rows}.values(), key=lambda r: r["key"])
    chosen = random.Random(content_seed(r["key"] for r in rows)).sample(rows, min(n, len(rows)))
    return sorted(chosen, key=lambda r: r["key"]), len(rows)


def dtype_groups(rows: list[dict], backend: str, asked: str = "auto") -> dict[str, list[dict]]:
    """``rows`` by the dtype to answer them in: for ``hf`` with ``asked`` "auto", each row's
    own (so that only the batch changes), else ``asked``; in sorted order."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        own = row["params"].get("dtype") if backend == "hf" else None
        groups.setdefault(own if asked == "auto" and own else asked, []).append(row)
    return dict(sorted(groups.items()))


def _score(row: dict) -> float | None:
    """The row's task's accuracy score, or None where the task has no single-number scorer
    for it (semantic competition's three metrics, a HumanEval answer's tests)."""
    score = getattr(get_task(row["task"]), "score", None)
    if score is None:
        return None
    try:
        value = score(row)
    except (ParameterError, KeyError, TypeError, ValueError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def floor_report(result: Replay, *, folder: str, eligible: int, batch_size: int) -> dict:
    """What ``longctx floor --json`` writes: the reader, this machine, the batch sizes the
    stored rows were made with and the one used here, and per answer whether its text and
    its score came back the same."""
    rows = []
    for a, b in zip(result.stored, result.replayed):
        before, after = _score(a), _score(b)
        rows.append(
            {
                "key": a["key"],
                "task": a["task"],
                "example_id": a["example_id"],
                "prompt_tokens": a.get("prompt_tokens"),
                "identical": a["output"] == b["output"],
                "score_stored": before,
                "score_replayed": after,
                "stored": a["output"],
                "replayed": b["output"],
            }
        )
    return {
        "folder": folder,
        "model": result.stored[0]["model"],
        "backend": row_backend(result.stored[0]),
        "machine": machine(),
        "eligible": eligible,
        "stored_batch_sizes": sorted(
            {(r.get("params") or {}).get("batch_size") for r in result.stored} - {None}
        ),
        "stored_hosts": sorted({r.get("host", "?") for r in result.stored}),
        "batch_size": batch_size,
        "run_params": result.run_params,
        "rows": rows,
    }


def floor_summary(report: dict) -> dict:
    """Answers and scores that changed, as counts and shares of the replayed sample."""
    rows = report["rows"]
    scored = [r for r in rows if r["score_stored"] is not None and r["score_replayed"] is not None]
    return {
        "n": len(rows),
        "answers_changed": sum(not r["identical"] for r in rows),
        "scored": len(scored),
        "scores_changed": sum(r["score_stored"] != r["score_replayed"] for r in scored),
    }


def stored_prefix_reuse(root: str | Path, report: dict) -> int:
    """How many of a report's stored answers were made reusing the previous prompt's prefix
    (llama.cpp's KV cache, ``engine.prefix_reused``), read from the committed rows under
    ``root``; the floor asks them again without it, so a change counts that too."""
    keys, results = {r["key"] for r in report["rows"]}, Path(root) / "data" / "results"
    folder = results / report["folder"]
    stores = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    return sum(
        bool((row.get("engine") or {}).get("prefix_reused"))
        for experiment in stores
        for row in ResultsStore(results, report["folder"], experiment).rows()
        if row["key"] in keys
    )


def floor_table(root: str | Path) -> pd.DataFrame:
    """Every committed floor report under ``root`` as one row per reader: the answers and
    the scores that changed (Wilson 95% intervals), the batch sizes, how many stored answers
    reused a prompt prefix and where the stored rows were made."""
    out = []
    for path in sorted(Path(root).glob(REPORTS)):
        report = json.loads(path.read_text(encoding="utf-8"))
        s = floor_summary(report)
        reused = stored_prefix_reuse(root, report)
        answers = wilson_interval(s["answers_changed"], s["n"])
        scores = wilson_interval(s["scores_changed"], s["scored"]) if s["scored"] else None
        out.append(
            {
                "reader": model_label(report["model"], report["backend"]),
                "answers re-asked": f"{s['n']} of {report['eligible']:,}",
                "answers changed (%, 95% CI)": pct_ci(s["answers_changed"] / s["n"], *answers),
                "scores changed (%, 95% CI)": (
                    pct_ci(s["scores_changed"] / s["scored"], *scores) + f" of {s['scored']} scored"
                    if scores
                    else "no scorer"
                ),
                "batch stored → here": (
                    f"{', '.join(map(str, report['stored_batch_sizes'])) or '?'} → "
                    f"{report['batch_size']}"
                ),
                "stored reusing a prefix": f"{reused} of {s['n']}" if reused else "none",
                "machine here": report["machine"]["cpu"],
            }
        )
    return pd.DataFrame(out)


FLOOR_CAPTION = (
    "The numerics floor per reader: a fixed sample of its answers at the claims scale, asked "
    "again with the same prompts, budgets and stop rules in another batch composition. A claim "
    "whose arms differ by fewer answers than change here measures the arithmetic, not the "
    "paper; where the stored rows were made on another machine, its numerics count too. "
    "Stored answers that reused the previous prompt's prefix (llama.cpp's cache) are asked "
    "again without it, so that reader's floor counts the cache's effect as well."
)
