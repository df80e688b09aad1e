"""Mitigations chapter: what rescues the middle. Every training-free fix for a lost middle on
Lost in the Middle's multi-document QA task, paired by question with the baseline and with a
random-shuffle control, on every reader with rows.

The chapter is one package: :mod:`.design` (the arms as blocks), :mod:`.numbers` (the gains
and what the page quotes) and :mod:`.sections` (tables and the figure), and here its class.
Its rules were fixed in ``data/paper/preregistered.csv`` before any row; a fix's two rules
move unchanged into ``claims.csv`` when the default reader's rows of that arm are committed,
and the book scale names exactly those arms.
"""

from __future__ import annotations

import pandas as pd

from ...claims import Estimate
from ...report import params_text
from ...runner import Block
from ...tables import provenances, rows_table, stored_readers
from ...tasks import multidoc_qa as qa
from ..contract import Chapter, Run, answered_once
from ..scales import read_scales
from . import design, numbers


class Mitigations(Chapter):
    """What rescues the middle: each fix against the baseline and the random shuffle."""

    name = "mitigations"
    order = 8
    design = design
    # The claims the book's arms can judge: the other fixes' rules stay pre-registered
    claim_blocks = design.claim_blocks(read_scales("mitigations")["book"]["arms"])

    def plan(self, run: Run) -> list[Block]:
        """The design's blocks; Found in the Middle's arm needs the edge this reader reads
        best, from its baseline rows (answered first unless the run may not generate)."""
        params = run.params
        if "fitm" not in params["arms"]:
            return design.blocks(params)
        baseline = design.blocks(params)[:1]
        rows = run.stored(baseline)
        if len(rows) < len(baseline[0].requests) and not run.dry_run:
            rows = run.answered("baseline", lambda: baseline)
        complete = len(rows) == len(baseline[0].requests)
        edge = numbers.best_edge(rows, params["num_documents"]) if complete else None
        return design.blocks(params, edge)

    def claims(self, run: Run) -> dict[str, Estimate]:
        """Each fix of the run against the baseline and against the random shuffle with the
        gold in the middle, paired by question (:func:`.numbers.claims`)."""
        return numbers.claims(answers(run), run.params)

    def readers(self, run: Run) -> list[Run]:
        """This run, then a run of the same parameters for every other reader whose
        mitigations rows are stored (read only: nothing is generated for them)."""
        others = [
            Run.of(self, other, run.scale, run.results, dry_run=True, **run.params)
            for other in stored_readers(run.results, design.EXPERIMENT)
            if other != run.reader
        ]
        return [run, *others]

    def analyze(self, run: Run) -> numbers.MitigationsResult:
        """Every reader's accuracy per arm and position, each fix's gains over the baseline
        and the shuffle per reader, the numbers the prose quotes and the statements it makes."""
        params, k = run.params, run.params["num_documents"]
        self.answer(run)  # generate what is missing before reading each store
        accuracy, estimates, edges = [], {}, {}
        readers = self.readers(run)
        for each in readers:
            label, rows = each.reader.label, answers(each)
            accuracy.append(numbers.position_accuracy(rows, k).assign(model=label))
            estimates[label] = numbers.claims(rows, each.params)
            edges[label] = numbers.edge_or_none(rows, k)
        table = numbers.gains(estimates)
        pending = tuple(a for a in design.ARMS if a not in params["arms"])
        recited = numbers.recitations(answers(run), k)
        # every reader drawn on the page names its stores
        data = provenances(
            run.results,
            [
                (rows_table([r for each in readers for r in each.rows(store)], qa.score), store)
                for store in (design.BASELINE, design.EXPERIMENT)
            ],
        )
        return numbers.MitigationsResult(
            **self.judged(run, estimates[run.reader.label]),
            accuracy=pd.concat(accuracy, ignore_index=True),
            gains=table,
            edges=edges,
            pending=pending,
            recitations=recited,
            quoted=numbers.quoted(table, params, pending, edges, run.reader.label, recited),
            said=numbers.statements(table, run.reader.label),
            provenance=(
                f"**Data.** {data} Greedy decoding, prompts from `lib/longctx/prompts/`; "
                f"parameters: {params_text(params)}."
            ),
            # the answers only: two attention items asking one prompt share its row
            consistent=answered_once(answers(run)),
        )


def answers(run: Run) -> list[dict]:
    """The run's stored answers: the baseline and query-aware prompts in the multi-document
    chapter's store, the other arms in the chapter's own."""
    return run.rows(design.BASELINE) + run.rows(design.EXPERIMENT)
