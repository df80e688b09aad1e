"""Inference backends behind one interface, one module per backend (as ``lm_eval/models/``).

=============  ==========================================================  =====================
backend        what runs the model                                          can also
=============  ==========================================================  =====================
``hf``         transformers weights in torch (:mod:`.hf`, :mod:`.hf_engine`)  masked padding,
                                                                            attention weights
``llamacpp``   llama.cpp in process (llama-cpp-python) on a ``.gguf`` file  (generation only)
``openai``     any OpenAI-compatible server (vLLM, SGLang, llama.cpp):      (generation only)
               ``/v1/completions`` with the fully templated prompt
=============  ==========================================================  =====================

Every backend satisfies :class:`~.base.Backend`: ``render(prompt, system)`` (the chat
template, from the model's own tokenizer, so prompts are byte-identical across backends),
``generate(rendered_prompts, max_new_tokens=, stop_rules=, batch_size=, progress=, desc=,
on_batch=)`` returning :class:`longctx.requests.Generation` objects, and ``run_params()``
(the provenance stored with each row). A new backend is one module here that registers its
class with :func:`~.base.register`: every module of this package is imported below, so it
is found without a list to edit.

Rows from different backends never mix: the store key of a non-``hf`` row carries the
backend's identity (:meth:`BackendSpec.identity`), and its rows live in their own results
folder (``<model>--llamacpp``, ``<model>--openai``; :func:`results_folder`). ``hf`` keys and
folders are those of every row stored before backends existed.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from importlib import import_module

from .base import (
    Backend,
    BackendSpec,
    LoadTarget,
    Target,
    backend_class,
    names,
    prompts_need,
    register,
    results_folder,
    spec,
)

# Each backend module registers its class on import (heavy packages load only when used).
for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base" and not _module.name.startswith("_"):
        import_module(f"{__name__}.{_module.name}")


def load_backend(
    model: str,
    backend: str | BackendSpec = "hf",
    *,
    device: str = "auto",
    dtype: str = "auto",
    prompt_mode: str = "auto",
    max_context: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Backend:
    """Load ``model`` on ``backend``. ``device`` and ``dtype`` concern ``hf`` only."""
    chosen = spec(backend)
    target = Target(model, chosen, prompt_mode=prompt_mode, device=device, dtype=dtype)
    return backend_class(chosen.name).load(target, max_context=max_context, progress=progress)


__all__ = [
    "Backend",
    "BackendSpec",
    "backend_class",
    "LoadTarget",
    "Target",
    "load_backend",
    "names",
    "prompts_need",
    "register",
    "results_folder",
    "spec",
]
