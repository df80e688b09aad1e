"""Locate the repository root so notebooks work from any working directory."""

from __future__ import annotations

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
