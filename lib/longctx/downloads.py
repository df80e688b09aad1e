"""What a reader of the book can download or browse: every committed store's rows as CSV
(one line per generation or measurement, with its score; the prompt and long vectors left
out: they are in the packed JSONL beside it), the packed JSONL itself, a sample browser per
store (a filterable table of condition, example, gold, answer, score and tokens that works
offline), the findings table and matrix as CSV, every reader's claims and rows as Every Eval
Ever records (:mod:`longctx.export`), and each chapter's executed notebook. The book's build
writes them into the site's ``downloads/`` folder (``book/_ext/book_fixes.py``); each
chapter links its own.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pandas as pd

from .chapters import contract
from .export import write_every_eval_ever
from .matrix import build as build_matrix
from .matrix import default_findings
from .matrix import frame as matrix_frame
from .report import elide
from .store import ResultsStore
from .tables import (
    DOWNLOADS,
    KEY_CHARS,
    browser_path,
    condition_words,
    shared_fields,
    store_name,
)
from .tasks import row_score

FOLDER = DOWNLOADS  # under the site's root
COLUMNS = (
    "key",
    "example_id",
    "condition",
    "gold",
    "output",
    "score",
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
    return store_name(store.dir.parent.name, store.dir.name)


def rows_frame(rows: list[dict]) -> pd.DataFrame:
    """One line per generation: the condition as JSON (its fields vary by task), gold
    answers as JSON, the output, its score, token counts and what made it."""
    return pd.DataFrame(
        [
            {
                "key": r["key"],
                "example_id": r["example_id"],
                "condition": json.dumps(r["condition"], sort_keys=True, ensure_ascii=False),
                "gold": json.dumps(r.get("gold"), ensure_ascii=False),
                "output": r.get("output"),
                "score": row_score(r),
                "prompt_tokens": r.get("prompt_tokens"),
                "new_tokens": r.get("new_tokens"),
                "model": r.get("model"),
                "backend": r.get("backend", "hf"),
                "device": r.get("params", {}).get("device"),
                "dtype": r.get("params", {}).get("dtype"),
                "longctx_version": r.get("longctx_version"),
                "prompt": elide(r.get("prompt") or "", BROWSER_PROMPT_CHARS),
            }
            for r in rows
            if "condition" in r
        ],
        columns=[*COLUMNS, "prompt"],
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


BROWSER_PROMPT_CHARS = 400  # of each end of a prompt, in the browser (the JSONL holds it whole)
BROWSER_COLUMNS = {  # rows_frame column -> the browser's header; the score before long text
    "condition": "condition",
    "example_id": "example",
    "score": "score",
    "gold": "gold",
    "output": "answer",
    "prompt_tokens": "prompt tokens",
    "new_tokens": "new tokens",
    "prompt": "prompt",  # one line until its row is opened
}


def condition_text(condition_json: str, fixed: frozenset = frozenset()) -> str:
    """A stored condition (JSON) in words, without the ``fixed`` fields (the ones every row
    of the page shares, said once above the table)."""
    return condition_words(json.loads(condition_json), fixed)


def holds_generations(rows: list[dict]) -> bool:
    """Whether a store's rows are generations (with a condition), not measurements."""
    return bool(rows) and "condition" in rows[0]


def fixed_fields(conditions: pd.Series) -> dict:
    """The condition fields with one value in every row, and that value."""
    shared = shared_fields([json.loads(c) for c in conditions])
    return {k: shared[k] for k in sorted(shared) if k != "task"}


def browser_page(name: str, frame: pd.DataFrame, static: str = "../_static/") -> str:
    """A self-contained page browsing ``frame`` (a :func:`rows_frame`): the rows ride in the
    page as JSON, the table is ``samples.js`` (no CDN, no fetch), so it opens offline. The
    condition fields every row shares are said once above the table, not in every row."""
    fixed = fixed_fields(frame["condition"])
    shared = "; ".join(f"{k}: {v}" for k, v in fixed.items())
    shown = frame[list(BROWSER_COLUMNS)].assign(
        condition=frame["condition"].map(lambda c: condition_text(c, frozenset(fixed))),
        gold=frame["gold"].map(lambda g: ", ".join(map(str, json.loads(g) or [])) if g else ""),
    )
    shown = shown.astype(object).where(shown.notna(), None)
    data = {
        "columns": list(BROWSER_COLUMNS.values()),
        "rows": shown.values.tolist(),
        # the fields said once above the table, so a filter naming one still matches
        "fixed": {k: str(v) for k, v in fixed.items()},
        # each row's key, so a figure's point can name exactly its rows (&rows=...)
        "keys": [str(k)[:KEY_CHARS] for k in frame["key"]],
    }
    payload = json.dumps(data, ensure_ascii=False, default=str).replace("</", "<\\/")
    model, experiment = name.split("__", 1)
    title = f"{experiment.replace('_', ' ')}: {model}"
    made = ", ".join(sorted(set(frame["backend"].dropna()) | set(frame["device"].dropna())))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Rows of {html.escape(title)}</title><link rel="icon" href="{static}favicon.png">
<link rel="stylesheet" href="{static}samples.css"></head><body>
<h1>Rows of {html.escape(title)}</h1>
<p>Every committed generation of this store ({len(frame):,} rows; {html.escape(made)}): the
condition it ran under, the example, the gold answers, the model's answer and its score by
the task's metric (blank where the row alone cannot be scored) and the prompt as the model
read it, chat template included (its middle elided; the JSONL holds it whole). Type in a column's box to
filter it (words must all appear; numbers take &lt;, &gt;, &lt;=, &gt;=; in the condition
column <code>field: value</code> pairs, <code>;</code> between them, <code>||</code> between
alternatives, as the findings page's links set it), click a header to sort.
<a href="{name}.csv">CSV</a> · <a href="../index.html">the book</a></p>
{f"<p>In every row: {html.escape(shared)}.</p>" if shared else ""}
<nav><button id="previous" type="button">previous</button><button id="next"
type="button">next</button><span id="count"></span></nav>
<div class="scroll"><table id="samples"></table></div>
<script id="rows" type="application/json">{payload}</script>
<script src="{static}samples.js"></script>
</body></html>
"""


def write(results_dir: str | Path, site: str | Path) -> list[Path]:
    """Write every store's CSV, packed JSONL and (for generations) sample browser, and
    ``findings.csv``, into ``<site>/downloads``; returns the files written."""
    out = Path(site) / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for store in ResultsStore.all_under(results_dir):
        rows = store.rows()
        if not rows:
            continue
        name = base_name(store)
        csv = out / f"{name}.csv"
        generations = holds_generations(rows)
        frame = rows_frame(rows) if generations else measurements_frame(rows)
        # The CSV leaves the prompt out (its JSONL beside it holds it whole).
        frame.drop(columns=["prompt"], errors="ignore").to_csv(csv, index=False)
        written.append(csv)
        if generations:
            page = out / f"{name}.html"
            page.write_text(browser_page(name, frame), encoding="utf-8")
            written.append(page)
        for f in store.files:
            target = out / f"{name}{''.join(f.suffixes)}"
            shutil.copyfile(f, target)
            written.append(target)
    claims_by_readers = build_matrix(results_dir)
    table = default_findings(claims_by_readers, results_dir)
    findings_csv = out / "findings.csv"
    table.drop(columns=["facts", "rows"]).to_csv(findings_csv, index=False)
    matrix_csv = out / "findings-matrix.csv"
    matrix_frame(claims_by_readers).to_csv(matrix_csv, index=False)
    written += [findings_csv, matrix_csv]
    written += write_every_eval_ever(claims_by_readers, results_dir, out)
    return written


def browser_link(store: ResultsStore, rows: list[dict], prefix: str = "../") -> str | None:
    """The site-relative address of ``store``'s sample browser, given its ``rows``, or None
    when they are not generations (no browser is written for them)."""
    if not holds_generations(rows):
        return None
    return browser_path(store.dir.parent.name, store.dir.name, prefix)


def browser_href(
    results_dir: str | Path, experiment: str, model_folder: str, prefix: str = "../"
) -> str | None:
    """:func:`browser_link` for ``model_folder``'s store of ``experiment``."""
    store = ResultsStore(results_dir, model_folder, experiment)
    return browser_link(store, store.rows() if store.files else [], prefix)


NOTEBOOKS = "notebooks"  # under FOLDER: the executed notebooks


def write_notebooks(executed: str | Path, site: str | Path) -> list[Path]:
    """Copy the build's executed notebooks (MyST-NB's ``jupyter_execute/notebooks``, with
    every output a reader sees) into ``<site>/downloads/notebooks``."""
    out = Path(site) / FOLDER / NOTEBOOKS
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for nb in sorted(Path(executed).glob("*.ipynb")):
        shutil.copyfile(nb, out / nb.name)
        written.append(out / nb.name)
    return written


def chapter_links(chapter: str, results_dir: str | Path, prefix: str = "../") -> str:
    """Markdown (raw links: the files exist only in the built site) to the sample browser
    and downloads of ``chapter``'s stores (or a sentence when none is stored), and to its
    executed notebook."""
    experiments = contract(chapter).experiments
    links = []
    for experiment in experiments:
        for store in ResultsStore.all_under(results_dir, experiment):  # stores with files
            name = base_name(store)
            packed = "".join(store.files[0].suffixes)
            href = browser_link(store, store.rows(), prefix)
            browse = f'<a href="{href}">browse</a> · ' if href else ""
            links.append(
                f"`{name.replace('__', ' / ')}`: {browse}"
                f'<a href="{prefix}{FOLDER}/{name}.csv">CSV</a> · '
                f'<a href="{prefix}{FOLDER}/{name}{packed}">JSONL</a>'
            )
    notebook = (
        f'The executed notebook: <a href="{prefix}{FOLDER}/{NOTEBOOKS}/{chapter}.ipynb">'
        f"{chapter}.ipynb</a>."
    )
    if not links:
        return f"No rows of this chapter are stored yet. {notebook}"
    return (
        "**Browse or download the rows** (every generation with its condition, answer, score "
        f"and what made it): {'; '.join(links)}. {notebook}"
    )
