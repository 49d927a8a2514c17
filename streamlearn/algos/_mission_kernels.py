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
``-eta g / sqrt(QUERY)``. The intercept's accumulator is one float per class, exact.
"""
from collections import namedtuple

import numpy as np
from numba import njit

from ..kernels._jit import KERNEL
from ._sketch_kernels import (DRIVER_HYPER, _build_active, _const_index, _eff_weights, _hll_add, _mb_gradient, _mb_predict,
                              _add_ca, _offer_active, implements_update, minibatch_run)

__all__ = ["MissionHyper", "mission_update", "mission_run", "cm_add_query"]


#: MISSION's hyper-parameters as its kernels take them: the driver's (``DRIVER_HYPER``), then
#: ``adagrad`` (``--step_rule adagrad``: per-feature steps from the count-min accumulator).
MissionHyper = namedtuple("MissionHyper", DRIVER_HYPER + ("adagrad",))


@njit(cache=True, nogil=True, inline="always")
def _cm_add_query(acc, c, abk, a, g2):
    """Count-min sketch of class ``c`` (``acc``: ``(R, W, K)``, the weight sketch's buckets
    ``abk[a]``, no signs): ADD ``g2`` to active feature ``a``'s cell in every row, then QUERY its
    estimate, the minimum over the rows."""
    m = np.inf
    for r in range(abk.shape[1]):
        v = acc[r, abk[a, r], c] + g2
        acc[r, abk[a, r], c] = v
        if v < m:
            m = v
    return m


@njit(cache=True, nogil=True)
def cm_add_query(acc, c, abk, a, g2):
    """:func:`_cm_add_query` callable from Python (tests)."""
    return _cm_add_query(acc, c, abk, a, g2)


@implements_update(MissionHyper)
@njit(cache=True, nogil=True)
def mission_update(offsets, indices, values, labels, weights, mb, nmb, spans, state, extra, hyper, eta, P0):
    """One MISSION iteration on the minibatch ``mb[:nmb]``: QUERY A_t intersect top-k, mean
    gradient on A_t, ADD ``-eta g`` on A_t, re-QUERY A_t and offer it to the heap. The constant
    feature's weight (``hyper.const_key``) is the intercept, stepped outside the sketch and never
    offered. ``extra`` is ``(acc, iacc)``: with ``hyper.adagrad`` the count-min sketch of the
    squared mean gradients ``(R, W, K)`` and the intercept's sums ``(K,)``, each coordinate's
    step ``-eta g / sqrt(sum of its g^2 so far, this one included)``; without, unused (empty)."""
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
    adagrad = hyper.adagrad
    acc, iacc = extra
    _mb_gradient(hyper.code, offsets, values, labels, weights, mb, nmb, loc, P, G, state.lrange, hyper.clip)
    for a in range(nA):
        if a == aconst:  # the intercept, outside the sketch (and not a feature the sketch holds: not counted)
            for c in range(K):
                g = G[c, a]
                if adagrad:
                    if g == 0.0:
                        continue
                    iacc[c] += g * g
                    state.intercept[c] -= eta * g / np.sqrt(iacc[c])
                else:
                    state.intercept[c] -= eta * g
            continue
        _hll_add(state.hll, akeys[a])
        for c in range(K):
            g = G[c, a]
            if g != 0.0:
                if adagrad:
                    _add_ca(sketch, c, abk, asg, a, -eta * g / np.sqrt(_cm_add_query(acc, c, abk, a, g * g)))
                else:
                    _add_ca(sketch, c, abk, asg, a, -eta * g)
    _offer_active(state, akeys, aocc, abk, asg, spans, tmp, np.empty((K, 0), np.float64), inheap,
                  aconst)  # no weights back
    return extra


@njit(**KERNEL)
def mission_run(offsets, indices, values, labels, weights, spans, state, extra, hyper,
                learn, flush, skip, pred_out, loss_out, pending_out, score_out):
    """MISSION over a batch: :func:`~streamlearn.algos._sketch_kernels.minibatch_run` with
    :func:`mission_update`; ``extra`` = ``(acc, iacc)`` (AdaGrad's accumulators, empty without
    ``--step_rule adagrad``). Returns ``(examples learned, rows pending, extra)``."""
    return minibatch_run(offsets, indices, values, labels, weights, spans, state, extra, hyper,
                         learn, flush, skip, pred_out, loss_out, pending_out, score_out)
