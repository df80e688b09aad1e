"""The ``hf`` backend: transformers weights in torch, greedy generation by
:mod:`longctx.backends.hf_engine`.

It is the only backend with the model's weights at hand, hence the only one for masked
padding (explicit position ids, :func:`~longctx.backends.hf_engine.masked_inputs`) and
attention (:mod:`longctx.attention`). Device and dtype are chosen here: ``auto`` means
CUDA when present, and bf16 on CUDA or on a CPU where bf16 measures faster than float32.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import ParameterError, UnknownModelError
from ..models import (
    ModelRef,
    built_from_gguf,
    fresh_tokenizer,
    resolve_model,
    save_folder_atomically,
    weights_source,
    window_of_config,
)
from ..requests import GenerateCall, Generation
from .base import (
    ATTENTION,
    GENERATE,
    MASKED_PADDING,
    RESCALED_POSITIONS,
    LoadTarget,
    PromptReader,
    chat_mode,
    check_prompt_mode,
    register,
)
from .hf_attention import final_token_attention
from .hf_engine import generate
from .hf_mspoe import multiscale_positions


def pick_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ParameterError(
            f"device '{device}' requested but CUDA is not available; use device='cpu' or 'auto'"
        )
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise ParameterError(f"unknown device '{device}'; use 'auto', 'cpu' or 'cuda[:N]'")
    return device


def cpu_has_native_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


CPU_DTYPE_ENV = "LONGCTX_CPU_DTYPE"


@functools.lru_cache(maxsize=1)
def cpu_bf16_is_faster(margin: float = 1.2) -> bool:
    """Whether bf16 matrix products run at least ``margin`` times faster than float32 on this
    CPU, measured once per process (about half a second) on a prefill-sized product.

    CPU flags alone are not enough: virtual machines may advertise AVX512-BF16 and still
    run bf16 slowly, and without the flag bf16 is emulated (measured 5x slower on one
    2-core machine here, 1.7x *faster* on another that has it)."""
    if not cpu_has_native_bf16():
        return False

    import torch

    def seconds(dtype) -> float:
        a, b = torch.randn(256, 1024, dtype=dtype), torch.randn(1024, 2816, dtype=dtype)
        a @ b
        started = time.perf_counter()
        for _ in range(8):
            a @ b
        return time.perf_counter() - started

    return seconds(torch.float32) >= margin * seconds(torch.bfloat16)


def pick_dtype(dtype: str, device: str):
    """``auto`` means bf16 on CUDA; on a CPU, bf16 only where it measures faster than float32
    (:func:`cpu_bf16_is_faster`), else float32. The rule is the same for every kind of
    model (GGUF alias or file, local checkpoint, hub id); ``$LONGCTX_CPU_DTYPE`` overrides it."""
    import torch

    table = {
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float32": torch.float32,
        "fp32": torch.float32,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16
        forced = os.environ.get(CPU_DTYPE_ENV)
        if forced:
            if forced not in table:
                raise ParameterError(
                    f"{CPU_DTYPE_ENV}={forced!r} is not a dtype; use bfloat16 or float32"
                )
            return table[forced]
        return torch.bfloat16 if cpu_bf16_is_faster() else torch.float32
    if dtype not in table:
        raise ParameterError(f"unknown dtype '{dtype}'; use auto, bfloat16, float16 or float32")
    return table[dtype]


@register("hf", capabilities=(GENERATE, MASKED_PADDING, ATTENTION, RESCALED_POSITIONS))
@dataclass
class HFBackend(PromptReader):
    """The ``hf`` backend: transformers weights in torch, generation by :mod:`longctx.backends.hf_engine`."""

    ref: ModelRef
    model: object
    tokenizer: object
    device: str
    dtype: object
    chat: bool
    max_context: int
    extra: dict = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        target: LoadTarget,
        *,
        max_context: int | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> HFBackend:
        return load_model(
            target.model,
            device=target.device,
            dtype=target.dtype,
            prompt_mode=target.prompt_mode,
            max_context=max_context,
            progress=progress,
            ref=target.ref,
        )

    def generate(self, call: GenerateCall) -> list[Generation | None]:
        """Greedy generation of rendered prompts (:func:`longctx.backends.hf_engine.generate`);
        with ``call.positions``, read with Ms-PoE (:func:`.hf_mspoe.multiscale_positions`),
        one prompt at a time."""
        if call.positions is None:
            return generate(self, call)
        with multiscale_positions(self.model, *call.positions):
            return generate(self, replace(call, batch_size=1))

    def final_token_attention(self, rendered: str, layer: int | Sequence[int] = -1):
        """The prompt's token count and the attention its final token pays to every token
        in ``layer`` (or the mean over several layers), averaged over heads
        (:func:`.hf_attention.final_token_attention`): the :data:`~.base.ATTENTION`
        capability."""
        ids = self.tokenizer(rendered, add_special_tokens=False).input_ids
        self.check_fits(len(ids), 0)
        return len(ids), final_token_attention(self.model, ids, layer=layer)

    def token_offsets(self, rendered: str) -> list[tuple[int, int]]:
        """The character span of each token of ``rendered``, as :meth:`final_token_attention`
        tokenizes it (what maps a document's characters to its tokens)."""
        enc = self.tokenizer(rendered, add_special_tokens=False, return_offsets_mapping=True)
        return [tuple(span) for span in enc["offset_mapping"]]

    def run_params(self) -> dict:
        """Provenance of this backend's runs, stored with every row."""
        return {
            "backend": "hf",
            "device": self.device,
            "dtype": str(self.dtype).replace("torch.", ""),
        }


WEIGHTS_COMPLETE = "longctx-weights.json"
NO_WEIGHTS_CACHE_ENV = "LONGCTX_NO_WEIGHTS_CACHE"


def dequantized_weights(source: str, common: dict, torch_dtype) -> Path | None:
    """Where a GGUF file's weights, dequantized into ``torch_dtype``, are kept per machine
    (``$LONGCTX_CACHE/weights``): transformers dequantizes a GGUF file tensor by tensor in
    Python (about 20 s for the 135M model, in every process), while the saved checkpoint
    loads in a fraction of a second with the same tensors. None for other checkpoints (they
    load fast already) and where ``$LONGCTX_NO_WEIGHTS_CACHE`` is set (it saves the disk:
    about 2 bytes a parameter in bf16, 4 in float32)."""
    if "gguf_file" not in common or os.environ.get(NO_WEIGHTS_CACHE_ENV):
        return None
    dtype = str(torch_dtype).replace("torch.", "")
    return built_from_gguf("weights", Path(source) / common["gguf_file"], dtype)


def save_weights(model, target: Path) -> None:
    """Save ``model`` as a plain transformers checkpoint (config without the GGUF
    quantization entry, safetensors weights, generation config), atomically."""
    from safetensors.torch import save_model

    def write(folder: Path) -> None:
        config = model.config.to_dict()
        config.pop("quantization_config", None)  # the tensors are dequantized already
        (folder / "config.json").write_text(json.dumps(config, indent=2))
        model.generation_config.save_pretrained(str(folder))
        save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})
        (folder / WEIGHTS_COMPLETE).write_text(json.dumps({"dtype": str(model.dtype)}))

    save_folder_atomically(target, write, WEIGHTS_COMPLETE)


def load_model(
    name: str,
    *,
    device: str = "auto",
    dtype: str = "auto",
    prompt_mode: str = "auto",
    revision: str = "main",
    attn_implementation: str = "sdpa",
    max_context: int | None = None,
    progress: Callable[[str], None] | None = None,
    ref: ModelRef | None = None,
) -> HFBackend:
    """Load ``name`` (see module docstring) ready for greedy generation; ``ref``, its
    resolved weights where the caller has them (a :class:`~longctx.reader.Reader` does).

    ``prompt_mode``: ``chat`` wraps prompts in the tokenizer's chat template (aligned
    models), ``raw`` feeds them as plain completion text (base models), ``auto``
    uses chat when the tokenizer has a template.
    """
    check_prompt_mode(prompt_mode)
    ref = ref or resolve_model(name, revision)
    dev = pick_device(device)
    torch_dtype = pick_dtype(dtype, dev)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers import AutoModelForCausalLM

    if progress:
        progress(f"loading {name} on {dev} ({str(torch_dtype).replace('torch.', '')})")
    source, common = weights_source(ref, revision)
    try:
        tokenizer = fresh_tokenizer(name, revision)
        saved = dequantized_weights(source, common, torch_dtype)
        if saved is not None and (saved / WEIGHTS_COMPLETE).is_file():
            model = AutoModelForCausalLM.from_pretrained(
                str(saved),
                dtype=torch_dtype,
                attn_implementation=attn_implementation,
                trust_remote_code=False,
            )
        else:
            model = AutoModelForCausalLM.from_pretrained(
                source, dtype=torch_dtype, attn_implementation=attn_implementation, **common
            )
            if saved is not None:
                save_weights(model, saved)
    except OSError as err:
        raise UnknownModelError(f"could not load '{name}': {str(err).splitlines()[0]}") from None
    model.to(dev).eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    chat = chat_mode(tokenizer, ref, prompt_mode, name)
    window = window_of_config(model.config)
    if window is None:
        raise ParameterError(f"cannot tell {name}'s context window from its config")
    if max_context:
        window = min(window, max_context)
    return HFBackend(ref, model, tokenizer, dev, torch_dtype, chat, window)
