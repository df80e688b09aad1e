import pytest

from longctx.metrics import (
    best_subspan_em,
    bootstrap_interval,
    includes_normalized,
    kv_accuracy,
    normalize_answer,
    summarize,
    wilson_interval,
)


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  A  cat, an owl and THE dog. ", "cat owl and dog"),
        ("Theory of the atom", "theory of atom"),  # 'the' only as a whole word
        ("U.S.A.", "usa"),
        ("Zürich — «city»", "zürich — «city»"),  # non-ASCII kept
        ("1,000,000", "1000000"),
        ("", ""),
    ],
)
def test_normalize_answer_hand_cases(raw, expected):
    assert normalize_answer(raw) == expected


def test_best_subspan_em_substring_after_normalization():
    assert best_subspan_em("It was the Eiffel Tower, in Paris.", ["Eiffel tower"]) == 1.0
    assert best_subspan_em("Paris", ["Eiffel Tower", "paris"]) == 1.0  # any gold answer counts
    assert best_subspan_em("The tower", ["Eiffel Tower"]) == 0.0
    assert best_subspan_em("São Paulo", ["Sao Paulo"]) == 0.0  # accents are not stripped
    assert best_subspan_em("ecumenical council", ["The Council"]) == 1.0


def test_kv_accuracy_is_case_insensitive_containment():
    value = "703a7ce5-f17f-4e6d-b895-5836ba5ec71c"
    assert kv_accuracy(f'The value is "{value.upper()}".', value) == 1.0
    assert kv_accuracy(value[:-1], value) == 0.0
    assert kv_accuracy(value.replace("-", ""), value) == 0.0  # no normalization beyond case


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_bootstrap_interval_degenerate_and_seeded():
    assert bootstrap_interval([1.0] * 20) == (1.0, 1.0)
    a = bootstrap_interval([0, 1] * 10, seed=3)
    assert a == bootstrap_interval([0, 1] * 10, seed=3)
    assert a[0] < 0.5 < a[1]


def test_summarize_groups_and_intervals():
    import pandas as pd

    df = pd.DataFrame({"pos": [1, 1, 1, 2, 2], "correct": [1, 1, 0, 0, 0]})
    s = summarize(df, ["pos"]).set_index("pos")
    assert s.loc[1, "n"] == 3 and s.loc[1, "accuracy"] == pytest.approx(2 / 3)
    assert s.loc[2, "accuracy"] == 0 and s.loc[2, "ci_low"] == 0
    assert s.loc[1, "ci_low"] < 2 / 3 < s.loc[1, "ci_high"]


def test_paired_bootstrap_difference():
    from longctx.metrics import paired_bootstrap_difference

    # Identical: exactly zero
    assert paired_bootstrap_difference([1, 0, 1], [1, 0, 1]) == (0.0, 0.0, 0.0)
    mean, lo, hi = paired_bootstrap_difference([0] * 10, [1] * 10)
    assert (mean, lo, hi) == (1.0, 1.0, 1.0)
    mean, lo, hi = paired_bootstrap_difference([0, 1] * 10, [1, 1] * 10, seed=1)
    assert mean == 0.5 and lo < 0.5 < hi and lo > 0
    with pytest.raises(ValueError):
        paired_bootstrap_difference([1], [1, 0])


def test_cluster_bootstrap_widens_for_correlated_items():
    # four examples, each seen at five depths with the same outcome: 4 independent units, not 20
    values = [1] * 5 + [0] * 5 + [1] * 5 + [0] * 5
    labels = [i // 5 for i in range(20)]
    lo_items, hi_items = bootstrap_interval(values, seed=0)
    lo_clusters, hi_clusters = bootstrap_interval(values, seed=0, clusters=labels)
    assert hi_clusters - lo_clusters > hi_items - lo_items
    # singleton clusters are the plain item bootstrap, draw for draw
    assert bootstrap_interval(values, seed=0, clusters=list(range(20))) == (lo_items, hi_items)
    with pytest.raises(ValueError):
        bootstrap_interval(values, clusters=labels[:3])


def test_sign_flip_test_hand_worked():
    from longctx.metrics import sign_flip_test

    # no difference at all: every flip gives the same mean, p = 1
    assert sign_flip_test([0.0, 0.0, 0.0, 0.0]) == 1.0
    assert sign_flip_test([0.7]) == 1.0  # one unit: its flip is as extreme
    # three +1 differences: of the 8 sign patterns only all-plus and all-minus reach |mean| = 1 -> p = 2/8
    assert sign_flip_test([1.0, 1.0, 1.0]) == pytest.approx(0.25)
    # symmetric differences: the observed mean 0 is the centre of the null, p = 1
    assert sign_flip_test([1.0, -1.0, 2.0, -2.0]) == pytest.approx(1.0)
    # ties drop out: 4 improvements among 40 questions is exactly 2 / 2**4, not a Monte Carlo estimate
    assert sign_flip_test([1.0] * 4 + [0.0] * 36) == 2 / 16
    # 3 up, 2 down among 24: the mean is 1/24 and every sign pattern is at least as far from 0
    assert sign_flip_test([1.0] * 3 + [-1.0] * 2 + [0.0] * 19) == 1.0


def test_summary_of_repeated_items_is_clustered_not_wilson():
    """Pooling several rows of one question (its positions) must not count them as
    independent: the interval resamples questions, and is wider than a Wilson interval over rows."""
    import pandas as pd

    from longctx.metrics import summarize, wilson_interval

    # 10 questions x 5 positions; a question is either always right or always wrong.
    rows = [
        {"example_id": f"q{q}", "position": p, "correct": float(q < 6)}
        for q in range(10)
        for p in range(5)
    ]
    table = summarize(pd.DataFrame(rows), ["position"])
    assert (table["interval"] == "wilson").all() and (table["units"] == table["n"]).all()
    pooled = summarize(pd.DataFrame(rows).assign(all="all"), ["all"]).iloc[0]
    assert pooled["interval"] == "cluster bootstrap" and pooled["n"] == 50 and pooled["units"] == 10
    naive_lo, naive_hi = wilson_interval(30, 50)
    assert pooled["ci_high"] - pooled["ci_low"] > 1.5 * (naive_hi - naive_lo)
    # the clustered interval equals the Wilson interval of the 10 questions' own outcomes, roughly
    lo10, hi10 = wilson_interval(6, 10)
    assert abs((pooled["ci_high"] - pooled["ci_low"]) - (hi10 - lo10)) < 0.2
    independent = summarize(pd.DataFrame(rows).assign(all="all"), ["all"], unit=None).iloc[0]
    assert independent["interval"] == "wilson"


def test_includes_normalized_matches_substrings_or_whole_words():
    # "s" is inside "is" and "pass" as a substring, but is a whole word only in "plan s b"
    assert includes_normalized("this is pass", ["s"])
    assert not includes_normalized("this is pass", ["s"], whole_words=True)
    assert includes_normalized("plan s b", ["s"], whole_words=True)
    assert includes_normalized("denver broncos won", ["denver broncos"], whole_words=True)
    assert not includes_normalized("anything", ["", "nothing"])  # empty answers never match


def _bootstrap_one_draw_at_a_time(values, confidence=0.95, n_resamples=2000, seed=0, clusters=None):
    """The interval as a Python loop draws it, one randrange at a time."""
    import random

    by_label: dict = {}
    for label, v in zip(clusters if clusters is not None else range(len(values)), values):
        by_label.setdefault(label, []).append(v)
    sums = [(sum(g), len(g)) for g in by_label.values()]
    rng, n, means = random.Random(seed), len(sums), []
    for _ in range(n_resamples):
        total = count = 0
        for _ in range(n):
            s_, c_ = sums[rng.randrange(n)]
            total += s_
            count += c_
        means.append(total / count)
    means.sort()
    lo = int(((1 - confidence) / 2) * n_resamples)
    hi = min(n_resamples - 1, int(((1 + confidence) / 2) * n_resamples))
    return means[lo], means[hi]


def test_bootstrap_draws_are_randoms_own_bit_for_bit():
    import random

    from longctx.metrics import randrange_draws

    for seed in (0, 7, "a string seed", 2**40):
        for n in (1, 2, 3, 5, 64, 65, 300, 1000, 2**31 + 1, 2**33):
            rng = random.Random(seed)
            expected = [rng.randrange(n) for _ in range(3000)]
            assert randrange_draws(seed, n, 3000).tolist() == expected, (seed, n)
    rng = random.Random(1)
    cases = [
        ([rng.choice((0.0, 1.0)) for _ in range(90)], None),
        ([rng.choice((-1.0, 0.0, 1.0)) for _ in range(120)], [i // 3 for i in range(120)]),
        ([rng.random() for _ in range(50)], None),  # F1-like fractions: left-to-right sums
        ([rng.random() - 0.5 for _ in range(60)], [i % 17 for i in range(60)]),
    ]
    for seed, (values, clusters) in enumerate(cases):
        assert bootstrap_interval(values, seed=seed, clusters=clusters) == (
            _bootstrap_one_draw_at_a_time(values, seed=seed, clusters=clusters)
        )


def test_a_content_seed_is_the_units_not_their_order():
    from longctx.metrics import content_seed

    assert content_seed(["b", "a", "c"]) == content_seed(["c", "b", "a"])
    assert content_seed(["a", "b"]) != content_seed(["a", "c"])
