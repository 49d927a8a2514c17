"""Compiled kernels of :mod:`streamlearn.algos.bear` (BEAR, Aghazadeh et al., Alg. 1-2).

The parameter vector is indexed by *coordinates* ``(c, h)`` = (class, 32-bit feature hash),
packed as the int64 ``c << 32 | h``; for binary / regression there is one class. The oLBFGS
history is a ring buffer of ``tau`` sparse pairs ``(s_i, r_i)``, each stored on its own support
(keys + values, capacity grown as needed); the newest pair is at ``head - 1``, a new pair
overwrites the oldest.

Kernel state: the shared :class:`~streamlearn.algos._sketch_kernels.SketchState`, BEAR's
:class:`Ring` of pairs and its :class:`BearHyper`; the minibatch driver is
:func:`streamlearn.algos._sketch_kernels.minibatch_run`.
"""
import math
from collections import namedtuple
from typing import NamedTuple

import numpy as np
from numba import njit

from ..kernels._jit import INNER, KERNEL
from ._mission_kernels import _map_changes, _map_masks, _mask_rebuild
from ._sketch_kernels import (DRIVER_HYPER, _build_active, _const_index, _eff_weights_map, _hll_add, _mb_gradient,
                              _mb_predict, _offer_active_map, _prefetch_active, _prefetch_cells, implements_update,
                              minibatch_run)

__all__ = ["Ring", "BearHyper", "two_loop", "bear_update", "bear_run", "ring_push"]


class Ring(NamedTuple):
    """The oLBFGS history (Alg. 1): ``tau`` sparse pairs ``(s_i, r_i)``, each on its own support
    (``cap`` entries, grown as needed); ``ring_sr``/``ring_rr`` hold ``s.r`` and ``r.r``. The head and
    count are ``SketchState.counters[1:3]``."""

    rs_keys: np.ndarray  # int64 (tau, cap): coordinates (c << 32 | h) of s_i
    rs_vals: np.ndarray  # float64 (tau, cap)
    rs_len: np.ndarray  # int64 (tau,)
    rr_keys: np.ndarray  # int64 (tau, cap): coordinates of r_i
    rr_vals: np.ndarray  # float64 (tau, cap)
    rr_len: np.ndarray  # int64 (tau,)
    ring_sr: np.ndarray  # float64 (tau,)
    ring_rr: np.ndarray  # float64 (tau,)
    ring_rdr: np.ndarray  # float64 (tau,): r.D r (D: the diagonal of --initial_scaling adagrad when pushed)
    acc: np.ndarray  # float64 (R, W, K): count-min sketch of squared gradients (adagrad); (0, 0, K) otherwise
    iacc: np.ndarray  # float64 (K,): the intercept's sum of squared gradients, per class
    # derived from the keys (not saved; a loaded model's pnf is -1: indexed at its first use)
    rs_code: np.ndarray  # int64 (tau, cap): per entry of s_i, c << 32 | f (class, index in pfeat[i])
    rr_code: np.ndarray  # int64 (tau, cap): the same for r_i; rr_code[i, 0] = _DENSE: r_i on every coordinate, by position
    pfeat: np.ndarray  # int64 (tau, 2 cap): pair i's features (hashes), pnf[i] of them
    pnf: np.ndarray  # int64 (tau,): -1 = pair not indexed yet (_pair_index)
    # the class membership map (--oaa K, K <= 64; empty: none), derived from the heaps, never saved
    mkeys: np.ndarray  # uint32 (T,): features held by some class's heap
    mmask: np.ndarray  # uint64 (T,): their class masks (0: empty entry)
    mcount: np.ndarray  # int64 (1,): entries in use; -1: stale (rebuilt before the next minibatch)


#: BEAR's hyper-parameters as its kernels take them: the driver's (``DRIVER_HYPER``), then ``eps``
#: (relative curvature guard: keep (s, r) only if s.r > eps |s| |r|), ``damping`` (store
#: r + damping s), ``same_set`` (secant pair on the top-k set before the heap update) and
#: ``mask_r`` (experimental, not Alg. 2: r zeroed off the top-k set).
#: ``h0``: the two-loop's initial matrix, 0 = ``gamma I`` (Alg. 1: gamma = s.r / r.r of the newest
#: pair), 1 = ``gamma D`` (``--initial_scaling adagrad``: D = diag(1 / sqrt(A)) on the active set, A the
#: count-min sketch of squared gradients, 0 off it; gamma = min(s.r / r.D r, gmax); damping r + delta D^-1 s).
BearHyper = namedtuple("BearHyper", DRIVER_HYPER + ("eps", "damping", "same_set", "mask_r", "h0", "gmax"))

_FIB64 = np.uint64(0x9E3779B97F4A7C15)
#: ``rr_code[i, 0]`` of a pair whose ``r_i`` is stored on every coordinate ``(c, akeys[a])`` of its
#: features, in :func:`_ring_push`'s order (entry ``c * nA + a``): its other codes are not written,
#: the two-loop reads r's entries by position (a code is never negative)
_DENSE = np.int64(-2)


@njit(cache=True, nogil=True, inline="always")
def _home64(key, tmask):
    return np.int64((np.uint64(key) * _FIB64) >> np.uint64(40)) & tmask


@njit(**INNER)
def _index_table(n):
    """An empty open-addressing index (-1: empty) for up to ``n`` keys: a power of two >= 2n slots
    (at most half full), for :func:`_find_or_add`."""
    T = 8
    while T < 2 * n:
        T *= 2
    tbl = np.empty(T, np.int32)
    for t in range(T):
        tbl[t] = -1
    return tbl


@njit(**INNER)
def _find_or_add(tbl, tkeys, nU, key):
    """Index of coordinate ``key`` in the union table; added (as ``nU[0]``) if absent."""
    tmask = tbl.shape[0] - 1
    j = _home64(key, tmask)
    while True:
        u = np.int64(tbl[j])
        if u < 0:
            u = nU[0]
            tbl[j] = u
            tkeys[u] = key
            nU[0] = u + 1
            return u
        if tkeys[u] == key:
            return u
        j = (j + 1) & tmask


@njit(**INNER)
def _pair_index(slot, rs_keys, rs_len, rr_keys, rr_len, rs_code, rr_code, pfeat, pnf):
    """Index pair ``slot`` from its keys: its distinct features ``pfeat[slot, :pnf[slot]]`` (in
    order of first appearance) and each entry's code ``c << 32 | f`` (its class, and the index of
    its feature in ``pfeat[slot]``). For pairs stored without codes (a loaded or merged model,
    :func:`ring_push`); the run's pushes write them. ``pfeat`` has room for ``rs_len + rr_len``
    features (twice the ring's capacity)."""
    ns = rs_len[slot]
    nr = rr_len[slot]
    tbl = _index_table(ns + nr)
    fk = np.empty(ns + nr, np.int64)
    nf = np.empty(1, np.int64)
    nf[0] = 0
    for e in range(ns + nr):
        key = rs_keys[slot, e] if e < ns else rr_keys[slot, e - ns]
        code = ((key >> 32) << 32) | _find_or_add(tbl, fk, nf, key & 0xFFFFFFFF)
        if e < ns:
            rs_code[slot, e] = code
        else:
            rr_code[slot, e - ns] = code
    for f in range(nf[0]):
        pfeat[slot, f] = fk[f]
    pnf[slot] = nf[0]


@njit(**INNER)
def _two_loop(g, akeys, K, rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len, rs_code, rr_code, pfeat, pnf,
              ring_sr, ring_rr, head, count, z, dvec, ring_rdr, gmax):
    """oLBFGS descent direction (BEAR Alg. 1) for the gradient ``g`` on the coordinates
    ``(c, akeys[a])`` (class-major: ``g[c * nA + a]``, ``K`` classes), written to ``z`` (same layout).

    Works on the union U of the active features and the features of the stored pairs, with
    ``q`` dense over U x classes (``q[c * |U| + u]``; sparse dot products through each pair's
    entry codes ``c << 32 | f`` and the map from its features ``pfeat`` to U, built here with one
    look-up per feature, not per coordinate), so the recursion equals the dense one exactly: each
    dot product sums a pair's entries in their stored order, each update is per coordinate. ``z``
    is the direction restricted to the active coordinates (Alg. 2 line 6). Pairs are used newest
    to oldest in the first loop and oldest to newest in the second; the initial scaling is
    ``s.r / r.r`` of the newest pair. With no pairs, ``z = g``. A pair without codes (``pnf`` < 0:
    loaded) is indexed first (:func:`_pair_index`).

    With a diagonal ``dvec`` (one entry per active coordinate; empty: Alg. 1's scalar) the initial
    matrix is ``gamma D`` with ``D = diag(dvec)`` on the active coordinates and 0 on the rest of U,
    ``gamma = s.r / r.D r`` of the newest pair (``ring_rdr``); with no pairs ``z = D g``. (A positive
    semi-definite initial matrix keeps the BFGS updates positive semi-definite: z is still a descent
    direction.)

    Entries that cannot change the result are skipped, the others summed in the same order: an s_j
    entry on a feature that neither the active set nor a newer pair holds (q is 0 there when the
    first loop reads it; the second loop's write there is read by no newer r and is not in z), and,
    with ``dvec`` (zero off the active coordinates), a dense r_j's entries on the features that
    neither the active set nor an older pair holds (the first loop's write there is read by no older
    s and multiplied by 0; q is +-0 there when the second loop reads it). A skipped term is +-0 or a
    write nobody reads: only the sign of a zero sum can differ.
    """
    diag = dvec.shape[0] > 0
    # Scratch is 1-D int64 / float64 only, filled by loops and slots wrapped by hand: every
    # other allocation kind or a ``%`` compiles code of its own (first-run compile time).
    nA = akeys.shape[0]
    D = K * nA
    if count == 0:
        for d in range(D):
            z[d] = g[d] * dvec[d] if diag else g[d]
        return
    tau = rs_keys.shape[0]
    # scratch sized by the pairs' own lengths (offsets per pair), not the ring's capacity: that grows
    # to the largest pair ever stored (news20 --oaa 20: 214,000), and a large allocation per call
    # costs a mapping and page faults
    # per pair j (newest first): its features' offset in fmap, and its s entries' offset in sq
    fofs = np.empty(count + 1, np.int64)
    fofs[0] = 0
    sofs = np.empty(count + 1, np.int64)
    sofs[0] = 0
    for j in range(count):
        slot = head - 1 - j
        if slot < 0:
            slot += tau
        if pnf[slot] < 0:
            _pair_index(slot, rs_keys, rs_len, rr_keys, rr_len, rs_code, rr_code, pfeat, pnf)
        fofs[j + 1] = fofs[j] + pnf[slot]
        sofs[j + 1] = sofs[j] + rs_len[slot]
    tot = nA + fofs[count]
    tbl = _index_table(tot)
    ukeys = np.empty(tot, np.int64)
    nU = np.empty(1, np.int64)
    nU[0] = 0
    for a in range(nA):  # the active features are U's first nA (distinct: u = a)
        _find_or_add(tbl, ukeys, nU, np.int64(akeys[a]))
    # unsigned indices from here on: numba wraps a signed index that may be negative (a test and an
    # add per access in the inner loops); an unsigned one it takes as it is
    fmap = np.empty(fofs[count], np.uint64)  # pair j's feature f is U's fmap[fofs[j] + f]
    # top[u]: the oldest pair (largest j) holding U's feature u; the active features: count (every pair);
    # with a diagonal H0 only (below)
    top = np.empty(tot, np.int64)
    for a in range(nA):
        top[a] = count
    # U's size before pair j's features were added: pair j's feature u is active or held by a newer pair
    # iff u < ustart[j]
    ustart = np.empty(count, np.uint64)
    for j in range(count):
        slot = head - 1 - j
        if slot < 0:
            slot += tau
        ustart[j] = nU[0]
        for f in range(pnf[slot]):
            u = _find_or_add(tbl, ukeys, nU, pfeat[slot, f])
            fmap[fofs[j] + f] = u
            if u >= nA:  # (Alg. 1's gamma I is not zero off the active coordinates: every feature live)
                top[u] = j if diag else count
    S = nU[0]
    # the live features of pair j, N_j = the active ones and those of the pairs older than j (top[u] > j):
    # with a diagonal H0 = gamma D (zero off the active coordinates; Alg. 1's gamma I: every feature is
    # live), off N_j, q is 0 (+-0) when the second loop reads pair j's r (only H0, zero off the active
    # coordinates, and older pairs' s have written into q there), and what the first loop writes with
    # r_j is read by no older pair's s and is multiplied by H0's 0: r_j's entries off N_j change nothing
    # but the sign of a zero (a term +-0), and are skipped. Pair j's live features: kf (their index f in
    # the pair) and ku (their index in U), kofs[j]..kofs[j + 1], in the pair's order (the dot products'
    # order of summation kept)
    kofs = np.empty(count + 1, np.int64)
    kofs[0] = 0
    kf = np.empty(fofs[count], np.uint64)
    ku = np.empty(fofs[count], np.uint64)
    for j in range(count):
        n = kofs[j]
        for f in range(fofs[j + 1] - fofs[j]):  # compacted without a branch: written, advanced if live
            u = fmap[fofs[j] + f]
            kf[n] = f
            ku[n] = u
            n += top[u] > j
        kofs[j + 1] = n
    q = np.empty(K * S, np.float64)
    for c in range(K):  # two loops without a test, on class c's views (indices from 0): vectorised
        qc = q[c * S:c * S + nA]
        gc = g[c * nA:(c + 1) * nA]
        for u in range(nA):
            qc[u] = gc[u]
        qo = q[c * S + nA:(c + 1) * S]  # (a range from 0: numba knows the index is not negative)
        for u in range(S - nA):
            qo[u] = 0.0
    alpha = np.empty(count, np.float64)
    lo = np.int64(0xFFFFFFFF)
    uS = np.uint64(S)
    # pair j's s entries on features that are active or held by a newer pair (u < ustart[j]): their
    # index in q (c |U| + u) and value, found in the first loop, used again in the second (sq, sv from
    # sofs[j], slen[j] of them). On the others (only pair j and older pairs hold the feature, which is
    # not active) q is 0 in the first loop (no newer r has written there: a term +-0, summed as before)
    # and what the second loop adds there is read by no newer pair's r nor by z: not written
    sq = np.empty(sofs[count], np.uint64)
    sv = np.empty(sofs[count], np.float64)
    slen = np.empty(count, np.int64)
    # first loop: newest (j = 0) to oldest
    for j in range(count):
        slot = head - 1 - j
        if slot < 0:
            slot += tau
        ub = np.uint64(fofs[j])
        sqj = sq[sofs[j]:sofs[j + 1]]
        svj = sv[sofs[j]:sofs[j + 1]]
        us = ustart[j]
        rho = 1.0 / ring_sr[slot]
        dot = 0.0
        n = np.uint64(0)
        for e in range(rs_len[slot]):
            code = rs_code[slot, e]
            u = fmap[ub + np.uint64(code & lo)]
            qi = np.uint64(code >> 32) * uS + u
            v = rs_vals[slot, e]
            sqj[n] = qi  # compacted without a branch: written, advanced if kept
            svj[n] = v
            n += np.uint64(u < us)
            dot += v * q[qi]
        slen[j] = np.int64(n)
        alpha[j] = rho * dot
        nf = pnf[slot]
        aj = alpha[j]  # (a local: a value the stores into q cannot change, kept in a register)
        if rr_code[slot, 0] == _DENSE and rr_len[slot] == K * nf:  # r on every (class, feature): no codes
            kfj = kf[kofs[j]:kofs[j + 1]]  # (its live features only)
            kuj = ku[kofs[j]:kofs[j + 1]]
            for c in range(K):
                qc = q[c * S:(c + 1) * S]
                rv = rr_vals[slot, c * nf:(c + 1) * nf]
                for t in range(kfj.shape[0]):
                    qc[kuj[t]] -= aj * rv[kfj[t]]
        else:
            for e in range(rr_len[slot]):
                code = rr_code[slot, e]
                q[np.uint64(code >> 32) * uS + fmap[ub + np.uint64(code & lo)]] -= aj * rr_vals[slot, e]
    newest = head - 1
    if newest < 0:
        newest += tau
    if diag:
        gamma = ring_sr[newest] / ring_rdr[newest]
        if gamma > gmax:
            gamma = gmax
        for c in range(K):  # two loops without a test (vectorised): the same products
            qc = q[c * S:c * S + nA]
            dc = dvec[c * nA:(c + 1) * nA]
            for u in range(nA):
                qc[u] *= gamma * dc[u]
            qo = q[c * S + nA:(c + 1) * S]
            for u in range(S - nA):
                qo[u] *= 0.0
    else:
        gamma = ring_sr[newest] / ring_rr[newest]
        for u in range(K * S):
            q[u] *= gamma
    # second loop: oldest to newest (q now holds z)
    for j in range(count - 1, -1, -1):
        slot = head - 1 - j
        if slot < 0:
            slot += tau
        ub = np.uint64(fofs[j])
        sqj = sq[sofs[j]:sofs[j] + slen[j]]
        svj = sv[sofs[j]:sofs[j] + slen[j]]
        rho = 1.0 / ring_sr[slot]
        dot = 0.0
        nf = pnf[slot]
        if rr_code[slot, 0] == _DENSE and rr_len[slot] == K * nf:
            kfj = kf[kofs[j]:kofs[j + 1]]
            kuj = ku[kofs[j]:kofs[j + 1]]
            for c in range(K):
                qc = q[c * S:(c + 1) * S]
                rv = rr_vals[slot, c * nf:(c + 1) * nf]
                for t in range(kfj.shape[0]):
                    dot += rv[kfj[t]] * qc[kuj[t]]
        else:
            for e in range(rr_len[slot]):
                code = rr_code[slot, e]
                dot += rr_vals[slot, e] * q[np.uint64(code >> 32) * uS + fmap[ub + np.uint64(code & lo)]]
        bj = rho * dot
        ab = alpha[j] - bj  # (a local: a value the stores into q cannot change, kept in a register)
        for t in range(sqj.shape[0]):
            q[sqj[t]] += svj[t] * ab
    for c in range(K):
        qc = q[c * S:(c + 1) * S]
        zc = z[c * nA:(c + 1) * nA]
        for a in range(nA):
            zc[a] = qc[a]


@njit(**INNER)
def _store_pair(akeys, K, s, r, rs_keys, rs_vals, rr_keys, rr_vals, rs_code, rr_code, slot, dense):
    """:func:`_ring_push`'s store of the pair ``(s, r)`` at ``slot``: s's non-zero entries (keys, codes,
    values), r's on every coordinate by position (``dense``) or its non-zero ones."""
    nA = akeys.shape[0]
    js = 0
    jr = 0
    for c in range(K):
        for a in range(nA):
            d = c * nA + a
            if s[d] != 0.0:
                rs_keys[slot, js] = (np.int64(c) << 32) | np.int64(akeys[a])
                rs_code[slot, js] = (np.int64(c) << 32) | np.int64(a)
                rs_vals[slot, js] = s[d]
                js += 1
            if dense:
                rr_keys[slot, d] = (np.int64(c) << 32) | np.int64(akeys[a])
                rr_vals[slot, d] = r[d]
            elif r[d] != 0.0:
                rr_keys[slot, jr] = (np.int64(c) << 32) | np.int64(akeys[a])
                rr_code[slot, jr] = (np.int64(c) << 32) | np.int64(a)
                rr_vals[slot, jr] = r[d]
                jr += 1


@njit(**INNER)
def _ring_push(akeys, K, s, r, rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len, rs_code, rr_code, pfeat, pnf,
               ring_sr, ring_rr, counters, eps, dvec, ring_rdr):
    """Curvature guard, then store the pair ``(s, r)`` (dense over the coordinates ``(c, akeys[a])``,
    class-major as in :func:`_two_loop`) on its own supports at the ring's head, overwriting the
    oldest pair, with its entry codes and features (``pfeat[slot, :nA]`` = ``akeys``). The guard is
    relative: the pair is kept only if ``s.r > eps * |s| |r|`` (and finite). ``counters[1]`` = head,
    ``counters[2]`` = count, ``counters[3]`` = pairs rejected. With a diagonal ``dvec`` (non-empty)
    ``r.D r`` is kept in ``ring_rdr`` and must be positive too. Returns the ring's (tau, cap) arrays
    and ``pfeat`` (reallocated with a larger capacity, each pair's entries copied, if a support does not fit)."""
    nA = akeys.shape[0]
    D = K * nA
    diag = dvec.shape[0] > 0
    sr = 0.0
    ss = 0.0
    rr = 0.0
    rdr = 0.0
    ns = 0
    nr = 0
    # the counts without a branch (s is 0 on the coordinates off the top-k: a test per coordinate is
    # mispredicted about as often as not); the sums in the same order
    if diag:
        for d in range(D):
            sr += s[d] * r[d]
            ss += s[d] * s[d]
            rr += r[d] * r[d]
            rdr += r[d] * r[d] * dvec[d]
            ns += s[d] != 0.0
            nr += r[d] != 0.0
    else:
        for d in range(D):
            sr += s[d] * r[d]
            ss += s[d] * s[d]
            rr += r[d] * r[d]
            ns += s[d] != 0.0
            nr += r[d] != 0.0
    if not (math.isfinite(sr) and math.isfinite(ss) and math.isfinite(rr)) or rr <= 0.0 \
            or sr <= eps * math.sqrt(ss * rr) or (diag and not (rdr > 0.0 and math.isfinite(rdr))):
        counters[3] += 1
        return rs_keys, rs_vals, rr_keys, rr_vals, rs_code, rr_code, pfeat
    tau = rs_keys.shape[0]
    cap = rs_keys.shape[1]
    need = ns if ns > nr else nr
    if 2 * need < nA:
        need = (nA + 1) // 2  # pfeat (2 cap wide) holds the pair's nA features
    if need > cap:
        newcap = need if need > 2 * cap else 2 * cap
        a = np.empty((tau, newcap), np.int64)
        b = np.empty((tau, newcap), np.float64)
        c = np.empty((tau, newcap), np.int64)
        e = np.empty((tau, newcap), np.float64)
        f = np.empty((tau, newcap), np.int64)
        h = np.empty((tau, newcap), np.int64)
        pf = np.empty((tau, 2 * newcap), np.int64)
        # only each pair's own entries move (its first rs_len / rr_len, its pnf features): nothing reads past
        # them (the two-loop, the index and the saved state, which zeroes the rest, all stop at the lengths), so
        # the new arrays' other pages stay untouched (on 20 Newsgroups --oaa 20 the ring grows to 214,000
        # entries a pair, ~30,000 page faults when every entry was copied or zeroed)
        for i in range(tau):  # loops: a slice assignment compiles numba's shape-error formatting (seconds)
            for j in range(rs_len[i]):
                a[i, j] = rs_keys[i, j]
                b[i, j] = rs_vals[i, j]
                f[i, j] = rs_code[i, j]
            for j in range(rr_len[i]):
                c[i, j] = rr_keys[i, j]
                e[i, j] = rr_vals[i, j]
                h[i, j] = rr_code[i, j]
            for j in range(pnf[i]):
                pf[i, j] = pfeat[i, j]
        rs_keys, rs_vals, rr_keys, rr_vals, rs_code, rr_code, pfeat = a, b, c, e, f, h, pf
    slot = counters[1]
    js = 0
    jr = 0
    dense = nr == D  # r on every coordinate (softmax: the usual case): r's codes are its positions
    if dense and ns < rs_keys.shape[1]:
        # s's entries compacted without a branch: every coordinate is written at the next free entry,
        # which only a non-zero advances; the entry after the last (ns, not s's: a stale one, saved with
        # the ring) is put back as it was, so the arrays are those of the branching loop below
        k0, c0, v0 = rs_keys[slot, ns], rs_code[slot, ns], rs_vals[slot, ns]
        # on the slot's rows as 1-D views, the entry counter unsigned (no wraparound test per store);
        # r's keys and values in loops of their own (vectorised)
        sk = rs_keys[slot]
        sc = rs_code[slot]
        sv = rs_vals[slot]
        ju = np.uint64(0)
        for c in range(K):
            ck = np.int64(c) << 32
            s_c = s[c * nA:(c + 1) * nA]
            for a in range(nA):
                sk[ju] = ck | np.int64(akeys[a])
                sc[ju] = ck | np.int64(a)
                sv[ju] = s_c[a]
                ju += np.uint64(s_c[a] != 0.0)
            rk_c = rr_keys[slot, c * nA:(c + 1) * nA]
            rv_c = rr_vals[slot, c * nA:(c + 1) * nA]
            r_c = r[c * nA:(c + 1) * nA]
            for a in range(nA):
                rk_c[a] = ck | np.int64(akeys[a])
            for a in range(nA):
                rv_c[a] = r_c[a]
        js = np.int64(ju)
        rs_keys[slot, ns], rs_code[slot, ns], rs_vals[slot, ns] = k0, c0, v0
    else:
        _store_pair(akeys, K, s, r, rs_keys, rs_vals, rr_keys, rr_vals, rs_code, rr_code, slot, dense)
        js = ns
        jr = nr
    if dense:
        jr = D
        rr_code[slot, 0] = _DENSE
    rs_len[slot] = js
    rr_len[slot] = jr
    for a in range(nA):
        pfeat[slot, a] = akeys[a]
    pnf[slot] = nA
    ring_sr[slot] = sr
    ring_rr[slot] = rr
    ring_rdr[slot] = rdr if diag else rr
    slot += 1
    counters[1] = slot if slot < tau else 0
    if counters[2] < tau:
        counters[2] += 1
    return rs_keys, rs_vals, rr_keys, rr_vals, rs_code, rr_code, pfeat


#: how many active features ahead :func:`_cm_add_dvec` prefetches a feature's accumulator cells
_ACC_AHEAD = 4
#: how many active features ahead line 6's ADD prefetches a feature's weight cells
_ADD_AHEAD = 2


@njit(**INNER, error_model="numpy")  # (no ZeroDivisionError test in the loop of 1 / sqrt: vectorised)
def _cm_add_dvec(acc, iacc, abk, g, K, aconst, dvec):
    """``--initial_scaling adagrad``'s diagonal: for every active coordinate ``(c, a)`` (``g`` and
    ``dvec`` class-major, ``g[c * nA + a]``) the count-min ADD of ``g^2`` and QUERY
    (:func:`~._sketch_kernels._cm_add_query`: the minimum over rows), ``dvec = 1 / sqrt(QUERY)`` (0 where
    it is 0); the constant feature (``aconst``) sums into ``iacc[c]``. Feature by feature, each row's K
    adjacent class cells in one loop the compiler vectorises, the cells of a later feature prefetched
    (MISSION's :func:`~._mission_kernels._step_active`): a cell of class ``c`` receives the same
    additions in the same order (its earlier features' squares) as class by class, so the values are
    those of the class-major loop of :func:`~._sketch_kernels._cm_add_query`, to the bit."""
    nA = abk.shape[0]
    R = abk.shape[1]
    gv = np.empty(K, np.float64)
    mv = np.empty(K, np.float64)
    for a in range(min(_ACC_AHEAD, nA)):
        _prefetch_cells(acc, abk, a)
    for a in range(nA):
        if a + _ACC_AHEAD < nA:
            _prefetch_cells(acc, abk, a + _ACC_AHEAD)
        for c in range(K):
            gv[c] = g[c * nA + a] * g[c * nA + a]
        if a == aconst:
            for c in range(K):
                iacc[c] += gv[c]
                mv[c] = iacc[c]
        else:
            for c in range(K):
                mv[c] = np.inf
            for r in range(R):
                b = abk[a, r]
                for c in range(K):
                    v = acc[r, b, c] + gv[c]
                    acc[r, b, c] = v
                    mv[c] = v if v < mv[c] else mv[c]
        for c in range(K):
            dvec[c * nA + a] = mv[c]
    for d in range(K * nA):  # D = A^-1/2 (0 where A is not positive) in one loop the compiler vectorises
        v = dvec[d]
        iv = 1.0 / math.sqrt(v if v > 0.0 else 1.0)
        dvec[d] = iv if v > 0.0 else 0.0


@implements_update(BearHyper)
@njit(cache=True, nogil=True)
def bear_update(offsets, indices, values, labels, weights, mb, nmb, spans, state, extra, hyper, eta, P0):
    """One BEAR iteration (Alg. 2 lines 2-10) on the minibatch ``mb[:nmb]``; ``extra`` is the
    :class:`Ring`, returned with its arrays possibly reallocated.

    Line 3: QUERY A_t intersect top-k (others 0); 4: mean gradient on A_t; 5: oLBFGS
    direction (Alg. 1); 6: ADD ``-eta z`` on A_t; 7: re-QUERY A_t; 10: offer A_t to the heap.
    The constant feature (``hyper.const_key``) is a coordinate like the others for the direction
    and the pair, but its weight is the intercept: outside the sketch, always in the model (in
    both ends of the secant pair), never offered to the heap.
    Lines 8-9: ``s = beta_{t+1} - beta_t`` is the change of the QUERYed weights (not the
    intended step ``-eta z``; NOTES_BEAR item 2) and ``r`` the gradient change on the same
    minibatch, both with the effective weights of the *same* top-k set (``hyper.same_set``: the
    set before the heap update, so features entering the heap do not put their whole weight
    into ``s``; otherwise the set after it), which makes ``(s, r)`` an exact secant pair.
    With ``hyper.mask_r`` (experimental, not Alg. 2) ``r`` is zeroed off that top-k set.
    """
    # One flat function over 1-D / (K, nA) scratch (no tuple of arrays returned by a helper, no
    # other allocation kinds): each extra helper level or array type is compiled (and
    # re-optimised inside every caller) on a learner's first run.
    code = hyper.code
    sketch = state.sketch
    K = sketch.shape[2]
    R = sketch.shape[0]
    # lines 2-4: active set, its effective weights, the minibatch's scores and mean gradient
    akeys, aocc, loc, abk, asg = _build_active(offsets, indices, mb, nmb, state.seeds, sketch.shape[1])
    nA = akeys.shape[0]
    D = K * nA
    _prefetch_active(sketch, abk)  # the cells lines 3, 6 and 7 read: their memory latencies overlapped
    tmp = np.empty(R, np.float64)
    beta0 = np.empty((K, nA), np.float64)
    inheap = np.empty((K, nA), np.bool_)
    no_clip = hyper.clip and False  # a bool, not the literal False: numba would compile _mb_gradient twice
    aconst = _const_index(akeys, hyper.const_key)
    # line 3 with the class membership map (--oaa K <= 64): one look-up per feature gives the classes
    # whose heaps hold it (only theirs are looked up); no map: every class's heap is
    mkeys, mmask, mcount = extra.mkeys, extra.mmask, extra.mcount
    use_map = mkeys.shape[0] > 0
    amask = np.empty(nA if use_map else 0, np.uint64)
    if use_map:
        if mcount[0] < 0 or 2 * (mcount[0] + nA) > mkeys.shape[0]:
            mkeys, mmask = _mask_rebuild(state.hkeys, state.hsize, mcount, nA)
        _map_masks(mkeys, mmask, akeys, amask)
    slot = np.empty((K, nA), np.int64)  # members' heap slots
    _eff_weights_map(sketch, state.htk, akeys, abk, asg, amask, beta0, inheap, slot, tmp,
                     state.intercept, aconst)
    _mb_predict(offsets, values, mb, nmb, loc, beta0, P0)  # the scores before the step (reported)
    G0 = np.empty((K, nA), np.float64)
    bound = _mb_gradient(code, offsets, values, labels, weights, mb, nmb, loc, P0, G0, state.lrange, hyper.clip)
    # line 5: the direction on the coordinates (c, h), flattened class-major
    g = np.empty(D, np.float64)
    for c in range(K):
        g_c = g[c * nA:(c + 1) * nA]
        g0 = G0[c]
        for a in range(nA):
            g_c[a] = g0[a]
    # the secant pair takes the unclipped derivative at both ends: a clip binding at one end
    # only would make r = g(beta1) - g(beta0) no secant of any function (issue 21: such pairs
    # blew the weights up to 1e27 on the Sec. 6 design); the clip stays in the step's gradient
    if bound:  # G0 <- the unclipped gradient at beta0 (P0 holds beta0's scores)
        _mb_gradient(code, offsets, values, labels, weights, mb, nmb, loc, P0, G0, state.lrange, no_clip)
    # --initial_scaling adagrad: A += g^2 (count-min, the step's gradient, AdaGrad's order), D = A^-1/2
    dvec = np.empty(D if hyper.h0 == 1 else 0, np.float64)
    if hyper.h0 == 1:
        _cm_add_dvec(extra.acc, extra.iacc, abk, g, K, aconst, dvec)
    z = np.empty(D, np.float64)
    _two_loop(g, akeys, K, extra.rs_keys, extra.rs_vals, extra.rs_len, extra.rr_keys, extra.rr_vals,
              extra.rr_len, extra.rs_code, extra.rr_code, extra.pfeat, extra.pnf, extra.ring_sr, extra.ring_rr,
              state.counters[1], state.counters[2], z, dvec, extra.ring_rdr, hyper.gmax)
    if bound:  # r's base: the unclipped gradient (g, the clipped one, has served the direction)
        for c in range(K):
            for a in range(nA):
                g[c * nA + a] = G0[c, a]
    # line 6 (a feature's K cells of a row are adjacent: one row at a time, all classes). A class whose
    # direction is 0 leaves its cells alone; when no class's is (softmax: the usual case) the row's K
    # cells take one loop without a test, which the compiler vectorises (the same sums: -eta d is
    # computed once per class instead of once per row, the same product)
    dl = np.empty(K, np.float64)
    for a in range(nA):
        if a + _ADD_AHEAD < nA:  # a later feature's cells (evicted from the core's caches since line 3 read them)
            _prefetch_cells(sketch, abk, a + _ADD_AHEAD)
        if a == aconst:  # the intercept, outside the sketch (and not a feature the sketch holds: not counted)
            for c in range(K):
                state.intercept[c] -= eta * z[c * nA + a]
            continue
        _hll_add(state.hll, akeys[a])
        every = True
        for c in range(K):
            d = z[c * nA + a]
            every = every and d != 0.0
            dl[c] = -eta * d
        for r in range(R):
            b = abk[a, r]
            sg = asg[a, r]
            if every:
                for c in range(K):
                    sketch[r, b, c] += sg * dl[c]
            else:
                for c in range(K):
                    if z[c * nA + a] != 0.0:
                        sketch[r, b, c] += sg * dl[c]
    # lines 7, 10 (and the weights after the step for line 8); the membership map follows the heaps
    beta1 = np.empty((K, nA), np.float64)
    ev = np.empty(2 * K * nA, np.int64)
    nev = _offer_active_map(state, akeys, aocc, abk, asg, spans, tmp, beta1, inheap, slot, aconst, ev)
    if use_map:
        _map_changes(mkeys, mmask, mcount, ev, nev)
    if not hyper.same_set:  # the set after it (every class's heap looked up)
        _eff_weights_map(sketch, state.htk, akeys, abk, asg, amask[:0], beta1, inheap, slot, tmp,
                         state.intercept, aconst)
    P = np.empty((nmb, K), np.float64)
    _mb_predict(offsets, values, mb, nmb, loc, beta1, P)
    _mb_gradient(code, offsets, values, labels, weights, mb, nmb, loc, P, G0, state.lrange, no_clip)  # G0 <- G1
    # lines 8-9: s = beta1 - beta0, r = G1 - G (g holds G), flattened as ckeys (loops: array
    # expressions compile a ufunc kernel each)
    s = np.empty(D, np.float64)
    for c in range(K):  # on class c's views (indices from 0, no wraparound test): vectorised loops
        s_c = s[c * nA:(c + 1) * nA]
        g_c = g[c * nA:(c + 1) * nA]
        b1 = beta1[c]
        b0 = beta0[c]
        g1 = G0[c]
        for a in range(nA):
            s_c[a] = b1[a] - b0[a]
        if hyper.mask_r:
            ih = inheap[c]
            for a in range(nA):
                g_c[a] = g1[a] - g_c[a] if ih[a] else 0.0
        else:
            for a in range(nA):
                g_c[a] = g1[a] - g_c[a]
    if hyper.damping > 0.0:  # r + delta s: curvature at least delta (oLBFGS regularisation)
        for d in range(D):  # with D: r + delta D^-1 s (at least delta in the metric of D^-1)
            if hyper.h0 == 1:
                if dvec[d] > 0.0:
                    g[d] += hyper.damping * s[d] / dvec[d]
            else:
                g[d] += hyper.damping * s[d]
    rs_keys, rs_vals, rr_keys, rr_vals, rs_code, rr_code, pfeat = _ring_push(
        akeys, K, s, g, extra.rs_keys, extra.rs_vals, extra.rs_len, extra.rr_keys, extra.rr_vals, extra.rr_len,
        extra.rs_code, extra.rr_code, extra.pfeat, extra.pnf, extra.ring_sr, extra.ring_rr, state.counters,
        hyper.eps, dvec, extra.ring_rdr)
    return Ring(rs_keys, rs_vals, extra.rs_len, rr_keys, rr_vals, extra.rr_len, extra.ring_sr, extra.ring_rr,
                extra.ring_rdr, extra.acc, extra.iacc, rs_code, rr_code, pfeat, extra.pnf, mkeys, mmask, mcount)


@njit(**KERNEL)
def bear_run(offsets, indices, values, labels, weights, spans, state, ring, hyper,
             learn, flush, skip, pred_out, loss_out, pending_out, score_out):
    """BEAR over a batch: :func:`~streamlearn.algos._sketch_kernels.minibatch_run` with
    :func:`bear_update`. Returns ``(examples learned, rows pending, ring)`` (the ring's arrays
    possibly reallocated)."""
    return minibatch_run(offsets, indices, values, labels, weights, spans, state, ring, hyper,
                         learn, flush, skip, pred_out, loss_out, pending_out, score_out)


@njit(**INNER)
def _grid(ckeys, rs_keys, rs_len, rr_keys, rr_len, count, head):
    """The coordinates ``ckeys`` (any ``c << 32 | h``) as a class-major grid: ``(akeys, K, at)``,
    the distinct features in order of first appearance, the number of classes (above every class of
    ``ckeys`` and of the ring's pairs) and ``at[i]`` = ckeys[i]'s grid index (for the Python-callable
    entries below)."""
    n = ckeys.shape[0]
    tbl = _index_table(n)
    fk = np.empty(n, np.int64)
    nf = np.empty(1, np.int64)
    nf[0] = 0
    f = np.empty(n, np.int64)
    K = 1
    for i in range(n):
        f[i] = _find_or_add(tbl, fk, nf, ckeys[i] & 0xFFFFFFFF)
        K = max(K, np.int64(ckeys[i] >> 32) + 1)
    tau = rs_keys.shape[0]
    for j in range(count):
        slot = (head - 1 - j + tau) % tau
        for e in range(rs_len[slot]):
            K = max(K, np.int64(rs_keys[slot, e] >> 32) + 1)
        for e in range(rr_len[slot]):
            K = max(K, np.int64(rr_keys[slot, e] >> 32) + 1)
    nA = nf[0]
    akeys = np.empty(nA, np.uint32)
    for a in range(nA):
        akeys[a] = fk[a]
    at = np.empty(n, np.int64)
    for i in range(n):
        at[i] = (ckeys[i] >> 32) * nA + f[i]
    return akeys, K, at


@njit(**KERNEL)
def two_loop(g, ckeys, rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len, ring_sr, ring_rr, head, count):
    """:func:`_two_loop` callable from Python (tests, benchmarks) for a gradient ``g`` on any
    coordinates ``ckeys``: returns the direction there."""
    tau, cap = rs_keys.shape
    akeys, K, at = _grid(ckeys, rs_keys, rs_len, rr_keys, rr_len, count, head)
    D = K * akeys.shape[0]
    gg = np.zeros(D, np.float64)
    for i in range(ckeys.shape[0]):
        gg[at[i]] = g[i]
    zz = np.empty(D, np.float64)
    _two_loop(gg, akeys, K, rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len, np.empty((tau, cap), np.int64),
              np.empty((tau, cap), np.int64), np.empty((tau, 2 * cap), np.int64), np.full(tau, -1, np.int64),
              ring_sr, ring_rr, head, count, zz, np.empty(0, np.float64), ring_rr, math.inf)
    z = np.empty(ckeys.shape[0], np.float64)
    for i in range(ckeys.shape[0]):
        z[i] = zz[at[i]]
    return z


@njit(**KERNEL)
def ring_push(ckeys, s, r, rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len, ring_sr, ring_rr, counters, eps):
    """:func:`_ring_push` callable from Python (tests, benchmarks; Alg. 1's scalar scaling) for a
    pair on any coordinates ``ckeys`` (stored in the order of their class-major grid, :func:`_grid`)."""
    tau, cap = rs_keys.shape
    akeys, K, at = _grid(ckeys, rs_keys, rs_len, rr_keys, rr_len, 0, 0)
    D = K * akeys.shape[0]
    ss = np.zeros(D, np.float64)
    rr = np.zeros(D, np.float64)
    for i in range(ckeys.shape[0]):
        ss[at[i]] = s[i]
        rr[at[i]] = r[i]
    out = _ring_push(akeys, K, ss, rr, rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len,
                     np.empty((tau, cap), np.int64), np.empty((tau, cap), np.int64), np.empty((tau, 2 * cap), np.int64),
                     np.full(tau, -1, np.int64), ring_sr, ring_rr, counters, eps, np.empty(0, np.float64),
                     ring_rr.copy())
    return out[0], out[1], out[2], out[3]
