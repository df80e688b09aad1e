"""What every backend is: the :class:`Backend` interface, its registry, and the
:class:`BackendSpec` that says which backend runs a model and how to reach it.

A backend module defines one class that satisfies :class:`Backend`, usually by subclassing
:class:`PromptReader` (rendering, token counting and the context-window check, all with
the model's own tokenizer, so prompts are byte-identical across backends), and registers
it with :func:`register` under its name and capabilities. Everything that needs only the
name (the rows' identity, their results folder, a capability check before loading) reads
the registry, so nothing is loaded to refuse a request a backend cannot serve.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import ClassVar, Protocol

from ..errors import CapabilityError, ContextTooLongError, ParameterError
from ..models import ModelRef, resolve_model
from ..padding import MASKED_GAP
from ..requests import GenerateCall, Generation

GENERATE, MASKED_PADDING, ATTENTION = "generate", "masked_padding", "attention"
RESCALED_POSITIONS = "rescaled_positions"  # Ms-PoE: each head's positions divided by a ratio
_NEEDS = {
    MASKED_PADDING: "masked padding needs the model's weights in torch",
    ATTENTION: "attention weights need the model's weights in torch",
    RESCALED_POSITIONS: "Ms-PoE's rescaled positions need the model's weights in torch",
}


class LoadTarget(Protocol):
    """What a backend loads: the model (its name and resolved weights ``ref``), the backend
    spec it runs on, how prompts are wrapped, and for ``hf`` the device and dtype. A
    :class:`~longctx.reader.Reader` is one; :class:`Target` is one built from names."""

    model: str
    backend: BackendSpec
    prompt_mode: str
    device: str
    dtype: str

    @property
    def ref(self) -> ModelRef: ...


class Backend(Protocol):
    """The interface of a loaded backend (one model, ready to generate). ``generate`` starts
    no work after ``stop_at`` (a :func:`time.time` value: a run's deadline) and leaves None
    for the prompts it did not answer; ``on_batch`` has stored the others by then."""

    backend: ClassVar[str]  # the registry name: hf, llamacpp, openai
    capabilities: ClassVar[frozenset[str]]
    ref: ModelRef
    tokenizer: object
    chat: bool
    max_context: int

    @classmethod
    def load(
        cls,
        target: LoadTarget,
        *,
        max_context: int | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> Backend: ...

    def render(self, prompt: str, system: str | None = None) -> str: ...

    def count_tokens(self, text: str) -> int: ...

    def check_fits(
        self, n_prompt_tokens: int, max_new_tokens: int, label: str = "prompt"
    ) -> None: ...

    def generate(self, call: GenerateCall) -> list[Generation | None]: ...

    def run_params(self) -> dict: ...


_REGISTRY: dict[str, type] = {}


_INTERFACE = ("load", "render", "count_tokens", "check_fits", "generate", "run_params")
_CAPABILITIES = frozenset({GENERATE, MASKED_PADDING, ATTENTION, RESCALED_POSITIONS})


def register(name: str, capabilities: Sequence[str] = (GENERATE,)):
    """Class decorator: make a backend class loadable as ``name``. Refused at import: a name
    already taken, a class missing part of :class:`Backend`, or a capability nobody knows
    (as lm-evaluation-harness's ``register_model`` refuses them)."""

    def add(cls: type) -> type:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise TypeError(
                f"backend name {name!r} is taken by {_REGISTRY[name].__qualname__}; "
                f"register {cls.__qualname__} under another name"
            )
        missing = [m for m in _INTERFACE if not callable(getattr(cls, m, None))]
        if not is_dataclass(getattr(cls, "Options", None)):
            missing.append("Options (a dataclass of its settings)")
        if missing:
            raise TypeError(
                f"backend {cls.__qualname__} lacks {', '.join(missing)} of the Backend interface"
            )
        needs = ("final_token_attention", "token_offsets")
        if ATTENTION in capabilities and not all(callable(getattr(cls, m, None)) for m in needs):
            raise TypeError(
                f"backend {cls.__qualname__} claims {ATTENTION!r} but lacks "
                "final_token_attention(rendered, layer) or token_offsets(rendered)"
            )
        unknown = set(capabilities) - _CAPABILITIES
        if GENERATE not in capabilities or unknown:
            raise TypeError(
                f"backend {cls.__qualname__}: capabilities must include {GENERATE!r} and come "
                f"from {sorted(_CAPABILITIES)} (not {sorted(unknown)})"
            )
        cls.backend = name
        cls.capabilities = frozenset(capabilities)
        _REGISTRY[name] = cls
        return cls

    return add


def names() -> tuple[str, ...]:
    """Registered backend names, in registration order."""
    return tuple(_REGISTRY)


def backend_class(name: str) -> type:
    if name not in _REGISTRY:
        raise ParameterError(f"unknown backend {name!r}; use one of {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


@dataclass(frozen=True)
class NoOptions:
    """A backend with nothing to set beyond the model (``hf``: device and dtype belong to the
    reader)."""


@dataclass(frozen=True)
class BackendSpec:
    """Which backend runs a model (``name``) and that backend's own ``options``: an instance
    of its ``Options`` dataclass (``llamacpp``: threads and prefix reuse; ``openai``: the
    server's URL, the served model id and request handling; ``hf``: none). Build one with
    :func:`spec`, which refuses an option the backend does not take."""

    name: str = "hf"
    options: object = None

    def __post_init__(self):
        kind = backend_class(self.name).Options
        if self.options is None:
            object.__setattr__(self, "options", kind())
        elif not isinstance(self.options, kind):
            raise ParameterError(
                f"backend {self.name!r} takes {kind.__qualname__}, not {type(self.options).__name__}"
            )

    def identity(self, model: str) -> str:
        """What distinguishes this backend's rows from ``hf`` rows of the same weights:
        ``""`` for hf, ``llamacpp``, or ``openai:<served model id>``."""
        if self.name == "hf":
            return ""
        if self.name == "openai":
            return f"openai:{self.options.served_model or model}"
        return self.name

    def require(self, capability: str) -> None:
        """Raise a one-line :class:`CapabilityError` if this backend cannot do ``capability``."""
        if capability not in backend_class(self.name).capabilities:
            raise CapabilityError(
                f"{_NEEDS.get(capability, capability)}: backend {self.name!r} cannot provide it; "
                f"use backend='hf'"
            )


def spec(
    backend: str | BackendSpec | None = None,
    url: str | None = None,
    *,
    also_takes: Sequence[str] = (),
    **options,
) -> BackendSpec:
    """A :class:`BackendSpec` from a name (``hf``, ``llamacpp``, ``openai``) and that
    backend's options, or a spec as it is. An option the backend does not take is a
    one-line error naming the ones it does, and ``also_takes``: what the caller itself takes
    beside them (a reader's prompt mode, device, ...)."""
    if isinstance(backend, BackendSpec):
        return backend
    name = backend or "hf"
    kind = backend_class(name).Options
    given = {**({"url": url} if url else {}), **options}
    known = {f.name for f in fields(kind)}
    unknown = sorted(set(given) - known)
    if unknown:
        beside = f"; any reader also takes {', '.join(also_takes)}" if also_takes else ""
        raise ParameterError(
            f"backend {name!r} takes no option {', '.join(map(repr, unknown))}; its options: "
            + (", ".join(sorted(known)) or "none")
            + beside
        )
    return BackendSpec(name, kind(**given))


def results_folder(model_slug: str, backend: str | BackendSpec) -> str:
    """The results folder of a model's rows from ``backend``: the model's slug for ``hf``,
    ``<slug>--<backend>`` otherwise."""
    name = backend.name if isinstance(backend, BackendSpec) else (backend or "hf")
    backend_class(name)
    return model_slug if name == "hf" else f"{model_slug}--{name}"


def prompts_need(prompts) -> set[str]:
    """Capabilities that task prompts need beyond generation (masked gaps need ``hf``)."""
    return {MASKED_PADDING} if any(MASKED_GAP.search(p) for p in prompts) else set()


class PromptReader:
    """What every backend shares: rendering a task prompt for the model (chat template or raw
    text), counting tokens and checking the context window, all with the model's own
    tokenizer. Subclasses set ``ref``, ``tokenizer``, ``chat`` and ``max_context``."""

    ref: ModelRef
    tokenizer: object
    chat: bool
    max_context: int
    backend: ClassVar[str] = "hf"
    window_cap: ClassVar[int | None] = None  # a backend that allocates its window caps it
    Options: ClassVar[type] = NoOptions

    @classmethod
    def without_weights(
        cls, ref: ModelRef, tokenizer, prompt_mode: str, max_context: int
    ) -> PromptReader:
        """Rendering and the window check alone, from the tokenizer: enough to refuse a
        prompt that cannot fit before any weights load."""
        reader = PromptReader()
        reader.ref, reader.tokenizer, reader.max_context = ref, tokenizer, max_context
        reader.chat = chat_mode(tokenizer, ref, prompt_mode, ref.name)
        return reader

    @classmethod
    def load(
        cls,
        target: LoadTarget,
        *,
        max_context: int | None = None,
        progress: Callable[[str], None] | None = None,
    ):
        """A backend whose model runs outside torch (``llamacpp``, ``openai``): the target's
        ``device`` and ``dtype`` are the ``hf`` backend's; the model runs as its file or its
        server has it."""
        return cls(target, max_context=max_context, progress=progress)

    @property
    def name(self) -> str:
        return self.ref.name

    def render(self, prompt: str, system: str | None = None) -> str:
        """Wrap a task prompt for this model: chat template when aligned, the raw text otherwise.

        ``system`` becomes the system message (raw mode: a paragraph before the prompt);
        ``None`` keeps the template's own default."""
        if not self.chat:
            return prompt if system is None else f"{system}\n\n{prompt}"
        messages = [{"role": "user", "content": prompt}]
        if system is not None:
            messages.insert(0, {"role": "system", "content": system})
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def check_fits(self, n_prompt_tokens: int, max_new_tokens: int, label: str = "prompt") -> None:
        if n_prompt_tokens + max_new_tokens > self.max_context:
            raise ContextTooLongError(
                f"{label} has {n_prompt_tokens} tokens + {max_new_tokens} new tokens, over the "
                f"{self.max_context}-token window of {self.name}; use fewer items or a longer-context model"
            )


PROMPT_MODES = ("auto", "chat", "raw")


def check_prompt_mode(prompt_mode: str) -> str:
    if prompt_mode not in PROMPT_MODES:
        raise ParameterError(f"prompt_mode must be auto, chat or raw, got {prompt_mode!r}")
    return prompt_mode


def chat_mode(tokenizer, ref: ModelRef, prompt_mode: str, name: str) -> bool:
    """Whether prompts go through the chat template: ``chat`` wraps prompts in the tokenizer's
    chat template (aligned models), ``raw`` feeds them as plain completion text (base models),
    ``auto`` uses chat when the tokenizer has a template and the model is not known to be a
    base model."""
    check_prompt_mode(prompt_mode)
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if prompt_mode == "chat" and not has_template:
        raise ParameterError(
            f"prompt_mode='chat' but {name} has no chat template; use prompt_mode='raw'"
        )
    chat = has_template if prompt_mode == "auto" else prompt_mode == "chat"
    if ref.chat_default is False and prompt_mode == "auto":
        chat = False
    return chat


@dataclass(frozen=True)
class Target:
    """A :class:`LoadTarget` from names (what :func:`longctx.backends.load_backend` loads):
    the model resolved once, here."""

    model: str
    backend: BackendSpec
    prompt_mode: str = "auto"
    device: str = "auto"
    dtype: str = "auto"

    @property
    def ref(self) -> ModelRef:
        return resolve_model(self.model)
