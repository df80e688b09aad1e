"""Append-only JSONL results store with resumable runs.

Each generation becomes one JSON row keyed by a hash of
(model fingerprint, task, condition, example id, prompt). A rerun skips every
key already in the file, so an interrupted run resumes where it stopped and a
book build with committed results never needs the model at all.

Rows are appended and flushed per batch, under an exclusive lock on a ``.lock`` file
beside the store, so two processes (two ``make run`` of one chapter) or the concurrent
requests of the ``openai`` backend never interleave or lose a row; a run killed mid-write
leaves at most one truncated last line, which :meth:`ResultsStore.rows` skips with a
warning.

Committed rows are kept packed: :meth:`ResultsStore.pack` (``longctx pack``) moves them into
``generations.jsonl.xz`` beside the plain file, and :meth:`ResultsStore.rows` reads the packed
rows first, then the plain ones. Rows carry their full rendered prompt, and the prompts of
one experiment share most of their text (haystacks, filler), so xz keeps a tenth of the
bytes: the repository stays small enough to travel to a lent GPU, and a GPU run's new rows
come back under the device's file limits.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import platform
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from . import __version__
from .engine import StopRule
from .errors import DataFileError


@dataclass(frozen=True)
class Request:
    """One prompt to answer, with everything needed to score and trace it."""

    task: str
    example_id: str
    prompt: str  # the task prompt, before any chat template
    gold: tuple[str, ...]
    condition: dict = field(default_factory=dict, hash=False)
    max_new_tokens: int = 64
    stop: StopRule = StopRule()
    meta: dict = field(default_factory=dict, hash=False)
    system: str | None = None  # system message; None keeps the chat template's default


def request_key(fingerprint: str, req: Request, prompt_mode: str) -> str:
    """Identity of a generation: model weights, task, condition, example, prompt, prompt
    mode and decoding settings (a changed stop rule or token budget is a new row)."""
    decoding = {"max_new_tokens": req.max_new_tokens, "stop": asdict(req.stop)}
    prompt = req.prompt if req.system is None else [req.system, req.prompt]  # keys without a system stay as before
    payload = json.dumps(
        [fingerprint, req.task, req.condition, req.example_id, prompt, prompt_mode, decoding],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResultsStore:
    """Rows for one (model, experiment) pair in ``<root>/<model slug>/<experiment>/generations.jsonl``."""

    FILENAME = "generations.jsonl"  # rows appended by runs
    PACKED = "generations.jsonl.xz"  # rows moved here by pack(); read-only otherwise
    _packed_cache: dict = {}  # packed path -> ((inode, mtime, size), lines): a driver rereads its store per chunk

    def __init__(self, root: str | os.PathLike, model_slug: str, experiment: str):
        self.dir = Path(root) / model_slug / experiment
        self.path = self.dir / self.FILENAME
        self.packed_path = self.dir / self.PACKED

    @classmethod
    def at(cls, path: str | os.PathLike) -> "ResultsStore":
        """The store that a results file (``<root>/<model>/<experiment>/generations.jsonl``,
        or its packed ``.jsonl.xz``) belongs to."""
        path = Path(path)
        if path.name not in (cls.FILENAME, cls.PACKED):
            raise DataFileError(f"{path} is not a results file "
                                f"(data/results/<model>/<experiment>/{cls.FILENAME} or {cls.PACKED})")
        return cls(path.parents[2], path.parent.parent.name, path.parent.name)

    @classmethod
    def all_under(cls, root: str | os.PathLike, experiment: str = "*") -> list["ResultsStore"]:
        """Every store under ``root`` that holds rows (packed or appended) of ``experiment``
        (a glob pattern; every experiment by default), sorted by model folder, then experiment."""
        dirs = {p.parent for name in (cls.FILENAME, cls.PACKED) for p in Path(root).glob(f"*/{experiment}/{name}")}
        return [cls(root, d.parent.name, d.name) for d in sorted(dirs)]

    @classmethod
    def folders(cls, root: str | os.PathLike, experiment: str) -> list[str]:
        """Names of the model folders under ``root`` that hold rows of ``experiment``."""
        return [store.dir.parent.name for store in cls.all_under(root, experiment)]

    def exists(self) -> bool:
        return self.path.exists() or self.packed_path.exists()

    @property
    def files(self) -> list[Path]:
        """The files that hold this store's rows, packed first."""
        return [p for p in (self.packed_path, self.path) if p.exists()]

    @classmethod
    def for_model(cls, root: str | os.PathLike, model: str, experiment: str, backend="hf") -> "ResultsStore":
        """The store of ``model`` (any name :func:`~longctx.models.resolve_model` takes) under
        ``root``, in the folder :meth:`~longctx.models.ModelRef.results_slug` names
        (suffixed ``--<backend>`` for backends other than ``hf``)."""
        from .backends import results_folder
        from .models import resolve_model

        return cls(root, results_folder(resolve_model(model).results_slug(root), backend), experiment)

    def rows(self) -> list[dict]:
        """Every stored row: the packed rows, then the appended ones."""
        return self.packed_rows() + self.plain_rows()

    def packed_rows(self) -> list[dict]:
        if not self.packed_path.exists():
            return []
        stat = self.packed_path.stat()
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)  # pack() replaces the file: a new inode
        cached = self._packed_cache.get(self.packed_path)
        if cached is None or cached[0] != stamp:  # decompress once; parse per call, so callers own their rows
            try:
                text = lzma.decompress(self.packed_path.read_bytes()).decode("utf-8")
            except (lzma.LZMAError, EOFError, UnicodeDecodeError) as e:
                raise DataFileError(f"{self.packed_path} is damaged ({e}); restore it with "
                                    f"`git checkout -- {self.packed_path}`") from None
            cached = self._packed_cache[self.packed_path] = (stamp, text.splitlines())
        try:
            return [json.loads(line) for line in cached[1] if line.strip()]
        except json.JSONDecodeError as e:
            raise DataFileError(f"{self.packed_path} holds a row that is not JSON ({e}); restore it with "
                                f"`git checkout -- {self.packed_path}`") from None

    def plain_rows(self) -> list[dict]:
        if not self.path.exists():
            return []
        out = []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                if n == len(lines):  # a run killed mid-write: drop the torn line, it will be redone
                    warnings.warn(f"{self.path}: ignoring truncated last line {n}; it will be regenerated")
                    continue
                raise DataFileError(f"{self.path}, line {n}: not valid JSON; fix or delete that line") from None
        return out

    def keys(self) -> set[str]:
        return {r["key"] for r in self.rows()}

    def pack(self) -> int:
        """Move the appended rows into the packed file (a row whose key is packed already is
        dropped) and delete the plain file; returns how many rows were moved. The packed
        file is rewritten whole and atomically, with a fixed xz preset, so packing the same
        rows gives the same bytes."""
        with self.lock():
            plain = self.plain_rows()
            if not plain:
                if self.path.exists():
                    self.path.unlink()
                return 0
            rows = self.packed_rows()
            seen = {r["key"] for r in rows}
            moved = 0
            for r in plain:
                if r["key"] not in seen:
                    seen.add(r["key"])
                    rows.append(r)
                    moved += 1
            text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
            tmp = self.packed_path.with_name(self.PACKED + ".tmp")
            tmp.write_bytes(lzma.compress(text.encode("utf-8"), preset=6))
            os.replace(tmp, self.packed_path)
            self.path.unlink()
        return moved

    def merge(self, source: str | os.PathLike) -> int:
        """Append the rows of another generations file (plain or ``.xz``, such as a flat copy
        a GPU run sent back) whose keys this store lacks; returns how many were added."""
        source = Path(source)
        data = source.read_bytes()
        try:
            text = (lzma.decompress(data) if source.suffix == ".xz" else data).decode("utf-8")
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except (lzma.LZMAError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DataFileError(f"{source} is not a generations file ({e}); copy it again") from None
        if any(not isinstance(r, dict) or "key" not in r for r in rows):
            raise DataFileError(f"{source} holds rows without a store key: not a generations file")
        have = self.keys()
        new = [r for r in rows if r["key"] not in have and not have.add(r["key"])]
        self.append(new)
        return len(new)

    def append(self, rows: Iterable[dict]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
        if not text:
            return
        with self.lock():
            self._drop_torn_tail()
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())

    def lock(self):
        """An exclusive inter-process lock on this store (a ``.lock`` file beside it)."""
        from filelock import FileLock

        self.dir.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.path) + ".lock")

    def _drop_torn_tail(self) -> None:
        """Cut a partial last line left by a killed run, so the next row starts on a clean line."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":  # the usual case: one byte read, not the whole store per batch
                return
            f.seek(0)
            f.truncate(f.read().rfind(b"\n") + 1)


def request_identity(task: str, condition: dict, example_id: str) -> tuple:
    """Which request a row answers, whatever model or backend wrote it (rows of different
    models or backends have different store keys but the same identity)."""
    return task, json.dumps(condition, sort_keys=True), example_id


def dedupe_key(r: Request) -> tuple:
    """Two requests with this key are the same prompt asked twice."""
    return (*request_identity(r.task, r.condition, r.example_id), r.system, r.prompt)


def unique_requests(requests: Sequence[Request]) -> list[Request]:
    """Drop repeated requests (two experiments asking for the same prompt and condition),
    keeping the first; :func:`run_requests` refuses duplicates."""
    seen, out = set(), []
    for r in requests:
        key = dedupe_key(r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def make_row(key: str, req: Request, gen, *, model: str, fingerprint: str, prompt_mode: str,
             rendered_prompt: str, params: dict, backend: str = "hf") -> dict:
    """One stored generation with its provenance. ``backend`` is the backend's identity
    (``hf``, ``llamacpp``, ``openai:<served model>``); rows stored before backends existed
    have none and came from ``hf``."""
    return {
        "key": key,
        "model": model,
        "model_fingerprint": fingerprint,
        "backend": backend,
        "prompt_mode": prompt_mode,
        "task": req.task,
        "condition": req.condition,
        "example_id": req.example_id,
        "gold": list(req.gold),
        "prompt": rendered_prompt,
        "output": gen.text,
        "raw_output": gen.raw_text,
        "prompt_tokens": gen.prompt_tokens,
        "new_tokens": gen.new_tokens,
        "stopped_by_rule": gen.stopped,
        "stop_reason": gen.stop_reason,
        "batch_seconds": round(gen.batch_seconds, 4),
        "batch_size": gen.batch_size,
        "seconds_per_prompt": round(gen.batch_seconds / gen.batch_size, 4),
        "params": {**params, "max_new_tokens": req.max_new_tokens, "stop": asdict(req.stop)},
        "meta": req.meta,
        **({"engine": gen.extra} if gen.extra else {}),
        "longctx_version": __version__,
        "host": platform.node(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def run_requests(
    requests: Sequence[Request],
    store: ResultsStore,
    *,
    model: str,
    load=None,
    lm=None,
    prompt_mode: str = "auto",
    batch_size: int = 8,
    progress: bool = True,
    params: dict | None = None,
    backend="hf",
) -> list[dict]:
    """Answer every request, reusing rows already in ``store``; return one row per request.

    The model is loaded (via ``load()``, which returns a backend of
    :mod:`longctx.backends`) only if some request is missing, so a notebook whose results
    are committed runs without the model's weights. ``backend`` (a name or
    :class:`~longctx.backends.BackendSpec`) enters the store key of non-``hf`` rows; a
    request the backend cannot serve (masked padding outside ``hf``) fails before loading.
    """
    from .backends import fingerprint, identity, prompts_need, require, spec
    from .models import resolve_model

    chosen = spec(backend)
    ref = resolve_model(model)
    fp = fingerprint(ref.fingerprint, chosen, model)
    keys = [request_key(fp, r, prompt_mode) for r in requests]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate requests: two requests share task, condition, example id and prompt")
    existing = {r["key"]: r for r in store.rows()}
    missing = [i for i, k in enumerate(keys) if k not in existing]
    if missing:
        for need in prompts_need(requests[i].prompt for i in missing):
            require(chosen, need)
        if lm is None:
            lm = load()
        if getattr(lm, "backend", "hf") != chosen.name:
            raise ValueError(f"load() gave a {getattr(lm, 'backend', 'hf')!r} backend for backend={chosen.name!r}")
        # Group by generation settings, since one batch shares max_new_tokens.
        groups: dict[int, list[int]] = {}
        for i in missing:
            groups.setdefault(requests[i].max_new_tokens, []).append(i)
        run_params = {"batch_size": batch_size, **lm.run_params(), **(params or {})}
        for max_new, idxs in groups.items():
            rendered = [lm.render(requests[i].prompt, system=requests[i].system) for i in idxs]

            def persist(batch, gens, idxs=idxs, rendered=rendered):
                rows = [
                    make_row(keys[idxs[b]], requests[idxs[b]], g, model=model, fingerprint=ref.fingerprint,
                             prompt_mode=prompt_mode, rendered_prompt=rendered[b], params=run_params,
                             backend=identity(chosen, model) or "hf")
                    for b, g in zip(batch, gens)
                ]
                store.append(rows)
                existing.update({r["key"]: r for r in rows})

            lm.generate(
                rendered, max_new_tokens=max_new, stop_rules=[requests[i].stop for i in idxs],
                batch_size=batch_size, progress=progress, on_batch=persist,
                desc=f"{model} ({len(idxs)} new prompts)",
            )
    return [existing[k] for k in keys]
