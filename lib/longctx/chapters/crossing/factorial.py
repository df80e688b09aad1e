"""Crossing the papers: several context manipulations varied together on one task.

Each factor has two levels, each level a list of :mod:`longctx.transforms`. The design is a
two-level factorial, full (2^k cells) or the half fraction whose defining relation is the
product of all k factors (2^(k-1) cells; for k = 6 that is resolution VI: main effects and
two-way interactions are aliased only with five- and four-way interactions, which we
assume negligible). Every question is asked in every cell, so all comparisons are paired
within question.

Effects are estimated by a linear probability model on the +-1/2-coded factors, fitted by
GEE with an independence working correlation and the robust (sandwich) covariance
clustered by question (statsmodels): a main effect's coefficient is the accuracy
difference high minus low, in points, averaged over the other factors; a two-way
coefficient is the difference of that factor's effect between the two levels of the
other. A logistic GEE on the same design gives the same signs as a check.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ... import transforms as T
from ...claims import ALPHA, paired_estimate
from ...errors import ParameterError
from ...metrics import bootstrap_interval, content_seed, holm, sign_flip_test
from ...plots import term_words
from ...report import format_p, points_ci
from ...tasks import render


@dataclass(frozen=True)
class Factor:
    """A named two-level factor: the transforms each level adds, and the paper's claim
    about the high level (``expected``: +1 helps, -1 hurts, 0 no effect)."""

    name: str
    low: str
    high: str
    low_transforms: tuple = ()
    high_transforms: tuple = ()
    source: str = ""
    expected: int = 0
    claim: str = ""


@dataclass(frozen=True)
class Design:
    factors: tuple[Factor, ...]
    cells: tuple[tuple[int, ...], ...]  # each cell: one level (0 low, 1 high) per factor
    fraction: str  # "full" or the defining relation, e.g. "I = ABCDEF"
    resolution: int | None = None
    notes: str = field(default="", compare=False)

    def levels(self, cell: Sequence[int]) -> dict[str, str]:
        return {f.name: (f.high if x else f.low) for f, x in zip(self.factors, cell)}

    def factor(self, name: str) -> Factor:
        for f in self.factors:
            if f.name == name:
                return f
        raise ParameterError(
            f"no factor '{name}' in this design; factors: {', '.join(f.name for f in self.factors)}"
        )


LETTERS = "ABCDEFGHIJ"


def two_level_design(factors: Sequence[Factor], fraction: str = "half") -> Design:
    """The full 2^k design, or (``fraction="half"``) the 2^(k-1) cells whose levels' product
    (in +-1 coding) is +1, i.e. the defining relation I = AB...K (resolution k)."""
    k = len(factors)
    if k < 2 or k > len(LETTERS):
        raise ParameterError(f"a crossing needs 2 to {len(LETTERS)} factors, got {k}")
    if len({f.name for f in factors}) != k:
        raise ParameterError("factor names must be distinct")
    full = list(itertools.product((0, 1), repeat=k))
    if fraction == "full":
        return Design(tuple(factors), tuple(full), "full", None)
    if fraction != "half":
        raise ParameterError(f"fraction must be full or half, got {fraction!r}")
    half = [c for c in full if _product(c) == 1]
    relation = "I = " + LETTERS[:k]
    return Design(
        tuple(factors),
        tuple(half),
        relation,
        k,
        notes=f"2^({k}-1) half fraction, {relation}: each main effect is aliased with the "
        f"{k - 1}-way interaction of the others, each two-way with a {k - 2}-way one",
    )


def _product(cell: Sequence[int]) -> int:
    out = 1
    for x in cell:
        out *= 1 if x else -1
    return out


def aliases(design: Design, max_order: int = 2) -> dict[str, str]:
    """For a half fraction: the effect each main effect and two-way interaction is aliased
    with (its complement in the defining word)."""
    if design.fraction == "full":
        return {}
    k = len(design.factors)
    names = [f.name for f in design.factors]
    out = {}
    for order in range(1, max_order + 1):
        for combo in itertools.combinations(range(k), order):
            rest = [names[i] for i in range(k) if i not in combo]
            out[" x ".join(names[i] for i in combo)] = " x ".join(rest)
    return out


def cell_transforms(
    design: Design, cell: Sequence[int], order: Sequence[str] | None = None
) -> list:
    """The transforms of one cell, in the order the factors are listed (or ``order``)."""
    chosen = {
        f.name: (f.high_transforms if x else f.low_transforms) for f, x in zip(design.factors, cell)
    }
    names = list(order) if order is not None else [f.name for f in design.factors]
    return [t for n in names for t in chosen[n]]


def requests(
    design: Design,
    examples: Sequence[T.Example],
    order: Sequence[str] | None = None,
    base: Sequence = (),
) -> list:
    """One request per (example, cell): ``base`` transforms, then the cell's; each
    request's condition also names the cell's levels (``crossing``)."""
    out = []
    for ex in examples:
        for cell in design.cells:
            req = render(T.apply(ex, [*base, *cell_transforms(design, cell, order)]))
            out.append(replace(req, condition={**req.condition, "crossing": design.levels(cell)}))
    return out


# ---------------------------------------------------------------------------------------------
# Analysis


def coded(table, design: Design):
    """The rows with one +-1/2 column per factor (+1/2 at the high level)."""
    out = table.copy()
    for f in design.factors:
        levels = out["crossing"].map(lambda c, name=f.name: c[name])
        unknown = set(levels) - {f.low, f.high}
        if unknown:
            raise ParameterError(f"factor {f.name}: rows at unknown levels {sorted(unknown)}")
        out[f.name] = (levels == f.high).astype(float) - 0.5
    return pd.DataFrame(out)


def effects(
    table,
    design: Design,
    *,
    cluster: str = "example_id",
    score: str = "correct",
    interactions: bool = True,
    family: str = "linear",
):
    """Main effects (and two-way interactions) with 95% intervals clustered by ``cluster``.

    ``family="linear"``: GEE linear probability model, coefficients in points (x100);
    ``"logistic"``: GEE logit, coefficients as log odds ratios. Returns one row per term:
    estimate, ci_low, ci_high, p, n (rows) and clusters.
    """
    import statsmodels.api as sm
    from statsmodels.genmod.cov_struct import Independence

    data = coded(table, design).sort_values(cluster, kind="stable")
    names = [f.name for f in design.factors]
    X = data[names].copy()
    if interactions:
        for a, b in itertools.combinations(names, 2):
            # On the +-1/4 product, the coefficient is a's effect at b high minus at b low.
            X[f"{a} x {b}"] = data[a] * data[b]
    X = sm.add_constant(X)
    fam = sm.families.Gaussian() if family == "linear" else sm.families.Binomial()
    groups = pd.factorize(data[cluster])[0]
    fit = sm.GEE(
        data[score].astype(float), X, groups=groups, family=fam, cov_struct=Independence()
    ).fit()
    ci = fit.conf_int()
    scale = 100.0 if family == "linear" else 1.0
    rows = []
    for term in X.columns[1:]:
        rows.append(
            {
                "term": term,
                "kind": "interaction" if " x " in term else "main",
                "estimate": scale * fit.params[term],
                "ci_low": scale * ci.loc[term, 0],
                "ci_high": scale * ci.loc[term, 1],
                "p": float(fit.pvalues[term]),
                "n": len(data),
                "clusters": int(np.unique(groups).size),
            }
        )
    return pd.DataFrame(rows)


def contrast_effects(table, design: Design, *, cluster: str = "example_id", score: str = "correct"):
    """Main effects and two-way interactions as per-question contrasts, with the findings
    page's statistics: per question, a main effect is the mean score at the high level minus
    at the low level, and an interaction is a's effect at b high minus at b low (twice the
    mean where a and b share a level minus where they differ); over questions, the mean (in
    points), the percentile bootstrap interval and the exact sign-flip p. In the balanced
    fraction the means are the linear GEE's coefficients, but the interval and the test need
    no large-sample approximation, which 24 clusters do not give. Each family (the main
    effects; the interactions) gets Holm-adjusted p-values (``p_holm``). Returns one row per
    term: term, kind, estimate, ci_low, ci_high, p, p_holm, clusters."""
    data = coded(table, design)
    names = [f.name for f in design.factors]
    contrasts = {}
    for name in names:
        means = data.groupby([cluster, name])[score].mean().unstack()
        contrasts[name] = ("main", means[0.5] - means[-0.5])
    for a, b in itertools.combinations(names, 2):
        same = (data[a] * data[b] > 0).rename("same")
        means = data.assign(same=same).groupby([cluster, "same"])[score].mean().unstack()
        contrasts[f"{a} x {b}"] = ("interaction", 2 * (means[True] - means[False]))
    rows = []
    for term, (kind, per_unit) in contrasts.items():
        d = per_unit.dropna()
        rows.append({"term": term, "kind": kind, **_summary(d), "clusters": len(d)})
    return _holm_within(pd.DataFrame(rows), "kind")


def _summary(per_unit: pd.Series) -> dict:
    """Mean of per-unit differences in points, its bootstrap interval and the exact p, seeded
    by the units' ids (as :func:`longctx.claims.paired_estimate` seeds its own)."""
    per_unit = per_unit.sort_index()  # the draws index units in one order, whatever came in
    d, seed = per_unit.tolist(), content_seed(per_unit.index)
    lo, hi = bootstrap_interval(d, seed=seed)
    return {
        "estimate": 100 * sum(d) / len(d),
        "ci_low": 100 * lo,
        "ci_high": 100 * hi,
        "p": sign_flip_test(d, seed=seed),
    }


def _holm_within(table: pd.DataFrame, family: str) -> pd.DataFrame:
    """``table`` with ``p_holm``: Holm's adjustment within each value of ``family``."""
    table = table.copy()
    table["p_holm"] = float("nan")
    for _, rows in table.groupby(family, sort=False):
        table.loc[rows.index, "p_holm"] = holm(rows["p"].tolist())
    return table


def unit_differences(table, design: Design, *, cluster: str = "example_id", score: str = "correct"):
    """Per cluster (question) and factor: mean score at the high level minus at the low level,
    over the cluster's cells. Their mean is the main effect (in a balanced design) and their
    spread sizes the study (:func:`longctx.report.n_for_half_width`)."""
    data = coded(table, design)
    out = {}
    for f in design.factors:
        means = data.groupby([cluster, f.name])[score].mean().unstack()
        out[f.name] = means[0.5] - means[-0.5]
    return pd.DataFrame(out)


def cell_means(
    table, design: Design, a: str, b: str, *, cluster: str = "example_id", score: str = "correct"
):
    """Accuracy (%) at the four level combinations of factors ``a`` and ``b``, averaged over
    the others, with 95% intervals resampling whole clusters (for the interaction plot)."""
    data = table.copy()
    data[a] = data["crossing"].map(lambda c: c[a])
    data[b] = data["crossing"].map(lambda c: c[b])
    rows = []
    for (la, lb), g in data.groupby([a, b]):
        lo, hi = bootstrap_interval(g[score].tolist(), clusters=g[cluster].tolist())
        rows.append(
            {
                a: la,
                b: lb,
                "accuracy": 100 * g[score].mean(),
                "ci_low": 100 * lo,
                "ci_high": 100 * hi,
                "n": len(g),
            }
        )
    return pd.DataFrame(rows)


def complete_units(table, design: Design, *, cluster: str = "example_id") -> set:
    """The units (questions) of ``table`` that have a row in every cell of ``design``: a run
    in progress stores whole questions one after another, and only these can be compared."""
    cells = len(design.cells)
    if table.empty:
        return set()
    per_unit = table.groupby(cluster)["crossing"].apply(
        lambda c: len({tuple(sorted(x.items())) for x in c})
    )
    return set(per_unit[per_unit == cells].index)


def reader_effects(
    table,
    design: Design,
    readers: Sequence[str],
    *,
    reader: str = "model",
    cluster: str = "example_id",
    score: str = "correct",
):
    """The main effects of two readers side by side, and how they differ, on the questions
    both readers answered in every cell of the design (so the comparison is paired).

    Each reader's effect is, per question, the mean score over the cells at the factor's
    high level minus over those at its low level (:func:`unit_differences`; in the balanced
    fraction its mean is the GEE main effect), with the paired bootstrap over questions and
    sign-flip p of :func:`longctx.claims.paired_estimate`, so a reader's effect here is the
    findings page's number on the same questions. The difference (second reader minus first)
    is, per question, the difference of the two readers' unit differences, with the same
    bootstrap and test. Returns one row per factor and reader (``reader`` = a reader's name
    or ``"difference"``): estimate, ci_low, ci_high (points), p and questions.
    """
    if len(readers) != 2 or readers[0] == readers[1]:
        raise ParameterError(f"reader_effects compares two different readers, got {list(readers)}")
    missing = [r for r in readers if not (table[reader] == r).any()]
    if missing:
        raise ParameterError(
            f"no rows for reader(s) {missing}; readers in the table: "
            f"{sorted(table[reader].unique())}"
        )
    cells = len(design.cells)
    complete = [complete_units(table[table[reader] == r], design, cluster=cluster) for r in readers]
    shared = sorted(complete[0] & complete[1])
    if not shared:
        raise ParameterError(
            f"no question was answered in all {cells} cells by both {readers[0]} and {readers[1]}"
        )
    rows, units = [], {}
    for r in readers:
        sub = table[(table[reader] == r) & table[cluster].isin(shared)]
        units[r] = unit_differences(sub, design, cluster=cluster, score=score).loc[shared]
        for f in design.factors:
            sides = sub.assign(level=sub["crossing"].map(lambda c, name=f.name: c[name]))
            means = sides.groupby([cluster, "level"])[score].mean().unstack()
            est = paired_estimate(means[f.low].to_dict(), means[f.high].to_dict())
            rows.append(
                {
                    "factor": f.name,
                    "reader": r,
                    "estimate": est.difference,
                    "ci_low": est.ci_low,
                    "ci_high": est.ci_high,
                    "p": est.p,
                    "questions": len(shared),
                }
            )
    for f in design.factors:
        diff = units[readers[1]][f.name] - units[readers[0]][f.name]
        rows.append(
            {
                "factor": f.name,
                "reader": "difference",
                **_summary(diff),
                "questions": len(shared),
            }
        )
    # each reader's main effects, and their differences, are one family of tests each
    return _holm_within(pd.DataFrame(rows), "reader")


def describe_reader_comparison(both, readers: Sequence[str], *, margin: float = 10.0) -> str:
    """Plain-language summary (Markdown bullets) of :func:`reader_effects`' output, so the
    chapter's text about two readers is computed from the rows it describes.

    It names each reader's largest main effect, the factors on which the readers' paired
    difference excludes zero (95% bootstrap interval and sign-flip p must agree: the findings
    page's rule, :data:`longctx.claims.ALPHA`),
    and, when the widest difference interval is wider than ±``margin`` points, says that
    this n is a demo for differences smaller than that width.
    """
    if len(readers) != 2:
        raise ParameterError(
            f"describe_reader_comparison compares two readers, got {list(readers)}"
        )
    missing = [r for r in [*readers, "difference"] if not (both["reader"] == r).any()]
    if missing:
        raise ParameterError(
            f"no rows for {missing} in the reader comparison; pass reader_effects' output"
        )
    n = int(both["questions"].iloc[0])

    def ci(row) -> str:
        return points_ci(row.estimate, row.ci_low, row.ci_high)

    lines = []
    for r in readers:
        sub = both[both["reader"] == r]
        top = sub.loc[sub["estimate"].abs().idxmax()]
        decided = (top.ci_low > 0 or top.ci_high < 0) and top.p_holm < ALPHA
        lines.append(
            f"* **{r}**: the largest main effect is {term_words(top.factor)}, {ci(top)} points, "
            f"p = {format_p(top.p)} (Holm over {len(sub)} factors {format_p(top.p_holm)})"
            f"{', decided' if decided else ', not decided by the rule'}."
        )
    diff = both[both["reader"] == "difference"]
    excludes_zero = (diff["ci_low"] > 0) | (diff["ci_high"] < 0)
    decided, split = (
        diff[excludes_zero & (diff["p_holm"] < ALPHA)],
        diff[excludes_zero & (diff["p_holm"] >= ALPHA)],
    )
    if decided.empty:
        lines.append(
            f"* **Difference ({readers[1]} minus {readers[0]})**: no factor's difference is decided "
            f"(its interval must exclude zero and its exact sign-flip p, Holm-adjusted over the "
            f"{len(diff)} factors, be below {ALPHA:g})."
        )
    else:
        lines.append(
            f"* **Difference ({readers[1]} minus {readers[0]})**: the readers differ on "
            + "; ".join(
                f"{term_words(row.factor)}, {ci(row)} points, p = {format_p(row.p)} "
                f"(Holm {format_p(row.p_holm)})"
                for row in decided.itertuples()
            )
            + "."
        )
    if not split.empty:
        lines.append(
            "* Undecided: "
            + "; ".join(
                f"{term_words(row.factor)}'s interval, {ci(row)} points, excludes zero but "
                f"its exact p = {format_p(row.p)} (Holm {format_p(row.p_holm)}) does not agree"
                for row in split.itertuples()
            )
            + "."
        )
    widest = float(((diff["ci_high"] - diff["ci_low"]) / 2).max())
    if widest > margin:
        lines.append(
            f"* **n = {n} questions is a demo for the differences.** The widest difference interval is "
            f"±{widest:.1f} points, wider than ±{margin:g}; a difference smaller than that is not "
            "resolved at this n, and more questions narrow it."
        )
    else:
        lines.append(
            f"* Every difference interval is within ±{widest:.1f} points (n = {n} questions)."
        )
    return "\n".join(lines)
