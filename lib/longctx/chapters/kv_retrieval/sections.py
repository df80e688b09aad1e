"""The key-value chapter's sections: its tables formatted for the page and its figures with
captions and alt text computed from what they draw (only the page reaches them)."""

from __future__ import annotations

import pandas as pd

from ...claims import SIZING_CAPTION, Estimate
from ...plots import FigureText, accuracy_by_position, book_figure
from ...report import p_text, pct_ci, percent_words, points_ci
from ...section import Example, Figure, PaperTable, Section, Sections, Shown, Table
from ..contract import Run
from .design import EXPERIMENT, QUERY_LABELS, QUERY_ORDER
from .numbers import KeyValueResult, PaperGrid, accuracy, paper_grid, paper_worst_case, sizing


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
        .reset_index()
        .assign(
            mean_tokens=lambda t: [f"{v:,.0f}" for v in t["mean_tokens"]],
            seconds_per_prompt=lambda t: [f"{v:.1f}" for v in t["seconds_per_prompt"]],
        )
        .rename(columns={"num_pairs": "pairs"})
    )


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


SECTIONS = Sections()


@SECTIONS("example")
def show_example(view: KeyValueResult, run: Run) -> Shown:
    return Example.largest(EXPERIMENT, run.params, "num_pairs", "{} pairs, query at the end")


@SECTIONS("headline")
def show_headline(view: KeyValueResult, run: Run) -> Shown:
    return (
        Table(
            headline_table(view.estimates),
            caption="The two headline comparisons at the largest size, paired by record.",
        ),
        Table(
            cells_table(view.cells),
            caption="The four headline cells: accuracy with 95% Wilson intervals.",
        ),
    )


@SECTIONS("grid")
def show_short_grid(view: KeyValueResult, run: Run) -> Shown:
    frame, notes = grid(view.summary, run.params, view.label)
    return Table(
        frame,
        notes,
        caption="Accuracy by depth of the gold pair at every size below the largest, with and "
        "without query-aware contextualization.",
    )


def _paper_grid(run: Run) -> PaperGrid:
    return run.once(
        "paper grid", lambda: paper_grid(run.chapter.scale("paper"), run.reader, run.results)
    )


@SECTIONS("paper grid figure")
def show_paper_grid_figure(view: KeyValueResult, run: Run) -> Shown:
    grid_view = _paper_grid(run)
    shown = Figure.when(
        grid_view.available,
        "fig-kv-paper-grid",
        lambda: paper_figure(grid_view),
        lambda: paper_figure_text(grid_view),
        f"No paper-scale rows for this reader yet: {grid_view.note}.",
    )
    return Section((shown,), quoted=grid_view.quoted, said=grid_view.said)


@SECTIONS("paper grid")
def show_paper_grid_tables(view: KeyValueResult, run: Run) -> Shown:
    grid_view = _paper_grid(run)
    tables = (
        (
            Table(
                *grid(grid_view.summary, run.chapter.scale("paper"), view.label, False),
                caption="Accuracy by depth of the gold pair at the paper's sizes.",
            ),
        )
        if grid_view.available
        else ()
    )
    return (*tables, f"Rows: {grid_view.note}.")


@SECTIONS("speed")
def show_prompt_speed(view: KeyValueResult, run: Run) -> Shown:
    return Table(
        speed(view.table, run.answered()),
        caption="Prompt length in the reader's tokens and seconds per prompt, by size, query "
        "placement and device.",
    )


@SECTIONS("readers")
def show_two_readers(view: KeyValueResult, run: Run) -> Shown:
    if view.readers:
        return Table(
            view.readers[0],
            view.readers[1],
            caption="Two readers' gold-in-the-middle-minus-first effects and their difference, "
            "paired by record.",
        )
    second = run.compare_with[0] if run.compare_with else view.label
    return f"No rows of `{second}` answer these prompts; run the chapter for it first."


SECTIONS.declare(
    {
        "position figure": lambda view: Figure("fig-kv-position", figure(view), figure_text(view)),
        "paper": lambda view: PaperTable(
            "lost_in_the_middle_kv",
            caption="The paper's key-value numbers, as its text and Figure 7 give them.",
        ),
        "sizing": lambda view: Table(sizing(view.estimates), caption=SIZING_CAPTION),
        "errors": lambda view: Table(
            view.errors, caption="Wrong answers by where the value they return came from."
        ),
    }
)
