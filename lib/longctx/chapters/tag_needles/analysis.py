"""Needle statistics over scored rows: accuracy per variant, each variant against its control
paired over needles, the paper's extremum drop rate and what the tags cost in tokens."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...claims import paired_estimate
from ...metrics import extremum_drop_rate, summarize
from ...tasks.tag_needles import needle_of


def accuracy_table(scored, by: Sequence[str] = ("model", "variant", "length")):
    """Mean ``correct`` with Wilson 95% intervals."""
    return summarize(scored, list(by), score="correct")


def versus_baseline(scored, *, control: str = "baseline", by: Sequence[str] = ("length",)):
    """Each variant minus ``control`` on the same cases (and depths), per ``by``: each
    needle's questions averaged first, then the findings page's paired estimate over needles
    (:func:`longctx.claims.paired_estimate`: points, bootstrap interval, exact sign-flip p),
    so this table and the findings page print the same numbers."""
    out = []
    if "needle" not in scored:
        scored = scored.assign(needle=scored["example_id"].map(needle_of))
    for key, group in scored.groupby(list(by)):
        key = key if isinstance(key, tuple) else (key,)
        for variant in sorted(set(group["variant"]) - {control}):
            pairs = (
                group[group["variant"].isin([control, variant])]
                .pivot_table(
                    index=["needle", "example_id", "depth"], columns="variant", values="correct"
                )
                .reindex(columns=[control, variant])
                .dropna()
            )
            if pairs.empty:
                continue
            per_needle = pairs.groupby(level="needle").mean()
            est = paired_estimate(per_needle[control].to_dict(), per_needle[variant].to_dict())
            out.append(
                {
                    **dict(zip(by, key)),
                    "variant": variant,
                    "n": len(pairs),
                    "needles": est.n,
                    # the two sides in the same unit as the change: means over needles
                    "control_level": est.control,
                    "variant_level": est.treatment,
                    "change": est.difference,
                    "ci_low": est.ci_low,
                    "ci_high": est.ci_high,
                    "p_sign_flip": est.p,
                }
            )
    return pd.DataFrame(out)


def drop_rates(
    scored,
    *,
    short: int | None = None,
    long: int | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
):
    """The paper's extremum drop rate per variant, ``(acc_short - acc_long) / acc_short`` in
    percent, from the shortest to the longest length, with a 95% bootstrap interval that
    resamples cases (each case's short and long answers stay paired)."""
    lengths = sorted(scored["length"].unique())
    short = lengths[0] if short is None else short
    long = lengths[-1] if long is None else long
    rng = np.random.default_rng(seed)
    out = []
    for variant, group in scored.groupby("variant"):
        wide = group.pivot_table(index=["example_id", "depth"], columns="length", values="correct")
        if short not in wide or long not in wide:
            continue
        wide = wide[[short, long]].dropna()
        a, b = wide[short].to_numpy(), wide[long].to_numpy()
        rate = extremum_drop_rate(a.mean(), b.mean())
        draws = []
        for _ in range(n_resamples):
            idx = rng.integers(0, len(a), len(a))
            if a[idx].mean() > 0:
                draws.append(extremum_drop_rate(a[idx].mean(), b[idx].mean()))
        low, high = np.percentile(draws, [2.5, 97.5]) if draws else (float("nan"), float("nan"))
        out.append(
            {
                "variant": variant,
                "short": short,
                "long": long,
                "n": len(a),
                "acc_short": 100 * a.mean(),
                "acc_long": 100 * b.mean(),
                "drop_rate": rate,
                "ci_low": low,
                "ci_high": high,
            }
        )
    return pd.DataFrame(out)


def overhead_vs_gain(scored, *, control: str = "baseline"):
    """Per tagged variant and length: tag tokens added to the context (mean), and the
    accuracy change against ``control`` with its interval."""
    gains = versus_baseline(scored, control=control)
    tokens = (
        scored.groupby(["variant", "length"])[["tag_tokens", "context_tokens"]].mean().reset_index()
    )
    merged = gains.merge(tokens, on=["variant", "length"])
    merged["tag_share"] = merged["tag_tokens"] / merged["context_tokens"]  # a share in [0, 1]
    return merged


# ---------------------------------------------------------------- NovelQA
