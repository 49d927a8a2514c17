"""Compiled kernels of :mod:`streamlearn.algos.sketched_adagrad` (sparse S-ADA, Fast S-ADA, FTSL,
FTFSL; progressive validation inside).

Yang, Chen, Wan & Zhang (2025), "Dimension-Free Adaptive Subgradient Methods with Frequent
Directions" (``../shared/papers/ftsl_frequent_directions_adagrad_yang2025.txt``): FD (Alg. 1) and
fast FD (Alg. 3 lines 5-11, 14-16) sketches of G_t = sum g g^T, the preconditioner
G~_t = S_t + (rho_{1:t} + delta) I applied as App. A.1's low-rank inverse root, in the mirror
(S-ADA) or primal-dual (FTSL Alg. 2 line 9 / FTFSL Alg. 3 line 13, Eq. 2) step; the corrections
of ``NOTES_ADA.md`` as listed in :mod:`streamlearn.algos.sketched_adagrad`.

Representation (SON App. F's construction, as FD-SON's kernels): the sketch's orthonormal basis
is ``V = C [Z; G]`` (r rows): ``Z`` holds k = tau - 1 dense-ish rows (one column per feature seen,
in the table), ``G`` a buffer of the sparse gradients that brought a new direction since the last
fold (rows of ``gbuf``, one per buffered feature), ``C`` a small (R, k + nbmax) matrix. The sketch is
``V^T M V`` with ``M`` (r x r) kept with its eigen-pairs ``(U, lam)``. A new direction
(g - V^T V g) / ||.|| is one new row of C on a new buffer row g: O(r s + r^2). FD shrinks every
round the basis reaches tau rows, fast FD when it reaches 2 tau: the basis is rotated into M's
eigenvectors (C <- U^T C) and cut to k rows, and the buffer is folded into Z: with
``C = [P1 P2]``, ``Z += P1^-1 P2 G`` on the buffer's features and ``C = [P1 0]``, O(k nb s).
cond(P1) grows with the folds; past ``max_cond`` the representation is re-based (``Z <- C [Z; G]``,
``C = [I 0]``). A re-base is lazy, as FD-SON's and FTSL-Shampoo's: the buffer's features are re-based
at once, every other feature takes an affine map of its ``[w_bar, Z column]`` that is recorded in a
history of suffix products and applied when the feature is next read (O(k^2)); once the history
holds max(16, sqrt(n / 5)) re-bases every feature is brought up to date (O(k^2 n) for n features
seen).

Weights. Mirror forms: ``w = w_bar + Z^T b + G^T cb`` (the step's V^T part lands in b and cb; the
g / h_perp part in w_bar on g's features; a fold moves ``G^T (cb - A^T b)`` into w_bar).
Primal-dual forms: the weights are never stored: ``w = -eta (gbar / h_perp + V^T e)`` with the
summed gradient gbar per feature, ``z = V gbar`` kept incrementally (rotated with V) and
``e = U diag(1/h - 1/h_perp) U^T z``, so a prediction is O(r s + r^2).

Per-feature state lives in an open-addressing hash table keyed by the masked feature index
(the pattern of :mod:`streamlearn.algos._fd_son_kernels`, whose ``_find``, ``rehash``, ``_eigh``
and ``_solve`` this module uses): ``keys[slot]`` (-1 = empty), ``tab[slot] = [w_bar, gbar,
scratch x, mark, buffer position + 1 (0: not in the buffer), re-base stamp, Z column (k)]``; the
buffer's G columns are rows of ``gbuf``, one per buffered feature (most features are never in the
buffer, so the table's rows hold only tau + 5 floats).
"""
import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ..kernels._jit import INNER, KERNEL
from ._fd_son_kernels import _eigh, _solve
from ._rebase_history_kernels import _hist_push
from ._feature_table_kernels import EMPTY, _find
from ._loss_kernels import loss_deriv, loss_value, target

__all__ = ["SadaState", "SadaHyper", "sada_run", "rebase_all", "relist_buffer", "table_rows", "rank1_eig", "C_W", "C_GB", "C_Z", "N_LEAD", "N_INTS"]

C_W = 0  # w_bar (mirror forms)
C_GB = 1  # gbar, the summed gradient (primal-dual forms)
C_X = 2  # scratch: the example's value of the feature (duplicates summed)
C_MK = 3  # mark: the example counter of the last example that touched the feature
C_IB = 4  # e + 1 when the feature is the buffer's e-th (its G column is gbuf[e]), else 0
C_ST = 5  # stamp: the re-base count when the feature's [w_bar, Z column] was last brought up to date
C_Z = 6  # first column of Z^T, then the buffer's columns
N_LEAD = 6
SHRINK_TOL = 1e-16  # an FD shrink lambda_tau <= SHRINK_TOL lambda_1 is round-off: 0 (NOTES_ADA)
PINV_TOL = 1e-12  # rho + delta = 0: eigenvalues <= PINV_TOL lambda_1 count as 0 (pseudo-inverse)
EPS = 2.220446049250313e-16  # double precision's unit round-off (the rank-one eigen update's tolerances)
COND_RESOLVED = 1e7  # _sa_cond: a condition number above this is not resolved by P^T P's eigenvalues in double
#                       precision (their absolute error ~ n eps lambda_max: a cond of 1e9 reads as ~4e8, an exactly
#                       singular P as finite), so it counts as inf: --max_cond above it acts as it
RES_TOL = 1e-12  # a residual ||g - V V^T g||^2 <= RES_TOL ||g||^2 is no new direction (Alg. 3 line 6)

# ints
I_T, I_OCC, I_R, I_NB, I_NBS, I_NZ, I_REB, I_SHR, I_FOLD, I_DEFER, I_HBASE, I_FLUSH = range(12)
N_INTS = 12
HIST_MIN = 16  # the re-base history is emptied (every feature brought up to date) once it holds
#                max(HIST_MIN, sqrt(features seen / 5)) re-bases, or is full
# flt
F_RHO, F_IHP = 0, 1


class SadaState(NamedTuple):
    """The learner's state: the per-feature table and the sketch's small matrices."""

    keys: np.ndarray  # int64 (cap,): masked feature per slot, -1 = empty
    tab: np.ndarray  # float64 (cap, N_LEAD + k)
    shift: int  # 64 - log2(cap)
    ints: np.ndarray  # int64 (N_INTS,): examples learned, occupied, r (basis rows), nb (buffer rows), buffer slots,
    #                   Z rows in use (0 or k), re-bases, shrinks, folds, fast FD shrink deferred (0/1),
    #                   the re-base count at the last flush of the history (hbase), flushes
    flt: np.ndarray  # float64 (2,): rho_{1:t}, 1/h_perp of the last step (primal-dual predictions)
    C: np.ndarray  # (R, k + nbmax): V = C [Z; G]
    M: np.ndarray  # (R, R): the sketch in V's coordinates
    U: np.ndarray  # (R, R): M's eigenvectors (columns, descending eigenvalues) on its first r rows
    lam: np.ndarray  # (R,): M's eigenvalues, descending
    b: np.ndarray  # (k,): mirror weights' Z coefficients
    cb: np.ndarray  # (nbmax,): mirror weights' buffer coefficients
    z: np.ndarray  # (R,): V gbar
    e: np.ndarray  # (R,): U diag(1/h - 1/h_perp) U^T z of the last step (primal-dual predictions)
    bslot: np.ndarray  # int64 (bcap,): the buffered features' table slots, in buffer order
    ctr: np.ndarray  # int64 (1,): examples read (the marks of the scratch column; not saved)
    hist: np.ndarray  # float64 (hcap, k + 1, k + 1): S[g] takes [w_bar, Z column] of a feature stamped
    #                   with re-base hbase + g to the current representation (suffix products)
    gbuf: np.ndarray  # float64 (bcap, nbmax): row e = the G column of the feature in slot bslot[e]


class SadaHyper(NamedTuple):
    mask: int
    loss_code: int
    tau: int
    fast: bool  # fast FD (Alg. 3): 2 tau rows, one shrink per tau + 1 new directions
    dual: bool  # primal-dual step (FTSL / FTFSL) instead of mirror descent (S-ADA)
    eta: float
    delta: float  # inside the root: G~ = S + (rho + delta) I
    max_cond: float
    l2: float  # primal-dual forms: the l2 regulariser's t l2/2 ||x||^2 (regularised dual averaging)


@njit(**INNER)
def _secular_root(dn, z2, n, i, ztot):
    """Root i (ascending) of the secular equation 1 + sum_j z2[j] / (dn[j] - mu) = 0 of
    diag(dn[:n]) + z z^T (dn strictly ascending, z2 = z^2 > 0): mu_i in (dn[i], dn[i + 1]) (the last
    in (dn[n-1], dn[n-1] + ztot)), returned as (origin o, t) with mu_i = dn[o] + t, o the nearer pole,
    so that mu_i - dn[j] = (dn[o] - dn[j]) + t keeps its relative accuracy (Golub & Van Loan Sec.
    8.5.3; each step solves Bunch, Nielsen & Sorensen 1978's model of the two nearest poles, kept
    inside a shrinking bracket; stops when |f| is at the round-off of its terms)."""
    last = i == n - 1
    # the first point: the middle of the interval (the last: of (dn[n-1], dn[n-1] + ztot)), where f
    # says which pole is nearer
    half = 0.5 * ztot if last else 0.5 * (dn[i + 1] - dn[i])
    fm = 1.0
    for j in range(n):
        fm += z2[j] / ((dn[j] - dn[i]) - half)
    if last or fm > 0.0:
        o = i
        lo, hi = 0.0, (ztot if last else half)
        t = half
    else:
        o = i + 1
        lo, hi = -half, 0.0
        t = -half
    org = dn[o]
    di = dn[i] - org
    di1 = (dn[i + 1] - org) if not last else 0.0
    for _ in range(60):
        psi = 0.0
        dpsi = 0.0
        phi = 0.0
        dphi = 0.0
        for j in range(n):
            inv = 1.0 / ((dn[j] - org) - t)
            q = z2[j] * inv
            if j <= i:
                psi += q
                dpsi += q * inv
            else:
                phi += q
                dphi += q * inv
        f = 1.0 + psi + phi
        if abs(f) <= 8.0 * EPS * n * (1.0 + phi - psi):
            break
        if f < 0.0:
            lo = t
        else:
            hi = t
        Di = di - t
        a = dpsi * Di * Di
        A = 1.0 + psi - a / Di
        u = np.nan
        if last:
            if A > 0.0:
                u = di + a / A
        else:
            Di1 = di1 - t
            c = dphi * Di1 * Di1
            A += phi - c / Di1
            P = A * (di + di1) + a + c
            Qc = A * di * di1 + a * di1 + c * di
            if A == 0.0:
                if P != 0.0:
                    u = Qc / P
            else:
                sq = math.sqrt(max(P * P - 4.0 * A * Qc, 0.0))
                den = P + sq if P >= 0.0 else P - sq
                if den != 0.0:
                    u1 = den / (2.0 * A)
                    u2 = 2.0 * Qc / den
                    u = u1 if lo < u1 < hi else u2
        if not (lo < u < hi):
            u = 0.5 * (lo + hi)
        if abs(u - t) <= 2.0 * EPS * max(abs(u), abs(t)):
            t = u
            break
        t = u
    return o, t


@njit(**INNER)
def _argsort_small(x, n, sign):
    """The stable order of ``sign * x[:n]`` ascending, by insertion: O(n^2), as the eigen update
    that calls it; numba's ``np.argsort`` takes about 3 s to compile (its quicksort also uses
    insertion below 16 elements, so the orders agree there). Not Oja-SON's heapsort
    ``_sort_by_key``: eigenvalues tie (a new sketch's are all 0), and a heapsort would reorder ties."""
    order = np.empty(n, np.int64)
    for i in range(n):
        v = sign * x[i]
        j = i
        while j > 0 and sign * x[order[j - 1]] > v:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
    return order


@njit(**INNER)
def _rank1_eig(lam, t, m, mu, W):
    """Eigen-pairs of diag(lam[:m]) + t t^T (lam[:m] descending): ``mu[:m]`` descending and the
    eigenvectors as the columns of ``W[:m, :m]`` (Golub & Van Loan Sec. 8.5.3, LAPACK dlaed2-4's
    divide-and-conquer update): deflation of the components with |t_i| ||t|| <= 8 eps max(lam_1,
    ||t||^2) and of (nearly) equal eigenvalues by a Givens rotation, the secular equation's roots
    (:func:`_secular_root`) and Gu & Eisenstat's recomputed t, which keeps the eigenvectors
    orthogonal. O(m^2) (plus O(m^3) only when a rotation deflated a pair)."""
    order = _argsort_small(lam, m, 1.0)  # ascending
    d = np.empty(m)
    z = np.empty(m)
    for i in range(m):
        d[i] = lam[order[i]]
        z[i] = t[order[i]]
    nrm2 = 0.0
    dmax = 0.0
    for i in range(m):
        nrm2 += z[i] * z[i]
        dmax = max(dmax, abs(d[i]))
    Ws = np.zeros((m, m))
    ev = np.empty(m)
    for i in range(m):
        ev[i] = d[i]
        Ws[i, i] = 1.0
    if nrm2 > 0.0:
        tol = 8.0 * EPS * max(dmax, nrm2)
        zn = math.sqrt(nrm2)
        defl = np.zeros(m, np.bool_)
        for i in range(m):
            if abs(z[i]) * zn <= tol:
                defl[i] = True
                z[i] = 0.0
        Qt = np.zeros((m, m))
        for i in range(m):
            Qt[i, i] = 1.0
        nrot = 0
        prev = -1
        for j in range(m):
            if defl[j]:
                continue
            if prev >= 0:
                h = math.hypot(z[prev], z[j])
                c = z[prev] / h
                s = z[j] / h
                if abs((d[j] - d[prev]) * c * s) <= tol:
                    # rotate (prev, j) so that z'_prev = 0, z'_j = h: D' = Q D Q^T drops c s (d_p - d_j)
                    dp, dj = d[prev], d[j]
                    d[prev] = s * s * dp + c * c * dj
                    d[j] = c * c * dp + s * s * dj
                    z[prev] = 0.0
                    z[j] = h
                    defl[prev] = True
                    for r in range(m):
                        a_, b_ = Qt[r, prev], Qt[r, j]
                        Qt[r, prev] = a_ * s - b_ * c
                        Qt[r, j] = a_ * c + b_ * s
                    nrot += 1
            prev = j
        # the non-deflated problem, ascending
        n = 0
        idx = np.empty(m, np.int64)
        for i in range(m):
            if not defl[i]:
                idx[n] = i
                n += 1
        dn = np.empty(n)
        z2 = np.empty(n)
        ztot = 0.0
        for j in range(n):
            dn[j] = d[idx[j]]
            z2[j] = z[idx[j]] * z[idx[j]]
            ztot += z2[j]
        orig = np.empty(n, np.int64)
        tt = np.empty(n)
        for i in range(n):
            orig[i], tt[i] = _secular_root(dn, z2, n, i, ztot)
        Dl = np.empty((n, n))  # mu_i - dn[j]
        for i in range(n):
            for j in range(n):
                Dl[i, j] = (dn[orig[i]] - dn[j]) + tt[i]
        zh = np.empty(n)
        for j in range(n):
            p = Dl[j, j]
            for i in range(n):
                if i != j:
                    p *= Dl[i, j] / (dn[i] - dn[j])
            zh[j] = math.copysign(math.sqrt(max(p, 0.0)), z[idx[j]])
        for i in range(n):
            col = idx[i]
            ev[col] = dn[orig[i]] + tt[i]
            nv = 0.0
            for j in range(n):
                v = -zh[j] / Dl[i, j]
                nv += v * v
                Ws[idx[j], col] = v
            nv = math.sqrt(nv)
            for j in range(n):
                Ws[idx[j], col] /= nv
        for j in range(m):
            if not defl[j]:
                continue
            ev[j] = d[j]
        if nrot > 0:
            T = np.empty((m, m))
            for r in range(m):
                for q in range(m):
                    acc = 0.0
                    for p in range(m):
                        acc += Qt[r, p] * Ws[p, q]
                    T[r, q] = acc
            Ws = T
    # back to lam's order, eigenvalues descending
    srt = _argsort_small(ev, m, -1.0)  # descending
    for c in range(m):
        mu[c] = ev[srt[c]]
        for i in range(m):
            W[order[i], c] = Ws[i, srt[c]]


@njit(**INNER)
def _sa_eig_update(U, lam, cc, r, rr, t, mu):
    """Alg. 1 line 2 / Alg. 3 line 11: the eigen-pairs of M + cc cc^T from M's (U, lam) on its first r
    rows (M extended by zero rows to rr = r or r + 1): with t = U^T cc, M + cc cc^T =
    U (diag(lam) + t t^T) U^T, so U <- U W and lam <- mu for the eigen-pairs (mu, W) of the rank-one
    update (:func:`_rank1_eig`): O(rr^2) for the update and O(rr^3) with a small constant for U W,
    where a fresh eigen-decomposition of M costs several times that (Householder, QL)."""
    for ii in range(r, rr):
        lam[ii] = 0.0
        for jj in range(rr):
            U[ii, jj] = 0.0
            U[jj, ii] = 0.0
        U[ii, ii] = 1.0
    for jj in range(rr):
        acc = 0.0
        for ii in range(rr):
            acc += U[ii, jj] * cc[ii]
        t[jj] = acc
    W = np.empty((rr, rr))
    _rank1_eig(lam, t, rr, mu, W)
    row = np.empty(rr)
    for ii in range(rr):
        # row ii of U W: the inner loop runs over W's contiguous row, rr independent sums (each in
        # q order, as a dot product would take it)
        for jj in range(rr):
            row[jj] = 0.0
        for q in range(rr):
            u = U[ii, q]
            for jj in range(rr):
                row[jj] += u * W[q, jj]
        for jj in range(rr):
            U[ii, jj] = row[jj]
    for jj in range(rr):
        lam[jj] = mu[jj]


@njit(**INNER)
def _sa_coefs(lam, r, rho, delta, coef, c=0.0):
    """App. A.1: G~^-1/2 = h_perp^-1 I + U diag(h^-1 - h_perp^-1) U^T, h = sqrt(lam + rho + delta),
    h_perp = sqrt(rho + delta); returns 1/h_perp (0 for the pseudo-inverse when rho + delta = 0:
    then directions with lam <= PINV_TOL lam_1 get no step). ``c`` > 0 (the l2 term of the
    primal-dual step, eta t l2): (G~^1/2 + c I)^-1 in the same form, h + c and h_perp + c in place of
    h and h_perp (c = 0: the same numbers bit for bit)."""
    hp2 = rho + delta
    top = lam[0] if r > 0 else 0.0
    if hp2 > 0.0 or c > 0.0:
        ihp = 1.0 / (math.sqrt(max(hp2, 0.0)) + c)
        for i in range(r):
            coef[i] = 1.0 / (math.sqrt(max(lam[i], 0.0) + hp2) + c) - ihp
        return ihp
    for i in range(r):
        coef[i] = 1.0 / math.sqrt(lam[i]) if (top > 0.0 and lam[i] > PINV_TOL * top) else 0.0
    return 0.0


@njit(**INNER)
def _sa_rotate(C, M, U, lam, z, r, keep):
    """Rotate the basis into M's eigenvectors and keep the first ``keep`` rows: C <- (U^T C)[:keep],
    z <- (U^T z)[:keep], M <- diag(lam[:keep]), U <- I."""
    nc = C.shape[1]
    Cn = np.zeros((keep, nc))
    zn = np.zeros(keep)
    for j in range(keep):
        for i in range(r):
            u = U[i, j]
            if u != 0.0:
                zn[j] += u * z[i]
                for q in range(nc):
                    Cn[j, q] += u * C[i, q]
    R = C.shape[0]
    for i in range(R):
        for q in range(nc):
            C[i, q] = Cn[i, q] if i < keep else 0.0
        z[i] = zn[i] if i < keep else 0.0
        for j in range(R):
            M[i, j] = 0.0
            U[i, j] = 1.0 if i == j else 0.0
        if i < keep:
            M[i, i] = lam[i]
        else:
            lam[i] = 0.0


@njit(**INNER)
def _sa_clear_buffer(tab, ints, C, cb, bslot, gbuf, k, nbmax, rows=True):
    """Empty the buffer (``rows``: also its features' columns and flags, unless the caller did)."""
    if rows:
        for e in range(ints[I_NBS]):
            tab[bslot[e], C_IB] = 0.0
            for q in range(ints[I_NB]):  # the columns past nb are 0
                gbuf[e, q] = 0.0
    ints[I_NBS] = 0
    ints[I_NB] = 0
    for q in range(nbmax):
        cb[q] = 0.0
    for i in range(C.shape[0]):
        for q in range(nbmax):
            C[i, k + q] = 0.0


@njit(**INNER)
def _sa_cond(P):
    """The 2-norm condition number of the square P (inf if singular, or past COND_RESOLVED: from P^T P's
    eigenvalues a larger one cannot be told from a singular P)."""
    n = P.shape[0]
    if n == 0:
        return 1.0
    A = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for q in range(n):
                acc += P[q, i] * P[q, j]
            A[i, j] = acc
    w, _ = _eigh(A, np.bool_(False))  # the eigenvalues only
    if not w[0] * (COND_RESOLVED * COND_RESOLVED) >= w[n - 1]:
        return np.inf
    return math.sqrt(w[n - 1] / w[0])


@njit(**INNER)
def _sa_current(tab, sl, hist, ints, k, out):
    """Feature ``sl``'s ``[w_bar, Z column]`` in the current representation (into ``out``, length
    k + 1): the stored values if its stamp is the current re-base, else the suffix product S[g] of
    the re-bases since its stamp applied to them. Returns True when it was stale."""
    st = np.int64(tab[sl, C_ST])
    if st == ints[I_REB]:
        out[0] = tab[sl, C_W]
        for i in range(k):
            out[1 + i] = tab[sl, C_Z + i]
        return False
    S = hist[st - ints[I_HBASE]]
    # out = S [w_bar; Z column], the k + 1 sums side by side (each in j order): not one dependent
    # chain of additions per row
    w = tab[sl, C_W]
    for i in range(k + 1):
        out[i] = S[i, 0] * w
    for j in range(k):
        c = tab[sl, C_Z + j]
        for i in range(k + 1):
            out[i] += S[i, 1 + j] * c
    return True


@njit(**INNER)
def _sa_bring(tab, sl, hist, ints, k, buf):
    """Bring feature ``sl`` to the current representation in place (values and stamp)."""
    if _sa_current(tab, sl, hist, ints, k, buf):
        tab[sl, C_W] = buf[0]
        for i in range(k):
            tab[sl, C_Z + i] = buf[1 + i]
        tab[sl, C_ST] = ints[I_REB]


@njit(**INNER)
def _sa_flush(keys, tab, ints, hist, k):
    """Every stored feature brought up to date; the history emptied. O(k^2) per stale feature."""
    buf = np.empty(k + 1)
    for sl in range(keys.shape[0]):
        if keys[sl] != EMPTY:
            _sa_bring(tab, sl, hist, ints, k, buf)
    ints[I_HBASE] = ints[I_REB]
    ints[I_FLUSH] += 1


@njit(**INNER)
def _sa_rebase(keys, tab, ints, C, M, U, lam, b, cb, z, bslot, gbuf, hist, k, nbmax):
    """Re-base: Z <- C[:k] [Z; G] (the kept basis itself), w_bar absorbs Z^T b + G^T cb, C = [I 0].
    V, M and z are unchanged; the caller clears the buffer. Lazy, as FD-SON's and FTSL-Shampoo's
    re-bases: a feature outside the buffer (G column 0) takes the affine map
    T = [[1, b^T], [0, C[:k, :k]]] on ``[w_bar, Z column]``, recorded in the history of suffix products
    (``S[g] <- T S[g]``, ``S[G] = T``: O(G k^3)) and applied when the feature is next read
    (:func:`_sa_current`, O(k^2)); the buffer's features (up to date: a re-base happens only in a
    fold, which empties the buffer) are re-based now. Once the history holds max(HIST_MIN,
    sqrt(n / 5)) re-bases (or is full) every feature is brought up to date (:func:`_sa_flush`,
    O(k^2 n) for n features seen). Each feature's update is its own, so the result does not depend
    on the table's layout."""
    nb = ints[I_NB]
    buf = np.empty(k + 1)
    zr = np.empty(k)
    reb = ints[I_REB]
    for e in range(ints[I_NBS]):
        sl = bslot[e]
        _sa_bring(tab, sl, hist, ints, k, buf)
        acc = 0.0
        for q in range(k):
            acc += b[q] * tab[sl, C_Z + q]
        for i in range(k):
            s = 0.0
            for q in range(k):
                s += C[i, q] * tab[sl, C_Z + q]
            zr[i] = s
        for q in range(nb):  # the G column's non-zeros (as in _sa_fold)
            g = gbuf[e, q]
            if g != 0.0:
                acc += cb[q] * g
                for i in range(k):
                    zr[i] += C[i, k + q] * g
        tab[sl, C_W] += acc
        for i in range(k):
            tab[sl, C_Z + i] = zr[i]
        tab[sl, C_ST] = reb + 1
    m = k + 1
    T = np.zeros((m, m))
    T[0, 0] = 1.0
    for q in range(k):
        T[0, 1 + q] = b[q]
        for i in range(k):
            T[1 + i, 1 + q] = C[i, q]
    G = reb - ints[I_HBASE]
    _hist_push(hist, G, T, m, m)
    for i in range(C.shape[0]):
        for q in range(C.shape[1]):
            C[i, q] = 1.0 if (i == q and i < k) else 0.0
    for q in range(k):
        b[q] = 0.0
    ints[I_REB] = reb + 1
    G += 1
    if G >= max(HIST_MIN, np.int64(math.sqrt(ints[I_OCC] / 5.0))) or G >= hist.shape[0]:
        _sa_flush(keys, tab, ints, hist, k)


@njit(**INNER)
def _sa_fold(keys, tab, ints, C, M, U, lam, b, cb, z, bslot, gbuf, hist, k, nbmax, max_cond):
    """Fold the buffer into Z once the basis is cut to k rows: C[:k] = [P1 P2];
    Z += P1^-1 P2 G and w_bar += G^T (cb - (P1^-1 P2)^T b) on the buffer's features, C = [P1 0]
    (the first fold: Z = P2 G, C = [I 0]); a re-base when cond(P1) passes max_cond."""
    nb = ints[I_NB]
    if nb == 0:
        return
    ints[I_FOLD] += 1
    if k == 0:
        for e in range(ints[I_NBS]):
            sl = bslot[e]
            acc = 0.0
            for q in range(nb):
                acc += cb[q] * gbuf[e, q]
            tab[sl, C_W] += acc
        _sa_clear_buffer(tab, ints, C, cb, bslot, gbuf, k, nbmax)
        return
    P2 = np.empty((k, nb))
    for i in range(k):
        for q in range(nb):
            P2[i, q] = C[i, k + q]
    if ints[I_NZ] == 0:
        A = P2
        for i in range(k):
            for j in range(k):
                C[i, j] = 1.0 if i == j else 0.0
        ints[I_NZ] = k
        cA = 1.0
    else:
        P1 = np.empty((k, k))
        for i in range(k):
            for j in range(k):
                P1[i, j] = C[i, j]
        cA = _sa_cond(P1)
        if not (cA <= max_cond and cA < np.inf):  # singular: a re-base even at --max_cond inf
            _sa_rebase(keys, tab, ints, C, M, U, lam, b, cb, z, bslot, gbuf, hist, k, nbmax)
            _sa_clear_buffer(tab, ints, C, cb, bslot, gbuf, k, nbmax)
            return
        A = _solve(P1, P2)
    corr = np.empty(nb)  # cb - A^T b
    for q in range(nb):
        s = cb[q]
        for i in range(k):
            s -= A[i, q] * b[i]
        corr[q] = s
    zr = np.empty(k)
    for e in range(ints[I_NBS]):
        sl = bslot[e]
        # a buffered feature's G column is mostly zeros (it is in the few gradients that brought a
        # new direction): O(k) per non-zero, the same sums in the same order as the dense loops
        acc = 0.0
        for i in range(k):
            zr[i] = 0.0
        for q in range(nb):
            g = gbuf[e, q]
            if g != 0.0:
                acc += corr[q] * g
                for i in range(k):
                    zr[i] += A[i, q] * g
        tab[sl, C_W] += acc
        for i in range(k):
            tab[sl, C_Z + i] += zr[i]
        tab[sl, C_IB] = 0.0
        for q in range(nb):
            gbuf[e, q] = 0.0
    _sa_clear_buffer(tab, ints, C, cb, bslot, gbuf, k, nbmax, False)


@njit(**INNER)
def _sa_cut(ints, flt, C, M, U, lam, z, r, k, tau):
    """FD's shrink of the eigen-basis (Alg. 1 line 4 / Alg. 3 lines 14-16): rho += lambda_tau (0
    when at or below SHRINK_TOL lambda_1), lam <- max(lam - lambda_tau, 0) on the first tau - 1
    eigenvectors, the basis rotated into them and cut to k = tau - 1 rows."""
    mu = lam[tau - 1]
    if mu <= SHRINK_TOL * lam[0]:
        mu = 0.0
    if mu > 0.0:
        ints[I_SHR] += 1
    flt[F_RHO] += mu
    for i in range(r):
        lam[i] = max(lam[i] - mu, 0.0) if i < k else 0.0
    _sa_rotate(C, M, U, lam, z, r, k)
    ints[I_R] = k


@njit(**INNER)
def _sa_shrink(tab, keys, ints, flt, C, M, U, lam, b, cb, z, bslot, gbuf, hist, k, nbmax, tau, max_cond):
    """:func:`_sa_cut`, then the buffer folded into Z."""
    _sa_cut(ints, flt, C, M, U, lam, z, ints[I_R], k, tau)
    _sa_fold(keys, tab, ints, C, M, U, lam, b, cb, z, bslot, gbuf, hist, k, nbmax, max_cond)


@njit(**KERNEL)
def sada_run(offsets, indices, values, labels, weights, start, learn, state, hyper, slot_buf, pred_out, loss_out):
    """Sparse S-ADA / Fast S-ADA / FTSL / FTFSL over examples ``start..n-1``: predict, record, then,
    if ``learn``, the label is not NaN and the weight h is > 0, learn from g = h l'(p, y) x.

    Returns ``(next, learned)``; ``next < n``: the table or the buffer's slot list must grow before
    example ``next`` (the caller grows them and calls again from ``next``)."""
    keys, tab, shift, ints, flt, C, M, U, lam, b, cb, z, e, bslot, ctr, hist, gbuf = state
    mask, loss_code, tau, fast, dual, eta, delta, max_cond, l2 = hyper
    n = labels.shape[0]
    R = C.shape[0]
    k = tau - 1
    nbmax = C.shape[1] - k
    cap = keys.shape[0]
    capmask = cap - 1
    zx = np.zeros(k + nbmax)  # [Z x; G x]
    vx = np.zeros(R)
    cc = np.zeros(R)
    coef = np.zeros(R)
    tmp = np.zeros(R)
    q = np.zeros(k + nbmax)
    cur = np.zeros(k + 1)  # a stale feature's [w_bar, Z column] brought up to date
    t1 = np.zeros(R)
    mu1 = np.zeros(R)
    learned = 0
    for i in range(start, n):
        a = offsets[i]
        s = offsets[i + 1] - a
        lab = labels[i]
        imp = weights[i]
        do_learn = learn and (not math.isnan(lab)) and imp > 0.0
        if do_learn and (ints[I_OCC] + s > (cap >> 1) or ints[I_NBS] + s > bslot.shape[0]):
            return i, learned
        ctr[0] += 1
        mark = float(ctr[0])
        # distinct slots, duplicates summed into the scratch column
        ns = 0
        for j in range(s):
            key = np.int64(indices[a + j]) & mask
            sl = _find(keys, key, shift, capmask)
            if sl < 0:
                if not do_learn:
                    continue
                sl = -1 - sl
                keys[sl] = key
                tab[sl, C_ST] = ints[I_REB]
                ints[I_OCC] += 1
            if tab[sl, C_MK] != mark:
                tab[sl, C_MK] = mark
                tab[sl, C_X] = 0.0
                slot_buf[ns] = sl
                ns += 1
            tab[sl, C_X] += values[a + j]
        # [Z x; G x], w_bar.x, gbar.x, ||x||^2
        r = ints[I_R]
        nb = ints[I_NB]
        nz = ints[I_NZ]
        for qq in range(k + nb):
            zx[qq] = 0.0
        wx = 0.0
        gx = 0.0
        xx = 0.0
        for j in range(ns):
            sl = slot_buf[j]
            v = tab[sl, C_X]
            gx += tab[sl, C_GB] * v
            xx += v * v
            if nz > 0 and np.int64(tab[sl, C_ST]) != ints[I_REB] and _sa_current(tab, sl, hist, ints, k, cur):
                # stale (re-bases since it was last read): up to date now, written back when learning
                wx += cur[0] * v
                for qq in range(k):
                    zx[qq] += cur[1 + qq] * v
                if do_learn:
                    tab[sl, C_W] = cur[0]
                    for qq in range(k):
                        tab[sl, C_Z + qq] = cur[1 + qq]
                    tab[sl, C_ST] = ints[I_REB]
                continue
            wx += tab[sl, C_W] * v
            if nz > 0:
                for qq in range(k):
                    zx[qq] += tab[sl, C_Z + qq] * v
            if tab[sl, C_IB] != 0.0:  # in the buffer: its G column (0 outside the buffer)
                eb = np.int64(tab[sl, C_IB]) - 1
                for qq in range(nb):
                    zx[k + qq] += gbuf[eb, qq] * v
        for ii in range(r):
            vx[ii] = 0.0
        for qq in range(k + nb):  # vx = C zx, r sums side by side (each in qq order)
            zq = zx[qq]
            for ii in range(r):
                vx[ii] += C[ii, qq] * zq
        if dual:
            acc = gx * flt[F_IHP]
            for ii in range(r):
                acc += vx[ii] * e[ii]
            p = -eta * acc
        else:
            p = wx
            for qq in range(k):
                p += b[qq] * zx[qq]
            for qq in range(nb):
                p += cb[qq] * zx[k + qq]
        pred_out[i] = p
        loss_out[i] = loss_value(loss_code, p, target(loss_code, lab)) if not math.isnan(lab) else np.nan
        if not do_learn:
            continue
        learned += 1
        ints[I_T] += 1
        # Alg. 3 lines 14-16 of the previous round, deferred past this round's prediction (the
        # primal-dual prediction uses the basis before the cut); its rho enters now (line 15)
        if ints[I_DEFER] == 1:
            ints[I_DEFER] = 0
            # x's coordinates in the rotated basis: vx <- U^T vx (the buffer is folded, so recompute)
            _sa_shrink(tab, keys, ints, flt, C, M, U, lam, b, cb, z, bslot, gbuf, hist, k, nbmax, tau, max_cond)
            r = ints[I_R]
            nb = ints[I_NB]
            for j in range(ns):  # the fold may have re-based
                _sa_bring(tab, slot_buf[j], hist, ints, k, cur)
            for qq in range(k):
                acc = 0.0
                for j in range(ns):
                    sl = slot_buf[j]
                    acc += tab[sl, C_Z + qq] * tab[sl, C_X]
                zx[qq] = acc
            for ii in range(r):
                acc = 0.0
                for qq in range(k):
                    acc += C[ii, qq] * zx[qq]
                vx[ii] = acc
        gl = imp * loss_deriv(loss_code, p, target(loss_code, lab))
        gg = gl * gl * xx
        for ii in range(r):
            cc[ii] = gl * vx[ii]  # V g
        gdot = 0.0
        if dual:
            for j in range(ns):
                sl = slot_buf[j]
                tab[sl, C_GB] += gl * tab[sl, C_X]
                gdot += gl * tab[sl, C_X] * tab[sl, C_GB]
            for ii in range(r):
                z[ii] += cc[ii]
        res = gg
        for ii in range(r):
            res -= cc[ii] * cc[ii]
        rr = r
        if gg > 0.0 and res > RES_TOL * gg and r < R and nb < nbmax:
            # Alg. 3 lines 6-7 / Alg. 1 line 2: the new direction (g - V V^T g) / ||.|| as buffer row nb
            nr = math.sqrt(res)
            for qq in range(k + nb):
                acc = 0.0
                for ii in range(r):
                    acc += cc[ii] * C[ii, qq]
                C[r, qq] = -acc / nr
            C[r, k + nb] = 1.0 / nr
            for j in range(ns):
                sl = slot_buf[j]
                if tab[sl, C_IB] == 0.0:
                    tab[sl, C_IB] = ints[I_NBS] + 1.0
                    bslot[ints[I_NBS]] = sl
                    ints[I_NBS] += 1
                gbuf[np.int64(tab[sl, C_IB]) - 1, nb] = gl * tab[sl, C_X]
            cb[nb] = 0.0
            cc[r] = nr
            if dual:
                acc = gdot
                for ii in range(r):
                    acc -= cc[ii] * z[ii]
                z[r] = acc / nr
            nb += 1
            rr = r + 1
            ints[I_NB] = nb
            ints[I_R] = rr
        # line 10: M += (V g)(V g)^T, line 11: its eigen-pairs
        for ii in range(rr):
            for jj in range(rr):
                M[ii, jj] += cc[ii] * cc[jj]
        _sa_eig_update(U, lam, cc, r, rr, t1, mu1)
        if not fast:
            # Alg. 1 lines 3-4 (FD): rotate into the eigenvectors; at tau rows shrink and cut to tau - 1
            for jj in range(rr):
                acc = 0.0
                for ii in range(rr):
                    acc += U[ii, jj] * cc[ii]
                tmp[jj] = acc  # g's coordinates in the rotated basis
            if rr == tau:
                _sa_cut(ints, flt, C, M, U, lam, z, rr, k, tau)
                rr = k
            else:
                _sa_rotate(C, M, U, lam, z, rr, rr)
            for ii in range(rr):
                cc[ii] = tmp[ii]
        # the step with G~_t = V^T M V + (rho_{1:t} + delta) I (App. A.1)
        ihp = _sa_coefs(lam, rr, flt[F_RHO], delta, coef, eta * l2 * ints[I_T] if dual else 0.0)
        if dual:
            # FTSL Alg. 2 line 9 / FTFSL Alg. 3 line 13: x_{t+1} = -eta G~_t^-1/2 gbar_t, kept as (1/h_perp, e);
            # with --l2 the regularised dual-averaging step x_{t+1} = -eta (G~_t^1/2 + eta t l2 I)^-1 gbar_t
            for jj in range(rr):
                acc = 0.0
                for ii in range(rr):
                    acc += U[ii, jj] * z[ii]
                tmp[jj] = coef[jj] * acc
            for ii in range(rr):
                acc = 0.0
                for jj in range(rr):
                    acc += U[ii, jj] * tmp[jj]
                e[ii] = acc
            for ii in range(rr, R):
                e[ii] = 0.0
            flt[F_IHP] = ihp
        else:
            # S-ADA: x_{t+1} = x_t - eta G~_t^-1/2 g_t = w - eta (g / h_perp + V^T U diag(coef) U^T V g)
            for jj in range(rr):
                acc = 0.0
                for ii in range(rr):
                    acc += U[ii, jj] * cc[ii]
                tmp[jj] = coef[jj] * acc
            nb = ints[I_NB]
            for qq in range(k + nb):
                q[qq] = 0.0
            for ii in range(rr):
                acc = 0.0
                for jj in range(rr):
                    acc += U[ii, jj] * tmp[jj]
                if acc != 0.0:
                    for qq in range(k + nb):
                        q[qq] += acc * C[ii, qq]
            for qq in range(k):
                b[qq] -= eta * q[qq]
            for qq in range(nb):
                cb[qq] -= eta * q[k + qq]
            st = eta * ihp * gl
            for j in range(ns):
                sl = slot_buf[j]
                tab[sl, C_W] -= st * tab[sl, C_X]
        if not fast:
            if rr == k:
                _sa_fold(keys, tab, ints, C, M, U, lam, b, cb, z, bslot, gbuf, hist, k, nbmax, max_cond)
        elif ints[I_R] == R:
            ints[I_DEFER] = 1  # Alg. 3 line 14: r = 2 tau; shrink after the next prediction
    return n, learned


@njit(**KERNEL)
def rebase_all(state, max_cond):
    """Re-base (when the buffer is empty and the basis cut) and bring every feature up to date (tests)."""
    keys, tab, shift, ints, flt, C, M, U, lam, b, cb, z, e, bslot, ctr, hist, gbuf = state
    k = b.shape[0]
    nbmax = cb.shape[0]
    if ints[I_NB] == 0 and ints[I_R] == k and ints[I_NZ] == k and k > 0:
        _sa_rebase(keys, tab, ints, C, M, U, lam, b, cb, z, bslot, gbuf, hist, k, nbmax)
    _sa_flush(keys, tab, ints, hist, k)


@njit(**KERNEL)
def relist_buffer(keys, tab, bslot):
    """Rebuild the buffer's slot list from the table's in-buffer flags (after a rehash or a load);
    returns its length."""
    n = 0
    for sl in range(keys.shape[0]):
        if keys[sl] != EMPTY and tab[sl, C_IB] != 0.0:
            bslot[np.int64(tab[sl, C_IB]) - 1] = sl
            n += 1
    return n


@njit(**KERNEL)
def table_rows(keys, tab, shift, query, out, hist, ints, k, gbuf):
    """out[i] = tab's row of feature query[i] (zeros when not stored), its [w_bar, Z column] up to date,
    then its buffer column (``out`` has N_LEAD + k + nbmax columns)."""
    capmask = keys.shape[0] - 1
    cur = np.empty(k + 1)
    for i in range(query.shape[0]):
        sl = _find(keys, query[i], shift, capmask)
        for c in range(out.shape[1]):
            out[i, c] = 0.0
        if sl < 0:
            continue
        for c in range(tab.shape[1]):
            out[i, c] = tab[sl, c]
        if tab[sl, C_IB] != 0.0:
            eb = np.int64(tab[sl, C_IB]) - 1
            for q in range(gbuf.shape[1]):
                out[i, C_Z + k + q] = gbuf[eb, q]
        if sl >= 0 and _sa_current(tab, sl, hist, ints, k, cur):
            out[i, C_W] = cur[0]
            for q in range(k):
                out[i, C_Z + q] = cur[1 + q]
            out[i, C_ST] = ints[I_REB]


@njit(**KERNEL)
def rank1_eig(lam, t):
    """The eigen-pairs (mu descending, W) of diag(lam) + t t^T, lam descending (tests)."""
    m = lam.shape[0]
    mu = np.empty(m)
    W = np.empty((m, m))
    _rank1_eig(lam, t, m, mu, W)
    return mu, W
