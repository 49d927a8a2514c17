"""Compiled kernels of :mod:`streamlearn.algos.adagrad` (progressive validation inside).

Two update rules share one loop:

* plain diagonal AdaGrad (Duchi, Hazan & Singer 2011, Fig. 1 / Eq. 19, diagonal case):
  ``G_j += g_j^2``, ``w_j -= eta g_j / sqrt(G_j)`` with ``g = l'(p) x`` (times the importance
  weight); entries of one example are updated one after another, as VW does.
* ``normalized``: VW's default learner (``gd`` with adaptive + normalized + invariant):
  the scale-invariant normalized adaptive update of Ross, Mineiro & Langford (2013, NAG),
  with the importance-invariant update of Karampatziakis & Langford (2011).
"""
import math

import numpy as np
from numba import njit

from ._loss_kernels import loss_deriv, loss_value, target

__all__ = ["adagrad_run", "wexpmx"]

SQUARED, LOGISTIC, HINGE = 0, 1, 2
X2_MIN = 1.1754943508222875e-38  # FLT_MIN, as VW
X_MIN = math.sqrt(X2_MIN)
F32_MAX = 3.4028234663852886e38  # the state is float32, as VW's


@njit(cache=True, nogil=True, inline="always")
def _sat32(v):
    """Saturate ``v`` to float32's finite range (numeric safety: a gradient of 1e36, from
    feature values of 1e30 with large importance weights, squares past float32's range; the
    accumulator saturates instead of becoming inf, which would turn the weight into NaN)."""
    if v > F32_MAX:
        return F32_MAX
    if v < -F32_MAX:
        return -F32_MAX
    return v


@njit(cache=True, nogil=True)
def wexpmx(x):
    """W(e^x) - x, where W is Lambert's W (solution of W e^W = e^x), by Newton's method."""
    if x < 1.0:
        w = math.exp(x)
        w = w / (1.0 + w) if x < -2.0 else 0.6 * w
        w = max(w, 1e-300)
    else:
        w = x - math.log(x) if x > 1.5 else 0.8
    for _ in range(50):
        # f(w) = w + log(w) - x
        f = w + math.log(w) - x
        nw = w - f / (1.0 + 1.0 / w)
        if nw <= 0.0:
            nw = w * 0.5
        if abs(nw - w) <= 1e-15 * max(1.0, abs(w)):
            w = nw
            break
        w = nw
    return w - x


@njit(cache=True, nogil=True, inline="always")
def _invariant_update(code, p, y, us, ppu):
    """VW's importance-invariant update (loss.getUpdate): the step on the prediction scale."""
    if code == SQUARED:
        if us * ppu < 1e-6:
            return 2.0 * (y - p) * us
        return (y - p) * (1.0 - math.exp(-2.0 * us * ppu)) / ppu
    if code == LOGISTIC:
        d = math.exp(min(y * p, 700.0))
        if us * ppu < 1e-6:
            return y * us / (1.0 + d)
        x = us * ppu + y * p + d
        return -(y * wexpmx(x) + p) / ppu
    if y * p >= 1.0:
        return 0.0
    err = 1.0 - y * p
    return y * (us if us * ppu < err else err / ppu)


@njit(cache=True, nogil=True)
def adagrad_run(offsets, indices, values, labels, weights,
                w, G, N, scal, mask, loss_code, eta, normalized, learn, pred_out, loss_out):
    """Predict, record, then (if ``learn``) update, for every example in order.

    ``scal`` holds the normalized rule's running sums: ``[sum_norm_x, total_weight,
    min_label, max_label]`` (VW's ``normalized_sum_norm_x``, ``total_weight`` and label range
    used to clip squared-loss predictions). Returns the number of examples learned from.
    """
    n = labels.shape[0]
    learned = 0
    for i in range(n):
        a = offsets[i]
        b = offsets[i + 1]
        p = 0.0
        for k in range(a, b):
            p += w[np.int64(indices[k]) & mask] * values[k]
        if normalized:
            # VW clips scalar predictions to its label range: the labels seen so far for
            # squared loss, [-50, 50] for logistic loss
            if loss_code == SQUARED:
                if p < scal[2]:
                    p = scal[2]
                elif p > scal[3]:
                    p = scal[3]
            elif loss_code == LOGISTIC:
                if p < -50.0:
                    p = -50.0
                elif p > 50.0:
                    p = 50.0
        pred_out[i] = p
        lab = labels[i]
        if math.isnan(lab):
            loss_out[i] = math.nan
            continue
        y = target(loss_code, lab)
        loss_out[i] = loss_value(loss_code, p, y)
        if not learn:
            continue
        imp = weights[i]
        learned += 1
        if normalized:
            if loss_code == SQUARED:
                if y < scal[2]:
                    scal[2] = y
                if y > scal[3]:
                    scal[3] = y
            if loss_out[i] <= 0.0 or imp <= 0.0:
                continue
            dl = loss_deriv(loss_code, p, y)
            g2 = imp * dl * dl
            if g2 == 0.0:
                continue
            norm_x = 0.0
            ppu = 0.0
            for k in range(a, b):
                j = np.int64(indices[k]) & mask
                x = values[k]
                x2 = x * x
                if x2 < X2_MIN:
                    x = X_MIN if x > 0 else -X_MIN
                    x2 = X2_MIN
                G[j] = _sat32(G[j] + g2 * x2)
                ax = abs(x)
                if ax > N[j]:
                    if N[j] > 0.0:
                        w[j] *= N[j] / ax
                    N[j] = ax
                norm_x += x2 / (np.float64(N[j]) * N[j])
                if G[j] > 0.0:  # float32 G can underflow to 0 for a vanishing gradient
                    ppu += x2 / (math.sqrt(np.float64(G[j])) * N[j])
            scal[0] += imp * norm_x
            scal[1] += imp
            if ppu <= 0.0 or scal[0] <= 0.0:
                continue
            mult = math.sqrt(scal[1] / scal[0])
            ppu *= mult
            upd = _invariant_update(loss_code, p, y, eta * imp, ppu)
            if math.isnan(upd) or upd == 0.0:
                continue
            upd *= mult
            for k in range(a, b):
                j = np.int64(indices[k]) & mask
                x = values[k]
                if x * x < X2_MIN:
                    x = X_MIN if x > 0 else -X_MIN
                if G[j] > 0.0:
                    w[j] = _sat32(w[j] + upd * x / (math.sqrt(np.float64(G[j])) * N[j]))
        else:
            dl = loss_deriv(loss_code, p, y) * imp
            if dl == 0.0:
                continue
            for k in range(a, b):
                j = np.int64(indices[k]) & mask
                gj = dl * values[k]
                g64 = G[j] + gj * gj
                G[j] = _sat32(g64)
                if G[j] > 0.0:
                    # |gj| / sqrt(G) <= 1 (G includes gj^2); where G saturated, divide by the
                    # unsaturated float64 sum so the step stays <= eta
                    den = math.sqrt(np.float64(G[j])) if g64 <= F32_MAX else math.sqrt(g64)
                    w[j] = _sat32(w[j] - eta * gj / den)
    return learned
