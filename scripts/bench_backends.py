"""The same prompts through every way this project can generate, in one run.

Two workloads, because the backends differ most in the phase that dominates: ``kv``
(key-value retrieval, about 1,400 prompt tokens and a short answer: prefill-bound) and
``varsum`` (the context-length-alone paper's variable sums with no filler: a short prompt
and up to 512 new tokens of working: decode-bound).

1. ``naive``: a plain one-prompt-at-a-time ``model.generate(max_new_tokens=N)`` loop on the
   transformers weights (what one writes first; no stop rule);
2. ``hf``: the longctx engine (length-sorted batches, per-row stop rules);
3. ``llamacpp``: llama.cpp in process on the GGUF file (``longctx.backends.llamacpp``);
4. ``openai``: the OpenAI client against a local llama.cpp server started by this script
   (``python -m llama_cpp.server``), which is how vLLM or SGLang are used at scale.

Only one of them computes at a time (the server is idle until the client sends). Ratios
against ``naive`` and ``hf`` are the numbers to quote; seconds depend on the machine. The
answers of each arm are scored and compared with ``hf``'s.

    python scripts/bench_backends.py --json data/bench/backends-cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time

from longctx import __version__
from longctx.backends import load_backend, spec
from longctx.backends.hf import load_model
from longctx.metrics import kv_accuracy
from longctx.models import ALIASES, alias_gguf_path
from longctx.replay import machine
from longctx.requests import GenerateCall
from longctx.tasks import kv_retrieval as kv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, threads: int) -> tuple[subprocess.Popen, str]:
    import httpx

    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(alias_gguf_path(ALIASES[model])),
            "--model_alias",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "32768",
            "--n_threads",
            str(threads),
            "--verbose",
            "False",
            "--interrupt_requests",
            "False",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(240):
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("the llama.cpp server did not start")


def workload(name: str, n: int, pairs: list[int]):
    """(requests, score(request, output) -> 0/1) of one workload."""
    if name == "kv":
        per = max(1, n // (2 * len(pairs)))
        reqs = [
            r
            for k in pairs
            for r in kv.make_requests(kv.synthetic_examples(per, k, seed=123), [0.0, 1.0])
        ]
        return reqs, lambda r, out: kv_accuracy(out, r.gold[0])
    if name == "varsum":
        from longctx.chapters import get_chapter, scale
        from longctx.runner import all_requests
        from longctx.tasks import length_alone as la

        chapter = get_chapter("length_alone")
        params = scale(
            "length_alone",
            "book",
            num_problems=n,
            retrieve_then_solve=False,
            arms=[{"subtasks": ["varsum"], "kinds": ["essay"], "lengths": [0]}],
        )
        reqs = all_requests(chapter.design.blocks(params))
        problems = {p.id: p for ps in chapter.design.problems_for(params).values() for p in ps}
        return reqs, lambda r, out: la.score_output(problems[r.example_id], out)["correct"]
    raise SystemExit(f"unknown workload {name!r}; use kv or varsum")


def run_workload(name: str, args) -> dict:
    import torch

    reqs, score = workload(name, args.prompts, args.pairs)
    max_new = max(r.max_new_tokens for r in reqs)
    threads = os.cpu_count() or 1
    arms: dict[str, dict] = {}

    def record(arm, seconds, outputs, prompt_tokens, **extra):
        arms[arm] = {
            "seconds": round(seconds, 1),
            "prompts_per_s": round(len(reqs) / seconds, 4),
            "accuracy": sum(score(r, o) for r, o in zip(reqs, outputs)) / len(reqs),
            "mean_prompt_tokens": round(sum(prompt_tokens) / len(prompt_tokens), 1),
            "outputs": outputs,
            **extra,
        }
        print(f"{name} / {arm}: {seconds:.1f} s", file=sys.stderr)

    def record_generated(arm, seconds, gens, **extra):
        record(arm, seconds, [g.text for g in gens], [g.prompt_tokens for g in gens], **extra)

    def timed_generate(backend):
        """Every prompt through one backend call, rendered with its chat template, timed."""
        prompts = [backend.render(r.prompt, system=r.system) for r in reqs]
        start = time.perf_counter()
        gens = backend.generate(
            GenerateCall(prompts, max_new, stop_rules=[r.stop for r in reqs], progress=False)
        )
        return prompts, gens, time.perf_counter() - start

    if {"naive", "hf"} & set(args.arms):
        lm = load_model(args.model, device="cpu", dtype=args.dtype)
        prompts = [lm.render(r.prompt, system=r.system) for r in reqs]
        if "naive" in args.arms:
            start, outs, lens = time.perf_counter(), [], []
            with torch.inference_mode():
                for p in prompts:
                    ids = lm.tokenizer(p, return_tensors="pt", add_special_tokens=False)
                    out = lm.model.generate(
                        **ids,
                        max_new_tokens=max_new,
                        do_sample=False,
                        temperature=None,
                        top_p=None,
                        top_k=None,
                        pad_token_id=lm.tokenizer.pad_token_id,
                    )
                    outs.append(
                        lm.tokenizer.decode(
                            out[0, ids.input_ids.shape[1] :], skip_special_tokens=True
                        )
                    )
                    lens.append(ids.input_ids.shape[1])
            record(
                "naive",
                time.perf_counter() - start,
                outs,
                lens,
                dtype=str(lm.dtype).replace("torch.", ""),
            )
        if "hf" in args.arms:
            start = time.perf_counter()
            gens = lm.generate(
                GenerateCall(
                    prompts,
                    max_new_tokens=max_new,
                    stop_rules=[r.stop for r in reqs],
                    batch_size=args.batch_size,
                    progress=False,
                )
            )
            record_generated(
                "hf",
                time.perf_counter() - start,
                gens,
                dtype=str(lm.dtype).replace("torch.", ""),
                batch_size=args.batch_size,
            )
        del lm
    if "llamacpp" in args.arms:
        backend = load_backend(
            args.model, spec("llamacpp", prefix_cache="llamacpp_cold" in args.arms)
        )
        prompts, gens, seconds = timed_generate(backend)
        record_generated(
            "llamacpp",
            seconds,
            gens,
            threads=backend.threads,
            prefix_reused=sum(g.extra["prefix_reused"] for g in gens),
        )
        if (
            "llamacpp_cold" in args.arms
        ):  # the arm above reused prefixes; the same without (the default)
            start, outs = time.perf_counter(), []
            for p, r in zip(prompts, reqs):
                backend.llm.reset()  # n_tokens = 0: the next prompt reuses nothing
                outs.append(
                    backend.generate(
                        GenerateCall([p], max_new, stop_rules=[r.stop], progress=False)
                    )[0].text
                )
            record(
                "llamacpp_cold",
                time.perf_counter() - start,
                outs,
                [g.prompt_tokens for g in gens],
                threads=backend.threads,
            )
        del backend
    if "openai" in args.arms:
        proc, url = start_server(args.model, threads)
        try:
            backend = load_backend(args.model, spec("openai", url, concurrency=1))
            _, gens, seconds = timed_generate(backend)
            record_generated(
                "openai",
                seconds,
                gens,
                server="llama_cpp.server (local)",
                threads=threads,
            )
        finally:
            proc.kill()

    reference = arms.get("hf") or next(iter(arms.values()))
    for arm in arms.values():
        if "naive" in arms:
            arm["speedup_vs_naive"] = round(arms["naive"]["seconds"] / arm["seconds"], 2)
        if "hf" in arms:
            arm["speedup_vs_hf"] = round(arms["hf"]["seconds"] / arm["seconds"], 2)
        # the naive loop has no stop rule: compare every arm's answer cut at the request's rule
        arm["same_answer_as_hf"] = sum(
            r.stop.cut(a)[0].strip() == r.stop.cut(b)[0].strip()
            for a, b, r in zip(arm["outputs"], reference["outputs"], reqs)
        )
    return {
        "prompts": len(reqs),
        "max_new_tokens": max_new,
        "arms": {k: {f: v for f, v in a.items() if f != "outputs"} for k, a in arms.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="qwen2.5-coder-0.5b-instruct", help="a package-shipped GGUF alias"
    )
    parser.add_argument("--workloads", nargs="+", default=["kv", "varsum"])
    parser.add_argument("--prompts", type=int, default=8, help="prompts per workload")
    parser.add_argument(
        "--pairs", type=int, nargs="+", default=[10, 30], help="kv: pairs per prompt"
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--dtype", default="auto", help="hf arms: auto, bfloat16 or float32")
    parser.add_argument("--arms", nargs="+", default=["naive", "hf", "llamacpp", "openai"])
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()

    result = {
        "model": args.model,
        "threads": os.cpu_count() or 1,
        "machine": platform.machine(),
        "cpu": machine()["cpu"],
        "longctx": __version__,
        "date": time.strftime("%Y-%m-%d"),
        "pairs": args.pairs,
        "workloads": {w: run_workload(w, args) for w in args.workloads},
    }
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
