"""Key-value retrieval chapter (Lost in the Middle, sections 3 and 4.2).

Headline: gold pair first vs in the middle at the largest number of pairs, with and
without query-aware contextualization; the rest of the position grid follows.

``gold_positions``, ``examples_per_cell`` and ``kv_source`` take one value for every size or
a mapping from a number of pairs (as a string, JSON-style) to its own value, so one run can
hold a large headline cell from the paper's records and a small full grid of short contexts.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..claims import (
    Estimate,
    by_unit,
    chapter_verdicts,
    estimable,
    paired_estimate,
    paper_percent,
    sizing_table,
)
from ..errors import ParameterError
from ..metrics import summarize
from ..plots import FigureText, accuracy_by_position, book_figure
from ..reader import Reader
from ..report import estimate_text, p_text, params_text, pct_ci, percent_words, points_ci
from ..results import comparable_rows, point_links, provenance, reader_contrast, rows_table
from ..runner import Block, all_requests, stored
from ..tasks import kv_retrieval as kv
from .contract import Chapter, ChapterResult, Run

EXPERIMENT = "kv_retrieval"
HEADLINE_DEPTHS = (0.0, 0.5)
QUERY_LABELS = {False: "query at end", True: "query-aware"}
QUERY_ORDER = [QUERY_LABELS[False], QUERY_LABELS[True]]  # the paper's prompt first: solid


def per_size(params: dict, name: str, k: int):
    """``params[name]`` for ``k`` pairs: the value itself, or its entry for ``k`` in a mapping."""
    value = params[name]
    if isinstance(value, dict):
        if str(k) not in value and k not in value:
            raise ParameterError(f"{name} has no entry for {k} pairs: {sorted(value)}")
        return value.get(str(k), value.get(k))
    return value


def examples_for(num_pairs: int, params: dict) -> tuple[list[kv.KVExample], str]:
    """The examples of one context size and the ``source`` label their rows carry.

    ``kv_source``: ``synthetic`` (seeded UUIDs), ``release-75`` / ``release-140`` (that
    file, trimmed to ``num_pairs``), or ``release`` (the smallest release file that holds
    ``num_pairs`` pairs, so 75 and 140 pairs both come from the paper's own records)."""
    source, n = (
        per_size(params, "kv_source", num_pairs),
        per_size(params, "examples_per_cell", num_pairs),
    )
    if source == "synthetic":
        return kv.synthetic_examples(n, num_pairs, seed=params["seed"]), source
    if source == "release":
        total = next((t for t in (75, 140) if num_pairs <= t), None)
        if total is None:
            raise ParameterError(
                f"the release files hold at most 140 pairs, not {num_pairs}; use synthetic"
            )
        source = f"release-{total}"
    if source not in ("release-75", "release-140"):
        raise ParameterError(
            f"kv_source must be synthetic, release, release-75 or release-140, not {source!r}"
        )
    return kv.release_examples(int(source.split("-")[1]), limit=n, num_pairs=num_pairs), source


def blocks(params: dict) -> list[Block]:
    largest = max(params["num_pairs"])
    headline, rest = [], []
    for k in params["num_pairs"]:
        examples, source = examples_for(k, params)
        for qa in params["query_aware"]:
            # Split the positions so that first-vs-middle at the largest size runs first.
            positions = per_size(params, "gold_positions", k)
            top = [p for p in positions if k == largest and p in HEADLINE_DEPTHS]
            others = [p for p in positions if p not in top]
            label = f"{k} pairs, {'query-aware' if qa else 'query at end'}"
            if top:
                headline.append(
                    Block(
                        f"{label}, depths {top}",
                        EXPERIMENT,
                        kv.make_requests(examples, top, query_aware=qa, source=source),
                        True,
                    )
                )
            if others:
                # Positions that round to a headline index are already in the headline block.
                done = set(kv.position_indices(k, top)) if top else set()
                reqs = [
                    r
                    for r in kv.make_requests(examples, others, query_aware=qa, source=source)
                    if r.condition["gold_index"] not in done
                ]
                rest.append(Block(f"{label}, depths {others}", EXPERIMENT, reqs))
    return headline + rest


# ---------------------------------------------------------------------------------------------
# Analysis: what the notebook shows, as numbers


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


def grid(
    summary: pd.DataFrame, params: dict, label: str, below_largest: bool = True
) -> tuple[pd.DataFrame, str]:
    """The position grid (at every size below the largest, or at every size): accuracy
    [interval] per depth, and its note."""
    short = summary[summary["model"] == label]
    if below_largest:
        short = short[short["num_pairs"] < max(params["num_pairs"])]
    short = short.assign(
        cell=[
            pct_ci(a, lo, hi, 0)
            for a, lo, hi in zip(short["accuracy"], short["ci_low"], short["ci_high"])
        ]
    )
    wide = short.pivot_table(
        index=["num_pairs", "query"], columns="depth", values="cell", aggfunc="first"
    )
    wide.columns = [f"depth {c:g}" for c in wide.columns]
    return wide.reset_index().rename(
        columns={"num_pairs": "pairs"}
    ), "Accuracy (%) [95% Wilson interval]."


def speed(table: pd.DataFrame, rows: list[dict]) -> pd.DataFrame:
    """Prompts, mean prompt tokens and seconds per prompt by size, query placement and device."""
    devices = [r["params"].get("device", "?") + " " + r["params"].get("dtype", "") for r in rows]
    return (
        table.assign(device=devices)
        .groupby(["num_pairs", "query", "device"])
        .agg(
            prompts=("correct", "size"),
            mean_tokens=("prompt_tokens", "mean"),
            seconds_per_prompt=("seconds_per_prompt", "mean"),
        )
        .round(1)
        .reset_index()
        .rename(columns={"num_pairs": "pairs"})
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


def quoted(
    estimates: dict[str, Estimate],
    cells: pd.DataFrame,
    summary: pd.DataFrame,
    errors: pd.DataFrame,
    params: dict,
    label: str,
) -> dict:
    """Every number the chapter's prose quotes, by glue key."""
    largest = max(params["num_pairs"])

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
        "kv-short-low": f"{100 * short['accuracy'].min():.0f}%" if len(short) else "—",
        "kv-short-high": f"{100 * short['accuracy'].max():.0f}%" if len(short) else "—",
        "kv-qa-errors-first-pair": f"{qa_errors[kv.ERROR_KINDS[0]].sum() / wrong:.0%}"
        if wrong
        else "—",
    }


def headline_table(estimates: dict[str, Estimate]) -> pd.DataFrame:
    """The two headline comparisons: difference, interval, records, p and the two sides."""
    names = {
        "litm-kv-middle": "middle minus first (query at end)",
        "litm-kv-query-aware": "query-aware minus query at end (gold in the middle)",
    }
    return pd.DataFrame(
        [
            {
                "comparison": name,
                "ours (pts, 95% CI)": points_ci(e.difference, e.ci_low, e.ci_high),
                "records": e.n,
                "sign-flip p": p_text(e.p).removeprefix("p = "),
                "sides": e.detail,
            }
            for cid, name in names.items()
            if (e := estimates.get(cid)) is not None
        ]
    )


def cells_table(cells: pd.DataFrame) -> pd.DataFrame:
    return cells.assign(
        accuracy=[
            pct_ci(a, lo, hi)
            for a, lo, hi in zip(cells["accuracy"], cells["ci_low"], cells["ci_high"])
        ]
    )[["query", "position", "n", "accuracy"]].rename(
        columns={"accuracy": "accuracy (%, 95% Wilson)"}
    )


def statements(
    estimates: dict[str, Estimate],
    verdicts: dict[str, str],
    cells: pd.DataFrame,
    summary: pd.DataFrame,
    table: pd.DataFrame,
    errors: pd.DataFrame,
    params: dict,
    label: str,
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


def answered(run: Run) -> list[dict]:
    """Every row of the chapter's plan for this run's reader (missing ones generated)."""
    return run.answered()


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


def paper_worst_reference() -> tuple[str, float, str]:
    """The dotted level both figures draw, labelled with its value."""
    worst = 100 * paper_worst_case()
    return f"paper's worst case, any model ({worst:.1f}%)", worst, ":"


def figure_text(view: KeyValueResult) -> FigureText:
    """:func:`figure`'s caption and alt text, from the numbers it draws."""
    mine = view.summary[view.summary["model"] == view.label]
    sizes = sorted(mine["num_pairs"].unique())
    largest, smaller = sizes[-1], sizes[:-1]
    n_of = mine.groupby("num_pairs")["n"].min()
    cell = mine.set_index(["num_pairs", "query", "depth"])["accuracy"]
    end, aware = QUERY_LABELS[False], QUERY_LABELS[True]
    points = [k for k in sizes if mine[mine["num_pairs"] == k]["depth"].nunique() < 3]
    others = sorted(set(view.everything["model"]) - {view.label})
    low = mine[mine["num_pairs"].isin(smaller)]["accuracy"]
    caption = (
        f"Accuracy against the gold pair's relative depth (0 = first, 1 = last) for "
        f"{', '.join(str(k) for k in sizes)} key-value pairs; solid: query after the data, "
        "dashed: query-aware. Bands: 95% Wilson intervals ("
        + "; ".join(f"{n_of[k]} examples per point at {k} pairs" for k in sizes)
        + f"). Thick with filled points and its band, on top: {view.label}; thin with open rings "
        "beneath (visible around its points where they agree): "
        + (f"{', '.join(others)}, on the same prompts." if others else "no other reader.")
        + " Dotted grey: the paper's worst case over its six models, its value in the legend."
        + (
            f" At {', '.join(str(k) for k in points)} pairs the depths are drawn as points, "
            "not a line."
            if points
            else ""
        )
    )
    alt = (
        f"{len(sizes)} panels of accuracy against gold depth. "
        + (
            f"At {' and '.join(str(k) for k in smaller)} pairs {view.label} stays between "
            f"{percent_words(low.min())} and {percent_words(low.max())}; "
            if smaller
            else ""
        )
        + f"at {largest} pairs it goes from {percent_words(cell[largest, end, 0.0])} with the gold pair "
        f"first to {percent_words(cell[largest, end, 0.5])} in the middle, and to "
        f"{percent_words(cell[largest, aware, 0.5])} with the query also before the data."
        + (f" Thin lines: {', '.join(others)}." if others else "")
    )
    return FigureText(caption, alt)


def paper_figure_text(view: PaperGrid) -> FigureText:
    """:func:`paper_figure`'s caption and alt text, from the numbers it draws."""
    cell = view.summary.set_index(["num_pairs", "query", "depth"])["accuracy"]
    sizes = sorted(view.summary["num_pairs"].unique())
    end, aware = QUERY_LABELS[False], QUERY_LABELS[True]
    worst = paper_worst_case()
    caption = (
        f"The paper's key-value grid for this reader: accuracy against the gold pair's relative "
        f"depth at {' and '.join(str(k) for k in sizes)} pairs of the paper's own records, "
        f"{int(view.summary['n'].min())} records per point; solid: query after the data, "
        "dashed: query-aware. Bands: 95% Wilson intervals. Dotted: the paper's worst case over "
        "its six models, sizes and positions, its value in the legend."
    )
    alt = f"{len(sizes)} panels of accuracy against gold depth. " + " ".join(
        f"At {k} pairs with the query after the data: {percent_words(cell[k, end, 0.0])} first, "
        f"{percent_words(cell[k, end, 0.5])} in the middle"
        f" ({'below' if cell[k, end, 0.5] < worst else 'not below'} the paper's worst case), "
        f"{percent_words(cell[k, end, 1.0])} last; with the query also before the data: "
        f"{percent_words(cell[k, aware, 0.0])}, {percent_words(cell[k, aware, 0.5])} and "
        f"{percent_words(cell[k, aware, 1.0])}."
        for k in sizes
    )
    return FigureText(caption, alt)


@book_figure
def paper_figure(view: PaperGrid):
    """:func:`paper_grid`'s accuracy against depth, one panel per size, with the paper's
    worst case over its models as a dotted level."""
    return accuracy_by_position(
        view.summary,
        x="depth",
        style="query",
        style_order=QUERY_ORDER,
        xlabel="Relative depth of the gold pair",
        xlim=(-0.05, 1.05),
        references=(paper_worst_reference(),),
    )


@book_figure
def figure(view: KeyValueResult):
    """Accuracy against the gold pair's depth, one panel per size: this page's reader thick
    with its band, every other reader and backend with rows for these prompts thin."""
    return accuracy_by_position(
        accuracy(view.everything),
        x="depth",
        style="query",
        style_order=QUERY_ORDER,
        xlabel="Relative depth of the gold pair",
        xlim=(-0.05, 1.05),
        main=view.label,
        references=(paper_worst_reference(),),
        links=view.links,
    )


class KeyValueRetrieval(Chapter):
    """Key-value retrieval chapter (Lost in the Middle, sections 3 and 4.2)."""

    name = "kv_retrieval"
    order = 1  # where longctx reproduce runs its headline blocks among the chapters
    notebook = "notebooks/kv_retrieval.py"
    claim_blocks = {
        "litm-kv-middle": ("query at end",),
        "litm-kv-query-aware": ("query at end", "query-aware"),
    }
    experiments = (EXPERIMENT,)  # the stores whose rows the chapter offers for download

    def plan(self, run: Run) -> list[Block]:
        return blocks(run.params)

    def check(self, run: Run) -> None:
        """Before any work: the claims compare gold first and in the middle at the largest size."""
        params = run.params
        largest = max(params["num_pairs"])
        positions = per_size(params, "gold_positions", largest)
        missing = [d for d in HEADLINE_DEPTHS if d not in positions]
        if missing:
            raise ParameterError(
                f"gold_positions for {largest} pairs is {positions}; the chapter compares the gold "
                f"pair first and in the middle there, so it needs depths {list(HEADLINE_DEPTHS)}"
            )

    def claims(self, run: Run) -> dict[str, Estimate]:
        """The paper's two key-value claims at the largest size, on that size's examples, paired
        by record: gold in the middle minus first (query after the data), and query-aware minus
        query at the end with the gold pair in the middle."""
        params = run.params
        largest = max(params["num_pairs"])
        examples, source = examples_for(largest, params)
        keep = {ex.example_id for ex in examples}
        rows = [r for r in run.rows(EXPERIMENT) if r["example_id"] in keep]
        first, middle = (
            kv.position_indices(largest, [HEADLINE_DEPTHS[0]])[0],
            kv.position_indices(largest, [0.5])[0],
        )
        base = {"source": source, "num_pairs": largest}

        def side(gold_index, query_aware):
            return by_unit(
                rows, {**base, "gold_index": gold_index, "query_aware": query_aware}, kv.score
            )

        return estimable(
            {
                "litm-kv-middle": lambda: paired_estimate(
                    side(first, False), side(middle, False), side_names=("first", "middle")
                ),
                "litm-kv-query-aware": lambda: paired_estimate(
                    side(middle, False),
                    side(middle, True),
                    side_names=("query at end", "query-aware"),
                ),
            }
        )

    def analyze(self, run: Run) -> KeyValueResult:
        """Everything the chapter shows, computed from its rows and those other readers and
        backends stored for the same prompts (one more line each in the figure): tables, the
        headline estimates and their verdicts, the numbers the prose quotes (``quoted``) and the
        statements it makes in words (``said``). ``run.compare_with`` names the second reader of
        the reader comparison."""
        params, reader, results_dir = run.params, run.reader, run.results
        rows, requests = answered(run), all_requests(run.planned())
        others = comparable_rows(
            results_dir, EXPERIMENT, requests, exclude=reader.results_folder(results_dir)
        )
        table, everything = scored(rows, params), scored(rows + others, params)
        summary, errors = accuracy(table), error_kinds(table)
        estimates = self.claims(run)
        verdicts = chapter_verdicts("kv_retrieval", estimates)
        cells = headline_cells(summary, params, reader.label)
        second = run.compare_with[0] if run.compare_with else reader.label
        return KeyValueResult(
            label=reader.label,
            estimates=estimates,
            verdicts=verdicts,
            table=table,
            everything=everything,
            summary=summary,
            errors=errors,
            cells=cells,
            quoted=quoted(estimates, cells, summary, errors, params, reader.label),
            said=statements(
                estimates, verdicts, cells, summary, table, errors, params, reader.label
            ),
            provenance=(
                f"**Data.** {provenance(everything, results_dir, EXPERIMENT)} Greedy decoding, "
                f"prompts from `lib/longctx/prompts/`; parameters: {params_text(params)}."
            ),
            readers=reader_comparison(everything, (reader.label, second)),
            links=point_links(everything, POINT_KEYS, results_dir, EXPERIMENT),
            consistent=(
                len(rows) == len(requests) == len({r["key"] for r in rows})
                and (summary["ci_low"] <= summary["accuracy"]).all()
                and (summary["accuracy"] <= summary["ci_high"]).all()
            ),
        )
