"""Which thread a process's SIGINT / SIGTERM / SIGHUP lands on.

The kernel delivers a signal sent to the process (``kill PID``, Ctrl-C, a closed terminal) to
any one of its threads that does not block it. CPython runs Python-level handlers only in the
main thread, and wakes the main thread from a blocking wait (a queue, a read) only when the
signal interrupts *that* thread: one that lands on a reader or BLAS thread sets a flag the
main thread never looks at while it waits for input that does not come, and the run hangs.
So every thread streamlearn starts blocks these signals in itself
(:func:`block_in_this_thread`, first thing in the thread), and the process blocks them while
numpy's BLAS starts its threads (:func:`blocked`, around the imports), which leaves the main
thread the only one the kernel can pick.
"""
from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["GUARDED_SIGNALS", "block_in_this_thread", "blocked"]

#: the signals the interrupt guard answers: SIGINT (Ctrl-C), SIGTERM (kill), SIGHUP (a closed
#: terminal or ssh session: as SIGTERM)
GUARDED_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


def block_in_this_thread() -> None:
    """Block :data:`GUARDED_SIGNALS` in the calling thread (never the main thread's job)."""
    if hasattr(signal, "pthread_sigmask") and threading.current_thread() is not threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, GUARDED_SIGNALS)


@contextlib.contextmanager
def blocked():
    """Block :data:`GUARDED_SIGNALS` in the calling thread for the ``with`` body, so threads
    started inside (by C libraries too) inherit the block; a signal that arrives meanwhile is
    delivered when the body ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, GUARDED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
