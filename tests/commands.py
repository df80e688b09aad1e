"""The ``longctx`` command line as a test runs it: a fresh interpreter in the repository root,
its output captured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m longctx.cli ARGS`` from the repository root; stdout and stderr as text."""
    return subprocess.run(
        [sys.executable, "-m", "longctx.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )
