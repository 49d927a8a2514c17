"""Dense NumPy references for the sketch learners (BEAR, MISSION): the oLBFGS two-loop
recursion (Alg. 1), the minibatch gradient, plain minibatch oLBFGS / SGD, which BEAR and
MISSION must equal when the sketch has no collisions and k >= p (tests/test_bear.py,
tests/test_mission.py), and :func:`dense_topk`: BEAR Alg. 2 / MISSION with the top-k set of
line 10 kept as a set (k < p), which they must equal when the sketch has no collisions.

The intercept: column ``intercept`` of ``X`` (the constant feature) has a weight that is always
in the model and never competes for a top-k slot (issue 21)."""
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


def dense_two_loop_diag(g, pairs, dvec, gmax=1.0):
    """Alg. 1 with the initial matrix ``gamma diag(dvec)`` (``--initial_scaling adagrad``):
    ``pairs`` oldest first as ``(s, r, rdr)`` with ``rdr`` = r.D r when the pair was stored,
    ``gamma = min(gmax, s.r / rdr)`` of the newest pair; no pairs: ``dvec * g``."""
    if not pairs:
        return dvec * g
    q = g.copy()
    alphas = []
    for s, r, _ in reversed(pairs):
        a = (s @ q) / (s @ r)
        alphas.append(a)
        q = q - a * r
    s, r, rdr = pairs[-1]
    z = min(gmax, (s @ r) / rdr) * dvec * q
    for (s, r, _), a in zip(pairs, reversed(alphas)):
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
                 damping=0.0, mask_r=False, clip=True, clip_r=False, intercept=None, h0="gamma"):
    """Plain minibatch oLBFGS (or SGD) over dense weights: the reference BEAR and MISSION
    must equal when the sketch has no collisions and k >= p. As in BEAR, the secant pair is
    taken on the features in the model before the step (the non-zero weights: all but at
    t = 0, where s = 0 and the pair is dropped), and r is damped to r + damping * s. With ``clip``
    (squared loss) the step's gradient is taken at the scores clipped to the label range, while
    ``r`` is the change of the unclipped gradient (issue 21: a clip binding at one end only makes
    ``r`` no secant of any function); ``clip_r=True`` clips both ends of ``r`` too (the defect).
    Column ``intercept`` (the constant feature) is in the model from the start (its secant
    entry is not masked at t = 0). The step is taken on the minibatch's active columns only
    (Alg. 2 line 6; the two-loop's direction also has entries on older pairs' supports).

    ``h0="adagrad"`` (``--initial_scaling adagrad``, not in the paper): A += G^2 (the step's
    gradient) before the direction; the two-loop's initial matrix is gamma D, D = diag(A^-1/2) on the
    minibatch's active columns (all classes) and 0 elsewhere, gamma = min(1, s.r / r.D r) of the newest
    pair (D as when it was stored); damping r + delta D^-1 s; a pair also needs r.D r > 0."""
    n, p = X.shape
    A = np.zeros((max(K, 1), p))
    w = np.ones(n) if w is None else w
    B = np.zeros((max(K, 1), p))
    always = np.zeros(p, bool)
    if intercept is not None:
        always[intercept] = True
    pairs = deque(maxlen=tau)
    preds = []
    lrange = [0.0, 0.0] if clip else None
    for _ in range(passes):
        for a in range(0, n, b):
            idx = slice(a, min(a + b, n))
            G, P = dense_grad(X[idx], y[idx], w[idx], B, code, K, lrange)
            preds.append(P.argmax(1) + 1.0 if code == 3 else P[:, 0])
            dvec = None
            if h0 == "adagrad":
                A += G * G
                act = np.broadcast_to((X[idx] != 0).any(0), A.shape)
                dvec = np.where(act & (A > 0), 1 / np.sqrt(np.where(A > 0, A, 1.0)), 0.0).ravel()
                z = dense_two_loop_diag(G.ravel(), list(pairs), dvec).reshape(G.shape)
            else:
                z = dense_two_loop(G.ravel(), list(pairs)).reshape(G.shape) if second_order else G
            z = np.where((X[idx] != 0).any(0)[None, :], z, 0.0)  # the step on A_t (Alg. 2 line 6)
            B1 = B - eta * z
            B1m = np.where((B != 0) | always, B1, 0.0)  # the same top-k set (all non-zero weights)
            rr = lrange if clip_r else None
            G0 = G if clip_r else dense_grad(X[idx], y[idx], w[idx], B, code, K, None)[0]
            G1, _ = dense_grad(X[idx], y[idx], w[idx], B1m, code, K, rr)
            s, r = (B1m - B).ravel(), (G1 - G0).ravel()
            if mask_r:  # Bear.secant_topk: r only on the top-k set (the non-zero weights)
                r = np.where(((B != 0) | always).ravel(), r, 0.0)
            if dvec is not None:
                r = r + damping * np.where(dvec > 0, s / np.where(dvec > 0, dvec, 1.0), 0.0)
                rdr = r @ (dvec * r)
                if s @ r > eps * np.linalg.norm(s) * np.linalg.norm(r) and r @ r > 0 and rdr > 0:
                    pairs.append((s, r, rdr))
                B = B1
                continue
            r = r + damping * s
            if s @ r > eps * np.linalg.norm(s) * np.linalg.norm(r) and r @ r > 0:
                pairs.append((s, r))
            B = B1
    return B, np.concatenate(preds)


class TopK:
    """BEAR Alg. 2 line 10's top-k set as a set: at most ``k`` members, each with its weight as
    last offered; a non-member enters when the set is not full (and its weight is not 0) or when
    its |weight| beats the smallest stored |weight|, whose member leaves."""

    def __init__(self, k):
        self.k = k
        self.w = {}

    def offer(self, j, v):
        if j in self.w:
            self.w[j] = v
        elif v != 0.0:
            if len(self.w) < self.k:
                self.w[j] = v
            else:
                low = min(self.w, key=lambda m: abs(self.w[m]))
                if abs(v) > abs(self.w[low]):
                    del self.w[low]
                    self.w[j] = v

    def __contains__(self, j):
        return j in self.w


def dense_topk(X, y, K, code, b, eta, passes, k, intercept=None, tau=5, eps=1e-8, second_order=True,
               damping=0.0, clip=True):
    """BEAR Alg. 2 (``second_order``) or MISSION on dense weights with a top-k set per class.

    Per minibatch of ``b`` rows (a pass ends with a partial one): the active set A_t = the columns
    with a non-zero entry, in order of first appearance (row by row, columns ascending); the
    effective weights are the members' weights (0 for the others) plus the intercept (column
    ``intercept``, always in the model, never a member); the minibatch's mean gradient at them
    (squared loss: at the scores clipped to the label range so far, with ``clip``); the oLBFGS
    direction of the last ``tau`` pairs (Alg. 1) or the gradient; the step ``-eta z`` on A_t;
    each class's weights of A_t offered to its set in that order (the intercept not). BEAR's pair:
    ``s`` = the effective weights after the step on the set before the offers minus before,
    ``r`` = the unclipped gradients' change, plus ``damping * s``; kept if
    ``s.r > eps |s| |r|``. Returns the weights ``(K, p)``, the predictions (scores before each
    row's step; argmax class for ``K > 0``), the sets, and each iteration's members (a tuple of
    one frozenset per class)."""
    n, p = X.shape
    Kc = max(K, 1)
    wt = np.ones(n)
    B = np.zeros((Kc, p))
    sets = [TopK(k) for _ in range(Kc)]
    pairs = deque(maxlen=tau)
    preds = []
    hist = []
    lrange = [0.0, 0.0] if clip else None

    def member_mask():
        M = np.array([[j in sets[c] for j in range(p)] for c in range(Kc)])
        if intercept is not None:
            M[:, intercept] = True
        return M

    for _ in range(passes):
        for a in range(0, n, b):
            Xb, yb, wb = X[a:a + b], y[a:a + b], wt[a:a + b]
            nz = np.nonzero(Xb)
            order = []
            for j in nz[1]:  # row-major: first appearance
                if j not in order:
                    order.append(j)
            act = np.zeros(p, bool)
            act[order] = True
            M = member_mask()
            B0 = np.where(M, B, 0.0)
            G, P = dense_grad(Xb, yb, wb, B0, code, K, lrange)
            preds.append(P.argmax(1) + 1.0 if code == 3 else P[:, 0])
            if second_order:
                z = dense_two_loop(G.ravel(), list(pairs)).reshape(G.shape)
            else:
                z = G
            z = np.where(act[None, :], z, 0.0)
            B = B - eta * z
            B1 = np.where(M, B, 0.0)  # the set before the offers
            for c in range(Kc):
                for j in order:
                    if j != intercept:
                        sets[c].offer(j, B[c, j])
            hist.append(tuple(frozenset(st.w) for st in sets))
            if second_order:
                G0 = dense_grad(Xb, yb, wb, B0, code, K, None)[0]
                G1 = dense_grad(Xb, yb, wb, B1, code, K, None)[0]
                s, r = (B1 - B0).ravel(), (G1 - G0).ravel()
                r = r + damping * s
                if s @ r > eps * np.linalg.norm(s) * np.linalg.norm(r) and r @ r > 0:
                    pairs.append((s, r))
    return B, np.concatenate(preds), sets, hist
