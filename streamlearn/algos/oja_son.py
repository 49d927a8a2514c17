"""Sparse Oja-SON: sketched online Newton with Oja's sketch (``--algo oja-son``).

Luo, Agarwal, Cesa-Bianchi & Langford (2016), *Efficient Second Order Online Learning by
Sketching* (SON): Alg. 4 (sparse SON with Oja's sketch), Alg. 5 and App. G (the sparse sketch
``S = (t Lambda)^{1/2} V``, ``V = F Z``, ``K = Z Z^T``), Alg. 11 (Gram-Schmidt in the K inner
product, every round) and the diagonal pre-scaling of Sec. 5.2. Prediction ``w^T x~`` with
``w = u_bar + Z^T b``; ``A_t = alpha I + S^T S``; Oja's step ``Gamma_t = oja_gamma / (t + oja_t0)``.
Per learned example the cost is O(m^2 + m s) (s features; the O(m^3) Gram-Schmidt runs every
max(16, m) examples), plus the re-materialisation below; nothing is O(2^b). The kernels are in :mod:`streamlearn.algos._oja_son_kernels` (state :class:`SonState`).

Options (``--name``): ``sketch_size`` m (0 = scale-invariant online gradient descent), ``alpha``,
``no_diag``, ``diag_order`` (paper: round t uses D_t; vw: D updated with the current gradient
first, as VW's OjaNewton), ``diag_frame`` / ``diag_power`` (below), ``sketch_scale`` (paper:
``g^ = sqrt(sigma_eta) g``; avg: ``g^ = sqrt(sigma_eta t) g``, ``S = Lambda^{1/2} V``), ``sigma_eta``
(the paper's sigma_t + eta_t, held constant), ``step_power`` (step multiplier ``eta_t = t^p``),
``oja_gamma`` / ``oja_t0``, ``projection_c`` (Alg. 1 / Eq. 6), ``no_invariant``, ``max_cond``.

Deviations from the paper (defaults; the paper's choices remain options)
-------------------------------------------------------------------------
* **Pre-scaling as a preconditioner** (``--diag_frame precond``, ``diag_power`` 0.25): every update
  computed on ``x~ = f x`` is mapped back to original coordinates with the frame ``f`` of its
  round (per feature: the original-coordinate weight ``c_j`` and a snapshot of ``w~_j``, flushed
  before ``f_j`` changes; exact, O(m s)). ``f = D~^{-r} / s`` with ``s^2`` = max x^2 seen and
  ``D~ = sum h (l' x / s)^2`` (scale-invariant, as VW's normalized update); with r = 1/4 the
  off-sketch step is AdaGrad's. ``--diag_frame data --diag_power 0.5`` is the paper: ``D^-1/2 x``
  is the example and the weights live in the pre-scaled coordinates.
* **VW's normalized adaptive rule for that step** (``--diag_rule vw``, the default in the precond
  frame; VW's gd.cc, Ross, Mineiro & Langford 2013): D~ starts at 0 (f = 0 until the feature's first
  non-zero gradient), a weight is multiplied by ``(s_old / s_new)^(2 - 4r)`` when its feature's scale
  grows (s_old / s_new for r = 1/4, as VW), and the whole Newton step by VW's global normaliser
  ``(sum h ||x / s||^2 / sum h)^(2r - 1)`` (sqrt(sum h / sum h ||x / s||^2) for r = 1/4) over the
  examples with a non-zero gradient, this one included. With m = 0 and alpha = 2 this is VW's
  default learner (-l 0.5), up to two conventions kept from NAG / this learner: s grows before the
  prediction (VW: in the update) and repeated indices are summed. ``--diag_rule nag`` is the earlier
  rule: ``D~ = 0.1 + sum h (l' x / s)^2``, weights multiplied by ``s_old^2 / s_new^2``, no global
  normaliser (models saved before ``--diag_rule`` continue with it).
* **avg to-sketch scale** (``--sketch_scale auto``: avg with the pre-scaling, paper without), so
  that Oja's input keeps a stationary size as the pre-scaled features shrink; ``sigma_eta``
  defaults to 1/2 with ``precond``, else 1/8 (the paper's sigma for squared loss with C = 1).
* **Importance-invariant step** (``--no_invariant`` for the paper's ``u <- w - A_t^{-1} g``): the
  step along ``A_t^{-1} x~`` uses VW's importance-aware coefficient (Karampatziakis & Langford
  2011) with ``q = x~^T A_t^{-1} x~``, so it never steps past the label or margin and alpha = 1 is
  safe on any feature scale. The sketch update and D use the plain gradient.
* **Oja's step capped** (``--oja_clip``, 0.05 with the avg scale, none with the paper's): V moves by
  ``Gamma_v = min(Gamma_t, oja_clip / ||g^||^2)`` (Alg. 5 lines 2-3), Lambda by Gamma_t (line 1). With
  the avg scale Gamma_t ||g^||^2 does not decay on sparse text, and uncapped V turns towards each
  new example while Lambda keeps the old rows' eigenvalues: the Newton step's correction along those
  rows then biases the rare features' weights (a drift that feeds on itself with squared loss).
* **Squared loss** takes the derivative at the prediction clipped to the label range learned so
  far, and reports that clipped prediction (as VW's squared loss and OjaNewton); the range is
  saved in the model. ``--no_clip`` drops the clip (the paper's algorithm has none).
* **Storage is a hash table** keyed by the masked feature index (one contiguous row per feature:
  u_bar, D - 0.1, scratch, Z's column, then c_j, the w~ snapshot, s^2 and f in precond mode),
  grown by doubling between examples: memory and start-up are O(features seen), not O(2^b).
* **Initial Z**: unit vectors of the first m distinct features learned from (Alg. 5 line 1 allows
  any orthonormal rows; a row is pending until its feature appears, which equals fixing it from
  the start). VW's fixed slots chosen in advance can be orthogonal to all data. ``--random_seed S``
  (S > 0) keeps each new feature for a row with probability 1/2 by a seeded hash of its index, so
  different seeds start from different unit vectors (users average over starting sketches).
* **Re-materialisation**: ``Z_t = Z_0 prod (I + Gamma g^ g^T)`` grows and becomes ill-conditioned;
  when the bound ``max(||F||_F ||Z||_F, tr(K) / m)`` exceeds ``max_cond`` (amortised: at least
  max(n, m)/8 examples since the last time, or at once above 10^4 ``max_cond`` or when Gram-Schmidt finds
  dependent rows), ``u_bar += Z^T b``, ``b = 0``, ``Z <- GramSchmidt(F Z)``, ``F = I``: the same w and
  V with Z orthonormal again, O(m^2 n) for n stored features.
* Importance weight h: ``g = h l'(p) x~``, ``g^ = sqrt(sigma_eta h) l'(p) x~``, ``D += h (l' x)^2``.
  Weight 0 or NaN label: predict only.

Measured behaviour (why these defaults, per dataset) is printed by ``benchmarks/son_real.py``;
facts about the paper's setting are in ``NOTES_SON.md``.
"""
from __future__ import annotations

import numpy as np

from ..kernels import kernel_batch, lazy
from .base import Learner, Param, adopt, lazy_zeros, require
from .feature_table import MIN_CAP, FeatureTable

__all__ = ["OjaSON"]

N_COLS_EXTRA = 3  # u_bar, D - 0.1, scratch
#: the largest --sketch_size (m x m matrices: 8 MB each; a row of m + 8 floats per feature)
MAX_SKETCH_SIZE = 1024
#: SonState's fields saved as they are (the table, keys and tab, is saved compacted).
_SMALL_STATE = ("ints", "flt", "F", "K", "lam", "b", "assigned")

_kernels = lazy("streamlearn.algos._oja_son_kernels")
#: default cap on Oja's step Gamma_t ||g^||^2 with the avg to-sketch scale (``--oja_clip``)
OJA_CLIP = 0.05


class OjaSON(FeatureTable, Learner):
    """Sparse Oja-SON with diagonal pre-scaling (SON Alg. 4, 5, 11; App. G; Sec. 5.2)."""

    name = "oja-son"
    compiled_kernels = ((_kernels, "son_run"),)
    PARAMS = (
        Param("sketch_size", int, 10,
              "Oja-SON sketch size m (0 = scale-invariant online gradient descent).",
              short="-m", structural=True, low=0, high=MAX_SKETCH_SIZE,
              why="m x m matrices, m + 8 floats per feature seen and O(m^2) work per example"),
        Param("alpha", float, 1.0,
              "Oja-SON regulariser alpha: 1/alpha is the step size (A_t = alpha I + S^T S).",
              low=0, low_open=True),
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
              structural=True, low=0, high=1, low_open=True),
        Param("step_power", float, 0.0,
              "Oja-SON: step multiplier eta_t = t^p on the Newton step (u <- w - eta_t A_t^-1 g); 0 = the "
              "paper. 0.5 helps on dense stationary data with the diagonal pre-scaling, hurts on sparse data."),
        Param("oja_gamma", float, 1.0,
              "Oja-SON: Oja step schedule Gamma_t = oja_gamma / (t + oja_t0).", low=0, low_open=True),
        Param("oja_t0", float, 0.0,
              "Oja-SON: offset t0 of the Oja step schedule Gamma_t = oja_gamma / (t + t0).", low=0),
        Param("projection_c", float, 0.0,
              "Oja-SON: projection constant C of SON Alg. 1 (|w^T x| <= C); 0 = no projection.", low=0),
        Param("sigma_eta", float, None,
              "Oja-SON: to-sketch scale sigma+eta, g^ = sqrt(sigma+eta) g (default 1/8 = paper's sigma for squared "
              "loss; 1/2 with --diag_frame precond, where it is the weight of the sketched curvature against "
              "the AdaGrad diagonal).", low=0),
        Param("no_invariant", bool, False,
              "Oja-SON: take the paper's plain Newton step u <- w - A^-1 g instead of the importance-invariant "
              "one (default), which moves the prediction as many infinitesimal steps would and never past "
              "the label or margin, so that alpha = 1 is safe on any feature scale."),
        Param("oja_clip", float, None,
              "Oja-SON: cap on Oja's step Gamma_t ||g^||^2 on the sketch (larger steps make V jump towards the "
              "latest gradient while Lambda keeps the old eigenvalues); default 0.05 with the avg to-sketch scale, "
              "none (0) with the paper's.", low=0,
              absent=0.0),  # models saved before the cap continue uncapped (tests/data/oja_son_v1)
        Param("diag_rule", ("auto", "nag", "vw"), "auto",
              "Oja-SON --diag_frame precond: the rule of the diagonal (off-sketch) step. vw = VW's normalized "
              "adaptive rule (accumulator from 0, the weight rescaled by s_old / s_new when a feature's scale "
              "grows, the step times sqrt(sum h / sum h ||x / s||^2)): with --sketch_size 0 and --alpha 2 it is "
              "VW's default learner (-l 0.5), but s grows before the prediction (NAG) and repeated indices are "
              "summed. nag = max-normalised AdaGrad from D = 0.1 (the default before "
              "2026-11-26). auto = vw with --diag_frame precond.", structural=True,
              absent="nag"),  # models saved before it continue as they were trained
        Param("max_cond", float, 1e4,
              "Oja-SON: re-materialise the sketch when the bound on cond(Z) exceeds this.", low=1,
              finite=False),
        Param("no_clip", bool, False,
              "Squared loss: report the raw prediction and take the derivative at it, not at the prediction "
              "clipped to the range of the labels learned so far (the default, as VW and its OjaNewton clip). "
              "Part of the paper's exact algorithm."),
    )

    def _init_salt(self) -> np.uint64:
        """``--random_seed`` as the kernel's salt (0 for seed 0: the first m features learned from)."""
        seed = int(self.hyper.get("random_seed") or 0)
        if seed == 0:
            return np.uint64(0)
        x = (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & (2**64 - 1)
        return np.uint64(x or 1)

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
        dr = self.hyper["diag_rule"]
        if dr not in ("auto", "nag", "vw"):
            raise ValueError(f"--diag_rule must be auto, nag or vw, got {dr!r}")
        if dr != "auto" and not self.precond:
            raise ValueError(f"--diag_rule {dr} needs the diagonal pre-scaling in --diag_frame precond")
        self.vw_rule = dr == "vw" or (dr == "auto" and self.precond)
        self.ncol = m + N_COLS_EXTRA + (4 if self.precond else 0)  # precond: c, snapshot of w~, s2, frame f
        self._alloc_table(MIN_CAP)
        self.ints = np.zeros(5, np.int64)  # t, n_assigned, n_occupied, n_remat, t at last remat
        # bound on cond(Z) (||F||_F ||Z||_F = m at start), then the label range learned so far
        self.flt = np.array([float(m), 0.0, 0.0] + [0.0, 0.0] * self.vw_rule)
        self.F = _eye(m)
        self.K = _eye(m)
        self.lam = np.zeros(m)
        self.b = np.zeros(m)
        self.assigned = np.full(m, -1, np.int64)
        self._apply_hyper()

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
        oc = h["oja_clip"]
        self.oja_clip = float(oc if oc is not None else (OJA_CLIP if self.sketch_avg else 0.0))
        if not self.oja_clip >= 0:
            raise ValueError(f"--oja_clip must be >= 0, got {self.oja_clip}")
        if not self.alpha > 0:
            raise ValueError(f"--alpha must be > 0, got {self.alpha}")
        if not self.sigma_eta >= 0:
            raise ValueError(f"--sigma_eta must be >= 0, got {self.sigma_eta}")
        if not (self.gamma_c > 0 and self.gamma_c / (1.0 + self.gamma_t0) <= 1.0):
            raise ValueError("--oja_gamma / (1 + --oja_t0) must be in (0, 1] (Gamma_t is a step in [0, 1])")
        if not self.proj_c >= 0:
            raise ValueError(f"--projection_c must be >= 0, got {self.proj_c}")

    # -- learning -----------------------------------------------------------------------
    def _run(self, batch, learn):
        n = batch.n
        pred = np.empty(n)
        loss = np.empty(n)
        if n == 0:
            return pred, loss
        offsets, indices, values, labels, weights = kernel_batch(batch)
        maxs = max(int(np.max(offsets[1:] - offsets[:-1])), 1)
        scratch = _kernels.SonScratch(np.empty(maxs, np.int64), np.empty(maxs), np.empty(maxs))
        hyper = _kernels.SonHyper(self.mask, self.loss.code, self.alpha, self.sigma_eta, self.gamma_c,
                                  self.gamma_t0, self.proj_c, self.diag, self.diag_vw, self.max_cond,
                                  self.sketch_avg, self.step_power, self.precond, self.dpow, self.invariant,
                                  self.oja_clip, self.vw_rule, not self.hyper["no_clip"], self._init_salt())
        fields = _kernels.SonState._fields
        start = 0
        while True:
            state = _kernels.SonState(*(getattr(self, f) for f in fields))
            nxt, learned = _kernels.son_run(offsets, indices, values, labels, weights, start, bool(learn), state,
                                            hyper, scratch, pred, loss)
            self.examples_learned += int(learned)
            if nxt >= n:
                break
            self._grow(int(self.ints[2]) + int(offsets[nxt + 1] - offsets[nxt]))
            start = nxt
        return pred, loss

    # -- introspection (tests, benchmarks, --audit) ------------------------------------------
    def audit_columns(self, hashes):
        """``[w]``: the effective weight ``u_bar + Z^T b`` of each feature (in the pre-scaled
        coordinates the learner keeps; :meth:`weights_dense`)."""
        return [self.weights_dense(np.asarray(hashes, np.int64) & self.mask)]

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
        _kernels.table_lookup_rows(self.keys, self.tab, keys, self.shift, out)
        return out

    def rematerialize(self):
        """Re-materialise the sketch now (w and V unchanged up to rounding)."""
        if self.m > 0:
            _kernels.rematerialize(self.keys, self.tab, self.F, self.K, self.b, int(self.ints[1]))
            self.flt[0] = _kernels.estimate_cond(self.F, self.K)
            self.ints[3] += 1
            self.ints[4] = self.ints[0]

    @property
    def n_remat(self) -> int:
        return int(self.ints[3])

    # -- state ----------------------------------------------------------------------------
    def _arrays(self):
        order = self._sorted_slots()
        return {"keys": self.keys[order], "rows": self.tab[order], **{f: getattr(self, f) for f in _SMALL_STATE}}

    @classmethod
    def _m(cls, hyper) -> int:
        m = hyper.get("sketch_size")
        m = cls.default_hyper("sketch_size") if m is None else int(m)
        require(m >= 0, f"sketch_size {m} is negative")
        return m

    @classmethod
    def _precond(cls, hyper) -> bool:
        get = lambda k: cls.default_hyper(k) if hyper.get(k) is None else hyper[k]
        return not get("no_diag") and get("diag_frame") == "precond"

    @classmethod
    def saved_shapes(cls, hyper):
        m = cls._m(hyper)
        dr = hyper.get("diag_rule")
        nf = 5 if dr == "vw" or (dr in (None, "auto") and cls._precond(hyper)) else 3
        return {"ints": ((5,), np.int64), "flt": ((nf,), np.float64), "F": ((m, m), np.float64),
                "K": ((m, m), np.float64), "lam": ((m,), np.float64), "b": ((m,), np.float64),
                "assigned": ((m,), np.int64)}

    @classmethod
    def build_bytes(cls, hyper):
        """The two ``m x m`` identities (a page a row) and the m-vectors."""
        m = cls._m(hyper)
        return 2 * min(m * m * 8, m * 4096) + 8 * m * 8

    def _load_arrays(self, arrays):
        """Load the saved state, checking what the kernels index with: the counters (examples,
        sketch rows assigned within 0..m, stored features = the number of keys), the keys
        (distinct, ascending, within the mask: the hash table is rebuilt from them) and the rows
        (one per key, this model's columns)."""
        m = self.m
        for k, (shape, dt) in self.saved_shapes(self.hyper).items():
            require(k in arrays, f"array {k} is missing")
            setattr(self, k, adopt(k, arrays[k], shape, dt))
        for k in ("keys", "rows"):
            require(k in arrays, f"array {k} is missing")
        keys, rows = arrays["keys"], arrays["rows"]
        require(np.dtype(keys.dtype) == np.int64 and np.dtype(rows.dtype) == np.float64
                and len(keys.shape) == 1 and tuple(rows.shape) == (keys.shape[0], self.ncol),
                f"arrays keys/rows do not fit this model (shapes/dtypes {tuple(keys.shape)}/{keys.dtype}, "
                f"{tuple(rows.shape)}/{rows.dtype}; {self.ncol} columns)")
        keys = adopt("keys", keys)
        rows = adopt("rows", rows)
        require(not len(keys) or (keys[0] >= 0 and keys[-1] <= self.mask and (np.diff(keys) > 0).all()),
                f"array keys: not distinct ascending features within 0..{self.mask}")
        t, na, nocc, nremat, tlast = (int(x) for x in self.ints)
        require(nocc == len(keys), "array keys: count differs from the stored feature count")
        require(t >= 0 and 0 <= na <= m and nremat >= 0 and 0 <= tlast <= t,
                f"array ints: counters {list(self.ints)} out of range (sketch size {m})")
        a = self.assigned
        require(((a[:na] >= 0) & (a[:na] <= self.mask)).all() and (a[na:] == -1).all(),
                "array assigned: not the features of the assigned sketch rows, then -1")
        require(self.flt[0] >= 0 and self.flt[1] <= self.flt[2], "array flt: a negative bound or label range")
        require(not self.vw_rule or (self.flt[3] >= 0 and self.flt[4] >= 0), "array flt: a negative sum of VW's "
                "normaliser")
        self._load_table(keys, rows)


def _eye(m: int) -> np.ndarray:
    """``np.eye(m)`` whose zero pages stay non-resident (numpy's huge pages would make a large
    identity fully resident: 1 GB at m = 12,000)."""
    out = lazy_zeros((m, m), np.float64)
    out[np.arange(m), np.arange(m)] = 1.0
    return out
