"""Compiled kernels of :mod:`streamlearn.algos.mission` (MISSION, Aghazadeh et al. ICML 2018).

MISSION is BEAR's first-order baseline (BEAR paper Sec. 6): the same Count Sketch + top-k
heap and the same minibatch loop as BEAR Alg. 2, with the descent direction ``z_t`` equal to
the stochastic gradient (no oLBFGS, no second QUERY for a secant pair).
"""

import numpy as np
from numba import njit

from ._sketch_kernels import (build_active, copy_name, eff_weights, hll_add, heap_offer,
                              mb_gradient, mb_predict, predict_and_collect,
                              sketch_add, sketch_query)

__all__ = ["mission_update", "mission_run", "step_size"]


@njit(cache=True, nogil=True)
def step_size(eta0, schedule, t0, t):
    """Step of iteration ``t``: constant ``eta0`` or ``eta0 * t0 / (t0 + t)`` (the paper's
    ``eta0' / (t + T0)`` with ``eta0' = eta0 * T0``, so ``eta0`` is always the first step)."""
    if schedule == 0:
        return eta0
    return eta0 * t0 / (t0 + t)


@njit(cache=True, nogil=True)
def mission_update(offsets, indices, values, labels, weights, mb, nmb,
                   text, name_start, name_end, ns_start, ns_end,
                   sketch, seeds, hkeys, hw, htpos, hname, htbl, hsize, names, name_len, hll,
                   code, eta, lrange):
    """One MISSION iteration on the minibatch ``mb[:nmb]``: QUERY A_t intersect top-k, mean
    gradient on A_t, ADD ``-eta g`` on A_t, re-QUERY A_t and offer it to the heap."""
    K = sketch.shape[0]
    R = sketch.shape[1]
    W = sketch.shape[2]
    akeys, aocc, loc, abk, asg = build_active(offsets, indices, mb, nmb, seeds, W)
    nA = akeys.shape[0]
    tmp = np.empty(R, np.float64)
    beta = np.empty((K, nA), np.float64)
    inheap = np.empty((K, nA), np.bool_)
    eff_weights(sketch, htbl, hkeys, akeys, abk, asg, beta, inheap, tmp)
    P = np.empty((nmb, K), np.float64)
    mb_predict(offsets, values, mb, nmb, loc, beta, P)
    G = np.empty((K, nA), np.float64)
    mb_gradient(code, offsets, values, labels, weights, mb, nmb, loc, P, G, lrange)
    for a in range(nA):
        hll_add(hll, akeys[a])
        for c in range(K):
            if G[c, a] != 0.0:
                sketch_add(sketch[c], abk[a], asg[a], -eta * G[c, a])
    for c in range(K):
        for a in range(nA):
            v = sketch_query(sketch[c], abk[a], asg[a], tmp)
            nid = heap_offer(hkeys[c], hw[c], htpos[c], hname[c], htbl[c], hsize[c:c + 1],
                             akeys[a], v)
            if nid >= 0:
                copy_name(names[c], name_len[c], nid, aocc[a], text, name_start, name_end,
                          ns_start, ns_end)


@njit(cache=True, nogil=True)
def mission_run(offsets, indices, values, labels, weights,
                text, name_start, name_end, ns_start, ns_end,
                sketch, seeds, hkeys, hw, htpos, hname, htbl, hsize, names, name_len, hll,
                counters, code, eta0, schedule, t0, b, learn, flush, skip,
                pred_out, loss_out, pending_out, lrange):
    """Progressive validation over the batch: every example is predicted with the model as it
    is before the update of the minibatch it belongs to, then labeled examples are collected
    into minibatches of ``b``; a full minibatch is learned at once.

    Rows ``< skip`` are the buffered start of a minibatch, already predicted by an earlier
    call (their predictions are not recomputed). With ``flush`` a final partial minibatch is
    learned too; otherwise its rows are written to ``pending_out``.
    ``counters[0]`` is the iteration count t. Returns ``(examples learned, rows pending)``.
    """
    n = labels.shape[0]
    K = sketch.shape[0]
    R = sketch.shape[1]
    mb = np.empty(n + 1, np.int64)
    nmb = 0
    learned = 0
    p = np.empty(K, np.float64)
    bk = np.empty(R, np.int64)
    sg = np.empty(R, np.float64)
    tmp = np.empty(R, np.float64)
    out = np.empty(2, np.float64)
    for i in range(n + 1):
        last = i == n  # one extra round: learn a final partial minibatch when flushing
        if not last:
            nmb = predict_and_collect(i, skip, learn, code, offsets, indices, values, labels, sketch, seeds,
                                      htbl, hkeys, p, bk, sg, tmp, out, pred_out, loss_out, mb, nmb)
        if nmb >= b or (last and learn and flush and nmb > 0):
            eta = step_size(eta0, schedule, t0, counters[0])
            mission_update(offsets, indices, values, labels, weights, mb, nmb,
                           text, name_start, name_end, ns_start, ns_end,
                           sketch, seeds, hkeys, hw, htpos, hname, htbl, hsize, names, name_len,
                           hll, code, eta, lrange)
            counters[0] += 1
            learned += nmb
            nmb = 0
    for q in range(nmb):
        pending_out[q] = mb[q]
    return learned, nmb
