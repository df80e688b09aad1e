"""Metrics exactly as the papers define them, plus intervals for every accuracy."""

from __future__ import annotations

import hashlib
import math
import random
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np
import pandas as pd
from scipy.stats import norm, pearsonr

_DROP_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalization, as used by Lost in the Middle (``metrics.normalize_answer``).

    In this order: lowercase; drop every ASCII punctuation character
    (``string.punctuation``); replace the whole words ``a``, ``an``, ``the`` with a
    space; collapse runs of whitespace to one space and strip the ends.
    Non-ASCII characters (accents, curly quotes) are kept as they are.
    """
    text = text.lower().translate(_DROP_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def best_subspan_em(prediction: str, gold_answers: Sequence[str]) -> float:
    """Lost in the Middle QA accuracy: 1.0 if any normalized gold answer is a substring
    of the normalized prediction, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(normalize_answer(g) in pred for g in gold_answers))


def qa_accuracy(response: str, gold_answers: Sequence[str]) -> float:
    """Lost in the Middle multi-document QA accuracy: :func:`best_subspan_em` of the
    response's first line (``response.split("\\n")[0].strip()``). Only the first line
    counts, so a model cannot score by copying the context, which contains the answer."""
    return best_subspan_em(response.split("\n")[0].strip(), gold_answers)


def squad_exact_match(prediction: str, gold_answers: Sequence[str]) -> float:
    """SQuAD exact match (official ``evaluate-v1.1.py``): 1.0 if the normalized
    prediction equals some normalized gold answer (max over gold answers), else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in gold_answers))


def squad_f1(prediction: str, gold_answers: Sequence[str]) -> float:
    """SQuAD token F1 (official ``evaluate-v1.1.py``), max over gold answers.

    Tokens are the whitespace-split normalized strings; overlap counts shared tokens
    with multiplicity (a bag-of-words intersection). Precision = overlap / prediction
    tokens, recall = overlap / gold tokens, F1 = 2PR / (P + R); 0.0 when nothing overlaps.
    """
    pred_tokens = normalize_answer(prediction).split()
    best = 0.0
    for gold in gold_answers:
        gold_tokens = normalize_answer(gold).split()
        overlap = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
        if overlap == 0:
            continue
        precision, recall = overlap / len(pred_tokens), overlap / len(gold_tokens)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def includes_normalized(
    normalized_text: str, normalized_answers: Iterable[str], *, whole_words: bool = False
) -> bool:
    """Whether some already-normalized answer occurs in already-normalized text: as a
    substring, or with ``whole_words`` only as a run of whole words (the token-level match
    of DPR's ``hasanswer``). Empty answers never match. Callers that test one text against
    many answer sets (distractor filters) normalize each text once and call this."""
    if whole_words:
        padded = f" {normalized_text} "
        return any(a and f" {a} " in padded for a in normalized_answers)
    return any(a and a in normalized_text for a in normalized_answers)


def answer_inclusion(prediction: str, gold_answers: Sequence[str]) -> float:
    """Answer inclusion (semantic-competition paper): 1.0 if any normalized gold answer
    appears anywhere in the normalized output, else 0.0 (the same test as
    :func:`best_subspan_em`). An empty gold answer never counts as included."""
    return float(
        includes_normalized(
            normalize_answer(prediction), (normalize_answer(a) for a in gold_answers)
        )
    )


def nolima_contains(response: str, gold_answers: Sequence[str]) -> float:
    """NoLiMa's ``contains`` metric, used unchanged by the TAG paper: 1.0 if any gold answer
    occurs in the response as a substring, else 0.0. Exactly as NoLiMa's evaluator:
    case-sensitive, no normalization, the whole response searched ("Yuki." and "It is Yuki"
    count for gold "Yuki"; "yuki" does not)."""
    return float(any(str(g) in response for g in gold_answers))


def extremum_drop_rate(acc_short: float, acc_long: float) -> float:
    """The TAG paper's extremum drop rate in percent: the relative fall in accuracy from the
    shortest to the longest context, ``100 * (acc_short - acc_long) / acc_short`` (Table 1:
    81.19 at 250 tokens and 32.67 at 32K give 59.76). Undefined (nan) when ``acc_short`` is 0."""
    if acc_short == 0:
        return float("nan")
    return 100.0 * (acc_short - acc_long) / acc_short


def retention(scores_by_h: dict, baseline_h=0) -> dict:
    """Retention R(H) = M(H) / M(baseline_h) for every H in ``scores_by_h`` (H -> M(H)).

    R is undefined (nan) when the baseline M(0) is 0: nothing was there to retain.
    """
    if baseline_h not in scores_by_h:
        raise ValueError(
            f"retention needs the baseline H={baseline_h}; got H in {sorted(scores_by_h)}"
        )
    base = scores_by_h[baseline_h]
    return {h: (m / base if base else float("nan")) for h, m in sorted(scores_by_h.items())}


def censored_half_life(retention_by_h: dict, threshold: float = 0.5) -> dict:
    """K_1/2: the first tested H (in increasing order, baseline excluded) with
    R(H) <= ``threshold``. If no tested H crosses, the half-life is right-censored at the
    largest tested H (reported as ``"> H_max"``): no crossing is interpolated between
    or beyond tested points. With an undefined retention (nan) nothing can be said.

    Returns ``{"value": H or H_max, "censored": bool, "label": str}``.
    """
    hs = sorted(h for h in retention_by_h if h != 0)
    if not hs:
        raise ValueError("half-life needs at least one H > 0")
    values = [retention_by_h[h] for h in hs]
    if any(math.isnan(v) for v in values):
        return {"value": None, "censored": False, "label": "undefined"}
    for h, r in zip(hs, values):
        if r <= threshold:
            return {"value": h, "censored": False, "label": str(h)}
    return {"value": hs[-1], "censored": True, "label": f"> {hs[-1]}"}


def kv_accuracy(prediction: str, value: str) -> float:
    """Lost in the Middle key-value accuracy: 1.0 if the gold value occurs in the
    prediction, compared case-insensitively and without any other normalization."""
    return float(value.lower() in prediction.lower())


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    For n = 0 the interval is the uninformative (0, 1).
    """
    if n == 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} not in [0, {n}]")

    z = norm.ppf(0.5 + confidence / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, float(centre - half))
    hi = 1.0 if successes == n else min(1.0, float(centre + half))
    return lo, hi


def content_seed(units: Iterable) -> int:
    """A resampling seed from the data itself: the SHA-256 of the sorted unit ids. No global
    seed: the same units, in any order, on any machine, give the same draws."""
    text = "\n".join(sorted(str(u) for u in units))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def randrange_draws(seed, n: int, count: int) -> np.ndarray:
    """The first ``count`` values of ``random.Random(seed).randrange(n)``, drawn at once.

    ``randrange(n)`` takes one 32-bit Mersenne Twister word per try, keeps its top
    ``n.bit_length()`` bits and tries again while they reach ``n``. numpy's MT19937, given
    the same state, yields the same words, so the same filter gives the same numbers
    (a test compares them with ``random.Random``) at C speed."""
    k = n.bit_length()
    if n < 1 or k > 32:
        rng = random.Random(seed)
        return np.array([rng.randrange(n) for _ in range(count)], dtype=np.int64)
    state = random.Random(seed).getstate()[1]
    bits = np.random.MT19937()
    bits.state = {
        "bit_generator": "MT19937",
        "state": {"key": np.array(state[:624], dtype=np.uint32), "pos": state[624]},
    }
    out = np.empty(count, dtype=np.int64)
    filled = 0
    while filled < count:
        need = count - filled
        tries = bits.random_raw(need * (1 << k) // n + 64) >> np.uint64(32 - k)
        kept = tries[tries < n][:need]
        out[filled : filled + kept.size] = kept
        filled += kept.size
    return out


def bootstrap_interval(
    values: Sequence[float],
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    clusters: Sequence | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, with a seeded ``random.Random``.

    With ``clusters`` (one label per value, e.g. the example id) whole clusters are
    resampled, so items that share an example (the same keys at several depths) are
    not counted as independent; the statistic is the mean over all resampled items.
    """
    vals = list(values)
    if not vals:
        return float("nan"), float("nan")
    if clusters is None:
        groups = [[v] for v in vals]
    else:
        if len(clusters) != len(vals):
            raise ValueError(
                f"need one cluster label per value, got {len(clusters)} for {len(vals)}"
            )
        by_label: dict = {}
        for label, v in zip(clusters, vals):
            by_label.setdefault(label, []).append(v)
        groups = list(by_label.values())
    sums = [sum(g) for g in groups]
    counts = np.array([len(g) for g in groups], dtype=np.int64)
    n = len(sums)
    draws = randrange_draws(seed, n, n * n_resamples).reshape(n_resamples, n)
    sizes = counts[draws].sum(axis=1)
    if all(float(v).is_integer() and abs(v) < 2**52 for v in sums):
        # integer sums add exactly in any order: numpy's sums are Python's, bit for bit
        totals = np.array(sums, dtype=np.float64)[draws].sum(axis=1).tolist()
    else:  # fractions: added left to right, as a Python loop over the draws adds them
        totals = [sum(sums[i] for i in row) for row in draws.tolist()]
    means = sorted(total / int(size) for total, size in zip(totals, sizes.tolist()))
    lo_idx = int(((1 - confidence) / 2) * n_resamples)
    hi_idx = min(n_resamples - 1, int(((1 + confidence) / 2) * n_resamples))
    return means[lo_idx], means[hi_idx]


def unit_mean(per_unit: pd.Series, confidence: float = 0.95) -> dict:
    """The mean of one score per independent unit (a series indexed by unit id) with its
    percentile bootstrap over units, seeded by the ids (:func:`content_seed`), so the same
    units in any order give the same bytes: ``n``, ``accuracy``, ``ci_low``, ``ci_high``."""
    per_unit = per_unit.sort_index()  # the draws index units in one order, whatever came in
    seed = content_seed(per_unit.index.tolist())
    low, high = bootstrap_interval(per_unit.tolist(), confidence, seed=seed)
    return {"n": len(per_unit), "accuracy": float(per_unit.mean()), "ci_low": low, "ci_high": high}


def summarize(
    df,
    by: Iterable[str],
    score: str = "correct",
    confidence: float = 0.95,
    unit: str | None = "example_id",
):
    """Accuracy per group with its interval: columns n, units, accuracy, ci_low, ci_high, interval.

    When every row of a group is a different ``unit`` (question, problem, example), rows are
    independent and the interval is Wilson's. When a group pools several rows of one unit
    (e.g. overall accuracy over the positions of the same questions), the rows are not
    independent: the interval is then a percentile bootstrap that resamples whole units
    (:func:`bootstrap_interval` with clusters), never a Wilson interval over rows. ``unit=None``
    (or a table without that column) treats rows as independent.
    """
    by = list(by)
    clustered = unit is not None and unit in df.columns
    rows = []
    for keys, group in df.groupby(by, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        values = group[score].astype(float).tolist()
        n = len(values)
        units = group[unit].nunique() if clustered else n
        if clustered and units < n:
            lo, hi = bootstrap_interval(values, confidence, clusters=group[unit].tolist())
            method = "cluster bootstrap"
        else:
            lo, hi = wilson_interval(int(round(sum(values))), n, confidence)
            method = "wilson"
        rows.append(
            {
                **dict(zip(by, keys)),
                "n": n,
                "units": units,
                "accuracy": sum(values) / n,
                "ci_low": lo,
                "ci_high": hi,
                "interval": method,
            }
        )
    return pd.DataFrame(rows)


def paired_bootstrap_difference(
    a: Sequence[float],
    b: Sequence[float],
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    clusters: Sequence | None = None,
) -> tuple[float, float, float]:
    """Mean of ``b - a`` over paired items, with a percentile bootstrap interval that
    resamples the pairs (so both conditions always see the same items), or whole
    ``clusters`` of pairs when items share an example."""
    if len(a) != len(b):
        raise ValueError(f"paired samples need equal lengths, got {len(a)} and {len(b)}")
    diffs = [y - x for x, y in zip(a, b)]
    if not diffs:
        return float("nan"), float("nan"), float("nan")
    lo, hi = bootstrap_interval(diffs, confidence, n_resamples, seed, clusters=clusters)
    return sum(diffs) / len(diffs), lo, hi


MAX_DENOMINATOR = 10_000  # the exact sign-flip test's largest common denominator


def sign_flip_test(
    differences: Sequence[float],
    n_resamples: int = 200_000,
    seed: int = 0,
    max_denominator: int = MAX_DENOMINATOR,
) -> float:
    """Two-sided paired sign-flip p-value for ``mean(differences) == 0``, exact.

    Under the null each per-unit difference is as likely to have the opposite sign, so the
    observed sum is compared with its distribution over all ``2**m`` sign flips. That
    distribution is computed exactly by convolution when the differences share a common
    denominator of at most ``max_denominator`` (means of 0/1 scores over a few items always
    do); for 0/+-1 differences it is the exact binomial sign test on the discordant units.
    Otherwise (e.g. F1 differences) it is a seeded Monte Carlo estimate over
    ``n_resamples`` flips, ``(1 + hits) / (1 + n_resamples)``. Pass one difference per
    independent unit (a question, a needle), averaged over its items.
    """
    d = np.asarray(list(differences), dtype=float)
    if d.size == 0:
        return float("nan")
    d = d[d != 0]  # a zero difference is the same flipped: it changes no sum
    if d.size == 0:
        return 1.0
    weights = integer_weights(np.abs(d), max_denominator)
    if weights is None:
        return _sign_flip_monte_carlo(d, n_resamples, seed)
    total = int(weights.sum())
    observed = int(weights[d > 0].sum())  # the sum of the positive side
    # probability of each possible positive-side sum under random signs
    dist = np.zeros(total + 1)
    dist[0] = 1.0
    reach = 0
    for w in weights.tolist():
        dist[w : reach + w + 1] += dist[: reach + 1].copy()
        dist[: reach + w + 1] *= 0.5
        reach += w
    # the signed sum is 2 * positive - total; as extreme as observed on either side
    gap = abs(2 * observed - total)
    if gap == 0:  # a sum of exactly 0: every arrangement is as extreme
        return 1.0
    upper = (total + gap) // 2
    lower = (total - gap) // 2
    p = dist[upper:].sum() + dist[: lower + 1].sum()
    return float(min(1.0, p))


def integer_weights(values: np.ndarray, max_denominator: int) -> np.ndarray | None:
    """``values`` times their least common denominator, as integers, or None when that
    denominator exceeds ``max_denominator`` (the values are not small fractions)."""
    common = 1
    for v in values.tolist():
        fraction = Fraction(v).limit_denominator(max_denominator)
        if abs(float(fraction) - v) > 1e-9:
            return None
        common = math.lcm(common, fraction.denominator)
        if common > max_denominator:
            return None
    scaled = np.rint(values * common)
    if scaled.sum() > 5_000_000:  # the convolution's size; beyond it sample instead
        return None
    return scaled.astype(np.int64)


def _sign_flip_monte_carlo(d: np.ndarray, n_resamples: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    observed = abs(d.sum())
    hits = 0
    for start in range(0, n_resamples, 10_000):
        size = min(10_000, n_resamples - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(size, d.size))
        hits += int((np.abs(signs @ d) >= observed - 1e-12).sum())
    return (1 + hits) / (1 + n_resamples)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values for one family of tests, in the input's order
    (control of the family-wise error rate; NaN stays NaN and does not count)."""
    p = np.asarray(list(pvalues), dtype=float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid], kind="stable")]
    m = len(order)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


def pearson_interval(x: Sequence[float], y: Sequence[float], confidence: float = 0.95):
    """Pearson's r of ``x`` and ``y`` with its Fisher-z interval and two-sided p:
    ``(r, low, high, p)``; all NaN when either side is constant (r is undefined there, as a
    reader scoring the same on every arm)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return (float("nan"),) * 4
    res = pearsonr(x, y)
    ci = res.confidence_interval(confidence_level=confidence)
    return float(res.statistic), float(ci.low), float(ci.high), float(res.pvalue)
