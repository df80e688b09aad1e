"""Does this machine give the committed answers? Regenerate a seeded sample of stored rows.

Committed rows come from several machines (a lent H100, an AMD EPYC CPU, an Intel Xeon),
and one greedy decoding can round differently on another CPU, GPU or build of llama.cpp, so
an answer can change. Before a run adds rows to a results file from a new machine, replay a
sample of the rows already there with the same model, backend, rendered prompt, token budget
and stop rule, and count the answers that come back byte for byte and those that score the
same (:func:`longctx.results.backend_agreement`).

    longctx replay data/results/qwen2.5-coder-1.5b-instruct--llamacpp/crossing/generations.jsonl.xz \\
        --n 16 --json data/bench/replay-crossing-1.5b.json
"""

from __future__ import annotations

import json
import platform
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import DataFileError, ParameterError
from .paths import resolve
from .reader import row_backend
from .results import backend_agreement
from .runner import ask_again
from .tasks import get_task


def sample_rows(rows: Sequence[dict], n: int, seed: int = 0) -> list[dict]:
    """``n`` rows drawn without replacement by a seeded ``random.Random`` (all of them when
    there are fewer), in the order they were stored, so one seed names one sample."""
    if n < 1:
        raise ParameterError(f"n must be at least 1, not {n}")
    if not rows:
        raise DataFileError("no stored rows to replay")
    chosen = sorted(random.Random(seed).sample(range(len(rows)), min(n, len(rows))))
    return [rows[i] for i in chosen]


def reader_of(rows: Sequence[dict]) -> tuple[str, str]:
    """The (model, backend) that wrote ``rows``; rows of two readers cannot be replayed as one."""
    readers = {(r["model"], row_backend(r)) for r in rows}
    if len(readers) != 1:
        raise DataFileError(
            f"rows of {len(readers)} readers ({sorted(readers)}); replay one results file at a time"
        )
    return next(iter(readers))


@dataclass
class Replay:
    """Stored rows beside the same requests answered again here."""

    stored: list[dict]
    replayed: list[dict]
    run_params: dict = field(default_factory=dict)

    def changed(self) -> list[tuple[dict, dict]]:
        return [(a, b) for a, b in zip(self.stored, self.replayed) if a["output"] != b["output"]]

    def summary(self, score: Callable[[dict], float] | None) -> dict:
        """:func:`~longctx.results.backend_agreement` of stored and replayed rows; with no
        per-row scorer (``None``) only ``n`` and the share of identical outputs."""
        if score is None:
            return {"n": len(self.stored), "identical": 1 - len(self.changed()) / len(self.stored)}

        return backend_agreement(self.stored, self.replayed, score, names=("stored", "replayed"))

    def report(self, score: Callable[[dict], float] | None, **context) -> dict:
        """What ``longctx replay --json`` writes and :func:`describe_report` reads: ``context``
        (results file, seed, ...), the reader, this machine, the summary and every answer."""
        return {
            **context,
            "model": self.stored[0]["model"],
            "backend": row_backend(self.stored[0]),
            "machine": machine(),
            "run_params": self.run_params,
            "summary": self.summary(score),
            "rows": [
                {
                    "key": a["key"],
                    "example_id": a["example_id"],
                    "condition": a["condition"],
                    "stored": a["output"],
                    "replayed": b["output"],
                    "identical": a["output"] == b["output"],
                    "seconds_per_prompt": b["seconds_per_prompt"],
                }
                for a, b in zip(self.stored, self.replayed)
            ],
        }


def check_replayable(rows: Sequence[dict], source: str = "these rows") -> None:
    """One line, before any model loads, when ``rows`` are not generations (attention rows
    hold measurements, not answers) or name a task no module makes."""
    if any("params" not in r or "task" not in r for r in rows):
        raise DataFileError(
            f"{source} holds final-token attention measurements, not generations: replay "
            "regenerates answers, so there is nothing to replay there"
        )
    for task in {r["task"] for r in rows}:
        get_task(task)


def row_scorer(rows: Sequence[dict]) -> Callable[[dict], float] | None:
    """The rows' task's per-row accuracy scorer, or None where it has none that scores every
    one of them with one number (semantic competition scores EM, F1 and inclusion at once;
    a HumanEval row needs its problem's tests)."""
    tasks = {r["task"] for r in rows}
    if len(tasks) != 1:
        return None
    score = getattr(get_task(tasks.pop()), "score", None)
    if score is None:
        return None
    try:
        return score if all(isinstance(score(r), (int, float)) for r in rows) else None
    except ParameterError:
        return None


def replay(rows: Sequence[dict], lm, *, batch_size: int = 8, progress: bool = True) -> Replay:
    """Answer each stored row's rendered prompt again with ``lm`` (a backend of
    :mod:`longctx.backends` for the rows' model), with the row's token budget and stop rule.
    The replayed rows are the stored ones with the new output, token counts and timings."""
    if not rows:
        raise DataFileError("no stored rows to replay")
    reader_of(rows)
    gens = ask_again(rows, lm, batch_size=batch_size, progress=progress)
    out = [
        {
            **row,
            "output": g.text,
            "raw_output": g.raw_text,
            "prompt_tokens": g.prompt_tokens,
            "new_tokens": g.new_tokens,
            "stop_reason": g.stop_reason,
            "seconds_per_prompt": round(g.batch_seconds / g.batch_size, 4),
        }
        for row, g in zip(rows, gens)
    ]
    return Replay(list(rows), out, lm.run_params())


def machine() -> dict:
    """What this machine is, for the report: the CPU model is what differs between our hosts."""
    cpu = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cpu": cpu, "machine": platform.machine(), "python": platform.python_version()}


def _cut(answer: str, most: int = 60) -> str:
    """An answer shortened to ``most`` characters, with an ellipsis where it was cut."""
    return answer if len(answer) <= most else answer[:most].rstrip() + "…"


def describe_report(report: dict) -> str:
    """One paragraph (Markdown) on a ``longctx replay --json`` report: how many answers came
    back byte for byte, on which machine, the accuracy both ways, and each changed answer."""
    s, rows = report["summary"], report["rows"]
    same = sum(r["identical"] for r in rows)
    stored, ran = report.get("stored_dtype"), report.get("run_params", {}).get("dtype")
    # a replay in another dtype measures that dtype's effect as well as the machine's
    numerics = (
        f", in {ran} where the rows were made in {stored}"
        if stored and ran and ran != stored
        else ""
    )
    text = (
        f"{same} of {len(rows)} replayed answers came back byte for byte on "
        f"{report['machine']['cpu']}{numerics} "
        f"(`{report['backend']}`, {report['model']}; seeded sample of {report['rows_stored']} rows"
        + (f" made before {report['created_before']}" if report.get("created_before") else "")
        + ")."
    )
    if "accuracy_stored" in s:
        text += (
            f" Accuracy on the sample: {100 * s['accuracy_stored']:.1f}% as stored, "
            f"{100 * s['accuracy_replayed']:.1f}% replayed."
        )
    changed = [r for r in rows if not r["identical"]]
    if changed:
        text += (
            " Changed: "
            + "; ".join(
                f'{r["example_id"]}: "{_cut(r["stored"])}" became "{_cut(r["replayed"])}"'
                for r in changed
            )
            + "."
        )
    return text


def replay_summary(path) -> str:
    """:func:`describe_report` of a committed report file (relative paths from the repository root)."""
    file = resolve(path)
    if not file.exists():
        raise DataFileError(
            f"{file} is missing; make it with `longctx replay <results file> --json {path}`"
        )
    return describe_report(json.loads(file.read_text(encoding="utf-8")))


REPORTS = "data/bench/replay-*.json"  # where `longctx replay --json` reports are committed


def reports_markdown(root: str | Path | None = None) -> str:
    """Every replay report committed under ``root`` (default: the repository) as
    :data:`REPORTS`, as one Markdown bullet each: its file and :func:`replay_summary`.
    Empty when there is none."""
    root = Path(root) if root is not None else resolve(".")
    return "\n".join(
        f"* `{path.relative_to(root).as_posix()}`: {replay_summary(path)}"
        for path in sorted(root.glob(REPORTS))
    )
