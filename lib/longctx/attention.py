"""Final-token attention without materializing attention matrices, and the
Attention Balance Score (C-NORM paper, sections 3.2 and 4.2).

:func:`final_token_attention` returns the attention that the last position pays
to every position in one layer (by default the last), averaged over heads. It
runs the model with its fast attention (SDPA / flash) up to that layer, captures
the layer's input hidden states and rotary embedding, and computes a single
softmax row from the layer's own projections (with its q/k norms, rotary
embedding, grouped key/value heads, scaling, logit soft-capping and sliding
window). Memory is O(T * hidden) instead of the O(layers * heads * T^2) that
``output_attentions=True`` with eager attention needs, and the forward pass stops
before the captured layer runs. :func:`eager_final_token_attention` is the
reference it is tested against.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tqdm import tqdm

from . import __version__
from .backends.base import ATTENTION
from .errors import ParameterError

if TYPE_CHECKING:
    import torch


class _Captured(Exception):
    """Raised inside the forward pass once the needed layer input is captured."""


def _attention_modules(model) -> list[torch.nn.Module]:
    mods = [m for name, m in model.named_modules() if name.endswith("self_attn")]
    if not mods:
        raise ParameterError(
            f"{type(model).__name__}: no '*.self_attn' modules; final-token attention "
            "supports decoder models built like Llama/Qwen/Gemma in transformers"
        )
    return mods


def _model_function(module: torch.nn.Module, name: str):
    fn = getattr(sys.modules[type(module).__module__], name, None)
    if fn is None:
        raise ParameterError(
            f"{type(module).__module__} has no {name}; this architecture is not supported"
        )
    return fn


def _heads(x: torch.Tensor, head_dim: int) -> torch.Tensor:
    """(B, T, H*D) -> (B, H, T, D)"""
    b, t, _ = x.shape
    return x.view(b, t, -1, head_dim).transpose(1, 2)


def final_token_attention(
    model, input_ids: torch.Tensor | Sequence[int], layer: int = -1
) -> torch.Tensor:
    """Attention weights from the final token to every token of ``input_ids`` in ``layer``
    (default: the last), averaged over heads; a float32 CPU tensor of length T summing to 1.

    ``model`` is a ``transformers`` causal LM (or a :class:`longctx.backends.hf.HFBackend`).
    One sequence at a time, no padding.
    """
    import torch

    with torch.inference_mode():
        return _final_token_attention(model, input_ids, layer)


def _final_token_attention(model, input_ids, layer: int):
    import torch

    model = getattr(model, "model", model) if not isinstance(model, torch.nn.Module) else model
    ids = torch.as_tensor(input_ids, dtype=torch.long)
    if ids.dim() == 1:
        ids = ids[None]
    if ids.shape[0] != 1:
        raise ParameterError("final_token_attention takes one sequence (no padding)")
    ids = ids.to(next(model.parameters()).device)
    mods = _attention_modules(model)
    try:
        attn = mods[layer]
    except IndexError:
        raise ParameterError(f"layer {layer} outside the model's {len(mods)} layers") from None

    captured: dict = {}

    def hook(module, args, kwargs):
        captured["hidden"] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        captured["rope"] = kwargs.get("position_embeddings")
        raise _Captured

    handle = attn.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        model(input_ids=ids, use_cache=False)
    except _Captured:
        pass
    finally:
        handle.remove()
    if "hidden" not in captured:
        raise ParameterError("the attention layer was never called; cannot capture its input")
    return _softmax_row(attn, captured["hidden"], captured["rope"])


def _softmax_row(attn, hidden: torch.Tensor, rope) -> torch.Tensor:
    import torch

    head_dim = attn.head_dim
    q = _heads(attn.q_proj(hidden[:, -1:]), head_dim)  # (1, H, 1, D)
    k = _heads(attn.k_proj(hidden), head_dim)  # (1, Hkv, T, D)
    if getattr(attn, "q_norm", None) is not None:
        q, k = attn.q_norm(q), attn.k_norm(k)
    if rope is not None:
        apply_rope = _model_function(attn, "apply_rotary_pos_emb")
        cos, sin = rope
        q, _ = apply_rope(q, q, cos[:, -1:], sin[:, -1:])
        k, _ = apply_rope(k, k, cos, sin)
    groups = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(groups, dim=1)  # what repeat_kv does: head h reads kv head h // groups
    scores = (q.float() @ k.float().transpose(-1, -2))[0, :, 0] * attn.scaling  # (H, T)
    softcap = getattr(attn.config, "attn_logit_softcapping", None)
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    window = getattr(attn, "sliding_window", None)
    t = scores.shape[-1]
    if window and t > window:
        # Key j is visible from the last query iff (t-1) - j < window
        scores[:, : t - window] = float("-inf")
    return torch.softmax(scores, dim=-1).mean(0).cpu()


def eager_final_token_attention(model, input_ids, layer: int = -1) -> torch.Tensor:
    """Reference: ``output_attentions=True`` with eager attention (materializes every
    layer's T x T matrices); the model's attention implementation is restored after."""
    import torch

    model = getattr(model, "model", model) if not isinstance(model, torch.nn.Module) else model
    ids = torch.as_tensor(input_ids, dtype=torch.long)
    ids = (ids[None] if ids.dim() == 1 else ids).to(next(model.parameters()).device)
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            out = model(input_ids=ids, output_attentions=True, use_cache=False)
    finally:
        model.set_attn_implementation(previous)
    return out.attentions[layer][0, :, -1].float().mean(0).cpu()


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
    fingerprint: str, prompt: str, prompt_mode: str, layer: int, keep_vector: bool
) -> str:
    payload = json.dumps([fingerprint, prompt, prompt_mode, layer, keep_vector], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def attention_rows(
    items: Sequence[dict],
    store,
    reader,
    *,
    load: Callable[[], object] | None = None,
    layer: int = -1,
    keep_vector: bool = False,
    progress: bool = True,
) -> list[dict]:
    """Final-token attention of each item's ``prompt`` (rendered for the model), scored
    with ABS; one cached row per prompt in ``store`` (a :class:`~longctx.store.ResultsStore`).

    Each row keeps the item's other fields, the prompt's token count, the ABS, the
    seconds the forward pass took and, with ``keep_vector``, the attention vector
    itself (for plots). ``reader`` (a :class:`~longctx.reader.Reader`) is loaded (``load``,
    default its own) only when some prompt is not cached; attention needs the weights in
    torch, so any backend but ``hf`` is a one-line error then.
    """
    ref = reader.ref
    keys = [
        attention_key(ref.fingerprint, it["prompt"], reader.prompt_mode, layer, keep_vector)
        for it in items
    ]
    existing = {r["key"]: r for r in store.rows()}
    missing = [i for i, k in enumerate(keys) if k not in existing]
    if missing:
        reader.require(ATTENTION)
        lm = (load or reader.load)()
        for i in tqdm(missing, desc=f"{reader.model}: final-token attention", disable=not progress):
            item = items[i]
            ids = lm.tokenizer(lm.render(item["prompt"]), add_special_tokens=False).input_ids
            lm.check_fits(len(ids), 0)
            start = time.perf_counter()
            vec = final_token_attention(lm.model, ids, layer=layer)
            seconds = time.perf_counter() - start
            row = {
                "key": keys[i],
                "model": reader.model,
                "model_fingerprint": ref.fingerprint,
                "prompt_mode": reader.prompt_mode,
                "layer": layer,
                **item,
                "tokens": len(ids),
                "abs": attention_balance_score(vec),
                "seconds": round(seconds, 4),
                "device": lm.device,
                "longctx_version": __version__,
            }
            if keep_vector:
                row["attention"] = [round(float(x), 7) for x in vec]
            store.append([row])
            existing[keys[i]] = row
    return [existing[k] for k in keys]
