"""The effective-length chapter's sections: the effective lengths beside NoLiMa's, a figure
per needle kind, the half-window comparison, LongScore per length and the needle kinds'
measured overlap (only the page reaches them)."""

from __future__ import annotations

import pandas as pd

from ...effective_length import tokens_text
from ...section import Example, Figure, Sections, Shown, Table
from ..contract import Run
from . import design
from .numbers import (
    LENGTHS_CAPTION,
    PUBLISHED_CAPTION,
    EffectiveLengthResult,
    Sweeps,
    figure,
    figure_text,
    lengths_table,
    published_lengths,
)

HALF_WINDOW_CAPTION = (
    "The pre-registered comparison per reader: the difference is accuracy at the claim's "
    "length (the longest within half its window) minus 85% of its own base, paired by needle."
)
LONGSCORE_CAPTION = (
    "100-LongBench's LongScore per length: (accuracy at the length - base) / base, the base "
    "the mean at 250, 500 and 1K tokens; 0% is no loss, -100% nothing found."
)
OVERLAP_CAPTION = (
    "How literally each needle kind's question repeats its needle: the share of questions "
    "sharing a content word with the needle, the answer's own words left out."
)


def longscore_table(view: Sweeps) -> pd.DataFrame:
    """LongScore per reader and needle kind (rows) and length (columns), one decimal."""
    if view.longscores.empty:
        return view.longscores
    table = view.longscores.assign(kind=view.longscores["kind"].map(design.KIND_NAMES))
    wide = table.pivot_table(
        index=["reader", "kind"], columns="length", values="LongScore", sort=False
    )
    wide.columns = [tokens_text(n) for n in wide.columns]
    return wide.map(lambda v: "" if pd.isna(v) else f"{100 * v:+.0f}%").reset_index()


def overlap_for_people(overlap: pd.DataFrame) -> pd.DataFrame:
    """:func:`.numbers.overlap_table` with its share in whole percent and its mean in words
    to one decimal."""
    share, mean = "sharing a word with the needle (%)", "words shared (mean)"
    return overlap.assign(
        **{share: overlap[share].map("{:.0f}".format), mean: overlap[mean].map("{:.1f}".format)}
    )


SECTIONS = Sections()


@SECTIONS("lengths")
def show_lengths(view: EffectiveLengthResult, run: Run) -> Shown:
    if not view.view.found:
        return "No reader has answered the sweep at every base length yet."
    return (
        Table(lengths_table(view.view), caption=LENGTHS_CAPTION),
        Table(published_lengths(), caption=PUBLISHED_CAPTION),
    )


@SECTIONS("figures")
def show_figures(view: EffectiveLengthResult, run: Run) -> Shown:
    out = []
    for kind, needles in design.KIND_NAMES.items():
        name = f"fig-el-{kind}"
        if (view.view.curves["kind"] == kind).any():
            out.append(
                Figure(name, figure(view.view, kind), figure_text(view.view, kind)),
            )
        else:
            out.append(Figure(name, None, missing=f"No reader has {needles} at every base length."))
    return tuple(out)


SECTIONS.declare(
    {
        "half-window": lambda view: Table(view.half_window, caption=HALF_WINDOW_CAPTION),
        "longscore": lambda view: (
            Table(longscore_table(view.view), caption=LONGSCORE_CAPTION)
            if not view.view.longscores.empty
            else "No reader has a LongScore yet: none has found a needle at every base length."
        ),
        "overlap": lambda view: Table(overlap_for_people(view.overlap), caption=OVERLAP_CAPTION),
    }
)


@SECTIONS("example")
def show_example(view: EffectiveLengthResult, run: Run) -> Shown:
    longest = max(run.params["lengths"])
    return Example(
        design.EXPERIMENT,
        f"a needle question at {tokens_text(longest)} tokens",
        {"needle_kind": "qa", "length": longest},
    )
