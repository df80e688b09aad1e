"""Semantic competition vs context length chapter.

Headline: the matched control at ``matched_size`` snippets on SQuAD with BM25 (gold only,
hard negatives, far-rank snippets at the same length), whose far-minus-hard difference is
the paper's central comparison, and the BM25 retention curve (the hard-negative sweep),
both on ``headline_questions`` questions (default ``num_questions``; the book runs the
paper's 200); then, on the first ``num_questions``, the retention curves of the other
retrievers, the control at other sizes and snippet lengths, and the control on NQ-Open.

:func:`build` returns every experiment's requests with the examples behind them and the
questions left out (the notebook tabulates them); :func:`blocks` cuts the same requests into
blocks, so the notebook and ``longctx reproduce`` send identical prompts. Second readers
(another model answering the matched control) are not part of a plan, which is per model:
the notebook sends them, and ``longctx reproduce --model <reader> --only matched`` runs
the same headline for any reader.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ...claims import Estimate, by_unit, estimable, paired_estimate
from ...runner import Block
from ...tables import point_links, provenance
from ...tasks import semantic_competition as sc
from ..contract import Chapter, Run
from . import analysis, design, numbers


class SemanticCompetition(Chapter):
    """Semantic competition vs context length: BM25 hard negatives against far-rank snippets
    at a matched context length (SQuAD), scored by exact match, F1 and answer inclusion."""

    name = "semantic_competition"
    order = 4
    design = design

    answer = staticmethod(numbers.answered)  # the page reads more than the plan's rows

    def plan(self, run: Run) -> list[Block]:
        return design.blocks(run.params, built=design.built_contexts(run))

    def claims(self, run: Run) -> dict[str, Estimate]:
        """The matched control's claims on the headline questions, paired by question: far minus
        hard at ``matched_size`` snippets (exact match and answer inclusion; the far context keeps
        ``keep_hard`` hard negatives, so both contexts are as long), and hard negatives minus the
        gold snippet alone (exact match)."""
        params = run.params
        corpus = sc.load_corpus(params["corpus"]).limit_passages(params["max_passages"] or None)
        n = params.get("headline_questions") or params["num_questions"]
        keep = {q.question_id for q in sc.sample_questions(corpus, n, params["seed"])}
        rows = [r for r in run.rows(design.EXPERIMENT) if r["example_id"] in keep]
        size, kept = params["matched_size"], params["keep_hard"]
        where = {"corpus": corpus.name, "snippet_words": params["snippet_words"]}
        hard = {
            **where,
            "retriever": "bm25",
            "num_hard": size - 1,
            "num_far": 0,
            "num_snippets": size,
        }
        far = {
            **where,
            "retriever": "bm25",
            "num_hard": kept,
            "num_far": size - 1 - kept,
            "num_snippets": size,
        }
        gold = {**where, "num_snippets": 1, "num_hard": 0}

        def metric(name):
            return lambda row: sc.score(row)[name]

        def far_minus_hard(name):
            hard_scores = by_unit(rows, hard, metric(name))
            est = paired_estimate(
                hard_scores,
                by_unit(rows, far, metric(name)),
                side_names=(f"{size - 1} hard", f"{kept} hard + {size - 1 - kept} far-rank"),
            )
            # the premise: what the hard negatives cost on these questions, for far to give back
            gold_scores = by_unit(rows, gold, metric(name))
            both = set(gold_scores) & set(hard_scores)
            cost = (
                100 * sum(gold_scores[u] - hard_scores[u] for u in both) / len(both)
                if both
                else float("nan")
            )
            return replace(est, facts={"hard_cost": cost})

        return estimable(
            {
                "sc-far-minus-hard": lambda: far_minus_hard("em"),
                "sc-far-minus-hard-inclusion": lambda: far_minus_hard("inclusion"),
                "sc-hard-hurts": lambda: paired_estimate(
                    by_unit(rows, gold, metric("em")),
                    by_unit(rows, hard, metric("em")),
                    side_names=("gold snippet only", f"gold + {size - 1} hard"),
                ),
            }
        )

    def analyze(self, run: Run) -> numbers.CompetitionResult:
        """Everything the chapter shows from its rows and the second readers': the matched
        control's Tables 1 and 2, the retention curves, the snippet-length, other-N and NQ checks,
        the claims' estimates and verdicts, the numbers the prose quotes and its statements."""
        params, reader, results_dir = run.params, run.reader, run.results
        seed = params["seed"]
        second = next((r for r in params["second_readers"] if r != reader.model), None)
        everything = numbers.scored(self.answer(run))
        table = everything[everything["model"] == reader.label]
        readers = numbers.matched(everything, params)
        parts = {r: numbers.retention_rows(table, params, r) for r in params["retrievers"]}
        curves, lives = numbers.retention(parts, seed)
        behind = pd.concat(parts.values())
        links = point_links(behind, ("retriever", "num_hard"), results_dir, design.EXPERIMENT)
        length_levels, length_recovery = numbers.snippet_length(table, params)
        estimates = self.claims(run)
        view = numbers.CompetitionResult(
            **self.judged(run, estimates),
            links=links,
            everything=everything,
            table=table,
            readers=readers,
            main=readers[readers["model"] == reader.label],
            curves=curves,
            lives=lives,
            table1=analysis.condition_summary(readers, by=["model", "condition"], seed=seed),
            table2=analysis.recovery_table(readers, by=["model"], seed=seed),
            length_levels=length_levels,
            length_recovery=length_recovery,
            sizes=numbers.other_sizes(table, params),
            nq=numbers.nq(table, params),
            example=numbers.example_prompt(design.built_contexts(run)),
            provenance=f"**Data.** {provenance(everything, results_dir, design.EXPERIMENT)}",
        )
        view.quoted = numbers.quoted(
            view.estimates,
            view.table1,
            view.table2,
            view.readers,
            view.curves,
            view.lives,
            view.table,
            view.length_recovery,
            view.sizes,
            view.nq,
            params,
            reader.label,
            second,
        )
        view.said = numbers.statements(view)
        return view
