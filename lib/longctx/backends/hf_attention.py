"""Final-token attention in torch, without materializing attention matrices: what the
``hf`` backend's ``final_token_attention`` computes (its :data:`~.base.ATTENTION` capability).

:func:`final_token_attention` returns the attention that the last position pays to every
position in one layer (by default the last), averaged over heads. It runs the model with
its fast attention (SDPA / flash) up to that layer, captures the layer's input hidden
states and rotary embedding, and computes a single softmax row from the layer's own
projections (with its q/k norms, rotary embedding, grouped key/value heads, scaling, logit
soft-capping and sliding window). Memory is O(T * hidden) instead of the
O(layers * heads * T^2) that ``output_attentions=True`` with eager attention needs, and the
forward pass stops before the captured layer runs. :func:`eager_final_token_attention` is
the reference it is tested against.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import ParameterError

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
    model, input_ids: torch.Tensor | Sequence[int], layer: int | Sequence[int] = -1
) -> torch.Tensor:
    """Attention weights from the final token to every token of ``input_ids`` in ``layer``
    (default: the last), averaged over heads; given several layers, the mean over them,
    captured in one forward pass. A float32 CPU tensor of length T summing to 1.

    ``model`` is a ``transformers`` causal LM (or a :class:`longctx.backends.hf.HFBackend`).
    One sequence at a time, no padding.
    """
    import torch

    with torch.inference_mode():
        return _final_token_attention(model, input_ids, layer)


def _final_token_attention(model, input_ids, layer: int | Sequence[int]):
    import torch

    model = getattr(model, "model", model) if not isinstance(model, torch.nn.Module) else model
    ids = torch.as_tensor(input_ids, dtype=torch.long)
    if ids.dim() == 1:
        ids = ids[None]
    if ids.shape[0] != 1:
        raise ParameterError("final_token_attention takes one sequence (no padding)")
    ids = ids.to(next(model.parameters()).device)
    mods = _attention_modules(model)
    wanted = [layer] if isinstance(layer, int) else list(layer)
    if not wanted:
        raise ParameterError("final_token_attention needs at least one layer")
    indices = []
    for i in wanted:
        if not -len(mods) <= i < len(mods):
            raise ParameterError(f"layer {i} outside the model's {len(mods)} layers")
        indices.append(i % len(mods))
    deepest = max(indices)
    captured: dict[int, tuple] = {}
    handles = []

    def hook_for(index: int):
        def hook(module, args, kwargs):
            hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            captured[index] = (hidden, kwargs.get("position_embeddings"))
            if index == deepest:  # nothing deeper is needed: stop the forward pass here
                raise _Captured

        return hook

    for index in sorted(set(indices)):
        handles.append(mods[index].register_forward_pre_hook(hook_for(index), with_kwargs=True))
    try:
        model(input_ids=ids, use_cache=False)
    except _Captured:
        pass
    finally:
        for handle in handles:
            handle.remove()
    if deepest not in captured:
        raise ParameterError("the attention layer was never called; cannot capture its input")
    rows = [_softmax_row(mods[i], *captured[i]) for i in indices]
    return rows[0] if len(rows) == 1 else torch.stack(rows).mean(0)


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
