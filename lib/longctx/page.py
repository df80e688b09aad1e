"""What every chapter notebook does before its first result: one call.

    page = setup("kv_retrieval", globals())

reads the notebook's parameter cell (papermill may have replaced any of it), builds the
:class:`~longctx.reader.Reader` it names, picks out the chapter's parameters (its ``book``
scale's names) and resolves the results folder; ``page.book_run`` says whether this is the
committed run the prose describes, so a notebook checks its words only there.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType

import pandas as pd

from . import __version__
from .chapters import Chapter, ChapterResult, Run, contract, scale
from .claims import chapter_verdicts, paper_frame, read_claims
from .downloads import browser_link, chapter_links
from .matrix import CLOSED_BOOK, readers_words, state_words, verdict_box
from .matrix import build as build_matrix
from .paths import build_commit, build_date, resolve
from .plots import FigureText, figure_directive
from .reader import Reader
from .report import glue_all
from .samples import example_html


@dataclass
class Page:
    """One chapter notebook's chapter, reader, parameters (its ``book`` set with what the
    notebook's parameter cell overrides) and results folder."""

    chapter: Chapter
    params: dict
    reader: Reader
    results: Path
    analyzed: list[ChapterResult] = field(default_factory=list, repr=False)

    @property
    def name(self) -> str:
        return self.chapter.name

    @property
    def module(self) -> ModuleType:
        """The chapter's module: the tables and figures the page shows."""
        return self.chapter.module

    @property
    def design(self) -> ModuleType:
        """What the chapter's runs ask: its package's ``design`` module (the chapter's one
        module where it is not yet a package)."""
        return self._part("design")

    @property
    def numbers(self) -> ModuleType:
        """What the chapter's analysis computes: its package's ``numbers`` module (the
        chapter's one module where it is not yet a package)."""
        return self._part("numbers")

    @property
    def sections(self) -> ModuleType:
        """The chapter's tables and figures, which only its page reaches: its package's
        ``sections`` module (the chapter's one module where it is not yet a package)."""
        return self._part("sections")

    def _part(self, part: str) -> ModuleType:
        name = f"{self.chapter.module.__name__}.{part}"
        return import_module(name) if find_spec(name) is not None else self.chapter.module

    @property
    def book_run(self) -> bool:
        """The committed run: the default reader at the chapter's book scale."""
        own = {k: v for k, v in self.params.items() if k in scale(self.name, "book")}
        return self.reader == Reader() and own == scale(self.name, "book")

    def run(self, compare_with: tuple[str, str] | None = None, **options) -> Run:
        """This page's run (:meth:`Run.of`): its reader, parameters and results folder, the
        reader it is compared with, and ``options`` for generating missing rows
        (``batch_size``, ``token_budget``, ``params``)."""
        return Run.of(
            self.chapter,
            self.reader,
            "book",
            self.results,
            compare_with=compare_with,
            options=options,
            **self.params,
        )

    def scale(self, name: str) -> dict:
        """Another of this chapter's parameter sets (``paper``, ``ci``, ``smoke``)."""
        return scale(self.name, name)

    def paper(self, name: str) -> pd.DataFrame:
        """A table of the paper's own numbers, ``data/paper/<name>.csv``."""
        return paper_frame(name)

    def analyze(self, run: Run) -> ChapterResult:
        """The chapter's result over ``run`` (:meth:`Chapter.analyze`), with the numbers its
        prose quotes and its verdict box glued once; :meth:`finish` checks it."""
        result = self.chapter.analyze(run)
        glue_all(result.quoted)
        self.glue_verdicts(result.estimates)
        self.analyzed.append(result)
        return result

    def finish(self, *said: dict[str, bool]) -> None:
        """The page's last call: on the committed run, every statement of its prose (those of
        each analyzed result and ``said``) still holds; and every analyzed result is
        consistent (each prompt answered once, each interval holding its estimate)."""
        statements = {
            k: v for part in (*(r.said for r in self.analyzed), *said) for k, v in part.items()
        }
        self.check(statements)
        broken = [r.label for r in self.analyzed if not r.consistent]
        if broken:
            raise AssertionError(
                f"{self.name}: the result for {', '.join(broken)} is not consistent (a prompt "
                "answered twice or not at all, or an interval that misses its estimate)"
            )

    def check(self, said: dict[str, bool]) -> None:
        """On the committed run, fail on any statement of the prose that the rows no longer
        support; print how many were checked (the book's browser check wants a count above 0)."""
        check_statements(self.name, said, self.book_run)

    def verdicts(self, estimates: dict) -> dict[str, str]:
        """The findings page's verdict for each of this chapter's estimated claims."""
        return chapter_verdicts(self.name, estimates)

    def downloads(self) -> str:
        """Markdown links to this chapter's rows in the built site's ``downloads/``."""
        return chapter_links(self.name, self.results)

    def example(self, experiment: str, *, what: str, where: dict | None = None) -> str:
        """A collapsed block with a right and a wrong answer of this reader's rows of
        ``experiment`` whose condition has ``where``'s fields (``what`` says which, in
        words), and the link to every row of the store in the sample browser."""
        store = self.reader.store(self.results, experiment)
        rows = store.rows()
        href = browser_link(store, rows)
        browse = (
            f'\n\n<p>Every row behind this figure, with its condition, answer and score: <a href="{href}">'
            f"browse the {len(rows):,} rows</a>.</p>"
            if href
            else ""
        )
        return example_html(rows, what=what, where=where) + browse

    def glue_figure(self, name: str, fig, text: FigureText) -> None:
        """Glue ``fig`` as a numbered figure under ``name`` (:func:`glue_figure`)."""
        glue_figure(name, fig, text)

    def glue_missing(self, name: str, why: str) -> None:
        """Glue a sentence under a figure's ``name`` where its rows are not stored."""
        from IPython.display import Markdown
        from myst_nb import glue

        glue(name, Markdown(f"*{why}*"), display=False)

    def glue_verdicts(self, estimates: dict) -> None:
        """Glue the chapter's verdict box (:func:`longctx.matrix.verdict_box`: this page's
        reader's ``estimates`` beside every other reader with rows) as MyST Markdown under
        ``<chapter>-verdicts``, which the page shows under its title, and what its claims say
        on the other models (:func:`longctx.matrix.readers_words`) under
        ``<chapter>-readers``; each claim's state on this page's model in words
        (:func:`longctx.matrix.state_words`) under ``<claim id>-state``."""
        from IPython.display import Markdown
        from myst_nb import glue  # the book's package: only notebooks call this

        listed = read_claims()
        claims = [c for c in listed if c.chapter == self.name]
        if any(c.floor == "closed-book" for c in claims):  # the floor each reader's cell shows
            claims += [c for c in listed if c.id == CLOSED_BOOK and c not in claims]
        table = build_matrix(
            self.results, claims, given={self.reader.results_folder(self.results): estimates}
        )
        glue(f"{self.name}-verdicts", Markdown(verdict_box(self.name, table)), display=False)
        glue(f"{self.name}-readers", readers_words(self.name, table), display=False)
        for claim in claims:
            if claim.chapter == self.name:
                words = (
                    state_words(table.model_cell(claim.id, self.reader.model))
                    if self.reader.model in table.models
                    else "not judged: this reader has no rows at the claims scale"
                )
                glue(f"{claim.id}-state", words, display=False)


def glue_figure(name: str, fig, text: FigureText) -> None:
    """Glue ``fig`` as a numbered figure under ``name`` (the page shows it with
    ``{glue:md} name``), its caption and alt text computed (``text``), never typed."""
    from IPython.display import Markdown
    from myst_nb import glue  # the book's package: only notebooks call this

    glue(name, Markdown(figure_directive(fig, name=name, text=text)), display=False)


def book_citation() -> str:
    """The book's BibTeX entry with its version, the date of its commit and the commit it
    was built from (so a citation names the exact rows and code), as a Markdown code block."""
    date, commit = build_date(), build_commit()
    return (
        "```bibtex\n@misc{longctx2026,\n"
        "  title   = {longctx: a reproducible companion to five papers on how language models "
        "read long and retrieved contexts},\n"
        "  author  = {{The longctx authors}},\n"
        f"  year    = {{{date[:4]}}},\n"
        f"  date    = {{{date}}},\n"
        f"  version = {{{__version__}}},\n"
        f"  note    = {{Version {__version__}, built from commit {commit}}}\n"
        "}\n```\n"
    )


def check_statements(page: str, said: dict[str, bool], book_run: bool) -> None:
    """Fail on any statement of a page's prose that its committed rows no longer support,
    and print how many were checked; on another run (a different reader or size) the prose
    does not describe the numbers, so nothing is checked."""
    broken = [claim for claim, holds in said.items() if not holds] if book_run else []
    if broken:
        raise AssertionError(f"{page}: the prose says what the rows no longer support: {broken}")
    print(f"claims checked: {len(said) if book_run else 0}")


def setup(name: str, namespace: dict, *, precision: int = 3) -> Page:
    """The page of chapter ``name`` from a notebook's globals: its reader
    (:meth:`Reader.from_notebook`: ``model`` and ``reader_options``), its parameters (checked
    against the chapter's scales) and ``results_dir`` resolved against the repository; tables
    print floats with ``precision`` digits."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    pd.set_option("display.precision", precision)
    chapter = contract(name)
    reader = Reader.from_notebook(namespace)
    params = chapter.scale("book", **{k: namespace[k] for k in chapter.scales()["book"]})
    return Page(chapter, params, reader, resolve(namespace.get("results_dir", "data/results")))
