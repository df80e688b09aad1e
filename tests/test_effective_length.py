"""Effective length on hand-made curves: a flat curve, a curve crossing the bar between 4K
and 8K, an interval that widens as the needles get fewer, and bytes that do not depend on
the rows' order."""

import math
import random

import pandas as pd
import pytest

from longctx.effective_length import RULER_BAR, effective_length, longscore, tokens_text
from longctx.errors import ParameterError

GRID = [250, 500, 1000, 2000, 4000, 8000, 16000, 32000]


def _rows(accuracy: dict[int, float], n: int = 100, seed: int = 0) -> pd.DataFrame:
    """``n`` needles; at each length, the first ``round(accuracy * n)`` of a seeded order of
    the needles are right (so each length's accuracy is exact)."""
    rows = []
    for length, acc in accuracy.items():
        order = list(range(n))
        random.Random(f"{seed}:{length}").shuffle(order)
        right = set(order[: round(acc * n)])
        rows += [
            {"example_id": f"needle-{i:03d}", "length": length, "correct": float(i in right)}
            for i in range(n)
        ]
    return pd.DataFrame(rows)


def test_a_flat_curve_is_at_least_the_longest_length_tested():
    flat = effective_length(_rows(dict.fromkeys(GRID, 1.0)), "nolima")
    assert flat.at_least and flat.length == 32000 and math.isinf(flat.high)
    assert flat.text() == "≥ 32K [≥ 32K, ≥ 32K]"  # never below the bar: the longest, bounded
    assert effective_length(_rows(dict.fromkeys(GRID, 1.0)), "ruler").at_least


def test_a_curve_crossing_the_bar_between_4k_and_8k_gives_4k_under_both_definitions():
    curve = {n: (1.0 if n <= 4000 else 0.5) for n in GRID}
    for definition in ("nolima", "ruler"):
        found = effective_length(_rows(curve), definition)
        assert found.length == 4000 and not found.at_least, definition
        assert found.low == found.high == 4000  # 100 needles, a 50-point cliff: no doubt
        assert found.text() == "4K [4K, 4K]"
    # NoLiMa's bar is relative: a reader at 60% everywhere short keeps 85% of it (51%) at 8K
    low_base = {n: (0.6 if n <= 4000 else 0.55) for n in GRID}
    assert effective_length(_rows(low_base), "nolima").at_least
    assert effective_length(_rows(low_base), "ruler").length is None  # below 85.6% at once


def test_below_the_bar_at_the_shortest_length_has_no_effective_length():
    found = effective_length(_rows(dict.fromkeys(GRID, 0.5)), "ruler")
    assert found.length is None and found.bar == RULER_BAR
    assert found.text().startswith("< 250 [")


def test_the_interval_on_the_length_widens_as_the_needles_get_fewer():
    # 8K sits just below NoLiMa's bar (85% of 100 = 85): 80%
    curve = {n: (1.0 if n <= 4000 else 0.8 if n == 8000 else 0.3) for n in GRID}

    def width(n):
        found = effective_length(_rows(curve, n=n), "nolima")
        assert found.length == 4000
        index = {v: i for i, v in enumerate(GRID)}
        return index[found.high] - index[found.low]

    assert width(400) < width(20)


def test_the_rows_order_changes_no_byte():
    rows = _rows({n: (1.0 if n <= 2000 else 0.84) for n in GRID}, n=40)
    shuffled = rows.sample(frac=1.0, random_state=5).reset_index(drop=True)
    assert effective_length(rows, "nolima") == effective_length(shuffled, "nolima")


def test_longscore_is_the_change_from_the_base_over_the_base():
    # base = mean at 250, 500, 1K = (80 + 90 + 100) / 3 = 90; at 8K, 45: (45 - 90) / 90
    scores = longscore({250: 80.0, 500: 90.0, 1000: 100.0, 8000: 45.0})
    assert scores[8000] == pytest.approx(-0.5) and scores[1000] == pytest.approx(1 / 9)


def test_a_needle_missing_at_a_length_and_a_grid_without_a_base_are_refused():
    rows = _rows(dict.fromkeys(GRID, 1.0), n=5)
    with pytest.raises(ParameterError, match="pairs every needle"):
        effective_length(rows.iloc[1:], "nolima")
    with pytest.raises(ParameterError, match="NoLiMa's base"):
        effective_length(rows[rows["length"] >= 2000], "nolima")
    assert [tokens_text(n) for n in (250, 1000, 32000, 1500)] == ["250", "1K", "32K", "1,500"]


def test_a_sparse_curve_bounds_the_length_only_where_its_intervals_decide():
    from longctx.effective_length import bounds

    def curve(*points):
        return pd.DataFrame(points, columns=["length", "accuracy", "ci_low", "ci_high"])

    base = (700, 1.0, 1.0, 1.0)  # bar: 85%
    assert bounds(curve(base, (2000, 0.9, 0.86, 0.95), (9600, 0.6, 0.55, 0.65))) == (
        "≥ 2K",
        "< 9,600",
    )
    # an interval across the bar decides nothing at its length, nor above it beyond it
    assert bounds(curve(base, (2000, 0.8, 0.6, 1.0), (4000, 0.9, 0.86, 0.95))) == ("none", "none")
    assert bounds(curve(base, (2000, 0.5, 0.4, 0.6))) == ("none", "< 2K")
    with pytest.raises(ParameterError):
        bounds(curve(base))
