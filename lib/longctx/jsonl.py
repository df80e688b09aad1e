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


class NotUtf8Line(ValueError):
    """Line ``n`` (from 1) of a JSON Lines file is not valid UTF-8."""

    def __init__(self, n: int):
        super().__init__(f"line {n}: not valid UTF-8")
        self.n = n


class LongLine(ValueError):
    """Line ``n`` of a JSON Lines stream is longer than the reader accepts."""

    def __init__(self, n: int, limit: int):
        super().__init__(f"line {n}: longer than {limit} bytes")
        self.n, self.limit = n, limit


def decode_line(line: bytes, n: int) -> str:
    """One line's bytes as text, a trailing ``\\r`` dropped; :class:`NotUtf8Line` if not UTF-8."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise NotUtf8Line(n) from None
    return text[:-1] if text.endswith("\r") else text


def split_lines(data: bytes, *, torn_tail: bool = False) -> list[str]:
    """The lines of JSON Lines bytes, split at ``\\n`` before decoding, so no character
    splits a line and one line's bad bytes stay its own. With ``torn_tail``, a last line
    with no ``\\n`` that is not UTF-8 (a write cut inside a multibyte character) is kept
    with replacement characters (never valid JSON, so a reader skips it as torn); any other
    line that is not UTF-8 raises :class:`NotUtf8Line`."""
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    lines = []
    for n, line in enumerate(raw, 1):
        try:
            lines.append(decode_line(line, n))
        except NotUtf8Line:
            if not (torn_tail and n == len(raw) and not data.endswith(b"\n")):
                raise
            lines.append(line.decode("utf-8", errors="replace"))
    return lines


def iter_lines(chunks: Iterable[bytes], max_bytes: int) -> Iterator[str]:
    """:func:`split_lines` over a stream of byte chunks, holding at most one line: a line
    longer than ``max_bytes`` raises :class:`LongLine` before it is held whole."""
    pending, n = b"", 0
    for chunk in chunks:
        *complete, pending = (pending + chunk).split(b"\n")
        if len(pending) > max_bytes:
            raise LongLine(n + len(complete) + 1, max_bytes)
        for line in complete:
            n += 1
            yield decode_line(line, n)
    if pending:
        yield decode_line(pending, n + 1)


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
