"""Dense, obvious NumPy reference of SON Alg. 1 with Oja's sketch (Alg. 3, Eq. 4), one example
at a time, with explicit S and H (d <= a few hundred). Slow on purpose: the sparse learner
:class:`streamlearn.algos.oja_son.OjaSON` is compared against it.

Conventions shared with the sparse learner (see its module docstring):

* Gamma_t = gamma_c / (t + t0) I_m (V's step capped at Gamma_t ||g^||^2 <= oja_clip when given), to-sketch vector g^ = sqrt(sigma_eta * h) l'(p) x~,
  gradient g = h l'(p) x~ (h = importance weight); with ``invariant`` (the learner's default) the
  step uses VW's importance-invariant coefficient in place of h l'(p).
* Squared loss, ``clip=False`` (the paper's algorithm): the prediction p is reported and l' taken
  at it. ``clip=True`` (the learner's default, as VW): both use p clipped to the range of the
  labels learned so far (from [0, 0]), the range growing with each label before its derivative.
* Diagonal pre-scaling in the paper's order (Sec. 5.2): x~_t = D_t^{-1/2} x_t, D_1 = 0.1 I,
  D_{t+1} = D_t + h (l'(p_t) x_t)^2 after round t.
* V_0 = given m x d matrix with orthonormal rows; "orth" is Gram-Schmidt of the rows in order
  (the QR factor with positive diagonal, which is unique).
"""
import numpy as np

__all__ = ["NaiveSON"]


def _deriv(loss, p, y):
    if loss == "squared":
        return 2.0 * (p - y)
    if loss == "logistic":
        return -y / (1.0 + np.exp(y * p))
    return -y if y * p < 1.0 else 0.0


def _invariant_step(loss, p, y, us, q):
    """Importance-invariant update, obvious form: the prediction moves by upd * q after ``us`` = eta h
    units of continuous gradient flow along a direction that moves it q per unit of gradient."""
    a = us * q
    if loss == "squared":  # p' - y = (p - y) e^{-2a}
        return (y - p) * (1 - np.exp(-2 * a)) / q
    if loss == "logistic":  # margin z = y p flows as dz/ds = 1 / (1 + e^z): d + e^z (e^d - 1) = a, by bisection
        ez = np.exp(min(y * p, 700.0))
        lo, hi = 0.0, a
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if mid + ez * np.expm1(mid) < a:
                lo = mid
            else:
                hi = mid
        return y * 0.5 * (lo + hi) / q
    err = 1 - y * p  # hinge: the flow stops at the margin
    return 0.0 if err <= 0 else y * min(us, err / q)


def _target(loss, lab):
    if loss == "squared":
        return lab
    return 1.0 if lab > 0 else -1.0


def gram_schmidt_rows(P):
    """Rows of P orthonormalised in order (Gram-Schmidt), via QR with a positive diagonal."""
    Q, R = np.linalg.qr(P.T)
    sgn = np.sign(np.diag(R))
    sgn[sgn == 0] = 1.0
    return (Q * sgn).T


class NaiveSON:
    """SON Alg. 1 + Alg. 3 on dense vectors of length d."""

    def __init__(self, d, m, alpha, V0=None, sigma_eta=0.125, gamma_c=1.0, gamma_t0=0.0,
                 proj_c=0.0, diag=True, loss="squared", diag_order="paper", sketch_scale="paper", step_power=0.0,
                 diag_frame="data", diag_power=0.5, invariant=True, oja_clip=0.0, diag_rule="nag",
                 clip=False):
        self.d, self.m, self.alpha = d, m, alpha
        self.sigma_eta, self.gamma_c, self.gamma_t0 = sigma_eta, gamma_c, gamma_t0
        self.C, self.diag, self.loss = proj_c, diag, loss
        self.diag_vw = diag and diag_order == "vw"
        # "avg": g^ = sqrt(sigma_eta h t) l' x~ and S = Lambda^{1/2} V (no factor t)
        self.step_power = step_power
        self.invariant = invariant
        self.oja_clip = oja_clip  # cap on Oja's step Gamma ||g^||^2 on V (0 = none)
        self.clip = clip and loss == "squared"  # clip p to the label range (not in the paper)
        self.avg = sketch_scale == "avg" or (sketch_scale == "auto" and diag)
        self.u = np.zeros(d)  # Alg. 1 line 1
        self.t = 0  # Alg. 3 SketchInit
        self.Lam = np.zeros(m)
        self.V = np.zeros((m, d)) if V0 is None else np.array(V0, dtype=float)
        self.D = np.full(d, 0.1)
        self.lrange = (0.0, 0.0)  # squared loss: label range learned so far
        # diag_frame "data" (the paper): x~ = D^-r x is the example, u are the weights (pre-scaled
        # coordinates). "precond": the weights wo live in original coordinates, every change of u moves
        # wo by f * (change) with the frame f of that moment, f = (0.1 + G / s2)^-r / sqrt(s2), G = sum of
        # h (l' x)^2, s2 = max x^2 seen (updated before the prediction; when it grows, wo is multiplied by
        # s2_old / s2_new as in Ross et al. 2013).
        self.precond = diag and diag_frame == "precond"
        self.r = diag_power
        self.r_avg = diag_power if diag else 0.5
        self.G = np.zeros(d)
        self.s2 = np.zeros(d)
        self.wo = np.zeros(d)
        # diag_rule (precond only): "nag" as above; "vw" = VW's normalized adaptive rule (gd.cc):
        # f = (G / s2)^-r / sqrt(s2) with no D_1 term (f = 0 until the feature had a gradient, so it
        # never moves before that, as VW's weight), the weight rescaled by (s_old / s_new)^(2 - 4r)
        # when s grows (VW: w *= s_old / s_new for r = 1/4, its power_t 1/2), and the step multiplied
        # by (sum h ||x / s||^2 / sum h)^(2r - 1) over the examples with a non-zero gradient, this one
        # included (VW's average_update; sqrt(sum h / sum h ||x / s||^2) for r = 1/4).
        self.vw_rule = self.precond and diag_rule == "vw"
        self.nx_sum = 0.0
        self.w_sum = 0.0

    def frame(self):
        if not self.diag:
            return np.ones(self.d)
        if not self.precond:
            return self.D ** -self.r
        f = np.zeros(self.d)
        if self.vw_rule:
            nz = (self.s2 > 0) & (self.G > 0)
            f[nz] = (self.G[nz] / self.s2[nz]) ** -self.r / np.sqrt(self.s2[nz])
            return f
        nz = self.s2 > 0
        f[nz] = (0.1 + self.G[nz] / self.s2[nz]) ** -self.r / np.sqrt(self.s2[nz])
        return f

    def _acc_d(self, weight, dl, x):
        self.D = self.D + weight * (dl * x) ** 2
        self.G = self.G + weight * (dl * x) ** 2

    def S_H(self):
        tl = (1 if self.avg else self.t) * self.Lam  # eigenvalues of S^T S
        S = np.sqrt(tl)[:, None] * self.V  # Alg. 3 line 2
        H = np.diag(1.0 / (self.alpha + tl))  # Alg. 3 line 3
        return S, H

    def step(self, x, label, weight=1.0, learn=True):
        """Predict on dense x (and update if learn and label is not NaN). Returns the prediction."""
        x = np.asarray(x, dtype=float)
        learn = learn and not np.isnan(label) and weight > 0
        if self.precond and learn:
            grow = x * x > self.s2
            resc = grow & (self.s2 > 0)
            power = 1.0 - 2.0 * self.r if self.vw_rule else 1.0
            self.wo[resc] *= (self.s2[resc] / x[resc] ** 2) ** power
            self.s2[grow] = x[grow] ** 2
        f = self.frame()
        xt = x * f
        S, H = self.S_H()
        # Alg. 1 line 5: projection step
        xhat = S @ xt
        ux = self.wo @ x if self.precond else self.u @ xt
        tau = np.sign(ux) * max(abs(ux) - self.C, 0.0) if self.C > 0 else 0.0
        if tau != 0.0:
            gamma = tau / (xt @ xt - xhat @ H @ xhat)
            w = self.u - gamma * (xt - S.T @ H @ xhat)
        else:
            w = self.u.copy()
        if self.precond:
            self.wo += f * (w - self.u)
            self.u = w
            p = self.wo @ x
        else:
            p = w @ xt  # line 6
        # clip: the reported prediction is clipped to the label range learned so far
        pc = min(max(p, self.lrange[0]), self.lrange[1]) if self.clip else p
        if not learn:
            return pc
        y = _target(self.loss, label)
        pg = p
        if self.clip:  # derivative at p clipped to the label range seen (from [0, 0])
            self.lrange = (min(self.lrange[0], y), max(self.lrange[1], y))
            pg = min(max(p, self.lrange[0]), self.lrange[1])
        dl = _deriv(self.loss, pg, y)
        if self.diag_vw:  # VW's order: D first, then the update step sees D_{t+1}^{-r} x
            self._acc_d(weight, dl, x)
            f = self.frame()
            xt = x * f
        g = weight * dl * xt  # line 6
        gh = np.sqrt(self.sigma_eta * weight) * dl * xt  # to-sketch vector
        # Alg. 3 SketchUpdate with Eq. 4
        self.t += 1
        G = self.gamma_c / (self.t + self.gamma_t0)
        if self.avg:
            gh = gh * (np.sqrt(self.t) if self.r_avg == 0.5 else self.t ** self.r_avg)
        if self.m > 0:
            Vg = self.V @ gh
            self.Lam = (1 - G) * self.Lam + G * Vg ** 2
            Gv = G  # V's step, at most oja_clip / ||g^||^2
            if self.oja_clip > 0 and G * (gh @ gh) > self.oja_clip:
                Gv = self.oja_clip / (gh @ gh)
            if dl != 0.0:
                self.V = gram_schmidt_rows(self.V + Gv * np.outer(Vg, gh))
        S, H = self.S_H()
        # Alg. 1 line 8
        eta = float(self.t) ** self.step_power  # step multiplier eta_t = t^p
        if self.vw_rule and dl != 0.0:
            nz = self.s2 > 0
            self.nx_sum += weight * np.sum(x[nz] ** 2 / self.s2[nz])
            self.w_sum += weight
            if self.nx_sum > 0:
                eta *= (self.nx_sum / self.w_sum) ** (2.0 * self.r - 1.0)
        if self.invariant and dl != 0.0:  # replace h l'(p) by the importance-invariant coefficient
            q = xt @ (xt - S.T @ (H @ (S @ xt))) / self.alpha  # x~^T A^-1 x~
            if q > 0:
                g = -_invariant_step(self.loss, pg, y, eta * weight, q) / eta * xt
        u = w - eta * (g - S.T @ (H @ (S @ g))) / self.alpha
        if self.precond:
            self.wo += f * (u - w)
        self.u = u
        if not self.diag_vw:
            self._acc_d(weight, dl, x)
        return pc
