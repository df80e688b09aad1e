"""The Attention Balance Score (C-NORM paper, sections 3.2 and 4.2) and the stored rows of
final-token attention.

The attention itself is a backend capability (:data:`~longctx.backends.base.ATTENTION`):
a backend that has it computes ``final_token_attention(rendered_prompt, layer)`` (the
``hf`` backend in torch, :mod:`longctx.backends.hf_attention`); this module scores it with
ABS and keeps one row per prompt in the store, as the runner asks.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tqdm import tqdm

from . import __version__
from .backends.base import ATTENTION
from .errors import ParameterError

if TYPE_CHECKING:
    import torch


def attention_balance_score(attention: Sequence[float] | torch.Tensor) -> float:
    """ABS(a) = 1 - 2|mu - 0.5| with mu = sum_t ((t-1)/(T-1)) * a_t / sum_j a_j (t = 1..T).

    mu is the attention-weighted normalized position (0 = first token, 1 = last);
    ABS is 1 when the mass is centred, 0 when it sits entirely on the first or the
    last token.
    """
    import torch

    a = torch.as_tensor(attention, dtype=torch.float64).flatten()
    if a.numel() < 2:
        raise ParameterError("ABS needs at least two positions")
    if (a < 0).any() or a.sum() <= 0:
        raise ParameterError("attention weights must be non-negative with a positive sum")
    positions = torch.arange(a.numel(), dtype=torch.float64) / (a.numel() - 1)
    mu = float((positions * a).sum() / a.sum())
    return 1.0 - 2.0 * abs(mu - 0.5)


# ---------------------------------------------------------------------------------------------
# Cached attention rows


def attention_key(
    fingerprint: str,
    prompt: str,
    prompt_mode: str,
    layer: int | Sequence[int],
    keep_vector: bool,
    documents: Sequence[str] | None = None,
) -> str:
    """The store key of a prompt's attention row: its weights, prompt, prompt mode, layer(s),
    whether the vector is kept and, where each document's share is asked, the documents."""
    layer = layer if isinstance(layer, int) else list(layer)
    parts = [fingerprint, prompt, prompt_mode, layer, keep_vector]
    if documents is not None:  # rows without documents keep the keys they always had
        parts.append(list(documents))
    payload = json.dumps(parts, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def attention_rows(
    items: Sequence[dict],
    store,
    reader,
    *,
    load: Callable[[], object] | None = None,
    layer: int | Sequence[int] = -1,
    keep_vector: bool = False,
    progress: bool = True,
) -> list[dict]:
    """Final-token attention of each item's ``prompt`` (rendered for the model) in
    ``layer`` (or the mean over several layers), scored with ABS; one cached row per prompt
    in ``store`` (a :class:`~longctx.store.ResultsStore`).

    Each row keeps the item's other fields, the prompt's token count, the ABS, the
    seconds the forward pass took and, with ``keep_vector``, the attention vector
    itself (for plots); an item that lists its ``documents`` (their text as the prompt
    holds it) gets each one's share of the attention, ``document_mass``. ``reader`` (a
    :class:`~longctx.reader.Reader`) is loaded (``load``, default its own) only when some
    prompt is not cached; attention needs the weights in torch, so any backend but ``hf`` is
    a one-line error then.
    """
    ref = reader.ref
    keys = [
        attention_key(
            ref.fingerprint,
            it["prompt"],
            reader.prompt_mode,
            layer,
            keep_vector,
            it.get("documents"),
        )
        for it in items
    ]
    existing = {r["key"]: r for r in store.rows()}
    missing = [i for i, k in enumerate(keys) if k not in existing]
    if missing:
        reader.require(ATTENTION)
        lm = (load or reader.load)()
        for i in tqdm(missing, desc=f"{reader.model}: final-token attention", disable=not progress):
            item = items[i]
            start = time.perf_counter()
            rendered = lm.render(item["prompt"])
            n_tokens, vec = lm.final_token_attention(rendered, layer)
            seconds = time.perf_counter() - start
            extra = {}
            if item.get("documents") is not None:
                spans = token_spans(
                    lm.token_offsets(rendered), char_spans(rendered, item["documents"])
                )
                extra["document_mass"] = [round(m, 7) for m in document_mass(vec.tolist(), spans)]
            row = {
                "key": keys[i],
                "model": reader.model,
                "model_fingerprint": ref.fingerprint,
                "prompt_mode": reader.prompt_mode,
                "layer": layer if isinstance(layer, int) else list(layer),
                **item,
                "tokens": n_tokens,
                "abs": attention_balance_score(vec),
                "seconds": round(seconds, 4),
                "device": lm.device,
                "longctx_version": __version__,
                **extra,
            }
            if keep_vector:
                row["attention"] = [round(float(x), 7) for x in vec]
            store.append([row])
            existing[keys[i]] = row
    return [existing[k] for k in keys]


# ---------------------------------------------------------------------------------------------
# Attention per document (the fixes for a lost middle)


def document_mass(attention: Sequence[float], spans: Sequence[tuple[int, int]]) -> list[float]:
    """The attention each document receives: the sum of ``attention`` (one weight per
    token) over each document's token span ``[start, end)``, in document order."""
    n = len(attention)
    for start, end in spans:
        if not 0 <= start <= end <= n:
            raise ParameterError(f"token span [{start}, {end}) outside the {n} tokens attended")
    return [float(sum(attention[start:end])) for start, end in spans]


def calibrated_relevance(mass: Sequence[float], bias: Sequence[float]) -> list[float]:
    """Found in the Middle's calibration (Hsieh et al., 2024): the attention a document
    receives at position k minus the attention an irrelevant document receives at k (the
    positional bias, ``bias[k]``, measured by moving dummy documents through the
    positions), so what is left ranks documents by relevance rather than by place."""
    if len(mass) != len(bias):
        raise ParameterError(
            f"{len(mass)} documents but a positional bias for {len(bias)} positions"
        )
    return [float(m - b) for m, b in zip(mass, bias)]


def char_spans(text: str, parts: Sequence[str]) -> list[tuple[int, int]]:
    """Where each of ``parts`` stands in ``text``, found in order (each after the last):
    the character spans of a prompt's documents."""
    spans, start = [], 0
    for part in parts:
        at = text.find(part, start)
        if at < 0:
            raise ParameterError(f"{part[:40]!r}... is not in the prompt after character {start}")
        spans.append((at, at + len(part)))
        start = at + len(part)
    return spans


def token_spans(
    offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The token span ``[first, last + 1)`` of each character span: the tokens whose
    characters (``offsets``, a fast tokenizer's offset mapping) start inside it."""
    out = []
    for start, end in spans:
        inside = [i for i, (a, b) in enumerate(offsets) if start <= a < end and b > a]
        if not inside:
            raise ParameterError(f"no token starts in characters [{start}, {end})")
        out.append((inside[0], inside[-1] + 1))
    return out
