"""Compiled kernels of the Parquet reader (only ``@njit`` functions).

The reader calls them through the kernel seam (:mod:`streamlearn.kernels`), which binds their
bit-identical C ports when the library is available; these stay the reference and the
fallback. The reader turns each Arrow record batch into a few flat "parts" (one per feature column:
per-row ``[start, end)`` spans into flat ``hash`` / ``value`` / ``letter`` arrays) without a
Python loop per row; :func:`assemble_rows` then interleaves the parts row by row into the CSR
:class:`streamlearn.batch.Batch` arrays, in the order the VW text reader emits them:
linear features (column order = namespace order), the constant feature, then the
interactions of any order (:mod:`streamlearn.io._interact_kernels`; see
:func:`streamlearn.io._text_kernels.parse_chunk`), with ``--ignore`` / ``--keep`` /
``--ignore_linear`` applied by namespace first byte.
"""
import numpy as np
from numba import njit

from ._hash_kernels import CONSTANT_HASH, hashstring
from ._interact_kernels import bucket, grow, interaction_count, interaction_fill, max_order, unbucket

__all__ = ["assemble_rows", "wide_part", "hash_string_part", "ROW_INF_VALUE",
           "ROW_QUADRATIC_OVERFLOW", "ROW_TOO_MANY_FEATURES"]

# ``assemble_rows`` row status codes (a numba-free module: the C path reports them too)
from ._parquet_codes import ROW_INF_VALUE, ROW_QUADRATIC_OVERFLOW, ROW_TOO_MANY_FEATURES  # noqa: E402


@njit(cache=True, nogil=True)
def hash_string_part(data, soff, lo, hi, seed):
    """VW ``hashstring(name, seed)`` of the strings ``lo .. hi-1`` of an Arrow string array
    (``data``: its ``uint8`` data buffer, ``soff``: its ``int64`` offsets) -> ``uint32``."""
    out = np.empty(hi - lo, np.uint32)
    s = np.uint64(seed)
    for k in range(lo, hi):
        out[k - lo] = np.uint32(hashstring(data, soff[k], soff[k + 1], s))
    return out


@njit(cache=True, nogil=True)
def wide_part(X, hashes):
    """Non-zero, non-NaN entries of the dense ``float64`` matrix ``X`` (rows = examples,
    column ``j`` = feature with hash ``hashes[j]``) -> ``(starts, ends, idx, val, col)``."""
    n, d = X.shape
    cnt = 0
    for i in range(n):
        for j in range(d):
            v = X[i, j]
            if v != 0.0 and v == v:
                cnt += 1
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    idx = np.empty(cnt, np.uint32)
    val = np.empty(cnt, np.float64)
    col = np.empty(cnt, np.int64)
    k = 0
    for i in range(n):
        starts[i] = k
        for j in range(d):
            v = X[i, j]
            if v != 0.0 and v == v:
                idx[k] = hashes[j]
                val[k] = v
                col[k] = j
                k += 1
        ends[i] = k
    return starts, ends, idx, val, col


@njit(cache=True, nogil=True)
def assemble_rows(starts, ends, idx, val, letters, terms, toff, nsflags, add_constant, want_src,
                  max_feats):
    """Interleave the parts into CSR rows.

    Parameters
    ----------
    starts, ends : int64 ``(k, n)``
        Row ``i`` of part ``p`` is ``idx/val/letters[starts[p, i]:ends[p, i]]``.
    idx : uint32, val : float64, letters : uint8
        Flat feature hashes, values and namespace first bytes of all parts (entries with
        value 0 or NaN are dropped: VW's text parser drops zeros, NaN marks a missing value).
    terms, toff : int64
        Interactions (wildcards expanded) as :func:`streamlearn.io._text_kernels.parse_chunk`
        takes them.
    nsflags : uint8 (256)
        Per namespace first byte: bit 1 drops its features, bit 2 only its linear ones.
    add_constant : bool
        Append the constant feature (hash 11650396, value 1) after the linear features.
    want_src : bool
        Also return, for every output entry, its position in the flat input (-1 for the
        constant and interaction features), to map feature names.
    max_feats : int
        The most features a row may have, linear, constant and interactions together
        (``0 <= max_feats < 2**56``); a row that would have more gets no features and the
        status :data:`ROW_TOO_MANY_FEATURES` (found before its interactions are written).

    Returns
    -------
    offsets, indices, values, src, status
        ``status[i]`` is 0 for a good row, :data:`ROW_INF_VALUE` when a linear feature value
        is infinite, :data:`ROW_QUADRATIC_OVERFLOW` when an interaction product overflows,
        :data:`ROW_TOO_MANY_FEATURES` beyond ``max_feats``; the caller drops (reports) such rows.
    """
    k, n = starts.shape
    ninter = len(toff) - 1
    lin_ignored = False
    for c in range(256):
        if nsflags[c] & 2:
            lin_ignored = True
    lin = 0
    for p in range(k):
        for i in range(n):
            lin += ends[p, i] - starts[p, i]
    cap = lin + (n if add_constant else 0) + 16
    indices = np.empty(cap, np.uint32)
    values = np.empty(cap, np.float64)
    track = want_src or lin_ignored
    src = np.empty(cap if track else 0, np.int64)
    olet = np.empty(cap if ninter > 0 else 0, np.uint8)
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    status = np.zeros(n, np.int64)
    bcnt = np.zeros(256, np.int64)
    bstart = np.zeros(256, np.int64)
    used = np.zeros(256, np.int64)
    order = np.empty(16, np.int64)
    mo = max_order(toff)
    ipos = np.zeros(mo + 1, np.int64)
    ihs = np.zeros(mo + 1, np.uint64)
    ivs = np.zeros(mo + 1, np.float64)
    nnz = np.int64(0)  # not a literal 0: numba would also compile the callees for a constant
    lin_left = lin  # linear entries of the rows not yet written (room kept for them)
    for i in range(n):
        ex_start = nnz
        for p in range(k):
            lin_left -= ends[p, i] - starts[p, i]
            for q in range(starts[p, i], ends[p, i]):
                v = val[q]
                if v != 0.0 and v == v:
                    if not np.isfinite(v):
                        status[i] = ROW_INF_VALUE
                    c = letters[q]
                    if nsflags[c] & 1:
                        continue
                    indices[nnz] = idx[q]
                    values[nnz] = v
                    if track:
                        src[nnz] = q
                    if ninter > 0:
                        olet[nnz] = c
                    nnz += 1
        lin_end = nnz
        if add_constant:
            indices[nnz] = np.uint32(CONSTANT_HASH)
            values[nnz] = 1.0
            if track:
                src[nnz] = -1
            if ninter > 0:
                olet[nnz] = 0
            nnz += 1
        if nnz - ex_start > max_feats:
            if status[i] == 0:
                status[i] = ROW_TOO_MANY_FEATURES
            nnz = ex_start
            offsets[i + 1] = nnz
            continue
        if ninter > 0:
            nlin = lin_end - ex_start
            if len(order) < nlin:
                order = np.empty(2 * nlin, np.int64)
            nused = bucket(olet, ex_start, lin_end, bcnt, bstart, used, order)
            room = ex_start + max_feats - nnz
            total = interaction_count(terms, toff, bcnt, room)
            if total > room:
                unbucket(bcnt, used, nused)
                if status[i] == 0:
                    status[i] = ROW_TOO_MANY_FEATURES
                nnz = ex_start
                offsets[i + 1] = nnz
                continue
            # the rows after this one still need their linear entries and constants
            later = lin_left + ((n - 1 - i) if add_constant else 0)
            if nnz + total + later > cap:
                newcap = max(2 * cap, nnz + total + later + 16)
                indices = grow(indices, nnz, newcap)
                values = grow(values, nnz, newcap)
                olet = grow(olet, nnz, newcap)
                if track:
                    src = grow(src, nnz, newcap)
                cap = newcap
            q0 = nnz
            nnz, over = interaction_fill(indices, values, olet, nnz, terms, toff, bcnt, bstart,
                                         order, ipos, ihs, ivs)
            unbucket(bcnt, used, nused)
            if track:
                for t in range(q0, nnz):
                    src[t] = -1
            if over and status[i] == 0:
                status[i] = ROW_QUADRATIC_OVERFLOW
        if lin_ignored:
            w = ex_start
            for t in range(ex_start, nnz):
                if t < lin_end and (nsflags[letters[src[t]]] & 2) != 0:
                    continue
                if w != t:
                    indices[w] = indices[t]
                    values[w] = values[t]
                    src[w] = src[t]
                w += 1
            nnz = w
        offsets[i + 1] = nnz
    if want_src:
        return offsets, indices[:nnz], values[:nnz], src[:nnz], status
    return offsets, indices[:nnz], values[:nnz], src[:0], status
