"""The tagging chapter's sections: its tables formatted for the page and its figures with
captions and alt text computed from what they draw (only the page reaches them)."""

from __future__ import annotations

import html

import pandas as pd

from ...paths import resolve
from ...plots import FigureText, accuracy_by_position, book_figure, paired_differences
from ...report import (
    format_p,
    n_for_half_width,
    p_text,
    pct_ci,
    percent_words,
    points_ci,
)
from ...runner import Block
from ...section import Example, Figure, Sections, Shown, Table, parts_of
from ...tagging import system_prompt
from ...tasks import tag_needles as tn
from ..contract import Run
from .design import EXPERIMENT, long_cases, requests_for
from .numbers import Haystack, TagResult, by_depth, drop_rate_text, paper_change


def gains_table(gains: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "length": r.length,
                "variant": tn.VARIANT_LABELS[r.variant],
                "ours: change (pts, 95% CI)": points_ci(r.change, r.ci_low, r.ci_high),
                "sign-flip p": p_text(r.p_sign_flip).removeprefix("p = "),
                "paper, Claude 3.5 Sonnet": paper_change(paper, r.variant, r.length),
            }
            for r in gains.itertuples()
        ]
    )


def grid_sizing(main: pd.DataFrame) -> pd.DataFrame:
    """Questions TD+TC (spaCy) minus baseline needs for ±10 points at each grid length."""
    pairs = main[main["variant"].isin(["baseline", "td_tc_spacy"])].pivot_table(
        index=["example_id", "length"], columns="variant", values="correct"
    )
    return pd.DataFrame(
        [
            {
                "comparison": "TD+TC (spaCy) minus baseline",
                "length": k,
                "questions": len(g),
                "questions for ±10 pts": n_for_half_width(g["td_tc_spacy"] - g["baseline"]),
            }
            for k, g in pairs.groupby(level="length")
        ]
    )


def system_prompts(variants) -> str:
    """Each arm's full system message, as a reader can open it under the tables: the
    baseline keeps the chat template's default one."""
    parts = []
    for v in variants:
        text = system_prompt(v)
        shown = (
            "(no system message of ours: the chat template's default one stays, for Qwen "
            '"You are Qwen, created by Alibaba Cloud. You are a helpful assistant.")'
            if text is None
            else text
        )
        parts.append(
            f'<details class="example"><summary>{html.escape(tn.VARIANT_LABELS[v])}</summary>'
            f'<pre class="example-prompt">{html.escape(shown)}</pre></details>'
        )
    return "\n".join(parts)


def hop_table(hops: pd.DataFrame) -> pd.DataFrame:
    return hops.assign(
        variant=hops["variant"].map(tn.VARIANT_LABELS),
        **{
            # in percent, as every other accuracy on the page
            "accuracy (%, 95% CI)": [
                pct_ci(a, lo, hi)
                for a, lo, hi in zip(hops["accuracy"], hops["ci_low"], hops["ci_high"])
            ]
        },
    )[["variant", "hop", "n", "accuracy (%, 95% CI)"]]


PAPER_VARIANT_LABELS = {**tn.VARIANT_LABELS, "td_tc_llm": "TD+TC (the paper's LLM tags)"}


def arm_label(arm: str) -> str:
    """A query-aware arm (``variant`` or ``variant+qac``) in words."""
    variant, _, qac = arm.partition("+")
    return tn.VARIANT_LABELS.get(variant, variant) + (", question also before" if qac else "")


def paper_table(paper: pd.DataFrame) -> pd.DataFrame:
    t1 = paper[paper["table"] == 1].pivot_table(
        index=["model", "variant"], columns="setting", values="value", sort=False
    )
    return (
        t1.reset_index()
        .assign(variant=lambda t: t["variant"].map(PAPER_VARIANT_LABELS).fillna(t["variant"]))
        .rename(columns={"drop_rate": "drop rate (%)"})
    )


def ours_table(accuracy: pd.DataFrame, variants) -> pd.DataFrame:
    ours = (accuracy.pivot_table(index="variant", columns="length", values="accuracy") * 100).round(
        1
    )
    return (
        ours.reindex([v for v in variants if v in ours.index])
        .rename(index=tn.VARIANT_LABELS)
        .reset_index()
    )


def llm_tagged_chunks(stack: Haystack, params: dict) -> pd.DataFrame:
    """The haystack chunks the LLM tagger tagged, with their tags."""
    longest = stack.longest_chunks(params)
    tags = stack.taggers.tags("llm", longest)
    return pd.DataFrame(
        [
            {"chunk": k, "starts": c.strip()[:70], "LLM tags": t}
            for k, (c, t) in enumerate(zip(longest, tags))
            if t
        ]
    )


def llm_answers(stack: Haystack, n: int = 6) -> pd.DataFrame:
    """The LLM tagger's stored answers for the first needles, with the tags read from them."""
    tagger = stack.taggers.llm
    answers = tagger.answers()

    def row(needle: str) -> dict:
        found = answers.get(needle[:80])
        if found is None:
            return {"needle": needle, "tags read": "not asked", "the tagger's answer": ""}
        return {
            "needle": needle,
            "tags read": ", ".join(tagger.tags_from(found)) or "none",
            "the tagger's answer": " · ".join(
                f"{m.upper()}: {a.strip()}" for m, a in found.items()
            ),
        }

    return pd.DataFrame([row(c.needle) for c in stack.cases[:n]])


def tagged_needle(params: dict, stack: Haystack) -> str | None:
    """A spaCy-tagged needle in its context (a few hundred characters around it)."""
    requests = requests_for(
        params, tokenizer=stack.tokenizer, taggers=stack.taggers, cases=stack.cases, text=stack.text
    )
    example = next((r for r in requests if r.condition["variant"] == "td_tc_spacy"), None)
    if example is None:
        return None
    at = example.prompt.find(next(c.needle for c in stack.cases if c.id == example.example_id))
    return example.prompt[max(0, at - 300) : at + 200]


def wrong_answers(main: pd.DataFrame) -> pd.DataFrame:
    wrong = main[main["correct"] == 0]
    return (
        wrong.groupby(["variant_label", "length"])["output"]
        .agg(lambda s: "; ".join(f"{k!r} x{v}" for k, v in s.value_counts().head(3).items()))
        .rename("top wrong answers")
        .reset_index()
        .rename(columns={"variant_label": "variant"})
    )


PAPER_MODEL = "Claude 3.5 Sonnet"  # the paper's reader its Table 1 discussion leads with


def paper_curve(paper: pd.DataFrame, lengths) -> pd.DataFrame:
    """The paper's NoLiMa+ accuracy (Table 1, as a share) at the lengths we also ran, one
    row per variant we plot, labelled as :func:`grid_accuracy` labels ours."""
    t1 = paper[
        (paper["table"] == 1)
        & (paper["model"] == PAPER_MODEL)
        & paper["variant"].isin(tn.VARIANT_LABELS)
    ]
    t1 = t1[pd.to_numeric(t1["setting"], errors="coerce").isin(lengths)]
    return pd.DataFrame(
        {
            "length": t1["setting"].astype(int),
            "accuracy": t1["value"] / 100,
            "label": t1["variant"].map(tn.VARIANT_LABELS),
        }
    )


def figure_text(view: TagResult) -> FigureText:
    """:func:`figure`'s caption and alt text, from the lines it draws."""
    shown = view.accuracy
    lengths = sorted(shown["length"].unique())
    shared = sorted(set(paper_curve(view.paper, lengths)["length"]))
    caption = (
        "Share of needle questions answered with the right character (NoLiMa's contains) "
        f"against haystack length, per prompt variant, {view.label}; "
        f"{int(shown['n'].min())} questions per point, 95% Wilson bands. TD: tag definitions "
        "in the system prompt; TD+TC: definitions plus tagged context. Open diamonds on dotted "
        f"lines: the paper's {PAPER_MODEL} on NoLiMa+ at "
        f"{' and '.join(f'{k:,}' for k in shared) or 'no shared length'} tokens (Table 1), one "
        f"colour per variant. The LLM-tagger arm's tags come from "
        f"`{view.params['tagger_model']}` (the tagging section shows what it tagged)."
    )
    lines = []
    for label, group in shown.groupby("label", sort=False):
        acc = group.sort_values("length")["accuracy"]
        lines.append(
            f"{label}: {percent_words(acc.iloc[0])} at {lengths[0]:,}, {percent_words(acc.iloc[-1])} at "
            f"{lengths[-1]:,}" + (" (zero at every length)" if (acc == 0).all() else "")
        )
    alt = (
        f"Line chart of accuracy against haystack tokens ({', '.join(f'{k:,}' for k in lengths)})"
        ". " + "; ".join(lines) + "."
    )
    return FigureText(caption, alt)


def sized_text(view: TagResult) -> FigureText:
    """:func:`sized_figure`'s caption and alt text, from the differences it draws."""
    diffs = sized_differences(view)
    questions = view.short["pairs"].shape[0] if view.short is not None else 0
    needles = view.short["gains"]["needles"].max() if view.short is not None else 0
    caption = (
        f"Each prompt variant minus the baseline on the same {questions} needle questions "
        f"({int(needles)} needles), at {view.params['short_length']:,} tokens (the paper's "
        f"shortest length) and at {view.params['long_length']:,} tokens (the headline pair); "
        f"points with 95% bootstrap intervals over needles, {view.label}. Diamonds: the "
        f"paper's change for {PAPER_MODEL} on NoLiMa+ at 250 tokens, and at 500 tokens (its "
        f"nearest length) beside our {view.params['long_length']:,}."
    )
    right = diffs["paper"].notna() & (diffs["paper"] > diffs["ci_high"])
    alt = (
        "Forest plot of changes against the baseline. "
        + "; ".join(f"{r.label}: {r.difference:+.0f} points" for r in diffs.itertuples())
        + ". The paper's changes lie to the right of "
        + (
            "every interval they sit beside."
            if right.sum() == diffs["paper"].notna().sum()
            else f"{int(right.sum())} of the {int(diffs['paper'].notna().sum())} intervals."
        )
    )
    return FigureText(caption, alt)


DEPTH_VARIANTS = ("baseline", "td_tc_spacy")  # the headline pair: five lines were noise


def headline_depths(view: TagResult) -> pd.DataFrame:
    """:func:`by_depth` for the headline pair only: what the depth figure draws."""
    depths = by_depth(view.main)
    return depths[depths["variant"].isin(DEPTH_VARIANTS)]


def depth_text(view: TagResult) -> FigureText:
    """:func:`depth_figure`'s caption and alt text."""
    depths = headline_depths(view)
    per_point = depths["units"].min()
    caption = (
        "Accuracy against the needle's depth (percent of the context before it) for the "
        f"baseline and TD+TC (spaCy), pooled over the {view.main['length'].nunique()} lengths, "
        f"{view.label}; each point is "
        f"{int(per_point)} questions x {view.main['length'].nunique()} lengths, with a 95% "
        "bootstrap interval over questions."
    )
    widest = (depths["ci_high"] - depths["ci_low"]).max()
    alt = (
        f"Line chart of accuracy against needle depth ({', '.join(str(d) for d in sorted(depths['depth'].unique()))}"
        f" percent) for the baseline and TD+TC with spaCy tags; intervals up to "
        f"{100 * widest:.0f} points wide."
    )
    return FigureText(caption, alt)


@book_figure
def figure(view: TagResult):
    """Accuracy against haystack length per prompt variant (log-scaled lengths), with the
    paper's numbers at the lengths it shares with ours."""
    lengths = sorted(view.params["lengths"])
    shown = view.accuracy
    paper = paper_curve(view.paper, lengths)
    paper = paper[paper["label"].isin(set(shown["label"]))]
    # The paper's marks of one length sit close together: spread them a little across the
    # (log) length axis, one step per variant, so each stays visible.
    order = {label: k for k, label in enumerate(dict.fromkeys(tn.VARIANT_LABELS.values()))}
    step = (paper["label"].map(order).astype(float) - (len(order) - 1) / 2).fillna(0)
    paper = paper.assign(length=paper["length"] * 1.04**step)
    fig = accuracy_by_position(
        shown,
        x="length",
        facet="model",
        hue="label",
        hue_order=list(tn.VARIANT_LABELS.values()),
        facet_title="{}",
        xlabel="Haystack tokens",
        paper=paper,
        paper_label=f"paper: {PAPER_MODEL} (NoLiMa+, Table 1), spread a little per variant",
        links=view.links,
        height=4.2,
    )
    fig.axes[0].set_xscale("log")
    fig.axes[0].set_xticks(lengths, [f"{n:,}" for n in lengths])
    fig.axes[0].minorticks_off()
    return fig


@book_figure
def depth_figure(view: TagResult):
    """Accuracy against the needle's depth for the headline pair, pooled over lengths, each
    with its band."""
    return accuracy_by_position(
        headline_depths(view),
        x="depth",
        facet="model",
        hue="label",
        hue_order=list(tn.VARIANT_LABELS.values()),
        facet_title="{} (all lengths)",
        xlabel="Needle depth (% of the context before it)",
    )


def grid_tables(view: TagResult) -> list:
    """The grid's changes against the baseline beside the paper's, and the questions each
    comparison would need for ±10 points."""
    return [
        (
            gains_table(view.gains, view.paper),
            "The paper reports 250, 500, 16K and 32K tokens; we run 250 to "
            f"{max(view.params['lengths']):,}.",
        ),
        (grid_sizing(view.main), sizing_note(view)),
    ]


def sizing_note(view: TagResult) -> str:
    """Where the grid's sizing comes from, and how many needles the sized comparisons ask
    (the project's set and the extra pairs written to its rules), counted from the sets."""
    params, text = view.params, view.stack.text
    own = len(tn.load_cases(params["needle_set"], seed=params["seed"], avoid_text=text))
    sized = len(long_cases(params, text))
    extra = (
        f" (the set plus {sized - own:,} extra pairs written to the same rules)"
        if sized > own
        else ""
    )
    return (
        f"From the observed per-question differences. The project's needle set has {own:,} "
        f"questions; the sized comparisons are asked on {sized:,}{extra}."
    )


def long_tables(view: TagResult) -> list:
    """Accuracy by hop and the sized comparison at ``long_length`` (nothing when skipped)."""
    if view.long is None:
        return []
    return [
        (
            hop_table(view.long["hops"]),
            f"{view.params['long_length']} haystack tokens; Wilson intervals.",
        ),
        (
            view.long["table"],
            "A needle's one-hop and two-hop questions share it, so the needle is the unit: "
            "accuracy is each needle's questions averaged, then averaged over needles; the "
            "change is the paired difference of those, with a bootstrap interval and exact "
            "sign-flip p over needles. The paper's changes bracket our length (it reports no "
            "length between 500 and 16K).",
        ),
    ]


def short_tables(view: TagResult) -> list:
    """The sized comparisons at ``short_length`` (nothing when skipped)."""
    if view.short is None:
        return []
    return [
        (
            view.short["table"],
            f"{view.params['short_length']} haystack tokens; each question at one depth; "
            "accuracy over needles: the variant vs the baseline, each needle's questions "
            "averaged first; discordant: questions whose answer changes. "
            "A needle's one-hop and two-hop questions share it, so the needle is the unit: "
            "bootstrap interval and exact sign-flip p over per-needle differences, and the "
            "needles a ±10-point interval needs from their observed spread. TD framing: TD's "
            "system message without the definitions (our control; see What differs). TD+TC's "
            "system message, untagged: the control arm for the tags themselves.",
        )
    ]


def paper_tables(view: TagResult) -> list:
    """The paper's Table 1 and ours in the same shape."""
    cases = view.main["example_id"].nunique()
    return [
        (
            paper_table(view.paper),
            "The paper's Table 1: accuracy (%) on NoLiMa+ per length and its drop rate.",
        ),
        (
            ours_table(view.accuracy, view.params["variants"]),
            f"Ours: accuracy (%) at each haystack length, {cases} questions per cell.",
        ),
    ]


def drops_table(view: TagResult) -> pd.DataFrame:
    """The extremum drop rate per variant with its interval in one cell (undefined: a dash)."""
    d = view.drops
    return pd.DataFrame(
        {
            "variant": d["variant"].map(tn.VARIANT_LABELS),
            "shortest (tokens)": d["short"],
            "longest (tokens)": d["long"],
            "questions": d["n"],
            "accuracy, shortest (%)": d["acc_short"].round(1),
            "accuracy, longest (%)": d["acc_long"].round(1),
            "drop rate (%, 95% CI)": [drop_rate_text(r, unit="") for _, r in d.iterrows()],
        }
    )


def needle_tables(view: TagResult, shown: int = 6) -> list:
    """The needle set by kind (in the set, asked here) and its first needle/question pairs."""
    stack = view.stack
    every = tn.load_cases(
        view.params["needle_set"], avoid_text=stack.text, seed=view.params["seed"]
    )
    kinds = (
        tn.needle_set_summary(every)
        .rename(columns={"cases": "in the set"})
        .merge(
            tn.needle_set_summary(stack.cases).rename(columns={"cases": "asked here"}), how="left"
        )
        .fillna(0)
    )
    pairs = pd.DataFrame(
        [
            {"needle": c.needle, "question": c.question, "answer": c.answer, "hop": c.hop}
            for c in stack.cases[:shown]
        ]
    )
    overlap = sum(bool(tn.literal_overlap(c)) for c in every)
    return [
        (kinds, "The needle set by kind: needles in the set and needles asked here."),
        (
            pairs,
            f"The first needle/question pairs. Pairs sharing a content word: {overlap}.",
        ),
    ]


def tagging_tables(view: TagResult) -> list:
    """Per tagger what it tagged, the LLM tagger's tagged chunks and a spaCy-tagged needle in
    its context."""
    out = [
        (
            view.stats,
            "Per tagger: haystack chunks and needles tagged, tags per tagged chunk and the "
            "commonest tags.",
        )
    ]
    if view.stack.taggers.llm is not None:
        out.append(
            (llm_tagged_chunks(view.stack, view.params), "Haystack chunks the LLM tagger tagged.")
        )
    needle = tagged_needle(view.params, view.stack)
    if needle is not None:
        out.append("A spaCy-tagged needle in its context:\n\n```text\n" + needle + "\n```")
    return out


def llm_tables(view: TagResult) -> list:
    """The LLM tagger's raw answers for the first needles (nothing without an LLM tagger)."""
    if view.stack.taggers.llm is None:
        return []
    return [(llm_answers(view.stack), "The LLM tagger's answers for the first needles.")]


def tokens_table(view: TagResult) -> tuple[pd.DataFrame, str]:
    means = view.main.groupby(["variant_label", "length"])[
        ["prompt_tokens", "context_tokens", "tag_tokens"]
    ].mean()
    return means.round(1).reset_index().rename(
        columns={"variant_label": "variant"}
    ), "Mean tokens per prompt."


def overhead_tables(view: TagResult) -> list:
    """Tag overhead against the change over the baseline, and each tagged variant against TD."""
    td = view.against_td
    against = td.assign(
        variant=td["variant"].map(tn.VARIANT_LABELS),
        change=[
            points_ci(c, lo, hi) for c, lo, hi in zip(td["change"], td["ci_low"], td["ci_high"])
        ],
    )
    return [
        (
            view.overhead,
            "Per tagged variant and length: tag tokens added to the context, and the change "
            "over the baseline.",
        ),
        (
            against[["length", "variant", "change", "p_sign_flip"]]
            .rename(columns={"change": "change vs TD (pts, 95% CI)"})
            .round(3),
            "Each tagged variant against TD alone (what the tags add to their definitions), "
            "paired over needles.",
        ),
    ]


def query_aware_tables(view: TagResult) -> list:
    """Accuracy with the question after vs before and after the context, and each arm's change."""
    if view.qac is None:
        return []
    table, gains = view.qac
    columns = {False: "question after", True: "question before and after"}
    return [
        (
            table.rename(index=tn.VARIANT_LABELS, columns=columns).round(1).reset_index(),
            "Accuracy (%).",
        ),
        (
            pd.DataFrame(
                {
                    "length": gains["length"],
                    "variant": gains["variant"].map(arm_label),
                    "questions": gains["n"],
                    "needles": gains["needles"],
                    "change (pts, 95% CI)": [
                        points_ci(c, lo, hi)
                        for c, lo, hi in zip(gains["change"], gains["ci_low"], gains["ci_high"])
                    ],
                    "p (sign-flip)": gains["p_sign_flip"].map(format_p),
                }
            ),
            "Each arm's change against the baseline with the question after the context, "
            "paired over needles.",
        ),
    ]


def novelqa_tables(view: TagResult, run: Run) -> list:
    """Our NovelQA accuracy by question complexity when ``novelqa_dir`` names a checkout, and
    the paper's Table 2. NovelQA is tagged with spaCy only, as in the paper."""
    params, stack = view.params, view.stack
    theirs = (
        view.paper[view.paper["table"] == 2]
        .pivot_table(index=["model", "variant"], columns="setting", values="value", sort=False)
        .reset_index()
        .assign(variant=lambda t: t["variant"].map(PAPER_VARIANT_LABELS).fillna(t["variant"])),
        "The paper's Table 2 (NovelQA+, accuracy %).",
    )  # a (table, caption) pair
    if not params.get("novelqa_dir"):
        return [
            "`novelqa_dir` is not set, so the NovelQA part did not run; the paper's Table 2:",
            theirs,
        ]
    questions, books = tn.read_novelqa(resolve(params["novelqa_dir"]))
    requests = tn.novelqa_requests(
        questions,
        books,
        tokenizer=stack.tokenizer,
        variants=[v for v in params["variants"] if v != "td_tc_llm"],
        max_book_tokens=params["novelqa_max_book_tokens"],
        taggers=stack.taggers,
    )
    rows = run.answered("novelqa", lambda: [Block("NovelQA", "novelqa", requests)])
    scored = pd.DataFrame(tn.score_novelqa(rows))
    ours = (
        scored.pivot_table(index="variant", columns="complexity", values="correct") * 100
    ).round(1)
    return [
        (
            ours.rename(index=tn.VARIANT_LABELS).reset_index(),
            "Ours: accuracy (%) by question complexity.",
        ),
        theirs,
    ]


SHORT_LABELS = {"td_tc_system": "TD+TC message, untagged"}  # where the figure's width is short


def sized_differences(view: TagResult) -> pd.DataFrame:
    """Each variant minus the baseline at the sized lengths (needles as the unit), with the
    paper's change for Claude 3.5 Sonnet at the same length (250) or the nearest it reports
    (500 for our long length)."""
    t1 = view.paper[(view.paper["table"] == 1) & (view.paper["model"] == PAPER_MODEL)]
    t1 = t1.set_index(["variant", "setting"])["value"]
    rows = []
    for which, length_key, paper_length in (
        ("short", "short_length", "250"),
        ("long", "long_length", "500"),
    ):
        sized = getattr(view, which)
        if sized is None:
            continue
        for v, g in sized["gains"].iterrows():
            paper = (
                t1[(v, paper_length)] - t1[("baseline", paper_length)]
                if (v, paper_length) in t1.index
                else float("nan")
            )
            rows.append(
                {
                    "label": f"{SHORT_LABELS.get(v, tn.VARIANT_LABELS[v])}, "
                    f"{view.params[length_key]:,} tokens ({int(g.needles)} needles)",
                    "difference": g.change,
                    "ci_low": g.ci_low,
                    "ci_high": g.ci_high,
                    "paper": paper,
                }
            )
    return pd.DataFrame(rows)


@book_figure
def sized_figure(view: TagResult):
    """The sized comparisons: each variant minus the baseline at the short and long lengths,
    clustered by needle, beside the paper's change."""
    return paired_differences(
        sized_differences(view),
        xlabel="Change vs the baseline (points, 95% CI over needles)",
        paper_label=f"paper: {PAPER_MODEL} (250; 500 beside our 2,000)",
    )


SECTIONS = Sections()


@SECTIONS("figures")
def show_figures(view: TagResult, run: Run) -> Shown:
    return (
        Figure("fig-tag-length", figure(view), figure_text(view)),
        Figure("fig-tag-sized", sized_figure(view), sized_text(view)),
        Figure("fig-tag-depth", depth_figure(view), depth_text(view)),
    )


@SECTIONS("example")
def show_example(view: TagResult, run: Run) -> Shown:
    return Example(
        EXPERIMENT,
        what="the baseline prompt, longest haystack",
        where={"variant": "baseline", "length": max(run.params["lengths"])},
    )


@SECTIONS("novelqa")
def show_novelqa(view: TagResult, run: Run) -> Shown:
    return parts_of(novelqa_tables(view, run))


SECTIONS.declare(
    {
        "grid": lambda view: parts_of(grid_tables(view)),
        "long": lambda view: parts_of(long_tables(view)),
        "short": lambda view: parts_of(short_tables(view)),
        "paper": lambda view: parts_of(paper_tables(view)),
        "needles": lambda view: parts_of(needle_tables(view)),
        "tagging": lambda view: parts_of(tagging_tables(view)),
        "llm": lambda view: parts_of(llm_tables(view)),
        "overhead": lambda view: parts_of(overhead_tables(view)),
        "query-aware": lambda view: parts_of(query_aware_tables(view)),
        "system prompts": lambda view: system_prompts(view.params["short_variants"]),
        "drops": lambda view: Table(
            drops_table(view),
            caption="The extremum drop rate from the shortest to the longest context per "
            "variant, paired by needle question.",
        ),
        "tokens": lambda view: (
            view.provenance,
            Table(
                *tokens_table(view),
                caption="Prompt, context and tag tokens per variant and length.",
            ),
        ),
        "wrong answers": lambda view: Table(
            wrong_answers(view.main),
            caption="The most frequent wrong answers per variant and length.",
        ),
    }
)
