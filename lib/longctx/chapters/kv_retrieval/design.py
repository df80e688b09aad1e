"""The key-value chapter's design: its examples per size and the blocks of requests a run
asks, headline first (what ``longctx reproduce`` and the cost plan read).

``gold_positions``, ``examples_per_cell`` and ``kv_source`` take one value for every size or
a mapping from a number of pairs (as a string, JSON-style) to its own value, so one run can
hold a large headline cell from the paper's records and a small full grid of short contexts.
"""

from __future__ import annotations

from ...errors import ParameterError
from ...runner import Block
from ...tasks import kv_retrieval as kv

EXPERIMENT = "kv_retrieval"

HEADLINE_DEPTHS = (0.0, 0.5)

QUERY_LABELS = {False: "query at end", True: "query-aware"}

QUERY_ORDER = [QUERY_LABELS[False], QUERY_LABELS[True]]  # the paper's prompt first: solid


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
    source, n = (
        per_size(params, "kv_source", num_pairs),
        per_size(params, "examples_per_cell", num_pairs),
    )
    if source == "synthetic":
        return kv.synthetic_examples(n, num_pairs, seed=params["seed"]), source
    if source == "release":
        total = next((t for t in (75, 140) if num_pairs <= t), None)
        if total is None:
            raise ParameterError(
                f"the release files hold at most 140 pairs, not {num_pairs}; use synthetic"
            )
        source = f"release-{total}"
    if source not in ("release-75", "release-140"):
        raise ParameterError(
            f"kv_source must be synthetic, release, release-75 or release-140, not {source!r}"
        )
    return kv.release_examples(int(source.split("-")[1]), limit=n, num_pairs=num_pairs), source


def blocks(params: dict) -> list[Block]:
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
                headline.append(
                    Block(
                        f"{label}, depths {top}",
                        EXPERIMENT,
                        kv.make_requests(examples, top, query_aware=qa, source=source),
                        True,
                    )
                )
            if others:
                # Positions that round to a headline index are already in the headline block.
                done = set(kv.position_indices(k, top)) if top else set()
                reqs = [
                    r
                    for r in kv.make_requests(examples, others, query_aware=qa, source=source)
                    if r.condition["gold_index"] not in done
                ]
                rest.append(Block(f"{label}, depths {others}", EXPERIMENT, reqs))
    return headline + rest


def check(params: dict) -> None:
    """Before any work: the claims compare gold first and in the middle at the largest size."""
    largest = max(params["num_pairs"])
    positions = per_size(params, "gold_positions", largest)
    missing = [d for d in HEADLINE_DEPTHS if d not in positions]
    if missing:
        raise ParameterError(
            f"gold_positions for {largest} pairs is {positions}; the chapter compares the gold "
            f"pair first and in the middle there, so it needs depths {list(HEADLINE_DEPTHS)}"
        )


# The stores the chapter offers for download
EXPERIMENTS = (EXPERIMENT,)

# Each claim -> the words naming the claims-scale blocks its rows come from (the chapter's
# claim_blocks: what `longctx reproduce --scale claims` runs for it).
CLAIM_BLOCKS = {
    "litm-kv-middle": ("query at end",),
    "litm-kv-query-aware": ("query at end", "query-aware"),
}
