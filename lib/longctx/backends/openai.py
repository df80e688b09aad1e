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

Requests run ``concurrency`` at a time (the server batches them); each try of a request
takes at most ``timeout_s`` as a whole, and connection errors, timeouts, 429 and 5xx
answers are retried after the server's ``Retry-After`` or with exponential backoff. An
answer longer than ``max_tokens`` can be (a server that ignores it, or streams forever) is
refused, never stored. A request that still fails stops the run with
a :class:`~longctx.errors.BackendError`; only requests that completed are handed to
``on_batch`` (and so stored), so a rerun after the server is back does only what is missing.
A deadline (``stop_at``) stops starting requests and abandons the ones in flight.

The context window is the server's where it says (vLLM's and SGLang's ``max_model_len`` in
``/v1/models``, llama.cpp's ``n_ctx`` in ``/props``), else ``context_window`` of the
:class:`~longctx.backends.base.BackendSpec`, else the model's own; a prompt the server still
refuses as too long is a one-line error, never retried. llama.cpp's server cuts a stream
whenever another request arrives unless started with ``--interrupt_requests False``; a stream
cut while others are in flight says so. A server that ignores ``stream`` and answers whole
is read whole.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from tqdm import tqdm

from ..errors import BackendError, ContextTooLongError, LongctxError, ParameterError
from ..jsonl import iter_text_lines
from ..models import context_window, load_tokenizer
from ..requests import GenerateCall, Generation, StopRule, past
from ._common import Prepared, prepare
from .base import LoadTarget, PromptReader, chat_mode, register

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
MAX_RETRY_AFTER_S = 120.0  # the longest a Retry-After is waited for, per retry


def _valid_text(text: str) -> str:
    """A server's text with each lone surrogate (legal in JSON's \\u escapes, not in UTF-8)
    replaced by one U+FFFD, so it can be tokenized and stored."""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class OpenAIOptions:
    """``url``: the server's base URL (e.g. ``http://127.0.0.1:8000/v1``); ``served_model``:
    the model id it serves (default: the model name; part of the rows' identity, the URL is
    not); ``concurrency``: requests in flight; ``timeout_s``: the longest one try of a request
    may take, from sending it to its last token (a hung or trickling server fails a request
    after ``retries + 1`` tries, about 8 minutes by default, not hours); ``retries``: how
    often a connection error, timeout, 429 or 5xx is tried again (after the server's
    ``Retry-After`` where it gives one); ``context_window``: the server's window in tokens, for a server
    that does not say it (llama-cpp-python's)."""

    url: str | None = None
    served_model: str | None = None
    concurrency: int = 8
    timeout_s: float = 120.0
    retries: int = 3
    context_window: int | None = None

    def __post_init__(self):
        if not self.url:
            raise ParameterError(
                "backend 'openai' needs the server's URL (--url on the command line, url= in "
                "Python, reader_options['url'] in a notebook), e.g. http://127.0.0.1:8000/v1"
            )
        if self.concurrency < 1 or self.retries < 0 or self.timeout_s <= 0:
            raise ParameterError(
                f"concurrency must be at least 1 (not {self.concurrency}), retries at least 0 "
                f"(not {self.retries}) and the timeout above 0 s (not {self.timeout_s})"
            )


@register("openai")
class OpenAIBackend(PromptReader):
    Options = OpenAIOptions

    def __init__(
        self,
        target: LoadTarget,
        *,
        max_context: int | None = None,
        progress: Callable[[str], None] | None = None,
        tokenizer=None,
    ):
        model, spec, prompt_mode = target.model, target.backend, target.prompt_mode
        self.ref = target.ref
        self.spec = spec
        self.url = spec.options.url.rstrip("/")
        self.served_model = spec.options.served_model or model
        self.client = self._new_client()
        served = self._served_models()  # before anything slow: a wrong URL fails at once
        if self.served_model not in served:
            raise BackendError(
                f"the server at {self.url} serves {', '.join(served) or 'no model'}, not "
                f"'{self.served_model}'; start it with that model (or that alias), or pass "
                f"--served-model <id> if it serves this model under another name"
            )
        # The serving model's tokenizer renders the chat template and measures filler; a user
        # whose model is only on the server passes its hub id (the tokenizer is small).
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model)
        self.chat = chat_mode(self.tokenizer, self.ref, prompt_mode, model)
        window, self.window_source = self._window(served[self.served_model])
        self.max_context = min(window, max_context) if max_context else window
        self._in_flight = 0
        self._in_flight_lock = threading.Lock()
        if progress:
            progress(
                f"{model} via {self.url} (model '{self.served_model}', {self.max_context}-token "
                f"window from {self.window_source})"
            )

    def _new_client(self):
        import httpx

        timeout = self.spec.options.timeout_s
        return httpx.Client(timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)))

    def _window(self, listed: int | None) -> tuple[int, str]:
        """The context window and where it came from: the one the user gave, else the server's
        own word, else the model's (the server may serve it with a smaller one: a prompt it
        then refuses is a one-line error naming ``--context-window``)."""
        if self.spec.options.context_window:
            return self.spec.options.context_window, "--context-window"
        if listed:
            return listed, "the server's /v1/models"
        props = self._props_window()
        if props:
            return props, "the server's /props"
        own = context_window(self.ref)
        if own:
            return own, "the model's config (the server does not say its own)"
        raise ParameterError(
            f"the server at {self.url} does not say its context window and {self.ref.name}'s "
            f"config has none: pass --context-window N (context_window= in Python)"
        )

    def _props_window(self) -> int | None:
        """llama.cpp's server says its window in ``/props`` (beside, not under, ``/v1``)."""
        import httpx

        try:
            response = self.client.get(f"{self.url.removesuffix('/v1')}/props", timeout=10.0)
            data = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        settings = data.get("default_generation_settings")
        for value in (
            data.get("n_ctx"),
            settings.get("n_ctx") if isinstance(settings, dict) else None,
        ):
            if isinstance(value, int) and value > 0:
                return value
        return None

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
            data = None
        if not isinstance(data, list):
            raise BackendError(f"{self.url}/models did not return an OpenAI model list")
        return {m["id"]: _window(m.get("max_model_len")) for m in data if _is_model_entry(m)}

    def run_params(self) -> dict:
        return {
            "backend": "openai",
            "served_model": self.served_model,
            "url": self.url,
            "concurrency": self.spec.options.concurrency,
        }

    def generate(self, call: GenerateCall) -> list[Generation | None]:
        """Answer ``prompts`` (rendered) ``concurrency`` at a time; ``on_batch(indices,
        generations)`` receives every completed group of ``max(batch_size, concurrency)``.
        After ``stop_at`` (a :func:`time.time` value) no request starts and those in flight
        are abandoned: their places in the result are None."""
        prompts, max_new_tokens, stop_rules = call.prompts, call.max_new_tokens, call.stop_rules
        batch_size, progress, desc = call.batch_size, call.progress, call.desc
        on_batch, stop_at = call.on_batch, call.stop_at
        prepared, rules = prepare(self, prompts, max_new_tokens, stop_rules, batch_size, "openai")
        group = max(batch_size, self.spec.options.concurrency)
        results: list[Generation | None] = [None] * len(prompts)
        bar = tqdm(
            total=len(prompts), desc=desc, unit="prompt", disable=not progress, file=sys.stderr
        )
        pool = ThreadPoolExecutor(
            max_workers=self.spec.options.concurrency, initializer=_leave_ctrl_c_to_the_main_thread
        )
        halt = _Halt(stop_at, self.client)
        try:
            for start in range(0, len(prompts), group):
                if past(stop_at):
                    break
                idxs = list(range(start, min(start + group, len(prompts))))
                pending = {
                    pool.submit(self._one, prepared[i], max_new_tokens, rules[i], halt): i
                    for i in idxs
                }
                failure = None
                while pending and failure is None:
                    # A timed wait: Ctrl-C is noticed within a second, whichever thread the
                    # signal reached.
                    finished, _ = wait(pending, timeout=1.0, return_when=FIRST_EXCEPTION)
                    for fut in finished:
                        i = pending.pop(fut)
                        try:
                            results[i] = fut.result()
                        except LongctxError as err:
                            failure = failure or err
                done = [i for i in idxs if results[i] is not None]
                if on_batch is not None and done:
                    on_batch(done, [results[i] for i in done])
                bar.update(len(done))
                if failure is not None:
                    # A request that cannot succeed (a wrong model, an interrupting server, a
                    # refused prompt) is named now, not after the answers still in flight:
                    # those are abandoned, and what completed was handed on above.
                    self._abandon(pool, halt)
                    raise failure
        except KeyboardInterrupt:
            self._abandon(pool, halt)
            raise
        finally:
            bar.close()
        pool.shutdown()
        return results

    def _abandon(self, pool: ThreadPoolExecutor, halt: _Halt) -> None:
        """Stop waiting for requests in flight (a hung server would hold the exit for its
        timeouts): closing the call's client ends their connections, a request that starts
        after this finds that client closed and stops, and a new client serves the next call."""
        halt.event.set()
        pool.shutdown(wait=False, cancel_futures=True)
        if self.client is halt.client:
            self.client = self._new_client()
        halt.client.close()

    def _one(
        self, p: Prepared, max_new_tokens: int, rule: StopRule, halt: _Halt
    ) -> Generation | None:
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
        for attempt in range(self.spec.options.retries + 1):
            if halt():
                return None
            try:
                raw, finish = self._stream(body, rule, len(p.ids), halt)
                break
            except _Stopped:
                return None
            except _Retryable as err:
                if halt():
                    return None
                # A stream that ends cleanly, with no finish reason, while other requests are
                # in flight is llama.cpp's interrupting server: every retry would be cut again
                # once the next request's prompt is read, so it is named at once.
                if err.while_busy:
                    raise BackendError(
                        f"{self.url} cut a streamed answer off whenever another request "
                        f"arrived (llama.cpp's server does so by default): start it with "
                        f"--interrupt_requests False, or pass --concurrency 1"
                    ) from None
                if attempt == self.spec.options.retries:
                    raise BackendError(
                        f"request to {self.url}/completions failed after {attempt + 1} tries: "
                        f"{err} (waits of --timeout {self.spec.options.timeout_s:g} s, "
                        f"--retries {self.spec.options.retries})"
                    ) from None
                # The server's Retry-After where it says one (a 429 asking for 5 s is waited
                # for, not retried sooner), else exponential backoff; never past the deadline.
                pause = min(MAX_RETRY_AFTER_S, err.after) if err.after else 0.5 * 2**attempt
                if halt.stop_at is not None:
                    pause = min(pause, max(0.0, halt.stop_at - time.time()))
                halt.event.wait(min(MAX_RETRY_AFTER_S, pause))  # an abandoned call wakes it
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

    def _stream(
        self, body: dict, rule: StopRule, n_prompt: int, halt: _Halt
    ) -> tuple[str, str | None]:
        """One streamed completion: the text (until the stop rule fires) and the finish reason."""
        import httpx

        with self._in_flight_lock:
            self._in_flight += 1
        try:
            # The call's own client, never a later call's: abandoning the call closes it.
            with halt.client.stream(
                "POST", f"{self.url}/completions", json=body, timeout=self._timeout(halt.stop_at)
            ) as response:
                self._check_status(response, n_prompt, body)
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    # A server that ignores stream=true answers with the whole completion.
                    response.read()
                    return self._whole(response.text, body["max_tokens"])
                text, finish, said_anything, fired = self._read_events(
                    response, body["max_tokens"], rule, halt
                )
                if fired:  # leaving the block closes the stream: decoding stops
                    return text, finish
            if finish is None:
                if not said_anything:
                    # Nothing streamed at all: ask once without streaming, which says why.
                    self._why_silent(body, n_prompt, halt.client)
                # A stream that ends with no finish reason was cut off (llama.cpp's server
                # interrupts a request when another arrives): never store it as an answer.
                with self._in_flight_lock:
                    busy = self._in_flight > 1
                raise _Retryable(
                    "the stream ended before the server said why it finished", while_busy=busy
                )
        except httpx.TimeoutException as err:
            if halt():
                raise _Stopped from None
            raise _Retryable(
                f"no answer within {self.spec.options.timeout_s:g} s ({type(err).__name__})"
            ) from None
        except httpx.HTTPError as err:
            if halt():
                raise _Stopped from None
            raise _Retryable(f"{type(err).__name__}: {err}") from None
        except RuntimeError:
            if halt():  # the call was abandoned before this request reached its client
                raise _Stopped from None
            raise
        finally:
            with self._in_flight_lock:
                self._in_flight -= 1
        return text, finish

    def _check_status(self, response, n_prompt: int, body: dict) -> None:
        """A 408/409/425/429/5xx is retried (after its Retry-After), another non-200 refused."""
        if response.status_code in RETRY_STATUS:
            raise _Retryable(
                f"HTTP {response.status_code}",
                after=_retry_after(response.headers.get("retry-after")),
            )
        if response.status_code != 200:
            response.read()
            raise self._refusal(response.status_code, response.text, n_prompt, body)

    def _read_events(
        self, response, max_tokens: int, rule: StopRule, halt: _Halt
    ) -> tuple[str, str | None, bool, bool]:
        """A stream's events, until ``[DONE]``, its end, or the stop rule fires: the text, the
        finish reason, whether any event came, and whether the rule fired. The whole request,
        not only the wait for each next bytes, is bounded: a server that trickles a byte a
        second or streams forever is cut off at the timeout, one that sends more than
        ``max_tokens`` can hold is refused."""
        until = time.monotonic() + self.spec.options.timeout_s
        most_events, most_chars = _answer_bounds(max_tokens)
        received = self._bounded(response.iter_text(), until, most_chars * 2 + most_events * 1024)
        text, finish, events = "", None, 0
        for line in iter_text_lines(received):
            if halt():
                raise _Stopped  # leaving the stream's block closes it
            if not line.startswith("data:"):
                continue
            events += 1
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                chunk = json.loads(data)
            except (ValueError, RecursionError):
                raise BackendError(
                    f"{self.url}/completions streamed something that is not JSON: {data[:200]!r}"
                ) from None
            if isinstance(chunk, dict) and "error" in chunk:
                raise _Retryable(f"server error: {str(chunk['error'])[:200]}")
            choice = _first_choice(chunk, f"{self.url}/completions streamed", data)
            self._check_model(chunk)
            piece = _valid_text(choice.get("text") or "")
            text += piece
            finish = choice.get("finish_reason") or finish
            if events > most_events or len(text) > most_chars:
                raise BackendError(
                    f"the server at {self.url} streamed more than {max_tokens} new tokens can "
                    f"hold ({events} events, {len(text)} characters so far): is it honouring "
                    "max_tokens? Nothing of it was stored"
                )
            # The rule is asked again only when the new piece can make it fire: a long answer
            # is scanned about once, not once per event.
            if rule.might_fire(text, len(piece)) and rule.cut(text)[1]:
                return text, finish, True, True
        return text, finish, events > 0, False

    def _bounded(self, chunks: Iterator[str], until: float, most: int) -> Iterator[str]:
        """The stream's text as it arrives, cut off once the request has run past ``until``
        (a :func:`time.monotonic` value) or the stream has sent ``most`` characters, whether
        or not they complete a line."""
        sent = 0
        for chunk in chunks:
            if time.monotonic() > until:
                raise _Retryable(f"no complete answer within {self.spec.options.timeout_s:g} s")
            sent += len(chunk)
            if sent > most:
                raise BackendError(
                    f"the server at {self.url} streamed {sent} characters, more than an answer "
                    "within max_tokens can take: is it honouring max_tokens? Nothing of it "
                    "was stored"
                )
            yield chunk

    def _timeout(self, stop_at: float | None):
        """The wait for the server's next bytes: ``timeout_s``, or less when the deadline is
        nearer, so a hung server cannot hold a run past its deadline."""
        import httpx

        wait = self.spec.options.timeout_s
        if stop_at is not None:
            wait = max(0.05, min(wait, stop_at - time.time()))
        return httpx.Timeout(wait, connect=min(10.0, wait))

    def _check_model(self, answer: dict) -> None:
        """Refuse an answer that names another model than the one checked at start (a server
        restarted with other weights under the same URL): its text is never stored."""
        named = answer.get("model") if isinstance(answer, dict) else None
        if named and named != self.served_model:
            raise BackendError(
                f"the server at {self.url} answered as model '{named}', not "
                f"'{self.served_model}' (restarted with other weights?); nothing of that "
                "answer was stored: check the server, then run again"
            )

    def _whole(self, text: str, max_tokens: int) -> tuple[str, str | None]:
        """A completion answered whole: its text and finish reason; one longer than
        ``max_tokens`` can hold is refused."""
        try:
            answer = json.loads(text)
        except (ValueError, RecursionError):
            answer = None
        if isinstance(answer, dict) and answer.get("choices"):
            self._check_model(answer)
            choice = _first_choice(answer, f"{self.url}/completions answered", text)
            whole = _valid_text(choice.get("text") or "")
            if len(whole) > _answer_bounds(max_tokens)[1]:
                raise BackendError(
                    f"the server at {self.url} answered {len(whole)} characters, more than "
                    f"{max_tokens} new tokens can hold: is it honouring max_tokens? Nothing of "
                    "it was stored"
                )
            return whole, choice.get("finish_reason") or "stop"
        raise BackendError(
            f"{self.url}/completions answered neither a stream nor a completion: {text[:200]!r}"
        )

    def _why_silent(self, body: dict, n_prompt: int, client) -> None:
        """A stream that ended before its first event: llama.cpp's server, for one, fails a
        prompt over its window that way. The same request without streaming, for one token,
        gets the server's reason; a refusal is raised as such (never retried)."""
        import httpx

        # The server may have closed the connection the stream used: a second try opens one.
        for _ in range(2):
            try:
                response = client.post(
                    f"{self.url}/completions", json={**body, "stream": False, "max_tokens": 1}
                )
                break
            except httpx.HTTPError:
                continue
        else:
            return
        if response.status_code != 200 and response.status_code not in RETRY_STATUS:
            raise self._refusal(response.status_code, response.text, n_prompt, body)

    def _refusal(self, status: int, text: str, n_prompt: int, body: dict) -> Exception:
        """The one-line error for a request the server refused (a 4xx other than 408/409/425/429)."""
        if re.search(
            r"context (length|window)|maximum context|too long|exceeds? .*context", text, re.I
        ):
            said = re.search(r"(?:context (?:length|window)(?: is| of)?)\D{0,20}(\d+)", text, re.I)
            window = f" of {said.group(1)} tokens" if said else ""
            return ContextTooLongError(
                f"the server at {self.url} refused a {n_prompt}-token prompt (+{body['max_tokens']} "
                f"new) as over its context window{window}, though {self.max_context} tokens were "
                f"assumed from {self.window_source}: pass --context-window with the server's window"
                f" (or serve the model with a longer one)"
            )
        return BackendError(f"{self.url}/completions answered HTTP {status}: {text[:200]}")


def _leave_ctrl_c_to_the_main_thread() -> None:
    """A request thread blocks SIGINT, so the kernel delivers Ctrl-C to the main thread, which
    then wakes at once (a signal taken by a request thread would leave the main thread asleep
    until some request ended: up to the timeouts of a hung server)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


@dataclass
class _Halt:
    """When a request stops: at the deadline (``stop_at``), or once its call is abandoned;
    and the client its call's requests use (closed when the call is abandoned)."""

    stop_at: float | None
    client: object
    event: threading.Event = field(default_factory=threading.Event)

    def __call__(self) -> bool:
        return past(self.stop_at) or self.event.is_set()


class _Retryable(Exception):
    def __init__(self, message: str, while_busy: bool = False, after: float | None = None):
        super().__init__(message)
        self.while_busy = while_busy
        self.after = after  # seconds the server asked to wait (Retry-After)


def _retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for: a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time()) if when.tzinfo else None


def _answer_bounds(max_tokens: int) -> tuple[int, int]:
    """The most stream events and characters an answer of ``max_tokens`` tokens can take:
    a token per event (a few more for a role, keep-alives and the finish), and no token
    decodes to more than a few hundred characters (runs of spaces are the longest)."""
    return 2 * max_tokens + 64, 1024 * max_tokens + 1024


class _Stopped(Exception):
    """The deadline passed while a request was under way."""


def _is_model_entry(entry) -> bool:
    """An entry of ``/v1/models`` that names a model (an object with a string ``id``)."""
    return isinstance(entry, dict) and isinstance(entry.get("id"), str) and bool(entry["id"])


def _window(value) -> int | None:
    """A served ``max_model_len`` that can be a window (a positive integer; ``true`` is not)."""
    return value if type(value) is int and value > 0 else None


def _first_choice(answer, what: str, raw: str) -> dict:
    """The first choice of a completion or stream event, checked for shape (an object whose
    ``choices`` is a list of objects with a string ``text``), else a one-line error."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if isinstance(answer, dict) and choices in (None, []):
        return {}  # an event without a choice (usage, keep-alive) carries no text
    if (
        isinstance(choices, list)
        and isinstance(choices[0], dict)
        and isinstance(choices[0].get("text"), (str, type(None)))
    ):
        return choices[0]
    raise BackendError(f"{what} something that is not an OpenAI completion: {raw[:200]!r}")
