"""What a reader of the book can download: every committed store's rows as CSV (one line per
generation or measurement, the prompt and long vectors left out: they are in the packed
JSONL beside it) and the packed JSONL itself, and the findings table as CSV. The book's
build writes them into the site's ``downloads/`` folder (``book/_ext/book_fixes.py``); each
chapter links its own.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from .chapters import get_chapter
from .findings import findings_table
from .store import ResultsStore

FOLDER = "downloads"  # under the site's root
COLUMNS = (
    "key",
    "example_id",
    "condition",
    "gold",
    "output",
    "prompt_tokens",
    "new_tokens",
    "model",
    "backend",
    "device",
    "dtype",
    "longctx_version",
)


def base_name(store: ResultsStore) -> str:
    """``<model folder>__<experiment>``: the name of a store's files in ``downloads/``."""
    return f"{store.dir.parent.name}__{store.dir.name}"


def rows_frame(rows: list[dict]) -> pd.DataFrame:
    """One line per generation: the condition as JSON (its fields vary by task), gold
    answers as JSON, the output, token counts and what made it."""
    return pd.DataFrame(
        [
            {
                "key": r["key"],
                "example_id": r["example_id"],
                "condition": json.dumps(r["condition"], sort_keys=True, ensure_ascii=False),
                "gold": json.dumps(r.get("gold"), ensure_ascii=False),
                "output": r.get("output"),
                "prompt_tokens": r.get("prompt_tokens"),
                "new_tokens": r.get("new_tokens"),
                "model": r.get("model"),
                "backend": r.get("backend", "hf"),
                "device": r.get("params", {}).get("device"),
                "dtype": r.get("params", {}).get("dtype"),
                "longctx_version": r.get("longctx_version"),
            }
            for r in rows
            if "condition" in r
        ],
        columns=list(COLUMNS),
    )


def measurements_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows that are measurements, not generations (attention scores, ABS per candidate):
    every scalar field, without the prompt and without long vectors (in the JSONL)."""
    out = []
    for r in rows:
        out.append(
            {
                k: json.dumps(v, ensure_ascii=False) if isinstance(v, dict | list) else v
                for k, v in r.items()
                if k != "prompt" and not (isinstance(v, list) and len(v) > 32)
            }
        )
    return pd.DataFrame(out)


def write(results_dir: str | Path, site: str | Path) -> list[Path]:
    """Write every store's CSV and packed JSONL, and ``findings.csv``, into
    ``<site>/downloads``; returns the files written."""
    out = Path(site) / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for store in ResultsStore.all_under(results_dir):
        rows = store.rows()
        if not rows:
            continue
        name = base_name(store)
        csv = out / f"{name}.csv"
        frame = rows_frame(rows) if "condition" in rows[0] else measurements_frame(rows)
        frame.to_csv(csv, index=False)
        written.append(csv)
        for f in store.files:
            target = out / f"{name}{''.join(f.suffixes)}"
            shutil.copyfile(f, target)
            written.append(target)
    table = findings_table(results_dir)
    findings_csv = out / "findings.csv"
    table.drop(columns=["facts"]).to_csv(findings_csv, index=False)
    written.append(findings_csv)
    return written


def chapter_links(chapter: str, results_dir: str | Path, prefix: str = "../") -> str:
    """Markdown (raw links: the files exist only in the built site) to the downloads of
    ``chapter``'s stores, one line per store, or a sentence when none is stored."""
    experiments = getattr(get_chapter(chapter), "EXPERIMENTS", ())
    links = []
    for experiment in experiments:
        for store in ResultsStore.all_under(results_dir, experiment):  # stores with files
            name = base_name(store)
            packed = "".join(store.files[0].suffixes)
            links.append(
                f"`{name.replace('__', ' / ')}`: "
                f'<a href="{prefix}{FOLDER}/{name}.csv">CSV</a> · '
                f'<a href="{prefix}{FOLDER}/{name}{packed}">JSONL</a>'
            )
    if not links:
        return "No rows of this chapter are stored yet."
    return (
        "**Download the rows** (every generation with its condition, answer and what made it): "
        + "; ".join(links)
        + "."
    )
