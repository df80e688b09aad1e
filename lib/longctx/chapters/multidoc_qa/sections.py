"""The multi-document QA chapter's sections: its tables formatted for the page and its figures with
captions and alt text computed from what they draw (only the page reaches them)."""

from __future__ import annotations

import pandas as pd

from ...claims import SIZING_CAPTION, Estimate, paper_frame
from ...plots import FigureText, accuracy_by_position, book_figure
from ...report import p_text, pct_ci, percent_words, points_ci
from ...section import Example, Figure, Section, Sections, Shown, Table
from ...tasks import multidoc_qa as qa
from ..contract import Run
from .design import EXPERIMENT
from .numbers import QUERY_LABELS, MultidocResult, accuracy, sizing

PAPER_READER = "GPT-3.5-Turbo"


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


SECTIONS = Sections()
PAPER_FILE = "lost_in_the_middle_qa"  # the paper's numbers: data/paper/<name>.csv


@SECTIONS("figures")
def show_figures(view: MultidocResult, run: Run) -> Shown:
    position = Figure(
        "fig-multidoc-position", figure(view, paper_frame(PAPER_FILE)), figure_text(view)
    )
    open_domain = Figure.when(
        view.od,
        "fig-open-domain",
        lambda: open_domain_figure(view),
        lambda: open_domain_text(view),
        "No open-domain rows are stored for this reader.",
    )
    return (position, open_domain)


@SECTIONS("example")
def show_example(view: MultidocResult, run: Run) -> Shown:
    return Example.largest(
        EXPERIMENT, run.params, "num_documents", "{} documents, question at the end"
    )


@SECTIONS("headline")
def show_headline(view: MultidocResult, run: Run) -> Shown:
    return Table(
        headline(view.estimates, paper_frame(PAPER_FILE), run.params),
        caption="The two headline comparisons, paired by question, beside the paper's "
        "GPT-3.5-Turbo at 20 documents.",
    )


@SECTIONS("closed book")
def show_closed_book(view: MultidocResult, run: Run) -> Shown:
    table = closed_book_table(view.base, paper_frame(PAPER_FILE))
    return Table(
        table,
        f"Ours: {view.base['n'].max()} questions.",
        caption="Closed-book (no documents) and oracle (the gold document alone): ours above "
        "the paper's Table 1.",
    )


@SECTIONS("position grid")
def show_position_grid(view: MultidocResult, run: Run) -> Shown:
    return (
        Table(
            position_grid(view.summary, view.label),
            caption="Ours: accuracy (%) [95% Wilson interval] by position.",
        ),
        Table(
            paper_grid(paper_frame(PAPER_FILE), run.params),
            caption="The paper's accuracy (%), appendix G.",
        ),
    )


@SECTIONS("query-aware")
def show_query_aware(view: MultidocResult, run: Run) -> Shown:
    if len(view.effects):
        return Table(
            query_aware_table(view),
            caption="Query-aware contextualization (the question also before the documents) "
            "against the question at the end, paired by question.",
        )
    return "Run with `query_aware = [False, True]` to compare."


@SECTIONS("open domain")
def show_open_domain(view: MultidocResult, run: Run) -> Shown:
    if not view.od:
        return Section()
    notes = (
        "Paper (section 5, from 20 to 50 documents): reader accuracy about +1.5 "
        "(GPT-3.5-Turbo) and about +1 (Claude-1.3), while Contriever's recall keeps rising."
    )
    caption = (
        "Open domain: the change in reader accuracy and retriever recall from each number of "
        "retrieved documents to the next, paired by question."
    )
    return (Table(steps_table(view.od["steps"]), notes, caption=caption), view.od_provenance)


SECTIONS.declare(
    {
        "gaps": lambda view: Table(
            gaps_table(view.gaps),
            caption="Best minus worst position per size, with the gap noise alone gives and a "
            "permutation p.",
        ),
        "sizing": lambda view: Table(sizing(view.estimates), caption=SIZING_CAPTION),
        "prompt lengths": lambda view: (
            Table(
                prompt_lengths(view.table),
                caption="Prompt tokens per setting and size (the paper's appendix F).",
            ),
            view.provenance,
        ),
    }
)
