"""Task registry: one module per task, looked up by name."""

from __future__ import annotations

from importlib import import_module

from ..errors import ParameterError

TASKS = {
    "kv_retrieval": "longctx.tasks.kv_retrieval",
    "multidoc_qa": "longctx.tasks.multidoc_qa",
    "longbench_v2": "longctx.tasks.longbench_v2",
    "semantic_competition": "longctx.tasks.semantic_competition",
    "length_alone": "longctx.tasks.length_alone",
    "tag_needles": "longctx.tasks.tag_needles",
}


def get_task(name: str):
    if name not in TASKS:
        raise ParameterError(f"unknown task '{name}'; known: {', '.join(sorted(TASKS))}")
    return import_module(TASKS[name])
