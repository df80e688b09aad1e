"""The ``openai`` backend: any OpenAI-compatible completions server (vLLM, SGLang,
TensorRT-LLM, llama.cpp's server), as RULER, HELMET and lm-evaluation-harness's
``local-completions`` use them.

Each request goes to ``POST {url}/completions`` with the prompt already rendered by the
model's own chat template (so it is byte-identical to what the ``hf`` and ``llamacpp``
backends read), ``temperature=0`` and ``max_tokens``. Prompts with token-level filler
(whitespace units, single-space or newline tokens) are sent as token ids, since no text
tokenizes to them. Responses are streamed, and a stream is closed as soon as the
request's :class:`~longctx.requests.StopRule` fires, so the server stops decoding once the
answer is complete, like the other backends.

Requests run ``concurrency`` at a time (the server batches them); each has a timeout, and
connection errors, timeouts, 429 and 5xx answers are retried with exponential backoff. A
request that still fails stops the run with a :class:`~longctx.errors.BackendError`; only
requests that completed are handed to ``on_batch`` (and so stored), so a rerun after the
server is back does only what is missing.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

from ..errors import BackendError
from ..models import load_tokenizer, resolve_model
from ..requests import Generation, StopRule
from ._common import Prepared, prepare
from .base import BackendSpec, PromptReader, chat_mode, register

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


@register("openai")
class OpenAIBackend(PromptReader):
    def __init__(
        self,
        model: str,
        spec: BackendSpec,
        *,
        prompt_mode: str = "auto",
        max_context: int | None = None,
        progress: Callable[[str], None] | None = None,
        tokenizer=None,
    ):
        import httpx

        self.ref = resolve_model(model)
        self.spec = spec
        self.url = spec.url.rstrip("/")
        self.served_model = spec.served_model or model
        self.client = httpx.Client(timeout=httpx.Timeout(spec.timeout_s, connect=10.0))
        served = self._served_models()  # before anything slow: a wrong URL fails at once
        if self.served_model not in served:
            raise BackendError(
                f"the server at {self.url} serves {', '.join(served) or 'no model'}, not "
                f"'{self.served_model}'; start it with that model (or that alias), or pass "
                f"served_model='<id>' if it serves this model under another name"
            )
        # The serving model's tokenizer renders the chat template and measures filler; a user
        # whose model is only on the server passes its hub id (the tokenizer is small).
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model)
        self.chat = chat_mode(self.tokenizer, self.ref, prompt_mode, model)
        window = served[self.served_model] or getattr(self.tokenizer, "model_max_length", None)
        window = window if isinstance(window, int) and 0 < window < 10**8 else 32768
        self.max_context = min(window, max_context) if max_context else window
        if progress:
            progress(
                f"{model} via {self.url} (model '{self.served_model}', {self.max_context}-token window)"
            )

    def _served_models(self) -> dict[str, int | None]:
        """Model ids the server lists, with their context window where it says."""
        import httpx

        try:
            response = self.client.get(f"{self.url}/models", timeout=10.0)
        except httpx.HTTPError as err:
            raise BackendError(
                f"cannot reach an OpenAI-compatible server at {self.url} "
                f"({type(err).__name__}); is it running, and does the URL end in /v1?"
            ) from None
        if response.status_code != 200:
            raise BackendError(
                f"{self.url}/models answered HTTP {response.status_code}; "
                f"is {self.url} an OpenAI-compatible API (ending in /v1)?"
            )
        try:
            data = response.json()["data"]
        except (ValueError, KeyError, TypeError):
            raise BackendError(f"{self.url}/models did not return an OpenAI model list") from None
        return {m["id"]: m.get("max_model_len") for m in data if isinstance(m, dict) and "id" in m}

    def run_params(self) -> dict:
        return {
            "backend": "openai",
            "served_model": self.served_model,
            "url": self.url,
            "concurrency": self.spec.concurrency,
        }

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int,
        stop_rules=None,
        batch_size: int = 8,
        progress: bool = True,
        desc: str = "generating",
        on_batch=None,
    ) -> list[Generation]:
        """Answer ``prompts`` (rendered) ``concurrency`` at a time; ``on_batch(indices,
        generations)`` receives every completed group of ``max(batch_size, concurrency)``."""
        prepared, rules = prepare(self, prompts, max_new_tokens, stop_rules, batch_size, "openai")
        group = max(batch_size, self.spec.concurrency)
        results: list[Generation | None] = [None] * len(prompts)
        bar = tqdm(
            total=len(prompts), desc=desc, unit="prompt", disable=not progress, file=sys.stderr
        )
        with ThreadPoolExecutor(max_workers=self.spec.concurrency) as pool:
            for start in range(0, len(prompts), group):
                idxs = list(range(start, min(start + group, len(prompts))))
                futures = [
                    pool.submit(self._one, prepared[i], max_new_tokens, rules[i]) for i in idxs
                ]
                done, failure = [], None
                for i, fut in zip(idxs, futures):
                    try:
                        results[i] = fut.result()
                        done.append(i)
                    except BackendError as err:
                        failure = failure or err
                if on_batch is not None and done:
                    on_batch(done, [results[i] for i in done])
                bar.update(len(done))
                if failure is not None:
                    bar.close()
                    raise failure
        bar.close()
        return results  # type: ignore[return-value]

    def _one(self, p: Prepared, max_new_tokens: int, rule: StopRule) -> Generation:
        # Plain greedy decoding: no repetition penalty (llama.cpp's server defaults to 1.1 and
        # names it repeat_penalty; vLLM and SGLang call it repetition_penalty).
        body = {
            "model": self.served_model,
            "prompt": p.ids if p.ids_only else p.text,
            "max_tokens": max_new_tokens,
            "temperature": 0.0,
            "top_p": 1.0,
            "stream": True,
            "repeat_penalty": 1.0,
            "repetition_penalty": 1.0,
        }
        started = time.perf_counter()
        for attempt in range(self.spec.retries + 1):
            try:
                raw, finish = self._stream(body, rule)
                break
            except _Retryable as err:
                if attempt == self.spec.retries:
                    raise BackendError(
                        f"request to {self.url}/completions failed after {attempt + 1} tries: {err}"
                    ) from None
                time.sleep(min(30.0, 0.5 * 2**attempt))
        seconds = time.perf_counter() - started
        text, fired = rule.cut(raw)
        new_tokens = len(self.tokenizer(raw, add_special_tokens=False).input_ids)
        reason = "stop_rule" if fired else "max_new_tokens" if finish == "length" else "eos"
        return Generation(
            text.strip(),
            raw,
            len(p.ids),
            new_tokens,
            fired,
            seconds,
            1,
            extra={"finish_reason": finish},
            stop_reason=reason,
        )

    def _stream(self, body: dict, rule: StopRule) -> tuple[str, str | None]:
        """One streamed completion: the text (until the stop rule fires) and the finish reason."""
        import httpx

        pieces: list[str] = []
        finish = None
        try:
            with self.client.stream("POST", f"{self.url}/completions", json=body) as response:
                if response.status_code in RETRY_STATUS:
                    raise _Retryable(f"HTTP {response.status_code}")
                if response.status_code != 200:
                    response.read()
                    raise BackendError(
                        f"{self.url}/completions answered HTTP {response.status_code}: "
                        f"{response.text[:200]}"
                    )
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        raise BackendError(
                            f"{self.url}/completions streamed something that is not JSON: "
                            f"{data[:200]!r}"
                        ) from None
                    if "error" in chunk:
                        raise _Retryable(f"server error: {str(chunk['error'])[:200]}")
                    choice = (chunk.get("choices") or [{}])[0]
                    pieces.append(choice.get("text") or "")
                    finish = choice.get("finish_reason") or finish
                    if rule.cut("".join(pieces))[1]:
                        return "".join(
                            pieces
                        ), finish  # leaving the block closes the stream: decoding stops
        except httpx.HTTPError as err:
            raise _Retryable(f"{type(err).__name__}: {err}") from None
        if finish is None:
            # A stream that ends with no finish reason was cut off (llama.cpp's server, for one,
            # interrupts a request when another arrives): never store it as an answer.
            raise _Retryable("the stream ended before the server said why it finished")
        return "".join(pieces), finish


class _Retryable(Exception):
    pass
