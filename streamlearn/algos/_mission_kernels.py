"""Compiled kernels of :mod:`streamlearn.algos.mission` (MISSION, Aghazadeh et al. ICML 2018).

MISSION is BEAR's first-order baseline (BEAR paper Sec. 6): the same Count Sketch + top-k
heap and the same minibatch driver as BEAR Alg. 2
(:func:`streamlearn.algos._sketch_kernels.minibatch_run`), with the descent direction ``z_t``
equal to the stochastic gradient (no oLBFGS, no second QUERY for a secant pair).
"""
from collections import namedtuple

import numpy as np
from numba import njit

from ..kernels._jit import KERNEL
from ._sketch_kernels import (DRIVER_HYPER, _build_active, _const_index, _eff_weights, _hll_add, _mb_gradient, _mb_predict,
                              _add_ca, _offer_active, implements_update, minibatch_run)

__all__ = ["MissionHyper", "mission_update", "mission_run"]


#: MISSION's hyper-parameters as its kernels take them: the driver's (``DRIVER_HYPER``).
MissionHyper = namedtuple("MissionHyper", DRIVER_HYPER)


@implements_update(MissionHyper)
@njit(cache=True, nogil=True)
def mission_update(offsets, indices, values, labels, weights, mb, nmb, spans, state, extra, hyper, eta, P0):
    """One MISSION iteration on the minibatch ``mb[:nmb]``: QUERY A_t intersect top-k, mean
    gradient on A_t, ADD ``-eta g`` on A_t, re-QUERY A_t and offer it to the heap. The constant
    feature's weight (``hyper.const_key``) is the intercept, stepped outside the sketch and never
    offered. MISSION has no state of its own: ``extra`` is returned as it came."""
    sketch = state.sketch
    K = sketch.shape[2]
    akeys, aocc, loc, abk, asg = _build_active(offsets, indices, mb, nmb, state.seeds, sketch.shape[1])
    nA = akeys.shape[0]
    tmp = np.empty(sketch.shape[0], np.float64)
    beta = np.empty((K, nA), np.float64)
    inheap = np.empty((K, nA), np.bool_)
    aconst = _const_index(akeys, hyper.const_key)
    _eff_weights(sketch, state.htbl, state.hkeys, akeys, abk, asg, beta, inheap, tmp, state.intercept, aconst)
    P = P0  # the scores before the step: the driver reports them
    _mb_predict(offsets, values, mb, nmb, loc, beta, P)
    G = np.empty((K, nA), np.float64)
    _mb_gradient(hyper.code, offsets, values, labels, weights, mb, nmb, loc, P, G, state.lrange, hyper.clip)
    for a in range(nA):
        if a == aconst:  # the intercept, outside the sketch (and not a feature the sketch holds: not counted)
            for c in range(K):
                state.intercept[c] -= eta * G[c, a]
            continue
        _hll_add(state.hll, akeys[a])
        for c in range(K):
            if G[c, a] != 0.0:
                _add_ca(sketch, c, abk, asg, a, -eta * G[c, a])
    _offer_active(state, akeys, aocc, abk, asg, spans, tmp, np.empty((K, 0), np.float64), inheap,
                  aconst)  # no weights back
    return extra


@njit(**KERNEL)
def mission_run(offsets, indices, values, labels, weights, spans, state, hyper,
                learn, flush, skip, pred_out, loss_out, pending_out, score_out):
    """MISSION over a batch: :func:`~streamlearn.algos._sketch_kernels.minibatch_run` with
    :func:`mission_update`. Returns ``(examples learned, rows pending)``."""
    learned, npend, _ = minibatch_run(offsets, indices, values, labels, weights, spans, state, 0, hyper,
                                      learn, flush, skip, pred_out, loss_out, pending_out, score_out)
    return learned, npend
