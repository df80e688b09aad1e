"""Final-token attention: longctx's captured softmax row vs eager ``output_attentions``.

Both compute the last layer's attention from the final token, averaged over heads,
in the same process on the same random token ids. The baseline is what one writes
first: load with eager attention and call the model with ``output_attentions=True``,
which materializes every layer's heads x T x T matrix. Reported per length: seconds,
peak memory above the loaded model (CUDA: ``max_memory_allocated``; CPU: resident
set size sampled every 2 ms, after ``malloc_trim``; ratios floor
longctx's peak at 1 MiB), their ratios, and the largest absolute difference
between the two vectors. Eager runs only where its matrices fit in memory (the
estimate is printed otherwise).

    python scripts/bench_attention.py --lengths 1024 2048 8192 --json data/bench/attention-cpu.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import threading
import time

import torch

from longctx import __version__
from longctx.backends.hf import load_model
from longctx.backends.hf_attention import eager_final_token_attention, final_token_attention


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _trim() -> None:
    """Hand freed heap memory back to the OS so the next call's resident-set peak starts clean."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc
        pass


def measure(fn, device: str):
    """(result, seconds, peak bytes above the memory in use before the call)"""
    gc.collect()
    _trim()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        start = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        return out, time.perf_counter() - start, torch.cuda.max_memory_allocated() - base
    base = _rss()
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.002)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    start = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - start
    done.set()
    t.join()
    return out, seconds, max(peak[0], _rss()) - base


def available_bytes(device: str) -> int:
    if device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info()
        return free
    with open("/proc/meminfo") as f:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
    return info["MemAvailable"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192, 32768])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()

    lm = load_model(args.model, device=args.device, dtype=args.dtype)
    for n in args.lengths:
        lm.check_fits(n, 0, label=f"a {n}-token benchmark input")
    cfg = lm.model.config
    layers, heads = cfg.num_hidden_layers, cfg.num_attention_heads
    elem = torch.finfo(lm.dtype).bits // 8
    g = torch.Generator().manual_seed(0)
    warm = torch.randint(100, 1000, (64,), generator=g)
    # First-call costs
    (final_token_attention(lm.model, warm), eager_final_token_attention(lm.model, warm))
    rows = []
    for n in args.lengths:
        ids = torch.randint(100, cfg.vocab_size - 100, (n,), generator=g)
        fast, t_fast, m_fast = measure(
            lambda ids=ids: final_token_attention(lm.model, ids), lm.device
        )
        row = {
            "tokens": n,
            "fast_seconds": round(t_fast, 3),
            "fast_peak_mib": round(m_fast / 2**20, 1),
        }
        need = layers * heads * n * n * elem
        if need < 0.6 * available_bytes(lm.device):
            ref, t_ref, m_ref = measure(
                lambda ids=ids: eager_final_token_attention(lm.model, ids), lm.device
            )
            row.update(
                eager_seconds=round(t_ref, 3),
                eager_peak_mib=round(m_ref / 2**20, 1),
                time_ratio=round(t_ref / t_fast, 2),
                memory_ratio=round(m_ref / max(m_fast, 2**20), 1),
                max_abs_diff=float((fast - ref).abs().max()),
            )
            del ref
        else:
            row.update(eager_skipped=f"its attention matrices alone need ~{need / 2**30:.0f} GiB")
        print(json.dumps(row), flush=True)
        rows.append(row)
        gc.collect()

    result = {
        "model": args.model,
        "device": lm.device,
        "dtype": str(lm.dtype).replace("torch.", ""),
        "host": platform.node(),
        "cpu_threads": torch.get_num_threads(),
        "longctx_version": __version__,
        "torch_version": torch.__version__,
        "rows": rows,
    }
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(
        "| tokens | longctx s | eager s | time ratio | longctx peak MiB | eager peak MiB | memory ratio | max diff |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['tokens']} | {r['fast_seconds']} | {r.get('eager_seconds', '-')} | {r.get('time_ratio', '-')} | "
            f"{r['fast_peak_mib']} | {r.get('eager_peak_mib', r.get('eager_skipped', '-'))} | "
            f"{r.get('memory_ratio', '-')} | {r.get('max_abs_diff', '-')} |"
        )


if __name__ == "__main__":
    main()
