"""C-NORM chapter (context format and contextual normalization).

Headline: C-NORM vs the unformatted baseline on 10-document NQ-Open QA (OAA, paired by
question). Its prompts depend on a measurement made along the way: the delimiter is the
one whose calibration prompts get the highest mean Attention Balance Score, so the plan
has two stages: an attention block over the calibration prompts, whose stored rows choose
the delimiter (and the "shortest tokenization" control), then the QA generations. The
key-value format grid and delimiter sweep, the Figure 4 attention vectors and the
selection's sensitivity to p follow.

LongBench-v2 is left out of the plan: its prompts are cut to a token budget with the
model's tokenizer and its data is not reachable offline; the notebook runs it when
``longbench_data`` names a file.

The C-NORM method itself (selection and normalization) is :mod:`.method`.
"""

from __future__ import annotations

from pathlib import Path

from ...claims import Estimate, by_unit, estimable, paired_estimate
from ...report import estimate_text
from ...tables import point_links
from ...tasks import kv_retrieval as kv
from ...tasks import multidoc_qa as qa
from ..contract import Chapter, Run, one_row_each
from . import design, numbers


class CNorm(Chapter):
    """C-NORM chapter (context format and contextual normalization)."""

    name = "cnorm"
    order = 5
    design = design

    def claims(self, run: Run) -> dict[str, Estimate]:
        """C-NORM's claims, paired by question or example:

        * ``cnorm-qa``: C-NORM minus baseline OAA on the evaluated questions, per question
          averaged over its positions and orderings (the seeds reorder the same questions'
          distractors, so the question is the unit);
        * ``cnorm-format``: plain minus UUID ids at high density, per example over positions;
        * ``cnorm-tokens``: the paper's statistic over the delimiter sweep, Pearson r between
          tokens and accuracy over delimiters (:func:`token_correlation`).
        """
        params = run.params
        evaluated = {e.example_id for e in qa.read_oracle()[: params["qa_questions"]]}
        qa_rows = [
            r
            for r in run.rows(design.QA)
            if r["example_id"] in evaluated
            and r["condition"]["num_documents"] == params["qa_documents"]
            and r["condition"]["seed"] in params["qa_seeds"]
        ]
        kv_rows = run.rows(design.KV)
        high = {"density": "high", "num_pairs": params["kv_high_pairs"], "query_aware": False}
        swept = numbers.swept_rows(kv_rows, params)
        return estimable(
            {
                "cnorm-qa": lambda: paired_estimate(
                    by_unit(qa_rows, {"method": "baseline"}, qa.score),
                    by_unit(qa_rows, {"method": "C-NORM"}, qa.score),
                    side_names=("baseline", "C-NORM"),
                ),
                "cnorm-format": lambda: paired_estimate(
                    by_unit(kv_rows, {**high, "delimiter": "-"}, kv.score),
                    by_unit(kv_rows, {**high, "delimiter": ""}, kv.score),
                    side_names=("UUID", "plain text"),
                ),
                "cnorm-tokens": lambda: numbers.token_correlation(swept),
            }
        )

    def analyze(self, run: Run) -> numbers.CnormResult:
        """Everything the chapter shows from its stored rows: the delimiter selection, the QA
        comparison, the Figure 2 format grid, the delimiter sweep and its correlations, the
        attention profiles, the selection's stability, the findings page's estimates and
        verdicts, the numbers the prose quotes (``quoted``) and the statements it makes
        (``said``)."""
        params, reader, results_dir = run.params, run.reader, Path(run.results)
        self.answer(run)
        chosen_rows = numbers.selection(params, results_dir, reader)
        chosen, shortest, scores = design.choices(chosen_rows.to_dict("records"))
        qa_rows = numbers.qa_table(results_dir, params, reader, chosen, shortest)
        kv = numbers.kv_table(results_dir, reader)
        grid = numbers.figure2(kv, params)
        swept = numbers.sweep(kv, params, reader.label)
        delimiters = numbers.by_delimiter(swept)
        attention = numbers.attention_view(params, results_dir, reader)
        stable, ratio_choice = numbers.stability(scores, chosen, params, results_dir, reader)
        estimates = self.claims(run)
        view = numbers.CnormResult(
            **self.judged(run, estimates),
            params=params,
            results=results_dir,
            selection=chosen_rows,
            chosen=chosen,
            shortest=shortest,
            qa=qa_rows,
            links=point_links(qa_rows, ("model", "method", "gold_index"), results_dir, design.QA),
            qa_tests=numbers.qa_tests(qa_rows, params),
            per_seed=numbers.oaa_opa(qa_rows, ["method", "seed"]),
            kv=kv,
            grid=grid,
            effects=numbers.format_effects(grid),
            swept=swept,
            delimiters=delimiters,
            correlations=numbers.correlations(swept, delimiters, params["seed"]),
            attention=attention,
            shares=numbers.attention_shares(attention),
            stability=stable,
            ratio_choice=ratio_choice,
            contrast=numbers.format_contrast(numbers.swept_rows(run.rows(design.KV), params)),
            consistent=one_row_each(
                qa_rows, ["example_id", "method", "delimiter", "seed", "gold_index"]
            ),
        )
        view.quoted = numbers.quoted(view)
        view.quoted.update(
            {"cn-tokens": estimate_text(view.contrast), "cn-tokens-detail": view.contrast.detail}
        )
        view.said = numbers.statements(view, params, reader.label)
        return view
