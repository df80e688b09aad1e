"""The LLM tagger: a reader asked for each chunk's categories through the runner, its answers
stored as rows like every other prompt's (the chapter's own, so tasks never reach the runner)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from functools import cached_property

from ...errors import ParameterError
from ...prompts import load_prompt
from ...reader import Reader
from ...requests import Request, StopRule, capped
from ...runner import generate_missing
from ...tagging import (
    LLM_METHODS,
    TAG_EXPERIMENT,
    TAG_TASK,
    CategorySet,
    chunk_hash,
    load_categories,
    merged_tags,
)


class LLMTagger:
    """Tags from a language model, asked through the runner like every other prompt.

    ``reader``: the :class:`~longctx.reader.Reader` (or a model name, read through ``hf``)
    that tags. ``method``: ``classification`` (Figure 7), ``ie`` (Figure 8) or ``hybrid``
    (both, merged as in the paper: classification tags first, then any further IE tags).
    Each chunk's prompt is a :class:`~longctx.requests.Request` (task :data:`TAG_TASK`, the
    chunk's hash as example id) answered by :func:`longctx.runner.generate_missing` into
    the reader's ``tags`` store under ``results_dir``: the answers are content-keyed rows
    with their provenance, a rerun reuses them (the model is loaded, through ``load`` if
    given, only for a chunk with no row), and an interrupted run keeps what it tagged.
    Generation stops once the answer is complete (the IE answer after its leading tags).
    """

    def __init__(
        self,
        reader: Reader | str,
        categories: CategorySet | str = "privileged",
        *,
        results_dir: str | os.PathLike,
        method: str = "classification",
        load: Callable | None = None,
        batch_size: int = 8,
        min_confidence: int = 1,
        classification_tokens: int = 160,
        ie_tokens: int = 48,
        progress: bool = True,
    ):
        if method not in LLM_METHODS:
            raise ParameterError(
                f"unknown LLM tagging method '{method}'; use one of {', '.join(LLM_METHODS)}"
            )
        self.reader = reader if isinstance(reader, Reader) else Reader(reader)
        self.categories = load_categories(categories) if isinstance(categories, str) else categories
        self.method, self.batch_size, self.min_confidence = method, batch_size, min_confidence
        self.budget = {"classification": capped(classification_tokens), "ie": capped(ie_tokens)}
        self.store = self.reader.store(results_dir, TAG_EXPERIMENT)
        self._load, self.progress = load, progress

    @cached_property
    def id(self) -> str:
        templates = "".join(load_prompt(f"tag_{m}") for m in ("classification", "ie"))
        digest = hashlib.sha256(templates.encode()).hexdigest()[:8]
        return (
            f"llm:{self.reader.fingerprint}:{self.method}:{self.categories.digest}:{digest}:"
            f"{self.budget['classification']}/{self.budget['ie']}:c{self.min_confidence}"
        )

    def prompt(self, method: str, chunk: str) -> str:
        return load_prompt(f"tag_{method}").format(
            categories=self.categories.definitions(examples=True), text=chunk.strip()
        )

    def requests(self, method: str, chunks: Sequence[str]) -> list[Request]:
        """One request per chunk for ``method``'s prompt."""
        if method == "ie":
            stop = StopRule(
                newline=False, answer_pattern=r"^\s*(?:```[a-zA-Z]*\s*)?(?:<[^<>/]+>\s*)+[^<\s]"
            )
        else:
            stop = StopRule(newline=False)
        return [
            Request(
                TAG_TASK,
                chunk_hash(c),
                self.prompt(method, c),
                (),
                {"method": method, "categories": self.categories.digest},
                max_new_tokens=self.budget[method],
                stop=stop,
                meta={"chunk_start": c.strip()[:80]},
            )
            for c in chunks
        ]

    def _run(self, method: str, chunks: Sequence[str]) -> list[str]:
        rows = generate_missing(
            self.requests(method, chunks),
            self.store,
            self.reader,
            batch_size=self.batch_size,
            progress=self.progress,
            load=self._load,
        )
        return [r["raw_output"] for r in rows]

    @property
    def methods(self) -> tuple[str, ...]:
        return ("classification", "ie") if self.method == "hybrid" else (self.method,)

    def tags_from(self, outputs: dict[str, str]) -> list[str]:
        """One chunk's tags from its answer to each method (:func:`merged_tags`)."""
        return merged_tags(outputs, self.categories, self.min_confidence)

    def tag_with_raw(self, chunks: Sequence[str]) -> tuple[list[list[str]], list[str]]:
        outputs = {m: self._run(m, chunks) for m in self.methods}
        per_chunk = [{m: outputs[m][i] for m in self.methods} for i in range(len(chunks))]
        return (
            [self.tags_from(o) for o in per_chunk],
            [json.dumps(o, ensure_ascii=False) for o in per_chunk],
        )

    def tag(self, chunks: Sequence[str]) -> list[list[str]]:
        return self.tag_with_raw(chunks)[0]

    def answers(self) -> dict[str, dict[str, str]]:
        """chunk start (its first 80 characters) -> {method: the model's raw answer}, for every
        chunk this tagger has a stored answer for under ``results_dir``."""
        want = {m: (self.budget[m], self.categories.digest) for m in self.methods}
        out: dict[str, dict[str, str]] = {}
        for r in self.store.rows():
            method = r["condition"].get("method")
            if r["task"] == TAG_TASK and want.get(method) == (
                r["params"]["max_new_tokens"],
                r["condition"].get("categories"),
            ):
                out.setdefault(r["meta"]["chunk_start"], {})[method] = r["raw_output"]
        return out
