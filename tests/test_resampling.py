"""The resamples behind a verdict's stability: exact intervals and tests on every resample,
checked against the library's own bootstrap and sign-flip test, and draws shared by the
members of a family."""

import numpy as np
import pytest

from longctx.metrics import bootstrap_interval, sign_flip_test
from longctx.resampling import (
    Lattice,
    joint_draws,
    mean_interval,
    paired_resamples,
    sign_flip_ps,
)

CASES = [
    np.array([1.0, 0, 0, -1, 1, 1, 0, 1, 0, 0, 1, -1] * 10),  # 0/+-1 differences
    np.arange(-12, 12) % 7 / 3 - 1,  # means over three items
    np.array([0.0, 0, 1, 1, 1, 0.5, 0.25, 0, 1]),  # two denominators
    np.array([0.0, 1, 1, 0, 1, 1, 1, 0, 1, 0] * 15),  # two values: the binomial shortcut
]


@pytest.mark.parametrize("values", CASES)
def test_each_resamples_interval_is_the_bootstrap_with_many_draws(values):
    positions = joint_draws([[f"u{k:03d}" for k in range(len(values))]], 3)[0]
    lattice = Lattice.of(values)
    low, high = mean_interval(lattice, lattice.counts(positions))
    for b in range(3):
        drawn = values[positions[b]].tolist()
        ref_low, ref_high = bootstrap_interval(drawn, n_resamples=40_000, seed=b)
        step = 1 / len(values) / lattice.scale + 1e-12  # one step of the lattice of means
        assert low[b] == pytest.approx(ref_low, abs=step)
        assert high[b] == pytest.approx(ref_high, abs=step)


@pytest.mark.parametrize("values", CASES[:3])
def test_each_resamples_p_is_the_exact_sign_flip_test(values):
    positions = joint_draws([[f"u{k:03d}" for k in range(len(values))]], 5)[0]
    lattice = Lattice.of(values)
    ps = sign_flip_ps(lattice, lattice.counts(positions))
    for b in range(5):
        assert ps[b] == pytest.approx(sign_flip_test(values[positions[b]].tolist()), abs=1e-9)


def test_a_family_shares_its_draws_and_a_member_keeps_only_its_own_units():
    a, b = joint_draws([["q1", "q2", "q3"], ["q3", "q2", "q1"]], 50)
    # the same units in another order: the same draws, each in its own positions
    assert ((a == -1) == (b == -1)).all()
    units_a, units_b = np.array(["q1", "q2", "q3"]), np.array(["q3", "q2", "q1"])
    assert (units_a[a] == units_b[b]).all()
    partial, whole = joint_draws([["q1", "q2"], ["q1", "q2", "q3"]], 50)
    assert (partial >= 0).sum() < (whole >= 0).sum() and (whole >= 0).all()


def test_a_resampled_estimate_holds_both_levels_and_their_intervals():
    control = np.array([0.0] * 60 + [1.0] * 40)
    treatment = np.array([1.0] * 100)
    positions = joint_draws([[f"u{k:03d}" for k in range(100)]], 20)[0]
    out = paired_resamples(control, treatment, positions, sides=["treatment", "control"])
    assert (out["treatment"] == 100).all()
    assert (out["treatment_low"] == 100).all() and (out["treatment_high"] == 100).all()
    assert np.allclose(out["difference"], out["treatment"] - out["control"])
    assert (out["control_low"] <= out["control"]).all() and (
        out["control"] <= out["control_high"]
    ).all()
    assert (out["p"] < 0.001).all()


def test_scores_that_are_no_small_fractions_fall_back_to_seeded_draws():
    # F1-like scores: no common denominator, so the interval is drawn and the test sampled
    control = np.array([0.0, 0.5, 1.0, np.sqrt(2) / 3, 0.25, 1.0] * 5)
    treatment = np.array([1.0, np.sqrt(3) / 4, 1.0, 0.9, 0.75, 1.0] * 5)
    positions = joint_draws([[f"u{k:02d}" for k in range(30)]], 4)[0]
    assert Lattice.of(treatment - control).weights is None
    once = paired_resamples(control, treatment, positions)
    again = paired_resamples(control, treatment, positions)
    assert all(np.array_equal(once[k], again[k]) for k in once)  # seeded: the same bytes
    assert (once["ci_low"] <= once["difference"]).all()
    assert (once["difference"] <= once["ci_high"]).all()
    assert ((0 < once["p"]) & (once["p"] <= 1)).all()
