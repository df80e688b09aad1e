"""Batched greedy generation with length-sorted buckets and per-row stop rules.

Prompts are tokenized once, sorted by length, and cut into batches so that each
batch pads little (left padding, the position ids follow the attention mask).
Each row stops on its own :class:`StopRule`; a batch ends when every row has
stopped or hit ``max_new_tokens``. Outputs are cut at the stop point, so the
text of a row does not depend on which batch it ran in.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace

from tqdm import tqdm

from ..errors import ParameterError
from ..padding import MASKED_GAP, encode_prompt, expand_fillers, split_masked
from ..requests import GenerateCall, Generation, StopRule, past, stop_rules_for


def _buckets(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


class _RowStop:
    """transformers StoppingCriteria that returns a per-row done vector."""

    def __init__(self, tokenizer, prompt_len: int, rules: list[StopRule]):
        self.tokenizer, self.prompt_len, self.rules = tokenizer, prompt_len, rules

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        done = []
        new = input_ids[
            :, self.prompt_len :
        ].tolist()  # one device-to-host copy per step, not one per row
        for row, rule in zip(new, self.rules):
            text = self.tokenizer.decode(row, skip_special_tokens=True)
            done.append(rule.cut(text)[1])
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def generate(lm, call: GenerateCall) -> list[Generation | None]:
    """Greedy-decode ``call.prompts`` (already rendered for the model) in length-sorted batches.

    ``call.on_batch(indices, generations)`` is called after each batch so callers can
    persist results as they arrive (an interrupted run then loses at most one batch).
    Raises :class:`ContextTooLongError` before any work if a prompt does not fit. No batch
    starts after ``call.stop_at`` (a :func:`time.time` value); the prompts left have None.
    """
    import torch
    from transformers import StoppingCriteriaList

    prompts, max_new_tokens, stop_rules = call.prompts, call.max_new_tokens, call.stop_rules
    batch_size, progress, desc = call.batch_size, call.progress, call.desc
    on_batch, stop_at = call.on_batch, call.stop_at

    if max_new_tokens < 1:
        raise ParameterError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if batch_size < 1:
        raise ParameterError(f"batch_size must be >= 1, got {batch_size}")
    stop_rules = stop_rules_for(stop_rules, len(prompts))
    prompts = [expand_fillers(p, lm.tokenizer) for p in prompts]
    masked = [i for i, p in enumerate(prompts) if MASKED_GAP.search(p)]
    if masked:
        return _generate_in_two_parts(
            lm, replace(call, prompts=prompts, stop_rules=stop_rules), masked
        )
    tok = lm.tokenizer
    encoded = [encode_prompt(tok, p) for p in prompts]
    for i, ids in enumerate(encoded):
        lm.check_fits(len(ids), max_new_tokens, label=f"prompt {i}")
    results: list[Generation | None] = [None] * len(prompts)
    eos = set(_eos_ids(lm))
    bar = tqdm(total=len(prompts), desc=desc, unit="prompt", disable=not progress, file=sys.stderr)
    for batch in _buckets([len(e) for e in encoded], batch_size):
        if past(stop_at):
            break
        width = max(len(encoded[i]) for i in batch)
        pad = tok.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(encoded[i])) + encoded[i] for i in batch])
        mask = torch.tensor(
            [[0] * (width - len(encoded[i])) + [1] * len(encoded[i]) for i in batch]
        )
        rules = [stop_rules[i] for i in batch]
        started = time.perf_counter()
        with torch.inference_mode():
            out = lm.model.generate(
                input_ids=input_ids.to(lm.device),
                attention_mask=mask.to(lm.device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=pad,
                stopping_criteria=StoppingCriteriaList([_RowStop(tok, width, rules)]),
            )
        seconds = time.perf_counter() - started
        gens = []
        for row, i in enumerate(batch):
            gen = _finish(
                tok,
                out[row, width:].tolist(),
                eos,
                stop_rules[i],
                len(encoded[i]),
                seconds,
                len(batch),
            )
            results[i] = gen
            gens.append(gen)
        if on_batch is not None:
            on_batch(batch, gens)
        bar.update(len(batch))
    bar.close()
    return results  # type: ignore[return-value]


def _generate_in_two_parts(lm, call: GenerateCall, masked: list[int]) -> list[Generation]:
    """Masked-gap prompts through :func:`generate_masked`, the others through ``model.generate``
    (``call.stop_rules`` holds one rule per prompt)."""
    prompts, rules = call.prompts, call.stop_rules
    results: list[Generation | None] = [None] * len(prompts)
    plain = [i for i in range(len(prompts)) if i not in set(masked)]
    for idxs, fn in ((plain, generate), (masked, generate_masked)):
        if not idxs:
            continue

        def relay(batch, gens, idxs=idxs):
            if call.on_batch is not None:
                call.on_batch([idxs[b] for b in batch], gens)

        part = replace(
            call,
            prompts=[prompts[i] for i in idxs],
            stop_rules=[rules[i] for i in idxs],
            on_batch=relay,
        )
        for i, g in zip(idxs, fn(lm, part)):
            results[i] = g
    return results  # type: ignore[return-value]


def masked_inputs(tokenizer, prompt: str) -> tuple[list[int], list[int]]:
    """Token ids and position ids of a prompt with masked gaps (:func:`longctx.padding.masked_gap`).

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


def generate_masked(lm, call: GenerateCall) -> list[Generation | None]:
    """Greedy decoding with explicit position ids, for prompts with masked gaps.

    A small loop over the model's forward pass with a KV cache: ``model.generate``
    derives position ids from the attention mask and cannot take shifted ones. Rows are
    left-padded in length-sorted batches like :func:`generate`; each generated token
    takes the position after its row's last one. ``Generation.extra`` records the
    computed and the masked token counts; ``prompt_tokens`` is the length the model
    perceives (computed + masked).
    """
    prompts, max_new_tokens, batch_size = call.prompts, call.max_new_tokens, call.batch_size
    progress, desc, on_batch, stop_at = call.progress, call.desc, call.on_batch, call.stop_at
    stop_rules = stop_rules_for(call.stop_rules, len(prompts))
    tok = lm.tokenizer
    inputs = [masked_inputs(tok, p) for p in prompts]
    for i, (_, pos) in enumerate(inputs):
        lm.check_fits(
            pos[-1] + 1 if pos else 0, max_new_tokens, label=f"prompt {i} (with its masked gaps)"
        )
    eos = set(_eos_ids(lm))
    results: list[Generation | None] = [None] * len(prompts)
    bar = tqdm(total=len(prompts), desc=desc, unit="prompt", disable=not progress, file=sys.stderr)
    for batch in _buckets([len(inputs[i][0]) for i in range(len(prompts))], batch_size):
        if past(stop_at):
            break
        rows = len(batch)
        started = time.perf_counter()
        new_tokens = _decode_masked_batch(
            lm, [inputs[i] for i in batch], max_new_tokens, [stop_rules[i] for i in batch], eos
        )
        seconds = time.perf_counter() - started
        gens = []
        for r, i in enumerate(batch):
            computed = len(inputs[i][0])
            perceived = inputs[i][1][-1] + 1 if inputs[i][1] else 0
            gen = _finish(
                tok,
                new_tokens[r],
                eos,
                stop_rules[i],
                perceived,
                seconds,
                rows,
                extra={"computed_prompt_tokens": computed, "masked_tokens": perceived - computed},
            )
            results[i] = gen
            gens.append(gen)
        if on_batch is not None:
            on_batch(batch, gens)
        bar.update(rows)
    bar.close()
    return results  # type: ignore[return-value]


def _decode_masked_batch(lm, inputs, max_new_tokens: int, rules, eos: set) -> list[list[int]]:
    """Greedy new tokens for one left-padded batch of (token ids, position ids), with a KV
    cache and each new token at the position after its row's last; a row stops at an end
    token or when its stop rule cuts the text."""
    import torch
    from transformers import DynamicCache

    tok, model = lm.tokenizer, lm.model
    pad = tok.pad_token_id
    width = max(len(ids) for ids, _ in inputs)
    rows = len(inputs)
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids, _ in inputs])
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids, _ in inputs])
    positions = torch.tensor([[0] * (width - len(pos)) + pos for _, pos in inputs])
    new_tokens: list[list[int]] = [[] for _ in inputs]
    done = [False] * rows
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        step_ids, step_pos = input_ids.to(lm.device), positions.to(lm.device)
        mask = mask.to(lm.device)
        for _ in range(max_new_tokens):
            out = model(
                input_ids=step_ids,
                attention_mask=mask,
                position_ids=step_pos,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            cache = out.past_key_values
            nxt = out.logits[:, -1, :].argmax(-1)
            for r in range(rows):
                if done[r]:
                    continue
                t = int(nxt[r])
                new_tokens[r].append(t)
                text = tok.decode(new_tokens[r], skip_special_tokens=True)
                if t in eos or rules[r].cut(text)[1]:
                    done[r] = True
            if all(done):
                break
            step_ids = nxt[:, None]
            step_pos = step_pos[:, -1:] + 1
            mask = torch.cat(
                [mask, torch.ones((rows, 1), dtype=mask.dtype, device=mask.device)], dim=1
            )
    return new_tokens


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
