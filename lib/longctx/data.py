"""Registry of public data files: download with a sha256 check, or read a local mirror.

Resolution order for :func:`fetch`:

1. ``$LONGCTX_DATA_MIRROR/<filename>`` when that variable is set (an override, e.g. a
   folder of newer or larger files on an offline machine);
2. the copy committed with the project in ``data/public/`` (the small public files the
   book and tests need, as the Lost in the Middle repository ships its own data; see
   ``data/README.md`` for source, licence and sha256);
3. the download cache ``$LONGCTX_CACHE/data/<filename>`` (default ``~/.cache/longctx``);
4. a download from the original URL into that cache (only when ``download=True``).

Every file is checked against its registered sha256 before it is returned, so a
truncated or edited file fails loudly instead of silently changing results.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .errors import DataFileError

MIRROR_ENV = "LONGCTX_DATA_MIRROR"
CACHE_ENV = "LONGCTX_CACHE"
# lib/longctx/data.py -> the repository's data/public (absent in a non-editable install).
COMMITTED_DIR = Path(__file__).resolve().parents[2] / "data" / "public"
_LITM = "https://github.com/nelson-liu/lost-in-the-middle/raw/main/"


@dataclass(frozen=True)
class DataFile:
    name: str
    filename: str
    url: str
    sha256: str
    description: str


DATA_FILES: dict[str, DataFile] = {
    f.name: f
    for f in [
        DataFile(
            "kv-retrieval-75",
            "kv-retrieval-75_keys.jsonl.gz",
            _LITM + "kv_retrieval_data/kv-retrieval-75_keys.jsonl.gz",
            "eb6d61fc3473349f2b86df76757c6ab659cc929d907d24caf1c69928e03f6203",
            "Lost in the Middle key-value retrieval, 500 records of 75 UUID pairs",
        ),
        DataFile(
            "kv-retrieval-140",
            "kv-retrieval-140_keys.jsonl.gz",
            _LITM + "kv_retrieval_data/kv-retrieval-140_keys.jsonl.gz",
            "66d54aae7e38779da482895ccd538faaf5309f144e54f30dc530a95091581fa1",
            "Lost in the Middle key-value retrieval, 500 records of 140 UUID pairs",
        ),
        DataFile(
            "nq-open-oracle",
            "nq-open-oracle.jsonl.gz",
            _LITM + "qa_data/nq-open-oracle.jsonl.gz",
            "6a7f72b846f663a133ef952244e5a4e43f06bcf190afe34e8fbe687ce0d1653e",
            "NaturalQuestions-Open, 2,655 questions with their gold Wikipedia chunk",
        ),
        DataFile(
            "gsm8k-test",
            "gsm8k-test.jsonl",
            "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/test.jsonl",
            "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
            "GSM8K test split, 1,319 problems",
        ),
    ]
}


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "longctx"))


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def _verified(path: Path, spec: DataFile) -> Path:
    digest = sha256_file(path)
    if digest != spec.sha256:
        raise DataFileError(
            f"{path} has sha256 {digest[:12]}..., expected {spec.sha256[:12]}... for '{spec.name}': "
            f"the file is corrupt or a different version; delete it and fetch it again from {spec.url}"
        )
    return path


def fetch(name: str, download: bool = True) -> Path:
    """Return a verified local path to the registered data file ``name``."""
    if name not in DATA_FILES:
        raise DataFileError(f"unknown data file '{name}'; known: {', '.join(sorted(DATA_FILES))}")
    spec = DATA_FILES[name]
    mirror = os.environ.get(MIRROR_ENV)
    if mirror:
        candidate = Path(mirror) / spec.filename
        if candidate.exists():
            return _verified(candidate, spec)
    committed = COMMITTED_DIR / spec.filename
    if committed.exists():
        return _verified(committed, spec)
    cached = cache_dir() / "data" / spec.filename
    if cached.exists():
        return _verified(cached, spec)
    where = (
        f"{MIRROR_ENV}={mirror!r} has no {spec.filename}, "
        if mirror
        else f"{MIRROR_ENV} is not set, "
    ) + f"{COMMITTED_DIR} has no copy; "
    if not download:
        raise DataFileError(
            f"'{name}' is not available offline: {where}download it from {spec.url}"
        )
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(cached.suffix + ".part")
    try:
        with urllib.request.urlopen(spec.url, timeout=60) as response, open(partial, "wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as err:
        partial.unlink(missing_ok=True)
        raise DataFileError(
            f"could not download '{name}' from {spec.url} ({err}); {where}"
            f"point {MIRROR_ENV} at a folder holding {spec.filename}"
        ) from None
    _verified(partial, spec)
    partial.rename(cached)
    return cached


def package_file(package: str, relative: str, install: str) -> Path:
    """A data file shipped inside an installed package (found without importing it, since
    some data-only packages pin or import heavy dependencies). ``install`` is the pip
    command that fixes a missing package, quoted in the error."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataFileError(
            f"the data file {relative} ships in the package '{package}', which is not "
            f"installed: {install}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.exists():
        raise DataFileError(
            f"{path} is missing from the installed {package} package; reinstall it ({install})"
        )
    return path
