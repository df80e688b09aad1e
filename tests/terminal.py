"""Ctrl-C as a foreground process at a terminal receives it.

A shell without job control (a script, CI's step runner, ``bash -c 'make test &'``) starts a
background command with SIGINT ignored, as POSIX asks; Python keeps an inherited ignore, and a
child process inherits it again. A test that presses Ctrl-C would then wait in vain, so the
Ctrl-C tests set up the terminal's state they simulate instead of the runner's."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigint_as_at_a_terminal() -> Iterator[None]:
    """Python's own SIGINT handler, unblocked in this (main) thread; the runner's restored after.
    A child started meanwhile begins at the default, which Python replaces with its own."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, previous)
