"""Inference backends: the interface, capability errors, store identity, the in-process
llama.cpp backend, and the OpenAI client against a real llama.cpp server."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from longctx import backends
from longctx.attention import attention_rows
from longctx.errors import BackendError, CapabilityError, ParameterError
from longctx.models import resolve_model
from longctx.padding import filler_slot, masked_gap
from longctx.reader import Reader
from longctx.requests import GenerateCall, Request, StopRule, request_key
from longctx.runner import generate_missing
from longctx.store import ResultsStore
from rows import stored_row
from servers import SMOKE, Server, free_port

# ----------------------------------------------------------------- interface, no model


def test_spec_rejects_bad_choices_in_one_line():
    with pytest.raises(
        ParameterError, match="unknown backend 'vllm'; use one of hf, llamacpp, openai"
    ):
        backends.spec("vllm")
    with pytest.raises(ParameterError, match="needs the server's URL"):
        backends.spec("openai")
    with pytest.raises(
        ParameterError,
        match="backend 'llamacpp' takes no option 'url'; its options: prefix_cache, threads",
    ):
        backends.spec("llamacpp", url="http://x/v1")
    with pytest.raises(
        ParameterError, match="backend 'hf' takes no option 'threads'; its options: none"
    ):
        backends.spec("hf", threads=2)
    with pytest.raises(ParameterError, match="takes OpenAIOptions, not LlamaCppOptions"):
        backends.BackendSpec("openai", backends.spec("llamacpp").options)
    assert backends.spec(None).name == "hf"
    assert backends.spec("llamacpp", threads=2).options.threads == 2


def test_the_registry_refuses_a_taken_name_a_partial_class_and_an_unknown_capability():
    from longctx.backends.base import _REGISTRY, PromptReader, register

    before = dict(_REGISTRY)

    class Partial(PromptReader):  # render, count_tokens, check_fits and load, no generate
        pass

    class Whole(PromptReader):
        def generate(self, call):
            return []

        def run_params(self):
            return {}

    try:
        with pytest.raises(TypeError, match="'llamacpp' is taken by LlamaCppBackend"):
            register("llamacpp")(Whole)
        with pytest.raises(TypeError, match="Partial lacks generate, run_params"):
            register("partial")(Partial)
        with pytest.raises(TypeError, match=r"not \['telepathy'\]"):
            register("odd", capabilities=("generate", "telepathy"))(Whole)
        with pytest.raises(TypeError, match="claims 'attention' but lacks final_token_attention"):
            register("seer", capabilities=("generate", "attention"))(Whole)
        register("whole")(Whole)
        assert backends.backend_class("whole") is Whole
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(before)
    assert "whole" not in backends.names() and set(backends.names()) >= {"hf", "llamacpp"}


def test_backend_identity_enters_key_and_folder_but_hf_keys_stay_as_before():
    fp = resolve_model(SMOKE).fingerprint
    assert Reader.of(SMOKE).fingerprint == fp  # rows stored before backends existed are found
    llama = Reader.of(SMOKE, "llamacpp").fingerprint
    served = Reader.of(SMOKE, "openai", "http://h:1/v1").fingerprint
    other = Reader.of(SMOKE, "openai", "http://h:1/v1", served_model="x").fingerprint
    elsewhere = Reader.of(SMOKE, "openai", "http://other:2/v1").fingerprint
    assert len({fp, llama, served, other}) == 4
    assert served == elsewhere  # where a model is served does not change its answers' identity
    req = Request("t", "e", "p", ("g",))
    assert len({request_key(f, req, "auto") for f in (fp, llama, served)}) == 3
    assert backends.results_folder("m", "hf") == "m"
    assert backends.results_folder("m", "llamacpp") == "m--llamacpp"
    assert backends.results_folder("m", backends.spec("openai", "http://h/v1")) == "m--openai"


def test_reader_stores_keep_backends_apart(tmp_path):
    hf = Reader.of(SMOKE).store(tmp_path, "kv")
    llama = Reader.of(SMOKE, "llamacpp").store(tmp_path, "kv")
    assert hf.dir.parent.name == SMOKE and llama.dir.parent.name == f"{SMOKE}--llamacpp"


@pytest.mark.parametrize("backend", ["llamacpp", backends.spec("openai", "http://127.0.0.1:9/v1")])
def test_masked_padding_outside_hf_fails_before_loading(tmp_path, backend):
    req = Request("t", "e", f"evidence {masked_gap(100)} question", ("g",))

    def load():
        raise AssertionError("the model must not be loaded")

    with pytest.raises(
        CapabilityError, match="masked padding needs the model's weights in torch.*use backend='hf'"
    ):
        generate_missing(
            [req], ResultsStore(tmp_path, "m", "x"), Reader.of(SMOKE, backend), load=load
        )


def test_attention_outside_hf_is_a_one_line_error(tmp_path):
    with pytest.raises(
        CapabilityError, match="attention weights need the model's weights in torch.*backend='hf'"
    ):
        attention_rows(
            [{"prompt": "p"}],
            ResultsStore(tmp_path, "m", "a"),
            Reader.of(SMOKE, "llamacpp"),
            load=lambda: None,
        )


def test_llamacpp_refuses_models_that_are_not_gguf():
    from longctx.backends.llamacpp import LlamaCppBackend

    with pytest.raises(
        CapabilityError, match="runs GGUF files; 'Qwen/Qwen2.5-1.5B-Instruct' is a hub model"
    ):
        LlamaCppBackend(backends.Target("Qwen/Qwen2.5-1.5B-Instruct", backends.spec("llamacpp")))


def test_unreachable_server_is_a_one_line_error():
    port = free_port()
    with pytest.raises(
        BackendError,
        match=f"cannot reach an OpenAI-compatible server at http://127.0.0.1:{port}/v1",
    ):
        backends.load_backend(SMOKE, backends.spec("openai", f"http://127.0.0.1:{port}/v1"))


def _append_many(path: str, writer: int, batches: int) -> None:
    store = ResultsStore(path, "m", "x")
    for b in range(batches):
        store.append(
            [stored_row(f"{writer}-{b}-{i}", writer=writer, pad="x" * 3000) for i in range(5)]
        )


def test_two_processes_appending_to_one_store_lose_no_row(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), w, 150)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    rows = ResultsStore(tmp_path, "m", "x").rows()  # raises on any interleaved (invalid) line
    assert len(rows) == 4 * 150 * 5
    assert len({r["key"] for r in rows}) == len(rows)


def test_backend_agreement_by_hand():
    from longctx.results import backend_agreement

    def row(ex, pos, out, ok):
        return {
            "task": "kv",
            "condition": {"pos": pos},
            "example_id": ex,
            "prompt": f"p{ex}{pos}",
            "output": out,
            "ok": ok,
        }

    a = [row("e1", 0, "x", 1), row("e1", 1, "y", 1), row("e2", 0, "z", 0), row("e3", 0, "w", 1)]
    b = [row("e1", 0, "x", 1), row("e1", 1, "q", 0), row("e2", 0, "z", 0), row("e3", 0, "v", 0)]
    out = backend_agreement(a, b, lambda r: r["ok"])
    assert out["n"] == 4 and out["units"] == 3
    assert out["identical"] == 0.5
    assert out["accuracy_hf"] == 0.75 and out["accuracy_llamacpp"] == 0.25
    # per example: e1 1.0 -> 0.5, e2 0 -> 0, e3 1 -> 0: mean difference -50 points
    assert out["difference"] == pytest.approx(-50.0)
    b[0] = {**b[0], "prompt": "other"}
    with pytest.raises(Exception, match="rendered request"):
        backend_agreement(a, b, lambda r: r["ok"])


def test_backends_page_counts_the_same_differing_answers_as_the_agreement_table():
    """The page quotes how many answers differ and who was right in them; those must be the
    answers backend_agreement counts as not identical, and their scores must add up to the
    accuracy difference it reports (a mismatched pairing once gave 18 instead of 8)."""
    from longctx import backend_comparison
    from longctx.paths import repo_root

    view = backend_comparison.analysis(
        "qwen2.5-coder-0.5b-instruct",
        repo_root() / "data" / "results",
        "data/bench/backends-cpu.json",
        "data/bench/llamacpp-prefix-cpu.json",
    )
    both = view.agreement.set_index("chapter").loc["both"]
    assert len(view.differ) == round(both["n"] * (1 - both["identical"]))
    gained = sum(b["score"] - a["score"] for a, b in view.differ)
    assert gained / both["n"] == pytest.approx(both["accuracy_llamacpp"] - both["accuracy_hf"])
    assert all(view.said.values()) and view.book_run


# ----------------------------------------------------------------- llama.cpp in process


@pytest.fixture(scope="module")
def llama():
    return backends.load_backend(SMOKE, "llamacpp")


PROMPTS = [
    "What is the capital of France? Answer in one word.",
    "Count: 1, 2, 3,",
    "List three colors, one per line.",
]


@pytest.mark.model
def test_llamacpp_reads_what_hf_reads_and_applies_the_same_stop_rules(llama, smollm2):
    rendered = [smollm2.render(p) for p in PROMPTS]
    assert [llama.render(p) for p in PROMPTS] == rendered  # byte-identical prompts
    rules = [StopRule(), StopRule(newline=False), StopRule()]
    ours = llama.generate(
        GenerateCall(rendered, max_new_tokens=24, stop_rules=rules, progress=False)
    )
    ref = smollm2.generate(
        GenerateCall(rendered, max_new_tokens=24, stop_rules=rules, progress=False)
    )
    assert [g.prompt_tokens for g in ours] == [g.prompt_tokens for g in ref]  # the same token ids
    # Quantized blocks vs dequantized float32 weights: long answers of a 135M model may part
    # ways (the methods page measures agreement on real prompts); a short fact does not.
    assert "Paris" in ours[0].text and "Paris" in ref[0].text
    # No rule: the budget ends it
    assert ours[1].new_tokens == 24 and ours[1].stop_reason == "max_new_tokens"
    # The newline rule cuts at line one
    assert ours[2].stop_reason == "stop_rule" and "\n" not in ours[2].text
    assert ours[2].raw_text.startswith(ours[2].text)
    again = llama.generate(
        GenerateCall(rendered[::-1], max_new_tokens=24, stop_rules=rules[::-1], progress=False)
    )[::-1]
    # Greedy and independent of order and cache
    assert [g.text for g in again] == [g.text for g in ours]


@pytest.mark.model
def test_llamacpp_reuses_shared_prefixes_only_when_asked_and_measures_filler_in_model_tokens(
    llama, smollm2
):
    base = smollm2.render("Repeat the last word. " + "alpha beta gamma " * 20)
    prompts = [base + "one", base + "two"]
    assert all(
        g.extra["prefix_reused"] == 0
        for g in llama.generate(GenerateCall(prompts, max_new_tokens=4, progress=False))
    )
    cached = backends.load_backend(SMOKE, backends.spec("llamacpp", prefix_cache=True))
    gens = cached.generate(GenerateCall(prompts, max_new_tokens=4, progress=False))
    shared = smollm2.count_tokens(base)
    # the second prompt skips the shared prefix (the last shared token may merge with what follows)
    assert shared - 2 <= max(g.extra["prefix_reused"] for g in gens) <= shared
    assert (
        cached.run_params()["prefix_cache"] is True and llama.run_params()["prefix_cache"] is False
    )
    padded = smollm2.render(f"Note. {filler_slot('whitespace', 50)} Say hi.")
    (g,) = llama.generate(GenerateCall([padded], max_new_tokens=2, progress=False))
    (h,) = smollm2.generate(GenerateCall([padded], max_new_tokens=2, progress=False))
    assert g.prompt_tokens == h.prompt_tokens > 50


@pytest.mark.model
def test_llamacpp_rows_carry_backend_and_resume(tmp_path, llama):
    reqs = [Request("t", f"e{i}", p, ("Paris",), max_new_tokens=8) for i, p in enumerate(PROMPTS)]
    reader = Reader.of(SMOKE, "llamacpp")
    store = reader.store(tmp_path, "x")
    rows = generate_missing(reqs, store, reader, load=lambda: llama)
    assert {r["backend"] for r in rows} == {"llamacpp"} and rows[0]["params"][
        "backend"
    ] == "llamacpp"
    assert rows[0]["params"]["gguf"].endswith(".gguf")
    again = generate_missing(reqs, store, reader, load=lambda: pytest.fail("all rows are stored"))
    assert [r["key"] for r in again] == [r["key"] for r in rows]
    with pytest.raises(ValueError, match="gave a 'llamacpp' backend for backend='hf'"):
        generate_missing(
            reqs, ResultsStore(tmp_path, "other", "x"), Reader.of(SMOKE), load=lambda: llama
        )


# ----------------------------------------------------------------- OpenAI client, real server


@pytest.fixture
def server():
    srv = Server().start()
    yield srv
    srv.kill()


def _kv_requests(n: int, budget: int | None = None):
    """Key-value requests; ``budget`` shortens answers where a test is about the transport,
    not the answer."""
    from dataclasses import replace

    from longctx.tasks import kv_retrieval as kv

    reqs = kv.make_requests(kv.synthetic_examples(n, 6, seed=3), [0.0, 1.0])
    return [replace(r, max_new_tokens=budget) for r in reqs] if budget else reqs


@pytest.mark.model
def test_openai_backend_answers_a_chapter_request_set_like_llamacpp(tmp_path, server, llama):
    reqs = _kv_requests(3, budget=24)
    served = Reader.of(SMOKE, "openai", server.url)
    rows = generate_missing(reqs, served.store(tmp_path, "kv"), served)
    in_process = Reader.of(SMOKE, "llamacpp")
    direct = generate_missing(
        reqs, in_process.store(tmp_path, "kv"), in_process, load=lambda: llama
    )
    assert [r["prompt"] for r in rows] == [r["prompt"] for r in direct]
    # Same engine, same greedy answers
    assert [r["output"] for r in rows] == [r["output"] for r in direct]
    assert {r["backend"] for r in rows} == {f"openai:{SMOKE}"} and rows[0]["params"][
        "url"
    ] == server.url
    assert all(r["prompt_tokens"] > 0 and r["new_tokens"] > 0 for r in rows)


@pytest.mark.model
def test_openai_server_serving_another_model_is_a_one_line_error(tmp_path):
    srv = Server(alias="some-other-model").start()
    try:
        with pytest.raises(BackendError, match=f"serves some-other-model, not '{SMOKE}'"):
            backends.load_backend(SMOKE, backends.spec("openai", srv.url))
    finally:
        srv.kill()


@pytest.mark.model
def test_openai_server_killed_mid_run_stores_only_answers_and_a_rerun_completes(tmp_path):
    reqs = _kv_requests(4, budget=16)  # 8 prompts, 4 per group
    srv = Server().start()
    spec = backends.spec("openai", srv.url, concurrency=1, retries=1)
    reader = Reader(SMOKE, spec)
    store = reader.store(tmp_path, "kv")
    backend = backends.load_backend(SMOKE, spec)
    original = backend._one
    calls = {"n": 0}

    def dying(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 6:  # the server dies while the second group is under way
            srv.kill()
        return original(*args, **kwargs)

    backend._one = dying
    with pytest.raises(BackendError, match="failed after 2 tries"):
        generate_missing(reqs, store, reader, load=lambda: backend, batch_size=4)
    stored = store.rows()
    assert 4 <= len(stored) < len(reqs)
    # No failure stored as an answer
    assert all(r["output"] is not None and r["new_tokens"] > 0 for r in stored)
    restarted = Server()
    restarted.port, restarted.url = srv.port, srv.url
    restarted.cmd = srv.cmd
    restarted.start()
    try:
        generated = []
        again = backends.load_backend(SMOKE, spec)
        original_again = again._one
        again._one = lambda *a, **k: generated.append(1) or original_again(*a, **k)
        rows = generate_missing(reqs, store, reader, load=lambda: again, batch_size=4)
        assert len(generated) == len(reqs) - len(stored)  # only the missing requests were sent
        assert len(rows) == len(reqs) and len(store.rows()) == len(reqs)
    finally:
        restarted.kill()


@pytest.mark.model
def test_a_stream_cut_off_by_the_server_is_never_stored(tmp_path, llama):
    """llama.cpp's server, by default, cuts a streaming request off when another arrives; the
    cut stream ends without a finish reason and must not become an answer, and a run whose
    streams are cut while others are in flight says which server flag to change."""
    reqs = _kv_requests(3)
    srv = Server(interrupt=True).start()
    try:
        reader = Reader(SMOKE, backends.spec("openai", srv.url, concurrency=4, retries=3))
        store = reader.store(tmp_path, "kv")
        with pytest.raises(
            BackendError, match="--interrupt_requests False, or pass --concurrency 1"
        ):
            generate_missing(reqs, store, reader, batch_size=4)
    finally:
        srv.kill()
    direct = {
        r["example_id"] + json.dumps(r["condition"], sort_keys=True): r["output"]
        for r in generate_missing(
            reqs,
            ResultsStore(tmp_path, "direct", "kv"),
            Reader.of(SMOKE, "llamacpp"),
            load=lambda: llama,
        )
    }
    for row in store.rows():  # whatever was stored is the complete answer
        assert (
            row["output"]
            == direct[row["example_id"] + json.dumps(row["condition"], sort_keys=True)]
        )


@pytest.mark.model
def test_make_run_with_llamacpp_then_openai_adds_a_line_each(tmp_path):
    """`longctx run` (what `make run ... BACKEND=` calls) of the key-value chapter, at CI size,
    through llama.cpp in process and then through a local OpenAI-compatible server."""
    small = [
        "-p",
        "num_pairs",
        "[4]",
        "-p",
        "gold_positions",
        "[0.0, 0.5]",
        "-p",
        "examples_per_cell",
        "1",
        "-p",
        "kv_source",
        "'synthetic'",
        "-p",
        "results_dir",
        str(tmp_path),
    ]
    root = Path(__file__).resolve().parents[1]

    def run(*extra):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "longctx.cli",
                "run",
                "notebooks/kv_retrieval.py",
                "--model",
                SMOKE,
                *extra,
                *small,
            ],
            capture_output=True,
            text=True,
            cwd=root,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-2000:]

    run("--backend", "llamacpp")
    srv = Server().start()
    try:
        run("--backend", "openai", "--url", srv.url)
    finally:
        srv.kill()
    llama = ResultsStore(tmp_path, f"{SMOKE}--llamacpp", "kv_retrieval").rows()
    served = ResultsStore(tmp_path, f"{SMOKE}--openai", "kv_retrieval").rows()
    assert len(llama) == len(served) == 1 * 2 * 1 * 2  # sizes x depths x examples x query-aware
    assert sorted(r["output"] for r in llama) == sorted(r["output"] for r in served)
    assert (tmp_path / f"{SMOKE}--openai" / "kv_retrieval" / "kv_retrieval.ipynb").exists()
    # the second run's figure drew the first run as one more line
    from longctx.requests import Request
    from longctx.tables import comparable_rows

    asked = [
        Request(r["task"], r["example_id"], "", tuple(r["gold"]), r["condition"]) for r in served
    ]
    assert {
        r["backend"]
        for r in comparable_rows(tmp_path, "kv_retrieval", asked, exclude=f"{SMOKE}--openai")
    } == {"llamacpp"}


def test_only_backends_touch_generation_or_attention_code():
    """Every model call goes through a backend (the runner asks them): no other module of the
    library imports llama.cpp or a causal LM class, calls a model's generate, or computes
    final-token attention itself."""
    import re
    from pathlib import Path

    lib = Path(backends.__file__).resolve().parents[1]
    banned = re.compile(
        r"import llama_cpp|from llama_cpp|AutoModelForCausalLM|\.model\.generate\(|"
        r"hf_attention import|final_token_attention\(lm\.model"
    )
    offenders = [
        str(path.relative_to(lib))
        for path in lib.rglob("*.py")
        if "backends" not in path.parts and banned.search(path.read_text())
    ]
    assert not offenders, offenders
    # Only the runner asks a backend to generate; everything else asks the runner.
    callers = [
        str(path.relative_to(lib))
        for path in lib.rglob("*.py")
        if "backends" not in path.parts
        and path.name not in ("runner.py", "requests.py")
        and re.search(r"GenerateCall\(|\blm\.generate\(", path.read_text())
    ]
    assert not callers, callers
