"""Contextual normalization (C-NORM) experiments: context formats on key-value
retrieval and attention-guided delimiter selection for retrieved passages.

Paper: "Grounding long-context reasoning with contextual normalization for RAG"
(sections 2-5). The transforms live in :mod:`longctx.formats`, the attention
vector and the Attention Balance Score in :mod:`longctx.attention`; this module
builds the requests and runs the selection.

Metrics:

* **OAA** (overall averaged accuracy): accuracy averaged over gold positions;
* **OPA** (optimal positioned accuracy): accuracy at the best gold position.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ...errors import ParameterError
from ...formats import check_delimiter, format_passages
from ...metrics import bootstrap_interval, wilson_interval
from ...requests import Request
from ...tasks import kv_retrieval as kv
from ...tasks import multidoc_qa as qa

# Densities of the paper's Figure 2 at the same total id length: many short ids or few long ones.
# The paper: 40 pairs x 32 characters and 10 pairs x 128 characters; the book run scales both by 0.4.
DENSITIES = {"low": 32, "high": 128}


def kv_format_requests(
    *,
    delimiters: Sequence[str],
    density: str,
    num_pairs: int,
    positions: Sequence,
    examples: int,
    seed: int = 0,
    query_aware: bool = False,
) -> list[Request]:
    """Key-value requests: the same seeded examples rendered in each id format.

    ``density`` picks the id length (``low``: 32 hex digits, ``high``: 128). Every
    format sees the same keys, values, order and gold positions, so format effects
    are paired by example and position.
    """
    if density not in DENSITIES:
        raise ParameterError(f"density must be one of {sorted(DENSITIES)}, got {density!r}")
    num_hex = DENSITIES[density]
    base = kv.synthetic_examples(examples, num_pairs, seed=seed, num_hex=num_hex)
    reqs = []
    for d in delimiters:
        check_delimiter(d)
        reqs += kv.make_requests(
            [e.with_format(d) for e in base],
            positions,
            query_aware=query_aware,
            extra_condition={"delimiter": d, "density": density, "num_hex": num_hex},
        )
    return reqs


def oaa_opa(table, by: Sequence[str], position: str = "gold_index", score: str = "correct"):
    """OAA and OPA per group of ``by``: the mean and the max over positions of the
    per-position accuracy (positions weigh equally, as in the paper)."""
    per_position = table.groupby([*by, position], dropna=False)[score].mean().reset_index()
    out = (
        per_position.groupby(list(by), dropna=False)[score]
        .agg(OAA="mean", OPA="max", position_sd="std")
        .reset_index()
    )
    best = per_position.loc[per_position.groupby(list(by), dropna=False)[score].idxmax()]
    out["best_position"] = best[position].to_numpy() + 1
    return out


# ---------------------------------------------------------------------------------------------
# Passages

NO_FORMAT = "none"  # the candidate that leaves passages as they are
# The paper's candidate set (section 4.1: none, -, :, ., ~, +, /, &, ...), with _ added.
QA_CANDIDATES = (NO_FORMAT, "-", ":", ".", "~", "+", "/", "&", "_")


def _delimiter(candidate: str | None) -> str | None:
    return None if candidate in (None, NO_FORMAT) else candidate


def normalize_example(
    example: qa.QAExample, delimiter: str | None, ratio: float, seed: int | str
) -> qa.QAExample:
    """The example with every passage text (gold and distractors) C-NORM formatted; titles,
    question and answers untouched. Each passage's sentence choice is seeded by ``seed``
    and the passage's title and text, so the same passage is formatted alike everywhere."""
    delimiter = _delimiter(delimiter)
    if delimiter is None:
        return example
    docs = [example.gold, *example.distractors]
    texts = format_passages(
        [d.text for d in docs],
        delimiter,
        ratio,
        seed,
        ids=[f"{d.title}|{d.text[:64]}" for d in docs],
    )
    new = [replace(d, text=t) for d, t in zip(docs, texts)]
    return replace(example, gold=new[0], distractors=tuple(new[1:]))


def permuted_example(example: qa.QAExample, seed: int, num_distractors: int) -> qa.QAExample:
    """The paper's controlled setting: the top ``num_distractors`` distractors in a seeded order."""
    docs = list(example.distractors[:num_distractors])
    random.Random(f"cnorm-order:{seed}:{example.example_id}").shuffle(docs)
    return replace(example, distractors=tuple(docs))


def selection_prompts(
    examples: Sequence[qa.QAExample],
    candidates: Sequence[str],
    *,
    num_documents: int,
    ratio: float,
    seed: int = 0,
) -> dict[str, list[str]]:
    """Calibration prompts for each candidate format: every example once, its gold document
    at a seeded random position, distractors in a seeded order; the same documents and
    positions for every candidate, so only the format differs."""
    out: dict[str, list[str]] = {c: [] for c in candidates}
    for ex in examples:
        base = permuted_example(ex, seed, num_documents - 1)
        gold_index = random.Random(f"cnorm-calibration:{seed}:{ex.example_id}").randrange(
            num_documents
        )
        for c in candidates:
            norm = normalize_example(base, c, ratio, seed)
            out[c].append(qa.build_prompt(norm.question, norm.documents(num_documents, gold_index)))
    return out


def qa_requests(
    examples: Sequence[qa.QAExample],
    *,
    num_documents: int,
    positions: Sequence,
    seed: int,
    method: str,
    delimiter: str | None,
    ratio: float,
) -> list[Request]:
    """Requests for one (seed, method): distractors in the seed's order, passages formatted
    with ``delimiter`` at ratio ``ratio`` (``"none"``/``None``: the baseline, unformatted)."""
    delimiter = _delimiter(delimiter)
    out = []
    for ex in examples:
        ex = normalize_example(
            permuted_example(ex, seed, num_documents - 1), delimiter, ratio, seed
        )
        for r in qa.make_requests([ex], num_documents, positions):
            cond = {
                **r.condition,
                "seed": seed,
                "method": method,
                "delimiter": delimiter or NO_FORMAT,
                "ratio": ratio if delimiter else 0.0,
            }
            out.append(replace(r, condition=cond))
    return out


# ---------------------------------------------------------------------------------------------
# Attention-guided selection


def select_delimiter(
    abs_scores: dict[str, Sequence[float]],
    samples: int | None = None,
    rng: random.Random | None = None,
) -> str:
    """``argmax_f mean_s ABS(a_s^(f))`` (paper, section 4.2) over the first ``samples``
    prompts (or a seeded random subset of that size when ``rng`` is given). Ties go to
    the delimiter listed first."""
    if not abs_scores:
        raise ParameterError("no candidate delimiters to select from")
    sizes = {len(v) for v in abs_scores.values()}
    if len(sizes) != 1:
        raise ParameterError("every candidate must be scored on the same prompts")
    n = sizes.pop()
    s = n if samples is None else samples
    if not 1 <= s <= n:
        raise ParameterError(f"samples must be in 1..{n}, got {samples}")
    idx = list(range(s)) if rng is None else rng.sample(range(n), s)
    means = {f: sum(v[i] for i in idx) / s for f, v in abs_scores.items()}
    return max(means, key=lambda f: (means[f], -list(abs_scores).index(f)))


# ---------------------------------------------------------------------------------------------
# Tables


def oaa_opa_table(
    table,
    by: Sequence[str],
    *,
    position: str = "gold_index",
    cluster: str = "example_id",
    score: str = "correct",
    seed: int = 0,
):
    """:func:`oaa_opa` plus intervals: OAA's 95% bootstrap interval resamples whole
    ``cluster`` units (an example is seen at every position); OPA's is the Wilson
    interval at the best position (optimistic: that position was picked as the best)."""
    out = oaa_opa(table, by, position, score)
    lows, highs, opa_lo, opa_hi, n = [], [], [], [], []
    for _, row in out.iterrows():
        mask = (table[list(by)] == row[list(by)].to_numpy()).all(axis=1)
        g = table[mask]
        lo, hi = bootstrap_interval(g[score].tolist(), clusters=g[cluster].tolist(), seed=seed)
        best = g[g[position] == row["best_position"] - 1]
        wlo, whi = wilson_interval(int(best[score].sum()), len(best))
        lows.append(lo), highs.append(hi), opa_lo.append(wlo), opa_hi.append(whi), n.append(len(g))
    out["n"] = n
    out["OAA_low"], out["OAA_high"], out["OPA_low"], out["OPA_high"] = lows, highs, opa_lo, opa_hi
    cols = [
        *by,
        "n",
        "OAA",
        "OAA_low",
        "OAA_high",
        "OPA",
        "OPA_low",
        "OPA_high",
        "best_position",
        "position_sd",
    ]
    return out[cols]


def tokens_accuracy_correlation(
    table,
    *,
    by: str = "delimiter",
    cluster: str = "example_id",
    score: str = "correct",
    tokens: str = "prompt_tokens",
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict:
    """Pearson r between a format's mean prompt tokens and its accuracy across formats (the
    paper's Figure 3: r = -0.82), with a 95% percentile bootstrap interval that resamples
    whole ``cluster`` units (examples), so formats stay paired on the same examples. ``r``
    is NaN when accuracy or tokens do not vary (e.g. every format at 100%); the share of
    resamples where it is undefined is reported."""
    per = table.groupby([by, cluster]).agg(acc=(score, "mean"), tok=(tokens, "mean")).reset_index()
    formats = sorted(per[by].unique())
    clusters = sorted(per[cluster].unique())
    acc = per.pivot(index=cluster, columns=by, values="acc").reindex(
        index=clusters, columns=formats
    )
    tok = per.pivot(index=cluster, columns=by, values="tok").reindex(
        index=clusters, columns=formats
    )
    if acc.isna().any().any():
        raise ParameterError("every format needs every example (a paired design)")

    def r_of(rows):
        a, t = acc.to_numpy()[rows].mean(axis=0), tok.to_numpy()[rows].mean(axis=0)
        if len(formats) < 3 or np.ptp(a) == 0 or np.ptp(t) == 0:
            return float("nan")
        return float(np.corrcoef(t, a)[0, 1])

    everything = np.arange(len(clusters))
    rng = random.Random(seed)
    draws = [
        r_of(np.array([rng.randrange(len(clusters)) for _ in clusters])) for _ in range(n_resamples)
    ]
    defined = [d for d in draws if d == d]
    lo, hi = (
        np.percentile(defined, [2.5, 97.5]).tolist() if defined else (float("nan"), float("nan"))
    )
    return {
        "r": r_of(everything),
        "ci_low": lo,
        "ci_high": hi,
        "formats": len(formats),
        "examples": len(clusters),
        "undefined_share": 1 - len(defined) / n_resamples,
    }
