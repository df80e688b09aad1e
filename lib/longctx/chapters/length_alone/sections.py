"""The context-length-alone chapter's sections: its tables formatted for the page and its figures with
captions and alt text computed from what they draw (only the page reaches them)."""

from __future__ import annotations

import pandas as pd

from ...claims import SIZING_CAPTION, paper_frame, sizing_table
from ...metrics import summarize
from ...plots import FigureText, book_figure, condition_bars
from ...report import (
    p_text,
    pct_ci,
    percent_words,
    points_ci,
)
from ...section import Example, Figure, Section, Sections, Shown, Table, parts_of
from ...tasks import length_alone as la
from ..contract import Run
from . import analysis
from .design import EXPERIMENT, problems_for
from .numbers import LABELS, PAPER_READERS, RULER_MODES, RULER_TASKS, VARIANTS, LengthResult

BAR_ORDER = (
    "no filler",
    "essay",
    "whitespace",
    "single-space tokens",
    "newline tokens",
    "masked",
    "whitespace, before the evidence",
)

PAPER_TABLE = {"essay": 6, "whitespace": 7, "mask": 3}  # between evidence and question


def bars(solve: pd.DataFrame) -> pd.DataFrame:
    """GSM8K accuracy per variant and filler condition (the figure's bars)."""
    return summarize(solve[solve["subtask"].str.startswith("gsm8k")], ["variant", "condition"])


def between(gsm: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Each filler kind between evidence and question minus no filler, beside the paper's drops."""
    drops = analysis.drops_from_short(gsm)
    theirs = {
        (t, m): v
        for t, m, v in paper[
            (paper["subtask"] == "gsm8k")
            & (paper["length"] == 15000)
            & (paper["metric"] == "accuracy")
        ][["table", "model", "value"]].itertuples(index=False)
    }

    def paper_cell(kind, who):
        value = theirs.get((PAPER_TABLE.get(kind), who))
        return "—" if value is None else f"{value:+.1f}"

    rows = drops[drops["placement"] == "between"]
    return pd.DataFrame(
        [
            {
                "filler": LABELS[(r.filler, "between")],
                "tokens": f"{r.filler_tokens:,}",
                "problems": r.n,
                "ours: change (pts, 95% CI)": points_ci(r.change, r.ci_low, r.ci_high),
                "sign-flip p": p_text(r.p_sign_flip).removeprefix("p = "),
                **{
                    f"paper, {label} (15K)": paper_cell(r.filler, who)
                    for who, label in PAPER_READERS.items()
                },
            }
            for r in rows.itertuples()
        ]
    )


def sizing(estimates: dict) -> pd.DataFrame:
    """Problems a 95% half-width of 10 points needs for each filler condition minus no
    filler, from the claims' own estimates."""
    return sizing_table(
        {
            f"{condition} minus no filler": estimates.get(claim)
            for condition, claim in (
                ("essay", "la-essay"),
                ("whitespace", "la-whitespace"),
                ("masked", "la-mask"),
                ("whitespace, before the evidence", "la-before"),
            )
        },
        "problems",
    )


def whitespace_units(gsm: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The three constructions of whitespace: accuracy, output length and outputs at the token
    cap; and one output of each token-level kind."""
    unit = gsm[
        gsm["filler"].isin(["whitespace", "space_tokens", "newline_tokens"])
        & (gsm["placement"] == "between")
    ]
    cap = la.budget("gsm8k", "solve")
    table = (
        unit.groupby("condition")
        .agg(
            problems=("correct", "size"),
            accuracy=("correct", "mean"),
            mean_new_tokens=("new_tokens", "mean"),
            at_token_cap=("new_tokens", lambda s: (s >= cap).mean()),
        )
        .assign(
            accuracy=lambda d: (100 * d["accuracy"]).round(1),
            mean_new_tokens=lambda d: d["mean_new_tokens"].round(0),
            at_token_cap=lambda d: (100 * d["at_token_cap"]).round(0),
        )
        .rename(
            columns={"accuracy": "accuracy (%)", "at_token_cap": "outputs at the token cap (%)"}
        )
        .reset_index()
    )
    return table, unit[unit["filler"] != "whitespace"].drop_duplicates("condition")[
        ["condition", "output"]
    ]


def no_final_step(solve: pd.DataFrame) -> pd.DataFrame:
    """GSM8K without the last step of its worked solution, per filler condition."""
    cut = solve[solve["subtask"] == "gsm8k_no_final_step"]
    table = summarize(cut, ["condition"])
    table["accuracy"] = [
        pct_ci(a, lo, hi) for a, lo, hi in zip(table["accuracy"], table["ci_low"], table["ci_high"])
    ]
    return table[["condition", "n", "accuracy"]].rename(
        columns={"accuracy": "accuracy (%, 95% Wilson)", "n": "problems"}
    )


def recitation_table(recited: pd.DataFrame) -> pd.DataFrame:
    percent = ["names", "supporting", "copies", "copies_supporting", "identifies", "answer"]
    return (
        recited.drop(columns="at_cap")
        .assign(**{c: (100 * recited[c]).round(1) for c in percent})
        .rename(
            index=RULER_TASKS,
            columns={
                "names": "name a document (%)",
                "supporting": "name one holding the answer (%)",
                "copies": "copy a line verbatim (%)",
                "copies_supporting": "copy a line of one holding the answer (%)",
                "identifies": "identify one holding the answer: the premise (%)",
                "answer": "contain a gold answer (%)",
                "tokens": "median length (tokens)",
            },
        )
        .reset_index()
        .rename(columns={"subtask": "task"})
    )


def varsum_tables(varsum: dict) -> list[tuple[pd.DataFrame, str]]:
    """VarSum's levels (accuracy, outputs at the cap, longest outputs), its drop with filler,
    and the values of asked variables the outputs state."""
    levels = (
        varsum["levels"]
        .assign(accuracy=(100 * varsum["levels"]["accuracy"]).round(1))
        .drop(columns="right")
        .rename(
            columns={
                "accuracy": "accuracy (%)",
                "at_cap": f"outputs at the {varsum['cap']}-token cap",
                "longest": "longest output (tokens)",
                "longest_correct": "longest correct output (tokens)",
            }
        )
        .reset_index()
        .rename(columns={"filler_tokens": "essay tokens"})
    )
    reads = varsum["reads"]
    reads = (
        reads.assign(share=(100 * reads["right"] / reads["stated"]).round(1))
        .reset_index()
        .rename(
            columns={
                "filler_tokens": "essay tokens",
                "stated": "values of asked variables stated",
                "right": "of which match the evidence",
                "share": "share right (%)",
            }
        )
    )
    return [
        (levels, "VarSum accuracy and output lengths at each filler length."),
        (varsum["drops"], "VarSum: the change with essay filler, paired by problem."),
        (reads, "The values of the asked variables the outputs state, and how many are right."),
    ]


def sample_outputs(solve: pd.DataFrame, params: dict, n: int = 3) -> str:
    """A few outputs of GSM8K without the final step, with no filler, beside their answers."""
    answers = {p.id: p.answer for ps in problems_for(params).values() for p in ps}
    sample = solve[
        (solve["subtask"] == "gsm8k_no_final_step") & (solve["filler_tokens"] == 0)
    ].head(n)
    return "Outputs with no filler: " + "; ".join(
        f"`{o}` (answer {answers[e]})" for o, e in zip(sample["output"], sample["example_id"])
    )


# Where each filler condition of the figure sits in the paper: its table, at 15K tokens.
PAPER_CONDITIONS = {
    ("essay", "between"): 6,
    ("whitespace", "between"): 7,
    ("mask", "between"): 3,
    ("whitespace", "before"): 8,
}


def paper_bars(paper: pd.DataFrame, reader: str) -> dict:
    """The paper's GSM8K accuracy at 15K filler tokens for ``reader`` (a model of
    :data:`PAPER_READERS`) in each filler condition it reports (its no-filler accuracy plus the
    drop: Tables 6, 7 and 3 between evidence and question, Table 8 before the evidence), keyed
    as the figure's bars: ``(variant, condition)`` -> %."""
    gsm = paper[
        (paper["subtask"] == "gsm8k") & (paper["metric"] == "accuracy") & (paper["model"] == reader)
    ]
    marks = {}
    for condition, table in PAPER_CONDITIONS.items():
        cells = gsm[(gsm["table"] == table) & (gsm["filler"] == condition[0])]
        cells = cells.set_index("length")["value"]
        if {0, 15000} <= set(cells.index):
            marks[VARIANTS["gsm8k"], LABELS[condition]] = cells[0] + cells[15000]
    return marks


@book_figure
def figure(view: LengthResult, paper: pd.DataFrame):
    """GSM8K accuracy per filler condition, the paper's design and without the final step,
    with each of the paper's readers at 15K filler tokens."""
    return condition_bars(
        bars(view.solve),
        order=BAR_ORDER,
        hue="variant",
        xlabel="GSM8K accuracy (%)",
        papers={
            f"paper: {label}, 15K filler tokens": paper_bars(paper, who)
            for who, label in PAPER_READERS.items()
        },
        links=view.links,
    )


def _devices(table: pd.DataFrame) -> str:
    if "device" not in table:
        return "device not recorded"
    pairs = table[["device", "dtype"]].drop_duplicates().itertuples(index=False)
    return "; ".join(f"{d}, {t}" for d, t in pairs)


def figure_text(view: LengthResult) -> FigureText:
    """:func:`figure`'s caption and alt text, from the bars it draws."""
    shown = bars(view.solve)
    per_bar = shown["n"].unique()
    filler = int(view.gsm["filler_tokens"].max())
    caption = (
        f"GSM8K accuracy of {view.label} with no filler and with {filler:,} filler tokens of "
        f"each kind and placement ({', '.join(str(n) for n in sorted(per_bar))} problems per "
        f"bar, the same problems in every bar; {_devices(view.solve)}). Whiskers: 95% Wilson "
        "intervals. Open markers: the paper's "
        + " and ".join(PAPER_READERS.values())
        + " with 15K filler tokens (each one's no-filler accuracy plus its drop: Tables 6, 7 "
        'and 3 between evidence and question, Table 8 before the evidence). "Not run": '
        "the arm was not generated for that variant."
    )
    parts = []
    for variant, group in shown.groupby("variant", sort=False):
        cells = group.set_index("condition")["accuracy"]
        parts.append(
            f"{variant}: "
            + "; ".join(f"{c}: {percent_words(cells[c])}" for c in BAR_ORDER if c in cells.index)
            + "."
        )
    return FigureText(caption, "Bar chart of GSM8K accuracy. " + " ".join(parts))


def ruler_figure_text(view: LengthResult) -> FigureText:
    """:func:`ruler_figure`'s caption and alt text, from the bars it draws."""
    shown = summarize(view.ruler["answers"], ["task", "condition"])
    scored = view.ruler["scored"]
    caption = (
        f"RULER QA1 and QA2 at {int(scored['length'].max()):,} tokens, {view.label}: RULER's "
        "string_match_part with its prompt over the whole context, with the paper's "
        "recite-then-answer, and with the documents "
        f"the recitation names pasted verbatim ({int(shown['n'].min())} questions per bar, the "
        "same questions in every bar of a task). Whiskers: 95% Wilson intervals."
    )
    alt = "Bar chart. " + " ".join(
        f"{task}: "
        + "; ".join(
            f"{m}: {percent_words(cells[m])}" for m in RULER_MODES.values() if m in cells.index
        )
        + "."
        for task, group in shown.groupby("task", sort=False)
        for cells in [group.set_index("condition")["accuracy"]]
    )
    return FigureText(caption, alt)


@book_figure
def ruler_figure(view: LengthResult):
    """RULER QA1 and QA2 under each arm."""
    return condition_bars(
        summarize(view.ruler["answers"], ["task", "condition"]),
        order=list(RULER_MODES.values()),
        hue="task",
        xlabel="RULER string_match_part (%)",
    )


SECTIONS = Sections()
PAPER_FILE = "length_alone"  # the paper's numbers: data/paper/<name>.csv


@SECTIONS("figures")
def show_figures(view: LengthResult, run: Run) -> Shown:
    ruler = Figure.when(
        view.ruler,
        "fig-la-ruler",
        lambda: ruler_figure(view),
        lambda: ruler_figure_text(view),
        "No RULER rows are stored for this reader.",
    )
    return (
        Figure("fig-la-gsm8k", figure(view, paper_frame(PAPER_FILE)), figure_text(view)),
        ruler,
    )


@SECTIONS("example")
def show_example(view: LengthResult, run: Run) -> Shown:
    return Example(
        EXPERIMENT,
        what="GSM8K, whitespace filler between the evidence and the question",
        where={"subtask": "gsm8k", "filler": "whitespace", "placement": "between"},
    )


@SECTIONS("premise")
def show_premise(view: LengthResult, run: Run) -> Shown:
    caption = "Recitation with the filler between evidence and question."
    return Table(view.premise, caption=caption)


@SECTIONS("whitespace units")
def show_whitespace_units(view: LengthResult, run: Run) -> Shown:
    units, outputs = whitespace_units(view.gsm)
    listed = "\n".join(
        f"* {c}: `{ascii(o[:90])}`" for c, o in zip(outputs["condition"], outputs["output"])
    )
    caption = (
        "Three ways to write whitespace filler between the evidence and the question: "
        "accuracy, output length and outputs at the token cap."
    )
    return (Table(units, caption=caption), listed)


@SECTIONS("no final step")
def show_no_final_step(view: LengthResult, run: Run) -> Shown:
    caption = "GSM8K with the worked solution's last step removed, per filler condition."
    return (
        Table(no_final_step(view.solve), caption=caption),
        sample_outputs(view.solve, run.params),
    )


@SECTIONS("ruler steps")
def show_ruler_steps(view: LengthResult, run: Run) -> Shown:
    if not view.ruler:
        return Section()
    notes = (
        "Paired by question; 95% percentile bootstrap over questions. The paper's "
        "column: baseline -> recite-then-answer at the same length."
    )
    caption = "RULER QA: each second step's change against RULER's prompt at the same length."
    return Table(view.ruler["steps_shown"], notes, caption=caption)


@SECTIONS("ruler recitation")
def show_ruler_recitation(view: LengthResult, run: Run) -> Shown:
    if not view.ruler:
        return Section()
    caption = "How n was chosen: the questions each comparison needs for ±10 points."
    return (
        Table(
            recitation_table(view.ruler["recited"]),
            caption="What the recitations hold: the share that name, copy or identify a "
            "document holding the answer.",
        ),
        Table(view.ruler["sizing"], caption=caption),
    )


SECTIONS.declare(
    {
        "between": lambda view: Table(
            between(view.gsm, paper_frame(PAPER_FILE)),
            view.between_note,
            caption="The change with filler between the evidence and the question, paired by "
            "problem, beside the paper's drops at 15,000 tokens.",
        ),
        "sizing": lambda view: Table(sizing(view.estimates), caption=SIZING_CAPTION),
        "premise state": lambda view: view.quoted["la-premise-state"],
        "placement": lambda view: Table(
            view.placement,
            caption="Whitespace before the evidence (next to the question) against between "
            "them, paired by problem.",
        ),
        "varsum": lambda view: parts_of(varsum_tables(view.varsum) if view.varsum else []),
        "ruler provenance": lambda view: view.ruler_provenance,
    }
)
