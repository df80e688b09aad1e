"""Answer the blocks of a chapter being built, for one reader: its design and pre-registered
rules are in place, its page not yet in the book.

Each runs the chapter's own design through the same runner and stores, so every row made
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
from collections.abc import Callable

from longctx.chapters.effective_length import design as sweep
from longctx.chapters.mitigations import design as fixes
from longctx.chapters.mitigations import numbers as fix_numbers
from longctx.chapters.scales import read_scales, scale_of
from longctx.errors import LongctxError, ParameterError
from longctx.models import DEFAULT_MODEL, context_window, load_tokenizer
from longctx.paths import repo_root
from longctx.reader import Reader
from longctx.reproduce import measured_speed
from longctx.runner import Block, PromptTokens, run, stored

# The scale each chapter's rows are answered at unless --scale names another: every
# mitigations arm, including those the book does not judge yet
SCALES = {"mitigations": "all_arms", "effective_length": "book"}
# The chapter parameters each chapter's new rows record
RECORDED = {
    "mitigations": ("num_questions", "num_documents", "seed"),
    "effective_length": ("kv_needles", "seed"),
}


def strongest_arms(params: dict, model: str) -> list[str]:
    """The controls and the two fixes that gained most in the middle in ``model``'s rows,
    which must answer every arm of ``params``."""
    reader = Reader.of(model, "hf")
    results = repo_root() / "data" / "results"
    baseline = fixes.blocks(params)[:1]
    if run(baseline, reader, results, dry_run=True).missing:
        raise ParameterError(f"{model} has no complete baseline: answer its mitigations first")
    edge = fix_numbers.best_edge(stored(baseline, reader, results), params["num_documents"])
    plan = fixes.blocks(params, edge)
    if missing := run(plan, reader, results, dry_run=True).missing:
        raise ParameterError(
            f"{model} has {missing} mitigations rows still to make: complete every arm before "
            "ranking the fixes by its rows"
        )
    strongest = fix_numbers.strongest_fixes(stored(plan, reader, results), params["num_documents"])
    print(f"the fixes that gained most in the middle for {model}: {', '.join(strongest)}")
    return [*fix_numbers.CONTROLS, *strongest]


def mitigations_plan(params: dict, reader: Reader, answer: Callable, longest) -> list[Block]:
    fixes.check(params)
    baseline = fixes.blocks(params)[:1]
    edge = None
    if not answer(baseline).missing:
        rows = stored(baseline, reader, repo_root() / "data" / "results")
        edge = fix_numbers.best_edge(rows, params["num_documents"])
        print(f"{reader.model}: baseline best at the {edge} position")
    return fixes.blocks(params, edge)


def effective_length_plan(params: dict, reader: Reader, answer: Callable, longest) -> list[Block]:
    plan = sweep.blocks(params, load_tokenizer(reader.model), context_window(reader.ref))
    return [b for b in plan if not longest or b.requests[0].condition["length"] <= longest]


PLANS = {"mitigations": mitigations_plan, "effective_length": effective_length_plan}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapter", choices=sorted(PLANS))
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--scale", help="the scale to answer (mitigations: all_arms; else book)")
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
        params = scale_of(args.chapter, read_scales(args.chapter), scale, overrides)
        if args.strongest_by:
            params["arms"] = strongest_arms(params, args.strongest_by)
        reader = Reader.of(args.model, "hf")
        counter, speed = None, None
        if args.dry_run:  # each block's prompt tokens, and its hours at the measured speed
            counter = PromptTokens(reader)
            speed, speed_words = measured_speed(reader)
            print(f"prompt tokens counted with {reader.model}'s tokenizer; times at {speed_words}")

        def answer(blocks: list[Block]):
            return run(
                blocks,
                reader,
                repo_root() / "data" / "results",
                batch_size=args.batch_size,
                dry_run=args.dry_run,
                params={k: params[k] for k in RECORDED[args.chapter]},
                count_tokens=counter,
                speed=speed,
            )

        report = answer(PLANS[args.chapter](params, reader, answer, args.longest))
    except LongctxError as err:
        print(f"pending_rows: {err}", file=sys.stderr)
        return 2
    print(f"{report.missing} rows still to make" if report.missing else "every block is answered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
