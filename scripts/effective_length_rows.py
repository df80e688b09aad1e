"""Answer the effective-length sweep for one reader while its chapter is being built.

The sweep joins the book (its findings section and claims in the matrix) once the default
reader's rows at every length are in; until then this runs the same design through the
same runner and stores, so every row it makes is the row the chapter will read, and a
killed run resumes where it stopped. Blocks run claim first (NoLiMa's base lengths and the
longest length within half the window), then the other lengths shortest first;
``--longest`` stops before a length the machine cannot afford.

    python scripts/effective_length_rows.py [--model M] [--longest 16000] [--dry-run]
"""

from __future__ import annotations

import argparse
import sys

from longctx.chapters.effective_length import design
from longctx.chapters.scales import read_scales, scale_of
from longctx.errors import LongctxError
from longctx.models import DEFAULT_MODEL, context_window, load_tokenizer
from longctx.paths import repo_root
from longctx.reader import Reader
from longctx.runner import run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--scale", default="book")
    ap.add_argument("--longest", type=int, default=None, help="skip lengths above this")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--dry-run", action="store_true", help="count what is stored and missing")
    args = ap.parse_args(argv)
    try:
        params = scale_of("effective_length", read_scales("effective_length"), args.scale, {})
        reader = Reader.of(args.model, "hf")
        window = context_window(reader.ref)
        plan = design.blocks(params, load_tokenizer(reader.model), window)
        if args.longest:
            plan = [b for b in plan if b.requests[0].condition["length"] <= args.longest]
        report = run(
            plan,
            reader,
            repo_root() / "data" / "results",
            batch_size=args.batch_size,
            dry_run=args.dry_run,
        )
    except LongctxError as err:
        print(f"effective_length_rows: {err}", file=sys.stderr)
        return 2
    print(f"{report.missing} rows still to make" if report.missing else "every length is answered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
