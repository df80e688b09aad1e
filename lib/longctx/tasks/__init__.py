"""Tasks: one module per task, found by the registry (not listed by hand).

A task module turns data into examples, examples into :class:`~longctx.requests.Request`\\ s
and stored rows into scores. It names the tasks its requests carry in ``TASK`` (and, when
it makes requests of more than one task, in ``TASKS``), scores a row with ``score(row)``,
and, when its examples go through :mod:`longctx.transforms`, offers ``to_example(...)`` and
``render(example)``.
"""

from __future__ import annotations

import pkgutil
from functools import cache
from importlib import import_module
from types import ModuleType

from ..errors import ParameterError
from ..requests import Request
from ..transforms import Example


@cache
def tasks() -> dict[str, ModuleType]:
    """Task name -> the module that makes its requests, for every module of this package."""
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        module = import_module(f"{__name__}.{info.name}")
        for name in getattr(module, "TASKS", (getattr(module, "TASK", None),)):
            if name:
                found[name] = module
    return found


def get_task(name: str) -> ModuleType:
    known = tasks()
    if name not in known:
        raise ParameterError(f"unknown task '{name}'; known: {', '.join(sorted(known))}")
    return known[name]


def row_score(row: dict) -> float | None:
    """The row's score by its task's own ``score`` (EM where a task scores several metrics),
    or None where the row alone cannot be scored (a HumanEval program needs its tests) or
    its task scores nothing (an LLM tagger's answers)."""
    scorer = getattr(get_task(row["task"]), "score", None)
    try:
        score = scorer(row) if scorer else None
    except ParameterError:
        return None
    if score is None:
        return None
    return score.get("EM", next(iter(score.values()))) if isinstance(score, dict) else score


def render(example: Example) -> Request:
    """The request for ``example``, built by its task's own ``render``."""
    module = get_task(example.task)
    if not callable(getattr(module, "render", None)):
        raise ParameterError(f"task '{example.task}' has no renderer for transformed examples")
    return module.render(example)
