"""Crossing chapter: six manipulations from the five papers, two levels each, crossed on
10-document NQ-Open QA in a 2^(6-1) half fraction (resolution VI), every question in
every cell.

Factors (low vs high level, and the paper whose claim the high level tests):

* ``position``: gold document first vs in the middle (Lost in the Middle: middle hurts);
* ``format``: passages as they are vs C-NORM with ``cnorm_delimiter`` at p = 0.5 (C-NORM:
  helps);
* ``tags``: untagged vs spaCy tags with their definitions in the system prompt (TAG: helps);
* ``distractors``: the BM25 top ranks (hard) vs a seeded draw from the bottom half of the
  ranking (far; semantic competition: far distractors hurt less than hard ones);
* ``filler``: none vs ``filler_tokens`` whitespace tokens between the documents and the
  question (context length alone: hurts);
* ``query_aware``: question after the documents only vs also before them (Lost in the
  Middle: little effect on multi-document QA).

The factorial design and its contrasts are :mod:`.factorial`.
"""

from __future__ import annotations

import pandas as pd

from ...claims import Estimate, by_unit, estimable, paired_estimate, read_claims
from ...reader import model_label
from ...runner import all_requests
from ...tables import comparable_rows, provenance, rows_table
from ...tasks import multidoc_qa as qa
from ..contract import Chapter, Run, answered_once
from . import design, numbers
from . import factorial as X


class Crossing(Chapter):
    """Crossing chapter: six manipulations from the five papers crossed on one QA task."""

    name = "crossing"
    order = 7
    design = design

    def claims(self, run: Run) -> dict[str, Estimate]:
        """Each factor's main effect as a paired difference, ``crossing-<factor>``: per question,
        accuracy over the cells at the factor's high level minus over those at its low level (in
        the balanced fraction this is the GEE main effect; the interval resamples questions)."""
        params = run.params
        d = design.factorial_design(params)
        cells = {tuple(sorted(d.levels(c).items())) for c in d.cells}
        keep = {q.example_id for q in qa.read_oracle()[: params["num_questions"]]}
        rows = [
            r
            for r in run.rows(design.EXPERIMENT)
            if r["example_id"] in keep
            and r["condition"].get("num_documents") == params["num_documents"]
            and tuple(sorted(r["condition"].get("crossing", {}).items())) in cells
        ]

        def main_effect(factor):
            side = {
                level: by_unit(
                    [r for r in rows if r["condition"]["crossing"][factor.name] == level],
                    {},
                    qa.score,
                )
                for level in (factor.low, factor.high)
            }
            return paired_estimate(
                side[factor.low], side[factor.high], side_names=(factor.low, factor.high)
            )

        return estimable({f"crossing-{f.name}": lambda f=f: main_effect(f) for f in d.factors})

    def analyze(self, run: Run) -> numbers.CrossingResult:
        """Everything the chapter shows, from this reader's rows and those of
        ``run.compare_with`` (model, backend; this reader when none) stored for the same
        prompts: the paired main effects with their verdicts, the interactions as per-question
        contrasts, the logistic check, the two-reader comparison, the numbers the prose quotes
        (``quoted``) and the statements it makes (``said``)."""
        params, reader, results_dir = run.params, run.reader, run.results
        second_reader = run.compare_with or (reader.model, reader.backend.name)
        rows, requests = self.answer(run), all_requests(run.planned())
        d = design.factorial_design(params)
        table = rows_table(rows, qa.score)
        estimates = self.claims(run)
        fx = X.contrast_effects(table, d)
        found = numbers.interactions(fx)
        labels = (reader.label, model_label(*second_reader))
        others = comparable_rows(
            results_dir, design.EXPERIMENT, requests, exclude=reader.results_folder(results_dir)
        )
        readers = numbers.reader_view(table, others, params, labels)
        view = numbers.CrossingResult(
            **self.judged(run, estimates),
            design=d,
            table=table,
            second_reader=second_reader,
            prompts=len(requests),
            main=numbers.main_effects(estimates, params, {c.id: c for c in read_claims()}),
            fx=fx,
            logit=X.effects(table, d, family="logistic", interactions=False),
            interactions=found,
            top=found.loc[found["estimate"].abs().idxmax()],
            labels=labels,
            readers=readers,
            expected={f.name: f.expected for f in d.factors},
            provenance="**Data.** "
            + provenance(
                pd.concat([table, readers["table"]], ignore_index=True),
                results_dir,
                design.EXPERIMENT,
            ),
            consistent=answered_once(rows, requests),
        )
        view.quoted = numbers.quoted(
            view.table, view.main, view.fx, view.logit, view.readers, params, view.labels
        )
        view.said = numbers.statements(view)
        return view
