"""Context-length-alone chapter (Du et al.): filler between or before the evidence,
recitation, retrieve-then-solve.

The grid is a list of *arms*, each a set of subtasks solved (or recited) with some filler
kinds at some lengths and one placement, so a chapter can run the expensive long fillers
only where they answer a question (e.g. before-vs-between for GSM8K alone). Arms marked
``headline`` run first; within an arm, shorter lengths run first, so a deadline leaves
whole curves. Length 0 is the short problem, shared by every arm that names it. An arm may
take only the first ``num_problems`` of the seeded problems (the list is prefix-stable, so
its rows are the same rows a larger run makes): long fillers on CPU need a smaller n.

Optional ``ruler`` (Table 5): ``{"subtasks": ["qa1", "qa2"], "lengths": [...],
"num_questions": n}`` adds RULER QA1/QA2 blocks, the baseline answer and the recitation
prompt per question and length, then two second steps: the answer from the recited
documents (the paper's), and from the documents the recitation names (ours). RULER sizes
contexts in the reader's tokens, so the plan then asks its run for the reader's tokenizer.
"""

from __future__ import annotations

from dataclasses import replace

from ...claims import Estimate, by_unit, chapter_verdicts, estimable, paired_estimate, paper_frame
from ...models import tokenizer_digest
from ...report import params_text
from ...runner import Block
from ...tables import point_links, provenance, rows_table
from ...tasks import length_alone as la
from ...tasks import ruler_qa as rq
from ..contract import Chapter, Run
from . import design, numbers


class LengthAlone(Chapter):
    """Context-length-alone chapter (Du et al.): filler, recitation, retrieve-then-solve."""

    name = "length_alone"
    order = 2
    design = design
    premise_scale = numbers.PREMISE_SCALE  # the recitations the la-* premises read

    def plan(self, run: Run) -> list[Block]:
        if not run.params.get("ruler"):
            return design.blocks(run.params)  # no context sized in the reader's tokens
        tokenizer = run.tokenizer()

        def count_tokens(text: str) -> int:
            return len(tokenizer(text, add_special_tokens=False).input_ids)

        return design.blocks(run.params, count_tokens, tokenizer_digest(run.reader.model))

    def claims(self, run: Run) -> dict[str, Estimate]:
        """The paper's claims on GSM8K, paired by problem: each filler kind between the evidence
        and the question (and whitespace before the evidence) at the longest filler asked, minus
        no filler; with ``ruler``, RULER QA1 and QA2 at the shortest length, the paper's two steps
        (recite, then answer from the recitation) minus RULER's prompt over the whole context."""
        params = run.params
        gsm8k = {p.id: p for p in design.problems_for(params).get("gsm8k", [])}
        keep = set(gsm8k)
        rows = [r for r in run.rows(design.EXPERIMENT) if r["example_id"] in keep]
        recited_rows = numbers.premise_rows(run)
        longest = numbers.longest_filler(params)
        short = by_unit(
            rows, {"subtask": "gsm8k", "mode": "solve", "filler_tokens": 0}, numbers.gsm8k_correct
        )
        thresholds = numbers.recited_thresholds()

        def drop(filler, placement="between"):
            long = {
                "subtask": "gsm8k",
                "mode": "solve",
                "filler": filler,
                "placement": placement,
                "filler_tokens": longest,
            }
            label = f"{longest / 1000:g}K" if longest >= 1000 else str(longest)
            est = paired_estimate(
                short,
                by_unit(rows, long, numbers.gsm8k_correct),
                side_names=(
                    "no filler",
                    f"{numbers.LABELS[filler, placement]} ({label} tokens)",
                ),
            )
            if placement != "between":
                return est
            threshold = thresholds[f"la-{filler}"]
            facts = numbers.recited_facts(recited_rows, gsm8k, filler, longest, threshold)
            return replace(
                est, facts={**facts, **numbers.kept_facts(recited_rows, gsm8k, filler, longest)}
            )

        out = {
            "la-essay": lambda: drop("essay"),
            "la-whitespace": lambda: drop("whitespace"),
            "la-mask": lambda: drop("mask"),
            "la-before": lambda: drop("whitespace", "before"),
        }
        if params.get("ruler"):
            length = min(params["ruler"]["lengths"])
            ruler_rows = run.rows(rq.TASK)
            for subtask, (ruler, questions) in design.ruler_questions(params).items():
                by_id = {q.id: q for q in questions}
                mine = [r for r in ruler_rows if r["example_id"] in by_id]
                where = {"subtask": subtask, "length": length}

                def recite_first(ruler=ruler, by_id=by_id, mine=mine, where=where):
                    est = paired_estimate(
                        by_unit(mine, {**where, "mode": "answer"}, rq.score),
                        by_unit(mine, {**where, "mode": "retrieve_then_answer"}, rq.score),
                        side_names=("whole context", "recite, then answer"),
                    )
                    # The paper's premise: retrieval works before the answer is written. A
                    # recitation retrieves when it points at a document holding the answer,
                    # by copying its text or by naming it (the second step reads either).
                    identified = by_unit(
                        mine,
                        {**where, "mode": "recite"},
                        lambda row: rq.identifies_supporting(
                            rq.recitation_diagnostics(ruler, by_id[row["example_id"]], row)
                        ),
                    )
                    if not identified:
                        return est
                    share = 100 * sum(identified.values()) / len(identified)
                    return replace(est, facts={"identified": share})

                out[f"la-ruler-{subtask}"] = recite_first
        return estimable(out)

    def analyze(self, run: Run) -> numbers.LengthResult:
        """Everything the chapter shows from its rows: GSM8K with every filler, placement and
        whitespace unit, VarSum, RULER's recite-then-answer, the claims' estimates and verdicts,
        the numbers the prose quotes and its statements."""
        params, results_dir = run.params, run.results
        stored, paper = self.answer(run), paper_frame("length_alone")
        rows = [r for r in stored if r["task"] == la.TASK]
        ruler_rows = [r for r in stored if r["task"] == rq.TASK]
        solve = numbers.solved(rows, params)
        gsm = solve[solve["subtask"] == "gsm8k"]
        estimates = self.claims(run)
        gsm8k = {p.id: p for p in design.problems_for(params).get("gsm8k", [])}
        levels = numbers.premise_levels(
            numbers.premise_rows(run), gsm8k, numbers.longest_filler(params)
        )
        placed_table, before, placed = numbers.placement(gsm, paper)
        varsum, ruler = (
            numbers.varsum_views(solve, rows, paper),
            numbers.ruler_views(ruler_rows, params, paper),
        )
        verdicts = chapter_verdicts("length_alone", estimates)
        view = numbers.LengthResult(
            **self.judged(run, estimates),
            rows=rows,
            solve=solve,
            links=point_links(
                solve[solve["subtask"].str.startswith("gsm8k")],
                ("variant", "condition"),
                results_dir,
                design.EXPERIMENT,
            ),
            gsm=gsm,
            placement=placed_table,
            varsum=varsum,
            ruler=ruler,
            premise=numbers.premise_table(levels, paper, estimates),
            quoted={
                **numbers.quoted(
                    estimates, gsm, solve, before, placed, varsum, ruler, rows, ruler_rows, params
                ),
                "la-premise-state": numbers.premise_words(levels, estimates),
                "la-premise-outcome": numbers.premise_outcome(verdicts),
            },
            between_note=(
                "The paper's short-problem accuracy on GSM8K is 86-88% (Llama-3-8B) and 71% "
                f"(Mistral-7B); ours is {100 * gsm[gsm['filler_tokens'] == 0]['correct'].mean():.1f}%."
            ),
            provenance=(
                f"**Data.** {provenance(rows_table(rows, lambda r: 0), results_dir, design.EXPERIMENT)} "
                "Greedy decoding; the figure's arms are the `gsm8k` entries of `arms` in the "
                "parameters cell."
            ),
            ruler_provenance=(
                (
                    f"**Data.** {provenance(rows_table(ruler_rows, lambda r: 0), results_dir, rq.TASK)} "
                    f"Greedy decoding; RULER parameters: {params_text(params.get('ruler') or {})}."
                )
                if ruler_rows
                else ""
            ),
            consistent=(
                len(solve) == sum(r["condition"]["mode"] == "solve" for r in rows)
                and len({r["key"] for r in stored}) == len(stored) == len(rows) + len(ruler_rows)
            ),
        )
        view.said = numbers.statements(view)
        return view
