"""Compiled kernels of :mod:`streamlearn.algos.compadagrad` (progressive validation inside).

:func:`comp_run` predicts, records, then learns every example in order: the count-sketch
CompAdaGrad step of the module docstring (subspace part: full-matrix AdaGrad on the k bucket
coordinates, an eigen-decomposition of a k x k matrix; complement part: diagonal AdaGrad's
step plus one lazily applied correction per touched bucket), or, at k = 0, diagonal AdaGrad
with ``--adaptive``'s operation order (:func:`streamlearn.algos._adagrad_kernels.adagrad_run`)
and, with ``--l1`` / ``--l2``, its composite (proximal) step applied lazily (Duchi et al. 2011,
Sec. 5).
"""
import math
from collections import namedtuple

import numpy as np
from numba import njit

from ..kernels._jit import INNER, KERNEL
from ._adagrad_kernels import X2_MIN, X_MIN, _sat32, _updates
from ._loss_kernels import deriv_tau, scalar_target, value_tau

__all__ = ["CompState", "CompHyper", "SrhtState", "comp_run", "srht_run", "map_of", "eigh", "weights_of",
           "check_list", "PINV_TOL"]

#: with no ridge (--subspace_delta 0): eigenvalues of Pi G Pi^T <= PINV_TOL x the largest count as 0
PINV_TOL = 1e-12

#: the learner's state (arrays; see CompAdaGrad._alloc). Tables of 2^b entries: ``w`` (the weights
#: as last materialised), ``G`` (diagonal AdaGrad's sum of squared gradients; G > 0: the feature
#: is in the subspace map), ``bsnap`` / ``rsnap`` (each feature's copy of its bucket's ``bsum`` /
#: ``rsum`` when it was last materialised; size 1 at k = 0), ``lastt`` (the round its --l1/--l2
#: steps were last applied; size 1 unless k = 0 with --l1/--l2). Per bucket: ``bsum`` (sum of
#: gamma_r a_r: the subspace steps, per unit of s_j), ``rsum`` (the complement corrections, per
#: unit of s_j / D_j), ``phi`` (sum of 1 / D_j over its features), ``nseen`` (its features).
#: ``S0``: Pi0 G Pi0^T with the unnormalised +-1 map. ``scal``: [min label, max label, rounds]. ``V``: the
#: eigenvectors of the last Gamma S0 Gamma (the next eigen step starts from them).
#: With ``--l1`` / ``--l2`` at k > 0 (the eager form, see :func:`_eager_step`) the weights ``w`` are
#: always materialised (``bsum``, ``rsum``, ``rsnap``, ``phi`` stay 0), ``lastt[j]`` links the features in
#: the map in the order they joined (the next one's coordinate + 1; 0 ends the list), ``bsnap[j]`` is
#: feature j's position in that order, and ``head`` = [first + 1, last + 1] (size 1, unused, otherwise).
CompState = namedtuple("CompState", ["w", "G", "bsnap", "rsnap", "lastt", "bsum", "rsum", "phi", "nseen", "S0",
                                     "scal", "V", "head"])
CompHyper = namedtuple("CompHyper", ["mask", "code", "k", "seed", "eta", "delta_r", "delta_c", "cw", "l1", "l2"])


@njit(**INNER)
def _mix(j, seed):
    """splitmix64's finaliser of ``j ^ seed`` (uint64): the map's hash."""
    z = np.uint64(j) ^ seed
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(**INNER)
def _bucket_sign(j, k, seed):
    """Coordinate ``j``'s bucket h(j) in [0, k) and sign s(j) = +-1 in the count-sketch map."""
    z = _mix(j, seed)
    r = np.int64((z & np.uint64(0xFFFFFFFF)) % np.uint64(k))
    s = 1.0 if (z >> np.uint64(63)) == np.uint64(0) else -1.0
    return r, s


@njit(**KERNEL)
def map_of(idx, k, seed, buckets, signs):
    """The map at the masked coordinates ``idx``: ``buckets[i], signs[i] = h(idx[i]), s(idx[i])``."""
    for i in range(idx.shape[0]):
        r, s = _bucket_sign(idx[i], k, seed)
        buckets[i] = r
        signs[i] = s


@njit(**INNER)
def _dc(Gj, delta_c, cw):
    """The complement's scale D_j = cw (sqrt(G_j) + delta_c) (cw = 1, delta_c = 0: AdaGrad's sqrt(G_j))."""
    return cw * (math.sqrt(Gj) + delta_c)


@njit(**INNER)
def _prox_rounds(wj, D, m, eta, l1, l2):
    """``m`` rounds of the composite step with no gradient, w <- soft(D w, eta l1) / (D + eta l2),
    in closed form: |w| <- f (|w| - c) with f = D / (D + eta l2), c = eta l1 / D, until it reaches 0."""
    if m <= 0 or wj == 0.0 or not D > 0.0:
        return wj
    u = abs(wj)
    f = D / (D + eta * l2)
    c = eta * l1 / D
    if c == 0.0:
        u = u * f ** m
    elif f == 1.0:
        u = u - m * c
    else:
        fix = f * c / (1.0 - f)
        u = f ** m * (u + fix) - fix
    if not u > 0.0:
        return 0.0
    return u if wj > 0.0 else -u


@njit(**INNER)
def _weight(st, hp, j):
    """Feature ``j``'s current weight from the lazy state (see the module docstring of
    :mod:`streamlearn.algos.compadagrad`)."""
    wj = st.w[j]
    Gj = st.G[j]
    if hp.k > 0 and st.lastt.shape[0] > 1:  # --l1 / --l2: the eager form keeps w materialised
        return wj
    if hp.k > 0:
        if Gj > 0.0:
            r, s = _bucket_sign(j, hp.k, hp.seed)
            wj += s * ((st.bsum[r] - st.bsnap[j]) + (st.rsum[r] - st.rsnap[j]) / _dc(Gj, hp.delta_c, hp.cw))
    elif st.lastt.shape[0] > 1:
        wj = _prox_rounds(wj, _dc(Gj, hp.delta_c, hp.cw), st.scal[2] - st.lastt[j], hp.eta, hp.l1, hp.l2)
    return wj


@njit(**KERNEL)
def weights_of(idx, st, hp, out):
    """``out[i]`` = the current weight of masked coordinate ``idx[i]`` (tests, --readable_model)."""
    for i in range(idx.shape[0]):
        out[i] = _weight(st, hp, np.int64(idx[i]))


@njit(**INNER)
def _jacobi_eigh(A, lam, V, warm=False):
    """Eigen-decomposition of the symmetric k x k ``A`` by cyclic Jacobi rotations (Golub & Van
    Loan Alg. 8.5.3, with their stable rotation formulas): ``lam`` (unordered) and ``V`` (columns)
    with A = V diag(lam) V^T. ``A`` is overwritten. Sweeps until every off-diagonal entry is below
    1e-15 of the Frobenius norm (at most 50 sweeps). ``warm``: ``A`` is W^T B W for the orthogonal
    ``W`` given in ``V`` (a previous eigenbasis: A nearly diagonal, few sweeps); the rotations are
    accumulated into it, so that B = V diag(lam) V^T."""
    n = A.shape[0]
    if not warm:
        for i in range(n):
            for j in range(n):
                V[i, j] = 1.0 if i == j else 0.0
    fro = 0.0
    for i in range(n):
        for j in range(n):
            fro += A[i, j] * A[i, j]
    tol = 1e-15 * math.sqrt(fro)
    for _ in range(50):
        off = 0.0
        for p in range(n):
            for q in range(p + 1, n):
                off = max(off, abs(A[p, q]))
        if off <= tol:
            break
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = A[p, q]
                if abs(apq) <= tol:
                    continue
                theta = (A[q, q] - A[p, p]) / (2.0 * apq)
                t = (1.0 if theta >= 0.0 else -1.0) / (abs(theta) + math.sqrt(theta * theta + 1.0))
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for r in range(n):  # A <- A J (columns p, q)
                    arp = A[r, p]
                    arq = A[r, q]
                    A[r, p] = c * arp - s * arq
                    A[r, q] = s * arp + c * arq
                for r in range(n):  # A <- J^T A (rows p, q)
                    apr = A[p, r]
                    aqr = A[q, r]
                    A[p, r] = c * apr - s * aqr
                    A[q, r] = s * apr + c * aqr
                A[p, q] = 0.0
                A[q, p] = 0.0
                for r in range(n):
                    vrp = V[r, p]
                    vrq = V[r, q]
                    V[r, p] = c * vrp - s * vrq
                    V[r, q] = s * vrp + c * vrq
    for i in range(n):
        lam[i] = A[i, i]


@njit(**KERNEL)
def eigh(A, lam, V):
    """:func:`_jacobi_eigh` called from Python (tests)."""
    _jacobi_eigh(A, lam, V)


@njit(**INNER)
def _eigen_update(st, hp, z0, imp, gam, z, M, lam, V, tmp2):
    """S0 += imp z0 z0^T, gamma_r = n_r^-1/2, z = Gamma z0, and the eigen-pairs ``lam``, ``V`` (columns)
    of Pi G Pi^T = Gamma S0 Gamma (Jacobi started from the last eigenbasis ``st.V``, which it becomes)."""
    k = hp.k
    for r in range(k):
        n = st.nseen[r]
        gam[r] = 1.0 / math.sqrt(n) if n > 0.0 else 0.0
        z[r] = gam[r] * z0[r]
    for p in range(k):
        for q in range(k):
            st.S0[p, q] += imp * z0[p] * z0[q]
    for p in range(k):
        for q in range(k):
            tmp2[p, q] = gam[p] * st.S0[p, q] * gam[q]
    W = st.V  # M = W^T (Gamma S0 Gamma) W: nearly diagonal in the last eigenbasis
    for p in range(k):
        for q in range(k):
            acc = 0.0
            for r in range(k):
                acc += tmp2[p, r] * W[r, q]
            V[p, q] = acc
    for p in range(k):
        for q in range(p, k):
            acc = 0.0
            for r in range(k):
                acc += W[r, p] * V[r, q]
            M[p, q] = acc
            M[q, p] = acc
    for p in range(k):
        for q in range(k):
            V[p, q] = W[p, q]
    _jacobi_eigh(M, lam, V, True)
    for p in range(k):
        for q in range(k):
            W[p, q] = V[p, q]


@njit(**INNER)
def _kappa(lam, hp, kap):
    """The eigenvalues of K = (Pi G Pi^T + delta_r I)^{1/2} from those of Pi G Pi^T; with no ridge
    (delta_r = 0), eigenvalues <= PINV_TOL x the largest count as 0 (as in :func:`_subspace_step`)."""
    top = 0.0
    for r in range(lam.shape[0]):
        top = max(top, lam[r])
    for r in range(lam.shape[0]):
        lr = max(lam[r], 0.0)
        if hp.delta_r > 0.0:
            kap[r] = math.sqrt(lr + hp.delta_r)
        elif lr > PINV_TOL * top and lr > 0.0:
            kap[r] = math.sqrt(lr)
        else:
            kap[r] = 0.0


@njit(**INNER)
def _subspace_step(st, hp, z0, imp, us, gam, z, M, lam, V, tmp, tmp2):
    """Full-matrix AdaGrad on the bucket coordinates (Mehta Lemma 5 with lambda = 0, unscaled map):
    S0 += imp z0 z0^T, S = Gamma S0 Gamma, z = Gamma z0, a = us K^+ z (us = -eta imp) with K = (S + delta_r I)^{1/2};
    each bucket's features move by s_j gamma_r a_r: ``bsum[r] += gamma_r a_r``."""
    k = hp.k
    _eigen_update(st, hp, z0, imp, gam, z, M, lam, V, tmp2)
    top = 0.0
    for r in range(k):
        top = max(top, lam[r])
    for r in range(k):  # tmp = diag((lam + delta_r)^-1/2) V^T z (pseudo-inverse without a ridge)
        lr = max(lam[r], 0.0)
        acc = 0.0
        for q in range(k):
            acc += V[q, r] * z[q]
        if hp.delta_r > 0.0:
            tmp[r] = acc / math.sqrt(lr + hp.delta_r)
        elif lr > PINV_TOL * top and lr > 0.0:
            tmp[r] = acc / math.sqrt(lr)
        else:
            tmp[r] = 0.0
    for r in range(k):
        a = 0.0
        for q in range(k):
            a += V[r, q] * tmp[q]
        st.bsum[r] += gam[r] * (us * a)


@njit(**INNER)
def _gauss_solve(J, rhs, m):
    """Solve J[:m, :m] x = rhs[:m] in place (Gaussian elimination with partial pivoting; ``rhs``
    becomes x, ``J`` is overwritten). Returns False if a pivot is exactly 0."""
    for c in range(m):
        piv = c
        big = abs(J[c, c])
        for r in range(c + 1, m):
            if abs(J[r, c]) > big:
                big = abs(J[r, c])
                piv = r
        if big == 0.0:
            return False
        if piv != c:
            for q in range(m):
                t = J[c, q]
                J[c, q] = J[piv, q]
                J[piv, q] = t
            t = rhs[c]
            rhs[c] = rhs[piv]
            rhs[piv] = t
        for r in range(c + 1, m):
            f = J[r, c] / J[c, c]
            if f != 0.0:
                for q in range(c, m):
                    J[r, q] -= f * J[c, q]
                rhs[r] -= f * rhs[c]
    for c in range(m - 1, -1, -1):
        acc = rhs[c]
        for q in range(c + 1, m):
            acc -= J[c, q] * rhs[q]
        rhs[c] = acc / J[c, c]
    return True


@njit(**INNER)
def _l1_eval(k, N, bk, sg, gam, Dp, c0, Kp, Cp, a, nu, lam1, xv, pat, F, alpha, cnt, zeta):
    """The optimality system of the l1 step in the variables (a, nu) (see :func:`_eager_step`):
    x_p = soft(c0_p + s_p gamma_r (D'_p a_r - nu_r), lam1) / D'_p for every feature p of the map,
    F[:k] = K' a - Pi D' x + Gamma^2 C' a - nu (the stationarity in a), F[k:] = Pi x - a (the
    constraint); the pattern ``pat`` (-1, 0, +1: x_p < 0, = 0, > 0) and the pieces of the Jacobian:
    ``alpha_r`` = gamma_r^2 sum of D' over the zeros of bucket r, ``cnt_r`` its non-zeros, ``zeta_r`` =
    gamma_r^2 sum of 1 / D' over them. Returns ||F||^2."""
    for r in range(k):
        F[r] = 0.0
        F[k + r] = 0.0
        alpha[r] = 0.0
        cnt[r] = 0.0
        zeta[r] = 0.0
    for p in range(N):
        r = bk[p]
        v = c0[p] + sg[p] * gam[r] * (Dp[p] * a[r] - nu[r])
        if v > lam1:
            x = (v - lam1) / Dp[p]
            pat[p] = 1
        elif v < -lam1:
            x = (v + lam1) / Dp[p]
            pat[p] = -1
        else:
            x = 0.0
            pat[p] = 0
        xv[p] = x
        if pat[p] != 0:
            cnt[r] += 1.0
            zeta[r] += 1.0 / Dp[p]
        else:
            alpha[r] += Dp[p]
        F[r] -= sg[p] * Dp[p] * x
        F[k + r] += sg[p] * x
    nrm = 0.0
    for r in range(k):
        g2 = gam[r] * gam[r]
        acc = 0.0
        for q in range(k):
            acc += Kp[r, q] * a[q]
        F[r] = acc + gam[r] * F[r] + g2 * Cp[r] * a[r] - nu[r]
        F[k + r] = gam[r] * F[k + r] - a[r]
        alpha[r] *= g2
        zeta[r] *= g2
        nrm += F[r] * F[r] + F[k + r] * F[k + r]
    return nrm


@njit(**INNER)
def _eager_step(st, hp, N, coord, bk, sg, gv, gam, lam, V, kap, Dv, wv, xv, c0, Dp, pat, pat2, ks):
    """One composite step (Mehta Eq. 2 with phi = l2/2 ||x||^2 + l1 ||x||_1) on every feature of the map,
    the weights materialised (O(N k + k^3), N features in the map): with ``g`` = eta imp l' x
    (``gv`` by position), b = Pi x_t, lambda2 = eta l2, lambda1 = eta l1, A = Pi^T K Pi + P_perp D P_perp:

    * l1 = 0: the step decouples (Mehta Sec. 4.1, unscaled map): the subspace part Pi^T a with
      a = (K + lambda2 I)^-1 (K b - Pi g) (Lemma 5); the complement part, per bucket r (Lemma 6: Pi D Pi^T
      is diagonal, the buckets being disjoint), x_j = (y_j - s_j gamma_r nu_r) / (D_j + lambda2) with
      y = -P_perp g + D P_perp x_t and gamma_r nu_r = sum s_j y_j / (D_j + lambda2) / sum 1 / (D_j + lambda2)
      (the value that makes the part orthogonal to row r).
    * l1 > 0: argmin <u, x> + 1/2 x^T A' x + lambda1 ||x||_1, u = g - A x_t, A' = A + lambda2 I =
      Pi^T K' Pi + P_perp D' P_perp (K' = K + lambda2 I, D' = D + lambda2 I) (the LASSO of Mehta Sec. 4.2).
      With a = Pi x as a variable and nu its multiplier, x is separable given (a, nu): x_j = soft(D'_j
      s_j gamma_r a_r - u_j - s_j gamma_r nu_r, lambda1) / D'_j, and (a, nu) solves the 2k piecewise-linear
      equations of :func:`_l1_eval`, by Newton's method (halving the step while ||F|| does not fall).
      Once a full step keeps the pattern of zeros and signs, F is linear along it and the step is
      exact: it stops there (or after 200 steps).
    Returns the number of Newton steps (0 for l1 = 0)."""
    k = hp.k
    lam2 = hp.eta * hp.l2
    lam1 = hp.eta * hp.l1
    w = st.w
    b = ks[0]
    pg = ks[1]
    tmp = ks[2]
    anew = ks[3]
    t1 = ks[4]
    t2 = ks[5]
    for r in range(k):
        b[r] = 0.0
        pg[r] = 0.0
    for p in range(N):
        j = coord[p]
        Dv[p] = _dc(st.G[j], hp.delta_c, hp.cw)
        wv[p] = w[j]
        r = bk[p]
        b[r] += sg[p] * wv[p]
        pg[r] += sg[p] * gv[p]
    for r in range(k):
        b[r] *= gam[r]
        pg[r] *= gam[r]
    if lam1 == 0.0:
        for i in range(k):
            cb = 0.0
            cg = 0.0
            for q in range(k):
                cb += V[q, i] * b[q]
                cg += V[q, i] * pg[q]
            tmp[i] = (kap[i] * cb - cg) / (kap[i] + lam2)
        for r in range(k):
            acc = 0.0
            for i in range(k):
                acc += V[r, i] * tmp[i]
            anew[r] = acc
            t1[r] = 0.0
            t2[r] = 0.0
        for p in range(N):
            r = bk[p]
            den = Dv[p] + lam2
            yv = -(gv[p] - sg[p] * gam[r] * pg[r]) + Dv[p] * (wv[p] - sg[p] * gam[r] * b[r])
            xv[p] = yv
            t1[r] += sg[p] * yv / den
            t2[r] += 1.0 / den
        for r in range(k):
            t1[r] = t1[r] / t2[r] if t2[r] > 0.0 else 0.0
        for p in range(N):
            r = bk[p]
            w[coord[p]] = sg[p] * gam[r] * anew[r] + (xv[p] - sg[p] * t1[r]) / (Dv[p] + lam2)
        return 0
    # l1 > 0: -u = -g + A x_t per feature, with Kb = K b, qq_r = gamma_r sum s D w, cc_r = gamma_r^2 sum D
    Kb = ks[6]
    qq = ks[7]
    cc = ks[8]
    Cp = ks[9]
    a = ks[10]
    nu = ks[11]
    alpha = ks[12]
    cnt = ks[13]
    zeta = ks[14]
    F = np.empty(2 * k)
    F2 = np.empty(2 * k)
    d = np.empty(2 * k)
    a2 = np.empty(k)
    nu2 = np.empty(k)
    Kp = np.empty((k, k))
    J = np.empty((2 * k, 2 * k))
    for i in range(k):
        cb = 0.0
        for q in range(k):
            cb += V[q, i] * b[q]
        tmp[i] = kap[i] * cb
    for r in range(k):
        acc = 0.0
        for i in range(k):
            acc += V[r, i] * tmp[i]
        Kb[r] = acc
        for q in range(k):
            acc = 0.0
            for i in range(k):
                acc += V[r, i] * (kap[i] + lam2) * V[q, i]
            Kp[r, q] = acc
        qq[r] = 0.0
        cc[r] = 0.0
        Cp[r] = 0.0
    for p in range(N):
        r = bk[p]
        qq[r] += sg[p] * Dv[p] * wv[p]
        cc[r] += Dv[p]
        Dp[p] = Dv[p] + lam2
        Cp[r] += Dp[p]
    for r in range(k):
        qq[r] *= gam[r]
        cc[r] *= gam[r] * gam[r]
        a[r] = b[r]
        nu[r] = Kb[r] - qq[r] + cc[r] * b[r]
    for p in range(N):
        r = bk[p]
        c0[p] = Dv[p] * wv[p] - gv[p] + sg[p] * gam[r] * (Kb[r] - qq[r] + cc[r] * b[r] - Dv[p] * b[r])
    nrm = _l1_eval(k, N, bk, sg, gam, Dp, c0, Kp, Cp, a, nu, lam1, xv, pat, F, alpha, cnt, zeta)
    its = 0
    while its < 200 and nrm > 0.0:
        its += 1
        for r in range(2 * k):
            for q in range(2 * k):
                J[r, q] = 0.0
        for r in range(k):
            g2 = gam[r] * gam[r]
            for q in range(k):
                J[r, q] = Kp[r, q]
            J[r, r] += alpha[r]
            J[r, k + r] = g2 * cnt[r] - 1.0
            J[k + r, r] = g2 * cnt[r] - 1.0
            J[k + r, k + r] = -zeta[r]
        for r in range(2 * k):
            d[r] = -F[r]
        if not _gauss_solve(J, d, 2 * k):
            break
        t = 1.0
        while True:
            for r in range(k):
                a2[r] = a[r] + t * d[r]
                nu2[r] = nu[r] + t * d[k + r]
            nrm2 = _l1_eval(k, N, bk, sg, gam, Dp, c0, Kp, Cp, a2, nu2, lam1, xv, pat2, F2, alpha, cnt, zeta)
            if nrm2 < nrm or t < 1e-12:
                break
            t *= 0.5
        same = True
        for p in range(N):
            if pat2[p] != pat[p]:
                same = False
            pat[p] = pat2[p]
        for r in range(k):
            a[r] = a2[r]
            nu[r] = nu2[r]
        for r in range(2 * k):
            F[r] = F2[r]
        nrm = nrm2
        if t == 1.0 and same:
            break
    for p in range(N):  # xv holds x at (a, nu), the last point evaluated
        w[coord[p]] = xv[p]
    return its


@njit(**KERNEL)
def comp_run(offsets, indices, values, labels, weights, learn, st, hp, pred_out, loss_out, raw_out):
    """Predict, record, then (if ``learn``) update, for every example in order; returns the number
    of examples learned from. ``raw_out``: the score before the label-range clip (``-r``)."""
    k = hp.k
    mask = hp.mask
    code = hp.code
    eta = hp.eta
    prox = k == 0 and st.lastt.shape[0] > 1
    f32 = k == 0 and not prox  # --algo adagrad --adaptive: float32 state
    kk = max(k, 1)
    z0 = np.zeros(kk)
    psi = np.zeros(kk)
    touched = np.zeros(kk, np.bool_)
    gam = np.zeros(kk)
    z = np.zeros(kk)
    M = np.zeros((kk, kk))
    lam = np.zeros(kk)
    V = np.zeros((kk, kk))
    M2 = np.zeros((kk, kk))
    tmp = np.zeros(kk)
    scal = st.scal
    w = st.w
    G = st.G
    n = labels.shape[0]
    learned = 0
    # --l1 / --l2 at k > 0: the eager form; the features of the map in the order they joined
    eager = k > 0 and st.lastt.shape[0] > 1
    N = np.int64(0)  # not a literal 0: numba would also compile _eager_step and _l1_eval for the constant
    cap = 1
    if eager:
        for r in range(k):
            N += np.int64(st.nseen[r])
        cap = N + (offsets[n] - offsets[0]) + 1
    coord = np.zeros(cap, np.int64)
    bk = np.zeros(cap, np.int64)
    sg = np.zeros(cap)
    gv = np.zeros(cap)
    Dv = np.zeros(cap)
    wv = np.zeros(cap)
    xv = np.zeros(cap)
    c0 = np.zeros(cap)
    Dp = np.zeros(cap)
    pat = np.zeros(cap, np.int8)
    pat2 = np.zeros(cap, np.int8)
    ks = np.zeros((15, kk))
    kap = np.zeros(kk)
    if eager:
        jn = np.int64(st.head[0])
        pw = 0
        while jn > 0 and pw < N:  # the list was checked when the model was loaded
            j = jn - 1
            coord[pw] = j
            r, s = _bucket_sign(j, k, hp.seed)
            bk[pw] = r
            sg[pw] = s
            pw += 1
            jn = np.int64(st.lastt[j])
    for i in range(n):
        a0 = offsets[i]
        b0 = offsets[i + 1]
        lab = labels[i]
        labeled = not math.isnan(lab)
        y = scalar_target(code, lab) if labeled else 0.0
        if learn and labeled:  # VW's scorer: the label range grows before the prediction (as adagrad)
            if y < scal[0]:
                scal[0] = y
            if y > scal[1]:
                scal[1] = y
        p = 0.0
        if k == 0 and not prox:
            for e in range(a0, b0):
                p += w[np.int64(indices[e]) & mask] * values[e]
        else:
            for e in range(a0, b0):
                p += _weight(st, hp, np.int64(indices[e]) & mask) * values[e]
        raw_out[i] = p
        if p < scal[0]:
            p = scal[0]
        elif p > scal[1]:
            p = scal[1]
        pred_out[i] = p
        if not labeled:
            loss_out[i] = math.nan
            continue
        lv = value_tau(code, p, y, 0.5)
        loss_out[i] = lv
        if not learn:
            continue
        imp = weights[i]
        learned += 1
        if imp <= 0.0:
            continue
        scal[2] += 1.0  # rounds: the composite step applies to every feature in every round
        t = scal[2]
        if eager:  # every round moves every feature of the map (the composite step), with g = 0 too
            dl = deriv_tau(code, p, y, 0.5) if _updates(code, p, y, lv) else 0.0
            g2 = imp * dl * dl
            for r in range(k):
                z0[r] = 0.0
            if g2 != 0.0:
                for e in range(a0, b0):
                    j = np.int64(indices[e]) & mask
                    x2 = values[e] * values[e]
                    if x2 < X2_MIN:
                        x2 = X2_MIN
                    Gold = G[j]
                    Gnew = _sat32(Gold + g2 * x2)
                    G[j] = Gnew
                    if Gold == 0.0 and Gnew > 0.0:  # joins the map (weight 0): appended to the list
                        r, s = _bucket_sign(j, k, hp.seed)
                        coord[N] = j
                        bk[N] = r
                        sg[N] = s
                        st.bsnap[j] = N
                        st.lastt[j] = 0.0
                        if st.head[1] > 0.0:
                            st.lastt[np.int64(st.head[1]) - 1] = j + 1.0
                        else:
                            st.head[0] = j + 1.0
                        st.head[1] = j + 1.0
                        st.nseen[r] += 1.0
                        N += 1
                for e in range(a0, b0):
                    j = np.int64(indices[e]) & mask
                    if G[j] > 0.0:
                        x = values[e]
                        if x * x < X2_MIN:
                            x = X_MIN if x > 0 else -X_MIN
                        r, s = _bucket_sign(j, k, hp.seed)
                        z0[r] += s * (dl * x)
                        gv[np.int64(st.bsnap[j])] += (eta * imp) * dl * x
            _eigen_update(st, hp, z0, imp, gam, z, M, lam, V, M2)
            _kappa(lam, hp, kap)
            _eager_step(st, hp, N, coord, bk, sg, gv, gam, lam, V, kap, Dv, wv, xv, c0, Dp, pat, pat2, ks)
            if g2 != 0.0:
                for e in range(a0, b0):
                    j = np.int64(indices[e]) & mask
                    if G[j] > 0.0:
                        gv[np.int64(st.bsnap[j])] = 0.0
            continue
        if not _updates(code, p, y, lv):
            continue
        dl = deriv_tau(code, p, y, 0.5)
        g2 = imp * dl * dl
        if g2 == 0.0:
            continue
        # 1. materialise the lazy parts of x's features (old D_j), then G += imp g^2 (adagrad's order)
        ppu = 0.0
        for e in range(a0, b0):
            j = np.int64(indices[e]) & mask
            x = values[e]
            x2 = x * x
            if x2 < X2_MIN:
                x2 = X2_MIN
            Gold = G[j]
            if k > 0:
                r, s = _bucket_sign(j, k, hp.seed)
                if Gold > 0.0:
                    Dold = _dc(Gold, hp.delta_c, hp.cw)
                    w[j] = _sat32(w[j] + s * ((st.bsum[r] - st.bsnap[j]) + (st.rsum[r] - st.rsnap[j]) / Dold))
                    st.bsnap[j] = st.bsum[r]
                    st.rsnap[j] = st.rsum[r]
            elif prox:
                w[j] = _prox_rounds(w[j], _dc(Gold, hp.delta_c, hp.cw), t - 1.0 - st.lastt[j], eta, hp.l1, hp.l2)
                st.lastt[j] = t - 1.0
            Gnew = _sat32(Gold + g2 * x2)
            if f32:
                Gnew = np.float64(np.float32(Gnew))
            G[j] = Gnew
            if k > 0:
                if Gold > 0.0:
                    st.phi[r] += 1.0 / _dc(Gnew, hp.delta_c, hp.cw) - 1.0 / _dc(Gold, hp.delta_c, hp.cw)
                elif Gnew > 0.0:  # joins the map: weight 0, its bucket's sums as they are now
                    st.nseen[r] += 1.0
                    st.phi[r] += 1.0 / _dc(Gnew, hp.delta_c, hp.cw)
                    st.bsnap[j] = st.bsum[r]
                    st.rsnap[j] = st.rsum[r]
            d = _dc(Gnew, hp.delta_c, hp.cw)
            if d > 0.0:
                ppu += x2 / d
        if ppu <= 0.0:
            continue
        upd = -(eta * imp) * dl  # adagrad: us = eta imp; upd = -us dl
        # 2. the subspace step (its features move through bsum)
        if k > 0:
            for r in range(k):
                z0[r] = 0.0
                psi[r] = 0.0
                touched[r] = False
            for e in range(a0, b0):
                j = np.int64(indices[e]) & mask
                if G[j] > 0.0:
                    x = values[e]
                    if x * x < X2_MIN:
                        x = X_MIN if x > 0 else -X_MIN
                    r, s = _bucket_sign(j, k, hp.seed)
                    z0[r] += s * (dl * x)
            _subspace_step(st, hp, z0, imp, -(eta * imp), gam, z, M, lam, V, tmp, M2)
        # 3. the complement step: diagonal AdaGrad's on x's features, then each touched bucket's
        #    correction (rsum) that keeps the step orthogonal to the map's rows
        for e in range(a0, b0):
            j = np.int64(indices[e]) & mask
            x = values[e]
            if x * x < X2_MIN:
                x = X_MIN if x > 0 else -X_MIN
            d = _dc(G[j], hp.delta_c, hp.cw)
            if d > 0.0:
                step = upd * x / d
                v = _sat32(w[j] + step)
                if f32:
                    v = np.float64(np.float32(v))
                w[j] = v
                if k > 0:
                    r, s = _bucket_sign(j, k, hp.seed)
                    psi[r] += s * step
                    touched[r] = True
        if k > 0:
            for r in range(k):
                if touched[r] and st.phi[r] > 0.0:
                    st.rsum[r] -= psi[r] / st.phi[r]
        elif prox:  # this round's composite step on x's features (once per feature)
            for e in range(a0, b0):
                j = np.int64(indices[e]) & mask
                if st.lastt[j] < t:
                    d = _dc(G[j], hp.delta_c, hp.cw)
                    if d > 0.0:
                        rj = d * w[j]
                        mag = abs(rj) - eta * hp.l1
                        w[j] = (mag if rj > 0.0 else -mag) / (d + eta * hp.l2) if mag > 0.0 else 0.0
                    st.lastt[j] = t
    return learned


@njit(**KERNEL)
def check_list(st, hp):
    """The eager form's list of the features in the map (see ``CompState``), as loaded from a model
    file: True if it visits each feature with G > 0 once, bucket counts as ``nseen``, positions in
    ``bsnap`` in order, and ends at ``head[1]`` (no cycle: at most sum(nseen) steps)."""
    k = hp.k
    size = st.G.shape[0]
    N = 0
    for r in range(k):
        N += np.int64(st.nseen[r])
    cnt = np.zeros(k)
    jn = np.int64(st.head[0])
    last = 0
    pw = 0
    while jn > 0:
        if pw >= N or jn > size:
            return False
        j = jn - 1
        if not st.G[j] > 0.0 or st.bsnap[j] != pw:
            return False
        r, s = _bucket_sign(j, k, hp.seed)
        cnt[r] += 1.0
        pw += 1
        last = jn
        jn = np.int64(st.lastt[j])
    if pw != N or last != np.int64(st.head[1]):
        return False
    for r in range(k):
        if cnt[r] != st.nseen[r]:
            return False
    return True


# -- the paper's SRHT map (--subspace_map srht): dense, O(k 2^b log 2^b) per example -----------

SrhtState = namedtuple("SrhtState", ["w", "G", "signs", "rows", "S", "scal"])


@njit(**INNER)
def _fwht(v):
    """In place: v <- H v with the orthogonal Walsh-Hadamard matrix H (Sylvester order, entries
    +-1/sqrt(n)); n = len(v) a power of two. O(n log n)."""
    n = v.shape[0]
    h = 1
    while h < n:
        for i in range(0, n, 2 * h):
            for j in range(i, i + h):
                a = v[j]
                b = v[j + h]
                v[j] = a + b
                v[j + h] = a - b
        h *= 2
    c = 1.0 / math.sqrt(n)
    for i in range(n):
        v[i] *= c


@njit(**INNER)
def _pi(v, signs, rows, out, tmp):
    """out = Pi v = R H Sigma v (k values)."""
    for i in range(v.shape[0]):
        tmp[i] = signs[i] * v[i]
    _fwht(tmp)
    for r in range(rows.shape[0]):
        out[r] = tmp[rows[r]]


@njit(**INNER)
def _pi_t(c, signs, rows, out):
    """out = Pi^T c = Sigma H R^T c (n values)."""
    out[:] = 0.0
    for r in range(rows.shape[0]):
        out[rows[r]] = c[r]
    _fwht(out)
    for i in range(out.shape[0]):
        out[i] *= signs[i]


@njit(**KERNEL)
def srht_run(offsets, indices, values, labels, weights, learn, st, hp, pred_out, loss_out, raw_out):
    """Mehta Eq. 5 exactly, with the unscaled SRHT Pi = R H Sigma (orthonormal rows) over all n = 2^b
    coordinates: K = (Pi G Pi^T + delta_r I)^{1/2}, D = cw (diag(G_perp)^{1/2} + delta_c), the step by
    Lemma 5 (a = -eta imp K^+ Pi g) and Lemma 6 (y = -D^-1 (eta imp P_perp g + Pi^T nu), nu making
    Pi y = 0: a k x k system Pi D^-1 Pi^T, k transforms). Dense: O(k n log n) per example."""
    k = hp.k
    n = st.w.shape[0]
    mask = hp.mask
    code = hp.code
    eta = hp.eta
    signs = st.signs
    rows = st.rows
    scal = st.scal
    w = st.w
    g = np.zeros(n)
    tmp = np.zeros(n)
    pg = np.zeros(n)
    y = np.zeros(n)
    dinv = np.zeros(n)
    pig = np.zeros(k)
    z = np.zeros(k)
    M = np.zeros((k, k))
    lam = np.zeros(k)
    V = np.zeros((k, k))
    tk = np.zeros(k)
    C = np.zeros((k, k))
    rhs = np.zeros(k)
    learned = 0
    for i in range(labels.shape[0]):
        a0 = offsets[i]
        b0 = offsets[i + 1]
        lab = labels[i]
        labeled = not math.isnan(lab)
        yy = scalar_target(code, lab) if labeled else 0.0
        if learn and labeled:
            if yy < scal[0]:
                scal[0] = yy
            if yy > scal[1]:
                scal[1] = yy
        p = 0.0
        for e in range(a0, b0):
            p += w[np.int64(indices[e]) & mask] * values[e]
        raw_out[i] = p
        if p < scal[0]:
            p = scal[0]
        elif p > scal[1]:
            p = scal[1]
        pred_out[i] = p
        if not labeled:
            loss_out[i] = math.nan
            continue
        lv = value_tau(code, p, yy, 0.5)
        loss_out[i] = lv
        if not learn:
            continue
        imp = weights[i]
        learned += 1
        if imp <= 0.0:
            continue
        scal[2] += 1.0
        if not _updates(code, p, yy, lv):
            continue
        dl = deriv_tau(code, p, yy, 0.5)
        if imp * dl * dl == 0.0:
            continue
        g[:] = 0.0
        for e in range(a0, b0):
            g[np.int64(indices[e]) & mask] += dl * values[e]
        us = -(eta * imp)
        _pi(g, signs, rows, pig, tmp)  # Pi g
        _pi_t(pig, signs, rows, pg)  # P g
        for j in range(n):
            pg[j] = g[j] - pg[j]  # P_perp g
            st.G[j] += imp * pg[j] * pg[j]
            d = hp.cw * (math.sqrt(st.G[j]) + hp.delta_c)
            dinv[j] = 1.0 / d if d > 0.0 else 0.0
        # subspace: S += imp (Pi g)(Pi g)^T, a = us K^+ Pi g, x += Pi^T a
        for r in range(k):
            z[r] = pig[r]
        for pp in range(k):
            for q in range(k):
                st.S[pp, q] += imp * pig[pp] * pig[q]
                M[pp, q] = st.S[pp, q]
        _jacobi_eigh(M, lam, V)
        top = 0.0
        for r in range(k):
            top = max(top, lam[r])
        for r in range(k):
            lr = max(lam[r], 0.0)
            acc = 0.0
            for q in range(k):
                acc += V[q, r] * z[q]
            if hp.delta_r > 0.0:
                tk[r] = acc / math.sqrt(lr + hp.delta_r)
            elif lr > PINV_TOL * top and lr > 0.0:
                tk[r] = acc / math.sqrt(lr)
            else:
                tk[r] = 0.0
        for r in range(k):
            acc = 0.0
            for q in range(k):
                acc += V[r, q] * tk[q]
            z[r] = us * acc
        _pi_t(z, signs, rows, y)
        for j in range(n):
            w[j] += y[j]
        # complement: y = D^-1 (us P_perp g - Pi^T nu), nu = (Pi D^-1 Pi^T)^-1 Pi D^-1 us P_perp g
        for c in range(k):  # column c of Pi D^-1 Pi^T
            for r in range(k):
                tk[r] = 1.0 if r == c else 0.0
            _pi_t(tk, signs, rows, y)
            for j in range(n):
                y[j] *= dinv[j]
            _pi(y, signs, rows, rhs, tmp)
            for r in range(k):
                C[r, c] = rhs[r]
        for j in range(n):
            y[j] = dinv[j] * (us * pg[j])
        _pi(y, signs, rows, rhs, tmp)
        # nu = C^+ rhs (C symmetric PSD): eigen-decomposition
        for pp in range(k):
            for q in range(k):
                M[pp, q] = C[pp, q]
        _jacobi_eigh(M, lam, V)
        top = 0.0
        for r in range(k):
            top = max(top, lam[r])
        for r in range(k):
            acc = 0.0
            for q in range(k):
                acc += V[q, r] * rhs[q]
            tk[r] = acc / lam[r] if lam[r] > PINV_TOL * top and lam[r] > 0.0 else 0.0
        for r in range(k):
            acc = 0.0
            for q in range(k):
                acc += V[r, q] * tk[q]
            z[r] = acc
        _pi_t(z, signs, rows, tmp)
        for j in range(n):
            w[j] += dinv[j] * (us * pg[j] - tmp[j])
    return learned
