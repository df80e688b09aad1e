"""Answer, in the background, the blocks of a chapter whose rows take many hours, for one
reader: every part its design asks, beyond the part its book scale judges so far.

Each runs the chapter's own plan through the same runner and stores, so every row made
here is the row the chapter will read, and a killed run resumes where it stopped:

* ``mitigations``: the baseline first; Found in the Middle's arm is planned once this
  reader's baseline rows say which edge it reads best;
* ``effective_length``: claim first (NoLiMa's base lengths and the longest length within
  half the window), then the other lengths shortest first; ``--longest`` stops before a
  length the machine cannot afford.

    python scripts/pending_rows.py mitigations [--model M] [--scale all_arms] [--dry-run]
    python scripts/pending_rows.py mitigations --model M --strongest-by qwen2.5-coder-0.5b-instruct
    python scripts/pending_rows.py effective_length [--model M] [--longest 16000]

``--arms`` names the mitigations arms to answer; ``--strongest-by R`` answers the two controls
and the two fixes with the largest gain in the middle in reader R's complete rows, the plan for
a reader too slow for every arm.

With ``--dry-run`` each block prints its prompt tokens (the reader's tokenizer) and its time at
the reader's measured speed (``data/bench/readers-cpu.json``; long prompts run slower).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from longctx.chapters import Run, contract
from longctx.chapters.mitigations import design as fixes
from longctx.chapters.mitigations import numbers as fix_numbers
from longctx.errors import LongctxError, ParameterError
from longctx.models import DEFAULT_MODEL
from longctx.paths import repo_root
from longctx.reader import Reader
from longctx.reproduce import measured_speed
from longctx.runner import Block, PromptTokens, run, stored

# The scale each chapter's rows are answered at unless --scale names another: every
# mitigations arm, including those the book does not judge yet; every length of the sweep
SCALES = {"mitigations": "all_arms", "effective_length": "sweep"}
# The chapter parameters each chapter's new rows record
RECORDED = {
    "mitigations": ("num_questions", "num_documents", "seed"),
    "effective_length": ("kv_needles", "seed"),
}


def results() -> Path:
    return repo_root() / "data" / "results"


def strongest_arms(scale: str, model: str) -> list[str]:
    """The controls and the two fixes that gained most in the middle in ``model``'s rows,
    which must answer every arm of the scale (read only: nothing is generated for it)."""
    chapter = contract("mitigations")
    ranking = Run.of(chapter, Reader.of(model, "hf"), scale, results(), dry_run=True)
    baseline = fixes.blocks(ranking.params)[:1]
    if run(baseline, ranking.reader, results(), dry_run=True).missing:
        raise ParameterError(f"{model} has no complete baseline: answer its mitigations first")
    plan = chapter.plan(ranking)
    if missing := run(plan, ranking.reader, results(), dry_run=True).missing:
        raise ParameterError(
            f"{model} has {missing} mitigations rows still to make: complete every arm before "
            "ranking the fixes by its rows"
        )
    rows = stored(plan, ranking.reader, results())
    strongest = fix_numbers.strongest_fixes(rows, ranking.params["num_documents"])
    print(f"the fixes that gained most in the middle for {model}: {', '.join(strongest)}")
    return [*fix_numbers.CONTROLS, *strongest]


def plan_of(chapter_run: Run, longest: int | None) -> list[Block]:
    """The chapter's own plan for the run (Found in the Middle's arm after the baseline it
    reads its edge from), lengths beyond ``longest`` left out."""
    plan = chapter_run.chapter.plan(chapter_run)
    if longest:
        plan = [b for b in plan if b.requests[0].condition.get("length", 0) <= longest]
    return plan


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapter", choices=sorted(SCALES))
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--scale", help="the scale to answer (mitigations: all_arms; else sweep)")
    ap.add_argument("--longest", type=int, default=None, help="effective_length: skip longer")
    ap.add_argument("--arms", help="mitigations: the arms to answer, comma-separated")
    ap.add_argument(
        "--strongest-by",
        metavar="MODEL",
        help="mitigations: the controls and the two fixes that gained most for MODEL",
    )
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--dry-run", action="store_true", help="count what is stored and missing")
    args = ap.parse_args(argv)
    try:
        if args.arms and args.strongest_by:
            raise ParameterError("give --arms or --strongest-by, not both: each names the arms")
        overrides = {"arms": args.arms.split(",")} if args.arms else {}
        scale = args.scale or SCALES[args.chapter]
        if args.strongest_by:
            overrides["arms"] = strongest_arms(scale, args.strongest_by)
        reader = Reader.of(args.model, "hf")
        recorded = RECORDED[args.chapter]
        chapter_run = Run.of(
            contract(args.chapter),
            reader,
            scale,
            results(),
            options={"batch_size": args.batch_size},
            dry_run=args.dry_run,
            **overrides,
        )
        params = chapter_run.params
        chapter_run.options["params"] = {k: params[k] for k in recorded}
        counter, speed = None, None
        if args.dry_run:  # each block's prompt tokens, and its hours at the measured speed
            counter = PromptTokens(reader)
            speed, speed_words = measured_speed(reader)
            print(f"prompt tokens counted with {reader.model}'s tokenizer; times at {speed_words}")

        def answer(blocks: list[Block]):
            return run(
                blocks,
                reader,
                results(),
                dry_run=args.dry_run,
                count_tokens=counter,
                speed=speed,
                **chapter_run.options,
            )

        report = answer(plan_of(chapter_run, args.longest))
    except LongctxError as err:
        print(f"pending_rows: {err}", file=sys.stderr)
        return 2
    print(f"{report.missing} rows still to make" if report.missing else "every block is answered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
