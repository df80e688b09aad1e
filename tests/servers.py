"""Servers for the ``openai`` backend's tests, on 127.0.0.1: llama-cpp-python's real
OpenAI-compatible server with the smoke model, and a fake one that misbehaves on purpose
(hangs, answers 500, sends error chunks, cuts streams, ignores ``stream``, refuses long
prompts) while answering like a real one otherwise."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SMOKE = "smollm2-135m-instruct"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, serving the smoke model."""

    def __init__(self, alias: str = SMOKE, interrupt: bool = False, n_ctx: int = 8192):
        from longctx.models import ALIASES, alias_gguf_path

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(alias_gguf_path(ALIASES[SMOKE])),
            "--model_alias",
            alias,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(n_ctx),
            "--n_threads",
            str(os.cpu_count() or 1),
            "--verbose",
            "False",
            "--interrupt_requests",
            str(interrupt),
        ]
        self.proc = None

    def start(self):
        import httpx

        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(240):
            try:
                if httpx.get(f"{self.url}/models", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited with {self.proc.returncode}")
            time.sleep(0.5)
        raise RuntimeError("llama.cpp server did not come up in 120 s")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


def _raw_json(value) -> str:
    """JSON with non-ASCII written raw, as servers that do not escape it send it; a lone
    surrogate (no UTF-8 for it) escaped, as such a server must."""
    raw = json.dumps(value, ensure_ascii=False)
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return raw


class FakeServer:
    """An OpenAI-compatible completions server whose behaviour a test sets:

    * ``answer``: the text every completion streams (two chunks, then a finish reason);
    * ``mode``: ``ok``; ``hang`` (accepts, never answers); ``status`` (answers HTTP
      ``status``); ``busy`` (429 with ``Retry-After: retry_after`` until that many seconds
      after its first 429, then ``ok``); ``trickle`` (streams a byte every 0.2 s, forever);
      ``flood`` (streams 50,000 one-character events); ``error_chunk`` (streams an
      ``{"error": ...}`` event); ``whole`` (ignores ``stream`` and answers one JSON
      completion); ``too_long`` (HTTP 400 with vLLM's context-length message);
    * ``max_model_len``: listed in ``/v1/models`` when set, as vLLM and SGLang do;
    * ``n_ctx``: answered at ``/props`` (beside ``/v1``) when set, as llama.cpp's server does.

    ``modes``, when set, is consumed one mode per completion request in arrival order (the
    ``mode`` above serves the rest). ``requests`` counts the completion requests it received."""

    def __init__(
        self,
        model: str = SMOKE,
        answer: str = "42",
        max_model_len: int | None = None,
        n_ctx: int | None = None,
    ):
        self.model, self.answer, self.max_model_len = model, answer, max_model_len
        self.n_ctx = n_ctx
        self.mode, self.status, self.requests = "ok", 500, 0
        self.modes: list[str] = []
        self._lock = threading.Lock()
        self.answer_model = None  # a model id each answer names (None: answers name none)
        self.release = threading.Event()  # set at shutdown so hung handlers return
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes, kind: str = "application/json"):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/props" and fake.n_ctx:
                    props = {"default_generation_settings": {"n_ctx": fake.n_ctx}}
                    return self._send(200, json.dumps(props).encode())
                if self.path != "/v1/models":
                    return self._send(404, b"{}")
                entry = {"id": fake.model, "object": "model"}
                if fake.max_model_len:
                    entry["max_model_len"] = fake.max_model_len
                self._send(200, json.dumps({"object": "list", "data": [entry]}).encode())

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.requests += 1
                    mode = fake.modes.pop(0) if fake.modes else fake.mode
                if mode == "hang":
                    fake.release.wait(120)
                    return
                if mode == "status":
                    return self._send(fake.status, b'{"error": "fake failure"}')
                if mode == "busy":  # 429 with the wait it asks for, counted from the first
                    with fake._lock:
                        fake.busy_until = fake.busy_until or time.time() + fake.retry_after
                    if time.time() < fake.busy_until:
                        self.send_response(429)
                        self.send_header("Retry-After", str(fake.retry_after))
                        self.send_header("Content-Length", "2")
                        self.end_headers()
                        return self.wfile.write(b"{}")
                if mode in ("trickle", "flood"):
                    return self._endless(mode)
                if mode == "too_long":
                    message = (
                        "This model's maximum context length is 2048 tokens. However, you "
                        "requested 4400 tokens. Please reduce the length of the messages."
                    )
                    return self._send(400, json.dumps({"error": {"message": message}}).encode())
                half = len(fake.answer) // 2
                chunks = [fake.answer[:half], fake.answer[half:]]
                named = {"model": fake.answer_model} if fake.answer_model else {}
                if mode == "whole" or not body.get("stream"):
                    done = {"choices": [{"text": fake.answer, "finish_reason": "stop"}], **named}
                    return self._send(200, json.dumps(done).encode())
                events = [
                    {"choices": [{"text": c, "finish_reason": None}], **named} for c in chunks
                ]
                if mode == "error_chunk":
                    events = events[:1] + [{"error": {"message": "out of memory"}}]
                else:
                    events.append({"choices": [{"text": "", "finish_reason": "stop"}]})
                stream = "".join(f"data: {_raw_json(e)}\n\n" for e in events)
                stream += "data: [DONE]\n\n"
                self._send(200, stream.encode(), "text/event-stream")

            def _endless(self, mode: str):
                """``trickle``: a byte every 0.2 s, forever; ``flood``: 50,000 one-character
                events as fast as it can, then the end of the stream."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                event = 'data: {"choices": [{"text": "a", "finish_reason": null}]}\n\n'
                try:
                    if mode == "flood":
                        self.wfile.write((event * 50_000 + "data: [DONE]\n\n").encode())
                        return
                    while not fake.release.is_set():
                        for byte in event.encode():
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            if fake.release.wait(0.2):
                                return
                except OSError:  # the client hung up
                    return

        self.busy_until, self.retry_after = 0.0, 2
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
