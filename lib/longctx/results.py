"""Paired estimates over scored tables: effects, contrasts between readers, retention and the
agreement of two backends. Tables come from :mod:`longctx.tables`; nothing here knows where
rows are stored."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from .claims import paired_estimate
from .errors import DataFileError
from .metrics import (
    bootstrap_interval,
    censored_half_life,
    paired_bootstrap_difference,
    retention,
    sign_flip_test,
)
from .requests import request_identity


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


def in_points(compared: dict, *, change: str = "difference", p: str = "p") -> dict:
    """A :func:`paired_comparison` as a table's columns: the ``change`` and its interval in
    points, and the sign-flip p under the name ``p``."""
    return {
        change: 100 * compared["difference"],
        "ci_low": 100 * compared["ci_low"],
        "ci_high": 100 * compared["ci_high"],
        p: compared["p_sign_flip"],
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
