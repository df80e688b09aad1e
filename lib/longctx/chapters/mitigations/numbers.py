"""The mitigations chapter's numbers: each fix's gain in the middle over the baseline and
over the random shuffle, paired by question, with what the fix does at the edges (the
premise's fact ``edge_change``)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import pandas as pd

from ...claims import (
    Estimate,
    NoPairedUnits,
    UnitScores,
    by_unit,
    decided_sign,
    estimable,
    paired_estimate,
    read_claims,
)
from ...errors import ParameterError
from ...metrics import answer_inclusion, wilson_interval
from ...paths import repo_root
from ...report import and_list
from ...tasks import multidoc_qa as qa
from ..contract import ChapterResult
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
CLAIM_ARMS = {design.claim_id(arm): arm for arm in design.FIXES}  # claim id -> its arm


COST_BAR = 2.5  # the bar: an attention arm's time per prompt over the baseline's
COST_FILE = "data/bench/mitigations-cpu.json"  # scripts/bench_mitigations.py writes it


def arm_of(row: dict) -> str | None:
    """The arm a row answers (None for a row of another design: another size, the
    closed-book baseline, a random order, an attention read)."""
    c = row.get("condition")
    if c is None:
        return None  # an attention row: what the arms read, not an answer
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


def recitations(rows: Iterable[dict], num_documents: int) -> pd.DataFrame:
    """Recite-then-answer's two steps per gold position (1-based ``position``): of the
    ``recited`` questions, how many recitations ``held`` a gold answer anywhere in the copy
    (answer inclusion; the distractors hold none), and of the answers made from a copy that
    held one (``held_answered``) and from one that did not (``missed_answered``), how many
    were right (``held_right``, ``missed_right``)."""
    held, right = {}, {}
    for r in rows:
        c = r.get("condition") or {}
        if c.get("mitigation") != "recite" or c.get("num_documents") != num_documents:
            continue
        key = (r["example_id"], c["gold_index"])
        if c.get("step") == "recitation":
            held[key] = bool(answer_inclusion(r["output"], r["gold"]))
        elif c.get("step") == "answer":
            right[key] = qa.score(r)
    out = []
    for idx in qa.position_indices(num_documents, design.DEPTHS):
        mine = [k for k in held if k[1] == idx]
        if not mine:
            continue
        row = {"position": idx + 1, "recited": len(mine), "held": sum(held[k] for k in mine)}
        for side, kept in (("held", True), ("missed", False)):
            scored = [right[k] for k in mine if held[k] is kept and k in right]
            row |= {f"{side}_answered": len(scored), f"{side}_right": sum(scored)}
        out.append(row)
    return pd.DataFrame(out, columns=RECITATION_COLUMNS)


GOLD_WHERE = {0.0: "with the gold first", 0.5: "in the middle", 1.0: "last"}  # by depth
RECITATION_COLUMNS = [
    "position",
    "recited",
    "held",
    "held_answered",
    "held_right",
    "missed_answered",
    "missed_right",
]


def recitation_sentence(frame: pd.DataFrame, label: str, num_documents: int) -> str:
    """What :func:`recitations` says for ``label`` in words."""
    if frame.empty:
        return f"{label} has no recitations in this run."
    positions = qa.position_indices(num_documents, design.DEPTHS)
    where = {idx + 1: GOLD_WHERE[depth] for idx, depth in zip(positions, design.DEPTHS)}
    counts = [
        f"{r.held} of {r.recited}{' questions' if i == 0 else ''} {where[r.position]}"
        for i, r in enumerate(frame.itertuples())
    ]
    rates = []
    for side, words in (("held", "held one"), ("missed", "did not")):
        n = int(frame[f"{side}_answered"].sum())
        if n:
            share = frame[f"{side}_right"].sum() / n
            rates.append(f"from a copy that {words} it answered {share:.0%} right (n = {n})")
    return (
        f"For {label}, the recitation held a gold answer for {and_list(counts)}; "
        + "; ".join(rates)
        + "."
    )


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


def gains(by_reader: Mapping[str, Mapping[str, Estimate]]) -> pd.DataFrame:
    """Each fix's gain in the middle per reader: over the baseline and over the random
    shuffle, each with its interval, n and the p the rule decides with (Holm-adjusted within
    its family), and the sign the interval and that p agree on (0: none)."""
    out = []
    for reader, estimates in by_reader.items():
        for claim_id, arm in CLAIM_ARMS.items():
            over = {
                "baseline": estimates.get(claim_id),
                "shuffle": estimates.get(f"{claim_id}-vs-shuffle"),
            }
            if not any(over.values()):
                continue
            row = {"reader": reader, "arm": arm, "fix": ARM_NAMES[arm], "claim": claim_id}
            for side, est in over.items():
                row |= {
                    f"{side}_{k}": (getattr(est, k) if est else math.nan)
                    for k in ("difference", "ci_low", "ci_high", "n")
                }
                row[f"{side}_p"] = est.decision_p if est else math.nan
                row[f"{side}_sign"] = decided_sign(est) if est else 0
            out.append(row)
    return pd.DataFrame(out)


def against_shuffle(table: pd.DataFrame) -> str:
    """Per reader, the fixes that beat the random shuffle in the middle and those that fell
    below it, a sign counting only where the interval and the adjusted exact test agree."""
    if table.empty:
        return "No reader has rows for a fix and the random shuffle on the same questions yet."
    sentences = []
    for reader, part in table.groupby("reader", sort=False):
        above = list(part.loc[part["shuffle_sign"] > 0, "fix"])
        below = list(part.loc[part["shuffle_sign"] < 0, "fix"])
        tied = list(part.loc[part["shuffle_sign"] == 0, "fix"])
        said, named = [], "the random shuffle"
        for fixes, words in ((above, "beat {}"), (below, "fell below {}")):
            if fixes:
                said.append(f"{and_list(fixes)} {words.format(named)}")
                named = "it"
        if tied:
            verb = "is" if len(tied) == 1 else "are"
            said.append(f"{and_list(tied)} {verb} not told apart from {named} at this n")
        sentences.append(f"For {reader}, " + "; ".join(said) + ".")
    return " ".join(sentences)


def paper_gains() -> dict[str, str]:
    """Each fix's claim -> what its paper reports (the claims files' ``paper_value``)."""
    return {c.id: c.paper_value for c in read_claims() if c.id in CLAIM_ARMS}


def measured_cost(path: str = COST_FILE) -> dict | None:
    """The committed timing of the attention arms against the baseline
    (``scripts/bench_mitigations.py``), or None where it has not been measured."""
    file = repo_root() / path
    return json.loads(file.read_text()) if file.exists() else None


def cost_sentence(measured: dict | None, passes: int) -> str:
    """Each timed attention arm's time per prompt as a ratio to the baseline's, judged
    against :data:`COST_BAR`; where the iterated sort is beyond it, why, from the one-pass
    arm: a pass is one final-token read, and ``passes`` reads cost what they cost."""
    if not measured:
        return "The attention arms' cost has not been timed on this machine."
    parts = []
    timed = measured["arms"]
    for arm, timing in timed.items():
        within = "within" if timing["ratio"] <= COST_BAR else "beyond"
        parts.append(f"{ARM_NAMES[arm]} took {timing['ratio']:.2f}x ({within} the bar)")
    said = (
        f"Timed on {measured['prompts']} prompts with {measured['model']} "
        f"({measured['backend']}, {measured['threads']} CPU threads, {measured['dtype']}) "
        f"against the baseline's {measured['baseline_s']:.0f} s for the same prompts, with "
        f"the chapter's bar at {COST_BAR}x: " + "; ".join(parts) + "."
    )
    if {"sort_1", "sort_3"} <= set(timed) and timed["sort_3"]["ratio"] > COST_BAR:
        # one pass = one read + one answer, so a read costs the one-pass ratio less one answer
        read = timed["sort_1"]["ratio"] - 1
        said += (
            f" A read of the final token's attention costs about {read:.2f} of an answer "
            f"(the one-pass arm less its answer), so {passes} passes and the answer come to "
            f"about {1 + passes * read:.2f}x; {passes} passes fit the bar only where a read "
            f"costs under {(COST_BAR - 1) / passes:.2f} of an answer, while a read runs the "
            "whole prompt as the answer does and the answer adds only a few tokens."
        )
    return said


@dataclass(kw_only=True)
class MitigationsResult(ChapterResult):
    """The page's numbers: each reader's accuracy per arm and gold position (``accuracy``,
    with a ``model`` column), each fix's gains per reader (:func:`gains`), the edge each
    reader reads best (``edges``, which Found in the Middle's arm uses), the designed arms
    this run does not answer (``pending``), what the run's reader's recitations held
    (:func:`recitations`) and the figure's Data line."""

    accuracy: pd.DataFrame
    gains: pd.DataFrame
    edges: dict[str, str]
    pending: tuple[str, ...]
    recitations: pd.DataFrame
    provenance: str


def edge_or_none(rows: list[dict], num_documents: int) -> str | None:
    """:func:`best_edge` where the reader's baseline has both edges stored, else None."""
    try:
        return best_edge(rows, num_documents)
    except ParameterError:
        return None


def pending_text(pending: tuple[str, ...]) -> str:
    """The designed arms this run does not answer, in words (empty when none)."""
    if not pending:
        return ""
    names = and_list([ARM_NAMES[a] for a in pending])
    return (
        f"The rules of {names} are pre-registered too, but the default reader's rows for "
        f"{'it' if len(pending) == 1 else 'them'} are still being generated, so this page "
        "does not judge them yet."
    )


def quoted(
    table: pd.DataFrame,
    params: dict,
    pending: tuple[str, ...],
    edges: dict,
    label: str,
    recited: pd.DataFrame,
) -> dict:
    """The numbers and sentences the page's prose glues."""
    lo, hi = params["ms_poe_ratios"]
    return {
        "mit-recitation": recitation_sentence(recited, label, params["num_documents"]),
        "mit-questions": params["num_questions"],
        "mit-documents": params["num_documents"],
        "mit-arms": and_list([ARM_NAMES[a] for a in params["arms"]]),
        "mit-pending": pending_text(pending),
        "mit-against-shuffle": against_shuffle(table),
        "mit-cost": cost_sentence(measured_cost(), params["sort_passes"]),
        "mit-cost-bar": f"{COST_BAR}x",
        "mit-edge": edges.get(label) or "not known",
        "mit-calibration": params["calibration_questions"],
        "mit-layers": params["attention_layers"],
        "mit-ms-poe-ratios": f"{lo} to {hi}",
        "mit-readers": len(edges),
    }


def statements(table: pd.DataFrame, label: str) -> dict[str, bool]:
    """What the page's prose says in words about the committed run, checked there."""
    mine = table[table["reader"] == label] if len(table) else table
    return {
        "every judged fix of the default reader is compared with the shuffle on the same "
        "questions": bool(len(mine)) and bool(mine["shuffle_n"].notna().all()),
    }
