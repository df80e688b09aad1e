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

import json
from dataclasses import dataclass, field
from importlib import import_module
from importlib.resources import files
from typing import Callable, Sequence

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
    requests: list[Request]
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
