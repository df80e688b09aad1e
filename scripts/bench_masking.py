"""Masked filler costs the short prompt, whatever its length; explicit filler grows with it.

Times greedy generation of the same short problem with L masked filler tokens
(position shift, :func:`longctx.backends.hf_engine.masked_inputs`) against the simple baseline of
L whitespace tokens actually computed, in the same run, and writes the ratios:

    python scripts/bench_masking.py --model smollm2-135m-instruct --lengths 0 1024 4096
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from longctx import __version__  # noqa: E402
from longctx.backends.hf import load_model  # noqa: E402
from longctx.backends.hf_engine import generate  # noqa: E402
from longctx.padding import filler_slot  # noqa: E402
from longctx.requests import StopRule
from longctx.tasks import length_alone as la  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--lengths", type=int, nargs="+", default=[0, 1024, 4096])
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default="data/bench/masking-cpu.json")
    args = ap.parse_args(argv)
    lm = load_model(args.model, device=args.device)
    problem = la.varsum_problems(1)[0]
    # Always decode new_tokens, so the timings compare like with like
    stop = StopRule(newline=False)
    rows = []
    for length in args.lengths:
        timing = {}
        for kind in ("mask", "whitespace"):
            prompt = lm.render(
                la.build_prompt(problem, filler=filler_slot(kind, length), filler_kind=kind)
            )
            best = float("inf")
            for _ in range(args.repeats):
                t = time.perf_counter()
                gen = generate(
                    lm, [prompt], max_new_tokens=args.new_tokens, stop_rules=stop, progress=False
                )[0]
                best = min(best, time.perf_counter() - t)
            timing[kind] = (best, gen.prompt_tokens)
        rows.append(
            {
                "filler_tokens": length,
                "masked_seconds": round(timing["mask"][0], 3),
                "explicit_whitespace_seconds": round(timing["whitespace"][0], 3),
                "explicit_over_masked": round(timing["whitespace"][0] / timing["mask"][0], 2),
                "prompt_tokens_perceived": timing["mask"][1],
            }
        )
        print(rows[-1], flush=True)
    base = rows[0]["masked_seconds"]
    for r in rows:
        r["masked_over_masked_at_0"] = round(r["masked_seconds"] / base, 2)
    out = {
        "model": args.model,
        "device": lm.device,
        "dtype": str(lm.dtype),
        "new_tokens": args.new_tokens,
        "repeats": args.repeats,
        "longctx_version": __version__,
        "host": platform.node(),
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
