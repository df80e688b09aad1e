"""The mitigations chapter's numbers: each fix's gain in the middle over the baseline and
over the random shuffle, paired by question, with what the fix does at the edges (the
premise's fact ``edge_change``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

import pandas as pd

from ...claims import (
    Estimate,
    NoPairedUnits,
    UnitScores,
    by_unit,
    estimable,
    paired_estimate,
)
from ...errors import ParameterError
from ...metrics import wilson_interval
from ...tasks import multidoc_qa as qa
from . import design

BASELINE = "baseline"
CONTROL = "shuffle"
CONTROLS = (CONTROL, "reorder")  # the random shuffle and the libraries' reorder
# The arms whose order does not depend on where the gold stood: one prompt per question
# answers for every position.
POSITION_FREE = ("reorder",)
ARM_NAMES = {
    BASELINE: "baseline",
    "shuffle": "random shuffle",
    "reorder": "reorder (BM25 at the edges)",
    "instruction": "attention instruction",
    "query_aware": "query-aware",
    "ms_poe": "Ms-PoE",
    "fitm": "Found in the Middle",
    "sort_1": "attention sorting, 1 pass",
    "sort_3": "attention sorting, 3 passes",
    "recite": "recite, then answer",
}
CLAIM_ARMS = {
    "mit-reorder": "reorder",
    "mit-fitm": "fitm",
    "mit-sort-1": "sort_1",
    "mit-sort-3": "sort_3",
    "mit-ms-poe": "ms_poe",
    "mit-instruction": "instruction",
    "mit-query-aware": "query_aware",
    "mit-recite": "recite",
}


def arm_of(row: dict) -> str | None:
    """The arm a row answers (None for a row of another design: another size, the
    closed-book baseline, a random order)."""
    c = row["condition"]
    if c.get("setting") != "documents" or c.get("random_order") or c.get("step") == "recitation":
        return None  # a recitation is recite-then-answer's first step, not an answer
    if "mitigation" in c:
        return c["mitigation"]
    return "query_aware" if c.get("query_aware") else BASELINE


def gold_from(row: dict) -> int:
    """Where the gold stood in the baseline prompt the row's prompt was made from."""
    c = row["condition"]
    return c.get("arranged_from", c["gold_index"])


def arm_scores(rows: Iterable[dict], num_documents: int) -> dict[tuple[str, int], UnitScores]:
    """(arm, gold position in the baseline) -> each question's score, over ``rows`` of
    ``num_documents`` documents; a position-free arm's prompt serves every position."""
    grouped: dict[tuple[str, int], list[dict]] = {}
    positions = qa.position_indices(num_documents, design.DEPTHS)
    for r in rows:
        arm = arm_of(r)
        if arm is None or r["condition"].get("num_documents") != num_documents:
            continue
        for idx in positions if arm in POSITION_FREE else [gold_from(r)]:
            grouped.setdefault((arm, idx), []).append(r)
    return {key: by_unit(group, {}, qa.score) for key, group in grouped.items()}


def best_edge(rows: Iterable[dict], num_documents: int) -> str:
    """Where this reader reads best, from its baseline rows: ``first`` or ``last`` (the edge
    with the higher accuracy; ``last`` on a tie, next to the question). Found in the
    Middle's arm puts its best-ranked document there."""
    scores = arm_scores(rows, num_documents)
    accuracy = {}
    for name, idx in zip(design.EDGES, qa.position_indices(num_documents, (0.0, 1.0))):
        side = scores.get((BASELINE, idx))
        if not side:
            raise ParameterError(
                f"no baseline rows with the gold {name} of {num_documents} documents: "
                "answer the baseline block before Found in the Middle's arm"
            )
        accuracy[name] = sum(side.values()) / len(side)
    return "first" if accuracy["first"] > accuracy["last"] else "last"


def strongest_fixes(rows: Iterable[dict], num_documents: int, count: int = 2) -> list[str]:
    """The ``count`` fixes (neither control) with the largest mean gain over the baseline with
    the gold in the middle, paired by question, largest first (ties in the arms' order). A
    reader whose rows choose the arms another reader runs within a smaller budget."""
    scores = arm_scores(rows, num_documents)
    middle = qa.position_indices(num_documents, (0.5,))[0]
    base = scores.get((BASELINE, middle))
    if not base:
        raise ParameterError("no baseline rows with the gold in the middle to rank the fixes by")
    gains = {}
    for arm in CLAIM_ARMS.values():
        fix = scores.get((arm, middle), {})
        units = sorted(set(base) & set(fix))
        if arm not in CONTROLS and units:
            gains[arm] = sum(fix[u] - base[u] for u in units) / len(units)
    ranked = sorted(gains, key=lambda arm: -gains[arm])  # stable: ties keep the arms' order
    return ranked[:count]


def position_accuracy(rows: Iterable[dict], num_documents: int) -> pd.DataFrame:
    """Each arm's accuracy where the gold stood in the baseline (1-based ``position``), one
    score per question, with its 95% Wilson interval and ``n`` questions."""
    out = []
    for (arm, idx), side in sorted(arm_scores(rows, num_documents).items()):
        right = sum(side.values())
        low, high = wilson_interval(round(right), len(side))
        out.append(
            {
                "arm": ARM_NAMES[arm],
                "position": idx + 1,
                "n": len(side),
                "accuracy": right / len(side),
                "ci_low": low,
                "ci_high": high,
            }
        )
    return pd.DataFrame(out, columns=["arm", "position", "n", "accuracy", "ci_low", "ci_high"])


def edge_change(scores: dict, arm: str, num_documents: int) -> float:
    """The fix's change at the edges in points: the mean of its paired differences from the
    baseline with the gold first and with it last; NaN until both are stored."""
    first, last = qa.position_indices(num_documents, (0.0, 1.0))
    changes = []
    for idx in (first, last):
        try:
            changes.append(paired_estimate(scores[(BASELINE, idx)], scores[(arm, idx)]).difference)
        except (KeyError, NoPairedUnits):
            return math.nan
    return sum(changes) / 2


def claims(rows: Iterable[dict], params: dict) -> dict[str, Estimate]:
    """Each fix against the baseline and against the random shuffle with the gold in the
    middle, paired by question, with its edge change as the premise's fact."""
    k = params["num_documents"]
    middle = qa.position_indices(k, (0.5,))[0]
    scores = arm_scores(rows, k)

    def compare(arm: str, control: str):
        def compute() -> Estimate:
            try:
                treated, base = scores[(arm, middle)], scores[(control, middle)]
            except KeyError as err:
                raise NoPairedUnits(f"no rows of {err.args[0]}") from None
            est = paired_estimate(base, treated, side_names=(ARM_NAMES[control], ARM_NAMES[arm]))
            return replace(est, facts={**est.facts, "edge_change": edge_change(scores, arm, k)})

        return compute

    out = {}
    for claim_id, arm in CLAIM_ARMS.items():
        out[claim_id] = compare(arm, BASELINE)
        out[f"{claim_id}-vs-shuffle"] = compare(arm, CONTROL)
    return estimable(out)
