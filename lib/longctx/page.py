"""What every chapter notebook does before its first result: one call.

    page = setup("kv_retrieval", globals())

reads the page parameters (:data:`~longctx.chapters.PAGE_PARAMETERS`) from the notebook's
globals: its parameter cell names the model and the scale, and papermill or a line in the
cell sets the others. It builds the :class:`~longctx.reader.Reader` they name, resolves
the chapter's parameters (the ``scale``, ``book`` by default, with the ``params``
overrides), the results folder and the generation options; ``page.book_run`` says
whether this is the committed run the prose describes, so a notebook checks its words
only there.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import __version__
from .chapters import (
    Chapter,
    ChapterResult,
    Run,
    contract,
    generation_options,
    overrides_mapping,
    scale,
)
from .claims import paper_frame, read_claims
from .downloads import browser_link, chapter_links
from .matrix import CLOSED_BOOK, readers_words, state_words, verdict_box
from .matrix import build as build_matrix
from .paths import build_commit, build_date, resolve
from .plots import FigureText, figure_directive
from .reader import Reader
from .replay import replay_summary
from .report import glue_all, say, show
from .samples import example_html
from .section import (
    Downloads,
    Example,
    Figure,
    PaperTable,
    Part,
    ReplayReport,
    Section,
    Table,
)


@dataclass
class Page:
    """One chapter notebook's chapter, reader, results folder and parameters: the chapter's
    scale ``scale_name`` with the parameter cell's ``overrides``; ``checked`` is its run,
    built (and its parameters checked) when the page is set up, before any work."""

    chapter: Chapter
    reader: Reader
    results: Path
    scale_name: str = "book"
    overrides: dict = field(default_factory=dict)
    generation: dict = field(default_factory=dict)
    checked: Run | None = field(default=None, repr=False)
    analyzed: list[ChapterResult] = field(default_factory=list, repr=False)
    runs: list[Run] = field(default_factory=list, repr=False)
    shown: list[Section] = field(default_factory=list, repr=False)

    @property
    def name(self) -> str:
        return self.chapter.name

    @property
    def params(self) -> dict:
        """The chapter's parameters this page runs with (checked)."""
        return self._checked().params

    def _checked(self) -> Run:
        if self.checked is None:
            self.checked = Run.of(
                self.chapter, self.reader, self.scale_name, self.results, **self.overrides
            )
        return self.checked

    @property
    def book_run(self) -> bool:
        """The committed run: the default reader at the chapter's book scale."""
        return self.reader == Reader() and self.params == scale(self.name, "book")

    def run(
        self,
        compare_with: tuple[str, str] | None = None,
        *,
        record: tuple[str, ...] = (),
        **options,
    ) -> Run:
        """This page's run: its reader, parameters and results folder (the run checked when
        the page was set up; a further call builds another with :meth:`Run.of`), the reader
        it is compared with, and ``options`` for generating missing rows (``batch_size``,
        ``token_budget``: the page's defaults, which the page parameters of those names
        override); new rows record the chapter parameters named in ``record``."""
        options = {**options, **self.generation}
        if record:
            options["params"] = {k: self.params[k] for k in record}
        if self.runs:
            run = Run.of(
                self.chapter,
                self.reader,
                self.scale_name,
                self.results,
                compare_with=compare_with,
                options=options,
                **self.overrides,
            )
        else:  # nothing has read the checked run yet: it only needs what to generate with
            run = self._checked()
            run.compare_with, run.options = compare_with, dict(options)
        self.runs.append(run)
        return run

    def paper(self, name: str) -> pd.DataFrame:
        """A table of the paper's own numbers, ``data/paper/<name>.csv``."""
        return paper_frame(name)

    def analyze(self, run: Run) -> ChapterResult:
        """The chapter's result over ``run`` (:meth:`Chapter.analyze`), the rows it reads
        answered first (:meth:`Chapter.answer`: stored rows reused, the model loaded only for
        missing ones), with the numbers its prose quotes and its verdict box glued once;
        :meth:`finish` checks it."""
        self.chapter.answer(run)
        result = self.chapter.analyze(run)
        glue_all(result.quoted)
        self.glue_verdicts(result.estimates)
        self.analyzed.append(result)
        if not self.runs or self.runs[-1] is not run:
            self.runs.append(run)
        return result

    def show(self, name: str) -> None:
        """Render the chapter's section ``name`` (:attr:`Chapter.sections`) over the last run
        and the result last analyzed (None before :meth:`analyze`): its values glued for the
        prose, then each part in order (tables for people, figures glued under their names,
        worked examples, the paper's numbers, the downloads, computed paragraphs)."""
        if not self.runs:
            raise RuntimeError(f"{self.name}: make the page's run (page.run) before a section")
        result = self.analyzed[-1] if self.analyzed else None
        section = self.chapter.sections.build(name, result, self.runs[-1])
        glue_all(section.quoted)
        self.shown.append(section)
        for part in section.parts:
            self._render(part)

    def _render(self, part: Part) -> None:
        if isinstance(part, str):
            say(part)
        elif isinstance(part, Table):
            show(part.frame, part.notes, caption=part.caption)
        elif isinstance(part, Figure):
            if part.figure is None:
                glue_missing(part.name, part.missing)
            else:
                glue_figure(part.name, part.figure, part.text)
        elif isinstance(part, Example):
            say(self.example(part.experiment, what=part.what, where=part.where))
        elif isinstance(part, PaperTable):
            paper = self.paper(part.name)
            if part.source:
                paper = paper[paper["source"].str.startswith(part.source)].drop(columns=["source"])
            show(paper, caption=part.caption)
        elif isinstance(part, Downloads):
            say(self.downloads())
        elif isinstance(part, ReplayReport):
            say(replay_summary(part.path))

    def finish(self, *said: dict[str, bool]) -> None:
        """The page's last call: on the committed run, every statement of its prose (those of
        each analyzed result, each section shown and ``said``) still holds; and every analyzed
        result is consistent (each prompt answered once, each interval holding its estimate)."""
        said_all = (*(r.said for r in self.analyzed), *(s.said for s in self.shown), *said)
        statements = {k: v for part in said_all for k, v in part.items()}
        check_statements(self.name, statements, self.book_run)
        broken = [r.label for r in self.analyzed if not r.consistent]
        if broken:
            raise AssertionError(
                f"{self.name}: the result for {', '.join(broken)} is not consistent (a prompt "
                "answered twice or not at all, or an interval that misses its estimate)"
            )

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


def glue_missing(name: str, why: str) -> None:
    """Glue a sentence under a figure's ``name`` where its rows are not stored."""
    from IPython.display import Markdown
    from myst_nb import glue  # the book's package: only notebooks call this

    glue(name, Markdown(f"*{why}*"), display=False)


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
    (:meth:`Reader.from_notebook`: ``model`` and ``reader_options``), its parameters (the
    chapter's ``scale``, ``book`` by default, with the ``params`` overrides, checked as a run
    checks them), ``results_dir`` resolved against the repository, and ``batch_size`` and
    ``token_budget`` where set (:func:`generation_options`); tables print floats with
    ``precision`` digits."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    pd.set_option("display.precision", precision)
    chapter = contract(name)
    reader = Reader.from_notebook(namespace)
    page = Page(
        chapter,
        reader,
        resolve(namespace.get("results_dir", "data/results")),
        namespace.get("scale", "book"),
        overrides_mapping(name, namespace.get("params")),
        generation_options(namespace),
    )
    page._checked()  # every parameter checked before the first cell that works
    return page
