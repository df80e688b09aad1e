"""The verdict rule's parts on hand-worked cases: magnitude against the paper's effect,
equivalence margins (saturation and no effect), premise checks, Holm's adjustment and the
exact sign-flip test."""

import itertools
import warnings
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binomtest

from longctx.claims import Check, Claim, Estimate, Premise, judge, magnitude, read_claims
from longctx.errors import DataFileError
from longctx.metrics import holm, pearson_interval, sign_flip_test
from longctx.report import format_p


def _claim(direction=-1, effect=None, kind="directional", margin=None, premise=None):
    return Claim(
        "x", "p", "kv_retrieval", "kv-headline", "c", "d", "v", direction, effect, "s", "",
        kind, margin, premise,
    )  # fmt: skip


def _est(lo, hi, p=0.001, control=None, facts=None):
    return Estimate((lo + hi) / 2, lo, hi, 50, p, "", control, None, facts or {})


# ------------------------------------------------------------------------------ magnitude


def test_sizes_from_far_apart_baselines_are_compared_as_relative_changes():
    from dataclasses import replace

    from longctx.claims import relative_change

    # length alone, whitespace: ours -58.4 [-67.5, -49.2] from 96.7%, the paper's -3.2 from 87.5%
    est = Estimate(-58.35, -67.5, -49.2, 120, 0.001, "", 96.7, 38.3)
    claim = replace(_claim(-1, -3.2), paper_control=87.5)
    # 9.2 points apart: points against points, as before
    assert magnitude(est, claim) == "larger than the paper's: 18.2x the paper's"
    # a paper that states relative drops: its -3.7% applied to our 96.7% is -3.54 points
    relative = replace(claim, relative_sizes=True)
    assert magnitude(est, relative) == (
        "larger than the paper's: 16.5x the paper's, as relative changes "
        "(ours from 96.7%, the paper's from 87.5%)"
    )
    # baselines over 10 points apart are compared relative without the paper saying so
    far = replace(claim, paper_control=60.0)
    assert magnitude(est, far).startswith("larger than the paper's: 11.3x the paper's, as relative")
    ours, paper = relative_change(est, claim)
    assert round(ours, 1) == -60.3 and round(paper, 2) == -3.66
    assert relative_change(est, _claim(-1, -3.2)) == (ours, None)  # no paper baseline


@pytest.mark.parametrize(
    "ci,effect,want",
    [
        # length alone, whitespace: -58.3 [-67.5, -49.2] against the paper's -3.2
        ((-67.5, -49.2), -3.2, "larger than the paper's: 18.2x the paper's"),
        ((-20.0, -10.0), -15.7, "the paper's size is inside our interval (1.0x the paper's)"),
        ((-6.0, -2.0), -15.7, "smaller than the paper's: 0.3x the paper's"),
        ((2.0, 8.0), -15.7, "the opposite sign to the paper's"),
        ((-6.0, -2.0), None, "the paper gives no size"),
    ],
)
def test_magnitude(ci, effect, want):
    assert magnitude(_est(*ci), _claim(effect=effect)) == want


def test_magnitude_is_stated_against_each_of_the_papers_models():
    """Length alone, whitespace: -58.3 [-67.5, -49.2] against Llama-3-8B's -3.2 (the verdict's
    size) and Mistral-7B's -24.0: 58.35 / 24.0 = 2.4x; a size of the opposite sign gets no
    ratio."""
    from dataclasses import replace

    claim = replace(_claim(effect=-3.2), other_effects=(("Mistral-7B", -24.0), ("Other", 5.0)))
    words = magnitude(_est(-67.5, -49.2), claim)
    assert words == (
        "larger than the paper's: 18.2x the paper's; against Mistral-7B's -24.0: larger than "
        "Mistral-7B's: 2.4x Mistral-7B's; against Other's +5.0: the opposite sign to Other's"
    )
    assert judge(_est(-67.5, -49.2), claim).verdict == "reproduced"
    inside = magnitude(_est(-4.0, 6.0), replace(_claim(effect=0.4, direction=1)))
    assert inside == "the paper's size is inside our interval (2.5x the paper's)"
    assert magnitude(_est(-20.0, 4.0), _claim(effect=0.4, direction=1)) == (
        "the paper's size is inside our interval"
    )


def test_other_effects_are_read_from_the_claims_file(tmp_path):
    from longctx.claims import CLAIMS_FILE
    from longctx.paths import repo_root

    by_id = {c.id: c for c in read_claims()}
    assert by_id["la-whitespace"].other_effects == (("Mistral-7B", -24.0),)
    assert by_id["litm-kv-middle"].other_effects == ()
    text = (repo_root() / CLAIMS_FILE).read_text()
    bad = tmp_path / "claims.csv"
    bad.write_text(text.replace("Mistral-7B: -24.0", "Mistral-7B minus 24"))
    with pytest.raises(DataFileError, match="other_effects entry 'Mistral-7B minus 24'"):
        read_claims(bad)


def test_a_reproduced_direction_shows_its_magnitude():
    j = judge(_est(-67.5, -49.2), _claim(effect=-3.2))
    assert j.verdict == "reproduced" and "18.2x" in j.magnitude


# ------------------------------------------------------------------------- equivalence


@pytest.mark.parametrize(
    "ci,want",
    [
        ((-18.3, 1.7), "reproduced"),  # open domain: the whole interval below +5
        ((-2.0, 4.99), "reproduced"),
        ((-2.0, 7.0), "inconclusive at this n"),  # crosses the margin
        ((5.5, 9.0), "not reproduced"),  # the gain exceeds the margin
    ],
)
def test_saturation_by_margin(ci, want):
    assert judge(_est(*ci), _claim(+1, 1.5, "saturation", 5.0)).verdict == want


@pytest.mark.parametrize(
    "ci,p,want",
    [
        ((-4.0, 4.5), 0.9, "reproduced"),  # within +-5: two one-sided tests pass
        ((-9.9, 6.5), 0.76, "inconclusive at this n"),  # holds 0 but not within the margin
        ((-1.0, 4.0), 0.3, "reproduced"),
        ((2.0, 12.0), 0.01, "not reproduced"),  # an effect
        ((1.0, 4.0), 0.01, "reproduced"),  # an effect, but smaller than the margin
    ],
)
def test_no_effect_by_margin(ci, p, want):
    assert judge(_est(*ci, p=p), _claim(0, None, "no-effect", 5.0)).verdict == want


def test_an_interval_holding_zero_is_not_agreement():
    j = judge(_est(-9.9, 6.5, p=0.76), _claim(0, None, "no-effect", 5.0))
    assert j.verdict != "reproduced" and "neither" in j.direction


# --------------------------------------------------------------------------- premises


def test_a_floor_on_the_control():
    premise = Premise.single("control", 20.0, "answers closed-book")
    j = judge(_est(18.0, 32.7, control=5.3), _claim(-1, -2.3, premise=premise))
    assert j.verdict == "premise not met" and not j.premise_met
    # the direction is still reported beside it
    assert j.direction == "against the paper's direction"
    assert "control 5.3% < 20%" in j.premise
    assert judge(_est(18.0, 32.7, control=25.0), _claim(-1, -2.3, premise=premise)).verdict == (
        "opposite direction"
    )


def test_room_below_the_ceiling_against_the_paper():
    premise = Premise.single("room", "paper", "room for the paper's gain")
    claim = _claim(+1, 9.5, premise=premise)
    assert judge(_est(-5.0, 7.5, p=1.0, control=91.25), claim).verdict == "premise not met"
    assert judge(_est(-5.0, 7.5, p=1.0, control=85.0), claim).verdict == "not reproduced"
    # a loss needs room above the floor: control itself
    down = _claim(-1, -15.7, premise=premise)
    assert judge(_est(-17.0, -4.0, control=10.0), down).verdict == "premise not met"


def test_a_fact_the_chapter_computes():
    premise = Premise.single("identified", 50.0, "recitations name the document")
    claim = _claim(+1, 1.8, premise=premise)
    assert judge(_est(-26.0, -6.0, facts={"identified": 10.9}), claim).verdict == (
        "premise not met"
    )
    assert judge(_est(-26.0, -6.0, facts={"identified": 60.0}), claim).verdict == (
        "opposite direction"
    )
    with pytest.raises(DataFileError, match="does not compute"):
        judge(_est(-26.0, -6.0), claim)


def test_a_difference_reads_in_points_and_a_level_in_percent():
    premise = Premise.parse("control >= 20 and edge_change >= -5", "w", "here")
    j = judge(
        _est(-2.0, 13.3, control=30.7, facts={"edge_change": -6.7}),
        _claim(+1, 6.0, premise=premise),
    )
    assert j.verdict == "premise not met"
    assert "control 30.7% >= 20%" in j.premise
    assert "edge_change -6.7 pts < -5 pts" in j.premise


def test_an_unknown_premise_quantity_is_refused_with_its_row():
    with pytest.raises(DataFileError, match="claims.csv row 3: premise quantity 'retrieval'"):
        Premise.parse("retrieval >= 50", "w", "claims.csv row 3")


def test_premise_parsing():
    assert Premise.parse("control >= 20", "w", "here") == Premise.single("control", 20.0, "w")
    assert Premise.parse("room >= paper", "w", "here").checks[0].minimum == "paper"
    both = Premise.parse("control >= 50 and recited >= 90.9", "w", "here")
    assert both == Premise((Check("control", 50.0), Check("recited", 90.9)), "w")
    with pytest.raises(DataFileError, match="not '<quantity> >= <number or paper>'"):
        Premise.parse("control > 20", "w", "claims.csv row 3")


def test_the_claims_file_states_kind_margin_and_premise():
    listed = read_claims()
    for c in listed:
        assert c.kind != "directional" or c.margin is None, c.id
        assert c.kind == "directional" or c.margin, c.id
    kinds = {c.id: c.kind for c in listed}
    assert kinds["litm-open-domain"] == "saturation"
    assert kinds["crossing-query_aware"] == "no-effect"
    # paper effects from another task or length are not sizes for the crossing rows
    by_id = {c.id: c for c in listed}
    assert all(by_id[f"crossing-{f}"].paper_effect is None for f in ("tags", "filler"))


# --------------------------------------------------------------------- multiplicity


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, kept monotone
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, float("nan"), 0.01]) == pytest.approx([0.5, float("nan"), 0.02], nan_ok=True)
    assert holm([0.9, 0.3]) == pytest.approx([0.9, 0.6])


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = np.random.default_rng(3).uniform(0, 0.2, size=15)
    assert holm(p.tolist()) == pytest.approx(multipletests(p, method="holm")[1].tolist())


# ------------------------------------------------------------------- the exact test


@pytest.mark.parametrize("up,down", [(14, 5), (4, 0), (9, 1), (20, 20), (1, 0)])
def test_sign_flip_on_discordant_units_is_the_exact_binomial(up, down):
    d = [1.0] * up + [-1.0] * down + [0.0] * 7  # ties do not count
    assert sign_flip_test(d) == pytest.approx(binomtest(up, up + down).pvalue)


def test_sign_flip_on_fractions_by_full_enumeration():
    d = np.array([2, -1, 3, 1, 1, -2, 3, 1, 2, 1]) / 3  # means over three items
    observed = abs(d.sum())
    sums = [abs(np.dot(s, d)) for s in itertools.product([-1, 1], repeat=d.size)]
    want = np.mean([s >= observed - 1e-12 for s in sums])
    assert sign_flip_test(d) == pytest.approx(want)


def test_sign_flip_falls_back_to_a_stated_monte_carlo():
    d = np.random.default_rng(0).normal(0.3, 1, size=40)  # not small fractions
    p = sign_flip_test(d, n_resamples=20_000)
    assert 0 < p < 1 and (p * 20_001) == pytest.approx(round(p * 20_001))


def test_p_values_print_below_a_thousandth():
    assert format_p(0.0002) == "< 0.001" and format_p(0.0525) == "0.052"
    assert format_p(float("nan")) == "n/a"


def test_pearson_interval_is_fishers():
    x, y = [1, 2, 3, 4, 5, 6, 7, 8], [8, 6, 7, 5, 3, 4, 2, 1]
    r, lo, hi, p = pearson_interval(x, y)
    z, se = np.arctanh(r), 1 / np.sqrt(len(x) - 3)
    assert lo == pytest.approx(np.tanh(z - 1.959964 * se), abs=1e-5)
    assert hi == pytest.approx(np.tanh(z + 1.959964 * se), abs=1e-5)
    assert r == pytest.approx(np.corrcoef(x, y)[0, 1]) and p < 0.01
    # a reader that scores the same on every arm has no r: NaN, with no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(np.isnan(v) for v in pearson_interval(x, [0.5] * len(x)))


def test_every_check_of_a_premise_must_hold():
    premise = Premise.parse("control >= 50 and recited >= 90.9", "solves short, recites long", "t")
    claim = _claim(-1, -9.0, premise=premise)
    held = judge(_est(-49.0, -30.0, control=96.7, facts={"recited": 95.0}), claim)
    assert held.verdict == "reproduced" and held.premise_met
    assert "control 96.7% >= 50%, recited 95.0% >= 90.9%" in held.premise
    failed = judge(_est(-49.0, -30.0, control=96.7, facts={"recited": 40.0}), claim)
    assert failed.verdict == "premise not met" and "recited 40.0% < 90.9%" in failed.premise
    # the cell names only what failed, in the cell itself
    assert held.premise_failed == "" and failed.premise_failed == "recited 40.0% < 90.9%"
    # in words, where the claims file names a quantity by its identifier
    names = Premise.parse("recited_none >= 90.9", "w", "t")
    words = judge(_est(-49.0, -30.0, facts={"recited_none": 43.3}), _claim(-1, -9.0, premise=names))
    assert words.premise_failed == "recited, no filler 43.3% < 90.9%"


def test_a_premise_fact_not_measured_yet_leaves_the_claim_unjudged():
    """NaN: the chapter computes the fact but its rows are not all stored."""
    premise = Premise.parse("control >= 50 and recited >= 90.9", "w", "t")
    claim = _claim(-1, -9.0, premise=premise)
    j = judge(_est(-49.0, -30.0, control=96.7, facts={"recited": float("nan")}), claim)
    assert j.verdict == "premise not measured" and j.premise_met is None
    assert "recited not measured yet (needs >= 90.9%)" in j.premise
    # a check that fails decides even while another is not measured
    low = judge(_est(-49.0, -30.0, control=20.0, facts={"recited": float("nan")}), claim)
    assert low.verdict == "premise not met" and low.premise_met is False


def test_an_undefined_statistic_is_never_a_direction():
    """r over a constant accuracy is NaN: no direction, no magnitude, and its number says so."""
    claim = Claim("c", "p", "ch", "l", "claim", "r", "r = -0.82", -1, -0.82, "s", scale="r")
    j = judge(Estimate(float("nan"), float("nan"), float("nan"), 8, float("nan"), "d"), claim)
    assert j.verdict == "inconclusive at this n" and j.magnitude == "undefined"
    assert claim.interval_text(float("nan"), 0.0, 0.0) == "undefined (constant accuracy)"
    assert claim.interval_text(-0.5, -0.89, 0.32) == "r = -0.50 [-0.89, +0.32]"


def test_a_bound_that_decides_a_check_is_said_as_a_bound():
    premise = Premise.parse("control >= 50 and recited >= 90.9", "w", "t")
    claim = _claim(-1, -9.0, premise=premise)
    facts = {"recited": 88.3, "recited:bound": -1.0}
    j = judge(_est(-49.0, -30.0, control=96.7, facts=facts), claim)
    assert j.verdict == "premise not met" and "recited at most 88.3% < 90.9%" in j.premise


# ------------------------------------------------------------- levels and chance floors


def _paired(control_pct: int, treatment_pct: int, n: int = 100, facts=None) -> Estimate:
    """An estimate over ``n`` units scored 0/1, ``control_pct`` and ``treatment_pct`` of them
    right (whole percentages of 100 units), with its per-unit scores for the resampled
    intervals."""
    a = tuple(float(k < control_pct * n // 100) for k in range(n))
    b = tuple(float(k < treatment_pct * n // 100) for k in range(n))
    diff = treatment_pct - control_pct
    return Estimate(
        float(diff), diff - 8.0, diff + 8.0, n, 0.001, "", float(control_pct),
        float(treatment_pct), facts or {}, units=tuple(f"u{k:03d}" for k in range(n)),
        control_units=a, treatment_units=b,
    )  # fmt: skip


def test_a_level_claim_is_judged_on_the_treatment_arms_interval():
    near_perfect = _claim(+1, 54.4, kind="level", margin=90.0)
    # 100 of 100 right: the interval is [100, 100], at or above 90
    assert judge(_paired(60, 100), near_perfect).verdict == "reproduced"
    # 80 of 100 right: the bootstrap interval (about [72, 88]) lies below 90
    assert judge(_paired(60, 80), near_perfect).verdict == "not reproduced"
    # 90 of 100: the interval straddles 90
    held = judge(_paired(60, 90), near_perfect)
    assert held.verdict == "inconclusive at this n" and "crosses 90%" in held.direction
    # its magnitude is still the gain against the paper's
    assert "paper's" in judge(_paired(60, 100), near_perfect).magnitude


def test_a_control_arm_below_chance_fails_the_premise_whatever_the_direction():
    claim = replace(_claim(+1, 9.5), floor="25", floor_why="a guess among the 4 ids")
    # 4 of 100 right: the whole interval (about [0, 8]) lies below 25
    j = judge(_paired(4, 6), claim)
    assert j.verdict == "premise not met" and j.premise_met is False
    assert j.premise.startswith("below chance: the control arm 4.0%")
    # 20 of 100: its interval reaches 25, so chance is not ruled out from above
    assert judge(_paired(20, 40), claim).verdict == "reproduced"
    # a closed-book floor is a level to read beside, not a chance to check
    assert judge(_paired(4, 40), replace(claim, floor="closed-book")).verdict == "reproduced"


def _premise_values(claim: Claim, passing: bool) -> tuple[int, int, dict] | None:
    """(control %, treatment %, facts) for which every premise check of ``claim`` and its
    chance floor hold (``passing``), or one fails: None where no such case exists."""
    checks = claim.premise.checks if claim.premise else ()
    floor = float(claim.floor) if claim.floor.replace(".", "").isdigit() else None
    facts = {
        c.quantity: c.threshold(claim) + (1.0 if passing else -1.0)
        for c in checks
        if c.quantity not in ("control", "treatment", "room")
    }
    levels = [c for c in checks if c.quantity in ("control", "treatment", "room")]
    for control in range(1, 100):
        room = 100 - control if claim.direction > 0 else control
        values = {"control": control, "treatment": 99 if claim.direction > 0 else 1, "room": room}
        holds = all(values[c.quantity] >= c.threshold(claim) for c in levels)
        above_floor = floor is None or control >= floor + 10
        if passing and holds and above_floor:
            return control, values["treatment"], facts
        if not passing and (facts or not holds) and above_floor:
            return control, values["treatment"], facts
    return None


@pytest.mark.parametrize("claim", read_claims(), ids=lambda c: c.id)
def test_every_claims_premise_passes_in_one_case_and_fails_in_another(claim):
    if claim.premise is None:
        assert claim.id == "litm-open-domain-recall"  # the recall curve asks no premise
        return
    for passing in (True, False):
        case = _premise_values(claim, passing)
        assert case is not None, (claim.id, passing)
        control, treatment, facts = case
        j = judge(_paired(control, treatment, facts=facts), claim)
        assert j.premise_met is passing, (claim.id, passing, j.premise)
    floor = claim.floor.replace(".", "")
    if floor.isdigit() and claim.scale == "points":
        # a control arm at 0 of 100 lies below any chance floor above 0
        below = judge(_paired(0, 50, facts=_premise_values(claim, True)[2]), claim)
        assert below.verdict == "premise not met" and below.premise.startswith("below chance")


def test_a_chance_floor_on_a_correlation_is_held_by_its_premise():
    # cnorm-tokens is a correlation over arms: it has no control arm to set against chance,
    # so its premise asks for accuracy well above the floor
    tokens = {c.id: c for c in read_claims()}["cnorm-tokens"]
    assert tokens.scale == "r" and tokens.premise.checks[0].threshold(tokens) > float(tokens.floor)
