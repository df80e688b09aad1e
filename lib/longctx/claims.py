"""Claims and the evidence for them: :class:`Estimate` (our number for a claim), the paired
estimate every claim uses, and the verdict rule, one place for every chapter and the
findings page.

Every claim is a paired difference (treatment minus control, in points) on the same units,
with a percentile bootstrap interval over the independent units (questions, needles,
problems or key-value examples; rows that share one are averaged into it first) and an
exact two-sided sign-flip p on the per-unit differences (:func:`longctx.metrics.sign_flip_test`).
A correlation claim (``scale`` "r") is Pearson's r with its Fisher interval instead.

A claim states, before the data, its **kind**, an **equivalence margin** where the kind
needs one, and a **premise**: a condition on this reader's rows without which the claim
cannot be tested here. The verdict rule (:func:`judge`):

1. **premise not met**: the premise check fails (the control condition sits on a floor,
   the retrieval the claim assumes did not happen, the ceiling leaves less room than the
   paper's effect); the direction and magnitude are still shown beside it. A premise may
   join several checks with "and"; while a fact one of them needs is not measured on this
   reader's rows (its rows not all stored) and no other check fails, the claim is **premise
   not measured**: not judged yet, whatever its interval says.
2. A **directional** claim (the paper reports an effect with a sign):

   * **reproduced**: the interval excludes 0 on the side of the paper's effect and the
     exact p is below 0.05 (the two agree);
   * **opposite direction**: the same on the other side;
   * **not reproduced**: otherwise, when the interval excludes the paper's effect;
   * **inconclusive at this n**: otherwise.

   Its **magnitude** is judged apart, from the interval against the paper's effect: the
   paper's size inside our interval, ours larger, or ours smaller, with the ratio.
3. A **saturation** claim ("beyond X, accuracy barely improves", margin d): reproduced when
   the whole interval lies below +d; not reproduced when it lies above +d; else
   inconclusive.
4. A **no-effect** claim (margin d): reproduced when the whole interval lies within +-d
   (two one-sided tests at 2.5% each); not reproduced when it excludes 0 and the exact
   test agrees; else inconclusive. An interval that merely holds 0 is not agreement.
5. A **level** claim (a level L in %, the claims file's margin: "near-perfect" is 90):
   reproduced when the treatment arm's whole interval lies at or above L; not reproduced
   when it lies below L; else inconclusive. The difference and its magnitude against the
   paper's gain are shown beside it.

A claim whose chance floor is a number (a guess among its options) checks it before any
other premise: a control arm whose whole interval lies below the floor is "premise not met:
below chance", since a reader guessing worse than chance is not reading the task at all.

Why both interval and test for a direction: when only a few units change between
conditions, the percentile bootstrap can exclude 0 where the exact test cannot (4 changed
questions, all one way: p = 2/16), so a direction is called only when the two agree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from .errors import DataFileError
from .metrics import (
    bootstrap_interval,
    content_seed,
    holm,
    paired_bootstrap_difference,
    sign_flip_test,
)
from .paths import repo_root
from .report import estimate_ci, n_for_half_width
from .resampling import (
    STABILITY_RESAMPLES,
    correlation_resamples,
    joint_draws,
    paired_resamples,
)

VERDICTS = (
    "reproduced",
    "opposite direction",
    "not reproduced",
    "inconclusive at this n",
    "premise not met",
    "premise not measured",
)
UNMEASURED = VERDICTS[-1]  # a premise fact whose rows are not all stored: not judged yet
KINDS = ("directional", "saturation", "no-effect", "level")
ALPHA = 0.05  # the exact test's level, which must agree with the interval to call a direction


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
    control: float | None = None  # the control side's level (%), which premises check
    treatment: float | None = None  # the treatment side's level (%)
    facts: Mapping[str, float] = field(default_factory=dict)  # other premise quantities
    capped: float | None = None  # % of the claim's answers that used their whole token budget
    # The condition of the control and of the treatment rows: a tuple of conditions for a side
    # averaged over several (the U-shape's edges), None for one that has none (a contrast)
    sides: tuple = ()
    # How n is chosen: units a 95% interval of +-10 points needs at the observed spread of the
    # per-unit differences (report.n_for_half_width), and the share of units that changed.
    needed: int | None = None
    discordant: float | None = None
    # Units whose treatment prompts are their control prompts, exactly (None: not known, a
    # derived side): when every unit's are, nothing was changed and the claim is not testable.
    identical: int | None = None
    # Holm's adjustment of ``p`` over the claim's family (its ``family`` in the claims file),
    # the p the rule decides a direction with, and the number of tests it was adjusted over
    p_family: float | None = None
    family_size: int | None = None
    # The paired units (sorted ids) and each side's score on them, which the level and floor
    # intervals and the verdict's stability resample (empty: a derived side, not resampled)
    # (for a correlation, its x and y per unit)
    units: tuple = field(default=(), repr=False, compare=False)
    units_are_examples: bool = field(default=False, repr=False, compare=False)  # rows' example ids
    control_units: tuple[float, ...] = field(default=(), repr=False, compare=False)
    treatment_units: tuple[float, ...] = field(default=(), repr=False, compare=False)
    # The share of resamples of the units in which the verdict holds (None: not resampled)
    stability: float | None = None
    # side intervals already drawn (a resample's, from its own draws), by side
    side_intervals: Mapping[str, tuple[float, float]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def testable(self) -> bool:
        return self.identical is None or self.identical < self.n

    def side_interval(self, side: str) -> tuple[float, float] | None:
        """The 95% percentile interval (%) of one side's level (``control`` or ``treatment``)
        over the paired units, seeded by their ids (None: a derived side)."""
        if side in self.side_intervals:
            return self.side_intervals[side]
        values = self.control_units if side == "control" else self.treatment_units
        if not values:
            return None
        lo, hi = bootstrap_interval(values, seed=content_seed(self.units))
        return 100 * lo, 100 * hi

    @property
    def decision_p(self) -> float:
        """The exact test's p the rule uses: Holm-adjusted within a family, else as measured."""
        return self.p if self.p_family is None else self.p_family


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
    kind: str = "directional"  # one of KINDS
    margin: float | None = None  # equivalence margin (points) of a saturation/no-effect claim
    premise: Premise | None = None
    scale: str = "points"  # "points" (a difference) or "r" (a correlation)
    experiment: str = ""  # the store whose rows hold it, for the link to its samples
    floor: str = ""  # a chance level in % (with floor_why), "closed-book", or empty
    floor_why: str = ""
    # The same effect for the paper's other models, (model, effect): the magnitude is stated
    # against each; the verdict is judged against ``paper_effect`` alone.
    other_effects: tuple[tuple[str, float], ...] = ()
    # Tests a chapter adjusts together (Holm): the claims sharing this name, on one reader
    family: str = ""
    # The level (%) the paper's effect starts from (its control side), from the paper's
    # tables (data/paper/paper_baselines.csv): a relative change, and a size compared
    # relative to each baseline where ours and the paper's are far apart
    paper_control: float | None = None
    relative_sizes: bool = False  # the paper states its effects as relative changes

    def interval_text(self, difference: float, low: float, high: float) -> str:
        """Our number with its 95% interval in this claim's unit (points, or r); an undefined
        value (a correlation over a constant accuracy) says so instead of printing nan."""
        if difference != difference:
            return "undefined (constant accuracy)" if self.scale == "r" else "undefined"
        return estimate_ci(difference, low, high, scale=self.scale)

    def effect_text(self, value: float) -> str:
        """``value`` in this claim's unit, signed."""
        return f"r = {value:+.2f}" if self.scale == "r" else f"{value:+.1f}"


@dataclass(frozen=True)
class Quantity:
    """A premise quantity as a failed check names it: a few words, and its unit: a level
    (a share of items, "%") or a difference of two levels ("pts")."""

    words: str
    unit: str


LEVEL, POINTS = "%", " pts"
QUANTITIES = {
    "control": Quantity("control", LEVEL),
    "treatment": Quantity("treatment", LEVEL),
    "room": Quantity("room", POINTS),
    "recall_gain": Quantity("recall gain", POINTS),
    "accuracy": Quantity("accuracy", LEVEL),
    "hard_cost": Quantity("cost of hard negatives", POINTS),
    "edge_change": Quantity("change at the edges", POINTS),
    "recited_none": Quantity("recited, no filler", LEVEL),
    "recited": Quantity("recited", LEVEL),
    "kept": Quantity("still recited", LEVEL),
    "identified": Quantity("recitations naming the document", LEVEL),
    "base": Quantity("short-context base", LEVEL),
}


@dataclass(frozen=True)
class Check:
    """One condition of a premise: ``quantity`` at least ``minimum``. The quantity is
    ``control`` or ``treatment`` (a side's level in %), ``room`` (how far the treatment can
    move in the claim's direction: 100 - control for a gain, control for a loss) or a fact
    the chapter computes (``Estimate.facts``), each listed in ``QUANTITIES``; the minimum is a
    number or ``paper`` (the size of the paper's effect)."""

    quantity: str
    minimum: float | str

    def __post_init__(self) -> None:
        if self.quantity not in QUANTITIES:
            raise DataFileError(
                f"premise quantity '{self.quantity}' is unknown; it is one of "
                f"{', '.join(QUANTITIES)} (a new one gets its words and unit in QUANTITIES)"
            )

    _FORM = re.compile(r"^\s*([a-z_]+)\s*>=\s*(paper|-?[\d.]+)\s*$")

    @classmethod
    def parse(cls, check: str, where: str) -> Check:
        m = cls._FORM.match(check)
        if not m:
            raise DataFileError(
                f"{where}: premise '{check}' is not '<quantity> >= <number or paper>'"
                " (several joined by 'and')"
            )
        minimum = m.group(2)
        try:
            return cls(m.group(1), minimum if minimum == "paper" else float(minimum))
        except DataFileError as err:
            raise DataFileError(f"{where}: {err}") from None

    def value(self, est: Estimate, claim: Claim) -> float | None:
        if self.quantity == "control":
            return est.control
        if self.quantity == "treatment":
            return est.treatment
        if self.quantity == "room":
            if est.control is None:
                return None
            return 100 - est.control if claim.direction > 0 else est.control
        return est.facts.get(self.quantity)

    def threshold(self, claim: Claim) -> float:
        if self.minimum == "paper":
            if claim.paper_effect is None:
                raise DataFileError(f"claim {claim.id}: premise needs the paper's effect")
            return abs(claim.paper_effect)
        return float(self.minimum)


@dataclass(frozen=True)
class Premise:
    """What must hold on this reader's rows for a claim to be testable here: every one of
    its ``checks``; ``why`` says it in words, for the findings page. A chapter reports a
    fact as NaN when its rows are not all stored yet: the premise is then not measured, and
    the claim is not judged. Where part of the rows already decide a check whatever the rest
    give, the chapter may report the bound instead, with ``<fact>:bound`` -1 (at most) or +1
    (at least) among the facts; the check reads "at most"/"at least"."""

    checks: tuple[Check, ...]
    why: str

    @classmethod
    def parse(cls, text: str, why: str, where: str) -> Premise:
        """``"control >= 50"`` or several checks joined by ``and``."""
        return cls(tuple(Check.parse(part, where) for part in re.split(r"\s+and\s+", text)), why)

    @classmethod
    def single(cls, quantity: str, minimum: float | str, why: str) -> Premise:
        return cls((Check(quantity, minimum),), why)


PAPER_DIR = Path("data") / "paper"
CLAIMS_FILE = PAPER_DIR / "claims.csv"
# Claims of a chapter not yet in the book, fixed before its rows: the claims file's columns
PREREGISTERED_FILE = PAPER_DIR / "preregistered.csv"
# Where the paper's effect starts from, per claim: a fact of the paper, not part of a rule
BASELINES_FILE = PAPER_DIR / "paper_baselines.csv"
# Baselines further apart than this (points) compare sizes as relative changes
RELATIVE_GAP = 10.0


def paper_baselines() -> dict[str, dict]:
    """Each claim's paper control level in % and whether the paper states its effects as
    relative changes (:data:`BASELINES_FILE`), by claim id: :class:`Claim`'s fields."""
    path = repo_root() / BASELINES_FILE
    if not path.exists():
        return {}
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    return {
        r["claim"]: {
            "paper_control": float(r["paper_control"]),
            "relative_sizes": r["paper_states_relative"] == "1",
        }
        for r in table.to_dict("records")
    }


def paper_path(name: str) -> Path:
    """``data/paper/<name>.csv``, a table of a paper's own numbers: the one place they are
    typed (chapters, captions and prose read them from here); a one-line error if missing."""
    path = repo_root() / PAPER_DIR / f"{name}.csv"
    if not path.exists():
        raise DataFileError(f"{path} is missing: it holds the paper's own numbers")
    return path


def paper_frame(name: str) -> pd.DataFrame:
    """:func:`paper_path`'s table with numbers read as numbers (for plotting beside ours)."""
    return pd.read_csv(paper_path(name))


def paper_table(name: str) -> pd.DataFrame:
    """:func:`paper_path`'s table, every value as the text the paper printed."""
    return pd.read_csv(paper_path(name), dtype=str, keep_default_na=False)


def paper_percent(name: str, **match: str) -> float:
    """The one percentage (as a fraction) in ``data/paper/<name>.csv`` whose columns equal
    ``match``; a one-line error when none or several rows match, or the value is no percent."""
    table = paper_table(name)
    rows = table[np.logical_and.reduce([table[k] == v for k, v in match.items()])]
    where = ", ".join(f"{k}={v!r}" for k, v in match.items())
    if len(rows) != 1:
        raise DataFileError(f"data/paper/{name}.csv has {len(rows)} rows with {where}, not 1")
    value = rows["value"].iloc[0].strip()
    if not re.fullmatch(r"\d+(\.\d+)?%", value):
        raise DataFileError(f"data/paper/{name}.csv: {where} is {value!r}, not a percentage")
    return float(value[:-1]) / 100


def read_claims(path: str | Path | None = None) -> list[Claim]:
    """The claims of ``data/paper/claims.csv`` (or ``path``), in the file's order."""
    path = Path(path) if path else repo_root() / CLAIMS_FILE
    if not path.exists():
        raise DataFileError(f"{path} is missing: the findings page lists the claims it holds")
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    baselines = paper_baselines()
    return [
        replace(_claim(r, f"{path} row {k + 2}"), **baselines.get(r["id"], {}))
        for k, r in enumerate(table.to_dict("records"))
    ]


def _claim(r: dict, where: str) -> Claim:
    kind = r.get("kind") or "directional"
    if kind not in KINDS:
        raise DataFileError(f"{where}: kind '{kind}' is not one of {', '.join(KINDS)}")
    margin = float(r["margin"]) if r.get("margin") else None
    if kind != "directional" and margin is None:
        raise DataFileError(
            f"{where}: a {kind} claim needs its margin (a level for a level claim), fixed "
            "before the data"
        )
    premise = (
        Premise.parse(r["premise"], r.get("premise_why", ""), where) if r.get("premise") else None
    )
    return Claim(
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
        kind,
        margin,
        premise,
        r.get("scale") or "points",
        r.get("experiment", ""),
        r.get("floor", ""),
        r.get("floor_why", ""),
        _other_effects(r.get("other_effects", ""), where),
        r.get("family", ""),
    )


def _other_effects(text: str, where: str) -> tuple[tuple[str, float], ...]:
    """``"Mistral-7B: -24.0; Phi-2: +6.0"`` -> ``(("Mistral-7B", -24.0), ("Phi-2", 6.0))``."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        model, _, value = part.rpartition(":")
        try:
            out.append((model.strip(), float(value)))
        except ValueError:
            raise DataFileError(
                f"{where}: other_effects entry '{part}' is not '<model>: <effect>'"
            ) from None
        if not model.strip():
            raise DataFileError(f"{where}: other_effects entry '{part}' names no model")
    return tuple(out)


def chapter_verdicts(chapter: str, estimates: dict[str, Estimate]) -> dict[str, str]:
    """The verdict of each of ``chapter``'s claims (``data/paper/claims.csv``) it estimated."""
    return {
        c.id: verdict(estimates[c.id], c)
        for c in read_claims()
        if c.chapter == chapter and c.id in estimates
    }


@dataclass(frozen=True)
class Judgement:
    """The verdict on a claim and its three parts in words: ``direction`` (what the
    interval and the exact test say), ``magnitude`` (ours against the paper's effect) and
    ``premise`` (the check and its value; empty when the claim declares none)."""

    verdict: str
    direction: str
    magnitude: str
    premise: str
    premise_met: bool | None = True  # None: not measured on this reader's rows yet
    magnitude_short: str = ""  # the magnitude in a few words, for table cells
    premise_failed: str = ""  # the checks that failed, in a few words, shown in the cell


def judge(est: Estimate, claim: Claim) -> Judgement:
    """The verdict by the rule in the module docstring, with its parts."""
    premise_met, premise, failed = _premise(est, claim)
    if est.difference != est.difference:  # undefined on these rows (r of a constant)
        decided, direction = "inconclusive at this n", "undefined on these rows: no direction"
        size, short = "undefined", "undefined"
    else:
        if claim.kind == "directional":
            decided, direction = _directional(est, claim)
        elif claim.kind == "level":
            decided, direction = _level(est, claim)
        else:
            decided, direction = _equivalence(est, claim)
        size, short = magnitude(est, claim), _magnitude(est, claim)[1]
    return Judgement(
        decided if premise_met else "premise not met" if premise_met is False else UNMEASURED,
        direction,
        size,
        premise,
        premise_met,
        short,
        failed,
    )


def verdict(est: Estimate, claim: Claim) -> str:
    """One of :data:`VERDICTS` (:func:`judge` without its parts)."""
    return judge(est, claim).verdict


def decided_sign(est: Estimate) -> int:
    """+1 / -1 when the interval and the exact test agree on a sign, else 0: the rule's test
    of a direction, for chapters that word one."""
    if est.decision_p < ALPHA and (est.ci_low > 0 or est.ci_high < 0):
        return 1 if est.ci_low > 0 else -1
    return 0


def _directional(est: Estimate, claim: Claim) -> tuple[str, str]:
    sign = decided_sign(est)
    family = (
        f" (exact p {est.p_family:.3g}, Holm-adjusted over the {est.family_size} tests of "
        f"its family)"
        if est.p_family is not None
        else ""
    )
    if sign:
        same = sign == claim.direction
        return (
            "reproduced" if same else "opposite direction",
            ("the paper's direction" if same else "against the paper's direction") + family,
        )
    lo, hi = est.ci_low, est.ci_high
    if claim.paper_effect is not None and not lo <= claim.paper_effect <= hi:
        return "not reproduced", "no direction resolved; the paper's effect is ruled out" + family
    return "inconclusive at this n", "no direction resolved" + family


def _level(est: Estimate, claim: Claim) -> tuple[str, str]:
    interval = est.side_interval("treatment")
    if interval is None:
        raise DataFileError(f"claim {claim.id}: a level claim needs its treatment's units")
    lo, hi = interval
    level = f"{claim.margin:g}%"
    where = f"the treatment arm {est.treatment:.1f}% [{lo:.1f}, {hi:.1f}]"
    if lo >= claim.margin:
        return "reproduced", f"{where} lies at or above {level}"
    if hi < claim.margin:
        return "not reproduced", f"{where} lies below {level}"
    return "inconclusive at this n", f"{where} crosses {level}"


def _equivalence(est: Estimate, claim: Claim) -> tuple[str, str]:
    d, lo, hi = claim.margin, est.ci_low, est.ci_high
    bound = claim.effect_text(d).lstrip("+")
    if claim.kind == "saturation":
        if hi < d:
            return "reproduced", f"any gain is below the margin of {bound}"
        if lo > d:
            return "not reproduced", f"the gain exceeds the margin of {bound}"
        return "inconclusive at this n", f"the interval crosses the margin of {bound}"
    if -d < lo and hi < d:
        return "reproduced", f"within the margin of +-{bound}"
    if decided_sign(est):
        return "not reproduced", "an effect: the interval and the exact test exclude 0"
    return "inconclusive at this n", f"neither within +-{bound} nor an effect"


def magnitude(est: Estimate, claim: Claim) -> str:
    """Our effect against the paper's, from the interval: the paper's size inside it, ours
    larger or smaller (with the ratio of the point estimates), or no size to compare; then
    against each of the paper's other models."""
    words = _magnitude(est, claim)[0]
    if claim.kind == "directional" and claim.other_effects:
        words += "; " + "; ".join(
            f"against {model}'s {claim.effect_text(effect)}: "
            # the baseline file holds the first model's level, not this one's
            + _magnitude(
                est, replace(claim, paper_effect=effect, paper_control=None, relative_sizes=False)
            )[0]
            .replace("the paper's", f"{model}'s")
            .replace("paper's", f"{model}'s")
            for model, effect in claim.other_effects
        )
    return words


def _magnitude(est: Estimate, claim: Claim) -> tuple[str, str]:
    """:func:`magnitude` in words, and in a few words (empty for a margin). Where our
    baseline and the paper's differ by more than :data:`RELATIVE_GAP` points, a point
    compares unlike things: the paper's effect is taken as a relative change, applied to our
    baseline, and ours is sized against that."""
    effect = claim.paper_effect
    if effect is None:
        return "the paper gives no size", "no size to compare"
    if claim.kind not in ("directional", "level"):
        return "a margin, not a size", ""
    ours, theirs = est.control, claim.paper_control
    apart = ours and theirs and (claim.relative_sizes or abs(ours - theirs) > RELATIVE_GAP)
    if claim.kind == "directional" and apart:
        scaled = replace(
            claim, paper_effect=effect / theirs * ours, paper_control=None, relative_sizes=False
        )
        words, short = _magnitude(est, scaled)
        if short == "opposite sign":  # no size to compare, on either scale
            return words, short
        return (
            f"{words}, as relative changes (ours from {ours:.1f}%, the paper's from {theirs:g}%)",
            f"{short} (relative)" if short else short,
        )
    lo, hi = est.ci_low, est.ci_high
    ratio = est.difference / effect if effect else float("nan")
    # A ratio of opposite signs says nothing about size: none is given then.
    times = f"{ratio:.1f}x the paper's" if ratio == ratio and ratio > 0 else ""
    if lo <= effect <= hi:
        inside = "the paper's size is inside our interval"
        return (f"{inside} ({times})" if times else inside), "the paper's size inside"
    beyond = lo > effect if effect > 0 else hi < effect
    if beyond:
        return f"larger than the paper's: {times}", times.replace("x", "×", 1)
    if ratio < 0:
        return "the opposite sign to the paper's", "opposite sign"
    return f"smaller than the paper's: {times}", times.replace("x", "×", 1)


def relative_change(est: Estimate, claim: Claim) -> tuple[float | None, float | None]:
    """Ours and the paper's effect as a share (%) of the level each starts from (the
    control side); None where a level is unknown or zero, or the claim is not in points."""
    if claim.scale != "points":
        return None, None
    ours = 100 * est.difference / est.control if est.control else None
    effect, base = claim.paper_effect, claim.paper_control
    return ours, (100 * effect / base if effect is not None and base else None)


def _premise(est: Estimate, claim: Claim) -> tuple[bool | None, str, str]:
    """Whether the premise holds (None: a fact it needs is not measured on these rows yet),
    each check with its value in words, and the checks that failed."""
    below = _below_chance(est, claim)
    if below:
        return False, below, "below chance"
    premise = claim.premise
    if premise is None:
        return True, "", ""
    parts, failing, unmeasured = [], [], False
    for check in premise.checks:
        value, threshold = check.value(est, claim), check.threshold(claim)
        if value is None:
            raise DataFileError(
                f"claim {claim.id}: its premise needs '{check.quantity}', which its chapter "
                "does not compute"
            )
        quantity = QUANTITIES[check.quantity]
        unit = quantity.unit
        if value != value:
            parts.append(f"{check.quantity} not measured yet (needs >= {threshold:g}{unit})")
            unmeasured = True
            continue
        ok = value >= threshold
        # a bound: rows part stored, but enough to decide this check whatever the rest give
        bound = {-1.0: "at most ", 1.0: "at least "}.get(
            est.facts.get(f"{check.quantity}:bound"), ""
        )
        measured = f"{bound}{value:.1f}{unit} {'>=' if ok else '<'} {threshold:g}{unit}"
        parts.append(f"{check.quantity} {measured}")
        if not ok:
            failing.append(f"{quantity.words} {measured}")
    # a check that fails decides, whether or not another is measured
    met = False if failing else None if unmeasured else True
    return met, f"{premise.why}: {', '.join(parts)}", ", ".join(failing)


def chance_floor(claim: Claim) -> float | None:
    """The claim's chance level in %, where its floor is a number (not "closed-book")."""
    try:
        return float(claim.floor) if claim.floor else None
    except ValueError:
        return None


def _below_chance(est: Estimate, claim: Claim) -> str:
    """The premise's failure in words when the control arm's whole interval lies below the
    claim's chance floor, else empty (no numeric floor, or no control units to resample)."""
    floor = chance_floor(claim)
    # a correlation's units are its x and y, not a control arm's scores
    interval = est.side_interval("control") if floor is not None and claim.scale != "r" else None
    if interval is None or interval[1] >= floor:
        return ""
    lo, hi = interval
    return (
        f"below chance: the control arm {est.control:.1f}% [{lo:.1f}, {hi:.1f}] lies below "
        f"the {floor:g}% of {claim.floor_why}"
    )


def paired_estimate(
    control: dict,
    treatment: dict,
    *,
    side_names: tuple[str, str] = ("control", "treatment"),
) -> Estimate:
    """``treatment`` minus ``control`` in points, over the units in both. Each side maps a unit
    (question, problem, example) to its score, already averaged over the unit's items. The
    interval's draws and the test's flips are seeded by the sorted unit ids: the same units in
    any order, on any machine, give the same bytes."""
    units = sorted(set(control) & set(treatment))
    if not units:
        raise NoPairedUnits("no unit was run under both conditions of this claim")
    seed = content_seed(units)
    a = [control[u] for u in units]
    b = [treatment[u] for u in units]
    mean, lo, hi = paired_bootstrap_difference(a, b, seed=seed)
    diffs = [y - x for x, y in zip(a, b)]
    p = sign_flip_test(diffs, seed=seed)
    level_a, level_b = 100 * sum(a) / len(a), 100 * sum(b) / len(b)
    detail = f"{side_names[1]} {level_b:.1f}% vs {side_names[0]} {level_a:.1f}%"
    prompts = [getattr(side, "prompts", None) for side in (control, treatment)]
    identical = (
        sum(prompts[0].get(u) == prompts[1].get(u) is not None for u in units)
        if all(prompts)
        else None
    )
    rows = getattr(control, "rows", 0) + getattr(treatment, "rows", 0)
    capped = getattr(control, "capped", 0) + getattr(treatment, "capped", 0)
    return Estimate(
        100 * mean,
        100 * lo,
        100 * hi,
        len(units),
        p,
        detail,
        control=level_a,
        treatment=level_b,
        capped=100 * capped / rows if rows else None,
        sides=tuple(getattr(side, "where", None) for side in (control, treatment)),
        needed=n_for_half_width(diffs),
        discordant=sum(d != 0 for d in diffs) / len(diffs),
        identical=identical,
        units=tuple(units),
        units_are_examples=all(getattr(side, "by_example", False) for side in (control, treatment)),
        control_units=tuple(a),
        treatment_units=tuple(b),
    )


SIZING_CAPTION = (
    "How n was chosen: per comparison, the units paired, the share whose outcome changed "
    "between the two sides, and the units a 95% interval of ±10 points needs at that spread."
)


def sizing_table(comparisons: Mapping[str, Estimate], unit: str) -> pd.DataFrame:
    """How n was chosen, from the estimates themselves: per comparison, the units paired,
    the share whose outcome changed, and the units a 95% half-width of 10 points needs at
    the observed spread (:attr:`Estimate.needed`). A comparison with no estimate (its rows
    not stored) is left out."""
    return pd.DataFrame(
        [
            {
                "comparison": name,
                unit: est.n,
                "discordant": f"{est.discordant:.0%}",
                f"{unit} for ±10 pts": est.needed,
            }
            for name, est in comparisons.items()
            if est is not None and est.needed is not None
        ],
        columns=["comparison", unit, "discordant", f"{unit} for ±10 pts"],
    )


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
    return with_stability(adjusted_in_families(out))


def adjusted_in_families(
    estimates: dict[str, Estimate], claims: list[Claim] | None = None
) -> dict[str, Estimate]:
    """``estimates`` with each family's exact p Holm-adjusted over its members present
    (``family`` in the claims file): every page, the matrix and ``longctx findings`` judge
    from the estimates of :func:`estimable`, so all of them adjust alike."""
    family_of = {c.id: c.family for c in (claims if claims is not None else read_claims())}
    members: dict[str, list[str]] = {}
    for claim_id in estimates:
        if family_of.get(claim_id):
            members.setdefault(family_of[claim_id], []).append(claim_id)
    out = dict(estimates)
    for ids in members.values():
        for claim_id, p in zip(ids, holm([estimates[i].p for i in ids])):
            out[claim_id] = replace(estimates[claim_id], p_family=p, family_size=len(ids))
    return out


STABLE = 0.9  # a verdict that holds in fewer resamples than this is "fragile"


def is_fragile(verdict: str, stability: float | None) -> bool:
    """A verdict that says something (not "inconclusive at this n") but holds in fewer than
    :data:`STABLE` of the resamples of its units."""
    return verdict != "inconclusive at this n" and stability is not None and stability < STABLE


def verdict_state(verdict: str, stability: float | None) -> str:
    """The verdict as the verdict log records it: "fragile (<verdict>)" when fragile."""
    return f"fragile ({verdict})" if is_fragile(verdict, stability) else verdict


def with_stability(
    estimates: dict[str, Estimate], claims: list[Claim] | None = None
) -> dict[str, Estimate]:
    """``estimates`` with each one's :attr:`Estimate.stability`: the share of
    :data:`~longctx.resampling.STABILITY_RESAMPLES` resamples of its units in which
    :func:`judge` gives the verdict it gives on all of them. In each resample the interval
    and the exact test (both exact where the scores are small fractions:
    :func:`~longctx.resampling.paired_resamples`), both sides' levels and the Holm adjustment
    over the family are recomputed; a fact the chapter computes over the whole run (a
    recitation rate) is held as it is. Draws are seeded by the unit ids."""
    by_id = {c.id: c for c in (claims if claims is not None else read_claims())}
    groups: dict[str, list[str]] = {}
    for claim_id, est in estimates.items():
        if claim_id in by_id and est.units:
            groups.setdefault(by_id[claim_id].family or f"claim {claim_id}", []).append(claim_id)
    out = dict(estimates)
    for ids in groups.values():
        shares = _stability([estimates[i] for i in ids], [by_id[i] for i in ids])
        for claim_id, share in zip(ids, shares):
            out[claim_id] = replace(estimates[claim_id], stability=share)
    return out


def _stability(ests: list[Estimate], claims: list[Claim]) -> list[float | None]:
    try:
        verdicts = [judge(e, c).verdict for e, c in zip(ests, claims)]
    except DataFileError:  # a premise this reader's rows cannot feed: nothing to resample
        return [None] * len(ests)
    again = [
        _resamples(e, c, positions)
        for e, c, positions in zip(ests, claims, joint_draws([e.units for e in ests]))
    ]
    if len(ests) > 1 and all(e.p_family is not None for e in ests):
        adjusted = np.array([holm(ps) for ps in zip(*(r["p"] for r in again))]).T
        for r, p_family in zip(again, adjusted):
            r["p_family"] = p_family
    held = [0] * len(ests)
    for b in range(STABILITY_RESAMPLES):
        for k, (e, c, r) in enumerate(zip(ests, claims, again)):
            held[k] += judge(_at(e, r, b), c).verdict == verdicts[k]
    return [h / STABILITY_RESAMPLES for h in held]


def _resamples(est: Estimate, claim: Claim, positions: np.ndarray) -> dict[str, np.ndarray]:
    """``est``'s numbers on every resample of its units (``positions``; -1: a unit of another
    member of its family, not its own)."""
    a, b = np.asarray(est.control_units), np.asarray(est.treatment_units)
    if claim.scale == "r":
        return correlation_resamples(a, b, positions)
    sides = ["treatment"] if claim.kind == "level" else []
    if chance_floor(claim) is not None:
        sides.append("control")
    return paired_resamples(a, b, positions, sides)


def _at(est: Estimate, resamples: dict[str, np.ndarray], b: int) -> Estimate:
    """``est`` as resample ``b`` gives it (facts the chapter computes over the run kept)."""
    values = {k: float(v[b]) for k, v in resamples.items()}
    intervals = {
        side: (values.pop(f"{side}_low"), values.pop(f"{side}_high"))
        for side in ("control", "treatment")
        if f"{side}_low" in values
    }
    values.setdefault("p_family", None)
    return replace(est, side_intervals=intervals, **values)


class UnitScores(dict):
    """Mean score per unit, remembering how many rows went in and how many of their answers
    hit the token cap (an answer cut short can score 0 for want of room, not of reading)."""

    rows: int = 0
    capped: int = 0
    where: dict | tuple | None = None  # the condition its rows matched (a tuple: several)
    by_example: bool = False  # its units are the rows' example ids
    prompts: dict | None = None  # unit -> the sorted prompts (and sampling) its rows were asked


def hit_cap(row: dict) -> bool:
    """Whether a generation stopped because it used its whole token budget."""
    if row.get("stop_reason") is not None:
        return row["stop_reason"] == "max_new_tokens"
    budget = (row.get("params") or {}).get("max_new_tokens")
    return bool(budget) and not row.get("stopped_by_rule") and row.get("new_tokens", 0) >= budget


def rows_filter(est: Estimate) -> str | None:
    """The sample browser's condition filter that shows exactly a claim's rows: each
    condition its rows came from as ``field: value`` pairs (``;`` between them), the
    conditions joined by ``||`` (a side derived from several conditions, such as the mean of
    the first and last positions, names each); None where a side has no condition (a
    factorial contrast over every cell)."""
    if not est.sides or any(not side for side in est.sides):
        return None
    conditions: list[dict] = []
    for side in est.sides:
        for c in side if isinstance(side, tuple) else (side,):
            if c not in conditions:
                conditions.append(c)
    return " || ".join("; ".join(f"{k}: {v}" for k, v in sorted(c.items())) for c in conditions)


def rows_fragment(est: Estimate) -> str:
    """The sample browser's address fragment that shows the rows ``est`` was computed from:
    its conditions (:func:`rows_filter`) and, where its units are the rows' examples, the
    ids it pairs (``units``); empty where neither is known."""
    parts = []
    if chosen := rows_filter(est):
        parts.append("condition=" + quote(chosen))
    if est.units and est.units_are_examples:
        parts.append("units=" + "+".join(quote(str(u)) for u in est.units))
    return "&".join(parts)


def example_of(row: dict) -> str:
    """A row's example id: the unit of most claims (a question, a record, a problem)."""
    return row["example_id"]


def by_unit(rows, where: dict, score: Callable[[dict], float], unit=example_of) -> UnitScores:
    """Mean score per unit over the rows whose condition matches ``where``."""
    sums: dict = {}
    asked: dict = {}
    out = UnitScores()
    out.where = dict(where)
    out.by_example = unit is example_of
    for r in rows:
        if all(r["condition"].get(k) == v for k, v in where.items()):
            total, count = sums.get(unit(r), (0.0, 0))
            sums[unit(r)] = (total + score(r), count + 1)
            out.rows += 1
            out.capped += hit_cap(r) if "output" in r else 0
            if "prompt" in r:
                params = json.dumps(r.get("params"), sort_keys=True, default=str)
                asked.setdefault(unit(r), []).append((str(r["prompt"]), params))
    out.update({u: t / c for u, (t, c) in sums.items()})
    if asked and len(asked) == len(sums):  # every unit's rows carry their prompts
        out.prompts = {u: tuple(sorted(p)) for u, p in asked.items()}
    return out


VERDICT_MARK = {
    "reproduced": "✔ reproduced",
    "opposite direction": "✘ opposite direction",
    "not reproduced": "✘ not reproduced",
    "inconclusive at this n": "? inconclusive at this n",
    "premise not met": "∅ premise not met",
    "premise not measured": "◌ premise not measured",
}


PRECISION_TARGET = 10.0  # points: the book sizes each headline comparison to this 95% half-width


def half_width(row) -> float:
    """The wider side of a row's 95% interval, in points."""
    return max(row.ci_high - row.difference, row.difference - row.ci_low)


def underpowered(row, scale: str) -> bool:
    """Whether an estimate (an :class:`Estimate` or a findings row) of a claim in ``scale`` is
    wider than :data:`PRECISION_TARGET` on a side; intervals print to 0.1, so a half-width
    that rounds to the target meets it. A correlation has no target in points."""
    return scale == "points" and round(half_width(row), 1) > PRECISION_TARGET
