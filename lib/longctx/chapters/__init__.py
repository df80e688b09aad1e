"""Every chapter of the book, found, not listed: each module under this package that
defines a :class:`~.contract.Chapter` subclass gives one chapter (:func:`found_chapters`).

A chapter's plan is exactly the requests its notebook sends for its parameters, cut into
blocks in priority order (the headline comparison first); ``longctx reproduce`` and the
notebook call the same :meth:`~.contract.Chapter.plan`, so they produce the same store keys
by construction and the book finds every row the driver made. Its parameters are named sets
in ``lib/longctx/scales/<chapter>.json`` (:mod:`.scales`).

Each chapter is a package of one shape: its class in ``__init__``, ``design`` (the blocks:
what ``reproduce`` and the cost plan read), ``numbers`` (claims, estimates and the values the
prose quotes: what findings and the matrix read) and ``sections`` (tables and figures with
their computed text: what only the page reaches), with its statistics over scored rows
(``analysis``) and any method of its own beneath.
"""

from __future__ import annotations

import inspect
import pkgutil
from functools import cache
from importlib import import_module
from types import ModuleType

from ..errors import ParameterError
from ..reader import Reader
from .contract import PAGE_PARAMETERS, Chapter, ChapterResult, Run, generation_options
from .scales import overrides_mapping, parameter_notes

__all__ = [
    "PAGE_PARAMETERS",
    "Chapter",
    "ChapterResult",
    "Run",
    "chapters",
    "check_params",
    "contract",
    "contracts",
    "found_chapters",
    "generation_options",
    "get_chapter",
    "overrides_mapping",
    "parameter_notes",
    "register",
    "run_of",
    "scale",
    "scales",
]

# Declarations no two chapters may share: each would hide the other
UNIQUE = ("name", "order", "notebook", "experiments")


def register(found: dict[str, Chapter], chapter_class: type) -> Chapter:
    """Make ``chapter_class`` (a :class:`Chapter` subclass) and add it to ``found``; a class
    that is not one, one that leaves a method unwritten, or a name, order, notebook or store
    another chapter has, is refused."""
    if not (isinstance(chapter_class, type) and issubclass(chapter_class, Chapter)):
        raise TypeError(f"{chapter_class!r} is not a Chapter subclass")
    if inspect.isabstract(chapter_class):
        missing = ", ".join(sorted(chapter_class.__abstractmethods__))
        raise TypeError(f"chapter {chapter_class.__name__} lacks the method {missing}")
    chapter = chapter_class()
    for field_name in UNIQUE:
        value = getattr(chapter, field_name)
        for other in found.values():
            theirs = getattr(other, field_name)
            shared = set(value) & set(theirs) if isinstance(value, tuple) else value == theirs
            if shared:
                raise TypeError(
                    f"chapters {other.name} and {chapter.name} share the {field_name} "
                    f"{value if not isinstance(value, tuple) else sorted(shared)!r}"
                )
    found[chapter.name] = chapter
    return chapter


def found_chapters(package_path=__path__, package: str = __name__) -> dict[str, Chapter]:
    """Every chapter under ``package``: each :class:`Chapter` subclass a module there
    defines (not one it imports), made and registered (:func:`register`), by name, in
    ``order``."""
    found: dict[str, Chapter] = {}
    for info in pkgutil.iter_modules(package_path):
        module = import_module(f"{package}.{info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(value, Chapter)
                and value is not Chapter
                and value.__module__ == module.__name__
            ):
                register(found, value)
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


@cache
def contracts() -> dict[str, Chapter]:
    """Every chapter of this package, found, not listed (:func:`found_chapters`)."""
    return found_chapters()


def contract(name: str) -> Chapter:
    """The chapter ``name``; a one-line error for an unknown name."""
    known = contracts()
    if name not in known:
        raise ParameterError(f"unknown chapter '{name}'; known: {', '.join(sorted(known))}")
    return known[name]


def chapters() -> dict[str, ModuleType]:
    """Every chapter's module, by name, in order (the module holds the tables and figures
    its page shows)."""
    return {name: chapter.module for name, chapter in contracts().items()}


def get_chapter(name: str) -> ModuleType:
    """The chapter ``name``'s module (its page's tables and figures)."""
    return contract(name).module


def scales(chapter: str) -> dict[str, dict]:
    """All named parameter sets of a chapter, each complete: ``book`` (the committed run,
    sized by its confidence intervals; the notebook's default), ``paper``
    (the paper's sizes, for a GPU), ``claims``, ``ci`` (what CI runs the notebook with, on
    the smoke-test model) and ``smoke`` (the paper's design at a size a unit test can plan)."""
    return contract(chapter).scales()


def scale(chapter: str, name: str, **overrides) -> dict:
    """One named parameter set of ``chapter``, with ``overrides`` applied and checked."""
    return contract(chapter).scale(name, **overrides)


def run_of(
    chapter: str,
    reader: Reader | None = None,
    scale_name: str = "book",
    results="data/results",
    **kw,
) -> Run:
    """:meth:`Run.of` for the chapter named ``chapter``."""
    return Run.of(contract(chapter), reader, scale_name, results, **kw)


def check_params(chapter: str, overrides: dict, scale_name: str = "book") -> dict:
    """The chapter's parameters at ``scale_name`` with ``overrides``, checked before any work
    as :meth:`Run.of` checks them (a notebook's parameters, before papermill runs it)."""
    return Run.of(contract(chapter), None, scale_name, **overrides).params
