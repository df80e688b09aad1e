"""Claims and the evidence for them: :class:`Estimate` (our number for a claim), the paired
estimate every claim uses, and the verdict rule, one place for every chapter and the
findings page.

Every claim is a paired difference (treatment minus control, in points) on the same items,
with a percentile bootstrap interval over the independent units (questions, problems or
key-value examples; rows that share one are resampled together) and a two-sided sign-flip
p-value on the per-unit differences. The verdict rule (:func:`verdict`):

* **reproduced**: the interval excludes 0 on the side of the paper's effect and the
  sign-flip p is below 0.05;
* **opposite direction**: the same on the other side;
* **not reproduced**: otherwise, when the interval excludes the paper's reported effect
  (an effect as large as the paper's is ruled out);
* **inconclusive at this n**: otherwise (the interval holds the paper's effect, or the
  paper gives no size to rule out).

Why both: when only a few units change between conditions, the percentile bootstrap can
exclude 0 where the exact test cannot (4 changed questions, all one way: p = 2/16), so a
direction is called only when the two agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .errors import DataFileError
from .metrics import paired_bootstrap_difference, sign_flip_test
from .paths import repo_root

VERDICTS = ("reproduced", "opposite direction", "not reproduced", "inconclusive at this n")
ALPHA = 0.05  # the sign-flip test's level, which must agree with the interval to call a direction


@dataclass(frozen=True)
class Estimate:
    """Our number for a claim: ``difference`` (points) with its 95% interval, the number of
    independent units ``n``, a sign-flip ``p``, and the two sides in words."""

    difference: float
    ci_low: float
    ci_high: float
    n: int
    p: float
    detail: str


@dataclass(frozen=True)
class Claim:
    """A paper's claim as the findings page lists it (a row of ``data/paper/claims.csv``)."""

    id: str
    paper: str
    chapter: str  # notebook name, e.g. "kv_retrieval"
    label: str  # MyST label of the chapter section that shows it
    claim: str
    comparison: str  # what our difference is, e.g. "middle minus first (pts)"
    paper_value: str
    direction: int  # +1 / -1: the sign of the paper's effect on our difference
    paper_effect: float | None  # the paper's effect in points, if it reports one
    setting: str  # our model/setting in words
    short: str = ""  # a few words for the forest plot


CLAIMS_FILE = Path("data") / "paper" / "claims.csv"


def read_claims(path: str | Path | None = None) -> list[Claim]:
    """The claims of ``data/paper/claims.csv`` (or ``path``), in the file's order."""
    path = Path(path) if path else repo_root() / CLAIMS_FILE
    if not path.exists():
        raise DataFileError(f"{path} is missing: the findings page lists the claims it holds")
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    return [
        Claim(
            r["id"],
            r["paper"],
            r["chapter"],
            r["label"],
            r["claim"],
            r["comparison"],
            r["paper_value"],
            int(r["direction"]),
            float(r["paper_effect"]) if r["paper_effect"] else None,
            r["setting"],
            r["short"],
        )
        for r in table.to_dict("records")
    ]


def chapter_verdicts(chapter: str, estimates: dict[str, Estimate]) -> dict[str, str]:
    """The verdict of each of ``chapter``'s claims (``data/paper/claims.csv``) it estimated."""
    return {
        c.id: verdict(estimates[c.id], c)
        for c in read_claims()
        if c.chapter == chapter and c.id in estimates
    }


def verdict(est: Estimate, claim: Claim) -> str:
    """One of :data:`VERDICTS` by the rule in the module docstring."""
    lo, hi = est.ci_low, est.ci_high
    if (lo > 0 or hi < 0) and est.p < ALPHA:
        return "reproduced" if (lo > 0) == (claim.direction > 0) else "opposite direction"
    if claim.paper_effect is not None and not lo <= claim.paper_effect <= hi:
        return "not reproduced"
    return "inconclusive at this n"


def paired_estimate(
    control: dict,
    treatment: dict,
    *,
    side_names: tuple[str, str] = ("control", "treatment"),
    seed: int = 0,
) -> Estimate:
    """``treatment`` minus ``control`` in points, over the units in both. Each side maps a unit
    (question, problem, example) to its score, already averaged over the unit's items."""
    units = sorted(set(control) & set(treatment))
    if not units:
        raise NoPairedUnits("no unit was run under both conditions of this claim")
    a = [control[u] for u in units]
    b = [treatment[u] for u in units]
    mean, lo, hi = paired_bootstrap_difference(a, b, seed=seed)
    p = sign_flip_test([y - x for x, y in zip(a, b)], seed=seed)
    detail = f"{side_names[1]} {100 * sum(b) / len(b):.1f}% vs {side_names[0]} {100 * sum(a) / len(a):.1f}%"
    return Estimate(100 * mean, 100 * lo, 100 * hi, len(units), p, detail)


class NoPairedUnits(DataFileError):
    """No unit has rows under both conditions of a claim (the rows to estimate it are not stored)."""


def estimable(estimates: dict[str, Callable[[], Estimate]]) -> dict[str, Estimate]:
    """The estimates, by claim id, whose rows are stored: a run that stored part of a chapter
    (a small scale, a block cut by a deadline) gets the claims its rows support; a claim
    whose two sides share no unit is left out (the findings page then names it)."""
    out = {}
    for claim_id, compute in estimates.items():
        try:
            out[claim_id] = compute()
        except NoPairedUnits:
            continue
    return out


def by_unit(
    rows, where: dict, score: Callable[[dict], float], unit=lambda r: r["example_id"]
) -> dict:
    """Mean score per unit over the rows whose condition matches ``where``."""
    sums: dict = {}
    for r in rows:
        if all(r["condition"].get(k) == v for k, v in where.items()):
            total, count = sums.get(unit(r), (0.0, 0))
            sums[unit(r)] = (total + score(r), count + 1)
    return {u: t / c for u, (t, c) in sums.items()}


VERDICT_MARK = {
    "reproduced": "✔ reproduced",
    "opposite direction": "✘ opposite direction",
    "not reproduced": "✘ not reproduced",
    "inconclusive at this n": "? inconclusive at this n",
}


PRECISION_TARGET = 10.0  # points: the book sizes each headline comparison to this 95% half-width


def half_width(row) -> float:
    """The wider side of a row's 95% interval, in points."""
    return max(row.ci_high - row.difference, row.difference - row.ci_low)
