"""The mitigations chapter's sections: the gains table for people and the key figure with its
caption and alt text computed from what it draws (only the page reaches them)."""

from __future__ import annotations

import pandas as pd

from ...claims import paper_frame
from ...plots import OKABE_ITO, FigureText, accuracy_by_position, book_figure
from ...report import format_p, percent_words, points_ci
from ...section import Example, Figure, Sections, Shown, Table
from ...tasks import multidoc_qa as qa
from ..contract import Run
from .design import DEPTHS, EXPERIMENT
from .numbers import ARM_NAMES, BASELINE, CONTROLS, MitigationsResult, paper_gains

PAPER_FILE = "lost_in_the_middle_qa"
PAPER_READER = "GPT-3.5-Turbo"
# The baseline black and thick, the controls dashed (the shuffle black, the reorder grey), each
# fix one of the other seven Okabe-Ito colours and its own marker, so two fixes whose colours
# are close for a colour-blind reader still differ in shape.
FIX_COLOURS = [c for c in OKABE_ITO if c != "#000000"]
FIX_MARKERS = ["s", "^", "h", "v", "P", "X", "<"]  # never the paper's open diamond
CONTROL_COLOURS = {"shuffle": "#000000", "reorder": "#777777"}


def palette(arms) -> tuple[dict, dict]:
    """Each arm's colour, and its line style and marker (:func:`.plots.accuracy_by_position`'s
    ``hue_styles``), by the arm's name as the figure labels it."""
    fixes = [a for a in arms if a != BASELINE and a not in CONTROLS]
    colours = {ARM_NAMES[BASELINE]: "#000000"}
    colours |= {ARM_NAMES[a]: c for a, c in CONTROL_COLOURS.items()}
    colours |= {ARM_NAMES[a]: c for a, c in zip(fixes, FIX_COLOURS)}
    styles = {ARM_NAMES[a]: {"ls": "--", "marker": "o"} for a in CONTROLS}
    styles |= {ARM_NAMES[a]: {"ls": "-", "marker": m} for a, m in zip(fixes, FIX_MARKERS)}
    return colours, styles


def gains_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`.numbers.gains` for people: one row per reader and fix, each gain with its
    interval, n and the p its verdict uses, the paper's report beside it."""
    if table.empty:
        return table
    reported = paper_gains()
    return pd.DataFrame(
        {
            "reader": table["reader"],
            "fix": table["fix"],
            "questions": table["baseline_n"].astype("Int64"),
            "over baseline (pts, 95% CI)": [
                points_ci(d, lo, hi)
                for d, lo, hi in zip(
                    table["baseline_difference"],
                    table["baseline_ci_low"],
                    table["baseline_ci_high"],
                )
            ],
            "p (Holm)": table["baseline_p"].map(format_p),
            "over shuffle (pts, 95% CI)": [
                points_ci(d, lo, hi)
                for d, lo, hi in zip(
                    table["shuffle_difference"], table["shuffle_ci_low"], table["shuffle_ci_high"]
                )
            ],
            "p vs shuffle (Holm)": table["shuffle_p"].map(format_p),
            "paper reports": table["claim"].map(reported),
        }
    )


def paper_baseline(paper: pd.DataFrame, num_documents: int) -> pd.DataFrame:
    """Lost in the Middle's GPT-3.5-Turbo at our gold positions with ``num_documents``
    documents, question at the end, as the baseline's marks (accuracy as a share)."""
    positions = [i + 1 for i in qa.position_indices(num_documents, DEPTHS)]
    mine = paper[
        (paper["model"] == PAPER_READER)
        & (paper["setting"] == "documents")
        & (paper["num_documents"] == num_documents)
        & (paper["position"].isin(positions))
    ]
    return mine.assign(accuracy=mine["accuracy"] / 100, arm=ARM_NAMES[BASELINE])[
        ["arm", "position", "accuracy"]
    ]


@book_figure
def figure(view: MitigationsResult, paper: pd.DataFrame):
    """Accuracy against where the gold stood in the baseline prompt, one panel per reader,
    one line per arm: the baseline thick with its band, the controls dashed."""
    arms = [a for a in ARM_NAMES if ARM_NAMES[a] in set(view.accuracy["arm"])]
    colours, styles = palette(arms)
    return accuracy_by_position(
        view.accuracy,
        facet="model",
        hue="arm",
        hue_order=[ARM_NAMES[a] for a in arms],
        facet_title="{}",
        xlabel="Gold position in the baseline prompt",
        main=ARM_NAMES[BASELINE],
        paper=paper if len(paper) else None,
        paper_label=f"paper: {PAPER_READER}, baseline",
        palette=colours,
        hue_styles=styles,
        height=3.6 + 0.25 * len(arms),
    )


def figure_text(view: MitigationsResult, paper: pd.DataFrame) -> FigureText:
    """:func:`figure`'s caption and alt text, from the numbers it draws."""
    cells = view.accuracy
    middle = cells["position"].median()
    base = ARM_NAMES[BASELINE]
    caption = (
        "Accuracy against the position of the gold document in the baseline prompt, one panel "
        "per reader, one line per arm: the baseline thick and black with its 95% Wilson band, "
        "the random shuffle (black) and the reorder (grey) dashed, each fix in its own colour "
        "and marker. "
        f"{n_words(cells['n'])} questions per point; an arm that "
        "re-orders the documents is drawn where the gold stood before it did."
        + (
            f" Open diamonds: Lost in the Middle's {PAPER_READER} with the question at the end "
            "at the same positions."
            if len(paper)
            else ""
        )
    )
    described = []
    for reader, part in cells.groupby("model", sort=False):
        at_middle = part[part["position"] == middle].set_index("arm")["accuracy"]
        if base not in at_middle:
            continue
        best = at_middle.drop(base).idxmax() if len(at_middle) > 1 else None
        words = f"{reader}: the baseline reads {percent_words(at_middle[base])} in the middle"
        if best is not None:
            words += f", the best arm there is {best} at {percent_words(at_middle[best])}"
        described.append(words)
    panels = cells["model"].nunique()
    alt = f"{panels} panel{'s' if panels > 1 else ''} of accuracy against gold position. "
    alt += "; ".join(described)
    return FigureText(caption, alt + ".")


def n_words(counts: pd.Series) -> str:
    """``150`` where every point has the same n, else ``120 to 150``."""
    low, high = int(counts.min()), int(counts.max())
    return f"{low}" if low == high else f"{low} to {high}"


SECTIONS = Sections()


@SECTIONS("gains")
def show_gains(view: MitigationsResult, run: Run) -> Shown:
    if view.gains.empty:
        return "No fix has rows on the same questions as the baseline yet."
    return Table(
        gains_table(view.gains),
        "Gains are in points of accuracy with the gold in the middle, paired by question; "
        "intervals are 95% bootstraps over questions; p is the two-sided exact sign-flip test, "
        "Holm-adjusted over the fixes judged on that reader (the p the verdicts use).",
        caption="Each fix's gain in the middle over the baseline and over the random shuffle "
        "of the same documents, per reader, beside what its paper reports.",
    )


@SECTIONS("figure")
def show_figure(view: MitigationsResult, run: Run) -> Shown:
    paper = paper_baseline(paper_frame(PAPER_FILE), run.params["num_documents"])
    return Figure("fig-mitigations-position", figure(view, paper), figure_text(view, paper))


@SECTIONS("example")
def show_example(view: MitigationsResult, run: Run) -> Shown:
    middle = qa.position_indices(run.params["num_documents"], (0.5,))[0]
    return Example(
        EXPERIMENT,
        "the random shuffle of the baseline prompt with the gold in the middle",
        {"mitigation": "shuffle", "arranged_from": middle},
    )
