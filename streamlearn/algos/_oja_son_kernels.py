"""Compiled kernels of :mod:`streamlearn.algos.oja_son` (sparse Oja-SON, progressive validation inside).

Luo, Agarwal, Cesa-Bianchi & Langford (2016), "Efficient Second Order Online Learning by
Sketching" (SON): Alg. 4 (sparse SON with Oja's sketch), Alg. 5 (sparse Oja sketch),
Alg. 11 (Gram-Schmidt in the K inner product) and App. G (the K update), with the diagonal
pre-scaling of Sec. 5.2.

Per-feature state lives in an open-addressing hash table keyed by the masked feature index:
``keys[slot]`` (``-1`` = empty) and ``tab[slot, :]`` = ``[u_bar, D - 0.1, scratch, Z[0, j],
..., Z[m-1, j]]`` (one contiguous row per feature, like VW's strided weights), then in precond mode
``[c_j, snapshot of w~_j, s2_j = max x_j^2, cached frame scale f_j]``. A feature that
was never learned from has no slot and reads as all zeros (``D = 0.1``).
"""
import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ..kernels._jit import INNER, KERNEL
from ._adagrad_kernels import X2_MIN
from ._feature_table_kernels import EMPTY, _find
from ._loss_kernels import SQUARED, invariant_step, loss_deriv, loss_value, target

__all__ = ["SonState", "SonHyper", "SonScratch", "son_run", "rematerialize", "estimate_cond",
           "table_lookup_rows"]

C_U = 0  # u_bar (the weights outside the sketch subspace, Alg. 4)
C_D = 1  # accumulated squared gradients D_t - 0.1 (Sec. 5.2)
C_S = 2  # scratch (sums over duplicate indices of one example)
C_Z = 3  # first column of Z^T (Alg. 5)
D0 = 0.1  # D_1 = 0.1 I (Sec. 5.2)
NAG_RESCALE = True
REMAT_AMORTIZE = 8  # re-materialise at most once per (stored features / 8) learned examples ...
HARD_COND = 1e4  # ... unless the cond(Z) bound exceeds HARD_COND * max_cond
REORTH = 16  # F is refactored in O(m^2) per example, and by a full Gram-Schmidt every REORTH examples


@njit(cache=True, nogil=True, inline="always")
def _fscale(dv, r):
    """Frame scale ``(D0 + dv)^-r`` of a feature whose accumulator column holds ``dv`` = D - D0."""
    d = D0 + dv
    if r == 0.5:
        return 1.0 / math.sqrt(d)
    if r == 0.25:
        return 1.0 / math.sqrt(math.sqrt(d))
    return d ** -r


@njit(cache=True, nogil=True, inline="always")
def _proj_excess(p0, proj_c):
    """SON's projection onto |w^T x| <= C (Alg. 1 line 4 / Alg. 4 lines 4-5, Lemma 1): the excess
    ``tau`` of the prediction ``p0`` over ``[-C, C]`` (0 inside, or when ``proj_c`` = 0: off), so the
    projected prediction is ``p0 - tau``."""
    if proj_c > 0.0:
        if p0 > proj_c:
            return p0 - proj_c
        if p0 < -proj_c:
            return p0 + proj_c
    return 0.0


@njit(cache=True, nogil=True, inline="always")
def _pscale(dv, s2, r, vwr):
    """Precond-mode frame scale ``f = (D0 + dv / s2)^-r / sqrt(s2)``: the accumulator of the
    max-normalised feature x / s (s^2 = s2 = max x^2 seen), so x f is scale-free (Ross et al. 2013);
    0 for a feature that never had a non-zero value. ``vwr`` (--diag_rule vw): no D0 term, as VW's
    accumulator starts at 0, and 0 until the feature had a non-zero gradient (VW's weight does not
    move before that either); for r = 1/4, f^2 = 1 / (s sqrt(G)) is VW's normalized adaptive rate."""
    if not s2 > 0.0:
        return 0.0
    if vwr:
        if not dv > 0.0:
            return 0.0
        d = dv / s2
        return (1.0 / math.sqrt(math.sqrt(d)) if r == 0.25 else d ** -r) / math.sqrt(s2)
    return _fscale(dv / s2, r) / math.sqrt(s2)


@njit(cache=True, nogil=True, inline="always")
def _flush1(tab, sl, b, m, r):
    """Precond mode: bring the original-coordinate weight of one feature up to date before its frame
    scale changes: ``c_j += f_j (w~_j - snap_j)``, ``snap_j = w~_j`` (``w~ = u_bar + Z^T b``, ``f_j`` the
    frame scale that held since the feature was last touched)."""
    wt = tab[sl, C_U]
    for q in range(m):
        wt += tab[sl, C_Z + q] * b[q]
    _flush_to(tab, sl, m, wt)


@njit(cache=True, nogil=True, inline="always")
def _flush_to(tab, sl, m, wt):
    """``c_j += f_j (wt - snap_j)``, ``snap_j = wt`` for the current ``wt = w~_j`` (see _flush1)."""
    cw = C_Z + m
    tab[sl, cw] += tab[sl, cw + 3] * (wt - tab[sl, cw + 1])
    tab[sl, cw + 1] = wt


@njit(cache=True, nogil=True, inline="always")
def _set_frame(tab, sl, m, r, vwr):
    """Precond mode: the cached frame scale ``f_j = _pscale(D_j, s2_j)`` (column C_Z + m + 3), set
    whenever D_j or s2_j changes (after the flush), so the prediction, the flush and the re-scaling
    read it instead of computing three roots and divisions each."""
    cw = C_Z + m
    tab[sl, cw + 3] = _pscale(tab[sl, C_D], tab[sl, cw + 2], r, vwr)


@njit(**INNER)
def _flush(tab, slot_buf, values, a, s, b, m, r):
    """_flush1 on every feature of the example (before its D changes)."""
    for k in range(s):
        _flush1(tab, slot_buf[k], b, m, r)


@njit(cache=True, nogil=True, inline="always")
def _sum_duplicates(tab, slot_buf, values, a, s):
    """``tab[slot, C_S]`` = the example's value of each stored feature, repeated indices summed
    (the caller reads and zeroes it)."""
    for k in range(s):
        tab[slot_buf[k], C_S] = 0.0
    for k in range(s):
        tab[slot_buf[k], C_S] += values[a + k]


@njit(cache=True, nogil=True, inline="always")
def _sq(v):
    """``v^2`` with VW's floor ``X2_MIN`` (FLT_MIN, gd.cc's x2_min, as the adagrad kernels take it): for
    the per-feature scale and VW's normaliser only, so that a value whose square underflows (|x| <
    1e-162) still has a scale (it divided 0 by 0)."""
    v2 = v * v
    return v2 if v2 >= X2_MIN else X2_MIN


@njit(**INNER)
def _update_scale(tab, slot_buf, values, a, s, b, m, r, vwr):
    """Precond mode: s2_j = max(s2_j, x_j^2) (duplicate indices summed first), flushing the
    features whose scale grows and rescaling their original-coordinate weight "as if the new scale
    had been the old one" (Ross et al. 2013): by s_old^2 / s_new^2 (NAG's rate 1 / s^2), or with
    ``vwr`` by (s_old / s_new)^(2 - 4r), the power of s in the rate f^2 = G^-2r s^(4r - 2) (VW's
    gd.cc: s_old / s_new for its adaptive normalized rule, r = 1/4)."""
    cw = C_Z + m
    _sum_duplicates(tab, slot_buf, values, a, s)
    for k in range(s):
        sl = slot_buf[k]
        v = tab[sl, C_S]
        tab[sl, C_S] = 0.0
        if v == 0.0:
            continue
        v2 = _sq(v)
        if v2 > tab[sl, cw + 2]:
            _flush1(tab, sl, b, m, r)
            if NAG_RESCALE and tab[sl, cw + 2] > 0.0:
                ratio = tab[sl, cw + 2] / v2
                if not vwr:
                    tab[sl, cw] *= ratio
                elif r == 0.25:
                    tab[sl, cw] *= math.sqrt(ratio)
                else:
                    tab[sl, cw] *= ratio ** (1.0 - 2.0 * r)
            tab[sl, cw + 2] = v2
            _set_frame(tab, sl, m, r, vwr)


@njit(cache=True, nogil=True)
def table_lookup_rows(keys, tab, query, shift, out):
    """``out[i] = tab[slot(query[i])]`` (zeros for absent keys)."""
    capmask = keys.shape[0] - 1
    for i in range(query.shape[0]):
        r = _find(keys, query[i], shift, capmask)
        if r >= 0:
            for c in range(tab.shape[1]):
                out[i, c] = tab[r, c]


@njit(**INNER)
def _decompose(P, K, Q, KQ, beta, Kb):
    """SON Alg. 11, Decompose(P, K): Gram-Schmidt of the rows of ``P`` in the inner product
    ``<a, b> = a^T K b`` (modified Gram-Schmidt order), so that ``Q Z`` has orthonormal rows
    when ``K = Z Z^T`` and ``Q = T P`` with ``T`` lower triangular, positive diagonal.

    Writes ``Q`` and ``KQ = Q K``; returns False if a row is (numerically) dependent on the
    previous ones (the caller then re-materialises explicitly).
    """
    m = P.shape[0]
    for i in range(m):
        for j in range(m):
            beta[j] = P[i, j]
        # ||p||_K^2 before projection, to detect cancellation
        p2 = 0.0
        for j in range(m):
            acc = 0.0
            for l in range(m):
                acc += K[j, l] * beta[l]
            p2 += beta[j] * acc
        for k in range(i):
            a = 0.0
            for j in range(m):
                a += KQ[k, j] * beta[j]
            for j in range(m):
                beta[j] -= a * Q[k, j]
        c2 = 0.0
        for j in range(m):
            acc = 0.0
            for l in range(m):
                acc += K[j, l] * beta[l]
            Kb[j] = acc
            c2 += beta[j] * acc
        if not (c2 > 1e-24 * p2) or not math.isfinite(c2) or not (c2 > 1e-300):
            return False
        c = math.sqrt(c2)
        for j in range(m):
            Q[i, j] = beta[j] / c
            KQ[i, j] = Kb[j] / c
    return True


@njit(**INNER)
def _refactor_rank1(F, c, beta, acc, y):
    """Alg. 5 line 4 in O(m^2): ``F <- Decompose(F, K')`` after the sketch update, without Gram-Schmidt.

    With ``F K F^T = I`` before the update and ``K' = K + d zg^T + zg d^T + (g^T g) d d^T``,
    ``d = Gamma zg`` (App. G), ``F K' F^T = I + beta c c^T`` with ``c = F zg = V g^`` and
    ``beta = 2 Gamma + Gamma^2 g^T g``. Decompose returns the unique ``T F`` (T lower triangular,
    positive diagonal) with orthonormal rows in the K' inner product, i.e. ``T = L^-1`` for the
    Cholesky factor ``L L^T = I + beta c c^T``. That factor has a closed form:
    ``L = Lu diag(d)^1/2``, ``d_i = (1 + beta S_i) / (1 + beta S_(i-1))``, ``S_i = sum_(k<=i) c_k^2``,
    ``Lu = I + strictly-lower(c w^T)``, ``w_k = beta c_k / (1 + beta S_k)``, so
    ``L^-1 F`` is a forward substitution with a running sum ``acc = sum_(k<i) w_k Y_k``: O(m^2)
    instead of Gram-Schmidt's O(m^3). Exact in exact arithmetic; rounding drift is removed by the
    full Gram-Schmidt every REORTH examples."""
    m = F.shape[0]
    for q in range(m):
        acc[q] = 0.0
    S = 0.0
    for i in range(m):
        ci = c[i]
        s_prev = S
        S += ci * ci
        for q in range(i + 1):  # F lower triangular; acc lives on columns < i
            y[q] = F[i, q] - ci * acc[q]
        wi = beta * ci / (1.0 + beta * S)
        inv = math.sqrt((1.0 + beta * s_prev) / (1.0 + beta * S))
        for q in range(i + 1):
            acc[q] += wi * y[q]
            F[i, q] = y[q] * inv


@njit(**INNER)
def _symmetrize(K):
    """Copy the lower triangle of ``K`` to the upper one (the per-example update writes the lower)."""
    m = K.shape[0]
    for r in range(m):
        for q in range(r):
            K[q, r] = K[r, q]


@njit(**INNER)
def _add_ft(F, tmp, b, acc):
    """``b += F^T tmp`` for lower-triangular ``F``, reading F by rows (``acc`` is scratch): each
    ``acc[q]`` sums ``F[r, q] tmp[r]`` over ascending r, as a column-wise loop would."""
    m = F.shape[0]
    for q in range(m):
        acc[q] = 0.0
    for r in range(m):
        t = tmp[r]
        for q in range(r + 1):
            acc[q] += F[r, q] * t
    for q in range(m):
        b[q] += acc[q]


@njit(**INNER)
def _estimate_cond(F, K):
    """Growth of the representation: the larger of a cheap upper bound of cond(Z), ||F||_F * ||Z||_F
    (since F Z is orthonormal, ||Z^+|| = ||F||), and the scale of Z, ||Z||_F^2 / m = tr(K) / m (1 when
    Z is orthonormal). The scale matters on its own: Oja's steps multiply Z by I + Gamma g^ g^^T, so
    Z can grow by orders of magnitude while cond(Z) stays small (always, for m = 1), and then
    ``w = u_bar + Z^T b`` is a difference of huge numbers that loses every digit."""
    m = F.shape[0]
    f2 = 0.0
    tr = 0.0
    for i in range(m):
        tr += K[i, i]
        for j in range(i + 1):  # F is lower triangular
            f2 += F[i, j] * F[i, j]
    tr = max(tr, 0.0)
    return max(math.sqrt(f2 * tr), tr / m)


@njit(**INNER)
def _gram_pass(keys, tab, order, T, apply, G, zt):
    """For the slots in ``order``: optionally ``Z[:, j] <- T Z[:, j]``, and accumulate G = Z Z^T."""
    m = T.shape[0]
    for i in range(m):
        for j in range(m):
            G[i, j] = 0.0
    for o in range(order.shape[0]):
        s = order[o]
        if apply:
            for r in range(m):
                zt[r] = tab[s, C_Z + r]
            for r in range(m):
                v = 0.0
                for q in range(m):
                    v += T[r, q] * zt[q]
                tab[s, C_Z + r] = v
        for r in range(m):
            zr = tab[s, C_Z + r]
            if zr != 0.0:
                for q in range(r + 1):
                    G[r, q] += zr * tab[s, C_Z + q]
    for r in range(m):
        for q in range(r):
            G[q, r] = G[r, q]


@njit(**INNER)
def _rematerialize(keys, tab, F, K, b, n_assigned):
    """Convert the representation back to an explicit orthonormal sketch (the cure for the
    growth of Z and K): fold the sketch part of the weights into u_bar (``u_bar += Z^T b``,
    ``b = 0``), set ``Z <- F Z`` and re-orthonormalise the rows of Z explicitly (two passes of
    Gram-based Gram-Schmidt, with the exact Gram matrix recomputed from the table each time),
    then ``F = I`` and ``K = Z Z^T`` recomputed exactly. ``w = u_bar + Z^T b`` and the sketch
    ``V = F Z`` are unchanged up to rounding (``V`` becomes the Gram-Schmidt orthonormalisation
    of ``F Z``, which is ``F Z`` itself if that was already orthonormal).

    Pending rows (``i >= n_assigned``: unit vectors on features not seen yet, see
    :mod:`streamlearn.algos.oja_son`) have no stored entries; their Gram block is the identity.

    Slots are visited in ascending key order, so the result does not depend on the table's
    layout (capacity, insertion history). Cost O(m^2 n log n) for n stored features; touches
    no unstored feature. Returns False if the rows are numerically dependent.
    """
    m = F.shape[0]
    cap = keys.shape[0]
    n = 0
    for s in range(cap):
        if keys[s] != EMPTY:
            n += 1
    occ = np.empty(n, np.int64)
    kk = np.empty(n, np.int64)
    n = 0
    for s in range(cap):
        if keys[s] != EMPTY:
            occ[n] = s
            kk[n] = keys[s]
            n += 1
    _sort_by_key(kk, occ)
    order = occ
    zt = np.empty(m)
    # fold b into u_bar
    for o in range(n):
        s = order[o]
        acc = 0.0
        for r in range(m):
            acc += tab[s, C_Z + r] * b[r]
        tab[s, C_U] += acc
    for r in range(m):
        b[r] = 0.0
    G = np.empty((m, m))
    Q = np.empty((m, m))
    KQ = np.empty((m, m))
    I = np.zeros((m, m))
    T = np.empty((m, m))
    for i in range(m):
        I[i, i] = 1.0
        for j in range(m):
            T[i, j] = F[i, j]
    beta = np.empty(m)
    Kb = np.empty(m)
    ok = True
    for rep in range(3):
        _gram_pass(keys, tab, order, T, True, G, zt)
        for r in range(n_assigned, m):
            G[r, r] += 1.0
        if rep == 2:
            break
        done = _decompose(I, G, Q, KQ, beta, Kb)
        if not done:
            ok = False  # leave T = I: G is still recomputed below
        # explicit loops: a slice assignment compiles numba's shape-error formatting (seconds)
        for i in range(m):
            for j in range(m):
                T[i, j] = Q[i, j] if done else I[i, j]
    for i in range(m):
        for j in range(m):
            K[i, j] = G[i, j]
            F[i, j] = I[i, j]
    return ok


@njit(**INNER)
def _sort_by_key(key, val):
    """Sort ``key`` ascending in place (heapsort), permuting ``val`` along. The keys are distinct
    (table keys), so the order is the one ``np.argsort`` gives; a hand-written sort compiles in a
    fraction of the time numba's ``argsort`` takes."""
    n = key.shape[0]
    for start in range(n // 2 - 1, -1, -1):
        _sift(key, val, start, n)
    root = np.int64(0)  # not the literal 0: that would compile a second _sift
    for end in range(n - 1, 0, -1):
        key[0], key[end] = key[end], key[0]
        val[0], val[end] = val[end], val[0]
        _sift(key, val, root, end)


@njit(**INNER)
def _sift(key, val, i, n):
    """Max-heap sift-down of ``key[i]`` within ``key[:n]`` (``val`` moves along)."""
    while True:
        c = 2 * i + 1
        if c >= n:
            return
        if c + 1 < n and key[c + 1] > key[c]:
            c += 1
        if key[c] <= key[i]:
            return
        key[i], key[c] = key[c], key[i]
        val[i], val[c] = val[c], val[i]
        i = c


class SonState(NamedTuple):
    """Oja-SON's state (Alg. 4 + 5): the per-feature table and the sketch's small matrices."""

    keys: np.ndarray  # int64 (cap,): masked feature index per slot, -1 = empty
    tab: np.ndarray  # float64 (cap, ncol): per-feature row (see the module docstring)
    shift: int  # 64 - log2(cap): Fibonacci hashing shift
    ints: np.ndarray  # int64 (5,): t, n_assigned, n_occupied, n_remat, t at last remat
    flt: np.ndarray  # float64 (3,) or (5,): bound on cond(Z), label min, label max (learned so far), then
    # with --diag_rule vw: sum of h ||x / s||^2 and of h over the examples with a non-zero gradient
    F: np.ndarray  # float64 (m, m): V = F Z (Alg. 5), lower triangular
    K: np.ndarray  # float64 (m, m): Z Z^T (App. G)
    lam: np.ndarray  # float64 (m,): Lambda, the sketch's eigenvalue estimates
    b: np.ndarray  # float64 (m,): w = u_bar + Z^T b (Alg. 4)
    assigned: np.ndarray  # int64 (m,): feature of each initial unit row of Z, -1 = pending


@njit(**INNER)
def _init_pick(key, salt):
    """Whether a new feature takes a pending sketch row under ``--random_seed`` (salt != 0): a
    splitmix64 finaliser of ``key ^ salt``, kept with probability 1/2, so each seed starts the
    sketch on a different set of the first features learned from."""
    x = np.uint64(key) ^ salt
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return (x & np.uint64(1)) == np.uint64(0)


class SonHyper(NamedTuple):
    """Oja-SON's hyper-parameters as the kernel takes them (options of :mod:`..oja_son`)."""

    mask: int  # (1 << bits) - 1
    loss_code: int
    alpha: float  # A_t = alpha I + S^T S
    sigma_eta: float  # to-sketch scale
    gamma_c: float  # Oja step Gamma_t = gamma_c / (t + gamma_t0)
    gamma_t0: float
    proj_c: float  # projection constant C (0 = off)
    diag: bool  # diagonal pre-scaling on
    diag_vw: bool  # VW's order of the D update
    max_cond: float  # re-materialisation threshold
    sketch_avg: bool  # avg to-sketch scale (else the paper's)
    step_power: float  # eta_t = t^step_power
    precond: bool  # --diag_frame precond
    dpow: float  # exponent r of D^-r
    invariant: bool  # importance-invariant step
    oja_clip: float  # cap on Oja's step Gamma ||g^||^2 (0 = none)
    vw_rule: bool  # --diag_rule vw (precond mode; flt[3:5] = sum h ||x / s||^2, sum h)
    clip: bool  # squared loss: clip to the label range learned so far (not --no_clip)
    init_salt: np.uint64  # --random_seed's salt (0: Z's rows on the first m features learned from)


class SonScratch(NamedTuple):
    """Per-example buffers, at least as long as the batch's longest example."""

    slot_buf: np.ndarray  # int64: table slot of each feature entry
    xt_buf: np.ndarray  # float64: pre-scaled values x~
    wt_buf: np.ndarray  # float64: w~ of each entry (precond fast path)


@njit(cache=True, nogil=True)
def son_run(offsets, indices, values, labels, weights, start, learn, state, hyper, scratch,
            pred_out, loss_out):
    """Sparse Oja-SON (SON Alg. 4 + Alg. 5) over examples ``start..n-1`` in order: predict,
    record, then (if ``learn``, the label is not NaN and the weight is > 0) update.

    ``state`` is a :class:`SonState`, ``hyper`` a :class:`SonHyper`, ``scratch`` a
    :class:`SonScratch`. Returns ``(next, learned)``: ``next < n`` means the hash table must
    grow before example ``next`` (the caller grows it and calls again from ``next``).
    """
    keys, tab, shift, ints, flt, F, K, lam, b, assigned = state
    (mask, loss_code, alpha, sigma_eta, gamma_c, gamma_t0, proj_c, diag, diag_vw, max_cond,
     sketch_avg, step_power, precond, dpow, invariant, oja_clip, vw_rule, clip, init_salt) = hyper
    slot_buf, xt_buf, wt_buf = scratch
    n = labels.shape[0]
    m = lam.shape[0]
    cw = C_Z + m  # precond mode: original-coordinate weight c_j, then the snapshot of w~_j
    r_avg = dpow if diag else 0.5  # avg to-sketch scale: g^ = sqrt(sigma_eta h) t^r_avg l' x~
    # precond + VW order + no projection: the prediction loop computes w~_j (kept in wt_buf for the
    # flush that follows at once) instead of Z x~ (recomputed after D changes anyway): one pass less
    fast = precond and diag_vw and not proj_c > 0.0
    cap = keys.shape[0]
    capmask = cap - 1
    z = np.zeros(m)
    xh = np.zeros(m)
    zg = np.zeros(m)
    delta = np.zeros(m)
    cv = np.zeros(m)
    cc = np.zeros(m)
    tmp = np.zeros(m)
    yv = np.zeros(m)
    Q = np.zeros((m, m))
    KQ = np.zeros((m, m))
    beta = np.zeros(m)
    Kb = np.zeros(m)
    # the full O(m^3) Gram-Schmidt that removes the rank-one refactor's rounding drift runs every
    # max(REORTH, m) examples: O(m^2) per example amortised, like the rest of the update
    reorth = max(REORTH, m)
    learned = 0
    for i in range(start, n):
        a = offsets[i]
        s = offsets[i + 1] - a
        lab = labels[i]
        imp = weights[i]
        do_learn = learn and (not math.isnan(lab)) and imp > 0.0
        if do_learn and ints[2] + s > (cap >> 1):
            _symmetrize(K)
            return i, learned
        # ---- slots (learned examples insert; a new feature takes a pending sketch row) ----
        for k in range(s):
            key = np.int64(indices[a + k]) & mask
            r = _find(keys, key, shift, capmask)
            if r < 0:
                if do_learn:
                    r = -1 - r
                    keys[r] = key
                    ints[2] += 1
                    na = ints[1]
                    if na < m and (init_salt == 0 or _init_pick(key, init_salt)):
                        # SketchInit: row na of Z is the unit vector of this feature
                        tab[r, C_Z + na] = 1.0
                        assigned[na] = key
                        ints[1] = na + 1
                else:
                    r = -1
            slot_buf[k] = r
        if precond and do_learn:
            _update_scale(tab, slot_buf, values, a, s, b, m, dpow, vw_rule)
        # ---- pre-scaled example x~ = D_t^{-1/2} x (Sec. 5.2, paper order) ----
        ux = 0.0
        for r in range(m):
            z[r] = 0.0
        for k in range(s):
            sl = slot_buf[k]
            v = values[a + k]
            if sl >= 0:
                if fast:  # w_j = c_j + f_j (w~_j - snap_j), w~_j = u_bar_j + Z_j^T b kept for the flush
                    xk = v * tab[sl, cw + 3]
                    wt = tab[sl, C_U]
                    for r in range(m):
                        wt += tab[sl, C_Z + r] * b[r]
                    wt_buf[k] = wt
                    ux += tab[sl, cw] * v + (wt - tab[sl, cw + 1]) * xk
                    xt_buf[k] = xk
                    continue
                if precond:  # w_j = c_j + f_j (w~_j - snap_j)
                    xk = v * tab[sl, cw + 3]
                    ux += tab[sl, cw] * v - tab[sl, cw + 1] * xk
                else:
                    xk = v * _fscale(tab[sl, C_D], dpow) if diag else v
                ux += tab[sl, C_U] * xk
                for r in range(m):
                    z[r] += tab[sl, C_Z + r] * xk
            elif precond:
                xk = 0.0
            else:
                xk = v * _fscale(0.0, dpow) if diag else v
            xt_buf[k] = xk
        # ---- Alg. 4 line 4-5: projection (prediction = clip(u^T x, -C, C)) and prediction ----
        p0 = ux
        for r in range(m):
            p0 += b[r] * z[r]
        tau = _proj_excess(p0, proj_c)
        p = p0 - tau
        # squared loss: the prediction reported (and scored) is clipped to the range of the labels
        # learned so far, as VW reports it (its OjaNewton too); the model's own p is unchanged
        pc = min(max(p, flt[1]), flt[2]) if loss_code == SQUARED and clip else p
        pred_out[i] = pc
        if math.isnan(lab):
            loss_out[i] = math.nan
            continue
        y = target(loss_code, lab)
        loss_out[i] = loss_value(loss_code, pc, y)
        if not do_learn:
            continue
        learned += 1
        # ||x~||^2 with duplicate indices summed (fast path: recomputed with the new D below, the
        # only place it is used)
        xx = 0.0
        if not fast:
            for k in range(s):
                tab[slot_buf[k], C_S] = 0.0
            for k in range(s):
                tab[slot_buf[k], C_S] += xt_buf[k]
            for k in range(s):
                xx += xt_buf[k] * tab[slot_buf[k], C_S]
        tf = float(ints[0])
        if m > 0 and not fast:
            for r in range(m):
                acc = 0.0
                for q in range(r + 1):  # F is lower triangular
                    acc += F[r, q] * z[q]
                xh[r] = acc  # x^ = F Z x~ = V x~
                sl_ = lam[r] if sketch_avg else tf * lam[r]  # S^T S eigenvalue
                cc[r] = sl_ / (alpha + sl_)  # (t-1) Lambda H (paper) or Lambda H (avg)
        if tau != 0.0:
            den = xx
            for r in range(m):
                den -= cc[r] * xh[r] * xh[r]
            gam = tau / den
            # w_bar = u_bar - gamma x ;  b += gamma F^T (t-1) Lambda H x^   (Eq. 6)
            for k in range(s):
                tab[slot_buf[k], C_U] -= gam * xt_buf[k]
            for r in range(m):
                tmp[r] = gam * cc[r] * xh[r]
            _add_ft(F, tmp, b, yv)
        # ---- Alg. 4 line 6: gradient g = l'(p) x~ (times the importance weight) ----
        # squared loss: the derivative is taken at p clipped to the range of the labels learned so
        # far (flt[1:3], from [0, 0]), as VW's squared loss (and its OjaNewton) clips predictions to
        # its label range: |l'| <= 2 (max - min), so a step that overshoots cannot feed on itself
        pg = p
        if loss_code == SQUARED:
            if y < flt[1]:
                flt[1] = y
            if y > flt[2]:
                flt[2] = y
            if clip:
                pg = min(max(p, flt[1]), flt[2])
        dl = loss_deriv(loss_code, pg, y)
        gcoef = imp * dl  # g = gcoef * x~
        gs = dl * math.sqrt(sigma_eta * imp)  # to-sketch vector g^ = gs * x~
        if sketch_avg:  # g^ = sqrt(sigma_eta h) t^r l' x~ (t = this round): stationary scale
            t1 = float(ints[0] + 1)
            gs *= math.sqrt(t1) if r_avg == 0.5 else t1 ** r_avg
        if diag and diag_vw and dl != 0.0:
            # VW's order: D_{t+1} = D_t + h (l' x)^2 first, then the update uses D_{t+1}^{-r} x
            if fast:  # w~ was computed in the prediction loop and has not changed since
                for k in range(s):
                    _flush_to(tab, slot_buf[k], m, wt_buf[k])
            elif precond:
                _flush(tab, slot_buf, values, a, s, b, m, dpow)
            _accumulate_d(tab, slot_buf, values, a, s, imp * dl * dl, precond, m, dpow, vw_rule)
            xx = _rescale(tab, slot_buf, values, a, s, xt_buf, z, m, dpow, precond)
            for r in range(m):
                acc = 0.0
                for q in range(r + 1):
                    acc += F[r, q] * z[q]
                xh[r] = acc
        # ---- Alg. 5 SketchUpdate ----
        ints[0] += 1
        tf = float(ints[0])
        gam_t = gamma_c / (tf + gamma_t0)
        eta = 1.0 if step_power == 0.0 else tf ** step_power  # step multiplier eta_t = t^p
        if vw_rule and dl != 0.0:
            # VW's normalized rule, its global part (gd.cc average_update): the step is multiplied by
            # (sum h ||x / s||^2 / sum h)^(2r - 1) (r = 1/4: sqrt(sum h / sum h ||x / s||^2)), s the
            # per-feature scale max |x|, this example counted, duplicate indices summed
            for k in range(s):
                tab[slot_buf[k], C_S] = 0.0
            for k in range(s):
                tab[slot_buf[k], C_S] += values[a + k]
            nx = 0.0
            for k in range(s):
                sl = slot_buf[k]
                v = tab[sl, C_S]
                if v != 0.0:
                    nx += _sq(v) / tab[sl, cw + 2]
                    tab[sl, C_S] = 0.0
            flt[3] += imp * nx
            flt[4] += imp
            if flt[3] > 0.0:
                ratio = flt[4] / flt[3]
                eta *= math.sqrt(ratio) if dpow == 0.25 else ratio ** (1.0 - 2.0 * dpow)
        if m > 0:
            if dl == 0.0:
                for r in range(m):
                    lam[r] *= 1.0 - gam_t
            else:
                gg = gs * gs * xx
                # Oja's step on V (lines 2-3) is capped at Gamma ||g^||^2 <= oja_clip: a large step
                # turns the rows of V towards the latest gradient while Lambda keeps the old rows'
                # eigenvalues (the avg to-sketch scale keeps Gamma ||g^||^2 from decaying on sparse
                # data). Lambda (line 1) keeps Gamma_t.
                gam_v = gam_t
                if oja_clip > 0.0 and gam_t * gg > oja_clip:
                    gam_v = oja_clip / gg
                db = 0.0
                for r in range(m):
                    zg[r] = gs * z[r]  # Z g^
                    vg = gs * xh[r]  # F Z g^ = V g^
                    cv[r] = vg
                    lam[r] = (1.0 - gam_t) * lam[r] + gam_t * vg * vg  # line 1
                    delta[r] = gam_v * zg[r]  # line 2: delta = F^-1 Gamma F Z g^ (scalar Gamma)
                    db += delta[r] * b[r]
                # line 2: K += d g^T Z^T + Z g d^T + (g^T g) d d^T = beta zg zg^T, as d = Gamma zg
                beta_k = 2.0 * gam_v + gam_v * gam_v * gg
                # (the lower triangle only, row by row; the upper one is copied by _symmetrize where K
                # is read whole: before Gram-Schmidt and when the kernel returns)
                for r in range(m):
                    br = beta_k * zg[r]
                    for q in range(r + 1):
                        K[r, q] += br * zg[q]
                for k in range(s):  # line 3: Z += delta g^T ; Eq. 5: u_bar -= (delta^T b) g^
                    sl = slot_buf[k]
                    gk = gs * xt_buf[k]
                    for r in range(m):
                        tab[sl, C_Z + r] += delta[r] * gk
                    tab[sl, C_U] -= db * gk
                # line 4: F <- Decompose(F, K), unless Z is getting ill-conditioned. A
                # re-materialisation costs O(m^2 n) for n stored features, so above max_cond it
                # waits until n / REMAT_AMORTIZE examples were learned since the last one (the
                # cost per example stays O(m^2)); above HARD_COND * max_cond it is done at once.
                ok = False
                allow = (ints[0] - ints[4]) * REMAT_AMORTIZE >= max(ints[2], m)
                bound = flt[0] * (1.0 + gam_v * gg)
                if bound <= max_cond or not allow:
                    if ints[0] % reorth == 0:
                        _symmetrize(K)
                        ok = _decompose(F, K, Q, KQ, beta, Kb)
                        if ok:
                            for r in range(m):
                                for q in range(m):
                                    F[r, q] = Q[r, q]
                    else:
                        _refactor_rank1(F, cv, beta_k, beta, Kb)
                        ok = True
                    if ok:
                        flt[0] = _estimate_cond(F, K)
                remat_now = not ok or not (flt[0] <= HARD_COND * max_cond) or (allow and flt[0] > max_cond)
                if remat_now:
                    _symmetrize(K)
                    _rematerialize(keys, tab, F, K, b, ints[1])
                    flt[0] = _estimate_cond(F, K)
                    ints[3] += 1
                    ints[4] = ints[0]
                # Eq. 5: b += (1/alpha) F^T (t Lambda H) F Z g   (Z, F after the sketch update):
                # Z x~ after line 3 is z + delta (g^ . x~) = z + gs xx delta, O(m) (after a
                # re-materialisation Z is new: recomputed, O(m s))
                if remat_now:
                    for r in range(m):
                        z[r] = 0.0
                    for k in range(s):
                        sl = slot_buf[k]
                        xk = xt_buf[k]
                        for r in range(m):
                            z[r] += tab[sl, C_Z + r] * xk
                else:
                    for r in range(m):
                        z[r] += gs * xx * delta[r]
                qs = 0.0
                for r in range(m):
                    acc = 0.0
                    for q in range(r + 1):
                        acc += F[r, q] * z[q]
                    yv[r] = acc
                    sl_ = lam[r] if sketch_avg else tf * lam[r]
                    cc[r] = sl_ / (alpha + sl_)
                    qs += cc[r] * acc * acc
                if invariant:
                    gcoef = _invariant_coef(loss_code, pg, y, imp, eta, (xx - qs) / alpha, gcoef)
                for r in range(m):
                    tmp[r] = (gcoef * eta / alpha) * cc[r] * yv[r]
                _add_ft(F, tmp, b, Kb)
        elif invariant and gcoef != 0.0:
            gcoef = _invariant_coef(loss_code, pg, y, imp, eta, xx / alpha, gcoef)
        # Eq. 5: u_bar -= g / alpha
        if gcoef != 0.0:
            step = gcoef * eta / alpha
            for k in range(s):
                tab[slot_buf[k], C_U] -= step * xt_buf[k]
            # paper order (Sec. 5.2): D_{t+1} = D_t + h (l' x)^2 after the update
            if diag and not diag_vw:
                if precond:
                    _flush(tab, slot_buf, values, a, s, b, m, dpow)
                _accumulate_d(tab, slot_buf, values, a, s, imp * dl * dl, precond, m, dpow, vw_rule)
    _symmetrize(K)
    return n, learned


@njit(cache=True, nogil=True, inline="always")
def _invariant_coef(code, p, y, imp, eta, q, gcoef):
    """Importance-invariant Newton step (``--invariant``, default): the gradient coefficient ``c``
    of the step ``u <- w - eta c A^-1 x~`` that moves this example's prediction by ``-eta c q``
    (``q = x~^T A^-1 x~``) as h infinitesimal steps would (Karampatziakis & Langford 2011, as VW's
    getUpdate): for small ``eta h q`` it is ``h l'(p)`` (the paper's step), and it never steps past
    the label (squared), the margin (hinge) or the logistic loss's own fixed point, whatever alpha."""
    if not q > 0.0:
        return gcoef
    upd = invariant_step(code, p, y, eta * imp, q)
    if not math.isfinite(upd):
        return gcoef
    return -upd / eta


@njit(**INNER)
def _accumulate_d(tab, slot_buf, values, a, s, g2, precond, m, r, vwr):
    """D_j += g2 * x_j^2 in original coordinates, duplicate indices summed first (precond: and the
    cached frame scale follows)."""
    _sum_duplicates(tab, slot_buf, values, a, s)
    for k in range(s):
        sl = slot_buf[k]
        v = tab[sl, C_S]
        if v != 0.0:
            tab[sl, C_D] += g2 * v * v
            tab[sl, C_S] = 0.0
            if precond:
                _set_frame(tab, sl, m, r, vwr)


@njit(**INNER)
def _rescale(tab, slot_buf, values, a, s, xt_buf, z, m, dpow, precond):
    """x~ = D^{-r} x with the current D (precond: the normalised frame of _pscale); z = Z x~;
    returns ||x~||^2 (duplicates summed)."""
    for r in range(m):
        z[r] = 0.0
    for k in range(s):
        sl = slot_buf[k]
        if precond:
            xk = values[a + k] * tab[sl, C_Z + m + 3]
        else:
            xk = values[a + k] * _fscale(tab[sl, C_D], dpow)
        xt_buf[k] = xk
        for r in range(m):
            z[r] += tab[sl, C_Z + r] * xk
        tab[sl, C_S] = 0.0
    for k in range(s):
        tab[slot_buf[k], C_S] += xt_buf[k]
    xx = 0.0
    for k in range(s):
        xx += xt_buf[k] * tab[slot_buf[k], C_S]
    return xx


@njit(**KERNEL)
def rematerialize(keys, tab, F, K, b, n_assigned):
    """:func:`_rematerialize` callable from Python (tests, benchmarks)."""
    return _rematerialize(keys, tab, F, K, b, n_assigned)


@njit(**KERNEL)
def estimate_cond(F, K):
    """:func:`_estimate_cond` callable from Python (the learner's ``rematerialize``)."""
    return _estimate_cond(F, K)
