"""Open-domain statistics over scored rows: Figure 11's recall and accuracy curves and the
step-by-step changes that show where the reader saturates."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ...metrics import summarize
from ...results import in_points, paired_comparison


def curve(table, *, score: str = "correct"):
    """Figure 11's two curves from scored rows (columns ``k``, ``recall``, ``score``,
    ``example_id``): per k and measure (``retriever recall@k``, ``reader accuracy``), the
    share with its Wilson 95% interval over questions. One row per (k, measure)."""
    long = pd.concat(
        [
            table.assign(measure="retriever recall@k", value=table["recall"].astype(float)),
            table.assign(measure="reader accuracy", value=table[score].astype(float)),
        ]
    )
    return summarize(long, ["measure", "k"], score="value")


def saturation(table, ks: Sequence[int] | None = None, *, score: str = "correct", seed: int = 0):
    """Each k minus the next smaller one, for reader accuracy and for recall: paired over the
    questions asked at both (points, bootstrap 95% interval, sign-flip p). Saturation means
    recall still rises where accuracy no longer does."""
    ks = sorted(set(ks or table["k"]))
    out = []
    for small, large in zip(ks, ks[1:]):
        sub = table[table["k"].isin([small, large])]
        for measure, column in (("reader accuracy", score), ("retriever recall@k", "recall")):
            res = paired_comparison(
                sub.assign(value=sub[column].astype(float)),
                condition="k",
                control=small,
                treatment=large,
                item=["example_id"],
                score="value",
                seed=seed,
            )
            out.append(
                {
                    "from k": small,
                    "to k": large,
                    "measure": measure,
                    "questions": res["items"],
                    **in_points(res, change="change", p="p_sign_flip"),
                }
            )
    return pd.DataFrame(out)
