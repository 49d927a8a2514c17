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
           "PINV_TOL"]

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
CompState = namedtuple("CompState", ["w", "G", "bsnap", "rsnap", "lastt", "bsum", "rsum", "phi", "nseen", "S0",
                                     "scal", "V"])
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
def _subspace_step(st, hp, z0, imp, us, gam, z, M, lam, V, tmp, tmp2):
    """Full-matrix AdaGrad on the bucket coordinates (Mehta Lemma 5 with lambda = 0, unscaled map):
    S0 += imp z0 z0^T, S = Gamma S0 Gamma, z = Gamma z0, a = us K^+ z (us = -eta imp) with K = (S + delta_r I)^{1/2};
    each bucket's features move by s_j gamma_r a_r: ``bsum[r] += gamma_r a_r``."""
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
