"""The chapter's statistics over scored rows: accuracy by length with every curve starting at
the short problem, and paired changes from it (the task renders and scores; this reads)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ...metrics import summarize, unit_mean
from ...results import in_points, paired_comparison


def with_baseline(scored, kinds: Sequence[str] | None = None):
    """The scored table with the shared length-0 rows copied under each filler kind (and
    placement), so every curve starts at the short problem."""
    base = scored[scored["filler_tokens"] == 0]
    rest = scored[scored["filler_tokens"] > 0]
    kinds = kinds or sorted(rest["filler"].unique())
    copies = [
        base.assign(filler=k, placement=p)
        for k in kinds
        for p in sorted(rest.loc[rest["filler"] == k, "placement"].unique())
    ]
    return pd.concat([rest, *copies], ignore_index=True)


def accuracy_by_length(scored, score: str = "correct"):
    """Mean ``score`` per (model, mode, subtask, filler, placement, length) with Wilson 95% intervals."""
    return summarize(
        with_baseline(scored),
        ["model", "mode", "subtask", "filler", "placement", "filler_tokens"],
        score=score,
    )


def paired_differences(
    scored,
    *,
    condition: str,
    control,
    treatment,
    by: Sequence[str],
    score: str = "correct",
    seed: int = 0,
):
    """``treatment`` minus ``control`` of column ``condition`` within each ``by`` group, on the
    problems run under both (e.g. filler before vs between the evidence at each length, or one
    device against another): accuracy of each side and the paired change in points with its
    95% bootstrap interval over problems and a sign-flip p. Groups missing a side are left out."""
    out = []
    for key, group in scored.groupby(list(by)):
        key = key if isinstance(key, tuple) else (key,)
        sides = group[group[condition].isin([control, treatment])]
        res = paired_comparison(
            sides,
            condition=condition,
            control=control,
            treatment=treatment,
            item=["example_id"],
            score=score,
            seed=seed,
        )
        if not res["items"]:
            continue
        paired = sides.pivot_table(index="example_id", columns=condition, values=score).dropna()
        out.append(
            {
                **dict(zip(by, key)),
                "n": res["items"],
                str(control): 100 * paired[control].mean(),
                str(treatment): 100 * paired[treatment].mean(),
                **in_points(res, change="change", p="p_sign_flip"),
            }
        )
    return pd.DataFrame(out)


def drops_from_short(scored, score: str = "correct", seed: int = 0):
    """Paired change from length 0 at each longer length (same problems): mean difference in
    points, 95% paired bootstrap interval over problems, sign-flip p."""
    table = with_baseline(scored)
    keys = ["model", "mode", "subtask", "filler", "placement"]
    parts = []
    for length in sorted(set(table["filler_tokens"]) - {0}):
        part = paired_differences(
            table[table["filler_tokens"].isin([0, length])],
            condition="filler_tokens",
            control=0,
            treatment=length,
            by=keys,
            score=score,
            seed=seed,
        )
        if not part.empty:
            parts.append(part.assign(filler_tokens=length))
    columns = [*keys, "filler_tokens", "n", "change", "ci_low", "ci_high", "p_sign_flip"]
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)[columns].sort_values(
        [*keys, "filler_tokens"], ignore_index=True
    )


# ---------------------------------------------------------------------------------------------
# GSM8K read as a length curve, for the findings page's bounds on the effective length


BOUND_FILLER = "essay"  # real text: the padding most like a long context a user has


def padding_curve(solve: pd.DataFrame) -> pd.DataFrame:
    """GSM8K accuracy (``solve``: the solve rows scored) without padding and with
    :data:`BOUND_FILLER` padding between the evidence and the question, read as a length
    curve for a bound on the effective length (:func:`longctx.effective_length.bounds`):
    95% percentile bootstrap over problems seeded by their ids; ``length`` is the mean
    prompt tokens, ``point`` names the arm."""
    gsm = solve[(solve["subtask"] == "gsm8k") & solve["filler"].isin(["none", BOUND_FILLER])]
    gsm = gsm[gsm["placement"].isin(["none", "between"])]
    out = []
    for tokens, group in gsm.groupby("filler_tokens"):
        point = f"{BOUND_FILLER} padding" if tokens else "no padding"
        per_problem = group.groupby("problem")["correct"].mean()
        length = float(group["prompt_tokens"].mean())
        out.append({"point": point, "length": length, **unit_mean(per_problem)})
    return pd.DataFrame(out, columns=["point", "length", "n", "accuracy", "ci_low", "ci_high"])
