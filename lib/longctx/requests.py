"""The vocabulary every layer shares: what is asked (:class:`Request`, with its
:class:`StopRule`), what comes back (:class:`Generation`), and the keys that name a request
in a results store.

Nothing here imports torch, a backend or the store: tasks build requests from these types
alone, backends return generations, and the store keys rows by :func:`request_key`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from .errors import ParameterError

# How far back a new answer-pattern match may start (the patterns are short: a UUID, a number).
_PATTERN_REACH = 512


@dataclass(frozen=True)
class StopRule:
    """When an answer is complete.

    * ``newline``: stop at the first newline that ends a non-blank line
      (the answer line is enough).
    * ``answer_pattern``: stop as soon as the output holds a match of this regex
      that is not one of ``echoes``; for key-value retrieval the pattern is a UUID
      and the echo is the query key, so a model that first repeats the key
      ("The value of key "<key>" is ...") is never stopped inside the echoed key.
    * A completed line that is only an echo (e.g. ``Key: "<key>"``), a lead-in that
      ends with a colon (``The value is:``, the answer following on the next line) or a
      code fence, does not count as the answer line.
    """

    newline: bool = True
    answer_pattern: str | None = None
    echoes: tuple[str, ...] = ()

    def cut(self, text: str) -> tuple[str, bool]:
        """Return (text up to the stop point, whether the rule fired)."""
        best: int | None = None
        if self.answer_pattern:
            for m in re.finditer(self.answer_pattern, text):
                if m.group(0) not in self.echoes:
                    best = m.end()
                    break
        if self.newline:
            start = 0
            for m in re.finditer("\n", text):
                line = text[start : m.start()]
                start = m.end()
                if line.strip() and not self._is_echo(line) and not _is_lead_in(line):
                    if best is None or m.start() < best:
                        best = m.start()
                    break
        if best is None:
            return text, False
        return text[:best], True

    def might_fire(self, text: str, added: int) -> bool:
        """Whether the last ``added`` characters of ``text`` can make the rule fire, a cheap
        test before :meth:`cut` for text that grows piece by piece (a stream): the newline
        rule needs a new newline, the answer pattern a new match that is not an echo."""
        new = text[len(text) - added :]
        if self.newline and "\n" in new:
            return True
        if self.answer_pattern:
            window = text[max(0, len(text) - added - _PATTERN_REACH) :]
            return any(
                m.group(0) not in self.echoes for m in re.finditer(self.answer_pattern, window)
            )
        return False

    def _is_echo(self, line: str) -> bool:
        if not self.echoes:
            return False
        rest = line
        for echo in self.echoes:
            rest = rest.replace(echo, "")
        return (
            bool(re.fullmatch(r"[\s\"'{}:,.]*(key)?[\s\"'{}:,.]*", rest, flags=re.IGNORECASE))
            and rest != line
        )


@dataclass(frozen=True)
class GenerateCall:
    """One call to a backend's ``generate``: the rendered ``prompts`` and how to answer them.
    ``stop_rules``: one rule for all, one per prompt, or None (the default rule);
    ``on_batch(indices, generations)`` receives answers as they finish, so a caller can store
    them (an interrupted run loses at most one batch); no work starts after ``stop_at`` (a
    :func:`time.time` value: a run's deadline), and the prompts left are None. ``positions``
    asks a backend with rescaled positions to read with Ms-PoE between those ratios."""

    prompts: Sequence[str]
    max_new_tokens: int
    stop_rules: Sequence[StopRule] | StopRule | None = None
    batch_size: int = 8
    progress: bool = True
    desc: str = "generating"
    on_batch: Callable | None = None
    stop_at: float | None = None
    positions: tuple[float, float] | None = None  # Ms-PoE's (low, high) ratios, one prompt a batch


def _is_lead_in(line: str) -> bool:
    """A line that announces the answer instead of giving it: "The answer is:",
    "**Answer:**", or a code fence such as "```json"."""
    line = line.strip()
    return line.startswith("```") or line.strip("*_ ").endswith(":")


@dataclass
class Generation:
    text: str  # cut at the stop point
    raw_text: str  # everything decoded, for debugging
    prompt_tokens: int
    new_tokens: int
    stopped: bool  # the stop rule fired (False: max_new_tokens or EOS)
    batch_seconds: float
    batch_size: int
    extra: dict = field(default_factory=dict)
    stop_reason: str = ""  # stop_rule | eos | max_new_tokens


# A cap on every request's generation budget, for runs that check that pages execute rather
# than what they answer (CI runs the notebooks with one, see conftest.py); None: each task's own.
_generation_cap: int | None = None


def cap_generation(tokens: int | None) -> None:
    """Cap ``max_new_tokens`` of every :class:`Request` (and the budgets of every LLM tagger)
    made from now on in this process (``None`` lifts the cap). The budget is part of a
    request's key and of a tagger's id, so capped rows and tags never stand in for
    full-length ones."""
    global _generation_cap
    if tokens is not None and (not isinstance(tokens, int) or tokens < 1):
        raise ParameterError(f"a generation cap is a positive number of tokens, not {tokens!r}")
    _generation_cap = tokens


def capped(tokens: int) -> int:
    """A generation budget under the cap of :func:`cap_generation`, if one is set."""
    return tokens if _generation_cap is None else min(tokens, _generation_cap)


@dataclass(frozen=True)
class Request:
    """One prompt to answer, with everything needed to score and trace it."""

    task: str
    example_id: str
    prompt: str  # the task prompt, before any chat template
    gold: tuple[str, ...]
    condition: dict = field(default_factory=dict, hash=False)
    max_new_tokens: int = 64
    stop: StopRule = StopRule()
    meta: dict = field(default_factory=dict, hash=False)
    system: str | None = None  # system message; None keeps the chat template's default

    def __post_init__(self):
        if capped(self.max_new_tokens) != self.max_new_tokens:
            object.__setattr__(self, "max_new_tokens", capped(self.max_new_tokens))


def request_key(fingerprint: str, req: Request, prompt_mode: str) -> str:
    """Identity of a generation: model weights, task, condition, example, prompt, prompt
    mode and decoding settings (a changed stop rule or token budget is a new row)."""
    return key_of(
        fingerprint,
        req.task,
        req.condition,
        req.example_id,
        req.prompt,
        req.system,
        prompt_mode,
        req.max_new_tokens,
        asdict(req.stop),
    )


def key_fingerprint(weights: str, backend_identity: str) -> str:
    """The weights' fingerprint as store keys see it: the weights' own for ``hf`` (identity
    ``""``: the keys of every row stored before backends existed), suffixed with the
    backend's identity otherwise, so two backends' rows never share a key."""
    return f"{weights}+{backend_identity}" if backend_identity else weights


def key_of(
    fingerprint: str,
    task: str,
    condition: dict,
    example_id: str,
    prompt: str,
    system: str | None,
    prompt_mode: str,
    max_new_tokens: int,
    stop: dict,
) -> str:
    """:func:`request_key` from its parts, as a stored row carries them: a row's key can be
    recomputed from its content (no :class:`Request`, whose budget a generation cap would cut)."""
    decoding = {"max_new_tokens": max_new_tokens, "stop": stop}
    # Keys without a system stay as before
    asked = prompt if system is None else [system, prompt]
    payload = json.dumps(
        [fingerprint, task, condition, example_id, asked, prompt_mode, decoding],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def request_identity(task: str, condition: dict, example_id: str) -> tuple:
    """Which request a row answers, whatever model or backend wrote it (rows of different
    models or backends have different store keys but the same identity)."""
    return task, json.dumps(condition, sort_keys=True), example_id


def dedupe_key(r: Request) -> tuple:
    """Two requests with this key are the same prompt asked twice."""
    return (*request_identity(r.task, r.condition, r.example_id), r.system, r.prompt)


def unique_requests(requests: Sequence[Request]) -> list[Request]:
    """Drop repeated requests (two experiments asking for the same prompt and condition),
    keeping the first; :func:`longctx.runner.generate_missing` refuses duplicates."""
    seen, out = set(), []
    for r in requests:
        key = dedupe_key(r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def past(stop_at: float | None) -> bool:
    """Whether a run's deadline (a :func:`time.time` value, or None for none) has passed:
    what every backend asks before it starts a batch or a request."""
    return stop_at is not None and time.time() >= stop_at


def stop_rules_for(stop_rules, n: int) -> list[StopRule]:
    """One stop rule per prompt (a single rule, or None for the default, is repeated)."""
    if stop_rules is None or isinstance(stop_rules, StopRule):
        return [stop_rules or StopRule()] * n
    if len(stop_rules) != n:
        raise ParameterError("need one stop rule per prompt")
    return list(stop_rules)
