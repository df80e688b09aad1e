"""The key-value chapter's numbers: scored rows, accuracy per cell, the headline cells,
errors, the reader comparison, the paper's own grid, the numbers the prose quotes and the
statements it makes (what the chapter's analysis returns; findings and the matrix read the
claims through the chapter's class)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...claims import (
    Estimate,
    paper_percent,
    sizing_table,
)
from ...metrics import summarize, unit_mean
from ...reader import Reader
from ...report import estimate_text, p_text, points_ci
from ...results import reader_contrast
from ...runner import all_requests, stored
from ...tables import rows_table
from ...tasks import kv_retrieval as kv
from ..contract import ChapterResult
from .design import EXPERIMENT, HEADLINE_DEPTHS, QUERY_LABELS, blocks, per_size


def scored(rows: list[dict], params: dict) -> pd.DataFrame:
    """One row per generation with the chapter's columns: ``num_pairs``, the requested
    ``depth`` behind each gold index (sizes round a depth to different indices), ``query``."""
    depth_of = {
        (k, kv.position_indices(k, [d])[0]): d
        for k in params["num_pairs"]
        for d in per_size(params, "gold_positions", k)
    }
    table = rows_table(rows, kv.score)
    table["num_pairs"] = [r["condition"]["num_pairs"] for r in rows]
    table["depth"] = [depth_of[(k, i)] for k, i in zip(table["num_pairs"], table["gold_index"])]
    table["query"] = table["query_aware"].map(QUERY_LABELS)
    return table


POINT_KEYS = ("model", "num_pairs", "query", "depth")  # one point of the key figure


def size_curve(table: pd.DataFrame) -> pd.DataFrame:
    """Accuracy by size read as a length curve, for a bound on the effective length
    (:func:`longctx.effective_length.bounds`): the query at the end, the gold pair first and
    in the middle (the depths every size asks), each record's answers averaged first, a 95%
    percentile bootstrap over records seeded by their ids; ``length`` is the size's mean
    prompt tokens, ``point`` names the size. One curve per reader: ``table`` holds one
    reader's rows."""
    part = table[~table["query_aware"] & table["depth"].isin(HEADLINE_DEPTHS)]
    out = []
    for size, group in part.groupby("num_pairs"):
        per_record = group.groupby("example_id")["correct"].mean()
        length = float(group["prompt_tokens"].mean())
        point = f"{int(size)} pairs"
        out.append({"point": point, "length": length, **unit_mean(per_record)})
    return pd.DataFrame(out, columns=["point", "length", "n", "accuracy", "ci_low", "ci_high"])


def accuracy(table: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per reader, size, query placement and depth, with 95% Wilson intervals."""
    return summarize(table, list(POINT_KEYS))


def headline_cells(summary: pd.DataFrame, params: dict, label: str) -> pd.DataFrame:
    """The headline's four cells (first and middle, each query placement) at the largest size."""
    cells = summary[
        (summary["num_pairs"] == max(params["num_pairs"]))
        & (summary["model"] == label)
        & summary["depth"].isin(HEADLINE_DEPTHS)
    ]
    return cells.assign(
        position=cells["depth"].map({0.0: "first", 0.5: "middle"}),
        correct=(cells["accuracy"] * cells["n"]).round().astype(int),
    )


def sizing(estimates: dict) -> pd.DataFrame:
    """For each headline comparison, the records and share whose outcome changes, and the
    records a 95% half-width of 10 points needs at the observed spread (from the claims'
    own estimates)."""
    return sizing_table(
        {
            "middle minus first": estimates.get("litm-kv-middle"),
            "query-aware minus query at end": estimates.get("litm-kv-query-aware"),
        },
        "records",
    )


def error_kinds(table: pd.DataFrame) -> pd.DataFrame:
    """Wrong answers by size and query placement, by where their value came from."""
    errors = table[~table["correct"].astype(bool)]
    errors = errors.assign(kind=[kv.classify_error(r) for r in errors.to_dict("records")])
    kinds = pd.crosstab([errors["num_pairs"], errors["query"]], errors["kind"]).reindex(
        columns=list(kv.ERROR_KINDS), fill_value=0
    )
    kinds.columns.name = None
    return kinds.reset_index().rename(columns={"num_pairs": "pairs"})


def reader_comparison(
    table: pd.DataFrame, readers: tuple[str, str]
) -> tuple[pd.DataFrame, str] | None:
    """Each reader's middle-minus-first effect (query at the end) and the difference between
    them, paired by record, at the largest size where both have rows, with a note that says
    on what; None when they share no size."""
    both = table[
        table["model"].isin(readers) & ~table["query_aware"] & table["depth"].isin(HEADLINE_DEPTHS)
    ]
    sizes = [k for k, g in both.groupby("num_pairs") if g["model"].nunique() == 2]
    if not sizes or readers[0] == readers[1]:
        return None
    at = both[both["num_pairs"] == max(sizes)]
    contrast = reader_contrast(
        at,
        readers=list(readers),
        condition="depth",
        control=0.0,
        treatment=0.5,
        item=["example_id"],
    )
    shown = pd.DataFrame(
        [
            {
                "reader": name,
                "middle minus first (pts, 95% CI)": points_ci(
                    100 * contrast[name]["effect"],
                    100 * contrast[name]["ci_low"],
                    100 * contrast[name]["ci_high"],
                ),
            }
            for name in [*readers, "difference"]
        ]
    )
    note = (
        f"{max(sizes)} pairs, query at the end, {contrast['items']} records answered by both readers; "
        f"difference = {readers[1]} minus {readers[0]}; sign-flip {p_text(contrast['p_sign_flip'])}."
    )
    return shown, note


def backend_agreement(everything: pd.DataFrame, label: str) -> tuple[int, int] | None:
    """How many of this reader's prompts another backend of the same weights answered, and
    how many of those with the same text: (identical, shared); None without such rows."""
    mine = everything[everything["model"] == label]
    if mine.empty:
        return None
    same = everything[
        (everything["model_name"] == mine["model_name"].iloc[0]) & (everything["model"] != label)
    ]
    if same.empty:
        return None
    on = ["example_id", "num_pairs", "gold_index", "query_aware"]
    paired = mine[on + ["output"]].merge(same[on + ["output"]], on=on, suffixes=("", "_other"))
    return int((paired["output"] == paired["output_other"]).sum()), len(paired)


def prompt_tokens(table: pd.DataFrame) -> dict[int, float]:
    """This reader's mean prompt tokens at each number of pairs."""
    return table.groupby("num_pairs")["prompt_tokens"].mean().to_dict()


def quoted(
    estimates: dict[str, Estimate],
    cells: pd.DataFrame,
    summary: pd.DataFrame,
    errors: pd.DataFrame,
    params: dict,
    label: str,
    table: pd.DataFrame,
    everything: pd.DataFrame,
) -> dict:
    """Every number the chapter's prose quotes, by glue key."""
    largest = max(params["num_pairs"])
    tokens = prompt_tokens(table)
    smallest = min(tokens)
    agreement = backend_agreement(everything, label) or (0, 0)

    def cell(position, query):
        row = cells[(cells["position"] == position) & (cells["query"] == query)].iloc[0]
        return row

    first, middle = cell("first", QUERY_LABELS[False]), cell("middle", QUERY_LABELS[False])
    qa_middle = cell("middle", QUERY_LABELS[True])
    short = summary[(summary["num_pairs"] < largest) & (summary["model"] == label)]
    qa_errors = errors[(errors["pairs"] == largest) & (errors["query"] == QUERY_LABELS[True])]
    wrong = qa_errors[list(kv.ERROR_KINDS)].to_numpy().sum()
    return {
        "kv-paper-worst-case": f"{100 * paper_worst_case():.1f}%",
        "kv-largest": largest,
        "kv-records": int(first["n"]),
        "kv-first-correct": int(first["correct"]),
        "kv-first-pct": f"{100 * first['accuracy']:.1f}%",
        "kv-middle-correct": int(middle["correct"]),
        "kv-middle-pct": f"{100 * middle['accuracy']:.1f}%",
        "kv-qa-middle-correct": int(qa_middle["correct"]),
        "kv-qa-middle-pct": f"{100 * qa_middle['accuracy']:.1f}%",
        "kv-middle-vs-first": estimate_text(estimates["litm-kv-middle"]),
        "kv-query-aware": estimate_text(estimates["litm-kv-query-aware"]),
        "kv-short-sizes": " and ".join(str(k) for k in sorted(params["num_pairs"]) if k < largest),
        # the design's examples per cell below the largest size (the scale's, one number
        # when every short size has the same)
        "kv-short-examples": " or ".join(
            sorted(
                {
                    str(per_size(params, "examples_per_cell", k))
                    for k in params["num_pairs"]
                    if k < largest
                }
            )
        ),
        "kv-short-tokens": " and ".join(
            f"{round(tokens[k], -1):,.0f}" for k in sorted(tokens) if k < largest
        ),
        "kv-largest-tokens": f"{round(tokens[largest], -2):,.0f}",
        # what one more pair costs: the slope between the smallest and the largest size
        "kv-pair-tokens": (
            f"{(tokens[largest] - tokens[smallest]) / (largest - smallest):.0f}"
            if largest > smallest
            else "—"
        ),
        "kv-backends-identical": agreement[0],
        "kv-backends-shared": agreement[1],
        "kv-short-low": f"{100 * short['accuracy'].min():.0f}%" if len(short) else "—",
        "kv-short-high": f"{100 * short['accuracy'].max():.0f}%" if len(short) else "—",
        "kv-qa-errors-first-pair": f"{qa_errors[kv.ERROR_KINDS[0]].sum() / wrong:.0%}"
        if wrong
        else "—",
    }


def statements(
    estimates: dict[str, Estimate],
    verdicts: dict[str, str],
    cells: pd.DataFrame,
    summary: pd.DataFrame,
    table: pd.DataFrame,
    errors: pd.DataFrame,
    params: dict,
    label: str,
    agreement: tuple[int, int] | None,
) -> dict[str, bool]:
    """What the chapter's prose says in words, each as a check on the committed run."""
    largest = max(params["num_pairs"])
    middle = cells[(cells["position"] == "middle") & (cells["query"] == QUERY_LABELS[False])][
        "accuracy"
    ].iloc[0]
    qa_errors = errors[(errors["pairs"] == largest) & (errors["query"] == QUERY_LABELS[True])]
    short = summary[(summary["num_pairs"] < largest) & (summary["model"] == label)]
    return {
        "lost in the middle, reproduced": verdicts["litm-kv-middle"] == "reproduced",
        "query-aware did not help, and its arm lies below near-perfect": verdicts[
            "litm-kv-query-aware"
        ]
        == "not reproduced"
        and estimates["litm-kv-query-aware"].difference <= 0,
        "this reader goes lower than the paper's worst case": middle < paper_worst_case(),
        "both comparisons are sized for ±10 points": all(
            n <= estimates["litm-kv-middle"].n for n in sizing(estimates)["records for ±10 pts"]
        ),
        "short contexts stay between 50 and 100%": short["accuracy"].between(0.5, 1.0).all(),
        "the llama.cpp backend answers every shared prompt as hf does": agreement is not None
        and agreement[0] == agreement[1] > 0,
        "most query-aware errors return the first pair's value": qa_errors[kv.ERROR_KINDS[0]].sum()
        > qa_errors[list(kv.ERROR_KINDS)].to_numpy().sum() / 2,
    }


@dataclass(kw_only=True)
class KeyValueResult(ChapterResult):
    """The chapter's numbers: ``table`` (this reader's scored rows), ``everything`` (with
    other readers' and backends' rows of the same prompts), ``summary`` (accuracy per cell),
    ``errors`` (what wrong answers were), ``cells`` (the headline cells), ``readers`` (the
    comparison with the page's second reader, None without shared rows) and the figure's
    Data line."""

    table: pd.DataFrame
    everything: pd.DataFrame
    summary: pd.DataFrame
    errors: pd.DataFrame
    cells: dict
    readers: tuple[pd.DataFrame, str] | None
    provenance: str


@functools.cache  # read once: the prose, the statements and both figures ask for it
def paper_worst_case() -> float:
    """The paper's worst accuracy over its six models, sizes and positions (Section 4.2), from
    ``data/paper/lost_in_the_middle_kv.csv``."""
    return paper_percent(
        "lost_in_the_middle_kv", statistic="worst-case accuracy (any model and position)"
    )


# What the paper grid's prose quotes: numbers of the whole grid, then cells of each size.
_GRID_QUOTES = ("records", "rows", "tokens", "worst", "qa-worst", "paper-worst", "edges-low")

_SIZE_QUOTES = ("first", "last", "qa-last", "worst-inner")


def _paper_keys(sizes) -> list[str]:
    return [f"kv-paper-{q}" for q in _GRID_QUOTES] + [
        f"kv-paper-{k}-{q}" for k in sizes for q in _SIZE_QUOTES
    ]


@dataclass
class PaperGrid:
    """The paper's own grid as stored for a reader (:func:`paper_grid`): ``expected`` and
    ``n_rows`` (planned and stored prompts), ``available`` (any row stored), ``note`` (how
    many, where they ran, where they live), and once available ``summary`` (accuracy per
    cell); ``quoted`` and ``said`` as in a chapter's result."""

    expected: int
    n_rows: int
    available: bool
    note: str
    quoted: dict[str, str]
    said: dict[str, bool]
    summary: pd.DataFrame | None = None


def paper_grid(params: dict, reader: Reader, results_dir: str | Path) -> PaperGrid:
    """The paper's own grid (``params``: the ``paper`` scale: 75 and 140 pairs of its release
    records, five depths, both query placements) from the rows of it that are stored (made on
    a lent GPU): accuracy per cell with its Wilson interval, the numbers the prose quotes and
    the statements it makes, and where the rows ran (:func:`paper_figure` draws it).
    ``available`` is False while a reader has no rows of it (``make reproduce SCALE=paper``
    makes them); the prose's numbers are then n/a."""
    grid_plan = blocks(params)
    rows = stored(grid_plan, reader, results_dir)
    expected = len(all_requests(grid_plan))
    ran = sorted({f"{r['params'].get('device')}, {r['params'].get('dtype')}" for r in rows})
    view = PaperGrid(
        expected=expected,
        n_rows=len(rows),
        available=bool(rows),
        note=(
            f"{len(rows):,} of the grid's {expected:,} rows stored for {reader.label}"
            + (f" ({'; '.join(ran)})" if ran else "")
            + f"; data/results/{reader.results_folder(results_dir)}/{EXPERIMENT}/"
        ),
        quoted={},
        said={},
    )
    sizes, depths = sorted(params["num_pairs"]), sorted(params["gold_positions"])
    if not view.available:
        view.quoted = dict.fromkeys(_paper_keys(sizes), "n/a")
        return view
    view.summary = accuracy(scored(rows, params))
    cell = view.summary.set_index(["num_pairs", "query", "depth"])["accuracy"]
    inner = [d for d in depths if 0 < d < 1]
    end, aware = QUERY_LABELS[False], QUERY_LABELS[True]
    worst = {q: min((cell[k, q, d], k, d) for k in sizes for d in depths) for q in (end, aware)}
    view.quoted = {
        "kv-paper-records": f"{int(view.summary['n'].min()):,}",
        "kv-paper-rows": f"{len(rows):,}",
        "kv-paper-tokens": "{:,} to {:,}".format(
            min(int(r["prompt_tokens"]) for r in rows), max(int(r["prompt_tokens"]) for r in rows)
        ),
        "kv-paper-worst": f"{100 * worst[end][0]:.0f}% ({worst[end][1]} pairs, depth {worst[end][2]:g})",
        "kv-paper-qa-worst": f"{100 * worst[aware][0]:.0f}% ({worst[aware][1]} pairs, depth {worst[aware][2]:g})",
        "kv-paper-paper-worst": f"{100 * paper_worst_case():.1f}%",
        # The lower of the two edges (first, last) at any size, query after the data.
        "kv-paper-edges-low": f"{100 * min(cell[k, end, d] for k in sizes for d in (0.0, 1.0)):.0f}%",
        **{
            f"kv-paper-{k}-{name}": f"{100 * cell[k, query, d]:.0f}%"
            for k in sizes
            # The same names as _SIZE_QUOTES (a test holds both key sets equal).
            for name, query, d in (
                ("first", end, 0.0),
                ("last", end, 1.0),
                ("qa-last", aware, 1.0),
                ("worst-inner", end, min(inner, key=lambda d, k=k: cell[k, end, d])),
            )
        },
    }
    view.said = {
        # Query at the end: both edges at least 30 points above the worst inner depth, each size.
        "u-shape at both sizes": all(
            min(cell[k, end, 0.0], cell[k, end, 1.0]) - min(cell[k, end, d] for d in inner) >= 0.3
            for k in sizes
        ),
        "edges above 80% at both sizes": all(
            cell[k, end, d] > 0.8 for k in sizes for d in (0.0, 1.0)
        ),
        "worst cell below the paper's worst case": worst[end][0] < paper_worst_case(),
        "query-aware worst cell below 50%": worst[aware][0] < 0.5,
        "query-aware loses the last pair": all(
            cell[k, aware, 1.0] < cell[k, end, 1.0] - 0.3 for k in sizes
        ),
    }
    return view
