"""The one shape every chapter has: ``analyze(ctx: RunContext) -> ChapterResult``.

In the spirit of simple-evals' ``Eval(sampler) -> EvalResult``: a chapter takes one run
context (who reads, with which parameters, where the rows live, how to generate what is
missing) and returns one typed result. The notebook, ``longctx findings`` and the matrix
read the same object.

What a run builds on the way (the plan, its answered rows, a retrieval index, a haystack)
is made once per context (:meth:`RunContext.once`): the page's generation cell and the
chapter's analysis share it instead of passing it from one to the other.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..reader import Reader
from ..runner import Block, answer, stored_in

T = TypeVar("T")

# Reader-free plans of this process, by chapter and parameters (the oldest dropped first)
_SHARED_PLANS: OrderedDict[tuple, list[Block]] = OrderedDict()
SHARED_PLANS_KEPT = 8


@dataclass
class RunContext:
    """One run of a chapter: its reader, its parameters (the chapter's scale, overridden),
    the results folder, ``compare_with`` (another reader whose rows the page sets beside
    this one's, as (model, backend); ``None`` when the page names none) and ``options`` for
    generating what is missing (:func:`longctx.runner.answer`'s keywords: ``batch_size``,
    ``token_budget``, ``params`` recorded in new rows). ``premise``: the run at the scale
    whose rows the chapter's premises read beyond its own (its ``PREMISE_SCALE``), if any."""

    reader: Reader
    params: dict
    results: Path
    compare_with: tuple[str, str] | None = None
    options: dict = field(default_factory=dict)
    premise: RunContext | None = None
    _made: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def once(self, name: str, build: Callable[[], T]) -> T:
        """``build()``'s value, made on the first call for ``name`` and kept for this run."""
        if name not in self._made:
            self._made[name] = build()
        return self._made[name]

    def planned(self, plan: Callable[[dict], list[Block]]) -> list[Block]:
        """The chapter's ``plan`` for this run's parameters, built once. A chapter's plan
        that names no reader (no ``model`` in its parameters) is the same for every reader:
        runs of one process with the same parameters share it (findings over many readers)."""

        def build() -> list[Block]:
            if "model" in self.params or plan.__qualname__ != plan.__name__:
                return plan(self.params)  # sized in a reader's tokens, or a closure
            key = (
                plan.__module__,
                plan.__qualname__,
                json.dumps(self.params, sort_keys=True, default=repr),
            )
            if key not in _SHARED_PLANS:
                while len(_SHARED_PLANS) >= SHARED_PLANS_KEPT:
                    _SHARED_PLANS.popitem(last=False)
                _SHARED_PLANS[key] = plan(self.params)
            _SHARED_PLANS.move_to_end(key)
            return _SHARED_PLANS[key]

        return self.once("plan", build)

    def answered(self, name: str, plan: Callable[[], list[Block]]) -> list[dict]:
        """The rows of the plan ``plan()`` builds: stored rows read, missing ones generated
        with this context's options (the model is loaded only then); made once per run."""

        def generate():
            rows = answer(plan(), self.reader, self.results, **self.options)
            for name in [n for n in self._made if n.startswith("stored:")]:
                del self._made[name]  # the stores now hold what was generated
            return rows

        return self.once(f"answered:{name}", generate)

    def rows(self, plan: Callable[[dict], list[Block]], experiment: str) -> list[dict]:
        """The stored rows of this run's plan (stage two included) in the store
        ``experiment``, read once per run. A row counts only under the key of a request the
        plan makes: rows another scale's plan made, or rows merged under a key no plan
        makes, are never read as this run's. With no rows stored, the plan is not built
        (it may need the reader's tokenizer, hence its weights, to size its prompts)."""

        def read() -> list[dict]:
            if not self.reader.store(self.results, experiment).holds_rows():
                return []
            return stored_in(self.planned(plan), experiment, self.reader, self.results)

        return self.once(f"stored:{experiment}", read)


@dataclass(kw_only=True)
class ChapterResult:
    """What every chapter's analysis gives: ``label`` (the reader, in words), ``estimates``
    (claim id -> :class:`~longctx.report.Estimate`, what the findings page judges),
    ``verdicts`` (claim id -> the findings page's verdict), ``quoted`` (glue key -> the
    number or phrase the prose glues), ``said`` (statement -> whether the rows support it,
    checked on the committed run), ``consistent`` (every prompt answered once, every
    interval holding its estimate) and ``links`` (where the key figure's points link: a
    point -> the address of its rows, :func:`longctx.results.point_links`; None where the
    figure links none). A chapter's subclass adds its tables and figures' data as typed
    fields."""

    label: str
    estimates: dict
    verdicts: dict[str, str]
    quoted: dict[str, str] = field(default_factory=dict)
    said: dict[str, bool] = field(default_factory=dict)
    consistent: bool = True
    links: Callable | None = None
