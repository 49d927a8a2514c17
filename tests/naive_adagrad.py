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
