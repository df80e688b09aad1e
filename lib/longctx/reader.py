"""A reader: one model on one backend, prompted one way. It is what a chapter is run with,
and what names its rows.

Everything a run needs to know about its model is here, computed once: the resolved weights
(:attr:`Reader.ref`), the fingerprint that enters every store key (:attr:`Reader.fingerprint`),
the results folder its rows live in (:meth:`Reader.results_folder`), the label tables and
figures give it (:attr:`Reader.label`), and the loaded backend (:meth:`Reader.load`, cached,
so a notebook or a driver loads a model once however many runs it makes).

    >>> reader = Reader.of("qwen2.5-coder-0.5b-instruct", "llamacpp")      # doctest: +SKIP
    >>> reader.results_folder("data/results")                              # doctest: +SKIP
    'qwen2.5-coder-0.5b-instruct--llamacpp'

A bad model name, backend, URL or prompt mode fails when the reader is made, before any
work; so does a capability the backend lacks (:meth:`Reader.require`).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .backends import Backend, BackendSpec, backend_class, results_folder, spec
from .backends.base import check_prompt_mode
from .errors import ParameterError
from .models import DEFAULT_MODEL, ModelRef, resolve_model
from .requests import key_fingerprint
from .store import ResultsStore, model_folder

# Loaded backends kept at once (a chapter's reader and its tagger or second reader)
LOADED_READERS = 2

# What a reader takes beside its backend's own options (see :meth:`Reader.of`).
READER_WORDS = ("backend", "prompt_mode", "device", "dtype")


@dataclass(frozen=True)
class Reader:
    model: str = DEFAULT_MODEL
    backend: BackendSpec = field(default_factory=BackendSpec)
    prompt_mode: str = "auto"
    device: str = "auto"  # hf only: auto, cpu or cuda[:N]
    dtype: str = "auto"  # hf only: auto, bfloat16, float16 or float32

    _ref: ModelRef = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.backend, BackendSpec):
            object.__setattr__(self, "backend", spec(self.backend))
        check_prompt_mode(self.prompt_mode)
        # Resolved now: an unknown model fails here, not after minutes of planning.
        object.__setattr__(self, "_ref", resolve_model(self.model))

    @classmethod
    def of(
        cls,
        model: str = DEFAULT_MODEL,
        backend: str | BackendSpec | None = None,
        url: str | None = None,
        *,
        prompt_mode: str = "auto",
        device: str = "auto",
        dtype: str = "auto",
        **options,
    ) -> Reader:
        """A reader from the words a notebook's ``reader_options`` or a command line use:
        the backend, how to prompt (``prompt_mode``), where and in what precision (``device``,
        ``dtype``, hf only) and any field of the backend's own ``Options`` (``url``,
        ``served_model``, ``concurrency``, ... for ``openai``). Options left None keep the
        backend's defaults; one it does not take is a one-line error naming those it does."""
        given = {name: value for name, value in options.items() if value is not None}
        chosen = spec(backend, url, also_takes=READER_WORDS, **given)
        return cls(model, chosen, prompt_mode, device, dtype)

    @classmethod
    def of_row(cls, row: dict) -> Reader:
        """The reader that wrote a stored row, for reading its rows: the model and backend
        from the row (a served model's rows name a placeholder url, since no server is
        reached to read them)."""
        backend = row_backend(row)
        options = {}
        if backend == "openai":
            identity = row.get("backend") or "hf"
            options = {"url": "http://rows-only.invalid/v1", "served_model": identity[7:]}
        return cls.of(row["model"], backend, **options)

    @classmethod
    def from_notebook(cls, namespace: dict) -> Reader:
        """The reader a notebook's globals name: ``model`` and ``reader_options``, a mapping
        of :meth:`of`'s keywords (``{}``: the model through transformers, as it suits the
        machine)."""
        options = namespace.get("reader_options") or {}
        if not isinstance(options, Mapping):
            raise ParameterError(
                f"reader_options is a mapping such as {{'backend': 'llamacpp'}}, not {options!r}"
            )
        return cls.of(namespace["model"], **options)

    @property
    def ref(self) -> ModelRef:
        """The resolved weights (:func:`~longctx.models.resolve_model`)."""
        return self._ref

    @property
    def identity(self) -> str:
        """The backend's part of the rows' identity: ``""`` for hf, ``llamacpp``,
        ``openai:<served model>``."""
        return self.backend.identity(self.model)

    @property
    def fingerprint(self) -> str:
        """The weights' fingerprint as store keys see it (:func:`key_fingerprint`)."""
        return key_fingerprint(self.ref.fingerprint, self.identity)

    @property
    def label(self) -> str:
        """How tables and figures name this reader's rows (:func:`model_label`)."""
        return model_label(self.model, self.backend.name)

    def results_folder(self, results_root: str | os.PathLike) -> str:
        """The folder under ``results_root`` that holds this reader's rows."""
        return results_folder(model_folder(self.ref, results_root), self.backend)

    def store(self, results_root: str | os.PathLike, experiment: str) -> ResultsStore:
        return ResultsStore(results_root, self.results_folder(results_root), experiment)

    def require(self, capability: str) -> None:
        """A one-line :class:`~longctx.errors.CapabilityError` if the backend cannot do ``capability``."""
        self.backend.require(capability)

    def load(self, progress: Callable[[str], None] | None = print) -> Backend:
        """The loaded backend; loaded once per reader (the last :data:`LOADED_READERS` stay)."""
        if self in _LOADED:
            _LOADED.move_to_end(self)
            return _LOADED[self]
        while len(_LOADED) >= LOADED_READERS:
            _LOADED.popitem(last=False)
        lm = backend_class(self.backend.name).load(self, progress=progress)
        _LOADED[self] = lm
        return lm


_LOADED: collections.OrderedDict[Reader, Backend] = collections.OrderedDict()


def model_label(model: str, backend: str = "hf") -> str:
    """How tables and figures name a model's rows: the model for ``hf`` rows, ``model
    (backend)`` otherwise, so two backends of one model are two lines, never one.
    ``backend`` may be a row's stored identity (``openai:<served model>``)."""
    name = backend.split(":", 1)[0]
    return model if name == "hf" else f"{model} ({name})"


def row_backend(row: dict) -> str:
    """The backend that generated a stored row (``hf`` for rows stored before backends existed)."""
    return row.get("backend", "hf").split(":", 1)[0]
