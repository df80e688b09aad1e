"""Multi-document QA chapter (Lost in the Middle, section 2 and 4.1).

Headline: accuracy with the gold document first, in the middle and last among the most
documents, query at the end (the U-shape, tested as edge minus middle), plus the
closed-book and oracle baselines; query-aware prompts and the other sizes follow.

``gold_positions`` is a list of relative depths (floats in [0, 1]) or 1-based positions
valid for every size, or a mapping from a number of documents to its own list (the
paper's 1, 5, 10, 15, 20, 25, 30 only exist at 30 documents).

``num_questions`` sizes the headline (chosen so its interval is narrow enough);
``detail_questions`` (default: the same) sizes the rest of the grid, which can stay
smaller on a CPU.
"""

from __future__ import annotations

from dataclasses import replace

from ...claims import Estimate, UnitScores, by_unit, estimable, paired_estimate
from ...runner import all_requests
from ...tables import comparable_rows, point_links, provenance
from ...tasks import multidoc_qa as qa
from ..contract import Chapter, Run, answered_once, intervals_hold
from . import design, numbers


class MultidocQA(Chapter):
    """Multi-document QA chapter (Lost in the Middle, section 2 and 4.1)."""

    name = "multidoc_qa"
    order = 3
    design = design

    def claims(self, run: Run) -> dict[str, Estimate]:
        """Lost in the Middle's multi-document claims, paired by question on the chapter's
        questions: the U-shape as a contrast fixed in advance (middle minus the mean of first and
        last, at the most documents, question at the end), the middle against closed-book, and,
        with the open-domain runs, reader accuracy and retriever recall at the two depths of
        :func:`open_domain_ks` (recall needs no reader: every NQ-Open question)."""
        params = run.params
        questions, pool = design.questions_for(params)
        keep = {q.example_id for q in questions}
        rows = [r for r in run.rows(design.EXPERIMENT) if r["example_id"] in keep]
        k = max(params["num_documents"])
        docs = {
            "setting": "documents",
            "num_documents": k,
            "query_aware": False,
            "distractors": params["distractors"],
            "random_order": params["random_order"],
        }
        first, middle, last = (
            by_unit(rows, {**docs, "gold_index": qa.position_indices(k, [depth])[0]}, qa.score)
            for depth in design.HEADLINE_DEPTHS
        )
        closed = by_unit(rows, {"setting": "closed-book"}, qa.score)
        edge = UnitScores({u: (first[u] + last[u]) / 2 for u in set(first) & set(last)})
        edge.where = (first.where, last.where)  # a derived side: the rows of both edges
        edge.by_example = first.by_example
        out = {
            "litm-qa-u-shape": lambda: paired_estimate(
                edge, middle, side_names=("edges (mean of first and last)", "middle")
            ),
            "litm-qa-closed-book": lambda: paired_estimate(
                closed, middle, side_names=("closed-book", f"middle of {k}")
            ),
        }
        if params.get("open_domain_ks"):
            low, high = numbers.open_domain_ks(params)
            asked = {
                q.example_id
                for q in pool[: params.get("open_domain_questions") or params["num_questions"]]
            }
            od_rows = [r for r in run.rows(design.OPEN_DOMAIN) if r["example_id"] in asked]

            def recall():
                return numbers.retrieval_recall(params, pool, low, high)

            def reader_gain():
                # the saturation claim's premise: more gold is there to read at the larger depth
                return replace(
                    paired_estimate(
                        by_unit(od_rows, {"k": low, "retriever": "bm25"}, qa.score),
                        by_unit(od_rows, {"k": high, "retriever": "bm25"}, qa.score),
                        side_names=(f"{low} documents", f"{high} documents"),
                    ),
                    facts={"recall_gain": recall().difference},
                )

            out["litm-open-domain"] = reader_gain
            out["litm-open-domain-recall"] = recall
        return estimable(out)

    def analyze(self, run: Run) -> numbers.MultidocResult:
        """Everything the chapter shows, computed from its rows and those other readers and
        backends stored for the same prompts: tables, the claims' estimates and verdicts, the
        open-domain curves, the numbers the prose quotes and the statements it makes."""
        params, reader, results_dir = run.params, run.reader, run.results
        rows_answered = self.answer(run)
        rows = [r for r in rows_answered if r["task"] == qa.TASK]
        requests = all_requests([b for b in run.planned() if b.experiment == design.EXPERIMENT])
        others = [
            r
            for r in comparable_rows(
                results_dir, design.EXPERIMENT, requests, exclude=reader.results_folder(results_dir)
            )
            if r["condition"]["setting"] == "documents"
        ]
        table, everything = numbers.scored(rows), numbers.scored(rows + others)
        summary = numbers.accuracy(table)
        estimates = self.claims(run)
        domain = numbers.open_domain([r for r in rows_answered if r["task"] != qa.TASK], params)
        view = numbers.MultidocResult(
            **self.judged(run, estimates),
            table=table,
            everything=everything,
            summary=summary,
            base=numbers.baselines(table),
            sides=numbers.headline_sides(table, params),
            gaps=numbers.position_gaps(table, seed=params["seed"]),
            effects=numbers.query_aware_effects(table, reader.label, seed=params["seed"]),
            od=domain,
            links=point_links(
                numbers.with_documents(everything),
                numbers.POINT_KEYS,
                results_dir,
                design.EXPERIMENT,
            ),
            provenance="**Data.** " + provenance(table, results_dir, design.EXPERIMENT),
            od_provenance=(
                "**Data.** " + provenance(domain["table"], results_dir, design.OPEN_DOMAIN)
                if domain
                else ""
            ),
            consistent=answered_once(rows, requests) and intervals_hold(summary),
        )
        view.quoted = numbers.quoted(
            estimates, table, view.sides, view.gaps, view.effects, domain, params, reader.label
        )
        level = numbers.closed_book_level(reader.store(results_dir, design.EXPERIMENT).rows())
        view.quoted.update({f"qa-closed-all-{k.replace('_', '-')}": v for k, v in level.items()})
        view.said = numbers.statements(view, params) if domain else {}
        return view
