"""JSON Lines that survive every character.

``str.splitlines`` also splits at U+2028, U+2029, U+0085 and a few control characters,
which ``json.dumps(..., ensure_ascii=False)`` writes raw inside strings: a model answer or a
web passage holding one would make its file unreadable. Rows are therefore written with
those characters escaped, and read by splitting at ``\\n`` only, so files written before
the escaping read too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

# Characters str.splitlines() treats as line ends that JSON leaves unescaped with ensure_ascii=False.
_LINE_BREAKERS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"}
_TRANSLATION = str.maketrans(_LINE_BREAKERS)


def dumps_line(row: object) -> str:
    """One row as a single JSON line (keys sorted, non-ASCII kept, line breakers escaped), newline included."""
    return json.dumps(row, ensure_ascii=False, sort_keys=True).translate(_TRANSLATION) + "\n"


def dumps_lines(rows: Iterable[object]) -> str:
    return "".join(dumps_line(r) for r in rows)


def split_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text, split at ``\\n`` only (a trailing ``\\r`` dropped)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def iter_text_lines(chunks: Iterable[str]) -> Iterator[str]:
    """Lines of a stream of decoded text chunks, split at ``\\n`` only: a server-sent event's
    JSON may hold U+2028 raw, which ``str.splitlines`` (and so httpx's ``iter_lines``) splits."""
    pending = ""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split("\n")
        for line in complete:
            yield line[:-1] if line.endswith("\r") else line
    if pending:
        yield pending[:-1] if pending.endswith("\r") else pending
