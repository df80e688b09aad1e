"""The semantic competition chapter's sections: its tables formatted for the page and its figures with
captions and alt text computed from what they draw (only the page reaches them)."""

from __future__ import annotations

import pandas as pd

from ...claims import paper_frame, sizing_table
from ...metrics import bootstrap_interval
from ...plots import FigureText, book_figure, condition_bars, retention_curves
from ...report import percent_words
from ...runner import Block
from ...section import Example, Figure, Sections, Shown, Table, parts_of
from ..contract import Run
from . import analysis
from .design import EXPERIMENT, built_contexts
from .numbers import CompetitionResult


def retention_table(curves: pd.DataFrame) -> pd.DataFrame:
    """Per retriever and H, each metric's score M(H) (EM and inclusion in percent, F1 on
    [0, 1], as the chapter's other tables) and its retention R(H) with its 95% interval."""
    percent = curves["metric"] != "F1"
    score = [f"{100 * m:.1f}" if pc else f"{m:.3f}" for m, pc in zip(curves["M"], percent)]
    retention = [
        f"{r:.2f} [{lo:.2f}, {hi:.2f}]"
        for r, lo, hi in zip(curves["R"], curves["R_low"], curves["R_high"])
    ]
    wide = curves.assign(score=score, retention=retention).pivot(
        index=["retriever", "num_hard", "questions"],
        columns="metric",
        values=["score", "retention"],
    )
    metrics = list(dict.fromkeys(curves["metric"]))
    columns = {}
    for metric in metrics:
        columns[metric] = wide["score", metric]
        columns[f"{metric} R(H) (95% CI)"] = wide["retention", metric]
    return pd.DataFrame(columns).reset_index().rename(columns={"num_hard": "H"})


def sizing(estimates: dict) -> tuple[pd.DataFrame, str]:
    """Questions a 95% half-width of 10 points needs for far minus hard EM (the claim's own
    estimate), and its note."""
    table = sizing_table({"far minus hard EM": estimates.get("sc-far-minus-hard")}, "questions")
    return table, (
        "How n was chosen: questions a 95% interval of at most 10 points on each side needs, from the "
        "observed per-question differences; few questions change between hard and far, so the paired "
        "design needs few."
    )


def half_lives(lives: pd.DataFrame) -> pd.DataFrame:
    """K_1/2 per retriever and metric."""
    return lives.pivot_table(
        index="retriever", columns="metric", values="K_1/2", aggfunc="first"
    ).reset_index()


def far_ranks(main: pd.DataFrame) -> pd.DataFrame:
    """The ranks the far snippets were drawn from, among each question's eligible snippets."""
    far = main[main["condition"] == "far"]
    ranks = pd.Series([rk for m in far["meta"] for rk in m["far_ranks"]])
    eligible = pd.Series([m["eligible"] for m in far["meta"]])
    return pd.DataFrame(
        [
            {
                "eligible snippets per question (median)": int(eligible.median()),
                "far ranks: min": int(ranks.min()),
                "median": int(ranks.median()),
                "max": int(ranks.max()),
            }
        ]
    )


def experiments_table(built: dict, plan: list[Block]) -> tuple[pd.DataFrame, str]:
    """Per experiment: questions, questions left out, prompts; and the distinct prompts in all."""
    table = pd.DataFrame(
        [
            {
                "experiment": name,
                "questions": len(exs),
                "left out (answer not locatable or in most snippets)": len(skipped),
                "prompts": len(reqs),
            }
            for name, (reqs, exs, skipped) in built.items()
        ]
    )
    return table, f"{sum(len(b.requests) for b in plan):,} distinct prompts in all."


def paper_tables(paper: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The paper's Table 1 (pivoted), Table 2, section 4.1 (retention) and 4.4 (snippet length)."""
    return {
        "table 1": paper[paper["source"] == "Table 1"]
        .pivot_table(
            index=["reader", "condition"],
            columns="metric",
            values="value",
            aggfunc="first",
            sort=False,
        )
        .reset_index(),
        "table 2": paper[paper["source"] == "Table 2"][["reader", "metric", "value"]],
        "retention": paper[paper["source"] == "Section 4.1"][
            ["setting", "condition", "metric", "value"]
        ],
        "length": paper[paper["source"] == "Section 4.4"][
            ["setting", "condition", "metric", "value"]
        ],
    }


PAPER_RETENTION = {"BM25": "bm25", "dense BGE-small": "dense"}  # Section 4.1's retrievers


def paper_retention(paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's retention at H = 79 (Section 4.1: M(0) -> M(79), Qwen2.5-1.5B-Instruct,
    80-word snippets), one row per retriever and metric, in :func:`retention`'s columns."""
    rows = []
    for name, retriever in PAPER_RETENTION.items():
        setting = f"snippet-80 retention {name} (unfiltered)"
        for r in paper[
            (paper["setting"] == setting) & paper["metric"].isin(["EM", "F1"])
        ].itertuples():
            start, end = (float(v) for v in r.value.split("->"))
            rows.append(
                {"retriever": retriever, "metric": r.metric, "num_hard": 79, "R": end / start}
            )
    return pd.DataFrame(rows, columns=["retriever", "metric", "num_hard", "R"])


@book_figure
def figure(view: CompetitionResult, paper: pd.DataFrame):
    """Retention of EM and F1 against the hard negatives added, per retriever, with the
    paper's retention at H = 79."""
    return retention_curves(
        view.curves[view.curves["metric"].isin(["EM", "F1"])],
        paper=paper_retention(paper),
        paper_label="paper: Qwen2.5-1.5B, 80 words, H = 79",
        links=view.links,
    )


MATCHED_CONDITIONS = {
    "gold": "gold only",
    "hard": "hard: gold + 19 BM25",
    "far": "far: gold + top 4 + 15 far",
}

MATCHED_METRICS = {"em": "EM", "inclusion": "inclusion"}

PAPER_MATCHED_READER = "Qwen2.5-1.5B-Instruct"  # the paper's reader nearest ours in family


def matched_summary(main: pd.DataFrame, seed: int) -> pd.DataFrame:
    """EM and inclusion (shares, 95% bootstrap interval over questions) per condition of the
    matched control, for the figure."""
    rows = []
    for condition, label in MATCHED_CONDITIONS.items():
        part = main[main["condition"] == condition]
        for metric, name in MATCHED_METRICS.items():
            lo, hi = bootstrap_interval(
                part[metric].tolist(), seed=seed, clusters=part["example_id"].tolist()
            )
            rows.append(
                {
                    "metric": name,
                    "condition": label,
                    "accuracy": part[metric].mean(),
                    "ci_low": lo,
                    "ci_high": hi,
                    "n": part["example_id"].nunique(),
                }
            )
    return pd.DataFrame(rows)


def paper_matched(paper: pd.DataFrame) -> dict:
    """The paper's Table 1 EM and inclusion for its Qwen reader, keyed as the figure's bars."""
    t1 = paper[(paper["source"] == "Table 1") & (paper["reader"] == PAPER_MATCHED_READER)]
    metric_of = {"EM": "EM", "Incl.": "inclusion"}
    return {
        (metric_of[r.metric], MATCHED_CONDITIONS[r.condition]): float(r.value)
        for r in t1.itertuples()
        if r.metric in metric_of and r.condition in MATCHED_CONDITIONS
    }


@book_figure
def matched_figure(view: CompetitionResult, paper: pd.DataFrame, seed: int = 0):
    """The matched control (the paper's Table 1) for this page's reader: EM and inclusion
    with gold only, with 19 hard negatives and with far-rank snippets at the same length,
    beside the paper's numbers."""
    return condition_bars(
        matched_summary(view.main, seed),
        order=list(MATCHED_CONDITIONS.values()),
        hue="metric",
        xlabel="Score (%)",
        paper=paper_matched(paper),
        paper_label=f"paper: {PAPER_MATCHED_READER} (Table 1)",
    )


def figure_text(view: CompetitionResult) -> FigureText:
    """:func:`figure`'s caption and alt text, from the curves it draws."""
    curves = view.curves[view.curves["metric"].isin(["EM", "F1"])]
    asked = curves.groupby("retriever")["questions"].min()

    def below_half(retriever: str, metric: str) -> str:
        curve = curves[(curves["retriever"] == retriever) & (curves["metric"] == metric)]
        under = curve[curve["R"] < 0.5]["num_hard"]
        return f"at H = {under.min()}" if len(under) else "nowhere up to the largest H"

    largest = curves["num_hard"].max()
    em_end = curves[
        (curves["retriever"] == "bm25")
        & (curves["metric"] == "EM")
        & (curves["num_hard"] == largest)
    ]["R"]
    caption = (
        "Retention R(H) = M(H)/M(0) of EM and F1 as H hard negatives (BM25 or dense top-ranked "
        "snippets) join the gold snippet, on the questions run at every H (SQuAD v2.0; "
        + ", ".join(f"{r}: {n} questions" for r, n in asked.items())
        + f", {view.label}); bands are 95% bootstrap intervals over questions; dashed: half "
        "retention. Open diamonds: the paper's retention at H = 79 for Qwen2.5-1.5B-Instruct "
        "with 80-word snippets (Section 4.1)."
    )
    alt = (
        f"{len(asked)} panels of retention against the number of hard negatives. "
        + " ".join(
            f"With {r} ({n} questions) EM retention falls below one half {below_half(r, 'EM')} "
            f"and F1 {below_half(r, 'F1')}."
            for r, n in asked.items()
        )
        + (
            f" At H = {largest} BM25 keeps {percent_words(em_end.iloc[0])} of its EM."
            if len(em_end)
            else ""
        )
    )
    return FigureText(caption, alt)


def matched_figure_text(view: CompetitionResult, paper: pd.DataFrame, seed: int = 0) -> FigureText:
    """:func:`matched_figure`'s caption and alt text, from the bars it draws."""
    bars = matched_summary(view.main, seed)
    theirs = paper_matched(paper)
    caption = (
        f"The matched control for {view.label}: EM and inclusion with the gold snippet alone, "
        "with 19 BM25 hard negatives, and with the top 4 of them plus 15 far-rank snippets at "
        f"the same length ({int(bars['n'].min())} SQuAD v2.0 questions per bar, the same "
        "questions in every bar); whiskers: 95% bootstrap intervals over questions. Diamonds: "
        f"the paper's {PAPER_MATCHED_READER} (Table 1, SQuAD v1.1)."
    )
    parts = []
    for metric, group in bars.groupby("metric", sort=False):
        cells = group.set_index("condition")["accuracy"]
        gaps = [theirs[metric, c] - 100 * cells[c] for c in cells.index if (metric, c) in theirs]
        parts.append(
            f"{metric}: "
            + "; ".join(
                f"{c}: {percent_words(cells[c])}" for c in MATCHED_CONDITIONS.values() if c in cells
            )
            + (
                f" (the paper's is {min(gaps):+.0f} to {max(gaps):+.0f} points from ours)"
                if gaps
                else ""
            )
            + "."
        )
    return FigureText(caption, "Bar chart of the matched control. " + " ".join(parts))


def table1_tables(view: CompetitionResult, paper: dict) -> list:
    """The matched control's Table 1, ours and the paper's."""
    return [
        (
            view.table1,
            "Ours: EM, inclusion and F1 per condition, 95% bootstrap intervals over questions.",
        ),
        (paper["table 1"], "The paper's Table 1 (SQuAD v1.1, 200 questions)."),
    ]


def recovery_shown(table: pd.DataFrame) -> pd.DataFrame:
    """A far-minus-hard table for people: its formatted columns (``show`` writes p as the
    book prints it)."""
    return table.drop(columns=analysis.RECOVERY_NUMBERS)


def table2_tables(view: CompetitionResult, paper: dict) -> list:
    """Far minus hard (Table 2), ours and the paper's, and the questions each needs."""
    return [
        (
            recovery_shown(view.table2),
            "Ours: far minus hard, paired by question.",
        ),
        (paper["table 2"], "The paper's Table 2."),
        sizing(view.estimates),  # (table, how n was chosen)
    ]


def retention_tables(view: CompetitionResult, paper: dict) -> list:
    """Retention per H, the censored half-lives, and the paper's retention."""
    return [
        (
            retention_table(view.curves),
            "Each metric's score M(H) with H hard negatives (EM and inclusion in %, F1 on "
            "[0, 1]) and its retention R(H) = M(H)/M(0) with a 95% interval over questions.",
        ),
        (half_lives(view.lives), "K_1/2: the first tested H with retention at most one half."),
        (
            paper["retention"],
            "The paper (Qwen2.5-1.5B-Instruct, 80-word snippets, not answer-filtered).",
        ),
    ]


def length_tables(view: CompetitionResult, paper: dict) -> list:
    """The matched control at 50 and 80 words, ours and the paper's."""
    return [
        (view.length_levels, "Each condition at 50- and 80-word snippets, the same questions."),
        (
            recovery_shown(view.length_recovery),
            "Far minus hard at each snippet length.",
        ),
        (paper["length"], "The paper, section 4.4."),
    ]


def beyond_tables(view: CompetitionResult, params: dict) -> list:
    """The matched control at other N, and on NQ-Open when it ran."""
    out = [
        (
            recovery_shown(view.sizes).rename(columns={"tokens": "Tok. hard / far"}),
            "Far minus hard at other numbers of snippets N.",
        )
    ]
    if view.nq is not None:
        where = f"NQ-Open gold chunks, {params['snippet_words']}-word snippets, N = {params['matched_size']}"
        out += [
            (view.nq[0], f"Each condition on {where}."),
            (
                recovery_shown(view.nq[1]),
                f"Far minus hard on {where}, paired by question.",
            ),
        ]
    return out


SECTIONS = Sections()
PAPER_FILE = "semantic_competition"  # the paper's numbers: data/paper/<name>.csv


def _paper() -> dict[str, pd.DataFrame]:
    return paper_tables(paper_frame(PAPER_FILE))


@SECTIONS("experiments")
def show_experiments(view: CompetitionResult | None, run: Run) -> Shown:
    return Table(
        *experiments_table(built_contexts(run), run.planned()),
        caption="The experiments: questions asked, questions left out and prompts in each.",
    )


@SECTIONS("figures")
def show_figures(view: CompetitionResult, run: Run) -> Shown:
    paper, seed = paper_frame(PAPER_FILE), run.params["seed"]
    return (
        Figure("fig-sc-retention", figure(view, paper), figure_text(view)),
        Figure(
            "fig-sc-matched",
            matched_figure(view, paper, seed=seed),
            matched_figure_text(view, paper, seed=seed),
        ),
    )


@SECTIONS("example")
def show_example(view: CompetitionResult, run: Run) -> Shown:
    return Example(
        EXPERIMENT,
        what="the gold snippet among 19 BM25 hard negatives",
        where={"retriever": "bm25", "num_hard": 19},
    )


@SECTIONS("beyond")
def show_beyond(view: CompetitionResult, run: Run) -> Shown:
    return parts_of(beyond_tables(view, run.params))


SECTIONS.declare(
    {
        "table 1": lambda view: parts_of(table1_tables(view, _paper())),
        "table 2": lambda view: parts_of(table2_tables(view, _paper())),
        "far ranks": lambda view: Table(
            far_ranks(view.main),
            caption="The ranks the far snippets were drawn from, among each question's "
            "eligible snippets.",
        ),
        "prompt": lambda view: "```text\n" + view.example[:1400] + "\n...\n```",
        "retention": lambda view: parts_of(retention_tables(view, _paper())),
        "lengths": lambda view: parts_of(length_tables(view, _paper())),
    }
)
