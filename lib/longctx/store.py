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

import errno
import hashlib
import json
import lzma
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from .data import sha256_file
from .errors import DataFileError, warn_line
from .jsonl import LongLine, NotUtf8Line, dumps_lines, iter_lines, split_lines
from .row_schema import row_fault


class ResultsStore:
    """Rows for one (model, experiment) pair in ``<root>/<model slug>/<experiment>/generations.jsonl``."""

    FILENAME = "generations.jsonl"  # rows appended by runs
    PACKED = "generations.jsonl.xz"  # rows moved here by pack(); read-only otherwise
    # A run rereads its stores before every chunk and batch: decompress and parse once.
    _packed_cache: dict = {}  # packed path -> ((inode, mtime, size), lines)
    _keys_cache: dict = {}  # packed path -> (stamp, keys); plain path -> (file's identity, offset read, keys)

    def __init__(self, root: str | os.PathLike, model_slug: str, experiment: str):
        # Both are folder names under root, never a path that leaves it.
        folder_name(model_slug, "model folder")
        folder_name(experiment, "experiment")
        self.dir = Path(root) / model_slug / experiment
        self.path = self.dir / self.FILENAME
        self.packed_path = self.dir / self.PACKED

    @classmethod
    def at(cls, path: str | os.PathLike) -> ResultsStore:
        """The store that a results file (``<root>/<model>/<experiment>/generations.jsonl``,
        or its packed ``.jsonl.xz``) belongs to."""
        path = Path(path).absolute()  # a short relative path has too few parents of its own
        if path.name not in (cls.FILENAME, cls.PACKED) or len(path.parents) < 3:
            raise DataFileError(
                f"{path} is not a results file "
                f"(data/results/<model>/<experiment>/{cls.FILENAME} or {cls.PACKED})"
            )
        return cls(path.parents[2], path.parent.parent.name, path.parent.name)

    @classmethod
    def all_under(
        cls, root: str | os.PathLike, experiment: str = "*", folder: str = "*"
    ) -> list[ResultsStore]:
        """Every store under ``root`` that holds rows (packed or appended) of ``experiment``
        in a model folder named ``folder`` (glob patterns; every one by default), sorted by
        model folder, then experiment."""
        dirs = {
            p.parent
            for name in (cls.FILENAME, cls.PACKED)
            for p in Path(root).glob(f"{folder}/{experiment}/{name}")
        }
        out = []
        for d in sorted(dirs):
            try:
                out.append(cls(root, d.parent.name, d.name))
            except DataFileError as err:  # one odd folder name does not hide every other store
                warn_line(f"skipping {d}: {err}")
        return out

    @classmethod
    def folders(cls, root: str | os.PathLike, experiment: str) -> list[str]:
        """Names of the model folders under ``root`` that hold rows of ``experiment``."""
        return [store.dir.parent.name for store in cls.all_under(root, experiment)]

    def _note_read(self) -> None:
        for log in _read_logs:
            log.update((self.packed_path, self.path))

    def exists(self) -> bool:
        return self.path.exists() or self.packed_path.exists()

    def holds_rows(self) -> bool:
        """Whether a file of this store exists (noted as a read: a cache keyed on what was
        read sees the first rows arrive)."""
        self._note_read()
        return self.exists()

    @property
    def files(self) -> list[Path]:
        """The files that hold this store's rows, packed first."""
        return [p for p in (self.packed_path, self.path) if p.exists()]

    def rows(self) -> list[dict]:
        """Every stored row, each key once: the packed rows, then the appended ones not packed.

        The appended file is read before the packed one: :meth:`pack` writes the packed file
        before it deletes the appended one, so a read that races a pack sees every row (some
        twice, and the second copy is dropped) instead of losing the rows being moved. Two runs
        of one chapter at once can append one key twice; it is returned once."""
        plain_lines = self._plain_lines()
        out = self.packed_rows()
        plain = self._parse(plain_lines, self.path, _FIX_LINE, _reader(out[0]) if out else None)
        seen = {r["key"] for r in out}
        out += [r for r in plain if r["key"] not in seen and not seen.add(r["key"])]
        return out

    def packed_rows(self) -> list[dict]:
        self._note_read()  # rows() and plain_rows() read through here too
        try:
            stat = self.packed_path.stat()
        except FileNotFoundError:
            return []
        # pack() replaces the file: a new inode
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        cached = self._packed_cache.get(self.packed_path)
        if cached is None or cached[0] != stamp:
            # decompress once; parse per call, so callers own their rows
            try:
                lines = split_lines(lzma.decompress(self.packed_path.read_bytes()))
            except (lzma.LZMAError, EOFError, NotUtf8Line) as e:
                raise DataFileError(
                    f"{self.packed_path} is damaged ({e}); restore it with "
                    f"`git checkout -- {self.packed_path}`"
                ) from None
            cached = self._packed_cache[self.packed_path] = (stamp, lines)
        restore = f"restore it with `git checkout -- {self.packed_path}`"
        return self._parse(cached[1], self.packed_path, restore, None)

    def plain_rows(self) -> list[dict]:
        """The appended rows (checked against the packed rows' reader)."""
        self._note_read()
        lines = self._plain_lines()
        packed = self.packed_rows() if lines else []
        return self._parse(lines, self.path, _FIX_LINE, _reader(packed[0]) if packed else None)

    def _plain_lines(self) -> list[str]:
        """The appended file's lines, split at ``\\n`` before decoding: a run killed mid-write
        can cut the last line inside a multibyte character, and only that unfinished line may
        be lost (it then fails to parse and :meth:`_parse` skips it as torn)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:  # never written, or packed and deleted a moment ago
            return []
        except IsADirectoryError:
            raise self._a_folder() from None
        try:
            return split_lines(data, torn_tail=True)
        except NotUtf8Line as err:
            raise DataFileError(
                f"{self.path}, line {err.n}: not valid UTF-8; {_FIX_LINE}"
            ) from None

    def _parse(
        self,
        lines: list[str],
        path: Path,
        fix: str,
        reference: tuple[str, str] | None,
        first_line: int = 1,
    ) -> list[dict]:
        """Rows of one file (its lines from ``first_line`` on), each a JSON object with a
        ``key``, all of one reader (weights and backend: a store holds one model's rows); a
        torn last line of the appended file (a run killed mid-write) is skipped with a warning."""
        out = []
        for n, line in enumerate(lines, first_line):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError):  # nested past the parser's depth
                if path == self.path and n == len(lines) + first_line - 1:
                    if not self._being_written():  # a writer mid-line is no fault
                        warn_line(
                            f"{path}: ignoring truncated last line {n}; it will be regenerated"
                        )
                    continue
                raise DataFileError(f"{path}, line {n}: not valid JSON; {fix}") from None
            if not isinstance(row, dict) or not isinstance(row.get("key"), str):
                raise DataFileError(
                    f"{path}, line {n}: not a stored row (a JSON object with a 'key'); {fix}"
                )
            reference = reference or _reader(row)
            if _reader(row) != reference:
                raise DataFileError(
                    f"{path}, line {n}: a row of {_describe(_reader(row))} in a store of "
                    f"{_describe(reference)}; a store holds one model's rows: {fix}"
                )
            out.append(row)
        return out

    def _being_written(self) -> bool:
        """Whether another process holds the store's lock now (a row is being appended)."""
        lock = FileLock(str(self.path) + ".lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return True
        except OSError:  # a read-only folder: no writer can be there
            return False
        lock.release()
        return False

    def keys(self) -> set[str]:
        """The keys of every stored row, read incrementally: the appended file from where the
        last call stopped, the packed file once per version (a run asks before every chunk and
        :meth:`append` before every batch). The appended file is read first, as in :meth:`rows`."""
        self._note_read()
        plain = self._plain_keys()
        return self._packed_keys() | plain

    def _packed_keys(self) -> set[str]:
        try:
            stat = self.packed_path.stat()
        except FileNotFoundError:
            return set()
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        cached = self._keys_cache.get(self.packed_path)
        if cached is None or cached[0] != stamp:
            cached = self._keys_cache[self.packed_path] = (
                stamp,
                frozenset(r["key"] for r in self.packed_rows()),
            )
        return set(cached[1])

    def _plain_keys(self) -> set[str]:
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            self._keys_cache.pop(self.path, None)
            return set()
        except IsADirectoryError:
            raise self._a_folder() from None
        with f:
            stat = os.fstat(f.fileno())
            head = f.read(256)
            seen_head, offset, keys = self._keys_cache.get(self.path, (None, 0, set()))
            # Packed and appended anew (an inode number can be reused): read it from the start.
            if seen_head != (stat.st_ino, head[: min(offset, 256)]) or stat.st_size < offset:
                offset, keys = 0, set()
            f.seek(offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line being written is read next time
        for line in complete.split(b"\n"):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):  # torn, bad UTF-8, too deep (rows() says)
                continue
            if isinstance(row, dict) and isinstance(row.get("key"), str):
                keys.add(row["key"])
        offset += len(complete)
        self._keys_cache[self.path] = ((stat.st_ino, head[: min(offset, 256)]), offset, keys)
        return set(keys)

    def pack(self) -> int:
        """Move the appended rows into the packed file (a row whose key is packed already is
        dropped) and delete the plain file; returns how many rows were moved. The packed
        file is rewritten whole and atomically, with a fixed xz preset, so packing the same
        rows gives the same bytes."""
        with self.lock():
            # read first: a damaged packed file is said, never reported as 0 rows packed
            rows = self.packed_rows()
            plain = self.plain_rows()
            if not plain:
                if self.path.exists():
                    self.path.unlink()
                return 0
            seen = {r["key"] for r in rows}
            moved = 0
            for r in plain:
                if r["key"] not in seen:
                    seen.add(r["key"])
                    rows.append(r)
                    moved += 1
            text = dumps_lines(rows)
            tmp = self.packed_path.with_name(self.PACKED + ".tmp")
            try:
                tmp.write_bytes(lzma.compress(text.encode("utf-8"), preset=6))
                os.replace(tmp, self.packed_path)
                self.path.unlink()
            except OSError as err:
                tmp.unlink(missing_ok=True)  # the packed and plain files are as they were
                raise StoreWriteError(self.packed_path, err) from None
        return moved

    def merge(
        self,
        source: str | os.PathLike,
        check: Callable[[dict], str | None] | None = None,
        reference: dict | None = None,
    ) -> int:
        """Append the rows of another generations file (plain or ``.xz``, such as a flat copy
        a GPU run sent back) whose keys this store lacks; returns how many were added. Rows
        of another reader than this store's (or than ``reference``, a row of the same folder's
        other stores, when this one is empty) are refused, naming the line, and so is a row
        that ``check`` finds fault with (it returns why, or None); nothing is added then.
        The file is read as a stream, a line at a time: a small file that decompresses to
        gigabytes (an xz bomb) is refused at its first over-long line, never held whole."""
        source = Path(source)
        first = next(iter(self.packed_rows() or self.plain_rows()), None) or reference
        fix = "merge only flat copies of this store (`longctx reproduce --copy-to`)"
        reader = _reader(first) if first else None
        rows: dict[str, dict] = {}
        for n, line in enumerate(_copy_lines(source), 1):
            if not line.strip():
                continue
            (row,) = self._parse([line], source, fix, reader, first_line=n)
            reader = reader or _reader(row)
            fault = check(row) if check is not None else None
            if fault:
                raise DataFileError(f"{source}, line {n}: {fault}; {fix}")
            rows.setdefault(row["key"], row)  # a row repeated in the copy is one row
        return self.append(rows.values())

    def append(self, rows: Iterable[dict]) -> int:
        """Append ``rows`` whose keys are not stored yet (another process may have stored
        some since this one looked: two runs of one chapter at once store each row once);
        returns how many were written. Written and flushed under the store's lock. Every row
        is checked against its schema first (:mod:`longctx.row_schema`): one malformed row
        and nothing is written."""
        rows = list(rows)
        if not rows:
            return 0
        for row in rows:
            if fault := row_fault(row):
                raise MalformedRowError(self.path, fault)
        with self.lock():
            have = self.keys()
            new = [r for r in rows if r["key"] not in have and not have.add(r["key"])]
            text = dumps_lines(new)
            if not text:
                return 0
            self._drop_torn_tail()
            with open(self.path, "ab") as f:
                start = f.tell()
                try:
                    f.write(text.encode("utf-8"))
                    f.flush()
                    os.fsync(f.fileno())
                except OSError as err:
                    # A full disk or a vanished volume: cut what was written of this batch,
                    # so the file ends on a whole row, then say so in one line.
                    try:
                        f.truncate(start)
                    except OSError:
                        pass
                    raise StoreWriteError(self.path, err) from None
        return len(new)

    def _a_folder(self) -> DataFileError:
        return DataFileError(
            f"{self.path} is a folder, not a results file: move it out of the way (the rows "
            f"are in files named {self.FILENAME} and {self.PACKED})"
        )

    def lock(self):
        """An exclusive inter-process lock on this store (a ``.lock`` file beside it)."""
        if self.path.is_dir():
            raise self._a_folder()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(self.path) + ".lock")
        except OSError as err:
            raise StoreWriteError(self.dir, err) from None
        return _Locked(lock, self.dir)

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


_FIX_LINE = "fix or delete that line"
_read_logs: list[set[Path]] = []  # the open recordings of recording_reads()


@contextmanager
def recording_reads() -> Iterator[set[Path]]:
    """The files of every store whose rows are read inside the block (packed and plain, there
    or not: a file that appears later changes what the block would read), so a result
    computed from rows can be kept for as long as those files hold the same bytes."""
    seen: set[Path] = set()
    _read_logs.append(seen)
    try:
        yield seen
    finally:
        _read_logs.remove(seen)


_digests: dict[tuple, str] = {}


def file_digest(path: Path) -> str:
    """The sha256 of a file's bytes ("absent" for no file), hashed once per version of it."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return "absent"
    stamp = (str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)
    if stamp not in _digests:
        _digests[stamp] = sha256_file(path)
    return _digests[stamp]


# A stored row's line is at most a few MB (a 128K-token prompt, an attention vector).
MAX_LINE_BYTES = 64 * 2**20


def _copy_lines(source: Path) -> Iterator[str]:
    """The lines of a generations file to merge, plain or xz, decompressed and split as they
    are read; a line longer than :data:`MAX_LINE_BYTES`, or a file that is not xz or not
    UTF-8, is one line of error naming it."""
    again = "merge only flat copies of a store (`longctx reproduce --copy-to`); copy it again"
    try:
        f = open(source, "rb")
    except IsADirectoryError:
        raise DataFileError(f"{source} is a folder, not a generations file") from None
    with f:
        try:
            yield from iter_lines(_chunks(f, source, again), MAX_LINE_BYTES)
        except NotUtf8Line as err:
            raise DataFileError(f"{source}, line {err.n}: not valid UTF-8; {again}") from None
        except LongLine as err:
            raise DataFileError(
                f"{source}, line {err.n}: longer than {MAX_LINE_BYTES // 2**20} MiB, "
                f"no stored row; {again}"
            ) from None


def _chunks(f, source: Path, again: str) -> Iterator[bytes]:
    """A generations file's bytes in chunks of at most 1 MiB, decompressed as read when it
    is xz (a small file that unpacks to gigabytes is never held whole)."""
    unpack = lzma.LZMADecompressor() if source.suffix == ".xz" else None
    while True:
        try:
            if unpack is None:
                data = f.read(2**20)
            elif unpack.eof:
                data = b""
            elif unpack.needs_input:
                compressed = f.read(2**16)
                data = unpack.decompress(compressed, max_length=2**20) if compressed else b""
            else:
                data = unpack.decompress(b"", max_length=2**20)
        except (lzma.LZMAError, EOFError) as e:
            raise DataFileError(f"{source} is not a generations file ({e}); {again}") from None
        if not data:
            if unpack is not None and not unpack.eof:
                raise DataFileError(f"{source} is not a generations file (cut short); {again}")
            return
        yield data


class MalformedRowError(DataFileError):
    """A row that does not match its schema, refused before anything is written."""

    def __init__(self, path: Path, fault: str):
        super().__init__(
            f"{path}: {fault}; rows are built by longctx.runner.make_row (generations) or "
            "longctx.attention.attention_rows (attention), which a store accepts as they are"
        )


class StoreWriteError(DataFileError):
    """The system refused a write to a store (disk full, read-only, permissions)."""

    def __init__(self, path, err: OSError):
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            fix = "free some disk space"
        elif err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            fix = "check that the results folder is writable"
        else:
            fix = "free some disk space, or check that the results folder is writable"
        super().__init__(
            f"cannot write {path}: {err.strerror or err} ({fix}); every row written before is kept"
        )


class _Locked:
    """A store's file lock whose failure to be taken (a read-only folder) is one line."""

    def __init__(self, lock: FileLock, where: Path):
        self._lock, self._where = lock, where

    def __enter__(self):
        try:
            return self._lock.__enter__()
        except OSError as err:
            raise StoreWriteError(self._where, err) from None

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)


def folder_name(name: str, what: str) -> str:
    """``name`` if it is one folder name (not empty, not ``.`` or ``..``, no separator), so a
    path built from it stays inside its parent; else a one-line error."""
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or any(c in name for c in "/\\\0")
        or name != name.strip()
    ):
        raise DataFileError(
            f"{what} {name!r} is not a plain folder name (no '/', '\\', '.', '..' or empty part)"
        )
    return name


def _reader(row: dict) -> tuple[str | None, str]:
    """Who wrote a row: its weights' fingerprint and its backend's identity (rows stored
    before backends existed name none and came from ``hf``)."""
    return row.get("model_fingerprint"), row.get("backend") or "hf"


def _describe(reader: tuple[str | None, str]) -> str:
    return f"{reader[0] or 'an unnamed model'} ({reader[1]})"


def model_folder(ref, results_root: str | os.PathLike) -> str:
    """The results folder name of a resolved model (:class:`~longctx.models.ModelRef`) under
    ``results_root``: its slug, unless that folder already holds rows of *other* weights (two
    checkpoint folders or GGUF files with one name), in which case a short hash of this
    model's fingerprint is appended."""
    base = ref.slug
    if ref.kind not in ("local", "gguf"):
        return base
    for experiment in sorted(p.name for p in (Path(results_root) / base).glob("*") if p.is_dir()):
        store = ResultsStore(results_root, base, experiment)
        first = next(iter(store.packed_rows()), None)
        if first is None and store.path.exists():  # the first line is enough
            with open(store.path, encoding="utf-8") as f:
                line = f.readline()
            first = json.loads(line) if line.strip() else None
        if first is not None:
            if first.get("model_fingerprint") != ref.fingerprint:
                return f"{base}-{hashlib.sha256(ref.fingerprint.encode()).hexdigest()[:6]}"
            break
    return base
