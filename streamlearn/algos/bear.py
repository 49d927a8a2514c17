"""BEAR (``--algo bear``): sketched online L-BFGS for feature selection in sublinear memory.

Aghazadeh, Gupta, DeWeese, Koyejo & Ramchandran, "BEAR: Sketching BFGS Algorithm for
Ultra-High Dimensional Feature Selection in Sublinear Memory" (Alg. 1-2). The weights live in
a Count Sketch and the top-k heap holds the selected features (see
:mod:`streamlearn.algos.sketch` for the shared plumbing and the minibatch driver). Each minibatch of ``--minibatch``
labeled examples is one iteration of Alg. 2:

1-3. active set A_t; QUERY the weights of A_t intersect top-k (others 0);
4.   mean gradient on A_t;
5.   oLBFGS direction (Alg. 1) from the last ``--history`` pairs, kept in a ring buffer of
     sparse (s, r) vectors, each on its own support (the oldest is overwritten);
6.   ADD ``-eta z`` on A_t;
7,10. re-QUERY A_t and offer it to the heap;
8-9. ``s`` = change of the weights the model uses (the QUERYed members' weights before and
     after, NOTES_BEAR item 2: an exact secant pair), ``r`` = gradient change on the same
     minibatch; a relative curvature guard drops a pair unless ``s.r > eps |s| |r|``.

With a sketch without collisions and ``k`` at least the number of features this is exactly
minibatch oLBFGS (tested against a dense NumPy reference). The step is constant or
``eta * t0 / (t0 + t)``. With ``--oaa K`` the K class weight vectors form one parameter
vector for one oLBFGS (softmax couples the classes); each class has its own sketch and heap.
With K <= 64, MISSION's class membership map (:mod:`._mission_kernels`) gives line 3 one look-up
per feature instead of K (derived from the heaps, rebuilt on load, never saved). The two-loop
works on the union of the minibatch's features and the stored pairs' features, one look-up per
feature, not per coordinate (each pair keeps its entries' class and feature index, derived from
its keys, never saved). Neither changes a result.

``--initial_scaling adagrad`` (not in the paper): Alg. 1's initial matrix ``gamma I`` becomes
``gamma D``, ``D = diag(1 / sqrt(A))`` on the minibatch's coordinates and 0 off them, with ``A``
AdaGrad's sums of squared gradients (Duchi et al. 2011) in a count-min sketch of the weight
sketch's buckets (as MISSION ``--step_rule adagrad``), ``gamma = min(1, s.r / r.D r)`` of the
newest pair and the damping ``r + delta D^-1 s``. A positive semi-definite H0 keeps every BFGS
update positive semi-definite, so the direction stays a descent direction. Why: with
one-example minibatches on text Alg. 1 returns ``gamma g`` (one global step per iteration;
``benchmarks/bear_oaa_reference.py``).
"""
from __future__ import annotations

import math

import numpy as np

from ..kernels import lazy
from .base import Param, adopt, load_budget, require
from .sketch import MINIBATCH_PARAM, SKETCH_PARAMS, SketchLearner

__all__ = ["Bear"]

_kernels = lazy("streamlearn.algos._bear_kernels")


class Bear(SketchLearner):
    """BEAR: minibatch oLBFGS on Count-Sketched weights with a top-k heap."""

    name = "bear"
    PARAMS = SKETCH_PARAMS + (
        MINIBATCH_PARAM,
        Param("history", int, 5, "bear: number tau of (s, r) pairs kept for oLBFGS.",
              structural=True, low=1, high=1024, why="each pair holds two vectors of the top-k size"),
        Param("curvature_eps", float, 1e-8,
              "bear: keep a pair (s, r) only if s.r > eps |s| |r| (relative curvature guard).", low=0),
        Param("curvature_damping", float, None,
              "bear: store r + delta s instead of r (curvature at least delta; bounds the "
              "quasi-Newton step where the loss is flat, e.g. saturated logistic). "
              "Default: 0 for squared loss, 0.01 for logistic, hinge and --oaa "
              "(benchmarks/bear_defaults.py), 1 with --initial_scaling adagrad under --oaa K on unit-norm "
              "examples (benchmarks/bear_multiclass.py). With --initial_scaling adagrad: r + delta D^-1 s.", low=0),
        Param("initial_scaling", ("auto", "gamma", "adagrad"), "auto",
              "bear: the two-loop's initial matrix H0. gamma: s.r / r.r of the newest pair times I (Alg. 1); "
              "adagrad: gamma D with D = diag(1 / sqrt(sum of squared gradients)) on the minibatch's features "
              "(the sums in a count-min sketch of the weight sketch's shape: twice the memory), "
              "gamma = min(1, s.r / r.D r) (not in the paper; benchmarks/bear_multiclass.py). auto: adagrad with "
              "--oaa K on unit-norm examples (its --learning_rate defaults to 1 there; gamma for models saved "
              "before 2026-11-28), gamma otherwise.",
              structural=True, absent="gamma"),
    )
    default_lr = 0.1
    default_minibatch = 10
    default_minibatch_unit_oaa = 1  # --oaa K on unit-norm examples: one pass of b = 10 is too few steps
    #: version 1: --oaa K on unit-norm examples ran Alg. 1's gamma I with -l 0.1, --curvature_damping
    #: 0.01 and --top_k 1000 (models saved before record no version); 2 (2026-11-28): --initial_scaling
    #: auto is adagrad there, with -l 1, --curvature_damping 1 and --top_k 6000 per class
    #: (benchmarks/bear_multiclass.py: the one setting within 5 points of VW on letter, satimage and news20)
    #: 3 (2026-11-27): --example_norm auto is unit for binary runs too (raw counts blew binary BEAR up:
    #: benchmarks/bear_defaults.py --example_norm)
    STEP_DEFAULTS = 3
    unit_binary_from = 3
    default_top_k_oaa = 6000
    default_lr_adagrad_unit_oaa = 1.0
    default_damping_adagrad_unit_oaa = 1.0
    kernels = _kernels
    run_kernel = "bear_run"
    compiled_kernels = ((_kernels, "bear_run"),)
    same_set = True  # secant pair on the top-k set before the heap update (see _bear_kernels)
    # Experimental, not Alg. 2 (benchmarks only): r restricted to the top-k set s lives on, i.e.
    # the secant pair of F(beta) = f(P_topk beta), the function the model computes. Alg. 2's
    # r = g(beta_t+1) - g(beta_t) on all of A_t also has components off the top-k, which make
    # the two-loop's gamma = s.r / r.r small: that shrinks the steps taken off the top-k.
    secant_topk = False

    def __init__(self, **hyper):
        super().__init__(**hyper)
        tau = int(self.hyper["history"])
        if tau < 1:
            raise ValueError("--history must be at least 1")
        self.tau = tau
        cap = 16
        self.rs_keys = np.zeros((tau, cap), np.int64)
        self.rs_vals = np.zeros((tau, cap), np.float64)
        self.rs_len = np.zeros(tau, np.int64)
        self.rr_keys = np.zeros((tau, cap), np.int64)
        self.rr_vals = np.zeros((tau, cap), np.float64)
        self.rr_len = np.zeros(tau, np.int64)
        self.ring_sr = np.zeros(tau, np.float64)
        self.ring_rr = np.zeros(tau, np.float64)
        self.ring_rdr = np.zeros(tau, np.float64)
        self._unindexed_ring()
        self._stale_membership()

    def _unindexed_ring(self) -> None:
        """The ring's derived arrays (each pair's entry codes and features, :class:`Ring`) for the
        ring's capacity, every pair marked not indexed: the run kernel indexes a pair from its keys
        at its first use. Never saved."""
        tau, cap = self.rs_keys.shape
        self.rs_code = np.zeros((tau, cap), np.int64)
        self.rr_code = np.zeros((tau, cap), np.int64)
        self.pfeat = np.zeros((tau, 2 * cap), np.int64)
        self.pnf = np.full(tau, -1, np.int64)

    def _apply_hyper(self):
        super()._apply_hyper()  # self.unit, the step and minibatch defaults
        # --oaa K on unit-norm rows under the step defaults of version 2 (a loaded model: its own version)
        new_oaa = self.multiclass and self.unit and self.step_defaults >= 2
        scaling = self.hyper.get("initial_scaling") or "auto"
        self.h0 = 1 if scaling == "adagrad" or (scaling == "auto" and new_oaa) else 0
        if self.h0 and new_oaa and self.hyper["learning_rate"] is None:
            self.eta = self.default_lr_adagrad_unit_oaa
        # adagrad: gamma <= 1 (never a larger initial step than AdaGrad's): uncapped, a first pair on
        # few top-k members gave gamma ~ 6 and blew news20 up (error 0.95; benchmarks/bear_multiclass.py)
        self.gmax = 1.0 if self.h0 else math.inf
        self._ensure_sq_sums(bool(self.h0))
        self.eps = float(self.hyper["curvature_eps"])
        if not self.eps >= 0:
            raise ValueError("--curvature_eps must be >= 0")
        d = self.hyper["curvature_damping"]
        if d is None:
            d = self.default_damping_adagrad_unit_oaa if self.h0 and new_oaa else (0.0 if self.loss_code == 0 else 0.01)
        self.damping = float(d)
        if self.damping < 0:
            raise ValueError("--curvature_damping must be >= 0")

    def step_settings(self) -> dict:
        return {**super().step_settings(), "--initial_scaling": "adagrad" if self.h0 else "gamma",
                "--curvature_damping": self.damping}

    def _hyper_tuple(self):
        return _kernels.BearHyper(self.loss_code, self.eta, self.schedule, self.t0, self.b, self.clip, self.const_key,
                                  self.eps, self.damping, self.same_set, self.secant_topk, self.h0,
                                  self.gmax)

    def _extra_state(self):
        return _kernels.Ring(*(getattr(self, f) for f in _kernels.Ring._fields))

    def _set_extra_state(self, ring):
        for f, a in zip(ring._fields, ring):
            setattr(self, f, a)

    def extra_summary(self) -> dict:
        d = super().extra_summary()
        d["curvature_pairs_rejected"] = int(self.counters[3])
        return d

    def _arrays(self):
        a = super()._arrays()
        a.update(self._saved_ring())
        if self.h0:  # (K, R, W) as the weight sketch; r.D r of the pairs
            a["ring_rdr"] = self.ring_rdr
            self._sq_sums_arrays(a)
        return a

    def _saved_ring(self) -> dict:
        """The oLBFGS ring as a state (and a model file) holds it: its capacity cut to the longest pair stored (at
        least 1), and the entries past each pair's length, left there by longer pairs that the ring has dropped,
        zero. In memory the ring keeps the largest pair it ever held (on 20 Newsgroups ``--oaa 20``, 214,000
        entries of which the last pairs use about 3,100: ~20 MB of a 115 MB model file). A loaded ring grows again
        as the learner needs (the same arithmetic: the two-loop reads each pair's first ``len`` entries)."""
        used = max(1, int(self.rs_len.max()), int(self.rr_len.max()))
        out = {}
        for f, n in (("rs_keys", "rs_len"), ("rs_vals", "rs_len"), ("rr_keys", "rr_len"), ("rr_vals", "rr_len")):
            x = getattr(self, f)[:, :used].copy()
            x[np.arange(used)[None, :] >= getattr(self, n)[:, None]] = 0
            out[f] = x
        out.update({f: getattr(self, f) for f in ("rs_len", "rr_len", "ring_sr", "ring_rr")})
        return out

    #: Ring's fields (kept here: no numba import to load a model); ``--initial_scaling adagrad``
    #: adds ring_rdr, acc and iacc
    _RING_FIELDS = ("rs_keys", "rs_vals", "rs_len", "rr_keys", "rr_vals", "rr_len", "ring_sr", "ring_rr")

    @classmethod
    def _tau(cls, hyper) -> int:
        tau = hyper.get("history")
        tau = 5 if tau is None else int(tau)
        require(tau >= 1, f"history {tau} is not at least 1")
        return tau

    @classmethod
    def saved_shapes(cls, hyper):
        out = super().saved_shapes(hyper)
        tau = cls._tau(hyper)
        for f, dt in (("rs_len", np.int64), ("rr_len", np.int64), ("ring_sr", np.float64), ("ring_rr", np.float64)):
            out[f] = ((tau,), dt)
        return out

    @classmethod
    def build_bytes(cls, hyper):
        return super().build_bytes(hyper) + cls._tau(hyper) * 16 * 8 * 4

    def _check_counters(self):
        head, count = int(self.counters[1]), int(self.counters[2])
        require(head < self.tau and count <= self.tau,
                f"array counters: ring head {head} / count {count} outside the history of {self.tau}")

    def _load_arrays(self, arrays):
        """The sketch state (:meth:`SketchLearner._load_arrays`), then the oLBFGS ring: four
        ``(history, cap)`` arrays of one capacity, pair lengths within it, and ``s.r``, ``r.r``
        positive for the pairs in use (the two-loop divides by them)."""
        super()._load_arrays(arrays)
        tau = self.tau
        cap = None
        for f in self._RING_FIELDS:
            require(f in arrays, f"array {f} is missing")
            a = arrays[f]
            cur = getattr(self, f)
            if cur.ndim == 2:
                cap = a.shape[1] if cap is None and len(a.shape) == 2 else cap
                budget = load_budget()
                require(cap is not None and (budget is None or tau * cap * 8 <= budget),
                        f"array {f}: a ring of capacity {cap}, far more than the file holds")
                setattr(self, f, adopt(f, a, (tau, cap), cur.dtype))
            else:
                setattr(self, f, adopt(f, a, (tau,), cur.dtype))
        require(cap >= 1, "array rs_keys: a ring of capacity 0")
        for f in ("rs_len", "rr_len"):
            require(((getattr(self, f) >= 0) & (getattr(self, f) <= cap)).all(),
                    f"array {f}: a pair length outside 0..{cap}")
        head, count = int(self.counters[1]), int(self.counters[2])
        used = (head - 1 - np.arange(count)) % tau
        require((self.ring_sr[used] > 0).all() and (self.ring_rr[used] > 0).all(),
                "arrays ring_sr / ring_rr: a stored pair without positive curvature")
        for f, n in (("rs_keys", "rs_len"), ("rr_keys", "rr_len")):  # class << 32 | hash, class < K
            keys, ln = getattr(self, f)[used], getattr(self, n)[used]
            keys = keys[np.arange(keys.shape[1]) < ln[:, None]]
            require(((keys >= 0) & ((keys >> 32) < self.kc)).all(),
                    f"array {f}: a coordinate whose class is outside 0..{self.kc - 1}")
        self._unindexed_ring()
        self._stale_membership()  # new heaps: the map is rebuilt from them
        self._load_sq_sums(arrays, bool(self.h0), "--initial_scaling adagrad")
        if not self.h0:
            require("ring_rdr" not in arrays, "array ring_rdr in a model without --initial_scaling adagrad")
            self.ring_rdr = self.ring_rr.copy()
            return
        require("ring_rdr" in arrays, "array ring_rdr is missing")
        self.ring_rdr = adopt("ring_rdr", arrays["ring_rdr"], (tau,), np.float64)
        require((self.ring_rdr[used] > 0).all(), "array ring_rdr: a stored pair without positive r.D r")
