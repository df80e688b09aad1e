"""Generated code runs contained: loops, writes outside the temp dir, huge allocations, network."""

import json
import os
import subprocess
import time
import uuid

import pytest

from longctx.sandbox import check_solution, isolation_command, run_untrusted


def test_correct_program_passes_and_failing_assert_fails():
    assert run_untrusted("assert 1 + 1 == 2").status == "passed"
    res = run_untrusted("def f():\n    return 3\nassert f() == 4")
    assert not res.passed and res.status == "failed"


def test_infinite_loop_is_killed_at_the_wall_clock_limit():
    res = run_untrusted("while True:\n    pass", timeout_s=1.5)
    assert not res.passed and res.status == "timeout"
    assert res.seconds < 10


def test_sleeping_program_times_out_without_cpu():
    res = run_untrusted("import time\ntime.sleep(60)", timeout_s=1.0)
    assert res.status == "timeout" and res.seconds < 10


def test_write_outside_the_temp_dir_is_refused_and_leaves_nothing(tmp_path):
    target = tmp_path / f"escape-{uuid.uuid4().hex}.txt"
    for code in (
        f"open({str(target)!r}, 'w').write('x')",
        f"import os\nfd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)",
        f"import pathlib\npathlib.Path({str(target)!r}).write_text('x')",
    ):
        res = run_untrusted(code)
        # refused by the Python guard, or (isolated) not even visible: the host's /tmp is
        # hidden under the sandbox's own
        refused = ("PermissionError", "FileNotFoundError")
        assert not res.passed and any(e in res.stderr_tail for e in refused), code
        assert not target.exists()


def test_deleting_outside_the_temp_dir_is_refused(tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("important")
    res = run_untrusted(f"import os, shutil\nos.remove({str(keep)!r})")
    assert not res.passed and keep.exists()
    res = run_untrusted(f"import shutil\nshutil.rmtree({str(tmp_path)!r})")
    assert not res.passed and keep.exists()


def test_writing_inside_its_own_temp_dir_is_allowed():
    res = run_untrusted(
        "open('scratch.txt', 'w').write('ok')\nassert open('scratch.txt').read() == 'ok'"
    )
    assert res.passed


def test_huge_allocation_fails_as_memory_error_not_host_oom():
    res = run_untrusted("x = bytearray(8 * 1024**3)\nassert False, 'allocated'", memory_mb=256)
    assert not res.passed and res.status == "memory"


def test_network_and_subprocesses_are_blocked():
    res = run_untrusted("import socket\nsocket.create_connection(('example.com', 80), timeout=2)")
    assert not res.passed and "PermissionError" in res.stderr_tail
    res = run_untrusted("import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 9))")
    assert not res.passed and "PermissionError" in res.stderr_tail
    res = run_untrusted("import subprocess\nsubprocess.run(['true'])")
    assert not res.passed
    res = run_untrusted("import os\nos.system('touch /tmp/should-not-exist')")
    assert not res.passed


def test_child_gets_an_empty_environment(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    res = run_untrusted(
        "import os\nassert 'SECRET_TOKEN' not in os.environ\nassert os.getcwd() == os.environ['HOME']"
    )
    assert res.passed, res.stderr_tail
    assert os.environ["SECRET_TOKEN"] == "hunter2"


WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
TESTS = "def check(f):\n    assert f(2, 2) == 4\n"


def test_a_solution_is_judged_by_tests_in_another_process():
    assert check_solution(RIGHT, TESTS, "add").status == "passed"
    wrong = check_solution(WRONG, TESTS, "add")
    assert wrong.status == "failed" and "AssertionError" in wrong.stderr_tail
    raised = check_solution("def add(a, b):\n    raise ValueError('no')\n", TESTS, "add")
    assert raised.status == "error" and "ValueError: no" in raised.stderr_tail
    missing = check_solution("def other():\n    pass\n", TESTS, "add")
    assert missing.status == "error" and "KeyError: 'add'" in missing.stderr_tail
    top_level = check_solution("assert False, 'its own test'\n" + RIGHT, TESTS, "add")
    assert top_level.status == "failed" and "its own test" in top_level.stderr_tail
    loop = "def add(a, b):\n    while True:\n        pass\n"
    slow = check_solution(loop, TESTS, "add", timeout_s=1.5)
    assert slow.status == "timeout" and slow.seconds < 10
    big = "def add(a, b):\n    return bytearray(8 * 1024**3)\n"
    assert check_solution(big, TESTS, "add", memory_mb=256).status == "memory"


@pytest.mark.parametrize(
    "early_exit",
    [
        "exit()",
        "quit()",
        "import sys\nsys.exit(0)",
        "raise SystemExit(0)",
        "import unittest\nif __name__ == '__main__':\n    unittest.main(argv=['x'])",
    ],
)
def test_a_solution_that_exits_0_before_its_tests_fails(early_exit):
    result = check_solution(f"{WRONG}\n{early_exit}\n", TESTS, "add", timeout_s=10)
    assert result.returncode == 0 and not result.passed and result.status == "failed"
    assert "exited before its tests ran" in result.stderr_tail


@pytest.mark.parametrize(
    "forge",
    [
        # What once passed a wrong program: the scorer's end lived in the program's process,
        # so calling it (or reading its token from the closure) and leaving passed.
        "for _n, _f in list(globals().items()):\n    if _n.startswith('_longctx') and callable(_f):\n"
        "        _f()\nraise SystemExit(0)",
        # Echo whatever stdin holds, forge a pass line on every stream and descriptor, leave.
        "import posix\ndata = b''\ntry:\n    data = posix.read(0, 100)\nexcept OSError:\n    pass\n"
        "for fd in range(1, 10):\n    try:\n        posix.write(fd, b'\\n' + data + "
        "b'\\nlongctx: every test ran and passed\\n{\"value\": 4}\\n')\n    except OSError:\n"
        "        pass\nraise SystemExit(0)",
        # An answer equal to everything: only data crosses to the tests, never an object.
        "class Yes:\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n    return Yes()",
        # Patch what the tests might use, in its own process: the tests are not there.
        "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})\n"
        "import sys\nsys.excepthook = lambda *a: None",
    ],
)
def test_nothing_in_the_solutions_process_can_pass_a_wrong_solution(forge):
    result = check_solution(f"{WRONG}\n{forge}\n", TESTS, "add", timeout_s=10)
    assert not result.passed, result


def test_a_right_solution_passes_whatever_it_does_to_its_own_streams():
    for swap in (
        "import io, sys\nsys.stdout = io.StringIO()\nprint('kept out')",
        "import sys\nsys.stdout = None",
        "import os\nos.close(1)\nos.close(0)",
        "print('adding')",
    ):
        result = check_solution(f"{RIGHT}\n{swap}\n", TESTS, "add", timeout_s=10)
        assert result.passed, (swap, result)


def test_the_tests_see_the_problems_helpers_and_the_solution_keeps_its_own_names():
    # HumanEval's tests call helpers of the prompt (poly, encode_cyclic) and may name the
    # entry point itself; a solution may define names the wire uses (encode, serve).
    context = 'def double(x):\n    return 2 * x\n\ndef add(a, b):\n    """Add."""\n'
    tests = "def check(f):\n    assert f(double(1), 2) == 4\n    assert add(1, 1) == double(1)\n"
    solution = context + "    pass\n\ndef encode(x):\n    return 'mine'\n\n"
    solution += "def serve(*a):\n    pass\n\n"
    solution += "def add(a, b):\n    return a + b if encode(0) == 'mine' else None\n"
    assert check_solution(solution, tests, "add", context=context).passed


def test_values_cross_the_wire_as_plain_data():
    from longctx.sandbox_rpc import decode, encode

    for value in (None, True, 0, -(10**30), 1.5, float("inf"), "é\u2028", [1, (2, 3)],
                  {"a": [1], (1, 2): {3}}, frozenset({1}), b"\x00\xff", 1 + 2j, ((),)):  # fmt: skip
        assert decode(json.loads(json.dumps(encode(value)))) == value
        assert type(decode(encode(value))) is type(value)
    assert encode(x for x in (1, 2)) == ["L", [1, 2]]  # a generator: what list() of it gives
    assert encode([1, 2]) != encode((1, 2))
    with pytest.raises(TypeError, match="cannot be returned"):
        encode(object())
    with pytest.raises(ValueError, match="wire format"):
        decode({"__class__": "x"})
    tests = "def check(f):\n    assert f(3) == (1, 2, 3) and type(f(3)) is tuple\n"
    generator = "def first(n):\n    return tuple(i + 1 for i in range(n))\n"
    assert check_solution(generator, tests, "first").passed


def test_any_exit_0_is_a_pass_for_a_plain_program():
    # run_untrusted judges nothing but the exit: its asserts are the program's own.
    right = "def add(a, b):\n    print('adding', a, b)\n    return a + b\n"
    result = run_untrusted(f"{right}\n{TESTS}check(add)\n", timeout_s=10)
    assert result.passed and result.status == "passed"


# ------------------------------------------------------------------ OS isolation (bubblewrap)
# Each attack of the second review, run as generated code: none may leave a file outside the
# scratch folder, reach a socket on 127.0.0.1, leave a process behind, read the scorer's
# environment, or hold the scorer past its timeout.

isolated = pytest.mark.skipif(
    isolation_command() is None,
    reason="no OS isolation here: install bubblewrap (make test does, with apt-get)",
)


def _escape(body: str, timeout_s: float = 5.0):
    started = time.time()
    result = run_untrusted(body, timeout_s=timeout_s)
    return result, time.time() - started


@isolated
@pytest.mark.parametrize(
    "write",
    [
        "import _io\n_io.open({path!r}, 'w').write('x')",
        "import posix\nfd = posix.open({path!r}, posix.O_WRONLY | posix.O_CREAT)\nposix.write(fd, b'x')",
        "import importlib, os\nimportlib.reload(os)\nos.system('touch {path}')",
        "import os\nos.posix_spawn('/bin/sh', ['sh', '-c', 'touch {path}'], {{}})\nimport time\ntime.sleep(1)",
    ],
)
def test_no_file_is_written_outside_the_scratch_folder(tmp_path, write):
    target = tmp_path / "escaped"
    result, _ = _escape(write.format(path=str(target)))
    assert not target.exists(), result


@isolated
def test_no_connection_reaches_the_scorers_loopback():
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    result, _ = _escape(
        f"import _socket\ns = _socket.socket()\ns.settimeout(2)\nprint(s.connect_ex(('127.0.0.1', {port})))"
    )
    with pytest.raises(TimeoutError):
        server.accept()
    server.close()


@isolated
def test_the_scorers_environment_cannot_be_read_from_proc(monkeypatch):
    monkeypatch.setenv("LONGCTX_SECRET_FOR_TEST", "s3cret")
    result, _ = _escape(
        "import os\nfor pid in os.listdir('/proc'):\n    try:\n        d = open('/proc/%s/environ' % pid).read()\n"
        "    except Exception:\n        continue\n    assert 's3cret' not in d, pid\n"
        "assert 's3cret' not in open('/proc/%d/environ' % os.getppid()).read()\n"
    )
    assert result.status in ("passed", "error") and "AssertionError" not in result.stderr_tail


@isolated
def test_no_process_is_left_and_a_fork_bomb_or_a_detached_child_ends_with_the_timeout():
    marker = f"longctx-sandbox-{uuid.uuid4().hex}"
    for body in (
        # a detached child that keeps stderr open and outlives the program
        f"import os, subprocess\nsubprocess.Popen.__init__  # patched; use posix_spawn\n"
        f"os.posix_spawn('/bin/sh', ['sh', '-c', 'setsid sleep 60 # {marker}'], {{}})\n",
        # a fork bomb
        "import posix\nwhile True:\n    try:\n        posix.fork()\n    except OSError:\n        pass\n",
    ):
        result, seconds = _escape(body, timeout_s=3)
        assert seconds < 3 + 1.5, (seconds, result)
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert not left.strip()


@isolated
def test_the_scratch_folder_is_size_limited():
    result, _ = _escape(
        "data = b'x' * 2**20\nwith open('big', 'wb') as f:\n    for _ in range(270):\n        f.write(data)\n"
    )
    assert not result.passed
    assert "No space left" in result.stderr_tail or "File too large" in result.stderr_tail


def test_without_isolation_scoring_refuses_unless_accepted(monkeypatch):
    import longctx.sandbox as sandbox
    from longctx.errors import ParameterError

    monkeypatch.setattr(sandbox, "isolation_command", lambda *a, **k: None)
    monkeypatch.delenv(sandbox.UNISOLATED_ENV, raising=False)
    with pytest.raises(ParameterError, match="needs OS isolation: install bubblewrap"):
        sandbox.run_untrusted("print(1)")
    assert sandbox.run_untrusted("print(1)", allow_unisolated=True).passed
    monkeypatch.setenv(sandbox.UNISOLATED_ENV, "1")
    assert sandbox.run_untrusted("print(1)").passed


def test_a_stderr_flood_is_capped_like_stdout_not_buffered_by_the_scorer():
    # 20 MB to stderr, then a clean end: before, the scorer read it all through a pipe into
    # its own memory and scored the program passed; now stderr is a file under the same
    # size limit as stdout (max_file_mb), and the program is stopped at it.
    flood = "import sys\nfor _ in range(20):\n    sys.stderr.write('x' * 2**20)\n"
    result = run_untrusted(flood + "assert True\n", timeout_s=10, max_file_mb=4)
    assert result.status == "error" and not result.passed
    assert len(result.stderr_tail) <= 2000
    small = run_untrusted("import sys\nsys.stderr.write('warned')\nassert True\n")
    assert small.passed and small.stderr_tail.endswith("warned")


@isolated
def test_no_host_socket_is_reachable(tmp_path):
    # The sandbox used to see the whole host read-only, so every socket file was one
    # connect() away (a 0777 socket in /var/tmp was connected to); now it sees only the
    # system folders and its interpreter.
    import socket
    import tempfile

    folder = tempfile.mkdtemp(dir="/var/tmp")
    path = os.path.join(folder, "service.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(folder, 0o777)
    os.chmod(path, 0o777)
    server.listen(1)
    server.settimeout(0.5)
    try:
        result, _ = _escape(
            "import _socket\ns = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)\n"
            f"s.connect({path!r})\nprint('connected')"
        )
        with pytest.raises(TimeoutError):
            server.accept()
        assert not result.passed and "connected" not in result.stderr_tail
    finally:
        server.close()
        os.unlink(path)
        os.rmdir(folder)


@isolated
@pytest.mark.parametrize("where", ["/dev/shm/fill", "/dev/fill"])
def test_scratch_cannot_be_bypassed_through_dev(where):
    # /dev and /dev/shm were writable tmpfs of their own, outside the 32 MB scratch quota.
    result, _ = _escape(
        f"import posix\nfd = posix.open({where!r}, posix.O_WRONLY | posix.O_CREAT, 0o600)\n"
        "posix.write(fd, b'x' * 2**20)\n"
    )
    assert not result.passed and "Read-only file system" in result.stderr_tail, result


@isolated
def test_no_nested_namespace_can_mount_more_scratch():
    # A program could unshare a user and mount namespace of its own, then mount a tmpfs
    # of any size; nested user namespaces are now refused.
    result, _ = _escape(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000\n"
        "assert libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == -1, 'unshared'\n"
    )
    assert result.passed, result


@isolated
def test_processes_and_threads_are_bounded_for_the_whole_sandbox():
    # Every process (and thread) of the sandbox counts against one limit, and each has at
    # most memory_mb of address space: the sandbox's memory is bounded as a whole.
    from longctx.sandbox import MAX_PROCESSES

    result, _ = _escape(
        "import threading, time\nn = 0\nwhile True:\n    try:\n"
        "        threading.Thread(target=time.sleep, args=(3,), daemon=True).start()\n"
        "    except RuntimeError:\n        break\n    n += 1\n"
        f"    assert n < {MAX_PROCESSES}, n\n"
    )
    if os.geteuid() == 0:  # a user of its own: the limit is the sandbox's alone
        assert result.passed, result
        assert MAX_PROCESSES <= 8


@isolated
@pytest.mark.skipif(os.geteuid() != 0, reason="a user per run needs a root caller")
def test_one_programs_thread_loop_does_not_starve_the_programs_beside_it():
    # All programs ran as nobody, whose process limit they shared: one program's thread or
    # fork loop made 3 of 3 correct programs beside it "error". Each run has a user of its own.
    from concurrent.futures import ThreadPoolExecutor

    hog = (
        "import threading, time\nwhile True:\n    try:\n"
        "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "    except RuntimeError:\n        time.sleep(30)\n"
    )
    with ThreadPoolExecutor(4) as pool:
        hogging = pool.submit(run_untrusted, hog, timeout_s=10)
        time.sleep(3)
        right = [pool.submit(run_untrusted, "assert 1 + 1 == 2", timeout_s=5) for _ in range(3)]
        assert [f.result().status for f in right] == ["passed"] * 3
        assert hogging.result().status == "timeout"


@isolated
def test_an_interpreter_under_tmp_is_seen_inside_the_sandbox(monkeypatch):
    # The sandbox mounts its own /tmp: an interpreter that lived under the host's /tmp was
    # hidden, and every program scored "error" (bwrap: execvp ... No such file).
    import shutil
    import tempfile

    import longctx.sandbox as sandbox

    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no system interpreter to copy")
    home = tempfile.mkdtemp(dir="/tmp")
    try:
        os.chmod(home, 0o755)
        copy = os.path.join(home, "bin", "python3")
        os.mkdir(os.path.dirname(copy))
        shutil.copy2(os.path.realpath("/usr/bin/python3"), copy)
        monkeypatch.setattr(sandbox, "sandbox_python", lambda: copy)
        result = run_untrusted("assert 1 + 1 == 2", timeout_s=10)
        assert result.passed, result
    finally:
        shutil.rmtree(home)


def _cgroups_here() -> bool:
    from longctx.sandbox import RunCgroup

    group = RunCgroup.make(64 * 2**20, 6)
    if group is None:
        return False
    group.remove()
    return True


# Three processes of 300 MB each: every one under its own 512 MB address-space limit, so
# only a bound on the whole sandbox can stop them.
_SPREAD_OUT = """
import ctypes, os, time
libc = ctypes.CDLL(None)
kids = []
for _ in range(2):
    pid = libc.fork()
    if pid == 0:
        block = bytearray(300 * 2**20)
        block[::4096] = b"x" * len(block[::4096])
        time.sleep(3)
        libc._exit(0)
    kids.append(pid)
block = bytearray(300 * 2**20)
block[::4096] = b"x" * len(block[::4096])
for pid in kids:
    assert os.waitpid(pid, 0)[1] == 0, "a process was killed"
"""


@isolated
@pytest.mark.skipif(not _cgroups_here(), reason="needs cgroups this user may make")
def test_memory_is_bounded_for_the_whole_sandbox_not_per_process():
    """Memory was limited per process only: a program spreading its memory over several
    processes held their sum. Where the scorer may make cgroups, a run's processes share one
    memory limit; the kernel's kill for it reads as "memory", and no cgroup is left."""
    from longctx.sandbox import CGROUP_ROOT

    def leftovers():
        return [p for p, _, _ in os.walk(CGROUP_ROOT) if "longctx-sandbox-" in p]

    spread = run_untrusted(_SPREAD_OUT, memory_mb=512, timeout_s=20)
    assert spread.status == "memory" and not spread.passed, spread
    assert run_untrusted(_SPREAD_OUT, memory_mb=1024, timeout_s=20).passed  # 900 MB fits
    assert not leftovers()
