"""Dense, obvious NumPy references of Sketched Online Newton with Frequent Directions sketches:
SON Alg. 1 (Luo et al. 2016) with FD-Sketch (Alg. 2, one shrink per round) or its epoch
version (App. F, Alg. 6, a 2m-row sketch that shrinks every m rounds), full Online Newton (the
matrix of Eq. 2, no sketch), and Robust Frequent Directions (Luo et al. 2019, Alg. 2-3: the
regulariser grows by half of every shrink). Slow on purpose (explicit d x d matrices, one example
at a time); the sparse learners are compared against these.

Written from the papers, with the corrections of ``NOTES_FD.md``:

* an m-row FD sketch keeps m - 1 directions (its last row is the insertion slot, zeroed by every
  shrink), so FD-SON equals full ONS at m = d + 1, not at m = d;
* RFD starts from B(0) = 0 (Alg. 3 says "empty" but stacks it) and with alpha0 = 0 uses the
  Moore-Penrose pseudo-inverse (SON App. D) with a rank threshold: singular values of A = S^T S
  at or below 1e-9 of the largest count as zero (rounding leaves ~1e-16 of the largest in the
  null space); the projection is SON Lemma 2 (App. B), which
  holds for a singular A;
* the epoch sketch's H = (alpha I_2m + S S^T)^-1 is kept here by Alg. 6's two Sherman-Morrison
  steps with q = S g^ - (g^T g^ / 2) e, S taken after inserting g^ (Alg. 9 drops the 1/2), so a
  test can hold it against a direct inverse; the learner itself uses a direct solve.

Conventions (the paper's; no streamlearn extras: no label-range clip, no diagonal pre-scaling,
importance weight 1): the learner predicts p = w^T x (Alg. 1 line 5), takes g = l'(p) x with
l = (p - y)^2 (l' = 2 (p - y), as VW), log(1 + e^{-yp}) or max(0, 1 - yp), and sketches
g^ = sqrt(c) g (c = sigma + eta, the to-sketch scale, held constant). After the sketch update it
steps u = w - A^-1 g with A = alpha I + S^T S (Alg. 1 line 8), and projects the next round's
weights onto |w^T x| <= C in the A-norm (Lemma 1/2; C = 0 turns the projection off).

``prescale=True`` (streamlearn's default diagonal pre-scaling, off in the paper): the same learner run on
the pre-scaled example x~ = f x, its every weight change mapped back to the original coordinates with
the frame f of its round (SON Sec. 5.2 used as a preconditioner), with VW's normalized adaptive rule
(Ross, Mineiro & Langford 2013; VW's gd.cc) for f: per feature s_j = max |x_j| seen, G_j = sum (l' x_j)^2,
f_j = (G_j / s_j^2)^(-1/4) / s_j (0 while G_j = 0). Each round: s grows first (a weight whose scale grows
is multiplied by s_old / s_new), the prediction is w^T x (projected in the frame of the round, before
G changes), then G takes this round's gradient, f follows, and the sketch and the step use x~ with that
f; the step is multiplied by VW's global normaliser eta = sqrt(t / sum ||x / s||^2) over the rounds with
a non-zero gradient, this one included (the invariant step: eta units of gradient flow).
"""
import numpy as np

__all__ = ["FDSketch", "FullSketch", "NaiveFDSON", "deriv", "invariant_update", "son_synthetic"]

RANK_TOL = 1e-9  # eigenvalues of A = S^T S <= RANK_TOL * the largest count as zero (alpha = 0 only)


def deriv(loss, p, y):
    """l'(p) for squared (p - y)^2, logistic log(1 + exp(-y p)) and hinge max(0, 1 - y p)."""
    if loss == "squared":
        return 2.0 * (p - y)
    if loss == "logistic":
        return -y / (1.0 + np.exp(y * p))
    if loss == "hinge":
        return -y if y * p < 1.0 else 0.0
    raise ValueError(loss)


def invariant_update(loss, p, y, h, q):
    """Importance-invariant update (Karampatziakis & Langford 2011, "Online importance weight aware
    updates"): the change of the prediction p after h units of continuous gradient flow of the loss
    along a direction that moves the prediction q per unit of -l'(p) (q = x^T A^-1 x for the step
    along A^-1 x). Squared (p - y)^2: dp/ds = -2 (p - y) q, so p - y decays as exp(-2 q s). Logistic:
    the margin z = y p grows as dz/ds = q / (1 + e^z); the change d of the margin after h solves
    d + e^z (e^d - 1) = h q (integrate (1 + e^z) dz = q ds), found here by bisection. Hinge: the margin
    grows at rate q until it reaches 1."""
    if loss == "squared":
        return (y - p) * (1.0 - np.exp(-2.0 * h * q))
    if loss == "logistic":
        z, a = y * p, h * q
        f = lambda d: d + np.exp(z) * np.expm1(d) - a  # noqa: E731 - increasing in d, f(0) = -a <= 0
        lo, hi = 0.0, max(a, 1.0)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        return y * 0.5 * (lo + hi)
    if loss == "hinge":
        return y * min(h * q, max(1.0 - y * p, 0.0))
    raise ValueError(loss)


class FullSketch:
    """No sketch: A_t = alpha I + sum_s g^_s g^_s^T (SON Eq. 2, the Online Newton Step's matrix)."""

    def __init__(self, d, alpha):
        self.alpha = float(alpha)
        self.GtG = np.zeros((d, d))

    def insert(self, gh):
        self.GtG += np.outer(gh, gh)

    def psd(self):
        """S^T S: the part of A the sketch approximates."""
        return self.GtG


class FDSketch:
    """Frequent Directions with m rows, for the online Newton matrix A = alpha I + S^T S.

    ``epoch=False``: SON Alg. 2 (insert g^ into the last row, eigendecompose S^T S, S = (Sigma -
    Sigma_mm)^{1/2} V), one shrink per round. ``epoch=True``: SON App. F Alg. 6: a top part D V
    (m rows, from the last eigendecomposition) and a buffer G of m rows; g^ goes into the buffer and
    only when the buffer is full is [D V; G] (2m rows) eigendecomposed, the top m kept, shrunk by
    the m-th eigenvalue, and the buffer cleared. ``robust=True``: RFD (Luo et al. 2019, Alg. 2 /
    Alg. 3 lines 6-9): alpha grows by half of every shrink, alpha += Sigma_mm / 2.
    """

    def __init__(self, d, m, alpha, epoch=False, robust=False):
        assert m >= 1
        self.d, self.m, self.alpha = d, m, float(alpha)
        self.epoch, self.robust = epoch, robust
        self.shrunk = 0.0  # sum of the shrinks Sigma_mm (FD's error bound)
        if epoch:
            self.D = np.zeros(m)
            self.V = np.eye(m, d)  # any m x d with orthonormal rows (Alg. 6 line 1)
            self.G = np.zeros((m, d))
            self.tau = 1  # the next buffer row, 1-based as in Alg. 6
            self.H = np.eye(2 * m) / self.alpha if self.alpha > 0 else None
        else:
            self.S = np.zeros((m, d))  # the last row is always 0 between rounds

    def sketch(self):
        """The sketch matrix S (m x d per round; [D V; G], 2m x d, for the epoch version)."""
        if not self.epoch:
            return self.S
        return np.vstack([self.D[:, None] * self.V, self.G])

    def psd(self):
        S = self.sketch()
        return S.T @ S

    def _shrink(self, S):
        """Top-m eigen-pairs of S^T S from the SVD of S, shrunk by the m-th eigenvalue."""
        _, sv, Vt = np.linalg.svd(S, full_matrices=False)
        k = min(self.m, len(sv))
        lam = np.zeros(self.m)
        lam[:k] = sv[:k] ** 2
        V = np.zeros((self.m, self.d))
        V[:k] = Vt[:k]
        smm = lam[self.m - 1]
        if smm <= RANK_TOL * lam[0]:  # rounding in a rank-deficient sketch: nothing to shrink
            smm = 0.0
        self.shrunk += smm
        if self.robust:
            self.alpha += smm / 2.0
        return np.sqrt(np.maximum(lam - smm, 0.0)), V

    def insert(self, gh):
        if not self.epoch:  # Alg. 2
            self.S[self.m - 1] = gh
            sq, V = self._shrink(self.S)
            self.S = sq[:, None] * V
            return
        # Alg. 6
        self.G[self.tau - 1] = gh
        if self.tau < self.m:
            if self.H is not None:  # lines 2-3, with the 1/2 (NOTES_FD item 1)
                e = np.zeros(2 * self.m)
                e[self.m + self.tau - 1] = 1.0
                q = self.sketch() @ gh - 0.5 * (gh @ gh) * e
                H = self.H
                H = H - np.outer(H @ q, e @ H) / (1.0 + e @ H @ q)
                H = H - np.outer(H @ e, q @ H) / (1.0 + q @ H @ e)
                self.H = H
            self.tau += 1
            return
        self.D, self.V = self._shrink(self.sketch())  # lines 6-8 (Alg. 7 is one way to do this)
        self.G[:] = 0.0
        self.tau = 1
        if self.alpha > 0:
            self.H = np.diag(1.0 / (self.alpha + np.concatenate([self.D ** 2, np.zeros(self.m)])))


def _inverse(M, alpha):
    """A^-1 for A = alpha I + M (alpha > 0), else the pseudo-inverse of M with the rank threshold."""
    d = M.shape[0]
    if alpha > 0:
        return np.linalg.inv(alpha * np.eye(d) + M)
    lam, U = np.linalg.eigh(M)
    top = max(lam.max(), 0.0)
    keep = lam > RANK_TOL * top if top > 0 else np.zeros(d, bool)
    return (U[:, keep] / lam[keep]) @ U[:, keep].T


class NaiveFDSON:
    """SON Alg. 1 on dense vectors, with ``sketch`` one of "full" (ONS), "fd" (Alg. 2), "fd-epoch"
    (Alg. 6), "rfd" (RFD Alg. 3) or "rfd-epoch" (RFD's update in the 2m-row epoch sketch)."""

    def __init__(self, d, m, alpha, sketch="fd", c=1.0, C=0.0, loss="squared", clip=False, invariant=False,
                 prescale=False):
        self.d, self.loss, self.c, self.C = d, loss, float(c), float(C)
        self.prescale = prescale
        self.w = np.zeros(d)  # prescale: the weights in the original coordinates
        self.s2 = np.zeros(d)  # prescale: max x_j^2 seen
        self.G = np.zeros(d)  # prescale: sum of (l' x_j)^2
        self.nsum, self.hsum = 0.0, 0.0  # prescale: sum ||x / s||^2 and the rounds counted
        # streamlearn's defaults (off = the paper): ``clip``, squared loss only: the prediction reported and
        # the derivative are taken at p clipped to [min, max] of the labels learned so far (from [0, 0]; the
        # derivative's range includes this round's label); ``invariant``: the step along A^-1 x moves the
        # prediction by invariant_update() instead of -l'(p) q
        self.clip, self.invariant = clip and loss == "squared", invariant
        self.lo = self.hi = 0.0
        if sketch == "full":
            self.sk = FullSketch(d, alpha)
        else:
            self.sk = FDSketch(d, m, alpha, epoch=sketch.endswith("epoch"), robust=sketch.startswith("rfd"))
        self.u = np.zeros(d)  # Alg. 1 line 1
        self.Ainv = _inverse(self.sk.psd(), self.sk.alpha)  # A_0

    def A(self):
        return self.sk.alpha * np.eye(self.d) + self.sk.psd()

    def _project(self, u, x, tau=None):
        """SON Lemma 2: argmin over |w^T x| <= C of ||w - u||_A (A possibly singular); ``tau`` given: the
        projection that moves w^T x by -tau."""
        if self.C <= 0:
            return u
        ux = u @ x
        if tau is None:
            tau = np.sign(ux) * max(abs(ux) - self.C, 0.0)
        if tau == 0.0:
            return u
        Ainv_x = self.Ainv @ x
        if self.sk.alpha == 0:
            r = x - self.A() @ Ainv_x  # (I - A^+ A) x: the part of x outside range(A)
            if r @ x > 1e-12 * (x @ x):
                return u - tau / (x @ r) * r
        return u - tau / (x @ Ainv_x) * Ainv_x

    def step(self, x, y, learn=True):
        """One round on dense x with label y: returns the prediction w_t^T x_t made before learning."""
        x = np.asarray(x, dtype=float)
        if self.prescale:
            return self._prescaled_step(x, y, learn)
        w = self._project(self.u, x)  # line 4
        p = float(w @ x)  # line 5
        out = min(max(p, self.lo), self.hi) if self.clip else p
        if not learn:
            return out
        if self.clip:
            self.lo, self.hi = min(self.lo, y), max(self.hi, y)
            p = min(max(p, self.lo), self.hi)
        dl = deriv(self.loss, p, y)
        g = dl * x  # line 6
        self.sk.insert(np.sqrt(self.c) * g)  # line 7
        self.Ainv = _inverse(self.sk.psd(), self.sk.alpha)
        step = self.Ainv @ g
        if self.invariant and dl != 0.0:
            q = float(x @ self.Ainv @ x)
            if q > 0.0:  # the prediction moves by invariant_update() along A^-1 x
                step = -invariant_update(self.loss, p, y, 1.0, q) / q * (self.Ainv @ x)
        self.u = w - step  # line 8
        return out

    def frame(self):
        """The pre-scaling frame f (0 for a feature with no scale or no gradient yet)."""
        f = np.zeros(self.d)
        ok = (self.s2 > 0) & (self.G > 0)
        f[ok] = (self.G[ok] / self.s2[ok]) ** -0.25 / np.sqrt(self.s2[ok])
        return f

    def _prescaled_step(self, x, y, learn):
        nz = x != 0
        grow = nz & (x * x > self.s2)
        if learn:
            old = grow & (self.s2 > 0)
            self.w[old] *= np.sqrt(self.s2[old] / x[old] ** 2)
            self.s2[grow] = x[grow] ** 2
        f = self.frame()
        xt = f * x
        p = float(self.w @ x)
        if self.C > 0:  # the projection (Lemma 1/2) in the frame of the round
            tau = np.sign(p) * max(abs(p) - self.C, 0.0)
            if tau != 0.0:
                self.w += f * (self._project(np.zeros(self.d), xt, tau=tau))
                p = float(self.w @ x)
        out = min(max(p, self.lo), self.hi) if self.clip else p
        if not learn:
            return out
        if self.clip:
            self.lo, self.hi = min(self.lo, y), max(self.hi, y)
            p = min(max(p, self.lo), self.hi)
        dl = deriv(self.loss, p, y)
        eta = 1.0
        if dl != 0.0:
            self.G += (dl * x) ** 2
            self.nsum += float(np.sum(x[nz] ** 2 / self.s2[nz]))
            self.hsum += 1.0
            eta = np.sqrt(self.hsum / self.nsum)
        f = self.frame()
        xt = f * x
        self.sk.insert(np.sqrt(self.c) * dl * xt)
        self.Ainv = _inverse(self.sk.psd(), self.sk.alpha)
        step = eta * dl * (self.Ainv @ xt)
        if self.invariant and dl != 0.0:
            q = float(xt @ self.Ainv @ xt)
            if q > 0.0:
                step = -invariant_update(self.loss, p, y, eta, q) / q * (self.Ainv @ xt)
        self.w -= f * step
        return out

    def run(self, X, y):
        return np.array([self.step(X[i], y[i]) for i in range(len(y))])


def son_synthetic(T=5000, d=100, kappa=200.0, seed=0, top=10):
    """SON Sec. 5.1's ill-conditioned design: X = Z diag(lambda)^{1/2} V^T with Z Gaussian T x d, V a
    random orthonormal basis, lambda = 1 on the first d - top coordinates and rising linearly to kappa
    on the last ``top``. The paper keeps Z, V and the labels y = sign(theta^T x) the same across
    kappa; that holds with theta = V diag(lambda)^{-1/2} theta_z for a Gaussian theta_z, so that
    theta^T x = theta_z^T z: files differing in kappa differ only in conditioning, and a truly
    invariant learner behaves the same on all of them."""
    assert 0 < top < d, "top must be below d"
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((T, d))
    V, _ = np.linalg.qr(rng.standard_normal((d, d)))
    theta_z = rng.standard_normal(d)
    lam = np.ones(d)
    lam[d - top:] = np.linspace(1.0, kappa, top + 1)[1:]
    X = (Z * np.sqrt(lam)) @ V.T
    y = np.sign(Z @ theta_z)
    y[y == 0] = 1.0
    return X, y
