"""Batched greedy generation with length-sorted buckets and per-row stop rules.

Prompts are tokenized once, sorted by length, and cut into batches so that each
batch pads little (left padding, explicit position ids). Each row stops on its own
:class:`StopRule` or end token and then leaves the batch, so the batch shrinks to the
rows still answering; it ends when every row has stopped or hit ``max_new_tokens``.
Outputs are cut at the stop point, so the text of a row does not depend on which batch
it ran in.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from tqdm import tqdm

from ..errors import ParameterError
from ..padding import MASKED_GAP, encode_prompt, expand_fillers, split_masked
from ..requests import GenerateCall, Generation, StopRule, past, stop_rules_for


def _buckets(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def generate(lm, call: GenerateCall) -> list[Generation | None]:
    """Greedy-decode ``call.prompts`` (already rendered for the model) in length-sorted batches.

    Prompts with masked gaps (:func:`longctx.padding.masked_gap`) are decoded with shifted
    position ids (:func:`masked_inputs`); ``Generation.extra`` then records the computed and
    the masked token counts, and ``prompt_tokens`` is the length the model perceives.
    ``call.on_batch(indices, generations)`` is called after each batch so callers can
    persist results as they arrive (an interrupted run then loses at most one batch).
    Raises :class:`ContextTooLongError` before any work if a prompt does not fit. No batch
    starts after ``call.stop_at`` (a :func:`time.time` value); the prompts left have None.
    """
    prompts, max_new_tokens, batch_size = call.prompts, call.max_new_tokens, call.batch_size
    if max_new_tokens < 1:
        raise ParameterError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if batch_size < 1:
        raise ParameterError(f"batch_size must be >= 1, got {batch_size}")
    stop_rules = stop_rules_for(call.stop_rules, len(prompts))
    tok = lm.tokenizer
    prompts = [expand_fillers(p, tok) for p in prompts]
    inputs = [masked_inputs(tok, p) for p in prompts]
    for i, (p, (_, pos)) in enumerate(zip(prompts, inputs)):
        label = f"prompt {i} (with its masked gaps)" if MASKED_GAP.search(p) else f"prompt {i}"
        lm.check_fits(pos[-1] + 1 if pos else 0, max_new_tokens, label=label)
    eos = set(_eos_ids(lm))
    results: list[Generation | None] = [None] * len(prompts)
    bar = tqdm(
        total=len(prompts),
        desc=call.desc,
        unit="prompt",
        disable=not call.progress,
        file=sys.stderr,
    )
    for batch in _buckets([len(inputs[i][0]) for i in range(len(prompts))], batch_size):
        if past(call.stop_at):
            break
        rows = len(batch)
        started = time.perf_counter()
        new_tokens = _decode_batch(
            lm, [inputs[i] for i in batch], max_new_tokens, [stop_rules[i] for i in batch], eos
        )
        seconds = time.perf_counter() - started
        gens = []
        for r, i in enumerate(batch):
            computed = len(inputs[i][0])
            perceived = inputs[i][1][-1] + 1 if inputs[i][1] else 0
            extra = (
                {"computed_prompt_tokens": computed, "masked_tokens": perceived - computed}
                if perceived != computed
                else {}
            )
            gen = _finish(tok, new_tokens[r], eos, stop_rules[i], perceived, seconds, rows, extra)
            results[i] = gen
            gens.append(gen)
        if call.on_batch is not None:
            call.on_batch(batch, gens)
        bar.update(rows)
    bar.close()
    return results  # type: ignore[return-value]


def masked_inputs(tokenizer, prompt: str) -> tuple[list[int], list[int]]:
    """Token ids and position ids of a prompt, which may hold masked gaps
    (:func:`longctx.padding.masked_gap`); without gaps the positions are 0, 1, 2, ...

    The gaps are never tokenized: the segments around them are tokenized separately and
    every token after a gap of ``n`` tokens gets its position shifted by ``n``. The
    model therefore sees the evidence and the question exactly where they would sit in
    the long input while attending to nothing in between, at the cost of the short input.
    """
    segments, gaps = split_masked(prompt)
    ids: list[int] = []
    positions: list[int] = []
    offset = 0
    for k, segment in enumerate(segments):
        seg_ids = encode_prompt(tokenizer, segment) if segment else []
        positions.extend(range(offset + len(ids), offset + len(ids) + len(seg_ids)))
        ids.extend(seg_ids)
        if k < len(gaps):
            offset += gaps[k]
    return ids, positions


def _decode_batch(lm, inputs, max_new_tokens: int, rules, eos: set) -> list[list[int]]:
    """Greedy new tokens for one left-padded batch of (token ids, position ids), with a KV
    cache and each new token at the position after its row's last. A row stops at an end
    token or when its stop rule cuts the text, and leaves the batch then (its cache rows are
    dropped): a batch whose one answer runs to ``max_new_tokens`` decodes that answer alone
    instead of carrying every finished row with it."""
    import torch
    from transformers import DynamicCache

    tok, model = lm.tokenizer, lm.model
    pad = tok.pad_token_id
    width = max(len(ids) for ids, _ in inputs)
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids, _ in inputs])
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids, _ in inputs])
    positions = torch.tensor([[0] * (width - len(pos)) + pos for _, pos in inputs])
    new_tokens: list[list[int]] = [[] for _ in inputs]
    active = list(range(len(inputs)))  # batch rows still decoding, in cache order
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)  # the forward fills it in place
        cache_arg = {_cache_keyword(model): cache}
        step_ids, step_pos = input_ids.to(lm.device), positions.to(lm.device)
        mask = mask.to(lm.device)
        for _ in range(max_new_tokens):
            out = model(
                input_ids=step_ids,
                attention_mask=mask,
                position_ids=step_pos,
                use_cache=True,
                logits_to_keep=1,
                **cache_arg,
            )
            nxt = out.logits[:, -1, :].argmax(-1)
            keep = []
            for k, (r, t) in enumerate(zip(active, nxt.tolist())):
                new_tokens[r].append(t)
                text = tok.decode(new_tokens[r], skip_special_tokens=True)
                if not (t in eos or rules[r].cut(text)[1]):
                    keep.append(k)
            if not keep:
                break
            step_pos = step_pos[:, -1:] + 1
            if len(keep) < len(active):
                kept = torch.tensor(keep, device=nxt.device)
                cache.batch_select_indices(kept)
                nxt, step_pos, mask = nxt[kept], step_pos[kept], mask[kept]
                active = [active[k] for k in keep]
            step_ids = nxt[:, None]
            mask = torch.cat(
                [mask, torch.ones((len(active), 1), dtype=mask.dtype, device=mask.device)], dim=1
            )
    return new_tokens


def _cache_keyword(model) -> str:
    """The forward's key-value cache argument: ``cache`` where transformers has renamed
    ``past_key_values`` (the old name warns there, and goes in a later release)."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _finish(
    tok,
    new: list[int],
    eos: set,
    rule: StopRule,
    prompt_tokens: int,
    seconds: float,
    rows: int,
    extra: dict | None = None,
) -> Generation:
    """A row's Generation: new tokens up to the first EOS, decoded, cut at its stop rule."""
    first_eos = next((k for k, t in enumerate(new) if t in eos), None)
    n_new = len(new) if first_eos is None else first_eos + 1
    raw = tok.decode(new[:n_new], skip_special_tokens=True)
    text, fired = rule.cut(raw)
    reason = "stop_rule" if fired else "eos" if first_eos is not None else "max_new_tokens"
    return Generation(
        text.strip(),
        raw,
        prompt_tokens,
        n_new,
        fired,
        seconds,
        rows,
        extra=extra or {},
        stop_reason=reason,
    )


def _eos_ids(lm) -> list[int]:
    ids = lm.model.generation_config.eos_token_id
    if ids is None:
        ids = lm.tokenizer.eos_token_id
    return list(ids) if isinstance(ids, (list, tuple)) else [ids]
