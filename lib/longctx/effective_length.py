"""Effective length: how much of its window a reader really uses, with an interval on the
length itself.

Three public definitions, each applied to one accuracy curve (accuracy by prompt length, the
same needles at every length):

* NoLiMa's: the longest length at which accuracy stays at or above 85% of the reader's own
  short-context *base* (its mean accuracy at 250, 500 and 1K tokens);
* RULER's: the longest length at which accuracy stays at or above 85.6% (Llama-2-7B's
  score at 4K, an absolute bar);
* LongScore (100-LongBench), not a length but a curve: at each length ``(S_l - base) / base``.

"Stays" is read as the papers' tables read it: the effective length is the last length
before the first one that falls below the bar; a reader that never falls below it has an
effective length of *at least* the longest length tested, and one below it at the shortest
has none. The interval on the length resamples the needles (each needle's answers at every
length move together), recomputes the curve, the base and the effective length each time
and takes the 2.5th and 97.5th percentiles on the tested grid; its seed comes from the
sorted needle ids, so the same rows in any order give the same bytes on any machine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import ParameterError
from .metrics import content_seed, randrange_draws
from .report import tokens_text

NOLIMA_SHARE = 0.85  # of the reader's own base
NOLIMA_BASE_LENGTHS = (250, 500, 1000)
RULER_BAR = 85.6  # Llama-2-7B at 4K, in %
RESAMPLES = 1000
DEFINITIONS = ("nolima", "ruler")


@dataclass(frozen=True)
class EffectiveLength:
    """One reader's effective length under one ``definition``: ``length`` (None: below the
    bar already at the shortest length tested), ``at_least`` (never below the bar: the
    length is the longest tested), the percentile interval ``low``-``high`` on the grid
    (0: below the shortest; ``math.inf``: never below, written "≥ the longest"), the ``bar``
    in %, ``n`` needles and the ``shortest`` and ``longest`` lengths tested."""

    definition: str
    length: float | None
    at_least: bool
    low: float
    high: float
    bar: float
    n: int
    shortest: float
    longest: float

    def text(self) -> str:
        """ "4K [2K, 8K]", "≥ 32K [16K, ≥ 32K]", "< 250 [< 250, 500]"."""
        return f"{self._point()} [{self._bound(self.low)}, {self._bound(self.high)}]"

    def _point(self) -> str:
        if self.length is None:
            return f"< {tokens_text(self.shortest)}"
        return ("≥ " if self.at_least else "") + tokens_text(self.length)

    def _bound(self, value: float) -> str:
        if value == 0:
            return f"< {tokens_text(self.shortest)}"
        if math.isinf(value):
            return f"≥ {tokens_text(self.longest)}"
        return tokens_text(value)


def unit_matrix(
    rows: pd.DataFrame, *, length: str = "length", unit: str = "example_id", score: str = "correct"
) -> tuple[list, list, np.ndarray]:
    """(the lengths in order, the units in sorted order, their mean scores): one row per
    unit, one column per length, a unit's mean where it has several answers at a length.
    Every unit must be answered at every length (the design pairs them)."""
    if rows.empty:
        raise ParameterError("no rows to measure an effective length on")
    table = rows.pivot_table(index=unit, columns=length, values=score, aggfunc="mean")
    if table.isna().any().any():
        missing = int(table.isna().sum().sum())
        raise ParameterError(
            f"{missing} (needle, length) cells have no answer: the effective length pairs every "
            "needle across the lengths"
        )
    table = table.sort_index().sort_index(axis=1)
    return list(table.columns), list(table.index), table.to_numpy(dtype=float)


def short_base(curve: Sequence[float], lengths: Sequence[float]) -> float:
    """A reader's own short-context base: its mean accuracy at NoLiMa's short lengths
    (250, 500, 1K tokens) where the grid has them."""
    base = [a for a, n in zip(curve, lengths) if n in NOLIMA_BASE_LENGTHS]
    if not base:
        raise ParameterError(
            f"NoLiMa's base is the mean at {list(NOLIMA_BASE_LENGTHS)} tokens; the grid "
            f"{list(lengths)} has none of them"
        )
    return float(np.mean(base))


def bar_of(curve: Sequence[float], lengths: Sequence[float], definition: str) -> float:
    """The bar in % a curve (accuracy in %, by ``lengths``) must stay at or above."""
    if definition == "ruler":
        return RULER_BAR
    if definition == "nolima":
        return NOLIMA_SHARE * short_base(curve, lengths)
    raise ParameterError(f"unknown definition {definition!r}; use one of {DEFINITIONS}")


def effective_point(curve: Sequence[float], lengths: Sequence[float], bar: float) -> float:
    """The last length before the first one below ``bar``: 0 when the shortest is below
    it, ``math.inf`` when none is (the length is then at least the longest tested)."""
    below = [i for i, a in enumerate(curve) if a < bar]
    if not below:
        return math.inf
    return 0.0 if below[0] == 0 else float(lengths[below[0] - 1])


def effective_length(
    rows: pd.DataFrame,
    definition: str,
    *,
    length: str = "length",
    unit: str = "example_id",
    score: str = "correct",
    resamples: int = RESAMPLES,
) -> EffectiveLength:
    """A reader's effective length under ``definition`` from its ``rows`` (one per needle
    and length, ``score`` 0/1), with its needle-resampled 95% interval on the grid."""
    lengths, units, matrix = unit_matrix(rows, length=length, unit=unit, score=score)
    curve = 100 * matrix.mean(axis=0)
    bar = bar_of(curve, lengths, definition)
    point = effective_point(curve, lengths, bar)
    n = len(units)
    draws = randrange_draws(content_seed(units), n, n * resamples).reshape(resamples, n)
    curves = 100 * matrix[draws].mean(axis=1)  # (resamples, lengths)
    found = np.array([effective_point(c, lengths, bar_of(c, lengths, definition)) for c in curves])
    low = float(np.percentile(found, 2.5, method="lower"))
    high = float(np.percentile(found, 97.5, method="higher"))
    return EffectiveLength(
        definition,
        None if point == 0 else (float(lengths[-1]) if math.isinf(point) else point),
        math.isinf(point),
        low,
        high,
        bar,
        n,
        float(lengths[0]),
        float(lengths[-1]),
    )


def longscore(curve: Mapping[float, float]) -> dict[float, float]:
    """100-LongBench's LongScore at each length: ``(S_l - base) / base``, the base being the
    mean at NoLiMa's short lengths (250, 500, 1K) where the grid has them."""
    lengths = sorted(curve)
    base = short_base([curve[n] for n in lengths], lengths)
    if base == 0:
        raise ParameterError("the base accuracy is 0: LongScore divides by it")
    return {n: (curve[n] - base) / base for n in lengths}


def bounds(curve: pd.DataFrame) -> tuple[str, str]:
    """What a sparse curve (``length``, ``accuracy``, ``ci_low``, ``ci_high`` in shares; its
    shortest length the base, as in a chapter whose sizes were not chosen for this) says of
    the NoLiMa effective length: a lower bound, the longest length up to which every 95%
    interval stays at or above 85% of the base ("≥ 2K"), and an upper bound, the first
    length whose interval lies wholly below it ("< 9.6K"); "none" where the intervals do
    not decide. The bar is the base's point estimate, as NoLiMa takes it."""
    curve = curve.sort_values("length")
    if len(curve) < 2:
        raise ParameterError("a bound needs the base and at least one longer length")
    bar = NOLIMA_SHARE * float(curve["accuracy"].iloc[0])
    lower, upper = "none", "none"
    above = True
    for row in curve.iloc[1:].itertuples():
        if row.ci_high < bar:
            upper = f"< {tokens_text(row.length)}"
            break
        above = above and row.ci_low >= bar
        if above:
            lower = f"≥ {tokens_text(row.length)}"
    return lower, upper
