"""Sparse Oja-SON: sketched online Newton with Oja's sketch (``--algo oja-son``).

Luo, Agarwal, Cesa-Bianchi & Langford (2016), *Efficient Second Order Online Learning by
Sketching* (SON). This module implements Alg. 4 (sparse SON with Oja's sketch) with the sparse
sketch of Alg. 5 and App. G, the Gram-Schmidt of Alg. 11, and the diagonal pre-scaling of
Sec. 5.2. Per learned example the cost is O(m^2 + m s) (s = number of features of the example)
plus O(m^3) for the Gram-Schmidt; nothing is O(2^b), not even start-up.

Model
-----
Prediction ``w^T x~`` with ``w = u_bar + Z^T b`` (Alg. 4), sketch ``S = (t Lambda)^{1/2} V``,
``V = F Z`` (Alg. 5), ``H = diag(1/(alpha + t Lambda_ii))``, ``K = Z Z^T`` maintained
incrementally (App. G), ``F`` re-orthonormalised by Gram-Schmidt in the K inner product
(Alg. 11) every round; F stays lower triangular. The Oja step is ``Gamma_t = oja_gamma /
(t + oja_t0)`` (scalar, so ``delta = Gamma_t Z g^`` needs no ``F^{-1}``); the to-sketch vector
is ``g^ = sqrt(sigma_eta) g`` (the paper's ``sigma_t + eta_t``, held constant; 1/8 is the
paper's sigma for squared loss with C = 1) with ``--sketch_scale paper``; with the default
``avg`` scale (when the diagonal pre-scaling is on) it is ``g^ = sqrt(sigma_eta t) g`` and
``S = Lambda^{1/2} V``, ``H = diag(1/(alpha + Lambda_ii))`` (no factor t). Optional step
multiplier ``eta_t = t^step_power``: ``u <- w - eta_t A_t^{-1} g`` (default 0: the paper).

Why the avg to-sketch scale (found on cod-rna, where m = 10 with the paper's scale stayed at the
base rate for every alpha): the pre-scaled features ``D_t^{-1/2} x`` shrink like ``t^{-1/2}``, so
with the paper's scale ``||g^||^2 ~ 1/t``, Oja's steps ``Gamma_t ||g^||^2 ~ 1/t^2`` are summable and
V freezes at what the first few examples said; ``t Lambda`` is dominated by those first rounds, and
the step is divided by ``alpha + t Lambda`` in directions that are not the curvature's. With
``g^ = sqrt(sigma_eta t) g`` the input of Oja's rule has stationary size (``E[g^ g^^T]`` ~ sigma_eta
times the correlation matrix of the gradients), Lambda estimates the curvature accumulated in the
*current* pre-scaled coordinates, and A_t in original coordinates is about
``alpha diag(sum g g^T) + sigma_eta sum g g^T``: ONS with a diagonal regulariser, alpha the mix.
Measured (one pass, best alpha): cod-rna shuffled m = 10 0.333 -> 0.091 (m = 0: 0.159).

Default: the pre-scaling as a preconditioner (``--diag_frame precond``, diag_power 0.25)
---------------------------------------------------------------------------------------
With the importance-invariant step and the label-range clip below it passes the 0.5-point target
on all 16 rows of benchmarks/son_real.py (best alpha of the grid) and is stable at the default
alpha = 1 on raw heavy-tailed sparse streams. Before those two (2026-11-22) it diverged there
(gen_sparse: average squared loss 4e5; a9a at alpha 1: error 0.76), so the data frame was the
default; models saved then load with ``diag_frame=data`` and the plain step, as they were trained.

The paper (``--diag_frame data``) feeds ``x~ = D_t^{-1/2} x`` as the example, so the weights live in
the pre-scaled coordinates: ``w = D_T^{-1/2} u`` shrinks old updates whenever D grows (dual averaging
with 1/t-like steps). On drifting or label-sorted streams (ijcnn1, w8a) that cannot track, and on
dense stationary ones (covtype) the full dense version of it loses to plain RLS (0.298 vs 0.251).
With ``precond`` every update computed on ``x~ = f x`` is mapped back to original coordinates with
the frame ``f`` of its round: per stored feature ``c_j`` (original-coordinate weight) and the
snapshot of ``w~_j = u_bar_j + Z_j^T b`` at its last touch, flushed (``c_j += f_j (w~_j - snap_j)``)
before ``f_j`` changes, which only happens when the feature occurs -- exact and still O(m s). The
frame is ``f = D~^{-r} / s`` with ``s^2`` = max x^2 seen and ``D~ = 0.1 + sum h (l' x / s)^2``: scale-
invariant (when s grows, c_j is multiplied by s_old^2 / s_new^2, as in Ross et al. 2013 / VW's
normalized update). With r = 1/4 the off-sketch step is AdaGrad's (m = 0 is AdaGrad on max-normalised
features), the avg to-sketch scale ``g^ = sqrt(sigma_eta h) t^r l' x~`` keeps Oja's input stationary
and A_t in original coordinates is about ``alpha sqrt(diag G) + sigma_eta t^-1/2 sum g g^T`` with the
second term sketched: a full-matrix, AdaGrad-rate correction along the top curvature directions.
sigma_eta = 1/2 (its default in this mode) was measured on benchmarks/son_real.py.

Design choices
--------------
* **Storage: a hash table, not 2^b arrays.** Per-feature state (u_bar, the diagonal
  accumulator, a scratch cell and the m entries of Z's column) is one contiguous row of an
  open-addressing table keyed by the masked feature index; it grows by doubling (between
  examples, so results never depend on it). Memory and start-up are O(features seen), not
  O(2^b): ``-b 32`` costs the same as ``-b 18``. (``np.zeros`` of 2^b x (m+3) doubles would
  also leave untouched pages non-resident, but at -b 26 and m = 10 it reserves 7 GB of address
  space, every touched feature costs a whole 4 KiB page, and the model file would be 2^b rows.)
* **Initial Z: unit vectors of the first m distinct features learned from**, in order of
  appearance (a sparse Z with orthonormal rows, as Alg. 5 line 1 allows). Row i is "pending"
  until its feature appears; a pending row is the unit vector of a feature never seen, so it is
  orthogonal to every gradient and nothing in the state depends on which unseen feature it is:
  assigning it at first appearance is exactly the run with that Z fixed from the start (the
  features are saved in the model as ``assigned``). Fixed unit vectors on hash slots chosen in
  advance (VW's choice) are orthogonal to all data when those slots never occur, and then Oja's
  rule never moves them: the sketch does nothing.
* **Growth of the representation.** ``Z_t = Z_0 prod (I + Gamma g^ g^T)`` is an
  un-normalised power iteration: its rows align and grow, K = Z Z^T becomes ill-conditioned
  (Gram-Schmidt in the K inner product then loses ~eps cond(Z)^2) and eventually overflows.
  We track ``||F||_F ||Z||_F >= cond(Z)`` (O(m^2)); when it would exceed ``max_cond`` (and
  at least n/8 examples were learned since the last time, n = stored features, so that the
  cost per example stays O(m^2); or at once above 10^4 ``max_cond``, or if Gram-Schmidt finds
  dependent rows) we *re-materialise*: ``u_bar += Z^T b``, ``b = 0``, ``Z <- GramSchmidt(F Z)`` computed explicitly
  over the stored features (Gram matrix recomputed exactly, twice), ``F = I``,
  ``K = Z Z^T``. This is the same w and V, with Z orthonormal again; it costs O(m^2 n) for n
  stored features. With the diagonal scaling (VW order) and the paper's to-sketch scale
  ||g^||^2 <= s sigma_eta (and ~ 1/t on stationary data), so the growth ~ sum_t Gamma_t ||g^||^2 is
  logarithmic in T at most and re-materialisations are rare; with the avg scale ||g^||^2 is
  ~ s sigma_eta, log cond(Z) grows like s sigma_eta log T and they come more often (amortised). In a
  run that diverges (e.g. ``--no_diag`` on raw features with too small an alpha) single steps
  grow cond(Z) by > 1e8, Gram-Schmidt breaks down and a re-materialisation happens almost
  every example (slow, O(m^2 n) each, but the predictions stay finite).
* **Diagonal pre-scaling, paper order** (NOTES_SON item 3): round t feeds ``D_t^{-1/2} x_t``
  with ``D_1 = 0.1 I``, and ``D_{t+1} = D_t + imp * (l'(p_t) x_t)^2`` (gradient in original
  coordinates) after the update. ``--no_diag`` feeds ``x_t`` unchanged.
* Projection (Alg. 1 / Eq. 6) with constant ``projection_c`` (0 = off): the prediction is then
  ``clip(u^T x, -C, C)`` and the weights move as Eq. 6 says.
* **Importance-invariant step** (default; ``--no_invariant`` for the paper's plain
  ``u <- w - A_t^{-1} g``): the step along ``A_t^{-1} x~`` moves this example's prediction by
  ``-c q`` with ``q = x~^T A_t^{-1} x~`` (O(m) from quantities the update computes anyway); ``c``
  is VW's importance-aware coefficient (Karampatziakis & Langford 2011), the exact result of
  h infinitesimal gradient steps, which equals ``h l'(p)`` when ``h q`` is small and never
  steps past the label (squared), the margin (hinge) or the logistic fixed point. 1/alpha is then
  a step size that cannot overshoot: alpha = 1 is safe on any number and scale of features. The
  sketch update (``g^``, Lambda) and D still use the plain gradient.
* **Squared loss**: the derivative is taken at the prediction clipped to the range of the labels
  learned so far (as VW's squared loss, and its OjaNewton, clip predictions to the label range), so
  ``|l'| <= 2 (max - min)``. Saved in the model (``flt[1:3]``).
* **Growth check includes Z's scale**: Oja's steps multiply Z by ``I + Gamma g^ g^^T``; the scale of
  Z (``tr(K) / m``) can grow by 10^20 in a few hundred examples while cond(Z) stays small (always,
  for m = 1: ||F|| ||Z|| = 1), and ``w = u_bar + Z^T b`` then cancels every digit. The
  re-materialisation trigger uses ``max(||F||_F ||Z||_F, tr(K) / m)``.
* Importance weight h: ``g = h l'(p) x~``, ``g^ = sqrt(sigma_eta h) l'(p) x~`` (h copies of the
  example add h g g^T to the curvature), ``D += h (l' x)^2``. Weight 0 or NaN label: predict only.
"""
from __future__ import annotations

import numpy as np

from .base import Learner, Param

__all__ = ["OjaSON"]

MIN_CAP = 1 << 10
N_COLS_EXTRA = 3  # u_bar, D - 0.1, scratch


def _k():
    from . import _oja_son_kernels
    return _oja_son_kernels


class OjaSON(Learner):
    """Sparse Oja-SON with diagonal pre-scaling (SON Alg. 4, 5, 11; App. G; Sec. 5.2)."""

    name = "oja-son"
    PARAMS = (
        Param("sketch_size", int, 10,
              "Oja-SON sketch size m (0 = scale-invariant online gradient descent).",
              short="-m", structural=True),
        Param("alpha", float, 1.0,
              "Oja-SON regulariser alpha: 1/alpha is the step size (A_t = alpha I + S^T S)."),
        Param("no_diag", bool, False,
              "Oja-SON: turn off the diagonal pre-scaling D_t^{-1/2} x_t of SON Sec. 5.2.",
              structural=True),
        Param("diag_order", ("paper", "vw"), "vw",
              "Oja-SON diagonal pre-scaling order: paper (round t uses D_t) or vw (D updated with "
              "the current gradient before the update step, as VW's OjaNewton).", structural=True),
        Param("sketch_scale", ("auto", "paper", "avg"), "auto",
              "Oja-SON to-sketch scale: paper (g^ = sqrt(sigma_eta) g, S = (t Lambda)^1/2 V) or avg "
              "(g^ = sqrt(sigma_eta t) g, S = Lambda^1/2 V: the sketch estimates the curvature in the current "
              "pre-scaled coordinates); auto = avg with the diagonal pre-scaling, paper without.", structural=True),
        Param("diag_frame", ("data", "precond"), "precond",
              "Oja-SON diagonal pre-scaling: precond (a preconditioner: each update is mapped back to original "
              "coordinates with the D of its round) or data (the paper: D^-r x is the example, the weights live "
              "in the pre-scaled coordinates and shrink when D grows).", structural=True),
        Param("diag_power", float, None,
              "Oja-SON: exponent r of the pre-scaling D^-r x (default 0.25 with --diag_frame precond, where it "
              "makes the off-sketch step AdaGrad's, m = 0 is AdaGrad; 0.5 = the paper with --diag_frame data).",
              structural=True),
        Param("step_power", float, 0.0,
              "Oja-SON: step multiplier eta_t = t^p on the Newton step (u <- w - eta_t A_t^-1 g); 0 = the "
              "paper. 0.5 helps on dense stationary data with the diagonal pre-scaling, hurts on sparse data."),
        Param("oja_gamma", float, 1.0,
              "Oja-SON: Oja step schedule Gamma_t = oja_gamma / (t + oja_t0)."),
        Param("oja_t0", float, 0.0,
              "Oja-SON: offset t0 of the Oja step schedule Gamma_t = oja_gamma / (t + t0)."),
        Param("projection_c", float, 0.0,
              "Oja-SON: projection constant C of SON Alg. 1 (|w^T x| <= C); 0 = no projection."),
        Param("sigma_eta", float, None,
              "Oja-SON: to-sketch scale sigma+eta, g^ = sqrt(sigma+eta) g (default 1/8 = paper's sigma for squared "
              "loss; 1/2 with --diag_frame precond, where it is the weight of the sketched curvature against "
              "the AdaGrad diagonal)."),
        Param("no_invariant", bool, False,
              "Oja-SON: take the paper's plain Newton step u <- w - A^-1 g instead of the importance-invariant "
              "one (default), which moves the prediction as many infinitesimal steps would and never past "
              "the label or margin, so that alpha = 1 is safe on any feature scale."),
        Param("max_cond", float, 1e4,
              "Oja-SON: re-materialise the sketch when the bound on cond(Z) exceeds this."),
    )

    def __init__(self, **hyper):
        super().__init__(**hyper)
        m = int(self.hyper["sketch_size"])
        if m < 0:
            raise ValueError(f"--sketch_size must be >= 0, got {m}")
        self.m = m
        self.diag = not bool(self.hyper["no_diag"])
        if self.hyper["diag_order"] not in ("paper", "vw"):
            raise ValueError(f"--diag_order must be paper or vw, got {self.hyper['diag_order']!r}")
        self.diag_vw = self.hyper["diag_order"] == "vw"
        sc = self.hyper["sketch_scale"]
        if sc not in ("auto", "paper", "avg"):
            raise ValueError(f"--sketch_scale must be auto, paper or avg, got {sc!r}")
        self.sketch_avg = sc == "avg" or (sc == "auto" and self.diag)
        if self.hyper["diag_frame"] not in ("data", "precond"):
            raise ValueError(f"--diag_frame must be data or precond, got {self.hyper['diag_frame']!r}")
        self.precond = self.diag and self.hyper["diag_frame"] == "precond"
        dp = self.hyper["diag_power"]
        self.dpow = float(dp if dp is not None else (0.25 if self.precond else 0.5))
        if not 0.0 < self.dpow <= 1.0:
            raise ValueError(f"--diag_power must be in (0, 1], got {self.dpow}")
        self.ncol = m + N_COLS_EXTRA + (4 if self.precond else 0)  # precond: c, snapshot of w~, s2, frame f
        self._alloc_table(MIN_CAP)
        self.ints = np.zeros(5, np.int64)  # t, n_assigned, n_occupied, n_remat, t at last remat
        # bound on cond(Z) (||F||_F ||Z||_F = m at start), then the label range learned so far
        self.flt = np.array([float(m), 0.0, 0.0])
        self.F = np.eye(m)
        self.K = np.eye(m)
        self.lam = np.zeros(m)
        self.b = np.zeros(m)
        self.assigned = np.full(m, -1, np.int64)
        self._apply_hyper()

    @classmethod
    def from_state(cls, meta, arrays):
        # models written before --diag_frame / --diag_power existed used the data frame, D^-1/2
        hyper = meta.get("hyper", {})
        if "diag_frame" not in hyper:
            hyper = dict(hyper, diag_frame="data", diag_power=0.5)
        # ... and before the importance-invariant step, the plain one
        if "no_invariant" not in hyper:
            hyper = dict(hyper, no_invariant=True)
        meta = dict(meta, hyper=hyper)
        return super().from_state(meta, arrays)

    @classmethod
    def default_hyper(cls, name):
        return {p.name: p.default for p in cls.PARAMS}[name]

    # -- hyper-parameters ---------------------------------------------------------------
    def _apply_hyper(self):
        h = self.hyper
        self.alpha = float(h["alpha"])
        se = h["sigma_eta"]
        self.sigma_eta = float(se if se is not None else (0.5 if self.precond else 0.125))
        self.gamma_c = float(h["oja_gamma"])
        self.gamma_t0 = float(h["oja_t0"])
        self.proj_c = float(h["projection_c"])
        self.max_cond = float(h["max_cond"])
        self.step_power = float(h["step_power"])
        self.invariant = not bool(h["no_invariant"])
        if not self.alpha > 0:
            raise ValueError(f"--alpha must be > 0, got {self.alpha}")
        if not self.sigma_eta >= 0:
            raise ValueError(f"--sigma_eta must be >= 0, got {self.sigma_eta}")
        if not (self.gamma_c > 0 and self.gamma_c / (1.0 + self.gamma_t0) <= 1.0):
            raise ValueError("--oja_gamma / (1 + --oja_t0) must be in (0, 1] (Gamma_t is a step in [0, 1])")
        if not self.proj_c >= 0:
            raise ValueError(f"--projection_c must be >= 0, got {self.proj_c}")

    # -- hash table ---------------------------------------------------------------------
    def _alloc_table(self, cap):
        self.keys = np.full(cap, -1, np.int64)
        self.tab = np.zeros((cap, self.ncol))
        self.shift = 64 - (cap.bit_length() - 1)

    def _grow(self, needed):
        cap = self.keys.shape[0]
        while needed > (cap >> 1):
            cap <<= 1
        if cap == self.keys.shape[0]:
            return
        old_keys, old_tab = self.keys, self.tab
        self._alloc_table(cap)
        _k().rehash(old_keys, old_tab, self.keys, self.tab, self.shift)

    # -- learning -----------------------------------------------------------------------
    def _run(self, batch, learn):
        n = batch.n
        pred = np.empty(n)
        loss = np.empty(n)
        if n == 0:
            return pred, loss
        offsets = np.ascontiguousarray(batch.offsets, dtype=np.int64)
        maxs = int(np.max(offsets[1:] - offsets[:-1]))
        slot_buf = np.empty(max(maxs, 1), np.int64)
        xt_buf = np.empty(max(maxs, 1))
        wt_buf = np.empty(max(maxs, 1))
        kern = _k().son_run
        start = 0
        while True:
            nxt, learned = kern(offsets, batch.indices, batch.values, batch.labels, batch.weights, start,
                                self.keys, self.shift, self.tab, self.ints, self.flt, self.F, self.K,
                                self.lam, self.b, self.assigned, self.mask, self.loss.code, self.alpha,
                                self.sigma_eta, self.gamma_c, self.gamma_t0, self.proj_c, self.diag,
                                self.diag_vw, self.max_cond, self.sketch_avg, self.step_power, bool(learn), pred, loss, slot_buf, xt_buf, wt_buf,
                                self.precond, self.dpow, self.invariant)
            self.examples_learned += int(learned)
            if nxt >= n:
                break
            self._grow(int(self.ints[2]) + int(offsets[nxt + 1] - offsets[nxt]))
            start = nxt
        return pred, loss

    def learn_batch(self, batch):
        return self._run(batch, True)

    def predict_batch(self, batch):
        return self._run(batch, False)

    # -- introspection (tests, benchmarks) -------------------------------------------------
    def weights_dense(self, keys):
        """Effective weights ``w = u_bar + Z^T b`` (pre-scaled coordinates) at the given masked keys."""
        rows = self._rows(keys)
        return rows[:, 0] + rows[:, N_COLS_EXTRA:N_COLS_EXTRA + self.m] @ self.b

    def sketch_dense(self, keys):
        """``V = F Z`` restricted to the given masked keys (m x len(keys))."""
        rows = self._rows(keys)
        return self.F @ rows[:, N_COLS_EXTRA:N_COLS_EXTRA + self.m].T

    def _rows(self, keys):
        keys = np.asarray(keys, np.int64)
        out = np.zeros((len(keys), self.tab.shape[1]))
        _k().table_lookup_rows(self.keys, self.tab, keys, self.shift, out)
        return out

    def rematerialize(self):
        """Re-materialise the sketch now (w and V unchanged up to rounding)."""
        if self.m > 0:
            _k().rematerialize(self.keys, self.tab, self.F, self.K, self.b, int(self.ints[1]))
            self.flt[0] = _k()._estimate_cond(self.F, self.K)
            self.ints[3] += 1
            self.ints[4] = self.ints[0]

    @property
    def n_remat(self) -> int:
        return int(self.ints[3])

    # -- state ----------------------------------------------------------------------------
    def _arrays(self):
        occ = np.flatnonzero(self.keys >= 0)
        order = occ[np.argsort(self.keys[occ], kind="stable")]
        return {"keys": self.keys[order], "rows": self.tab[order], "ints": self.ints, "flt": self.flt,
                "F": self.F, "K": self.K, "lam": self.lam, "b": self.b, "assigned": self.assigned}

    def _load_arrays(self, arrays):
        m = self.m
        flt = np.asarray(arrays["flt"])
        if flt.shape == (1,) and flt.dtype == np.float64:
            # written before the label range was kept: a range that never clips, so the model
            # continues exactly as it was trained (finite, as saved state must be)
            big = np.finfo(np.float64).max
            arrays = dict(arrays, flt=np.concatenate([flt, [-big, big]]))
        shapes = {"ints": ((5,), np.int64), "flt": ((3,), np.float64), "F": ((m, m), np.float64),
                  "K": ((m, m), np.float64), "lam": ((m,), np.float64), "b": ((m,), np.float64),
                  "assigned": ((m,), np.int64)}
        for k, (shape, dt) in shapes.items():
            a = np.asarray(arrays[k])
            if a.shape != shape or a.dtype != dt:
                raise ValueError(f"array {k}: shape/dtype {a.shape}/{a.dtype} does not fit {shape}/{np.dtype(dt)}")
            setattr(self, k, np.array(a, copy=True))
        keys = np.asarray(arrays["keys"], np.int64)
        rows = np.asarray(arrays["rows"], np.float64)
        if self.precond and rows.ndim == 2 and rows.shape[1] == self.ncol - 1:
            # saved before the frame scale was cached in its own column: derive it
            rows = np.concatenate([rows, np.zeros((rows.shape[0], 1))], axis=1)
            _k().fill_frame(rows, self.m, self.dpow)
        if rows.shape != (len(keys), self.ncol) or (len(keys) and (keys.min() < 0 or keys.max() > self.mask)):
            raise ValueError("arrays keys/rows do not fit this model")
        if len(keys) != int(self.ints[2]):
            raise ValueError("array keys: count differs from the stored feature count")
        cap = MIN_CAP
        while len(keys) > (cap >> 1):
            cap <<= 1
        self._alloc_table(cap)
        _k().rehash(keys.copy(), np.ascontiguousarray(rows), self.keys, self.tab, self.shift)
