"""The one shape every chapter has: a :class:`Chapter` over one :class:`Run`.

As inspect_ai's ``Task`` is one object whose parts work over one state, a chapter is one
subclass of :class:`Chapter`: it declares what it is (its name, order, notebook, stores,
claim blocks and premise scale) and implements three methods over one run, ``plan(run)``
(every request, in blocks, headline blocks first), ``claims(run)`` (its estimates, read from
the rows of its planned requests only) and ``analyze(run)`` (everything its page shows, one
typed :class:`ChapterResult`). The notebook, ``longctx reproduce``, ``longctx findings`` and
the matrix call the same methods.

A :class:`Run` is who reads, at which scale, with which parameters, where the rows live and
how to generate what is missing. It is built in one place, :meth:`Run.of`, which checks the
parameters before any work; what it builds on the way (the plan, its answered rows, a
retrieval index, a haystack) is made once per run (:meth:`Run.once`).
"""

from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, TypeVar

from ..claims import Estimate, chapter_verdicts
from ..errors import ParameterError
from ..models import load_tokenizer
from ..paths import resolve
from ..reader import Reader
from ..runner import Block, answer, stored, stored_in
from ..section import Sections
from .scales import check_overrides, read_scales, scale_of

T = TypeVar("T")

# Plans that asked nothing of their reader, by chapter and parameters (the oldest dropped
# first): findings over many readers builds each such plan once.
_SHARED_PLANS: OrderedDict[tuple, list[Block]] = OrderedDict()
SHARED_PLANS_KEPT = 8
READ_ROWS = "read the reader's rows"  # what Run.stored marks: a plan built from them

# What every chapter's page takes, besides its own parameter cell's: papermill's ``-p`` (and
# ``longctx run``) sets any of them, and in Jupyter a line in the cell does.
PAGE_PARAMETERS: dict[str, str] = {
    "model": "alias, .gguf path, checkpoint directory or hub id",
    "scale": "a parameter set named in the chapter's lib/longctx/scales/<chapter>.json",
    "params": "that set's overrides, a mapping (its file's 'about' explains each)",
    "reader_options": "how to reach the model: backend, url, device, dtype, prompt_mode, ...",
    "batch_size": "prompts per batch when rows are missing (the page's own default otherwise)",
    "token_budget": "rows x prompt tokens per batch, so long prompts get smaller batches",
    "results_dir": "where the rows are stored, relative to the repository root",
}


def generation_options(namespace: dict) -> dict:
    """The page parameters that shape generation, where the notebook's globals set them:
    ``batch_size`` and ``token_budget``, each a whole number of at least 1 (a token budget
    may be None: no cap)."""
    given = {k: namespace[k] for k in ("batch_size", "token_budget") if k in namespace}
    for name, value in given.items():
        if value is None and name == "token_budget":
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ParameterError(f"{name} is a whole number of at least 1, not {value!r}")
    return given


# What every chapter declares, and the kind of each declaration
DECLARATIONS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "order": int,
    "notebook": str,
    "experiments": tuple,
    "claim_blocks": dict,
    "premise_scale": (str, type(None)),
}


class Chapter(ABC):
    """One chapter of the book. A subclass declares:

    * ``name`` (its scales file and the name commands use), ``order`` (where ``longctx
      reproduce`` runs its headline blocks among the chapters), ``notebook`` (its page's
      source; ``notebooks/<name>.py`` unless it says otherwise),
      ``experiments`` (the stores it offers for download), ``claim_blocks`` (claim id -> the
      block-name parts its rows come from) and ``premise_scale`` (the scale whose rows a
      premise reads beyond the claims' own, or None);
    * or, in place of ``experiments``, ``claim_blocks``, :meth:`plan` and :meth:`check`, a
      ``design`` module declaring ``EXPERIMENTS``, ``CLAIM_BLOCKS``, ``blocks(params)`` and,
      where the claims need it, ``check(params)``;

    and implements :meth:`plan` (unless its design's ``blocks`` is the plan), :meth:`claims`
    and :meth:`analyze` over one :class:`Run`, and optionally :meth:`check`. The
    declarations are checked when the chapter is made."""

    name: ClassVar[str]
    order: ClassVar[int]
    notebook: ClassVar[str]
    experiments: ClassVar[tuple[str, ...]]
    claim_blocks: ClassVar[dict[str, tuple[str, ...]]]
    premise_scale: ClassVar[str | None] = None
    design: ClassVar[ModuleType | None] = None

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "notebook" not in vars(cls) and isinstance(vars(cls).get("name"), str):
            cls.notebook = f"notebooks/{cls.name}.py"
        declared = vars(cls).get("design")
        if isinstance(declared, ModuleType):
            for attr, name in (("experiments", "EXPERIMENTS"), ("claim_blocks", "CLAIM_BLOCKS")):
                if attr not in vars(cls) and hasattr(declared, name):
                    setattr(cls, attr, getattr(declared, name))

    def __init__(self) -> None:
        title = type(self).__name__
        for attr, kind in DECLARATIONS.items():
            if not hasattr(self, attr):
                raise TypeError(f"chapter {title} lacks {attr}")
            value = getattr(self, attr)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise TypeError(f"chapter {title}: {attr} is {value!r}, not {kind}")
        if self.design is None and type(self).plan is Chapter.plan:
            raise TypeError(f"chapter {title} has neither a design module nor a plan")
        if not all(isinstance(e, str) for e in self.experiments) or not all(
            isinstance(parts, tuple) for parts in self.claim_blocks.values()
        ):
            raise TypeError(f"chapter {title}: experiments or claim_blocks malformed")

    def __repr__(self) -> str:
        return f"<chapter {self.name}>"

    @property
    def module(self) -> ModuleType:
        """The module the chapter is written in: the tables and figures its page shows."""
        return sys.modules[type(self).__module__]

    @property
    def sections(self) -> Sections:
        """What its page shows, by name: the ``SECTIONS`` of its package's ``sections``
        module, or of its own module where the chapter is one module."""
        if not hasattr(self.module, "__path__"):  # one module, not a package
            return self.module.SECTIONS
        return import_module(f"{self.module.__name__}.sections").SECTIONS

    def scales(self) -> dict[str, dict]:
        """Its named parameter sets, each complete (:func:`.scales.read_scales`)."""
        return read_scales(self.name)

    def scale(self, name: str, **overrides) -> dict:
        """One named parameter set with ``overrides`` applied, each of the kind the chapter's
        scales give it (:func:`.scales.scale_of`)."""
        return scale_of(self.name, self.scales(), name, overrides)

    def check(self, run: Run) -> None:
        """Refuse, in one line and before any plan is built, parameters the chapter's claims
        cannot use (a depth they compare, say): its design's ``check(params)``, where the
        design has one."""
        check = getattr(self.design, "check", None)
        if check is not None:
            check(run.params)

    def plan(self, run: Run) -> list[Block]:
        """Every request of the run, cut into blocks in priority order (headline blocks
        first): its design's ``blocks(params)`` unless the chapter says otherwise. A plan
        sized in the reader's tokens asks :meth:`Run.tokenizer`; a plan that does not is the
        same for every reader, and runs with the same parameters share it."""
        if self.design is None:
            raise NotImplementedError(f"chapter {self.name} has no design module and no plan")
        return self.design.blocks(run.params)

    def answer(self, run: Run):
        """Every row the page reads for this run, missing ones generated (the model loads
        only then): the plan's rows, made once per run; a chapter whose page reads more (a
        second reader's rows, scored parts) says so here."""
        return run.answered()

    @abstractmethod
    def claims(self, run: Run) -> dict[str, Estimate]:
        """The sized comparisons, by claim id, from the rows of the run's plan only."""

    def judged(self, run: Run, estimates: dict[str, Estimate]) -> dict:
        """The fields every :class:`ChapterResult` opens with: the reader's label, the
        estimates and each claim's verdict on them."""
        return {
            "label": run.reader.label,
            "estimates": estimates,
            "verdicts": chapter_verdicts(self.name, estimates),
        }

    @abstractmethod
    def analyze(self, run: Run) -> ChapterResult:
        """Everything the chapter's page shows, as numbers, tables and figures' data."""


@dataclass
class Run:
    """One run of a chapter: its ``reader``, the ``scale`` it starts from and its
    ``params`` (that scale, overridden), the ``results`` folder, ``compare_with`` (another
    reader whose rows the page sets beside this one's, as (model, backend); None when the
    page names none), ``options`` for generating what is missing
    (:func:`longctx.runner.answer`'s keywords: ``batch_size``, ``token_budget``, ``params``
    recorded in new rows), ``dry_run`` (no model may run, not even to plan: findings and
    ``longctx reproduce --dry-run``) and ``premise``: the run at the scale whose rows the
    chapter's premises read beyond its own (its ``premise_scale``), if any.

    Build one with :meth:`Run.of`; nothing else does."""

    chapter: Chapter
    reader: Reader
    scale: str
    params: dict
    results: Path
    compare_with: tuple[str, str] | None = None
    options: dict = field(default_factory=dict)
    dry_run: bool = False
    premise: Run | None = None
    _made: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        chapter: Chapter,
        reader: Reader | None = None,
        scale: str = "book",
        results: str | Path = "data/results",
        *,
        compare_with: tuple[str, str] | None = None,
        options: dict | None = None,
        dry_run: bool = False,
        **overrides,
    ) -> Run:
        """The run of ``chapter`` for ``reader`` (the default reader when None) at its scale
        ``scale`` with ``overrides``, rows under ``results`` (relative to the repository).
        Every parameter is checked here, before any work: its kind against the chapter's
        scales, no empty list or impossible count (:func:`.scales.check_overrides`), and
        what the chapter's own :meth:`Chapter.check` asks. The premise run, where the
        chapter has one, is planned for the same reader."""
        reader, results, sets = reader or Reader(), resolve(results), chapter.scales()
        check_overrides(chapter.name, sets["book"], overrides)
        params = scale_of(chapter.name, sets, scale, overrides)
        premise = None
        if chapter.premise_scale is not None:
            premise_params = scale_of(chapter.name, sets, chapter.premise_scale, {})
            premise = cls(
                chapter, reader, chapter.premise_scale, premise_params, results, dry_run=dry_run
            )
        run = cls(
            chapter,
            reader,
            scale,
            params,
            results,
            compare_with,
            dict(options or {}),
            dry_run,
            premise,
        )
        chapter.check(run)
        return run

    def once(self, name: str, build: Callable[[], T]) -> T:
        """``build()``'s value, made on the first call for ``name`` and kept for this run."""
        if name not in self._made:
            self._made[name] = build()
        return self._made[name]

    def tokenizer(self):
        """The reader's tokenizer, for a plan sized in the reader's tokens (asking for it
        marks the plan as this reader's own)."""
        return self.once("tokenizer", lambda: load_tokenizer(self.reader.model))

    def stored(self, blocks: list[Block]) -> list[dict]:
        """This reader's stored rows of ``blocks``, for a plan that depends on them (asking
        marks the plan as this reader's own, as asking for its tokenizer does)."""
        self._made[READ_ROWS] = True
        return stored(blocks, self.reader, self.results)

    def planned(self) -> list[Block]:
        """The chapter's plan for this run, built once. A plan that asked for neither the
        reader's tokenizer nor its rows is the same for every reader: runs of one process with
        the same parameters share it (findings over many readers)."""
        return self.once("plan", self._shared_plan)

    def _shared_plan(self) -> list[Block]:
        key = (
            self.chapter.name,
            json.dumps(self.params, sort_keys=True, default=repr),
            self.dry_run,
            str(self.results),
        )
        if key in _SHARED_PLANS:
            _SHARED_PLANS.move_to_end(key)
            return _SHARED_PLANS[key]
        own = ("tokenizer", READ_ROWS)
        own_before = any(n in self._made for n in own)
        blocks = self.chapter.plan(self)
        if not own_before and not any(n in self._made for n in own):
            while len(_SHARED_PLANS) >= SHARED_PLANS_KEPT:
                _SHARED_PLANS.popitem(last=False)
            _SHARED_PLANS[key] = blocks
        return blocks

    def answered(self, name: str = "plan", blocks: Callable[[], list[Block]] | None = None):
        """The rows of ``blocks()`` (the run's plan when None): stored rows read, missing ones
        generated with this run's options (the model is loaded only then); made once per
        run under ``name``."""

        def generate():
            rows = answer((blocks or self.planned)(), self.reader, self.results, **self.options)
            for made in [n for n in self._made if n.startswith("stored:")]:
                del self._made[made]  # the stores now hold what was generated
            return rows

        return self.once(f"answered:{name}", generate)

    def rows(self, experiment: str) -> list[dict]:
        """The stored rows of this run's plan (stage two included) in the store
        ``experiment``, read once per run. A row counts only under the key of a request the
        plan makes: rows another scale's plan made, or rows merged under a key no plan
        makes, are never read as this run's. With no rows stored, the plan is not built
        (it may need the reader's tokenizer, hence its weights, to size its prompts)."""

        def read() -> list[dict]:
            if not self.reader.store(self.results, experiment).holds_rows():
                return []
            return stored_in(self.planned(), experiment, self.reader, self.results)

        return self.once(f"stored:{experiment}", read)


@dataclass(kw_only=True)
class ChapterResult:
    """What every chapter's analysis gives: ``label`` (the reader, in words), ``estimates``
    (claim id -> :class:`~longctx.report.Estimate`, what the findings page judges),
    ``verdicts`` (claim id -> the findings page's verdict), ``quoted`` (glue key -> the
    number or phrase the prose glues), ``said`` (statement -> whether the rows support it,
    checked on the committed run), ``consistent`` (every prompt answered once, every
    interval holding its estimate) and ``links`` (where the key figure's points link: a
    point -> the address of its rows, :func:`longctx.tables.point_links`; None where the
    figure links none). A chapter's subclass adds its tables and figures' data as typed
    fields."""

    label: str
    estimates: dict
    verdicts: dict[str, str]
    quoted: dict[str, str] = field(default_factory=dict)
    said: dict[str, bool] = field(default_factory=dict)
    consistent: bool = True
    links: Callable | None = None


def answered_once(rows: list[dict], requests: list | None = None) -> bool:
    """Every prompt answered once: no key twice among ``rows`` and, given the plan's
    ``requests``, a row for each."""
    once = len({r["key"] for r in rows}) == len(rows)
    return once and (requests is None or len(rows) == len(requests))


def intervals_hold(summary) -> bool:
    """Every interval of a ``summary`` table (``accuracy``, ``ci_low``, ``ci_high``) holds
    its estimate."""
    return bool(
        (
            (summary["ci_low"] <= summary["accuracy"]) & (summary["accuracy"] <= summary["ci_high"])
        ).all()
    )


def one_row_each(frame, keys: list[str]) -> bool:
    """``frame`` has rows, and one at most for each combination of ``keys`` (one answer per
    question and condition)."""
    return len(frame) > 0 and not frame.duplicated(keys).any()
