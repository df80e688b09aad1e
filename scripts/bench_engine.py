"""Throughput of the longctx engine vs a plain one-prompt-at-a-time ``model.generate`` loop.

Both run in this process, on the same key-value prompts, with the same model and
greedy decoding. The baseline is what one writes first: a Python loop calling
``model.generate(max_new_tokens=N)`` per prompt with no stop rule. The engine
batches length-sorted prompts with left padding and stops each row once its
answer is complete. The ratio is the number to quote; absolute seconds depend on
the machine.

    python scripts/bench_engine.py --model qwen2.5-coder-0.5b-instruct --prompts 16 --pairs 10
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from longctx import __version__
from longctx.engine import generate
from longctx.metrics import kv_accuracy
from longctx.models import load_model
from longctx.tasks import kv_retrieval as kv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--pairs", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()

    lm = load_model(args.model, device=args.device, dtype=args.dtype)
    per = max(1, args.prompts // (2 * len(args.pairs)))
    reqs = [r for k in args.pairs for r in kv.make_requests(kv.synthetic_examples(per, k, seed=123), [0.0, 1.0])]
    prompts = [lm.render(r.prompt) for r in reqs]
    max_new = kv.MAX_NEW_TOKENS

    start = time.perf_counter()
    baseline = []
    with torch.inference_mode():
        for p in prompts:
            ids = lm.tokenizer(p, return_tensors="pt", add_special_tokens=False).to(lm.device)
            out = lm.model.generate(**ids, max_new_tokens=max_new, do_sample=False, temperature=None, top_p=None,
                                    top_k=None, pad_token_id=lm.tokenizer.pad_token_id)
            baseline.append(lm.tokenizer.decode(out[0, ids.input_ids.shape[1]:], skip_special_tokens=True))
    t_base = time.perf_counter() - start

    start = time.perf_counter()
    engine = generate(lm, prompts, max_new_tokens=max_new, stop_rules=[r.stop for r in reqs],
                      batch_size=args.batch_size, progress=False)
    t_engine = time.perf_counter() - start

    acc_base = sum(kv_accuracy(o, r.gold[0]) for o, r in zip(baseline, reqs)) / len(reqs)
    acc_engine = sum(kv_accuracy(g.text, r.gold[0]) for g, r in zip(engine, reqs)) / len(reqs)
    result = {
        "model": args.model, "device": lm.device, "dtype": str(lm.dtype).replace("torch.", ""),
        "prompts": len(prompts), "pairs": args.pairs, "batch_size": args.batch_size,
        "mean_prompt_tokens": round(sum(g.prompt_tokens for g in engine) / len(engine), 1),
        "baseline_seconds": round(t_base, 1), "engine_seconds": round(t_engine, 1),
        "baseline_prompts_per_s": round(len(prompts) / t_base, 3),
        "engine_prompts_per_s": round(len(prompts) / t_engine, 3),
        "speedup": round(t_base / t_engine, 2),
        "accuracy_baseline": acc_base, "accuracy_engine": acc_engine,
        "threads": torch.get_num_threads(), "machine": platform.machine(), "longctx": __version__,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
