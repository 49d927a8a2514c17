"""A background-thread iterator: read / decompress / parse ahead of the learner.

VW runs its parser on its own thread feeding a bounded queue; :class:`Prefetcher` does the
same for any iterator of batches. The producer thread runs the reader (gzip inflation and
file reads release the GIL, and the numba parse kernels are ``nogil=True``, as are the C fast
path's ctypes calls), so with two cores parsing overlaps learning (whose kernels release the
GIL too). The queue is bounded
(``depth`` batches), so memory stays bounded whatever the stream's length.

:func:`parallel_read_batches` goes one step further for text inputs: the reading thread only
reads (and inflates) chunks of complete lines, and ``workers`` threads parse them at the same
time (each chunk in place with :func:`streamlearn.io.source.chunk_batch`), results taken in
order.

Order is preserved; an exception raised by the reader is re-raised in the consumer at the
point of the stream where it happened; closing the prefetcher (or leaving a ``with`` block,
or garbage collection) stops and joins the thread.
"""
from __future__ import annotations

import os
import queue
import threading
from collections import deque

__all__ = ["Prefetcher", "prefetch", "parallel_read_batches", "bound_malloc", "trim_heap", "bounded"]

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
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
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


_MALLOC_DONE = []
_TRIM = []


def trim_heap() -> None:
    """Give the malloc heap's free pages back to the OS (glibc ``malloc_trim(0)``; else a
    no-op). :func:`bound_malloc` lets the heap keep freed batch buffers for reuse, and small
    per-batch arrays leave holes in it; :func:`bounded` calls this every 32 batches, so the
    resident heap is what the pipeline holds, not its history (without it, RSS crept ~1 MB
    per 2M examples: /proc/PID/smaps showed the arenas growing from 6 to 9 MB over 10M
    examples). A trim takes well under a millisecond."""
    if not _TRIM:
        fn = None
        try:
            import ctypes

            fn = ctypes.CDLL(None).malloc_trim
            fn.argtypes = [ctypes.c_size_t]
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
        _TRIM.append(fn)
    if _TRIM[0] is not None:
        _TRIM[0](0)


def bounded(batches, every: int = 32):
    """``batches`` unchanged, with :func:`trim_heap` called every ``every`` batches."""
    k = 0
    for b in batches:
        k += 1
        if k % every == 0:
            trim_heap()
        yield b


#: glibc mallopt parameters: (option, value, the environment variable that overrides it)
_MALLOPTS = (
    (-3, 32 << 20, "MALLOC_MMAP_THRESHOLD_"),  # M_MMAP_THRESHOLD: batch buffers from the heap
    (-1, 64 << 20, "MALLOC_TRIM_THRESHOLD_"),  # M_TRIM_THRESHOLD: freed buffers are kept for reuse
    (-8, 1, "MALLOC_ARENA_MAX"),  # M_ARENA_MAX: one heap that every thread reuses
)


def bound_malloc() -> bool:
    """Make the reader pipeline's memory cheap to reuse and bounded (glibc only; else a no-op).

    Every batch allocates a few MB of arrays, on parse threads, freed on the learner's.
    glibc's defaults serve such blocks with a fresh ``mmap`` each (every page faults in again:
    in this VM, 72,000 faults and 0.4 s of system time per 200,000 text examples) or from
    per-thread arenas that each keep their own free blocks (peak RSS crept +34% over 10M
    examples). Here the blocks come from one heap (``M_ARENA_MAX`` 1) that keeps freed blocks
    for the next batch (mmap threshold 32 MiB, trim threshold 64 MiB): 18,000 faults, 0.15 s;
    :func:`bounded` trims the heap every 32 batches, so the long run's peak is the short
    run's. Each setting is skipped when the user set its ``MALLOC_*`` variable. The CLI calls
    it (``cli.common.run_api``) before any reader thread starts; the Python API does not touch
    the host program's malloc. Returns whether anything was applied."""
    if _MALLOC_DONE:
        return _MALLOC_DONE[0]
    ok = False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        for opt, value, env in _MALLOPTS:
            if env not in os.environ:
                ok = bool(libc.mallopt(opt, value)) or ok
    except (OSError, AttributeError):
        ok = False
    _MALLOC_DONE.append(ok)
    return ok


def _parse_one(chunk, name, cfg, fmt):
    """Parse one chunk of complete lines -> (batch or None, number of lines in it)."""
    from .source import chunk_batch

    return chunk_batch(chunk, name, cfg, fmt)


def _text_parallel(src, cfg, workers):
    """Batches of one opened text input, chunks parsed by ``workers`` threads in order."""
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    from ..errors import InputError
    from .source import iter_chunks, sniff_text_format

    fmt = cfg.fmt
    # the workers parse each chunk as a whole stream: one chunk, never strict (line numbers are
    # made absolute here, and the strict error raised here names the right line)
    wcfg = replace(cfg, strict=False)
    line_base = 0
    pending = deque()
    ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="streamlearn-parse")

    def finish(fut):
        nonlocal line_base
        batch, n_lines = fut.result()
        base = line_base
        line_base += n_lines
        if batch is None:
            return None
        if base:
            batch.lines += base
            errs = batch.extra.get("errors")
            if errs:
                batch.extra["errors"] = [(s, ln + base, r) for s, ln, r in errs]
        errs = batch.extra.get("errors")
        if errs and cfg.strict:
            s, ln, reason = errs[0]
            raise InputError(f"{s}:{ln}: {reason}")
        return batch

    read_error = None
    chunks = iter_chunks(src.stream, src.name, cfg.chunk_bytes, src.flush_after)
    try:
        while True:
            # only a failed *read* is caught here (damaged stream: the chunks read before it
            # still count); the strict error raised by finish() must stop the run at once
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            except InputError as e:
                read_error = e
                break
            if fmt == "auto":
                fmt = sniff_text_format(chunk) or "auto"
            c = replace(wcfg, chunk_bytes=len(chunk) + 1)
            pending.append(ex.submit(_parse_one, chunk, src.name, c, fmt))
            # in order; a parsed head is handed on at once (a slow pipe's batches must not
            # wait for later chunks); at most ``workers`` chunks in flight here, so the
            # pipeline's memory is bounded by a few chunks whatever the stream's length
            while pending and (len(pending) >= workers or pending[0].done()):
                b = finish(pending.popleft())
                if b is not None:
                    yield b
        while pending:
            b = finish(pending.popleft())
            if b is not None:
                yield b
        if read_error is not None:
            raise read_error
    finally:
        for f in pending:
            f.cancel()
        ex.shutdown(wait=True)


def parallel_read_batches(paths, cfg, workers=None):
    """Like :func:`streamlearn.io.read_batches`, with VW text / LIBSVM chunks parsed by
    ``workers`` threads (default: the number of CPUs, at most 4) in parallel, in order.

    Other formats (Parquet, by ``PAR1`` magic or ``cfg.fmt``) go to their reader as
    :func:`~streamlearn.io.read_batches` would send them. With ``workers <= 1`` this is
    ``read_batches`` itself."""
    from . import read_batches
    from .source import READERS, _magic_format, open_input

    if workers is None:
        workers = min(4, os.cpu_count() or 1)
    if isinstance(paths, (str, bytes)):
        paths = [paths]
    if workers <= 1 or cfg.fmt not in ("auto", "vw", "libsvm"):
        yield from read_batches(paths, cfg)
        return
    for path in paths:
        src = open_input(path)
        try:
            # the decompressed head: a gzip'd Parquet file is Parquet
            magic = _magic_format(src.content_head()) if cfg.fmt == "auto" else None
            if magic is not None:
                if magic == "parquet":
                    from .parquet import parquet_reader
                    yield from parquet_reader(src.stream, src.name, cfg)
                else:  # pragma: no cover - no other binary format registered yet
                    yield from READERS[magic](src.stream, src.name, cfg)
                continue
            yield from _text_parallel(src, cfg, workers)
        finally:
            src.close()
