"""Metrics exactly as the papers define them, plus intervals for every accuracy."""

from __future__ import annotations

import math
import random
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm, permutation_test

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalization, as used by Lost in the Middle (``metrics.normalize_answer``).

    In this order: lowercase; drop every ASCII punctuation character
    (``string.punctuation``); replace the whole words ``a``, ``an``, ``the`` with a
    space; collapse runs of whitespace to one space and strip the ends.
    Non-ASCII characters (accents, curly quotes) are kept as they are.
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
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
    sums = [(sum(g), len(g)) for g in groups]
    rng = random.Random(seed)
    n = len(sums)
    means = []
    for _ in range(n_resamples):
        total = count = 0
        for _ in range(n):
            s_, c_ = sums[rng.randrange(n)]
            total += s_
            count += c_
        means.append(total / count)
    means.sort()
    lo_idx = int(((1 - confidence) / 2) * n_resamples)
    hi_idx = min(n_resamples - 1, int(((1 + confidence) / 2) * n_resamples))
    return means[lo_idx], means[hi_idx]


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


def sign_flip_test(differences: Sequence[float], n_resamples: int = 9999, seed: int = 0) -> float:
    """Two-sided paired sign-flip randomization p-value for ``mean(differences) == 0``.

    Under the null each paired difference is as likely to have the opposite sign, so
    the mean is compared with its distribution over sign flips (scipy's
    ``permutation_test`` with ``permutation_type="samples"`` on one sample). Exact
    (all ``2**n`` flips) when that is at most ``n_resamples``, otherwise a seeded Monte
    Carlo estimate. Zero differences are dropped first (they cannot change sign, so the
    p-value is the same), which keeps the test exact for up to log2(n_resamples) nonzero
    differences. Pass one difference per independent unit (e.g. per question, averaged
    over its positions), not per correlated item.
    """
    d = np.asarray(list(differences), dtype=float)
    if d.size == 0:
        return float("nan")
    # A zero difference looks the same flipped: dropping zeros rescales the mean by a
    # constant and leaves the p-value unchanged, but makes exact enumeration reachable
    # (with 0/1 metrics most questions tie).
    d = d[d != 0]
    if d.size <= 1:  # all ties (p = 1), or the null {d, -d}: both as extreme as the observation
        return 1.0
    res = permutation_test(
        (d,),
        np.mean,
        permutation_type="samples",
        alternative="two-sided",
        n_resamples=n_resamples,
        random_state=np.random.default_rng(seed),
    )
    return float(res.pvalue)
