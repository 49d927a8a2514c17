"""Compiled kernels of :mod:`streamlearn.algos.mission` (MISSION, Aghazadeh et al. ICML 2018).

MISSION is BEAR's first-order baseline (BEAR paper Sec. 6): the same Count Sketch + top-k
heap and the same minibatch driver as BEAR Alg. 2
(:func:`streamlearn.algos._sketch_kernels.minibatch_run`), with the descent direction ``z_t``
equal to the stochastic gradient (no oLBFGS, no second QUERY for a secant pair).
"""
from collections import namedtuple

import numpy as np
from numba import njit

from ._sketch_kernels import (DRIVER_HYPER, _active_gradient, _hll_add, _offer_active, _sketch_add,
                              implements_update, minibatch_run)

__all__ = ["MissionHyper", "mission_update", "mission_run"]


#: MISSION's hyper-parameters as its kernels take them: the driver's (``DRIVER_HYPER``).
MissionHyper = namedtuple("MissionHyper", DRIVER_HYPER)


@implements_update(MissionHyper)
@njit(cache=True, nogil=True)
def mission_update(offsets, indices, values, labels, weights, mb, nmb, spans, state, extra, hyper, eta):
    """One MISSION iteration on the minibatch ``mb[:nmb]``: QUERY A_t intersect top-k, mean
    gradient on A_t, ADD ``-eta g`` on A_t, re-QUERY A_t and offer it to the heap. MISSION has
    no state of its own: ``extra`` is returned as it came."""
    st = state
    sketch = st.sketch
    K = sketch.shape[0]
    akeys, aocc, loc, abk, asg, beta, inheap, P, G, tmp = _active_gradient(
        offsets, values, labels, weights, indices, mb, nmb, st, hyper.code)
    nA = akeys.shape[0]
    for a in range(nA):
        _hll_add(st.hll, akeys[a])
        for c in range(K):
            if G[c, a] != 0.0:
                _sketch_add(sketch[c], abk[a], asg[a], -eta * G[c, a])
    _offer_active(st, akeys, aocc, abk, asg, spans, tmp, np.empty((K, 0), np.float64), np.empty((K, 0), np.bool_))
    return extra


@njit(cache=True, nogil=True)
def mission_run(offsets, indices, values, labels, weights, spans, state, hyper,
                learn, flush, skip, pred_out, loss_out, pending_out):
    """MISSION over a batch: :func:`~streamlearn.algos._sketch_kernels.minibatch_run` with
    :func:`mission_update`. Returns ``(examples learned, rows pending)``."""
    learned, npend, _ = minibatch_run(offsets, indices, values, labels, weights, spans, state, 0, hyper,
                                      learn, flush, skip, pred_out, loss_out, pending_out)
    return learned, npend
