"""Memory: large, sparsely touched arrays that stay mostly non-resident, and glibc malloc
tuning for the reader pipeline (:func:`bound_malloc`, :func:`trim_heap`, :func:`bounded`).

Hashed feature tables (``-b 28``: 2^28 entries) and count sketches are touched only where
features land. numpy asks the kernel for transparent huge pages on large arrays (madvise),
so touching one feature faults in 2 MB around it and a sparsely used 1 GB table becomes
fully resident; :func:`lazy_zeros` opts out (4 kB pages, untouched ones never resident) and
:func:`lazy_copy` copies such an array without writing (and so touching) its zero pages.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["lazy_zeros", "lazy_copy", "bound_malloc", "trim_heap", "bounded"]

_BLOCK = 1 << 20


def _hugepage_switch():
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # numpy < 2
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            return None
    return _set_madvise_hugepage


def lazy_zeros(shape, dtype) -> np.ndarray:
    """``np.zeros(shape, dtype)`` with small pages: untouched entries cost no memory."""
    switch = _hugepage_switch()
    if switch is None:
        return np.zeros(shape, dtype)
    old = switch(False)
    try:
        return np.zeros(shape, dtype)
    finally:
        switch(old)


def lazy_copy(a) -> np.ndarray:
    """A copy of ``a`` (bit for bit, ``-0.0`` and NaN included) in a :func:`lazy_zeros` array,
    writing only the entries whose bits are not zero."""
    a = np.ascontiguousarray(a)
    if a.nbytes < (4 << 20) or a.dtype.itemsize not in (1, 2, 4, 8):
        return a.copy()
    out = lazy_zeros(a.shape, a.dtype)
    src, dst = a.reshape(-1), out.reshape(-1)
    bits = src.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])
    for i in range(0, src.size, _BLOCK):
        nz = np.flatnonzero(bits[i:i + _BLOCK]) + i
        dst[nz] = src[nz]
    return out


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
