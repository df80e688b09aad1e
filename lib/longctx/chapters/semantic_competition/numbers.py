"""The semantic competition chapter's numbers: what its analysis computes from the rows (scored rows,
cells, estimates' sides, the numbers the prose quotes and the statements it makes)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...claims import Estimate
from ...reader import Reader
from ...report import estimate_text, p_text
from ...results import retention_curve
from ...runner import Block, answer
from ...tables import rows_table
from ...tasks import semantic_competition as sc
from ..contract import ChapterResult, Run
from . import analysis
from .design import EXPERIMENT, HEADLINE, built_contexts


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
    part = analysis.matched_rows(_select(table, params), size or params["matched_size"])
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
        part = _with_far(
            analysis.matched_rows(_select(table, params, words), params["matched_size"])
        )
        part = part[part["example_id"].isin(subset)]
        levels.append(
            analysis.condition_summary(part, by=["condition"], seed=params["seed"]).assign(
                snippet_words=words
            )
        )
        recovery.append(
            analysis.recovery_table(part, by=[], seed=params["seed"]).assign(snippet_words=words)
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
        levels = analysis.condition_summary(
            part[part["condition"] != "gold"], by=["condition"], seed=params["seed"]
        )
        out.append(
            analysis.recovery_table(part, by=[], seed=params["seed"]).assign(
                N=n, tokens=" / ".join(str(t) for t in levels["Tok."])
            )
        )
    return pd.concat(out)


def nq(table: pd.DataFrame, params: dict) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The matched control on the NQ-Open gold chunks: levels and recovery (None when not run)."""
    if not params["nq_questions"]:
        return None
    part = analysis.matched_rows(table[table["corpus"] == "nq-open-oracle"], params["matched_size"])
    return (
        analysis.condition_summary(part, by=["condition"], seed=params["seed"]),
        analysis.recovery_table(part, by=[], seed=params["seed"]),
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
    cost = analysis.recovery_table(
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
