"""Answer the mitigations chapter's blocks for one reader while the chapter is being built.

The chapter joins the book (and ``longctx reproduce --chapters mitigations``) once the
default reader's rows for every arm are in; until then this runs the same design through
the same runner and stores, so every row it makes is the row the chapter will read, and a
killed run resumes where it stopped. Found in the Middle's arm is planned once this reader's
baseline rows say which edge it reads best.

    python scripts/mitigation_rows.py [--model M] [--scale book] [--dry-run]
"""

from __future__ import annotations

import argparse
import sys

from longctx.chapters.mitigations import design, numbers
from longctx.chapters.scales import read_scales, scale_of
from longctx.errors import LongctxError
from longctx.models import DEFAULT_MODEL
from longctx.paths import repo_root
from longctx.reader import Reader
from longctx.runner import run, stored


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--scale", default="book")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--dry-run", action="store_true", help="count what is stored and missing")
    args = ap.parse_args(argv)
    results = repo_root() / "data" / "results"
    try:
        params = scale_of("mitigations", read_scales("mitigations"), args.scale, {})
        design.check(params)
        reader = Reader.of(args.model, "hf")
        baseline = design.blocks(params)[:1]
        report = run(baseline, reader, results, batch_size=args.batch_size, dry_run=args.dry_run)
        edge = None
        if not report.missing:
            edge = numbers.best_edge(stored(baseline, reader, results), params["num_documents"])
            print(f"{reader.model}: baseline best at the {edge} position")
        report = run(
            design.blocks(params, edge),
            reader,
            results,
            batch_size=args.batch_size,
            dry_run=args.dry_run,
            params={k: params[k] for k in ("num_questions", "num_documents", "seed")},
        )
    except LongctxError as err:
        print(f"mitigation_rows: {err}", file=sys.stderr)
        return 2
    print(f"{report.missing} rows still to make" if report.missing else "every arm is answered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
