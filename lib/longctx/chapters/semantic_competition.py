"""Semantic competition vs context length chapter.

Headline: the matched control at ``matched_size`` snippets on SQuAD with BM25 (gold only,
hard negatives, far-rank snippets at the same length), whose far-minus-hard difference is
the paper's central comparison, and the BM25 retention curve (the hard-negative sweep),
both on ``headline_questions`` questions (default ``num_questions``; the book runs the
paper's 200); then, on the first ``num_questions``, the retention curves of the other
retrievers, the control at other sizes and snippet lengths, and the control on NQ-Open.

:func:`build` returns every experiment's requests with the examples behind them and the
questions left out (the notebook tabulates them); :func:`blocks` cuts the same requests into
blocks, so the notebook and ``longctx reproduce`` send identical prompts. Second readers
(another model answering the matched control) are not part of a plan, which is per model:
the notebook sends them, and ``longctx reproduce --model <reader> --only matched`` runs
the same headline for any reader.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from ..claims import Estimate, by_unit, chapter_verdicts, estimable, paired_estimate, sizing_table
from ..errors import ParameterError
from ..metrics import bootstrap_interval
from ..plots import FigureText, book_figure, condition_bars, retention_curves
from ..reader import Reader
from ..report import estimate_text, p_text, percent_words
from ..requests import Request, dedupe_key, unique_requests
from ..results import point_links, provenance, retention_curve, rows_table
from ..runner import Block, answer
from ..tasks import semantic_competition as sc
from .contract import Chapter, ChapterResult, Run

EXPERIMENT = "semantic_competition"
HEADLINE = "squad, bm25"


def build(params: dict, progress: bool = False) -> dict[str, tuple[list[Request], list, list[str]]]:
    """experiment name -> (requests, examples, ids of questions left out), in priority order."""
    squad = sc.load_corpus(params["corpus"]).limit_passages(params["max_passages"] or None)
    num_questions = params["num_questions"]
    headline_questions = params.get("headline_questions") or num_questions
    if headline_questions < num_questions:
        raise ParameterError(
            f"headline_questions ({headline_questions}) must be at least num_questions "
            f"({num_questions}): the retention sweeps run on the first num_questions of them"
        )
    # The sample is prefix-stable, so the sweep's questions are the first of the headline's.
    sampled = sc.sample_questions(squad, headline_questions, params["seed"])
    questions = sampled[:num_questions]
    words = params["snippet_words"]
    index = {
        r: sc.SnippetIndex(
            squad, words, r, **({"model": params["dense_model"]} if r == "dense" else {})
        )
        for r in sorted(set(params["retrievers"]) | {"bm25"})
    }
    far_from, seed, keep, size = (
        params["far_from"],
        params["seed"],
        params["keep_hard"],
        params["matched_size"],
    )
    # The BM25 experiment (sweep and matched control) runs on all headline questions; the
    # rest on the first num_questions of them.
    head_reqs, head_examples, head_skipped = sc.experiment_requests(
        index["bm25"],
        sampled,
        sc.plan_conditions(params["hard_counts"], [size], keep),
        far_from=far_from,
        seed=seed,
        progress=progress,
    )
    plans = {HEADLINE: (head_reqs, head_examples, head_skipped)}
    for r in params["retrievers"]:
        if r != "bm25":
            plans[f"squad, {r}"] = sc.experiment_requests(
                index[r],
                questions,
                sc.plan_conditions(params["hard_counts"]),
                far_from=far_from,
                seed=seed,
            )
    subset = questions[: params["compare_questions"]]
    plans["squad, other N"] = sc.experiment_requests(
        index["bm25"],
        subset,
        sc.plan_conditions([], params["other_sizes"], keep),
        far_from=far_from,
        seed=seed,
    )
    plans[f"squad, {params['compare_snippet_words']} words"] = sc.experiment_requests(
        sc.SnippetIndex(squad, params["compare_snippet_words"], "bm25"),
        subset,
        sc.plan_conditions([], [params["matched_size"]], keep),
        far_from=far_from,
        seed=seed,
    )
    if params["nq_questions"]:
        nq = sc.load_corpus("nq-open-oracle").limit_passages(params["max_passages"] or None)
        plans["nq, bm25"] = sc.experiment_requests(
            sc.SnippetIndex(nq, words, "bm25"),
            sc.sample_questions(nq, params["nq_questions"], seed),
            sc.plan_conditions([], [params["matched_size"]], keep),
            far_from=far_from,
            seed=seed,
        )
    return plans


def blocks(params: dict, built: dict | None = None) -> list[Block]:
    """The chapter's requests (from :func:`build`, or ``built`` if the caller has it) in
    blocks: the matched control at ``matched_size`` first, then the rest of the BM25
    experiment (its retention sweep), then everything else once."""
    plans = built if built is not None else build(params)
    head_reqs, examples, _ = plans[HEADLINE]
    size = params["matched_size"]
    matched = unique_requests(
        sc.second_reader_requests(head_reqs, [e.question for e in examples], size)
    )
    keys = {dedupe_key(r) for r in matched}
    sweep = [r for r in unique_requests(head_reqs) if dedupe_key(r) not in keys]
    keys |= {dedupe_key(r) for r in sweep}
    rest = [
        r
        for r in unique_requests([r for reqs, _, _ in plans.values() for r in reqs])
        if dedupe_key(r) not in keys
    ]
    # Question by question, so a run stopped early leaves whole paired questions.
    blocks = [
        Block(
            f"matched control, {size} snippets (gold, hard, far)",
            EXPERIMENT,
            matched,
            True,
            whole_units=True,
        )
    ]
    if sweep:
        blocks.append(Block("BM25 retention sweep", EXPERIMENT, sweep, True, whole_units=True))
    if rest:
        blocks.append(Block("other retrievers, other sizes, snippet length, NQ", EXPERIMENT, rest))
    return blocks


# ---------------------------------------------------------------------------------------------
# Analysis: what the notebook shows, as numbers


def second_reader_block(params: dict, built: dict) -> Block:
    """The matched control (gold, hard, far) on the first ``second_reader_questions``, for other
    readers (Tables 1 and 2 beside the default reader)."""
    corpus = sc.load_corpus(params["corpus"]).limit_passages(params["max_passages"] or None)
    questions = sc.sample_questions(corpus, params["second_reader_questions"], params["seed"])
    return Block(
        "matched control, second readers",
        EXPERIMENT,
        sc.second_reader_requests(built[HEADLINE][0], questions, params["matched_size"]),
    )


def scored(rows: list[dict]) -> pd.DataFrame:
    """Every row with EM, F1, inclusion and its condition name (gold, hard, far)."""
    return sc.add_metrics(rows_table(rows, score=lambda row: sc.score(row)["em"]))


def _select(table: pd.DataFrame, params: dict, words: int | None = None) -> pd.DataFrame:
    corpus = sc.load_corpus(params["corpus"]).name
    return table[
        (table["corpus"] == corpus) & (table["snippet_words"] == (words or params["snippet_words"]))
    ]


def _with_far(part: pd.DataFrame) -> pd.DataFrame:
    """Only questions that reached the far condition (all, unless a gold snippet could not be cut)."""
    return part[part["example_id"].isin(set(part[part["condition"] == "far"]["example_id"]))]


def matched(
    table: pd.DataFrame, params: dict, size: int | None = None, questions=None
) -> pd.DataFrame:
    """One matched control's rows (gold only, hard and far at ``size`` snippets, default
    ``matched_size``), on ``questions`` (ids) when given."""
    part = sc.matched_rows(_select(table, params), size or params["matched_size"])
    if questions is not None:
        part = part[part["example_id"].isin(questions)]
    return _with_far(part)


def retention_rows(table: pd.DataFrame, params: dict, retriever: str) -> pd.DataFrame:
    """The rows behind one retriever's retention curve: gold only (H = 0) and each tested
    number of its hard negatives, no far-rank snippets, for the questions asked at every H."""
    sweep = _select(table, params)
    sweep = sweep[(sweep["num_far"] == 0) & sweep["num_hard"].isin(params["hard_counts"])]
    part = sweep[(sweep["retriever"] == retriever) | (sweep["condition"] == "gold")]
    # Only the questions asked at every H, as the curve's paired ratio keeps them.
    asked = part.groupby("example_id")["num_hard"].nunique()
    complete = asked[asked == part["num_hard"].nunique()].index
    return part[part["example_id"].isin(complete)].assign(retriever=retriever)


def retention(parts: dict[str, pd.DataFrame], seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Retention curves R(H) with intervals and censored half-lives, per retriever (``parts``:
    retriever -> its :func:`retention_rows`) and metric."""
    curves, lives = [], []
    for part in parts.values():
        for metric, label in [("em", "EM"), ("f1", "F1"), ("inclusion", "Incl.")]:
            curve, life = retention_curve(part, metric=metric, by=["model", "retriever"], seed=seed)
            curves.append(curve.assign(metric=label))
            lives.append(life.assign(metric=label))
    return pd.concat(curves), pd.concat(lives)


def retention_table(curves: pd.DataFrame) -> pd.DataFrame:
    """M(H) / R(H) [95% CI] per retriever, H and metric."""
    cells = [
        f"{m:.3f} / {r:.3f} [{lo:.3f}, {hi:.3f}]"
        for m, r, lo, hi in zip(curves["M"], curves["R"], curves["R_low"], curves["R_high"])
    ]
    return (
        curves.assign(cell=cells)
        .pivot(index=["retriever", "num_hard", "questions"], columns="metric", values="cell")
        .reset_index()
        .rename(columns={"num_hard": "H"})
    )


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


def example_prompt(built: dict) -> str:
    """One far-control prompt of the headline, as the reader sees it before the chat template."""
    requests, examples, _ = built[HEADLINE]
    first = examples[0].question.question_id
    return next(r.prompt for r in requests if r.condition["num_far"] and r.example_id == first)


def snippet_length(table: pd.DataFrame, params: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The matched control at ``snippet_words`` and ``compare_snippet_words`` on the first
    ``compare_questions``: the conditions' levels and the recovery at each length."""
    subset = _compare_ids(params)
    levels, recovery = [], []
    for words in [params["snippet_words"], params["compare_snippet_words"]]:
        part = _with_far(sc.matched_rows(_select(table, params, words), params["matched_size"]))
        part = part[part["example_id"].isin(subset)]
        levels.append(
            sc.condition_summary(part, by=["condition"], seed=params["seed"]).assign(
                snippet_words=words
            )
        )
        recovery.append(
            sc.recovery_table(part, by=[], seed=params["seed"]).assign(snippet_words=words)
        )
    levels = pd.concat(levels).pivot_table(
        index="condition",
        columns="snippet_words",
        values=["EM", "Incl.", "F1", "Tok."],
        aggfunc="first",
        sort=False,
    )
    return levels.reset_index(), pd.concat(recovery)


def other_sizes(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """The recovery at every matched size, with the hard and far prompts' mean tokens."""
    subset = _compare_ids(params)
    out = []
    for n in sorted({params["matched_size"], *params["other_sizes"]}):
        part = matched(table, params, n, subset)
        levels = sc.condition_summary(
            part[part["condition"] != "gold"], by=["condition"], seed=params["seed"]
        )
        out.append(
            sc.recovery_table(part, by=[], seed=params["seed"]).assign(
                N=n, tokens=" / ".join(str(t) for t in levels["Tok."])
            )
        )
    return pd.concat(out)


def nq(table: pd.DataFrame, params: dict) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The matched control on the NQ-Open gold chunks: levels and recovery (None when not run)."""
    if not params["nq_questions"]:
        return None
    part = sc.matched_rows(table[table["corpus"] == "nq-open-oracle"], params["matched_size"])
    return (
        sc.condition_summary(part, by=["condition"], seed=params["seed"]),
        sc.recovery_table(part, by=[], seed=params["seed"]),
    )


def _compare_ids(params: dict) -> set[str]:
    corpus = sc.load_corpus(params["corpus"]).limit_passages(params["max_passages"] or None)
    return {
        q.question_id
        for q in sc.sample_questions(corpus, params["compare_questions"], params["seed"])
    }


def quoted(
    estimates: dict[str, Estimate],
    table1: pd.DataFrame,
    table2: pd.DataFrame,
    readers: pd.DataFrame,
    curves: pd.DataFrame,
    lives: pd.DataFrame,
    table: pd.DataFrame,
    recovery_by_length: pd.DataFrame,
    sizes: pd.DataFrame,
    nq_view,
    params: dict,
    label: str,
    second: str | None,
) -> dict:
    """Every number the chapter's prose quotes, by glue key: the matched control (ours and
    the second reader's), the retention curves, and the length, other-N and NQ controls.
    ``readers`` holds the matched control's scored rows of every reader."""
    main = readers[readers["model"] == label]
    return {
        **_matched_quotes(table1, table2, main, label, second),
        **second_reader_quotes(readers, table2, label, second, params["seed"]),
        **_retention_quotes(curves, lives, table, params),
        **_control_quotes(recovery_by_length, sizes, nq_view, params),
        "sc-far-minus-hard": estimate_text(estimates["sc-far-minus-hard"]),
        "sc-far-minus-hard-inclusion": estimate_text(estimates["sc-far-minus-hard-inclusion"]),
    }


def _matched_quotes(
    table1: pd.DataFrame, table2: pd.DataFrame, main: pd.DataFrame, label: str, second: str | None
) -> dict:
    out: dict = {}

    def levels(reader, metric):
        rows = table1[table1["model"] == reader].set_index("condition")
        return " -> ".join(str(rows.loc[c, metric]) for c in ("gold", "hard", "far"))

    mine = table1[table1["model"] == label].set_index("condition")
    out.update(
        {
            "sc-questions": int(mine["questions"].max()),
            "sc-em-levels": levels(label, "EM"),
            "sc-f1-levels": levels(label, "F1"),
            "sc-incl-levels": levels(label, "Incl."),
            "sc-hard-tokens": f"{mine.loc['hard', 'Tok.']:,}",
            "sc-far-tokens": f"{mine.loc['far', 'Tok.']:,}",
        }
    )
    rec = table2[table2["model"] == label].set_index("metric")
    for metric, key in (("EM", "em"), ("Incl.", "incl"), ("F1", "f1")):
        out[f"sc-recovery-{key}"] = (
            f"{rec.loc[metric, 'Δ']} {rec.loc[metric, '95% CI']}, {p_text(rec.loc[metric, 'p'])}"
        )
    em = main.pivot_table(index="example_id", columns="condition", values="em")
    changed = em["far"] - em["hard"]
    out.update(
        {"sc-em-changed": int((changed != 0).sum()), "sc-em-better": int((changed > 0).sum())}
    )
    if second and (table1["model"] == second).any():
        out.update(
            {
                "sc2-questions": int(table1[table1["model"] == second]["questions"].max()),
                "sc2-em-levels": levels(second, "EM"),
                "sc2-f1-levels": levels(second, "F1"),
                "sc2-incl-levels": levels(second, "Incl."),
            }
        )
    return out


METRIC_WORDS = {"EM": "EM", "Incl.": "inclusion", "F1": "F1"}


def _than(theirs: float, mine: float) -> str:
    return "less than" if theirs < mine else "more than" if theirs > mine else "as much as"


def _listed(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(filter(None, [", ".join(words[:-1]), words[-1]]))


def second_reader_quotes(
    readers: pd.DataFrame, table2: pd.DataFrame, label: str, second: str | None, seed: int
) -> dict:
    """How the second reader's matched control compares with this reader's, in words built
    from the numbers: what hard negatives cost each in EM (hard minus gold, paired), whether
    its far-minus-hard recovery is larger or smaller per metric, and which of its recovery
    intervals exclude zero."""
    if not second or not (readers["model"] == second).any():
        return {}
    cost = sc.recovery_table(
        readers, by=["model"], control="gold", treatment="hard", seed=seed
    ).set_index(["model", "metric"])
    rec = table2.set_index(["model", "metric"])

    def cost_text(model):
        row = cost.loc[(model, "EM")]
        return f"{row['Δ']} {row['95% CI']}"

    theirs_cost, mine_cost = cost.loc[(second, "EM"), "delta"], cost.loc[(label, "EM"), "delta"]
    gap = {
        w: rec.loc[(second, m), "delta"] - rec.loc[(label, m), "delta"]
        for m, w in METRIC_WORDS.items()
    }
    larger = [w for w, d in gap.items() if d > 0]
    smaller = [w for w, d in gap.items() if d < 0]
    excluding = [
        METRIC_WORDS[m]
        for m in METRIC_WORDS
        if rec.loc[(second, m), "delta_low"] > 0 or rec.loc[(second, m), "delta_high"] < 0
    ]
    compared = "; ".join(
        part
        for part in (
            f"larger in {_listed(larger)}" if larger else "",
            f"smaller in {_listed(smaller)}" if smaller else "",
        )
        if part
    )
    return {
        "sc2-hurt": (
            f"hard negatives cost it {_than(abs(theirs_cost), abs(mine_cost))} "
            f"this page's reader: EM {cost_text(second)} points from gold only to hard, "
            f"against {cost_text(label)}"
        ),
        "sc2-recovery": "; ".join(
            f"{METRIC_WORDS[m]} {rec.loc[(second, m), 'Δ']} {rec.loc[(second, m), '95% CI']}, "
            f"{p_text(rec.loc[(second, m), 'p'])}"
            for m in METRIC_WORDS
        ),
        "sc2-recovery-compared": compared or "the same in every metric",
        "sc2-zero": (
            "every interval includes zero"
            if not excluding
            else f"the interval of {excluding[0]} excludes zero"
            if len(excluding) == 1
            else f"the intervals of {_listed(excluding)} exclude zero"
        ),
    }


def _retention_quotes(
    curves: pd.DataFrame, lives: pd.DataFrame, table: pd.DataFrame, params: dict
) -> dict:
    out: dict = {}
    r = curves.set_index(["retriever", "metric", "num_hard"])
    hs = sorted(params["hard_counts"])[1:]
    bm25 = r.loc["bm25"]

    def ret(metric, h, ci=True):
        row = bm25.loc[(metric, h)]
        return f"{row['R']:.3f}" + (f" [{row['R_low']:.3f}, {row['R_high']:.3f}]" if ci else "")

    half = lives.set_index(["retriever", "metric"])["K_1/2"]
    largest = max(hs)
    tokens = _select(table, params)
    tokens = (
        tokens[(tokens["retriever"] == "bm25") & (tokens["num_far"] == 0)]
        .groupby("num_hard")["prompt_tokens"]
        .mean()
    )
    out.update(
        {
            "sc-bm25-questions": int(bm25["questions"].max()),
            "sc-h-max": largest,
            "sc-em-half": half[("bm25", "EM")],
            "sc-incl-half": half[("bm25", "Incl.")],
            "sc-f1-half": half[("bm25", "F1")],
            "sc-em-retention": ", ".join(f"{ret('EM', h, h >= 19)} at H = {h}" for h in hs),
            "sc-incl-retention": ", ".join(f"R({h}) = {ret('Incl.', h)}" for h in hs if h >= 19),
            "sc-f1-retention": ", ".join(f"R({h}) = {ret('F1', h)}" for h in hs if h >= 19),
            "sc-em-at-max": f"{100 * bm25.loc[('EM', 0), 'M']:.1f} -> {100 * bm25.loc[('EM', largest), 'M']:.1f}",
            "sc-tokens-max": f"{tokens[largest]:,.0f}",
            "sc-tokens-39": f"{tokens[39]:,.0f}" if 39 in tokens else "—",
        }
    )
    if "dense" in params["retrievers"]:
        dense = r.loc["dense"]
        out.update(
            {
                "sc-dense-questions": int(dense["questions"].max()),
                "sc-dense-em-half": half[("dense", "EM")],
                "sc-dense-f1-half": half[("dense", "F1")],
                "sc-dense-incl-half": half[("dense", "Incl.")],
                "sc-dense-f1": ", ".join(
                    f"R_F1({h}) = {dense.loc[('F1', h), 'R']:.3f}" for h in hs if h >= 19
                ),
            }
        )
    return out


def _control_quotes(
    recovery_by_length: pd.DataFrame, sizes: pd.DataFrame, nq_view, params: dict
) -> dict:
    out: dict = {}
    lr = recovery_by_length.set_index(["snippet_words", "metric"])
    out.update(
        {
            "sc-compare-questions": params["compare_questions"],
            "sc-length": "; ".join(
                f"{lr.loc[(w, 'EM'), 'Δ']} EM / {lr.loc[(w, 'F1'), 'Δ']} F1 at {w} words"
                for w in (params["snippet_words"], params["compare_snippet_words"])
            ),
            "sc-length-min-p": f"{lr['p'].min():.2g}",
        }
    )
    other = [n for n in params["other_sizes"]]
    if other:
        sz = sizes.set_index(["N", "metric"])
        n = other[0]
        out.update(
            {
                "sc-other-n": n,
                "sc-other-hard": n - 1,
                "sc-other-kept": params["keep_hard"],
                "sc-other-far": n - 1 - params["keep_hard"],
                "sc-other-tokens": sz.loc[(n, "EM"), "tokens"],
                "sc-other": f"{sz.loc[(n, 'EM'), 'Δ']} EM, {sz.loc[(n, 'F1'), 'Δ']} F1, "
                f"{p_text(sz.loc[(n, 'F1'), 'p'])}",
            }
        )
    if nq_view is not None:
        levels_nq, rec_nq = nq_view
        nq_em = levels_nq.set_index("condition")["EM"]
        rec_nq = rec_nq.set_index("metric")
        out.update(
            {
                "sc-nq-questions": params["nq_questions"],
                "sc-nq-gold-hard": f"{nq_em['gold']} -> {nq_em['hard']}",
                "sc-nq-far": nq_em["far"],
                "sc-nq-f1": f"{rec_nq.loc['F1', 'Δ']} F1, {p_text(rec_nq.loc['F1', 'p'])}",
            }
        )
    return out


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


def statements(view: CompetitionResult) -> dict[str, bool]:
    """What the chapter's prose says in words, each as a check on the committed run."""
    est, rec = view.estimates, view.table2[view.table2["model"] == view.label].set_index("metric")
    r = view.curves.set_index(["retriever", "metric", "num_hard"])
    largest = r.index.get_level_values("num_hard").max()
    said = {
        "inclusion recovery and hard-negative loss reproduced": view.verdicts.get(
            "sc-far-minus-hard-inclusion"
        )
        == view.verdicts.get("sc-hard-hurts")
        == "reproduced",
        "EM sits on the 5% line (inconclusive)": view.verdicts.get("sc-far-minus-hard")
        == "inconclusive at this n"
        and 0.04 < est["sc-far-minus-hard"].p < 0.06,
        "small and real for inclusion and F1": rec.loc["F1", "p"] < 0.05
        and rec.loc["Incl.", "p"] < 0.05,
        "nothing is right-censored": not view.lives["censored"].any(),
        "at the largest H every retention interval lies below one half": all(
            r.loc[("bm25", m, largest), "R_high"] < 0.5 for m in ("EM", "F1", "Incl.")
        ),
        "this reader keeps about a fifth of its EM": 0.15
        < r.loc[("bm25", "EM", largest), "R"]
        < 0.25,
        "no snippet-length difference is decided": (view.length_recovery["p"] >= 0.1).all(),
    }
    if view.nq is not None:
        said["the NQ control gives nothing back"] = (
            view.nq[1].set_index("metric").loc["F1", "p"] > 0.5
        )
    return said


@dataclass(kw_only=True)
class CompetitionResult(ChapterResult):
    """The chapter's numbers: ``everything`` (every reader's scored rows) and ``table``
    (this reader's), ``readers`` and ``main`` (the matched control, every reader and this
    one), ``curves`` and ``lives`` (retention), ``table1`` and ``table2`` (the paper's
    Tables 1 and 2 for our readers), ``length_levels`` and ``length_recovery`` (snippet
    length), ``sizes`` (other matched sizes), ``nq`` (the NQ-Open control, None when not
    run), one example prompt and the figures' Data line."""

    everything: pd.DataFrame
    table: pd.DataFrame
    readers: pd.DataFrame
    main: pd.DataFrame
    curves: pd.DataFrame
    lives: pd.DataFrame
    table1: pd.DataFrame
    table2: pd.DataFrame
    length_levels: pd.DataFrame
    length_recovery: pd.DataFrame
    sizes: pd.DataFrame
    nq: tuple[pd.DataFrame, pd.DataFrame] | None
    example: str
    provenance: str


def built_contexts(run: Run) -> dict:
    """:func:`build` for this run (experiment -> requests, examples, questions left out)."""
    return run.once("built", lambda: build(run.params))


def answered(run: Run) -> list[dict]:
    """The plan's rows for this run's reader, then the matched control's first questions
    for each of ``params["second_readers"]`` (same backend, prompt mode, device and dtype);
    missing rows are generated."""

    def rows() -> list[dict]:
        own = run.answered()
        reader = run.reader
        block = second_reader_block(run.params, built_contexts(run))
        for other in [m for m in run.params["second_readers"] if m != reader.model]:
            second = Reader.of(
                other,
                reader.backend,
                prompt_mode=reader.prompt_mode,
                device=reader.device,
                dtype=reader.dtype,
            )
            own = own + answer(block, second, run.results, **run.options)
        return own

    return run.once("answered", rows)


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


def table2_tables(view: CompetitionResult, paper: dict) -> list:
    """Far minus hard (Table 2), ours and the paper's, and the questions each needs."""
    return [
        (
            view.table2.drop(columns=sc.RECOVERY_NUMBERS),
            "Ours: far minus hard, paired by question.",
        ),
        (paper["table 2"], "The paper's Table 2."),
        sizing(view.estimates),  # (table, how n was chosen)
    ]


def retention_tables(view: CompetitionResult, paper: dict) -> list:
    """Retention per H, the censored half-lives, and the paper's retention."""
    return [
        (retention_table(view.curves), "Each cell: M(H) / R(H) [95% CI]."),
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
            view.length_recovery.drop(columns=sc.RECOVERY_NUMBERS),
            "Far minus hard at each snippet length.",
        ),
        (paper["length"], "The paper, section 4.4."),
    ]


def beyond_tables(view: CompetitionResult, params: dict) -> list:
    """The matched control at other N, and on NQ-Open when it ran."""
    out = [
        (
            view.sizes.drop(columns=sc.RECOVERY_NUMBERS).rename(
                columns={"tokens": "Tok. hard / far"}
            ),
            "Far minus hard at other numbers of snippets N.",
        )
    ]
    if view.nq is not None:
        where = f"NQ-Open gold chunks, {params['snippet_words']}-word snippets, N = {params['matched_size']}"
        out += [
            (view.nq[0], f"Each condition on {where}."),
            (
                view.nq[1].drop(columns=sc.RECOVERY_NUMBERS),
                f"Far minus hard on {where}, paired by question.",
            ),
        ]
    return out


class SemanticCompetition(Chapter):
    """Semantic competition vs context length chapter."""

    name = "semantic_competition"
    order = 4  # where longctx reproduce runs its headline blocks among the chapters
    notebook = "notebooks/semantic_competition.py"
    claim_blocks = {
        "sc-far-minus-hard": ("matched control",),
        "sc-far-minus-hard-inclusion": ("matched control",),
        "sc-hard-hurts": ("matched control",),
    }
    experiments = (EXPERIMENT,)  # the stores whose rows the chapter offers for download

    def plan(self, run: Run) -> list[Block]:
        return blocks(run.params, built=built_contexts(run))

    def claims(self, run: Run) -> dict[str, Estimate]:
        """The matched control's claims on the headline questions, paired by question: far minus
        hard at ``matched_size`` snippets (exact match and answer inclusion; the far context keeps
        ``keep_hard`` hard negatives, so both contexts are as long), and hard negatives minus the
        gold snippet alone (exact match)."""
        params = run.params
        corpus = sc.load_corpus(params["corpus"]).limit_passages(params["max_passages"] or None)
        n = params.get("headline_questions") or params["num_questions"]
        keep = {q.question_id for q in sc.sample_questions(corpus, n, params["seed"])}
        rows = [r for r in run.rows(EXPERIMENT) if r["example_id"] in keep]
        size, kept = params["matched_size"], params["keep_hard"]
        where = {"corpus": corpus.name, "snippet_words": params["snippet_words"]}
        hard = {
            **where,
            "retriever": "bm25",
            "num_hard": size - 1,
            "num_far": 0,
            "num_snippets": size,
        }
        far = {
            **where,
            "retriever": "bm25",
            "num_hard": kept,
            "num_far": size - 1 - kept,
            "num_snippets": size,
        }
        gold = {**where, "num_snippets": 1, "num_hard": 0}

        def metric(name):
            return lambda row: sc.score(row)[name]

        def far_minus_hard(name):
            hard_scores = by_unit(rows, hard, metric(name))
            est = paired_estimate(
                hard_scores,
                by_unit(rows, far, metric(name)),
                side_names=(f"{size - 1} hard", f"{kept} hard + {size - 1 - kept} far-rank"),
            )
            # the premise: what the hard negatives cost on these questions, for far to give back
            gold_scores = by_unit(rows, gold, metric(name))
            both = set(gold_scores) & set(hard_scores)
            cost = (
                100 * sum(gold_scores[u] - hard_scores[u] for u in both) / len(both)
                if both
                else float("nan")
            )
            return replace(est, facts={"hard_cost": cost})

        return estimable(
            {
                "sc-far-minus-hard": lambda: far_minus_hard("em"),
                "sc-far-minus-hard-inclusion": lambda: far_minus_hard("inclusion"),
                "sc-hard-hurts": lambda: paired_estimate(
                    by_unit(rows, gold, metric("em")),
                    by_unit(rows, hard, metric("em")),
                    side_names=("gold snippet only", f"gold + {size - 1} hard"),
                ),
            }
        )

    def analyze(self, run: Run) -> CompetitionResult:
        """Everything the chapter shows from its rows and the second readers': the matched
        control's Tables 1 and 2, the retention curves, the snippet-length, other-N and NQ checks,
        the claims' estimates and verdicts, the numbers the prose quotes and its statements."""
        params, reader, results_dir = run.params, run.reader, run.results
        seed = params["seed"]
        second = next((r for r in params["second_readers"] if r != reader.model), None)
        everything = scored(answered(run))
        table = everything[everything["model"] == reader.label]
        readers = matched(everything, params)
        parts = {r: retention_rows(table, params, r) for r in params["retrievers"]}
        curves, lives = retention(parts, seed)
        behind = pd.concat(parts.values())
        links = point_links(behind, ("retriever", "num_hard"), results_dir, EXPERIMENT)
        length_levels, length_recovery = snippet_length(table, params)
        estimates = self.claims(run)
        view = CompetitionResult(
            label=reader.label,
            estimates=estimates,
            verdicts=chapter_verdicts("semantic_competition", estimates),
            links=links,
            everything=everything,
            table=table,
            readers=readers,
            main=readers[readers["model"] == reader.label],
            curves=curves,
            lives=lives,
            table1=sc.condition_summary(readers, by=["model", "condition"], seed=seed),
            table2=sc.recovery_table(readers, by=["model"], seed=seed),
            length_levels=length_levels,
            length_recovery=length_recovery,
            sizes=other_sizes(table, params),
            nq=nq(table, params),
            example=example_prompt(built_contexts(run)),
            provenance=f"**Data.** {provenance(everything, results_dir, EXPERIMENT)}",
        )
        view.quoted = quoted(
            view.estimates,
            view.table1,
            view.table2,
            view.readers,
            view.curves,
            view.lives,
            view.table,
            view.length_recovery,
            view.sizes,
            view.nq,
            params,
            reader.label,
            second,
        )
        view.said = statements(view)
        return view
