"""Compiled kernels of :mod:`streamlearn.algos.adagrad` (progressive validation inside).

:func:`adagrad_run` is VW's ``gd`` reduction (vowpalwabbit/core/src/reductions/gd.cc, VW 9):
per example, the label range grows (VW's scorer ``set_minmax``), the prediction ``w . x`` (with
``--l1``: VW's truncated weights; times the ``--l2`` contraction) is clipped to that range, then,
if the loss is positive, the update of the rule ``rule`` (bits of :data:`ADAPTIVE`,
:data:`NORMALIZED`, :data:`INVARIANT`; :data:`SQRT_RATE` when ``--power_t`` is 0.5):

* adaptive: per-feature ``G_j += imp l'(p)^2 x_j^2`` and rate ``G_j^-power_t`` (AdaGrad, Duchi,
  Hazan & Singer 2011, diagonal);
* normalized: per-feature scale ``N_j = max |x_j|`` (weights rescaled when it grows) and the
  global ``sum_norm_x / total_weight`` multiplier (NAG, Ross, Mineiro & Langford 2013);
* invariant: the importance-invariant step (Karampatziakis & Langford 2011, VW's
  ``loss->get_update``) instead of ``-eta imp l'(p)``;
* neither adaptive nor normalized: ``eta (t)^-power_t`` with ``t`` the weight seen so far
  (``--initial_t`` included);
* ``--l1`` / ``--l2``: VW's lazy truncated gradient (gravity) and multiplicative shrinking
  (contraction), folded into the weights when they grow large (VW's ``sync_weights``).

:data:`LEGACY` selects the rules of streamlearn's earlier model files (:func:`_legacy_run`).
"""
import math

import numpy as np
from numba import njit

from ._loss_kernels import QUANTILE, deriv_tau, loss_deriv, loss_value, scalar_target, target, value_tau

__all__ = ["adagrad_run", "wexpmx", "sync_weights", "ADAPTIVE", "NORMALIZED", "INVARIANT", "SQRT_RATE",
           "LEGACY"]

SQUARED, LOGISTIC, HINGE = 0, 1, 2
#: bits of ``rule``
ADAPTIVE, NORMALIZED, INVARIANT, SQRT_RATE, LEGACY = 1, 2, 4, 8, 16
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
def _invariant_update(code, p, y, us, ppu, tau=0.5):
    """VW's importance-invariant update (loss.getUpdate): the step on the prediction scale."""
    if code == QUANTILE:
        err = y - p
        if err == 0.0:
            return 0.0
        normal = us * ppu
        if err > 0.0:
            return tau * us if tau * normal < err else err / ppu
        return (tau - 1.0) * us if -(1.0 - tau) * normal > err else err / ppu
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
def _legacy_run(offsets, indices, values, labels, weights,
                w, G, N, scal, mask, loss_code, eta, normalized, learn, pred_out, loss_out, raw_out):
    """The update rules of streamlearn before VW's default became the default (models whose
    meta has no ``update_rule``): plain Duchi AdaGrad with ``G += (imp l' x)^2`` entry by entry,
    or the normalized rule clipping squared-loss predictions to the labels seen *before* the
    example. Kept unchanged so that such models predict and learn exactly as they did."""
    n = labels.shape[0]
    learned = 0
    for i in range(n):
        a = offsets[i]
        b = offsets[i + 1]
        p = 0.0
        for k in range(a, b):
            p += w[np.int64(indices[k]) & mask] * values[k]
        raw_out[i] = p
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


@njit(cache=True, nogil=True, inline="always")
def _updates(code, p, y, lv):
    """Whether VW updates on this example: its loss, computed in float32, is > 0. For logistic
    loss that is ``log(1 + e^-yp)`` with ``1 + e^-yp`` rounded to float32, 0 once ``y p`` is above
    ~16.6 (float64 would still see a loss and take a full AdaGrad step on a new feature)."""
    if code == LOGISTIC:
        e = np.float32(math.exp(min(-y * p, 700.0)))
        return np.float32(1.0 + e) > 1.0
    return lv > 0.0


@njit(cache=True, nogil=True)
def sync_weights(w, scal):
    """Fold the ``--l1`` gravity ``scal[5]`` and the ``--l2`` contraction ``scal[6]`` into the
    weights and reset them (VW's ``sync_weights``); untouched (zero) weights are not written."""
    gravity = scal[5]
    contraction = scal[6]
    for j in range(w.shape[0]):
        wj = np.float64(w[j])
        if wj != 0.0:
            if gravity < abs(wj):
                wj = wj - gravity if wj > 0.0 else wj + gravity
            else:
                wj = 0.0
            w[j] = wj * contraction
    scal[5] = 0.0
    scal[6] = 1.0


@njit(cache=True, nogil=True, inline="always")
def _den(G, N, j, adaptive, normalized, sqrt_rate, power_t, nnp, g0):
    """1 / (VW's per-feature rate_decay): ``G^power_t`` (adaptive) times ``N^2^-nnp``
    (normalized); 0 where an adaptive ``G`` is 0 (no step)."""
    d = 1.0
    if adaptive:
        g = np.float64(G[j]) + g0
        if not g > 0.0:
            return 0.0
        d = math.sqrt(g) if sqrt_rate else g ** power_t
    if normalized:
        nj = np.float64(N[j])
        if sqrt_rate:
            d = d * nj if adaptive else nj * nj
        else:
            d = d * (nj * nj) ** (-nnp)
    return d


@njit(cache=True, nogil=True)
def _gd_run(offsets, indices, values, labels, weights, w, G, N, scal, mask, code, eta, rule, hp, learn,
            pred_out, loss_out, raw_out):
    adaptive = (rule & ADAPTIVE) != 0
    normalized = (rule & NORMALIZED) != 0
    invariant = (rule & INVARIANT) != 0
    sqrt_rate = (rule & SQRT_RATE) != 0
    power_t = hp[0]
    l1 = hp[1]
    l2 = hp[2]
    tau = hp[3]
    g0 = hp[4]
    clip = not (hp.shape[0] > 5 and hp[5] != 0.0)  # --no_clip: hp[5] = 1
    reg = l1 > 0.0 or l2 > 0.0
    nnp = power_t - 1.0 if adaptive else -1.0  # VW's neg_norm_power
    n = labels.shape[0]
    learned = 0
    for i in range(n):
        a = offsets[i]
        b = offsets[i + 1]
        lab = labels[i]
        labeled = not math.isnan(lab)
        y = scalar_target(code, lab) if labeled else 0.0
        if learn and labeled:  # VW's scorer: the label range grows before the prediction
            if y < scal[2]:
                scal[2] = y
            if y > scal[3]:
                scal[3] = y
        p = 0.0
        if l1 > 0.0:
            gravity = scal[5]
            for k in range(a, b):
                wj = np.float64(w[np.int64(indices[k]) & mask])
                if gravity < abs(wj):
                    p += (wj - gravity if wj > 0.0 else wj + gravity) * values[k]
        else:
            for k in range(a, b):
                p += w[np.int64(indices[k]) & mask] * values[k]
        if reg:
            p *= scal[6]
        raw_out[i] = p
        if clip:
            if p < scal[2]:
                p = scal[2]
            elif p > scal[3]:
                p = scal[3]
        pred_out[i] = p
        if not labeled:
            loss_out[i] = math.nan
            continue
        lv = value_tau(code, p, y, tau)
        loss_out[i] = lv
        if not learn:
            continue
        imp = weights[i]
        learned += 1
        if imp <= 0.0:
            continue
        t_prev = scal[4]
        scal[4] = t_prev + imp
        if not _updates(code, p, y, lv):
            continue
        dl = deriv_tau(code, p, y, tau)
        mult = 1.0
        if adaptive or normalized:
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
                if adaptive:
                    G[j] = _sat32(G[j] + g2 * x2)
                if normalized:
                    ax = abs(x)
                    if ax > N[j]:
                        if N[j] > 0.0:
                            if sqrt_rate:
                                r = N[j] / ax
                                w[j] *= r if adaptive else r * r
                            else:
                                r = ax / N[j]
                                w[j] *= (r * r) ** nnp
                        N[j] = ax
                    norm_x += x2 / (np.float64(N[j]) * N[j])
                d = _den(G, N, j, adaptive, normalized, sqrt_rate, power_t, nnp, g0)
                if d > 0.0:
                    ppu += x2 / d
            if normalized:
                scal[0] += imp * norm_x
                scal[1] += imp
                if scal[0] <= 0.0:
                    continue
                if sqrt_rate:
                    mult = math.sqrt(scal[1] / scal[0]) if adaptive else scal[1] / scal[0]
                else:
                    mult = (scal[0] / scal[1]) ** nnp
                ppu *= mult
            if ppu <= 0.0:
                continue
        else:
            ppu = 0.0
            for k in range(a, b):
                ppu += values[k] * values[k]
        us = eta * imp
        if not adaptive:
            us *= (t_prev + imp) ** -power_t
        if invariant:
            upd = _invariant_update(code, p, y, us, ppu, tau)
        else:
            upd = -us * dl
        if reg and abs(upd) > 1e-8:
            eta_bar = -upd / dl if abs(dl) > 1e-8 else 0.0
            if abs(dl) > 1e-8:
                scal[6] *= 1.0 - l2 * eta_bar
            upd /= scal[6]
            scal[5] += eta_bar * l1
        if not (math.isnan(upd) or upd == 0.0):
            upd *= mult
            for k in range(a, b):
                j = np.int64(indices[k]) & mask
                x = values[k]
                if adaptive or normalized:
                    if x * x < X2_MIN:
                        x = X_MIN if x > 0 else -X_MIN
                    d = _den(G, N, j, adaptive, normalized, sqrt_rate, power_t, nnp, g0)
                    if d > 0.0:
                        w[j] = _sat32(w[j] + upd * x / d)
                else:
                    w[j] = _sat32(w[j] + upd * x)
        if reg and (scal[6] < 1e-9 or scal[5] > 1e3):
            sync_weights(w, scal)
    return learned


@njit(cache=True, nogil=True)
def adagrad_run(offsets, indices, values, labels, weights, w, G, N, scal, mask, loss_code, eta, rule, hp,
                learn, pred_out, loss_out, raw_out):
    """Predict, record, then (if ``learn``) update, for every example in order; returns the
    number of examples learned from.

    ``rule``: bits :data:`ADAPTIVE`, :data:`NORMALIZED`, :data:`INVARIANT`, :data:`SQRT_RATE`
    (``--power_t 0.5``), :data:`LEGACY`. ``hp``: ``[power_t, l1, l2, quantile_tau, G0, no_clip]`` (``G0``:
    the ``--initial_t`` every adaptive ``G`` starts from, as VW; not stored in ``G``; ``no_clip`` = 1:
    the prediction is not clipped to VW's label range ``scal[2:4]``, which still grows).
    ``scal``: ``[sum_norm_x, total_weight, min_label, max_label, t, l1 gravity, l2 contraction, 0]``
    (VW's ``normalized_sum_norm_x``, ``total_weight``, label range, ``t``, ``gravity``,
    ``contraction``). ``raw_out``: the score before clipping (VW's ``partial_prediction``, ``-r``).
    """
    if rule & LEGACY:
        return _legacy_run(offsets, indices, values, labels, weights, w, G, N, scal, mask, loss_code, eta,
                           (rule & NORMALIZED) != 0, learn, pred_out, loss_out, raw_out)
    return _gd_run(offsets, indices, values, labels, weights, w, G, N, scal, mask, loss_code, eta, rule, hp,
                   learn, pred_out, loss_out, raw_out)
