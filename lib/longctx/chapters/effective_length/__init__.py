"""Effective length: how much of its window each reader really uses, with an interval on
the length itself (NoLiMa's, RULER's and LongScore's definitions, :mod:`longctx.effective_length`).

The chapter is one package: :mod:`.design` (the same needles at every length from 250 tokens
to the reader's window, two needle kinds), :mod:`.numbers` (curves, effective lengths and
the half-window claim) and :mod:`.sections` (what only the page shows), and here its class.
The book scale names the lengths the default reader has answered; its half-window claim
moves unchanged from ``data/paper/preregistered.csv`` into ``claims.csv`` once they reach
its claim's length (:func:`.design.claim_blocks`).
"""

from __future__ import annotations

from ...claims import Estimate
from ...models import context_window
from ...report import params_text
from ...runner import Block
from ...tables import provenance, rows_table, stored_readers
from ..contract import Chapter, Run, answered_once
from ..scales import read_scales
from . import design, numbers


class EffectiveLength(Chapter):
    """Effective length per reader and needle kind, with the interval on the length."""

    name = "effective_length"
    order = 9
    design = design
    # The claims the book's lengths can judge: none until they hold the default reader's
    # claim length
    claim_blocks = design.claim_blocks(read_scales("effective_length")["book"]["lengths"])

    def plan(self, run: Run) -> list[Block]:
        """The design's blocks in this reader's own tokens, up to its window; with
        ``claim_only``, those the judged claims read (none while they wait)."""
        if run.params["claim_only"] and not self.claim_blocks:
            return []
        blocks = design.blocks(run.params, run.tokenizer(), window(run))
        return [b for b in blocks if b.headline] if run.params["claim_only"] else blocks

    def claims(self, run: Run) -> dict[str, Estimate]:
        """The half-window claims the book judges (:attr:`claim_blocks`), from the run's rows."""
        rows = run.rows(design.EXPERIMENT)
        found = numbers.claims(rows, run.params, window(run))
        return {k: v for k, v in found.items() if k in self.claim_blocks}

    def analyze(self, run: Run) -> numbers.EffectiveLengthResult:
        """Every reader's sweep on the run's lengths and the sweep scale's, its effective
        lengths and LongScores, the half-window comparison, the needle kinds' overlap and
        what the prose quotes."""
        self.answer(run)  # generate the run's missing rows before reading every store
        shown = design.read_params(run.params)
        readers = [run.reader] + [
            r for r in stored_readers(run.results, design.EXPERIMENT) if r != run.reader
        ]
        rows = run.rows(design.EXPERIMENT)
        by_reader = {}
        for reader in readers:
            known = (run.params, rows) if reader == run.reader else None
            if sweep := numbers.stored_sweep(reader, run.results, shown, known):
                by_reader[reader.label] = sweep
        view = numbers.sweeps(by_reader)
        overlap = numbers.overlap_table(run.params)
        claimed = bool(self.claim_blocks)
        return numbers.EffectiveLengthResult(
            **self.judged(run, self.claims(run)),
            view=view,
            overlap=overlap,
            half_window=numbers.half_window_table(view),
            quoted={
                **numbers.bars_quoted(),
                **numbers.overlap_quoted(overlap),
                "el-answer": numbers.answer_sentence(view),
                "el-pending": numbers.pending_sentence(run.params, claimed),
                "el-lengths": numbers.lengths_text(run.params["lengths"]),
            },
            said={
                "needle questions repeat their needle less often than key-value questions": (
                    overlap.iloc[1]["sharing a word with the needle (%)"]
                    < overlap.iloc[0]["sharing a word with the needle (%)"]
                ),
                "no needle question shares a content word with its needle": (
                    overlap.iloc[1]["sharing a word with the needle (%)"] == 0
                ),
            },
            provenance=(
                f"**Data.** {provenance(rows_table(rows, lambda r: 0), run.results, design.EXPERIMENT)} "
                f"Greedy decoding, prompts from `lib/longctx/prompts/`; parameters: "
                f"{params_text(run.params)}."
            ),
            consistent=answered_once(rows),
        )


def window(run: Run) -> int | None:
    """The reader's window in tokens, read once per run (None where its config names none)."""
    return run.once("window", lambda: context_window(run.reader.ref))
