"""A task, the template: copy it to ``lib/longctx/tasks/newchapter.py`` and its prompt,
``task.prompt``, to ``lib/longctx/prompts/newchapter.prompt``, then replace ``newchapter``
with your task's name everywhere.

As written it is pass-key retrieval (Mohtashami & Jaggi, 2023, "Landmark Attention"): a
five-digit key hidden at a relative depth of repeated filler sentences, then asked back. A
task module is found, not listed (:func:`longctx.tasks.tasks` reads ``TASK``); it turns
seeded examples into :class:`~longctx.requests.Request`\\ s whose prompt comes from a data
file and whose ``condition`` names the cell, and scores a stored row with ``score(row)``
by the paper's own metric (test it on hand-worked cases: ``task_tests.py``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from longctx.prompts import load_prompt
from longctx.requests import Request, StopRule

TASK = "newchapter"
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
KEY_DIGITS = 5


@dataclass(frozen=True)
class PassKeyExample:
    """One key to hide, under a stable id."""

    example_id: str
    key: str


def examples(n: int, seed: int = 0) -> list[PassKeyExample]:
    """``n`` seeded keys; the first ``n`` of a larger run are the same (prefix-stable)."""
    rng = random.Random(f"{TASK}:{seed}")
    keys = [str(rng.randrange(10 ** (KEY_DIGITS - 1), 10**KEY_DIGITS)) for _ in range(n)]
    return [PassKeyExample(f"{TASK}-{seed}-{i}", key) for i, key in enumerate(keys)]


def haystack(key: str, fillers: int, depth: float) -> str:
    """``fillers`` filler sentences with the key's line at ``depth`` (0 first, 1 last)."""
    lines = [FILLER] * fillers
    lines.insert(
        round(depth * fillers), f"The pass key is {key}. Remember it. {key} is the pass key."
    )
    return " ".join(lines)


def make_requests(
    examples: list[PassKeyExample], fillers: int, depths: list[float]
) -> list[Request]:
    """One request per (example, depth); the answer ends at the first five-digit number."""
    template = load_prompt(TASK)
    return [
        Request(
            task=TASK,
            example_id=ex.example_id,
            prompt=template.format(context=haystack(ex.key, fillers, depth)),
            gold=(ex.key,),
            condition={"fillers": fillers, "depth": depth},
            max_new_tokens=16,
            stop=StopRule(newline=True, answer_pattern=rf"\d{{{KEY_DIGITS}}}"),
        )
        for ex in examples
        for depth in depths
    ]


def score(row: dict) -> float:
    """1.0 when the output holds the key, else 0.0 (the paper's pass-key accuracy)."""
    return float(row["gold"][0] in row["output"])
