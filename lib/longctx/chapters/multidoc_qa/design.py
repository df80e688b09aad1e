"""The multi-document QA chapter's design: the requests a run asks, cut into blocks headline
first (what ``longctx reproduce`` and the cost plan read), and what they are built from."""

from __future__ import annotations

from pathlib import Path

from ...errors import ParameterError
from ...runner import Block
from ...tasks import multidoc_qa as qa
from ...tasks import open_domain as od

EXPERIMENT = "multidoc_qa"

HEADLINE_DEPTHS = (0.0, 0.5, 1.0)


def positions_for(params: dict, k: int) -> list:
    positions = params["gold_positions"]
    if isinstance(positions, dict):
        if str(k) not in positions and k not in positions:
            raise ParameterError(
                f"gold_positions names no positions for {k} documents: {sorted(positions)}"
            )
        return list(positions.get(str(k), positions.get(k)))
    return list(positions)


def questions_for(params: dict) -> tuple[list[qa.QAExample], list[qa.QAExample]]:
    """(the first ``num_questions`` oracle questions, the whole pool distractors come from)."""
    oracle = qa.read_oracle()
    return oracle[: params["num_questions"]], oracle


def examples_for(params: dict, k: int, questions, pool) -> list[qa.QAExample]:
    if params["source"] == "release":
        if not params.get("release_dir"):
            raise ParameterError(
                "source 'release' needs release_dir, the folder of the paper's files"
            )
        return qa.read_release_file(
            Path(params["release_dir"]) / qa.release_filename(k, 0), limit=params["num_questions"]
        )
    if params["source"] != "oracle":
        raise ParameterError(f"source must be oracle or release, not {params['source']!r}")
    exs = qa.attach_distractors(
        questions,
        max(params["num_documents"]) - 1,
        kind=params["distractors"],
        seed=params["seed"],
        pool=pool,
        progress=False,
    )
    return (
        [qa.shuffle_distractors(e, params["seed"]) for e in exs] if params["random_order"] else exs
    )


def blocks(params: dict) -> list[Block]:
    questions, pool = questions_for(params)
    for k in params["num_documents"]:  # fail before any work on a position a size does not have
        qa.position_indices(k, positions_for(params, k))
    largest = max(params["num_documents"])
    cache: dict = {}

    detail = params.get("detail_questions") or params["num_questions"]

    def requests(k, positions, qa_flag, headline=False):
        if "examples" not in cache:
            cache["examples"] = examples_for(params, largest, questions, pool)
        examples = cache["examples"] if headline else cache["examples"][:detail]
        return qa.make_requests(
            examples,
            k,
            positions,
            query_aware=qa_flag,
            mention_random_ordering=params["random_order"],
            distractors=params["distractors"],
        )

    head = [Block("closed-book and oracle", EXPERIMENT, qa.make_baseline_requests(questions), True)]
    rest = []
    for k in sorted(params["num_documents"], reverse=True):
        positions = positions_for(params, k)
        # First, middle and last, whether positions are depths (0.0, 0.5, 1.0) or the
        # paper's 1-based positions (1, 15, 30 at 30 documents).
        edges_and_middle = set(qa.position_indices(k, HEADLINE_DEPTHS))
        for qa_flag in params["query_aware"]:
            top = [
                p
                for p in positions
                if k == largest
                and not qa_flag
                and qa.position_indices(k, [p])[0] in edges_and_middle
            ]
            top_idx = set(qa.position_indices(k, top)) if top else set()
            label = f"{k} documents, {'query-aware' if qa_flag else 'query at end'}"
            if top:
                head.append(
                    Block(
                        f"{label}, depths {top}", EXPERIMENT, requests(k, top, qa_flag, True), True
                    )
                )
            others = (
                [
                    r
                    for r in requests(k, [p for p in positions if p not in top], qa_flag)
                    if r.condition["gold_index"] not in top_idx
                ]
                if [p for p in positions if p not in top]
                else []
            )
            if others:
                rest.append(Block(f"{label}, other positions", EXPERIMENT, others))
    if params.get("open_domain_ks"):
        rest.append(open_domain_block(params, pool))
    return head + rest


OPEN_DOMAIN = "open_domain"


def open_domain_block(params: dict, pool) -> Block:
    """Section 5's retriever-reader runs (optional parameters ``open_domain_ks`` and
    ``open_domain_questions``): the first questions, each with its top k BM25 chunks of the
    oracle collection for every k."""
    n = params.get("open_domain_questions") or params["num_questions"]
    return Block(
        f"open-domain, k = {params['open_domain_ks']}",
        OPEN_DOMAIN,
        od.make_requests(pool[:n], od.ChunkRetriever(pool), params["open_domain_ks"]),
    )


def check(params: dict) -> None:
    """Before any work: the U-shape compares first, middle and last at the most documents."""
    k = max(params["num_documents"])
    have = set(qa.position_indices(k, positions_for(params, k)))
    if not set(qa.position_indices(k, HEADLINE_DEPTHS)) <= have:
        raise ParameterError(
            f"gold_positions {positions_for(params, k)} at {k} documents leave out the first, "
            f"middle or last position the chapter compares (depths {list(HEADLINE_DEPTHS)})"
        )


# The stores the chapter offers for download
EXPERIMENTS = (EXPERIMENT, OPEN_DOMAIN)

# Each claim -> the words naming the claims-scale blocks its rows come from (the chapter's
# claim_blocks: what `longctx reproduce --scale claims` runs for it).
CLAIM_BLOCKS = {
    "litm-qa-u-shape": ("documents, query at end",),
    "litm-qa-closed-book": ("closed-book", "documents, query at end"),
    "litm-open-domain": ("open-domain",),
    "litm-open-domain-recall": (),
}
