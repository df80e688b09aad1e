"""Surface-format transforms that keep content fixed (C-NORM paper, sections 2 and 4.1).

Two transforms:

* **Identifier formats** for key-value retrieval. An identifier is a string of hex
  digits laid out in UUID groups (8-4-4-4-12, repeated for ids longer than 32
  digits) and joined by a delimiter: ``-`` is the standard UUID, ``""`` the paper's
  *plain text*, any other symbol (``&``, ``:``, ``_``, ...) a *modified UUID*.
  :func:`format_identifier` and :func:`identifier_pattern` build the string and the
  regex that recognizes it; :func:`hex_digits` strips any format back off.
* **Candidate formatting** of passages (C-NORM, section 4.1): for delimiter ``f``
  and ratio ``p``, every space of a seeded fraction ``p`` of the sentences becomes
  ``f``. Words, their order and every other character are untouched, so replacing
  ``f`` by a space restores the passage whenever ``f`` did not already occur in it
  (:func:`restore_passage`).
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence

from .errors import ParameterError

UUID_GROUPS = (8, 4, 4, 4, 12)
HEX = "0123456789abcdefABCDEF"
# The three formats of the paper's Figure 2, by delimiter.
PAPER_FORMATS = {"UUID": "-", "plain text": "", "modified UUID": "&"}
# Delimiters swept in the tokenization experiment (the paper's Figure 3 names -, :, &, _, +).
SWEEP_DELIMITERS = ("-", "", ":", "&", "_", "+", "/", "~")


def check_delimiter(delimiter: str) -> str:
    """A delimiter must not be confused with the id itself or break the JSON around it."""
    if not isinstance(delimiter, str):
        raise ParameterError(f"delimiter must be a string, got {delimiter!r}")
    bad = [c for c in delimiter if c in HEX or c in '"\\' or c.isspace()]
    if bad:
        raise ParameterError(
            f"delimiter {delimiter!r} contains {bad[0]!r}: hex digits, quotes, backslashes and whitespace "
            "would make the identifier ambiguous or change its JSON quoting"
        )
    return delimiter


def delimiter_label(delimiter: str) -> str:
    """Human name of a format: 'UUID (-)', 'plain text', 'modified UUID (&)'."""
    if delimiter == "-":
        return "UUID (-)"
    if delimiter == "":
        return "plain text"
    return f"modified UUID ({delimiter})"


def _groups(num_hex: int) -> list[int]:
    if num_hex < 1 or num_hex % 32:
        raise ParameterError(
            f"identifiers are whole UUIDs: num_hex must be a multiple of 32, got {num_hex}"
        )
    return list(UUID_GROUPS) * (num_hex // 32)


def hex_digits(identifier: str) -> str:
    """The hex digits of an identifier in any format (delimiters dropped)."""
    return "".join(c for c in identifier if c in HEX)


def format_identifier(identifier: str, delimiter: str) -> str:
    """Lay out the hex digits of ``identifier`` in UUID groups joined by ``delimiter``."""
    check_delimiter(delimiter)
    digits = hex_digits(identifier)
    out, start = [], 0
    for size in _groups(len(digits)):
        out.append(digits[start : start + size])
        start += size
    return delimiter.join(out)


def identifier_pattern(num_hex: int, delimiter: str) -> str:
    """Regex matching one identifier of ``num_hex`` digits in this format.

    ``-`` is left unescaped (it needs none outside a character class) so the UUID
    pattern is the same string the key-value chapter's stored stop rules hold.
    """
    check_delimiter(delimiter)
    sep = delimiter if delimiter == "-" else re.escape(delimiter)
    return sep.join(f"[0-9a-fA-F]{{{n}}}" for n in _groups(num_hex))


def infer_format(identifier: str) -> tuple[int, str]:
    """(number of hex digits, delimiter) of an identifier built by :func:`format_identifier`."""
    digits = hex_digits(identifier)
    others = [c for c in identifier if c not in HEX]
    if not others:
        return len(digits), ""
    first = identifier[8 : identifier.index(digits[8], 8)] if len(digits) > 8 else ""
    if format_identifier(identifier, first) != identifier:
        raise ParameterError(f"{identifier!r} is not a UUID-grouped identifier")
    return len(digits), first


# ---------------------------------------------------------------------------------------------
# C-NORM candidate formatting

_SENTENCE_END = re.compile(r"(?<=[.!?])(\s+)")


def split_sentences(text: str) -> list[str]:
    """Split after ``.``, ``!`` or ``?`` followed by whitespace. The pieces keep their
    trailing whitespace, so ``"".join(split_sentences(t)) == t``."""
    parts = _SENTENCE_END.split(text)
    # re.split with a group alternates [sentence, sep, sentence, sep, ..., sentence]
    pieces = [
        parts[i] + (parts[i + 1] if i + 1 < len(parts) else "") for i in range(0, len(parts), 2)
    ]
    return [p for p in pieces if p]


def _reformat_sentence(sentence: str, delimiter: str) -> str:
    body = sentence.rstrip()
    return body.replace(" ", delimiter) + sentence[len(body) :]


def chosen_sentences(num_sentences: int, ratio: float, rng: random.Random) -> list[int]:
    """Indices of the ``round(ratio * n)`` sentences (half rounds up) to reformat."""
    if not 0.0 <= ratio <= 1.0:
        raise ParameterError(f"format ratio p must be in [0, 1], got {ratio}")
    k = int(ratio * num_sentences + 0.5)
    return sorted(rng.sample(range(num_sentences), k))


def format_passage(text: str, delimiter: str, ratio: float, rng: random.Random) -> str:
    """C-NORM candidate formatting of one passage: spaces inside a seeded fraction
    ``ratio`` of its sentences become ``delimiter`` (the sentence's trailing
    whitespace, which separates it from the next one, is kept). ``delimiter=""``
    is not allowed here: deleting spaces would merge words and lose content."""
    if not isinstance(delimiter, str) or not delimiter or any(c.isspace() for c in delimiter):
        raise ParameterError(
            f"a passage delimiter must be a non-empty, non-space string, got {delimiter!r}"
        )
    sentences = split_sentences(text)
    if not sentences:
        return text
    chosen = set(chosen_sentences(len(sentences), ratio, rng))
    return "".join(
        _reformat_sentence(s, delimiter) if i in chosen else s for i, s in enumerate(sentences)
    )


def restore_passage(text: str, delimiter: str) -> str:
    """Undo :func:`format_passage` (exact when ``delimiter`` did not occur in the original)."""
    return text.replace(delimiter, " ")


def format_passages(
    texts: Sequence[str],
    delimiter: str | None,
    ratio: float,
    seed: int | str,
    ids: Sequence[str] | None = None,
) -> list[str]:
    """Format several passages; each gets its own seeded generator (from ``seed`` and its
    id, or its index), so a passage is formatted the same wherever it appears.
    ``delimiter=None`` returns the passages unchanged (the baseline)."""
    if delimiter is None:
        return list(texts)
    ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
    if len(ids) != len(texts):
        raise ParameterError("format_passages: one id per passage")
    return [_formatted(t, delimiter, ratio, str(seed), pid) for t, pid in zip(texts, ids)]


@functools.lru_cache(maxsize=1 << 16)
def _formatted(text: str, delimiter: str, ratio: float, seed: str, pid: str) -> str:
    # A passage is formatted alike wherever it appears, and a plan formats the same
    # competitor pool in every cell of a design: compute each once.
    return format_passage(text, delimiter, ratio, random.Random(f"cnorm:{seed}:{pid}"))
