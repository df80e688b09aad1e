"""The crossing design and its analysis: balance and aliasing of the half fraction, effects
recovered from data with planted effects, and the chapter's requests."""

import itertools
import json
import random
from pathlib import Path

import pandas as pd
import pytest

from longctx.chapters.crossing import factorial as X
from longctx.errors import ParameterError
from longctx.metrics import holm

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["position", "format", "tags", "distractors", "filler", "query_aware"]


def factors(expected=(0,) * 6):
    return [X.Factor(n, "lo", "hi", expected=e, source="paper") for n, e in zip(NAMES, expected)]


def test_half_fraction_is_balanced_and_resolution_six():
    d = X.two_level_design(factors(), "half")
    assert len(d.cells) == 32 and d.resolution == 6 and d.fraction == "I = ABCDEF"
    for i in range(6):
        assert sum(c[i] for c in d.cells) == 16
    for i, j in itertools.combinations(
        range(6), 2
    ):  # every pair of factors sees all four combinations equally
        assert sorted((c[i], c[j]) for c in d.cells) == sorted(
            [(a, b) for a in (0, 1) for b in (0, 1)] * 8
        )
    assert X.aliases(d)["position"] == "format x tags x distractors x filler x query_aware"
    assert len(X.two_level_design(factors(), "full").cells) == 64
    with pytest.raises(ParameterError, match="full or half"):
        X.two_level_design(factors(), "quarter")


def simulated(d, n=300, seed=0):
    """Accuracy 50% + 20 points when position is high, -10 when filler is high, and +10 more
    for filler only when tags are high (a tags x filler interaction of +10 points)."""
    rng = random.Random(seed)
    rows = []
    for q in range(n):
        base = rng.uniform(-0.15, 0.15)  # question difficulty: why the errors are clustered
        for cell in d.cells:
            lv = dict(zip(NAMES, cell))
            p = (
                0.5
                + base
                + 0.2 * lv["position"]
                - 0.1 * lv["filler"]
                + 0.1 * lv["filler"] * lv["tags"]
            )
            rows.append(
                {
                    "example_id": f"q{q}",
                    "crossing": d.levels(cell),
                    "correct": int(rng.random() < p),
                }
            )
    return pd.DataFrame(rows)


def test_effects_recover_planted_main_effects_and_interaction():
    d = X.two_level_design(factors(expected=(1, 1, 0, 0, -1, 0)), "half")
    fx = X.effects(simulated(d), d).set_index("term")
    assert fx.loc["position", "ci_low"] < 20 < fx.loc["position", "ci_high"]
    # -10 + 5 (tags half the time)
    assert fx.loc["filler", "ci_low"] < -5 < fx.loc["filler", "ci_high"]
    assert fx.loc["tags x filler", "ci_low"] < 10 < fx.loc["tags x filler", "ci_high"]
    assert abs(fx.loc["format", "estimate"]) < 4 and fx.loc["format", "clusters"] == 300
    logit = X.effects(simulated(d), d, family="logistic", interactions=False).set_index("term")
    assert logit.loc["position", "estimate"] > 0 > logit.loc["filler", "estimate"]


def test_rows_at_an_unknown_level_are_an_error():
    d = X.two_level_design(factors(), "half")
    table = simulated(d, n=3)
    table.at[0, "crossing"] = {**table.at[0, "crossing"], "tags": "maybe"}
    with pytest.raises(ParameterError, match="tags: rows at unknown levels \\['maybe'\\]"):
        X.effects(table, d)


def test_chapter_requests_vary_exactly_their_factors():
    from longctx.chapters import crossing as chapter

    params = {
        **json.loads((ROOT / "lib/longctx/scales/crossing.json").read_text())["book"],
        "num_questions": 2,
    }
    reqs = chapter.design.blocks(params)[0].requests
    assert len(reqs) == 64 and len({(r.example_id, r.prompt, r.system) for r in reqs}) == 64
    for r in reqs:
        lv = r.condition["crossing"]
        assert r.condition["gold_index"] == (4 if lv["position"] == "middle" else 0)
        assert (f"<|longctx_filler:whitespace:{params['filler_tokens']}|>" in r.prompt) == (
            lv["filler"] != "none"
        )
        assert (r.system is not None) == (lv["tags"] != "none")
        assert (r.condition.get("delimiter") == ":") == (lv["format"] == "C-NORM")
        assert r.prompt.count("Question:") == (2 if lv["query_aware"] == "on" else 1)
        assert (r.condition.get("competitors") == "far") == (lv["distractors"] == "far")
    with pytest.raises(ParameterError, match="unknown crossing factors \\['color'\\]"):
        chapter.design.blocks({**params, "factors": ["distractors", "color"]})


def test_unit_differences_are_high_minus_low_per_question():
    design = X.two_level_design([X.Factor(n, "lo", "hi", source="paper") for n in "ab"], "full")
    rows = []
    # q1: a high adds 1 in both cells of b; q2: nothing changes.
    for q, bump in [("q1", 1.0), ("q2", 0.0)]:
        for cell in design.cells:
            levels = design.levels(cell)
            rows.append(
                {"example_id": q, "crossing": levels, "correct": bump * (levels["a"] == "hi")}
            )
    diffs = X.unit_differences(pd.DataFrame(rows), design)
    assert diffs.loc["q1", "a"] == 1.0 and diffs.loc["q2", "a"] == 0.0
    assert (diffs["b"] == 0.0).all()


# The fixture is noiseless, so the GEE's errors are degenerate.
@pytest.mark.filterwarnings("ignore")
def test_reader_effects_pair_readers_on_shared_complete_questions():
    design = X.two_level_design([X.Factor(n, "lo", "hi", source="paper") for n in "ab"], "full")
    rows = []
    # Reader A: a high always adds 1. Reader B: a does nothing, b high adds 1. q3 is missing
    # one of B's cells, so only q1 and q2 are compared.
    for q in ["q1", "q2", "q3"]:
        for cell in design.cells:
            levels = design.levels(cell)
            rows.append(
                {
                    "model": "A",
                    "example_id": q,
                    "crossing": levels,
                    "correct": float(levels["a"] == "hi"),
                }
            )
            if q == "q3" and levels == {"a": "hi", "b": "hi"}:
                continue
            rows.append(
                {
                    "model": "B",
                    "example_id": q,
                    "crossing": levels,
                    "correct": float(levels["b"] == "hi"),
                }
            )
    out = X.reader_effects(pd.DataFrame(rows), design, ["A", "B"]).set_index(["factor", "reader"])
    assert (out["questions"] == 2).all()
    assert out.loc[("a", "A"), "estimate"] == pytest.approx(100)
    assert out.loc[("a", "B"), "estimate"] == pytest.approx(0)
    assert out.loc[("b", "B"), "estimate"] == pytest.approx(100)
    # The difference is B minus A, per question: -100 points on a, +100 on b, no spread.
    assert (out.loc[("a", "difference"), ["estimate", "ci_low", "ci_high"]] == -100).all()
    assert (out.loc[("b", "difference"), ["estimate", "ci_low", "ci_high"]] == 100).all()
    with pytest.raises(ParameterError, match="no rows for reader\\(s\\) \\['C'\\]"):
        X.reader_effects(pd.DataFrame(rows), design, ["A", "C"])
    with pytest.raises(ParameterError, match="two different readers"):
        X.reader_effects(pd.DataFrame(rows), design, ["A", "A"])
    only_q3 = pd.DataFrame(rows).query("example_id == 'q3'")
    with pytest.raises(
        ParameterError, match="no question was answered in all 4 cells by both A and B"
    ):
        X.reader_effects(only_q3, design, ["A", "B"])


def test_complete_units_are_the_questions_with_a_row_in_every_cell():
    design = X.two_level_design([X.Factor(n, "lo", "hi", source="paper") for n in "ab"], "full")
    rows = [
        {"example_id": q, "crossing": design.levels(cell), "correct": 1.0}
        for q in ["q1", "q2"]
        for cell in design.cells
    ]
    rows += [
        {"example_id": "q3", "crossing": design.levels(cell), "correct": 1.0}
        for cell in design.cells[:3]
    ]
    rows.append(dict(rows[0]))  # a repeated row does not stand in for a missing cell
    rows[-1]["example_id"] = "q3"
    table = pd.DataFrame(rows)
    assert X.complete_units(table, design) == {"q1", "q2"}
    assert X.complete_units(table.iloc[:0], design) == set()


def test_describe_reader_comparison_states_effects_differences_and_width():
    both = pd.DataFrame(
        [
            # Reader A: position hurts, clearly. Reader B: position and tags both hold zero.
            {
                "factor": "position",
                "reader": "A",
                "estimate": -14.0,
                "ci_low": -22.0,
                "ci_high": -6.0,
                "p": 0.001,
            },
            {
                "factor": "tags",
                "reader": "A",
                "estimate": 2.0,
                "ci_low": -5.0,
                "ci_high": 9.0,
                "p": 0.6,
            },
            {
                "factor": "position",
                "reader": "B",
                "estimate": -3.0,
                "ci_low": -12.0,
                "ci_high": 6.0,
                "p": 0.5,
            },
            {
                "factor": "tags",
                "reader": "B",
                "estimate": 5.0,
                "ci_low": -4.0,
                "ci_high": 14.0,
                "p": 0.3,
            },
            {
                "factor": "position",
                "reader": "difference",
                "estimate": 11.0,
                "ci_low": 1.0,
                "ci_high": 23.0,
                "p": 0.01,
            },
            {
                "factor": "tags",
                "reader": "difference",
                "estimate": 3.0,
                "ci_low": -8.0,
                "ci_high": 14.0,
                "p": 0.6,
            },
        ]
    ).assign(questions=9)

    def adjusted(table):  # Holm within each reader's family, as reader_effects does
        return table.assign(p_holm=table.groupby("reader")["p"].transform(lambda p: holm(list(p))))

    both = adjusted(both)
    text = X.describe_reader_comparison(both, ["A", "B"])
    assert (
        "**A**: the largest main effect is position, -14.0 [-22.0, -6.0] points, "
        "p = 0.0010 (Holm over 2 factors 0.0020), decided." in text
    )
    assert (
        "**B**: the largest main effect is tags, +5.0 [-4.0, +14.0] points, "
        "p = 0.30 (Holm over 2 factors 0.60), not decided by the rule." in text
    )
    assert (
        "the readers differ on position, +11.0 [+1.0, +23.0] points, p = 0.010 "
        "(Holm 0.020)." in text
    )
    assert "tags, +3.0" not in text  # its difference holds zero
    assert "n = 9 questions is a demo" in text and "±11.0 points" in text  # (23 - 1) / 2
    # A difference interval that excludes zero but whose sign-flip p does not agree is not a difference.
    disagree = adjusted(both.assign(p=both["p"].where(both["reader"] != "difference", 0.04)))
    text = X.describe_reader_comparison(disagree, ["A", "B"])
    assert "no factor's difference is decided" in text
    assert (
        "Undecided: position's interval, +11.0 [+1.0, +23.0] points, excludes zero but "
        "its exact p = 0.040 (Holm 0.080) does not agree" in text
    )
    assert "Undecided" not in X.describe_reader_comparison(both, ["A", "B"])
    narrow = both.assign(ci_low=both["estimate"] - 4, ci_high=both["estimate"] + 4)
    assert (
        "Every difference interval is within ±4.0 points (n = 9 questions)."
        in X.describe_reader_comparison(narrow, ["A", "B"])
    )
    with pytest.raises(ParameterError, match="no rows for \\['difference'\\]"):
        X.describe_reader_comparison(both[both["reader"] != "difference"], ["A", "B"])
