"""Context-length-alone chapter (Du et al.): filler between or before the evidence,
recitation, retrieve-then-solve.

The grid is a list of *arms*, each a set of subtasks solved (or recited) with some filler
kinds at some lengths and one placement, so a chapter can run the expensive long fillers
only where they answer a question (e.g. before-vs-between for GSM8K alone). Arms marked
``headline`` run first; within an arm, shorter lengths run first, so a deadline leaves
whole curves. Length 0 is the short problem, shared by every arm that names it. An arm may
take only the first ``num_problems`` of the seeded problems (the list is prefix-stable, so
its rows are the same rows a larger run makes): long fillers on CPU need a smaller n.

Optional ``ruler`` (Table 5): ``{"subtasks": ["qa1", "qa2"], "lengths": [...],
"num_questions": n}`` adds RULER QA1/QA2 blocks, the baseline answer and the recitation
prompt per question and length, then two second steps: the answer from the recited
documents (the paper's), and from the documents the recitation names (ours). RULER sizes
contexts in the reader's tokens, so the plan then needs the reader (``params["model"]``).
"""

from __future__ import annotations

import json

from ..errors import ParameterError
from ..tasks import length_alone as la
from . import Block, LazyRequests

NOTEBOOK = "notebooks/length_alone.py"
EXPERIMENT = la.TASK
ARM_FIELDS = {"subtasks", "mode", "placement", "kinds", "lengths", "headline", "num_problems"}
RULER_FIELDS = {"subtasks", "lengths", "num_questions"}
NEEDS_MODEL = True  # only the optional RULER blocks use it (contexts sized in the reader's tokens)


def problems_for(params: dict) -> dict[str, list[la.Problem]]:
    """Every subtask any arm names, ``num_problems`` seeded problems each (prefix-stable)."""
    names = list(dict.fromkeys(s for arm in params["arms"] for s in arm["subtasks"]))
    return {s: la.load_problems(s, params["num_problems"], seed=params["seed"]) for s in names}


def plan(params: dict) -> list[Block]:
    problems = problems_for(params)
    every = [p for ps in problems.values() for p in ps]
    seen: set[str] = set()
    headline, rest = [], []
    for k, arm in enumerate(params["arms"]):
        unknown = set(arm) - ARM_FIELDS
        if unknown or not {"subtasks", "kinds", "lengths"} <= set(arm):
            raise ParameterError(f"arm {k}: needs subtasks, kinds, lengths (optional mode, placement, headline, "
                                 f"num_problems); unknown fields {sorted(unknown)}")
        limit = arm.get("num_problems", params["num_problems"])
        if not isinstance(limit, int) or not 1 <= limit <= params["num_problems"]:
            raise ParameterError(f"arm {k}: num_problems must be an integer in 1..{params['num_problems']}, got {limit!r}")
        mode, placement = arm.get("mode", "solve"), arm.get("placement", "between")
        for length in sorted(arm["lengths"]):
            reqs = []
            for subtask in arm["subtasks"]:
                for r in la.make_requests(problems[subtask][:limit], filler_kinds=arm["kinds"], lengths=[length],
                                          placements=(placement,), mode=mode):
                    key = r.example_id + json.dumps(r.condition, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        reqs.append(r)
            if not reqs:
                continue
            followup = None
            if mode == "recite" and params.get("retrieve_then_solve", True):
                def followup(rows, every=every):
                    return la.retrieve_then_solve_requests(every, [r for r in rows if r["condition"]["mode"] == "recite"])
            name = f"{mode} {'/'.join(arm['subtasks'])} {'/'.join(arm['kinds'])} {placement} {length}"
            (headline if arm.get("headline") else rest).append(
                Block(name, EXPERIMENT, reqs, bool(arm.get("headline")), followup))
    return headline + rest + ruler_blocks(params)


def ruler_questions(params: dict) -> dict:
    """{subtask: (RULER set, the seeded questions asked)} for the ``ruler`` parameters."""
    from ..tasks import ruler_qa as rq

    cfg = params["ruler"]
    return {s: (ruler, rq.sample(ruler, cfg["num_questions"], seed=params["seed"]))
            for s in cfg["subtasks"] for ruler in [rq.load(s)]}


def ruler_blocks(params: dict, count_tokens=None) -> list[Block]:
    """RULER QA blocks, shorter lengths first; each block's followup answers from the
    recitations once they are stored (retrieve-then-answer, the paper's Figure 12)."""
    from ..tasks import ruler_qa as rq

    cfg = params.get("ruler")
    if not cfg:
        return []
    if not isinstance(cfg, dict) or set(cfg) != RULER_FIELDS:
        raise ParameterError(f"ruler must be a mapping with exactly {sorted(RULER_FIELDS)}, got {cfg!r}")
    if count_tokens is None:
        if not params.get("model"):
            raise ParameterError("RULER contexts are sized in the reader's tokens: pass the reader as "
                                 "params['model'] (longctx reproduce --model does)")
        from ..models import load_tokenizer

        tokenizer = load_tokenizer(params["model"])

        def count_tokens(text):
            return len(tokenizer(text, add_special_tokens=False).input_ids)

    blocks = []
    lengths = sorted(cfg["lengths"])
    for subtask, (ruler, questions) in ruler_questions(params).items():
        # Sizing contexts tokenizes them: minutes for 500 questions at 32K tokens. Every
        # length of a subtask is sized in one pass (each question's draws made once), and
        # only when a run or a count first reaches one of its blocks.
        built: dict[int, list] = {}

        def requests_at(length, ruler=ruler, questions=questions, built=built):
            if not built:
                for r in rq.make_requests(ruler, questions, lengths=lengths, count_tokens=count_tokens,
                                          seed=params["seed"]):
                    built.setdefault(r.condition["length"], []).append(r)
            return built.get(length, [])

        def followup(rows, questions=questions, ruler=ruler):
            recited = [r for r in rows if r["condition"]["mode"] == "recite"]
            return (rq.answer_from_recitation_requests(questions, recited)
                    + rq.answer_from_named_documents_requests(ruler, questions, recited))

        for length in lengths:
            blocks.append(Block(f"RULER {subtask} {length}", rq.TASK,
                                LazyRequests(lambda length=length, at=requests_at: at(length)), False, followup))
    return blocks
