"""``longctx reproduce``: every chapter's generations at a named scale, outside the notebooks.

For each chapter, its :class:`~longctx.chapters.Run` gives the plan (the same requests the
notebook builds, so the same store keys), cut into blocks with the headline comparison
first; :func:`chapter_blocks` orders every chapter's blocks, headline blocks first, and
:func:`longctx.runner.run` runs them in chunks until a deadline. Rows already stored are
skipped, so an interrupted run resumes, and a run with everything stored loads no model and
reports only cache hits. The rows a run adds can be copied, xz-compressed and flat, to a
folder (a lent GPU machine returns a few flat files); ``longctx merge`` takes them back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from . import __version__
from .chapters import Run, contract
from .errors import ParameterError
from .paths import resolve
from .reader import Reader
from .runner import Block, Report


def chapter_blocks(
    chapters: Sequence[str],
    scale_name: str,
    overrides: dict | None = None,
    per_chapter: dict[str, str] | None = None,
    reader: Reader | None = None,
    results: str | Path = "data/results",
    dry_run: bool = False,
    only: Sequence[str] | None = None,
) -> ChapterPlan:
    """Every named chapter's blocks for ``reader`` (the default reader when None) at a
    scale (``per_chapter`` may name another scale for some chapters): all headline blocks
    first (chapter order), then the rest. ``overrides`` maps a chapter to parameter
    overrides; ``dry_run`` plans without running any model (the LLM tagger included).
    ``only`` keeps the blocks whose name holds one of its strings.

    Each chapter's run is made at once (:meth:`Run.of` checks its scale and overrides before
    any work); its plan is built when the iteration first reaches one of its blocks, so a
    run starts on the first headline block without waiting for plans that run the LLM
    tagger or size long contexts."""
    runs = {
        chapter: Run.of(
            contract(chapter),
            reader,
            (per_chapter or {}).get(chapter, scale_name),
            results,
            dry_run=dry_run,
            **(overrides or {}).get(chapter, {}),
        )
        for chapter in chapters
    }
    return ChapterPlan(runs, only)


class ChapterPlan:
    """The blocks of several chapters' runs in run order (headline blocks of every chapter
    first), each chapter's plan built when first reached; it can say which blocks it has not
    handed out yet without building more (:meth:`unreached`), so a run stopped by its
    deadline counts what it left."""

    def __init__(self, runs: dict[str, Run], only: Sequence[str] | None = None):
        self.runs, self.only = runs, list(only or [])
        self._built: set[str] = set()
        self._given: set[int] = set()

    def _blocks(self, chapter: str) -> list[Block]:
        self._built.add(chapter)
        return self.runs[chapter].planned()

    def _wanted(self, block: Block) -> bool:
        return not self.only or any(part in block.name for part in self.only)

    def __iter__(self) -> Iterator[Block]:
        for headline in (True, False):
            for chapter in self.runs:
                for block in self._blocks(chapter):
                    if block.headline == headline and self._wanted(block):
                        self._given.add(id(block))
                        yield block
        if self.only and not self._given:
            raise ParameterError(
                f"--only {' '.join(self.only)} matches no block; --dry-run without it lists them"
            )

    def unreached(self) -> tuple[list[Block], list[str]]:
        """The wanted blocks of built plans not handed out yet, and the chapters whose plans
        were never built (their blocks are unknown until then)."""
        blocks, unbuilt = [], []
        for chapter, run in self.runs.items():
            if chapter not in self._built:
                unbuilt.append(f"chapter {chapter}")
                continue
            blocks += [b for b in run.planned() if id(b) not in self._given and self._wanted(b)]
        return blocks, unbuilt


# ---------------------------------------------------------------------------------------------
# What a reader's claims cost: the claims scale's plan, per claim

SPEEDS = Path("data") / "bench" / "readers-cpu.json"
PLAN_FILE = "claims-plan.json"  # beside a reader's stores: data/results/<reader>/claims-plan.json


def measured_speed(reader: Reader, path: str | Path | None = None) -> tuple[float | None, str]:
    """(prompt tokens per second with decoding included, how it was measured) for a reader on
    this project's CPU, from ``scripts/bench_readers.py``'s file; None where it holds no
    measure for the reader's model and backend (a server's speed is the server's)."""
    path = Path(path) if path else resolve(SPEEDS)
    data = json.loads(path.read_text()) if path.exists() else {}
    key = f"{reader.model}--{reader.backend.name}"
    if reader.backend.name == "openai" or key not in data:
        return None, (
            f"no measured speed for {key}: run scripts/bench_readers.py --model {reader.model} "
            f"--backends {reader.backend.name} --json {SPEEDS}"
        )
    m = data[key]
    return m["prompt_tokens_per_s"], (
        f"{m['prompt_tokens_per_s']:g} prompt tokens/s, decoding included, measured by "
        f"scripts/bench_readers.py on {m['prompts']} claims prompts ({m['prompt_tokens']:,} "
        f"tokens) with {m['threads']} threads of an {m['cpu']} on {m['date']}"
    )


def block_claims(chapter: str, block_name: str) -> list[str]:
    """The claims whose rows a block of ``chapter`` holds (its ``claim_blocks``)."""
    wanted = contract(chapter).claim_blocks
    return [c for c, parts in wanted.items() if any(p in block_name for p in parts)]


def chapter_of_experiment(chapters: Sequence[str]) -> dict[str, str]:
    return {e: c for c in chapters for e in contract(c).experiments}


def claims_plan(report: Report, chapters: Sequence[str], reader: Reader, speed: str) -> dict:
    """The claims scale's plan for one reader, per block and per claim: requests, stored,
    prompt tokens (all and still to run), the longest prompt with its answer budget against the
    window, and the estimated time. A block built from an earlier block's rows (a second stage)
    is counted once that block is stored; until then ``stage_two_uncounted`` names it."""
    owner = chapter_of_experiment(chapters)
    blocks = []
    for b in report.blocks:
        chapter = owner.get(b["experiment"], "")
        blocks.append({**b, "chapter": chapter, "claims": block_claims(chapter, b["block"])})
    per_claim: dict[str, dict] = {}
    for chapter in chapters:
        for claim, parts in contract(chapter).claim_blocks.items():
            mine = [b for b in blocks if claim in b["claims"]]
            fits = [
                b["max_prompt_tokens"] + b["max_new_tokens"] <= b["window"]
                for b in mine
                if b.get("window") and "max_prompt_tokens" in b
            ]
            per_claim[claim] = {
                "chapter": chapter,
                "needs_reader": bool(parts),
                "requests": sum(b["requests"] for b in mine),
                "stored": sum(b["stored"] + b["generated"] for b in mine),
                "prompt_tokens": sum(b.get("prompt_tokens", 0) for b in mine),
                "missing_prompt_tokens": sum(b.get("missing_prompt_tokens", 0) for b in mine),
                "max_prompt_tokens": max((b.get("max_prompt_tokens", 0) for b in mine), default=0),
                "max_new_tokens": max((b.get("max_new_tokens", 0) for b in mine), default=0),
                "fits": all(fits),
                "needs": sorted({n for b in mine for n in b.get("needs", [])}),
                "estimated_seconds": sum(b.get("estimated_seconds", 0) for b in mine),
                "measured_seconds": {
                    d: sum(b.get("measured_seconds", {}).get(d, 0.0) for b in mine)
                    for d in ("cpu", "gpu")
                },
                "blocks": [b["block"] for b in mine],
            }
    return {
        "model": reader.model,
        "backend": reader.backend.name,
        "reader": reader.label,
        "window": next((b["window"] for b in blocks if b.get("window")), None),
        "speed": speed,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "longctx_version": __version__,
        "blocks": blocks,
        "claims": per_claim,
    }


def write_claims_plan(plan: dict, folder: str | Path) -> Path:
    """Write ``plan`` as ``<folder>/claims-plan.json`` (the reader's results folder), where
    the findings matrix reads what each claim costs and whether it fits."""
    path = Path(folder) / PLAN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n")
    return path


def read_claims_plan(folder: str | Path) -> dict | None:
    path = Path(folder) / PLAN_FILE
    return json.loads(path.read_text()) if path.exists() else None
