"""The claims x readers matrix: every claim of ``data/paper/claims.csv`` judged on every reader
that has rows under ``data/results/``.

A reader is one model on one backend: one folder of ``data/results`` (``<model>`` for
``hf``, ``<model>--<backend>`` otherwise), found by looking, never listed, so committing a
new reader's rows adds a column. Each cell is exactly one of:

* **judged**: the claim's estimate on this reader's rows, from the same chapter code the book
  uses (:func:`longctx.findings.estimates` at the ``claims`` scale), judged by
  :func:`longctx.claims.judge`, with whether its rule was **pre-registered** for this reader:
  the claim's rule (kind, margin, premise, direction and the paper's effect) last changed in a
  git commit made before this reader's first row in the claim's store;
* **premise not measured**: every unit's rows, but the rows a premise check reads (a
  recitation at the long length, say) only in part: the estimate is shown, never judged;
* **running**: rows for only part of the claim's units (``n`` of the default reader's ``n``),
  never judged from the subset;
* **does not fit**: the claim's longest prompt with its answer budget exceeds the reader's
  window (from the reader's claims plan, :mod:`longctx.reproduce`);
* **needs a GPU**: the claim's prompts would take more than :data:`GPU_HOURS` on this
  project's CPU at the reader's measured speed (its prompt tokens are given);
* **needs hf**: the claim needs what only the ``hf`` backend computes (attention weights,
  masked padding);
* **not run**: no rows; the cell gives the command that fills it.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from io import StringIO
from pathlib import Path

import pandas as pd

from .backends import backend_class
from .chapters import contract, contracts
from .claims import (
    CLAIMS_FILE,
    PRECISION_TARGET,
    PREREGISTERED_FILE,
    STABLE,
    UNMEASURED,
    VERDICT_MARK,
    Claim,
    Estimate,
    Judgement,
    half_width,
    is_fragile,
    judge,
    read_claims,
    rows_fragment,
    underpowered,
    verdict_state,
)
from .errors import DataFileError, LongctxError, warn_line
from .findings import estimates, findings_table, read_verdict_changes
from .models import DEFAULT_MODEL
from .paths import repo_root
from .plots import RATIO_LIMITS, FigureText, effects_grid
from .reader import Reader, model_label, row_backend
from .report import and_list, collapsed
from .reproduce import read_claims_plan
from .resampling import STABILITY_RESAMPLES
from .store import ResultsStore
from .tables import first_row, folder_reader

CLOSED_BOOK = "litm-qa-closed-book"  # the claim whose control is a reader's closed-book level
GPU_HOURS = 8.0  # a claim whose prompts would take longer on this CPU is left to a GPU
NOT_TESTABLE = "not testable"
STATUSES = (
    "judged",
    NOT_TESTABLE,
    "running",
    "premise not measured",
    "does not fit",
    "needs a GPU",
    "needs hf",
    "not run",
)


@dataclass(frozen=True)
class Column:
    """A reader with rows: its results folder, the model and backend its rows name, and the
    :class:`Reader` whose stores are that folder (rows are read; nothing is loaded)."""

    folder: str
    model: str
    backend: str
    reader: Reader

    @property
    def label(self) -> str:
        return model_label(self.model, self.backend)

    @property
    def short_label(self) -> str:
        """The label on short lines, for a figure's column head: the model's name without
        its "-instruct", cut at hyphens, and the backend in brackets below."""
        name = re.sub(r"-instruct$", "", self.model.split("/")[-1], flags=re.I)
        lines: list[str] = []
        for part in name.split("-"):
            if lines and len(lines[-1]) + len(part) < 11:
                lines[-1] += f"-{part}"
            else:
                lines.append(part)
        return "\n".join(lines + ([f"({self.backend})"] if self.backend != "hf" else []))

    def command(self, chapter: str, scale_name: str = "claims") -> str:
        """The command that fills this reader's claims of ``chapter`` (or, with
        ``scale_name``, the rows a premise reads)."""
        backend = f" --backend {self.backend}" if self.backend != "hf" else ""
        return (
            f"longctx reproduce --scale {scale_name} --model {self.model}{backend} "
            f"--chapters {chapter}"
        )

    def premise_command(self, chapter: str) -> str | None:
        """The command that stores the rows ``chapter``'s premises read beyond its claims'
        own (its ``premise_scale``), or None where its premises need none."""
        scale_name = contracts()[chapter].premise_scale
        return self.command(chapter, scale_name) if scale_name else None


@dataclass(frozen=True)
class Move:
    """A recorded move of a cell's verdict (``data/paper/verdict_changes.csv``): what it
    ``was``, the ``date`` it moved and ``why``."""

    was: str
    date: str
    why: str

    def words(self) -> str:
        return f"was: {self.was}, moved {self.date}"


def last_moves(changes: pd.DataFrame) -> dict[tuple[str, str], tuple[str, Move]]:
    """(reader folder, claim id) -> (the state it moved to, the move), for each cell whose
    verdict the log records as having moved (first verdicts are not moves)."""
    moved = changes[changes["before"] != ""]
    return {
        (r.reader, r.claim): (r.after, Move(r.before, r.date, r.why))
        for r in moved.itertuples()  # in file order: the last move wins
    }


@dataclass(frozen=True)
class Cell:
    """One claim on one reader (see the module docstring for ``status``)."""

    claim: Claim
    column: Column
    status: str
    estimate: Estimate | None = None
    judgement: Judgement | None = None
    note: str = ""  # the status in words: the command to run, the window, the tokens
    preregistered: bool | None = None  # None: no rows, or no git history to tell
    rule_date: datetime | None = None
    first_row: datetime | None = None
    floor: str = ""  # the chance floor in words, where the claim has one
    fits: str = ""  # the longest prompt against the window, where the reader's plan says
    moved: Move | None = None  # the verdict log's last move into this cell's state

    @property
    def stability(self) -> float | None:
        """The share of resamples of the units in which the verdict holds."""
        return self.estimate.stability if self.estimate is not None else None

    @property
    def fragile(self) -> bool:
        """A verdict that says something but holds in fewer than :data:`STABLE` of the
        resamples of its units: not counted as decided."""
        return self.judgement is not None and is_fragile(self.judgement.verdict, self.stability)

    @property
    def decided(self) -> bool:
        """Whether the cell says something: a direction (the interval and the exact test
        agree), an equivalence or a paper's effect ruled out by the interval, or a premise
        judged unmet, holding in at least :data:`STABLE` of the resamples of its units;
        "inconclusive at this n" and a fragile verdict do not."""
        return (
            self.judgement is not None
            and self.judgement.verdict != "inconclusive at this n"
            and not self.fragile
        )

    @property
    def state(self) -> str:
        """What the cell says, as the verdict log records it: the verdict, "fragile
        (<verdict>)", "not testable", or the status of a cell without a verdict."""
        if self.judgement is None:
            return self.status
        return verdict_state(self.judgement.verdict, self.stability)


@dataclass(frozen=True)
class ModelCell:
    """One claim on one model: its cells on each backend with rows, ``hf`` first. Backends
    are replications of one model: where two judge the claim, it is decided only when they
    give the same verdict, and "backend-sensitive" otherwise. ``reuse`` is the share of each
    backend's rows (of the claim's store) answered with a reused prompt prefix."""

    cells: tuple[Cell, ...]
    reuse: Mapping[str, float] = field(default_factory=dict)

    @property
    def judged(self) -> list[Cell]:
        return [c for c in self.cells if c.judgement is not None]

    @property
    def primary(self) -> Cell:
        """The cell shown first: the first backend that judges the claim, else hf's."""
        return (self.judged or list(self.cells))[0]

    @property
    def replicated(self) -> bool:
        return len(self.judged) >= 2

    @property
    def backend_sensitive(self) -> bool:
        return self.replicated and len({c.judgement.verdict for c in self.judged}) > 1

    @property
    def decided(self) -> bool:
        return (
            bool(self.judged) and not self.backend_sensitive and all(c.decided for c in self.judged)
        )

    @property
    def state(self) -> str:
        return "backend-sensitive" if self.backend_sensitive else self.primary.state


@dataclass
class Matrix:
    claims: list[Claim]
    columns: list[Column]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    # (folder, experiment) -> share of a non-hf reader's rows answered with a reused prefix
    reuse: dict[tuple[str, str], float] = field(default_factory=dict)

    def cell(self, claim_id: str, folder: str) -> Cell:
        return self.cells[claim_id, folder]

    @cached_property
    def models(self) -> dict[str, list[Column]]:
        """Each model with rows and its readers (one per backend), hf first: the columns of
        the matrix as the book shows it, the default model first."""
        out: dict[str, list[Column]] = {}
        for col in self.columns:
            out.setdefault(col.model, []).append(col)
        return {
            m: sorted(cols, key=lambda c: (c.backend != "hf", c.backend)) for m, cols in out.items()
        }

    def model_cell(self, claim_id: str, model: str) -> ModelCell:
        cells = tuple(self.cells[claim_id, c.folder] for c in self.models[model])
        experiment = cells[0].claim.experiment
        return ModelCell(
            cells,
            {
                c.column.backend: self.reuse[c.column.folder, experiment]
                for c in cells
                if (c.column.folder, experiment) in self.reuse
            },
        )

    def reproduced_by(self, claim_id: str) -> tuple[int, int]:
        """(models whose verdict on the claim is a decided "reproduced", models judged on it;
        a model's backends are one model)."""
        judged = [mc for m in self.models if (mc := self.model_cell(claim_id, m)).judged]
        won = sum(mc.decided and mc.primary.judgement.verdict == "reproduced" for mc in judged)
        return won, len(judged)

    def column_cells(self, folder: str) -> list[Cell]:
        return [self.cells[c.id, folder] for c in self.claims]


# ---------------------------------------------------------------------------------------------
# Readers, found by looking


def claim_experiments(claims: Sequence[Claim]) -> set[str]:
    """Every store a claim's chapter reads (its ``experiments``)."""
    return {e for c in claims for e in contract(c.chapter).experiments}


READERS_ENV = "LONGCTX_READERS"  # reader folders, comma-separated: the matrix's columns only


def columns(results_dir: str | Path, claims: Sequence[Claim] | None = None) -> list[Column]:
    """Every reader with rows of some claim's store under ``results_dir``, the default reader
    first, then by folder name. The model and backend come from the folder's rows. Where
    ``$LONGCTX_READERS`` names reader folders, only those (a book of the readers one cares
    about; chapters' figures still draw every reader)."""
    claims = claims if claims is not None else read_claims()
    wanted = claim_experiments(claims)
    stores: dict[str, list[ResultsStore]] = {}
    for store in ResultsStore.all_under(results_dir):
        if store.dir.name in wanted:
            stores.setdefault(store.dir.parent.name, []).append(store)
    if chosen := [f.strip() for f in os.environ.get(READERS_ENV, "").split(",") if f.strip()]:
        if unknown := [f for f in chosen if f not in stores]:
            raise LongctxError(
                f"{READERS_ENV} names {', '.join(unknown)}, which have no claim rows under "
                f"{results_dir}; readers with rows: {', '.join(sorted(stores))}"
            )
        stores = {f: stores[f] for f in chosen}
    out = []
    for folder, found in sorted(stores.items()):
        try:
            row = next((r for s in found if (r := first_row(s)) is not None), None)
        except DataFileError as err:  # one damaged store does not stop every other reader
            warn_line(f"skipping the reader {folder}: {err}")
            continue
        if row is None or (reader := folder_reader(row, folder, results_dir)) is None:
            continue
        out.append(Column(folder, row["model"], row_backend(row), reader))
    return sorted(out, key=lambda c: (c.model != DEFAULT_MODEL or c.backend != "hf", c.folder))


def prefix_reuse(reader: Reader, results_dir: str | Path, experiment: str) -> float:
    """The share of ``reader``'s rows of ``experiment`` answered with a prompt prefix reused
    from the previous prompt (llama.cpp's KV cache: ``engine.prefix_reused``), which the
    backends page shows can change answers; 0 where none was."""
    rows = ResultsStore(results_dir, reader.results_folder(results_dir), experiment).rows()
    reused = sum(bool((r.get("engine") or {}).get("prefix_reused")) for r in rows)
    return reused / len(rows) if rows else 0.0


# ---------------------------------------------------------------------------------------------
# When each claim's rule was fixed, from git

RULE_FIELDS = ("kind", "margin", "premise", "direction", "paper_effect")


def rule_dates(path: str | Path | None = None) -> dict[str, datetime] | None:
    """claim id -> the commit time at which its rule (:data:`RULE_FIELDS`) took its present
    form in ``data/paper/claims.csv`` or, before its chapter joined the book, in the
    pre-registration file ``data/paper/preregistered.csv`` (the same columns: a rule fixed
    there before any row counts from that commit, and keeps its date when it moves, unchanged,
    into the claims file); None where git history is not available (a copy without
    ``.git``). A claim whose rule is not committed yet has no date."""
    root = repo_root()
    rels = [
        str(Path(path).relative_to(root)) if path else str(CLAIMS_FILE),
        str(PREREGISTERED_FILE),
    ]
    try:
        log = subprocess.run(
            ["git", "log", "--format=%H %cI", "--", *rels],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    if not log:
        return None
    commits = list(zip(log[0::2], log[1::2]))[::-1]  # oldest first
    now = _rules_in(lambda rel: _text(root / rel), rels)
    dates: dict[str, datetime] = {}
    for sha, when in commits:
        texts = {rel: _shown(root, sha, rel) for rel in rels}
        if not texts[rels[0]]:
            continue  # no claims file at this commit (a rename): it decides nothing
        rules = _rules_in(texts.__getitem__, rels)
        for claim, rule in now.items():
            if rules.get(claim) == rule:
                dates.setdefault(claim, datetime.fromisoformat(when))
            else:
                dates.pop(claim, None)  # changed after: the rule as it is now came later
    return dates


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _shown(root: Path, sha: str, rel: str) -> str:
    shown = subprocess.run(
        ["git", "show", f"{sha}:{rel}"], cwd=root, capture_output=True, text=True
    )
    return "" if shown.returncode else shown.stdout


def _rules_in(read: Callable[[str], str], rels: list[str]) -> dict[str, tuple]:
    """The rules of the claims file and the pre-registration file (the claims file's where
    both hold a claim), as ``read`` gives each file's text."""
    out: dict[str, tuple] = {}
    for rel in reversed(rels):
        text = read(rel)
        if text.strip():
            out.update(_rules(text))
    return out


def _rules(text: str) -> dict[str, tuple]:
    table = pd.read_csv(StringIO(text), dtype=str, keep_default_na=False)
    return {
        r["id"]: tuple(r.get(f, "") for f in RULE_FIELDS)
        for r in table.to_dict("records")
        if r.get("id")
    }


def first_row_time(reader: Reader, results_dir: str | Path, experiment: str) -> datetime | None:
    """When this reader's first row in ``experiment``'s store was made (rows carry ``created``)."""
    times = [
        datetime.strptime(r["created"], "%Y-%m-%dT%H:%M:%S%z")
        for r in reader.store(results_dir, experiment).rows()
        if r.get("created")
    ]
    return min(times, default=None)


# ---------------------------------------------------------------------------------------------
# The cells


def model_backends(results_dir: str | Path, model: str) -> list[str]:
    """The backends with claim rows of ``model`` under ``results_dir``, hf first: its
    replications, which ``longctx findings --model`` shows side by side."""
    found = {c.backend for c in columns(results_dir) if c.model == model}
    return sorted(found, key=lambda b: (b != "hf", b))


def column_of(reader: Reader, results_dir: str | Path) -> Column:
    """The column of a reader named on a command line (it may have no rows yet)."""
    return Column(reader.results_folder(results_dir), reader.model, reader.backend.name, reader)


def build(
    results_dir: str | Path,
    claims: Sequence[Claim] | None = None,
    only: Sequence[Column] | None = None,
    given: dict[str, dict[str, Estimate]] | None = None,
) -> Matrix:
    """The matrix of every claim on every reader with rows under ``results_dir`` (or on the
    ``only`` columns given); ``given`` holds estimates a caller has already computed, by
    reader folder (a chapter page's own reader)."""
    claims = list(claims if claims is not None else read_claims())
    cols = list(only) if only is not None else columns(results_dir, claims)
    given = given or {}
    ests = {}
    for c in list(cols):
        own = given.get(c.folder) or {}
        # the chapters ``given`` covers come from the caller; the others (a closed-book floor
        # another chapter measures) are computed here
        covered = {cl.chapter for cl in claims if cl.id in own}
        rest = [cl for cl in claims if cl.chapter not in covered]
        try:
            computed = (
                estimates(results_dir, rest, c.reader, scale_name="claims", strict=False)
                if rest
                else {}
            )
            ests[c.folder] = {**computed, **own}
        except DataFileError as err:
            if only is not None:  # the reader asked for: its fault is the answer
                raise
            warn_line(f"skipping the reader {c.folder}: {err}")
            cols.remove(c)
    matrix = Matrix(claims, cols)
    dates = rule_dates()
    # Every reader answers the same units, so the most any reader has is the claim's full n
    # (the default reader has every claim); a column named alone is measured against it.
    others = list(ests.values())
    default = Reader()
    if only is not None and default.results_folder(results_dir) not in ests:
        others.append(estimates(results_dir, claims, default, scale_name="claims", strict=False))
    full = {cl.id: max((e[cl.id].n for e in others if cl.id in e), default=0) for cl in claims}
    first: dict[tuple[str, str], datetime | None] = {}
    for col in cols:
        plan = read_claims_plan(Path(results_dir) / col.folder) or {}
        planned = plan.get("claims", {})
        for claim in claims:
            est = ests[col.folder].get(claim.id)
            key = (col.folder, claim.experiment)
            if est is not None and key not in first:
                first[key] = first_row_time(col.reader, results_dir, claim.experiment)
            if col.backend != "hf" and est is not None and key not in matrix.reuse:
                matrix.reuse[key] = prefix_reuse(col.reader, results_dir, claim.experiment)
            matrix.cells[claim.id, col.folder] = _cell(
                claim,
                col,
                est,
                full[claim.id],
                planned.get(claim.id),
                plan.get("window"),
                dates,
                first.get(key),
                ests[col.folder],
            )
    for (folder, claim_id), (after, move) in last_moves(read_verdict_changes()).items():
        cell = matrix.cells.get((claim_id, folder))
        if cell is not None and cell.state == after:  # the log describes these very rows
            matrix.cells[claim_id, folder] = replace(cell, moved=move)
    return matrix


def _cell(claim, col, est, full_n, planned, window, dates, first_row, col_estimates) -> Cell:
    floor = floor_words(claim, col_estimates)
    fits = ""
    if planned and planned.get("max_prompt_tokens") and window:
        fits = (
            f"longest prompt {planned['max_prompt_tokens']:,} + {planned['max_new_tokens']:,} "
            f"answer tokens of a {window:,}-token window"
        )
    if est is not None and est.n >= full_n and not est.testable:
        return _not_testable(claim, col, est, floor)
    if est is not None and est.n >= full_n:
        rule_date = (dates or {}).get(claim.id)
        pre = (
            None
            if dates is None or first_row is None
            else (rule_date is not None and rule_date < first_row)
        )
        try:
            judged = judge(est, claim)
        except LongctxError as e:  # a premise whose quantity this reader's rows lack
            return Cell(claim, col, "running", est, note=str(e), floor=floor)
        if judged.verdict == UNMEASURED:  # every unit, but the premise's rows part stored
            fill = col.premise_command(claim.chapter)
            note = judged.premise + (f"; its rows: {fill}" if fill else "")
            return Cell(claim, col, UNMEASURED, est, note=note, floor=floor)
        return Cell(
            claim,
            col,
            "judged",
            est,
            judged,
            preregistered=pre,
            rule_date=rule_date,
            first_row=first_row,
            floor=floor,
            fits=fits,
        )
    if est is not None:
        return Cell(
            claim,
            col,
            "running",
            est,
            note=f"{est.n} of {full_n} units stored; `{col.command(claim.chapter)}` resumes",
            floor=floor,
        )
    if planned:
        needs = planned.get("needs") or []
        capabilities = backend_class(col.backend).capabilities
        lacking = [n for n in needs if n not in capabilities]
        if lacking:
            return Cell(
                claim, col, "needs hf", note=f"needs {' and '.join(lacking)}: the hf backend"
            )
        if not planned.get("fits", True):
            total = planned["max_prompt_tokens"] + planned["max_new_tokens"]
            return Cell(
                claim,
                col,
                "does not fit",
                note=f"does not fit ({total:,} tokens > {window:,})",
                fits=fits,
            )
        if planned.get("estimated_seconds", 0) > GPU_HOURS * 3600:
            return Cell(
                claim,
                col,
                "needs a GPU",
                note=f"needs a GPU: {planned['missing_prompt_tokens']:,} prompt tokens "
                f"(about {planned['estimated_seconds'] / 3600:.0f} h on this CPU)",
                fits=fits,
            )
    return Cell(claim, col, "not run", note=f"not run: `{col.command(claim.chapter)}`", fits=fits)


def _not_testable(claim: Claim, col: Column, est: Estimate, floor: str) -> Cell:
    """The arm changed nothing: any difference is batch composition, never the claim's."""
    note = (
        "not testable: the treatment's prompts are the control's, prompt for prompt, "
        f"on all {est.n} units ({est.detail})"
    )
    return Cell(claim, col, NOT_TESTABLE, est, note=note, floor=floor)


def cell_states(matrix: Matrix) -> dict[tuple[str, str], str]:
    """Each cell that says something of its claim, by (reader folder, claim): its verdict,
    or "not testable". Part-run, unfit and unrun cells say nothing yet."""
    return {
        (folder, claim_id): cell.state
        for (claim_id, folder), cell in matrix.cells.items()
        if cell.judgement is not None or cell.status == NOT_TESTABLE
    }


def unrecorded_moves(matrix: Matrix, changes: pd.DataFrame) -> list[str]:
    """Cells whose state is not the last one ``changes`` (the verdict log) records for their
    reader and claim: a first verdict never recorded, or a move without its row."""
    last = changes.groupby(["reader", "claim"])["after"].last().to_dict()
    return [
        f"{folder} {claim_id}: recorded {last.get((folder, claim_id), 'nothing')!r}, now {state!r}"
        for (folder, claim_id), state in sorted(cell_states(matrix).items())
        if last.get((folder, claim_id)) != state
    ]


def floor_words(claim: Claim, col_estimates: dict[str, Estimate]) -> str:
    """The claim's chance floor in words: a guess among its options, or this reader's
    closed-book accuracy on NQ-Open where the claim reads NQ-Open documents."""
    if not claim.floor:
        return ""
    if claim.floor == "closed-book":
        cb = col_estimates.get(CLOSED_BOOK)
        if cb is None or cb.control is None:
            return "closed-book: not run"
        return f"closed-book {cb.control:.1f}% (n = {cb.n})"
    return f"chance {float(claim.floor):g}% ({claim.floor_why})"


# ---------------------------------------------------------------------------------------------
# The matrix as a table, in words and as a figure

SHORT_STATUS = {
    NOT_TESTABLE: "not testable",
    "running": "part run",
    "premise not measured": "premise not measured",
    "does not fit": "does not fit",
    "needs a GPU": "needs a GPU",
    "needs hf": "needs hf",
    "not run": "not run",
}
VERDICT_WORDS = {
    "reproduced": "reproduced",
    "opposite direction": "opposite",
    "not reproduced": "not reproduced",
    "inconclusive at this n": "inconclusive",
    "premise not met": "premise not met",
    "premise not measured": "premise not measured",
}
NOT_PREREGISTERED = "‡"  # the claim's rule took its form after this reader's first row
STABILITY_WORDS = (
    f"the share of {STABILITY_RESAMPLES:,} resamples of the claim's units in which its verdict "
    f"holds; below {STABLE:.0%} the verdict is fragile and not counted as decided"
)


def reader_free(claim: Claim) -> bool:
    """A claim no reader answers (retriever recall): the same number in every column."""
    blocks = contract(claim.chapter).claim_blocks
    return claim.id in blocks and not blocks[claim.id]


def frame(matrix: Matrix) -> pd.DataFrame:
    """One row per cell, for the CSV download and the figure: the claim, the reader, the
    status, and for a judged cell the estimate, verdict, its parts and pre-registration."""
    out = []
    for claim in matrix.claims:
        for col in matrix.columns:
            cell = matrix.cell(claim.id, col.folder)
            mc = matrix.model_cell(claim.id, col.model)
            est, j = cell.estimate, cell.judgement
            out.append(
                {
                    "claim": claim.id,
                    "short": claim.short or claim.comparison,
                    "paper": claim.paper,
                    "reader": col.label,
                    "folder": col.folder,
                    "status": cell.status,
                    "difference": est.difference if est else None,
                    "ci_low": est.ci_low if est else None,
                    "ci_high": est.ci_high if est else None,
                    "n": est.n if est else None,
                    "p": est.p if est else None,
                    "p_holm": est.p_family if est else None,
                    "family": claim.family or None,
                    "sides": est.detail if est else None,
                    "verdict": j.verdict if j else None,
                    "direction": j.direction if j else None,
                    "magnitude": j.magnitude if j else None,
                    "premise": j.premise if j else None,
                    "premise_met": j.premise_met if j and claim.premise else None,
                    "stability": cell.stability,
                    "fragile": cell.fragile,
                    "backends_judging": len(mc.judged),
                    "backend_sensitive": mc.backend_sensitive,
                    "prefix_reused": mc.reuse.get(col.backend),
                    "decided": cell.decided,
                    "preregistered": cell.preregistered,
                    "rule_fixed": cell.rule_date.isoformat() if cell.rule_date else None,
                    "first_row": cell.first_row.isoformat() if cell.first_row else None,
                    "capped_pct": est.capped if est else None,
                    "floor": cell.floor,
                    "fits": cell.fits,
                    "note": cell.note,
                    "scale": claim.scale,
                    "paper_effect": claim.paper_effect,
                    "reader_free": reader_free(claim),
                    "was": cell.moved.was if cell.moved else None,
                    "moved_on": cell.moved.date if cell.moved else None,
                    "moved_why": cell.moved.why if cell.moved else None,
                }
            )
    return pd.DataFrame(out)


def _number(claim: Claim, est: Estimate) -> str:
    return claim.interval_text(est.difference, est.ci_low, est.ci_high)


def cell_markdown(cell: Cell, href: str | None = None) -> str:
    """A cell of the matrix table, short enough for a column per reader: the number with its
    interval, then the verdict's mark and word with n, then the premise (✓ met; ✗ with the
    checks that failed), the chance floor, answers cut at the token cap and a link to the
    rows; the verdict's parts in words in its tooltip. A cell with no verdict says why, its
    command in the tooltip."""
    if cell.status == UNMEASURED:
        return (
            f"**{_number(cell.claim, cell.estimate)}**<br>"
            f'<abbr title="{_attr(cell.note)}">{VERDICT_MARK[UNMEASURED]}</abbr>, '
            f"n = {cell.estimate.n}"
        )
    if cell.judgement is None:
        words = SHORT_STATUS[cell.status]
        if cell.status == "running" and cell.estimate:
            words += f" (n = {cell.estimate.n})"
        return f'<abbr title="{_attr(cell.note)}">{words}</abbr>' + _moved_line(cell)
    est, j = cell.estimate, cell.judgement
    mark = VERDICT_MARK[j.verdict].split(" ", 1)[0]
    pre = f" {NOT_PREREGISTERED}" if cell.preregistered is False else ""
    fit = f"every prompt fits: {cell.fits}" if cell.fits else ""
    why = "; ".join(
        p for p in (est.detail, j.direction, j.magnitude, j.premise, cell.floor, fit) if p
    )
    verdict = f"{mark} {VERDICT_WORDS[j.verdict]}"
    if cell.fragile:
        verdict = f"≈ fragile: {VERDICT_WORDS[j.verdict]} in {cell.stability:.0%}"
    lines = [
        f"**{_number(cell.claim, est)}**",
        f'<abbr title="{_attr(why)}">{verdict}</abbr>, n = {est.n}{pre}',
    ]
    extra = []
    if cell.stability is not None and not cell.fragile:
        extra.append(f'<abbr title="{STABILITY_WORDS}">holds {cell.stability:.0%}</abbr>')
    if j.premise_met is False:  # the reason in the cell, not only in a tooltip
        extra.append(f"premise ✗: {j.premise_failed}")
    elif cell.claim.premise:
        extra.append("premise ✓")
    if cell.floor:
        extra.append(cell.floor.split(" (")[0].replace("chance", "floor"))
    if est.capped:
        extra.append(f"{est.capped:.0f}% capped")
    if underpowered(est, cell.claim.scale):
        extra.append(
            f"<abbr title=\"under-powered: wider than ±{PRECISION_TARGET:g} points, the book's "
            f'precision target; a provisional verdict">† ±{half_width(est):.1f}</abbr>'
        )
    if href:
        extra.append(f'<a href="{href}">rows</a>')
    if extra:
        lines.append(" · ".join(extra))
    return "<br>".join(lines) + _moved_line(cell)


def _moved_line(cell: Cell) -> str:
    """Where the verdict log records this cell's state as a move: what it was, and when, the
    reason in its tooltip."""
    if not cell.moved:
        return ""
    return f'<br><abbr title="{_attr(cell.moved.why)}">({cell.moved.words()})</abbr>'


SENSITIVE_WORDS = (
    "the model's backends judge this claim differently: its verdict depends on the numerics "
    "of the backend, not on the paper's effect; not counted as decided"
)


def model_cell_markdown(mc: ModelCell, href: str | None = None) -> str:
    """A model's cell: its first judging backend's (:func:`cell_markdown`), then each other
    backend that judges the claim, on a line of its own with its number and verdict, under
    "backends agree" or "⇄ backend-sensitive"; a backend whose rows reused prompt prefixes
    says in how many."""
    primary = mc.primary
    text = cell_markdown(primary, href)
    if primary.column.backend != "hf" and primary.judgement is not None:
        text = f"{primary.column.backend}: {text}{_reuse(mc, primary)}"
    others = [c for c in mc.judged if c is not primary]
    if not others:
        return text
    head = (
        f'<abbr title="{SENSITIVE_WORDS}">⇄ **backend-sensitive**</abbr>'
        if mc.backend_sensitive
        else "backends agree:"
    )
    lines = []
    for c in others:
        mark = VERDICT_MARK[c.judgement.verdict].split(" ", 1)[0]
        word = VERDICT_WORDS[c.judgement.verdict]
        if c.fragile:
            word = f"≈ fragile: {word} in {c.stability:.0%}"
        lines.append(
            f"{c.column.backend}: {_number(c.claim, c.estimate)} {mark} {word}, "
            f"n = {c.estimate.n}{_reuse(mc, c)}"
        )
    return "<br>".join([text, head, *lines])


def _reuse(mc: ModelCell, cell: Cell) -> str:
    share = mc.reuse.get(cell.column.backend, 0.0)
    return f" · prefix reused in {share:.0%} of its rows" if share else ""


def cell_rows(cell: Cell, rows_href, known: dict | None = None) -> str | None:
    """The address of a judged cell's rows: its reader's sample browser (``rows_href``, e.g.
    :func:`longctx.downloads.browser_href` bound to a results folder) filtered to exactly the
    rows the cell was computed from (:func:`~longctx.claims.rows_fragment`); ``known`` keeps
    the browsers looked up. A claim no reader answers, or one whose rows no filter names, has
    no link."""
    if not rows_href or cell.judgement is None or reader_free(cell.claim):
        return None
    fragment = rows_fragment(cell.estimate)
    if not fragment:
        return None
    known = {} if known is None else known
    key = (cell.column.folder, cell.claim.experiment)
    if key not in known:
        known[key] = rows_href(cell.claim.experiment, model_folder=cell.column.folder)
    return known[key] + "#" + fragment if known[key] else None


def paper_effect(claim: Claim) -> str:
    """The paper's effect in the claim's unit, or its words where it gives no number."""
    if claim.paper_effect is None:
        return f'<abbr title="{_attr(claim.paper_value)}">no size</abbr>'
    return (
        f'<abbr title="{_attr(claim.paper_value)}">{claim.effect_text(claim.paper_effect)}</abbr>'
    )


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("`", "")


def as_markdown(matrix: Matrix, rows_href=None) -> str:
    """The matrix as MyST Markdown, one table per paper: a row per claim (linked to the
    chapter section that shows it), a column per reader, and how many readers reproduce it.
    ``rows_href(experiment, model_folder=folder)`` gives the sample browser of a reader's
    store, linked filtered to each claim's rows (:func:`rows_filter`)."""
    parts = []
    links: dict[tuple[str, str], str | None] = {}  # each store's browser looked up once
    heads = list(matrix.models)
    for paper in dict.fromkeys(c.paper for c in matrix.claims):
        claims = [c for c in matrix.claims if c.paper == paper]
        judged = sum(matrix.reproduced_by(c.id)[1] for c in claims)
        summary = (
            f"<strong>{paper}</strong>: {len(claims)} claim{'s' if len(claims) != 1 else ''} × "
            f"{len(heads)} models ({judged} judged cells), each with its estimate, interval, n "
            "and stability"
        )
        lines = [
            "| claim | paper | " + " | ".join(heads) + " | reproduced by |",
            "|---|---|" + "---|" * len(heads) + "---|",
        ]
        for claim in claims:
            cells = []
            for k, model in enumerate(matrix.models):
                mc = matrix.model_cell(claim.id, model)
                if reader_free(claim) and k:
                    cells.append("same for every reader (no reader)")
                    continue
                cells.append(model_cell_markdown(mc, cell_rows(mc.primary, rows_href, links)))
            won, judged = matrix.reproduced_by(claim.id)
            if reader_free(claim):
                won, judged = min(won, 1), min(judged, 1)
            lines.append(
                f'| <abbr title="{_attr(claim.claim)}">{claim.short or claim.comparison}</abbr> '
                f"({{ref}}`section <{claim.label}>`) | {paper_effect(claim)} | "
                + " | ".join(cells)
                + f" | {won} of {judged} judged |"
            )
        parts.append(collapsed(summary, "\n".join(lines)))
    return "\n\n".join(parts)


def cards_markdown(matrix: Matrix, rows_href=None) -> str:
    """The matrix for a narrow screen, where a column per model does not fit: a card per
    claim (its name, the paper's effect, a link to its section) listing each model's cell as
    the tables write it, behind a toggle shown only on narrow screens."""
    links: dict[tuple[str, str], str | None] = {}
    cards = []
    for claim in matrix.claims:
        lines = [
            f"**{claim.short or claim.comparison}** · paper {paper_effect(claim)} "
            f"({{ref}}`section <{claim.label}>`)",
            "",
        ]
        for k, model in enumerate(matrix.models):
            if reader_free(claim) and k:
                continue  # the same for every reader: its first reader's cell says it
            mc = matrix.model_cell(claim.id, model)
            cell = model_cell_markdown(mc, cell_rows(mc.primary, rows_href, links))
            lines.append(f"* {model}: {cell}")
        cards.append("\n".join(lines))
    summary = f"The matrix as cards: {len(matrix.claims)} claims, one card each"
    return collapsed(summary, "\n\n".join(cards), narrow_only=True)


def commands_markdown(matrix: Matrix) -> str:
    """Under the matrix: per reader, the command that fills its claims not yet run."""
    lines = []
    for col in matrix.columns:
        cells = col_cells_of(matrix, col)
        todo = [c for c in cells if c.status in ("not run", "running")]
        if todo:
            chapters = " ".join(dict.fromkeys(c.claim.chapter for c in todo))
            claims = "claim" if len(todo) == 1 else "claims"
            lines.append(f"* {col.label}: {len(todo)} {claims} to run, `{col.command(chapters)}`")
        waiting = [c for c in cells if c.status == UNMEASURED]
        for chapter in dict.fromkeys(c.claim.chapter for c in waiting):
            fill = col.premise_command(chapter)
            if fill:
                n = sum(c.claim.chapter == chapter for c in waiting)
                premises = "premise" if n == 1 else "premises"
                lines.append(f"* {col.label}: {n} {premises} to measure, `{fill}`")
    if not lines:
        return "Every reader has rows for every claim it can run."
    return (
        "To fill a reader's cells that are not run yet (a dry run first says what each claim "
        "costs and whether it fits):\n\n" + "\n".join(lines)
    )


def col_cells_of(matrix: Matrix, col: Column) -> list[Cell]:
    return [
        c
        for c in matrix.column_cells(col.folder)
        if not (reader_free(c.claim) and col != matrix.columns[0])
    ]


TALLY_CAPTION = (
    "Per reader: its judged claims by verdict, how many are decided (a direction, an "
    f"equivalence or a premise judged unmet, holding in at least {STABLE:.0%} of resamples of "
    f"the claim's units), how many verdicts are fragile (below {STABLE:.0%}), how many were "
    "judged by a rule fixed after the rows, and the claims without a verdict yet, by why."
)


def tally_table(matrix: Matrix) -> pd.DataFrame:
    """Per reader: its cells by verdict, how many are decided and how many are judged by a
    rule fixed after the rows, and its cells without a verdict, by why (a reader-free claim
    counts for the first reader only)."""
    rows = []
    for col in matrix.columns:
        cells = col_cells_of(matrix, col)
        judged = [c for c in cells if c.judgement]
        verdicts = [
            f"{n} {VERDICT_WORDS[v]}"
            for v in VERDICT_MARK
            if (n := sum(c.judgement.verdict == v for c in judged))
        ]
        unjudged = [
            f"{n} {SHORT_STATUS[s]}"
            for s in STATUSES[1:]
            if (n := sum(c.status == s for c in cells))
        ]
        rows.append(
            {
                "reader": col.label,
                "judged": len(judged),
                "verdicts": " · ".join(verdicts) or "none",
                "decided": sum(c.decided for c in judged),
                f"fragile (< {STABLE:.0%})": sum(c.fragile for c in judged),
                "rule after rows (‡)": sum(c.preregistered is False for c in judged),
                "no verdict yet": " · ".join(unjudged) or "none",
            }
        )
    return pd.DataFrame(rows)


REPLICATION_CAPTION = (
    "Per model with rows on more than one backend: the claims both backends judge, how many "
    "get the same verdict from both (decided only then) and how many are backend-sensitive, "
    "and the share of each backend's rows in those claims' stores answered with a reused "
    "prompt prefix."
)


def replication_table(matrix: Matrix) -> pd.DataFrame:
    """How far a model's backends, replications of one model, agree claim by claim."""
    rows = []
    for model, cols in matrix.models.items():
        if len(cols) < 2:
            continue
        cells = [matrix.model_cell(c.id, model) for c in matrix.claims if not reader_free(c)]
        both = [mc for mc in cells if mc.replicated]
        shares: dict[str, list[float]] = {}
        for mc in both:
            for backend, share in mc.reuse.items():
                shares.setdefault(backend, []).append(share)
        rows.append(
            {
                "model": model,
                "backends": ", ".join(c.backend for c in cols),
                "claims judged on two backends": len(both),
                "same verdict": sum(not mc.backend_sensitive for mc in both),
                "backend-sensitive": ", ".join(
                    mc.primary.claim.id for mc in both if mc.backend_sensitive
                )
                or "none",
                "rows with a reused prefix": "; ".join(
                    f"{b}: {min(v):.0%}-{max(v):.0%}" if min(v) != max(v) else f"{b}: {v[0]:.0%}"
                    for b, v in sorted(shares.items())
                )
                or "none",
            }
        )
    return pd.DataFrame(rows)


def reader_lines(matrix: Matrix) -> list[str]:
    """Per reader, one line for a terminal: each claim's verdict with its number, or what
    is missing and the command that fills it (``longctx findings --model``)."""
    out = []
    for col in matrix.columns:
        out.append(f"# {col.label} ({col.folder})")
        for cell in col_cells_of(matrix, col):
            claim = cell.claim
            if cell.judgement:
                est = cell.estimate
                pre = " (rule fixed after its rows)" if cell.preregistered is False else ""
                holm = "" if est.p_family is None else f" (Holm {est.p_family:.3g})"
                held = (
                    f", holds in {cell.stability:.0%} of resamples"
                    if cell.stability is not None
                    else ""
                )
                mc = matrix.model_cell(claim.id, col.model)
                others = "".join(
                    f"; {c.column.backend}: {c.state}" for c in mc.judged if c is not cell
                )
                sensitive = " (backend-sensitive)" if mc.backend_sensitive else ""
                out.append(
                    f"{claim.id}: {_number(claim, est)}, n = {est.n}, p = {est.p:.3g}{holm}: "
                    f"{cell.state}{held}{pre}{others}{sensitive}{_moved(cell)}"
                )
            else:
                out.append(f"{claim.id}: {cell.note}{_moved(cell)}")
    return out


def _moved(cell: Cell) -> str:
    return f" ({cell.moved.words()}: {cell.moved.why})" if cell.moved else ""


def figure(matrix: Matrix, rows_href=None):
    """:func:`longctx.plots.effects_grid` of the matrix: every judged cell's interval, on the
    scale of the paper's effect where the paper gives one (ours ÷ the paper's) and in points
    toward the paper's direction where it does not or where the claim is of no effect (its
    margin shaded); with ``rows_href`` each mark links to its rows, as the table's cells do
    (:func:`cell_rows`)."""
    cells = figure_cells(matrix, rows_href)
    return effects_grid(cells, readers=list(dict.fromkeys(cells["reader"])))


def figure_cells(matrix: Matrix, rows_href=None) -> pd.DataFrame:
    """:func:`model_frame` as :func:`figure` draws it and :func:`figure_text` counts it: a
    reader-free claim judged for its first reader only ("same" for the others), each cell's
    link to its rows and where it sits (:func:`effect_scale`)."""
    cells = model_frame(matrix)
    first = matrix.columns[0].folder if matrix.columns else None
    cells.loc[cells["reader_free"] & (cells["folder"] != first), "status"] = "same"
    known: dict = {}
    cells["href"] = [
        cell_rows(matrix.cell(c, f), rows_href, known) if status == "judged" else None
        for c, f, status in zip(cells["claim"], cells["folder"], cells["status"])
    ]
    claims = {c.id: c for c in matrix.claims}
    placed = [
        effect_scale(claims[c], d, lo, hi)
        for c, d, lo, hi in zip(
            cells["claim"], cells["difference"], cells["ci_low"], cells["ci_high"]
        )
    ]
    cells[["panel", "x", "x_low", "x_high", "label", "margin"]] = pd.DataFrame(
        placed, index=cells.index
    )
    return cells


def effect_scale(claim: Claim, difference, low, high) -> tuple:
    """Where a cell's estimate and interval sit in :func:`figure`: ``("ratio", x, lo, hi,
    label, margin)`` as multiples of the paper's effect where the paper gives one and the claim
    is of an effect; else ``("points", ...)`` signed so the paper's direction is positive,
    with the claim's margin where it is one of no effect."""
    effect = claim.paper_effect
    no_effect = claim.kind in ("saturation", "no-effect")
    name = claim.short or claim.comparison
    if effect and effect == effect and not no_effect:
        ends = sorted(v / effect for v in (low, high)) if low is not None else [None, None]
        x = difference / effect if difference is not None else None
        label = f"{name} (paper {claim.effect_text(effect)})"
        return ("ratio", x, *ends, label, None)
    sign = claim.direction or 1
    ends = sorted(v * sign for v in (low, high)) if low is not None else [None, None]
    x = difference * sign if difference is not None else None
    return ("points", x, *ends, name, claim.margin if no_effect else None)


def model_frame(matrix: Matrix) -> pd.DataFrame:
    """:func:`frame`'s row of each claim's first judging backend per model (the mark a
    figure draws), named by the model's short label, with whether its backends disagree."""
    table = frame(matrix).set_index(["claim", "folder"])
    rows = []
    for model, cols in matrix.models.items():
        label = re.sub(r"\n\(\w+\)$", "", cols[0].short_label)
        for claim in matrix.claims:
            mc = matrix.model_cell(claim.id, model)
            row = table.loc[(claim.id, mc.primary.column.folder)].to_dict()
            rows.append(
                {**row, "claim": claim.id, "folder": mc.primary.column.folder, "reader": label}
            )
    return pd.DataFrame(rows)


def verdict_box(chapter: str, matrix: Matrix) -> str:
    """The answer first, for a chapter page: a MyST admonition with a row per claim of
    ``chapter`` (the paper's number, a link to the section that shows it) and a column per
    reader with rows, each cell the matrix's (number, interval, n, verdict)."""
    claims = [c for c in matrix.claims if c.chapter == chapter]
    models = [
        model
        for model, cols in matrix.models.items()
        if any(matrix.cell(c.id, col.folder).status != "not run" for c in claims for col in cols)
    ]
    if not claims:
        body = (
            "No claim of this chapter is judged yet: its rules wait, unchanged, in the "
            "pre-registration file until the default reader's rows reach them."
        )
    elif not models:
        body = "No claim of this chapter has rows under both of its conditions yet."
    else:
        lines = [
            "| claim | paper | " + " | ".join(models) + " |",
            "|---|---|" + "---|" * len(models),
        ]
        cards = []
        for claim in claims:
            cells = []
            for k, model in enumerate(models):
                if reader_free(claim) and k:
                    cells.append("same (no reader)")
                else:
                    cells.append(model_cell_markdown(matrix.model_cell(claim.id, model)))
            named = f"{claim.claim} ({{ref}}`data <{claim.label}>`)"
            lines.append(f"| {named} | {claim.paper_value} | " + " | ".join(cells) + " |")
            cards.append(
                "\n".join(
                    [f"**{named}** Paper: {claim.paper_value}", ""]
                    + [f"* {model}: {cell}" for model, cell in zip(models, cells)]
                )
            )
        # a caption of its own, so the table says what it is wherever a link lands; on a
        # narrow screen, where a column per model does not fit, a card per claim in its place
        caption = "This chapter's claims judged on each model with rows."
        body = "\n".join(
            [f"```{{table}} {caption}", ":class: longctx-wide-only", "", *lines, "```", ""]
            + [":::{div} longctx-narrow-only", "\n\n".join(cards), ":::"]
        )
    return (
        "::::{admonition} Verdicts, one column per model with rows (its backends within)\n"
        ":class: tip\n\n"
        + body
        + "\n\nBy the rule on {ref}`the findings page <findings>`; differences in points; "
        f"{NOT_PREREGISTERED}: the claim's rule was fixed after this reader's rows.\n::::"
    )


def state_words(mc: ModelCell) -> str:
    """A model's cell in words for prose: its verdict, with "but fragile" and its share where
    it holds in under :data:`STABLE` of the resamples, and the other backend's verdict where
    the backends disagree; the status of a cell with no verdict."""
    cell = mc.primary
    if cell.judgement is None:
        return SHORT_STATUS.get(cell.status, cell.status)
    words = cell.judgement.verdict
    if cell.fragile:
        words += (
            f", but fragile: it holds in {cell.stability:.0%} of "
            f"{STABILITY_RESAMPLES:,} resamples of its units"
        )
    if mc.backend_sensitive:
        others = and_list(
            [f"{c.column.backend} {c.judgement.verdict}" for c in mc.judged if c is not cell]
        )
        words += f" on {cell.column.backend}, {others}: backend-sensitive"
    return words


def readers_words(chapter: str, matrix: Matrix) -> str:
    """What ``chapter``'s claims say on every model but the default one, a sentence per model
    with judged cells, from the matrix: the claims decided (and their verdicts), and why the
    others are not (inconclusive, fragile, backend-sensitive), so a page never says more of
    another reader than its rows do."""
    claims = [c for c in matrix.claims if c.chapter == chapter and not reader_free(c)]
    out = []
    for model, cols in matrix.models.items():
        if model == DEFAULT_MODEL:
            continue
        cells = [(c, matrix.model_cell(c.id, model)) for c in claims]
        judged = [(c, mc) for c, mc in cells if mc.judged]
        if not judged:
            continue
        judging = {x.column.backend for _, mc in judged for x in mc.judged}
        backends = and_list([col.backend for col in cols if col.backend in judging])
        decided = [
            f"{c.short or c.comparison} ({VERDICT_WORDS[mc.primary.judgement.verdict]})"
            for c, mc in judged
            if mc.decided
        ]
        why = pd.Series(
            [
                "backend-sensitive"
                if mc.backend_sensitive
                else "fragile"
                if any(x.fragile for x in mc.judged)
                else "inconclusive"
                for _, mc in judged
                if not mc.decided
            ],
            dtype=object,
        ).value_counts()
        rest = and_list([f"{n} {what}" for what, n in why.items()])
        head = f"For {model} ({backends}), "
        if decided:
            verb = "is" if len(decided) == 1 else "are"
            words = f"{len(decided)} of {len(judged)} judged claims {verb} decided: " + and_list(
                decided
            )
            out.append(
                head
                + words
                + (f"; the other {len(judged) - len(decided)}: {rest}." if rest else ".")
            )
        else:
            out.append(head + f"none of the {len(judged)} judged claims is decided ({rest}).")
    return " ".join(out) or "No other model has judged claims of this chapter yet."


def estimates_of(matrix: Matrix, folder: str) -> dict[str, Estimate]:
    """One column's estimates, by claim (the judged and the partly run alike)."""
    return {
        claim.id: cell.estimate
        for claim in matrix.claims
        if (cell := matrix.cell(claim.id, folder)).estimate is not None
    }


def default_column(matrix: Matrix) -> Column | None:
    """The book's default reader's column, if it has rows."""
    return next((c for c in matrix.columns if c.model == DEFAULT_MODEL and c.backend == "hf"), None)


def quoted(matrix: Matrix) -> dict:
    """The numbers the findings page's prose quotes about the matrix."""
    judged = [c for col in matrix.columns for c in col_cells_of(matrix, col) if c.judgement]
    replicated = [
        mc
        for model in matrix.models
        for claim in matrix.claims
        if (mc := matrix.model_cell(claim.id, model)).replicated and not reader_free(claim)
    ]
    return {
        "fi-claims": len(matrix.claims),
        "fi-readers": len(matrix.columns),
        "fi-models": len(matrix.models),
        "fi-stable": f"{STABLE:.0%}",
        "fi-resamples": f"{STABILITY_RESAMPLES:,}",
        "fi-replicated": len(replicated),
        "fi-backends-agree": sum(not mc.backend_sensitive for mc in replicated),
        "fi-backend-sensitive": sum(mc.backend_sensitive for mc in replicated),
        "fi-judged": len(judged),
        "fi-decided": sum(c.decided for c in judged),
        "fi-prereg": sum(c.preregistered is True for c in judged),
        "fi-default-marked": sum(c.preregistered is False for c in _default_judged(matrix)),
        "fi-default-judged": len(_default_judged(matrix)),
    }


def _default_judged(matrix: Matrix) -> list:
    """The default reader's judged cells (none where it has no column)."""
    default = default_column(matrix)
    return [c for c in col_cells_of(matrix, default) if c.judgement] if default else []


def _counts(values) -> str:
    counts = pd.Series(list(values)).value_counts()
    return ", ".join(f"{n} {what}" for what, n in counts.items())


def figure_text(matrix: Matrix) -> FigureText:
    """:func:`figure`'s caption and alt text, from the cells it draws."""
    cells = figure_cells(matrix)
    judged = cells[(cells["status"] == "judged") & cells["x"].notna()]
    panels = judged.drop_duplicates("claim")["panel"].value_counts()
    lo, hi = RATIO_LIMITS
    caption = (
        "Every judged claim (rows) on every model with committed rows (colours; a model's "
        "mark is the first of its backends that judges the claim, the others are replications "
        "of it): our paired estimate with its 95% interval. Top, the "
        f"{panels['ratio']} claims whose paper gives an effect, as a multiple of it (1, "
        f"dotted: the paper's effect; 0: none; beyond {lo:g} or {hi:g} drawn at the edge "
        f"with an arrow). Bottom, the {panels['points']} claims whose paper gives no size or "
        "that say there is no effect (their margin shaded), in points signed so that the "
        "paper's direction is positive. The shape is the verdict by the rule below: open "
        "where this model does not meet the claim's premise, faded with ≈ where it is fragile "
        f"(holding in under {STABLE:.0%} of resamples of the claim's units), ‡ where the "
        "rule was fixed after the rows, ⇄ where the model's backends disagree. A model with "
        "no mark on a row has no verdict there; the tables below say why."
    )
    alt = (
        f"Interval plot of {len(judged)} judged cells: {len(set(judged['claim']))} claims by "
        f"{len(matrix.models)} models ({', '.join(matrix.models)}); verdicts "
        f"{_counts(judged['verdict'])}. Cells without a verdict: "
        f"{_counts(cells[~cells['status'].isin(['judged', 'same'])]['status'])}."
    )
    return FigureText(caption, alt)


def summary(matrix: Matrix, most: int = 3) -> dict:
    """The book's findings in three lines, for the introduction: how many claims on how
    many readers, the default reader's verdicts by kind, and the claims reproduced on the
    most readers (at least two judged; a claim that needs no reader, such as a retriever's
    recall, is left out), each with its tally."""
    default = default_column(matrix)
    cells = col_cells_of(matrix, default) if default else []
    mine = [c for c in cells if c.judgement]
    counts = pd.Series([c.judgement.verdict for c in mine]).value_counts()
    waiting = pd.Series([c.status for c in cells if not c.judgement]).value_counts()
    verdicts = [f"{n} {v}" for v, n in counts.items()]
    verdicts += [f"{n} {s} (not yet judged)" for s, n in waiting.items()]
    tallies = [
        (claim, *matrix.reproduced_by(claim.id))
        for claim in matrix.claims
        if not reader_free(claim)
    ]
    tallies = [t for t in tallies if t[2] >= 2]
    robust = sorted(tallies, key=lambda t: (-t[1] / t[2], -t[1], t[0].id))[:most]
    return {
        "intro-claims": len(matrix.claims),
        "intro-readers": len(matrix.columns),
        "intro-default-verdicts": and_list(verdicts),
        "intro-default-judged": len(mine),
        "intro-robust": "; ".join(
            f"{claim.claim[0].lower()}{claim.claim[1:].rstrip('.')} (reproduced, and stably, "
            f"on {n} of the {judged} models that judge it)"
            for claim, n, judged in robust
        )
        or "no claim is yet judged on two readers",
    }


def download_line(prefix: str = "../") -> str:
    """A link to the matrix as CSV in the built site (``longctx.downloads`` writes it)."""
    return (
        f'<a href="{prefix}downloads/findings-matrix.csv">Download the matrix (CSV)</a>: one '
        "line per claim and reader, with the status, the estimate, the verdict and its parts, "
        "and the dates of the rule and of the reader's first row."
    )


def statements(matrix: Matrix) -> dict[str, bool]:
    """What the findings page says of the matrix in words, each as a check on the rows."""
    default = default_column(matrix)
    cells = col_cells_of(matrix, default) if default else []
    return {
        "the default reader's rules written after its rows mark some of its cells": any(
            c.preregistered is False for c in _default_judged(matrix)
        ),
        "the default reader has rows for every claim": bool(cells)
        and all(c.estimate is not None for c in cells)
        and len(cells) == len(matrix.claims),
    }


def cost_table(results_dir: str | Path) -> pd.DataFrame:
    """Per reader with a claims plan (``longctx reproduce --scale claims --dry-run`` writes
    it): what checking every claim costs at the claims scale. Requests and prompt tokens are
    counted with the reader's tokenizer; the hours of the rows already made are measured
    (their own timings, split by CPU and GPU); the rest is estimated from the reader's
    measured speed, and what does not fit its window is counted apart: the prompts longer
    than the window and, with them, a block whose every claim also needs such prompts (a
    claim judged on the pair of 0 and 16K tokens cannot use the 0-token rows alone)."""
    out = []
    for folder in sorted(p.parent.name for p in Path(results_dir).glob("*/claims-plan.json")):
        plan = read_claims_plan(Path(results_dir) / folder)
        blocks = plan["blocks"]
        window = plan.get("window")

        def fits(b, window=window):
            limit = b.get("window") or window
            return not limit or b.get("max_prompt_tokens", 0) + b.get("max_new_tokens", 0) <= limit

        unfit_claims = {c for b in blocks if not fits(b) for c in b.get("claims", [])}

        def needed(b, unfit_claims=unfit_claims):
            claims = b.get("claims") or []
            return fits(b) and (not claims or any(c not in unfit_claims for c in claims))

        measured = {
            d: sum(b.get("measured_seconds", {}).get(d, 0.0) for b in blocks)
            for d in ("cpu", "gpu")
        }
        cpu = [b for b in blocks if needed(b) and b.get("estimated_seconds", 0) <= GPU_HOURS * 3600]
        gpu = [b for b in blocks if needed(b) and b.get("estimated_seconds", 0) > GPU_HOURS * 3600]
        out.append(
            {
                "reader": model_label(plan["model"], plan["backend"]),
                "requests": sum(b["requests"] for b in blocks if needed(b)),
                "prompt tokens": sum(b.get("prompt_tokens", 0) for b in blocks if needed(b)),
                "stored": sum(b["stored"] for b in blocks if needed(b)),
                "measured CPU hours": round(measured["cpu"] / 3600, 1),
                "measured GPU minutes": round(measured["gpu"] / 60, 1),
                "left for a CPU: prompt tokens": sum(
                    b.get("missing_prompt_tokens", 0) for b in cpu
                ),
                "left for a CPU: estimated hours": round(
                    sum(b.get("estimated_seconds", 0) for b in cpu) / 3600, 1
                )
                if all("estimated_seconds" in b for b in cpu if b.get("missing_prompt_tokens"))
                else "no measured speed",
                f"left for a GPU (over {GPU_HOURS:g} CPU hours a block): prompt tokens": sum(
                    b.get("missing_prompt_tokens", 0) for b in gpu
                ),
                "claims too long for the window: requests": sum(
                    b["requests"] for b in blocks if not needed(b)
                ),
                "planned": plan["created"][:10],
            }
        )
    return pd.DataFrame(out)


def markdown_table(table: pd.DataFrame) -> str:
    """A table as GitHub Markdown (for the README and a terminal), whole numbers with commas."""

    def text(v):
        if isinstance(v, bool) or v is None:
            return str(v)
        if isinstance(v, int) or (
            hasattr(v, "is_integer") and float(v).is_integer() and abs(v) >= 1000
        ):
            return f"{int(v):,}"
        return str(v)

    head = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "---|" * len(table.columns)
    body = ["| " + " | ".join(text(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def default_findings(matrix: Matrix, results_dir: str | Path) -> pd.DataFrame:
    """The default reader's detailed findings table (:func:`longctx.findings.findings_table`)
    from the matrix's estimates, so they are computed once."""
    default = default_column(matrix)
    ours = estimates_of(matrix, default.folder) if default else None
    return findings_table(results_dir, ours=ours)
