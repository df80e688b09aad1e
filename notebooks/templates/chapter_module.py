"""A chapter module, the template (copy it to ``lib/longctx/chapters/<name>.py``).

As written it is a small working chapter: the gold pair first vs in the middle of 10
synthetic key-value pairs (Lost in the Middle, section 4.2), whose rows the key-value
chapter has committed, so its analysis runs on them with no model
(``tests/test_templates.py`` runs it so). Replace the task, the plan and the claims with
yours, and keep one subclass of :class:`~longctx.chapters.Chapter` (found, not listed):

* its declarations: ``name`` (its rows in ``data/paper/claims.csv`` and its scales file say
  it), ``order`` (where ``longctx reproduce`` runs its headline blocks among the chapters),
  ``notebook`` (its page), ``experiments`` (the stores it offers for download) and
  ``claim_blocks`` (each claim -> the strings naming the claims-scale blocks its rows come
  from);
* ``plan(run) -> list[Block]``: every prompt of the chapter, headline blocks first
  (``longctx reproduce`` and the notebook both call it, so both store the same rows);
* ``claims(run) -> {claim_id: Estimate}``: the headline comparisons, paired by the
  independent unit, from the rows of the run's planned requests (``run.rows``); each id has a
  row in ``data/paper/claims.csv`` (paper, statement, the paper's value and effect,
  direction), and the findings page reads them from here;
* ``analyze(run) -> ChapterResult``: everything the notebook shows, as numbers, in a typed
  result (:mod:`longctx.chapters.contract`): ``estimates`` and ``verdicts``, ``quoted`` (the
  numbers its prose glues), ``said`` (its statements in words, checked on the book run),
  ``consistent``, and the chapter's own tables as typed fields.

Its parameter sets are ``lib/longctx/scales/<name>.json`` (``book``, ``claims``, ``paper``,
``ci``, ``smoke``); the ``book`` set equals the notebook's parameter cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from longctx.chapters.contract import Chapter, ChapterResult, Run
from longctx.claims import Estimate, by_unit, chapter_verdicts, estimable, paired_estimate
from longctx.metrics import summarize
from longctx.plots import FigureText, accuracy_by_position, book_figure
from longctx.report import estimate_text, pct_ci
from longctx.runner import Block, all_requests
from longctx.tables import provenance, rows_table
from longctx.tasks import kv_retrieval as kv

EXPERIMENT = "kv_retrieval"  # the store folder its rows go to (here: the key-value chapter's)
NAME = "template"  # the chapter's name: its rows in data/paper/claims.csv say it
DEPTHS = {"first": 0.0, "middle": 0.5}


def examples(params: dict) -> list[kv.KVExample]:
    return kv.synthetic_examples(params["examples"], params["num_pairs"], seed=params["seed"])


def blocks(params: dict) -> list[Block]:
    requests = kv.make_requests(
        examples(params), list(DEPTHS.values()), query_aware=False, source="synthetic"
    )
    return [Block(f"{params['num_pairs']} pairs, first vs middle", EXPERIMENT, requests, True)]


@dataclass(kw_only=True)
class TemplateResult(ChapterResult):
    """The page's numbers beyond every chapter's: the scored rows, accuracy per depth and
    the figure's Data line."""

    table: pd.DataFrame
    accuracy: pd.DataFrame
    provenance: str


def answered(run: Run) -> list[dict]:
    """Every row of the plan for this run's reader (missing ones generated)."""
    return run.answered()


def accuracy_table(view: TemplateResult) -> pd.DataFrame:
    """Accuracy per depth with its 95% Wilson interval, formatted for the page."""
    cells = view.accuracy
    shown = [
        pct_ci(a, lo, hi) for a, lo, hi in zip(cells["accuracy"], cells["ci_low"], cells["ci_high"])
    ]
    return cells.assign(accuracy=shown)[["depth", "n", "accuracy"]]


def figure_text(view: TemplateResult) -> FigureText:
    """The figure's caption and alt text, computed from what it draws (a number typed in a
    notebook's figure metadata fails ``make check-book``)."""
    cells = view.accuracy.set_index("depth")["accuracy"]
    caption = (
        f"Accuracy against the gold pair's depth, {view.label}: {int(view.accuracy['n'].min())} "
        "examples per point, 95% Wilson bands."
    )
    alt = "Line chart: " + "; ".join(
        f"depth {d:g}: {100 * a:.0f} percent" for d, a in cells.items()
    )
    return FigureText(caption, alt)


@book_figure
def figure(view: TemplateResult):
    """Accuracy against the gold pair's depth."""
    return accuracy_by_position(view.accuracy, x="depth", xlabel="Relative depth of the gold pair")


class TemplateChapter(Chapter):
    """The gold pair first vs in the middle of 10 synthetic key-value pairs."""

    name = NAME
    order = 99  # where longctx reproduce runs its headline blocks among the chapters
    notebook = "notebooks/<name>.py"
    # The stores whose rows the chapter offers for download: yours, (EXPERIMENT,). Here
    # none, since the key-value chapter offers this store and two chapters may not offer one.
    experiments: tuple[str, ...] = ()
    claim_blocks = {f"{NAME}-middle": ("first vs middle",)}

    def plan(self, run: Run) -> list[Block]:
        return blocks(run.params)

    def claims(self, run: Run) -> dict[str, Estimate]:
        """Gold pair in the middle minus first, paired by example."""
        params, rows = run.params, run.rows(EXPERIMENT)
        first, middle = kv.position_indices(params["num_pairs"], list(DEPTHS.values()))
        base = {"source": "synthetic", "num_pairs": params["num_pairs"], "query_aware": False}

        def side(gold_index):
            return by_unit(rows, {**base, "gold_index": gold_index}, kv.score)

        return estimable(
            {
                f"{NAME}-middle": lambda: paired_estimate(
                    side(first), side(middle), side_names=("first", "middle")
                )
            }
        )

    def analyze(self, run: Run) -> TemplateResult:
        """Everything the page shows: accuracy per depth, the headline estimate and its
        verdict, the numbers the prose quotes and the statements it makes."""
        params, rows = run.params, answered(run)
        indices = kv.position_indices(params["num_pairs"], list(DEPTHS.values()))
        table = rows_table(rows, kv.score).assign(num_pairs=params["num_pairs"])
        table["depth"] = table["gold_index"].map(dict(zip(indices, DEPTHS.values())))
        estimates = self.claims(run)
        middle = estimates[f"{NAME}-middle"]
        return TemplateResult(
            label=run.reader.label,
            estimates=estimates,
            verdicts=chapter_verdicts(NAME, estimates),
            quoted={f"{NAME}-examples": middle.n, f"{NAME}-middle": estimate_text(middle)},
            said={"the middle is read worse than the start": middle.ci_high < 0},
            consistent=len(rows) == len(all_requests(run.planned())),
            table=table,
            accuracy=summarize(table, ["model", "num_pairs", "depth"]),  # Wilson intervals
            provenance=f"**Data.** {provenance(table, run.results, EXPERIMENT)}.",
        )
