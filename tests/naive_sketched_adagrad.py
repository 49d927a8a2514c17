"""Dense, obvious NumPy references of the sketched AdaGrad family (issue 18): full-matrix and
diagonal AdaGrad (Duchi et al. 2011) in both forms, S-ADA / Fast S-ADA (Feinberg et al. 2023;
Yang et al. 2025 Sec. 4.2), FTSL (Yang et al. 2025 Alg. 2), FTFSL (Alg. 3), Shampoo (Gupta et al.
2018) and FTSL-Shampoo (Alg. 5 with Alg. 4) for the K x d softmax weight matrix, and CompAdaGrad
(Mehta et al. 2016, Eq. 5, composite mirror descent Eq. 2, l2 and l1). Slow on purpose: explicit
d x d matrices, one example at a time; the sparse learners are compared against these.

Papers: ``../shared/papers/ftsl_frequent_directions_adagrad_yang2025.txt`` ("Yang"),
``../shared/papers/compadagrad_mehta2016.txt`` ("Mehta"). Corrections of the printed pseudo-code
(``../shared/design/NOTES_ADA.md``), each applied where its comment says so:

* Yang Alg. 3 line 5 prints g' = V^T (V^T g), which only type-checks when d = 2 tau; it must be
  g' = V (V^T g), the projection onto span V (``FastFD.insert``; ``line5="printed"`` keeps the
  printed one for the test that shows it matters).
* Alg. 3 line 6's test g' != g gets a tolerance, ||g - g'|| > 1e-8 ||g||, and the new column is
  re-orthogonalised (a second Gram-Schmidt pass); line 7's "r_{t-1} = r_{t-1} + 1" is r <- r + 1.
* numpy's eigh returns ascending eigenvalues; the boxes number them descending (``eig_desc``).
* Neither Alg. 2 nor Alg. 3 has an epsilon: delta goes inside the root,
  G~ = B B^T + (rho + delta) I, as Alg. 5 lines 7-8 do (``delta_inside=False`` gives
  G~^{1/2} + delta I, ADA-FULL's placement in Yang Sec. 2.1).
* delta = 0 (the boxes taken literally): a rank-deficient sketch gives lambda_tau ~ 1e-32
  lambda_1 from round-off; a shrink lambda_tau <= 1e-16 lambda_1 counts as 0 (``SHRINK_TOL``), and
  a singular G~ is inverted as a pseudo-inverse (eigenvalues <= ``PINV_TOL`` lambda_1 count as 0).
* CompAdaGrad: the analysis' unscaled SRHT Pi = R H Sigma (orthonormal rows) is the default; the
  paper's sqrt(n/k) R H Sigma (Mehta Sec. 2) is ``scaled=True``. delta_r sits inside the root
  (K = (Pi G Pi^T + delta_r I)^{1/2}, Eq. 5), delta_c outside (D = diag(G_perp)^{1/2} + delta_c I).
  With k = 0 the complement step is written in diagonal AdaGrad's operation order, so it equals
  ``DiagAdaGrad`` bit for bit.

Conventions (tests/naive_adagrad.py's): the learner predicts p = w^T x, records it, then learns
from g = l'(p, y) x with streamlearn's losses (``streamlearn.algos.losses``: squared (p - y)^2,
logistic log(1 + e^{-yp}), y in {-1, +1}); weights start at 0; eta is the step size. Every
learner's ``run(X, y)`` returns the progressive predictions. G_t = sum_{s <= t} g_s g_s^T includes
the current gradient (AdaGrad's order: accumulate, then step).
"""
import numpy as np

from streamlearn.algos.losses import get_loss

__all__ = [
    "SHRINK_TOL", "PINV_TOL", "GS_TOL", "eig_desc", "inv_root",
    "FullAdaGrad", "DiagAdaGrad", "FD", "FastFD", "lowrank_inv_root_apply", "SADA", "FastSADA", "FTSL", "FTFSL",
    "FDGeneral", "Shampoo", "FTSLShampoo",
    "hadamard", "srht_map", "countsketch_map", "sparse_sign_map", "l1_quadratic_min", "CompAdaGrad",
]

SHRINK_TOL = 1e-16  # an FD shrink lambda_tau <= SHRINK_TOL * lambda_1 is round-off: 0 (NOTES_ADA)
PINV_TOL = 1e-12  # with no ridge (rho + delta = 0): eigenvalues <= PINV_TOL * the largest count as 0
GS_TOL = 1e-8  # Alg. 3 line 6: g is outside span V when ||g - g'|| > GS_TOL ||g||


def eig_desc(M):
    """Eigen-pairs of the symmetric matrix M, eigenvalues in descending order (numpy's eigh gives
    them ascending; the boxes' lambda_1 >= lambda_2 >= ... is descending)."""
    lam, U = np.linalg.eigh((M + M.T) / 2.0)
    return lam[::-1].copy(), U[:, ::-1].copy()


def inv_root(M, power, delta, inside=True):
    """H^{-1} for H = (M + delta I)^power (``inside``) or M^power + delta I, M symmetric PSD.

    With delta = 0 and M singular this is the pseudo-inverse: eigenvalues of M at or below
    ``PINV_TOL`` times the largest count as 0 (their directions get no step)."""
    lam, U = eig_desc(M)
    lam = np.maximum(lam, 0.0)
    h = (lam + delta) ** power if inside else lam ** power + delta
    if delta > 0:
        inv = 1.0 / h
    else:
        keep = lam > PINV_TOL * lam[0] if lam[0] > 0 else np.zeros(len(lam), bool)
        inv = np.where(keep, 1.0 / np.where(keep, h, 1.0), 0.0)
    return (U * inv) @ U.T


class _Linear:
    """A linear learner over dense x: predict p = w^T x, then learn from g = l'(p, y) x."""

    def __init__(self, d, eta, loss):
        self.d, self.eta, self.loss = int(d), float(eta), get_loss(loss)
        self.w = np.zeros(self.d)
        self.t = 0

    def step(self, x, y):
        """One round: returns the prediction made before learning from (x, y)."""
        x = np.asarray(x, dtype=np.float64)
        p = float(self.w @ x)
        g = float(self.loss.derivative(p, y)) * x
        self.t += 1
        self._learn(g)
        return p

    def run(self, X, y):
        return np.array([self.step(X[i], y[i]) for i in range(len(y))])


class FullAdaGrad(_Linear):
    """Full-matrix AdaGrad (Duchi et al. 2011; Yang Sec. 2.1) with H_t = (G_t + delta I)^{1/2}
    (``delta_inside``, NOTES_ADA's placement) or G_t^{1/2} + delta I (Yang's ADA-FULL).

    ``form="mirror"``: x_{t+1} = x_t - eta H_t^{-1} g_t. ``form="dual"`` (primal-dual / dual
    averaging, Yang's update above Eq. 2): x_{t+1} = -eta H_t^{-1} gbar_t, gbar_t = sum g_s.
    delta = 0 gives the pseudo-inverse (``inv_root``)."""

    def __init__(self, d, eta, delta, loss="logistic", form="mirror", delta_inside=True):
        super().__init__(d, eta, loss)
        assert form in ("mirror", "dual")
        self.delta, self.form, self.inside = float(delta), form, bool(delta_inside)
        self.G = np.zeros((self.d, self.d))
        self.gbar = np.zeros(self.d)

    def _learn(self, g):
        self.G += np.outer(g, g)
        self.gbar += g
        Hinv = inv_root(self.G, 0.5, self.delta, self.inside)
        if self.form == "mirror":
            self.w = self.w - self.eta * (Hinv @ g)
        else:
            self.w = -self.eta * (Hinv @ self.gbar)


class DiagAdaGrad(_Linear):
    """Diagonal AdaGrad (Duchi et al. 2011; Yang's ADA-DIAG): h_t = sqrt(G_t) + delta
    (``delta_inside=False``, Duchi's and CompAdaGrad's D) or sqrt(G_t + delta), G_t = sum g_s^2.

    ``form="mirror"``: w_i <- w_i - eta g_i / h_i; ``form="dual"``: w_i = -eta gbar_i / h_i.
    Coordinates with h_i = 0 (never seen, delta = 0) are left alone, as in tests/naive_adagrad.py.
    The mirror step is written ``w - eta * g / h`` (this operation order is what CompAdaGrad at
    k = 0 reproduces bit for bit)."""

    def __init__(self, d, eta, delta=0.0, loss="logistic", form="mirror", delta_inside=False):
        super().__init__(d, eta, loss)
        assert form in ("mirror", "dual")
        self.delta, self.form, self.inside = float(delta), form, bool(delta_inside)
        self.G = np.zeros(self.d)
        self.gbar = np.zeros(self.d)

    def _learn(self, g):
        self.G = self.G + g * g
        self.gbar = self.gbar + g
        h = np.sqrt(self.G + self.delta) if self.inside else np.sqrt(self.G) + self.delta
        nz = h > 0
        if self.form == "mirror":
            self.w[nz] = self.w[nz] - self.eta * g[nz] / h[nz]
        else:
            self.w[nz] = -self.eta * self.gbar[nz] / h[nz]


# ----------------------------------------------------------------------------------------------
# Frequent Directions sketches of G_t = sum g g^T


class FD:
    """Frequent Directions, Yang Alg. 1: B (d x tau) whose last column is 0 between rounds.

    ``insert(g)``: put g in the last column (line 2), B = U diag(lambda)^{1/2} V^T (line 3, SVD,
    descending), B = U diag(lambda - lambda_tau)^{1/2} (line 4) with the last column set to 0;
    returns rho_t = lambda_tau. ``rho`` is rho_{1:t}, the escaped mass (SCFD, Chen et al. 2020),
    already including this round's shrink. tau > d: lambda_tau = 0, nothing is ever discarded.
    NOTES_ADA guard: lambda_tau <= SHRINK_TOL lambda_1 (round-off of a rank-deficient B) is 0."""

    def __init__(self, d, tau, shrink_tol=SHRINK_TOL):
        assert tau >= 1
        self.d, self.tau, self.shrink_tol = int(d), int(tau), float(shrink_tol)
        self.B = np.zeros((self.d, self.tau))
        self.U, self.lam = np.zeros((self.d, 0)), np.zeros(0)
        self.rho = 0.0
        self.shrinks = 0  # rounds with lambda_tau > 0

    def insert(self, g):
        B = self.B.copy()
        B[:, -1] = g  # line 2
        U, s, _ = np.linalg.svd(B, full_matrices=False)  # line 3
        lam = np.zeros(self.tau)
        lam[: len(s)] = s ** 2
        lam_tau = lam[self.tau - 1]
        if lam_tau <= self.shrink_tol * lam[0]:
            lam_tau = 0.0
        k = len(s)
        Bn = np.zeros((self.d, self.tau))
        Bn[:, :k] = U * np.sqrt(np.maximum(lam[:k] - lam_tau, 0.0))  # line 4
        Bn[:, -1] = 0.0
        self.B = Bn
        self.U, self.lam = U[:, : self.tau - 1], np.maximum(lam[: min(k, self.tau - 1)] - lam_tau, 0.0)
        self.U = self.U[:, : len(self.lam)]
        self.rho += lam_tau
        self.shrinks += lam_tau > 0
        return lam_tau

    def eigpairs(self):
        """(U, lambda) with B B^T = U diag(lambda) U^T, U orthonormal columns (tau - 1 at most)."""
        return self.U, self.lam

    def psd(self):
        """B_t B_t^T, the sketch of G_t."""
        return self.B @ self.B.T

    def end_round(self):
        """Alg. 1 shrinks inside ``insert``: nothing is deferred."""


class FastFD:
    """Fast Frequent Directions as Yang Alg. 3 keeps it (lines 5-11 and 14-16): V (d x 2 tau) with
    r orthonormal columns (the rest 0) and M (2 tau x 2 tau), the sketch being V M V^T.

    ``insert(g)`` (lines 5-11): rho_{1:t} takes the shrink of the previous round (line 15 sets
    rho_{t+1}); g' = V (V^T g) (line 5, corrected; ``line5="printed"`` uses V^T (V^T g), which needs
    d = 2 tau); if ||g - g'|| > gs_tol ||g|| (line 6, with a tolerance) r <- r + 1 and the r-th
    column of V is (g - g') / ||g - g'||, re-orthogonalised against V (line 7); M += (V^T g)(V^T g)^T
    (line 10, with the V just extended); M = U diag(lambda) U^T, descending (line 11).
    ``end_round()`` (lines 14-16), after the learner's update of round t: when r = 2 tau,
    rho_{t+1} = lambda_tau, M = diag(max(lambda - lambda_tau, 0)), V = V U, r = tau - 1 and
    columns tau..2 tau (1-based) of V are zeroed. The discarded mass thus enters G~ from the round
    after a shrink (FTSL's enters in the shrink round)."""

    def __init__(self, d, tau, shrink_tol=SHRINK_TOL, gs_tol=GS_TOL, line5="corrected"):
        assert tau >= 1 and line5 in ("corrected", "printed")
        if line5 == "printed" and d != 2 * tau:
            raise ValueError(f"Alg. 3 line 5 as printed, V^T (V^T g), needs d = 2 tau (d = {d}, tau = {tau})")
        self.d, self.tau = int(d), int(tau)
        self.shrink_tol, self.gs_tol, self.line5 = float(shrink_tol), float(gs_tol), line5
        self.V = np.zeros((self.d, 2 * self.tau))
        self.M = np.zeros((2 * self.tau, 2 * self.tau))
        self.r = 0
        self.rho = 0.0  # rho_{1:t}
        self.pending = 0.0  # rho_{t+1}, set by a shrink at the end of round t
        self.shrinks = 0
        self.lam = np.zeros(2 * self.tau)
        self.U = np.eye(2 * self.tau)

    def insert(self, g):
        self.rho += self.pending
        self.pending = 0.0
        V = self.V
        gp = V.T @ (V.T @ g) if self.line5 == "printed" else V @ (V.T @ g)  # line 5
        res = g - gp
        nres = np.linalg.norm(res)
        if nres > self.gs_tol * np.linalg.norm(g):  # line 6
            v = res / nres
            v = v - V @ (V.T @ v)  # second Gram-Schmidt pass (kept with the printed line 5 too)
            v = v / np.linalg.norm(v)
            self.r += 1  # line 7: r <- r + 1
            V[:, self.r - 1] = v
        c = V.T @ g
        self.M = self.M + np.outer(c, c)  # line 10
        self.lam, self.U = eig_desc(self.M)  # line 11

    def psd(self):
        """V M V^T = V U Sigma U^T V^T (line 12 without the rho part)."""
        return self.V @ self.M @ self.V.T

    def eigpairs(self):
        """(V U, lambda): V M V^T = (V U) diag(lambda) (V U)^T (columns of V U on V's zero columns are 0)."""
        return self.V @ self.U, np.maximum(self.lam, 0.0)

    def end_round(self):
        if self.r < 2 * self.tau:  # line 14
            return
        t = self.tau
        lam_tau = self.lam[t - 1]
        if lam_tau <= self.shrink_tol * self.lam[0]:
            lam_tau = 0.0
        self.pending = lam_tau  # line 15
        self.shrinks += lam_tau > 0
        m = np.maximum(self.lam - lam_tau, 0.0)
        m[t - 1:] = 0.0
        self.M = np.diag(m)
        self.V = self.V @ self.U
        self.V[:, t - 1:] = 0.0  # line 16
        self.r = t - 1
        self.lam, self.U = m, np.eye(2 * t)


def lowrank_inv_root_apply(U, lam, rho, delta, v, inside=True):
    """H^{-1} v for H = (U diag(lam) U^T + (rho + delta) I)^{1/2} (``inside``) or
    (U diag(lam) U^T + rho I)^{1/2} + delta I, U with orthonormal (or zero) columns, without a d x d
    matrix: Yang App. A.1's identity H^{-1} = h_perp^{-1} I + U diag(h^{-1} - h_perp^{-1}) U^T,
    h = f(lam + rho), h_perp = f(rho). This is the form a sparse learner uses; it divides by
    h_perp, so a round-off rho ~ 1e-32 with delta = 0 multiplies round-off outside span U by 1e16:
    the reason for ``SHRINK_TOL``. h_perp = 0 (rho + delta = 0): pseudo-inverse on span U."""
    f = (lambda z: np.sqrt(z + delta)) if inside else (lambda z: np.sqrt(z) + delta)
    h, hp = f(lam + rho), f(rho)
    c = U.T @ v
    if hp > 0:
        return v / hp + U @ ((1.0 / h - 1.0 / hp) * c)
    keep = lam > PINV_TOL * lam.max() if len(lam) and lam.max() > 0 else np.zeros(len(lam), bool)
    return U @ np.where(keep, c / np.where(keep, h, 1.0), 0.0)


class _Sketched(_Linear):
    """AdaGrad with G~_t = S_t + rho_{1:t} I in place of G_t, S_t an FD sketch of G_t:
    H_t = (G~_t + delta I)^{1/2} (``delta_inside``) or G~_t^{1/2} + delta I.
    ``form`` "mirror": x_{t+1} = x_t - eta H_t^{-1} g_t; "dual": x_{t+1} = -eta H_t^{-1} gbar_t.
    ``Gtilde`` keeps the last G~_t used (for the tests of Lemma A.3 / A.4)."""

    form = fast = None

    def __init__(self, d, tau, eta, delta, loss="logistic", delta_inside=True, lowrank=False, l2=0.0, **sketch_kw):
        super().__init__(d, eta, loss)
        self.l2 = float(l2)  # dual form: regularised dual averaging with t l2/2 ||x||^2
        self.tau, self.delta, self.inside = int(tau), float(delta), bool(delta_inside)
        self.lowrank = bool(lowrank)  # apply H^{-1} by ``lowrank_inv_root_apply`` (no d x d matrix)
        self.sketch = FastFD(d, tau, **sketch_kw) if self.fast else FD(d, tau, **sketch_kw)
        self.gbar = np.zeros(self.d)
        self.Gtilde = np.zeros((self.d, self.d))

    def _learn(self, g):
        self.gbar += g
        self.sketch.insert(g)
        v = g if self.form == "mirror" else self.gbar
        if self.l2 > 0:
            # RDA (Xiao 2010, with AdaGrad's proximal term, Duchi et al. 2011 Eq. 3):
            # x = argmin <gbar, x> + t l2/2 ||x||^2 + 1/(2 eta) x^T H x = -eta (H + eta t l2 I)^-1 gbar,
            # H = (G~ + delta I)^1/2
            assert self.form == "dual" and self.inside
            self.Gtilde = self.sketch.psd() + self.sketch.rho * np.eye(self.d)
            w_, Q = np.linalg.eigh(self.Gtilde + self.delta * np.eye(self.d))
            H = (Q * np.sqrt(np.maximum(w_, 0.0))) @ Q.T
            self.w = -self.eta * np.linalg.solve(H + self.eta * self.t * self.l2 * np.eye(self.d), self.gbar)
            self.sketch.end_round()
            return
        if self.lowrank:
            U, lam = self.sketch.eigpairs()
            step = lowrank_inv_root_apply(U, lam, self.sketch.rho, self.delta, v, self.inside)
        else:
            self.Gtilde = self.sketch.psd() + self.sketch.rho * np.eye(self.d)
            step = inv_root(self.Gtilde, 0.5, self.delta, self.inside) @ v
        self.w = self.w - self.eta * step if self.form == "mirror" else -self.eta * step
        self.sketch.end_round()


class SADA(_Sketched):
    """S-ADA (Sketchy AdaGrad, Feinberg et al. 2023, as Yang Sec. 4.1 states it): FD (Alg. 1) with
    the escaped mass added back, G~_t = B_t B_t^T + rho_{1:t} I, mirror descent
    x_{t+1} = x_t - eta (G~_t + delta I)^{-1/2} g_t. tau >= d: equals ``FullAdaGrad`` (mirror)."""

    form, fast = "mirror", False


class FastSADA(_Sketched):
    """Fast S-ADA (Yang Sec. 4.2, Thm. 4.3): Alg. 3's fast FD (2 tau buffer) with line 13 replaced by
    the mirror step x_{t+1} = x_t - eta G~_t^{-1/2} g_t. 2 tau > d: equals ``FullAdaGrad`` (mirror)."""

    form, fast = "mirror", True


class FTSL(_Sketched):
    """FTSL, Yang Alg. 2: FD (line 6-7), G~_t = B_t B_t^T + rho_{1:t} I (line 8), primal-dual step
    Eq. 2 x_{t+1} = -eta G~_t^{-1/2} gbar_t (line 9), delta inside the root.
    tau >= d: equals ``FullAdaGrad`` (dual)."""

    form, fast = "dual", False


class FTFSL(_Sketched):
    """FTFSL, Yang Alg. 3 (``FastFD`` for lines 5-11, 14-16): G~_t = rho_{1:t} I + V M V^T
    (line 12), x_{t+1} = -eta G~_t^{-1/2} gbar_t (line 13, Eq. 2). 2 tau > d: equals ``FullAdaGrad``
    (dual); it equals ``FTSL`` while neither discards (gradients of rank < tau)."""

    form, fast = "dual", True


# ----------------------------------------------------------------------------------------------
# Shampoo and FTSL-Shampoo for the K x d weight matrix of softmax regression


class FDGeneral:
    """Frequent Directions in general form, Yang Alg. 4: B (m x tau); ``insert_psd(Mt)``
    eigendecomposes B B^T + M_t (line 2, descending), keeps the first tau eigen-pairs and shrinks
    them by lambda_tau (line 3); returns lambda_tau and adds it to ``rho``. tau >= m: lambda_tau = 0
    past the m-th eigenvalue, so tau = m already keeps everything (B B^T + rho I = sum M)."""

    def __init__(self, m, tau, shrink_tol=SHRINK_TOL):
        self.m, self.tau, self.shrink_tol = int(m), int(tau), float(shrink_tol)
        self.B = np.zeros((self.m, self.tau))
        self.rho = 0.0

    def insert_psd(self, Mt):
        lam, U = eig_desc(self.B @ self.B.T + Mt)  # line 2
        lam = np.maximum(lam, 0.0)
        full = np.zeros(max(self.tau, self.m))
        full[: self.m] = lam
        lam_tau = full[self.tau - 1]
        if lam_tau <= self.shrink_tol * full[0]:
            lam_tau = 0.0
        k = min(self.tau, self.m)
        B = np.zeros((self.m, self.tau))
        B[:, :k] = U[:, :k] * np.sqrt(np.maximum(lam[:k] - lam_tau, 0.0))  # line 3
        self.B = B
        self.rho += lam_tau
        return lam_tau

    def psd(self):
        return self.B @ self.B.T


class Shampoo:
    """Shampoo (Gupta et al. 2018) for the K x d weight matrix W of softmax regression.

    Scores s = W x, p = softmax(s), prediction argmax s (ties to the lowest class; classes 1..K),
    loss -log p_y; gradient G_t = q a^T with q = p - e_y, a = x (rank one). L_t = sum G G^T =
    sum ||a||^2 q q^T (K x K), R_t = sum G^T G = sum ||q||^2 a a^T (d x d), eps inside the root
    (Yang Table 3 / Thm. 4.4: L_T = eps I + sum G G^T).
    ``form="dual"`` (Yang Eq. 3, the primal-dual Shampoo FTSL-Shampoo sketches):
    W_{t+1} = -eta L~_t^{-1/4} Gbar_t R~_t^{-1/4}; ``form="mirror"`` (Gupta et al. Alg. 1):
    W_{t+1} = W_t - eta L~_t^{-1/4} G_t R~_t^{-1/4}."""

    def __init__(self, K, d, eta, eps, form="dual"):
        assert form in ("dual", "mirror") and eps > 0
        self.K, self.d, self.eta, self.eps, self.form = int(K), int(d), float(eta), float(eps), form
        self.W = np.zeros((self.K, self.d))
        self.Gbar = np.zeros((self.K, self.d))
        self.L = np.zeros((self.K, self.K))
        self.R = np.zeros((self.d, self.d))

    def _accumulate(self, q, a):
        self.L += (a @ a) * np.outer(q, q)
        self.R += (q @ q) * np.outer(a, a)

    def _left_right(self):
        """(sum part of L~_t, sum part of R~_t); eps is added inside the root by the caller."""
        return self.L, self.R

    def step(self, x, label):
        """One round; returns (predicted class, cross-entropy of the label) before learning."""
        x = np.asarray(x, dtype=np.float64)
        s = self.W @ x
        e = np.exp(s - s.max())
        p = e / e.sum()
        c = int(label) - 1
        pred = int(np.argmax(s)) + 1
        loss = float(np.log(e.sum()) + s.max() - s[c])
        q = p.copy()
        q[c] -= 1.0
        G = np.outer(q, x)
        self.Gbar += G
        self._accumulate(q, x)
        Lp, Rp = self._left_right()
        Li = inv_root(Lp, 0.25, self.eps)
        Ri = inv_root(Rp, 0.25, self.eps)
        if self.form == "dual":
            self.W = -self.eta * (Li @ self.Gbar @ Ri)
        else:
            self.W = self.W - self.eta * (Li @ G @ Ri)
        return pred, loss

    def run(self, X, y):
        out = [self.step(X[i], y[i]) for i in range(len(y))]
        return np.array([o[0] for o in out]), np.array([o[1] for o in out])


class FTSLShampoo(Shampoo):
    """FTSL-Shampoo, Yang Alg. 5: the left and right sums FD-sketched by Alg. 4 (lines 5-6) with
    sketch sizes ``tau_left`` (<= K useful) and ``tau_right``; L~_t = L^ L^^T + (eps + rho^L_{1:t}) I,
    R~_t likewise (lines 7-8); update Eq. 3 (line 9). The rank-one G G^T = ||a||^2 q q^T and
    G^T G = ||q||^2 a a^T go to Alg. 4 as explicit matrices. tau_left = K and tau_right = d: equals
    ``Shampoo`` (dual)."""

    def __init__(self, K, d, eta, eps, tau_left, tau_right, form="dual"):
        super().__init__(K, d, eta, eps, form)
        self.left = FDGeneral(K, tau_left)
        self.right = FDGeneral(d, tau_right)

    def _accumulate(self, q, a):
        self.left.insert_psd((a @ a) * np.outer(q, q))
        self.right.insert_psd((q @ q) * np.outer(a, a))

    def _left_right(self):
        return (self.left.psd() + self.left.rho * np.eye(self.K),
                self.right.psd() + self.right.rho * np.eye(self.d))


# ----------------------------------------------------------------------------------------------
# CompAdaGrad


def hadamard(n):
    """The orthogonal n x n Walsh-Hadamard matrix (Sylvester's construction, entries +-1/sqrt(n))."""
    assert n >= 1 and n & (n - 1) == 0, "n must be a power of two"
    H = np.ones((1, 1))
    while H.shape[0] < n:
        H = np.block([[H, H], [H, -H]])
    return H / np.sqrt(n)


def srht_map(n, k, seed=0, scaled=False):
    """SRHT Pi = R H Sigma (k x n; Mehta Sec. 2): Sigma random signs, H ``hadamard(n)``, R picks k
    distinct rows. Unscaled (default): orthonormal rows, the variant Mehta's Thm. 3 analyses;
    ``scaled``: sqrt(n / k) R H Sigma, as the paper's algorithm prints it."""
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=n)
    rows = np.sort(rng.choice(n, size=k, replace=False))
    Pi = hadamard(n)[rows] * signs
    return Pi * np.sqrt(n / k) if scaled and k > 0 else Pi


def countsketch_map(n, k, seed=0):
    """Count-sketch map (issue 18 part 2): coordinate j goes to bucket h(j) in [0, k) with sign
    s(j); rows normalised to unit length. Rows have disjoint supports, so they are orthonormal
    (an empty bucket gives a zero row: the subspace then has fewer than k dimensions)."""
    rng = np.random.default_rng(seed)
    Pi = np.zeros((k, n))
    if k == 0:
        return Pi
    h = rng.integers(0, k, size=n)
    s = rng.choice([-1.0, 1.0], size=n)
    Pi[h, np.arange(n)] = s
    norms = np.linalg.norm(Pi, axis=1)
    return Pi / np.where(norms > 0, norms, 1.0)[:, None]


def sparse_sign_map(n, k, s=2, seed=0, orthonormal=True):
    """Sparse sign projection: each coordinate has s nonzeros +-1 in s distinct random rows. With
    ``orthonormal`` the rows are replaced by (Pi Pi^T)^{-1/2} Pi: the same row space, orthonormal
    rows (CompAdaGrad with orthonormal rows depends only on the row space: Pi -> Q Pi, Q orthogonal,
    leaves Pi^T (Pi G Pi^T + delta I)^{1/2} Pi unchanged)."""
    rng = np.random.default_rng(seed)
    Pi = np.zeros((k, n))
    if k == 0:
        return Pi
    for j in range(n):
        rows = rng.choice(k, size=min(s, k), replace=False)
        Pi[rows, j] = rng.choice([-1.0, 1.0], size=len(rows))
    if orthonormal:
        Pi = inv_root(Pi @ Pi.T, 0.5, 0.0) @ Pi
    return Pi


def l1_quadratic_min(A, b, lam, x0, tol=1e-14, max_sweeps=100000):
    """argmin_x 1/2 x^T A x - b^T x + lam ||x||_1 (A symmetric PSD) by cyclic coordinate descent:
    each coordinate minimised exactly (soft-thresholding) until a sweep moves no coordinate by more
    than tol (relative). Converges for PSD A with positive diagonal; coordinates with A_ii = 0 are
    left at x0 (the caller's data never reaches them)."""
    x = np.array(x0, dtype=np.float64)
    diag = np.diag(A)
    for _ in range(max_sweeps):
        moved = 0.0
        for i in range(len(x)):
            if diag[i] <= 0:
                continue
            r = b[i] - A[i] @ x + diag[i] * x[i]
            new = np.sign(r) * max(abs(r) - lam, 0.0) / diag[i]
            moved = max(moved, abs(new - x[i]))
            x[i] = new
        if moved <= tol * max(1.0, np.abs(x).max()):
            return x
    raise RuntimeError("coordinate descent did not converge")


class CompAdaGrad(_Linear):
    """CompAdaGrad (Mehta et al. 2016): composite mirror descent (Eq. 2)
    x_{t+1} = argmin_x eta <g_t, x> + eta phi(x) + 1/2 ||x - x_t||^2_{A_t}, phi = l2/2 ||x||^2 +
    l1 ||x||_1, with A_t = A^(r) + comp_weight A^(c) (Eq. 5):
    A^(r) = Pi^T (Pi G_t Pi^T + delta_r I)^{1/2} Pi, A^(c) = P_perp (diag(G_perp_t)^{1/2} + delta_c I)
    P_perp, P = Pi^T (Pi Pi^T)^+ Pi, P_perp = I - P, G_perp_t = sum (P_perp g)(P_perp g)^T (only its
    diagonal is kept). ``Pi`` is a k x n matrix (``srht_map``, ``countsketch_map``,
    ``sparse_sign_map``), n = d.

    The step is the dense solve (A + eta l2 I) x = A x_t - eta g (l1 = 0; the minimum-norm step
    if A is singular, delta = 0) or ``l1_quadratic_min`` (l1 > 0), the LASSO form of Mehta
    Sec. 4.2. k = 0: A is the diagonal D = comp_weight (sqrt(G) + delta_c) and the step is written
    elementwise in DiagAdaGrad's order, x - eta g / D (or the soft-threshold closed form with l1),
    so k = 0, comp_weight = 1, delta_c = 0, no regulariser gives ``DiagAdaGrad`` bit for bit.

    The sparse learner's definition (streamlearn.algos.compadagrad): ``complement="diag"`` puts
    diag(G_t) in A^(c) in place of diag(G_perp_t); ``map_on_seen=True`` takes ``Pi`` as the
    unnormalised count-sketch (one +-1 per column) and uses, in round t, its columns of the
    coordinates some gradient has reached (diag(G_t) > 0), rows scaled to unit length, and
    S = Pi_t G_t Pi_t^T."""

    def __init__(self, d, Pi, eta, delta_r, delta_c, comp_weight=1.0, l2=0.0, l1=0.0, loss="logistic",
                 complement="perp", map_on_seen=False):
        super().__init__(d, eta, loss)
        Pi = np.asarray(Pi, dtype=np.float64).reshape(-1, self.d)
        self.Pi0, self.Pi, self.k = Pi, Pi, Pi.shape[0]
        self.delta_r, self.delta_c, self.cw = float(delta_r), float(delta_c), float(comp_weight)
        self.l2, self.l1 = float(l2), float(l1)
        assert complement in ("perp", "diag")
        self.complement, self.map_on_seen = complement, bool(map_on_seen)
        self._set_map(Pi)
        self.S = np.zeros((self.k, self.k))  # Pi G_t Pi^T
        self.Gperp = np.zeros(self.d)  # diag(G_perp_t)
        self.Gdiag = np.zeros(self.d)  # diag(G_t)
        self.Gfull = np.zeros((self.d, self.d))  # G_t (map_on_seen: S = Pi_t G_t Pi_t^T)

    def _set_map(self, Pi):
        self.Pi = Pi
        self.P = Pi.T @ np.linalg.pinv(Pi @ Pi.T) @ Pi if self.k else np.zeros((self.d, self.d))
        self.Pperp = np.eye(self.d) - self.P

    def seen_map(self):
        """``map_on_seen``: Pi0's columns of the coordinates a gradient has reached (diag(G) > 0), the
        others zero, each non-empty row scaled to unit length (streamlearn.algos.compadagrad)."""
        Pi = self.Pi0 * (self.Gdiag > 0)[None, :]
        norms = np.linalg.norm(Pi, axis=1)
        return Pi / np.where(norms > 0, norms, 1.0)[:, None]

    def A(self):
        """A_t = A^(r) + comp_weight A^(c) as an explicit d x d matrix (``complement="diag"``: A^(c)
        with diag(G_t) in place of diag(G_perp_t), the lazily computable variant of
        streamlearn.algos.compadagrad)."""
        Gc = self.Gperp if self.complement == "perp" else self.Gdiag
        D = self.cw * (np.sqrt(Gc) + self.delta_c)
        lam, U = eig_desc(self.S)
        K = (U * np.sqrt(np.maximum(lam, 0.0) + self.delta_r)) @ U.T  # (Pi G Pi^T + delta_r I)^{1/2}
        return self.Pi.T @ K @ self.Pi + self.Pperp @ np.diag(D) @ self.Pperp

    def _learn(self, g):
        eta = self.eta
        if self.k == 0:
            self.Gperp = self.Gperp + g * g
            D = self.cw * (np.sqrt(self.Gperp) + self.delta_c)
            nz = D > 0
            if self.l1 == 0 and self.l2 == 0:
                self.w[nz] = self.w[nz] - eta * g[nz] / D[nz]
            else:  # per coordinate: argmin eta g x + eta phi(x) + D/2 (x - x_t)^2
                den = D[nz] + eta * self.l2
                r = D[nz] * self.w[nz] - eta * g[nz]
                self.w[nz] = np.sign(r) * np.maximum(np.abs(r) - eta * self.l1, 0.0) / den
            return
        self.Gdiag = self.Gdiag + g * g
        if self.map_on_seen:  # the map grows by the coordinates g reaches; S = Pi_t G_t Pi_t^T
            self.Gfull += np.outer(g, g)
            self._set_map(self.seen_map())
            self.S = self.Pi @ self.Gfull @ self.Pi.T
        else:
            pg = self.Pi @ g
            self.S += np.outer(pg, pg)
        gp = self.Pperp @ g
        self.Gperp = self.Gperp + gp * gp
        A = self.A()
        Al2 = A + eta * self.l2 * np.eye(self.d)
        if self.l1 > 0:
            self.w = l1_quadratic_min(Al2, A @ self.w - eta * g, eta * self.l1, self.w)
        else:  # (A + eta l2 I) (x - x_t) = -eta (g + l2 x_t); minimum-norm step if A is singular
            self.w = self.w + np.linalg.lstsq(Al2, -eta * (g + self.l2 * self.w), rcond=None)[0]
