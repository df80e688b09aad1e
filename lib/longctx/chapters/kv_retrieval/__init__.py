"""Key-value retrieval chapter (Lost in the Middle, sections 3 and 4.2).

Headline: gold pair first vs in the middle at the largest number of pairs, with and
without query-aware contextualization; the rest of the position grid follows. The chapter is
one package: :mod:`.design` (the blocks), :mod:`.numbers` (what the analysis computes) and
:mod:`.sections` (tables and figures for the page), and here its class.
"""

from __future__ import annotations

from ...claims import Estimate, by_unit, chapter_verdicts, estimable, paired_estimate
from ...report import params_text
from ...runner import all_requests
from ...tables import comparable_rows, point_links, provenance
from ...tasks import kv_retrieval as kv
from ..contract import Chapter, Run, answered_once, intervals_hold
from . import design, numbers


class KeyValueRetrieval(Chapter):
    """Key-value retrieval chapter (Lost in the Middle, sections 3 and 4.2)."""

    name = "kv_retrieval"
    order = 1
    design = design

    def claims(self, run: Run) -> dict[str, Estimate]:
        """The paper's two key-value claims at the largest size, on that size's examples, paired
        by record: gold in the middle minus first (query after the data), and query-aware minus
        query at the end with the gold pair in the middle."""
        params = run.params
        largest = max(params["num_pairs"])
        examples, source = design.examples_for(largest, params)
        keep = {ex.example_id for ex in examples}
        rows = [r for r in run.rows(design.EXPERIMENT) if r["example_id"] in keep]
        first, middle = (
            kv.position_indices(largest, [design.HEADLINE_DEPTHS[0]])[0],
            kv.position_indices(largest, [0.5])[0],
        )
        base = {"source": source, "num_pairs": largest}

        def side(gold_index, query_aware):
            return by_unit(
                rows, {**base, "gold_index": gold_index, "query_aware": query_aware}, kv.score
            )

        return estimable(
            {
                "litm-kv-middle": lambda: paired_estimate(
                    side(first, False), side(middle, False), side_names=("first", "middle")
                ),
                "litm-kv-query-aware": lambda: paired_estimate(
                    side(middle, False),
                    side(middle, True),
                    side_names=("query at end", "query-aware"),
                ),
            }
        )

    def analyze(self, run: Run) -> numbers.KeyValueResult:
        """Everything the chapter shows, computed from its rows and those other readers and
        backends stored for the same prompts (one more line each in the figure): tables, the
        headline estimates and their verdicts, the numbers the prose quotes (``quoted``) and the
        statements it makes in words (``said``). ``run.compare_with`` names the second reader of
        the reader comparison."""
        params, reader, results_dir = run.params, run.reader, run.results
        rows, requests = self.answer(run), all_requests(run.planned())
        others = comparable_rows(
            results_dir, design.EXPERIMENT, requests, exclude=reader.results_folder(results_dir)
        )
        table, everything = numbers.scored(rows, params), numbers.scored(rows + others, params)
        summary, errors = numbers.accuracy(table), numbers.error_kinds(table)
        estimates = self.claims(run)
        verdicts = chapter_verdicts("kv_retrieval", estimates)
        cells = numbers.headline_cells(summary, params, reader.label)
        second = run.compare_with[0] if run.compare_with else reader.label
        return numbers.KeyValueResult(
            **self.judged(run, estimates),
            table=table,
            everything=everything,
            summary=summary,
            errors=errors,
            cells=cells,
            quoted=numbers.quoted(
                estimates, cells, summary, errors, params, reader.label, table, everything
            ),
            said=numbers.statements(
                estimates,
                verdicts,
                cells,
                summary,
                table,
                errors,
                params,
                reader.label,
                numbers.backend_agreement(everything, reader.label),
            ),
            provenance=(
                f"**Data.** {provenance(everything, results_dir, design.EXPERIMENT)} Greedy decoding, "
                f"prompts from `lib/longctx/prompts/`; parameters: {params_text(params)}."
            ),
            readers=numbers.reader_comparison(everything, (reader.label, second)),
            links=point_links(everything, numbers.POINT_KEYS, results_dir, design.EXPERIMENT),
            consistent=answered_once(rows, requests) and intervals_hold(summary),
        )
