"""Each chapter's generation plan, shared by its notebook and by ``longctx reproduce``.

A chapter module has ``plan(params) -> list[Block]``: exactly the requests the notebook
sends for those parameters, cut into blocks in priority order (the headline comparison
first). The notebook calls the same function, so the driver and the notebook produce the
same store keys by construction, and the book finds every row the driver made.

Scales are data, not code: ``lib/longctx/scales/<chapter>.json`` names parameter sets
(``book``: the committed run, sized by its confidence intervals; ``paper``: the paper's
sizes, for a GPU). The notebook's parameter cell holds the ``book`` set (a test checks).
"""

from __future__ import annotations

import collections.abc
import json
from dataclasses import dataclass, field
from importlib import import_module
from importlib.resources import files
from typing import Callable, Iterator, Sequence

from ..errors import ParameterError
from ..store import Request

CHAPTERS = {
    "kv_retrieval": "longctx.chapters.kv_retrieval",
    "length_alone": "longctx.chapters.length_alone",
    "multidoc_qa": "longctx.chapters.multidoc_qa",
    "semantic_competition": "longctx.chapters.semantic_competition",
    "cnorm": "longctx.chapters.cnorm",
    "tag_needles": "longctx.chapters.tag_needles",
    "crossing": "longctx.chapters.crossing",
}


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
        return f"LazyRequests({len(self._items)} built)" if self._items is not None else "LazyRequests(not built)"


@dataclass
class Block:
    """A group of requests run together: one experiment (results folder), a name for logs, and
    optionally a second stage built from this block's stored rows (retrieve-then-solve, or
    C-NORM's QA prompts built with the delimiter its attention rows chose). ``followup``
    returns requests (same experiment) or a whole :class:`Block`.

    An *attention* block has no generations: ``attention`` lists items (a ``prompt`` plus
    fields to keep) whose final-token attention is scored and cached, hf only
    (:func:`longctx.cnorm.attention_rows`)."""

    name: str
    experiment: str
    requests: Sequence[Request]  # a list, or LazyRequests for a block costly to build
    headline: bool = False
    followup: Callable[[list[dict]], "list[Request] | Block"] | None = field(default=None, repr=False)
    attention: list[dict] | None = field(default=None, repr=False)
    whole_units: bool = False  # run example by example (see longctx.reproduce.chunks)
    keep_vector: bool = False

    @property
    def size(self) -> int:
        return len(self.attention) if self.attention is not None else len(self.requests)


def get_chapter(name: str):
    if name not in CHAPTERS:
        raise ParameterError(f"unknown chapter '{name}'; known: {', '.join(sorted(CHAPTERS))}")
    return import_module(CHAPTERS[name])


def scales(chapter: str) -> dict[str, dict]:
    """All named parameter sets of a chapter (``book``, ``paper``, ...)."""
    get_chapter(chapter)
    return json.loads(files("longctx").joinpath("scales", f"{chapter}.json").read_text(encoding="utf-8"))


def scale(chapter: str, name: str, **overrides) -> dict:
    """One named parameter set, with ``overrides`` applied (unknown names are an error)."""
    sets = scales(chapter)
    if name not in sets:
        raise ParameterError(f"chapter '{chapter}' has no scale '{name}'; known: {', '.join(sets)}")
    params = dict(sets[name])
    unknown = set(overrides) - set(params)
    if unknown:
        raise ParameterError(f"unknown parameters for {chapter}: {sorted(unknown)}; known: {sorted(params)}")
    return {**params, **overrides}


def all_requests(blocks: Sequence[Block]) -> list[Request]:
    return [r for b in blocks for r in b.requests]
