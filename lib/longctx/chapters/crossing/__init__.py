"""Crossing chapter: six manipulations from the five papers, two levels each, crossed on
10-document NQ-Open QA in a 2^(6-1) half fraction (resolution VI), every question in
every cell.

Factors (low vs high level, and the paper whose claim the high level tests):

* ``position``: gold document first vs in the middle (Lost in the Middle: middle hurts);
* ``format``: passages as they are vs C-NORM with ``cnorm_delimiter`` at p = 0.5 (C-NORM:
  helps);
* ``tags``: untagged vs spaCy tags with their definitions in the system prompt (TAG: helps);
* ``distractors``: the BM25 top ranks (hard) vs a seeded draw from the bottom half of the
  ranking (far; semantic competition: far distractors hurt less than hard ones);
* ``filler``: none vs ``filler_tokens`` whitespace tokens between the documents and the
  question (context length alone: hurts);
* ``query_aware``: question after the documents only vs also before them (Lost in the
  Middle: little effect on multi-document QA).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ... import transforms as T
from ...claims import (
    Estimate,
    by_unit,
    chapter_verdicts,
    estimable,
    judge,
    paired_estimate,
    read_claims,
    sizing_table,
)
from ...errors import ParameterError
from ...metrics import holm
from ...plots import (
    FigureText,
    book_figure,
    effects_forest,
    interaction_plot,
    readers_forest,
    term_words,
)
from ...reader import model_label
from ...report import format_p, points_ci
from ...results import comparable_rows, provenance, rows_table
from ...runner import Block, all_requests
from ...tasks import multidoc_qa as qa
from ..contract import Chapter, ChapterResult, Run
from . import factorial as X

EXPERIMENT = "crossing"
FACTOR_ORDER = ("distractors", "format", "tags", "position", "filler", "query_aware")


def factors(params: dict) -> list[X.Factor]:
    k = params["num_documents"] - 1
    seed = params["seed"]
    every = {
        "position": X.Factor(
            "position",
            "first",
            "middle",
            (T.Position(1),),
            (T.Position(0.5),),
            "Lost in the Middle",
            -1,
            "the middle of the context is read worst",
        ),
        "format": X.Factor(
            "format",
            "as is",
            "C-NORM",
            (),
            (T.Normalize(params["cnorm_delimiter"], params["cnorm_ratio"], seed=seed),),
            "C-NORM",
            +1,
            "normalized passages are read better",
        ),
        "tags": X.Factor(
            "tags",
            "none",
            "spaCy + definitions",
            (),
            (T.Tags("spacy", True),),
            "TAG",
            +1,
            "tags with definitions help retrieval from long contexts",
        ),
        "distractors": X.Factor(
            "distractors",
            "hard",
            "far",
            (T.Competitors(k, "hard"),),
            (T.Competitors(k, "far", params["far_from"], seed=seed),),
            "semantic competition",
            +1,
            "far-ranked distractors hurt less than hard ones",
        ),
        "filler": X.Factor(
            "filler",
            "none",
            f"{params['filler_tokens']} whitespace",
            (),
            (T.Padding("whitespace", params["filler_tokens"], "between"),),
            "context length alone",
            -1,
            "length alone hurts",
        ),
        "query_aware": X.Factor(
            "query_aware",
            "off",
            "on",
            (),
            (T.QueryAware(),),
            "Lost in the Middle",
            0,
            "query-aware contextualization barely changes multi-document QA",
        ),
    }
    unknown = set(params["factors"]) - set(every)
    if unknown:
        raise ParameterError(
            f"unknown crossing factors {sorted(unknown)}; known: {', '.join(every)}"
        )
    if "distractors" not in params["factors"]:
        raise ParameterError("the distractors factor builds the context; keep it among the factors")
    return [every[name] for name in FACTOR_ORDER if name in params["factors"]]


def design(params: dict) -> X.Design:
    return X.two_level_design(factors(params), params["fraction"])


def examples(params: dict) -> list[T.Example]:
    """The first ``num_questions`` NQ-Open oracle questions with the ``pool_size`` BM25-ranked
    chunks of the oracle pool as candidates (far draws come from its bottom half)."""
    oracle = qa.read_oracle()
    attached = qa.attach_distractors(
        oracle[: params["num_questions"]], params["pool_size"], pool=oracle
    )
    return [qa.to_example(e) for e in attached]


def blocks(params: dict) -> list[Block]:
    d = design(params)
    reqs = X.requests(d, examples(params), order=[f.name for f in d.factors])
    # Example by example: effects are clustered by question, so a partial run must hold whole ones.
    return [
        Block(
            f"{len(d.cells)} cells x {params['num_questions']} questions",
            EXPERIMENT,
            reqs,
            True,
            whole_units=True,
        )
    ]


# ---------------------------------------------------------------------------------------------
# Analysis: what the notebook shows, as numbers


def main_effects(estimates: dict[str, Estimate], params: dict, claims: dict) -> pd.DataFrame:
    """Each factor's main effect against its paper's claim, as the findings page states it:
    the paired estimate of :func:`claims`, the verdict by the findings page's rule
    (:func:`longctx.claims.judge`, a claim of no effect by its equivalence margin) and the
    exact p Holm-adjusted over the six main effects (one family)."""
    d = design(params)
    rows = []
    for f in d.factors:
        est = estimates[f"crossing-{f.name}"]
        claim = claims.get(f"crossing-{f.name}")
        judged = judge(est, claim) if claim else None
        rows.append(
            {
                "factor": f.name,
                "levels": f"{f.high} vs {f.low}",
                "paper": f.source,
                "claim": f.claim,
                "estimate": est.difference,
                "ci_low": est.ci_low,
                "ci_high": est.ci_high,
                "p": est.p,
                "questions": est.n,
                "verdict": judged.verdict if judged else "not judged (not in the claims file)",
                "direction": judged.direction if judged else "",
            }
        )
    out = pd.DataFrame(rows)
    out.insert(out.columns.get_loc("p") + 1, "p_holm", holm(out["p"].tolist()))
    return out


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


def interactions(fx: pd.DataFrame) -> pd.DataFrame:
    """The two-way interactions (per-question contrasts), smallest p first."""
    inter = fx[fx["kind"] == "interaction"]
    return inter.sort_values("p")


def reader_view(
    table: pd.DataFrame,
    others: list[dict],
    params: dict,
    labels: tuple[str, str],
    min_shared: int = 8,
) -> dict:
    """The second reader's rows and, once it has answered ``min_shared`` questions in every
    cell, both readers' main effects and their paired difference (:func:`X.reader_effects`)."""
    this_reader, other_reader = labels
    d = design(params)
    other_table = rows_table(others, qa.score) if others else table.iloc[:0]
    other_table = other_table[other_table["model"] == other_reader]
    shared = (
        X.complete_units(table, d) & X.complete_units(other_table, d)
        if not other_table.empty
        else set()
    )
    both = None
    if other_reader != this_reader and len(shared) >= min_shared:
        both = X.reader_effects(pd.concat([table, other_table], ignore_index=True), d, list(labels))
    return {"table": other_table, "shared": shared, "both": both, "min_shared": min_shared}


def quoted(
    table: pd.DataFrame,
    main: pd.DataFrame,
    fx: pd.DataFrame,
    logit: pd.DataFrame,
    readers: dict,
    params: dict,
    labels: tuple[str, str],
) -> dict:
    """Every number the chapter's prose quotes, by glue key."""
    d = design(params)
    by = main.set_index("factor")
    inter = interactions(fx)
    top = inter.loc[inter["estimate"].abs().idxmax()]
    out = {
        "x-questions": table["example_id"].nunique(),
        "x-cells": len(d.cells),
        "x-answers": len(table),
        "x-accuracy": f"{100 * table['correct'].mean():.1f}%",
        "x-max-half-width": f"{((by['ci_high'] - by['ci_low']) / 2).max():.1f}",
        "x-interactions": len(inter),
        "x-interactions-significant": int((inter["p"] < 0.05).sum()),
        "x-interactions-holm": int((inter["p_holm"] < 0.05).sum()),
        "x-top-interaction-p": f"p = {top['p']:.2f}, Holm {top['p_holm']:.2f}",
        "x-top-interaction": top["term"],
        "x-top-interaction-ci": points_ci(top["estimate"], top["ci_low"], top["ci_high"]),
        "x-logit-agrees": "agrees"
        if (logit.set_index("term")["estimate"] * by["estimate"] > 0).all()
        else "disagrees",
        "x-filler-tokens": f"{params['filler_tokens']:,}",
    }
    for f in by.index:
        r = by.loc[f]
        out[f"x-{f}"] = points_ci(r["estimate"], r["ci_low"], r["ci_high"])
        out[f"x-{f}-verdict"] = r["verdict"]
        out[f"x-{f}-p"] = _p_and_holm(r)
    both = readers["both"]
    if both is not None:
        this_reader, other_reader = labels
        b = both.set_index(["reader", "factor"])

        def ci(reader, factor):
            row = b.loc[(reader, factor)]
            return points_ci(row["estimate"], row["ci_low"], row["ci_high"])

        other = readers["table"]
        other_fx = X.contrast_effects(other, d)
        other_inter = interactions(other_fx)
        other_top = other_inter.iloc[0]
        diff = both[both["reader"] == "difference"]
        theirs = both[both["reader"] == other_reader].set_index("factor")
        rest = theirs.drop(index=[f for f in ("position", "distractors") if f in theirs.index])
        out.update(
            {
                "x2-shared": len(readers["shared"]),
                "x2-answers": len(other),
                "x2-accuracy": f"{100 * other['correct'].mean():.1f}%",
                **{f"x2-{f}": ci(other_reader, f) for f in theirs.index},
                **{f"x2-diff-{f}": ci("difference", f) for f in theirs.index},
                "x2-diff-position-p": _p_and_holm(
                    b.loc[("difference", "position")], "over the six factors "
                ),
                "x2-distractors-p": _p_and_holm(
                    b.loc[(other_reader, "distractors")], "over the six factors "
                ),
                "x2-rest-max": f"{rest['estimate'].abs().max():.0f}",
                "x2-top-interaction": other_top["term"],
                "x2-top-interaction-ci": points_ci(
                    other_top["estimate"], other_top["ci_low"], other_top["ci_high"]
                ),
                "x2-interactions-significant": int((other_inter["p"] < 0.05).sum()),
                "x2-interactions-holm": int((other_inter["p_holm"] < 0.05).sum()),
                "x2-max-half-width": f"{((theirs['ci_high'] - theirs['ci_low']) / 2).max():.1f}",
                "x2-diff-max-half-width": f"{((diff['ci_high'] - diff['ci_low']) / 2).max():.1f}",
                "x2-diff-widest": diff.loc[
                    ((diff["ci_high"] - diff["ci_low"]) / 2).idxmax(), "factor"
                ],
            }
        )
    return out


def _p_and_holm(row, family: str = "") -> str:
    """``p = 0.015, Holm <family>0.091`` for a row with ``p`` and ``p_holm``."""
    return f"p = {format_p(row['p'])}, Holm {family}{format_p(row['p_holm'])}"


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


def statements(view: CrossingResult) -> dict[str, bool]:
    """What the chapter's prose says in words, each as a check on the committed run."""
    m = view.main.set_index("factor")
    order = m["estimate"].abs().sort_values().index
    said = {
        "position matters most, reproduced": order[-1] == "position"
        and m.loc["position", "verdict"] == "reproduced",
        "distractors come next; the interval just clears zero, the exact test disagrees": order[-2]
        == "distractors"
        and 0 < m.loc["distractors", "ci_low"] < 1
        and m.loc["distractors", "p"] >= 0.05,
        "position is the one effect that survives Holm's adjustment over the six": list(
            m.index[m["p_holm"] < 0.05]
        )
        == ["position"],
        "C-NORM, tags, filler and distractors are not reproduced": all(
            m.loc[f, "verdict"] != "reproduced" for f in ("format", "tags", "filler", "distractors")
        ),
        "query-aware is neither within the ±5-point margin nor an effect": m.loc[
            "query_aware", "verdict"
        ]
        == "inconclusive at this n",
        "C-NORM's interval ends at zero and the exact test calls no direction": abs(
            m.loc["format", "ci_high"]
        )
        < 0.5
        and m.loc["format", "p"] >= 0.05,
        "no interaction survives Holm's adjustment": bool(
            (view.interactions["p_holm"] >= 0.05).all()
        ),
        "C-NORM and tags lean the way their chapters found (down)": m.loc["format", "estimate"] < 0
        and m.loc["tags", "estimate"] < 0,
        "C-NORM costs less when filler is present (the largest interaction)": view.top["term"]
        == "format x filler"
        and view.top["estimate"] > 0,
        "the logistic fit agrees in sign": bool(
            (view.logit.set_index("term")["estimate"] * m["estimate"] > 0).all()
        ),
    }
    both = view.readers["both"]
    this_reader, other_reader = view.labels
    b = both.set_index(["reader", "factor"]) if both is not None else None
    said.update(
        {
            "position nearly stops mattering for the second reader": b is not None
            and (
                abs(b.loc[(other_reader, "position"), "estimate"])
                < abs(b.loc[(this_reader, "position"), "estimate"]) / 3
            ),
            "distractors are the second reader's largest effect": b is not None
            and b.loc[other_reader, "estimate"].abs().idxmax() == "distractors",
            "after Holm, neither the readers' position difference nor the second reader's "
            "distractor effect is decided": b is not None
            and b.loc[("difference", "position"), "p_holm"] >= 0.05
            and b.loc[(other_reader, "distractors"), "p_holm"] >= 0.05,
            "the larger reader is right more often": not view.readers["table"].empty
            and view.readers["table"]["correct"].mean() > view.table["correct"].mean(),
        }
    )
    return said


@dataclass(kw_only=True)
class CrossingResult(ChapterResult):
    """The chapter's numbers: the ``design``, ``table`` (this reader's scored rows), the
    ``prompts`` planned, ``main`` (paired main effects with verdicts), ``fx`` (main effects
    and interactions as per-question contrasts), ``logit`` (the logistic check),
    ``interactions`` and their largest (``top``), ``labels`` and ``readers`` (the two-reader
    comparison with ``second_reader``), each factor's ``expected`` sign and the figures'
    Data line."""

    design: X.Design
    table: pd.DataFrame
    second_reader: tuple[str, str]
    prompts: int
    main: pd.DataFrame
    fx: pd.DataFrame
    logit: pd.DataFrame
    interactions: pd.DataFrame
    top: pd.Series
    labels: tuple[str, str]
    readers: dict
    expected: dict
    provenance: str


def answered(run: Run) -> list[dict]:
    """Every row of the chapter's plan for this run's reader (missing ones generated)."""
    return run.answered()


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


class Crossing(Chapter):
    """Crossing chapter: six manipulations from the five papers, two levels each, crossed on"""

    name = "crossing"
    order = 7  # where longctx reproduce runs its headline blocks among the chapters
    notebook = "notebooks/crossing.py"
    claim_blocks = {
        f"crossing-{factor}": ("cells x",)
        for factor in ("position", "format", "tags", "distractors", "filler", "query_aware")
    }
    experiments = (EXPERIMENT,)  # the stores whose rows the chapter offers for download

    def plan(self, run: Run) -> list[Block]:
        return blocks(run.params)

    def claims(self, run: Run) -> dict[str, Estimate]:
        """Each factor's main effect as a paired difference, ``crossing-<factor>``: per question,
        accuracy over the cells at the factor's high level minus over those at its low level (in
        the balanced fraction this is the GEE main effect; the interval resamples questions)."""
        params = run.params
        d = design(params)
        cells = {tuple(sorted(d.levels(c).items())) for c in d.cells}
        keep = {q.example_id for q in qa.read_oracle()[: params["num_questions"]]}
        rows = [
            r
            for r in run.rows(EXPERIMENT)
            if r["example_id"] in keep
            and r["condition"].get("num_documents") == params["num_documents"]
            and tuple(sorted(r["condition"].get("crossing", {}).items())) in cells
        ]

        def main_effect(factor):
            side = {
                level: by_unit(
                    [r for r in rows if r["condition"]["crossing"][factor.name] == level],
                    {},
                    qa.score,
                )
                for level in (factor.low, factor.high)
            }
            return paired_estimate(
                side[factor.low], side[factor.high], side_names=(factor.low, factor.high)
            )

        return estimable({f"crossing-{f.name}": lambda f=f: main_effect(f) for f in d.factors})

    def analyze(self, run: Run) -> CrossingResult:
        """Everything the chapter shows, from this reader's rows and those of
        ``run.compare_with`` (model, backend; this reader when none) stored for the same
        prompts: the paired main effects with their verdicts, the interactions as per-question
        contrasts, the logistic check, the two-reader comparison, the numbers the prose quotes
        (``quoted``) and the statements it makes (``said``)."""
        params, reader, results_dir = run.params, run.reader, run.results
        second_reader = run.compare_with or (reader.model, reader.backend.name)
        rows, requests = answered(run), all_requests(run.planned())
        d = design(params)
        table = rows_table(rows, qa.score)
        estimates = self.claims(run)
        fx = X.contrast_effects(table, d)
        found = interactions(fx)
        labels = (reader.label, model_label(*second_reader))
        others = comparable_rows(
            results_dir, EXPERIMENT, requests, exclude=reader.results_folder(results_dir)
        )
        readers = reader_view(table, others, params, labels)
        view = CrossingResult(
            label=reader.label,
            estimates=estimates,
            verdicts=chapter_verdicts("crossing", estimates),
            design=d,
            table=table,
            second_reader=second_reader,
            prompts=len(requests),
            main=main_effects(estimates, params, {c.id: c for c in read_claims()}),
            fx=fx,
            logit=X.effects(table, d, family="logistic", interactions=False),
            interactions=found,
            top=found.loc[found["estimate"].abs().idxmax()],
            labels=labels,
            readers=readers,
            expected={f.name: f.expected for f in d.factors},
            provenance="**Data.** "
            + provenance(
                pd.concat([table, readers["table"]], ignore_index=True), results_dir, EXPERIMENT
            ),
            consistent=len(rows) == len(requests) == len({r["key"] for r in rows}),
        )
        view.quoted = quoted(
            view.table, view.main, view.fx, view.logit, view.readers, params, view.labels
        )
        view.said = statements(view)
        return view
