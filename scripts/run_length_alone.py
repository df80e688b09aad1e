"""Generate the "context length alone" chapter's results outside the notebook (e.g. on a GPU).

Builds exactly the requests ``notebooks/length_alone.py`` builds for the same
parameters (one library call each), so the committed rows are found again by the
notebook. Resumable: rows already in the store are skipped.

    python scripts/run_length_alone.py --model qwen2.5-coder-0.5b-instruct \
        --num-problems 20 --lengths 0 3750 7500 15000 30000 --batch-size 32 --token-budget 131072
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from longctx.models import load_model, model_slug  # noqa: E402
from longctx.store import ResultsStore  # noqa: E402
from longctx.tasks import length_alone as la  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--subtasks", nargs="+", default=list(la.SUBTASKS))
    ap.add_argument("--num-problems", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lengths", type=int, nargs="+", default=[0, 3750, 7500, 15000, 30000])
    ap.add_argument("--between-kinds", nargs="+", default=["essay", "whitespace", "mask"])
    ap.add_argument("--before-kinds", nargs="*", default=["whitespace"])
    ap.add_argument("--before-lengths", type=int, nargs="*", default=None, help="default: --lengths")
    ap.add_argument("--before-subtasks", nargs="*", default=None, help="default: every subtask")
    ap.add_argument("--recite-kinds", nargs="*", default=["essay"])
    ap.add_argument("--recite-lengths", type=int, nargs="*", default=None)
    ap.add_argument("--stages", nargs="+", default=["solve", "retrieve_then_solve"])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--token-budget", type=int, default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--results-dir", default="data/results")
    ap.add_argument("--experiment", default=la.TASK,
                    help="store under this experiment name (e.g. a same-request rerun on another device)")
    ap.add_argument("--copy-to", default=None, help="copy the generations file here after every block")
    ap.add_argument("--deadline-s", type=float, default=None, help="stop starting new lengths after this many seconds")
    args = ap.parse_args(argv)

    started = time.time()
    problems = {s: la.load_problems(s, args.num_problems, seed=args.seed) for s in args.subtasks}
    store = ResultsStore(args.results_dir, model_slug(args.model), args.experiment)
    loaded = {}

    def load():
        if "lm" not in loaded:
            loaded["lm"] = load_model(args.model, device=args.device, progress=print)
        return loaded["lm"]

    requests = la.experiment_requests(problems, lengths=args.lengths, between_kinds=args.between_kinds,
                                      before_kinds=args.before_kinds, recite_kinds=args.recite_kinds,
                                      recite_lengths=args.recite_lengths, before_lengths=args.before_lengths,
                                      before_subtasks=args.before_subtasks)
    print(f"{len(requests)} stage-one requests, {len(store.keys())} rows already stored", flush=True)
    if "solve" in args.stages:
        # Block by block (between, recite, before), each shortest length first, so that a
        # deadline leaves whole curves done; the next run resumes from the store.
        blocks: dict[tuple, list] = {}
        for r in requests:
            c = r.condition
            block = (c["mode"], c["placement"] if c["filler_tokens"] else "between")
            blocks.setdefault((block, c["filler_tokens"]), []).append(r)
        order = sorted(blocks, key=lambda k: (list(dict.fromkeys(b for b, _ in blocks)).index(k[0]), k[1]))
        for block, length in order:
            if args.deadline_s and time.time() - started > args.deadline_s:
                print(f"deadline reached before {block} at length {length}", flush=True)
                return 0
            la.run_plan(blocks[(block, length)], store, model=args.model, load=load, batch_size=args.batch_size,
                        token_budget=args.token_budget, progress=False)
            print(f"{block} length {length}: done at {time.time() - started:.0f} s", flush=True)
            if args.copy_to:
                shutil.copy(store.path, args.copy_to)
    if "retrieve_then_solve" in args.stages:
        recite = [r for r in store.rows() if r["condition"].get("mode") == "recite"]
        second = la.retrieve_then_solve_requests([p for ps in problems.values() for p in ps], recite)
        la.run_plan(second, store, model=args.model, load=load, batch_size=args.batch_size,
                    token_budget=args.token_budget, progress=False)
        print(f"retrieve-then-solve: {len(second)} requests done at {time.time() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
