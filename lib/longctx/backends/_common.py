"""Pieces the non-``hf`` backends share: preparing prompts exactly as the ``hf`` engine does,
and checking their capabilities before any work."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import CapabilityError, ParameterError
from ..padding import _TOKEN_LEVEL, MASKED_GAP, encode_prompt, expand_fillers
from ..requests import StopRule, stop_rules_for


@dataclass
class Prepared:
    """A rendered prompt after filler expansion: its text, its token ids (the model's own
    tokenizer, token-level fillers spliced in as ids), and whether the ids must be sent
    instead of the text (token-level fillers have no text that tokenizes to them)."""

    text: str
    ids: list[int]
    ids_only: bool


def prepare(
    reader, prompts: Sequence[str], max_new_tokens: int, stop_rules, batch_size: int, backend: str
) -> tuple[list[Prepared], list[StopRule]]:
    """Expand fillers, tokenize and check every prompt against the window, before any
    generation; masked gaps are a one-line :class:`CapabilityError` naming ``hf``."""
    if max_new_tokens < 1:
        raise ParameterError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if batch_size < 1:
        raise ParameterError(f"batch_size must be >= 1, got {batch_size}")
    rules = stop_rules_for(stop_rules, len(prompts))
    out = []
    for i, prompt in enumerate(prompts):
        if MASKED_GAP.search(prompt):
            raise CapabilityError(
                f"masked padding needs the model's weights in torch: backend {backend!r} "
                f"cannot provide it; use backend='hf'"
            )
        text = expand_fillers(prompt, reader.tokenizer)
        ids = encode_prompt(reader.tokenizer, text)
        reader.check_fits(len(ids), max_new_tokens, label=f"prompt {i}")
        out.append(Prepared(text, ids, bool(_TOKEN_LEVEL.search(text))))
    return out, rules


def decode(tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True)
