"""Faults of the server client, the runner's deadline and the command line: a hung or
failing server (a fake one on 127.0.0.1), llama.cpp's server with its defaults and a small
window (the real one), a deadline that stops a run, and bad input that must end in one line."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from longctx import backends
from longctx.chapters import PAGE_PARAMETERS, scale
from longctx.cli import ROWS_MISSING, main, run_notebook
from longctx.errors import BackendError, ContextTooLongError, ParameterError
from longctx.models import context_window, load_tokenizer, resolve_model, weights_source
from longctx.page import setup
from longctx.reader import Reader
from longctx.reproduce import chapter_blocks
from longctx.requests import GenerateCall, Generation
from longctx.runner import Block, generate_missing, run
from longctx.tasks import kv_retrieval as kv
from servers import SMOKE, FakeServer, Server


def _requests(n: int, pairs: int = 6, budget: int = 8):
    examples = kv.synthetic_examples(n, pairs, seed=3)
    return [replace(r, max_new_tokens=budget) for r in kv.make_requests(examples, [0.0])]


@pytest.fixture
def fake():
    server = FakeServer()
    yield server
    server.close()


def _served(url: str, **options) -> Reader:
    return Reader(SMOKE, backends.spec("openai", url, **options))


# ----------------------------------------------------------------- a misbehaving server


def test_a_hung_server_fails_a_request_after_its_timeouts_with_one_line(tmp_path, fake):
    defaults = backends.spec("openai", "http://h:1/v1").options
    assert defaults.timeout_s == 120 and defaults.retries == 3
    fake.mode = "hang"
    reader = _served(fake.url, timeout_s=0.5, retries=1, concurrency=1)
    load_tokenizer(SMOKE)  # built from the GGUF file on a machine's first run: not timed here
    started = time.time()
    with pytest.raises(BackendError, match=r"failed after 2 tries: no answer within 0.5 s"):
        generate_missing(_requests(1), reader.store(tmp_path, "kv"), reader, progress=False)
    assert time.time() - started < 10 and fake.requests == 2
    assert reader.store(tmp_path, "kv").rows() == []


@pytest.mark.parametrize("mode", ["trickle", "flood"])
def test_a_trickling_or_flooding_server_fails_the_request_within_its_timeout(tmp_path, fake, mode):
    # --timeout bounded only the wait for the next bytes: a server sending a byte every
    # 0.2 s, or 50,000 one-character events, held a run until it was killed (60-150 s),
    # and the stop rule re-read the whole answer on every event.
    fake.mode = mode
    reader = _served(fake.url, timeout_s=2, retries=1, concurrency=1)
    load_tokenizer(SMOKE)
    started = time.time()
    why = "no complete answer within 2 s" if mode == "trickle" else "is it honouring max_tokens"
    with pytest.raises(BackendError, match=why):
        generate_missing(_requests(1), reader.store(tmp_path, "kv"), reader, progress=False)
    assert time.time() - started < 10
    assert reader.store(tmp_path, "kv").rows() == []


def test_a_servers_retry_after_is_waited_for(tmp_path, fake):
    # A 429 asking for 2 s failed the run after 0.5 s of backoff (one retry): the wait the
    # server asks for is now honoured, and the answer is stored.
    fake.mode, fake.retry_after = "busy", 2
    reader = _served(fake.url, timeout_s=10, retries=1, concurrency=1)
    load_tokenizer(SMOKE)
    started = time.time()
    rows = generate_missing(_requests(1), reader.store(tmp_path, "kv"), reader, progress=False)
    assert len(rows) == 1 and fake.requests == 2 and time.time() - started >= 1.9


def test_retry_after_in_seconds_or_as_a_date():
    from email.utils import formatdate

    from longctx.backends.openai import _retry_after

    assert _retry_after("5") == 5.0 and _retry_after(None) is None and _retry_after("soon") is None
    assert 28 <= _retry_after(formatdate(time.time() + 30, usegmt=True)) <= 30


def test_the_stop_rule_is_asked_only_when_a_piece_can_make_it_fire():
    from longctx.requests import StopRule

    rule = StopRule(answer_pattern=r"\d+", echoes=("7",))
    assert not rule.might_fire("The answer", 3) and not rule.might_fire("key 7", 1)
    assert rule.might_fire("The answer is 42", 2) and rule.might_fire("a line\n", 1)
    plain = StopRule()
    assert not plain.might_fire("x" * 10_000, 10) and plain.might_fire("x\ny", 2)
    # never a miss: wherever cut fires on a growing text, might_fire said so on that piece
    text = "Key: 7\nThe value is:\n 42 and more\n"
    fired = [i for i in range(1, len(text) + 1) if rule.cut(text[:i])[1]]
    first = fired[0]
    assert rule.might_fire(text[:first], 1)


def test_a_deadline_stops_requests_in_flight_and_the_report_counts_them(tmp_path, fake):
    fake.mode = "hang"
    reader = _served(fake.url, timeout_s=60, retries=3)
    reqs = _requests(4)
    started = time.time()
    report = run(
        [Block("kv", "kv", reqs)], reader, tmp_path, deadline_s=3, progress=False, log=lambda _: 0
    )
    assert time.time() - started < 20  # not 4 tries of 60 s
    assert report.stopped_early and report.missing == len(reqs) and not report.complete
    assert reader.store(tmp_path, "kv").rows() == []


def test_failures_are_retried_and_never_stored_while_good_answers_are(tmp_path, fake):
    reader = _served(fake.url, retries=1)
    store = reader.store(tmp_path, "kv")
    for mode in ("status", "error_chunk"):
        fake.mode, fake.requests = mode, 0
        with pytest.raises(BackendError, match="failed after 2 tries"):
            generate_missing(_requests(1), store, reader, progress=False)
        assert fake.requests == 2 and store.rows() == []
    fake.mode = "whole"  # a server that ignores stream=true and answers whole
    rows = generate_missing(_requests(2), store, reader, progress=False)
    assert [r["output"] for r in rows] == ["42", "42"] and len(store.rows()) == 2


def test_a_prompt_the_server_refuses_as_too_long_is_one_line_and_never_retried(tmp_path, fake):
    fake.mode = "too_long"
    reader = _served(fake.url, retries=3)
    with pytest.raises(ContextTooLongError, match="window of 2048 tokens.*--context-window"):
        generate_missing(_requests(1), reader.store(tmp_path, "kv"), reader, progress=False)
    assert fake.requests == 1


def test_a_request_that_cannot_succeed_is_named_without_waiting_for_the_rest(tmp_path, fake):
    """One request fails for good while three hang: the run names the failure at once (an
    interrupting llama.cpp server took minutes to be named while answers in flight ran on)."""
    fake.modes = ["hang", "hang", "hang", "too_long"]
    reader = _served(fake.url, timeout_s=60, retries=3, concurrency=4)
    started = time.time()
    with pytest.raises(ContextTooLongError, match="window of 2048 tokens"):
        generate_missing(_requests(4), reader.store(tmp_path, "kv"), reader, progress=False)
    assert time.time() - started < 20  # not the hung requests' 60 s waits
    assert fake.requests == 4 and reader.store(tmp_path, "kv").rows() == []


def test_the_window_is_the_servers_where_it_says_else_the_users_else_the_models(tmp_path):
    listed = FakeServer(max_model_len=600)
    silent = FakeServer()
    props = FakeServer(n_ctx=700)
    try:
        from_props = backends.load_backend(SMOKE, backends.spec("openai", props.url))
        assert from_props.max_context == 700 and "/props" in from_props.window_source
        backend = backends.load_backend(SMOKE, backends.spec("openai", listed.url))
        assert backend.max_context == 600 and "/v1/models" in backend.window_source
        reader = _served(listed.url)
        with pytest.raises(ContextTooLongError, match="600-token window"):
            generate_missing(
                _requests(1, pairs=40), reader.store(tmp_path, "kv"), reader, progress=False
            )
        assert listed.requests == 0  # refused before sending
        model = backends.load_backend(SMOKE, backends.spec("openai", silent.url))
        assert model.max_context == 8192 and "model's config" in model.window_source
        given = backends.spec("openai", silent.url, context_window=1000)
        assert backends.load_backend(SMOKE, given).max_context == 1000
    finally:
        listed.close()
        silent.close()
        props.close()


def test_the_window_read_from_a_gguf_header_is_the_files_own():
    from gguf import GGUFReader

    ref = resolve_model(SMOKE)
    source, options = weights_source(ref, "main")
    fields = GGUFReader(f"{source}/{options['gguf_file']}").fields
    arch = fields["general.architecture"].contents()
    assert context_window(ref) == fields[f"{arch}.context_length"].contents() == 8192
    # Qwen2.5-Coder's model card: a 32,768-token context
    assert context_window(resolve_model("qwen2.5-coder-0.5b-instruct")) == 32768


# ----------------------------------------------------------------- llama.cpp's real server


@pytest.mark.model
def test_llamacpp_server_with_a_small_window_refuses_a_long_prompt_once(tmp_path):
    server = Server(n_ctx=2048).start()
    try:
        reader = _served(server.url, retries=3)
        backend = backends.load_backend(SMOKE, reader.backend)
        streams = []
        original = backend._stream
        backend._stream = lambda *a, **k: streams.append(1) or original(*a, **k)
        long = _requests(1, pairs=70)  # about 4,500 tokens: within the model's 8,192
        with pytest.raises(ContextTooLongError, match="--context-window"):
            generate_missing(long, reader.store(tmp_path, "kv"), reader, load=lambda: backend)
        assert len(streams) == 1  # never retried
        told = _served(server.url, context_window=2048)
        with pytest.raises(ContextTooLongError, match="2048-token window"):
            generate_missing(long, told.store(tmp_path, "kv"), told)
    finally:
        server.kill()


# ----------------------------------------------------------------- the runner's deadline


class _SlowBackend:
    """Answers every prompt with '0' after ``seconds`` per batch; honours ``stop_at``."""

    backend = "hf"

    def __init__(self, seconds: float):
        self.seconds = seconds

    def render(self, prompt, system=None):
        return prompt

    def run_params(self):
        return {"backend": "hf"}

    def generate(self, call):
        prompts, batch_size, on_batch, stop_at = (
            call.prompts,
            call.batch_size,
            call.on_batch,
            call.stop_at,
        )
        out = [None] * len(prompts)
        for start in range(0, len(prompts), batch_size):
            if stop_at is not None and time.time() >= stop_at:
                break
            time.sleep(self.seconds)
            idxs = list(range(start, min(start + batch_size, len(prompts))))
            for i in idxs:
                out[i] = Generation("0", "0", 10, 1, False, self.seconds, len(idxs))
            if on_batch:
                on_batch(idxs, [out[i] for i in idxs])
        return out


def test_a_run_stopped_by_its_deadline_counts_every_block_it_did_not_reach(tmp_path):
    reqs = _requests(12)
    plan = [Block(f"block {k}", "kv", reqs[4 * k : 4 * k + 4]) for k in range(3)]
    reader = Reader(SMOKE)
    load_tokenizer(SMOKE)  # loaded once per process: not inside the deadline
    report = run(
        plan,
        reader,
        tmp_path,
        batch_size=2,
        chunk_prompts=2,
        deadline_s=0.6,
        load=lambda: _SlowBackend(0.4),
        progress=False,
        log=lambda _: 0,
    )
    stored = len(reader.store(tmp_path, "kv").rows())
    assert 0 < stored < 12 and report.stopped_early
    assert [b.get("reached", True) for b in report.blocks] == [True, False, False]
    assert report.missing == 12 - stored and not report.complete
    assert "2 of them not reached" in report.summary()


def test_a_chapter_plan_says_what_it_has_not_handed_out_without_building_more():
    plan = chapter_blocks(["kv_retrieval", "multidoc_qa"], "smoke")
    first = next(iter(plan))
    rest, unbuilt = plan.unreached()
    assert first not in rest and rest and all(b.experiment == "kv_retrieval" for b in rest)
    assert unbuilt == ["chapter multidoc_qa"]


def test_reproduce_stopped_before_its_plans_exits_with_the_rows_missing_code(tmp_path, capsys):
    code = main(
        [
            "reproduce",
            "--chapters",
            "kv_retrieval",
            "--scale",
            "smoke",
            "--model",
            SMOKE,
            "--results-dir",
            str(tmp_path),
            "--deadline-s",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert code == ROWS_MISSING == 3
    assert "not counted" in out and "chapter kv_retrieval" in out


# ----------------------------------------------------------------- bad input, one line


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--set", "kv_retrieval.examples_per_cell", "abc"], "takes a mapping or a whole number"),
        (["--set", "kv_retrieval.num_pairs", "30"], "takes a list of whole numbers"),
        (["--set", "kv_retrieval.num_pairs", "[10,"], "not a valid value"),
        # counts below what the book allows: refused before any plan or kernel, not after
        # 16-21 s inside it
        (["--set", "kv_retrieval.examples_per_cell", "0"], "each value at least 1"),
        (["--set", "kv_retrieval.num_pairs", "[-3]"], "each value at least 1"),
        (["--token-budget", "-5"], "--token-budget must be at least 1"),
        (["--batch-size", "0"], "--batch-size must be at least 1"),
        (["--deadline-s", "-1"], "--deadline-s must be at least 0"),
    ],
)
def test_bad_reproduce_arguments_end_in_one_line_before_any_work(argv, message, capsys):
    code = main(["reproduce", "--chapters", "kv_retrieval", "--scale", "smoke", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "param, value", [("examples_per_cell", "0"), ("num_pairs", "[-3]"), ("seed", "-1")]
)
def test_longctx_run_refuses_a_count_below_its_least_before_the_kernel(param, value, capsys):
    started = time.time()
    code = main(["run", "notebooks/kv_retrieval.py", "--model", SMOKE, "-p", param, value])
    err = capsys.readouterr().err
    assert code == 2 and f"kv_retrieval.{param} is" in err and len(err.strip().splitlines()) == 1
    assert time.time() - started < 10  # no kernel was started


def test_a_prompt_over_the_models_window_is_refused_before_the_weights_load(tmp_path):
    reader = Reader(SMOKE)  # smollm2's window: 8,192 tokens
    too_long = _requests(1, pairs=140)  # about 9,000 tokens

    def load():
        raise AssertionError("the weights were loaded")

    with pytest.raises(ContextTooLongError, match="8192-token window"):
        generate_missing(too_long, reader.store(tmp_path, "kv"), reader, load=load)


def test_a_notebook_takes_the_server_options_longctx_run_injects(fake):
    namespace = {
        "model": SMOKE,
        "reader_options": {
            "backend": "openai",
            "url": fake.url,
            "concurrency": 1,
            "timeout_s": 30.0,
            "retries": 0,
        },
    }
    options = setup("kv_retrieval", namespace).reader.backend.options
    assert (options.concurrency, options.timeout_s, options.retries) == (1, 30.0, 0)
    with pytest.raises(ParameterError, match="kv_retrieval.num_pairs takes a list"):
        setup("kv_retrieval", {**namespace, "params": {"num_pairs": 30}})
    with pytest.raises(ParameterError, match="params must be a mapping of kv_retrieval's"):
        setup("kv_retrieval", {**namespace, "params": [1]})


def test_a_page_parameter_the_cell_leaves_out_still_reaches_the_run():
    """batch_size and token_budget are every page's parameters (the cell need not name
    them): set, they override the page's own defaults; malformed, they are one line."""
    page = setup("kv_retrieval", {"model": SMOKE, "batch_size": 2})
    run = page.run(batch_size=8, token_budget=4096)
    assert (run.options["batch_size"], run.options["token_budget"]) == (2, 4096)
    assert set(PAGE_PARAMETERS) >= {"params", "reader_options", "batch_size", "results_dir"}
    with pytest.raises(ParameterError, match="batch_size is a whole number of at least 1"):
        setup("kv_retrieval", {"model": SMOKE, "batch_size": True})


# ----------------------------------------------------------------- replay and notebooks


def test_replay_of_served_rows_honours_the_served_name_and_asks_for_url_as_a_flag(tmp_path, capsys):
    server = FakeServer(model="smol")
    try:
        reader = Reader.of(SMOKE, "openai", server.url, served_model="smol")
        store = reader.store(tmp_path, "kv")
        generate_missing(_requests(2), store, reader, progress=False)
        rows_file = str(store.path)
        assert main(["replay", rows_file, "--n", "2"]) == 2
        assert "needs the server's URL (--url on the command line" in capsys.readouterr().err
        assert main(["replay", rows_file, "--n", "2", "--url", server.url]) == 0
        assert "100.0% identical outputs" in capsys.readouterr().out
        code = main(["replay", rows_file, "--url", server.url, "--served-model", "other"])
        assert code == 2 and "serves smol, not 'other'" in capsys.readouterr().err
    finally:
        server.close()


def test_replay_refuses_attention_rows_in_one_line_before_loading(capsys):
    store = "data/results/qwen2.5-coder-0.5b-instruct/cnorm_attention/generations.jsonl.xz"
    started = time.time()
    assert main(["replay", store]) == 2
    err = capsys.readouterr().err
    assert "attention measurements, not generations" in err and len(err.splitlines()) == 1
    assert time.time() - started < 30


NOTEBOOK = """# %% tags=["parameters"]
model = "smollm2-135m-instruct"
reader_options = {}
fail = False
expect = {}

# %%
assert not fail, "asked to fail"
for name, value in expect.items():
    assert globals()[name] == value, (name, globals().get(name))
"""


def test_a_successful_run_removes_the_failed_copy_an_earlier_run_left(tmp_path):
    notebook = tmp_path / "tiny.py"
    notebook.write_text(NOTEBOOK)
    out = tmp_path / "tiny.ipynb"
    with pytest.raises(Exception, match="asked to fail"):
        run_notebook(notebook, SMOKE, {"fail": True}, tmp_path, out, progress=False)
    assert out.with_suffix(".failed.ipynb").exists() and not out.exists()
    run_notebook(notebook, SMOKE, {"fail": False}, tmp_path, out, progress=False)
    assert out.exists() and not out.with_suffix(".failed.ipynb").exists()


def test_the_kernels_own_stderr_goes_to_a_log_beside_the_notebook_not_the_terminal(tmp_path, capfd):
    # Ctrl-C during `longctx run` printed the kernel's 19-line zmq traceback before the
    # one-line message: the kernel wrote its own stderr (start-up warnings, that traceback)
    # to the terminal. It now goes to <notebook>.kernel.log.
    notebook = tmp_path / "tiny.py"
    notebook.write_text(
        NOTEBOOK + "import sys\nsys.__stderr__.write('kernel noise\\n')\nsys.__stderr__.flush()\n"
    )
    out = tmp_path / "tiny.ipynb"
    run_notebook(notebook, SMOKE, {}, tmp_path, out, progress=False)
    assert "kernel noise" not in capfd.readouterr().err
    assert "kernel noise" in out.with_suffix(".kernel.log").read_text()


def test_every_scales_values_pass_the_kind_check_of_every_other_scale():
    from longctx.chapters import chapters, scales

    for chapter in chapters():
        sets = scales(chapter)
        for values in sets.values():
            for name, other in sets.items():
                scale(chapter, name, **{k: v for k, v in values.items() if k in other})


def test_longctx_run_hands_the_server_options_to_the_notebook(tmp_path, capsys):
    notebook = tmp_path / "tiny.py"
    notebook.write_text(NOTEBOOK)
    url = "http://127.0.0.1:9/v1"  # never reached: the tiny notebook loads no model
    expect = {
        "reader_options": {
            "backend": "openai",
            "url": url,
            "concurrency": 1,
            "timeout_s": 30.0,
            "retries": 0,
        }
    }
    argv = ["run", str(notebook), "--model", SMOKE, "--output", str(tmp_path / "out.ipynb")]
    options = ["--backend", "openai", "--url", url]
    options += ["--concurrency", "1", "--timeout", "30", "--retries", "0"]
    assert main([*argv, *options, "-p", "expect", repr(expect)]) == 0
    # a server option without the server's backend is refused before anything runs
    assert main([*argv, "--concurrency", "1"]) == 2
    err = capsys.readouterr().err
    assert "backend 'hf' takes no option 'concurrency'" in err
    assert "any reader also takes backend, prompt_mode, device, dtype" in err


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\u0085"])
def test_a_streamed_answer_holding_a_line_separator_is_stored_whole(tmp_path, fake, char):
    fake.answer = f"4{char}2"  # streamed raw inside the JSON string, in two chunks
    reader = _served(fake.url, retries=0)
    store = reader.store(tmp_path, "kv")
    rows = generate_missing(_requests(1), store, reader, progress=False)
    assert rows[0]["output"] == f"4{char}2" and store.rows()[0]["output"] == f"4{char}2"


@pytest.mark.parametrize("mode", ["ok", "whole"])
def test_an_answer_naming_another_model_stops_the_run_and_is_never_stored(tmp_path, fake, mode):
    """A server restarted with other weights under the same URL: the check at start passed,
    the answers name another model; the run stops with one line and stores nothing of them."""
    reader = _served(fake.url, retries=1, concurrency=1)
    store = reader.store(tmp_path, "kv")
    fake.answer_model = SMOKE  # the served model's own name passes
    assert len(generate_missing(_requests(1), store, reader, progress=False)) == 1
    fake.mode, fake.answer_model = mode, "other-weights"
    with pytest.raises(BackendError, match="answered as model 'other-weights'"):
        generate_missing(_requests(3), store, reader, progress=False)
    assert len(store.rows()) == 1


def test_a_request_that_starts_after_its_call_was_abandoned_stops_at_once(fake):
    """A request that passed its start check just before its call was abandoned (Ctrl-C, or
    another request's failure) must not reach the next call's client: it would hang there
    for the whole timeout."""
    from concurrent.futures import ThreadPoolExecutor

    from longctx.backends.openai import _Halt, _Stopped
    from longctx.requests import StopRule

    fake.mode = "hang"
    backend = backends.load_backend(SMOKE, _served(fake.url, timeout_s=30).backend)
    halt = _Halt(None, backend.client)
    backend._abandon(ThreadPoolExecutor(max_workers=1), halt)
    started = time.monotonic()
    with pytest.raises(_Stopped):
        body = {"model": SMOKE, "prompt": "hi", "stream": True, "max_tokens": 8}
        backend._stream(body, StopRule(), 1, halt)
    assert time.monotonic() - started < 5
    assert backend.client is not halt.client  # the next call has an open client


def test_ctrl_c_taken_by_another_thread_ends_the_wait_within_a_second(
    tmp_path, fake, ctrl_c_reaches_python
):
    """Ctrl-C reaches one thread of the process, not always the main one: a signal taken by
    another thread left the main thread asleep until a hung request timed out. Request
    threads now block SIGINT (the kernel hands it to the main thread), and the main thread
    waits in one-second steps, so even a signal another thread took is noticed at once."""
    import signal
    import threading

    fake.mode = "hang"
    reader = _served(fake.url, timeout_s=30, retries=0)
    backend = backends.load_backend(SMOKE, reader.backend)
    masks = []
    original = backend._stream
    backend._stream = lambda *a, **k: (
        masks.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])) or original(*a, **k)
    )

    def interrupt_from_this_thread():
        while fake.requests < 2:
            time.sleep(0.05)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # not the main thread

    threading.Thread(target=interrupt_from_this_thread, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        backend.generate(GenerateCall(["a", "b"], max_new_tokens=4, progress=False))
    assert time.monotonic() - started < 10  # the hung requests would hold it 30 s
    assert masks and all(signal.SIGINT in mask for mask in masks)


def test_ctrl_c_ends_a_run_in_one_line_with_130_and_keeps_the_store(
    tmp_path, fake, ctrl_c_reaches_python
):
    import os
    import signal
    import subprocess
    import sys

    fake.mode = "hang"
    proc = subprocess.Popen(
        [sys.executable, "-m", "longctx.cli", "reproduce", "--chapters", "kv_retrieval",
         "--scale", "ci", "--model", SMOKE, "--backend", "openai", "--url", fake.url,
         "--timeout", "60", "--results-dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )  # fmt: skip
    deadline = time.time() + 60
    while fake.requests == 0 and time.time() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler prints where every thread waits
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"still running 30 s after Ctrl-C; its threads then:\n{err[-6000:]}")
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [
        "longctx: interrupted; every row written so far is kept: the same command resumes"
    ]


def test_the_ctrl_c_tests_hold_when_the_runner_inherited_sigint_ignored():
    """``bash -c 'make test &'`` starts the suite with SIGINT ignored; the Ctrl-C tests' setup
    still gives them, and the processes they start, Python's own handler, and gives the
    runner's back after."""
    import signal
    import subprocess
    import sys

    from terminal import sigint_as_at_a_terminal

    asks = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    runner = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ignored = subprocess.run([sys.executable, "-c", asks], capture_output=True, text=True)
        assert ignored.stdout.strip() == "False"  # what the Ctrl-C tests used to inherit
        with sigint_as_at_a_terminal():
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            child = subprocess.run([sys.executable, "-c", asks], capture_output=True, text=True)
            assert child.stdout.strip() == "True"
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, runner)


def test_a_lone_surrogate_from_a_server_is_stored_as_a_replacement_character(tmp_path, fake):
    fake.answer = "4\ud8002"  # json.dumps writes it as a \ud800 escape, as a server may
    reader = _served(fake.url, retries=0)
    store = reader.store(tmp_path, "kv")
    rows = generate_missing(_requests(1), store, reader, progress=False)
    assert rows[0]["output"] == "4\ufffd2"  # one replacement character, not three
    assert store.rows()[0]["output"] == rows[0]["output"]


@pytest.mark.parametrize("bogus", [-5, True])
def test_a_served_max_model_len_that_is_no_window_is_not_taken_as_one(bogus):
    server = FakeServer(max_model_len=bogus)
    try:
        backend = backends.load_backend(SMOKE, backends.spec("openai", server.url))
        assert backend.max_context == 8192 and "model's config" in backend.window_source
    finally:
        server.close()


@pytest.mark.parametrize(
    "text",
    [
        "42",
        "[1, 2]",
        "null",
        '{"choices": 7}',
        '{"choices": [3]}',
        '{"choices": [{"text": 5}]}',
        "[" * 100_000 + "]" * 100_000,  # deeper than the parser recurses
    ],
)
def test_a_malformed_completion_from_a_server_is_one_line_not_a_traceback(text):
    from types import SimpleNamespace

    from longctx.backends.openai import OpenAIBackend, _first_choice

    fake = SimpleNamespace(url="http://127.0.0.1:1/v1", served_model="m")
    fake._check_model = lambda answer: OpenAIBackend._check_model(fake, answer)
    with pytest.raises(BackendError) as err:
        OpenAIBackend._whole(fake, text, 8)
    assert "\n" not in str(err.value)
    if text != "null" and len(text) < 100:  # the shapes an event of a stream can take too
        import json

        with pytest.raises(BackendError):
            _first_choice(json.loads(text), "streamed", text)
