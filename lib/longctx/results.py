"""Read every model's results for an experiment into one scored table."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from .backends import results_folder
from .claims import paired_estimate
from .errors import DataFileError, LongctxError
from .metrics import (
    bootstrap_interval,
    censored_half_life,
    paired_bootstrap_difference,
    retention,
    sign_flip_test,
)
from .models import ALIASES, model_slug, resolve_model
from .paths import build_commit, repo_root
from .reader import model_label, row_backend
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
    if df.empty:
        return "no results"
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
    return "; ".join(parts) + f". Built from commit {build_commit()}."


def paired_effects(
    table,
    *,
    condition: str,
    control: str,
    treatment: str,
    length: str,
    item: Sequence[str],
    seed: int = 0,
    score: str = "correct",
) -> list[dict]:
    """``treatment`` minus ``control`` accuracy in points (``difference``, ``ci_low``,
    ``ci_high``) per model and ``length`` value, and pooled over lengths ("all"), on the
    items (``item`` columns, e.g. example and position) run under both; 95% paired bootstrap
    intervals resample whole examples, since the items of one example share its content.
    Empty when either condition is missing."""
    if "example_id" not in item:
        raise ValueError("item must include 'example_id', the unit the bootstrap resamples")
    pairs = (
        table.pivot_table(index=["model", length, *item], columns=condition, values=score)
        .dropna()
        .reset_index()
    )
    if not {control, treatment} <= set(pairs.columns):
        return []
    rows = []
    for model, by_model in pairs.groupby("model"):
        for value, g in [*by_model.groupby(length), ("all", by_model)]:
            # Cluster by example alone: the pooled row ("all") holds each example once per
            # length, and those rows share the example's content.
            mean, lo, hi = paired_bootstrap_difference(
                g[control], g[treatment], seed=seed, clusters=g["example_id"].tolist()
            )
            rows.append(
                {
                    "model": model,
                    length: value,
                    "items": len(g),
                    "difference": 100 * mean,
                    "ci_low": 100 * lo,
                    "ci_high": 100 * hi,
                }
            )
    return rows


def paired_comparison(
    table,
    *,
    condition: str,
    control: str,
    treatment: str,
    item: Sequence[str],
    cluster: str = "example_id",
    score: str = "correct",
    seed: int = 0,
) -> dict:
    """``treatment`` minus ``control`` on the items run under both: the mean difference,
    its 95% paired bootstrap interval (whole ``cluster`` units resampled) and a two-sided
    sign-flip p-value on the per-cluster mean differences (clusters are the independent
    units; items within one share its content)."""
    if cluster not in item:
        raise ValueError(f"item must include the cluster column {cluster!r}")
    pairs = table.pivot_table(index=list(item), columns=condition, values=score).reset_index()
    if not {control, treatment} <= set(pairs.columns):
        return {
            "items": 0,
            "clusters": 0,
            "difference": float("nan"),
            "ci_low": float("nan"),
            "ci_high": float("nan"),
            "p_sign_flip": float("nan"),
        }
    pairs = pairs.dropna(subset=[control, treatment])
    mean, lo, hi = paired_bootstrap_difference(
        pairs[control], pairs[treatment], seed=seed, clusters=pairs[cluster].tolist()
    )
    per_cluster = (pairs[treatment] - pairs[control]).groupby(pairs[cluster]).mean()
    return {
        "items": len(pairs),
        "clusters": int(per_cluster.size),
        "difference": mean,
        "ci_low": lo,
        "ci_high": hi,
        "p_sign_flip": sign_flip_test(per_cluster.tolist(), seed=seed),
    }


def reader_contrast(
    table,
    *,
    readers: Sequence[str],
    condition: str,
    control,
    treatment,
    item: Sequence[str],
    reader: str = "model",
    cluster: str = "example_id",
    score: str = "correct",
    seed: int = 0,
) -> dict:
    """How two readers differ in one paired effect (e.g. base vs instruction-tuned on gold
    first minus middle): each reader's ``treatment`` minus ``control`` and the second
    reader's effect minus the first's, on the items both readers answered under both
    conditions. Intervals resample whole ``cluster`` units; the sign-flip p tests the
    per-cluster differences of effects."""
    if len(readers) != 2:
        raise ValueError("reader_contrast compares exactly two readers")
    if cluster not in item:
        raise ValueError(f"item must include the cluster column {cluster!r}")
    sub = table[table[reader].isin(readers) & table[condition].isin([control, treatment])]
    wide = sub.pivot_table(index=list(item), columns=[reader, condition], values=score)
    cols = [(r, c) for r in readers for c in (control, treatment)]
    if not set(cols) <= set(wide.columns):
        missing = sorted(set(cols) - set(wide.columns))
        raise ValueError(f"no rows for {missing}: both readers need both conditions")
    wide = wide[cols].dropna().reset_index()
    effects = {r: wide[(r, treatment)] - wide[(r, control)] for r in readers}
    out = {"items": len(wide), "clusters": int(wide[cluster].nunique())}
    for label, values in [
        (readers[0], effects[readers[0]]),
        (readers[1], effects[readers[1]]),
        ("difference", effects[readers[1]] - effects[readers[0]]),
    ]:
        lo, hi = bootstrap_interval(values.tolist(), seed=seed, clusters=wide[cluster].tolist())
        out[label] = {"effect": float(values.mean()), "ci_low": lo, "ci_high": hi}
    per_cluster = (effects[readers[1]] - effects[readers[0]]).groupby(wide[cluster]).mean()
    out["p_sign_flip"] = sign_flip_test(per_cluster.tolist(), seed=seed)
    return out


def retention_curve(
    table,
    *,
    metric: str,
    h: str = "num_hard",
    by: Sequence[str] = ("model",),
    cluster: str = "example_id",
    baseline=0,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
):
    """Retention R(H) = M(H) / M(baseline) per group, with a percentile bootstrap interval
    over ``cluster`` units (questions; only those run at every H of their group, so the
    ratio is paired), and the censored half-life K_1/2 per group (:func:`censored_half_life`
    on the point estimates; never interpolated).

    Returns ``(curve, half_lives)``: ``curve`` has one row per group and H with columns
    ``questions, M, R, R_low, R_high``; ``half_lives`` one row per group with
    ``K_1/2`` (e.g. ``"> 19"``) and ``censored``.
    """
    by = list(by)
    curve, lives = [], []
    for keys, group in table.groupby(by, sort=True) if by else [((), table)]:
        keys = keys if isinstance(keys, tuple) else (keys,)
        wide = group.pivot_table(index=cluster, columns=h, values=metric, aggfunc="mean").dropna()
        if baseline not in wide.columns:
            raise ValueError(
                f"retention needs the baseline {h}={baseline} for {dict(zip(by, keys))}"
            )
        hs = sorted(wide.columns)
        values = wide[hs].to_numpy()  # clusters x H
        means = values.mean(axis=0)
        base = means[hs.index(baseline)]
        point = np.array(list(retention(dict(zip(hs, means)), baseline).values()))
        rng = np.random.default_rng(seed)
        draws = values[rng.integers(0, len(values), size=(n_resamples, len(values)))].mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = draws / draws[:, [hs.index(baseline)]]
        lo, hi = (
            np.nanquantile(ratios, [(1 - confidence) / 2, (1 + confidence) / 2], axis=0)
            if base
            else (np.full(len(hs), np.nan),) * 2
        )
        for j, hv in enumerate(hs):
            curve.append(
                {
                    **dict(zip(by, keys)),
                    h: hv,
                    "questions": len(values),
                    "M": means[j],
                    "R": point[j],
                    "R_low": lo[j],
                    "R_high": hi[j],
                }
            )
        life = censored_half_life(dict(zip(hs, point)))
        lives.append(
            {
                **dict(zip(by, keys)),
                "K_1/2": life["label"],
                "censored": life["censored"],
                "R at largest H": point[-1],
            }
        )
    return pd.DataFrame(curve), pd.DataFrame(lives)


def position_gap_permutation(by_position, *, n_resamples: int = 9999, seed: int = 0) -> dict:
    """Best-minus-worst gap over positions, tested with the selection repeated.

    ``by_position`` is a table of units (rows, e.g. questions) x positions (columns) of
    scores. Picking the best and the worst position after seeing the data inflates the gap:
    with few units, noise alone produces one. The permutation test shuffles each unit's
    scores across its positions (exchangeable if position does not matter), recomputes
    max minus min of the column means each time, and reports how often that reaches the
    observed gap. Returns ``gap`` (points), ``p``, and ``null_mean`` (the gap expected from
    noise alone, points)."""
    values = by_position.dropna().to_numpy(dtype=float)
    if values.shape[0] == 0 or values.shape[1] < 2:
        return {"gap": float("nan"), "p": float("nan"), "null_mean": float("nan"), "units": 0}
    means = values.mean(axis=0)
    observed = means.max() - means.min()
    rng = np.random.default_rng(seed)
    perm = rng.permuted(np.broadcast_to(values, (n_resamples, *values.shape)).copy(), axis=2)
    gaps = perm.mean(axis=1).max(axis=1) - perm.mean(axis=1).min(axis=1)
    p = (int((gaps >= observed - 1e-12).sum()) + 1) / (n_resamples + 1)
    return {
        "gap": 100 * observed,
        "p": p,
        "null_mean": 100 * float(gaps.mean()),
        "units": values.shape[0],
    }


def backend_agreement(
    rows_a: Sequence[dict],
    rows_b: Sequence[dict],
    score: Callable[[dict], float],
    *,
    names: tuple[str, str] = ("hf", "llamacpp"),
) -> dict:
    """How far two backends' answers to the same requests agree.

    Rows are matched by request (task, condition, example id); the rendered prompts of a
    match must be identical, else the comparison would not be of backends. Returns the
    number of matched requests ``n``, the share with identical (cut) outputs, each
    backend's accuracy, and ``b`` minus ``a`` in points with a paired 95% bootstrap
    interval and a sign-flip p-value over examples (requests of one example are averaged
    first, so an example that appears at several positions counts once)."""

    def ident(r):
        return request_identity(r["task"], r["condition"], r["example_id"])

    b_by = {ident(r): r for r in rows_b}
    pairs = [(a, b_by[ident(a)]) for a in rows_a if ident(a) in b_by]
    if not pairs:
        raise DataFileError(f"no request was answered by both {names[0]} and {names[1]}")
    for a, b in pairs:
        if a["prompt"] != b["prompt"]:
            raise DataFileError(
                f"{names[0]} and {names[1]} rendered request {ident(a)} differently"
            )
    same = sum(a["output"] == b["output"] for a, b in pairs)
    unit_a: dict = {}
    unit_b: dict = {}
    for a, b in pairs:
        unit = (a["task"], a["example_id"])
        unit_a.setdefault(unit, []).append(score(a))
        unit_b.setdefault(unit, []).append(score(b))
    est = paired_estimate(
        {u: sum(v) / len(v) for u, v in unit_a.items()},
        {u: sum(v) / len(v) for u, v in unit_b.items()},
        side_names=names,
    )
    return {
        "n": len(pairs),
        "units": est.n,
        "identical": same / len(pairs),
        f"accuracy_{names[0]}": sum(score(a) for a, _ in pairs) / len(pairs),
        f"accuracy_{names[1]}": sum(score(b) for _, b in pairs) / len(pairs),
        "difference": est.difference,
        "low": est.ci_low,
        "high": est.ci_high,
        "p": est.p,
    }


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
