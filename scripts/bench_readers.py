"""Pick a reader's backend by measurement: the same claims prompts through each backend.

For one model, the first ``--prompts`` requests of each ``--blocks`` entry of the ``claims``
scale (by default the semantic-competition matched control, about 1,500 prompt tokens, and
20-document multi-document QA, about 3,000) go through every ``--backends`` entry by the
runner itself (chat template, batching, stop rules, rows in a throwaway results folder), so
the time is what ``longctx reproduce --scale claims`` would spend on them. Per backend the
script records wall seconds, prompt and new tokens, the effective prompt tokens per second
(prompt tokens over wall seconds, decoding included: what a dry run divides by), each
answer's score by its task's metric, and how many answers match the first backend's byte
for byte. The numbers are merged into ``--json`` under ``<model>--<backend>``, where
``longctx reproduce --dry-run`` reads them to estimate a run's time.

    python scripts/bench_readers.py --model qwen2.5-coder-1.5b-instruct --backends hf llamacpp \\
        --json data/bench/readers-cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from longctx import __version__
from longctx.chapters import Run, contract
from longctx.reader import Reader
from longctx.replay import machine
from longctx.runner import generate_missing
from longctx.tasks import row_score

BLOCKS = {
    "semantic_competition": "matched control",
    "multidoc_qa": "20 documents, query at end",
}


def claims_requests(model: str, per_block: int) -> list:
    """The first ``per_block`` requests of each chosen claims-scale block, in order."""
    out = []
    for chapter, name in BLOCKS.items():
        run = Run.of(contract(chapter), Reader.of(model), "claims", dry_run=True)
        block = next(b for b in run.planned() if name in b.name)
        out += list(block.requests[:per_block])
    return out


def measure(model: str, backend: str, requests: list, batch_size: int, dtype: str) -> dict:
    reader = Reader.of(model, backend, dtype=dtype)
    with tempfile.TemporaryDirectory() as tmp:
        lm = reader.load(progress=None)  # loading is not what a long run pays per prompt
        start = time.perf_counter()
        rows = generate_missing(
            requests,
            reader.store(tmp, "bench"),
            reader,
            batch_size=batch_size,
            progress=False,
            load=lambda: lm,
        )
        seconds = time.perf_counter() - start
    prompt_tokens = sum(r["prompt_tokens"] for r in rows)
    return {
        "model": model,
        "backend": backend,
        "run_params": lm.run_params(),
        "prompts": len(rows),
        "seconds": round(seconds, 1),
        "prompt_tokens": prompt_tokens,
        "new_tokens": sum(r["new_tokens"] for r in rows),
        "prompt_tokens_per_s": round(prompt_tokens / seconds, 1),
        "scores": [row_score(r) for r in rows],
        "outputs": [r["output"] for r in rows],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--backends", nargs="+", default=["hf", "llamacpp"])
    parser.add_argument("--prompts", type=int, default=4, help="requests per block")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--dtype", default="auto", help="hf: auto, bfloat16 or float32")
    parser.add_argument("--json", help="merge the numbers into this file")
    args = parser.parse_args()

    requests = claims_requests(args.model, args.prompts)
    arms = [measure(args.model, b, requests, args.batch_size, args.dtype) for b in args.backends]
    first = arms[0]["outputs"]
    for arm in arms:
        arm["same_answer_as_first"] = sum(a == b for a, b in zip(arm["outputs"], first))
        arm["speedup_vs_first"] = round(arms[0]["seconds"] / arm["seconds"], 2)
        print(
            f"{args.model} / {arm['backend']}: {arm['seconds']} s for {arm['prompts']} prompts, "
            f"{arm['prompt_tokens_per_s']} prompt tokens/s (decoding included), "
            f"{arm['same_answer_as_first']}/{arm['prompts']} answers as {arms[0]['backend']}'s"
        )
    if args.json:
        path = Path(args.json)
        data = json.loads(path.read_text()) if path.exists() else {}
        for arm in arms:
            data[f"{args.model}--{arm['backend']}"] = {
                **{k: v for k, v in arm.items() if k != "outputs"},
                "blocks": BLOCKS,
                "threads": os.cpu_count(),
                "cpu": machine()["cpu"],
                "longctx_version": __version__,
                "date": time.strftime("%Y-%m-%d"),
            }
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
