"""Complete stored rows for tests: what the runner stores, with the fields a test cares about
replaced, so a store (which checks every row it is given) accepts them."""

from __future__ import annotations

import json

from longctx.requests import Generation, Request
from longctx.runner import make_row


def stored_row(
    key: str,
    *,
    task: str = "t",
    example_id: str = "e0",
    prompt: str = "prompt",
    gold=("x",),
    condition: dict | None = None,
    output: str = "out",
    model: str = "m",
    fingerprint: str = "fp",
    backend: str = "hf",
    **fields,
) -> dict:
    """A generation row as :func:`longctx.runner.make_row` builds it; ``fields`` replace any
    of its fields (``params``, ``prompt_tokens``, ``meta``, ...) or add to it. JSON types
    throughout (lists, not tuples), as the row reads back from its store."""
    request = Request(task, example_id, prompt, tuple(gold), dict(condition or {}))
    row = _generation_row(key, request, output, model, fingerprint, "auto", backend)
    return json.loads(json.dumps({**row, **fields}))


def answered_row(key: str, request: Request, *, reader, output: str = "out") -> dict:
    """The row ``reader`` stores for ``request`` under ``key`` with ``output`` as its answer,
    no model run (every field its key is made of kept, so the store's checks hold)."""
    row = _generation_row(
        key, request, output, reader.model, reader.fingerprint, reader.prompt_mode, "hf"
    )
    return json.loads(json.dumps(row))


def _generation_row(
    key: str,
    request: Request,
    output: str,
    model: str,
    fingerprint: str,
    prompt_mode: str,
    backend: str,
) -> dict:
    """:func:`longctx.runner.make_row`'s row for ``request`` answered with ``output``."""
    generation = Generation(output, output, 3, 2, True, 0.5, 1)
    return make_row(
        key,
        request,
        generation,
        model=model,
        fingerprint=fingerprint,
        prompt_mode=prompt_mode,
        rendered_prompt=request.prompt,
        params={},
        backend=backend,
    )


def attention_row(key: str, *, prompt: str = "prompt", model: str = "m", **fields) -> dict:
    """An attention row as :func:`longctx.attention.attention_rows` stores it; ``fields``
    (the item's own, ``abs``, ``tokens``, ...) replace or add to its fields."""
    row = {
        "key": key,
        "model": model,
        "model_fingerprint": "fp",
        "prompt_mode": "auto",
        "layer": -1,
        "prompt": prompt,
        "tokens": 9,
        "abs": 0.5,
        "seconds": 0.1,
        "device": "cpu",
        "longctx_version": "test",
    }
    return {**row, **fields}
