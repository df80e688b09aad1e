"""Reader-facing number formatting and the sample-size arithmetic, against hand-worked cases."""

import math

from longctx.report import MISSING, n_for_half_width, pct_ci, points_ci


def test_points_ci_signs_every_number_and_never_prints_minus_zero():
    assert points_ci(-55.0, -67.0, -43.0) == "-55.0 [-67.0, -43.0]"
    # A zero effect that floating point left at -1e-12 must not read as "-0.0".
    assert points_ci(-1e-12, -7.6, 7.6) == "+0.0 [-7.6, +7.6]"
    assert points_ci(-0.04, -0.04, 0.04) == "+0.0 [+0.0, +0.0]"
    assert points_ci(float("nan"), 0, 0) == MISSING


def test_pct_ci_reads_shares_as_percentages():
    assert pct_ci(0.88, 0.802, 0.931) == "88.0 [80.2, 93.1]"
    assert pct_ci(float("nan"), 0, 1) == MISSING


def test_n_for_half_width_follows_the_paired_formula():
    # Differences +1, -1, +1, -1: mean 0, sample variance 4/3, so n = (1.96^2 * 4/3) / 0.1^2 = 512.2 -> 513.
    assert n_for_half_width([1, -1, 1, -1]) == 513
    # No discordant units: zero spread needs no more units.
    assert n_for_half_width([0, 0, 0]) == 0
    assert n_for_half_width([1]) == 0
    # Halving the target half-width quadruples n (up to rounding).
    assert n_for_half_width([1, -1, 1, -1], half_width=0.05) == math.ceil(
        4 * 1.96**2 * 4 / 3 / 0.01
    )
