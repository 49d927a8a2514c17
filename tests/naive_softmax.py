"""Slow, obvious NumPy reference for softmax regression with AdaGrad steps (one example at a
time, dense weights), written from the formulas of streamlearn.algos._softmax_kernels'
docstring: p = softmax(W^T x), loss = -log p_y, gradient (p - e_y) x^T."""
import numpy as np


def f32(a):
    """The learner stores its state as float32: round, then compute on in float64."""
    return np.asarray(a).astype(np.float32).astype(np.float64)


def softmax_reference(X, y, K, eta, normalized, imp=None):
    """Predict (argmax, ties to the lowest class), record the cross-entropy and p, then learn.
    ``y``: class ids 1..K or NaN (predict only). Returns (pred, loss, probs)."""
    n, d = X.shape
    imp = np.ones(n) if imp is None else imp
    W = np.zeros((d, K))
    G = np.zeros((d, K))
    N = np.zeros(d)
    S = T = 0.0  # sum h ||x / N||^2, sum h
    pred, loss, probs = np.empty(n), np.empty(n), np.empty((n, K))
    for t in range(n):
        idx = np.flatnonzero(X[t])
        x = X[t, idx]
        s = np.zeros(K)
        for j, xj in zip(idx, x):  # in the example's feature order
            s += W[j] * xj
        e = np.exp(s - s.max())
        p = e / e.sum()
        pred[t] = np.argmax(s) + 1
        probs[t] = p
        if np.isnan(y[t]):
            loss[t] = np.nan
            continue
        c = int(y[t]) - 1
        loss[t] = np.log(np.exp(s - s.max()).sum()) + s.max() - s[c]
        h = imp[t]
        if h <= 0:
            continue
        dl = p.copy()
        dl[c] -= 1.0
        if not normalized:  # Duchi et al.: G += g^2, w -= eta g / sqrt(G)
            g = (h * dl)[None, :] * x[:, None]
            G[idx] = f32(G[idx] + g * g)  # stored as float32, then read
            Gi = G[idx]
            step = np.where(Gi > 0, eta * g / np.sqrt(np.where(Gi > 0, Gi, 1.0)), 0.0)
            W[idx] -= step
        else:  # normalized adaptive (Ross et al. 2013), N shared by the classes of a feature
            ax = np.abs(x)
            Ni = N[idx]
            grow = ax > Ni
            scale = np.where(grow & (Ni > 0), Ni / np.where(grow, ax, 1.0), 1.0)
            W[idx] = f32(W[idx] * scale[:, None])
            N[idx] = f32(np.maximum(Ni, ax))
            G[idx] = f32(G[idx] + (h * dl * dl)[None, :] * (x * x)[:, None])
            S += h * float(np.sum(x * x / N[idx] ** 2))
            T += h
            m = np.sqrt(T / S)
            Gi = G[idx]
            upd = ((eta * h * m * x / N[idx])[:, None] * dl[None, :]) / np.sqrt(np.where(Gi > 0, Gi, 1.0))
            W[idx] -= np.where(Gi > 0, upd, 0.0)
        # the learner stores float32 state
        W = f32(W)
    return pred, loss, probs
