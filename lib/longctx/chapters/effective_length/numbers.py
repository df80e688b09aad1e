"""The effective-length sweep's numbers: each reader's accuracy curve per needle kind, its
effective length under NoLiMa's and RULER's definitions with the interval on the length,
LongScore per length, and the pre-registered claim (accuracy at the longest length within
half the window against 85% of the reader's own base, paired by needle)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pandas as pd

from ...claims import Estimate, NoPairedUnits, UnitScores, by_unit, estimable, paired_estimate
from ...effective_length import (
    DEFINITIONS,
    NOLIMA_BASE_LENGTHS,
    NOLIMA_SHARE,
    EffectiveLength,
    effective_length,
    longscore,
    tokens_text,
)
from ...metrics import bootstrap_interval, content_seed
from ...tasks import kv_retrieval as kv
from ...tasks import tag_needles as tn
from . import design

CLAIMS = {"kv": "el-kv-half-window", "qa": "el-qa-half-window"}
SCORES = {"kv": kv.score, "qa": tn.score}


def needle_of(row: dict) -> str:
    """A row's needle, the sweep's independent unit: a key-value needle is its record set; a
    needle question's one-hop and two-hop questions share one needle."""
    if row["condition"]["needle_kind"] == "qa":
        return tn.needle_of(row["example_id"])
    return row["example_id"]


def _side(rows: list[dict], kind: str, length: int) -> UnitScores:
    return by_unit(rows, {"needle_kind": kind, "length": length}, SCORES[kind], unit=needle_of)


def half_window_estimate(rows: list[dict], kind: str, at: int | None) -> Estimate:
    """Accuracy at ``at`` tokens minus 85% of each needle's base (its mean at 250, 500 and
    1K), paired by needle: negative where the reader has fallen below NoLiMa's bar. The
    base in % is the premise's fact ``base``."""
    if at is None:
        raise NoPairedUnits("no length within half the window was asked")
    bases = [_side(rows, kind, n) for n in NOLIMA_BASE_LENGTHS]
    # sorted: a sum over a set's order would differ in its last bits from run to run
    units = sorted(set.intersection(*(set(b) for b in bases)))
    if not units:
        raise NoPairedUnits(f"no {kind} needle was asked at every base length")
    bar = UnitScores({u: NOLIMA_SHARE * sum(b[u] for b in bases) / len(bases) for u in units})
    bar.where = tuple(b.where for b in bases)
    bar.rows = sum(b.rows for b in bases)
    treated = _side(rows, kind, at)
    est = paired_estimate(bar, treated, side_names=("85% of the base", f"at {tokens_text(at)}"))
    base = 100 * sum(bar[u] for u in units) / len(units) / NOLIMA_SHARE
    return replace(est, facts={**est.facts, "base": base})


def claims(rows: Iterable[dict], params: dict, window: int | None) -> dict[str, Estimate]:
    """The pre-registered claim per needle kind, for a reader of ``window`` tokens."""
    rows = list(rows)
    at = design.claim_length(design.grid(params, window), window)
    return estimable(
        {
            CLAIMS[kind]: (lambda kind=kind: half_window_estimate(rows, kind, at))
            for kind in params["kinds"]
        }
    )


def overlap_table(params: dict) -> pd.DataFrame:
    """How literally each needle kind's question repeats its needle: the share of questions
    sharing a content word with their needle and the mean number shared (the names that are
    the answer left out). A key-value question names its key, so every one repeats it."""
    cases = design.qa_cases(params, tn.haystack_text())
    shared = [len(tn.literal_overlap(c)) for c in cases]
    kv_needles = params["kv_needles"]
    return pd.DataFrame(
        [
            {
                "needles": design.KIND_NAMES["kv"],
                "questions": kv_needles,
                "sharing a word with the needle (%)": 100.0,
                "words shared (mean)": 1.0,
            },
            {
                "needles": design.KIND_NAMES["qa"],
                "questions": len(cases),
                "sharing a word with the needle (%)": 100 * sum(n > 0 for n in shared) / len(cases),
                "words shared (mean)": sum(shared) / len(cases),
            },
        ]
    )


def scored(rows: Iterable[dict]) -> pd.DataFrame:
    """One line per row: needle kind, length, needle, example and its 0/1 score."""
    return pd.DataFrame(
        [
            {
                "kind": r["condition"]["needle_kind"],
                "length": r["condition"]["length"],
                "needle": needle_of(r),
                "example_id": r["example_id"],
                "correct": SCORES[r["condition"]["needle_kind"]](r),
            }
            for r in rows
        ],
        columns=["kind", "length", "needle", "example_id", "correct"],
    )


def complete_lengths(table: pd.DataFrame) -> pd.DataFrame:
    """The rows at the lengths where every needle of the kind was answered (a length part
    run is left out of the curve, never judged on part of its needles)."""
    needles = table["needle"].nunique()
    full = table.groupby("length")["needle"].nunique()
    return table[table["length"].isin(full[full == needles].index)]


def effective_lengths(table: pd.DataFrame) -> dict[str, EffectiveLength]:
    """One kind's effective length under each definition, needles resampled for the
    interval; none where the base lengths are not all complete."""
    table = complete_lengths(table)
    if not set(NOLIMA_BASE_LENGTHS) <= set(table["length"]):
        return {}
    return {d: effective_length(table, d, unit="needle") for d in DEFINITIONS}


def curve_table(table: pd.DataFrame) -> pd.DataFrame:
    """Accuracy by length over needles (each needle's questions averaged first) with a 95%
    percentile bootstrap over needles, seeded by the sorted needle ids: length, n (needles),
    accuracy, ci_low, ci_high (shares)."""
    out = []
    for length, per_needle in needle_means(complete_lengths(table)).groupby(level="length"):
        per_needle = per_needle.droplevel("length")
        low, high = bootstrap_interval(
            per_needle.tolist(), seed=content_seed(per_needle.index.tolist())
        )
        out.append(
            {
                "length": int(length),
                "n": len(per_needle),
                "accuracy": float(per_needle.mean()),
                "ci_low": low,
                "ci_high": high,
            }
        )
    return pd.DataFrame(out, columns=["length", "n", "accuracy", "ci_low", "ci_high"])


def share_of_window(found: EffectiveLength, window: int | None) -> str:
    """How much of the window the effective length uses, in words: "50%", "≥ 98%", "< 1%"."""
    if window is None:
        return "window unknown"
    if found.length is None:
        return f"< {100 * found.shortest / window:.0f}%"
    return ("≥ " if found.at_least else "") + f"{100 * found.length / window:.0f}%"


def lengths_table(
    found: dict[tuple[str, str], dict[str, EffectiveLength]], windows: dict
) -> pd.DataFrame:
    """One row per reader, needle kind and definition: the effective length with its
    interval on the grid, the bar, the needles, the reader's window and the share of it used."""
    names = {"nolima": "NoLiMa (85% of its own base)", "ruler": "RULER (85.6%)"}
    rows = []
    for (reader, kind), by_definition in found.items():
        for definition, el in by_definition.items():
            rows.append(
                {
                    "reader": reader,
                    "needles": design.KIND_NAMES[kind],
                    "definition": names[definition],
                    "effective length [95% CI]": el.text(),
                    "bar (%)": f"{el.bar:.1f}",
                    "n (needles)": el.n,
                    "window": tokens_text(windows[reader]) if windows.get(reader) else "unknown",
                    "share of the window": share_of_window(el, windows.get(reader)),
                }
            )
    return pd.DataFrame(rows)


def needle_means(table: pd.DataFrame) -> pd.Series:
    """Each needle's mean score at each length (its questions averaged), indexed by
    (length, needle) in sorted order: what every curve averages over."""
    return table.groupby(["length", "needle"])["correct"].mean()


def curve(table: pd.DataFrame) -> dict[float, float]:
    """Accuracy (%) by length over needles: each needle's mean first (its questions), then
    the mean over needles."""
    means = needle_means(table).groupby(level="length").mean()
    return {float(n): 100 * v for n, v in means.items()}


def longscores(table: pd.DataFrame) -> dict[float, float]:
    """100-LongBench's LongScore at each complete length."""
    return longscore(curve(complete_lengths(table)))
