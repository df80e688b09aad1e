"""Stored rows as scored tables, the stores they came from, and the addresses of their
browsers: where a figure's points and captions find their rows."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from .backends import results_folder
from .errors import LongctxError
from .models import ALIASES, model_slug, resolve_model
from .paths import build_commit, repo_root
from .reader import Reader, model_label, row_backend
from .requests import request_identity
from .store import ResultsStore, model_folder


def load_experiment(
    results_dir: str | Path,
    experiment: str,
    score: Callable[[dict], float],
    task: str | None = None,
):
    """One row per generation for every model with results under ``results_dir/<model>/<experiment>``.

    Condition fields become columns; ``correct`` holds ``score(row)``. Prompt, gold and
    output are kept so that per-row analyses (error kinds) work on the table.
    """
    rows = []
    for folder in ResultsStore.folders(results_dir, experiment):
        store = ResultsStore(results_dir, folder, experiment)
        rows += [row for row in store.rows() if not task or row["task"] == task]
    return rows_table(rows, score)


def rows_table(rows: Sequence[dict], score: Callable[[dict], float]):
    """Stored rows (e.g. those :func:`~longctx.runner.answer` returns) as a table:
    condition fields become columns, ``correct`` holds ``score(row)``."""
    return pd.DataFrame.from_records(
        [
            {
                "key": row["key"],
                "model": model_label(row["model"], row_backend(row)),
                "model_name": row["model"],
                "backend": row_backend(row),
                "example_id": row["example_id"],
                **row["condition"],
                "condition_json": json.dumps(row["condition"], sort_keys=True),
                "prompt": row["prompt"],
                "gold": row["gold"],
                "output": row["output"],
                "prompt_tokens": row["prompt_tokens"],
                "new_tokens": row["new_tokens"],
                "seconds_per_prompt": row["seconds_per_prompt"],
                "meta": row.get("meta", {}),
                "longctx_version": row["longctx_version"],
                "device": row.get("params", {}).get("device"),
                "dtype": row.get("params", {}).get("dtype"),
                "correct": score(row),
            }
            for row in rows
        ]
    )


DOWNLOADS = "downloads"  # the site's folder of rows, browsers and records
KEY_CHARS = 12  # of a row's key, enough to name it in a browser's address


def store_name(folder: str, experiment: str) -> str:
    """``<reader folder>__<experiment>``: the name of a store's files (CSV, JSONL, browser) in
    the site's downloads."""
    return f"{folder}__{experiment}"


def browser_path(folder: str, experiment: str, prefix: str = "../") -> str:
    """The site-relative address of the sample browser of a reader ``folder``'s store of
    ``experiment`` (``longctx.downloads`` writes it)."""
    return f"{prefix}{DOWNLOADS}/{store_name(folder, experiment)}.html"


def shared_fields(conditions: Sequence[dict]) -> dict:
    """The condition fields every one of ``conditions`` holds at one value (compared as JSON),
    in the first condition's order: what a browser says once, or a link filters on."""
    if not conditions:
        return {}
    first = conditions[0]
    return {
        k: v
        for k, v in first.items()
        if all(
            k in c and json.dumps(c[k], sort_keys=True) == json.dumps(v, sort_keys=True)
            for c in conditions[1:]
        )
    }


def condition_words(condition: dict, leave_out=frozenset()) -> str:
    """A condition as ``field: value`` pairs, without the task and the fields in
    ``leave_out``: how the sample browser shows it and how its links filter it."""
    return "; ".join(
        f"{k}: {v}" for k, v in sorted(condition.items()) if k != "task" and k not in leave_out
    )


def point_links(table: pd.DataFrame, by: Sequence[str], results_dir, experiment: str):
    """``links(point)`` for a figure drawn from ``table`` (rows with ``model_name``,
    ``backend``, ``condition_json`` and ``example_id``, as :func:`rows_table` makes them)
    summarized by ``by``: the sample browser of the point's reader filtered to exactly the
    rows behind it (their conditions, and their keys too where the store holds more rows of
    those conditions than the point was drawn from), or None for a point it did not draw
    from."""
    behind, stored = {}, {}
    for key, part in table.groupby(list(by)):
        name, backend = part["model_name"].iloc[0], part["backend"].iloc[0]
        try:
            folder = results_folder(model_folder(resolve_model(name), results_dir), backend)
        except LongctxError:
            continue
        if folder not in stored:
            stored[folder] = Counter(
                json.dumps(r["condition"], sort_keys=True)
                for r in ResultsStore(results_dir, folder, experiment).rows()
            )
        conditions = sorted(set(part["condition_json"]))
        chosen = " || ".join(condition_words(json.loads(c)) for c in conditions)
        href = browser_path(folder, experiment) + "#condition=" + quote(chosen)
        if sum(stored[folder][c] for c in conditions) > len(part):
            # The store holds more rows of these conditions (another part of the plan asked
            # them of other examples): name the point's rows themselves, by key.
            href += "&rows=" + "+".join(sorted(k[:KEY_CHARS] for k in part["key"]))
        behind[key if isinstance(key, tuple) else (key,)] = href
    return lambda point: behind.get(tuple(point[k] for k in by))


def _shown(results_dir: str | Path) -> str:
    """The results folder as a reader finds it: relative to the repository when inside it
    (``data/results``), else by its own name."""
    folder = Path(results_dir).resolve()
    try:
        return folder.relative_to(repo_root().resolve()).as_posix()
    except ValueError:
        return folder.name


def provenance(df, results_dir: str | Path, experiment: str) -> str:
    """A one-paragraph caption naming files, models, sizes and library versions behind a figure:
    per reader, how many rows it shows of how many its store holds."""
    return provenances(results_dir, [(df, experiment)])


def provenances(results_dir: str | Path, shown: Sequence[tuple[pd.DataFrame, str]]) -> str:
    """:func:`provenance` of a page that reads several stores: each (rows table, store) pair's
    readers in turn, one "Built from commit" sentence for them all."""
    parts = [part for df, experiment in shown for part in _store_parts(df, results_dir, experiment)]
    if not parts:
        return "no results"
    return "; ".join(parts) + f". Built from commit {build_commit()}."


def _store_parts(df, results_dir: str | Path, experiment: str) -> list[str]:
    if df.empty:
        return []
    df = df.assign(
        model_name=df["model_name"] if "model_name" in df else df["model"],
        backend=df["backend"] if "backend" in df else "hf",
    )
    parts = []
    for (model, backend), group in df.groupby(["model_name", "backend"]):
        try:
            slug = model_folder(resolve_model(model), results_dir)
        except LongctxError:  # a local checkpoint that has since moved: its plain name
            slug = model_slug(model)
        store = ResultsStore(results_dir, results_folder(slug, backend), experiment)
        names = " + ".join(p.name for p in store.files) or ResultsStore.FILENAME
        path = f"{_shown(results_dir)}/{results_folder(slug, backend)}/{experiment}/{names}"
        versions = ", ".join(sorted(group["longctx_version"].unique()))
        alias = ALIASES.get(str(model))
        weights = f"{alias.filename}, " if alias else ""
        # where the rows ran ("cpu float32"), when the table carries it
        runs = group.reindex(columns=["device", "dtype"]).dropna(how="all").drop_duplicates()
        ran = ", ".join(
            sorted(" ".join(str(v) for v in run if pd.notna(v)) for run in runs.itertuples(False))
        )
        held = len(store.keys())  # the store may hold more than this page reads
        shown = f"{len(group):,}" if held <= len(group) else f"{len(group):,} of the {held:,}"
        parts.append(
            f"{model_label(model, backend)}: {shown} generations in `{path}` "
            f"({weights}{backend}{', ' + ran if ran else ''}; longctx {versions})"
        )
    return parts


def comparable_rows(
    results_dir: str | Path, experiment: str, requests: Sequence, *, exclude: str | None = None
) -> list[dict]:
    """Rows of *other* runs (models or backends) under ``results_dir`` that answer any of
    ``requests``: same task, condition and example, whatever model or backend wrote them.
    ``exclude`` names the results folder of the run already in hand. A chapter adds these to
    its figure, so ``make run ... MODEL=<another> BACKEND=<another>`` draws one more line."""
    wanted = {request_identity(r.task, r.condition, r.example_id) for r in requests}
    out = []
    for folder in ResultsStore.folders(results_dir, experiment):
        if folder == exclude:
            continue
        out += [
            row
            for row in ResultsStore(results_dir, folder, experiment).rows()
            if request_identity(row["task"], row["condition"], row["example_id"]) in wanted
        ]
    return out


def first_row(store: ResultsStore) -> dict | None:
    """A store's first row, packed rows before plain ones (None for an empty store)."""
    rows = store.packed_rows()[:1] or store.plain_rows()[:1]
    return rows[0] if rows else None


def folder_reader(row: dict, folder: str, results_dir: str | Path) -> Reader | None:
    """The reader that wrote ``row``, found in the model folder ``folder``; None where this
    machine cannot name its weights (a local file elsewhere) or where that reader's rows
    would be written to another folder."""
    try:
        reader = Reader.of_row(row)
    except LongctxError:
        return None
    return reader if reader.results_folder(results_dir) == folder else None


def stored_readers(results_dir: str | Path, experiment: str) -> list[Reader]:
    """The reader (from its first row) of each model folder holding rows of ``experiment``
    under ``results_dir``, by folder name; a folder :func:`folder_reader` cannot name is
    left out."""
    out = []
    for store in ResultsStore.all_under(results_dir, experiment):
        row = first_row(store)
        if row is not None and (reader := folder_reader(row, store.dir.parent.name, results_dir)):
            out.append(reader)
    return out
