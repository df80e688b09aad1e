"""The wire between a sandboxed solution and the tests that judge it.

A solution's tests never run in the solution's process: whatever runs there, a program
can read, patch or call early (an end token, the test code, the verdict). The solution runs
sandboxed and answers calls; the tests run in a second process the program cannot see, and
call the solution's function through a proxy that sends the arguments and receives the
return value as data. The verdict is that process's: the program can only answer calls.

This file runs three ways, and so imports nothing of longctx:

* as the test process: ``python -I sandbox_rpc.py CALLS_FD REPLIES_FD`` reads
  ``{"context", "tests", "entry_point"}`` on stdin, runs ``context`` (the problem's own
  prompt: imports and helpers), binds the entry point to the proxy, runs ``tests`` and
  ``check(candidate)``, and prints :data:`CHECKED` if every test passed;
* in the sandbox, its source is executed in a namespace of its own after the solution, and
  :func:`serve` answers the calls with the solution's function;
* imported by the scorer, for :data:`CHECKED` and this file's path.

Values cross as tagged JSON: ``None``, bools, ints, floats and strings as themselves;
containers as ``[tag, items]`` (list, tuple, dict, set, frozenset, bytes, complex). The test
side builds plain Python values from plain JSON, so no object of the program's ever reaches
the tests (no ``__eq__`` of its own, no pickle).
"""

import json
import os
import sys

CHECKED = "longctx: every test ran and passed"
GONE = "CandidateGone"  # the solution's process closed its end: it left or was killed
MAX_LINE = 16 * 2**20  # one message's bytes
MAX_DEPTH = 64
MAX_ITEMS = 10**6  # items an iterator returned by the solution may yield


class CandidateGone(Exception):
    """The solution's process ended before answering (it exited or was killed)."""


class CandidateRaised(Exception):
    """The solution's function raised; the message is its exception, as text."""


def encode(value, depth=0):
    """A value as tagged JSON; raises ValueError or TypeError for what cannot cross."""
    if depth > MAX_DEPTH:
        raise ValueError(f"a value nested more than {MAX_DEPTH} deep")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, list):
        return ["L", [encode(x, depth + 1) for x in value]]
    if isinstance(value, tuple):
        return ["T", [encode(x, depth + 1) for x in value]]
    if isinstance(value, dict):
        return ["D", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]]
    if isinstance(value, frozenset):
        return ["F", [encode(x, depth + 1) for x in value]]
    if isinstance(value, set):
        return ["S", [encode(x, depth + 1) for x in value]]
    if isinstance(value, (bytes, bytearray)):
        return ["B", bytes(value).hex()]
    if isinstance(value, complex):
        return ["C", [value.real, value.imag]]
    if hasattr(value, "tolist"):  # an array or scalar of numpy's: what it holds
        return encode(value.tolist(), depth + 1)
    if hasattr(value, "__index__"):
        return int(value.__index__())
    if hasattr(value, "__next__"):  # a generator: the tests may take list() or tuple() of it
        items = []
        for item in value:
            if len(items) == MAX_ITEMS:
                raise ValueError(f"an iterator of more than {MAX_ITEMS} items")
            items.append(encode(item, depth + 1))
        return ["L", items]
    raise TypeError(f"a value of type {type(value).__name__} cannot be returned to the tests")


_DECODERS = {
    "L": lambda body, d: [decode(x, d) for x in body],
    "T": lambda body, d: tuple(decode(x, d) for x in body),
    "D": lambda body, d: {decode(k, d): decode(v, d) for k, v in body},
    "S": lambda body, d: {decode(x, d) for x in body},
    "F": lambda body, d: frozenset(decode(x, d) for x in body),
    "B": lambda body, d: bytes.fromhex(body),
    "C": lambda body, d: complex(*body),
}


def decode(obj, depth=0):
    """The plain Python value of tagged JSON; ValueError for anything else."""
    if depth > MAX_DEPTH:
        raise ValueError(f"a value nested more than {MAX_DEPTH} deep")
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list) and len(obj) == 2 and obj[0] in _DECODERS:
        return _DECODERS[obj[0]](obj[1], depth + 1)
    raise ValueError("not a value of the wire format")


def _line(message):
    return json.dumps(message, ensure_ascii=True).encode("ascii") + b"\n"


def serve(function, calls_fd, replies_fd):
    """Answer calls with ``function`` until the tests close their end (the sandbox side)."""
    calls = os.fdopen(calls_fd, "rb")
    write = os.write
    while True:
        line = calls.readline(MAX_LINE + 1)
        if not line.endswith(b"\n"):
            return  # end of the tests (or a cut message: nothing more is asked)
        try:
            call = json.loads(line)
            reply = {"value": encode(function(*decode(call["args"]), **decode(call["kwargs"])))}
        except BaseException as error:  # noqa: BLE001 - the tests see it; SystemExit too
            reply = {"raised": f"{type(error).__name__}: {error}"[:2000]}
        data = _line(reply)
        if len(data) > MAX_LINE:
            data = _line({"raised": f"ValueError: a return value over {MAX_LINE} bytes"})
        while data:
            data = data[write(replies_fd, data) :]


class Peer:
    """The test side's end of the wire: one call, one reply."""

    def __init__(self, calls_fd, replies_fd):
        self.calls = os.fdopen(calls_fd, "wb", buffering=0)
        self.replies = os.fdopen(replies_fd, "rb")

    def call(self, args, kwargs):
        try:
            self.calls.write(_line({"args": encode(list(args)), "kwargs": encode(dict(kwargs))}))
        except BrokenPipeError:
            raise CandidateGone("the solution's process ended before its tests") from None
        line = self.replies.readline(MAX_LINE + 1)
        if not line.endswith(b"\n"):
            raise CandidateGone("the solution's process ended before answering")
        reply = json.loads(line)
        if "raised" in reply:
            raise CandidateRaised(str(reply["raised"]))
        return decode(reply["value"])

    def close(self):
        self.calls.close()


def main(argv):
    spec = json.loads(sys.stdin.read())
    peer = Peer(int(argv[1]), int(argv[2]))

    def candidate(*args, **kwargs):
        return peer.call(args, kwargs)

    namespace = {"__name__": "__main__"}
    exec(compile(spec["context"], "<problem>", "exec"), namespace)
    # Tests that name the entry point (not ``candidate``) call the solution too, as they do
    # when the tests are appended to the solution.
    namespace[spec["entry_point"]] = candidate
    exec(compile(spec["tests"], "<tests>", "exec"), namespace)
    namespace["check"](candidate)
    peer.close()
    sys.stdout.write("\n" + CHECKED + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv)
