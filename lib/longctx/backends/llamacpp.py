"""The ``llamacpp`` backend: llama.cpp in process (llama-cpp-python) on the GGUF file itself.

The models this project ships are GGUF files; llama.cpp runs their quantized weights
natively instead of dequantizing them into torch (``make bench`` measures the two against
each other; the backends page shows the ratio). To read exactly what the ``hf`` backend reads, the
prompt is rendered by the same chat template and tokenized by the same tokenizer
(:func:`longctx.padding.encode_prompt`, fillers included), and the token ids are fed to
llama.cpp; decoding is greedy; each prompt stops at its :class:`~longctx.requests.StopRule`,
an end-of-generation token, or ``max_new_tokens``.

Prompts run one at a time (the CPU is saturated by one sequence's prefill), each from an
empty cache. With ``spec("llamacpp", prefix_cache=True)`` they run in lexicographic order of their
token ids and llama.cpp's KV cache reuses the prefix each shares with the one before
(``Generation.extra['prefix_reused']``). That is off by default: on the chapters' prompts,
which share only their instructions, it saved under 1% of the time (``make bench``), and it
changed long answers (4 of 8 VarSum answers), because a prompt read in two pieces is
rounded differently from one read at once; without it an answer does not depend on which
prompts ran before it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..errors import CapabilityError, ModelPackageMissingError
from ..models import ALIASES, alias_gguf_path, context_window, load_tokenizer
from ..requests import GenerateCall, Generation, past
from ._common import decode, prepare
from .base import LoadTarget, PromptReader, chat_mode, register

INSTALL = (
    "scripts/install_llamacpp.sh .venv/bin/pip  (compiles llama.cpp without its AMX kernels, which "
    'crash in VMs: about 4 minutes; or pip install "llama-cpp-python[server]==0.3.36")'
)
DEFAULT_WINDOW = 32768  # KV cache allocated up front: cap it unless the caller asks for more


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS has one: a job pinned to
    one core by ``taskset`` or a test worker gets one thread, not one per core)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


@dataclass(frozen=True)
class LlamaCppOptions:
    """``threads``: CPU threads (default: one per CPU the process may use); ``prefix_cache``:
    reuse the prompt prefix shared with the previous prompt (off: see the module docstring)."""

    threads: int | None = None
    prefix_cache: bool = False


@register("llamacpp")
class LlamaCppBackend(PromptReader):
    window_cap = DEFAULT_WINDOW
    Options = LlamaCppOptions

    def __init__(
        self,
        target: LoadTarget,
        *,
        max_context: int | None = None,
        progress: Callable[[str], None] | None = None,
    ):
        model, spec, prompt_mode = target.model, target.backend, target.prompt_mode
        self.ref = target.ref
        if self.ref.kind == "alias":
            path = alias_gguf_path(ALIASES[self.ref.name])
        elif self.ref.kind == "gguf":
            path = Path(self.ref.name).expanduser().resolve()
        else:
            raise CapabilityError(
                f"backend 'llamacpp' runs GGUF files; '{model}' is a {self.ref.kind} model: "
                f"use backend='hf', or serve it and use backend='openai'"
            )
        try:
            import llama_cpp
        except ImportError:
            raise ModelPackageMissingError(
                f"backend 'llamacpp' needs llama-cpp-python: {INSTALL}"
            ) from None
        self.spec = spec
        self.path = path
        self.threads = spec.options.threads or usable_cpus()
        self.tokenizer = load_tokenizer(model)
        self.chat = chat_mode(self.tokenizer, self.ref, prompt_mode, model)
        if progress:
            progress(f"loading {model} with llama.cpp ({self.threads} threads)")
        self.max_context = min(
            context_window(self.ref) or DEFAULT_WINDOW, max_context or DEFAULT_WINDOW
        )
        self.llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=self.max_context,
            n_batch=512,
            n_ubatch=512,
            n_threads=self.threads,
            n_threads_batch=self.threads,
            logits_all=False,
            verbose=False,
        )
        vocab = self.llm._model.vocab
        self._is_eog = lambda t: bool(llama_cpp.llama_vocab_is_eog(vocab, t))

    def run_params(self) -> dict:
        import llama_cpp

        return {
            "backend": "llamacpp",
            "device": "cpu",
            "dtype": "gguf",
            "gguf": self.path.name,
            "prefix_cache": self.spec.options.prefix_cache,
            "threads": self.threads,
            "llama_cpp_python": llama_cpp.__version__,
        }

    def generate(self, call: GenerateCall) -> list[Generation | None]:
        """Greedy-decode ``prompts`` (rendered); ``on_batch(indices, generations)`` gets every
        ``batch_size`` finished prompts, so an interrupted run loses at most that many. No
        prompt starts after ``stop_at`` (a :func:`time.time` value); those left have None."""
        prompts, max_new_tokens, stop_rules = call.prompts, call.max_new_tokens, call.stop_rules
        batch_size, progress, desc = call.batch_size, call.progress, call.desc
        on_batch, stop_at = call.on_batch, call.stop_at
        prepared, rules = prepare(self, prompts, max_new_tokens, stop_rules, batch_size, "llamacpp")
        order = range(len(prompts))
        if self.spec.options.prefix_cache:  # neighbours in token order share the longest prefixes
            order = sorted(order, key=lambda i: prepared[i].ids)
        results: list[Generation | None] = [None] * len(prompts)
        bar = tqdm(
            total=len(prompts), desc=desc, unit="prompt", disable=not progress, file=sys.stderr
        )
        pending: list[int] = []
        for i in order:
            if past(stop_at):
                break
            results[i] = self._one(prepared[i].ids, max_new_tokens, rules[i])
            pending.append(i)
            bar.update(1)
            if len(pending) >= batch_size:
                if on_batch is not None:
                    on_batch(pending, [results[j] for j in pending])
                pending = []
        if pending and on_batch is not None:
            on_batch(pending, [results[j] for j in pending])
        bar.close()
        return results  # type: ignore[return-value]

    def _one(self, ids: list[int], max_new_tokens: int, rule) -> Generation:
        reused = 0
        if not self.spec.options.prefix_cache:
            self.llm.reset()  # n_tokens = 0: nothing is reused
        if self.llm.n_tokens:
            for a, b in zip(self.llm._input_ids, ids):
                if a != b:
                    break
                reused += 1
        started = time.perf_counter()
        new: list[int] = []
        eog = False
        for token in self.llm.generate(
            ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True
        ):
            if self._is_eog(token):
                eog = True
                break
            new.append(token)
            if rule.cut(decode(self.tokenizer, new))[1]:
                break
            if len(new) >= max_new_tokens:
                break
        seconds = time.perf_counter() - started
        raw = decode(self.tokenizer, new)
        text, fired = rule.cut(raw)
        # hf counts an end-of-generation token among the new tokens (its position ends the row)
        n_new = len(new) + (1 if eog else 0)
        reason = "stop_rule" if fired else "eos" if eog else "max_new_tokens"
        return Generation(
            text.strip(),
            raw,
            len(ids),
            n_new,
            fired,
            seconds,
            1,
            extra={"prefix_reused": reused},
            stop_reason=reason,
        )
