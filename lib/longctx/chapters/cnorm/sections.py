"""The C-NORM chapter's sections: its tables formatted for the page and its figures with
captions and alt text computed from what they draw (only the page reaches them)."""

from __future__ import annotations

import json

import pandas as pd

from ...claims import SIZING_CAPTION, Estimate, sizing_table
from ...metrics import summarize
from ...models import load_tokenizer
from ...paths import repo_root, resolve
from ...plots import (
    ATTENTION_BINS,
    FigureText,
    accuracy_by_position,
    attention_profiles,
    book_figure,
    tokens_vs_accuracy,
)
from ...report import p_text, percent_words, points_ci
from ...runner import Block
from ...section import Example, Figure, PaperTable, Sections, Shown, Table, parts_of
from ...tables import load_experiment, provenance
from ...tasks import longbench_v2 as lb
from ..contract import Run
from .design import KV, QA, kv_requests
from .method import NO_FORMAT
from .numbers import CnormResult, oaa_opa, selection_summary


def qa_accuracy(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """Accuracy per method and gold position (the figure), pooled over the orderings."""
    summary = summarize(table, ["model", "method", "gold_index"])
    return summary.assign(
        position=summary["gold_index"] + 1,
        panel=f"{params['qa_documents']} documents, {len(params['qa_seeds'])} distractor orderings pooled",
    )


def with_ci(table: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """Point estimate and interval columns as one readable ``difference (pts, 95% CI)`` column."""
    return table.assign(
        **{
            "difference (pts, 95% CI)": [
                points_ci(d, lo, hi, digits)
                for d, lo, hi in zip(table["difference"], table["ci_low"], table["ci_high"])
            ],
            "sign-flip p": table["p"].map(lambda p: p_text(p).removeprefix("p = ")),
        }
    ).drop(columns=["difference", "ci_low", "ci_high", "p"])


def qa_sizing(estimates: dict) -> pd.DataFrame:
    """Questions a 95% half-width of 10 points needs for C-NORM minus baseline (the claim's
    own estimate)."""
    return sizing_table({"C-NORM minus baseline": estimates.get("cnorm-qa")}, "questions")


def oaa_opa_shown(table: pd.DataFrame) -> pd.DataFrame:
    out = table.assign(
        **{
            "OAA (95% CI)": [
                f"{a:.3f} [{lo:.2f}, {hi:.2f}]"
                for a, lo, hi in zip(table["OAA"], table["OAA_low"], table["OAA_high"])
            ],
            "OPA (95% CI)": [
                f"{a:.3f} [{lo:.2f}, {hi:.2f}]"
                for a, lo, hi in zip(table["OPA"], table["OPA_low"], table["OPA_high"])
            ],
        }
    )
    return out.drop(columns=["OAA", "OAA_low", "OAA_high", "OPA", "OPA_low", "OPA_high"]).round(3)


def figure2_accuracy(grid: pd.DataFrame, params: dict, label: str) -> pd.DataFrame:
    summary = summarize(grid[grid["model"] == label], ["model", "density", "format", "position"])
    return summary.assign(
        panel=summary["density"].map(
            {
                "low": f"low density ({params['kv_low_pairs']} x 32 hex)",
                "high": f"high density ({params['kv_high_pairs']} x 128 hex)",
            }
        )
    )


def correlation_table(corr: dict, estimate: Estimate, delimiters: pd.DataFrame) -> pd.DataFrame:
    every, uuid = corr["all"], corr["uuid_shaped"]
    half = len(delimiters) // 2
    return pd.DataFrame(
        [
            {
                "measure": "Pearson r, tokens vs OAA",
                "ours": f"{every['r']:.2f}",
                "95% CI": f"[{every['ci_low']:.2f}, {every['ci_high']:.2f}] "
                f"(bootstrap over {every['examples']} examples)",
                "other interval": f"[{corr['fisher'][0]:.2f}, {corr['fisher'][1]:.2f}] "
                f"(Fisher, over {every['formats']} delimiters)",
                "paper (Qwen2.5-1.5B, 40 pairs)": "r = -0.82",
            },
            {
                "measure": "Pearson r, UUID-shaped formats only (post hoc, plain text left out)",
                "ours": f"{uuid['r']:.2f}",
                "95% CI": f"[{uuid['ci_low']:.2f}, {uuid['ci_high']:.2f}] (bootstrap over {uuid['examples']} examples)",
                "other interval": f"{uuid['formats']} delimiters",
                "paper (Qwen2.5-1.5B, 40 pairs)": "r = -0.82",
            },
            {
                "measure": f"exploratory: {half} longest minus {half} shortest formats (pts)",
                "ours": f"{estimate.difference:+.1f}",
                "95% CI": f"[{estimate.ci_low:+.1f}, {estimate.ci_high:+.1f}] ({estimate.n} examples)",
                "other interval": f"{p_text(estimate.p)}; {estimate.detail}",
                "paper (Qwen2.5-1.5B, 40 pairs)": "negative (longer formats score lower)",
            },
        ]
    )


def qa_text(view: CnormResult) -> FigureText:
    """:func:`qa_figure`'s caption and alt text, from the lines it draws."""
    shown = qa_accuracy(view.qa, view.params)
    n_of = shown.groupby("method")["n"].min()
    cells = shown.set_index(["method", "position"])["accuracy"]
    positions = sorted(shown["position"].unique())
    base = shown[shown["method"] == "baseline"]["accuracy"]
    others = shown[shown["method"] != "baseline"]
    below = all(
        cells[m, p] < cells["baseline", p]
        for m, p in others.set_index(["method", "position"]).index
    )
    caption = (
        f"Accuracy of baseline and C-NORM prompts against the gold document's position among "
        f"{view.params['qa_documents']} NQ-Open documents, pooled over "
        f"{len(view.params['qa_seeds'])} distractor orderings of the same "
        f"{view.params['qa_questions']} questions ({n_of.get('baseline', 0)} items per point; "
        "bands resample questions); the shortest-tokenization control ran on one ordering "
        f"({n_of.get('shortest tokenization', 0)} per point). {view.label}. C-NORM rewrites a "
        f"share {view.params['cnorm_ratio']} of each passage's sentences with the delimiter "
        f"attention balance selected ({view.chosen!r})."
    )
    alt = (
        f"Line chart of accuracy against gold position ({positions[0]} to {positions[-1]}): the "
        f"baseline goes from {percent_words(base.iloc[0])} to {percent_words(base.iloc[-1])}; C-NORM and the "
        "shortest-tokenization control lie "
        + ("below it at every position" if below else "above it at some positions")
        + f", between {percent_words(others['accuracy'].min())} and {percent_words(others['accuracy'].max())}."
    )
    return FigureText(caption, alt)


def formats_text(view: CnormResult) -> FigureText:
    """:func:`formats_figure`'s caption and alt text."""
    shown = figure2_accuracy(view.grid, view.params, view.label)
    n_of = shown.groupby("density")["n"].min()
    caption = (
        "Key-value retrieval by id format, "
        f"{view.label}: accuracy against the gold pair's position at low density "
        f"({view.params['kv_low_pairs']} pairs of 32-hex ids) and high density "
        f"({view.params['kv_high_pairs']} pairs of 128-hex ids); {n_of.get('low', 0)} examples "
        f"per point at low density and {n_of.get('high', 0)} at high density, 95% Wilson bands."
    )
    alt = (
        f"Two panels of accuracy against gold position for {', '.join(sorted(shown['format'].unique()))}"
        f"; every line stays between {percent_words(shown['accuracy'].min())} and "
        f"{percent_words(shown['accuracy'].max())}."
    )
    return FigureText(caption, alt)


def verdict_correlation(view: CnormResult) -> dict:
    """The correlation the figure's title shows: the claim's own (Pearson r over delimiters
    with Fisher's interval, as the findings page judges it), or, where the claim has no
    estimate, the per-example bootstrap one."""
    est = view.estimates.get("cnorm-tokens")
    if est is None:
        return {**view.correlations["all"], "how": "its bootstrap interval over examples"}
    return {
        "r": est.difference,
        "ci_low": est.ci_low,
        "ci_high": est.ci_high,
        "how": f"Fisher's interval over the {est.n} delimiters, as the findings page judges it",
    }


def tokens_text(view: CnormResult) -> FigureText:
    """:func:`tokens_figure`'s caption and alt text."""
    r = {**view.correlations["all"], **verdict_correlation(view)}
    caption = (
        "Mean prompt tokens against accuracy for each delimiter of the sweep "
        f"({view.params['sweep_pairs']} pairs, gold at depth "
        f"{', '.join(str(p) for p in view.params['sweep_positions'])} only, so accuracy at one "
        f"position rather than OAA; the same {r['examples']} examples per delimiter), "
        f"{view.label}. Whiskers: 95% bootstrap intervals over examples. Title: Pearson r with "
        f"{r['how']}."
    )
    alt = (
        f"Scatter plot of mean prompt tokens against accuracy for {len(view.delimiters)} "
        f"delimiters, with vertical interval whiskers; r = {r['r']:.2f} "
        f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]."
    )
    return FigureText(caption, alt)


def attention_text(view: CnormResult) -> FigureText:
    """:func:`attention_figure`'s caption and alt text."""
    positions = sorted({row["gold_position"] for row in view.attention})
    formats = sorted({row["format"] for row in view.attention})
    caption = (
        "Last-layer final-token attention over the prompt (log scale), summed over each of "
        f"{ATTENTION_BINS} equal slices of the prompt's tokens, for "
        f"{' and '.join(formats)} ids, {view.label}: one key-value example with its gold pair "
        f"at each of {len(positions)} positions (an illustration, not an estimate); ABS in the "
        "legend."
    )
    alt = (
        f"{len(formats)} panels of attention mass per slice against relative token position, one line "
        f"per gold position ({', '.join(str(p) for p in positions)})."
    )
    return FigureText(caption, alt)


@book_figure
def qa_figure(view: CnormResult):
    """Accuracy of baseline, C-NORM and the shortest-tokenization control against the gold
    document's position."""
    return accuracy_by_position(
        qa_accuracy(view.qa, view.params),
        x="position",
        facet="panel",
        hue="method",
        hue_order=["baseline", "C-NORM", "shortest tokenization"],
        facet_title="{}",
        xlabel="Position of the gold document",
        title=f"C-NORM ({view.chosen!r}, p = {view.params['cnorm_ratio']}) vs baseline",
        links=view.links,
    )


@book_figure
def formats_figure(view: CnormResult, model: str):
    """Figure 2: key-value accuracy by id format against the gold pair's position."""
    return accuracy_by_position(
        figure2_accuracy(view.grid, view.params, view.label),
        x="position",
        facet="panel",
        hue="format",
        facet_title="{}",
        xlabel="Position of the gold pair",
        title=f"Key-value retrieval by id format ({model})",
    )


@book_figure
def tokens_figure(view: CnormResult, model: str):
    """Mean prompt tokens against OAA, one point per delimiter of the sweep."""
    return tokens_vs_accuracy(
        view.delimiters,
        verdict_correlation(view),
        title=f"{view.params['sweep_pairs']} pairs, {model}",
        ylabel="Accuracy, gold in the middle (%)",
    )


@book_figure
def attention_figure(view: CnormResult):
    """Figure 4: final-token attention over the prompt for UUID and plain-text ids."""
    return attention_profiles(
        view.attention, ["UUID (-)", "plain text"], pairs=view.params["attention_pairs"]
    )


def selection_tables(view: CnormResult) -> list:
    """ABS per candidate delimiter, what it selects and what that cost, and the prompt
    tokens per QA method."""
    sel = view.selection
    said = (
        f"ABS selects **{view.chosen!r}**; the shortest tokenization is **{view.shortest!r}**. Scoring "
        f"{len(view.params['cnorm_candidates'])} candidates on S = {view.params['calibration_questions']} "
        f"prompts took {sel['seconds'].sum():.0f} s of forward passes on {sel['device'].iloc[0]}."
    )
    means = view.qa.groupby("method")["prompt_tokens"].mean()
    tokens = pd.DataFrame(
        {"method": means.index, "mean prompt tokens": [f"{v:,.0f}" for v in means]}
    )
    return [
        (
            selection_shown(selection_summary(sel)),
            "The Attention Balance Score of each delimiter candidate on the calibration "
            "prompts: C-NORM takes the highest mean.",
        ),
        said,
        (tokens, "Mean prompt tokens by method."),
    ]


def candidate_label(candidate: str) -> str:
    """A delimiter candidate in words: "none" is the passages left as they are."""
    return "none (passages as they are)" if candidate == NO_FORMAT else repr(candidate)


def selection_shown(summary: pd.DataFrame) -> pd.DataFrame:
    """The selection per candidate for people: its ABS mean and sd to three decimals, mean
    prompt tokens whole, seconds of forward passes whole."""
    return pd.DataFrame(
        {
            "candidate": [candidate_label(c) for c in summary.index],
            "mean ABS": [f"{v:.3f}" for v in summary["mean_ABS"]],
            "sd ABS": [f"{v:.3f}" for v in summary["sd_ABS"]],
            "mean prompt tokens": [f"{v:,.0f}" for v in summary["prompt_tokens"]],
            "seconds": [f"{v:,.0f}" for v in summary["seconds"]],
        }
    )


def seed_tables(view: CnormResult) -> list:
    """OAA and OPA per method and distractor ordering, then their mean and sd over orderings
    (the paper's way of reporting), and the rows' provenance."""
    over_seeds = view.per_seed.groupby("method")[["OAA", "OPA", "position_sd"]].agg(["mean", "std"])
    return [
        (oaa_opa_shown(view.per_seed), "OAA and OPA per method and ordering of the distractors."),
        (
            over_seeds.round(3).reset_index(),
            "Mean (and sd) over orderings, the paper's way of reporting.",
        ),
    ]


def formats_tables(view: CnormResult, shown_chars: int = 420) -> list:
    """An example prompt with the modified (&) ids, Figure 2's OAA/OPA per density and format,
    and the rows' provenance."""
    grid_requests, _ = kv_requests(view.params)
    example = next(r.prompt for r in grid_requests if r.condition["delimiter"] == "&")[:shown_chars]
    return [
        "```text\n" + example + "\n...\n```",
        (
            oaa_opa_shown(oaa_opa(view.grid, ["model", "density", "format"])),
            "OAA and OPA per density and id format (the paper's Figure 2 setting).",
        ),
        "**Data.** " + provenance(view.grid, view.results, KV),
    ]


def sweep_table(view: CnormResult) -> tuple[pd.DataFrame, str]:
    shown = (
        oaa_opa_shown(view.delimiters.drop(columns=["best_position", "position_sd"]))
        .drop(columns=["OPA (95% CI)"])
        .rename(columns={"OAA (95% CI)": "accuracy, gold in the middle (95% CI)"})
        .assign(
            delimiter=lambda t: t["delimiter"].replace("", "none"),
            **{"prompt tokens": lambda t: [f"{v:,.0f}" for v in t["prompt tokens"]]},
        )
    )
    depths = ", ".join(f"{d:g}" for d in view.params["sweep_positions"])
    # one gold position: the sweep's accuracy is not the paper's OAA over positions
    return shown, (
        f"{view.params['sweep_pairs']} pairs, gold at depth {depths}, "
        f"{view.swept['example_id'].nunique()} examples per delimiter."
    )


def correlation_shown(view: CnormResult) -> tuple[pd.DataFrame, str]:
    """The token/accuracy correlations and the longest-minus-shortest estimate, with the note."""
    order = view.delimiters["delimiter"].tolist()
    half = len(order) // 2
    note = (
        f"Longest: {', '.join(map(repr, order[-half:]))}; shortest: {', '.join(map(repr, order[:half]))}. "
        f"Bootstrap draws where r is undefined (all formats equal): "
        f"{view.correlations['all']['undefined_share']:.0%}."
    )
    return correlation_table(view.correlations, view.contrast, view.delimiters), note


def attention_table(view: CnormResult) -> tuple[pd.DataFrame, str]:
    table = (
        pd.DataFrame(view.attention)[["format", "gold_position", "tokens", "abs", "seconds"]]
        .merge(
            view.shares.drop(columns="abs").assign(
                **{k: 100 * view.shares[k] for k in ("head", "middle", "tail")}
            ),
            on=["format", "gold_position"],
        )
        .round({"abs": 3, "seconds": 1, "head": 1, "middle": 1, "tail": 1})
        .rename(
            columns={
                "format": "id format",
                "gold_position": "gold pair's position",
                "tokens": "prompt tokens",
                "abs": "ABS",
                "seconds": "seconds to measure",
                "head": "on the first tenth (%)",
                "middle": "on the eight tenths between (%)",
                "tail": "on the last tenth (%)",
            }
        )
    )
    return (
        table,
        "ABS: the Attention Balance Score of the final token's attention (section 4.2), on "
        "[0, 1] as the paper defines it; the percentages: the share of that attention on the "
        "prompt's first tenth, the eight tenths between and its last tenth.",
    )


def bench_tables(path: str = "data/bench/attention-cpu.json") -> list:
    """The committed attention benchmark (``scripts/bench_attention.py``), or how to make it."""
    bench_path = repo_root() / path
    if not bench_path.exists():
        return [f"No benchmark file at `{path}`; run `scripts/bench_attention.py --json {path}`."]
    bench = json.loads(bench_path.read_text())
    return [
        f"`{path}`: {bench['model']} on {bench['device']} ({bench['dtype']}, {bench['cpu_threads']} threads), "
        f"longctx {bench['longctx_version']}",
        (
            bench_table(bench["rows"]),
            "Final-token attention measured our way against the eager reference: time, "
            "memory and the largest difference.",
        ),
    ]


def bench_table(rows: list[dict]) -> pd.DataFrame:
    """The attention benchmark for people: seconds to one decimal, MiB whole, ratios as
    "1.9×", the largest difference from the eager reference in one significant digit, and
    why the eager reference was skipped where it was."""

    def number(value, form: str) -> str:
        return "—" if value is None or value != value else format(value, form)

    return pd.DataFrame(
        [
            {
                "prompt tokens": f"{r['tokens']:,}",
                "ours (s)": number(r.get("fast_seconds"), ".1f"),
                "ours (MiB)": number(r.get("fast_peak_mib"), ",.0f"),
                "eager (s)": number(r.get("eager_seconds"), ".1f"),
                "eager (MiB)": number(r.get("eager_peak_mib"), ",.0f"),
                "eager ÷ ours, time": number(r.get("time_ratio"), ".1f") + "×"
                if r.get("time_ratio")
                else "—",
                "eager ÷ ours, memory": number(r.get("memory_ratio"), ".0f") + "×"
                if r.get("memory_ratio")
                else "—",
                "largest difference": number(r.get("max_abs_diff"), ".0e"),
                "note": f"eager skipped: {r['eager_skipped']}" if r.get("eager_skipped") else "",
            }
            for r in rows
        ]
    )


def longbench_tables(view: CnormResult, run: Run) -> list:
    """LongBench-v2 with and without C-NORM (the chosen delimiter) when ``longbench_data``
    names a copy: accuracy by difficulty and length; the RAG setting only when every question
    carries retrieved chunks."""
    params = view.params
    if not params["longbench_data"]:
        return [
            "`longbench_data` is empty: LongBench-v2 did not run (the data is not reachable offline)."
        ]
    source = str(params["longbench_data"])
    examples = lb.load(
        source if source.startswith("THUDM/") else resolve(source),
        limit=params["longbench_limit"] or None,
    )
    settings = ["base"] + (["rag"] if all(e.retrieved for e in examples) else [])
    reader = run.reader
    tokenizer = load_tokenizer(reader.model)
    requests = [
        r
        for setting in settings
        for method, delimiter in [
            ("baseline", None),
            ("C-NORM", None if view.chosen == "none" else view.chosen),
        ]
        for r in lb.make_requests(
            examples,
            setting=setting,
            tokenizer=tokenizer,
            max_prompt_tokens=params["longbench_max_prompt_tokens"],
            delimiter=delimiter,
            ratio=params["cnorm_ratio"],
            method=method,
        )
    ]
    run.answered("longbench", lambda: [Block("LongBench-v2", "cnorm_longbench_v2", requests)])
    table = load_experiment(view.results, "cnorm_longbench_v2", score=lb.score, task=lb.TASK)
    return [
        (
            lb.breakdown(table[table["model"] == reader.label]).round(1).reset_index(),
            "LongBench-v2 accuracy with and without C-NORM, by difficulty and length.",
        )
    ]


def stability_tables(view: CnormResult) -> list:
    """How the selection moves with the number of samples S and with the ratio p (the
    candidates in words)."""

    def named(table: pd.DataFrame, *columns: str) -> pd.DataFrame:
        return table.assign(**{c: table[c].map(candidate_label) for c in columns})

    return [
        (
            named(view.stability, "first S prompts choose", "most frequent"),
            "The delimiter chosen from the first S prompts, and how often each wins over 500 "
            "subsets of size S.",
        ),
        (
            named(view.ratio_choice, "chosen"),
            "The delimiter chosen when the candidates are formatted at another ratio p.",
        ),
    ]


SECTIONS = Sections()


@SECTIONS("figures")
def show_figures(view: CnormResult, run: Run) -> Shown:
    model = run.reader.model
    attention = Figure.when(
        view.attention,
        "fig-cnorm-attention",
        lambda: attention_figure(view),
        lambda: attention_text(view),
        "No attention rows are stored for this reader.",
    )
    return (
        Figure("fig-cnorm-qa", qa_figure(view), qa_text(view)),
        Figure("fig-cnorm-formats", formats_figure(view, model), formats_text(view)),
        Figure("fig-cnorm-tokens", tokens_figure(view, model), tokens_text(view)),
        attention,
    )


@SECTIONS("qa provenance")
def show_qa_provenance(view: CnormResult, run: Run) -> Shown:
    return "**Data.** " + provenance(view.qa, run.results, QA)


@SECTIONS("longbench")
def show_longbench(view: CnormResult, run: Run) -> Shown:
    return parts_of(longbench_tables(view, run))


@SECTIONS("answered")
def show_answered(view: CnormResult | None, run: Run) -> Shown:
    return f"{len(run.answered()):,} rows answered or read from the store."


SECTIONS.declare(
    {
        "selection": lambda view: parts_of(selection_tables(view)),
        "example": lambda view: Example(
            QA, what="C-NORM prompts on 10-document QA", where={"method": "C-NORM"}
        ),
        "qa tests": lambda view: Table(
            with_ci(view.qa_tests),
            caption="C-NORM and the shortest tokenization minus the baseline, per ordering of "
            "the distractors and pooled, paired by question.",
        ),
        "qa sizing": lambda view: Table(qa_sizing(view.estimates), caption=SIZING_CAPTION),
        "seeds": lambda view: parts_of(seed_tables(view)),
        "formats": lambda view: parts_of(formats_tables(view)),
        "paper formats": lambda view: PaperTable(
            "cnorm_reported",
            source="Figure 2",
            caption="The paper's numbers for its Figure 2 setting, as its text states them.",
        ),
        "effects": lambda view: Table(
            with_ci(view.effects),
            caption="Format effects on accuracy, paired by example and position.",
        ),
        "sweep": lambda view: Table(
            *sweep_table(view),
            caption="Accuracy with the gold pair in the middle under each swept delimiter, "
            "shortest prompt first.",
        ),
        "correlation": lambda view: Table(
            *correlation_shown(view),
            caption="Prompt length against accuracy over the delimiters: Pearson's r with two "
            "intervals, and the longest formats minus the shortest.",
        ),
        "attention": lambda view: Table(
            *attention_table(view),
            caption="Where the final token's attention falls, per id format and gold position.",
        ),
        "bench": lambda view: parts_of(bench_tables()),
        "stability": lambda view: parts_of(stability_tables(view)),
        "paper longbench": lambda view: PaperTable(
            "cnorm_longbench_v2", caption="The paper's LongBench-v2 results (its Table 1)."
        ),
    }
)
