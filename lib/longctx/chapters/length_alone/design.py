"""The context-length-alone chapter's design: the requests a run asks, cut into blocks headline
first (what ``longctx reproduce`` and the cost plan read), and what they are built from."""

from __future__ import annotations

import json

from ...errors import ParameterError
from ...runner import Block, LazyRequests
from ...tasks import length_alone as la
from ...tasks import ruler_qa as rq

EXPERIMENT = la.TASK

ARM_FIELDS = {"subtasks", "mode", "placement", "kinds", "lengths", "headline", "num_problems"}

RULER_FIELDS = {"subtasks", "lengths", "num_questions"}


def problems_for(params: dict) -> dict[str, list[la.Problem]]:
    """Every subtask any arm names, ``num_problems`` seeded problems each (prefix-stable)."""
    names = list(dict.fromkeys(s for arm in params["arms"] for s in arm["subtasks"]))
    return {s: la.load_problems(s, params["num_problems"], seed=params["seed"]) for s in names}


def blocks(params: dict, count_tokens=None, shared_as: str | None = None) -> list[Block]:
    """The chapter's blocks: each arm at each length (headline arms first), then RULER's,
    sized with ``count_tokens`` (:func:`ruler_blocks`)."""
    problems = problems_for(params)
    every = [p for ps in problems.values() for p in ps]
    seen: set[str] = set()
    headline, rest = [], []
    for k, arm in enumerate(params["arms"]):
        unknown = set(arm) - ARM_FIELDS
        if unknown or not {"subtasks", "kinds", "lengths"} <= set(arm):
            raise ParameterError(
                f"arm {k}: needs subtasks, kinds, lengths (optional mode, placement, headline, "
                f"num_problems); unknown fields {sorted(unknown)}"
            )
        limit = arm.get("num_problems", params["num_problems"])
        if not isinstance(limit, int) or not 1 <= limit <= params["num_problems"]:
            raise ParameterError(
                f"arm {k}: num_problems must be an integer in 1..{params['num_problems']}, got {limit!r}"
            )
        mode, placement = arm.get("mode", "solve"), arm.get("placement", "between")
        for length in sorted(arm["lengths"]):
            reqs = []
            for subtask in arm["subtasks"]:
                for r in la.make_requests(
                    problems[subtask][:limit],
                    filler_kinds=arm["kinds"],
                    lengths=[length],
                    placements=(placement,),
                    mode=mode,
                ):
                    key = r.example_id + json.dumps(r.condition, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        reqs.append(r)
            if not reqs:
                continue
            followup = None
            if mode == "recite" and params.get("retrieve_then_solve", True):

                def followup(rows, every=every):
                    return la.retrieve_then_solve_requests(
                        every, [r for r in rows if r["condition"]["mode"] == "recite"]
                    )

            name = (
                f"{mode} {'/'.join(arm['subtasks'])} {'/'.join(arm['kinds'])} {placement} {length}"
            )
            (headline if arm.get("headline") else rest).append(
                Block(name, EXPERIMENT, reqs, bool(arm.get("headline")), followup)
            )
    return headline + rest + ruler_blocks(params, count_tokens, shared_as)


def ruler_questions(params: dict) -> dict:
    """{subtask: (RULER set, the seeded questions asked)} for the ``ruler`` parameters."""
    cfg = params["ruler"]
    return {
        s: (ruler, rq.sample(ruler, cfg["num_questions"], seed=params["seed"]))
        for s in cfg["subtasks"]
        for ruler in [rq.load(s)]
    }


_SIZED: dict[tuple, dict[int, list]] = {}  # RULER requests by length, per tokenizer pipeline


def ruler_blocks(params: dict, count_tokens=None, shared_as: str | None = None) -> list[Block]:
    """RULER QA blocks, shorter lengths first, contexts sized with ``count_tokens``; each
    block's followup answers from the recitations once they are stored (retrieve-then-answer,
    the paper's Figure 12). Readers whose counters share a pipeline (``shared_as``, the
    tokenizer's digest) share the sized contexts; a caller's own counter sizes its own."""
    cfg = params.get("ruler")
    if not cfg:
        return []
    if not isinstance(cfg, dict) or set(cfg) != RULER_FIELDS:
        raise ParameterError(
            f"ruler must be a mapping with exactly {sorted(RULER_FIELDS)}, got {cfg!r}"
        )
    if count_tokens is None:
        raise ParameterError(
            "RULER contexts are sized in the reader's tokens: plan them through the chapter's "
            "run (LengthAlone.plan), which counts with the reader's tokenizer"
        )

    blocks = []
    lengths = sorted(cfg["lengths"])
    for subtask, (ruler, questions) in ruler_questions(params).items():
        # Sizing contexts tokenizes them: minutes for 500 questions at 32K tokens. Every
        # length of a subtask is sized in one pass (each question's draws made once), and
        # only when a run or a count first reaches one of its blocks.
        # Readers whose tokenizers are the same pipeline (Qwen2.5's 0.5B and 1.5B) get the same
        # contexts: sized once per process for all of them.
        key = (subtask, tuple(q.id for q in questions), tuple(lengths), params["seed"], shared_as)
        built: dict[int, list] = _SIZED.setdefault(key, {}) if shared_as else {}

        def requests_at(length, ruler=ruler, questions=questions, built=built):
            if not built:
                for r in rq.make_requests(
                    ruler,
                    questions,
                    lengths=lengths,
                    count_tokens=count_tokens,
                    seed=params["seed"],
                ):
                    built.setdefault(r.condition["length"], []).append(r)
            return built.get(length, [])

        def followup(rows, questions=questions, ruler=ruler):
            recited = [r for r in rows if r["condition"]["mode"] == "recite"]
            return rq.answer_from_recitation_requests(
                questions, recited
            ) + rq.answer_from_named_documents_requests(ruler, questions, recited)

        for length in lengths:
            blocks.append(
                Block(
                    f"RULER {subtask} {length}",
                    rq.TASK,
                    LazyRequests(lambda length=length, at=requests_at: at(length)),
                    False,
                    followup,
                )
            )
    return blocks


# The stores the chapter offers for download
EXPERIMENTS = (EXPERIMENT, rq.TASK)

# Each claim -> the words naming the claims-scale blocks its rows come from (the chapter's
# claim_blocks: what `longctx reproduce --scale claims` runs for it).
CLAIM_BLOCKS = {
    "la-essay": ("between 0", "between 16000"),
    "la-whitespace": ("between 0", "between 16000"),
    "la-mask": ("between 0", "between 16000"),
    "la-before": ("between 0", "before 16000"),
    "la-ruler-qa1": ("RULER qa1",),
    "la-ruler-qa2": ("RULER qa2",),
}
