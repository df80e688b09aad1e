"""The crossing chapter's sections: its tables formatted for the page and its figures with
captions and alt text computed from what they draw (only the page reaches them)."""

from __future__ import annotations

import pandas as pd

from ...claims import (
    SIZING_CAPTION,
    sizing_table,
)
from ...plots import (
    FigureText,
    book_figure,
    effects_forest,
    interaction_plot,
    readers_forest,
    term_words,
)
from ...report import format_p, points_ci
from ...section import Example, Figure, ReplayReport, Section, Sections, Shown, Table
from ..contract import Run
from . import factorial as X
from .design import EXPERIMENT
from .numbers import CrossingResult


def forest_effects(fx: pd.DataFrame, main: pd.DataFrame) -> pd.DataFrame:
    """The contrast table with its main effects taken from :func:`main_effects` (the same
    numbers: both are the paired per-question estimate), so the figure shows exactly the
    findings page's intervals."""
    by = main.set_index("factor")
    out = fx.copy()
    for column in ("estimate", "ci_low", "ci_high", "p"):
        out.loc[out["kind"] == "main", column] = out.loc[out["kind"] == "main", "term"].map(
            by[column]
        )
    return out


def sizing(estimates: dict) -> pd.DataFrame:
    """Questions a 95% half-width of 10 points needs for each main effect, from the claims'
    own estimates (the spread of the per-question effects)."""
    return sizing_table(
        {
            claim.removeprefix("crossing-"): est
            for claim, est in estimates.items()
            if claim.startswith("crossing-")
        },
        "questions",
    )


def main_table(view: CrossingResult) -> tuple[pd.DataFrame, str]:
    """The main effects against each paper's claim, formatted, with their note."""
    main = view.main
    shown = main.assign(
        **{
            "effect (pts, 95% CI)": [
                points_ci(e, lo, hi)
                for e, lo, hi in zip(main["estimate"], main["ci_low"], main["ci_high"])
            ],
            "half-width": ((main["ci_high"] - main["ci_low"]) / 2).round(1),
            "p": main["p"].map(format_p),
            "p (Holm, 6 effects)": main["p_holm"].map(format_p),
        }
    )
    columns = [
        "factor",
        "levels",
        "paper",
        "claim",
        "effect (pts, 95% CI)",
        "p",
        "p (Holm, 6 effects)",
        "verdict",
    ]
    note = (
        f"{view.table['example_id'].nunique()} questions x {len(view.design.cells)} cells = {len(view.table)} "
        "answers; paired bootstrap over questions, exact two-sided sign-flip p, Holm-adjusted "
        "over the six main effects; verdicts by the findings page's rule (query-aware: no effect "
        "within ±5 points)."
    )
    return shown[columns].assign(factor=main["factor"].map(term_words)), note


def interactions_table(view: CrossingResult, shown: int = 6) -> tuple[pd.DataFrame, str]:
    """The ``shown`` two-way interactions with the smallest p, formatted, with their note."""
    inter = view.interactions
    table = inter.assign(
        **{
            "interaction (pts, 95% CI)": [
                points_ci(e, lo, hi)
                for e, lo, hi in zip(inter["estimate"], inter["ci_low"], inter["ci_high"])
            ]
        }
    )
    note = (
        f"The {shown} interactions with the smallest p-values of {len(inter)}: per-question "
        "contrasts, bootstrap interval over questions, exact sign-flip p and Holm's adjustment "
        f"over the {len(inter)} (one family)."
    )
    table = table.assign(p=inter["p"].map(format_p), **{"p (Holm)": inter["p_holm"].map(format_p)})
    table = table.assign(term=inter["term"].map(term_words))
    return table[["term", "interaction (pts, 95% CI)", "p", "p (Holm)"]].head(shown), note


def aliases_table(view: CrossingResult, shown: int = 6) -> pd.DataFrame:
    """What the fraction cannot separate: each low-order effect and its alias."""
    if view.design.fraction == "full":
        return pd.DataFrame([{"design": "full factorial: no aliasing"}])
    return pd.DataFrame(
        [
            {"effect": term_words(k), "aliased with": term_words(v)}
            for k, v in X.aliases(view.design).items()
        ][:shown]
    )


def logit_table(view: CrossingResult) -> pd.DataFrame:
    """The logistic GEE's main effects as log odds ratios with intervals."""
    logit = view.logit
    return (
        logit.assign(
            **{
                "log odds ratio (95% CI)": [
                    f"{e:+.2f} [{lo:+.2f}, {hi:+.2f}]"
                    for e, lo, hi in zip(logit["estimate"], logit["ci_low"], logit["ci_high"])
                ]
            }
        )[["term", "log odds ratio (95% CI)", "p"]]
        .round(3)
        .assign(term=logit["term"].map(term_words))
    )


def readers_table(view: CrossingResult) -> tuple[pd.DataFrame, str] | None:
    """Both readers' main effects and their difference, one row per factor, with the note;
    None until the second reader has answered enough questions in every cell."""
    both, labels = view.readers["both"], view.labels
    if both is None:
        return None
    wide = (
        both.assign(
            ci=[
                points_ci(e, lo, hi)
                for e, lo, hi in zip(both["estimate"], both["ci_low"], both["ci_high"])
            ]
        )
        .pivot(index="factor", columns="reader", values="ci")[[*labels, "difference"]]
        .reset_index()
    )
    wide["factor"] = wide["factor"].map(term_words)
    note = (
        f"Main effects in points (95% CI); {len(view.readers['shared'])} questions answered by both readers in "
        f"all {len(view.design.cells)} cells; difference = {labels[1]} minus {labels[0]}."
    )
    return wide, note


def readers_status(view: CrossingResult) -> str | None:
    """Why the two-reader comparison is not shown (and the command that makes it), or None."""
    this_reader, other_reader = view.labels
    make = (
        f"`longctx reproduce --chapters crossing --scale book --model {view.second_reader[0]} "
        f"--backend {view.second_reader[1]}`"
    )
    if other_reader == this_reader:
        return f"`second_reader` is this chapter's own reader (`{this_reader}`); name another one to compare."
    if view.readers["table"].empty:
        return (
            f"No stored rows of `{other_reader}` answer these {view.prompts} prompts yet, so this section "
            f"shows one reader. Make them with {make} (the store resumes) and rebuild the page."
        )
    if view.readers["both"] is None:
        return (
            f"`{other_reader}` has answered {len(view.readers['shared'])} of these questions in all "
            f"{len(view.design.cells)} cells so far (a run stores whole questions in turn); the comparison "
            f"waits for {view.readers['min_shared']}. Resume it with {make}."
        )
    return None


def readers_summary(view: CrossingResult) -> str:
    """The two readers' accuracy on their shared questions and how their effects differ,
    in words computed from the rows, so it holds for any ``second_reader``."""
    both, labels = view.readers["both"], view.labels
    if both is None:
        return (
            f"Not compared yet: `{labels[1]}` has answered too few questions in every cell (the comparison "
            f"waits for {view.readers['min_shared']})."
        )
    shared, other = view.readers["shared"], view.readers["table"]
    mine = view.table[view.table["example_id"].isin(shared)]["correct"].mean()
    theirs = other[other["example_id"].isin(shared)]["correct"].mean()
    return (
        f"On the {len(shared)} questions both readers answered in all {len(view.design.cells)} cells "
        f"({len(other)} stored `{labels[1]}` rows), accuracy over all cells is {100 * mine:.1f}% for "
        f"`{labels[0]}` and {100 * theirs:.1f}% for `{labels[1]}`.\n\n"
        + X.describe_reader_comparison(both, list(labels))
    )


def forest_text(view: CrossingResult) -> FigureText:
    """:func:`forest_figure`'s caption and alt text, from the effects it draws."""
    mains = view.fx[view.fx["kind"] == "main"]
    pairs = view.fx[view.fx["kind"] == "interaction"]
    clear = mains[(mains["ci_low"] > 0) | (mains["ci_high"] < 0)]
    questions = view.table["example_id"].nunique()
    caption = (
        f"Effects on accuracy of the {len(mains)} manipulations (main effects, blue; paired "
        f"bootstrap intervals over questions) and of their {len(pairs)} two-way interactions "
        f"(grey; per-question contrasts with the same bootstrap over questions), from "
        f"{view.label} on NQ-Open QA, {len(view.design.cells)} cells x {questions} questions. "
        "At the right: "
        "the direction each paper claims for its manipulation."
    )
    alt = (
        f"Forest plot of {len(mains)} main effects and {len(pairs)} two-way interactions in "
        "accuracy points, with intervals. "
        + (
            "Main effects whose interval excludes zero: "
            + "; ".join(
                f"{r.term} {r.estimate:+.1f} [{r.ci_low:+.1f}, {r.ci_high:+.1f}]"
                for r in clear.itertuples()
            )
            + "."
            if len(clear)
            else "No main effect's interval excludes zero."
        )
    )
    return FigureText(caption, alt)


def interaction_text(view: CrossingResult) -> FigureText:
    """:func:`interaction_figure`'s caption and alt text, from the interaction it draws."""
    a, b = view.top["term"].split(" x ")
    ci = points_ci(view.top["estimate"], view.top["ci_low"], view.top["ci_high"])
    caption = (
        f"Accuracy at the four combinations of {term_words(a)} and {term_words(b)}, the two "
        "factors with the largest "
        f"interaction ({ci} points), averaged over the other factors; 95% intervals resample "
        "whole questions."
    )
    means = X.cell_means(view.table, view.design, a, b)
    alt = (
        f"Interaction plot: accuracy for the two levels of {term_words(a)}, one line per "
        f"level of {term_words(b)}. "
        + "; ".join(
            f"{getattr(r, a)}, {getattr(r, b)}: {r.accuracy:.0f} percent"
            for r in means.itertuples()
        )
        + "."
        if {"accuracy", a, b} <= set(means.columns)
        else f"Interaction plot: accuracy for the two levels of {term_words(a)}, one line per "
        f"level of {term_words(b)}."
    )
    return FigureText(caption, alt)


def readers_text(view: CrossingResult) -> FigureText:
    """:func:`readers_figure`'s caption and alt text."""
    caption = (
        f"Main effects of {' and '.join(view.labels)} on the {len(view.readers['shared'])} "
        "questions both answered in every cell (points, 95% bootstrap intervals over "
        "questions); at the right, the direction each paper claims."
    )
    alt = (
        f"Forest plot of {view.fx[view.fx['kind'] == 'main'].shape[0]} main effects for each "
        f"of the two readers, {' and '.join(view.labels)}, side by side."
    )
    return FigureText(caption, alt)


@book_figure
def forest_figure(view: CrossingResult, model: str):
    """Main effects and two-way interactions (per-question contrasts) in one forest."""
    return effects_forest(
        forest_effects(view.fx, view.main),
        expected=view.expected,
        levels={f.name: (f.high, f.low) for f in view.design.factors},
        title=f"{model}: {len(view.design.cells)} cells x {view.table['example_id'].nunique()} "
        "questions",
    )


@book_figure
def interaction_figure(view: CrossingResult):
    """Accuracy at the four level combinations of the largest interaction's two factors."""
    a, b = view.top["term"].split(" x ")
    ci = points_ci(view.top["estimate"], view.top["ci_low"], view.top["ci_high"])
    return interaction_plot(
        X.cell_means(view.table, view.design, a, b),
        a,
        b,
        title=f"{term_words(view.top['term'])}: {ci} pts",
    )


@book_figure
def readers_figure(view: CrossingResult):
    """Both readers' main effects side by side; nothing until both are estimated."""
    if view.readers["both"] is None:
        return None
    return readers_forest(
        view.readers["both"],
        list(view.labels),
        expected=view.expected,
        levels={f.name: (f.high, f.low) for f in view.design.factors},
        title=f"Main effects of two readers, {len(view.readers['shared'])} shared questions",
    )


SECTIONS = Sections()


@SECTIONS("figures")
def show_figures(view: CrossingResult, run: Run) -> Shown:
    readers = Figure.when(
        view.readers["both"] is not None,
        "fig-crossing-readers",
        lambda: readers_figure(view),
        lambda: readers_text(view),
        "The second reader has no rows for these prompts.",
    )
    return (
        Figure("fig-crossing-forest", forest_figure(view, run.reader.model), forest_text(view)),
        Figure("fig-crossing-interaction", interaction_figure(view), interaction_text(view)),
        readers,
    )


@SECTIONS("example")
def show_example(view: CrossingResult, run: Run) -> Shown:
    return Example(
        EXPERIMENT,
        what="gold document in the middle (the other factors as each row's cell sets them)",
        where={"crossing": {"position": "middle"}},
    )


@SECTIONS("readers")
def show_readers(view: CrossingResult, run: Run) -> Shown:
    table, status = readers_table(view), readers_status(view)
    caption = "Both readers' main effects on the questions both answered in every cell."
    return Section((Table(*table, caption=caption),) if table else (status,) if status else ())


SECTIONS.declare(
    {
        "main effects": lambda view: Table(
            *main_table(view),
            caption="Main effects: accuracy at each factor's high level minus its low level, "
            "against the claim of the paper the factor comes from.",
        ),
        "sizing": lambda view: Table(sizing(view.estimates), caption=SIZING_CAPTION),
        "interactions": lambda view: Table(
            *interactions_table(view),
            caption="The two-way interactions most likely to be real: how much one factor's "
            "effect changes between the levels of another.",
        ),
        "aliases": lambda view: Table(
            aliases_table(view),
            caption="What the fraction of the design cannot tell apart: each low-order effect "
            "and the effect it is aliased with.",
        ),
        "logit": lambda view: Table(
            logit_table(view),
            caption="The main effects as log odds ratios (a logistic GEE clustered by "
            "question): a check of their signs on another scale.",
        ),
        "replay": lambda view: ReplayReport("data/bench/replay-crossing-1.5b-llamacpp.json"),
        "readers summary": lambda view: readers_summary(view),
    }
)
