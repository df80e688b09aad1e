"""What a chapter's page shows, as data: a :class:`Section` is one named part of a page
(its tables, figures, worked examples and computed paragraphs, in order, and the values its
prose quotes), built by the chapter's ``sections`` module from one analyzed result and its
run, and rendered by the page (``page.show("headline")``).

A chapter declares its sections in a :class:`Sections` registry, ``SECTIONS``, by
decorating each builder, ``(result, run) -> Section``, with its name
(``@SECTIONS("headline")``), or several built from the result alone at once
(:meth:`Sections.declare`); a name taken twice is refused. The parts say what to show, never how: the page
renders a :class:`Table` for people, glues a :class:`Figure` under its name with its
computed caption and alt text, and fills an :class:`Example`, a :class:`PaperTable` or
:class:`Downloads` from the stores and the paper's tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .plots import FigureText


@dataclass(frozen=True)
class Table:
    """A table for people (:func:`longctx.report.show`): ``caption`` above it, saying what it
    is (required: a reader who lands on a table from a link has no prose before it), ``notes``
    under it."""

    frame: pd.DataFrame
    notes: str | None = None
    caption: str = field(kw_only=True)

    def __post_init__(self):
        if not self.caption or not self.caption.strip():
            raise ValueError("a table needs a caption that says what it is")


@dataclass(frozen=True)
class Figure:
    """A figure glued under ``name`` (the prose shows it with ``{glue:md} name``), with its
    computed ``text``; where it cannot be drawn, ``figure`` is None and ``missing`` says why,
    in its place."""

    name: str
    figure: Any
    text: FigureText | None = None
    missing: str = ""

    @classmethod
    def when(cls, stored, name: str, draw: Callable, text: Callable, missing: str) -> Figure:
        """``draw()`` with ``text()`` under ``name`` where ``stored`` is true (its rows are
        stored), else the sentence ``missing`` in its place."""
        return cls(name, draw(), text()) if stored else cls(name, None, missing=missing)

    def __post_init__(self):
        drawn = self.figure is not None and self.text is not None
        if not drawn and not (self.figure is None and self.missing):
            raise ValueError(
                f"figure {self.name}: give a figure and its text, or why it is missing"
            )


@dataclass(frozen=True)
class Example:
    """A right and a wrong answer of the page reader's rows of ``experiment`` whose condition
    has ``where``'s fields (``what`` says which, in words), and the link to every row."""

    experiment: str
    what: str
    where: dict | None = None

    @classmethod
    def largest(cls, experiment: str, params: dict, size: str, what: str) -> Example:
        """At the largest value of the size parameter ``size`` (pairs, documents), the query
        at the end; ``what`` says it in words, ``{}`` standing for that size."""
        largest = max(params[size])
        return cls(experiment, what.format(largest), {size: largest, "query_aware": False})


@dataclass(frozen=True)
class PaperTable:
    """The paper's own numbers, ``data/paper/<name>.csv``, with only the rows whose
    ``source`` starts with ``source`` (all when empty), that column dropped when filtered;
    ``caption`` says which of the paper's tables or figures they are."""

    name: str
    source: str = ""
    caption: str = field(default="", kw_only=True)

    def __post_init__(self):
        if not self.caption.strip():
            raise ValueError(f"the paper's table {self.name}: give a caption saying what it is")


@dataclass(frozen=True)
class Downloads:
    """Links to the chapter's rows in the built site's ``downloads/``."""


@dataclass(frozen=True)
class ReplayReport:
    """What a committed replay report (``longctx replay``'s JSON, ``path`` from the
    repository root) found, in words."""

    path: str


Part = str | Table | Figure | Example | PaperTable | Downloads | ReplayReport


@dataclass(frozen=True)
class Section:
    """One named part of a page: its ``parts`` in order (a string is Markdown computed from
    the rows), the values its prose quotes (``quoted``, glued by name) and the statements its
    prose makes in words (``said``, checked on the book run when the page finishes)."""

    parts: tuple[Part, ...] = ()
    quoted: dict = field(default_factory=dict)
    said: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self):
        wrong = [p for p in self.parts if not isinstance(p, Part)]
        if wrong:
            raise TypeError(f"a section holds text, tables, figures and examples, not {wrong!r}")


def parts_of(items) -> tuple[Part, ...]:
    """Parts from a list of what a chapter's table functions return: a ``(DataFrame,
    caption)`` pair, or Markdown; a bare DataFrame is refused, as it would have no caption."""
    if bare := [i for i, item in enumerate(items) if isinstance(item, pd.DataFrame)]:
        raise TypeError(f"items {bare}: a table is a (DataFrame, caption) pair, not a bare frame")
    return tuple(
        Table(item[0], caption=item[1]) if isinstance(item, tuple) else item for item in items
    )


Shown = Section | Part | tuple[Part, ...]  # what a builder returns: a section or its parts
Builder = Callable[[Any, Any], Shown]

# Sections every chapter page has, built the same way for each: a chapter need not declare them.
COMMON: dict[str, Builder] = {
    "downloads": lambda result, run: Downloads(),
    "provenance": lambda result, run: result.provenance,  # its "**Data.**" line
}


class Sections(dict[str, Builder]):
    """A chapter's named sections: ``@SECTIONS("headline")`` over a builder adds it under
    that name; a name taken twice, or one every page has (:data:`COMMON`), is refused. A
    builder returns a :class:`Section`, or only its parts (one, or a tuple)."""

    def __call__(self, name: str) -> Callable[[Builder], Builder]:
        if name in self or name in COMMON:
            raise ValueError(f"section '{name}' is declared twice")

        def add(builder: Builder) -> Builder:
            self[name] = builder
            return builder

        return add

    def declare(self, builders: dict[str, Callable[[Any], Shown]]) -> None:
        """Several sections at once, each built from the analyzed result alone, one line a
        section: ``SECTIONS.declare({"sizing": lambda view: Table(sizing(view), caption=SIZING_CAPTION)})``.
        A builder that reads the run is declared with ``@SECTIONS(name)``."""
        for name, build in builders.items():
            self(name)(lambda result, run, build=build: build(result))

    def build(self, name: str, result, run) -> Section:
        """Section ``name`` (the chapter's own, or one every page has) over one analyzed
        ``result`` and its ``run``."""
        builder = self.get(name) or COMMON.get(name)
        if builder is None:
            known = ", ".join([*self, *COMMON])
            raise KeyError(f"no section '{name}'; this chapter's: {known}")
        built = builder(result, run)
        if isinstance(built, Section):
            return built
        return Section(built if isinstance(built, tuple) else (built,))
