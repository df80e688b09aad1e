"""The multi-document QA chapter's numbers: what its analysis computes from the rows (scored rows,
cells, estimates' sides, the numbers the prose quotes and the statements it makes)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pandas as pd

from ...claims import (
    Estimate,
    decided_sign,
    paired_estimate,
    sizing_table,
)
from ...errors import ParameterError
from ...metrics import normalize_answer, summarize, wilson_interval
from ...report import estimate_text, p_text, pct_ci, points_ci
from ...results import paired_effects, position_gap_permutation
from ...tables import rows_table
from ...tasks import multidoc_qa as qa
from ...tasks import open_domain as od
from ..contract import ChapterResult
from . import analysis
from .design import HEADLINE_DEPTHS, questions_for


def open_domain_ks(params: dict) -> tuple[int, int]:
    """The two retrieval depths the open-domain claim compares: the paper's 20 and 50 when the
    run asked both, else its two largest."""
    ks = sorted(params.get("open_domain_ks") or [])
    if len(ks) < 2:
        raise ParameterError("the open-domain claim needs at least two open_domain_ks")
    return (20, 50) if {20, 50} <= set(ks) else (ks[-2], ks[-1])


RECALL_PARAMS = ("source", "release_dir", "seed", "distractors", "random_order")

_RECALL: dict[str, Estimate] = {}


def retrieval_recall(params: dict, pool: list, low: int, high: int) -> Estimate:
    """The retriever's gold recall at ``high`` minus at ``low`` documents over ``pool``,
    paired by question. It names no reader, so one process computes it once for all."""
    key = json.dumps([params.get(k) for k in RECALL_PARAMS] + [low, high])
    if key not in _RECALL:
        table = od.recall_table(pool, od.ChunkRetriever(pool), [low, high])
        side = {
            k: dict(zip(g["example_id"], g["recall"].astype(float))) for k, g in table.groupby("k")
        }
        _RECALL[key] = paired_estimate(
            side[low], side[high], side_names=(f"recall@{low}", f"recall@{high}")
        )
    return _RECALL[key]


QUERY_LABELS = {False: "question at end", True: "query-aware"}


def scored(rows: list[dict]) -> pd.DataFrame:
    """Every row scored, with the chapter's columns for the document settings: ``depth``,
    1-based ``position`` and the ``query`` placement."""
    table = rows_table(rows, qa.score)
    docs = table["setting"] == "documents"
    table.loc[docs, "depth"] = (
        table.loc[docs, "gold_index"] / (table.loc[docs, "num_documents"] - 1)
    ).round(2)
    table.loc[docs, "position"] = table.loc[docs, "gold_index"] + 1
    table["query"] = table["query_aware"].map(QUERY_LABELS)
    return table


POINT_KEYS = ("model", "num_documents", "query", "position")  # one point of the key figure


def with_documents(table: pd.DataFrame) -> pd.DataFrame:
    """The rows with documents in the context (not closed-book or oracle), by position."""
    return table[table["setting"] == "documents"].astype({"position": int})


def accuracy(table: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per reader, size, query placement and position (Wilson intervals)."""
    return summarize(with_documents(table), list(POINT_KEYS))


def baselines(table: pd.DataFrame) -> pd.DataFrame:
    """Closed-book and oracle accuracy per reader."""
    return summarize(table[table["setting"] != "documents"], ["model", "setting"])


def position_gaps(table: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Best minus worst position per size and query placement, with the permutation test that
    repeats the selection (the gap noise alone gives, and its p)."""
    docs = table[table["setting"] == "documents"]
    out = []
    for (k, query), g in docs.groupby(["num_documents", "query"]):
        res = position_gap_permutation(
            g.pivot_table(index="example_id", columns="position", values="correct"), seed=seed
        )
        out.append(
            {
                "documents": k,
                "query": query,
                "questions": res["units"],
                "best minus worst (pts)": round(res["gap"], 1),
                "expected from noise (pts)": round(res["null_mean"], 1),
                "permutation p": res["p"],
            }
        )
    return pd.DataFrame(out)


def headline_sides(table: pd.DataFrame, params: dict) -> dict[str, dict]:
    """Per question, the headline's sides at the most documents, question at the end:
    ``first``, ``middle``, ``last``, ``edges`` (mean of first and last) and ``closed``."""
    k = max(params["num_documents"])
    head = table[
        (table["setting"] == "documents") & (table["num_documents"] == k) & ~table["query_aware"]
    ]

    def at(index):
        part = head[head["gold_index"] == index]
        return dict(zip(part["example_id"], part["correct"]))

    first, middle, last = (at(qa.position_indices(k, [d])[0]) for d in HEADLINE_DEPTHS)
    closed_rows = table[table["setting"] == "closed-book"]
    return {
        "first": first,
        "middle": middle,
        "last": last,
        "edges": {q: (first[q] + last[q]) / 2 for q in set(first) & set(last)},
        "closed": dict(zip(closed_rows["example_id"], closed_rows["correct"])),
    }


def sizing(estimates: dict) -> pd.DataFrame:
    """Questions a 95% half-width of 10 points needs for each headline comparison, from
    the claims' own estimates."""
    return sizing_table(
        {
            "middle minus edges": estimates.get("litm-qa-u-shape"),
            "middle minus closed-book": estimates.get("litm-qa-closed-book"),
        },
        "questions",
    )


def query_aware_effects(table: pd.DataFrame, label: str, seed: int = 0) -> pd.DataFrame:
    """Query-aware minus question at the end per size and pooled, on the (question, position)
    items asked both ways; intervals resample whole questions."""
    docs = table[(table["setting"] == "documents") & (table["model"] == label)]
    docs = docs[docs["example_id"].isin(set(docs[docs["query_aware"]]["example_id"]))]
    effects = paired_effects(
        docs,
        condition="query",
        control=QUERY_LABELS[False],
        treatment=QUERY_LABELS[True],
        length="num_documents",
        item=["example_id", "position"],
        seed=seed,
    )
    return (
        pd.DataFrame(effects).drop(columns="model").rename(columns={"num_documents": "documents"})
        if effects
        else pd.DataFrame()
    )


def open_domain(od_rows: list[dict], params: dict) -> dict | None:
    """Section 5's curves and steps: reader accuracy and BM25 recall@k on the questions read,
    recall on every NQ-Open question, each step up in k and the claim's two depths."""
    if not od_rows:
        return None
    table = rows_table(od_rows, od.score)
    _, pool = questions_for(params)
    retriever = od.ChunkRetriever(pool)
    recall_rows = od.recall_table(pool, retriever, params["open_domain_ks"])
    recall_all = summarize(recall_rows.assign(correct=recall_rows["recall"].astype(float)), ["k"])
    curve = analysis.curve(table)
    n = table["example_id"].nunique()
    shown = pd.concat(
        [
            curve.replace({"measure": {"retriever recall@k": f"recall@k, the {n} questions read"}}),
            recall_all.assign(measure=f"recall@k, all {len(pool):,} questions"),
        ],
        ignore_index=True,
    ).assign(panel="open-domain")
    low, high = open_domain_ks(params)
    steps = pd.concat(
        [analysis.saturation(table), analysis.saturation(table, [low, high])], ignore_index=True
    )
    return {
        "table": table,
        "curve": curve,
        "recall_all": recall_all,
        "shown": shown,
        "steps": steps,
        "questions": n,
        "pool": len(pool),
        "chunks": len(retriever.chunks),
        "ks": (low, high),
    }


def quoted(
    estimates: dict[str, Estimate],
    table: pd.DataFrame,
    sides: dict,
    gaps: pd.DataFrame,
    effects: pd.DataFrame,
    od_view: dict | None,
    params: dict,
    label: str,
) -> dict:
    """Every number the chapter's prose quotes, by glue key: the headline and baselines, the
    position gaps, query-aware prompts and the open-domain curves."""
    return {
        **_headline_quotes(estimates, table, sides, params, label),
        **_gap_quotes(gaps, max(params["num_documents"])),
        **_query_aware_quotes(effects),
        **(_open_domain_quotes(od_view, estimates) if od_view is not None else {}),
    }


def _headline_quotes(
    estimates: dict[str, Estimate], table: pd.DataFrame, sides: dict, params: dict, label: str
) -> dict:
    k = max(params["num_documents"])
    mine = table[table["model"] == label]
    hits = mine.groupby("setting")["correct"].agg(["sum", "count"])

    def pct(side):
        return f"{100 * sum(side.values()) / len(side):.1f}%" if side else "—"

    out = {
        "qa-questions": len(sides["middle"]),
        "qa-documents": k,
        "qa-detail-questions": params.get("detail_questions") or params["num_questions"],
        "qa-middle-pct": pct(sides["middle"]),
        "qa-edges-pct": pct(sides["edges"]),
        "qa-first-pct": pct(sides["first"]),
        "qa-last-pct": pct(sides["last"]),
        "qa-u-shape": estimate_text(estimates["litm-qa-u-shape"]),
        # the two sides of the U, each first or last minus the middle (descriptive)
        "qa-primacy": estimate_text(paired_estimate(sides["middle"], sides["first"])),
        "qa-recency": estimate_text(paired_estimate(sides["middle"], sides["last"])),
        "qa-vs-closed": estimate_text(estimates["litm-qa-closed-book"]),
        "qa-closed-correct": int(hits.loc["closed-book", "sum"]),
        "qa-closed-n": int(hits.loc["closed-book", "count"]),
        "qa-closed-pct": f"{100 * hits.loc['closed-book', 'sum'] / hits.loc['closed-book', 'count']:.1f}%",
        "qa-oracle-pct": f"{100 * hits.loc['oracle', 'sum'] / hits.loc['oracle', 'count']:.1f}%",
    }
    return out


def _gap_quotes(gaps: pd.DataFrame, k: int) -> dict:
    head_gap = gaps[(gaps["documents"] == k) & (gaps["query"] == QUERY_LABELS[False])]
    small = (
        gaps[gaps["questions"] < head_gap["questions"].max()] if len(head_gap) else gaps.iloc[:0]
    )
    out: dict = {}
    if len(head_gap):
        g = head_gap.iloc[0]
        out.update(
            {
                "qa-gap": f"{g['best minus worst (pts)']:.1f}",
                "qa-gap-noise": f"{g['expected from noise (pts)']:.1f}",
                "qa-gap-p": p_text(g["permutation p"]),
            }
        )
    if len(small):
        out.update(
            {
                "qa-small-gap-low": f"{small['best minus worst (pts)'].min():.0f}",
                "qa-small-gap-high": f"{small['best minus worst (pts)'].max():.0f}",
                "qa-small-noise-low": f"{small['expected from noise (pts)'].min():.0f}",
                "qa-small-noise-high": f"{small['expected from noise (pts)'].max():.0f}",
                "qa-small-significant": int((small["permutation p"] < 0.05).sum()),
                "qa-small-settings": len(small),
            }
        )
    return out


def _query_aware_quotes(effects: pd.DataFrame) -> dict:
    out: dict = {}
    if len(effects):
        pooled = effects[effects["documents"] == "all"].iloc[0]
        out.update(
            {
                "qa-query-aware": points_ci(
                    pooled["difference"], pooled["ci_low"], pooled["ci_high"]
                )
                + " points",
                "qa-query-aware-low": f"{-pooled['ci_low']:.0f}",
            }
        )
    return out


def _open_domain_quotes(od_view: dict, estimates: dict[str, Estimate]) -> dict:
    out: dict = {}
    low, high = od_view["ks"]
    curve, recall = od_view["curve"], od_view["recall_all"].set_index("k")["accuracy"]
    acc = curve[curve["measure"] == "reader accuracy"].set_index("k")["accuracy"]
    read = curve[curve["measure"] == "retriever recall@k"].set_index("k")["accuracy"]
    step = od_view["steps"]
    head = step[
        (step["from k"] == low) & (step["to k"] == high) & (step["measure"] == "reader accuracy")
    ].iloc[0]
    wide = od_view["table"].pivot_table(index="example_id", columns="k", values="correct")
    tokens = od_view["table"].groupby("k")["prompt_tokens"].mean()
    smallest, largest = min(acc.index), max(acc.index)
    out.update(
        {
            "od-questions": od_view["questions"],
            "od-pool": f"{od_view['pool']:,}",
            "od-low": low,
            "od-high": high,
            "od-k-min": smallest,
            "od-k-max": largest,
            "od-recall-all-min": f"{100 * recall[smallest]:.1f}%",
            "od-recall-all-low": f"{100 * recall[low]:.1f}%",
            "od-recall-all-high": f"{100 * recall[high]:.1f}%",
            "od-recall-rise": estimate_text(estimates["litm-open-domain-recall"]),
            "od-recall-read-min": f"{100 * read[smallest]:.1f}%",
            "od-recall-read-max": f"{100 * read[largest]:.0f}%",
            "od-acc-min-k": f"{100 * acc[smallest]:.1f}%",
            "od-acc-best-k": int(acc.idxmax()),
            "od-acc-best": f"{100 * acc.max():.1f}%",
            "od-acc-max-k": f"{100 * acc[largest]:.1f}%",
            "od-tokens-low": f"{tokens[low]:,.0f}",
            "od-tokens-high": f"{tokens[high]:,.0f}",
            "od-step": estimate_text(estimates["litm-open-domain"]),
            "od-lost": int(((wide[high] - wide[low]) < 0).sum()),
            "od-gained": int(((wide[high] - wide[low]) > 0).sum()),
            "od-step-questions": int(head["questions"]),
        }
    )
    return out


def statements(view: MultidocResult, params: dict) -> dict[str, bool]:
    """What the chapter's prose says in words, each as a check on the committed run."""
    est, gaps = view.estimates, view.gaps
    head = gaps[
        (gaps["documents"] == max(params["num_documents"])) & (gaps["query"] == QUERY_LABELS[False])
    ].iloc[0]
    small = gaps[gaps["questions"] < head["questions"]]
    low = view.od["ks"][0]
    return {
        "the middle is below the mean of the edges (reproduced)": view.verdicts.get(
            "litm-qa-u-shape"
        )
        == "reproduced",
        "the primacy side is clear, the recency side is not resolved": decided_sign(
            paired_estimate(view.sides["middle"], view.sides["first"])
        )
        == 1
        and not decided_sign(paired_estimate(view.sides["middle"], view.sides["last"])),
        "its interval includes the paper's -15.7": est["litm-qa-u-shape"].ci_low
        <= -15.7
        <= est["litm-qa-u-shape"].ci_high,
        "closed-book: the premise fails, and documents help far more": view.verdicts.get(
            "litm-qa-closed-book"
        )
        == "premise not met"
        and est["litm-qa-closed-book"].ci_low > 0,
        "open-domain: saturation within the margin, but recall barely rises, so the premise "
        "fails": view.verdicts.get("litm-open-domain") == "premise not met"
        and est["litm-open-domain"].ci_high < 5
        and est["litm-open-domain"].difference < 0,
        "the headline's gap is real": head["permutation p"] < 0.05
        and head["best minus worst (pts)"] > head["expected from noise (pts)"],
        "the grid's gaps exceed what noise gives": (
            small["best minus worst (pts)"] > small["expected from noise (pts)"]
        ).all(),
        "both comparisons are sized for ±10 points": all(
            n <= est["litm-qa-u-shape"].n for n in sizing(est)["questions for ±10 pts"]
        ),
        f"past {low} documents the reader gains nothing measurable (no gain of the margin's "
        "size), and neither does the retriever": est["litm-open-domain"].ci_high < 5
        and view.verdicts.get("litm-open-domain") == "premise not met",
    }


@dataclass(kw_only=True)
class MultidocResult(ChapterResult):
    """The chapter's numbers: ``table`` (this reader's scored rows), ``everything`` (with
    other readers' and backends' rows of the same prompts), ``summary`` (accuracy per
    cell), ``base`` (closed-book and oracle), ``sides``, ``gaps`` and ``effects`` (the
    headline, position and query-aware comparisons), ``od`` (the open-domain curves, empty
    when not run) and each figure's Data line."""

    table: pd.DataFrame
    everything: pd.DataFrame
    summary: pd.DataFrame
    base: pd.DataFrame
    sides: pd.DataFrame
    gaps: pd.DataFrame
    effects: pd.DataFrame
    od: dict | None
    provenance: str
    od_provenance: str


_QUESTION = re.compile(r"Question: (.*?)\nAnswer:", re.S)


def closed_book_level(rows: list[dict]) -> dict:
    """The reader's closed-book level over every closed-book question it has a row for (the
    paper-scale rows, beyond the questions the headline pairs): n, hits and accuracy with its
    Wilson interval, by the paper's metric (a gold answer in the answer); how many hits hold
    a gold answer inside the question itself (echo credit: repeating the question scores),
    and the level without those questions."""
    closed = [r for r in rows if r["condition"].get("setting") == "closed-book"]
    if not closed:
        return {}

    def echoed(row) -> bool:
        found = _QUESTION.search(row["prompt"])
        question = normalize_answer(found.group(1)) if found else ""
        golds = (normalize_answer(g) for g in row["gold"])
        return any(g and g in question for g in golds)

    # (hit, echoed) per question, each judged once
    judged = [(bool(qa.score(r)), echoed(r)) for r in closed]
    hits = sum(hit for hit, _ in judged)
    clean = [hit for hit, echo in judged if not echo]
    low, high = wilson_interval(hits, len(closed))
    clean_low, clean_high = wilson_interval(sum(clean), len(clean))
    return {
        "n": f"{len(closed):,}",
        "hits": f"{hits:,}",
        "level": pct_ci(hits / len(closed), low, high),
        "echo_questions": f"{sum(echo for _, echo in judged):,}",
        "echo_hits": f"{sum(hit and echo for hit, echo in judged):,}",
        "clean_n": f"{len(clean):,}",
        "clean_level": pct_ci(sum(clean) / len(clean), clean_low, clean_high),
    }
