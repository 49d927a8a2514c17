"""Compiled kernels of :mod:`streamlearn.algos.mission` (MISSION, Aghazadeh et al. ICML 2018).

MISSION is BEAR's first-order baseline (BEAR paper Sec. 6): the same Count Sketch + top-k
heap and the same minibatch driver as BEAR Alg. 2
(:func:`streamlearn.algos._sketch_kernels.minibatch_run`), with the descent direction ``z_t``
equal to the stochastic gradient (no oLBFGS, no second QUERY for a secant pair).

``--step_rule adagrad``: per-feature AdaGrad steps (Duchi, Hazan and Singer, JMLR 2011) with
the accumulator of squared gradients kept in a **count-min sketch** (Cormode and Muthukrishnan
2005) of the weight sketch's shape and buckets (no signs), as Spring et al., "Compressing
Gradient Optimizers via Count-Sketches" (ICML 2019) keep an optimizer's non-negative second
moments: ADD ``g^2`` to the feature's cell in every row, QUERY the minimum over rows (an
over-estimate of the feature's own sum, so a collision only shortens its step), and step
``-eta g / sqrt(QUERY)``. The intercept's accumulator is one float per class, exact. A non-zero
gradient whose square underflows (``|g| < 1e-162``, e.g. a feature value of 1e-300) into cells
that hold nothing yet leaves a sum of 0: the step is then its limit, ``-eta sign(g)``
(:func:`_ada_step`; it divided by zero).

Class membership map (``--oaa K`` with ``K <= 64``; an implementation detail, not in the paper,
results unchanged): for every feature in some class's top-k heap, a 64-bit mask of the classes
whose heaps hold it, in one open-addressing table (linear probing, backward-shift deletion, an
entry is empty when its mask is 0). Alg. 2 line 3's effective weights then take one look-up per
active feature instead of one per (class, feature) pair in the K per-class position maps (a
third of the run on 20 Newsgroups): :func:`_map_masks` gives
:func:`~._sketch_kernels._eff_weights_map` each active feature's mask, and the membership changes the
offers (:func:`~._sketch_kernels._offer_active_map`) report are applied by :func:`_map_changes`. BEAR
keeps the same map with the same functions. The map is derived state: kept exact by every entry and
eviction of the offers, rebuilt from the heaps when a model is loaded or merged
(``mcount = -1``: stale) and when it fills past half its entries; never saved.
"""
from collections import namedtuple

import numpy as np
from numba import njit

from ..kernels._jit import INNER, KERNEL
from ..kernels._intrinsics import _prefetch
from ._sketch_kernels import (DRIVER_HYPER, _add_ca, _build_active, _cm_add_query, _const_index,
                              _eff_weights_map, _hll_add, _mb_gradient, _mb_predict, _offer_active_map,
                              _prefetch_cells, implements_update, minibatch_run)

__all__ = ["MissionHyper", "mission_update", "mission_run", "cm_add_query", "MASK_MAX_CLASSES", "mask_rebuild"]

#: the most classes the membership map serves (one bit each of a uint64); above, per-class look-ups
MASK_MAX_CLASSES = 64
_M32 = np.uint64(0xFFFFFFFF)
_FIB = np.uint64(0x9E3779B1)


#: MISSION's hyper-parameters as its kernels take them: the driver's (``DRIVER_HYPER``), then
#: ``adagrad`` (``--step_rule adagrad``: per-feature steps from the count-min accumulator).
MissionHyper = namedtuple("MissionHyper", DRIVER_HYPER + ("adagrad",))


@njit(cache=True, nogil=True)
def cm_add_query(acc, c, abk, a, g2):
    """:func:`_cm_add_query` callable from Python (tests)."""
    return _cm_add_query(acc, c, abk, a, g2)


@njit(cache=True, nogil=True, inline="always")
def _mhome(key, T):
    """Home entry of ``key`` in a membership map of ``T`` (a power of two) entries: the top
    bits of a multiplicative hash (a feature hash is already mixed; any table size works)."""
    h = (np.uint64(key) * _FIB) & _M32
    return np.int64((h * np.uint64(T)) >> np.uint64(32))


@njit(cache=True, nogil=True, inline="always")
def _mask_find(mkeys, mmask, key):
    """The map entry of ``key``, or -1."""
    T = mkeys.shape[0]
    i = _mhome(key, T)
    while mmask[i] != np.uint64(0):
        if mkeys[i] == key:
            return i
        i = (i + 1) & (T - 1)
    return -1


@njit(cache=True, nogil=True, inline="always")
def _mask_set(mkeys, mmask, mcount, key, c):
    """Set class ``c``'s bit of ``key`` (a new entry if absent; the caller keeps the map at most
    half full)."""
    T = mkeys.shape[0]
    bit = np.uint64(1) << np.uint64(c)
    i = _mhome(key, T)
    while mmask[i] != np.uint64(0):
        if mkeys[i] == key:
            mmask[i] |= bit
            return
        i = (i + 1) & (T - 1)
    mkeys[i] = key
    mmask[i] = bit
    mcount[0] += 1


@njit(cache=True, nogil=True, inline="always")
def _mask_clear(mkeys, mmask, mcount, key, c):
    """Clear class ``c``'s bit of ``key``; an entry left with no class is removed by
    backward-shift deletion (no tombstones)."""
    e = _mask_find(mkeys, mmask, key)
    if e < 0:
        return
    m = mmask[e] & ~(np.uint64(1) << np.uint64(c))
    mmask[e] = m
    if m != np.uint64(0):
        return
    mcount[0] -= 1
    T = mkeys.shape[0]
    tmask = T - 1
    i = e
    j = e
    while True:
        j = (j + 1) & tmask
        if mmask[j] == np.uint64(0):
            return
        home = _mhome(mkeys[j], T)
        # entry j may stay if its home lies cyclically in (i, j]
        if i <= j:
            if i < home <= j:
                continue
        elif home > i or home <= j:
            continue
        mkeys[i] = mkeys[j]
        mmask[i] = mmask[j]
        mmask[j] = np.uint64(0)
        i = j


@njit(**INNER)
def _mask_rebuild(hkeys, hsize, mcount, room):
    """A membership map of the heaps ``hkeys[c, :hsize[c]]`` with room for ``room`` more
    features, at most half full: ``(mkeys, mmask)``; ``mcount[0]`` = its number of features."""
    K = hkeys.shape[0]
    n = 0
    for c in range(K):
        n += hsize[c]
    T = 1024
    while T < 2 * (n + room):
        T *= 2
    mkeys = np.zeros(T, np.uint32)
    mmask = np.zeros(T, np.uint64)
    mcount[0] = 0
    for c in range(K):
        for s in range(hsize[c]):
            _mask_set(mkeys, mmask, mcount, hkeys[c, s], c)
    return mkeys, mmask


@njit(**KERNEL)
def mask_rebuild(hkeys, hsize, mcount, room):
    """:func:`_mask_rebuild` callable from Python (tests)."""
    return _mask_rebuild(hkeys, hsize, mcount, room)


@njit(**INNER)
def _map_masks(mkeys, mmask, akeys, amask):
    """``amask[a]``: the class mask of active feature ``a`` in the class membership map (0: in no heap).
    (A helper of its own, not inlined into the update kernels: first-run compile time.)"""
    nA = akeys.shape[0]
    T = mkeys.shape[0]
    for a in range(nA):
        if a + 4 < nA:  # a later feature's home entry (the map is larger than the core's caches)
            h = _mhome(akeys[a + 4], T)
            _prefetch(mkeys, h)
            _prefetch(mmask, h)
        e = _mask_find(mkeys, mmask, akeys[a])
        amask[a] = mmask[e] if e >= 0 else np.uint64(0)


@njit(**INNER)
def _map_changes(mkeys, mmask, mcount, ev, nev):
    """Apply the offers' membership changes ``ev[:nev]`` (:func:`~._sketch_kernels._offer_active_map`)
    to the class membership map, in order."""
    for e in range(nev):
        x = ev[e]
        if (x >> 32) & 1:
            _mask_set(mkeys, mmask, mcount, np.uint32(x & 0xFFFFFFFF), x >> 33)
        else:
            _mask_clear(mkeys, mmask, mcount, np.uint32(x & 0xFFFFFFFF), x >> 33)


@njit(cache=True, nogil=True, inline="always")
def _ada_step(eta, g, s):
    """AdaGrad's step ``-eta g / sqrt(s)`` for the sum ``s`` of squared gradients that includes ``g^2``; when
    ``s`` is 0 (``g^2`` underflowed and nothing else was summed) its limit ``-eta sign(g)``."""
    return -eta * g / np.sqrt(s) if s > 0.0 else -eta * (1.0 if g > 0.0 else -1.0)


@njit(**INNER)
def _step_sparse(sketch, acc, abk, asg, a, gv, eta, adagrad):
    """:func:`_step_active`'s step of feature ``a`` class by class; classes whose gradient ``gv[c]`` is 0 untouched."""
    for c in range(gv.shape[0]):
        g = gv[c]
        if g != 0.0:
            if adagrad:
                _add_ca(sketch, c, abk, asg, a, _ada_step(eta, g, _cm_add_query(acc, c, abk, a, g * g)))
            else:
                _add_ca(sketch, c, abk, asg, a, -eta * g)


@njit(**INNER)
def _step_active(sketch, acc, abk, asg, G, eta, adagrad, hll, akeys, aconst):
    """Alg. 2's ADD on the whole active set but the constant feature (``aconst``), each feature counted in
    the HyperLogLog ``hll`` and stepped in order, in every class: ``-eta g`` (sgd) or, with ``adagrad``, the
    count-min ADD of ``g^2`` and QUERY (:func:`~._sketch_kernels._cm_add_query`), then ``-eta g / sqrt(QUERY)``;
    classes whose gradient is 0 are not touched. When no class's gradient is 0 (the softmax's rule), row by
    row over a row's K adjacent class cells, loops the compiler vectorises (scratch ``gv``, ``dv``, ``mv`` of
    length K); each cell is written once, so the values are those of the class-by-class loop
    (:func:`_step_sparse`), to the bit.

    One call per minibatch, not one per feature, and the feature's step written out here, not an inlined
    helper: a call passes its arrays by value and takes and releases a reference to each, and an inlined
    helper copies its array arguments to its own variables, with the same atomic counts (a fifth of
    MISSION's run on 20 Newsgroups)."""
    K = G.shape[0]
    R = abk.shape[1]
    gv = np.empty(K, np.float64)
    dv = np.empty(K, np.float64)
    mv = np.empty(K, np.float64)
    for a in range(akeys.shape[0]):
        if a == aconst:
            continue
        _hll_add(hll, akeys[a])
        dense = True
        for c in range(K):
            gv[c] = G[c, a]
            if gv[c] == 0.0:
                dense = False
        if not dense:
            _step_sparse(sketch, acc, abk, asg, a, gv, eta, adagrad)
            continue
        if adagrad:
            _prefetch_cells(sketch, abk, a)  # the weight cells' lines, while the accumulators are summed
            if a + 1 < abk.shape[0]:
                _prefetch_cells(acc, abk, a + 1)  # the next feature's accumulators
            for c in range(K):
                mv[c] = np.inf
            for r in range(R):
                b = abk[a, r]
                for c in range(K):
                    g = gv[c]
                    v = acc[r, b, c] + g * g
                    acc[r, b, c] = v
                    mv[c] = v if v < mv[c] else mv[c]
            for c in range(K):
                dv[c] = _ada_step(eta, gv[c], mv[c])
        else:
            for c in range(K):
                dv[c] = -eta * gv[c]
        for r in range(R):
            b = abk[a, r]
            sg = asg[a, r]
            for c in range(K):
                sketch[r, b, c] += sg * dv[c]


@implements_update(MissionHyper)
@njit(cache=True, nogil=True)
def mission_update(offsets, indices, values, labels, weights, mb, nmb, spans, state, extra, hyper, eta, P0):
    """One MISSION iteration on the minibatch ``mb[:nmb]``: QUERY A_t intersect top-k, mean
    gradient on A_t, ADD ``-eta g`` on A_t, re-QUERY A_t and offer it to the heap. The constant
    feature's weight (``hyper.const_key``) is the intercept, stepped outside the sketch and never
    offered. ``extra`` is ``(acc, iacc, mkeys, mmask, mcount)``: with ``hyper.adagrad`` the
    count-min sketch of the squared mean gradients ``(R, W, K)`` and the intercept's sums ``(K,)``,
    each coordinate's step ``-eta g / sqrt(sum of its g^2 so far, this one included)`` (without,
    unused: empty); then the class membership map (empty: none, the per-class look-ups), rebuilt
    here when stale (``mcount[0] < 0``) or when this minibatch's features might fill it past half."""
    sketch = state.sketch
    K = sketch.shape[2]
    akeys, aocc, loc, abk, asg = _build_active(offsets, indices, mb, nmb, state.seeds, sketch.shape[1])
    nA = akeys.shape[0]
    tmp = np.empty(sketch.shape[0], np.float64)
    beta = np.empty((K, nA), np.float64)
    inheap = np.empty((K, nA), np.bool_)
    aconst = _const_index(akeys, hyper.const_key)
    acc, iacc, mkeys, mmask, mcount = extra
    use_mask = mkeys.shape[0] > 0
    slot = np.empty((K, nA), np.int64)  # members' heap slots, for the offers
    amask = np.empty(nA if use_mask else 0, np.uint64)  # empty: every class's position map looked up
    if use_mask:
        if mcount[0] < 0 or 2 * (mcount[0] + nA) > mkeys.shape[0]:
            mkeys, mmask = _mask_rebuild(state.hkeys, state.hsize, mcount, nA)
        _map_masks(mkeys, mmask, akeys, amask)
    _eff_weights_map(sketch, state.htk, akeys, abk, asg, amask, beta, inheap, slot, tmp,
                     state.intercept, aconst)
    P = P0  # the scores before the step: the driver reports them
    _mb_predict(offsets, values, mb, nmb, loc, beta, P)
    G = np.empty((K, nA), np.float64)
    adagrad = hyper.adagrad
    _mb_gradient(hyper.code, offsets, values, labels, weights, mb, nmb, loc, P, G, state.lrange, hyper.clip)
    if aconst >= 0:  # the intercept, outside the sketch (and not a feature the sketch holds: not counted)
        for c in range(K):
            g = G[c, aconst]
            if adagrad:
                if g == 0.0:
                    continue
                iacc[c] += g * g
                state.intercept[c] += _ada_step(eta, g, iacc[c])
            else:
                state.intercept[c] -= eta * g
    _step_active(sketch, acc, abk, asg, G, eta, adagrad, state.hll, akeys, aconst)
    ev = np.empty(2 * K * nA, np.int64)  # at most an entry and an eviction per offer
    nev = _offer_active_map(state, akeys, aocc, abk, asg, spans, tmp, np.empty((K, 0), np.float64), inheap, slot,
                            aconst, ev)  # no weights back
    if use_mask:
        _map_changes(mkeys, mmask, mcount, ev, nev)
    return acc, iacc, mkeys, mmask, mcount


@njit(**KERNEL)
def mission_run(offsets, indices, values, labels, weights, spans, state, extra, hyper,
                learn, flush, skip, pred_out, loss_out, pending_out, score_out):
    """MISSION over a batch: :func:`~streamlearn.algos._sketch_kernels.minibatch_run` with
    :func:`mission_update`; ``extra`` = ``(acc, iacc, mkeys, mmask, mcount)`` (AdaGrad's
    accumulators, empty without ``--step_rule adagrad``; the class membership map, possibly
    reallocated). Returns ``(examples learned, rows pending, extra)``."""
    return minibatch_run(offsets, indices, values, labels, weights, spans, state, extra, hyper,
                         learn, flush, skip, pred_out, loss_out, pending_out, score_out)
