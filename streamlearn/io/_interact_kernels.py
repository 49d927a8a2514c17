"""Compiled feature interactions of any order for the readers (only ``@njit`` functions).

The text parser (:mod:`streamlearn.io._text_kernels`) and the Parquet row assembly
(:mod:`streamlearn.io._parquet_kernels`) call these per example, after its linear features:
:func:`bucket` groups the example's features by namespace first byte (stable: in the order
they appear, as VW's feature groups), :func:`interaction_count` says how many interaction
features will follow, saturating at a limit (so the caller sizes its arrays once, and
refuses an example whose interactions would exceed the limit before allocating them) and :func:`interaction_fill`
writes them; :func:`grow` enlarges their output arrays.

An interaction is ``terms[toff[i]:toff[i + 1]]`` (namespace first bytes, as
:func:`streamlearn.io.interactions.interaction_arrays` makes them; wildcards already
expanded). Its features are VW 9's (``interactions_predict.h``): for every choice of one
feature per term, positions never decreasing across a run of the same namespace
(combinations with repetition: ``-q aa`` gives ``x*x, x*y, y*y``), the hash
``h1``, then ``h = (h * 16777619) ^ h_next`` mod 2**32 for each next term, and the value
``((v1 * v2) * v3) ...``. An interaction with a term absent from the example gives nothing.
"""
import numpy as np
from numba import njit

from ._hash_kernels import FNV_PRIME, M32

__all__ = ["bucket", "unbucket", "interaction_count", "interaction_fill", "max_order", "grow"]

_FNV = np.uint64(FNV_PRIME)
_I64_MAX = np.int64(0x7FFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True)
def grow(a, n, cap):
    """A new array of ``cap`` elements of ``a``'s type starting with ``a[:n]``. A loop, not
    ``b[:n] = a[:n]``: numba's broadcasting slice assignment takes seconds to compile."""
    b = np.empty(cap, a.dtype)
    for i in range(n):
        b[i] = a[i]
    return b


@njit(cache=True, nogil=True)
def max_order(toff):
    """The longest interaction of ``toff`` (0 when there is none)."""
    m = 0
    for t in range(len(toff) - 1):
        if toff[t + 1] - toff[t] > m:
            m = toff[t + 1] - toff[t]
    return m


@njit(cache=True, nogil=True)
def bucket(letters, s, e, bcnt, bstart, used, order):
    """Group features ``s..e-1`` by ``letters``: afterwards namespace byte ``c`` has
    ``bcnt[c]`` features, at ``order[bstart[c]:bstart[c] + bcnt[c]]`` (positions, in input
    order). ``bcnt`` must be all zero on entry (:func:`unbucket` restores that); ``used``
    (>= 256 entries) receives the bytes present; ``order`` needs ``e - s`` entries. Returns
    the number of bytes present."""
    nused = 0
    for k in range(s, e):
        c = letters[k]
        if bcnt[c] == 0:
            used[nused] = c
            nused += 1
        bcnt[c] += 1
    pos = 0
    for u in range(nused):
        c = used[u]
        bstart[c] = pos
        pos += bcnt[c]
    for k in range(s, e):
        c = letters[k]
        order[bstart[c]] = k
        bstart[c] += 1
    for u in range(nused):
        c = used[u]
        bstart[c] -= bcnt[c]
    return nused


@njit(cache=True, nogil=True)
def unbucket(bcnt, used, nused):
    """Zero the counts :func:`bucket` set."""
    for u in range(nused):
        bcnt[used[u]] = 0


@njit(cache=True, nogil=True)
def interaction_count(terms, toff, bcnt, limit):
    """Number of interaction features the bucketed example gets: per interaction, the
    product over its runs of one namespace (``r`` terms over ``n`` features) of
    ``C(n + r - 1, r)``. Saturating: a count above ``limit`` (``0 <= limit < 2**56``) is
    returned as ``limit + 1``, so no order or namespace size overflows the arithmetic (the
    caller refuses such an example rather than allocating its features)."""
    total = 0
    for t in range(len(toff) - 1):
        a = toff[t]
        b = toff[t + 1]
        empty = False
        for k in range(a, b):
            if bcnt[terms[k]] == 0:
                empty = True
                break
        if empty:
            continue
        cnt = 1
        k = a
        while k < b:
            c = terms[k]
            n = bcnt[c]
            r = 1
            while k + r < b and terms[k + r] == c:
                r += 1
            # C(n + j, j + 1) for j = 0 .. r-1, nondecreasing in j: stop once past the limit
            # (or where the next product would overflow: the binomial is then above 2**57)
            cc = 1
            for j in range(r):
                if cc > _I64_MAX // (n + j):
                    cc = limit + 1
                    break
                cc = cc * (n + j) // (j + 1)
                if cc > limit:
                    cc = limit + 1
                    break
            if cnt > limit // cc:
                cnt = limit + 1
                break
            cnt *= cc
            k += r
        total += cnt
        if total > limit:
            return limit + 1
    return total


@njit(cache=True, nogil=True)
def interaction_fill(indices, values, letters, nnz, terms, toff, bcnt, bstart, order, pos, hs, vs):
    """Write the bucketed example's interaction features at ``indices/values[nnz:]`` (room
    for :func:`interaction_count` of them; their ``letters`` are set to 0). ``pos``, ``hs``
    (``uint64``) and ``vs`` are scratch of :func:`max_order` entries. Returns ``(nnz, over)``:
    the new end and whether a value was not finite (an overflowing product)."""
    over = False
    for t in range(len(toff) - 1):
        a = toff[t]
        m = toff[t + 1] - a
        empty = False
        for j in range(m):
            if bcnt[terms[a + j]] == 0:
                empty = True
                break
        if empty:
            continue
        j = 0
        pos[0] = 0
        while True:
            while j < m - 1:  # prefixes of terms j..m-2 at their current positions
                kf = order[bstart[terms[a + j]] + pos[j]]
                if j == 0:
                    hs[0] = np.uint64(indices[kf])
                    vs[0] = values[kf]
                else:
                    hs[j] = ((hs[j - 1] * _FNV) & M32) ^ np.uint64(indices[kf])
                    vs[j] = vs[j - 1] * values[kf]
                j += 1
                pos[j] = pos[j - 1] if terms[a + j] == terms[a + j - 1] else 0
            c = terms[a + m - 1]
            hp = (hs[m - 2] * _FNV) & M32
            vp = vs[m - 2]
            base = bstart[c]
            for p in range(pos[m - 1], bcnt[c]):
                kf = order[base + p]
                indices[nnz] = np.uint32(hp ^ np.uint64(indices[kf]))
                v = vp * values[kf]
                if not np.isfinite(v):
                    over = True
                values[nnz] = v
                letters[nnz] = 0
                nnz += 1
            j = m - 2
            while j >= 0:
                pos[j] += 1
                if pos[j] < bcnt[terms[a + j]]:
                    break
                j -= 1
            if j < 0:
                break
    return nnz, over
