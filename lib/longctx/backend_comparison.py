"""The backends page: how often two backends give the same answer to the committed prompts
of the chapters, whether accuracy changes, and the speed of each way to generate from one
benchmark run (``make bench``).

The prompts are blocks of the chapters' own book-scale plans, so the rows compared are the
committed ones; the benchmark files are written by ``scripts/bench_backends.py`` and
``scripts/bench_llamacpp_prefix.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from . import __version__
from .chapters import Run, contract
from .paths import build_commit, repo_root
from .plots import COLUMN_INCHES, FigureText, book_figure
from .reader import Reader
from .report import format_p, pct, points_ci
from .requests import request_identity
from .results import backend_agreement
from .runner import stored
from .store import ResultsStore
from .tasks import kv_retrieval as kv
from .tasks import multidoc_qa as qa

# The committed book-scale prompts answered by both backends (blocks of each chapter's plan).
BLOCKS = {"kv_retrieval": ("10 pairs", "30 pairs"), "multidoc_qa": ("closed-book", "10 documents")}
SCORERS = {"kv_retrieval": kv.score, "multidoc_qa": qa.score}
PATHS = {
    "naive": "model.generate loop",
    "hf": "hf engine",
    "llamacpp": "llama.cpp in process",
    "openai": "OpenAI client -> llama.cpp server",
}
WORKLOADS = {"kv": "key-value (prefill-bound)", "varsum": "VarSum (decode-bound)"}
READERS_BENCH = "data/bench/readers-cpu.json"  # written by scripts/bench_readers.py


# the chapters as the page names them
CHAPTER_WORDS = {"kv_retrieval": "key-value retrieval", "multidoc_qa": "multi-document QA"}


def _identity(row: dict):
    return request_identity(row["task"], row["condition"], row["example_id"])


def agreement(
    model: str, results_dir: str | Path, blocks: dict = BLOCKS
) -> tuple[pd.DataFrame, dict]:
    """Per chapter and pooled: prompts answered by both ``hf`` and ``llamacpp``, the share of
    identical answers and the paired accuracy difference (:func:`longctx.results.backend_agreement`);
    with the scored rows of each backend."""
    table, pooled = [], {"hf": [], "llamacpp": []}
    for chapter, names in blocks.items():
        plan = [
            b
            for b in Run.of(contract(chapter), Reader.of(model)).planned()
            if any(n in b.name for n in names)
        ]
        hf = stored(plan, Reader.of(model), results_dir)
        llama = stored(plan, Reader.of(model, "llamacpp"), results_dir)
        table.append({"chapter": chapter, **backend_agreement(hf, llama, SCORERS[chapter])})
        pooled["hf"] += [{**r, "score": SCORERS[chapter](r)} for r in hf]
        pooled["llamacpp"] += [{**r, "score": SCORERS[chapter](r)} for r in llama]
    both = backend_agreement(pooled["hf"], pooled["llamacpp"], lambda r: r["score"])
    return pd.DataFrame([*table, {"chapter": "both", **both}]), pooled


def bench_arms(bench: dict) -> pd.DataFrame:
    """One row per workload and path of a ``make bench`` file."""
    return pd.concat(
        [
            pd.DataFrame(w["arms"])
            .T.reset_index(names="backend")
            .assign(workload=name, prompts=w["prompts"])
            for name, w in bench["workloads"].items()
        ],
        ignore_index=True,
    )


def quoted(view: SimpleNamespace) -> dict:
    """Every number the page's prose quotes, by glue key."""
    both = view.agreement.set_index("chapter").loc["both"]
    speed = view.arms.set_index(["workload", "backend"])
    prefix, prompts = view.prefix, view.prefix_prompts

    def saved(workload):
        arms = prefix[workload]
        return f"{100 * (1 - arms['llamacpp']['seconds'] / arms['llamacpp_cold']['seconds']):.1f}%"

    return {
        "be-identical": f"{pct(both['identical'])}%",
        "be-prompts": f"{both['n']:.0f}",
        "be-examples": f"{both['units']:.0f}",
        "be-acc-llamacpp": f"{pct(both['accuracy_llamacpp'])}%",
        "be-acc-hf": f"{pct(both['accuracy_hf'])}%",
        "be-difference": f"{points_ci(both['difference'], both['low'], both['high'])} points "
        f"(p = {format_p(both['p'])})",
        "be-differ": len(view.differ),
        "be-differ-hf-right": f"{sum(a['score'] for a, _ in view.differ):.0f}",
        "be-differ-llamacpp-right": f"{sum(b['score'] for _, b in view.differ):.0f}",
        "be-varsum-same": f"{speed.loc[('varsum', 'llamacpp'), 'same_answer_as_hf']:.0f}",
        "be-varsum-prompts": f"{speed.loc[('varsum', 'llamacpp'), 'prompts']:.0f}",
        "be-kv-llamacpp": f"{speed.loc[('kv', 'llamacpp'), 'speedup_vs_hf']:.2f}x",
        "be-varsum-llamacpp": f"{speed.loc[('varsum', 'llamacpp'), 'speedup_vs_hf']:.2f}x",
        "be-hf-batch": f"{speed.loc[('varsum', 'hf'), 'batch_size']:.0f}",
        "be-varsum-hf-naive": f"{speed.loc[('varsum', 'hf'), 'speedup_vs_naive']:.2f}x",
        "be-kv-hf-naive": f"{speed.loc[('kv', 'hf'), 'speedup_vs_naive']:.2f}x",
        "be-prefix-kv": saved("kv"),
        "be-prefix-varsum": saved("varsum"),
        "be-prefix-changed": f"{prompts['varsum'] - prefix['varsum']['llamacpp_cold']['same_answer_as_hf']:.0f}",
        "be-prefix-prompts": f"{prompts['varsum']:.0f}",
        "be-kv-openai": f"{speed.loc[('kv', 'openai'), 'speedup_vs_hf']:.2f}x",
        "be-varsum-openai": f"{speed.loc[('varsum', 'openai'), 'speedup_vs_hf']:.2f}x",
    }


def statements(view: SimpleNamespace) -> dict[str, bool]:
    """What the page's prose says in words, each as a check on the committed rows and benchmark."""
    by = view.agreement.set_index("chapter")
    both, speed, prefix = by.loc["both"], view.arms.set_index(["workload", "backend"]), view.prefix
    saved = {
        w: 1 - prefix[w]["llamacpp"]["seconds"] / prefix[w]["llamacpp_cold"]["seconds"]
        for w in prefix
    }
    return {
        "256 prompts, every key-value answer identical, the differences all in QA": both["n"] == 256
        and by.loc["kv_retrieval", "identical"] == 1.0
        and sorted({a["task"] for a, _ in view.differ}) == ["multidoc_qa"],
        "the accuracy difference's interval lies within ±3 points": -3 < both["low"]
        and both["high"] < 3,
        "VarSum at the same accuracy on both": speed.loc[("varsum", "llamacpp"), "accuracy"]
        == speed.loc[("varsum", "hf"), "accuracy"],
        "llama.cpp is not faster than the hf engine": speed.loc[("kv", "llamacpp"), "speedup_vs_hf"]
        <= 1.05
        and speed.loc[("varsum", "llamacpp"), "speedup_vs_hf"] < 1,
        "the hf engine is several times the plain loop on VarSum": speed.loc[
            ("varsum", "hf"), "speedup_vs_naive"
        ]
        > 3,
        "the openai client is slower than the hf engine here": speed.loc[
            ("kv", "openai"), "speedup_vs_hf"
        ]
        < 1,
        "hf ran in bfloat16": view.arms["dtype"].dropna().unique().tolist() == ["bfloat16"],
        "prefix reuse saves under 1%": all(0 <= v < 0.01 for v in saved.values()),
        "4 of 8 long answers changed with prefix reuse": prefix["varsum"]["llamacpp_cold"][
            "same_answer_as_hf"
        ]
        == 4
        and view.prefix_prompts["varsum"] == 8,
    }


def analysis(
    model: str, results_dir: str | Path, bench_file: str, prefix_file: str, blocks: dict = BLOCKS
) -> SimpleNamespace:
    """Everything the page shows: the agreement table, the benchmark's arms, the prefix-cache
    run, the answers that differ, the numbers the prose quotes (``quoted``) and the
    statements it makes (``said``)."""
    view = SimpleNamespace(model=model, bench_file=bench_file)
    view.agreement, pooled = agreement(model, results_dir, blocks)
    llama = {_identity(r): r for r in pooled["llamacpp"]}
    view.differ = [
        (a, llama[_identity(a)])
        for a in pooled["hf"]
        if _identity(a) in llama and a["output"] != llama[_identity(a)]["output"]
    ]
    view.bench = json.loads((repo_root() / bench_file).read_text())
    view.arms = bench_arms(view.bench)
    prefix_run = json.loads((repo_root() / prefix_file).read_text())["workloads"]
    view.prefix = {w: v["arms"] for w, v in prefix_run.items()}
    view.prefix_prompts = {w: v["prompts"] for w, v in prefix_run.items()}
    view.quoted = quoted(view)
    view.said = statements(view)
    view.book_run = (
        model == Reader().model and Path(results_dir) == repo_root() / "data" / "results"
    )
    return view


AGREEMENT_CAPTION = (
    "The same prompts through transformers and llama.cpp, per chapter: identical "
    "answers and the difference in accuracy."
)


def agreement_table(view: SimpleNamespace) -> tuple[pd.DataFrame, str]:
    a = view.agreement
    table = pd.DataFrame(
        {
            "chapter": a["chapter"].map(lambda c: CHAPTER_WORDS.get(c, c)),
            "prompts": a["n"],
            "examples": a["units"],
            "identical answers (%)": [pct(v) for v in a["identical"]],
            "hf accuracy (%)": [pct(v) for v in a["accuracy_hf"]],
            "llama.cpp accuracy (%)": [pct(v) for v in a["accuracy_llamacpp"]],
            "llama.cpp minus hf (pts, 95% CI)": [
                points_ci(d, lo, hi) for d, lo, hi in zip(a["difference"], a["low"], a["high"])
            ],
            "p": [format_p(p) for p in a["p"]],
        }
    )
    note = (
        f"Model {view.model}; longctx {__version__}, built from commit {build_commit()}; "
        "accuracy by each chapter's metric (key-value: the value's "
        "UUID in the answer; QA: a gold answer in the normalized first line)."
    )
    return table, note


SPEED_CAPTION = (
    "Each path's time on the same prompts of both workloads, as a multiple of the "
    "plain generate loop's and the hf engine's."
)


def speed_table(view: SimpleNamespace) -> tuple[pd.DataFrame, str]:
    arms, bench = view.arms, view.bench
    table = pd.DataFrame(
        {
            "workload": [WORKLOADS.get(w, w) for w in arms["workload"]],
            "path": [PATHS[b] for b in arms["backend"]],
            "prompts": arms["prompts"],
            "mean prompt tokens": arms["mean_prompt_tokens"],
            "seconds": arms["seconds"],
            "x model.generate loop": arms["speedup_vs_naive"],
            "x hf engine": arms["speedup_vs_hf"],
            "accuracy (%)": [pct(v) for v in arms["accuracy"]],
            "same answer as hf": arms["same_answer_as_hf"].astype(int),
        }
    )
    note = (
        f"{view.bench_file}: {bench['threads']} threads, {bench['cpu']}, {bench['date']}, longctx "
        f"{bench['longctx']}; hf in {arms['dtype'].dropna().iloc[0]} (the dtype `auto` measured fastest on this "
        "CPU)."
    )
    return table, note


def figure_text(view: SimpleNamespace) -> FigureText:
    """:func:`figure`'s caption and alt text, from the agreement and the benchmark it draws."""
    a, arms = view.agreement, view.arms
    per_chapter = a[a["chapter"] != "both"]
    zero_inside = ((a["low"] <= 0) & (a["high"] >= 0)).all()
    fastest = [
        f"{WORKLOADS.get(w, w)}: fastest {PATHS[part.loc[part['speedup_vs_naive'].idxmax(), 'backend']]}"
        f" at {part['speedup_vs_naive'].max():.1f}x"
        for w, part in arms.groupby("workload", sort=False)
    ]
    caption = (
        "Top: share of identical answers and accuracy difference (llama.cpp minus hf, points, "
        f"95% paired bootstrap interval over examples) on committed prompts of {len(per_chapter)} "
        f"chapters, {view.model}. Bottom: end-to-end speed of each way to generate on the same "
        "prompts (key-value: prefill-bound; VarSum: decode-bound), as a multiple of the plain "
        f"model.generate loop, from one benchmark run ({view.bench['threads']} threads, "
        f"{view.bench['cpu']})."
    )
    alt = (
        "Two panels: accuracy differences between llama.cpp and hf "
        + ("whose intervals all include zero" if zero_inside else "not all including zero")
        + f", with {100 * per_chapter['identical'].min():.0f} to "
        f"{100 * per_chapter['identical'].max():.0f} percent identical answers; and speed bars "
        "per path and workload (" + "; ".join(fastest) + ")."
    )
    return FigureText(caption, alt)


@book_figure
def figure(view: SimpleNamespace):
    """Top: identical answers and the accuracy difference per chapter; bottom: each path's
    speed against the plain ``model.generate`` loop, per workload."""
    import matplotlib.pyplot as plt  # the book's package: only the notebook draws

    a, arms = view.agreement, view.arms
    fig, (left, right) = plt.subplots(
        2, 1, figsize=(COLUMN_INCHES, 5.6), layout="constrained", height_ratios=[len(a), 4]
    )
    y = list(range(len(a)))
    left.errorbar(
        a["difference"],
        y,
        xerr=[a["difference"] - a["low"], a["high"] - a["difference"]],
        fmt="o",
        color="black",
        capsize=3,
    )
    left.axvline(0, color="grey", lw=0.8)
    left.set_yticks(
        y,
        [
            f"{CHAPTER_WORDS.get(c, c)} ({100 * s:.0f}% identical, n={n})"
            for c, s, n in zip(a["chapter"], a["identical"], a["n"])
        ],
    )
    left.set_xlabel("accuracy, llama.cpp minus hf (points)")
    left.invert_yaxis()
    order = list(PATHS)
    workloads = view.bench["workloads"]
    width = 0.8 / len(workloads)
    for k, (name, part) in enumerate(arms.groupby("workload", sort=False)):
        part = part.set_index("backend").reindex(order).dropna(subset=["seconds"])
        right.barh(
            [order.index(b) + k * width for b in part.index],
            part["speedup_vs_naive"],
            height=width,
            label=WORKLOADS.get(name, name),
        )
    right.set_yticks(
        [i + width * (len(workloads) - 1) / 2 for i in range(len(order))], [PATHS[b] for b in order]
    )
    right.axvline(1, color="grey", lw=0.8)
    right.set_xlabel("speed vs model.generate loop (x)")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    right.invert_yaxis()
    return fig


READERS_CAPTION = (
    "The claims scale's prompts through each model and backend: speed, and answers "
    "against the model's first backend."
)


def readers_table(path: str | Path = READERS_BENCH) -> tuple[pd.DataFrame, str]:
    """The claims scale's speed per reader (``scripts/bench_readers.py``'s file): the same
    claims prompts through each model and backend by the runner itself, with each backend's
    time and answers against the model's first backend measured."""
    bench = json.loads((repo_root() / path).read_text())
    firsts = {m["model"]: key for key, m in reversed(bench.items())}
    table = pd.DataFrame(
        [
            {
                "model": m["model"],
                "backend": m["backend"],
                "dtype": m["run_params"].get("dtype", ""),
                "prompts": m["prompts"],
                "prompt tokens": f"{m['prompt_tokens']:,}",
                "seconds": m["seconds"],
                "prompt tokens/s": m["prompt_tokens_per_s"],
                "x first backend": m["speedup_vs_first"],
                "same answer as first": "(the first)"
                if firsts[m["model"]] == key
                else f"{m['same_answer_as_first']} of {m['prompts']}",
                "measured": m["date"],
            }
            for key, m in bench.items()
        ]
    )
    first = next(iter(bench.values()))
    note = (
        f"{path}: {first['threads']} threads of an {first['cpu']}; prompts of the claims "
        f"scale's blocks {', '.join(f'{c} ({b})' for c, b in first['blocks'].items())}; "
        "tokens per second count decoding in; each model's first backend is its hf row."
    )
    return table, note


GPU_CAPTION = "Throughput of the committed rows made on a GPU, from their own timings."


def gpu_throughput_table(results_dir: str | Path) -> tuple[pd.DataFrame, str]:
    """End-to-end throughput of the committed rows made on a GPU, from their own timings:
    per reader and store, the prompts, their mean prompt tokens, the median batch and the
    prompt tokens read per second of batch time (decoding included)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for store in ResultsStore.all_under(results_dir):
        for row in store.rows():
            params = row.get("params", {})
            if str(params.get("device", "")).startswith("cuda") and row.get("seconds_per_prompt"):
                groups.setdefault((store.dir.parent.name, store.dir.name), []).append(row)
    table = pd.DataFrame(
        [
            {
                "reader": folder,
                "store": experiment,
                "dtype": rows[0]["params"].get("dtype", ""),
                "prompts": len(rows),
                "mean prompt tokens": round(sum(r["prompt_tokens"] for r in rows) / len(rows)),
                "median batch": int(pd.Series([r["batch_size"] for r in rows]).median()),
                "prompt tokens/s": round(
                    sum(r["prompt_tokens"] for r in rows)
                    / sum(r["seconds_per_prompt"] for r in rows)
                ),
            }
            for (folder, experiment), rows in sorted(groups.items())
        ]
    )
    note = (
        "Committed rows whose parameters name a CUDA device; prompt tokens per second of "
        "each row's share of its batch's wall time, decoding included (the batch waits for "
        "its longest answer), so short prompts with long answers read slowest."
    )
    return table, note
