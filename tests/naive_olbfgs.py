"""Dense NumPy references for the sketch learners (BEAR, MISSION): the oLBFGS two-loop
recursion (Alg. 1), the minibatch gradient, and plain minibatch oLBFGS / SGD, which BEAR and
MISSION must equal when the sketch has no collisions and k >= p (tests/test_bear.py,
tests/test_mission.py)."""
from collections import deque

import numpy as np

from streamlearn.algos.losses import get_loss


def dense_two_loop(g, pairs):
    """Alg. 1 on dense vectors; ``pairs`` oldest first."""
    if not pairs:
        return g.copy()
    q = g.copy()
    alphas = []
    for s, r in reversed(pairs):
        a = (s @ q) / (s @ r)
        alphas.append(a)
        q = q - a * r
    s, r = pairs[-1]
    z = (s @ r) / (r @ r) * q
    for (s, r), a in zip(pairs, reversed(alphas)):
        bb = (r @ z) / (s @ r)
        z = z + s * (a - bb)
    return z


def dense_grad(X, y, w, B, code, K, lrange=None):
    """Mean minibatch gradient; squared loss takes the derivative at the score clipped to the
    range of the labels learned so far (``lrange``, updated in place), as the kernels do."""
    P = X @ B.T
    if code == 3:
        e = np.exp(P - P.max(1, keepdims=True))
        pi = e / e.sum(1, keepdims=True)
        pi[np.arange(len(y)), y.astype(int) - 1] -= 1
        coef = pi * w[:, None]
    else:
        loss = get_loss(["squared", "logistic", "hinge"][code])
        Pc = P[:, 0]
        if code == 0 and lrange is not None:
            lrange[0], lrange[1] = min(lrange[0], y.min()), max(lrange[1], y.max())
            Pc = np.clip(Pc, lrange[0], lrange[1])
        coef = (loss.derivative(Pc, y) * w)[:, None]
    return coef.T @ X / len(y), P


def dense_olbfgs(X, y, K, code, b, eta, passes, tau=5, eps=1e-8, second_order=True, w=None,
                 damping=0.0, mask_r=False, clip=True, clip_r=False):
    """Plain minibatch oLBFGS (or SGD) over dense weights: the reference BEAR and MISSION
    must equal when the sketch has no collisions and k >= p. As in BEAR, the secant pair is
    taken on the features in the model before the step (the non-zero weights: all but at
    t = 0, where s = 0 and the pair is dropped), and r is damped to r + damping * s. With ``clip``
    (squared loss) the step's gradient is taken at the scores clipped to the label range, while
    ``r`` is the change of the unclipped gradient (issue 21: a clip binding at one end only makes
    ``r`` no secant of any function); ``clip_r=True`` clips both ends of ``r`` too (the defect)."""
    n, p = X.shape
    w = np.ones(n) if w is None else w
    B = np.zeros((max(K, 1), p))
    pairs = deque(maxlen=tau)
    preds = []
    lrange = [0.0, 0.0] if clip else None
    for _ in range(passes):
        for a in range(0, n, b):
            idx = slice(a, min(a + b, n))
            G, P = dense_grad(X[idx], y[idx], w[idx], B, code, K, lrange)
            preds.append(P.argmax(1) + 1.0 if code == 3 else P[:, 0])
            z = dense_two_loop(G.ravel(), list(pairs)).reshape(G.shape) if second_order else G
            B1 = B - eta * z
            B1m = np.where(B != 0, B1, 0.0)  # the same top-k set (all non-zero weights)
            rr = lrange if clip_r else None
            G0 = G if clip_r else dense_grad(X[idx], y[idx], w[idx], B, code, K, None)[0]
            G1, _ = dense_grad(X[idx], y[idx], w[idx], B1m, code, K, rr)
            s, r = (B1m - B).ravel(), (G1 - G0).ravel()
            if mask_r:  # Bear.secant_topk: r only on the top-k set (the non-zero weights)
                r = np.where(B.ravel() != 0, r, 0.0)
            r = r + damping * s
            if s @ r > eps * np.linalg.norm(s) * np.linalg.norm(r) and r @ r > 0:
                pairs.append((s, r))
            B = B1
    return B, np.concatenate(preds)
