"""Slow, obvious NumPy references for AdaGrad (one example at a time, dense weights)."""
import math

import numpy as np

from streamlearn.algos.losses import get_loss


def adagrad_reference(X, y, loss_name, eta, imp=None):
    """Duchi et al. (2011) diagonal AdaGrad on dense X: predict, record, then update.
    G += g*g; w -= eta * g / sqrt(G) (coordinates with G = 0 untouched)."""
    loss = get_loss(loss_name)
    n, d = X.shape
    imp = np.ones(n) if imp is None else imp
    w = np.zeros(d)
    G = np.zeros(d)
    preds = np.empty(n)
    for t in range(n):
        x = X[t]
        p = float(w @ x)
        preds[t] = p
        g = loss.derivative(p, y[t]) * imp[t] * x
        G += g * g
        nz = G > 0
        w[nz] -= eta * g[nz] / np.sqrt(G[nz])
        w = w.astype(np.float32).astype(np.float64)  # the learner stores float32 weights
        G = G.astype(np.float32).astype(np.float64)
    return preds


def _wexpmx(x):
    # W(e^x) - x by bisection on w + log(w) = x (slow and obviously right)
    lo, hi = 1e-300, max(1.0, x + 1.0)
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if mid + math.log(mid) > x:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi) - x


def vw_normalized_reference(X, y, loss_name, eta=0.5, imp=None):
    """VW's default gd update (adaptive + normalized + invariant), literally, one example at a
    time on dense features (zero entries are absent, as in a sparse example)."""
    loss = get_loss(loss_name)
    n, d = X.shape
    imp = np.ones(n) if imp is None else imp
    w = np.zeros(d)
    G = np.zeros(d)
    N = np.zeros(d)
    sum_norm_x = 0.0
    total_w = 0.0
    lo_lab, hi_lab = 0.0, 0.0
    preds = np.empty(n)
    for t in range(n):
        idx = np.flatnonzero(X[t])
        x = X[t, idx]
        p = float(w[idx] @ x)
        if loss.name == "squared":
            p = min(max(p, lo_lab), hi_lab)
        elif loss.name == "logistic":
            p = min(max(p, -50.0), 50.0)
        preds[t] = p
        yy = float(loss.target(y[t]))
        if loss.name == "squared":
            lo_lab, hi_lab = min(lo_lab, yy), max(hi_lab, yy)
        if loss.value(p, y[t]) <= 0:
            continue
        g2 = imp[t] * float(loss.derivative(p, y[t])) ** 2
        G[idx] += g2 * x * x
        ax = np.abs(x)
        grow = ax > N[idx]
        old = N[idx]
        resc = grow & (old > 0)
        w[idx[resc]] *= old[resc] / ax[resc]
        N[idx[grow]] = ax[grow]
        norm_x = float(np.sum(x * x / N[idx] ** 2))
        rate = np.where(G[idx] > 0, 1.0 / np.sqrt(np.maximum(G[idx], 1e-300)) / N[idx], 0.0)
        sum_norm_x += imp[t] * norm_x
        total_w += imp[t]
        mult = math.sqrt(total_w / sum_norm_x)
        ppu = float(np.sum(x * x * rate)) * mult
        us = eta * imp[t]
        if loss.name == "squared":
            upd = 2 * (yy - p) * us if us * ppu < 1e-6 else (yy - p) * (1 - math.exp(-2 * us * ppu)) / ppu
        elif loss.name == "logistic":
            dd = math.exp(yy * p)
            upd = yy * us / (1 + dd) if us * ppu < 1e-6 else -(yy * _wexpmx(us * ppu + yy * p + dd) + p) / ppu
        else:
            err = 1 - yy * p
            upd = 0.0 if err <= 0 else yy * (us if us * ppu < err else err / ppu)
        w[idx] += upd * mult * x * rate
        w = w.astype(np.float32).astype(np.float64)
        G = G.astype(np.float32).astype(np.float64)
        N = N.astype(np.float32).astype(np.float64)
    return preds


def _vw_invariant_update(loss, p, y, us, ppu):
    """VW's loss->get_update (loss_functions.cc): the importance-aware step on the prediction
    scale, with VW's first-order branches for tiny ``us * ppu``."""
    if loss.name == "squared":
        return 2 * (y - p) * us if us * ppu < 1e-6 else (y - p) * (1 - math.exp(-2 * us * ppu)) / ppu
    if loss.name == "logistic":
        d = math.exp(y * p)
        return y * us / (1 + d) if us * ppu < 1e-6 else -(y * _wexpmx(us * ppu + y * p + d) + p) / ppu
    if loss.name == "hinge":
        err = 1 - y * p
        return 0.0 if err <= 0 else y * (us if us * ppu < err else err / ppu)
    tau = loss.tau  # quantile
    err = y - p
    if err == 0:
        return 0.0
    if err > 0:
        return tau * us if tau * us * ppu < err else err / ppu
    return (tau - 1) * us if -(1 - tau) * us * ppu > err else err / ppu


def vw_gd_reference(X, y, loss_name, *, adaptive=None, normalized=None, invariant=None, sgd=False, lr=None,
                    power_t=0.5, initial_t=None, l1=0.0, l2=0.0, tau=0.5, imp=None, clip=True):
    """VW 9's gd reduction (gd.cc: gd_setup, predict, compute_update, pred_per_update_feature,
    train; scorer.cc's label range; loss_functions.cc) with VW's command-line semantics, literally,
    one example at a time on dense features (zero entries absent, as in a sparse example).
    Returns (clipped predictions, raw scores). Weights, G and N are float32 as in VW.
    ``clip=False`` (streamlearn's ``--no_clip``, not a VW option): the prediction is the raw score."""
    loss = get_loss(loss_name, tau)
    named = bool(sgd or adaptive or normalized or invariant)
    if not named:
        adaptive = normalized = invariant = True
    adaptive, normalized, invariant = bool(adaptive), bool(normalized), bool(invariant)
    eta = lr if lr is not None else (0.5 if (not named or (adaptive and normalized)) else 10.0)
    if initial_t is None:
        initial_t = 1.0 if (named and not adaptive and not normalized) else 0.0
    if named and not adaptive and not normalized:
        eta *= initial_t ** power_t
    neg_norm_power = power_t - 1 if adaptive else -1.0
    n, d = X.shape
    imp = np.ones(n) if imp is None else imp
    w = np.zeros(d)
    G = np.full(d, initial_t if (adaptive and initial_t > 0) else 0.0)
    N = np.zeros(d)
    nsnx = tw = initial_t if initial_t > 0 else 0.0
    t = initial_t
    lo, hi = (-50.0, 50.0) if loss.name == "logistic" else (0.0, 0.0)
    gravity, contraction = 0.0, 1.0
    preds, raws = np.empty(n), np.empty(n)
    for i in range(n):
        idx = np.flatnonzero(X[i])
        x = X[i, idx]
        yy = float(loss.target(y[i]))
        lo, hi = min(lo, yy), max(hi, yy)
        wx = w[idx]
        if l1 > 0:
            wx = np.where(np.abs(wx) > gravity, wx - np.sign(wx) * gravity, 0.0)
        raw = float(wx @ x) * contraction
        p = min(max(raw, lo), hi) if clip else raw
        preds[i], raws[i] = p, raw
        t_prev, t = t, t + imp[i]
        if loss.name == "logistic":  # VW computes the loss in float32
            positive = np.float32(1.0) + np.float32(math.exp(-yy * p)) > 1
        else:
            positive = float(loss.value(p, y[i])) > 0
        if not positive:
            continue
        dl = float(loss.derivative(p, y[i]))
        mult = 1.0
        rate = np.ones(len(idx))
        if adaptive or normalized:
            g2 = imp[i] * dl * dl
            if adaptive:
                G[idx] += g2 * x * x
            if normalized:
                grow = np.abs(x) > N[idx]
                resc = grow & (N[idx] > 0)
                w[idx[resc]] *= (np.abs(x[resc]) / N[idx[resc]]) ** (2 * neg_norm_power)
                N[idx[grow]] = np.abs(x[grow])
                rate = rate * (N[idx] ** 2) ** neg_norm_power
            if adaptive:
                rate = rate * G[idx] ** -power_t
            ppu = float(np.sum(x * x * rate))
            if normalized:
                nsnx += imp[i] * float(np.sum(x * x / N[idx] ** 2))
                tw += imp[i]
                mult = (nsnx / tw) ** neg_norm_power
                ppu *= mult
        else:
            ppu = float(np.sum(x * x))
        us = eta * imp[i] * (1.0 if adaptive else (t_prev + imp[i]) ** -power_t)
        upd = _vw_invariant_update(loss, p, yy, us, ppu) if invariant else -us * dl
        if (l1 > 0 or l2 > 0) and abs(upd) > 1e-8:
            eta_bar = -upd / dl if abs(dl) > 1e-8 else 0.0
            if abs(dl) > 1e-8:
                contraction *= 1 - l2 * eta_bar
            upd /= contraction
            gravity += eta_bar * l1
        w[idx] += upd * mult * x * rate
        w = w.astype(np.float32).astype(np.float64)
        G = G.astype(np.float32).astype(np.float64)
        N = N.astype(np.float32).astype(np.float64)
        if contraction < 1e-9 or gravity > 1e3:
            w = np.where(np.abs(w) > gravity, w - np.sign(w) * gravity, 0.0) * contraction
            w = w.astype(np.float32).astype(np.float64)
            gravity, contraction = 0.0, 1.0
    return preds, raws
