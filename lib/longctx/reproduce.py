"""``longctx reproduce``: every chapter's generations at a named scale, outside the notebooks.

For each chapter, :func:`longctx.chapters.get_chapter` gives the plan (the same requests the
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
from .chapters import check_counts, contract, scale
from .errors import ParameterError
from .paths import resolve
from .reader import Reader
from .runner import Block, Report


def chapter_blocks(
    chapters: Sequence[str],
    scale_name: str,
    overrides: dict | None = None,
    per_chapter: dict[str, str] | None = None,
    model: str | None = None,
    dry_run: bool = False,
    only: Sequence[str] | None = None,
) -> ChapterPlan:
    """Every named chapter's blocks at a scale (``per_chapter`` may name another scale for
    some chapters): all headline blocks first (chapter order), then the rest. ``overrides``
    maps a chapter to parameter overrides. A chapter whose prompts depend on the reader
    (``NEEDS_MODEL``: token-counted haystacks) gets ``model`` as ``params["model"]``; one
    whose plan may run a model (``PLANS_RUN_MODELS``: the LLM tagger) gets ``dry_run``.
    ``only`` keeps the blocks whose name holds one of its strings.

    Chapters, scales and overrides are checked at once; each chapter's plan is built when
    the iteration first reaches one of its blocks, so a run starts on the first headline
    block without waiting for plans that run the LLM tagger or size long contexts."""
    modules, params = {}, {}
    for chapter in chapters:
        declared = contract(chapter)
        modules[chapter] = declared.module
        if (overrides or {}).get(chapter):
            check_counts(chapter, overrides[chapter])
        params[chapter] = scale(
            chapter,
            (per_chapter or {}).get(chapter, scale_name),
            **(overrides or {}).get(chapter, {}),
        )
        if declared.check is not None:  # what its claims need, before any plan is built
            declared.check(params[chapter])
        if declared.needs_model:
            params[chapter]["model"] = model
        if declared.plans_run_models:
            params[chapter]["dry_run"] = dry_run
    return ChapterPlan(modules, params, only)


class ChapterPlan:
    """The blocks of several chapters in run order (headline blocks of every chapter first),
    each chapter's plan built when first reached; it can say which blocks it has not handed
    out yet without building more (:meth:`unreached`), so a run stopped by its deadline
    counts what it left."""

    def __init__(self, modules: dict, params: dict, only: Sequence[str] | None = None):
        self.modules, self.params, self.only = modules, params, list(only or [])
        self._plans: dict[str, list[Block]] = {}
        self._given: set[int] = set()

    def _blocks(self, chapter: str) -> list[Block]:
        if chapter not in self._plans:
            self._plans[chapter] = self.modules[chapter].plan(self.params[chapter])
        return self._plans[chapter]

    def _wanted(self, block: Block) -> bool:
        return not self.only or any(part in block.name for part in self.only)

    def __iter__(self) -> Iterator[Block]:
        for headline in (True, False):
            for chapter in self.modules:
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
        for chapter in self.modules:
            if chapter not in self._plans:
                unbuilt.append(f"chapter {chapter}")
                continue
            blocks += [
                b for b in self._plans[chapter] if id(b) not in self._given and self._wanted(b)
            ]
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
    """The claims whose rows a block of ``chapter`` holds (its ``CLAIM_BLOCKS``)."""
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
