"""Resampling a claim's independent units, for how stable its verdict is.

A verdict is stable when it survives a resample of the units it rests on (questions,
needles, problems, records). Every draw here is seeded by the data itself
(:func:`longctx.metrics.content_seed` of the sorted unit ids), so the same rows, in any order,
on any machine, give the same draws; there is no global seed.

The resamples of claims judged together (a Holm family) are drawn jointly, over the union
of their unit ids: a question drawn twice is drawn twice for every member that has it, as
the units are shared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from .metrics import (
    MAX_DENOMINATOR,
    content_seed,
    integer_weights,
    pearson_interval,
    randrange_draws,
    sign_flip_test,
)

STABILITY_RESAMPLES = 1000  # resamples of the units per verdict
INNER_RESAMPLES = 1000  # draws of an interval inside a resample, where it cannot be exact
MONTE_CARLO_FLIPS = 2000  # sign flips per resample where the exact test cannot be enumerated


def joint_draws(members: Sequence[Sequence], resamples: int = STABILITY_RESAMPLES):
    """Resamples of the union of ``members``' unit ids (each member one estimate's units),
    drawn with replacement and seeded by that union. Returns, per member, a ``(resamples,
    len(union))`` array of positions into its own units, -1 where the drawn unit is not one
    of its own (dropped when used)."""
    union = sorted({str(u) for units in members for u in units})
    where = {u: k for k, u in enumerate(union)}
    draws = randrange_draws(content_seed(union), len(union), len(union) * resamples)
    draws = draws.reshape(resamples, len(union))
    out = []
    for units in members:
        position = np.full(len(union), -1, dtype=np.int64)
        position[[where[str(u)] for u in units]] = np.arange(len(units))
        out.append(position[draws])
    return out


@dataclass(frozen=True)
class Lattice:
    """Per-unit values as integers over one common denominator (``weights`` = values x
    ``scale``; None where the values are no small fractions, as F1 scores are), with each
    unit's code into the distinct values."""

    distinct: np.ndarray
    codes: np.ndarray
    weights: np.ndarray | None
    scale: int

    @classmethod
    def of(cls, values: np.ndarray) -> Lattice:
        distinct, codes = np.unique(values, return_inverse=True)
        nonzero = np.abs(distinct[distinct != 0])
        scaled = integer_weights(nonzero, MAX_DENOMINATOR) if nonzero.size else np.zeros(0)
        if scaled is None:
            return cls(distinct, codes, None, 1)
        scale = int(round(scaled[0] / nonzero[0])) if nonzero.size else 1
        return cls(distinct, codes, np.rint(distinct * scale).astype(np.int64), scale)

    def counts(self, positions: np.ndarray) -> np.ndarray:
        """How many times each distinct value is drawn in each resample: ``(resamples, K)``."""
        drawn = positions >= 0
        code = np.where(drawn, self.codes[np.where(drawn, positions, 0)], 0)
        rows = np.repeat(np.arange(len(positions)), positions.shape[1])
        flat = rows * len(self.distinct) + code.ravel()
        out = np.bincount(flat[drawn.ravel()], minlength=len(positions) * len(self.distinct))
        return out.reshape(len(positions), len(self.distinct))


def _fft_size(width: int) -> int:
    return 1 << max(1, int(width).bit_length())


def mean_interval(lattice: Lattice, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each resample's 95% percentile bootstrap interval of the mean (:func:`~longctx.metrics.
    bootstrap_interval`'s, with infinitely many draws): the exact distribution of a sum of
    ``m`` draws from the resample's values is the ``m``-th power of their generating
    polynomial, taken by FFT. ``counts`` is :meth:`Lattice.counts`; returns (lows, highs)."""
    if lattice.weights is None:
        raise ValueError("the exact interval needs values that are small fractions")
    m = counts.sum(axis=1)
    if len(lattice.distinct) == 2:  # two values: the sum is a binomial count, no FFT needed
        low, high = lattice.distinct
        bounds = []
        for q in (0.025, 0.975):
            k = binom.ppf(q, m, counts[:, 1] / m)
            k = np.where(binom.cdf(k, m, counts[:, 1] / m) > q, k, k + 1)  # the cdf must pass q
            bounds.append(low + (high - low) * k / m)
        return bounds[0], bounds[1]
    shift = lattice.weights - lattice.weights.min()
    size = _fft_size(int(m.max() * shift.max()) + 1)
    # each resample's generating function on the unit circle, raised to its m
    waves = np.exp(-2j * np.pi * np.outer(shift, np.arange(size)) / size)
    spectrum = ((counts / m[:, None]) @ waves) ** m[:, None]
    cdf = np.cumsum(np.clip(np.fft.ifft(spectrum).real, 0, None), axis=1)
    cdf /= cdf[:, -1:]
    bounds = []
    for q in (0.025, 0.975):
        first = np.argmax(cdf > q, axis=1)  # the smallest sum whose cdf passes q
        bounds.append((first + m * lattice.weights.min()) / lattice.scale / m)
    return bounds[0], bounds[1]


def sign_flip_ps(lattice: Lattice, counts: np.ndarray) -> np.ndarray:
    """Each resample's exact two-sided sign-flip p (:func:`~longctx.metrics.sign_flip_test`)
    on its per-unit differences: the positive side's sum over all sign flips is a product of
    one factor ``(1 + z^w) / 2`` per nonzero unit of weight ``w``, taken by FFT."""
    if lattice.weights is None:
        raise ValueError("the exact test needs differences that are small fractions")
    w = np.abs(lattice.weights)
    total = counts @ w
    observed = counts @ np.where(lattice.weights > 0, lattice.weights, 0)
    size = _fft_size(int(total.max()) + 1)
    factors = (1 + np.exp(-2j * np.pi * np.outer(w, np.arange(size)) / size)) / 2
    spectrum = np.exp(counts @ np.log(np.where(factors == 0, 1e-300, factors)))
    dist = np.clip(np.fft.ifft(spectrum).real, 0, None)
    cdf = np.cumsum(dist, axis=1)
    gap = np.abs(2 * observed - total)
    upper, lower = (total + gap) // 2, (total - gap) // 2
    rows = np.arange(len(counts))
    above = cdf[:, -1] - np.where(upper > 0, cdf[rows, np.maximum(upper - 1, 0)], 0)
    p = np.minimum(1.0, above + cdf[rows, lower])
    return np.where(gap == 0, 1.0, p)


def paired_resamples(
    control: np.ndarray, treatment: np.ndarray, positions: np.ndarray, sides: Sequence[str] = ()
) -> dict[str, np.ndarray]:
    """A paired estimate recomputed on every resample (``positions`` from :func:`joint_draws`):
    ``difference``, ``ci_low``, ``ci_high`` (points), ``p`` and both sides' levels (%), and
    for each of ``sides`` ("control", "treatment") its level's interval (``<side>_low``,
    ``<side>_high``). Exact where the scores are small fractions; otherwise the intervals
    take :data:`INNER_RESAMPLES` multinomial draws and the test :data:`MONTE_CARLO_FLIPS`
    flips, seeded by the resample's index."""
    drawn = positions >= 0
    m = drawn.sum(axis=1)
    at = np.where(drawn, positions, 0)

    def level(values):
        return 100 * np.where(drawn, values[at], 0).sum(axis=1) / m

    out = {"control": level(control), "treatment": level(treatment)}
    out["difference"] = out["treatment"] - out["control"]
    named = {"ci": treatment - control, "control": control, "treatment": treatment}
    for name in ("ci", *sides):
        lattice = Lattice.of(named[name])
        counts = lattice.counts(positions)
        lo, hi = _intervals(lattice, counts)
        out[f"{name}_low"], out[f"{name}_high"] = 100 * lo, 100 * hi
        if name == "ci":
            out["p"] = _sign_flip_ps(lattice, counts)
    return out


def _intervals(lattice: Lattice, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each resample's interval of the mean: exact on a lattice, else drawn."""
    if lattice.weights is not None:
        return mean_interval(lattice, counts)
    lo, hi = np.array([_sampled_interval(lattice, row, b) for b, row in enumerate(counts)]).T
    return lo, hi


def _sign_flip_ps(lattice: Lattice, counts: np.ndarray) -> np.ndarray:
    """Each resample's sign-flip p: exact on a lattice, else seeded Monte Carlo flips."""
    if lattice.weights is not None:
        return sign_flip_ps(lattice, counts)
    return np.array(
        [
            sign_flip_test(
                np.repeat(lattice.distinct, row).tolist(), n_resamples=MONTE_CARLO_FLIPS, seed=b
            )
            for b, row in enumerate(counts)
        ]
    )


def _sampled_interval(lattice: Lattice, counts: np.ndarray, seed: int) -> tuple[float, float]:
    """The 95% percentile interval of one resample's mean from :data:`INNER_RESAMPLES`
    multinomial draws over its distinct values (values that are no small fractions)."""
    n = int(counts.sum())
    draws = np.random.default_rng(seed).multinomial(n, counts / n, size=INNER_RESAMPLES)
    means = np.sort(draws @ lattice.distinct / n)
    hi_idx = min(INNER_RESAMPLES - 1, int(0.975 * INNER_RESAMPLES))
    return float(means[int(0.025 * INNER_RESAMPLES)]), float(means[hi_idx])


def correlation_resamples(x: np.ndarray, y: np.ndarray, positions: np.ndarray) -> dict:
    """Pearson's r with its Fisher interval and p (:func:`~longctx.metrics.pearson_interval`)
    on every resample of the units."""
    rows = [pearson_interval(x[p[p >= 0]], y[p[p >= 0]]) for p in positions]
    r, lo, hi, p = (np.array(v) for v in zip(*rows))
    return {"difference": r, "ci_low": lo, "ci_high": hi, "p": p}
