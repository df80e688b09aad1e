"""Inference backends behind one interface, one module per backend (as ``lm_eval/models/``).

=============  ==========================================================  =====================
backend        what runs the model                                          can also
=============  ==========================================================  =====================
``hf``         transformers weights in torch (:mod:`longctx.engine`)        masked padding,
                                                                            attention weights
``llamacpp``   llama.cpp in process (llama-cpp-python) on a ``.gguf`` file  (generation only)
``openai``     any OpenAI-compatible server (vLLM, SGLang, llama.cpp):      (generation only)
               ``/v1/completions`` with the fully templated prompt
=============  ==========================================================  =====================

Every backend object offers the same calls: ``render(prompt, system)`` (the chat template,
from the model's own tokenizer, so prompts are byte-identical across backends),
``generate(rendered_prompts, max_new_tokens=, stop_rules=, batch_size=, progress=, desc=,
on_batch=)`` returning :class:`longctx.engine.Generation` objects, and ``run_params()`` (the
provenance stored with each row). What each can do beyond generation is :data:`CAPABILITIES`.

Rows from different backends never mix: the store key of a non-``hf`` row carries the
backend's identity (:func:`fingerprint`), and its rows live in their own results folder
(``<model>--llamacpp``, ``<model>--openai``; :func:`results_folder`). ``hf`` keys and folders
are those of every row stored before backends existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import CapabilityError, ParameterError

BACKENDS = ("hf", "llamacpp", "openai")
CAPABILITIES = {
    "hf": frozenset({"generate", "masked_padding", "attention"}),
    "llamacpp": frozenset({"generate"}),
    "openai": frozenset({"generate"}),
}
_NEEDS = {"masked_padding": "masked padding needs the model's weights in torch",
          "attention": "attention weights need the model's weights in torch"}


@dataclass(frozen=True)
class BackendSpec:
    """Which backend runs a model, and how to reach it.

    * ``url``: the server's base URL for ``openai`` (e.g. ``http://127.0.0.1:8000/v1``).
    * ``served_model``: the model id the server serves (``openai``); defaults to the model
      name. It is part of the rows' identity; the URL is not (one model answers the same
      wherever it is served).
    * ``threads``: CPU threads for ``llamacpp`` (default: every core); ``prefix_cache``: let
      ``llamacpp`` reuse the prompt prefix shared with the previous prompt (off: see
      :mod:`longctx.backends.llamacpp`).
    * ``concurrency``, ``timeout_s``, ``retries``: request handling of ``openai``.
    """

    name: str = "hf"
    url: str | None = None
    served_model: str | None = None
    threads: int | None = None
    prefix_cache: bool = False
    concurrency: int = 8
    timeout_s: float = 600.0
    retries: int = 5

    def __post_init__(self):
        if self.name not in BACKENDS:
            raise ParameterError(f"unknown backend {self.name!r}; use one of {', '.join(BACKENDS)}")
        if self.name == "openai" and not self.url:
            raise ParameterError("backend 'openai' needs the server's URL, e.g. url='http://127.0.0.1:8000/v1'")
        if self.name != "openai" and self.url:
            raise ParameterError(f"a URL is only used by backend 'openai', not {self.name!r}")
        if self.concurrency < 1 or self.retries < 0 or self.timeout_s <= 0:
            raise ParameterError("concurrency must be >= 1, retries >= 0 and timeout_s > 0")


def spec(backend: "str | BackendSpec | None" = None, url: str | None = None, **options) -> BackendSpec:
    """A :class:`BackendSpec` from a name (``hf``, ``llamacpp``, ``openai``) or a spec."""
    if isinstance(backend, BackendSpec):
        return backend
    return BackendSpec(backend or "hf", url=url or None, **options)


def identity(backend: "str | BackendSpec", model: str) -> str:
    """What distinguishes this backend's rows from ``hf`` rows of the same weights:
    ``""`` for hf, ``llamacpp``, or ``openai:<served model id>``."""
    s = spec(backend)
    if s.name == "hf":
        return ""
    if s.name == "openai":
        return f"openai:{s.served_model or model}"
    return s.name


def fingerprint(model_fingerprint: str, backend: "str | BackendSpec", model: str) -> str:
    """The weights' fingerprint as the store key sees it: unchanged for ``hf`` (so rows stored
    before backends existed are found), suffixed with the backend's identity otherwise."""
    ident = identity(backend, model)
    return f"{model_fingerprint}+{ident}" if ident else model_fingerprint


def results_folder(model_slug: str, backend: "str | BackendSpec") -> str:
    """The results folder of a model's rows from ``backend``: the model's slug for ``hf``,
    ``<slug>--<backend>`` otherwise."""
    name = backend.name if isinstance(backend, BackendSpec) else (backend or "hf")
    if name not in BACKENDS:
        raise ParameterError(f"unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
    return model_slug if name == "hf" else f"{model_slug}--{name}"


def require(backend: "str | BackendSpec", capability: str) -> None:
    """Raise a one-line :class:`CapabilityError` if ``backend`` cannot do ``capability``."""
    s = spec(backend)
    if capability not in CAPABILITIES[s.name]:
        raise CapabilityError(f"{_NEEDS.get(capability, capability)}: backend {s.name!r} cannot provide it; "
                              f"use backend='hf'")


def prompts_need(prompts) -> set[str]:
    """Capabilities that task prompts need beyond generation (masked gaps need ``hf``)."""
    from ..padding import MASKED_GAP

    return {"masked_padding"} if any(MASKED_GAP.search(p) for p in prompts) else set()


def load_backend(model: str, backend: "str | BackendSpec" = "hf", *, device: str = "auto", dtype: str = "auto",
                 prompt_mode: str = "auto", max_context: int | None = None,
                 progress: Callable[[str], None] | None = None):
    """Load ``model`` on ``backend``; the returned object has the interface in the module
    docstring. ``device`` and ``dtype`` concern ``hf`` only."""
    s = spec(backend)
    if s.name == "hf":
        from .hf import load

        return load(model, device=device, dtype=dtype, prompt_mode=prompt_mode, max_context=max_context,
                    progress=progress)
    if s.name == "llamacpp":
        from .llamacpp import LlamaCppBackend

        return LlamaCppBackend(model, s, prompt_mode=prompt_mode, max_context=max_context, progress=progress)
    from .openai import OpenAIBackend

    return OpenAIBackend(model, s, prompt_mode=prompt_mode, max_context=max_context, progress=progress)


def loader(model: str, backend: "str | BackendSpec" = "hf", **kw) -> Callable[[], object]:
    """A zero-argument function that loads ``model`` on ``backend`` (for lazy ``load=``)."""
    return lambda: load_backend(model, backend, **kw)


__all__ = ["BACKENDS", "BackendSpec", "CapabilityError", "fingerprint", "identity", "load_backend", "loader",
           "prompts_need", "require", "results_folder", "spec"]
