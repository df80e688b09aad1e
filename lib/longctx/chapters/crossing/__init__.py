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

from pathlib import Path

import pandas as pd

from ... import transforms as T
from ...claims import Estimate, by_unit, estimable, paired_estimate, verdict
from ...errors import ParameterError
from ...reader import Reader
from ...report import n_for_half_width, p_text
from ...results import rows_table
from ...runner import Block
from ...tasks import multidoc_qa as qa
from . import factorial as X

ORDER = 7  # where longctx reproduce runs its headline blocks among the chapters
NOTEBOOK = "notebooks/crossing.py"
EXPERIMENT = "crossing"
FACTOR_ORDER = ("distractors", "format", "tags", "position", "filler", "query_aware")


def factors(params: dict) -> list[X.Factor]:
    k = params["num_documents"] - 1
    seed = params["seed"]
    every = {
        "position": X.Factor("position", "first", "middle", (T.Position(1),), (T.Position(0.5),),
                             "Lost in the Middle", -1, "the middle of the context is read worst"),
        "format": X.Factor("format", "as is", "C-NORM", (),
                           (T.Normalize(params["cnorm_delimiter"], params["cnorm_ratio"], seed=seed),),
                           "C-NORM", +1, "normalized passages are read better"),
        "tags": X.Factor("tags", "none", "spaCy + definitions", (), (T.Tags("spacy", True),),
                         "TAG", +1, "tags with definitions help retrieval from long contexts"),
        "distractors": X.Factor("distractors", "hard", "far", (T.Competitors(k, "hard"),),
                                (T.Competitors(k, "far", params["far_from"], seed=seed),),
                                "semantic competition", +1, "far-ranked distractors hurt less than hard ones"),
        "filler": X.Factor("filler", "none", f"{params['filler_tokens']} whitespace", (),
                           (T.Padding("whitespace", params["filler_tokens"], "between"),),
                           "context length alone", -1, "length alone hurts"),
        "query_aware": X.Factor("query_aware", "off", "on", (), (T.QueryAware(),), "Lost in the Middle", 0,
                                "query-aware contextualization barely changes multi-document QA"),
    }
    unknown = set(params["factors"]) - set(every)
    if unknown:
        raise ParameterError(f"unknown crossing factors {sorted(unknown)}; known: {', '.join(every)}")
    if "distractors" not in params["factors"]:
        raise ParameterError("the distractors factor builds the context; keep it among the factors")
    return [every[name] for name in FACTOR_ORDER if name in params["factors"]]


def design(params: dict) -> X.Design:
    return X.two_level_design(factors(params), params["fraction"])


def examples(params: dict) -> list[T.Example]:
    """The first ``num_questions`` NQ-Open oracle questions with the ``pool_size`` BM25-ranked
    chunks of the oracle pool as candidates (far draws come from its bottom half)."""
    oracle = qa.read_oracle()
    attached = qa.attach_distractors(oracle[:params["num_questions"]], params["pool_size"], pool=oracle)
    return [qa.to_example(e) for e in attached]


def plan(params: dict) -> list[Block]:
    d = design(params)
    reqs = X.requests(d, examples(params), order=[f.name for f in d.factors])
    # Example by example: effects are clustered by question, so a partial run must hold whole ones.
    return [Block(f"{len(d.cells)} cells x {params['num_questions']} questions", EXPERIMENT, reqs, True,
                  whole_units=True)]


def claims(results_dir: str | Path, params: dict, reader: Reader) -> dict[str, Estimate]:
    """Each factor's main effect as a paired difference, ``crossing-<factor>``: per question,
    accuracy over the cells at the factor's high level minus over those at its low level (in
    the balanced fraction this is the GEE main effect; the interval resamples questions)."""
    d = design(params)
    cells = {tuple(sorted(d.levels(c).items())) for c in d.cells}
    keep = {q.example_id for q in qa.read_oracle()[:params["num_questions"]]}
    rows = [r for r in reader.store(results_dir, EXPERIMENT).rows()
            if r["example_id"] in keep and r["condition"].get("num_documents") == params["num_documents"]
            and tuple(sorted(r["condition"].get("crossing", {}).items())) in cells]
    def main_effect(factor):
        side = {level: by_unit([r for r in rows if r["condition"]["crossing"][factor.name] == level], {}, qa.score)
                for level in (factor.low, factor.high)}
        return paired_estimate(side[factor.low], side[factor.high], side_names=(factor.low, factor.high))

    return estimable({f"crossing-{f.name}": lambda f=f: main_effect(f) for f in d.factors})


# ---------------------------------------------------------------------------------------------
# Analysis: what the notebook shows, as numbers


def main_effects(estimates: dict[str, Estimate], params: dict, claims: dict) -> pd.DataFrame:
    """Each factor's main effect against its paper's claim, as the findings page states it:
    the paired estimate of :func:`claims` and the verdict by the findings page's rule
    (:func:`longctx.claims.verdict`) where the page lists the claim; a claim of no effect
    is not judged here (it needs an equivalence margin fixed in advance)."""
    d = design(params)
    rows = []
    for f in d.factors:
        est = estimates[f"crossing-{f.name}"]
        claim = claims.get(f"crossing-{f.name}")
        rows.append({"factor": f.name, "levels": f"{f.high} vs {f.low}", "paper": f.source, "claim": f.claim,
                     "estimate": est.difference, "ci_low": est.ci_low, "ci_high": est.ci_high, "p": est.p,
                     "questions": est.n,
                     "verdict": verdict(est, claim) if claim else "not judged (a claim of no effect)"})
    return pd.DataFrame(rows)


def forest_effects(fx: pd.DataFrame, main: pd.DataFrame) -> pd.DataFrame:
    """The GEE table with its main effects' intervals replaced by the paired estimates of
    :func:`main_effects` (the same point estimates in the balanced fraction), so the figure
    shows the findings page's intervals; the interactions keep the GEE's."""
    by = main.set_index("factor")
    out = fx.copy()
    for column in ("estimate", "ci_low", "ci_high", "p"):
        out.loc[out["kind"] == "main", column] = out.loc[out["kind"] == "main", "term"].map(by[column])
    return out


def sizing(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """Questions a 95% half-width of 10 points needs for each main effect, from the spread of
    the per-question effects."""
    unit_diffs = X.unit_differences(table, design(params))
    return pd.DataFrame([{"factor": f, "questions": int(unit_diffs[f].notna().sum()),
                          "sd of per-question effects (pts)": round(100 * unit_diffs[f].std(), 1),
                          "questions for ±10 pts": n_for_half_width(unit_diffs[f].dropna())}
                         for f in unit_diffs.columns])


def interactions(fx: pd.DataFrame) -> pd.DataFrame:
    """The two-way interactions (GEE), smallest p first."""
    inter = fx[fx["kind"] == "interaction"]
    return inter.sort_values("p")


def reader_view(table: pd.DataFrame, others: list[dict], params: dict, labels: tuple[str, str],
                min_shared: int = 8) -> dict:
    """The second reader's rows and, once it has answered ``min_shared`` questions in every
    cell, both readers' main effects and their paired difference (:func:`X.reader_effects`)."""
    this_reader, other_reader = labels
    d = design(params)
    other_table = rows_table(others, qa.score) if others else table.iloc[:0]
    other_table = other_table[other_table["model"] == other_reader]
    shared = X.complete_units(table, d) & X.complete_units(other_table, d) if not other_table.empty else set()
    both = None
    if other_reader != this_reader and len(shared) >= min_shared:
        both = X.reader_effects(pd.concat([table, other_table], ignore_index=True), d, list(labels))
    return {"table": other_table, "shared": shared, "both": both, "min_shared": min_shared}


def quoted(table: pd.DataFrame, main: pd.DataFrame, fx: pd.DataFrame, logit: pd.DataFrame, readers: dict,
           params: dict, labels: tuple[str, str]) -> dict:
    """Every number the chapter's prose quotes, by glue key."""
    d = design(params)
    by = main.set_index("factor")
    inter = interactions(fx)
    top = inter.loc[inter["estimate"].abs().idxmax()]
    out = {"x-questions": table["example_id"].nunique(), "x-cells": len(d.cells), "x-answers": len(table),
           "x-accuracy": f"{100 * table['correct'].mean():.1f}%",
           "x-max-half-width": f"{((by['ci_high'] - by['ci_low']) / 2).max():.1f}",
           "x-interactions": len(inter), "x-interactions-significant": int((inter["p"] < 0.05).sum()),
           "x-top-interaction": top["term"],
           "x-top-interaction-ci": f"{top['estimate']:+.1f}, 95% CI {top['ci_low']:+.1f} to {top['ci_high']:+.1f}",
           "x-logit-agrees": "agrees" if (logit.set_index("term")["estimate"] * by["estimate"] > 0).all()
           else "disagrees", "x-filler-tokens": f"{params['filler_tokens']:,}"}
    for f in by.index:
        r = by.loc[f]
        out[f"x-{f}"] = f"{r['estimate']:+.1f}, 95% CI {r['ci_low']:+.1f} to {r['ci_high']:+.1f}"
        out[f"x-{f}-verdict"] = r["verdict"]
    both = readers["both"]
    if both is not None:
        this_reader, other_reader = labels
        b = both.set_index(["reader", "factor"])

        def ci(reader, factor):
            row = b.loc[(reader, factor)]
            return f"{row['estimate']:+.1f}, 95% CI {row['ci_low']:+.1f} to {row['ci_high']:+.1f}"

        other = readers["table"]
        other_fx = X.effects(other, d)
        other_inter = interactions(other_fx)
        other_top = other_inter.iloc[0]
        diff = both[both["reader"] == "difference"]
        theirs = both[both["reader"] == other_reader].set_index("factor")
        rest = theirs.drop(index=[f for f in ("position", "distractors") if f in theirs.index])
        out.update({
            "x2-shared": len(readers["shared"]), "x2-answers": len(other),
            "x2-accuracy": f"{100 * other['correct'].mean():.1f}%",
            **{f"x2-{f}": ci(other_reader, f) for f in theirs.index},
            **{f"x2-diff-{f}": ci("difference", f) for f in theirs.index},
            "x2-diff-position-p": p_text(b.loc[("difference", "position"), "p"]),
            "x2-rest-max": f"{rest['estimate'].abs().max():.0f}",
            "x2-top-interaction": other_top["term"],
            "x2-top-interaction-ci": f"{other_top['estimate']:+.1f}, 95% CI {other_top['ci_low']:+.1f} to "
                                     f"{other_top['ci_high']:+.1f}",
            "x2-interactions-significant": int((other_inter["p"] < 0.05).sum()),
            "x2-max-half-width": f"{((theirs['ci_high'] - theirs['ci_low']) / 2).max():.1f}",
            "x2-diff-max-half-width": f"{((diff['ci_high'] - diff['ci_low']) / 2).max():.1f}",
            "x2-diff-widest": diff.loc[((diff["ci_high"] - diff["ci_low"]) / 2).idxmax(), "factor"],
        })
    return out
