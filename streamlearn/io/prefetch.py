"""A background-thread iterator: read / decompress / parse ahead of the learner.

VW runs its parser on its own thread feeding a bounded queue; :class:`Prefetcher` does the
same for any iterator of batches. The producer thread runs the reader (gzip inflation and
file reads release the GIL, and the numba parse kernels are ``nogil=True``, as are the C fast
path's ctypes calls), so with two cores parsing overlaps learning (whose kernels release the
GIL too). The queue is bounded
(``depth`` batches), so memory stays bounded whatever the stream's length. (Text chunks are
parsed on further threads by the reader pipeline itself: ``ReaderConfig.parse_threads``.)

Order is preserved; an exception raised by the reader is re-raised in the consumer at the
point of the stream where it happened; closing the prefetcher (or leaving a ``with`` block,
or garbage collection) stops and joins the thread.
"""
from __future__ import annotations

import queue
import threading

from ..signals import block_in_this_thread

__all__ = ["Prefetcher", "prefetch"]

_DONE = object()


class _Raised:
    __slots__ = ("exc",)

    def __init__(self, exc):
        self.exc = exc


class Prefetcher:
    """Iterate over ``iterable`` on a daemon thread, ``depth`` items ahead.

    Parameters
    ----------
    iterable : iterable
        The producer (e.g. ``read_batches(paths, cfg)``); it is created by the caller but
        advanced only on the worker thread.
    depth : int
        Maximum number of items waiting in the queue (>= 1).
    """

    def __init__(self, iterable, depth: int = 4, name: str = "streamlearn-reader"):
        self._it = iterable
        self._q = queue.Queue(maxsize=max(1, int(depth)))
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(target=self._blocked_work, name=name, daemon=True)
        self._thread.start()

    # -- producer ----------------------------------------------------------------------------
    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _blocked_work(self):
        block_in_this_thread()  # the process's signals land on the main thread (streamlearn.signals)
        self._work()

    def _work(self):
        it = self._it
        try:
            for item in it:
                if not self._put(item):
                    break
            else:
                self._put(_DONE)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            self._put(_Raised(e))
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # pragma: no cover
                    pass
            self._it = None

    # -- consumer ----------------------------------------------------------------------------
    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        item = self._q.get()
        if item is _DONE:
            self._finish()
            raise StopIteration
        if isinstance(item, _Raised):
            self._finish()
            raise item.exc
        return item

    def _finish(self):
        self._finished = True
        self._thread.join()

    def close(self):
        """Stop the worker (dropping what it read ahead) and join it."""
        self._finished = True
        self._stop.set()
        try:
            while True:
                self._q.get_nowait()
        except queue.Empty:
            pass
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            # a reader blocked on an interactive stdin must not hang the exit: the thread is
            # a daemon, so give up waiting after a while
            self._thread.join(timeout=0.2)

    def shrink(self, depth: int) -> None:
        """From now on read at most ``depth`` items ahead (what is already queued stays)."""
        with self._q.mutex:
            self._q.maxsize = max(1, int(depth))

    @property
    def alive(self) -> bool:
        """Whether the worker thread is still running."""
        return self._thread.is_alive()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):  # pragma: no cover - best effort
        try:
            if not self._finished:
                self.close()
        except Exception:
            pass


def prefetch(iterable, depth: int = 4):
    """Generator over ``iterable`` read ahead on a thread; the thread is stopped and joined
    when the generator is exhausted, closed or raises."""
    pf = Prefetcher(iterable, depth)
    try:
        yield from pf
    finally:
        pf.close()
