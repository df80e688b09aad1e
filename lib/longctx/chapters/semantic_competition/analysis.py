"""The paper's Tables 1 and 2 from scored rows: one matched control's rows, each condition's
EM, inclusion and F1, and the paired recovery from hard to far competitors."""

from __future__ import annotations

import pandas as pd

from ...errors import ParameterError
from ...metrics import (
    bootstrap_interval,
)
from ...results import paired_comparison

METRIC_LABELS = {"em": "EM", "inclusion": "Incl.", "f1": "F1"}


def _fmt(metric: str, value: float) -> str:
    """EM and inclusion in percentage points (1 decimal), F1 on [0, 1] (3 decimals), as the paper."""
    return f"{100 * value:.1f}" if metric != "f1" else f"{value:.3f}"


def matched_rows(table, num_snippets: int, retriever: str = "bm25"):
    """Gold-only rows and the hard and far rows with ``num_snippets`` snippets (one matched control)."""
    keep = (table["condition"] == "gold") | (
        (table["num_snippets"] == num_snippets)
        & (table["retriever"] == retriever)
        & table["condition"].isin(["hard", "far"])
    )
    return table[keep]


def condition_summary(table, by=("model", "condition"), seed: int = 0):
    """Mean EM, inclusion and F1 (95% bootstrap interval over questions) and mean input
    tokens per group; the paper's Table 1 columns."""
    order = {"gold": 0, "hard": 1, "far": 2}
    rows = []
    for keys, g in table.groupby(list(by), sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        row = {**dict(zip(by, keys)), "questions": g["example_id"].nunique()}
        for m, label in METRIC_LABELS.items():
            lo, hi = bootstrap_interval(g[m].tolist(), seed=seed, clusters=g["example_id"].tolist())
            row[label] = _fmt(m, g[m].mean())
            row[f"{label} 95% CI"] = f"[{_fmt(m, lo)}, {_fmt(m, hi)}]"
        row["Tok."] = round(g["prompt_tokens"].mean())
        rows.append(row)
    out = pd.DataFrame(rows)
    if "condition" in by:
        out = out.sort_values(
            [*[b for b in by if b != "condition"], "condition"],
            key=lambda s: s.map(order) if s.name == "condition" else s,
            kind="stable",
        )
    return out.reset_index(drop=True)


# recovery_table's numeric columns (points; F1 in its own unit), beside the formatted ones
RECOVERY_NUMBERS = ["delta", "delta_low", "delta_high"]


def recovery_table(
    table, by=("model",), control: str = "hard", treatment: str = "far", seed: int = 0
):
    """Paired ``treatment`` minus ``control`` per group and metric (the paper's Table 2):
    the mean difference over questions, its 95% paired bootstrap interval over question
    ids and the two-sided sign-flip randomization p-value, formatted (Δ, 95% CI) and as
    numbers (:data:`RECOVERY_NUMBERS`). ``table`` must hold one row
    per question and condition within each group (select one matched control first)."""
    rows = []
    for keys, g in table.groupby(list(by), sort=False) if by else [((), table)]:
        keys = keys if isinstance(keys, tuple) else (keys,)
        if g.duplicated(["example_id", "condition"]).any():
            raise ParameterError(
                f"{dict(zip(by, keys))}: several rows per question and condition; "
                "select one matched control (matched_rows) first"
            )
        for m, label in METRIC_LABELS.items():
            points = 1 if m == "f1" else 100  # F1 stays in its own unit
            res = paired_comparison(
                g,
                condition="condition",
                control=control,
                treatment=treatment,
                item=["example_id"],
                score=m,
                seed=seed,
            )
            sign = "+" if res["difference"] >= 0 else ""
            rows.append(
                {
                    **dict(zip(by, keys)),
                    "metric": label,
                    "questions": res["items"],
                    "delta": res["difference"] * points,
                    "delta_low": res["ci_low"] * points,
                    "delta_high": res["ci_high"] * points,
                    "Δ": sign + _fmt(m, res["difference"]),
                    "95% CI": f"[{_fmt(m, res['ci_low'])}, {_fmt(m, res['ci_high'])}]",
                    "p": res["p_sign_flip"],
                }
            )
    return pd.DataFrame(rows)
