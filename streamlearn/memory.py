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
import sys

import numpy as np

__all__ = ["lazy_zeros", "lazy_copy", "PageSet", "SparseTable", "MovedAxis", "bound_malloc", "trim_heap", "bounded",
           "physical_memory", "own_cache_lines", "CACHE_LINE"]

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


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (``sysconf``), or None where unknown. What a
    table that must be able to fill is checked against: a lazily allocated array larger than
    this could never hold its data (and under ``vm.overcommit_memory=1`` its allocation would
    not fail either)."""
    try:
        n = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None
    return n if n > 0 else None


#: bytes per cache line (x86-64, ARM64)
CACHE_LINE = 64


def own_cache_lines(a) -> np.ndarray:
    """A copy of the small array ``a`` (same shape, dtype and bytes) on cache lines of its own: its
    first byte on a :data:`CACHE_LINE` boundary and the rest of its last line in the same block.

    For the few scalars a kernel writes at every example (adagrad's ``scal``: the sums behind VW's
    normalized rate, t): a 64-byte array from ``malloc`` straddles two lines that it shares with
    its heap neighbours (other small arrays, allocator headers), which threads on the other core
    write as they decode and learn (the reader pipeline; ``--engine dask --worker_threads``' other
    chains); every such write takes the line away from the kernel (false sharing). Two chains in one
    process spent 0.17 s more CPU per 1M examples without it (in-process, 7 interleaved rounds)."""
    a = np.asarray(a)
    line = CACHE_LINE
    buf = np.empty(a.nbytes + 2 * line, np.uint8)
    start = -buf.ctypes.data % line
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


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


class SparseTable:
    """A 1-D array of ``size`` entries given by its only possibly-non-zero entries: sorted
    indices ``idx`` and their values ``vals`` (every other entry is zero).

    What a learner's ``state_dict`` gives for a big hashed table whose touched pages it knows
    (:class:`PageSet`), and what :func:`streamlearn.io.model_file.read_model` gives back for
    a sparse-encoded array (``sparse=True``): saving and loading a ``-b 32`` table then cost
    O(touched entries), not O(2^b). ``np.asarray(t)`` builds the dense array (a
    :func:`lazy_zeros` one: only the non-zeros become resident)."""

    __slots__ = ("size", "dtype", "idx", "vals", "_shape")

    def __init__(self, size: int, dtype, idx, vals, shape=None):
        self.size = int(size)
        self.dtype = np.dtype(dtype)
        self.idx = np.asarray(idx)
        self.vals = np.asarray(vals, self.dtype)
        if self.idx.shape != self.vals.shape or self.idx.ndim != 1:
            raise ValueError("SparseTable: idx and vals must be 1-D and of one length")
        # an N-D array stored sparse (a model file's): ``idx`` index its flattened entries
        self._shape = (self.size,) if shape is None else tuple(int(d) for d in shape)

    @property
    def shape(self):
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def dense(self) -> np.ndarray:
        """A new dense array (untouched pages never resident)."""
        out = lazy_zeros(self.size, self.dtype)
        out[self.idx] = self.vals
        return out.reshape(self._shape)

    def __array__(self, dtype=None, copy=None):
        a = self.dense()
        return a if dtype is None else a.astype(dtype, copy=False)


class MovedAxis:
    """``np.moveaxis(base, axis, 0)`` as a model file stores it, not built: the ``--oaa K`` sketch of
    BEAR / MISSION is kept ``(R, W, K)`` (a feature's K class cells together) and saved ``(K, R, W)``
    (one class after the other). :meth:`blocks` gives the saved array one leading index at a time,
    through one reused buffer, so a save writes it without a full transposed copy (two of 42 MB on
    20 Newsgroups, in fresh pages: ~6% of a MISSION run). ``np.asarray(t)`` builds the copy."""

    __slots__ = ("base", "axis")

    def __init__(self, base: np.ndarray, axis: int):
        self.base = base
        self.axis = int(axis)

    @property
    def shape(self):
        sh = list(self.base.shape)
        return (sh.pop(self.axis), *sh)

    @property
    def dtype(self):
        return self.base.dtype

    @property
    def ndim(self) -> int:
        return self.base.ndim

    @property
    def nbytes(self) -> int:
        return int(self.base.nbytes)

    def blocks(self):
        """The saved array's sub-arrays ``[i]`` in order, each C-contiguous, in one buffer reused for
        the next (use each before asking for the next)."""
        buf = np.empty(self.shape[1:], self.dtype)
        for i in range(self.shape[0]):
            np.copyto(buf, np.take(self.base, i, axis=self.axis))
            yield buf

    def __array__(self, dtype=None, copy=None):
        a = np.ascontiguousarray(np.moveaxis(self.base, self.axis, 0))
        return a if dtype is None else a.astype(dtype, copy=False)


class PageSet:
    """The pages (runs of ``2**PAGE_BITS`` entries, 64 to 256) of a hashed table of ``size`` entries that
    may hold non-zeros: marked from the indices every update touches, so that saving a
    ``-b 32`` table reads only those pages (a scan of all 2^32 entries takes tens of seconds,
    most of it faulting in pages never written).

    Tables smaller than ``2**MIN_BITS`` entries are not tracked (``active`` False): a full
    scan of them is cheaper than marking."""

    MIN_BITS = 22
    #: at most 2^MAP_BITS pages (a 16 MB map at -b 32), of at least 2^6 entries: hashed
    #: features land on random pages, so a save reads about (touched features) x (page size)
    MAP_BITS = 24

    def __init__(self, size: int):
        self.size = int(size)
        self.active = self.size >= 1 << self.MIN_BITS
        self.PAGE_BITS = max(6, (self.size - 1).bit_length() - self.MAP_BITS)
        self.bits = np.zeros(((self.size - 1) >> self.PAGE_BITS) + 1 if self.active else 0, np.bool_)

    def mark(self, indices, mask: int) -> None:
        """Mark the pages of ``indices & mask`` (``mask`` = size - 1)."""
        if not self.active or len(indices) == 0:
            return
        ix = np.asarray(indices)
        if mask != 0xFFFFFFFF or ix.dtype != np.uint32:
            ix = np.bitwise_and(ix, np.array(mask, ix.dtype) if ix.dtype.kind == "u" else mask)
        self.bits[ix >> self.PAGE_BITS] = True

    def mark_entries(self, idx) -> None:
        """Mark the pages holding the entries ``idx`` (e.g. the non-zeros of a loaded table)."""
        if self.active and len(idx):
            self.bits[np.asarray(idx, np.int64) >> self.PAGE_BITS] = True

    def mark_nonzero(self, a, width: int = 1) -> None:
        """Mark the pages of ``a``'s non-zero entries (a scan: for tables given densely); entry
        ``e`` is row ``e // width`` of the tracked table."""
        if not self.active:
            return
        flat = np.ascontiguousarray(a).reshape(-1)
        view = flat.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[flat.dtype.itemsize])
        for i in range(0, flat.size, _BLOCK):
            nz = np.flatnonzero(view[i:i + _BLOCK])
            if nz.size:
                self.bits[((nz + i) // width) >> self.PAGE_BITS] = True

    def load(self, name: str, a, shape, dtype, width: int = 1, track: bool = True, owned: bool = False) -> np.ndarray:
        """A saved table ``a`` (a :class:`SparseTable` from a model file, or an array) as a new
        array of ``shape`` (checked, with ``dtype``; ``ValueError`` naming ``name`` otherwise),
        written lazily (``owned``: a dense ``a`` that is the caller's to keep, e.g. a model
        reader's buffer, is used as it is); with ``track``, the pages of its non-zero entries are
        marked (entry ``e`` is row ``e // width`` of the tracked table), so the next save
        includes them."""
        shape = tuple(shape)
        flat = (int(np.prod(shape)),)
        sparse = isinstance(a, SparseTable)
        if not sparse:
            a = np.asarray(a)
        if a.shape not in (shape, flat) or a.dtype != np.dtype(dtype):
            raise ValueError(f"array {name}: shape/dtype {a.shape}/{a.dtype} does not fit {shape}/{np.dtype(dtype)}")
        if sparse:
            if a.idx.size and (a.idx.min() < 0 or a.idx.max() >= a.size):
                raise ValueError(f"array {name}: index out of range")
            out = a.dense()  # a new array: no copy
            if track:
                self.mark_entries(a.idx // width)
        else:
            keep = owned and a.flags.c_contiguous and a.flags.writeable and a.flags.owndata
            out = a if keep else lazy_copy(a)
            if track:
                self.mark_nonzero(out, width)
        return out.reshape(shape)

    def worth_it(self) -> bool:
        """Whether reading only the marked pages beats a scan of the whole table (at most an
        eighth of the table marked)."""
        return self.active and int(np.count_nonzero(self.bits)) << self.PAGE_BITS <= self.size >> 3

    def entries(self) -> np.ndarray:
        """The indices of every entry in a marked page, ascending (int64)."""
        pages = np.flatnonzero(self.bits).astype(np.int64)
        step = 1 << self.PAGE_BITS
        idx = (pages[:, None] * step + np.arange(step, dtype=np.int64)[None, :]).reshape(-1)
        return idx[idx < self.size]

    def table(self, a: np.ndarray, entries=None):
        """``a`` as a :class:`SparseTable` of its non-zero entries (bit pattern: -0.0 and NaN
        kept) within the marked pages; ``a`` itself when not tracking."""
        if not self.active:
            return a
        idx = self.entries() if entries is None else entries
        vals = a[idx]
        bits = vals.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[vals.dtype.itemsize])
        keep = bits != 0
        return SparseTable(a.shape[0], a.dtype, idx[keep], vals[keep])


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
    run's. Each setting is skipped when the user set its ``MALLOC_*`` variable. Where it applied,
    Arrow's buffers (Parquet decoding) come from the same heap too (:func:`_arrow_from_malloc`).
    The CLI calls it (``cli.common.run_api``) before any reader thread starts; the Python API
    does not touch the host program's malloc. Returns whether anything was applied."""
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
    if ok:
        _arrow_from_malloc()
    _MALLOC_DONE.append(ok)
    return ok


def _arrow_from_malloc() -> None:
    """Arrow's default memory pool becomes the system allocator (the heap :func:`bound_malloc`
    tuned) instead of its bundled mimalloc / jemalloc, unless the user chose one
    (``ARROW_DEFAULT_MEMORY_POOL``): the bundled allocator hands out fresh pages that every batch
    touches first (system CPU, and a higher peak RSS than the reused heap's). Set in the
    environment before pyarrow is imported (Arrow reads the variable when it first makes its
    pool; child processes inherit it) or, if it is, on pyarrow itself."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.set_memory_pool(pa.system_memory_pool())
