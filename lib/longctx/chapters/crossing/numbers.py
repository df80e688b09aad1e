"""The crossing chapter's numbers: what its analysis computes from the rows (scored rows,
cells, estimates' sides, the numbers the prose quotes and the statements it makes)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...claims import (
    Estimate,
    judge,
)
from ...metrics import holm
from ...report import format_p, points_ci
from ...tables import rows_table
from ...tasks import multidoc_qa as qa
from ..contract import ChapterResult
from . import factorial as X
from .design import factorial_design


def main_effects(estimates: dict[str, Estimate], params: dict, claims: dict) -> pd.DataFrame:
    """Each factor's main effect against its paper's claim, as the findings page states it:
    the paired estimate of the chapter's ``claims``, the verdict by the findings page's rule
    (:func:`longctx.claims.judge`, a claim of no effect by its equivalence margin) and the
    exact p Holm-adjusted over the six main effects (one family)."""
    d = factorial_design(params)
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
    d = factorial_design(params)
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
    d = factorial_design(params)
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
