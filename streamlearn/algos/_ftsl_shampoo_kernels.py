"""Compiled kernels of :mod:`streamlearn.algos.ftsl_shampoo`: FTSL-Shampoo (Yang et al. 2025,
Alg. 5 with Alg. 4's general Frequent Directions) for the K x d weight matrix of softmax regression,
sparse in d.

Per example (unique features a, importance h, class y): scores ``s = W x`` with the dual-averaging
weights of Yang Eq. 3, ``W = -eta L~^{-1/4} Gbar R~^{-1/4}``, never stored:

* ``L~ = U diag(sigL^2) U^T + cL I`` (K x K, ``cL = eps + rho^L``; U orthonormal K x ellL, dense),
  ``L~^{-1/4} y = cL^{-1/4} y + U (dL * U^T y)``, ``dL = (sigL^2 + cL)^{-1/4} - cL^{-1/4}``;
* ``R~ = V^T diag(sigR^2) V + cR I`` (d x d), V (ellR x d, orthonormal rows) kept as ``V = F Z``
  (SON App. F's sparse basis, Luo et al. 2016): Z has ``rmax`` rows stored per feature seen (a hash
  table of the features seen, open addressing with Fibonacci hashing, the pattern of
  :mod:`streamlearn.algos._fd_son_kernels`), F is small (ellR x r);
  ``Gbar R~^{-1/4} x = cR^{-1/4} Gbar x + Q F^T (dR * F (Z x))`` with ``Q = Gbar Z^T`` (K x r)
  kept incrementally.

The gradient of the cross-entropy is rank one, ``G = h q a^T`` (``q = p - e_y``), so Alg. 4's
eigendecomposition of ``B B^T + G G^T`` (left) or ``B B^T + G^T G`` (right) is that of a thin
matrix: with the sketch ``B = U diag(sig)`` and the new vector v (``h ||a|| q`` left, ``h ||q|| a``
right) split as ``v = U t + n u`` (u a unit vector orthogonal to U), ``[B, v] = [U, u] C`` with
``C = [[diag sig, t], [0, n]]``, and the eigen-pairs come from the (ell + 1) x (ell + 1) matrix
``C C^T`` (:func:`_fd_step`). The first tau are kept, shrunk by the tau-th eigenvalue lambda_tau
(Alg. 4 line 3; a lambda_tau at or below 1e-16 lambda_1 counts as 0, as NOTES_ADA's guard), which
joins rho; directions shrunk to 0 are dropped from the basis (their term in the inverse roots is 0).

The right basis update ``V_new = A V + b a^T`` is sparse: ``F_new = [A F, b]`` and a is written as
a new row of Z on a's features (a rank-one sparse update). When Z's ``rmax = 3 tau + 1`` rows are
used (or F grows large) a re-base ``Z <- F Z, F = I`` empties them (F's condition number grows by
a factor of 10^2 to 10^3 per step on real data, so SON's ``Z += c a^T`` with ``F_new = A F`` would need
a re-base nearly every step). A re-base is lazy, as FD-SON's (:mod:`._fd_son_kernels`): recorded in
a history of suffix products (``S[g]`` takes a feature whose stamp is re-base ``hbase + g`` to the
current representation, O(tau^2 rmax) per held re-base to keep up to date) and applied to a feature
when it is next read (O(tau rmax)); once the history holds max(16, sqrt(n / 5)) re-bases every
feature is brought up to date, ``Q`` and ``Kz = Z Z^T`` (kept for V's orthonormality check) are
recomputed from the table and V is re-orthonormalised if rounding moved its Gram matrix off I. Per
example O(s rmax + K rmax + (tau + 1)^3 + K (tauL + 1)^2) (s features) plus O(tau rmax) per stale
feature read and an amortised O(tau^2 sqrt(n)) for n features seen; nothing is O(2^b).
"""
import math

import numpy as np
from numba import njit

from ..kernels._jit import INNER, KERNEL
from ._feature_table_kernels import EMPTY, _find, rehash  # noqa: F401 (rehash: the learner's table)
from ._rebase_history_kernels import _hist_push
from ._softmax_kernels import _softmax_record
from ._oja_son_kernels import _sort_by_key
from ._fd_son_kernels import _eigh  # numba's np.linalg.eigh needs scipy's LAPACK, which the CLI does not load

__all__ = ["shampoo_run", "rehash", "N_INTS"]

SHRINK_TOL = 1e-16  # a shrink lambda_tau <= SHRINK_TOL lambda_1 is round-off: 0 (NOTES_ADA)
NEW_DIR_TOL = 1e-10  # v has a new direction when ||v - U U^T v||^2 > NEW_DIR_TOL ||v||^2
F_MAX = 1e8  # re-base when an entry of F exceeds this
ORTH_TOL = 1e-10  # re-orthonormalise V at a re-base when its Gram matrix is this far from I

# ints: occupied keys, ellR, r (rows of Z in use), ellL, re-bases, re-orthonormalisations, the
# re-base count at the last flush (history base), Z's rows right after the last re-base, flushes
I_N, I_ELLR, I_R, I_ELLL, I_REBASE, I_ORTH, I_HBASE, I_RBASE, I_FLUSH = 0, 1, 2, 3, 4, 5, 6, 7, 8
N_INTS = 9


@njit(**INNER)
def _fd_step(sig2, ell, t, n, beta, tau, Y, sig2_new):
    """Alg. 4 lines 2-3 for ``B B^T + v v^T`` with ``B = U diag(sqrt(sig2[:ell]))`` and ``v = beta
    (U t + n u)``: eigen-pairs of ``C C^T`` (m = ell + (n > 0)), descending; the first tau kept and
    shrunk by lambda_tau. Writes the kept eigenvectors (coordinates in ``[U, u]``) to ``Y[:m, :k]``
    and their shrunk eigenvalues to ``sig2_new[:k]``; returns ``(k, lambda_tau)``."""
    m = ell + (1 if n > 0.0 else 0)
    if m == 0:
        return 0, 0.0
    S = np.zeros((m, m))
    c = np.empty(m)
    for i in range(ell):
        S[i, i] = sig2[i]
        c[i] = beta * t[i]
    if n > 0.0:
        c[ell] = beta * n
    for i in range(m):
        for j in range(m):
            S[i, j] += c[i] * c[j]
    lam, U = _eigh(S, np.bool_(True))
    lam1 = max(lam[m - 1], 0.0)
    lam_tau = 0.0
    if m >= tau:
        lam_tau = max(lam[m - tau], 0.0)
        if lam_tau <= SHRINK_TOL * lam1:
            lam_tau = 0.0
    k = 0
    for i in range(min(m, tau)):
        li = max(lam[m - 1 - i], 0.0) - lam_tau
        if li <= 0.0:
            break
        sig2_new[k] = li
        for j in range(m):
            Y[j, k] = U[j, m - 1 - i]
        k += 1
    return k, lam_tau


@njit(**INNER)
def _left_update(UL, sig2L, ints, flt, v, beta, tau, Y, sig2_new):
    """The left sketch (K x K, dense) takes ``beta^2 v v^T`` (``v = h q``, ``beta = ||a||``)."""
    K = UL.shape[0]
    ell = ints[I_ELLL]
    t = np.zeros(ell)
    r = v.copy()
    for _ in range(2):  # Gram-Schmidt twice
        for i in range(ell):
            dot = 0.0
            for c in range(K):
                dot += UL[c, i] * r[c]
            t[i] += dot
            for c in range(K):
                r[c] -= dot * UL[c, i]
    vv = 0.0
    rr = 0.0
    for c in range(K):
        vv += v[c] * v[c]
        rr += r[c] * r[c]
    n = math.sqrt(rr) if rr > NEW_DIR_TOL * vv else 0.0
    k, lam_tau = _fd_step(sig2L, ell, t, n, beta, tau, Y, sig2_new)
    new = np.zeros((K, k))
    for i in range(k):
        for c in range(K):
            acc = 0.0
            for j in range(ell):
                acc += UL[c, j] * Y[j, i]
            if n > 0.0:
                acc += r[c] / n * Y[ell, i]
            new[c, i] = acc
    for i in range(UL.shape[1]):
        for c in range(K):
            UL[c, i] = new[c, i] if i < k else 0.0
        sig2L[i] = sig2_new[i] if i < k else 0.0
    ints[I_ELLL] = k
    flt[0] += lam_tau


@njit(**INNER)
def _current(tab, s, K, S, ints, z):
    """Feature ``s``'s column of Z in the current representation (into ``z``, length rmax): its
    stored column if its stamp is the current re-base, else the suffix product S[g] of the re-bases
    since its stamp g applied to it (rows past the re-based ones are 0: the feature was in no
    example since)."""
    rmax = z.shape[0]
    st = np.int64(tab[s, K + rmax])
    if st == ints[I_REBASE]:
        for i in range(rmax):
            z[i] = tab[s, K + i]
        return
    g = st - ints[I_HBASE]
    rb = ints[I_RBASE]
    for i in range(rmax):
        acc = 0.0
        if i < rb:
            for j in range(rmax):
                acc += S[g, i, j] * tab[s, K + j]
        z[i] = acc


@njit(**INNER)
def _bring(tab, s, K, S, ints, z):
    """Bring feature ``s`` to the current representation in place (column and stamp)."""
    rmax = z.shape[0]
    if np.int64(tab[s, K + rmax]) == ints[I_REBASE]:
        return
    _current(tab, s, K, S, ints, z)
    for i in range(rmax):
        tab[s, K + i] = z[i]
    tab[s, K + rmax] = ints[I_REBASE]


@njit(**INNER)
def _inv_sqrt_sym(G):
    n = G.shape[0]
    lam, U = _eigh(G, np.bool_(True))
    T = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for k in range(n):
                acc += U[i, k] * U[j, k] / math.sqrt(max(lam[k], 1e-300))
            T[i, j] = acc
    return T


@njit(**INNER)
def _flush(keys, tab, K, Q, Kz, S, ints):
    """Every feature brought to the current representation, the history emptied, ``Q = Gbar Z^T``
    and ``Kz = Z Z^T`` recomputed from the table, V re-orthonormalised (``Z <- Kz^{-1/2} Z``) if
    rounding moved its Gram matrix off I. O(n rmax (tau + K)) for n features seen."""
    rmax = Kz.shape[0]
    ell = ints[I_R]  # = ellR, F = I (right after a re-base)
    z = np.zeros(rmax)
    for s in range(keys.shape[0]):
        if keys[s] != EMPTY:
            _bring(tab, s, K, S, ints, z)
    gram = np.zeros((ell, ell))
    for s in range(keys.shape[0]):
        if keys[s] == EMPTY:
            continue
        for i in range(ell):
            for j in range(ell):
                gram[i, j] += tab[s, K + i] * tab[s, K + j]
    off = 0.0
    for i in range(ell):
        for j in range(ell):
            off = max(off, abs(gram[i, j] - (1.0 if i == j else 0.0)))
    if off > ORTH_TOL and ell > 0:
        T = _inv_sqrt_sym(gram)
        for s in range(keys.shape[0]):
            if keys[s] == EMPTY:
                continue
            for i in range(ell):
                acc = 0.0
                for j in range(ell):
                    acc += T[i, j] * tab[s, K + j]
                z[i] = acc
            for i in range(ell):
                tab[s, K + i] = z[i]
        ints[I_ORTH] += 1
    for i in range(rmax):
        for j in range(rmax):
            Kz[i, j] = 0.0
        for c in range(K):
            Q[c, i] = 0.0
    for s in range(keys.shape[0]):
        if keys[s] == EMPTY:
            continue
        for i in range(ell):
            zi = tab[s, K + i]
            for j in range(ell):
                Kz[i, j] += zi * tab[s, K + j]
            for c in range(K):
                Q[c, i] += tab[s, c] * zi
    ints[I_HBASE] = ints[I_REBASE]
    ints[I_FLUSH] += 1


@njit(**INNER)
def _rebase(keys, tab, K, F, Q, Kz, S, ints, uslot, nu):
    """A re-base ``Z <- T Z``, ``F = I`` with ``T = F`` (times ``(F Kz F^T)^{-1/2}`` when rounding
    moved V's Gram matrix off I): recorded in the history of suffix products S (``S[g]`` takes a
    feature stamped with re-base ``hbase + g`` to the current one) and applied to the features of
    the current example (``uslot[:nu]``) only; the others catch up when next read (:func:`_current`).
    ``Q <- Q T^T`` and ``Kz <- T Kz T^T`` follow exactly. Once the history holds
    max(16, sqrt(n / 5)) re-bases (or is full) every feature is brought up to date
    (:func:`_flush`): per example amortised O(tau^2 rmax sqrt(n)) at most, with O(tau rmax) per
    stale feature read."""
    ell = ints[I_ELLR]
    r = ints[I_R]
    rmax = Kz.shape[0]
    T = np.zeros((ell, rmax))
    for i in range(ell):
        for j in range(r):
            T[i, j] = F[i, j]
    # Gram of V = F Z
    TK = np.zeros((ell, rmax))
    for i in range(ell):
        for j in range(r):
            acc = 0.0
            for k in range(r):
                acc += T[i, k] * Kz[k, j]
            TK[i, j] = acc
    gram = np.zeros((ell, ell))
    off = 0.0
    for i in range(ell):
        for j in range(ell):
            acc = 0.0
            for k in range(r):
                acc += TK[i, k] * T[j, k]
            gram[i, j] = acc
            off = max(off, abs(acc - (1.0 if i == j else 0.0)))
    if off > ORTH_TOL and ell > 0:
        T2 = _inv_sqrt_sym(gram)
        T3 = np.zeros((ell, rmax))
        for i in range(ell):
            for j in range(r):
                acc = 0.0
                for k in range(ell):
                    acc += T2[i, k] * T[k, j]
                T3[i, j] = acc
        T = T3
        ints[I_ORTH] += 1
    # Kz <- T Kz T^T, Q <- Q T^T
    for i in range(ell):  # T Kz (T as re-orthonormalised)
        for j in range(r):
            acc = 0.0
            for k in range(r):
                acc += T[i, k] * Kz[k, j]
            TK[i, j] = acc
    newK = np.zeros((ell, ell))
    for i in range(ell):
        for j in range(ell):
            acc = 0.0
            for k in range(r):
                acc += TK[i, k] * T[j, k]
            newK[i, j] = acc
    for i in range(rmax):
        for j in range(rmax):
            Kz[i, j] = newK[i, j] if i < ell and j < ell else 0.0
    K2 = Q.shape[0]
    newQ = np.zeros((K2, ell))
    for c in range(K2):
        for i in range(ell):
            acc = 0.0
            for j in range(r):
                acc += Q[c, j] * T[i, j]
            newQ[c, i] = acc
    for c in range(K2):
        for i in range(rmax):
            Q[c, i] = newQ[c, i] if i < ell else 0.0
    # history: S[g] <- T[:, :rb] S[g]; S[G] = T
    G = ints[I_REBASE] - ints[I_HBASE]
    _hist_push(S, G, T, ell, ints[I_RBASE])
    # the current example's features (current before): apply T now
    z = np.zeros(rmax)
    for u in range(nu):
        s = uslot[u]
        for i in range(ell):
            acc = 0.0
            for j in range(r):
                acc += T[i, j] * tab[s, K + j]
            z[i] = acc
        for i in range(rmax):
            tab[s, K + i] = z[i] if i < ell else 0.0
        tab[s, K + rmax] = ints[I_REBASE] + 1
    for i in range(F.shape[0]):
        for j in range(F.shape[1]):
            F[i, j] = 1.0 if i == j and i < ell else 0.0
    ints[I_R] = ell
    ints[I_RBASE] = ell
    ints[I_REBASE] += 1
    G += 1
    trig = max(16, np.int64(math.sqrt(ints[I_N] / 5.0)))
    if G >= min(trig, S.shape[0]):
        _flush(keys, tab, K, Q, Kz, S, ints)


@njit(**KERNEL)
def shampoo_run(offsets, indices, values, labels, weights, mask, learn, keys, tab, shift, F, sig2R, Q, Kz, S,
                UL, sig2L, ints, flt, eta, eps, tau_l, tau_r, pred_out, loss_out, prob_out):
    """Predict (argmax class id 1..K, ties to the lowest), record the cross-entropy and the
    probabilities (``prob_out``: ``(n, K)``, or ``(0, K)`` for none), then (if ``learn``) update,
    for every example in order. Features are ``index & mask``; the table ``(keys, tab)`` must have
    room for every new feature of the batch (the caller grows it). ``tab``: per feature ``[Gbar
    (K), Z (rmax)]``; ``F``: (tau_r + 1, rmax); ``Q``: (K, rmax); ``UL``: (K, tau_l);
    ``flt = [rho^L, rho^R]``. Returns the examples learned."""
    n_ex = labels.shape[0]
    K = UL.shape[0]
    rmax = tab.shape[1] - K - 1
    capmask = keys.shape[0] - 1
    keep = prob_out.shape[0] > 0
    maxs = 1
    for i in range(n_ex):
        maxs = max(maxs, offsets[i + 1] - offsets[i])
    slots = np.empty(maxs, np.int64)
    vals = np.empty(maxs)
    uslot = np.empty(maxs, np.int64)
    ua = np.empty(maxs)
    s = np.empty(K)
    p = np.empty(K)
    Gx = np.empty(K)
    zx = np.zeros(rmax)
    zt = np.zeros(rmax)
    vx = np.zeros(rmax)
    w = np.zeros(rmax)
    y = np.empty(K)
    out = np.empty(K)
    mr = tau_r + 1
    YR = np.zeros((mr, mr))
    YL = np.zeros((tau_l + 1, tau_l + 1))
    sigR_new = np.zeros(mr)
    sigL_new = np.zeros(tau_l + 1)
    learned = 0
    for ex in range(n_ex):
        a0 = offsets[ex]
        a1 = offsets[ex + 1]
        lab = labels[ex]
        ins = learn and not math.isnan(lab)
        # the example's features: slots (inserted when learning), duplicates summed
        cnt = 0
        for k in range(a0, a1):
            key = np.int64(indices[k]) & mask
            sl = _find(keys, key, shift, capmask)
            if sl < 0:
                if not ins:
                    continue
                sl = -1 - sl
                keys[sl] = key
                tab[sl, K + rmax] = ints[I_REBASE]
                ints[I_N] += 1
            slots[cnt] = sl
            vals[cnt] = values[k]
            cnt += 1
        _sort_by_key(slots[:cnt], vals[:cnt])  # in place, values along (numba's argsort: ~2.5 s to compile)
        nu = np.int64(0)  # not a literal 0: numba would also compile _rebase for the constant
        for k in range(cnt):
            sl = slots[k]
            if nu > 0 and uslot[nu - 1] == sl:
                ua[nu - 1] += vals[k]
            else:
                uslot[nu] = sl
                ua[nu] = vals[k]
                nu += 1
        ellR = ints[I_ELLR]
        r = ints[I_R]
        ellL = ints[I_ELLL]
        # scores s = -eta L~^{-1/4} (Gbar R~^{-1/4} x)
        for c in range(K):
            Gx[c] = 0.0
        for i in range(r):
            zx[i] = 0.0
        a2 = 0.0
        for u in range(nu):
            sl = uslot[u]
            x = ua[u]
            a2 += x * x
            if ins:
                _bring(tab, sl, K, S, ints, zt)
            _current(tab, sl, K, S, ints, zt)
            for c in range(K):
                Gx[c] += tab[sl, c] * x
            for i in range(r):
                zx[i] += zt[i] * x
        for i in range(ellR):
            acc = 0.0
            for j in range(r):
                acc += F[i, j] * zx[j]
            vx[i] = acc
        cR = eps + flt[1]
        qR = cR ** -0.25
        for j in range(r):
            w[j] = 0.0
        for i in range(ellR):
            di = ((sig2R[i] + cR) ** -0.25 - qR) * vx[i]
            if di != 0.0:
                for j in range(r):
                    w[j] += F[i, j] * di
        for c in range(K):
            acc = qR * Gx[c]
            for j in range(r):
                acc += Q[c, j] * w[j]
            y[c] = acc
        cL = eps + flt[0]
        qL = cL ** -0.25
        for c in range(K):
            out[c] = qL * y[c]
        for i in range(ellL):
            acc = 0.0
            for c in range(K):
                acc += UL[c, i] * y[c]
            acc *= (sig2L[i] + cL) ** -0.25 - qL
            for c in range(K):
                out[c] += UL[c, i] * acc
        for c in range(K):
            s[c] = -eta * out[c]
        if not _softmax_record(s, p, ex, lab, keep, pred_out, prob_out, loss_out):
            continue
        yc = np.int64(lab) - 1
        if not learn:
            continue
        learned += 1
        h = weights[ex]
        if h <= 0.0:
            continue
        # the gradient G = qh a^T, qh = h (p - e_y)
        p[yc] -= 1.0
        qq = 0.0
        for c in range(K):
            p[c] *= h
            qq += p[c] * p[c]
        if qq == 0.0 or a2 == 0.0:
            continue
        # Gbar += qh a^T; Q += qh (Z a)^T (Z before this example's change)
        for u in range(nu):
            sl = uslot[u]
            x = ua[u]
            for c in range(K):
                tab[sl, c] += p[c] * x
        for c in range(K):
            for j in range(r):
                Q[c, j] += p[c] * zx[j]
        # right sketch: B B^T + ||qh||^2 a a^T, a = V^T vx + n u
        vv = 0.0
        for i in range(ellR):
            vv += vx[i] * vx[i]
        n2 = a2 - vv
        nr = math.sqrt(n2) if n2 > NEW_DIR_TOL * a2 else 0.0
        fbig = False
        for i in range(ellR):
            for j in range(r):
                if abs(F[i, j]) > F_MAX:
                    fbig = True
        if (nr > 0.0 and r >= rmax) or fbig:
            _rebase(keys, tab, K, F, Q, Kz, S, ints, uslot, nu)
            r = ints[I_R]
            vv = 0.0
            for i in range(r):  # (F Z) x, as re-orthonormalised
                acc = 0.0
                for u in range(nu):
                    acc += tab[uslot[u], K + i] * ua[u]
                vx[i] = acc
                zx[i] = acc
                vv += acc * acc
            n2 = a2 - vv
            nr = math.sqrt(n2) if n2 > NEW_DIR_TOL * a2 else 0.0
        k, lam_tau = _fd_step(sig2R, ellR, vx, nr, math.sqrt(qq), tau_r, YR, sigR_new)
        # V_new = A V + b a^T: A[i, j] = Y[j, i] - Y[ell, i] vx[j] / n, b[i] = Y[ell, i] / n
        Fn = np.zeros((k, r + 1))
        for i in range(k):
            for jj in range(r):
                acc = 0.0
                for j in range(ellR):
                    aij = YR[j, i]
                    if nr > 0.0:
                        aij -= YR[ellR, i] * vx[j] / nr
                    acc += aij * F[j, jj]
                Fn[i, jj] = acc
            if nr > 0.0:
                Fn[i, r] = YR[ellR, i] / nr
        if nr > 0.0:  # a becomes row r of Z; Q's column r = Gbar a (Gbar updated); Kz = Z Z^T
            for u in range(nu):
                tab[uslot[u], K + r] = ua[u]
            for c in range(K):
                Q[c, r] = Gx[c] + p[c] * a2
            for i in range(r):
                Kz[i, r] = zx[i]
                Kz[r, i] = zx[i]
            Kz[r, r] = a2
            r += 1
        for i in range(F.shape[0]):
            for j in range(rmax):
                F[i, j] = Fn[i, j] if i < k and j < r else 0.0
            if i < sig2R.shape[0]:
                sig2R[i] = sigR_new[i] if i < k else 0.0
        ints[I_ELLR] = k
        ints[I_R] = r
        flt[1] += lam_tau
        # left sketch: B B^T + ||a||^2 qh qh^T
        _left_update(UL, sig2L, ints, flt, p, math.sqrt(a2), tau_l, YL, sigL_new)
    return learned
