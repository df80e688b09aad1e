"""Key-value retrieval chapter (Lost in the Middle, sections 3 and 4.2).

Headline: gold pair first vs in the middle at the largest number of pairs, with and
without query-aware contextualization; the rest of the position grid follows.

``gold_positions``, ``examples_per_cell`` and ``kv_source`` take one value for every size or
a mapping from a number of pairs (as a string, JSON-style) to its own value, so one run can
hold a large headline cell from the paper's records and a small full grid of short contexts.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..claims import Estimate, by_unit, estimable, paired_estimate
from ..errors import ParameterError
from ..metrics import summarize
from ..reader import Reader
from ..report import estimate_text, n_for_half_width, pct_ci, points_ci
from ..results import reader_contrast, rows_table
from ..runner import Block
from ..tasks import kv_retrieval as kv

ORDER = 1  # where longctx reproduce runs its headline blocks among the chapters
NOTEBOOK = "notebooks/kv_retrieval.py"
EXPERIMENT = "kv_retrieval"
HEADLINE_DEPTHS = (0.0, 0.5)
QUERY_LABELS = {False: "query at end", True: "query-aware"}


def per_size(params: dict, name: str, k: int):
    """``params[name]`` for ``k`` pairs: the value itself, or its entry for ``k`` in a mapping."""
    value = params[name]
    if isinstance(value, dict):
        if str(k) not in value and k not in value:
            raise ParameterError(f"{name} has no entry for {k} pairs: {sorted(value)}")
        return value.get(str(k), value.get(k))
    return value


def examples_for(num_pairs: int, params: dict) -> tuple[list[kv.KVExample], str]:
    """The examples of one context size and the ``source`` label their rows carry.

    ``kv_source``: ``synthetic`` (seeded UUIDs), ``release-75`` / ``release-140`` (that
    file, trimmed to ``num_pairs``), or ``release`` (the smallest release file that holds
    ``num_pairs`` pairs, so 75 and 140 pairs both come from the paper's own records)."""
    source, n = per_size(params, "kv_source", num_pairs), per_size(params, "examples_per_cell", num_pairs)
    if source == "synthetic":
        return kv.synthetic_examples(n, num_pairs, seed=params["seed"]), source
    if source == "release":
        total = next((t for t in (75, 140) if num_pairs <= t), None)
        if total is None:
            raise ParameterError(f"the release files hold at most 140 pairs, not {num_pairs}; use synthetic")
        source = f"release-{total}"
    if source not in ("release-75", "release-140"):
        raise ParameterError(f"kv_source must be synthetic, release, release-75 or release-140, not {source!r}")
    return kv.release_examples(int(source.split("-")[1]), limit=n, num_pairs=num_pairs), source


def plan(params: dict) -> list[Block]:
    largest = max(params["num_pairs"])
    headline, rest = [], []
    for k in params["num_pairs"]:
        examples, source = examples_for(k, params)
        for qa in params["query_aware"]:
            # Split the positions so that first-vs-middle at the largest size runs first.
            positions = per_size(params, "gold_positions", k)
            top = [p for p in positions if k == largest and p in HEADLINE_DEPTHS]
            others = [p for p in positions if p not in top]
            label = f"{k} pairs, {'query-aware' if qa else 'query at end'}"
            if top:
                headline.append(Block(f"{label}, depths {top}", EXPERIMENT,
                                      kv.make_requests(examples, top, query_aware=qa, source=source), True))
            if others:
                # Positions that round to a headline index are already in the headline block.
                done = set(kv.position_indices(k, top)) if top else set()
                reqs = [r for r in kv.make_requests(examples, others, query_aware=qa, source=source)
                        if r.condition["gold_index"] not in done]
                rest.append(Block(f"{label}, depths {others}", EXPERIMENT, reqs))
    return headline + rest


def claims(results_dir: str | Path, params: dict, reader: Reader) -> dict[str, Estimate]:
    """The paper's two key-value claims at the largest size, on that size's examples, paired
    by record: gold in the middle minus first (query after the data), and query-aware minus
    query at the end with the gold pair in the middle."""
    largest = max(params["num_pairs"])
    examples, source = examples_for(largest, params)
    keep = {ex.example_id for ex in examples}  # the store may hold more records (an extension under way)
    rows = [r for r in reader.store(results_dir, EXPERIMENT).rows() if r["example_id"] in keep]
    first, middle = kv.position_indices(largest, [HEADLINE_DEPTHS[0]])[0], kv.position_indices(largest, [0.5])[0]
    base = {"source": source, "num_pairs": largest}

    def side(gold_index, query_aware):
        return by_unit(rows, {**base, "gold_index": gold_index, "query_aware": query_aware}, kv.score)

    return estimable({
        "litm-kv-middle": lambda: paired_estimate(side(first, False), side(middle, False),
                                                  side_names=("first", "middle")),
        "litm-kv-query-aware": lambda: paired_estimate(side(middle, False), side(middle, True),
                                                       side_names=("query at end", "query-aware")),
    })


# ---------------------------------------------------------------------------------------------
# Analysis: what the notebook shows, as numbers


def scored(rows: list[dict], params: dict) -> pd.DataFrame:
    """One row per generation with the chapter's columns: ``num_pairs``, the requested
    ``depth`` behind each gold index (sizes round a depth to different indices), ``query``."""
    depth_of = {(k, kv.position_indices(k, [d])[0]): d for k in params["num_pairs"]
                for d in per_size(params, "gold_positions", k)}
    table = rows_table(rows, kv.score)
    table["num_pairs"] = [r["condition"]["num_pairs"] for r in rows]
    table["depth"] = [depth_of[(k, i)] for k, i in zip(table["num_pairs"], table["gold_index"])]
    table["query"] = table["query_aware"].map(QUERY_LABELS)
    return table


def accuracy(table: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per reader, size, query placement and depth, with 95% Wilson intervals."""
    return summarize(table, ["model", "num_pairs", "query", "depth"])


def headline_cells(summary: pd.DataFrame, params: dict, label: str) -> pd.DataFrame:
    """The headline's four cells (first and middle, each query placement) at the largest size."""
    cells = summary[(summary["num_pairs"] == max(params["num_pairs"])) & (summary["model"] == label)
                    & summary["depth"].isin(HEADLINE_DEPTHS)]
    return cells.assign(position=cells["depth"].map({0.0: "first", 0.5: "middle"}),
                        correct=(cells["accuracy"] * cells["n"]).round().astype(int))


def sizing(table: pd.DataFrame, params: dict, label: str) -> pd.DataFrame:
    """For each headline comparison, the records and share whose outcome changes, and the
    records a 95% half-width of 10 points needs at the observed spread."""
    at = table[(table["num_pairs"] == max(params["num_pairs"])) & (table["model"] == label)]

    def per_record(depth_a, qa_a, depth_b, qa_b):
        def side(depth, query_aware):
            cell = at[(at["depth"] == depth) & (at["query_aware"] == query_aware)]
            return cell.set_index("example_id")["correct"]

        return (side(depth_b, qa_b) - side(depth_a, qa_a)).dropna()

    diffs = {"middle minus first": per_record(0.0, False, 0.5, False),
             "query-aware minus query at end": per_record(0.5, False, 0.5, True)}
    return pd.DataFrame([{"comparison": name, "records": len(d), "discordant": (d != 0).mean(),
                          "records for ±10 pts": n_for_half_width(d)} for name, d in diffs.items()])


def grid(summary: pd.DataFrame, params: dict, label: str) -> pd.DataFrame:
    """The position grid at every size below the largest: accuracy [interval] per depth."""
    short = summary[(summary["num_pairs"] < max(params["num_pairs"])) & (summary["model"] == label)]
    short = short.assign(cell=[pct_ci(a, lo, hi, 0) for a, lo, hi in
                               zip(short["accuracy"], short["ci_low"], short["ci_high"])])
    wide = short.pivot_table(index=["num_pairs", "query"], columns="depth", values="cell", aggfunc="first")
    wide.columns = [f"depth {c:g}" for c in wide.columns]
    return wide.reset_index().rename(columns={"num_pairs": "pairs"})


def speed(table: pd.DataFrame, rows: list[dict]) -> pd.DataFrame:
    """Prompts, mean prompt tokens and seconds per prompt by size, query placement and device."""
    devices = [r["params"].get("device", "?") + " " + r["params"].get("dtype", "") for r in rows]
    return (table.assign(device=devices)
            .groupby(["num_pairs", "query", "device"])
            .agg(prompts=("correct", "size"), mean_tokens=("prompt_tokens", "mean"),
                 seconds_per_prompt=("seconds_per_prompt", "mean"))
            .round(1).reset_index().rename(columns={"num_pairs": "pairs"}))


def error_kinds(table: pd.DataFrame) -> pd.DataFrame:
    """Wrong answers by size and query placement, by where their value came from."""
    errors = table[~table["correct"].astype(bool)]
    errors = errors.assign(kind=[kv.classify_error(r) for r in errors.to_dict("records")])
    kinds = pd.crosstab([errors["num_pairs"], errors["query"]], errors["kind"]).reindex(
        columns=list(kv.ERROR_KINDS), fill_value=0)
    kinds.columns.name = None
    return kinds.reset_index().rename(columns={"num_pairs": "pairs"})


def reader_comparison(table: pd.DataFrame, readers: tuple[str, str]) -> tuple[pd.DataFrame, dict] | None:
    """Each reader's middle-minus-first effect (query at the end) and the difference between
    them, paired by record, at the largest size where both have rows; None when they share none."""
    both = table[table["model"].isin(readers) & ~table["query_aware"] & table["depth"].isin(HEADLINE_DEPTHS)]
    sizes = [k for k, g in both.groupby("num_pairs") if g["model"].nunique() == 2]
    if not sizes or readers[0] == readers[1]:
        return None
    at = both[both["num_pairs"] == max(sizes)]
    contrast = reader_contrast(at, readers=list(readers), condition="depth", control=0.0, treatment=0.5,
                               item=["example_id"])
    shown = pd.DataFrame([{"reader": name, "middle minus first (pts, 95% CI)": points_ci(
        100 * contrast[name]["effect"], 100 * contrast[name]["ci_low"], 100 * contrast[name]["ci_high"])}
        for name in [*readers, "difference"]])
    return shown, {**contrast, "num_pairs": max(sizes)}


def quoted(estimates: dict[str, Estimate], cells: pd.DataFrame, summary: pd.DataFrame, errors: pd.DataFrame,
           params: dict, label: str) -> dict:
    """Every number the chapter's prose quotes, by glue key."""
    largest = max(params["num_pairs"])

    def cell(position, query):
        row = cells[(cells["position"] == position) & (cells["query"] == query)].iloc[0]
        return row

    first, middle = cell("first", QUERY_LABELS[False]), cell("middle", QUERY_LABELS[False])
    qa_middle = cell("middle", QUERY_LABELS[True])
    short = summary[(summary["num_pairs"] < largest) & (summary["model"] == label)]
    qa_errors = errors[(errors["pairs"] == largest) & (errors["query"] == QUERY_LABELS[True])]
    wrong = qa_errors[list(kv.ERROR_KINDS)].to_numpy().sum()
    return {
        "kv-largest": largest, "kv-records": int(first["n"]),
        "kv-first-correct": int(first["correct"]), "kv-first-pct": f"{100 * first['accuracy']:.1f}%",
        "kv-middle-correct": int(middle["correct"]), "kv-middle-pct": f"{100 * middle['accuracy']:.1f}%",
        "kv-qa-middle-correct": int(qa_middle["correct"]), "kv-qa-middle-pct": f"{100 * qa_middle['accuracy']:.1f}%",
        "kv-middle-vs-first": estimate_text(estimates["litm-kv-middle"]),
        "kv-query-aware": estimate_text(estimates["litm-kv-query-aware"]),
        "kv-short-sizes": " and ".join(str(k) for k in sorted(params["num_pairs"]) if k < largest),
        "kv-short-low": f"{100 * short['accuracy'].min():.0f}%" if len(short) else "—",
        "kv-short-high": f"{100 * short['accuracy'].max():.0f}%" if len(short) else "—",
        "kv-qa-errors-first-pair": f"{qa_errors[kv.ERROR_KINDS[0]].sum() / wrong:.0%}" if wrong else "—",
    }
