"""Compiled kernel of the toy learner: plain SGD, progressive validation inside."""
from typing import NamedTuple

import numpy as np
from numba import njit

from streamlearn.algos._loss_kernels import loss_deriv, loss_value, target

__all__ = ["ToyState", "ToyHyper", "toy_run"]


class ToyState(NamedTuple):
    w: np.ndarray  # float64 (2^b,): the weights
    t: np.ndarray  # int64 (1,): examples learned


class ToyHyper(NamedTuple):
    mask: int
    loss_code: int
    eta: float


@njit(cache=True, nogil=True)
def toy_run(offsets, indices, values, labels, weights, state, hyper, learn, pred_out, loss_out):
    """For each example: predict, record, then (labeled, ``learn``) take the step
    ``w -= eta h l'(p) x``. Returns the number of examples learned."""
    w = state.w
    learned = 0
    for i in range(labels.shape[0]):
        p = 0.0
        for k in range(offsets[i], offsets[i + 1]):
            p += w[np.int64(indices[k]) & hyper.mask] * values[k]
        pred_out[i] = p
        lab = labels[i]
        if np.isnan(lab):
            loss_out[i] = np.nan
            continue
        y = target(hyper.loss_code, lab)
        loss_out[i] = loss_value(hyper.loss_code, p, y)
        if not learn or weights[i] <= 0.0:
            continue
        g = hyper.eta * weights[i] * loss_deriv(hyper.loss_code, p, y)
        for k in range(offsets[i], offsets[i + 1]):
            w[np.int64(indices[k]) & hyper.mask] -= g * values[k]
        state.t[0] += 1
        learned += 1
    return learned
