"""Compiled kernel of :mod:`streamlearn.algos.softmax`: multinomial logistic regression
(softmax cross-entropy over K classes) with AdaGrad's per-coordinate steps, progressive
validation inside.

Per example (features ``x``, importance ``h``, class ``y``): scores ``s_c = sum_j W[j, c] x_j``,
``p = softmax(s)``, loss ``log sum_c exp(s_c) - s_y`` (computed with the max subtracted), and
the gradient of the loss with respect to ``W[j, c]`` is ``(p_c - [y == c]) x_j``. The classes
are coupled through ``p``, so one kernel does all K per example. Update rules (``rule``):

* 0, plain diagonal AdaGrad (Duchi, Hazan & Singer 2011): with ``g = h (p_c - [y == c]) x_j``,
  ``G[j, c] += g^2``, ``W[j, c] -= eta g / sqrt(G[j, c])``.
* 1, normalized adaptive (Ross, Mineiro & Langford 2013, as VW's ``gd`` with adaptive +
  normalized): ``N[j] = max |x_j|`` seen (shared by the K classes, as it is a property of the
  feature; a larger ``|x_j|`` rescales row j's weights by ``N_old / |x_j|``), ``G[j, c] += h
  d_c^2 x_j^2`` with ``d_c = p_c - [y == c]``, the running sums ``sum h ||x / N||^2`` and
  ``sum h`` give the multiplier ``m = sqrt(sum h / sum h ||x/N||^2)`` and ``W[j, c] -= eta h m
  d_c x_j / (sqrt(G[j, c]) N[j])``. VW's importance-invariant closed form (Karampatziakis &
  Langford 2011) solves a scalar ODE of one prediction; the softmax couples K predictions, so
  there is no such closed form and this rule is the plain (non-invariant) one.

State is float32 (as VW's weights); arithmetic float64; accumulators saturate to float32's
range (``_sat32``).
"""
import math

import numpy as np
from numba import njit

from ..kernels._jit import INNER
from ._adagrad_kernels import X2_MIN, _sat32

__all__ = ["softmax_run"]

X_MIN = math.sqrt(X2_MIN)


@njit(**INNER)
def _softmax_record(s, d, i, lab, keep, pred_out, prob_out, loss_out):
    """Example ``i``'s record from its class scores ``s``: ``d`` <- the softmax probabilities
    (max-shifted), ``pred_out[i]`` <- the arg-max class id (1-based; NaN for NaN scores),
    ``prob_out[i]`` <- ``d`` when ``keep``, ``loss_out[i]`` <- the cross-entropy of label ``lab``
    (NaN when unlabeled). Returns whether the example is labeled. Shared by the joint softmax
    learners (softmax AdaGrad, FTSL-Shampoo)."""
    K = s.shape[0]
    best = 0
    for c in range(1, K):
        if s[c] > s[best]:
            best = c
    smax = s[best]
    z = 0.0
    for c in range(K):
        d[c] = math.exp(s[c] - smax)
        z += d[c]
    for c in range(K):
        d[c] /= z  # p_c
    pred_out[i] = best + 1.0
    if math.isnan(smax):
        pred_out[i] = math.nan
    if keep:
        for c in range(K):
            prob_out[i, c] = d[c]
    if math.isnan(lab):
        loss_out[i] = math.nan
        return False
    loss_out[i] = math.log(z) + smax - s[np.int64(lab) - 1]
    return True


@njit(cache=True, nogil=True)
def softmax_run(offsets, indices, values, labels, weights, W, G, N, scal, mask, eta, rule, learn,
                pred_out, loss_out, prob_out):
    """Predict (argmax class id 1..K, ties to the lowest), record the cross-entropy and the
    probabilities (``prob_out``: ``(n, K)``, or ``(0, K)`` for none), then (if ``learn``)
    update, for every example in order. ``W``, ``G``: ``(2^bits, K)`` float32; ``N``:
    ``(2^bits,)`` (rule 1) or ``(1,)``; ``scal``: ``[sum h ||x/N||^2, sum h]``. Labels are
    class ids 1..K (checked by the caller) or NaN (predict only). Returns the examples learned."""
    n = labels.shape[0]
    K = W.shape[1]
    keep = prob_out.shape[0] > 0
    s = np.empty(K)
    d = np.empty(K)
    learned = 0
    for i in range(n):
        a = offsets[i]
        b = offsets[i + 1]
        for c in range(K):
            s[c] = 0.0
        for k in range(a, b):
            j = np.int64(indices[k]) & mask
            x = values[k]
            for c in range(K):
                s[c] += W[j, c] * x
        lab = labels[i]
        if not _softmax_record(s, d, i, lab, keep, pred_out, prob_out, loss_out):
            continue
        y = np.int64(lab) - 1
        if not learn:
            continue
        h = weights[i]
        learned += 1
        if h <= 0.0:
            continue
        d[y] -= 1.0  # d_c = p_c - [y == c]
        if rule == 0:
            for k in range(a, b):
                j = np.int64(indices[k]) & mask
                x = values[k]
                for c in range(K):
                    g = h * d[c] * x
                    if g == 0.0:
                        continue
                    g64 = G[j, c] + g * g
                    G[j, c] = _sat32(g64)
                    if G[j, c] > 0.0:
                        den = math.sqrt(np.float64(G[j, c])) if g64 <= 3.4028234663852886e38 else math.sqrt(g64)
                        W[j, c] = _sat32(W[j, c] - eta * g / den)
        else:
            norm_x = 0.0
            for k in range(a, b):
                j = np.int64(indices[k]) & mask
                x = values[k]
                x2 = x * x
                if x2 < X2_MIN:
                    x = X_MIN if x > 0 else -X_MIN
                    x2 = X2_MIN
                ax = abs(x)
                if ax > N[j]:
                    if N[j] > 0.0:
                        r = N[j] / ax
                        for c in range(K):
                            W[j, c] *= r
                    N[j] = ax
                for c in range(K):
                    G[j, c] = _sat32(G[j, c] + h * d[c] * d[c] * x2)
                norm_x += x2 / (np.float64(N[j]) * N[j])
            scal[0] += h * norm_x
            scal[1] += h
            if scal[0] <= 0.0:
                continue
            m = math.sqrt(scal[1] / scal[0])
            for k in range(a, b):
                j = np.int64(indices[k]) & mask
                x = values[k]
                if x * x < X2_MIN:
                    x = X_MIN if x > 0 else -X_MIN
                base = -eta * h * m * x / np.float64(N[j])
                for c in range(K):
                    if G[j, c] > 0.0:
                        W[j, c] = _sat32(W[j, c] + base * d[c] / math.sqrt(np.float64(G[j, c])))
    return learned
