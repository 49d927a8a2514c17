"""Compiled kernels of :mod:`streamlearn.algos.fd_son` (sparse FD-SON, progressive validation inside).

Luo, Agarwal, Cesa-Bianchi & Langford (2016), "Efficient Second Order Online Learning by
Sketching" (SON): Alg. 1 (SON) with the Frequent Directions sketch in App. F's epoch form (Alg. 6,
made sparse as Alg. 8-11), with the corrections of ``NOTES_FD.md`` (the 1/2 in the
Sherman-Morrison vector, the buffer read before it is cleared, N1 = U1 F + U2 Q1, the first epoch
handled explicitly, K of the 2m-row basis).

The sketch is ``S = [D V; G]`` (2m x d): ``V = F Z`` (m x d, orthonormal rows, ``K = V V^T``), ``D``
diagonal, and a buffer ``G`` of up to m sparse rows (the to-sketch vectors g^ as received).
``H = (alpha I_2m + S S^T)^-1``; ``A^-1 v = (v - S^T H S v) / alpha`` (Woodbury). The weights are
``w = w_bar + Z^T b + G^T c`` (``c``: the buffer rows' share, folded into ``w_bar`` at each eigen step).

Per-feature state lives in an open-addressing hash table keyed by the masked feature index:
``keys[slot]`` (-1 = empty), ``tab[slot] = [w_bar, scratch, Z[0, j], ..., Z[m-1, j]]``. The buffer
holds its rows' entries as (slot, key, value) in ``buf_*`` with row offsets ``boff``.

Diagonal pre-scaling (``precond``, the default; Oja-SON's ``--diag_frame precond --diag_rule vw``, SON
Sec. 5.2 as a preconditioner): the sketch and the Newton step run on ``x~ = f x`` with the per-feature
frame ``f_j = (G_j / s_j^2)^-1/4 / s_j`` (``G_j = sum h (l' x_j)^2``, ``s_j = max |x_j|``: VW's normalized
adaptive rule, Ross, Mineiro & Langford 2013), and every change of the weights ``w~ = w_bar + Z^T b +
G^T c`` is mapped back to original coordinates with the frame of its round: per feature, the
original-coordinate weight ``c_j`` and a snapshot of ``w~_j``, flushed (``c_j += f_j (w~_j - snap_j)``)
before ``f_j`` changes, so ``w_j = c_j + f_j (w~_j - snap_j)``. The table's row then ends with ``[c_j,
snap_j, s_j^2, f_j, G_j, buffer share]``; the last is scratch: ``(G^T c)_j`` of the buffer's and the
example's features while an example is learned (the flush needs ``w~_j``). The step is multiplied by
VW's global normaliser ``sqrt(sum h / sum h ||x / s||^2)`` (flt[5:7]), and a weight by ``s_old / s_new``
when its feature's scale grows, as VW's gd.cc; with m = 0 and alpha = 2 this is VW's default learner.
"""
import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ..kernels._jit import INNER, KERNEL
from ..kernels._intrinsics import _prefetch

#: a helper with one call site, inlined into it by numba (not compiled, optimised and linked as a library of
#: its own, then again inside each caller's)
INLINE = dict(INNER, inline="always")
from ._feature_table_kernels import EMPTY, HASH_MULT, _find
from ._loss_kernels import SQUARED, invariant_step, loss_deriv, loss_value, target
from ._oja_son_kernels import _proj_excess, _pscale, _sq

__all__ = ["FdState", "FdHyper", "fd_run", "full_rebase", "compact_history", "pinv_apply", "table_lookup_rows", "remap_buffer", "rebuild_levels", "eigh", "key_order",
           "HIST_MIN", "n_hist_rows"]

C_U = 0  # w_bar
C_S = 1  # scratch: the example's value of each feature (duplicates summed)
C_T = 2  # the feature's stamp: the number of recorded re-bases its w_bar and Z column have been through
C_Z = 3  # first column of Z^T
HIST_MIN = 64  # the smallest history capacity (re-bases recorded between compactions)
RESID_TOL = 1e-11  # buffer residual directions below this share of ||G||_F^2 count as dependent
DRIFT_TOL = 1e-9
#: the eigen step's m-th row: the old one projected off the kept eigenvectors when at least this share of it is left
CHEAP_PICK_MIN = 0.25
#: re-base when the column norms of F (the scales of Z's rows) differ by more than this (see _equilibrated_cond)
COL_RATIO = 1e100
COND_RESOLVED = 1e7  # _equilibrated_cond: a larger condition number is not resolved (counts as inf: a re-base)
#: a re-base is done on every feature (and K recomputed from the table) when at least (features
#: seen) / FULL_REBASE_RATIO examples were learned since the last such one: O(m^2 FULL_REBASE_RATIO)
#: per example (see _eigen_step); the others are lazy
FULL_REBASE_RATIO = 8
RANK_TOL = 1e-9  # alpha = 0: eigenvalues of S S^T <= RANK_TOL * the largest count as zero (as the reference)  # re-orthonormalise V when max |F K F^T - I| (active rows) exceeds this

# ints fields
I_T, I_OCC, I_TAU, I_NA, I_NBUF, I_REBASE, I_EIG, I_HIST, I_COMPACT = 0, 1, 2, 3, 4, 5, 6, 7, 8
N_INTS = 9
#: pre-scaling: the columns after Z's (offsets from C_Z + m) and their count
P_C, P_SNAP, P_S2, P_F, P_G, P_BUF = 0, 1, 2, 3, 4, 5
N_PRE = 6


class FdState(NamedTuple):
    """FD-SON's state (SON Alg. 1 + App. F): the per-feature table, the sketch's small matrices
    and the buffer."""

    keys: np.ndarray  # int64 (cap,): masked feature per slot, -1 = empty
    tab: np.ndarray  # float64 (cap, 2 + m): [w_bar, scratch, Z^T row]
    shift: int  # 64 - log2(cap)
    ints: np.ndarray  # int64 (9,): t, occupied, tau (buffer rows), na (active sketch rows), buffer nnz, re-bases,
    #                   eigen steps, re-bases recorded in the history, compactions
    F: np.ndarray  # (m, m): V = F Z
    K: np.ndarray  # (m, m): V V^T, the Gram matrix of V's rows (I on the active rows up to rounding)
    D: np.ndarray  # (m,): the sketch's singular values (0 on inactive rows and on row m)
    b: np.ndarray  # (m,): w = w_bar + Z^T b + G^T c
    c: np.ndarray  # (m,)
    H: np.ndarray  # (2m, 2m): (alpha I + S S^T)^-1
    ZG: np.ndarray  # (m, m): Z G^T
    GG: np.ndarray  # (m, m): G G^T
    flt: np.ndarray  # float64 (3,) or with the clip (5,): alpha now (RFD: alpha0 + half the shrinks), sum of the
    #                  shrinks Sigma_mm, the example count t at the last re-base on every feature[, the label range]
    boff: np.ndarray  # int64 (m + 1,): buffer row offsets into buf_*
    bslot: np.ndarray  # int64 (bcap,): table slot of each buffer entry
    bkey: np.ndarray  # int64 (bcap,): its feature
    bval: np.ndarray  # float64 (bcap,): its value in g^
    hP: np.ndarray  # float64 (2 hcap, m, m): the re-base history's block transforms (see _catch_up)
    hc: np.ndarray  # float64 (2 hcap, m): their w_bar folds


class FdHyper(NamedTuple):
    mask: int
    loss_code: int
    robust: bool  # RFD (Luo et al. 2019 Alg. 3): alpha grows by half of every shrink
    sigma_eta: float  # to-sketch scale: g^ = sqrt(sigma_eta h) l'(p) x
    proj_c: float  # |w^T x| <= C (0 = off)
    max_cond: float  # re-base when the condition number of F with unit-norm columns exceeds this
    invariant: bool  # importance-invariant step along A^-1 x (else the paper's u = w - A^-1 g)
    clip: bool  # squared loss: prediction and derivative clipped to the label range learned so far (flt[3:5])
    precond: bool  # diagonal pre-scaling (the table's N_PRE extra columns; flt[5:7] = sum h ||x / s||^2, sum h)


@njit(**KERNEL)
def remap_buffer(keys, shift, bkey, bslot, nbuf):
    """The buffer entries' slots after the table was rebuilt (their features are all stored)."""
    capmask = keys.shape[0] - 1
    for e in range(nbuf):
        bslot[e] = _find(keys, bkey[e], shift, capmask)


# -- the lazy re-base history ------------------------------------------------------------------
#
# A re-base (Z <- N1 Z, w_bar += Z^T b, F = I; NOTES_FD item 5) is not applied to every stored
# feature at once: that is O(m^2 n) for n features seen, and cond(F) reaches --max_cond every few
# eigen steps (each epoch's F = N1 multiplies it: new directions enter from the buffer, whose
# share in Z is small), so the cost per example would grow with n. Each re-base k is recorded
# instead as (P_k = N1, c_k = b) and applied to a feature when the feature is next read: its stamp
# says how many recorded re-bases it has been through. The records are kept in dyadic blocks
# (level l, block i: re-bases i 2^l .. (i + 1) 2^l - 1, composed when the last one is recorded), so
# a feature catches up through any number of re-bases in O(m^2 log) (_catch_up). A re-base is
# done on every feature instead (the history emptied, K recomputed from the table) once n / 8
# examples (FULL_REBASE_RATIO) have passed since the last such one: amortised O(8 m^2) per example.
# The history holds hcap >= n / (8 m) re-bases (grown by the caller), as many as fit between two
# of those; if it is full all the same, every feature is brought up to date and it starts again.
#
# Suffixes: after the 2 hcap dyadic blocks, ``hP`` / ``hc`` hold one block per SUF = 2^SUF_L records,
# the composition of the records from c SUF to the last one (extended by each new record: O(m^3)
# per (records / SUF) per re-base). A feature walks dyadic blocks only up to the next multiple of SUF,
# then takes that suffix: at most 2 SUF_L blocks, where the dyadic walk alone takes up to 2 log2(R).
# (On gen_sparse's 200,000-example file, 73 blocks per example instead of 46, by simulation of the
# walks; each block is an m x m product whose 8 m^2 bytes are mostly not in cache.)

SUF_L = 4
SUF = 1 << SUF_L


def n_hist_rows(hcap):
    """Rows of ``hP`` / ``hc`` for a history of capacity hcap: 2 hcap dyadic blocks, then the suffixes."""
    return 2 * hcap + (hcap >> SUF_L) + 1


@njit(**INNER)
def _hist_cap(hP):
    """The history's capacity hcap (a power of 2) from ``hP``'s rows (:func:`n_hist_rows`)."""
    n0 = hP.shape[0]
    h = 1
    while 4 * h <= n0:
        h <<= 1
    return h


@njit(**INLINE)  # (one call site)
def _suffix_append(hP, hc, k, hcap):
    """Record k was written at level 0: start suffix k / SUF with it if k is a multiple of SUF, and extend
    every earlier suffix by it (``P = P_k P``, ``c = c + P^T c_k``, as :func:`_complete` composes)."""
    m = hP.shape[1]
    last = k >> SUF_L
    if (k & (SUF - 1)) == 0:
        j = 2 * hcap + last
        for r in range(m):
            hc[j, r] = hc[k, r]
            for q in range(m):
                hP[j, r, q] = hP[k, r, q]
        last -= 1
    tmp = np.empty((m, m))
    for sfx in range(last + 1):
        j = 2 * hcap + sfx
        for q in range(m):
            acc = hc[j, q]
            for t in range(m):
                acc += hP[j, t, q] * hc[k, t]
            hc[j, q] = acc
        for r in range(m):
            for q in range(m):
                acc = 0.0
                for t in range(m):
                    acc += hP[k, r, t] * hP[j, t, q]
                tmp[r, q] = acc
        for r in range(m):
            for q in range(m):
                hP[j, r, q] = tmp[r, q]


@njit(cache=True, nogil=True, inline="always")  # (an index formula: no compiled function of its own)
def _blk(level, i, hcap):
    """Index in ``hP`` / ``hc`` of block ``i`` of ``level`` (levels laid out one after another,
    level l holding hcap >> l blocks)."""
    return 2 * hcap - ((2 * hcap) >> level) + i


@njit(**INNER)
def _complete(hP, hc, k, hcap):
    """After re-base ``k`` was recorded at level 0: compose every block that ends at k (and extend the
    suffixes, :func:`_suffix_append`), block (l, i)
    = block (l-1, 2i+1) after block (l-1, 2i): ``P = P_hi P_lo``, ``c = c_lo + P_lo^T c_hi`` (the fold
    ``w_bar += c . z`` is taken before each transform)."""
    m = hP.shape[1]
    l = 1
    while (1 << l) <= hcap and ((k + 1) & ((1 << l) - 1)) == 0:
        i = ((k + 1) >> l) - 1
        lo = _blk(l - 1, 2 * i, hcap)
        hi = _blk(l - 1, 2 * i + 1, hcap)
        dst = _blk(l, i, hcap)
        for r in range(m):
            for q in range(m):
                acc = 0.0
                for t in range(m):
                    acc += hP[hi, r, t] * hP[lo, t, q]
                hP[dst, r, q] = acc
        for q in range(m):
            acc = hc[lo, q]
            for t in range(m):
                acc += hP[lo, t, q] * hc[hi, t]
            hc[dst, q] = acc
        l += 1
    _suffix_append(hP, hc, k, hcap)


@njit(**KERNEL)
def rebuild_levels(hP, hc, R):
    """The blocks of levels >= 1 from the R level-0 records (a loaded model: the same arithmetic
    as when they were recorded)."""
    hcap = _hist_cap(hP)
    for k in range(R):
        _complete(hP, hc, k, hcap)


@njit(cache=True, nogil=True, inline="always")
def _next_block(st, R, hcap):
    """The catch-up's next block from stamp ``st`` (< R): ``(its index in hP / hc, the stamp after it)``."""
    if (st & (SUF - 1)) == 0:  # the suffix from st to R: the last block
        return 2 * hcap + (st >> SUF_L), R
    l = 0
    while (st & ((2 << l) - 1)) == 0 and st + (2 << l) <= R:
        l += 1
    return _blk(l, st >> l, hcap), st + (np.int64(1) << l)


#: prefetch distance (features, buffer entries) of the loops that read table rows at scattered places
AHEAD = 4


@njit(cache=True, nogil=True, inline="always")
def _prefetch_row(tab, sl):
    """Ask for the cache lines of table row ``sl`` (:func:`_prefetch`; a hint, nothing is read)."""
    ncol = tab.shape[1]
    _prefetch(tab, sl * ncol)
    _prefetch(tab, sl * ncol + 8)  # (a row of 19 columns can span three lines)
    _prefetch(tab, sl * ncol + ncol - 1)


@njit(**INNER)  # (not inlined: fd_run compiles faster)
def _find_slots(keys, tab, indices, a, s, mask, shift, slot_buf):
    """The example's slots into ``slot_buf`` (:func:`_find`'s result, < 0 for a key not stored), the keys' home
    slots asked for first (one pass), then the rows of the first AHEAD stored features (the look-up loop asks
    for the others AHEAD features ahead). The table (40 MB at -b 18) is mostly not in cache, and a catch-up is
    a few hundred instructions: the processor alone does not reach the next feature's row before it is read.
    In one process, on a cold copy of a table trained on 60,000 gen_sparse examples, look-ups and catch-ups of
    the next 10,000: 7.17 us per example plain, 5.91 so, 6.33 when also asking for the first history block of
    the next feature's catch-up (reading its stamp waits for its row), median of 6 rounds."""
    capmask = keys.shape[0] - 1
    for k in range(s):
        key = np.int64(indices[a + k]) & mask
        _prefetch(keys, np.int64((np.uint64(key) * HASH_MULT) >> np.uint64(shift)))
    for k in range(s):
        slot_buf[k] = _find(keys, np.int64(indices[a + k]) & mask, shift, capmask)
    for k in range(min(AHEAD, s)):
        if slot_buf[k] >= 0:
            _prefetch_row(tab, slot_buf[k])


@njit(**INNER)
def _catch_up(tab, sl, hP, hc, R, wz):
    """``wz[0] = w_bar``, ``wz[1:m+1] = Z column`` of slot ``sl`` after the recorded re-bases from its
    stamp to R (per block: ``w += c . z``, ``z <- P z``); ``wz[m+1:]`` is scratch."""
    m = hP.shape[1]
    hcap = _hist_cap(hP)
    st = np.int64(tab[sl, C_T])
    wz[0] = tab[sl, C_U]
    for r in range(m):
        wz[1 + r] = tab[sl, C_Z + r]
    while st < R:
        j, st = _next_block(st, R, hcap)
        acc = 0.0
        for r in range(m):
            acc += hc[j, r] * wz[1 + r]
        wz[0] += acc
        _mv(hP[j], wz[1:], wz[1 + m:], m)
        for r in range(m):
            wz[1 + r] = wz[1 + m + r]


@njit(**INLINE)  # (one call site)
def _catch_up_inplace(tab, sl, hP, hc, R, wz):
    """Bring slot ``sl`` up to date (stamp R) in the table."""
    if tab[sl, C_T] == R:
        return
    m = hP.shape[1]
    _catch_up(tab, sl, hP, hc, R, wz)
    tab[sl, C_U] = wz[0]
    for r in range(m):
        tab[sl, C_Z + r] = wz[1 + r]
    tab[sl, C_T] = R


@njit(**INNER)
def _rebase_all(keys, tab, ints, hP, hc, N, u):
    """Every stored feature through the whole history, then ``w_bar += u . z``, ``z <- N z`` (N = I,
    u = 0: a plain compaction); the history is then empty (stamps 0). The level-0 records are first
    composed into one transform per stamp (:func:`_compose_history`), so each feature costs O(m^2)
    whatever its stamp."""
    m = hP.shape[1]
    T, uu = _compose_history(hP, hc, ints[I_HIST], N, u)
    zt = np.empty(m)
    for s in range(keys.shape[0]):
        if keys[s] == EMPTY:
            continue
        _rebase_one(tab, s, T, uu, zt)
    ints[I_HIST] = 0
    ints[I_COMPACT] += 1


@njit(**INNER)  # (three call sites: compiled once)
def _rebase_one(tab, s, T, uu, zt):
    """Slot ``s`` through the composed history (:func:`_compose_history`): ``w_bar += u_st . z``, ``z <- T_st z``,
    stamp 0."""
    m = zt.shape[0]
    st = np.int64(tab[s, C_T])
    acc = 0.0
    for q in range(m):
        zt[q] = tab[s, C_Z + q]
        acc += uu[st, q] * zt[q]
    tab[s, C_U] += acc
    _mv(T[st], zt, tab[s, C_Z:], m)
    tab[s, C_T] = 0.0


@njit(**INNER)
def _compose_history(hP, hc, R, N, u):
    """The R level-0 records composed into one transform per stamp, ``T_st = N P_(R-1) ... P_st`` and its fold
    ``u_st = c_st + P_st^T u_(st+1)`` (``u_R = u``), O(R m^3)."""
    m = hP.shape[1]
    T = np.empty((R + 1, m, m))
    uu = np.empty((R + 1, m))
    for r in range(m):
        uu[R, r] = u[r]
        for q in range(m):
            T[R, r, q] = N[r, q]
    for st in range(R - 1, -1, -1):
        j = st  # level 0: block st
        for r in range(m):
            for q in range(m):
                acc = 0.0
                for t in range(m):
                    acc += T[st + 1, r, t] * hP[j, t, q]
                T[st, r, q] = acc
        for q in range(m):
            acc = hc[j, q]
            for t in range(m):
                acc += hP[j, t, q] * uu[st + 1, t]
            uu[st, q] = acc
    return T, uu


@njit(**KERNEL)
def table_lookup_rows(keys, tab, query, shift, out, hP, hc, R):
    """``out[i] = tab[slot(query[i])]`` brought up to date through the R recorded re-bases (zeros for
    absent keys); the table itself is not changed."""
    capmask = keys.shape[0] - 1
    m = hP.shape[1]
    wz = np.empty(2 * m + 1)
    for i in range(query.shape[0]):
        r = _find(keys, query[i], shift, capmask)
        if r >= 0:
            for c in range(tab.shape[1]):
                out[i, c] = tab[r, c]
            _catch_up(tab, r, hP, hc, R, wz)
            out[i, C_U] = wz[0]
            for q in range(m):
                out[i, C_Z + q] = wz[1 + q]
            out[i, C_T] = R


@njit(**INNER)
def _tr(A):
    """``A^T`` as a new C-ordered array (one layout for every ``_mm`` call: one compiled version)."""
    n, k = A.shape
    out = np.empty((k, n))
    for i in range(n):
        for j in range(k):
            out[j, i] = A[i, j]
    return out


@njit(**INNER)
def _head(A, nr, nc):
    """``A[:nr, :nc]`` as a new C-ordered array."""
    out = np.empty((nr, nc))
    for i in range(nr):
        for j in range(nc):
            out[i, j] = A[i, j]
    return out


@njit(**INNER)
def _sym(A, B):
    """``0.5 ((A - B) + (A - B)^T)``, in loops rather than array expressions (which compile slowly)."""
    n = A.shape[0]
    out = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            out[i, j] = 0.5 * ((A[i, j] - B[i, j]) + (A[j, i] - B[j, i]))
    return out


@njit(**INNER)
def _mm(A, B):
    """``A @ B`` with plain loops (any sizes, including empty ones)."""
    n, k = A.shape
    p = B.shape[1]
    out = np.zeros((n, p))
    for i in range(n):
        for t in range(k):
            a = A[i, t]
            if a != 0.0:
                for j in range(p):
                    out[i, j] += a * B[t, j]
    return out


@njit(cache=True, nogil=True, inline="always")
def _hypot(a, b):
    """``sqrt(a^2 + b^2)``: the plain formula where its squares can neither overflow nor underflow (libm's
    hypot, which guards against both with a slower algorithm, was a fifth of a 20 x 20 eigen-decomposition),
    else ``math.hypot``. Within 1 ulp of each other."""
    x = max(abs(a), abs(b))
    if 1e-150 < x < 1e150:
        return math.sqrt(a * a + b * b)
    return math.hypot(a, b)


# -- small dense linear algebra (2m x 2m at most). Not np.linalg: numba's needs scipy's LAPACK at
# run time, which the CLI does not load (streamlearn.cli._hide_scipy), and compiles slowly.

@njit(**INNER)
def _eigh(A, wantv):  # (callers pass np.bool_(...): a literal True / False would compile a version each)
    """Eigen-decomposition of the symmetric ``A`` (its symmetric part): ``(w ascending, V)`` with
    ``A = V diag(w) V^T``, V orthogonal (``wantv`` False: the eigenvalues only, bit for bit the same; V
    is then not computed and the array returned is scratch). Householder reduction to tridiagonal form, then the implicit
    QL iteration with Wilkinson-type shifts (Golub & Van Loan Alg. 8.3.1 and Sec. 8.3.5; EISPACK
    tred2 / tql2): O(n^3) with a small constant, a few times fewer operations than cyclic Jacobi."""
    n = A.shape[0]
    Vt = np.empty((n, n))  # V^T: the inner loops below run along V's columns, Vt's contiguous rows
    for i in range(n):
        for j in range(n):
            Vt[j, i] = 0.5 * (A[i, j] + A[j, i])
    d = np.zeros(n)
    e = np.zeros(n)
    if n == 0:
        return d, Vt
    # Householder reduction to tridiagonal form
    for j in range(n):
        d[j] = Vt[j, n - 1]
    for i in range(n - 1, 0, -1):
        scale = 0.0
        h = 0.0
        for k in range(i):
            scale += abs(d[k])
        if scale == 0.0:
            e[i] = d[i - 1]
            for j in range(i):
                d[j] = Vt[j, i - 1]
                Vt[j, i] = 0.0
                Vt[i, j] = 0.0
        else:
            for k in range(i):
                d[k] /= scale
                h += d[k] * d[k]
            f = d[i - 1]
            g = math.sqrt(h)
            if f > 0.0:
                g = -g
            e[i] = scale * g
            h = h - f * g
            d[i - 1] = f - g
            for j in range(i):
                e[j] = 0.0
            for j in range(i):
                f = d[j]
                Vt[i, j] = f
                g = e[j] + Vt[j, j] * f
                for k in range(j + 1, i):
                    g += Vt[j, k] * d[k]
                    e[k] += Vt[j, k] * f
                e[j] = g
            f = 0.0
            for j in range(i):
                e[j] /= h
                f += e[j] * d[j]
            hh = f / (h + h)
            for j in range(i):
                e[j] -= hh * d[j]
            for j in range(i):
                f = d[j]
                g = e[j]
                for k in range(j, i):
                    Vt[j, k] -= f * e[k] + g * d[k]
                d[j] = Vt[j, i - 1]
                Vt[j, i] = 0.0
        d[i] = h
    for i in range(n - 1):
        if not wantv:  # (the accumulation of the transforms only moves the diagonal to column n - 1)
            break
        Vt[i, n - 1] = Vt[i, i]
        Vt[i, i] = 1.0
        h = d[i + 1]
        if h != 0.0:
            for k in range(i + 1):
                d[k] = Vt[i + 1, k] / h
            for j in range(i + 1):
                g = 0.0
                for k in range(i + 1):
                    g += Vt[i + 1, k] * Vt[j, k]
                for k in range(i + 1):
                    Vt[j, k] -= g * d[k]
        for k in range(i + 1):
            Vt[i + 1, k] = 0.0
    for j in range(n):
        d[j] = Vt[j, n - 1] if wantv or j == n - 1 else Vt[j, j]
        Vt[j, n - 1] = 0.0
    Vt[n - 1, n - 1] = 1.0
    e[0] = 0.0
    # implicit QL
    for i in range(1, n):
        e[i - 1] = e[i]
    e[n - 1] = 0.0
    f = 0.0
    tst1 = 0.0
    eps = 2.0 ** -52
    for l in range(n):
        tst1 = max(tst1, abs(d[l]) + abs(e[l]))
        m = l
        while m < n - 1:
            if abs(e[m]) <= eps * tst1:
                break
            m += 1
        if m > l:
            for it in range(100):
                g = d[l]
                p = (d[l + 1] - g) / (2.0 * e[l])
                r = _hypot(p, 1.0)
                if p < 0.0:
                    r = -r
                d[l] = e[l] / (p + r)
                d[l + 1] = e[l] * (p + r)
                dl1 = d[l + 1]
                h = g - d[l]
                for i in range(l + 2, n):
                    d[i] -= h
                f += h
                p = d[m]
                c = 1.0
                c2 = 1.0
                c3 = 1.0
                el1 = e[l + 1]
                s = 0.0
                s2 = 0.0
                for i in range(m - 1, l - 1, -1):
                    c3 = c2
                    c2 = c
                    s2 = s
                    g = c * e[i]
                    h = c * p
                    r = _hypot(p, e[i])
                    e[i + 1] = s * r
                    s = e[i] / r
                    c = p / r
                    p = c * d[i] - s * g
                    d[i + 1] = h + s * (c * g + s * d[i])
                    for k in range(n if wantv else 0):
                        h = Vt[i + 1, k]
                        Vt[i + 1, k] = s * Vt[i, k] + c * h
                        Vt[i, k] = c * Vt[i, k] - s * h
                p = -s * s2 * c3 * el1 * e[l] / dl1
                e[l] = s * p
                d[l] = c * p
                if not abs(e[l]) > eps * tst1:
                    break
        d[l] = d[l] + f
        e[l] = 0.0
    for i in range(1, n):
        j = i
        while j > 0 and d[j - 1] > d[j]:
            d[j - 1], d[j] = d[j], d[j - 1]
            for k in range(n if wantv else 0):
                Vt[j - 1, k], Vt[j, k] = Vt[j, k], Vt[j - 1, k]
            j -= 1
    V = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            V[i, j] = Vt[j, i]
    return d, V


@njit(**INNER)
def _solve(A, B):
    """``A^-1 B`` by Gaussian elimination with partial pivoting (A square, assumed non-singular)."""
    n = A.shape[0]
    p = B.shape[1]
    a = A.copy()
    x = B.copy()
    for k in range(n):
        piv = k
        for i in range(k + 1, n):
            if abs(a[i, k]) > abs(a[piv, k]):
                piv = i
        if piv != k:
            for j in range(n):
                a[k, j], a[piv, j] = a[piv, j], a[k, j]
            for j in range(p):
                x[k, j], x[piv, j] = x[piv, j], x[k, j]
        for i in range(k + 1, n):
            f = a[i, k] / a[k, k]
            if f != 0.0:
                for j in range(k, n):
                    a[i, j] -= f * a[k, j]
                for j in range(p):
                    x[i, j] -= f * x[k, j]
    for k in range(n - 1, -1, -1):
        for j in range(p):
            acc = x[k, j]
            for i in range(k + 1, n):
                acc -= a[k, i] * x[i, j]
            x[k, j] = acc / a[k, k]
    return x


@njit(**INNER)
def _cholesky(P):
    """Lower-triangular ``L`` with ``L L^T = P``, or an empty array if P is not positive definite."""
    n = P.shape[0]
    L = np.zeros((n, n))
    for j in range(n):
        acc = P[j, j]
        for k in range(j):
            acc -= L[j, k] * L[j, k]
        if not acc > 0.0:
            return np.zeros((0, 0))
        L[j, j] = math.sqrt(acc)
        for i in range(j + 1, n):
            acc = P[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = acc / L[j, j]
    return L


@njit(**INNER)
def _orth_cols(J):
    """An orthonormal basis of the column space of ``J`` (full column rank): modified Gram-Schmidt, each
    column orthogonalised twice against the previous ones ("twice is enough", Giraud et al. 2005)."""
    n, k = J.shape
    Q = J.copy()
    for j in range(k):
        for _ in range(2):
            for i in range(j):
                acc = 0.0
                for r in range(n):
                    acc += Q[r, i] * Q[r, j]
                for r in range(n):
                    Q[r, j] -= acc * Q[r, i]
        nrm = 0.0
        for r in range(n):
            nrm += Q[r, j] * Q[r, j]
        nrm = math.sqrt(nrm)
        if nrm > 0.0:
            for r in range(n):
                Q[r, j] /= nrm
    return Q


@njit(cache=True, nogil=True, inline="always")
def _mv(A, x, out, n):
    """``out[:n] = A[:n, :n] x[:n]``."""
    for r in range(n):
        acc = 0.0
        for j in range(n):
            acc += A[r, j] * x[j]
        out[r] = acc


@njit(cache=True, nogil=True, inline="always")
def _vm(x, A, out, n):
    """``out[:n] = x[:n]^T A[:n, :n]``."""
    for c in range(n):
        acc = 0.0
        for i in range(n):
            acc += x[i] * A[i, c]
        out[c] = acc


@njit(**INNER)
def _sherman_morrison(H, q, e_idx, hq, eh, n):
    """Alg. 6 lines 2-3: ``H <- (H^-1 + q e^T + e q^T)^-1`` by two rank-one steps, ``e`` the unit
    vector ``e_idx`` (q = S g^ - (g^T g^ / 2) e, S after inserting g^: NOTES_FD item 1), on H's first n rows
    and columns (n = m + buffer rows: see :func:`_quad`)."""
    # H - (H q)(e^T H) / (1 + e^T H q)
    _mv(H, q, hq, n)
    for j in range(n):
        eh[j] = H[e_idx, j]
    den = 1.0 + hq[e_idx]
    for i in range(n):
        f = hq[i] / den
        for j in range(n):
            H[i, j] -= f * eh[j]
    # H - (H e)(q^T H) / (1 + q^T H e)
    _vm(q, H, eh, n)  # q^T H
    for i in range(n):
        hq[i] = H[i, e_idx]  # H e
    den = 1.0 + eh[e_idx]
    for i in range(n):
        f = hq[i] / den
        for j in range(n):
            H[i, j] -= f * eh[j]


@njit(**INNER)
def _sx(F, D, z, gx, tau, m, sx):
    """``S x = [D F Z x; G x]`` from ``z = Z x`` and ``gx = G x`` (buffer rows < tau)."""
    _mv(F, z, sx, m)
    for r in range(m):
        sx[r] = D[r] * sx[r]
    for r in range(m):
        sx[m + r] = gx[r] if r < tau else 0.0


@njit(**INNER)
def _apply_ainv(H, sx, m, coef, F, D, b, c, h, tmp):
    """The part of ``u -= coef A^-1 x = coef (x - S^T H S x) / alpha`` outside ``w_bar`` (the caller
    does ``w_bar -= coef x / alpha``): ``b += coef/alpha F^T D (H Sx)_top``, ``c += coef/alpha (H Sx)_bot``.
    ``coef`` already includes the 1/alpha. ``h`` (2m) is scratch."""
    _mv(H, sx, h, 2 * m)
    _ainv_tail(h, m, coef, F, D, b, c, tmp)


@njit(cache=True, nogil=True, inline="always")
def _ainv_tail(h, m, coef, F, D, b, c, tmp):
    """:func:`_apply_ainv` from ``h = H Sx`` (overwritten)."""
    for r in range(m):
        tmp[r] = coef * D[r] * h[r]
    for r in range(m):
        c[r] += coef * h[m + r]
    _vm(tmp, F, h, m)  # F^T tmp
    for q in range(m):
        b[q] += h[q]


@njit(**INNER)
def _quad(H, sx, h, n):
    """``Sx^T H Sx``, leaving ``h = H Sx``, from H's first n rows and columns and ``Sx[:n]``. ``n = m +`` the
    buffer rows: the rows and columns of the empty buffer rows are ``1/alpha`` on the diagonal and exact zeros
    elsewhere (the eigen step's H is diagonal, and a Sherman-Morrison step with ``q`` and ``e`` zero there adds
    exact zeros), and ``Sx`` is 0 there, so every term left out is an exact zero: the same sums, bit for bit."""
    _mv(H, sx, h, n)
    for r in range(n, h.shape[0]):
        h[r] = 0.0
    sh = 0.0
    for r in range(n):
        sh += sx[r] * h[r]
    return sh


#: _pinv's modes (passed as np.int64(...): a literal argument would compile a version per mode)
PINV_PROJECT, PINV_QUAD, PINV_STEP = 0, 1, 2


@njit(**INNER)
def _pinv(F, D, ZG, GG, tau, sx, mode, xx, f, b, c, h):
    """RFD with alpha = 0 (NOTES_FD item 7): ``A = S^T S`` is singular; its pseudo-inverse from the
    eigen-decomposition of ``S S^T`` (2m x 2m, built from the small matrices: top block D^2, V
    orthonormal), eigenvalues <= RANK_TOL of the largest counted as zero, as the reference. O(m^3).
    One helper for the three uses (one compiled copy of the eigen-decomposition's caller):

    - ``mode = PINV_PROJECT`` (``f = ptau``): SON Lemma 2 (App. B), the projection of u onto
      ``|w^T x| <= C`` in the A semi-norm, ``w = u - ptau r / (x^T r)`` with ``r = x - A A^+ x`` the
      part of x outside range(A) when it is not 0 (then u moves only there: ``A A^+ x = S^T (S S^T)^+
      S x``), else ``w = u - ptau A^+ x / (x^T A^+ x)`` with ``A^+ x = S^T (S S^T)^+2 S x``. Returns the
      coefficient of x (the caller does ``w_bar -= it x``); the S^T part goes into b and c.
    - ``mode = PINV_QUAD``: returns ``x^T A^+ x = sum_k (U_k . Sx)^2 / lam_k^2``.
    - ``mode = PINV_STEP`` (``f = gl``): ``u -= A^+ g``, ``A^+ g = S^T (S S^T)^+2 S g`` with ``S g = gl Sx``."""
    m = D.shape[0]
    n = 2 * m
    SS = np.zeros((n, n))
    for r in range(m):
        SS[r, r] = D[r] * D[r]
        for q in range(tau):
            acc = 0.0
            for j in range(m):
                acc += F[r, j] * ZG[j, q]
            SS[r, m + q] = D[r] * acc
            SS[m + q, r] = D[r] * acc
    for q in range(tau):
        for j in range(tau):
            SS[m + q, m + j] = GG[q, j]
    lam, U = _eigh(SS, np.bool_(True))
    top = max(lam[n - 1], 0.0)
    keep = np.zeros(n, np.bool_)  # the eigenpairs above the rank threshold, and Sx's projections on them
    proj = np.zeros(n)
    for k in range(n):
        if top > 0.0 and lam[k] > RANK_TOL * top:
            keep[k] = True
            acc = 0.0
            for i in range(n):
                acc += U[i, k] * sx[i]
            proj[k] = acc
    for i in range(n):
        h[i] = 0.0
    if mode == PINV_QUAD:
        q = 0.0
        for k in range(n):
            if keep[k]:
                q += proj[k] * proj[k] / (lam[k] * lam[k])
        return q
    gam = 0.0
    p = 2
    if mode == PINV_PROJECT:
        # x^T A A^+ x = sum over kept eigenpairs (U_k . Sx)^2 / lam_k, x^T A^+ x = sum (U_k . Sx)^2 / lam_k^2
        xpx = 0.0
        xapx = 0.0
        for k in range(n):
            if keep[k]:
                xpx += proj[k] * proj[k] / lam[k]
                xapx += proj[k] * proj[k] / (lam[k] * lam[k])
        xr = xx - xpx
        if xr > 1e-12 * xx:  # w = u - gam (x - S^T (S S^T)^+ S x)
            gam = f / xr
            f = -gam
            p = 1
        elif xapx > 0.0:  # w = u - gam S^T (S S^T)^+2 S x
            f = f / xapx
        else:
            return 0.0
    for k in range(n):
        if keep[k]:
            g = f * proj[k] / (lam[k] if p == 1 else lam[k] * lam[k])
            for i in range(n):
                h[i] += g * U[i, k]
    # u -= S^T h: b -= F^T D h_top, c -= h_bot
    for q in range(m):
        acc = 0.0
        for r in range(m):
            acc += F[r, q] * D[r] * h[r]
        b[q] -= acc
    for r in range(m):
        c[r] -= h[m + r]
    return gam


@njit(**INNER)
def _buffer_dots(tab, boff, bslot, bval, tau, m, gx):
    """``gx[q] = g_q . x`` for each buffered gradient row q < tau (``x`` summed into ``tab[., C_S]``
    on the example's slots), 0 for the rows q >= tau; O(buffer entries)."""
    for q in range(m):
        acc = 0.0
        if q < tau:
            for e in range(boff[q], boff[q + 1]):
                acc += bval[e] * tab[bslot[e], C_S]
        gx[q] = acc


@njit(**INNER)
def _buffer_share(tab, slot_buf, s, boff, bslot, bval, c, tau, col):
    """Pre-scaling: ``tab[., col] = (G^T c)_j``, the buffer's share of ``w~_j``, on the example's features and
    the buffer's (0 on the example's features outside the buffer), O(s + buffer entries)."""
    for k in range(s):
        tab[slot_buf[k], col] = 0.0
    for e in range(boff[tau]):
        tab[bslot[e], col] = 0.0
    for q in range(tau):
        for e in range(boff[q], boff[q + 1]):
            tab[bslot[e], col] += c[q] * bval[e]


@njit(cache=True, nogil=True, inline="always")
def _flush(tab, sl, b, m):
    """Pre-scaling: ``c_j += f_j (w~_j - snap_j)``, ``snap_j = w~_j`` (``w~_j = w_bar_j + Z_j^T b + (G^T c)_j``,
    the last from :func:`_buffer_share`), before the frame ``f_j`` changes."""
    cw = C_Z + m
    wt = tab[sl, C_U] + tab[sl, cw + P_BUF]
    for r in range(m):
        wt += tab[sl, C_Z + r] * b[r]
    tab[sl, cw + P_C] += tab[sl, cw + P_F] * (wt - tab[sl, cw + P_SNAP])
    tab[sl, cw + P_SNAP] = wt


@njit(**INNER)
def _grow_scale(tab, slot_buf, values, a, s, b, m):
    """Pre-scaling, before the prediction: ``s_j^2 = max(s_j^2, x_j^2)`` (repeated indices summed); a feature
    whose scale grows is flushed, its original-coordinate weight multiplied by ``s_old / s_new`` (VW's
    gd.cc) and its frame recomputed."""
    cw = C_Z + m
    for k in range(s):
        tab[slot_buf[k], C_S] = 0.0
    for k in range(s):
        tab[slot_buf[k], C_S] += values[a + k]
    for k in range(s):
        sl = slot_buf[k]
        v = tab[sl, C_S]
        tab[sl, C_S] = 0.0
        if v == 0.0:
            continue
        v2 = _sq(v)  # VW's floor FLT_MIN (oja-son's _sq)
        if v2 > tab[sl, cw + P_S2]:
            _flush(tab, sl, b, m)
            if tab[sl, cw + P_S2] > 0.0:
                tab[sl, cw + P_C] *= math.sqrt(tab[sl, cw + P_S2] / v2)
            tab[sl, cw + P_S2] = v2
            tab[sl, cw + P_F] = _pscale(tab[sl, cw + P_G], v2, 0.25, True)


@njit(**INNER)
def _accumulate_g(tab, slot_buf, values, a, s, g2, m):
    """Pre-scaling, after the flush: ``G_j += g2 x_j^2`` (repeated indices summed) and the new frames; returns
    ``||x / s||^2`` (VW's normaliser's term)."""
    cw = C_Z + m
    for k in range(s):
        tab[slot_buf[k], C_S] = 0.0
    for k in range(s):
        tab[slot_buf[k], C_S] += values[a + k]
    nx = 0.0
    for k in range(s):
        sl = slot_buf[k]
        v = tab[sl, C_S]
        if v != 0.0:
            tab[sl, C_S] = 0.0
            tab[sl, cw + P_G] += g2 * v * v
            nx += _sq(v) / tab[sl, cw + P_S2]
            tab[sl, cw + P_F] = _pscale(tab[sl, cw + P_G], tab[sl, cw + P_S2], 0.25, True)
    return nx


@njit(cache=True, nogil=True, inline="always")
def _invariant_coef(code, p, y, imp, q, gl):
    """Importance-invariant step (the default; ``--no_invariant`` for the paper's): the gradient coefficient
    ``c`` of ``u = w - c A^-1 x`` that moves this example's prediction by ``-c q`` (``q = x^T A^-1 x``) as h
    infinitesimal steps would (Karampatziakis & Langford 2011, as VW and Oja-SON): ``h l'(p)`` for small
    ``h q``, and never past the label (squared), the margin (hinge) or the logistic loss's flow."""
    if not q > 0.0:
        return gl
    upd = invariant_step(code, p, y, imp, q)
    if not math.isfinite(upd):
        return gl
    return -upd


@njit(**INNER)
def _key_order(keys):
    """The occupied slots in ascending order of their keys (>= 0, distinct): an LSD radix sort, 8 bits
    a pass, O(cap + n bits / 8)."""
    n = 0
    kmax = 0
    for s in range(keys.shape[0]):
        if keys[s] != EMPTY:
            n += 1
            if keys[s] > kmax:
                kmax = keys[s]
    a = np.empty(n, np.int64)
    tmp = np.empty(n, np.int64)
    n = 0
    for s in range(keys.shape[0]):
        if keys[s] != EMPTY:
            a[n] = s
            n += 1
    cnt = np.empty(257, np.int64)
    sh = 0
    while sh < 64 and (kmax >> sh) > 0:
        for v in range(257):
            cnt[v] = 0
        for i in range(n):
            cnt[((keys[a[i]] >> sh) & 255) + 1] += 1
        for v in range(256):
            cnt[v + 1] += cnt[v]
        for i in range(n):
            v = (keys[a[i]] >> sh) & 255
            tmp[cnt[v]] = a[i]
            cnt[v] += 1
        a, tmp = tmp, a
        sh += 8
    return a


@njit(**INLINE)  # (one call site)
def _rebase_recompute_k(keys, tab, K, T, uu, zt):
    """``K = Z Z^T`` exactly from the table, summed in the order of the features (not of the slots: a restored
    model's table is laid out differently, and its K must be the same to the bit), each feature not yet re-based
    (stamp >= 0) re-based first (:func:`_rebase_one`), the others' stamps (-1) reset to 0: one pass over the
    table instead of two (the re-base in slot order, then K in key order), with the same arithmetic."""
    m = K.shape[0]
    for i in range(m):
        for j in range(m):
            K[i, j] = 0.0
    order = _key_order(keys)
    n = order.shape[0]
    for o in range(n):
        s = order[o]
        if o + 8 < n:  # (the rows are read in key order: scattered over the table; fetch ahead)
            _prefetch_row(tab, order[o + 8])
        if tab[s, C_T] >= 0.0:
            _rebase_one(tab, s, T, uu, zt)
        else:
            tab[s, C_T] = 0.0
        for i in range(m):
            zi = tab[s, C_Z + i]
            if zi != 0.0:
                for j in range(m):
                    K[i, j] += zi * tab[s, C_Z + j]


@njit(**INLINE)  # (one call site)
def _orthonormalise_active(F, K, na):
    """Drift guard: if ``K = V V^T`` on the active rows is not I (to DRIFT_TOL), replace those rows
    of F by ``L^-1 F`` (``L L^T = K_aa``; K_aa = I after): Gram-Schmidt of V's active rows, O(m^3).
    Returns whether it was needed."""
    m = F.shape[0]
    if na == 0:
        return False
    Fa = _head(F, na, m)
    P = _head(K, na, na)
    dev = 0.0
    for i in range(na):
        for j in range(na):
            v = abs(P[i, j] - (1.0 if i == j else 0.0))
            if v > dev:
                dev = v
    if not dev > DRIFT_TOL:
        return False
    Ps = np.empty((na, na))
    for i in range(na):
        for j in range(na):
            Ps[i, j] = 0.5 * (P[i, j] + P[j, i])
    L = _cholesky(Ps)
    if L.shape[0] == 0:
        return False
    Fn = _solve(L, Fa)
    Kai = np.empty((na, m - na))  # V_a's Gram with the inactive rows
    for i in range(na):
        for j in range(na, m):
            Kai[i, j - na] = K[i, j]
    X = _solve(L, Kai)
    for i in range(na):
        for j in range(m):
            F[i, j] = Fn[i, j]
        for j in range(na):
            K[i, j] = 1.0 if i == j else 0.0
        for j in range(na, m):
            K[i, j] = X[i, j - na]
            K[j, i] = X[i, j - na]
    return True


@njit(**INLINE)  # (one call site)
def _equilibrated_cond(N1):
    """The condition number of ``N1 diag(1 / ||N1 e_q||)`` (its columns scaled to unit norm; inf if one is
    0, or if their norms differ by more than COL_RATIO). ``F = N1`` with ``Z += N1^-1 N2 G``: scaling F's
    column q scales Z's row q inversely, which loses no precision (each row of Z carries its own exponent),
    so what can amplify the rounding of Z in ``V = F Z`` is the condition number of F with its columns
    equilibrated, not of F (van der Sluis 1969: within sqrt(m) of the best column scaling)."""
    m = N1.shape[0]
    W = np.empty((m, m))
    cmin = math.inf
    cmax = 0.0
    for q in range(m):
        nrm = 0.0
        for r in range(m):
            nrm += N1[r, q] * N1[r, q]
        nrm = math.sqrt(nrm)
        cmin = min(cmin, nrm)
        cmax = max(cmax, nrm)
        if nrm > 0.0:
            for r in range(m):
                W[r, q] = N1[r, q] / nrm
    if not cmin > 0.0 or cmax > COL_RATIO * cmin:
        return math.inf
    ev = _eigh(_mm(_tr(W), W), np.bool_(False))[0]  # squared singular values, ascending
    # past COND_RESOLVED the eigenvalues of W^T W (absolute error ~ m eps ev_max) cannot tell it from singular
    return math.sqrt(ev[m - 1] / ev[0]) if ev[0] * (COND_RESOLVED * COND_RESOLVED) >= ev[m - 1] else math.inf


@njit(**INNER)
def _eigen_step(keys, tab, ints, F, K, D, b, c, ZG, GG, boff, bslot, bval, flt, robust, max_cond, ws, hP, hc):
    """The buffer is full: App. F Alg. 9 lines 6-13 / Alg. 10 / Alg. 11, in 2m x 2m algebra.

    With ``V_a`` the active rows of ``V = F Z`` (orthonormal), ``C = G V_a^T`` and the buffer's
    residual ``E = G - C V_a`` (Gram ``G G^T - C C^T``), the residual's orthonormal basis is
    ``P = Q2 G + Q1 Z`` (``Q2 = Gamma^-1/2 W^T`` from the eigen-decomposition of E's Gram matrix,
    dependent directions dropped; ``Q1 = -Q2 C F_a``), so ``S = Mt [V_a; P]`` with
    ``Mt = [[D_a, 0], [C, W Gamma^1/2]]``. The top m eigen-pairs ``U, Sigma`` of ``Mt^T Mt`` give the new
    ``V = U^T [V_a; P] = N1 Z + N2 G`` with ``N1 = U1^T F_a + U2^T Q1``, ``N2 = U2^T Q2``
    (NOTES_FD item 3) and ``D_ii = sqrt(Sigma_ii - Sigma_mm)``.

    When ``F_new = N1`` (completed to m rows) is well conditioned: ``Delta = N1^-1 N2``,
    ``Z += Delta G`` on the buffer's features, ``K`` updated in m x m algebra, and ``w_bar`` corrected
    with the buffer before it is cleared (``Z^T b`` moved by ``G^T Delta^T b``, and ``G^T c``
    folded: NOTES_FD item 2). Otherwise (the first epoch, where Z is empty and N1 = 0; a
    rank-deficient stream; N1's column-equilibrated condition number > max_cond) it re-bases: ``w_bar += Z^T b``, ``Z = [N1; .] Z +
    [N2; 0] G`` over every stored feature, ``F = I``, ``K`` recomputed (NOTES_FD item 5).

    The re-base is lazy when every row is active (the usual case): it is recorded in the history
    (see :func:`_catch_up`) and applied at once only to the buffer's features; ``K = I`` (V's rows
    are orthonormal). With inactive rows (a sketch of rank < m: the first epochs, d < m) it is done
    on every feature, by :func:`full_rebase` (called from Python: a rare path, compiled apart).
    The tail (drift guard, buffer cleared, H) is :func:`_eigen_tail`.

    Returns ``EIG_DELTA`` (``ws[0]`` holds Delta), ``EIG_LAZY`` after a lazy re-base, or ``EIG_FULL`` (``ws[0]``,
    ``ws[1]`` hold N1, N2 for :func:`full_rebase`).
    """
    m = F.shape[0]
    na = ints[I_NA]
    Fa = _head(F, na, m)
    # C = G V_a^T (m x na): C[k, i] = sum_j ZG[j, k] F[i, j]
    C = _mm(_tr(ZG), _tr(Fa))
    EE = _sym(GG, _mm(C, _tr(C)))
    gam, W = _eigh(EE, np.bool_(True))
    trg = 0.0
    for k in range(m):
        trg += GG[k, k]
    r = 0
    for k in range(m):
        if gam[k] > RESID_TOL * trg:
            r += 1
    Wk = np.empty((m, r))
    gk = np.empty(r)
    j = 0
    for k in range(m - r, m):  # ascending: the kept ones are the last r
        gk[j] = gam[k]
        for i in range(m):
            Wk[i, j] = W[i, k]
        j += 1
    Q2 = np.empty((r, m))
    for j in range(r):
        for i in range(m):
            Q2[j, i] = Wk[i, j] / math.sqrt(gk[j])
    Q1 = _mm(_mm(Q2, C), Fa)  # r x m
    for j in range(r):
        for i in range(m):
            Q1[j, i] = -Q1[j, i]
    nb = na + r
    Mt = np.zeros((na + m, nb))
    for i in range(na):
        Mt[i, i] = D[i]
    for k in range(m):
        for i in range(na):
            Mt[na + k, i] = C[k, i]
        for j in range(r):
            Mt[na + k, na + j] = Wk[k, j] * math.sqrt(gk[j])
    MM = _mm(_tr(Mt), Mt)  # (_eigh takes the symmetric part)
    sig = np.zeros(nb)
    U = np.zeros((nb, nb))
    if nb > 0:
        sig, U = _eigh(MM, np.bool_(True))  # ascending
    kk = min(m, nb)
    smm = max(sig[nb - m], 0.0) if nb >= m else 0.0
    # the new rows in the basis' coordinates: the top m - 1 eigenvectors (D > 0), then rows whose D is
    # 0 (the m-th, zeroed by the shrink): any unit vectors orthogonal to those leave S unchanged, and
    # the m-th eigenvector itself would make N1 singular (with a buffer residual of rank m, V_m minus
    # its buffer part is a null vector of S, orthogonal to all eigenvectors kept: some combination of
    # them is then pure buffer). Take them as close as possible to range(J), J = [I; -Q2 C] the
    # coordinates of the directions orthogonal to G that Z alone represents.
    flt[1] += smm
    if robust:  # RFD Alg. 3 lines 6-9 (Luo et al. 2019): alpha_t = alpha_(t-1) + Sigma_mm / 2
        flt[0] += 0.5 * smm
    mp = min(m - 1, nb)
    Usel = np.zeros((nb, kk))
    for t in range(mp):
        col = nb - 1 - t  # descending
        D[t] = math.sqrt(max(max(sig[col], 0.0) - smm, 0.0))
        for i in range(nb):
            Usel[i, t] = U[i, col]
    if kk > mp:
        nr = nb - mp
        B = np.empty((nb, nr))
        for j in range(nr):
            for i in range(nb):
                B[i, j] = U[i, nr - 1 - j]
        pick = np.zeros((nr, kk - mp))
        # The m-th row cheaply, O(nb m): when every row was active, the old m-th row's direction orthogonal to G
        # (its column of J, the coordinates of a direction Z alone represents) projected off the kept eigenvectors,
        # taken when at least CHEAP_PICK_MIN of its squared norm is left (on gen_sparse: 2,999 eigen steps of
        # 3,000, with main's re-base count). Else the best such vector in range(J), O(nb na^2 + nr^3) (~13% of
        # an eigen step at m = 10)
        res = 0.0
        if na == m and kk - mp == 1:
            # a = J e_(m-1) = [e_(m-1); -Q2 C e_(m-1)] (unit-normalised), then off the kept eigenvectors
            a = np.zeros(nb)
            a[m - 1] = 1.0
            for j in range(r):
                acc = 0.0
                for k in range(m):
                    acc += Q2[j, k] * C[k, m - 1]
                a[na + j] = -acc
            an = 0.0
            for i in range(nb):
                an += a[i] * a[i]
            an = 1.0 / math.sqrt(an)
            for i in range(nb):
                a[i] *= an
            pa = np.zeros(mp)
            for t in range(mp):
                acc = 0.0
                for i in range(nb):
                    acc += Usel[i, t] * a[i]
                pa[t] = acc
            res = 1.0
            for t in range(mp):
                res -= pa[t] * pa[t]
        if na == m and kk - mp == 1 and res > CHEAP_PICK_MIN:
            inv = 1.0 / math.sqrt(res)
            for i in range(nb):
                acc = a[i]
                for t in range(mp):
                    acc -= Usel[i, t] * pa[t]
                Usel[i, mp] = acc * inv
            D[mp] = 0.0
        elif na > 0:
            J = np.zeros((nb, na))
            for i in range(na):
                J[i, i] = 1.0
            QC = _mm(Q2, C)
            for j in range(r):
                for i in range(na):
                    J[na + j, i] = -QC[j, i]
            # the top right singular vectors of Jo^T B, Jo any orthonormal basis of range(J): top eigenvectors
            # of B^T Jo Jo^T B, the same for every such basis. Jo by Gram-Schmidt of J's columns (twice, O(nb na^2)),
            # not J (J^T J)^-1/2 (an eigen-decomposition of J^T J, whose condition number is cond(J)^2: Q2 C is
            # large when the buffer's residual is small, e.g. on raw features of scale 1e6)
            Jo = _orth_cols(J)
            JB = _mm(_tr(Jo), B)
            lb, Wb = _eigh(_mm(_tr(JB), JB), np.bool_(True))
            for t in range(kk - mp):
                for j in range(nr):
                    pick[j, t] = Wb[j, nr - 1 - t]
        else:
            for t in range(kk - mp):
                pick[t, t] = 1.0
        if not (na == m and kk - mp == 1 and res > CHEAP_PICK_MIN):
            Ub = _mm(B, pick)
            for t in range(mp, kk):
                D[t] = 0.0
                for i in range(nb):
                    Usel[i, t] = Ub[i, t - mp]
    N1 = np.zeros((m, m))
    N2 = np.zeros((m, m))
    for t in range(kk):
        for q in range(m):
            acc1 = 0.0
            for i in range(na):
                acc1 += Usel[i, t] * Fa[i, q]
            acc2 = 0.0
            acc3 = 0.0
            for j in range(r):
                acc2 += Usel[na + j, t] * Q1[j, q]
                acc3 += Usel[na + j, t] * Q2[j, q]
            N1[t, q] = acc1 + acc2
            N2[t, q] = acc3
    for t in range(kk, m):
        D[t] = 0.0
    if kk < m:  # inactive rows: complete N1 by the orthonormal complement of its row space
        N1k = _head(N1, kk, m)
        lam, E = _eigh(_mm(_tr(N1k), N1k), np.bool_(True))
        for t in range(kk, m):
            for q in range(m):
                N1[t, q] = E[q, t - kk]
    # the Gram matrix of the new V's kept rows, V_new = M V_a + N2 G with M = U1^T - U2^T Q2 C (the
    # rows' coefficients on the old active rows): M K_aa M^T + M C^T N2^T + N2 C M^T + N2 G G^T N2^T,
    # all of moderate size (unlike Z's Gram, whose condition number is cond(F)^2)
    QC = _mm(Q2, C)
    Mk = np.zeros((kk, na))
    for t in range(kk):
        for i in range(na):
            acc = Usel[i, t]
            for j in range(r):
                acc -= Usel[na + j, t] * QC[j, i]
            Mk[t, i] = acc
    N2k = _head(N2, kk, m)
    Kaa = _head(K, na, na)
    N2kT = _tr(N2k)
    X1 = _mm(_mm(Mk, _tr(C)), N2kT)
    VVn = _mm(_mm(Mk, Kaa), _tr(Mk))
    X3 = _mm(_mm(N2k, GG), N2kT)
    for i in range(kk):
        for j in range(kk):
            VVn[i, j] = ((VVn[i, j] + X1[i, j]) + X1[j, i]) + X3[i, j]
    ints[I_NA] = kk
    ints[I_EIG] += 1
    cn = _equilibrated_cond(N1)
    ok = cn <= max_cond and cn < math.inf  # singular N1: a re-base even at --max_cond inf
    tau = ints[I_TAU]
    if ok:
        Delta = _solve(N1, N2)
        # w_bar += G^T (c - Delta^T b) on the buffer's entries (before the buffer is cleared)
        dtb = np.zeros(m)
        for q in range(m):
            for rr in range(m):
                dtb[q] += Delta[rr, q] * b[rr]
        DeltaT = _tr(Delta)  # (column q of Delta contiguous: the loop over rr below is vectorised)
        ne = boff[tau]
        for q in range(tau):
            f = c[q] - dtb[q]
            for e in range(boff[q], boff[q + 1]):
                if e + AHEAD < ne:  # (the rows are scattered over the table: _find_slots)
                    _prefetch_row(tab, bslot[e + AHEAD])
                sl = bslot[e]
                v = bval[e]
                tab[sl, C_U] += f * v
                for rr in range(m):
                    tab[sl, C_Z + rr] += DeltaT[q, rr] * v
        for i in range(m):
            for j in range(m):
                K[i, j] = 0.5 * (VVn[i, j] + VVn[j, i]) if i < kk and j < kk else (1.0 if i == j else 0.0)
                F[i, j] = N1[i, j]
                ws[0, i, j] = Delta[i, j]
    elif (kk == m and (ints[I_T] - flt[2]) * FULL_REBASE_RATIO < ints[I_OCC]
          and ints[I_HIST] < _hist_cap(hP)):  # lazy re-base: recorded; applied now only to the buffer's features (all at stamp k)
        # (a full history was compacted before this example: fd_run's status ST_COMPACT)
        hcap = _hist_cap(hP)
        k = ints[I_HIST]
        j0 = k  # level 0: block k
        for i in range(m):
            hc[j0, i] = b[i]
            for j in range(m):
                hP[j0, i, j] = N1[i, j]
        _complete(hP, hc, k, hcap)
        ints[I_HIST] = k + 1
        zt = np.empty(m)
        N2T = _tr(N2)  # (column q of N2 contiguous: the loop over t below, Z += N2 G, is vectorised)
        ne = boff[tau]
        for q in range(tau):
            for e in range(boff[q], boff[q + 1]):
                if e + AHEAD < ne:  # (the rows are scattered over the table: _find_slots)
                    _prefetch_row(tab, bslot[e + AHEAD])
                sl = bslot[e]
                if tab[sl, C_T] != k:  # (a feature in several buffer rows: once)
                    continue
                acc = 0.0
                for t in range(m):
                    zt[t] = tab[sl, C_Z + t]
                    acc += zt[t] * b[t]
                tab[sl, C_U] += acc
                for t in range(m):
                    acc = 0.0
                    for qq in range(m):
                        acc += N1[t, qq] * zt[qq]
                    tab[sl, C_Z + t] = acc
                tab[sl, C_T] = k + 1
        for t in range(m):
            b[t] = 0.0
        for q in range(tau):  # w_bar += G^T c, Z += N2 G
            for e in range(boff[q], boff[q + 1]):
                sl = bslot[e]
                v = bval[e]
                tab[sl, C_U] += c[q] * v
                for t in range(m):
                    tab[sl, C_Z + t] += N2T[q, t] * v
        for i in range(m):  # (kk = m)
            for j in range(m):
                K[i, j] = 0.5 * (VVn[i, j] + VVn[j, i])
                F[i, j] = 1.0 if i == j else 0.0
        ints[I_REBASE] += 1
    else:  # a re-base on every feature: done by full_rebase, called from Python on fd_run's status ST_REBASE
        for i in range(m):
            for j in range(m):
                ws[0, i, j] = N1[i, j]
                ws[1, i, j] = N2[i, j]
        return EIG_FULL
    return EIG_DELTA if ok else EIG_LAZY


#: _eigen_step's outcomes: the Delta path (Z += Delta G; ws[0] = Delta), a lazy re-base, or a re-base on every
#: feature still to do (ws[0] = N1, ws[1] = N2: :func:`full_rebase`)
EIG_LAZY, EIG_DELTA, EIG_FULL = 0, 1, 2


@njit(**INLINE)  # (one call site)
def _eigen_tail(F, K, D, c, H, ZG, GG, boff, ints, flt):
    """The end of every eigen step: the drift guard on V's active rows, the buffer cleared, ``H`` diagonal."""
    m = F.shape[0]
    alpha = flt[0]
    _orthonormalise_active(F, K, ints[I_NA])
    for q in range(m):
        c[q] = 0.0
        for j in range(m):
            ZG[q, j] = 0.0
            GG[q, j] = 0.0
    for q in range(m + 1):
        boff[q] = 0
    ints[I_TAU] = 0
    ints[I_NBUF] = 0
    for i in range(2 * m):
        for j in range(2 * m):
            H[i, j] = 0.0
    if alpha > 0.0:  # (alpha = 0: the pseudo-inverse is computed each example, H unused)
        for i in range(m):
            H[i, i] = 1.0 / (alpha + D[i] * D[i])
            H[m + i, m + i] = 1.0 / alpha


@njit(**KERNEL)
def full_rebase(keys, tab, ints, F, K, b, c, flt, boff, bslot, bval, hP, hc, ws):
    """The eigen step's re-base on every feature (fd_run's status ST_REBASE; rare: the first epochs, a sketch
    of rank < m, and once (features seen) / FULL_REBASE_RATIO examples since the last one), with
    ``N1 = ws[0]``, ``N2 = ws[1]``: every feature through the history, ``w_bar += Z^T b``, ``Z <- N1 Z``, then
    ``w_bar += G^T c``, ``Z += N2 G`` on the buffer, ``F = I``, ``K`` recomputed from the table (NOTES_FD item 5).
    fd_run then resumes the example (the eigen step's tail, the Newton step)."""
    m = F.shape[0]
    N1 = ws[0]
    N2 = ws[1]
    tau = ints[I_TAU]
    # the history and the re-base composed (as _rebase_all); the buffer's features re-based first (the buffer's
    # terms below are added to the re-based rows) and marked (stamp -1), the others in the pass that sums K
    T, uu = _compose_history(hP, hc, ints[I_HIST], N1, b)
    zt = np.empty(m)
    for q in range(tau):
        for e in range(boff[q], boff[q + 1]):
            sl = bslot[e]
            if tab[sl, C_T] >= 0.0:
                _rebase_one(tab, sl, T, uu, zt)
                tab[sl, C_T] = -1.0
    ints[I_HIST] = 0
    ints[I_COMPACT] += 1
    flt[2] = ints[I_T]
    for r in range(m):
        b[r] = 0.0
    for q in range(tau):  # w_bar += G^T c
        for e in range(boff[q], boff[q + 1]):
            tab[bslot[e], C_U] += c[q] * bval[e]
    for q in range(tau):  # Z += N2 G
        for e in range(boff[q], boff[q + 1]):
            sl = bslot[e]
            v = bval[e]
            for t in range(m):
                tab[sl, C_Z + t] += N2[t, q] * v
    _rebase_recompute_k(keys, tab, K, T, uu, zt)
    for i in range(m):
        for j in range(m):
            F[i, j] = 1.0 if i == j else 0.0
    ints[I_REBASE] += 1


@njit(**KERNEL)
def compact_history(keys, tab, ints, hP, hc):
    """The re-base history is full (fd_run's status ST_COMPACT, before a learned example): every feature is
    brought up to date and the history starts again."""
    m = hP.shape[1]
    eye = np.zeros((m, m))
    for i in range(m):
        eye[i, i] = 1.0
    _rebase_all(keys, tab, ints, hP, hc, eye, np.zeros(m))


#: resume codes of fd_run's first example (after Python ran a rare kernel on its status)
RESUME_NONE, RESUME_PROJECTED, RESUME_STEP = 0, 1, 2
#: fd_run's statuses: done, grow the table / buffer / history, compact the history, a full re-base, alpha = 0's
#: projection, alpha = 0's Newton step (the pseudo-inverse kernel :func:`pinv_apply`)
ST_DONE, ST_GROW, ST_COMPACT, ST_REBASE, ST_PINV_PROJECT, ST_PINV_STEP = 0, 1, 2, 3, 4, 5
#: fd_run's carry between a status and the resumed example (``rs``): p0, ptau, p, y, h eta, gl, ||x||^2
RS_P0, RS_PTAU, RS_P, RS_Y, RS_HETA, RS_GL, RS_XX = 0, 1, 2, 3, 4, 5, 6
N_RS = 7


@njit(**INLINE)
def _carry_step(rs, p, y, heta, gl, xx):
    """Keep the step's scalars in ``rs`` for the example that resumes after a rare path."""
    rs[RS_P] = p
    rs[RS_Y] = y
    rs[RS_HETA] = heta
    rs[RS_GL] = gl
    rs[RS_XX] = xx


@njit(**KERNEL)
def pinv_apply(F, D, ZG, GG, ints, sx, rs, b, c, tab, slot_buf, xt, s, loss_code, invariant, project):
    """RFD with alpha = 0 (fd_run's statuses ST_PINV_PROJECT / ST_PINV_STEP; only until the sketch's first shrink):
    ``project``: SON Lemma 2's projection (:func:`_pinv`, ``PINV_PROJECT``, w_bar -= gam x on the example's slots);
    else the Newton step ``u -= A^+ g`` with the importance-invariant coefficient from ``x^T A^+ x``."""
    m = D.shape[0]
    h = np.zeros(2 * m)
    tau = ints[I_TAU]
    xx = rs[RS_XX]
    if project:
        gam = _pinv(F, D, ZG, GG, tau, sx, np.int64(PINV_PROJECT), xx, rs[RS_PTAU], b, c, h)
        if gam != 0.0:
            for k in range(s):
                tab[slot_buf[k], C_U] -= gam * xt[k]
        return
    gl = rs[RS_GL]
    if invariant:
        qa = _pinv(F, D, ZG, GG, tau, sx, np.int64(PINV_QUAD), xx, 0.0, b, c, h)
        gl = _invariant_coef(loss_code, rs[RS_P], rs[RS_Y], rs[RS_HETA], qa, gl)
    if gl != 0.0:
        _pinv(F, D, ZG, GG, tau, sx, np.int64(PINV_STEP), xx, gl, b, c, h)


@njit(**KERNEL)
def fd_run(offsets, indices, values, labels, weights, start, resume, learn, state, hyper, slot_buf, xt, sx, rs, ws,
           pred_out, loss_out):
    """Sparse FD-SON (SON Alg. 1 with App. F's epoch sketch) over examples ``start..n-1``: predict
    (projected, Alg. 1 line 4-5), record, then, if ``learn``, the label is not NaN and the weight
    is > 0, insert g^ into the sketch (Alg. 6; the eigen step when the buffer is full) and step
    ``u = w - A^-1 g`` with the new sketch (line 8).

    Returns ``(next, learned, status)``. ``ST_DONE``: all done (next = n). Otherwise the caller does what the
    status says at example ``next`` and calls again: ``ST_GROW``, the table, the buffer or the history must grow
    (again from ``next``); ``ST_COMPACT``, the history is full (:func:`compact_history`, again from ``next``);
    ``ST_REBASE``, the eigen step needs a re-base on every feature (:func:`full_rebase`, then ``next`` resumed
    with ``RESUME_STEP``); ``ST_PINV_PROJECT`` / ``ST_PINV_STEP``, RFD with alpha = 0 (:func:`pinv_apply`, then
    ``next`` resumed with ``RESUME_PROJECTED`` / from ``next + 1``). The rare paths live in those kernels so
    that this one compiles less. ``xt``, ``sx`` (the example's x~ and S x), ``rs`` (``N_RS``) and ``ws``
    (2 x m x m) carry what they need; ``slot_buf`` the example's slots.
    """
    (keys, tab, shift, ints, F, K, D, b, c, H, ZG, GG, flt, boff, bslot, bkey, bval, hP, hc) = state
    mask, loss_code, robust, sigma_eta, proj_c, max_cond, invariant, clip, precond = hyper
    clip = clip and loss_code == SQUARED
    n = labels.shape[0]
    m = D.shape[0]
    cw = C_Z + m  # pre-scaling: the first of the N_PRE columns after Z's
    cap = keys.shape[0]
    capmask = cap - 1
    bcap = bval.shape[0]
    z = np.zeros(m)
    gx = np.zeros(m)
    qv = np.zeros(2 * m)
    h = np.zeros(2 * m)
    hq = np.zeros(2 * m)
    eh = np.zeros(2 * m)
    tmp = np.zeros(m)
    fz = np.zeros(m)
    wz = np.empty(2 * m + 1)
    cu = np.empty((slot_buf.shape[0], m + 1))  # predict only: a stale feature's caught-up [w_bar, Z column]
    stale = np.zeros(slot_buf.shape[0], np.bool_)
    # xt: the example as the sketch sees it: x, or x~ = f x with the pre-scaling
    hcap = _hist_cap(hP)
    learned = 0
    for i in range(start, n):
        a = offsets[i]
        s = offsets[i + 1] - a
        lab = labels[i]
        imp = weights[i]
        do_learn = learn and (not math.isnan(lab)) and imp > 0.0
        resumed = i == start and resume != RESUME_NONE
        projected = resumed and resume == RESUME_PROJECTED
        if not resumed and do_learn:
            if (ints[I_OCC] + s > (cap >> 1)
                    or (m > 0 and (ints[I_NBUF] + s > bcap or ints[I_OCC] > hcap * m * FULL_REBASE_RATIO))):
                return i, learned, ST_GROW
            if m > 0 and ints[I_HIST] == hcap:
                return i, learned, ST_COMPACT
        if resumed and resume == RESUME_STEP:  # after full_rebase: the eigen step's tail and the Newton step
            p = rs[RS_P]
            y = rs[RS_Y]
            heta = rs[RS_HETA]
            gl = rs[RS_GL]
            xx = rs[RS_XX]
            tau = m - 1
            alpha = flt[0]
            gs = 0.0
            outcome = EIG_FULL
        else:
            outcome = -1
            R = ints[I_HIST]
            _find_slots(keys, tab, indices, a, s, mask, shift, slot_buf)
            for k in range(s):
                if k + AHEAD < s and slot_buf[k + AHEAD] >= 0:
                    _prefetch_row(tab, slot_buf[k + AHEAD])
                key = np.int64(indices[a + k]) & mask
                r = slot_buf[k]
                if r < 0:  # (again: this example may have stored it since)
                    r = _find(keys, key, shift, capmask)
                stale[k] = False
                if r < 0:
                    if do_learn:
                        r = -1 - r
                        keys[r] = key
                        ints[I_OCC] += 1
                        tab[r, C_T] = R
                    else:
                        r = -1
                elif do_learn:
                    _catch_up_inplace(tab, r, hP, hc, R, wz)
                elif tab[r, C_T] != R:
                    _catch_up(tab, r, hP, hc, R, wz)
                    stale[k] = True
                    for q in range(m + 1):
                        cu[k, q] = wz[q]
                slot_buf[k] = r
            if precond and do_learn:  # the scales grow before the prediction (flushing w~ first)
                _buffer_share(tab, slot_buf, s, boff, bslot, bval, c, ints[I_TAU], cw + P_BUF)
                _grow_scale(tab, slot_buf, values, a, s, b, m)
            # scatter x (x~ = f x with the pre-scaling; duplicates summed), w_bar.x, z = Z x, ||x||^2; with the
            # pre-scaling the prediction is sum_j c_j x_j + (w~_j - snap_j) x~_j
            for k in range(s):
                if slot_buf[k] >= 0:
                    tab[slot_buf[k], C_S] = 0.0
            wx = 0.0
            xx = 0.0
            for r in range(m):
                z[r] = 0.0
            for k in range(s):
                sl = slot_buf[k]
                v = values[a + k]
                if precond:
                    if sl >= 0:
                        xk = v * tab[sl, cw + P_F]
                        wx += tab[sl, cw + P_C] * v - tab[sl, cw + P_SNAP] * xk
                    else:
                        xk = 0.0  # unseen: f = 0
                    v = xk
                xt[k] = v
                if sl >= 0 and stale[k]:
                    tab[sl, C_S] += v
                    wx += cu[k, 0] * v
                    for r in range(m):
                        z[r] += cu[k, 1 + r] * v
                elif sl >= 0:
                    tab[sl, C_S] += v
                    wx += tab[sl, C_U] * v
                    for r in range(m):
                        z[r] += tab[sl, C_Z + r] * v
                else:
                    xx += v * v  # unseen (predict only): repeated unseen indices are rare, counted apart
            for k in range(s):
                sl = slot_buf[k]
                if sl >= 0:
                    xx += xt[k] * tab[sl, C_S]
            tau = ints[I_TAU]
            # learning with the pre-scaling, G x~ is needed with the frames of after the update (below): the
            # prediction's buffer share c . G x~ is then taken from the features' shares (G^T c)_j that
            # _buffer_share left in the table, O(s), and G x~ itself only if the step needs it as it is
            # (the projection, or no update of the frames: gx_pending; x~ stays scattered in C_S until then)
            gx_pending = precond and do_learn
            p0 = wx
            if gx_pending:
                cg = 0.0
                for k in range(s):
                    cg += xt[k] * tab[slot_buf[k], cw + P_BUF]
                for r in range(m):
                    p0 += b[r] * z[r]
                p0 += cg
            else:
                _buffer_dots(tab, boff, bslot, bval, tau, m, gx)
                for k in range(s):
                    if slot_buf[k] >= 0:
                        tab[slot_buf[k], C_S] = 0.0
                for r in range(m):
                    p0 += b[r] * z[r] + c[r] * gx[r]
            if projected:  # (pinv_apply projected u: the prediction is the one before)
                p0 = rs[RS_P0]
            # Alg. 1 line 4 (SON Lemma 1): w = u - tau A^-1 x / (x^T A^-1 x), |w^T x| = C
            ptau = _proj_excess(p0, proj_c)
            if gx_pending and ptau != 0.0:  # the projection's S x
                _buffer_dots(tab, boff, bslot, bval, tau, m, gx)
                for k in range(s):
                    tab[slot_buf[k], C_S] = 0.0
                gx_pending = False
            p = p0 - ptau
            # --no_clip off (squared loss): the prediction reported and scored is clipped to the range of the
            # labels learned so far (flt[3:5], from [0, 0]), as VW's squared loss
            pc = min(max(p, flt[3]), flt[4]) if clip else p
            pred_out[i] = pc
            if math.isnan(lab):
                loss_out[i] = math.nan
                continue
            y = target(loss_code, lab)
            loss_out[i] = loss_value(loss_code, pc, y)
            if not do_learn:
                continue
            alpha = flt[0]
            if ptau != 0.0 and alpha == 0.0:  # RFD with alpha = 0: the H semi-norm projection (pinv_apply)
                if not projected:
                    _sx(F, D, z, gx, tau, m, sx)
                    rs[RS_P0] = p0
                    rs[RS_PTAU] = ptau
                    rs[RS_XX] = xx
                    return i, learned, ST_PINV_PROJECT
            elif ptau != 0.0:
                _sx(F, D, z, gx, tau, m, sx)
                qn = (xx - _quad(H, sx, h, 2 * m)) / alpha
                if qn > 0.0:
                    gam = ptau / qn / alpha
                    for k in range(s):
                        tab[slot_buf[k], C_U] -= gam * xt[k]
                    _apply_ainv(H, sx, m, gam, F, D, b, c, h, tmp)
            learned += 1
            # Alg. 1 line 6-7: g = h l'(p) x, g^ = sqrt(sigma_eta h) l'(p) x into the buffer; with the clip the
            # derivative is taken at p clipped to the label range including this label (|l'| <= 2 (max - min))
            if clip:
                flt[3] = min(flt[3], y)
                flt[4] = max(flt[4], y)
                p = min(max(p, flt[3]), flt[4])
            dl = loss_deriv(loss_code, p, y)
            eta = 1.0  # the pre-scaling's global normaliser
            if precond and dl != 0.0:
                # VW's order: flush w~, G_j += h (l' x_j)^2 and the frame follows, then the update uses x~ = f x
                # with the new f; the step is multiplied by sqrt(sum h / sum h ||x / s||^2) over the examples with
                # a non-zero gradient, this one included (VW's gd.cc)
                if ptau != 0.0:  # the projection moved b and c
                    _buffer_share(tab, slot_buf, s, boff, bslot, bval, c, tau, cw + P_BUF)
                for k in range(s):
                    _flush(tab, slot_buf[k], b, m)
                nx = _accumulate_g(tab, slot_buf, values, a, s, imp * dl * dl, m)
                flt[5] += imp * nx
                flt[6] += imp
                if flt[5] > 0.0:
                    eta = math.sqrt(flt[6] / flt[5])
                for k in range(s):
                    tab[slot_buf[k], C_S] = 0.0
                for r in range(m):
                    z[r] = 0.0
                for k in range(s):
                    sl = slot_buf[k]
                    xk = values[a + k] * tab[sl, cw + P_F]
                    xt[k] = xk
                    tab[sl, C_S] += xk
                    for r in range(m):
                        z[r] += tab[sl, C_Z + r] * xk
                xx = 0.0
                for k in range(s):
                    xx += xt[k] * tab[slot_buf[k], C_S]
                _buffer_dots(tab, boff, bslot, bval, tau, m, gx)
                for k in range(s):
                    tab[slot_buf[k], C_S] = 0.0
            elif gx_pending:
                _buffer_dots(tab, boff, bslot, bval, tau, m, gx)
                for k in range(s):
                    tab[slot_buf[k], C_S] = 0.0
            heta = imp * eta
            gl = heta * dl
            gs = dl * math.sqrt(sigma_eta * imp)
            ints[I_T] += 1
            if m == 0:  # no sketch: A = alpha I, online gradient descent with step 1/alpha (SON's m = 0)
                if invariant and gl != 0.0:
                    gl = _invariant_coef(loss_code, p, y, heta, xx / flt[0], gl)
                coef = gl / flt[0]
                if coef != 0.0:
                    for k in range(s):
                        tab[slot_buf[k], C_U] -= coef * xt[k]
                continue
            e0 = ints[I_NBUF]
            for k in range(s):
                bslot[e0 + k] = slot_buf[k]
                bkey[e0 + k] = keys[slot_buf[k]]
                bval[e0 + k] = gs * xt[k]
            ints[I_NBUF] = e0 + s
            boff[tau + 1] = e0 + s
            for q in range(m):
                ZG[q, tau] = gs * z[q]
            for q in range(tau):
                GG[q, tau] = gs * gx[q]
                GG[tau, q] = gs * gx[q]
            GG[tau, tau] = gs * gs * xx
            gx[tau] = gs * xx
            ints[I_TAU] = tau + 1
        if outcome == EIG_FULL or tau + 1 == m:
            if outcome != EIG_FULL:
                outcome = _eigen_step(keys, tab, ints, F, K, D, b, c, ZG, GG, boff, bslot, bval, flt, robust,
                                      max_cond, ws, hP, hc)
                if outcome == EIG_FULL:  # full_rebase, then this example resumes here
                    _carry_step(rs, p, y, heta, gl, xx)
                    return i, learned, ST_REBASE
            _eigen_tail(F, K, D, c, H, ZG, GG, boff, ints, flt)
            if outcome == EIG_DELTA:  # Z x after Z += Delta G: z + Delta (G x)
                for r in range(m):
                    acc = 0.0
                    for q in range(m):
                        acc += ws[0, r, q] * gx[q]
                    fz[r] = acc
                for r in range(m):
                    z[r] += fz[r]
            else:
                for r in range(m):
                    z[r] = 0.0
                for k in range(s):
                    sl = slot_buf[k]
                    for r in range(m):
                        z[r] += tab[sl, C_Z + r] * xt[k]
            for r in range(m):
                gx[r] = 0.0
            _sx(F, D, z, gx, np.int64(0), m, sx)
            nact = m  # H's rows in use (_quad): the buffer is empty
        elif alpha > 0.0:
            # Alg. 6 lines 2-3 with q = S g^ - (g^T g^ / 2) e_(m + tau)
            _sx(F, D, z, gx, tau + 1, m, sx)
            nact = m + tau + 1
            for r in range(2 * m):
                qv[r] = gs * sx[r]
            qv[m + tau] -= 0.5 * gs * gs * xx
            _sherman_morrison(H, qv, m + tau, hq, eh, nact)
        else:
            _sx(F, D, z, gx, tau + 1, m, sx)
            nact = 2 * m
        alpha = flt[0]
        if alpha == 0.0:
            # RFD with alpha = 0 (NOTES_FD item 7): u = w - A^+ g, A = S^T S, A^+ = S^T (S S^T)^+2 S (pinv_apply)
            if gl != 0.0:
                _carry_step(rs, p, y, heta, gl, xx)
                return i, learned, ST_PINV_STEP
            continue
        if invariant and gl != 0.0:  # q = x^T A^-1 x = (||x||^2 - Sx^T H Sx) / alpha, new sketch (h = H Sx)
            gl = _invariant_coef(loss_code, p, y, heta, (xx - _quad(H, sx, h, nact)) / alpha, gl)
        elif gl != 0.0:
            _quad(H, sx, h, nact)
        # Alg. 1 line 8: u = w - A^-1 g, A^-1 g = (g - S^T H S g) / alpha
        coef = gl / alpha
        if coef != 0.0:
            for k in range(s):
                tab[slot_buf[k], C_U] -= coef * xt[k]
            _ainv_tail(h, m, coef, F, D, b, c, tmp)
    return n, learned, ST_DONE


@njit(**KERNEL)
def eigh(A):
    """:func:`_eigh` callable from Python (tests)."""
    return _eigh(A, np.bool_(True))


@njit(**KERNEL)
def key_order(keys):
    """:func:`_key_order` callable from Python (tests)."""
    return _key_order(keys)
