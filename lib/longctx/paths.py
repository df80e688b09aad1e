"""Locate the repository root so notebooks work from any working directory."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path


def repo_root(start: str | Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: cwd) holding ``_toc.yml``."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").exists():
            return folder
    return here


def resolve(path: str | Path, start: str | Path | None = None) -> Path:
    """Absolute paths stay; relative ones are taken from the repository root."""
    path = Path(path).expanduser()
    return path if path.is_absolute() else repo_root(start) / path


@cache
def build_commit(start: str | Path | None = None) -> str:
    """The git commit this checkout is at (short hash, "+ local changes" when the tree
    differs from it), or "no git checkout": the provenance line under every figure names it."""
    root = repo_root(start)
    try:
        head = _git(root, "rev-parse", "--short=10", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "no git checkout"
    return f"{head} + local changes" if dirty else head


def build_date(start: str | Path | None = None) -> str:
    """The date (YYYY-MM-DD) of the commit this checkout is at, or "undated" outside git."""
    try:
        return _git(repo_root(start), "log", "-1", "--format=%cs")
    except (OSError, subprocess.SubprocessError):
        return "undated"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=10
    ).stdout.strip()
