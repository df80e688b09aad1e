"""The book's findings page: each paper's headline claims, the paper's number, ours with a
95% interval and n, and a verdict by the rule in :mod:`longctx.claims`.

The claims themselves are data (``data/paper/claims.csv``, read by
:func:`longctx.claims.read_claims`: what each paper claims, its number, the direction of its
effect, the chapter and section that test it). Our number for
each claim is computed once, by its chapter (``chapter.claims(run)`` over the chapter's
run at its book scale, the same function its notebook shows), so the chapter, the
findings page and the prose glued from them cannot disagree.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections.abc import Callable, Sequence
from functools import cache, partial
from pathlib import Path
from typing import TypeVar

import pandas as pd

from . import __version__
from .chapters import Run, contract
from .chapters.effective_length import design as sweep_design
from .chapters.effective_length.numbers import Sweeps, stored_sweep, sweeps
from .chapters.kv_retrieval import numbers as kv_numbers
from .chapters.length_alone import analysis as la_analysis
from .chapters.length_alone import numbers as la_numbers
from .chapters.scales import read_scales, scale_of
from .claims import (
    PAPER_DIR,
    PRECISION_TARGET,
    VERDICT_MARK,
    VERDICTS,
    Claim,
    Estimate,
    is_fragile,
    judge,
    read_claims,
    relative_change,
    rows_fragment,
    underpowered,
    verdict_state,
)
from .data import COMMITTED_DIR, cache_dir
from .effective_length import bounds as length_bounds
from .errors import DataFileError
from .models import DEFAULT_MODEL
from .paths import build_commit, repo_root
from .plots import FigureText
from .reader import Reader
from .report import collapsed, estimate_ci, format_p, pct_ci, tokens_text
from .store import file_digest, recording_reads
from .tables import stored_readers

SWEEP = "effective_length"  # the chapter whose sweep measures effective lengths


def estimates(
    results_dir: str | Path,
    claims: list[Claim],
    reader: Reader | None = None,
    scale_name: str = "book",
    strict: bool = True,
) -> dict[str, Estimate]:
    """Our estimate of every claim, from its chapter at the chapter's ``scale_name`` scale
    (each chapter computed once); a claim whose rows are not stored is left out, which
    ``strict`` (the default reader's page, whose rows are all committed) refuses."""
    reader = reader or Reader()
    out: dict[str, Estimate] = {}
    for chapter in dict.fromkeys(c.chapter for c in claims):
        # findings reads rows; it never runs a model, not even to plan
        run = Run.of(contract(chapter), reader, scale_name, results_dir, dry_run=True)
        out.update(chapter_claims(run))
    missing = [c.id for c in claims if c.id not in out]
    if missing and strict:
        raise DataFileError(
            f"no chapter computes the claims {missing}; check data/paper/claims.csv"
        )
    return out


# ---------------------------------------------------------------------------------------------
# Each chapter's estimates of a reader, kept between processes

ANALYSIS_CACHE = "analyses"  # under $LONGCTX_CACHE
T = TypeVar("T")


def chapter_claims(run: Run) -> dict:
    """``run.chapter.claims(run)``, kept by :func:`kept_analysis` under the run's identity:
    the same chapter, parameters and reader (and the rows it read) give the kept estimates."""
    return kept_analysis(_run_identity(run), lambda: run.chapter.claims(run))


def kept_analysis(identity: list, compute: Callable[[], T]) -> T:
    """``compute()``, kept under ``$LONGCTX_CACHE/analyses`` and reused while nothing it
    depends on changed: the same ``identity`` (what it computes, for whom), the same library
    code, paper tables and public data, and the same bytes in every store file it read
    (recorded as it ran, present or absent). A changed row recomputes the analyses that read
    its store, for its reader only; a cache that cannot be written or read only costs the
    computation."""
    key = json.dumps([*identity, _inputs_digest()], sort_keys=True, default=str)
    path = cache_dir() / ANALYSIS_CACHE / f"{hashlib.sha256(key.encode()).hexdigest()}.pkl"
    kept = _load(path)
    if kept is not None and all(file_digest(Path(f)) == d for f, d in kept["reads"].items()):
        return kept["value"]
    with recording_reads() as reads:
        computed = compute()
    _save(path, {"reads": {str(f): file_digest(f) for f in sorted(reads)}, "value": computed})
    return computed


def _run_identity(run: Run) -> list:
    return [
        run.chapter.name,
        run.params,
        run.dry_run,
        *_reader_identity(run.reader, run.results),
    ]


def _reader_identity(reader: Reader, results_dir: str | Path) -> list:
    return [
        reader.model,
        reader.fingerprint,
        reader.prompt_mode,
        str(Path(results_dir).resolve()),
    ]


@cache
def _inputs_digest() -> str:
    """One digest of the library's code and data files, the paper tables and the committed
    public data: what an analysis computes besides the rows."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    folders = [package, repo_root() / PAPER_DIR, COMMITTED_DIR]
    for folder in folders:
        for f in sorted(folder.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                digest.update(str(f.relative_to(folder)).encode())
                digest.update(file_digest(f).encode())
    return digest.hexdigest()


def _load(path: Path):
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except Exception:  # absent, cut short or from another version: computed again
        return None


def _save(path: Path, value) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass


def findings_table(
    results_dir: str | Path,
    claims: list[Claim] | None = None,
    ours: dict[str, Estimate] | None = None,
):
    """One row per claim: paper, claim, the paper's number, ours (difference, interval, n, p,
    the two sides), model/setting, the verdict with its direction, magnitude and premise,
    and the chapter section that shows it. ``ours``: the default reader's estimates, where
    the caller has them (the claims x readers matrix computes them)."""
    claims = claims if claims is not None else read_claims()
    ours = ours if ours is not None else estimates(results_dir, claims)
    out = []
    for c in claims:
        est = ours[c.id]
        judged = judge(est, c)
        relative = relative_change(est, c)
        out.append(
            {
                "id": c.id,
                "paper": c.paper,
                "short": c.short or c.comparison,
                "claim": c.claim,
                "comparison": c.comparison,
                "paper_value": c.paper_value,
                "paper_effect": c.paper_effect,
                "difference": est.difference,
                "ci_low": est.ci_low,
                "ci_high": est.ci_high,
                "n": est.n,
                "needed": est.needed,
                "p": est.p,
                "detail": est.detail,
                "control": est.control,
                "treatment": est.treatment,
                # each side's level interval, which a level claim and a chance floor read
                "control_ci": est.side_interval("control"),
                # the effect as a share of the level it starts from, ours and the paper's
                "relative_ours": relative[0],
                "relative_paper": relative[1],
                "treatment_ci": est.side_interval("treatment"),
                "facts": dict(est.facts),
                "setting": c.setting,
                "kind": c.kind,
                "margin": c.margin,
                "scale": c.scale,
                "verdict": judged.verdict,
                "stability": est.stability,
                "state": verdict_state(judged.verdict, est.stability),
                "direction": judged.direction,
                "magnitude": judged.magnitude,
                "magnitude_short": judged.magnitude_short,
                "premise": judged.premise,
                "premise_met": judged.premise_met,
                "chapter": c.chapter,
                "label": c.label,
                "rows": rows_fragment(est),  # the sample browser's filter to its rows
                "experiment": c.experiment,
            }
        )
    return pd.DataFrame(out)


def underpowered_words(n: int, needed) -> str:
    """The note of a claim whose interval is wider than the book's target."""
    more = (
        f" at the spread observed, about {int(needed):,} units would give ±{PRECISION_TARGET:g}"
        if needed == needed and needed is not None and needed > n
        else ""
    )
    return (
        f"† Under-powered: its interval is wider than ±{PRECISION_TARGET:g} points, the "
        f"book's precision target, with n = {n:,}{more}; read its verdict as provisional."
    )


def relative_words(ours: float | None, paper: float | None) -> str:
    """A relative change for a table cell: ours, then the paper's, as shares of the level
    each starts from (a dash where a level is unknown)."""
    if ours is None or ours != ours:
        return "—"
    paper_words = f" · paper {paper:+.0f}%" if paper is not None and paper == paper else ""
    return f"{ours:+.0f}%{paper_words}"


def tally(table) -> dict[str, int]:
    """How many claims got each verdict, in :data:`~longctx.claims.VERDICTS` order."""
    counts = table["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


def tally_markdown(table) -> str:
    """The verdict tally as one line of the page."""
    parts = [f"{VERDICT_MARK[v]}: **{n}**" for v, n in tally(table).items() if n]
    return f"{len(table)} claims. " + " · ".join(parts)


def _verdict_cell(r) -> str:
    """The verdict with its three parts, short: direction, magnitude, premise."""
    parts = [r.direction, r.magnitude_short]
    if r.premise and r.premise_met:
        parts.append("premise met")
    held = getattr(r, "stability", None)
    if held is not None and held == held:
        fragile = is_fragile(r.verdict, held)
        parts.append(f"**fragile**: holds in {held:.0%}" if fragile else f"holds in {held:.0%}")
    return f"{VERDICT_MARK[r.verdict]}: " + "; ".join(p for p in parts if p)


def as_markdown(table, rows_href: Callable[[str], str | None] | None = None) -> str:
    """The findings table as MyST Markdown, one table per paper; each row links to the chapter
    section that shows its data (``{ref}`` roles, so a missing section fails the book build).
    The verdict cell gives its direction, magnitude and premise; the notes after each table
    give the comparison's sides, our setting, the claim's kind and the premise check with its
    value. A dagger marks an interval wider than :data:`~longctx.claims.PRECISION_TARGET` on a
    side (under-powered: its note says how many units would reach the target). ``rows_href``
    maps a claim's experiment to the page that browses its rows
    (``longctx.downloads.browser_href``), linked beside the section."""
    parts = []
    for paper, rows in table.groupby("paper", sort=False):
        summary = (
            f"<strong>{paper}</strong>: {len(rows)} claim{'s' if len(rows) != 1 else ''} on the "
            "default reader, each with its sides, setting, magnitude and premise"
        )
        lines = [
            "| # | claim | paper | ours [95% CI] | relative change | n | p | verdict | data |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        notes = []
        for k, r in enumerate(rows.itertuples(), 1):
            wide = underpowered(r, r.scale)
            ours = estimate_ci(r.difference, r.ci_low, r.ci_high, scale=r.scale, bold=True)
            href = rows_href(r.experiment) if rows_href and r.experiment else None
            browse = f' · <a href="{href}#{r.rows}">rows</a>' if href and r.rows else ""
            lines.append(
                f"| {k} | {r.claim} | {r.paper_value} | {ours}{' †' if wide else ''} "
                f"| {relative_words(r.relative_ours, r.relative_paper)} | {r.n} "
                f"| {format_p(r.p)} | {_verdict_cell(r)} | {{ref}}`section <{r.label}>`{browse} |"
            )
            kind = (
                f" A {r.kind} claim, judged by the margin {r.margin:g}"
                f"{' points' if r.scale == 'points' else ''} fixed in the claims file."
                if r.kind != "directional"
                else ""
            )
            notes.append(
                f"{k}. {r.comparison}: {r.detail}; {r.setting}.{kind} Magnitude: {r.magnitude}."
                + (f" Premise: {r.premise}." if r.premise else "")
                + (f" {underpowered_words(r.n, r.needed)}" if wide else "")
            )
        parts.append(collapsed(summary, "\n".join(lines) + "\n\n" + "\n".join(notes)))
    return "\n\n".join(parts)


def forest_text(table) -> FigureText:
    """The default reader's forest of claims in points: caption and alt text, from its rows."""
    shown = table[table["scale"] == "points"]
    counts = shown["verdict"].value_counts()
    caption = (
        f"Every headline claim measured in points on the default reader ({len(shown)} of "
        f"{len(table)} claims), as a paired difference (treatment minus control, as named on "
        "the left). Bars: our 95% bootstrap interval over independent units; diamonds: the "
        f"paper's reported effect where it gives one ({int(shown['paper_effect'].notna().sum())}"
        "). Colour: the verdict."
    )
    alt = (
        f"Forest plot of {len(shown)} paired differences in points, one per claim, coloured "
        f"by verdict ({', '.join(f'{n} {v}' for v, n in counts.items())}), with the paper's "
        "effects as diamonds."
    )
    return FigureText(caption, alt)


def quoted(table) -> dict:
    """The numbers the findings page's prose quotes: the competition headline (EM), the case
    the verdict rule's two-part test is explained by."""
    em = table.set_index("id").loc["sc-far-minus-hard"]
    return {
        "fi-sc-n": int(em["n"]),
        "fi-sc-em": f"{em['difference']:+.1f} [{em['ci_low']:+.1f}, {em['ci_high']:+.1f}]",
        "fi-sc-p": format_p(em["p"]),
    }


def statements(table) -> dict[str, bool]:
    """What the findings page's prose says in words, each as a check on the committed rows."""
    by = table.set_index("id")
    em = by.loc["sc-far-minus-hard"]
    return {
        "the competition headline's EM is inconclusive, on the line of p = 0.05": em["verdict"]
        == "inconclusive at this n"
        and em["ci_low"] > 0
        and 0.05 <= em["p"] < 0.06,
        "inclusion, the paper's clearer signal, is reproduced": by.loc[
            "sc-far-minus-hard-inclusion", "verdict"
        ]
        == "reproduced",
    }


CHANGES_FILE = PAPER_DIR / "verdict_changes.csv"


def read_verdict_changes(path: str | Path | None = None) -> pd.DataFrame:
    """The record of verdict moves (``data/paper/verdict_changes.csv`` unless ``path``) as
    text columns: date, reader (its results folder), claim, before, after, why."""
    path = Path(path) if path else repo_root() / CHANGES_FILE
    changes = pd.read_csv(path, dtype=str, keep_default_na=False)
    if "reader" not in changes.columns:
        raise DataFileError(f"{path}: needs a reader column (the results folder of each move)")
    return changes


def last_recorded(changes: pd.DataFrame, reader: str | None = None) -> pd.Series:
    """Each recorded claim's last verdict in the record ``changes``, by claim id, for one
    reader (its results folder; the default reader's unless given)."""
    reader = reader or Reader().results_folder(repo_root() / "data" / "results")
    return changes[changes["reader"] == reader].groupby("claim")["after"].last()


def verdict_changes(table, path: str | Path | None = None) -> pd.DataFrame:
    """The maintained record of when a claim's verdict moved and why
    (``data/paper/verdict_changes.csv``: date, reader, claim, before, after, why), checked
    against the default reader's table: every recorded claim's last verdict must be its
    verdict now, so a change that moves one cannot land without its entry. Every other
    reader's cells are checked the same way against the matrix
    (:func:`longctx.matrix.unrecorded_moves`)."""
    path = Path(path) if path else repo_root() / CHANGES_FILE
    changes = read_verdict_changes(path)
    last = last_recorded(changes)
    now = table.set_index("id")["state"]
    stale = [c for c in now.index if c in last.index and last[c] != now[c]]
    if stale:
        raise DataFileError(
            f"{path}: the last recorded verdict of {stale} is not the verdict now; add a row "
            "saying when it moved and why"
        )
    return changes


def moves_markdown(changes: pd.DataFrame, claims: Sequence[Claim] | None = None) -> str:
    """The verdict moves (not the first verdicts) as a table, newest first, each claim named
    in words (its short label from the claims file)."""
    moved = changes[changes["before"] != ""].iloc[::-1]
    if moved.empty:
        return "No verdict has moved since the first recorded ones."
    short = {c.id: c.short for c in (claims if claims is not None else read_claims())}
    lines = ["| date | reader | claim | before | after | why |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r.date} | {r.reader} | {short.get(r.claim, r.claim)} | {r.before} | {r.after} | {r.why} |"
        for r in moved.itertuples()
    ]
    readers = moved["reader"].nunique()
    summary = (
        f"{len(moved)} recorded move{'s' if len(moved) != 1 else ''} of {readers} "
        f"reader{'s' if readers != 1 else ''}, newest first ({moved['date'].iloc[0]})"
    )
    return collapsed(summary, "\n".join(lines))


def download_line(prefix: str = "../") -> str:
    """A link to this table as CSV in the built site (``longctx.downloads`` writes it)."""
    return (
        f'<a href="{prefix}downloads/findings.csv">Download this table (CSV)</a>, with every '
        "claim's interval, n, p, verdict, direction, magnitude and premise; each chapter links "
        "its rows."
    )


def provenance(results_dir: str | Path) -> str:
    """Where the findings table comes from, for the line under it."""
    return (
        f"Computed from `{results_dir}` with longctx {__version__}, commit {build_commit()}. "
        "Differences in points; "
        "p: exact two-sided sign-flip test on the per-unit differences (Pearson's test for a "
        "correlation)."
    )


# ---------------------------------------------------------------------------------------------
# Effective length: every reader's, from the sweep's stored rows


def effective_lengths(results_dir: str | Path, readers: Sequence[Reader] | None = None) -> Sweeps:
    """Every reader's (or ``readers``') effective lengths at the sweep's book scale, on
    every length of the sweep scale it has answered (:func:`sweep_design.read_params`),
    read from its stored rows through its own plan (no model runs), the default reader
    first."""
    params = sweep_design.read_params(scale_of(SWEEP, read_scales(SWEEP), "book", {}))
    if readers is None:
        readers = sorted(
            stored_readers(results_dir, sweep_design.EXPERIMENT),
            key=lambda r: ((r.model, r.backend.name) != (DEFAULT_MODEL, "hf"), r.label),
        )
    by_reader = {}
    for reader in readers:
        identity = ["effective-length sweep", params, *_reader_identity(reader, results_dir)]
        if sweep := kept_analysis(identity, partial(stored_sweep, reader, results_dir, params)):
            by_reader[reader.label] = sweep
    return sweeps(by_reader)


BOUNDS_CAPTION = (
    "What the chapters' own lengths say of each reader's NoLiMa effective length on their "
    "tasks: accuracy at each length (key-value records: the gold pair first and in the "
    "middle, query at the end; GSM8K: no padding against essay padding between the evidence "
    "and the question; 95% bootstrap over records or problems, n of them), the shortest "
    "length the base; a bound holds where the intervals decide it."
)


def _kv_curve(run: Run, rows: list[dict]) -> pd.DataFrame:
    return kv_numbers.size_curve(kv_numbers.scored(rows, run.params))


def _padding_curve(run: Run, rows: list[dict]) -> pd.DataFrame:
    return la_analysis.padding_curve(la_numbers.solved(rows, run.params))


# task -> the chapter whose rows measure it at several lengths, and its length curve
BOUND_TASKS: dict[str, tuple[str, Callable[[Run, list[dict]], pd.DataFrame]]] = {
    "key-value records": ("kv_retrieval", _kv_curve),
    "GSM8K, essay padding": ("length_alone", _padding_curve),
}
BOUNDS_COLUMNS = ["reader", "task", "accuracy by length (%, 95% CI)", "at least", "below"]


def length_bounds_table(
    results_dir: str | Path, readers: Sequence[Reader] | None = None
) -> pd.DataFrame:
    """Per task of :data:`BOUND_TASKS` and reader (or each of ``readers``) with rows of its
    chapter (the book scale, read through the reader's plan and kept like a chapter's
    claims): accuracy at each length and the bounds it puts on the NoLiMa effective length
    (:func:`longctx.effective_length.bounds`)."""
    out = []
    for task, (name, curve_of) in BOUND_TASKS.items():
        chapter = contract(name)
        stored = stored_readers(results_dir, chapter.design.EXPERIMENT)
        for reader in stored if readers is None else [r for r in readers if r in stored]:
            run = Run.of(chapter, reader, "book", results_dir, dry_run=True)
            curve = kept_analysis(
                ["length curve", task, *_run_identity(run)],
                partial(_stored_curve, run, curve_of),
            )
            if curve is None or len(curve) < 2:
                continue
            lower, upper = length_bounds(curve)
            points = [
                f"{c.point}, {tokens_text(c.length)} tokens: "
                f"{pct_ci(c.accuracy, c.ci_low, c.ci_high, 0)} (n = {c.n})"
                for c in curve.itertuples()
            ]
            out.append([reader.label, task, "; ".join(points), lower, upper])
    return pd.DataFrame(out, columns=BOUNDS_COLUMNS)


def bounds_lines(table: pd.DataFrame) -> list[str]:
    """Each row of :func:`length_bounds_table` in one line (the command line's)."""
    out = []
    for r in table.to_dict("records"):
        said = [b for b in (r["at least"], r["below"]) if b != "none"]
        bound = f"{' and '.join(said)} tokens" if said else "not decided by these lengths"
        out.append(
            f"effective-length bound, {r['task']} ({r['reader']}): {bound}; "
            f"accuracy (%, 95% CI) {r['accuracy by length (%, 95% CI)']}"
        )
    return out


def _stored_curve(run: Run, curve_of) -> pd.DataFrame | None:
    rows = run.rows(run.chapter.design.EXPERIMENT)
    return curve_of(run, rows) if rows else None
