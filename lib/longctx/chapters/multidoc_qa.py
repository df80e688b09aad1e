"""Multi-document QA chapter (Lost in the Middle, section 2 and 4.1).

Headline: accuracy with the gold document first, in the middle and last among the most
documents, query at the end (the U-shape, tested as edge minus middle), plus the
closed-book and oracle baselines; query-aware prompts and the other sizes follow.

``gold_positions`` is a list of relative depths (floats in [0, 1]) or 1-based positions
valid for every size, or a mapping from a number of documents to its own list (the
paper's 1, 5, 10, 15, 20, 25, 30 only exist at 30 documents).

``num_questions`` sizes the headline (chosen so its interval is narrow enough);
``detail_questions`` (default: the same) sizes the rest of the grid, which can stay
smaller on a CPU.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from ..claims import (
    Estimate,
    by_unit,
    chapter_verdicts,
    decided_sign,
    estimable,
    paired_estimate,
    sizing_table,
)
from ..errors import ParameterError
from ..metrics import normalize_answer, summarize, wilson_interval
from ..plots import FigureText, accuracy_by_position, book_figure
from ..report import estimate_text, p_text, pct_ci, percent_words, points_ci
from ..results import (
    comparable_rows,
    paired_effects,
    point_links,
    position_gap_permutation,
    provenance,
    rows_table,
)
from ..runner import Block, all_requests
from ..tasks import multidoc_qa as qa
from ..tasks import open_domain as od
from .contract import Chapter, ChapterResult, Run

EXPERIMENT = "multidoc_qa"
HEADLINE_DEPTHS = (0.0, 0.5, 1.0)


def positions_for(params: dict, k: int) -> list:
    positions = params["gold_positions"]
    if isinstance(positions, dict):
        if str(k) not in positions and k not in positions:
            raise ParameterError(
                f"gold_positions names no positions for {k} documents: {sorted(positions)}"
            )
        return list(positions.get(str(k), positions.get(k)))
    return list(positions)


def questions_for(params: dict) -> tuple[list[qa.QAExample], list[qa.QAExample]]:
    """(the first ``num_questions`` oracle questions, the whole pool distractors come from)."""
    oracle = qa.read_oracle()
    return oracle[: params["num_questions"]], oracle


def examples_for(params: dict, k: int, questions, pool) -> list[qa.QAExample]:
    if params["source"] == "release":
        if not params.get("release_dir"):
            raise ParameterError(
                "source 'release' needs release_dir, the folder of the paper's files"
            )
        return qa.read_release_file(
            Path(params["release_dir"]) / qa.release_filename(k, 0), limit=params["num_questions"]
        )
    if params["source"] != "oracle":
        raise ParameterError(f"source must be oracle or release, not {params['source']!r}")
    exs = qa.attach_distractors(
        questions,
        max(params["num_documents"]) - 1,
        kind=params["distractors"],
        seed=params["seed"],
        pool=pool,
        progress=False,
    )
    return (
        [qa.shuffle_distractors(e, params["seed"]) for e in exs] if params["random_order"] else exs
    )


def blocks(params: dict) -> list[Block]:
    questions, pool = questions_for(params)
    for k in params["num_documents"]:  # fail before any work on a position a size does not have
        qa.position_indices(k, positions_for(params, k))
    largest = max(params["num_documents"])
    cache: dict = {}

    detail = params.get("detail_questions") or params["num_questions"]

    def requests(k, positions, qa_flag, headline=False):
        if "examples" not in cache:
            cache["examples"] = examples_for(params, largest, questions, pool)
        examples = cache["examples"] if headline else cache["examples"][:detail]
        return qa.make_requests(
            examples,
            k,
            positions,
            query_aware=qa_flag,
            mention_random_ordering=params["random_order"],
            distractors=params["distractors"],
        )

    head = [Block("closed-book and oracle", EXPERIMENT, qa.make_baseline_requests(questions), True)]
    rest = []
    for k in sorted(params["num_documents"], reverse=True):
        positions = positions_for(params, k)
        # First, middle and last, whether positions are depths (0.0, 0.5, 1.0) or the
        # paper's 1-based positions (1, 15, 30 at 30 documents).
        edges_and_middle = set(qa.position_indices(k, HEADLINE_DEPTHS))
        for qa_flag in params["query_aware"]:
            top = [
                p
                for p in positions
                if k == largest
                and not qa_flag
                and qa.position_indices(k, [p])[0] in edges_and_middle
            ]
            top_idx = set(qa.position_indices(k, top)) if top else set()
            label = f"{k} documents, {'query-aware' if qa_flag else 'query at end'}"
            if top:
                head.append(
                    Block(
                        f"{label}, depths {top}", EXPERIMENT, requests(k, top, qa_flag, True), True
                    )
                )
            others = (
                [
                    r
                    for r in requests(k, [p for p in positions if p not in top], qa_flag)
                    if r.condition["gold_index"] not in top_idx
                ]
                if [p for p in positions if p not in top]
                else []
            )
            if others:
                rest.append(Block(f"{label}, other positions", EXPERIMENT, others))
    if params.get("open_domain_ks"):
        rest.append(open_domain_block(params, pool))
    return head + rest


OPEN_DOMAIN = "open_domain"


def open_domain_block(params: dict, pool) -> Block:
    """Section 5's retriever-reader runs (optional parameters ``open_domain_ks`` and
    ``open_domain_questions``): the first questions, each with its top k BM25 chunks of the
    oracle collection for every k."""
    n = params.get("open_domain_questions") or params["num_questions"]
    return Block(
        f"open-domain, k = {params['open_domain_ks']}",
        OPEN_DOMAIN,
        od.make_requests(pool[:n], od.ChunkRetriever(pool), params["open_domain_ks"]),
    )


def open_domain_ks(params: dict) -> tuple[int, int]:
    """The two retrieval depths the open-domain claim compares: the paper's 20 and 50 when the
    run asked both, else its two largest."""
    ks = sorted(params.get("open_domain_ks") or [])
    if len(ks) < 2:
        raise ParameterError("the open-domain claim needs at least two open_domain_ks")
    return (20, 50) if {20, 50} <= set(ks) else (ks[-2], ks[-1])


RECALL_PARAMS = ("source", "release_dir", "seed", "distractors", "random_order")
_RECALL: dict[str, Estimate] = {}


# ---------------------------------------------------------------------------------------------
# Analysis: what the notebook shows, as numbers

QUERY_LABELS = {False: "question at end", True: "query-aware"}
PAPER_READER = "GPT-3.5-Turbo"


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


def paper_numbers(paper: pd.DataFrame, k: int = 20) -> dict:
    """The paper's GPT-3.5-Turbo numbers the headline compares with, at ``k`` documents."""
    gpt = paper[(paper["model"] == PAPER_READER) & (paper["num_documents"] == k)].set_index(
        "position"
    )["accuracy"]
    closed = paper[(paper["model"] == PAPER_READER) & (paper["setting"] == "closed-book")][
        "accuracy"
    ].iloc[0]
    middle = gpt[qa.position_indices(k, [0.5])[0] + 1]
    edges = (gpt[1] + gpt[k]) / 2
    return {"middle": middle, "edges": edges, "closed": closed, "first": gpt[1], "last": gpt[k]}


def headline(estimates: dict[str, Estimate], paper: pd.DataFrame, params: dict) -> pd.DataFrame:
    """The two headline comparisons beside the paper's GPT-3.5-Turbo at 20 documents."""
    k, gpt = max(params["num_documents"]), paper_numbers(paper)
    rows = [
        (
            "litm-qa-u-shape",
            f"middle minus edges ({k} documents)",
            f"{gpt['middle'] - gpt['edges']:+.1f} ({gpt['middle']} vs {gpt['edges']:.1f})",
        ),
        (
            "litm-qa-closed-book",
            f"middle of {k} minus closed-book",
            f"{gpt['middle'] - gpt['closed']:+.1f} ({gpt['middle']} vs {gpt['closed']})",
        ),
    ]
    return pd.DataFrame(
        [
            {
                "comparison": name,
                "questions": estimates[cid].n,
                "ours (pts, 95% CI)": points_ci(
                    estimates[cid].difference, estimates[cid].ci_low, estimates[cid].ci_high
                ),
                "sign-flip p": p_text(estimates[cid].p).removeprefix("p = "),
                "sides": estimates[cid].detail,
                f"paper, {PAPER_READER} (20 docs)": theirs,
            }
            for cid, name, theirs in rows
            if cid in estimates
        ]
    )


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


def closed_book_table(base: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Closed-book and oracle, ours (with Wilson intervals) above the paper's Table 1."""
    ours = base.assign(
        accuracy=[
            pct_ci(a, lo, hi)
            for a, lo, hi in zip(base["accuracy"], base["ci_low"], base["ci_high"])
        ]
    )
    ours = ours.pivot(index="model", columns="setting", values="accuracy").reset_index()
    theirs = (
        paper[paper["table"] == "Table 1"]
        .pivot(index="model", columns="setting", values="accuracy")
        .reset_index()
    )
    return pd.concat(
        [ours.assign(model=ours["model"] + " (ours, %, 95% Wilson)"), theirs], ignore_index=True
    )


def position_grid(summary: pd.DataFrame, label: str) -> pd.DataFrame:
    """Our cells, accuracy % [95% Wilson], one row per size and query placement."""
    mine = summary[summary["model"] == label]
    mine = mine.assign(
        cell=[
            pct_ci(a, lo, hi, 0)
            for a, lo, hi in zip(mine["accuracy"], mine["ci_low"], mine["ci_high"])
        ]
    )
    wide = mine.pivot_table(
        index=["num_documents", "query", "n"], columns="position", values="cell", aggfunc="first"
    )
    wide.columns = [f"position {c}" for c in wide.columns]
    return wide.reset_index().rename(columns={"num_documents": "documents", "n": "questions"})


def paper_grid(paper: pd.DataFrame, params: dict) -> pd.DataFrame:
    """The paper's appendix G accuracy for the same numbers of documents."""
    appendix = paper[
        (paper["table"] != "Table 1") & paper["num_documents"].isin(params["num_documents"])
    ]
    wide = appendix.pivot_table(
        index=["model", "num_documents"], columns="position", values="accuracy"
    )
    wide.columns = [f"position {int(c)}" for c in wide.columns]
    return wide.reset_index().rename(columns={"num_documents": "documents"})


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


def query_aware_table(view) -> pd.DataFrame:
    """:func:`query_aware_effects` for people: the change with its interval in one cell."""
    effects = view.effects
    shown = f"{QUERY_LABELS[True]} minus {QUERY_LABELS[False]} (pts, 95% CI)"
    return effects.assign(
        **{
            shown: [
                points_ci(d, lo, hi)
                for d, lo, hi in zip(effects["difference"], effects["ci_low"], effects["ci_high"])
            ]
        }
    )[["documents", "items", shown]]


def prompt_lengths(table: pd.DataFrame) -> pd.DataFrame:
    """Prompt tokens per setting and size (the paper's appendix F)."""

    def words(setting: str, documents: int) -> str:
        if setting == "documents":
            return f"{documents} documents"
        return "oracle (the gold document alone)" if setting == "oracle" else setting

    named = table.assign(
        setting=[words(s, k) for s, k in zip(table["setting"], table["num_documents"])]
    )
    return (
        named.groupby("setting", sort=False)["prompt_tokens"]
        .agg(["mean", "std", "max"])
        .round(1)
        .reset_index()
        .rename(
            columns={
                "setting": "prompt",
                "mean": "mean prompt tokens",
                "std": "standard deviation",
                "max": "longest",
            }
        )
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
    curve = od.curve(table)
    n = table["example_id"].nunique()
    shown = pd.concat(
        [
            curve.replace({"measure": {"retriever recall@k": f"recall@k, the {n} questions read"}}),
            recall_all.assign(measure=f"recall@k, all {len(pool):,} questions"),
        ],
        ignore_index=True,
    ).assign(panel="open-domain")
    low, high = open_domain_ks(params)
    steps = pd.concat([od.saturation(table), od.saturation(table, [low, high])], ignore_index=True)
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


def steps_table(steps: pd.DataFrame) -> pd.DataFrame:
    return steps.assign(
        **{
            "change (pts, 95% CI)": [
                points_ci(c, lo, hi)
                for c, lo, hi in zip(steps["change"], steps["ci_low"], steps["ci_high"])
            ],
            "sign-flip p": steps["p_sign_flip"].map(lambda p: p_text(p).removeprefix("p = ")),
        }
    )[["from k", "to k", "measure", "questions", "change (pts, 95% CI)", "sign-flip p"]]


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


def answered(run: Run) -> list[dict]:
    """Every row of the chapter's plan for this run's reader (missing ones generated)."""
    return run.answered()


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


def paper_curve(paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's accuracy (as a share) against the answer's position for its reader
    (Tables 5 and 6), in the columns of :func:`accuracy`."""
    curve = paper[(paper["model"] == PAPER_READER) & (paper["setting"] == "documents")]
    return curve.assign(accuracy=curve["accuracy"] / 100)


@book_figure
def figure(view: MultidocResult, paper: pd.DataFrame):
    """Accuracy against the answer's position per size and query placement: this page's
    reader thick, other readers and backends thin, the paper's reader as open diamonds, and
    this reader's closed-book and oracle accuracy as grey levels."""
    base = view.base[view.base["model"] == view.label].set_index("setting")["accuracy"]
    levels = (("closed-book", ":"), ("oracle", "-."))
    return accuracy_by_position(
        accuracy(view.everything),
        facet="num_documents",
        facet_title="{} documents",
        style="query",
        style_order=[QUERY_LABELS[False], QUERY_LABELS[True]],
        xlabel="Position of the document with the answer",
        main=view.label,
        paper=paper_curve(paper),
        paper_label=f"paper: {PAPER_READER}, question at end",
        references=tuple(
            (f"{name} ({100 * base[name]:.0f}%)", 100 * base[name], ls)
            for name, ls in levels
            if name in base
        ),
        links=view.links,
    )


def figure_text(view: MultidocResult) -> FigureText:
    """:func:`figure`'s caption and alt text, from the numbers it draws."""
    sizes = sorted(view.summary["num_documents"].unique())
    largest = sizes[-1]
    head = view.summary[
        (view.summary["num_documents"] == largest)
        & (view.summary["query"] == QUERY_LABELS[False])
        & (view.summary["model"] == view.label)
    ].sort_values("position")
    rest = view.summary[
        ~view.summary.index.isin(head.index) & (view.summary["model"] == view.label)
    ]
    base = view.base[view.base["model"] == view.label].set_index("setting")
    lines = accuracy(view.everything)
    others = sorted(set(lines["model"]) - {view.label})
    first, middle, last = (head["accuracy"].iloc[i] for i in (0, len(head) // 2, -1))
    mine = lines[lines["model"] == view.label]["accuracy"]
    below = "closed-book" in base.index and base.loc["closed-book", "accuracy"] < mine.min()
    above = "oracle" in base.index and base.loc["oracle", "accuracy"] > mine.max()
    caption = (
        f"Accuracy against the position of the document with the answer, "
        f"{' and '.join(str(k) for k in sizes)} documents. Solid: question at the end (the "
        f"paper's prompt); dashed: query-aware. Open diamonds: the paper's {PAPER_READER} with "
        f"the question at the end (Tables 5 and 6). Grey dotted: closed-book; dash-dot: oracle "
        f"(gold document only), {int(base['n'].max()) if len(base) else 0} questions each. "
        f"{int(head['n'].min())} questions per point at {largest} documents with the question "
        f"at the end, {int(rest['n'].min()) if len(rest) else 0} elsewhere; bands are 95% "
        f"Wilson intervals. Thick with filled points and its band, on top: {view.label}; thin with open rings "
        "beneath (visible around its points where they agree): "
        + (f"{', '.join(others)}, on the same prompts." if others else "no other reader.")
    )
    alt = (
        f"{len(sizes)} panels of accuracy against gold position. At {largest} documents with the "
        f"question at the end ({int(head['n'].min())} questions) accuracy is {percent_words(first)} "
        f"with the answer first, {percent_words(middle)} in the middle and {percent_words(last)} last; the "
        f"{int(rest['n'].min()) if len(rest) else 0}-question lines move within wide bands; "
        f"the closed-book line lies {'below' if below else 'not below'} every line of this "
        f"reader and the oracle line {'above' if above else 'not above'} them."
    )
    return FigureText(caption, alt)


def open_domain_text(view: MultidocResult) -> FigureText:
    """:func:`open_domain_figure`'s caption and alt text, from the numbers it draws."""
    od_view, curve = view.od, view.od["curve"]
    reader = curve[curve["measure"] == "reader accuracy"].sort_values("k")
    recall = curve[curve["measure"] != "reader accuracy"].sort_values("k")
    best = reader.loc[reader["accuracy"].idxmax()]
    caption = (
        f"Open-domain QA: BM25 recall@k (whether any of the top k chunks holds an answer) and "
        f"reader accuracy against the number of retrieved documents k, on the same "
        f"{od_view['questions']} NQ-Open questions at every k ({view.label}); the third line is "
        f"recall over all {od_view['pool']:,} questions ({od_view['chunks']:,} distinct chunks). "
        "Bands: 95% Wilson intervals."
    )
    alt = (
        f"Line chart against k from {reader['k'].min()} to {reader['k'].max()}: retriever "
        f"recall goes from {percent_words(recall['accuracy'].iloc[0])} to "
        f"{percent_words(recall['accuracy'].iloc[-1])} while reader accuracy goes from "
        f"{percent_words(reader['accuracy'].iloc[0])} to its highest, {percent_words(best['accuracy'])} at "
        f"k = {best['k']}, and ends at {percent_words(reader['accuracy'].iloc[-1])} at "
        f"k = {reader['k'].max()}."
    )
    return FigureText(caption, alt)


@book_figure
def open_domain_figure(view: MultidocResult):
    """Recall@k and reader accuracy against the number of retrieved documents."""
    fig = accuracy_by_position(
        view.od["shown"],
        x="k",
        facet="panel",
        hue="measure",
        facet_title="BM25 over the NQ-Open gold chunks",
        xlabel="Retrieved documents (k)",
    )
    fig.axes[0].set_ylabel("Recall or accuracy (%)")
    return fig


def gaps_table(gaps: pd.DataFrame) -> pd.DataFrame:
    return gaps.assign(
        **{"permutation p": gaps["permutation p"].map(lambda p: p_text(p).removeprefix("p = "))}
    )


class MultidocQA(Chapter):
    """Multi-document QA chapter (Lost in the Middle, section 2 and 4.1)."""

    name = "multidoc_qa"
    order = 3  # where longctx reproduce runs its headline blocks among the chapters
    notebook = "notebooks/multidoc_qa.py"
    claim_blocks = {
        "litm-qa-u-shape": ("documents, query at end",),
        "litm-qa-closed-book": ("closed-book", "documents, query at end"),
        "litm-open-domain": ("open-domain",),
        "litm-open-domain-recall": (),
    }
    experiments = (EXPERIMENT, OPEN_DOMAIN)  # the stores whose rows the chapter offers

    def plan(self, run: Run) -> list[Block]:
        return blocks(run.params)

    def check(self, run: Run) -> None:
        """Before any work: the U-shape compares first, middle and last at the most documents."""
        params = run.params
        k = max(params["num_documents"])
        have = set(qa.position_indices(k, positions_for(params, k)))
        if not set(qa.position_indices(k, HEADLINE_DEPTHS)) <= have:
            raise ParameterError(
                f"gold_positions {positions_for(params, k)} at {k} documents leave out the first, "
                f"middle or last position the chapter compares (depths {list(HEADLINE_DEPTHS)})"
            )

    def claims(self, run: Run) -> dict[str, Estimate]:
        """Lost in the Middle's multi-document claims, paired by question on the chapter's
        questions: the U-shape as a contrast fixed in advance (middle minus the mean of first and
        last, at the most documents, question at the end), the middle against closed-book, and,
        with the open-domain runs, reader accuracy and retriever recall at the two depths of
        :func:`open_domain_ks` (recall needs no reader: every NQ-Open question)."""
        params = run.params
        questions, pool = questions_for(params)
        keep = {q.example_id for q in questions}
        rows = [r for r in run.rows(EXPERIMENT) if r["example_id"] in keep]
        k = max(params["num_documents"])
        docs = {
            "setting": "documents",
            "num_documents": k,
            "query_aware": False,
            "distractors": params["distractors"],
            "random_order": params["random_order"],
        }
        first, middle, last = (
            by_unit(rows, {**docs, "gold_index": qa.position_indices(k, [depth])[0]}, qa.score)
            for depth in HEADLINE_DEPTHS
        )
        closed = by_unit(rows, {"setting": "closed-book"}, qa.score)
        edge = {u: (first[u] + last[u]) / 2 for u in set(first) & set(last)}
        out = {
            "litm-qa-u-shape": lambda: paired_estimate(
                edge, middle, side_names=("edges (mean of first and last)", "middle")
            ),
            "litm-qa-closed-book": lambda: paired_estimate(
                closed, middle, side_names=("closed-book", f"middle of {k}")
            ),
        }
        if params.get("open_domain_ks"):
            low, high = open_domain_ks(params)
            asked = {
                q.example_id
                for q in pool[: params.get("open_domain_questions") or params["num_questions"]]
            }
            od_rows = [r for r in run.rows(OPEN_DOMAIN) if r["example_id"] in asked]

            def recall():
                key = json.dumps([params.get(k) for k in RECALL_PARAMS] + [low, high])
                if key not in _RECALL:  # no reader: the same for every reader of one process
                    table = od.recall_table(pool, od.ChunkRetriever(pool), [low, high])
                    side = {
                        k: dict(zip(g["example_id"], g["recall"].astype(float)))
                        for k, g in table.groupby("k")
                    }
                    _RECALL[key] = paired_estimate(
                        side[low], side[high], side_names=(f"recall@{low}", f"recall@{high}")
                    )
                return _RECALL[key]

            def reader_gain():
                # the saturation claim's premise: more gold is there to read at the larger depth
                return replace(
                    paired_estimate(
                        by_unit(od_rows, {"k": low, "retriever": "bm25"}, qa.score),
                        by_unit(od_rows, {"k": high, "retriever": "bm25"}, qa.score),
                        side_names=(f"{low} documents", f"{high} documents"),
                    ),
                    facts={"recall_gain": recall().difference},
                )

            out["litm-open-domain"] = reader_gain
            out["litm-open-domain-recall"] = recall
        return estimable(out)

    def analyze(self, run: Run) -> MultidocResult:
        """Everything the chapter shows, computed from its rows and those other readers and
        backends stored for the same prompts: tables, the claims' estimates and verdicts, the
        open-domain curves, the numbers the prose quotes and the statements it makes."""
        params, reader, results_dir = run.params, run.reader, run.results
        rows_answered = answered(run)
        rows = [r for r in rows_answered if r["task"] == qa.TASK]
        requests = all_requests([b for b in run.planned() if b.experiment == EXPERIMENT])
        others = [
            r
            for r in comparable_rows(
                results_dir, EXPERIMENT, requests, exclude=reader.results_folder(results_dir)
            )
            if r["condition"]["setting"] == "documents"
        ]
        table, everything = scored(rows), scored(rows + others)
        summary = accuracy(table)
        estimates = self.claims(run)
        domain = open_domain([r for r in rows_answered if r["task"] != qa.TASK], params)
        view = MultidocResult(
            label=reader.label,
            estimates=estimates,
            verdicts=chapter_verdicts("multidoc_qa", estimates),
            table=table,
            everything=everything,
            summary=summary,
            base=baselines(table),
            sides=headline_sides(table, params),
            gaps=position_gaps(table, seed=params["seed"]),
            effects=query_aware_effects(table, reader.label, seed=params["seed"]),
            od=domain,
            links=point_links(with_documents(everything), POINT_KEYS, results_dir, EXPERIMENT),
            provenance="**Data.** " + provenance(table, results_dir, EXPERIMENT),
            od_provenance=(
                "**Data.** " + provenance(domain["table"], results_dir, OPEN_DOMAIN)
                if domain
                else ""
            ),
            consistent=(
                len(rows) == len(requests) == len({r["key"] for r in rows})
                and (summary["ci_low"] <= summary["accuracy"]).all()
                and (summary["accuracy"] <= summary["ci_high"]).all()
            ),
        )
        view.quoted = quoted(
            estimates, table, view.sides, view.gaps, view.effects, domain, params, reader.label
        )
        level = closed_book_level(reader.store(results_dir, EXPERIMENT).rows())
        view.quoted.update({f"qa-closed-all-{k.replace('_', '-')}": v for k, v in level.items()})
        view.said = statements(view, params) if domain else {}
        return view
