"""The semantic competition chapter's design: the requests a run asks, cut into blocks headline
first (what ``longctx reproduce`` and the cost plan read), and what they are built from."""

from __future__ import annotations

from ...errors import ParameterError
from ...requests import Request, dedupe_key, unique_requests
from ...runner import Block
from ...tasks import semantic_competition as sc
from ..contract import Run

EXPERIMENT = "semantic_competition"

HEADLINE = "squad, bm25"


def build(params: dict, progress: bool = False) -> dict[str, tuple[list[Request], list, list[str]]]:
    """experiment name -> (requests, examples, ids of questions left out), in priority order."""
    squad = sc.load_corpus(params["corpus"]).limit_passages(params["max_passages"] or None)
    num_questions = params["num_questions"]
    headline_questions = params.get("headline_questions") or num_questions
    if headline_questions < num_questions:
        raise ParameterError(
            f"headline_questions ({headline_questions}) must be at least num_questions "
            f"({num_questions}): the retention sweeps run on the first num_questions of them"
        )
    # The sample is prefix-stable, so the sweep's questions are the first of the headline's.
    sampled = sc.sample_questions(squad, headline_questions, params["seed"])
    questions = sampled[:num_questions]
    words = params["snippet_words"]
    index = {
        r: sc.SnippetIndex(
            squad, words, r, **({"model": params["dense_model"]} if r == "dense" else {})
        )
        for r in sorted(set(params["retrievers"]) | {"bm25"})
    }
    far_from, seed, keep, size = (
        params["far_from"],
        params["seed"],
        params["keep_hard"],
        params["matched_size"],
    )
    # The BM25 experiment (sweep and matched control) runs on all headline questions; the
    # rest on the first num_questions of them.
    head_reqs, head_examples, head_skipped = sc.experiment_requests(
        index["bm25"],
        sampled,
        sc.plan_conditions(params["hard_counts"], [size], keep),
        far_from=far_from,
        seed=seed,
        progress=progress,
    )
    plans = {HEADLINE: (head_reqs, head_examples, head_skipped)}
    for r in params["retrievers"]:
        if r != "bm25":
            plans[f"squad, {r}"] = sc.experiment_requests(
                index[r],
                questions,
                sc.plan_conditions(params["hard_counts"]),
                far_from=far_from,
                seed=seed,
            )
    subset = questions[: params["compare_questions"]]
    plans["squad, other N"] = sc.experiment_requests(
        index["bm25"],
        subset,
        sc.plan_conditions([], params["other_sizes"], keep),
        far_from=far_from,
        seed=seed,
    )
    plans[f"squad, {params['compare_snippet_words']} words"] = sc.experiment_requests(
        sc.SnippetIndex(squad, params["compare_snippet_words"], "bm25"),
        subset,
        sc.plan_conditions([], [params["matched_size"]], keep),
        far_from=far_from,
        seed=seed,
    )
    if params["nq_questions"]:
        nq = sc.load_corpus("nq-open-oracle").limit_passages(params["max_passages"] or None)
        plans["nq, bm25"] = sc.experiment_requests(
            sc.SnippetIndex(nq, words, "bm25"),
            sc.sample_questions(nq, params["nq_questions"], seed),
            sc.plan_conditions([], [params["matched_size"]], keep),
            far_from=far_from,
            seed=seed,
        )
    return plans


def blocks(params: dict, built: dict | None = None) -> list[Block]:
    """The chapter's requests (from :func:`build`, or ``built`` if the caller has it) in
    blocks: the matched control at ``matched_size`` first, then the rest of the BM25
    experiment (its retention sweep), then everything else once."""
    plans = built if built is not None else build(params)
    head_reqs, examples, _ = plans[HEADLINE]
    size = params["matched_size"]
    matched = unique_requests(
        sc.second_reader_requests(head_reqs, [e.question for e in examples], size)
    )
    keys = {dedupe_key(r) for r in matched}
    sweep = [r for r in unique_requests(head_reqs) if dedupe_key(r) not in keys]
    keys |= {dedupe_key(r) for r in sweep}
    rest = [
        r
        for r in unique_requests([r for reqs, _, _ in plans.values() for r in reqs])
        if dedupe_key(r) not in keys
    ]
    # Question by question, so a run stopped early leaves whole paired questions.
    blocks = [
        Block(
            f"matched control, {size} snippets (gold, hard, far)",
            EXPERIMENT,
            matched,
            True,
            whole_units=True,
        )
    ]
    if sweep:
        blocks.append(Block("BM25 retention sweep", EXPERIMENT, sweep, True, whole_units=True))
    if rest:
        blocks.append(Block("other retrievers, other sizes, snippet length, NQ", EXPERIMENT, rest))
    return blocks


def built_contexts(run: Run) -> dict:
    """:func:`build` for this run (experiment -> requests, examples, questions left out)."""
    return run.once("built", lambda: build(run.params))


# The stores the chapter offers for download
EXPERIMENTS = (EXPERIMENT,)

# Each claim -> the words naming the claims-scale blocks its rows come from (the chapter's
# claim_blocks: what `longctx reproduce --scale claims` runs for it).
CLAIM_BLOCKS = {
    "sc-far-minus-hard": ("matched control",),
    "sc-far-minus-hard-inclusion": ("matched control",),
    "sc-hard-hurts": ("matched control",),
}
