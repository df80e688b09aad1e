"""The effective-length sweep's numbers: each reader's accuracy curve per needle kind, its
effective length under NoLiMa's and RULER's definitions with the interval on the length,
LongScore per length, and the pre-registered claim (accuracy at the longest length within
half the window against 85% of the reader's own base, paired by needle)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import takewhile

import pandas as pd

from ...claims import (
    PREREGISTERED_FILE,
    Claim,
    Estimate,
    NoPairedUnits,
    UnitScores,
    by_unit,
    decided_sign,
    estimable,
    judge,
    paired_estimate,
    read_claims,
)
from ...effective_length import (
    DEFINITIONS,
    NOLIMA_BASE_LENGTHS,
    NOLIMA_SHARE,
    RULER_BAR,
    EffectiveLength,
    effective_length,
    longscore,
    tokens_text,
)
from ...metrics import unit_mean
from ...models import context_window, load_tokenizer
from ...paths import repo_root
from ...plots import FigureText, length_curves
from ...reader import Reader
from ...report import and_list, format_p, percent_words, points_ci
from ...runner import stored_in
from ...tasks import kv_retrieval as kv
from ...tasks import tag_needles as tn
from ..contract import ChapterResult
from . import design

CLAIMS = {"kv": "el-kv-half-window", "qa": "el-qa-half-window"}
SCORES = {"kv": kv.score, "qa": tn.score}
DEFINITION_NAMES = {"nolima": "NoLiMa (85% of its own base)", "ruler": "RULER (85.6%)"}


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
    treated = _side(rows, kind, at)
    # sorted: a sum over a set's order would differ in its last bits from run to run
    units = sorted(set.intersection(*(set(b) for b in bases)))
    if not units:
        raise NoPairedUnits(f"no {kind} needle was asked at every base length")
    every = {needle_of(r) for r in rows if r["condition"]["needle_kind"] == kind}
    if len(units) < len(every) or set(treated) != every:
        # a part run is never judged (every needle the rows hold, at each length compared):
        # the needles answered first are not a sample of the design's
        raise NoPairedUnits(
            f"{kind}: {len(set(treated))} of {len(every)} needles answered at "
            f"{tokens_text(at)} tokens, {len(units)} at every base length"
        )
    bar = UnitScores({u: NOLIMA_SHARE * sum(b[u] for b in bases) / len(bases) for u in units})
    bar.where = tuple(b.where for b in bases)
    bar.rows = sum(b.rows for b in bases)
    est = paired_estimate(bar, treated, side_names=("85% of the base", f"at {tokens_text(at)}"))
    base = 100 * sum(bar[u] for u in units) / len(units) / NOLIMA_SHARE
    return replace(est, facts={**est.facts, "base": base})


def claims(rows: Iterable[dict], params: dict, window: int | None) -> dict[str, Estimate]:
    """The pre-registered claim per needle kind, for a reader of ``window`` tokens, at its
    claim's length on the sweep scale's grid (no estimate where those rows are not stored)."""
    rows = list(rows)
    at = design.reader_claim_length(window)
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


def complete_lengths(table: pd.DataFrame, grid: list[int] | None = None) -> pd.DataFrame:
    """The rows at the lengths where every needle of the kind was answered (a length part
    run is left out of the curve, never judged on part of its needles); given the reader's
    ``grid``, only its lengths up to the first one not complete (a curve with a gap would
    step over the length where it may fall)."""
    needles = table["needle"].nunique()
    full = table.groupby("length")["needle"].nunique()
    done = set(full[full == needles].index)
    if grid is not None:
        done = set(takewhile(done.__contains__, sorted(grid)))
    return table[table["length"].isin(done)]


def effective_lengths(
    table: pd.DataFrame, grid: list[int] | None = None
) -> dict[str, EffectiveLength]:
    """One kind's effective length under each definition, needles resampled for the
    interval, on its complete lengths (:func:`complete_lengths`); none where the base
    lengths are not all complete."""
    table = complete_lengths(table, grid)
    if not set(NOLIMA_BASE_LENGTHS) <= set(table["length"]):
        return {}
    return {d: effective_length(table, d, unit="needle") for d in DEFINITIONS}


def curve_table(table: pd.DataFrame, grid: list[int] | None = None) -> pd.DataFrame:
    """Accuracy by length over needles (each needle's questions averaged first) with a 95%
    percentile bootstrap over needles, seeded by the sorted needle ids, on the complete
    lengths (:func:`complete_lengths`): length, n (needles), accuracy, ci_low, ci_high
    (shares)."""
    out = []
    for length, per_needle in needle_means(complete_lengths(table, grid)).groupby(level="length"):
        out.append({"length": int(length), **unit_mean(per_needle.droplevel("length"))})
    return pd.DataFrame(out, columns=["length", "n", "accuracy", "ci_low", "ci_high"])


def share_of_window(found: EffectiveLength, window: int | None) -> str:
    """How much of the window the effective length uses, in words: "50%", "≥ 98%", "< 1%"."""
    if window is None:
        return "window unknown"
    if found.length is None:
        return f"< {100 * found.shortest / window:.0f}%"
    return ("≥ " if found.at_least else "") + f"{100 * found.length / window:.0f}%"


# The captions of the two tables below, on the chapter's page and the findings page alike
LENGTHS_CAPTION = (
    "Effective length per reader, needle kind and definition, with the 95% interval on the "
    "length from resampling needles; the lengths measured so far beside those the reader's "
    "window allows."
)
PUBLISHED_CAPTION = "NoLiMa's effective lengths (theirs; 85% of each model's own base)."


def lengths_table(view: Sweeps) -> pd.DataFrame:
    """One row per reader, needle kind and definition: the effective length with its
    interval on the grid, the bar, the needles, the lengths measured so far and the share of
    the reader's window used ("3% of 8,192")."""
    rows = []
    for (reader, kind), by_definition in view.found.items():
        window = view.windows.get(reader)
        for definition, el in by_definition.items():
            rows.append(
                {
                    "reader": reader,
                    "needles": design.KIND_NAMES[kind],
                    "definition": DEFINITION_NAMES[definition],
                    "effective length [95% CI]": el.text(),
                    "bar (%)": f"{el.bar:.1f}",
                    "n (needles)": el.n,
                    "lengths measured": view.measured(reader, kind),
                    "share of the window": (
                        f"{share_of_window(el, window)} of {tokens_text(window)}"
                        if window
                        else "window unknown"
                    ),
                }
            )
    return pd.DataFrame(rows)


def lengths_lines(view: Sweeps) -> list[str]:
    """Each reader's effective lengths in one line per needle kind (the command line's)."""
    return [
        f"effective length, {design.KIND_NAMES[kind]} ({reader}): "
        + "; ".join(f"{DEFINITION_NAMES[d]} {el.text()}" for d, el in found.items())
        + f"; lengths measured {view.measured(reader, kind)}"
        + (f"; window {tokens_text(w)} tokens" if (w := view.windows[reader]) else "")
        for (reader, kind), found in view.found.items()
    ]


def needle_means(table: pd.DataFrame) -> pd.Series:
    """Each needle's mean score at each length (its questions averaged), indexed by
    (length, needle) in sorted order: what every curve averages over."""
    return table.groupby(["length", "needle"])["correct"].mean()


def curve(table: pd.DataFrame) -> dict[float, float]:
    """Accuracy (%) by length over needles: each needle's mean first (its questions), then
    the mean over needles."""
    means = needle_means(table).groupby(level="length").mean()
    return {float(n): 100 * v for n, v in means.items()}


def longscores(table: pd.DataFrame, grid: list[int] | None = None) -> dict[float, float]:
    """100-LongBench's LongScore at each complete length (:func:`complete_lengths`); none
    where the reader found no needle at the base lengths (the score divides by its base)."""
    by_length = curve(complete_lengths(table, grid))
    base = [a for n, a in by_length.items() if n in NOLIMA_BASE_LENGTHS]
    return longscore(by_length) if base and sum(base) > 0 else {}


# ---------------------------------------------------------------------------------------------
# Every reader's sweep: the curves, effective lengths and LongScores the page and findings show

PUBLISHED = "data/paper/nolima_effective.csv"  # NoLiMa's curves and effective lengths


@dataclass(frozen=True)
class ReaderSweep:
    """One reader's sweep: its scored rows (:func:`scored`), its window in tokens, the
    lengths its plan asks (those its window holds) and its half-window estimates by claim
    (:func:`claims`; none where its rows do not reach the claim's length)."""

    table: pd.DataFrame
    window: int | None
    grid: list[int]
    estimates: dict[str, Estimate] = field(default_factory=dict)


def stored_sweep(
    reader: Reader, results_dir, params: dict, known: tuple[dict, list[dict]] | None = None
) -> ReaderSweep | None:
    """``reader``'s stored rows of the sweep at ``params``, read through its own plan (its
    own tokenizer's lengths; no model runs); None where it has none (its plan, which needs
    its tokenizer, is then not built). The plan is built at the lengths holding a row only:
    a length's prompts do not depend on the others asked (:func:`.design.blocks`), and
    sizing a length never answered takes minutes at 32K tokens. ``known``, a run's
    parameters and its plan's stored rows, serves instead where that plan asks every
    length needed with the same parameters."""
    store = reader.store(results_dir, design.EXPERIMENT)
    if not store.holds_rows():
        return None
    window = context_window(reader.ref)
    answered = {int(row["condition"]["length"]) for row in store.rows()}
    keep = answered | set(design.NOLIMA_BASE_LENGTHS)  # the design asks its base always
    asked = {**params, "lengths": [n for n in params["lengths"] if n in keep]}
    if known is not None and covers(known[0], asked):
        rows = [r for r in known[1] if r["condition"]["length"] in asked["lengths"]]
    else:
        plan = design.blocks(asked, load_tokenizer(reader.model), window)
        rows = stored_in(plan, design.EXPERIMENT, reader, results_dir)
    if not rows:
        return None
    grid = design.grid(params, window)
    return ReaderSweep(scored(rows), window, grid, claims(rows, params, window))


def covers(known: dict, asked: dict) -> bool:
    """A run at ``known`` plans every prompt of ``asked``: the same parameters but the
    lengths, each of ``asked``'s lengths among its own, and every block planned."""
    others = {*known, *asked} - {"lengths"}
    return (
        all(known.get(k) == asked.get(k) for k in others)
        and not known.get("claim_only")
        and set(asked["lengths"]) <= set(known["lengths"])
    )


@dataclass(frozen=True)
class Sweeps:
    """Every reader's sweep at one scale: ``curves`` (reader, kind, length, n, accuracy,
    ci_low, ci_high; complete lengths only), ``found`` ((reader, kind) -> definition ->
    :class:`EffectiveLength`; absent where the base lengths are not complete), ``windows``
    (reader -> its window in tokens), ``grids`` (reader -> the lengths its plan asks),
    ``longscores`` (reader, kind, length, LongScore) and ``estimates`` (reader -> its
    half-window estimates by claim)."""

    curves: pd.DataFrame
    found: dict[tuple[str, str], dict[str, EffectiveLength]]
    windows: dict[str, int | None]
    grids: dict[str, list[int]]
    longscores: pd.DataFrame
    estimates: dict[str, dict[str, Estimate]] = field(default_factory=dict)

    @property
    def readers(self) -> list[str]:
        return list(self.windows)

    def measured(self, reader: str, kind: str) -> str:
        """The lengths of ``reader``'s curve on ``kind`` against those its plan asks:
        "250 to 4K of 250 to 16K"."""
        done = self.curves[(self.curves["reader"] == reader) & (self.curves["kind"] == kind)]
        grid = self.grids[reader]
        asked = f"{tokens_text(min(grid))} to {tokens_text(max(grid))}"
        if done.empty:
            return f"none of {asked}"
        shown = f"{tokens_text(done['length'].min())} to {tokens_text(done['length'].max())}"
        return shown if shown == asked else f"{shown} of {asked}"


def sweeps(by_reader: dict[str, ReaderSweep]) -> Sweeps:
    """Each reader's sweep, the first reader first, as one :class:`Sweeps`."""
    curves, found, scores = [], {}, []
    for reader, sweep in by_reader.items():
        table = sweep.table
        for kind in [k for k in design.KINDS if k in set(table["kind"])]:
            part = table[table["kind"] == kind]
            curves.append(curve_table(part, sweep.grid).assign(reader=reader, kind=kind))
            if by_definition := effective_lengths(part, sweep.grid):
                found[reader, kind] = by_definition
                scores += [
                    {"reader": reader, "kind": kind, "length": n, "LongScore": v}
                    for n, v in longscores(part, sweep.grid).items()
                ]
    columns = ["reader", "kind", "length", "n", "accuracy", "ci_low", "ci_high"]
    return Sweeps(
        pd.concat(curves)[columns] if curves else pd.DataFrame(columns=columns),
        found,
        {reader: sweep.window for reader, sweep in by_reader.items()},
        {reader: sweep.grid for reader, sweep in by_reader.items()},
        pd.DataFrame(scores, columns=["reader", "kind", "length", "LongScore"]),
        {reader: sweep.estimates for reader, sweep in by_reader.items()},
    )


def marks(view: Sweeps, kind: str) -> pd.DataFrame:
    """NoLiMa's effective length of each reader on ``kind``, as the figure marks it, with the
    longest length its curve measured."""
    rows = []
    curves = view.curves[view.curves["kind"] == kind]
    for (reader, of_kind), by_definition in view.found.items():
        if of_kind == kind:
            el = by_definition["nolima"]
            rows.append(
                {
                    "reader": reader,
                    "bar": el.bar,
                    "length": el.length,
                    "low": el.low,
                    "high": el.high,
                    "at_least": el.at_least,
                    "longest": float(curves[curves["reader"] == reader]["length"].max()),
                }
            )
    columns = ["reader", "bar", "length", "low", "high", "at_least", "longest"]
    return pd.DataFrame(rows, columns=columns)


def published() -> pd.DataFrame:
    """NoLiMa's curves for the models whose effective lengths the rule quotes (theirs)."""
    return pd.read_csv(repo_root() / PUBLISHED)


def published_lengths() -> pd.DataFrame:
    """NoLiMa's effective lengths for the models the rule quotes, marked as theirs."""
    paper = published().drop_duplicates("model")
    return pd.DataFrame(
        {
            "model (NoLiMa's, theirs)": paper["model"],
            "base (%)": paper["base"].map(lambda b: f"{b:.1f}"),
            "effective length": paper["effective_length"].map(tokens_text),
            "window": paper["claimed_window"].map(tokens_text),
            "share of the window": [
                f"{100 * e / w:.0f}%"
                for e, w in zip(paper["effective_length"], paper["claimed_window"])
            ],
        }
    )


def figure(view: Sweeps, kind: str):
    """Accuracy by length on ``kind``, one line per reader with its band, its NoLiMa bar and
    effective length; NoLiMa's own curves beside the needle questions (its kind of needle)."""
    curves = view.curves[view.curves["kind"] == kind]
    paper = published() if kind == "qa" else None
    return length_curves(curves, marks(view, kind), paper=paper)


def figure_text(view: Sweeps, kind: str) -> FigureText:
    """The caption and alt text of :func:`figure`, from what it draws."""
    curves = view.curves[view.curves["kind"] == kind]
    readers = list(dict.fromkeys(curves["reader"]))
    needles = ", ".join(f"{r}: n = {curves[curves['reader'] == r]['n'].max()}" for r in readers)
    found = [
        f"{r} {view.found[r, kind]['nolima'].text()}" for r in readers if (r, kind) in view.found
    ]
    theirs = " NoLiMa's own curves (theirs, grey) are drawn for scale." if kind == "qa" else ""
    caption = (
        f"Accuracy on {design.KIND_NAMES[kind]} by context length, each reader's 95% band "
        f"(bootstrap over needles; {needles} needles), its bar (85% of its own base, dashed) "
        f"and its NoLiMa effective length with the 95% interval on the length: "
        f"{'; '.join(found) or 'none measured'}.{theirs}"
    )
    lows = [percent_words(a) for a in curves.groupby("reader")["accuracy"].min()]
    alt = (
        f"Line chart of accuracy against context length on a log axis for "
        f"{len(readers)} reader{'s' if len(readers) != 1 else ''} on "
        f"{design.KIND_NAMES[kind]}; the lowest points are "
        f"{', '.join(lows) or 'none'}."
    )
    return FigureText(caption, alt)


# ---------------------------------------------------------------------------------------------
# What the chapter's page quotes and shows beyond the findings page's table and figures

DIRECTION_WORDS = {
    -1: "below its bar within half the window",
    1: "above its bar at half the window",
    0: "not decided at this n",
}


def rules() -> dict[str, Claim]:
    """The chapter's half-window rules, wherever they stand: in ``claims.csv`` once the book
    judges them, in the pre-registration file until then."""
    listed = read_claims() + read_claims(repo_root() / PREREGISTERED_FILE)
    return {c.id: c for c in listed if c.id in CLAIMS.values()}


def premise_words(est: Estimate, claim: Claim) -> str:
    """The rule's premise on ``est``: "met", or the checks that failed."""
    judged = judge(est, claim)
    if judged.premise_met is None:
        return "not measured yet"
    return "met" if judged.premise_met else f"not met: {judged.premise_failed}"


def half_window_table(view: Sweeps) -> pd.DataFrame:
    """One row per reader and needle kind: the pre-registered comparison (accuracy at the
    longest length within half the window minus 85% of the reader's own base, paired by
    needle) with its interval, n and exact p, the direction the interval and the test agree
    on, and whether the rule's premise holds; a reader whose rows do not reach its claim's
    length says so."""
    rule = rules()
    out = []
    for reader in view.readers:
        at = design.reader_claim_length(view.windows[reader])
        for kind in design.KINDS:
            est = view.estimates.get(reader, {}).get(CLAIMS[kind])
            measured = view.measured(reader, kind)
            out.append(
                {
                    "reader": reader,
                    "needles": design.KIND_NAMES[kind],
                    "claim's length": tokens_text(at) if at else "no window",
                    "base (%)": f"{est.facts['base']:.1f}" if est else "",
                    "difference (pts, 95% CI)": (
                        points_ci(est.difference, est.ci_low, est.ci_high)
                        if est
                        else f"waits for rows at {tokens_text(at) if at else 'the window'} "
                        f"(measured {measured})"
                    ),
                    "n (needles)": est.n if est else "",
                    "p (exact)": format_p(est.decision_p) if est else "",
                    "direction": DIRECTION_WORDS[decided_sign(est)] if est else "",
                    "premise": premise_words(est, rule[CLAIMS[kind]]) if est else "",
                }
            )
    return pd.DataFrame(out)


def answer_sentence(view: Sweeps) -> str:
    """Each reader's NoLiMa effective length per needle kind, with the lengths measured and
    its window, one clause per reader: the page's answer, first."""
    clauses = []
    for reader in view.readers:
        found = [
            f"{design.KIND_NAMES[kind]} {view.found[reader, kind]['nolima'].text()} "
            f"(measured {view.measured(reader, kind)})"
            for kind in design.KINDS
            if (reader, kind) in view.found
        ]
        if found:
            window = view.windows[reader]
            of = f" of its {tokens_text(window)}-token window" if window else ""
            clauses.append(f"{reader}{of}: {'; '.join(found)}")
    if not clauses:
        return "No reader has answered the sweep at every base length yet."
    return "NoLiMa effective length, with its 95% interval: " + ". ".join(clauses) + "."


def bars_quoted() -> dict[str, str]:
    """The definitions' bars, as pages quote them (one source: the library's)."""
    return {"el-nolima-share": f"{100 * NOLIMA_SHARE:.0f}%", "el-ruler-bar": f"{RULER_BAR}%"}


def pending_sentence(params: dict, claimed: bool) -> str:
    """What the run's lengths leave to come, in words: the sweep scale's lengths beyond the
    run's, and whether the half-window claim is judged in the matrix yet."""
    beyond = [n for n in design.claim_lengths() if n not in params["lengths"]]
    said = ""
    if beyond:
        said = (
            f"The book's own run asks the lengths {lengths_text(params['lengths'])}; the "
            f"rows at {lengths_text(beyond)} are shown for each reader as they are answered. "
        )
    if claimed:
        return said + "The half-window claim is judged in the matrix for every reader."
    return said + (
        "The half-window claim joins the matrix once the default reader has answered at "
        f"{tokens_text(design.default_claim_length())} tokens, half its window; until then its "
        "rule waits, unchanged, in the pre-registration file, and each reader's comparison "
        "is shown below without a verdict."
    )


def lengths_text(lengths) -> str:
    """``250, 500, 1K and 2K``."""
    return and_list([tokens_text(n) for n in sorted(lengths)])


def overlap_quoted(overlap: pd.DataFrame) -> dict[str, str]:
    """The needle questions' measured overlap with their needles, for the prose."""
    qa_row = overlap.iloc[1]
    return {
        "el-qa-questions": f"{qa_row['questions']:,}",
        "el-kv-needles": f"{overlap.iloc[0]['questions']:,}",
        "el-overlap": (
            f"{qa_row['sharing a word with the needle (%)']:.0f}% of the needle questions share "
            f"a content word with their needle (a mean of {qa_row['words shared (mean)']:.1f} "
            "words), against every key-value question, which names its key"
        ),
    }


@dataclass(kw_only=True)
class EffectiveLengthResult(ChapterResult):
    """The page's numbers: every reader's sweep (:class:`Sweeps`, the run's lengths widened
    to the sweep scale's), the needle kinds' measured overlap, the half-window comparison
    per reader and the Data line."""

    view: Sweeps
    overlap: pd.DataFrame
    half_window: pd.DataFrame
    provenance: str
