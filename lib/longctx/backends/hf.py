"""The ``hf`` backend: transformers weights in torch, generation by :mod:`longctx.engine`.

The backend object is :class:`longctx.models.LoadedModel` (the class every chapter used
before backends existed, so its rows keep their keys). It is the only backend with the
model's weights at hand, hence the only one for masked padding (explicit position ids,
:func:`longctx.engine.generate_masked`) and attention (:mod:`longctx.attention`).
"""

from __future__ import annotations

from typing import Callable

from ..models import LoadedModel, load_model

__all__ = ["LoadedModel", "load"]


def load(model: str, *, device: str = "auto", dtype: str = "auto", prompt_mode: str = "auto",
         max_context: int | None = None, progress: Callable[[str], None] | None = None) -> LoadedModel:
    """``model`` on ``device`` in ``dtype`` (see :func:`longctx.models.load_model`)."""
    return load_model(model, device=device, dtype=dtype, prompt_mode=prompt_mode, max_context=max_context,
                      progress=progress)
