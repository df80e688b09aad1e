"""A chapter module, the template: copy it to ``lib/longctx/chapters/newchapter.py`` and
replace ``newchapter`` with your chapter's name everywhere.

As written it is a small working chapter on its own task (``task_module.py`` beside it:
pass-key retrieval): the key first vs in the middle of the filler, paired by key.
``tests/test_templates.py`` follows the whole contributor path with it in a copy of the
repository: the files copied, rows generated, the golden findings and the verdict log
updated, and the repository's generic tests run there. Replace the task, the plan and the
claims with yours, and keep one subclass of :class:`~longctx.chapters.Chapter` (found, not
listed):

* its declarations: ``name`` (its rows in ``data/paper/claims.csv`` and its scales file say
  it), ``order`` (where ``longctx reproduce`` runs its headline blocks among the chapters),
  ``notebook`` (its page), ``experiments`` (the stores it writes and offers for download)
  and ``claim_blocks`` (each claim -> the strings naming the claims-scale blocks its rows
  come from);
* ``plan(run) -> list[Block]``: every prompt of the chapter, headline blocks first
  (``longctx reproduce`` and the notebook both call it, so both store the same rows);
* ``claims(run) -> {claim_id: Estimate}``: the headline comparisons, paired by the
  independent unit, from the rows of the run's planned requests (``run.rows``); each id has a
  row in ``data/paper/claims.csv`` (paper, statement, the paper's value and effect,
  direction), and the findings page reads them from here;
* ``analyze(run) -> ChapterResult``: everything the notebook shows, as numbers, in a typed
  result (:mod:`longctx.chapters.contract`): ``estimates`` and ``verdicts``, ``quoted`` (the
  numbers its prose glues), ``said`` (its statements in words, checked on the book run),
  ``consistent``, and the chapter's own tables as typed fields;
* ``SECTIONS``: the page's named sections (:mod:`longctx.section`), each built from the
  analyzed result and its run: tables, figures with computed captions, worked examples, the
  paper's numbers. The notebook is prose and ``page.show(name)`` calls.

Its parameter sets are ``lib/longctx/scales/newchapter.json`` (``scales.json`` beside this
file: ``book``, ``claims``, ``paper``, ``ci``, ``smoke``, and ``about``: what each parameter
means); the notebook's parameter cell names the model and one set, and ``params`` (a page
parameter, :data:`~longctx.chapters.PAGE_PARAMETERS`) holds only its overrides. A chapter
that grows past a few hundred lines becomes a package of the book's one shape (``design``,
``numbers``, ``sections``; CONTRIBUTING.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from longctx.chapters.contract import Chapter, ChapterResult, Run
from longctx.claims import Estimate, by_unit, estimable, paired_estimate
from longctx.metrics import summarize
from longctx.plots import FigureText, accuracy_by_position, book_figure
from longctx.report import estimate_text, pct_ci
from longctx.runner import Block, all_requests
from longctx.section import Example, Figure, PaperTable, Sections, Shown, Table
from longctx.tables import provenance, rows_table
from longctx.tasks import newchapter as task

EXPERIMENT = "newchapter"  # the store folder its rows go to
NAME = "newchapter"  # the chapter's name: its rows in data/paper/claims.csv say it
DEPTHS = {"first": 0.0, "middle": 0.5}


def blocks(params: dict) -> list[Block]:
    examples = task.examples(params["examples"], seed=params["seed"])
    requests = task.make_requests(examples, params["fillers"], list(DEPTHS.values()))
    return [Block(f"{params['fillers']} fillers, first vs middle", EXPERIMENT, requests, True)]


@dataclass(kw_only=True)
class NewChapterResult(ChapterResult):
    """The page's numbers beyond every chapter's: the scored rows, accuracy per depth and
    the figure's Data line."""

    table: pd.DataFrame
    accuracy: pd.DataFrame
    provenance: str


def accuracy_table(view: NewChapterResult) -> pd.DataFrame:
    """Accuracy per depth with its 95% Wilson interval, formatted for the page."""
    cells = view.accuracy
    shown = [
        pct_ci(a, lo, hi) for a, lo, hi in zip(cells["accuracy"], cells["ci_low"], cells["ci_high"])
    ]
    return cells.assign(accuracy=shown)[["depth", "n", "accuracy"]]


def figure_text(view: NewChapterResult) -> FigureText:
    """The figure's caption and alt text, computed from what it draws (a number typed in a
    notebook's figure metadata fails ``make check-book``)."""
    cells = view.accuracy.set_index("depth")["accuracy"]
    caption = (
        f"Accuracy against the key's depth, {view.label}: {int(view.accuracy['n'].min())} "
        "examples per point, 95% Wilson bands."
    )
    alt = "Line chart: " + "; ".join(
        f"depth {d:g}: {100 * a:.0f} percent" for d, a in cells.items()
    )
    return FigureText(caption, alt)


@book_figure
def figure(view: NewChapterResult):
    """Accuracy against the key's depth."""
    return accuracy_by_position(
        view.accuracy,
        x="depth",
        facet="fillers",
        facet_title="{} filler sentences",
        xlabel="Relative depth of the key",
    )


class NewChapter(Chapter):
    """The pass key first vs in the middle of the filler."""

    name = NAME
    order = 99
    experiments = (EXPERIMENT,)
    claim_blocks = {f"{NAME}-middle": ("first vs middle",)}

    def plan(self, run: Run) -> list[Block]:
        return blocks(run.params)

    def claims(self, run: Run) -> dict[str, Estimate]:
        """The key in the middle minus first, paired by key."""
        params, rows = run.params, run.rows(EXPERIMENT)

        def side(depth):
            return by_unit(rows, {"fillers": params["fillers"], "depth": depth}, task.score)

        return estimable(
            {
                f"{NAME}-middle": lambda: paired_estimate(
                    side(DEPTHS["first"]), side(DEPTHS["middle"]), side_names=("first", "middle")
                )
            }
        )

    def analyze(self, run: Run) -> NewChapterResult:
        """Everything the page shows: accuracy per depth, the headline estimate and its
        verdict, the numbers the prose quotes and the statements it makes."""
        rows = self.answer(run)
        table = rows_table(rows, task.score)
        estimates = self.claims(run)
        middle = estimates[f"{NAME}-middle"]
        return NewChapterResult(
            **self.judged(run, estimates),
            quoted={f"{NAME}-examples": middle.n, f"{NAME}-middle": estimate_text(middle)},
            said={"the middle is not read better than the start": middle.ci_low <= 0},
            consistent=len(rows) == len(all_requests(run.planned())),
            table=table,
            accuracy=summarize(table, ["model", "fillers", "depth"]),  # Wilson intervals
            provenance=f"**Data.** {provenance(table, run.results, EXPERIMENT)}.",
        )


SECTIONS = Sections()  # what the page shows: page.show("figure") renders one


@SECTIONS("figure")
def show_figure(view: NewChapterResult, run: Run) -> Shown:
    return Figure("fig-newchapter-headline", figure(view), figure_text(view))


@SECTIONS("example")
def show_example(view: NewChapterResult, run: Run) -> Shown:
    where = {"depth": DEPTHS["middle"]}
    return Example(EXPERIMENT, what="the key in the middle", where=where)


@SECTIONS("accuracy")
def show_accuracy(view: NewChapterResult, run: Run) -> Shown:
    caption = "Accuracy (%) [95% Wilson interval]."
    return Table(accuracy_table(view), caption=caption)


@SECTIONS("paper")
def show_paper(view: NewChapterResult, run: Run) -> Shown:
    return PaperTable(NAME, caption="The paper's numbers.")
