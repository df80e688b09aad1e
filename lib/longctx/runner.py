"""The one runner: answer a plan's requests with a reader, reusing every row already stored.

A *plan* is a list of :class:`Block`\\ s (a chapter's ``plan(run)``, headline blocks
first). :func:`answer` is what a notebook calls: it generates what is missing and returns
every row of the plan, stage-two requests included, in plan order. :func:`run` is what
``longctx reproduce`` calls: the same work in chunks, with a deadline, progress lines, flat
copies of new rows for a machine that hands files back, and a :class:`Report`. Both key rows
by :func:`~longctx.requests.request_key` with the reader's fingerprint, so the notebook and
the driver find each other's rows by construction.

The model is loaded (:meth:`Reader.load`, once) only when some request is missing, so a
chapter whose rows are committed runs without weights; a request the backend cannot serve
(masked padding outside ``hf``, attention) fails before loading.
"""

from __future__ import annotations

import collections.abc
import glob
import lzma
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from . import __version__
from .attention import attention_key, attention_rows
from .backends import backend_class, prompts_need
from .backends.base import ATTENTION, RESCALED_POSITIONS, PromptReader
from .errors import DataFileError, LongctxError, ParameterError
from .models import context_window, load_tokenizer, model_slug
from .padding import FILLER_SLOT, MASKED_GAP, TOKEN_SLOT, encode_prompt, expand_fillers
from .reader import Reader
from .requests import (
    GenerateCall,
    Generation,
    Request,
    StopRule,
    key_fingerprint,
    key_of,
    request_identity,
    request_key,
)
from .store import ResultsStore

# ---------------------------------------------------------------------------------------------
# Plans


class LazyRequests(collections.abc.Sequence):
    """A block's requests, built when first used (its length, an item, or a loop over it).

    A plan lists all its blocks at once, but a block that is costly to build (RULER contexts
    sized in the reader's tokens) is built only when a run or a count reaches it, so a run
    on a lent GPU starts on its headline blocks at once instead of after minutes of CPU work
    for blocks its deadline may never reach."""

    def __init__(self, build: Callable[[], Sequence[Request]]):
        self._build: Callable[[], Sequence[Request]] | None = build
        self._items: list[Request] | None = None

    @property
    def built(self) -> bool:
        return self._items is not None

    def _get(self) -> list[Request]:
        if self._items is None:
            self._items = list(self._build())
            self._build = None
        return self._items

    def __len__(self) -> int:
        return len(self._get())

    def __getitem__(self, i):
        return self._get()[i]

    def __iter__(self) -> Iterator[Request]:
        return iter(self._get())

    def __repr__(self) -> str:
        return (
            f"LazyRequests({len(self._items)} built)"
            if self._items is not None
            else "LazyRequests(not built)"
        )


@dataclass
class Block:
    """A group of requests run together: one experiment (results folder), a name for logs, and
    optionally a second stage built from this block's stored rows (retrieve-then-solve, or
    C-NORM's QA prompts built with the delimiter its attention rows chose). ``followup``
    returns requests (same experiment) or a whole :class:`Block`, whose experiment is
    ``followup_experiment`` where it is not this block's (a tuple where the second stage
    has stages of its own that write elsewhere: every store the chain below writes to).

    An *attention* block has no generations: ``attention`` lists items (a ``prompt`` plus
    fields to keep) whose final-token attention is scored and cached, hf only
    (:func:`longctx.attention.attention_rows`).

    ``reader`` is who answers the block where it is not the run's reader (the tagging
    chapter's LLM tagger): its rows go to that reader's store, and the run loads that model
    for the block, in place of its own. ``positions`` (low, high) reads the block with
    Ms-PoE's rescaled positions; each of its requests says so in its condition
    (``positions``, :func:`positions_label`), so its rows have keys of their own."""

    name: str
    experiment: str
    requests: Sequence[Request]  # a list, or LazyRequests for a block costly to build
    headline: bool = False
    followup: Callable[[list[dict]], list[Request] | Block] | None = field(default=None, repr=False)
    attention: list[dict] | None = field(default=None, repr=False)
    whole_units: bool = False  # run example by example (see chunks)
    keep_vector: bool = False
    followup_experiment: str | tuple[str, ...] | None = None
    attention_layer: int | tuple[int, ...] = -1  # the layer an attention block reads, or layers
    positions: tuple[float, float] | None = None  # Ms-PoE's ratios the block is read with
    reader: Reader | None = None

    def answered_by(self, reader: Reader) -> Reader:
        """Who answers this block in a run of ``reader``."""
        return self.reader or reader

    def writes_to(self, experiment: str) -> bool:
        """Whether this block, or its second stage, stores rows in ``experiment``."""
        later = self.followup_experiment or ()
        return experiment == self.experiment or experiment in (
            (later,) if isinstance(later, str) else later
        )

    @property
    def size(self) -> int:
        return len(self.attention) if self.attention is not None else len(self.requests)


def positions_label(positions: tuple[float, float]) -> str:
    """The condition value of a request read with Ms-PoE between ``positions``' ratios, a
    ratio per key head (rows read with a ratio per query head, which broke grouped-query
    readers, had ``ms-poe <low>-<high>`` and are never read as these)."""
    low, high = positions
    return f"ms-poe {low:g}-{high:g} per key head"


def all_requests(blocks: Sequence[Block]) -> list[Request]:
    return [r for b in blocks for r in b.requests]


# ---------------------------------------------------------------------------------------------
# Rows


def make_row(
    key: str,
    req: Request,
    gen,
    *,
    model: str,
    fingerprint: str,
    prompt_mode: str,
    rendered_prompt: str,
    params: dict,
    backend: str = "hf",
) -> dict:
    """One stored generation with its provenance. ``backend`` is the backend's identity
    (``hf``, ``llamacpp``, ``openai:<served model>``); rows stored before backends existed
    have none and came from ``hf``. ``request`` keeps the prompt and system as asked (before
    the chat template), so the row's key can be recomputed from its content
    (:func:`content_key`)."""
    return {
        "key": key,
        "model": model,
        "model_fingerprint": fingerprint,
        "backend": backend,
        "prompt_mode": prompt_mode,
        "task": req.task,
        "condition": req.condition,
        "example_id": req.example_id,
        "gold": list(req.gold),
        "prompt": rendered_prompt,
        "request": {"prompt": req.prompt, "system": req.system},
        "output": gen.text,
        "raw_output": gen.raw_text,
        "prompt_tokens": gen.prompt_tokens,
        "new_tokens": gen.new_tokens,
        "stopped_by_rule": gen.stopped,
        "stop_reason": gen.stop_reason,
        "batch_seconds": round(gen.batch_seconds, 4),
        "batch_size": gen.batch_size,
        "seconds_per_prompt": round(gen.batch_seconds / gen.batch_size, 4),
        "params": {**params, "max_new_tokens": req.max_new_tokens, "stop": asdict(req.stop)},
        "meta": req.meta,
        **({"engine": gen.extra} if gen.extra else {}),
        "longctx_version": __version__,
        "host": platform.node(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def generate_missing(
    requests: Sequence[Request],
    store: ResultsStore,
    reader: Reader,
    *,
    batch_size: int = 8,
    progress: bool = True,
    params: dict | None = None,
    load: Callable[[], object] | None = None,
    stop_at: float | None = None,
    positions: tuple[float, float] | None = None,
) -> list[dict]:
    """Answer every request, reusing rows already in ``store``; one row per request, in order.

    ``load`` (default :meth:`Reader.load`) is called only if some request is missing. With
    ``stop_at`` (a :func:`time.time` value) the backend starts nothing after it and the rows
    it completed are kept; the requests left unanswered have no row in the result. With
    ``positions``, every request is read with Ms-PoE between those ratios (a backend with
    rescaled positions, one prompt a batch), and each must say so in its condition."""
    if positions is not None:
        label = positions_label(positions)
        if any(r.condition.get("positions") != label for r in requests):
            raise ParameterError(
                f"a request read with Ms-PoE must have positions={label!r} in its condition"
            )
    keys = [request_key(reader.fingerprint, r, reader.prompt_mode) for r in requests]
    if len(set(keys)) != len(keys):
        raise ValueError(
            "duplicate requests: two requests share task, condition, example id and prompt"
        )
    existing = {r["key"]: r for r in store.rows()}
    missing = [i for i, k in enumerate(keys) if k not in existing]
    if missing:
        for need in prompts_need(requests[i].prompt for i in missing):
            reader.require(need)
        if positions is not None:
            reader.require(RESCALED_POSITIONS)
            batch_size = 1
        check_windows([requests[i] for i in missing], reader)
        lm = (load or reader.load)()
        if lm.backend != reader.backend.name:
            raise ValueError(
                f"load() gave a {lm.backend!r} backend for backend={reader.backend.name!r}"
            )
        run_params = {"batch_size": batch_size, **lm.run_params(), **(params or {})}
        if positions is not None:
            run_params["positions"] = list(positions)
        if progress and (
            note := numerics_note(
                existing.values(), run_params, next(iter(store.files), store.path)
            )
        ):
            print(note, file=sys.stderr)
        call = GenerateCall(
            [], 1, batch_size=batch_size, progress=progress, stop_at=stop_at, positions=positions
        )
        _answer_missing(lm, call, requests, keys, missing, store, reader, run_params, existing)
    return answered(requests, keys, existing, store)


def _answer_missing(
    lm, call: GenerateCall, requests, keys, missing, store, reader, run_params, existing
) -> None:
    """Generate the ``missing`` requests with ``lm`` in groups of one token budget (one
    batch shares max_new_tokens), each batch stored as it finishes; ``call`` holds the
    settings every group shares."""
    groups: dict[int, list[int]] = {}
    for i in missing:
        groups.setdefault(requests[i].max_new_tokens, []).append(i)
    for max_new, idxs in groups.items():
        rendered = [lm.render(requests[i].prompt, system=requests[i].system) for i in idxs]

        def persist(batch, gens, idxs=idxs, rendered=rendered):
            rows = [
                make_row(
                    keys[idxs[b]],
                    requests[idxs[b]],
                    g,
                    model=reader.model,
                    fingerprint=reader.ref.fingerprint,
                    prompt_mode=reader.prompt_mode,
                    rendered_prompt=rendered[b],
                    params=run_params,
                    backend=reader.identity or "hf",
                )
                for b, g in zip(batch, gens)
            ]
            store.append(rows)
            existing.update({r["key"]: r for r in rows})

        lm.generate(
            replace(
                call,
                prompts=rendered,
                max_new_tokens=max_new,
                stop_rules=[requests[i].stop for i in idxs],
                on_batch=persist,
                desc=f"{reader.label} ({len(idxs)} new prompts)",
            )
        )
        if call.stop_at is not None and time.time() >= call.stop_at:
            break


def answered(
    requests: Sequence[Request], keys: Sequence[str], rows: dict, store: ResultsStore
) -> list[dict]:
    """The rows (by key) of the requests that have one, in order, each checked to answer its
    request (:func:`check_answers`)."""
    found = [(req, rows[k]) for req, k in zip(requests, keys) if k in rows]
    for req, row in found:
        check_answers(row, req, store)
    return [row for _, row in found]


def numerics(params: dict) -> str:
    """Where a row's answer was computed, as its run parameters name it ("cpu bfloat16")."""
    return " ".join(str(params[k]) for k in ("device", "dtype") if params.get(k))


def numerics_note(stored: Iterable[dict], run_params: dict, store_path) -> str | None:
    """One line when the rows about to be added are computed otherwise (device or dtype)
    than every row already in the store: greedy answers can differ between the two, and
    ``longctx replay`` measures by how much. None when they match or the store is empty."""
    made = {numerics(r["params"]) for r in stored if isinstance(r.get("params"), dict)}
    here = numerics(run_params)
    if not made or not here or here in made:
        return None
    # replay answers hf rows in their own dtype unless told to use this run's
    dtype = f" --dtype {run_params['dtype']}" if run_params.get("backend") == "hf" else ""
    return (
        f"note: {store_path} holds rows made on {', '.join(sorted(made))}; these run on {here}. "
        f"Greedy answers can differ between the two: `longctx replay {store_path} --n 16{dtype}` "
        "on this machine measures how often."
    )


def stop_rule(row: dict) -> StopRule:
    """The stop rule a row was generated with (stored as a dict in its parameters)."""
    stop = dict(row["params"]["stop"])
    stop["echoes"] = tuple(stop.get("echoes") or ())
    return StopRule(**stop)


def ask_again(
    rows: Sequence[dict], lm, *, batch_size: int = 8, progress: bool = True
) -> list[Generation]:
    """Fresh answers, one per stored row, to each row's rendered prompt with its token
    budget and stop rule, from ``lm`` (a loaded backend); nothing is read from or written to
    a store. What ``longctx replay`` compares with the stored answers."""
    by_budget: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        by_budget.setdefault(row["params"]["max_new_tokens"], []).append(i)
    out: list[Generation | None] = [None] * len(rows)
    for budget, idxs in by_budget.items():
        gens = lm.generate(
            GenerateCall(
                [rows[i]["prompt"] for i in idxs],
                max_new_tokens=budget,
                stop_rules=[stop_rule(rows[i]) for i in idxs],
                batch_size=batch_size,
                progress=progress,
                desc=f"replaying {len(idxs)} rows",
            )
        )
        for i, g in zip(idxs, gens):
            out[i] = g
    return out  # type: ignore[return-value]


def check_windows(requests: Sequence[Request], reader: Reader, longest: int = 4) -> None:
    """Refuse, before any weights load, a prompt that cannot fit the model's own window: the
    ``longest`` requests by estimated length are rendered and counted with the model's
    tokenizer (the loaded backend counts every prompt again). An ``openai`` reader's window
    is the server's, learnt at load, which loads no weights; a model whose window or
    tokenizer cannot be read here is left to the backend."""
    if reader.backend.name == "openai" or not requests:
        return
    try:
        window = context_window(reader.ref)
        tokenizer = load_tokenizer(reader.model) if window else None
    except (LongctxError, OSError, ValueError):
        return
    if not window:
        return
    cap = backend_class(reader.backend.name).window_cap or window
    checker = PromptReader.without_weights(
        reader.ref, tokenizer, reader.prompt_mode, min(window, cap)
    )
    for r in sorted(requests, key=approx_tokens, reverse=True)[:longest]:
        if MASKED_GAP.search(r.prompt):
            continue  # its window counts the masked positions: the hf backend checks it
        text = expand_fillers(checker.render(r.prompt, system=r.system), tokenizer)
        checker.check_fits(
            len(encode_prompt(tokenizer, text)), r.max_new_tokens, label=f"{r.example_id}'s prompt"
        )


class PromptTokens:
    """Counts a request's prompt tokens as the reader would see them, without its weights: the
    prompt rendered with the model's chat template and tokenized, plus the tokens every filler
    placeholder stands for (essay, whitespace, single-token and masked fillers all occupy the
    window). ``window`` is the model's own (capped by what the backend allocates), or None
    where it cannot be read here (an ``openai`` reader's is the server's)."""

    def __init__(self, reader: Reader):
        tokenizer = load_tokenizer(reader.model)
        window = context_window(reader.ref)
        cap = backend_class(reader.backend.name).window_cap
        if reader.backend.name == "openai":
            window = getattr(reader.backend.options, "context_window", None) or window
        elif window and cap:
            window = min(window, cap)
        self.window = window
        self._tokenizer = tokenizer
        self._renderer = PromptReader.without_weights(
            reader.ref, tokenizer, reader.prompt_mode, window or 2**31
        )

    def __call__(self, prompt: str, system: str | None = None) -> int:
        rendered = self._renderer.render(prompt, system=system)
        slots = sum(
            int(m.group(m.lastindex))
            for rx in (FILLER_SLOT, TOKEN_SLOT, MASKED_GAP)
            for m in rx.finditer(rendered)
        )
        text = _PLACEHOLDER.sub("", rendered)
        return slots + len(self._tokenizer(text, add_special_tokens=False).input_ids)

    def of_block(self, block: Block) -> list[int]:
        if block.attention is not None:
            return [self(it["prompt"]) for it in block.attention]
        return [self(r.prompt, r.system) for r in block.requests]


_PLACEHOLDER = re.compile(r"<\|longctx_[^|]*\|>")


def attention_reader(reader: Reader) -> Reader:
    """Who computes a reader's final-token attention: the reader itself when its backend can,
    else the same weights in torch (``hf``). Attention rows are keyed by the weights, not the
    backend, so a llama.cpp reader's C-NORM delimiter is chosen from its own weights' attention
    and its QA prompts then run on llama.cpp."""
    if ATTENTION in backend_class(reader.backend.name).capabilities:
        return reader
    return Reader(reader.model, "hf", reader.prompt_mode, reader.device, reader.dtype)


def block_keys(block: Block, reader: Reader) -> list[str]:
    """Store keys of a block's requests (generations) or attention items, in order."""
    if block.attention is not None:
        return [
            attention_key(
                reader.ref.fingerprint,
                it["prompt"],
                reader.prompt_mode,
                block.attention_layer,
                block.keep_vector,
                it.get("documents"),
            )
            for it in block.attention
        ]
    return [request_key(reader.fingerprint, r, reader.prompt_mode) for r in block.requests]


def block_rows(
    block: Block, store: ResultsStore, keys: list[str], rows: dict[str, dict] | None = None
) -> list[dict]:
    """The block's stored rows (``rows``: the store's rows by key, where the caller has read
    them). For an attention block: in item order, and only once every item is stored (a
    choice made from part of the calibration set would be another choice). A row found under
    a request's key must answer that request (:func:`check_answers`)."""
    rows = rows if rows is not None else {r["key"]: r for r in store.rows()}
    if block.attention is not None:
        return [rows[k] for k in keys] if all(k in rows for k in keys) else []
    return answered(block.requests, keys, rows, store)


def content_key(row: dict) -> str | None:
    """The key a row's own content gives (its weights, backend, task, condition, example,
    prompt as asked, prompt mode and decoding; an attention row's prompt, layer and vector),
    or None for a generation row stored before rows carried the request they answer."""
    fingerprint, backend = row.get("model_fingerprint"), row.get("backend") or "hf"
    try:
        if "abs" in row and "layer" in row:  # a final-token attention row
            return attention_key(
                fingerprint,
                row["prompt"],
                row["prompt_mode"],
                row["layer"],
                "attention" in row,
                row.get("documents"),
            )
        asked, params = row.get("request"), row["params"]
        if not isinstance(asked, dict):
            return None
        return key_of(
            key_fingerprint(fingerprint, "" if backend == "hf" else backend),
            row["task"],
            row["condition"],
            row["example_id"],
            asked["prompt"],
            asked.get("system"),
            row["prompt_mode"],
            params["max_new_tokens"],
            params["stop"],
        )
    except (KeyError, TypeError, AttributeError):
        return None  # not the fields a key is made of: the checks that need it say so


def check_answers(row: dict, req: Request, store: ResultsStore) -> None:
    """Refuse a row stored under ``req``'s key that answers another request: another task,
    condition or example, or (rows that carry their request) content whose key is not the
    one it is stored under. A store holds what its rows say, never what their keys claim."""
    asked = request_identity(req.task, req.condition, req.example_id)
    said = request_identity(row.get("task"), row.get("condition"), row.get("example_id"))
    if said != asked:
        fault = f"answers {_named(said)}, not {_named(asked)}"
    elif (own := content_key(row)) is not None and own != row["key"]:
        fault = f"holds content whose key is {own[:12]}..., not the key it is stored under"
    else:
        return
    raise DataFileError(
        f"{next(iter(store.files), store.path)}: the row stored under key {row['key'][:12]}... "
        f"{fault}; restore the file with `git checkout`, or delete that row and run again"
    )


def _named(identity: tuple) -> str:
    task, condition, example = identity
    return f"{task} {example} {condition}"


def stage_two(block: Block, rows: list[dict]) -> list[Block]:
    """The second-stage blocks (retrieve-then-solve requests, C-NORM's QA block, the
    prompts tagged by the LLM tagger's stored tags) that ``block``'s stored ``rows`` call
    for, in order; none when it has no follow-up or nothing to ask (an attention block whose
    items are not all stored has no rows, hence no second stage). A follow-up returns
    requests (this block's experiment), a :class:`Block` or a list of blocks."""
    if block.followup is None or (block.attention is not None and not rows):
        return []
    second = block.followup(rows)
    if isinstance(second, Block) or (second and all(isinstance(b, Block) for b in second)):
        blocks = [second] if isinstance(second, Block) else list(second)
        for b in blocks:
            if not block.writes_to(b.experiment):
                raise LongctxError(
                    f"block {block.name!r}: its second stage writes to {b.experiment}; "
                    "declare it as the block's followup_experiment"
                )
        return [b for b in blocks if b.size]
    return (
        [Block(f"{block.name} -> stage two", block.experiment, second, block.headline)]
        if second
        else []
    )


def stored(plan: Iterable[Block], reader: Reader, results_dir: str | Path) -> list[dict]:
    """The stored rows of every request in ``plan`` (and of their stage-two requests, built
    from the stored first-stage rows), in plan order; requests not yet run are left out."""
    return [row for _, rows in stored_blocks(plan, reader, results_dir) for row in rows]


def stored_in(
    plan: Iterable[Block], experiment: str, reader: Reader, results_dir: str | Path
) -> list[dict]:
    """:func:`stored`'s rows of the blocks that write to the store ``experiment`` (the other
    blocks are never built: a lazy block may size long contexts). Only rows under a planned
    request's key are here: a row another plan made, or one merged under a key no plan
    makes, is never counted."""
    mine = [block for block in plan if block.writes_to(experiment)]
    return [
        row
        for block, rows in stored_blocks(mine, reader, results_dir)
        if block.experiment == experiment
        for row in rows
    ]


def stored_blocks(
    plan: Iterable[Block], reader: Reader, results_dir: str | Path
) -> Iterator[tuple[Block, list[dict]]]:
    """Each block of ``plan`` with its stored rows, a block's stage two right after it."""
    queue, stores = list(plan), {}
    while queue:
        block = queue.pop(0)
        who = block.answered_by(reader)
        where = (who.results_folder(results_dir), block.experiment)
        if where not in stores:  # one read of each store for the whole plan
            store = who.store(results_dir, block.experiment)
            stores[where] = store, {r["key"]: r for r in store.rows()}
        store, by_key = stores[where]
        mine = block_rows(block, store, block_keys(block, who), by_key)
        yield block, mine
        queue[0:0] = stage_two(block, mine)


def answer(
    plan: Block | Iterable[Block],
    reader: Reader,
    results_dir: str | Path,
    *,
    batch_size: int = 8,
    token_budget: int | None = None,
    progress: bool = True,
    params: dict | None = None,
) -> list[dict]:
    """Every row of ``plan`` for ``reader``: stored rows reused, missing ones generated (the
    model loaded once, only then), stage-two blocks built from the first stage's rows; in
    plan order. What every chapter notebook calls. ``token_budget`` caps rows x tokens per
    batch (long prompts batch less)."""
    blocks = [plan] if isinstance(plan, Block) else list(plan)
    report = run(
        blocks,
        reader,
        results_dir,
        batch_size=batch_size,
        token_budget=token_budget,
        progress=progress,
        params=params,
        log=lambda line: None,
    )
    if report.missing:
        raise LongctxError(f"{report.missing} requests of this plan were not answered")
    return stored(blocks, reader, results_dir)


# ---------------------------------------------------------------------------------------------
# Runs in chunks, with a deadline


@dataclass
class Report:
    """What a run did, per block: requests, already stored, generated, seconds. A run stopped
    by its deadline also lists the blocks it never reached (``reached`` False) with their
    stored and missing rows, and in ``uncounted`` the parts it could not count without
    building them (a chapter whose plan was never built, a block of contexts never sized)."""

    blocks: list[dict] = field(default_factory=list)
    stopped_early: str | None = None
    uncounted: list[str] = field(default_factory=list)

    @property
    def missing(self) -> int:
        return sum(b["requests"] - b["stored"] - b["generated"] for b in self.blocks)

    @property
    def complete(self) -> bool:
        """Every planned row is stored."""
        return not self.missing and not self.uncounted and not self.stopped_early

    def summary(self) -> str:
        """One line: blocks, requests, stored, generated, missing, and why the run stopped."""
        unreached = sum(not b.get("reached", True) for b in self.blocks)
        line = (
            f"{len(self.blocks)} blocks"
            + (f" ({unreached} of them not reached)" if unreached else "")
            + f", {sum(b['requests'] for b in self.blocks)} requests: "
            f"{sum(b['stored'] for b in self.blocks)} already stored, "
            f"{sum(b['generated'] for b in self.blocks)} generated, {self.missing} missing"
        )
        if any("missing_prompt_tokens" in b for b in self.blocks):
            line += f", {sum(b.get('missing_prompt_tokens', 0) for b in self.blocks):,} prompt tokens to run"
            if any("estimated_seconds" in b for b in self.blocks):
                seconds = sum(b.get("estimated_seconds", 0) for b in self.blocks)
                line += f", about {_duration(seconds)}"
        if self.stopped_early:
            line += f"; {self.stopped_early}"
        if self.uncounted:
            line += (
                f"; not counted, since not built before the deadline: {', '.join(self.uncounted)}"
                " (a dry run counts them)"
            )
        return line


def approx_tokens(req: Request) -> int:
    """A cheap prompt length estimate for batching: filler tokens (placeholders) plus about
    one token per 3.5 characters of the rest."""
    # Masked gaps (MASKED_GAP) are never computed, so they add nothing.
    filler = sum(
        int(m.group(2)) for rx in (FILLER_SLOT, TOKEN_SLOT) for m in rx.finditer(req.prompt)
    )
    text = re.sub(r"<\|longctx_[^|]*\|>", "", req.prompt)
    return filler + int(len(text) / 3.5)


def chunks(
    requests: Sequence[Request], chunk_prompts: int, whole_units: bool = False
) -> list[list[Request]]:
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
        ordered = [
            r for unit in sorted(units.values(), key=len) for r in sorted(unit, key=approx_tokens)
        ]
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


def run(
    plan: Iterable[Block],
    reader: Reader,
    results_dir: str | Path,
    *,
    batch_size: int = 8,
    token_budget: int | None = None,
    chunk_prompts: int = 256,
    deadline_s: float | None = None,
    copy_to: str | Path | None = None,
    dry_run: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    params: dict | None = None,
    copy_interval_s: float = 60.0,
    load: Callable[[], object] | None = None,
    count_tokens: PromptTokens | None = None,
    speed: float | None = None,
) -> Report:
    """Run ``plan``'s blocks in order with ``reader``, in chunks sorted by length, until
    ``deadline_s`` (checked before each block and chunk, and by the backend before each batch
    or request it starts); rows already stored are skipped.
    With ``copy_to``, the stores this run adds to are copied there (see :func:`copy_flat`) at
    most every ``copy_interval_s`` seconds each and once more when it returns or fails.
    ``load`` replaces :meth:`Reader.load` (tests). A dry run given ``count_tokens`` also counts
    each block's prompt tokens and, given ``speed`` (prompt tokens per second, decoding
    included), estimates its time (:func:`_count_block`)."""
    copier = _Copier(copy_to, copy_interval_s)
    try:
        return _Run(
            plan,
            reader,
            results_dir,
            batch_size=batch_size,
            token_budget=token_budget,
            chunk_prompts=chunk_prompts,
            deadline_s=deadline_s,
            copier=copier,
            dry_run=dry_run,
            progress=progress,
            log=log,
            params=params,
            load=load or reader.load,
            count_tokens=count_tokens,
            speed=speed,
        )()
    finally:
        copier.flush()


@dataclass
class _Run:
    """One :func:`run`: its blocks in order (second stages first once made), the deadline,
    the model loaded on first need, and the report it fills."""

    plan: object
    reader: Reader
    results_dir: object
    batch_size: int
    token_budget: int | None
    chunk_prompts: int
    deadline_s: float | None
    copier: _Copier
    dry_run: bool
    progress: bool
    log: Callable[[str], None]
    params: dict | None
    load: Callable[[], object]
    count_tokens: PromptTokens | None = None
    speed: float | None = None

    def __post_init__(self):
        self.started = time.time()
        no_deadline = self.dry_run or self.deadline_s is None
        self.stop_at = None if no_deadline else self.started + self.deadline_s
        self.report, self.loaded = Report(), {}
        self.planned, self.second_stages = iter(self.plan), []
        self.checked: set[Path] = set()

    def lazy(self, reader: Reader | None = None):
        """The loaded model of ``reader`` (the run's own by default), loaded on first need;
        one model is held at a time, so a block of another reader (the LLM tagger) lets go
        of the run's model until a block of the run's reader needs it again."""
        reader = reader or self.reader
        if reader not in self.loaded:
            self.loaded.clear()
            self.loaded[reader] = (self.load if reader == self.reader else reader.load)()
        return self.loaded[reader]

    def past_deadline(self, where: str) -> bool:
        """True once the deadline has passed (never in a dry run); the report then says where
        the run stopped and counts what it did not reach."""
        if self.stop_at is None or time.time() < self.stop_at:
            return False
        self.report.stopped_early = f"deadline of {self.deadline_s:.0f} s reached {where}"
        self.log(self.report.stopped_early)
        _count_unreached(
            self.report, self.plan, self.planned, self.second_stages, self.reader, self.results_dir
        )
        return True

    def next_block(self) -> Block | None:
        if self.second_stages:
            return self.second_stages.pop(0)
        # Building the next block may be the costly part.
        if self.past_deadline("before the next block"):
            return None
        return next(self.planned, None)

    def __call__(self) -> Report:
        while (block := self.next_block()) is not None:
            reader = block.answered_by(self.reader)
            store = reader.store(self.results_dir, block.experiment)
            if self.dry_run and store.path not in self.checked:
                # a real run or pack refuses a garbage, foreign or non-row line: so does a dry run
                self.checked.add(store.path)
                store.rows()
            keys = block_keys(block, reader)
            have = store.keys()
            todo = [i for i, k in enumerate(keys) if k not in have]
            entry = self.account(block, store, keys, todo)
            if todo and not self.dry_run:
                if block.attention is not None:
                    done = self.score_attention(block, store, entry, todo)
                else:
                    done = self.generate(block, store, entry, todo, reader)
                if not done:
                    return self.report
            if block.followup is not None:
                self.second_stages[0:0] = stage_two(block, block_rows(block, store, keys))
        return self.report

    def account(self, block: Block, store, keys: list[str], todo: list[int]) -> dict:
        """The block's entry in the report, and its line in the log (in a dry run given
        ``count_tokens``, with its prompt tokens and estimated time)."""
        entry = _entry(block, len(todo))
        self.report.blocks.append(entry)
        costs = ""
        if self.dry_run and self.count_tokens is not None:
            costs = _count_block(entry, block, todo, self.count_tokens, self.speed)
            _measured(entry, store, [k for i, k in enumerate(keys) if i not in set(todo)])
        scoring = block.attention is not None
        self.log(
            f"[{time.time() - self.started:7.0f} s] {block.name}: {block.size} "
            f"{'attention prompts' if scoring else 'requests'}, "
            f"{entry['stored']} stored, {len(todo)} to {'score' if scoring else 'generate'}" + costs
        )
        return entry

    def score_attention(self, block: Block, store, entry: dict, todo: list[int]) -> bool:
        """Score an attention block's missing prompts; False if the deadline came first."""
        if self.past_deadline(f"in block '{block.name}'"):
            return False
        t0 = time.time()
        weights = attention_reader(self.reader)
        attention_rows(
            block.attention,
            store,
            weights,
            load=self.lazy if weights is self.reader else None,
            keep_vector=block.keep_vector,
            layer=block.attention_layer,
            progress=self.progress,
        )
        self.done(entry, store, len(todo), t0)
        return True

    def done(self, entry: dict, store, made: int, started: float) -> None:
        """Count ``made`` rows and the seconds since ``started`` in the block's report
        entry, and mark ``store`` for the next flat copy."""
        entry["generated"] += made
        entry["seconds"] += time.time() - started
        self.copier.touched(store)

    def generate(self, block: Block, store, entry: dict, todo: list[int], reader: Reader) -> bool:
        """Generate a block's missing rows with ``reader`` in chunks of similar length,
        checking the deadline before each; False if it came first."""
        for part in chunks(
            [block.requests[i] for i in todo], self.chunk_prompts, block.whole_units
        ):
            if self.past_deadline(f"in block '{block.name}'"):
                return False
            t0 = time.time()
            answered = generate_missing(
                part,
                store,
                reader,
                load=lambda: self.lazy(reader),
                batch_size=batch_for(part, self.batch_size, self.token_budget),
                progress=self.progress,
                params=self.params,
                stop_at=self.stop_at,
                positions=block.positions,
            )
            self.done(entry, store, len(answered), t0)
            self.log(
                f"[{time.time() - self.started:7.0f} s] {block.name}: "
                + progress_line(entry["generated"], len(todo), entry["seconds"])
            )
        return True


def _count_block(
    entry: dict, block: Block, todo: list[int], count: PromptTokens, speed: float | None
) -> str:
    """Add a block's prompt tokens (all, still to run, the longest with its answer budget) to
    its report entry; the words for its log line, with an estimated time at ``speed``."""
    tokens = count.of_block(block)
    budget = max((r.max_new_tokens for r in block.requests), default=0)
    entry.update(
        prompt_tokens=sum(tokens),
        missing_prompt_tokens=sum(tokens[i] for i in todo),
        max_prompt_tokens=max(tokens, default=0),
        max_new_tokens=budget,
        window=count.window,
    )
    words = f"; {sum(tokens):,} prompt tokens ({entry['missing_prompt_tokens']:,} to run)"
    if count.window and entry["max_prompt_tokens"] + budget > count.window:
        # never run, so never timed
        return words + (
            f"; does not fit: {entry['max_prompt_tokens'] + budget:,} tokens > {count.window:,}"
        )
    if speed and todo:
        entry["estimated_seconds"] = entry["missing_prompt_tokens"] / speed
        words += f", about {_duration(entry['estimated_seconds'])}"
    return words


def _measured(entry: dict, store: ResultsStore, stored_keys: list[str]) -> None:
    """Add what the block's stored rows cost when they were made: seconds on a CPU and on a
    GPU (each generation's share of its batch, each attention row's own time)."""
    wanted = set(stored_keys)
    rows = [r for r in store.rows() if r["key"] in wanted] if wanted else []
    by_device: dict[str, float] = {}
    for r in rows:
        device = r.get("device") or (r.get("params") or {}).get("device") or "cpu"
        device = "cpu" if str(device).startswith("cpu") else "gpu"
        # a generation's share of its batch; an attention row's own time
        seconds = r.get("seconds_per_prompt") or r.get("seconds") or 0.0
        by_device[device] = by_device.get(device, 0.0) + seconds
    entry["measured_seconds"] = by_device


def _entry(block: Block, missing: int, reached: bool = True) -> dict:
    return {
        "block": block.name,
        "experiment": block.experiment,
        # what the block asks of a backend beyond generation (a dry run says it before
        # loading); attention is computed by hf on the same weights when the backend cannot
        "needs": []
        if block.attention is not None
        else sorted(prompts_need(r.prompt for r in block.requests))
        if not isinstance(block.requests, LazyRequests) or block.requests.built
        else [],
        "requests": block.size,
        "stored": block.size - missing,
        "generated": 0,
        "seconds": 0.0,
        **({} if reached else {"reached": False}),
    }


def _count_unreached(
    report: Report, plan, planned: Iterator[Block], second_stages, reader, results_dir
) -> None:
    """Add the blocks a stopped run never reached to its report, with their stored and
    missing rows, without building anything costly: a plan that can list what it has not
    handed out (:meth:`longctx.reproduce.ChapterPlan.unreached`) says so, a list's rest is
    known; a block whose requests were never built, and a chapter whose plan never was,
    are named in ``report.uncounted``."""
    if hasattr(plan, "unreached"):
        rest, report.uncounted = plan.unreached()
    elif isinstance(plan, collections.abc.Sequence):
        rest = list(planned)
    else:
        rest, report.uncounted = [], ["the rest of the plan"]
    for block in [*second_stages, *rest]:
        if isinstance(block.requests, LazyRequests) and not block.requests.built:
            report.uncounted.append(f"block '{block.name}'")
            continue
        who = block.answered_by(reader)
        have = who.store(results_dir, block.experiment).keys()
        missing = sum(k not in have for k in block_keys(block, who))
        report.blocks.append(_entry(block, missing, reached=False))


# ---------------------------------------------------------------------------------------------
# Flat copies of new rows (a lent machine hands back a few flat files)

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


_REQUEST_KEY = re.compile(r"[0-9a-f]{64}")


def merge_copy(root: str | Path, source: str | Path, pack: bool = True) -> tuple[str, int, int]:
    """Merge a flat copy (``<folder>__<experiment>.jsonl[.xz]``) into its store under ``root``,
    the door a contributed reader's rows come through: every row must carry a request key
    (a sha256) that its own content gives (:func:`content_key`), name the model and backend
    whose folder the file name gives, and match the weights and backend of the rows that
    folder holds already (in any experiment); the first row that does not is refused in one
    line naming the file and line, and nothing is added.
    Returns (the store's folder/experiment, rows added, rows packed)."""
    folder, experiment = copy_target(Path(source).name)
    store = ResultsStore(root, folder, experiment)
    reference = None
    for other in ResultsStore.all_under(root, folder=glob.escape(folder)):  # its stores only
        if other.dir.name != experiment:
            reference = next(iter(other.packed_rows() or other.plain_rows()), None)
            if reference is not None:
                break
    added = store.merge(source, check=lambda row: _merge_fault(row, folder), reference=reference)
    packed = store.pack() if pack else 0
    return f"{folder}/{experiment}", added, packed


def _merge_fault(row: dict, folder: str) -> str | None:
    """Why a row cannot enter ``folder`` (None when it can)."""
    key, model = row["key"], row.get("model")
    if not _REQUEST_KEY.fullmatch(key):
        return f"its key {key[:24]!r} is not a request key (64 hex digits)"
    own = content_key(row)
    if own is None:
        return (
            "it does not carry the request it answers (its prompt as asked), so its key cannot "
            "be checked against its content: answer it again with this version of longctx"
        )
    if own != key:
        return f"its content gives the key {own[:12]}..., not {key[:12]}... (edited or forged)"
    if not isinstance(model, str) or not model:
        return "it names no model"
    backend = str(row.get("backend") or "hf").partition(":")[0]
    tail = "" if backend == "hf" else re.escape(f"--{backend}")
    slugs = {model_slug(model), model_slug(Path(model).name)}
    # model_folder adds a short hash of the fingerprint when two weights share one name
    if not any(re.fullmatch(re.escape(s) + r"(-[0-9a-f]{6})?" + tail, folder) for s in slugs):
        return f"a row of {model} ({backend}) does not belong in the folder {folder}"
    return None


def copy_target(name: str) -> tuple[str, str]:
    """The (model folder, experiment) a flat copy's file name stands for."""
    for suffix in (COPY_SUFFIX, ".jsonl"):
        if name.endswith(suffix):
            folder, sep, experiment = name[: -len(suffix)].partition("__")
            # one "__" only: with two, which one ends the folder cannot be told
            if sep and folder and experiment and "__" not in experiment:
                return folder, experiment
    raise DataFileError(
        f"{name} is not a flat copy of a store (<model>__<experiment>{COPY_SUFFIX})"
    )


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
