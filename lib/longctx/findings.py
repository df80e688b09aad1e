"""The book's findings page: each paper's headline claims, the paper's number, ours with a
95% interval and n, and a verdict, all computed from the committed rows.

Every claim is a paired difference (treatment minus control, in points) on the same items,
with a percentile bootstrap interval over the independent units (questions, problems or
key-value examples; rows that share one are resampled together) and a two-sided sign-flip
p-value on the per-unit differences. The verdict rule (:func:`verdict`):

* **reproduced**: the interval excludes 0 on the side of the paper's effect and the
  sign-flip p is below 0.05;
* **opposite direction**: the same on the other side;
* **not reproduced**: otherwise, when the interval excludes the paper's reported effect
  (an effect as large as the paper's is ruled out);
* **inconclusive at this n**: otherwise (the interval holds the paper's effect, or the
  paper gives no size to rule out).

Why both: when only a few units change between conditions, the percentile bootstrap can
exclude 0 where the exact test cannot (4 changed questions, all one way: p = 2/16), so a
direction is called only when the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from .errors import DataFileError
from .store import ResultsStore

DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct"
VERDICTS = ("reproduced", "opposite direction", "not reproduced", "inconclusive at this n")
ALPHA = 0.05  # the sign-flip test's level, which must agree with the interval to call a direction


@dataclass(frozen=True)
class Estimate:
    """Our number for a claim: ``difference`` (points) with its 95% interval, the number of
    independent units ``n``, a sign-flip ``p``, and the two sides in words."""

    difference: float
    ci_low: float
    ci_high: float
    n: int
    p: float
    detail: str


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    chapter: str  # notebook name, e.g. "kv_retrieval"
    label: str  # MyST label of the chapter section that shows it
    claim: str
    comparison: str  # what our difference is, e.g. "middle minus first (pts)"
    paper_value: str
    direction: int  # +1 / -1: the sign of the paper's effect on our difference
    paper_effect: float | None  # the paper's effect in points, if it reports one
    setting: str  # our model/setting in words
    compute: Callable[[Path], Estimate]
    short: str = ""  # a few words for the forest plot


def verdict(est: Estimate, claim: Claim) -> str:
    """One of :data:`VERDICTS` by the rule in the module docstring."""
    lo, hi = est.ci_low, est.ci_high
    if (lo > 0 or hi < 0) and est.p < ALPHA:
        return "reproduced" if (lo > 0) == (claim.direction > 0) else "opposite direction"
    if claim.paper_effect is not None and not lo <= claim.paper_effect <= hi:
        return "not reproduced"
    return "inconclusive at this n"


# ---------------------------------------------------------------- shared helpers


def _rows(results_dir: Path, experiment: str, model: str = DEFAULT_MODEL) -> list[dict]:
    store = ResultsStore(results_dir, model, experiment)
    if not store.exists():
        raise DataFileError(f"{store.packed_path} is missing: the findings need the committed rows of '{experiment}'")
    return store.rows()


def _matches(cond: dict, where: dict) -> bool:
    return all(cond.get(k) == v for k, v in where.items())


def paired_estimate(control: dict, treatment: dict, *, side_names: tuple[str, str] = ("control", "treatment"),
                    seed: int = 0) -> Estimate:
    """``treatment`` minus ``control`` in points, over the units in both. Each side maps a unit
    (question, problem, example) to its score, already averaged over the unit's items."""
    from .metrics import paired_bootstrap_difference, sign_flip_test

    units = sorted(set(control) & set(treatment))
    if not units:
        raise DataFileError("no unit was run under both conditions of this claim")
    a = [control[u] for u in units]
    b = [treatment[u] for u in units]
    mean, lo, hi = paired_bootstrap_difference(a, b, seed=seed)
    p = sign_flip_test([y - x for x, y in zip(a, b)], seed=seed)
    detail = (f"{side_names[1]} {100 * sum(b) / len(b):.1f}% vs {side_names[0]} {100 * sum(a) / len(a):.1f}%")
    return Estimate(100 * mean, 100 * lo, 100 * hi, len(units), p, detail)


def _by_unit(rows, where: dict, score: Callable[[dict], float], unit=lambda r: r["example_id"]) -> dict:
    """Mean score per unit over the rows whose condition matches ``where``."""
    sums: dict = {}
    for r in rows:
        if _matches(r["condition"], where):
            total, count = sums.get(unit(r), (0.0, 0))
            sums[unit(r)] = (total + score(r), count + 1)
    return {u: t / c for u, (t, c) in sums.items()}


# ---------------------------------------------------------------- Lost in the Middle


def _kv_score(row):
    from .tasks.kv_retrieval import score

    return score(row)


def _kv_release_rows(results_dir: Path) -> list[dict]:
    """The 140-pair rows of the book run's records only: the store may already hold more
    records (an extension in progress), which the chapter does not read yet."""
    from .chapters import scale
    from .chapters.kv_retrieval import examples_for

    examples, _ = examples_for(140, scale("kv_retrieval", "book"))
    keep = {ex.example_id for ex in examples}
    return [r for r in _rows(results_dir, "kv_retrieval") if r["example_id"] in keep]


def kv_middle_vs_first(results_dir: Path) -> Estimate:
    rows = _kv_release_rows(results_dir)
    base = {"source": "release-140", "num_pairs": 140, "query_aware": False}
    return paired_estimate(_by_unit(rows, {**base, "gold_index": 0}, _kv_score),
                           _by_unit(rows, {**base, "gold_index": 70}, _kv_score), side_names=("first", "middle"))


def kv_query_aware_middle(results_dir: Path) -> Estimate:
    rows = _kv_release_rows(results_dir)
    base = {"source": "release-140", "num_pairs": 140, "gold_index": 70}
    return paired_estimate(_by_unit(rows, {**base, "query_aware": False}, _kv_score),
                           _by_unit(rows, {**base, "query_aware": True}, _kv_score),
                           side_names=("query at end", "query-aware"))


def _qa_score(row):
    from .tasks.multidoc_qa import score

    return score(row)


def _oracle_ids(n: int) -> set[str]:
    """Ids of the first ``n`` NQ-Open oracle questions: a chapter's book questions, since the
    stores can also hold rows of larger, unfinished plans."""
    from .tasks.multidoc_qa import read_oracle

    return {q.example_id for q in read_oracle(limit=n)}


def _multidoc_headline(results_dir: Path, num_questions: int | None = None):
    """Rows of the multi-document headline: 20 documents, query at end, BM25 distractors from
    the oracle reconstruction, on the first ``num_questions`` questions (all when None)."""
    rows = _rows(results_dir, "multidoc_qa")
    keep = _oracle_ids(num_questions) if num_questions else None
    return [r for r in rows if keep is None or r["example_id"] in keep]


def _multidoc_sides(results_dir: Path):
    from .chapters import scale

    n = scale("multidoc_qa", "book")["num_questions"]
    rows = _multidoc_headline(results_dir, n)
    docs = {"setting": "documents", "num_documents": 20, "query_aware": False, "distractors": "bm25",
            "random_order": False}
    first = _by_unit(rows, {**docs, "gold_index": 0}, _qa_score)
    middle = _by_unit(rows, {**docs, "gold_index": 9}, _qa_score)
    last = _by_unit(rows, {**docs, "gold_index": 19}, _qa_score)
    closed = _by_unit(rows, {"setting": "closed-book"}, _qa_score)
    return first, middle, last, closed


def qa_middle_vs_edges(results_dir: Path) -> Estimate:
    """The U-shape as a contrast fixed in advance: middle minus the mean of first and last."""
    first, middle, last, _ = _multidoc_sides(results_dir)
    edge = {u: (first[u] + last[u]) / 2 for u in set(first) & set(last)}
    return paired_estimate(edge, middle, side_names=("edges (mean of first and last)", "middle"))


def qa_middle_vs_closed_book(results_dir: Path) -> Estimate:
    _, middle, _, closed = _multidoc_sides(results_dir)
    return paired_estimate(closed, middle, side_names=("closed-book", "middle of 20"))


def _open_domain_sides(results_dir: Path, score, low: int = 20, high: int = 50):
    """Per question, ``score`` with the top ``low`` and the top ``high`` BM25 chunks, on the
    book's open-domain questions (the first ``open_domain_questions`` of the oracle)."""
    from .chapters import multidoc_qa as chapter
    from .chapters import scale

    keep = _oracle_ids(scale("multidoc_qa", "book")["open_domain_questions"])
    rows = [r for r in _rows(results_dir, chapter.OPEN_DOMAIN) if r["example_id"] in keep]
    return (_by_unit(rows, {"k": low, "retriever": "bm25"}, score),
            _by_unit(rows, {"k": high, "retriever": "bm25"}, score))


def open_domain_accuracy(results_dir: Path) -> Estimate:
    low, high = _open_domain_sides(results_dir, _qa_score)
    return paired_estimate(low, high, side_names=("20 documents", "50 documents"))


def open_domain_recall(results_dir: Path) -> Estimate:
    """Recall needs no reader, so it is measured on every NQ-Open question of the collection."""
    from .chapters import multidoc_qa as chapter
    from .tasks import open_domain as od

    _, pool = chapter.questions_for({"num_questions": 0})
    table = od.recall_table(pool, od.ChunkRetriever(pool), [20, 50])
    side = {k: dict(zip(g["example_id"], g["recall"].astype(float))) for k, g in table.groupby("k")}
    return paired_estimate(side[20], side[50], side_names=("recall@20", "recall@50"))


# ---------------------------------------------------------------- C-NORM


def cnorm_vs_baseline(results_dir: Path) -> Estimate:
    """C-NORM minus baseline OAA on 10-document NQ: per question, accuracy averaged over its
    positions and seeds (the seeds reorder the same questions' distractors, so the question
    is the unit)."""
    rows = _rows(results_dir, "cnorm_qa")
    return paired_estimate(_by_unit(rows, {"method": "baseline"}, _qa_score),
                           _by_unit(rows, {"method": "C-NORM"}, _qa_score), side_names=("baseline", "C-NORM"))


def cnorm_plain_vs_uuid(results_dir: Path) -> Estimate:
    rows = _rows(results_dir, "cnorm_kv")
    base = {"density": "high", "num_pairs": 4, "query_aware": False}
    return paired_estimate(_by_unit(rows, {**base, "delimiter": "-"}, _kv_score),
                           _by_unit(rows, {**base, "delimiter": ""}, _kv_score), side_names=("UUID", "plain text"))


def cnorm_longer_formats(results_dir: Path) -> Estimate:
    """The book's delimiter sweep (Figure 3's question as a paired contrast): per example, mean
    accuracy under the half of the delimiters with the most prompt tokens minus the half with
    the fewest (formats ranked by their mean prompt tokens over the sweep)."""
    from .chapters import cnorm as chapter
    from .chapters import scale

    params = scale("cnorm", "book")
    _, sweep = chapter.kv_requests(params)
    planned = {(r.example_id, r.condition["gold_index"], r.condition["delimiter"]) for r in sweep}
    rows = [r for r in _rows(results_dir, "cnorm_kv")
            if r["condition"].get("density") == "low" and r["condition"].get("num_pairs") == params["sweep_pairs"]
            and (r["example_id"], r["condition"]["gold_index"], r["condition"]["delimiter"]) in planned]
    tokens: dict = {}
    for r in rows:
        tokens.setdefault(r["condition"]["delimiter"], []).append(r["prompt_tokens"])
    order = sorted(tokens, key=lambda d: sum(tokens[d]) / len(tokens[d]))
    half = len(order) // 2
    if half < 1:
        raise DataFileError("the delimiter sweep needs at least two delimiters with committed rows")

    def side(delimiters):
        picked = [r for r in rows if r["condition"]["delimiter"] in delimiters]
        return _by_unit(picked, {}, _kv_score)

    return paired_estimate(side(set(order[:half])), side(set(order[-half:])),
                           side_names=(f"{half} shortest formats", f"{half} longest formats"))


# ---------------------------------------------------------------- semantic competition

_SQUAD = {"corpus": "squad-v2-dev", "snippet_words": 50}
_SC_HARD = {**_SQUAD, "retriever": "bm25", "num_hard": 19, "num_far": 0, "num_snippets": 20}
_SC_FAR = {**_SQUAD, "retriever": "bm25", "num_hard": 4, "num_far": 15, "num_snippets": 20}


def _em(row):
    from .tasks.semantic_competition import score

    return score(row)["em"]


def _inclusion(row):
    from .tasks.semantic_competition import score

    return score(row)["inclusion"]


@lru_cache(maxsize=1)
def _sc_headline_ids() -> frozenset[str]:
    """The book's headline questions (``headline_questions`` of the seeded sample); cached,
    since three claims ask and each would load the corpus again."""
    from .chapters import scale
    from .tasks import semantic_competition as sc

    book = scale("semantic_competition", "book")
    corpus = sc.load_corpus(book["corpus"])
    return frozenset(q.question_id for q in sc.sample_questions(corpus, book["headline_questions"], book["seed"]))


def _sc_headline_rows(results_dir: Path) -> list[dict]:
    """Rows of the book's headline questions only: the store can hold more once an
    extension is under way."""
    keep = _sc_headline_ids()
    return [r for r in _rows(results_dir, "semantic_competition") if r["example_id"] in keep]


def _far_minus_hard(results_dir: Path, metric) -> Estimate:
    rows = _sc_headline_rows(results_dir)
    return paired_estimate(_by_unit(rows, _SC_HARD, metric), _by_unit(rows, _SC_FAR, metric),
                           side_names=("19 hard", "4 hard + 15 far-rank"))


def far_minus_hard(results_dir: Path) -> Estimate:
    return _far_minus_hard(results_dir, _em)


def far_minus_hard_inclusion(results_dir: Path) -> Estimate:
    return _far_minus_hard(results_dir, _inclusion)


def hard_minus_gold(results_dir: Path) -> Estimate:
    rows = _sc_headline_rows(results_dir)
    gold = {**_SQUAD, "num_snippets": 1, "num_hard": 0}
    return paired_estimate(_by_unit(rows, gold, _em), _by_unit(rows, _SC_HARD, _em),
                           side_names=("gold snippet only", "gold + 19 hard"))


# ---------------------------------------------------------------- context length alone


def _gsm8k_correct(row):
    from .tasks.length_alone import final_number

    got = final_number(row["output"])
    try:
        return float(got is not None and float(got) == float(row["gold"][0]))
    except ValueError:
        return 0.0


def _length_alone_rows(results_dir: Path) -> list[dict]:
    """The book-scale GSM8K rows (the committed store also holds an earlier 12-problem run)."""
    from .chapters import get_chapter, scale

    keep = {p.id for p in get_chapter("length_alone").problems_for(scale("length_alone", "book"))["gsm8k"]}
    return [r for r in _rows(results_dir, "length_alone") if r["example_id"] in keep]


def _gsm8k_drop(results_dir: Path, filler: str, placement: str = "between") -> Estimate:
    rows = _length_alone_rows(results_dir)
    short = {"subtask": "gsm8k", "mode": "solve", "filler_tokens": 0}
    long = {"subtask": "gsm8k", "mode": "solve", "filler": filler, "placement": placement, "filler_tokens": 16000}
    return paired_estimate(_by_unit(rows, short, _gsm8k_correct), _by_unit(rows, long, _gsm8k_correct),
                           side_names=("no filler", f"16K {filler} {placement}"))


def ruler_recite_then_answer(results_dir: Path, subtask: str, length: int = 4000) -> Estimate:
    """Table 5: the paper's two steps (recite, then answer from the recitation) minus RULER's
    prompt over the whole context, on the book run's questions, RULER's string_match_part."""
    from .chapters import get_chapter, scale
    from .tasks import ruler_qa as rq

    book = scale("length_alone", "book")
    one = {**book, "ruler": {**book["ruler"], "subtasks": [subtask]}}  # load only this task's set
    asked = {q.id for q in get_chapter("length_alone").ruler_questions(one)[subtask][1]}
    rows = [r for r in _rows(results_dir, rq.TASK) if r["example_id"] in asked]
    where = {"subtask": subtask, "length": length}
    return paired_estimate(_by_unit(rows, {**where, "mode": "answer"}, rq.score),
                           _by_unit(rows, {**where, "mode": "retrieve_then_answer"}, rq.score),
                           side_names=("whole context", "recite, then answer"))


# ---------------------------------------------------------------- tagging


def _contains(row):
    from .metrics import nolima_contains

    return nolima_contains(row["output"], row["gold"])


@lru_cache(maxsize=1)
def _tag_sized_depths() -> dict[str, float]:
    from .chapters import scale
    from .chapters import tag_needles as chapter

    return chapter.sized_depths(scale("tag_needles", "book"))


def _tag_vs_baseline(results_dir: Path, variant: str, length: int) -> Estimate:
    """The sized comparison at ``length``: every case of the book's needle sets at its
    rotating depth there. The 30-case grid asks 250 tokens too, with its cases at other
    depths; those rows are left out so each case counts once, at one depth."""
    depth_of = _tag_sized_depths()
    rows = [r for r in _rows(results_dir, "tag_needles") if depth_of.get(r["example_id"]) == r["condition"]["depth"]]
    base = {"length": length, "query_aware": False}
    return paired_estimate(_by_unit(rows, {**base, "variant": "baseline"}, _contains),
                           _by_unit(rows, {**base, "variant": variant}, _contains),
                           side_names=("baseline", variant.replace("_", " ")))


# ---------------------------------------------------------------- crossing the papers


def crossing_main_effect(results_dir: Path, factor: str) -> Estimate:
    """One factor's main effect in the crossing chapter as a paired difference: per question,
    accuracy over the cells at the factor's high level minus over those at its low level (in
    the balanced fraction this is the GEE main effect; the interval here resamples questions)."""
    from .chapters import crossing as chapter
    from .chapters import scale

    params = scale("crossing", "book")
    design = chapter.design(params)
    factor_def = design.factor(factor)
    cells = {tuple(sorted(design.levels(c).items())) for c in design.cells}
    keep = _oracle_ids(params["num_questions"])
    rows = [r for r in _rows(results_dir, "crossing")
            if r["example_id"] in keep and r["condition"].get("num_documents") == params["num_documents"]
            and tuple(sorted(r["condition"].get("crossing", {}).items())) in cells]
    side = {lvl: _by_unit([r for r in rows if r["condition"]["crossing"][factor] == lvl], {}, _qa_score)
            for lvl in (factor_def.low, factor_def.high)}
    return paired_estimate(side[factor_def.low], side[factor_def.high], side_names=(factor_def.low, factor_def.high))


# ---------------------------------------------------------------- the claims

_LITM, _CNORM, _SC = "Lost in the Middle", "C-NORM", "Semantic competition"
_LA, _TAG = "Context length alone", "Tagging-Augmented Generation"
_CROSS = "Crossing the papers (all six manipulations on one task)"
_READER = "Qwen2.5-Coder-0.5B-Instruct"

CLAIMS: list[Claim] = [
    Claim("litm-kv-middle", _LITM, "kv_retrieval", "kv-headline",
          "Key-value retrieval is worse with the gold pair in the middle than first.",
          "middle minus first (pts)", "worst case 45.6% in the middle; several models near-perfect at the edges "
          "(75-300 pairs, Figure 7)", -1, None, f"{_READER}, 140 pairs (~9.6K tokens), the paper's records",
          kv_middle_vs_first, short="LitM KV: middle - first"),
    Claim("litm-kv-query-aware", _LITM, "kv_retrieval", "kv-headline",
          "Query-aware contextualization makes key-value retrieval near-perfect.",
          "query-aware minus query at end, gold in the middle (pts)",
          "near-perfect for every model (worst case without it 45.6%, so up to +54.4)", +1, 54.4,
          f"{_READER}, 140 pairs, gold in the middle", kv_query_aware_middle, short="LitM KV: query-aware - plain (middle)"),
    Claim("litm-qa-u-shape", _LITM, "multidoc_qa", "multidoc-headline",
          "Multi-document QA is worse with the answer in the middle than at the edges (U-shape).",
          "middle minus mean of first and last (pts)", "GPT-3.5-Turbo, 20 documents: 53.8 vs 69.5 = -15.7",
          -1, -15.7, f"{_READER}, 20 documents, BM25 distractors over the NQ-Open gold chunks", qa_middle_vs_edges, short="LitM QA: middle - edges"),
    Claim("litm-qa-closed-book", _LITM, "multidoc_qa", "multidoc-headline",
          "With the answer in the middle of 20 documents, accuracy falls below closed-book.",
          "middle of 20 minus closed-book (pts)", "GPT-3.5-Turbo: 53.8 vs 56.1 = -2.3", -1, -2.3,
          f"{_READER}, 20 documents", qa_middle_vs_closed_book, short="LitM QA: middle - closed-book"),
    Claim("litm-open-domain", _LITM, "multidoc_qa", "multidoc-open-domain",
          "Open-domain QA: beyond 20 retrieved documents reader accuracy barely improves.",
          "accuracy with the top 50 minus the top 20 retrieved documents (pts)",
          "about +1.5 for GPT-3.5-Turbo, about +1 for Claude-1.3 (Contriever over Wikipedia)", +1, 1.5,
          f"{_READER}, BM25 over the 2,655 NQ-Open gold chunks", open_domain_accuracy,
          short="LitM open-domain: 50 - 20 docs"),
    Claim("litm-open-domain-recall", _LITM, "multidoc_qa", "multidoc-open-domain",
          "Retriever recall keeps rising from 20 to 50 documents.",
          "recall@50 minus recall@20 (pts)", "rising (Figure 11; no number in the text)", +1, None,
          "BM25 over the 2,655 NQ-Open gold chunks, every question (no reader)", open_domain_recall,
          short="LitM open-domain: recall@50 - @20"),
    Claim("cnorm-qa", _CNORM, "cnorm", "cnorm-headline",
          "C-NORM (delimiters chosen by attention balance) raises accuracy on 10-document NQ.",
          "C-NORM minus baseline OAA (pts)", "about +30% for LLaMA-2-7B (stated in words, Figure 6)", +1, None,
          f"{_READER}, 10 documents, 5 positions x 3 orderings per question", cnorm_vs_baseline, short="C-NORM: C-NORM - baseline OAA"),
    Claim("cnorm-format", _CNORM, "cnorm", "cnorm-formats",
          "At high id density, plain text ids are retrieved better than UUIDs.",
          "plain minus UUID OAA (pts)", "Qwen2.5-1.5B: 0.949 vs 0.854 = +9.5", +1, 9.5,
          f"{_READER}, 4 pairs of 128-hex ids, 20 examples at 4 gold positions", cnorm_plain_vs_uuid, short="C-NORM: plain - UUID ids"),
    Claim("cnorm-tokens", _CNORM, "cnorm", "cnorm-tokens",
          "Formats that cost more tokens are retrieved worse (Figure 3).",
          "4 longest- minus 4 shortest-tokenizing delimiters, key-value OAA (pts)",
          "Qwen2.5-1.5B, 40 pairs: Pearson r = -0.82 between tokens and accuracy", -1, None,
          f"{_READER}, 75 pairs of 32-hex ids, gold in the middle, 8 delimiters on the same examples",
          cnorm_longer_formats, short="C-NORM: longer - shorter formats"),
    Claim("sc-far-minus-hard", _SC, "semantic_competition", "sc-headline",
          "At matched length, far-rank distractors hurt less than hard (BM25 top-ranked) ones.",
          "far minus hard EM (pts)", "Qwen2.5-1.5B-Instruct: +4.5 [-0.5, 9.5]; Phi-2: +6.0 [1.0, 11.0]", +1, 4.5,
          f"{_READER}, SQuAD v2.0 dev, 20 snippets of 50 words", far_minus_hard, short="Competition: far - hard EM"),
    Claim("sc-far-minus-hard-inclusion", _SC, "semantic_competition", "sc-headline",
          "At matched length, far-rank distractors hurt less than hard ones: answer inclusion.",
          "far minus hard answer inclusion (pts)", "Qwen2.5-1.5B-Instruct: +9.0 [2.5, 15.5]; Phi-2: +7.0 [1.0, 13.0]",
          +1, 9.0, f"{_READER}, SQuAD v2.0 dev, 20 snippets of 50 words", far_minus_hard_inclusion,
          short="Competition: far - hard inclusion"),
    Claim("sc-hard-hurts", _SC, "semantic_competition", "sc-headline",
          "Hard negatives around the gold snippet cut exact match.",
          "gold + 19 hard minus gold only EM (pts)", "Qwen2.5-1.5B-Instruct: 22.0 vs 51.5 = -29.5", -1, -29.5,
          f"{_READER}, SQuAD v2.0 dev", hard_minus_gold, short="Competition: hard - gold only EM"),
    Claim("la-essay", _LA, "length_alone", "la-headline",
          "Essay filler between evidence and question lowers GSM8K accuracy.",
          "16K essay minus no filler (pts)", "Llama-3-8B, 15K: -9.0 (Mistral-7B: -28.9)", -1, -9.0,
          f"{_READER}, GSM8K", lambda d: _gsm8k_drop(d, "essay"), short="Length: 16K essay - none"),
    Claim("la-whitespace", _LA, "length_alone", "la-headline",
          "Whitespace filler, minimally distracting, still lowers accuracy.",
          "16K whitespace minus no filler (pts)", "Llama-3-8B, 15K: -3.2", -1, -3.2,
          f"{_READER}, GSM8K, whitespace = a 128-space token", lambda d: _gsm8k_drop(d, "whitespace"), short="Length: 16K whitespace - none"),
    Claim("la-mask", _LA, "length_alone", "la-headline",
          "Masked filler (attention only to evidence and question) still lowers accuracy.",
          "16K masked minus no filler (pts)", "Llama-3-8B, 15K: -4.3", -1, -4.3,
          f"{_READER}, GSM8K", lambda d: _gsm8k_drop(d, "mask"), short="Length: 16K masked - none"),
    Claim("la-before", _LA, "length_alone", "la-placement",
          "Filler before the evidence (question next to it) still lowers accuracy.",
          "16K whitespace before minus no filler (pts)", "Llama-3-8B, 15K: -8.1 (Mistral-7B: -9.3)", -1, -8.1,
          f"{_READER}, GSM8K", lambda d: _gsm8k_drop(d, "whitespace", "before"), short="Length: 16K before evidence - none"),
    Claim("la-ruler-qa1", _LA, "length_alone", "la-ruler",
          "Reciting the relevant documents, then answering from them alone, beats answering from the "
          "whole context (RULER QA1).",
          "recite-then-answer minus whole context, QA1 at 4K (pts)", "GPT-4o, 4K: 90.4 -> 92.2 = +1.8", +1, 1.8,
          f"{_READER}, RULER QA1 (SQuAD), 4K tokens", lambda d: ruler_recite_then_answer(d, "qa1"),
          short="Length: recite first, RULER QA1"),
    Claim("la-ruler-qa2", _LA, "length_alone", "la-ruler",
          "The same on multi-hop questions (RULER QA2), where the paper's gain is largest.",
          "recite-then-answer minus whole context, QA2 at 4K (pts)",
          "GPT-4o, 4K: 71.2 -> 73.2 = +2.0 (+4.0 at 32K)", +1, 2.0,
          f"{_READER}, RULER QA2 (HotpotQA), 4K tokens", lambda d: ruler_recite_then_answer(d, "qa2"),
          short="Length: recite first, RULER QA2"),
    Claim("tag-td", _TAG, "tag_needles", "tag-short",
          "Tag definitions in the prompt (TD) raise needle accuracy.",
          "TD minus baseline at 250 tokens (pts)", "Claude 3.5 Sonnet: 91.3 vs 81.2 = +10.2", +1, 10.2,
          f"{_READER}, 154 needle questions (48 + 106 extra), 250 haystack tokens",
          lambda d: _tag_vs_baseline(d, "td", 250), short="TAG: TD - baseline (250)"),
    Claim("tag-spacy", _TAG, "tag_needles", "tag-short",
          "spaCy tags with their definitions (TD+TC) raise needle accuracy.",
          "TD+TC (spaCy) minus baseline at 250 tokens (pts)", "Claude 3.5 Sonnet: 88.8 vs 81.2 = +7.6", +1, 7.6,
          f"{_READER}, 154 needle questions (48 + 106 extra), 250 haystack tokens",
          lambda d: _tag_vs_baseline(d, "td_tc_spacy", 250), short="TAG: TD+TC spaCy - baseline (250)"),
    Claim("tag-spacy-long", _TAG, "tag_needles", "tag-long",
          "spaCy tags with their definitions (TD+TC) raise needle accuracy in longer contexts.",
          "TD+TC (spaCy) minus baseline at 2,000 tokens (pts)",
          "Claude 3.5 Sonnet: +2.2 at 500 tokens, 47.7 vs 46.0 = +1.7 at 16K",
          +1, 1.7, f"{_READER}, 154 needle questions (48 + 106 extra), 2,000 haystack tokens",
          lambda d: _tag_vs_baseline(d, "td_tc_spacy", 2000), short="TAG: TD+TC spaCy - baseline (2K)"),
    *[Claim(f"crossing-{factor}", _CROSS, "crossing", "crossing-main", claim, comparison, paper_value, direction,
            effect, f"{_READER}, 10-document NQ-Open, 2^(6-1) design, averaged over the other five factors",
            lambda d, factor=factor: crossing_main_effect(d, factor), short=f"Crossing: {factor}")
      for factor, claim, comparison, paper_value, direction, effect in [
          ("position", "Gold document in the middle is read worse than first (Lost in the Middle).",
           "middle minus first (pts)", "GPT-3.5-Turbo, 10 documents: 61.2 (5th) vs 76.8 (1st) = -15.6", -1, -15.6),
          ("format", "C-NORM-normalized passages are read better (C-NORM).", "C-NORM minus as is (pts)",
           "about +30% OAA for LLaMA-2-7B", +1, None),
          ("tags", "spaCy tags with definitions help (TAG).", "tags + definitions minus none (pts)",
           "Claude 3.5 Sonnet, needles at 250 tokens: +7.6", +1, 7.6),
          ("distractors", "Far-ranked distractors hurt less than hard ones (semantic competition).",
           "far minus hard (pts)", "Qwen2.5-1.5B-Instruct EM: +4.5", +1, 4.5),
          ("filler", "Whitespace filler between documents and question hurts (context length alone).",
           "1,000 whitespace tokens minus none (pts)", "Llama-3-8B, 15K whitespace: -3.2", -1, -3.2),
      ]],
]


def findings_table(results_dir: str | Path, claims: list[Claim] | None = None):
    """One row per claim: paper, claim, the paper's number, ours (difference, interval, n, p,
    the two sides), model/setting, verdict, and the chapter section that shows it."""
    import pandas as pd

    out = []
    for c in claims or CLAIMS:
        est = c.compute(Path(results_dir))
        out.append({"id": c.id, "paper": c.paper, "short": c.short or c.comparison, "claim": c.claim, "comparison": c.comparison,
                    "paper_value": c.paper_value, "paper_effect": c.paper_effect, "difference": est.difference, "ci_low": est.ci_low,
                    "ci_high": est.ci_high, "n": est.n, "p": est.p, "detail": est.detail, "setting": c.setting,
                    "verdict": verdict(est, c), "chapter": c.chapter, "label": c.label})
    return pd.DataFrame(out)


VERDICT_MARK = {"reproduced": "✔ reproduced", "opposite direction": "✘ opposite direction",
                "not reproduced": "✘ not reproduced", "inconclusive at this n": "? inconclusive at this n"}


PRECISION_TARGET = 10.0  # points: the book sizes each headline comparison to this 95% half-width


def half_width(row) -> float:
    """The wider side of a row's 95% interval, in points."""
    return max(row.ci_high - row.difference, row.difference - row.ci_low)


def as_markdown(table) -> str:
    """The findings table as MyST Markdown, one table per paper; each row links to the chapter
    section that shows its data (``{ref}`` roles, so a missing section fails the book build).
    The settings behind each row follow its table as notes. A dagger marks an interval wider
    than :data:`PRECISION_TARGET` on a side (a secondary claim not sized for it)."""
    parts = []
    for paper, rows in table.groupby("paper", sort=False):
        lines = [f"**{paper}**", "", "| # | claim | paper | ours [95% CI] | n | p | verdict | data |",
                 "|---|---|---|---|---|---|---|---|"]
        notes = []
        for k, r in enumerate(rows.itertuples(), 1):
            # Intervals print to 0.1: a half-width that rounds to the target meets it.
            wide = round(half_width(r), 1) > PRECISION_TARGET
            ours = f"**{r.difference:+.1f}** [{r.ci_low:+.1f}, {r.ci_high:+.1f}]" + (" †" if wide else "")
            lines.append(f"| {k} | {r.claim} | {r.paper_value} | {ours} | {r.n} | {r.p:.2g} | "
                         f"{VERDICT_MARK[r.verdict]} | {{ref}}`section <{r.label}>` |")
            notes.append(f"{k}. {r.comparison}: {r.detail}; {r.setting}."
                         + (f" † Wider than ±{PRECISION_TARGET:g} points: a secondary claim, not sized for "
                            "the book's precision target; read its verdict as provisional." if wide else ""))
        parts.append("\n".join(lines) + "\n\n" + "\n".join(notes))
    return "\n\n".join(parts)
