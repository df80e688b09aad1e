"""Generated code runs contained: loops, writes outside the temp dir, huge allocations, network."""

import os
import uuid

import pytest

from longctx.sandbox import run_untrusted


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
        assert not res.passed and "PermissionError" in res.stderr_tail, code
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
TESTS = "def check(f):\n    assert f(2, 2) == 4\n\n"


@pytest.mark.parametrize(
    "early_exit",
    [
        "exit()",
        "quit()",
        "import sys\nsys.exit(0)",
        "raise SystemExit(0)",
        "import os\nos._exit(0)",
        "import unittest\nif __name__ == '__main__':\n    unittest.main(argv=['x'])",
    ],
)
def test_a_program_that_exits_0_before_its_tests_end_fails(early_exit):
    result = run_untrusted(f"{WRONG}\n{early_exit}\n{TESTS}check(add)\n", timeout_s=10)
    assert result.returncode == 0 and not result.passed and result.status == "failed"
    assert "did not all run" in result.stderr_tail


def test_a_program_that_runs_its_tests_to_the_end_passes_and_may_print():
    right = "def add(a, b):\n    print('adding', a, b)\n    return a + b\n"
    result = run_untrusted(f"{right}\n{TESTS}check(add)\n", timeout_s=10)
    assert result.passed and result.status == "passed"
