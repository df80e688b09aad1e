"""Reader-facing number formatting and the sample-size arithmetic, against hand-worked cases."""

import math

import pandas as pd

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


def test_table_headers_read_as_words_and_whole_numbers_lose_their_point_zero():
    from longctx.report import _integers_as_integers, readable_header

    assert readable_header("ci_low") == "95% CI low"
    assert readable_header("prompt_tokens") == "prompt tokens"
    assert readable_header("mean_ABS") == "mean ABS"
    table = _integers_as_integers(pd.DataFrame({"n": [160.0, 24.0], "pct": [25.0, 33.3]}))
    assert table["n"].tolist() == [160, 24] and table["pct"].tolist() == [25.0, 33.3]


def test_a_float_column_is_written_with_one_number_of_decimals():
    from longctx.report import _numbers_as_written

    table = _numbers_as_written(
        pd.DataFrame({"sd": [0.029, 0.0, float("nan")], "w": ["a", "b", "c"]})
    )
    assert table["sd"].tolist()[:2] == ["0.029", "0.000"] and pd.isna(table["sd"].iloc[2])
    assert table["w"].tolist() == ["a", "b", "c"]
    wide = _numbers_as_written(pd.DataFrame({"x": [0.123456, 1.5]}))
    assert wide["x"].tolist() == ["0.1235", "1.5000"]  # at most four places
    counts = _numbers_as_written(pd.DataFrame({"n": [16000, 24]}))
    assert counts["n"].tolist() == ["16,000", "24"]


def test_parameters_are_written_in_words_not_as_a_python_dict():
    from longctx.report import params_text

    text = params_text({"subtasks": ["qa1", "qa2"], "lengths": [4000], "ruler": {"seed": 0}})
    assert text == "subtasks: qa1, qa2; lengths: 4,000; ruler: (seed: 0)"


def test_a_caption_goes_above_the_table_escaped():
    from unittest import mock

    from longctx.report import show

    with mock.patch("IPython.display.display") as display:
        show(pd.DataFrame({"n": [1]}), caption="Counts <by> cell")
    html = display.call_args[0][0].data
    assert html.index("<caption>Counts &lt;by&gt; cell</caption>") < html.index("<thead>")


def test_a_tables_p_values_are_written_as_the_prose_writes_them():
    from unittest import mock

    from longctx.report import show

    frame = pd.DataFrame(
        {"change": [1.25, -3.5], "p": [0.0525, 0.0004], "p_sign_flip": [0.5, float("nan")]}
    )
    with mock.patch("IPython.display.display") as display:
        show(frame)
    html = display.call_args[0][0].data
    assert ">0.052<" in html and "&lt; 0.001" in html and ">0.50<" in html
    assert "0.0525" not in html and ">1.25<" in html  # other numbers keep their decimals


def test_a_p_value_keeps_two_significant_digits_and_its_trailing_zero():
    from longctx.report import format_p

    assert [format_p(p) for p in (1.0, 0.2, 0.022, 0.0999, 0.0005)] == [
        "1.0",
        "0.20",
        "0.022",
        "0.10",
        "< 0.001",
    ]
    assert format_p(float("nan")) == "n/a"


def test_a_glued_whole_number_reads_with_thousands_separators():
    import numpy as np

    from longctx.report import thousands

    assert [thousands(v) for v in (1456, np.int64(12000), 880, True, 2.5, "x")] == [
        "1,456",
        "12,000",
        880,
        True,
        2.5,
        "x",
    ]


def test_words_are_listed_as_prose_lists_them():
    from longctx.report import and_list

    assert [and_list(w) for w in ([], ["a"], ["a", "b"], ["a", "b", "c"])] == [
        "",
        "a",
        "a and b",
        "a, b and c",
    ]
