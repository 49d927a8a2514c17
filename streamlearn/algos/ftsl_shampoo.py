"""FTSL-Shampoo for the multiclass weight matrix: ``--algo ftsl-shampoo --oaa K`` (softmax over K
classes).

Yang et al. 2025, *Frequent Directions AdaGrad* (FTSL-Shampoo, Alg. 5 with the general Frequent
Directions of Alg. 4, App. A.6): the primal-dual Shampoo (Gupta, Koren & Singer 2018) of softmax
regression's K x d weight matrix W, whose left (K x K) and right (d x d) preconditioners are each
Frequent-Directions sketched:

    W_{t+1} = -eta L~_t^{-1/4} Gbar_t R~_t^{-1/4}     (Yang Eq. 3),
    L~_t = B^L B^L^T + (eps + rho^L_{1:t}) I,   R~_t = B^R B^R^T + (eps + rho^R_{1:t}) I,

with Gbar_t the sum of the gradients ``G = h q a^T`` (``q = p - e_y``, p the softmax of the
scores ``s = W x``; h the importance weight), B^L the FD sketch (tau_L columns) of the sum of ``G
G^T``, B^R that (tau_R columns) of the sum of ``G^T G``, and rho the sums of their shrinks. eps
sits inside the roots (Yang Table 3 / Thm. 4.4). Full-size sketches (tau_L >= K, tau_R >= d) give
full primal-dual Shampoo.

The rank-one gradient makes each sketch step the SVD of a thin (tau + 1)-column matrix; the right
side is kept sparse in d as SON App. F's basis ``V = F Z`` (Luo et al. 2016) with Z stored per
feature seen, so an example costs O(s rmax + K rmax + tau^3) (s features) and nothing is O(2^b);
see :mod:`streamlearn.algos._ftsl_shampoo_kernels`. The dense reference is
``tests/naive_sketched_adagrad.py`` (``FTSLShampoo``, ``Shampoo``).

As the softmax learner (:mod:`streamlearn.algos.softmax`): ``pred`` is the class id (argmax, ties
to the lowest), ``loss`` the cross-entropy, ``--probabilities`` gives the softmax; features are
hashed as VW's ``--oaa K`` (``-b`` minus ``ceil(log2 K)`` bits per class).
"""
from __future__ import annotations

import numpy as np

from ..kernels import kernel_batch, lazy
from .base import Learner, Param, require
from .feature_table import MIN_CAP, FeatureTable
from .softmax import MULTICLASS_LOGISTIC, SoftmaxClasses

__all__ = ["FTSLShampoo"]

_kernels = lazy("streamlearn.algos._ftsl_shampoo_kernels")

MAX_SKETCH = 256
N_INTS = 9  # = _ftsl_shampoo_kernels.N_INTS (not imported: --help must not load numba)
#: the re-bases the history holds at most (it is emptied at max(16, sqrt(features seen / 5)))
HIST_MAX = 256
_SMALL = ("F", "sig2R", "Q", "Kz", "UL", "sig2L", "ints", "flt")


class FTSLShampoo(SoftmaxClasses, FeatureTable, Learner):
    """FTSL-Shampoo (Yang et al. 2025 Alg. 5) of the K x d softmax weight matrix, sparse in d."""

    name = "ftsl-shampoo"
    multiclass = True
    native_multiclass = True
    multiclass_only = True
    losses = ()  # the softmax cross-entropy only (--loss_function multiclass_logistic, implied)
    compiled_kernels = ((_kernels, "shampoo_run"),)
    PARAMS = (
        Param("learning_rate", float, 1.0, "FTSL-Shampoo step eta (W = -eta L~^-1/4 Gbar R~^-1/4).", short="-l",
              low=0, low_open=True),
        Param("sketch_size", int, 10, "FTSL-Shampoo sketch size tau of both sides (tau columns, tau - 1 "
              "directions kept after a shrink; the left side needs at most K).", short="-m", structural=True,
              low=1, high=MAX_SKETCH, why="(tau + 1)^3 work and 3 tau + 1 floats per feature seen"),
        Param("left_sketch_size", int, None, "FTSL-Shampoo: the left (K x K) sketch size (default --sketch_size; "
              "K or more is full Shampoo on that side).", structural=True, low=1, high=MAX_SKETCH),
        Param("right_sketch_size", int, None, "FTSL-Shampoo: the right (d x d) sketch size (default "
              "--sketch_size).", structural=True, low=1, high=MAX_SKETCH,
              why="(tau + 1)^3 work and 3 tau + 1 floats per feature seen"),
        Param("shampoo_eps", float, 1e-4, "FTSL-Shampoo eps inside the roots: L~ = B B^T + (eps + rho) I, "
              "likewise R~.", low=0, low_open=True),
    )

    def __init__(self, **hyper):
        hyper = dict(hyper)
        if hyper.get("loss_function") in (None, MULTICLASS_LOGISTIC.name):
            hyper["loss_function"] = "logistic"  # placeholder for the base class; the loss is the softmax's
        elif hyper.get("loss_function") is not None:
            raise ValueError(f"--algo {self.name} is softmax regression (--loss_function "
                             f"{MULTICLASS_LOGISTIC.name}); got --loss_function {hyper['loss_function']}")
        K = hyper.get("oaa")
        if K is None or int(K) < 2:
            raise ValueError(f"--algo {self.name} needs --oaa K with K >= 2 (it is a K-class softmax), got {K}")
        self.losses = ("logistic",)
        super().__init__(**hyper)
        self._init_classes(K)
        K = self.n_classes
        self.tau_l, self.tau_r = self._taus(self.hyper)
        self.rmax = 3 * self.tau_r + 1
        self._alloc_table(MIN_CAP)
        self.F = np.zeros((self.tau_r, self.rmax))
        self.sig2R = np.zeros(self.tau_r)
        self.Q = np.zeros((K, self.rmax))
        self.Kz = np.zeros((self.rmax, self.rmax))
        self.S = np.zeros((HIST_MAX, self.tau_r, self.rmax))
        self.UL = np.zeros((K, self.tau_l))
        self.sig2L = np.zeros(self.tau_l)
        self.ints = np.zeros(N_INTS, np.int64)
        self.flt = np.zeros(2)  # rho^L, rho^R
        self.probabilities = False
        self.last_probabilities = None
        self._apply_hyper()

    @staticmethod
    def _taus(hyper):
        K = int(hyper["oaa"])
        tau = int(hyper.get("sketch_size") or 10)
        tl = hyper.get("left_sketch_size")
        tr = hyper.get("right_sketch_size")
        tl = int(tl) if tl is not None else tau
        tr = int(tr) if tr is not None else tau
        return min(tl, K), tr

    def _apply_hyper(self):
        self.eta = float(self.hyper["learning_rate"])
        self.eps = float(self.hyper["shampoo_eps"])

    @property
    def ncol(self) -> int:
        """The per-feature table's row: Gbar (K), Z's column (rmax), the re-base stamp."""
        return self.n_classes + self.rmax + 1

    def _run(self, batch, learn):
        bad = self.bad_labels(batch.labels)
        if bad.any():
            raise ValueError(self.label_problem(batch.labels[np.flatnonzero(bad)[0]]))
        n = batch.n
        pred = np.empty(n)
        loss = np.empty(n)
        probs = np.empty((n if self.probabilities else 0, self.n_classes))
        if n:
            if learn:
                self._grow(int(self.ints[0]) + len(batch.indices))
            learned = _kernels.shampoo_run(
                *kernel_batch(batch), self.row_mask, bool(learn), self.keys, self.tab,
                self.shift, self.F, self.sig2R, self.Q, self.Kz, self.S, self.UL, self.sig2L, self.ints, self.flt, self.eta,
                self.eps, self.tau_l, self.tau_r, pred, loss, probs)
            self.examples_learned += int(learned)
        self.last_probabilities = probs if self.probabilities else None
        return pred, loss

    # -- introspection (tests, benchmarks) -------------------------------------------------------
    def weights_dense(self, keys):
        """The weight matrix W (K x len(keys)) at the given masked feature keys (unseen: 0)."""
        keys = np.asarray(keys, np.int64)
        K = self.n_classes
        ell, r = int(self.ints[1]), int(self.ints[2])
        pos = {int(k): s for s, k in enumerate(self.keys) if k >= 0}
        Gb = np.zeros((K, len(keys)))
        Z = np.zeros((self.rmax, len(keys)))
        for i, k in enumerate(keys):
            s = pos.get(int(k))
            if s is not None:
                Gb[:, i] = self.tab[s, :K]
                Z[:, i] = self._column_now(s)
        V = self.F[:ell, :r] @ Z[:r]
        cR = self.eps + self.flt[1]
        dR = (self.sig2R[:ell] + cR) ** -0.25 - cR ** -0.25
        P = self.Q[:, :r] @ self.F[:ell, :r].T  # Gbar V^T over every feature seen
        Y = cR ** -0.25 * Gb + (P * dR) @ V
        ellL = int(self.ints[3])
        cL = self.eps + self.flt[0]
        U = self.UL[:, :ellL]
        dL = (self.sig2L[:ellL] + cL) ** -0.25 - cL ** -0.25
        return -self.eta * (cL ** -0.25 * Y + U @ (dL[:, None] * (U.T @ Y)))

    def _column_now(self, s):
        """Feature slot s's column of Z in the current representation (the kernel's _current)."""
        K, rmax = self.n_classes, self.rmax
        z = self.tab[s, K:K + rmax]
        st = int(self.tab[s, K + rmax])
        if st == int(self.ints[4]):
            return z.copy()
        out = np.zeros(rmax)
        rb = int(self.ints[7])
        out[:rb] = self.S[st - int(self.ints[6])][:rb] @ z
        return out

    @property
    def n_rebase(self) -> int:
        return int(self.ints[4])

    def extra_summary(self) -> dict:
        return {"oaa_classes": self.n_classes, "features_seen": int(self.ints[0]), "rebases": self.n_rebase,
                "rebases_on_every_feature": int(self.ints[8]),
                "right_directions": int(self.ints[1]), "left_directions": int(self.ints[3])}

    # -- state ---------------------------------------------------------------------------------
    def _arrays(self):
        order = self._sorted_slots()
        G = int(self.ints[4] - self.ints[6])  # the history's re-bases
        return {"keys": self.keys[order], "rows": self.tab[order], "S": self.S[:G],
                **{f: getattr(self, f) for f in _SMALL}}

    @classmethod
    def saved_shapes(cls, hyper):
        K = hyper.get("oaa")
        require(isinstance(K, int) and K >= 2, f"oaa {K!r} is not a class count >= 2")
        tl, tr = cls._taus(hyper)
        rmax = 3 * tr + 1
        return {"F": ((tr, rmax), np.float64), "sig2R": ((tr,), np.float64), "Q": ((K, rmax), np.float64),
                "Kz": ((rmax, rmax), np.float64),
                "UL": ((K, tl), np.float64), "sig2L": ((tl,), np.float64), "ints": ((N_INTS,), np.int64),
                "flt": ((2,), np.float64)}

    @classmethod
    def build_bytes(cls, hyper):
        return 8 * MIN_CAP * (int(hyper.get("oaa") or 2) + 3 * cls._taus(hyper)[1] + 2)

    def _load_arrays(self, arrays):
        """The saved state, checked where the kernel indexes with it: the counters (directions within
        the sketch sizes, Z's rows within rmax, the history within its bound), the keys (distinct,
        ascending, within the mask, one row of K + rmax + 1 floats each, whose re-base stamp lies in
        the history), every float finite and the sketches' eigenvalues and shrinks nonnegative."""
        for f in _SMALL + ("keys", "rows", "S"):
            require(f in arrays, f"array {f} is missing")
        ints = np.asarray(arrays["ints"])
        keys = np.asarray(arrays["keys"])
        rows = np.asarray(arrays["rows"])
        S = np.asarray(arrays["S"])
        K, rmax = self.n_classes, self.rmax
        require(keys.ndim == 1 and keys.dtype.kind in "iu", "array keys is not a vector of integers")
        require(rows.shape == (len(keys), K + rmax + 1), f"array rows has shape {rows.shape}, "
                f"expected ({len(keys)}, {K + rmax + 1})")
        require(bool(np.all((keys >= 0) & (keys <= self.row_mask))), "array keys: a key outside the mask")
        require(bool(np.all(np.diff(keys) > 0)), "array keys is not strictly ascending")
        require(int(ints[0]) == len(keys), "ints[0] is not the number of keys")
        require(0 <= int(ints[1]) <= self.tau_r and int(ints[1]) <= int(ints[2]) <= rmax,
                "ints: right directions or Z rows out of range")
        require(0 <= int(ints[3]) <= self.tau_l, "ints: left directions out of range")
        require(bool(np.all(ints[4:] >= 0)), "ints: a negative counter")
        G = int(ints[4]) - int(ints[6])
        require(0 <= G < HIST_MAX and int(ints[7]) <= min(self.tau_r, rmax), "ints: the re-base history is out of range")
        require(S.shape == (G, self.tau_r, rmax), f"array S has shape {S.shape}, expected ({G}, {self.tau_r}, {rmax})")
        for f in _SMALL + ("rows", "S"):
            a = np.asarray(arrays[f])
            require(a.dtype.kind != "f" or bool(np.all(np.isfinite(a))), f"array {f}: a non-finite entry")
        for f in ("sig2R", "sig2L", "flt"):
            require(bool(np.all(np.asarray(arrays[f]) >= 0)), f"array {f}: a negative entry")
        if len(keys):
            st = rows[:, -1]
            require(bool(np.all((st == np.round(st)) & (st >= ints[6]) & (st <= ints[4]))),
                    "array rows: a re-base stamp outside the history")
        for f in _SMALL:
            setattr(self, f, np.array(arrays[f], dtype=getattr(self, f).dtype))
        self.S = np.zeros((HIST_MAX, self.tau_r, rmax))
        self.S[:G] = S
        self.ints[0] = 0
        self._alloc_table(MIN_CAP)
        self._grow(2 * len(keys))
        _kernels.rehash(np.asarray(keys, np.int64), np.ascontiguousarray(rows, np.float64), self.keys, self.tab,
                        self.shift)
        self.ints[0] = len(keys)

    def state_dict(self):
        meta, arrays = super().state_dict()
        return meta, arrays
