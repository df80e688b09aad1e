"""Multi-scale positional encoding (Ms-PoE; Zhang et al., NeurIPS 2024, "Found in the Middle:
How Language Models Use Long Contexts Better via Plug-and-Play Positional Encoding") for a
``transformers`` decoder with rotary embeddings, without touching its weights or code.

Ms-PoE divides each attention head's position indices by its own ratio, between ``low`` and
``high`` (the paper's 1.2 and 1.8), so that RoPE's long-term decay weighs less on distant
tokens. Which head gets which ratio follows the paper's position-awareness: on each prompt,
the heads whose last query puts the most weight on a few keys (the share of weights above
four times the mean; the official code's "outlier" statistic, from the raw queries and keys)
keep the smallest ratios, the least position-aware get the largest. The ratios are spread as
the official code spreads them, ``low + (high - low) * rank / heads``, and computed once per
prompt, in its prefill. The paper's readers give each query head its own key head; under
grouped-query attention the ranking is of key heads (the mean statistic of the query heads
that read each), and every query head reads with its key head's ratio: a query and a key
rotated by different ratios would meet by their absolute positions, not their distance.
The official code leaves the first two layers as they are (``2..31`` of Llama-2's 32), so
:func:`multiscale_positions` patches every layer from the third on unless told otherwise.

The patch works through hooks: before a patched layer's attention runs, its rotary
embedding is replaced by the identity and the queries and keys are rotated per head as they
leave their projections. One prompt at a time (the statistic is a property of one prompt).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..errors import ParameterError
from .hf_attention import _attention_modules, _heads, _model_function

if TYPE_CHECKING:
    import torch

PAPER_RATIOS = (1.2, 1.8)
SKIPPED_LAYERS = 2  # the official runs leave layers 0 and 1 unscaled


def outlier_share(scores: torch.Tensor) -> torch.Tensor:
    """Per head, the share of the last query's attention weights above four times their
    mean: ``scores`` (H, T) are that query's logits (any scale) over T keys."""
    import torch

    weights = torch.softmax(scores.float(), dim=-1)
    return (weights > 4 * weights.mean(-1, keepdim=True)).float().mean(-1)


def head_ratios(share: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Each head's ratio from its :func:`outlier_share`: the head with the largest share
    gets ``low``, the next ``low + (high - low) / H``, and so on (ties by head index)."""
    import torch

    heads = share.numel()
    order = sorted(range(heads), key=lambda h: (-float(share[h]), h))
    ratios = torch.empty(heads, dtype=torch.float32)
    for rank, head in enumerate(order):
        ratios[head] = low + (high - low) * rank / heads
    return ratios


class _Layer:
    """One patched attention layer: the ratios of the prompt being read, and its hooks."""

    def __init__(self, attn, rotary, low: float, high: float):
        self.attn, self.rotary, self.low, self.high = attn, rotary, low, high
        self.groups = attn.config.num_attention_heads // attn.config.num_key_value_heads
        self.rotate_half = _model_function(attn, "rotate_half")  # the model's own rotation
        self.ratios: torch.Tensor | None = None  # one per key head
        self.positions: torch.Tensor | None = None

    def before(self, module, args, kwargs):
        """The layer's own rotary embedding becomes the identity; its positions are kept."""
        import torch

        positions = kwargs.get("position_ids")
        if positions is None:
            raise ParameterError("Ms-PoE needs the layer's position_ids; this model passes none")
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        if hidden.shape[0] != 1 or positions.shape[0] != 1:
            raise ParameterError("Ms-PoE reads one prompt at a time (batch size 1)")
        if positions.shape[-1] > 1:  # a prefill: a new prompt, new ratios
            self.ratios = None
        self.positions = positions[0].float()
        cos, sin = kwargs["position_embeddings"]
        kwargs["position_embeddings"] = (torch.ones_like(cos), torch.zeros_like(sin))
        return args, kwargs

    def queries(self, module, args, out):
        """Rotate the queries per head; on a prefill, first rank the heads on the raw last
        query and keys (before any rotary embedding, as the official code does)."""
        import torch

        head_dim = self.attn.head_dim
        q = _heads(out, head_dim)  # (1, H, T, D)
        if self.ratios is None:  # the keys' projection runs after this hook: project them here
            k_proj = self.attn.k_proj
            k = _heads(torch.nn.functional.linear(args[0], k_proj.weight, k_proj.bias), head_dim)
            k = k.repeat_interleave(self.groups, dim=1)
            scores = (q[0, :, -1:].float() @ k[0].float().transpose(-1, -2))[:, 0]  # (H, T)
            by_key_head = outlier_share(scores).view(-1, self.groups).mean(-1)
            self.ratios = head_ratios(by_key_head, self.low, self.high)
        return self._rotated(q, self.ratios.repeat_interleave(self.groups), out)

    def keys(self, module, args, out):
        """Rotate the keys, each key head with its ratio (that of every query head it serves)."""
        return self._rotated(_heads(out, self.attn.head_dim), self.ratios, out)

    def _rotated(self, x: torch.Tensor, ratios: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        import torch

        inv_freq = self.rotary.inv_freq.to(x.device, torch.float32)
        scaling = getattr(self.rotary, "attention_scaling", 1.0)
        scaled = self.positions.to(x.device)[None, :, None] / ratios.to(x.device)[:, None, None]
        emb = torch.cat((scaled * inv_freq, scaled * inv_freq), dim=-1)  # (heads, T, D)
        cos, sin = emb.cos() * scaling, emb.sin() * scaling
        b, h, t, d = x.shape
        x = x.float()
        turned = x * cos[None] + self.rotate_half(x) * sin[None]
        return turned.transpose(1, 2).reshape(b, t, h * d).to(out.dtype)


@contextmanager
def multiscale_positions(
    model,
    low: float = PAPER_RATIOS[0],
    high: float = PAPER_RATIOS[1],
    layers: Sequence[int] | None = None,
) -> Iterator[None]:
    """Within the block, ``model`` (a ``transformers`` causal LM, or the ``hf`` backend)
    reads with Ms-PoE in ``layers`` (default: all but the first :data:`SKIPPED_LAYERS`):
    each head's positions divided by its ratio in [``low``, ``high``]. With ``low = high =
    1`` it computes what the model computes."""
    import torch

    model = getattr(model, "model", model) if not isinstance(model, torch.nn.Module) else model
    if not 1.0 <= low <= high:
        raise ParameterError(f"Ms-PoE ratios must satisfy 1 <= low <= high, got {low}, {high}")
    mods = _attention_modules(model)
    rotary = next((m for n, m in model.named_modules() if n.endswith("rotary_emb")), None)
    if rotary is None or not hasattr(rotary, "inv_freq"):
        raise ParameterError(f"{type(model).__name__} has no rotary embedding to rescale")
    chosen = range(SKIPPED_LAYERS, len(mods)) if layers is None else layers
    handles = []
    try:
        for i in chosen:
            attn = mods[i]
            layer = _Layer(attn, rotary, low, high)
            if getattr(attn, "q_norm", None) is not None:
                raise ParameterError(
                    f"{type(attn).__name__} normalizes queries and keys after projecting them; "
                    "Ms-PoE here supports Llama- and Qwen2-style attention"
                )
            handles += [
                attn.register_forward_pre_hook(layer.before, with_kwargs=True),
                attn.q_proj.register_forward_hook(layer.queries),
                attn.k_proj.register_forward_hook(layer.keys),
            ]
        yield
    finally:
        for h in handles:
            h.remove()
