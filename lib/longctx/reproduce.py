"""``longctx reproduce``: every chapter's generations at a named scale, outside the notebooks.

For each chapter, :func:`longctx.chapters.get_chapter` gives the plan (the same requests the
notebook builds, so the same store keys), cut into blocks with the headline comparison
first. Blocks run in that order, in chunks, until a deadline; rows already stored are
skipped, so an interrupted run resumes, and a run with everything stored loads no model
and reports only cache hits. The rows a run adds can be copied, xz-compressed and flat, to a
folder (the GPU machine returns at most 8 files of 16 MiB, from one folder level), at most
once a minute per store and whenever the run stops; ``longctx merge`` takes them back into
the stores.
"""

from __future__ import annotations

import lzma
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from .chapters import Block, get_chapter, scale
from .store import Request, ResultsStore, request_key, run_requests


@dataclass
class Report:
    """What a reproduce run did, per block: requests, already stored, generated, seconds."""

    blocks: list[dict] = field(default_factory=list)
    stopped_early: str | None = None

    @property
    def missing(self) -> int:
        return sum(b["requests"] - b["stored"] - b["generated"] for b in self.blocks)


def approx_tokens(req: Request) -> int:
    """A cheap prompt length estimate for batching: filler tokens (placeholders) plus about
    one token per 3.5 characters of the rest."""
    import re

    from .padding import FILLER_SLOT, TOKEN_SLOT

    # Masked gaps (MASKED_GAP) are never computed, so they add nothing.
    filler = sum(int(m.group(2)) for rx in (FILLER_SLOT, TOKEN_SLOT) for m in rx.finditer(req.prompt))
    text = re.sub(r"<\|longctx_[^|]*\|>", "", req.prompt)
    return filler + int(len(text) / 3.5)


def chunks(requests: Sequence[Request], chunk_prompts: int, whole_units: bool = False) -> list[list[Request]]:
    """Requests sorted by length and cut into chunks of at most ``chunk_prompts``, so each
    chunk's batches pad little and a deadline is checked often.

    ``whole_units``: finish one example (all its conditions) before the next, so a run
    stopped early leaves complete examples for a clustered analysis, not a thin layer over
    all of them. Examples with the fewest missing requests come first (then plan order),
    each sorted by length."""
    if whole_units:
        units: dict[str, list[Request]] = {}
        for r in requests:
            units.setdefault(r.example_id, []).append(r)
        ordered = [r for unit in sorted(units.values(), key=len) for r in sorted(unit, key=approx_tokens)]
    else:
        ordered = sorted(requests, key=approx_tokens)
    out, current = [], []
    for r in ordered:
        current.append(r)
        if len(current) >= chunk_prompts:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def progress_line(done: int, total: int, seconds: float) -> str:
    """'40/168 generated, 43.6 s per prompt, about 1 h 33 min left': the driver logs one after
    each chunk, since a block of long prompts on a CPU can run for hours."""
    line = f"{done}/{total} generated"
    if not done or not seconds:
        return line
    per = seconds / done
    line += f", {per:.1f} s per prompt" if per >= 1 else f", {done / seconds:.1f} prompts/s"
    if done < total:
        line += f", about {_duration(per * (total - done))} left"
    return line


def _duration(seconds: float) -> str:
    """'45 s' under a minute and a half, then '3 min', then '1 h 33 min'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def batch_for(reqs: Sequence[Request], batch_size: int, token_budget: int | None) -> int:
    if not token_budget:
        return batch_size
    longest = max(approx_tokens(r) + r.max_new_tokens for r in reqs)
    return max(1, min(batch_size, token_budget // max(1, longest)))


def run_blocks(blocks: Iterable[Block], *, model: str, results_dir: str | Path, load: Callable | None = None,
               batch_size: int = 8, token_budget: int | None = None, chunk_prompts: int = 256,
               deadline_s: float | None = None, copy_to: str | Path | None = None, dry_run: bool = False,
               progress: bool = True, log: Callable[[str], None] = print, params: dict | None = None,
               backend="hf", copy_interval_s: float = 60.0) -> Report:
    """Run ``blocks`` in order (see module docstring) on ``backend``; returns a :class:`Report`.
    With ``copy_to``, the stores this run adds to are copied there (see :func:`copy_flat`) at
    most every ``copy_interval_s`` seconds each and once more when it returns or fails."""
    copier = _Copier(copy_to, copy_interval_s)
    try:
        return _run_blocks(blocks, model=model, results_dir=results_dir, load=load, batch_size=batch_size,
                           token_budget=token_budget, chunk_prompts=chunk_prompts, deadline_s=deadline_s,
                           copier=copier, dry_run=dry_run, progress=progress, log=log, params=params,
                           backend=backend)
    finally:
        copier.flush()


def _run_blocks(blocks, *, model, results_dir, load, batch_size, token_budget, chunk_prompts, deadline_s,
                copier: _Copier, dry_run, progress, log, params, backend) -> Report:
    from .backends import fingerprint
    from .models import resolve_model

    started = time.time()
    fp = fingerprint(resolve_model(model).fingerprint, backend, model)
    loaded: dict = {}

    def lazy():
        if "lm" not in loaded:
            loaded["lm"] = load()
        return loaded["lm"]

    report = Report()

    def past_deadline(where: str) -> bool:
        """True (and recorded in the report) once the deadline has passed; never in a dry run."""
        if dry_run or deadline_s is None or time.time() - started <= deadline_s:
            return False
        report.stopped_early = f"deadline of {deadline_s:.0f} s reached {where}"
        log(report.stopped_early)
        return True

    planned, second_stages = iter(blocks), []
    while True:
        if second_stages:
            block = second_stages.pop(0)
        else:
            if past_deadline("before the next block"):  # building the next block may be the costly part
                return report
            block = next(planned, None)
            if block is None:
                break
        store = ResultsStore.for_model(results_dir, model, block.experiment, backend)
        stored = store.keys()
        keys = block_keys(block, fp, model)
        todo = [i for i, k in enumerate(keys) if k not in stored]
        entry = {"block": block.name, "experiment": block.experiment, "requests": block.size,
                 "stored": block.size - len(todo), "generated": 0, "seconds": 0.0}
        report.blocks.append(entry)
        log(f"[{time.time() - started:7.0f} s] {block.name}: {block.size} "
            f"{'attention prompts' if block.attention is not None else 'requests'}, "
            f"{entry['stored']} stored, {len(todo)} to {'score' if block.attention is not None else 'generate'}")
        if todo and not dry_run:
            if block.attention is not None:
                if past_deadline(f"in block '{block.name}'"):
                    return report
                from .cnorm import attention_rows

                t0 = time.time()
                attention_rows(block.attention, store, model=model, load=lazy, lm=loaded.get("lm"),
                               keep_vector=block.keep_vector, progress=progress, backend=backend)
                entry["generated"] += len(todo)
                entry["seconds"] += time.time() - t0
                copier.touched(store)
            else:
                for part in chunks([block.requests[i] for i in todo], chunk_prompts, block.whole_units):
                    if past_deadline(f"in block '{block.name}'"):
                        return report
                    t0 = time.time()
                    run_requests(part, store, model=model, load=lazy, lm=loaded.get("lm"), backend=backend,
                                 batch_size=batch_for(part, batch_size, token_budget), progress=progress,
                                 params=params)
                    entry["generated"] += len(part)
                    entry["seconds"] += time.time() - t0
                    copier.touched(store)
                    log(f"[{time.time() - started:7.0f} s] {block.name}: "
                        + progress_line(entry["generated"], len(todo), entry["seconds"]))
        if block.followup is not None:
            second = stage_two(block, block_rows(block, store, keys))
            if second:
                second_stages.insert(0, second)
    return report


def block_keys(block: Block, fingerprint: str, model: str) -> list[str]:
    """Store keys of a block's requests (generations) or attention items, in order."""
    if block.attention is not None:
        from .cnorm import attention_key
        from .models import resolve_model

        ref = resolve_model(model).fingerprint
        return [attention_key(ref, it["prompt"], "auto", -1, block.keep_vector) for it in block.attention]
    return [request_key(fingerprint, r, "auto") for r in block.requests]


def block_rows(block: Block, store: ResultsStore, keys: list[str]) -> list[dict]:
    """The block's stored rows. For an attention block: in item order, and only once every
    item is stored (a choice made from part of the calibration set would be another choice)."""
    rows = {r["key"]: r for r in store.rows()}
    if block.attention is not None:
        return [rows[k] for k in keys] if all(k in rows for k in keys) else []
    return [rows[k] for k in keys if k in rows]


def stage_two(block: Block, rows: list[dict]) -> Block | None:
    """The second-stage block (e.g. retrieve-then-solve requests, or C-NORM's QA block) that
    ``block``'s stored ``rows`` call for, or None when it has no follow-up or nothing to ask
    (an attention block whose items are not all stored has no rows, hence no second stage)."""
    if block.followup is None or (block.attention is not None and not rows):
        return None
    second = block.followup(rows)
    if isinstance(second, Block):
        return second if second.size else None
    return Block(f"{block.name} -> stage two", block.experiment, second, block.headline) if second else None


def stored_rows(blocks: Sequence[Block], *, model: str, results_dir: str | Path, backend="hf") -> list[dict]:
    """The stored rows of every request in ``blocks`` (and of their stage-two requests, built
    from the stored first-stage rows), in plan order; requests not yet run are left out."""
    from .backends import fingerprint
    from .models import resolve_model

    fp = fingerprint(resolve_model(model).fingerprint, backend, model)
    out, queue = [], list(blocks)
    while queue:
        block = queue.pop(0)
        store = ResultsStore.for_model(results_dir, model, block.experiment, backend)
        mine = block_rows(block, store, block_keys(block, fp, model))
        out += mine
        second = stage_two(block, mine)
        if second:
            queue.insert(0, second)
    return out


COPY_SUFFIX = ".jsonl.xz"


def copy_flat(store: ResultsStore, folder: str | Path) -> Path | None:
    """Copy the rows appended to a store (its plain file: on a machine that started from a
    checkout, the rows made there) to ``folder/<model>__<experiment>.jsonl.xz``, compressed
    (xz preset 3: about a tenth of the bytes at several MB/s) and replaced atomically, so a
    run killed mid-copy leaves the previous copy whole. None when nothing was appended."""
    if not store.path.exists():
        return None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{store.dir.parent.name}__{store.dir.name}{COPY_SUFFIX}"
    tmp = target.with_name(target.name + ".tmp")
    with store.lock():
        data = store.path.read_bytes()
    tmp.write_bytes(lzma.compress(data, preset=3))
    os.replace(tmp, target)
    return target


def copy_target(name: str) -> tuple[str, str]:
    """The (model folder, experiment) a flat copy's file name stands for."""
    from .errors import DataFileError

    for suffix in (COPY_SUFFIX, ".jsonl"):
        if name.endswith(suffix):
            folder, sep, experiment = name[:-len(suffix)].partition("__")
            if sep and folder and experiment:
                return folder, experiment
    raise DataFileError(f"{name} is not a flat copy of a store (<model>__<experiment>{COPY_SUFFIX})")


class _Copier:
    """Copies stores flat at most every ``interval_s`` seconds each, and all pending ones on
    :meth:`flush`: recompressing a large store after every short GPU chunk would idle the GPU."""

    def __init__(self, folder, interval_s: float = 60.0):
        self.folder, self.interval_s = folder, interval_s
        self.last: dict[Path, float] = {}
        self.pending: dict[Path, ResultsStore] = {}

    def touched(self, store: ResultsStore) -> None:
        if not self.folder:
            return
        self.pending[store.path] = store
        if time.time() - self.last.get(store.path, 0.0) >= self.interval_s:
            self._copy(store)

    def _copy(self, store: ResultsStore) -> None:
        copy_flat(store, self.folder)
        self.last[store.path] = time.time()
        self.pending.pop(store.path, None)

    def flush(self) -> None:
        for store in list(self.pending.values()):
            self._copy(store)


def chapter_blocks(chapters: Sequence[str], scale_name: str, overrides: dict | None = None,
                   per_chapter: dict[str, str] | None = None, model: str | None = None,
                   dry_run: bool = False) -> Iterator[Block]:
    """Every named chapter's blocks at a scale (``per_chapter`` may name another scale for
    some chapters): all headline blocks first (chapter order), then the rest. ``overrides``
    maps a chapter to parameter overrides. A chapter whose prompts depend on the reader
    (``NEEDS_MODEL``: token-counted haystacks) gets ``model`` as ``params["model"]``; one
    whose plan may run a model (``PLANS_RUN_MODELS``: the LLM tagger) gets ``dry_run``.

    Chapters, scales and overrides are checked at once; each chapter's plan is built when
    the iteration first reaches one of its blocks, so a run starts on the first headline
    block without waiting for plans that run the LLM tagger or size long contexts."""
    modules, params = {}, {}
    for chapter in chapters:
        module = modules[chapter] = get_chapter(chapter)
        params[chapter] = scale(chapter, (per_chapter or {}).get(chapter, scale_name),
                                **(overrides or {}).get(chapter, {}))
        if getattr(module, "NEEDS_MODEL", False):
            params[chapter]["model"] = model
        if getattr(module, "PLANS_RUN_MODELS", False):
            params[chapter]["dry_run"] = dry_run
    plans: dict[str, list[Block]] = {}

    def blocks_of(chapter: str) -> list[Block]:
        if chapter not in plans:
            plans[chapter] = modules[chapter].plan(params[chapter])
        return plans[chapter]

    def ordered() -> Iterator[Block]:
        for headline in (True, False):
            for chapter in chapters:
                yield from (b for b in blocks_of(chapter) if b.headline == headline)

    return ordered()
