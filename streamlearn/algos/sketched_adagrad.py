"""Sparse frequent-directions AdaGrad: S-ADA, Fast S-ADA, FTSL and FTFSL (``--algo s-ada``,
``fast-s-ada``, ``ftsl``, ``ftfsl``).

Yang, Chen, Wan & Zhang (2025), *Dimension-Free Adaptive Subgradient Methods with Frequent
Directions* (``../shared/papers/ftsl_frequent_directions_adagrad_yang2025.txt``). Full-matrix
AdaGrad's G_t = sum g g^T is replaced by G~_t = S_t + rho_{1:t} I, S_t a Frequent Directions sketch
of tau columns and rho_{1:t} the mass it discarded (SCFD):

* **S-ADA** (Feinberg et al. 2023 as Yang Sec. 4.1 states it): FD (Alg. 1), mirror descent
  x_{t+1} = x_t - eta G~_t^-1/2 g_t.
* **Fast S-ADA** (Yang Sec. 4.2 / Thm. 4.3): fast FD (Alg. 3 lines 5-11 and 14-16: a 2 tau basis,
  one shrink per tau + 1 new directions), mirror descent.
* **FTSL** (Alg. 2): FD, the primal-dual step x_{t+1} = -eta G~_t^-1/2 gbar_t (line 9, Eq. 2),
  gbar_t = sum g.
* **FTFSL** (Alg. 3): fast FD with the primal-dual step (line 13); its discarded mass enters G~ from
  the round after a shrink (line 15's rho_{t+1}).

G~_t^-1/2 is applied by App. A.1's low-rank form, h_perp^-1 I + U diag(h^-1 - h_perp^-1) U^T with
h = sqrt(lambda + rho + delta), h_perp = sqrt(rho + delta). The corrections of ``NOTES_ADA.md``
(and of the dense references in ``tests/naive_sketched_adagrad.py``, which these learners equal):

* delta sits inside the root: G~ = S + (rho + delta) I (neither Alg. 2 nor Alg. 3 has an epsilon;
  only there do the full-rank limits equal full-matrix AdaGrad); delta = 0 takes the pseudo-inverse.
* Alg. 3 line 5 is g' = V (V^T g) (printed V^T (V^T g)); line 6's test g' != g has a tolerance
  (a residual ||g - g'||^2 <= 1e-12 ||g||^2 is no new direction); line 7 is r <- r + 1; the
  eigenvalues are taken descending; a shrink lambda_tau <= 1e-16 lambda_1 counts as 0.
* App. A.2 / A.4's a_t, b_t = max{rho / (||g||^2 + rho), 1} <= 1 should read min (proofs only).

Sparse form (SON App. F's construction, as :mod:`streamlearn.algos.fd_son`): the basis is
``V = C [Z; G]`` with ``Z`` (tau - 1 rows) as columns of a per-feature hash table (features seen
only) and the buffer ``G`` of new-direction gradients as rows of a small array over the buffered
features, ``C`` small. Per example O(tau s + tau^3) for s features (the eigen-pairs of a tau x tau,
or 2 tau x 2 tau, matrix every learned example, as Alg. 1 / Alg. 3 line 11, as a rank-one update of
the previous ones: O(tau^2) for the secular equation plus one tau^3 product with a small constant); a shrink folds the buffer into Z in O(tau^2 s); when the
fold's matrix gets ill-conditioned (cond > ``--max_cond``) the representation is re-based, lazily
(a history of suffix products applied to a feature when it is next read, O(tau^2) per stale read;
every feature brought up to date, O(tau^2 n) for n features seen, once the history holds
max(16, sqrt(n / 5)) re-bases). Nothing is O(2^b). The kernels:
:mod:`streamlearn.algos._sketched_adagrad_kernels`.

Importance weight h: the gradient of h l, g = h l'(p, y) x. Losses: squared, logistic, hinge.
Options: ``--sketch_size`` tau (1..256; FD keeps tau - 1 directions, as Alg. 1), ``-l`` eta,
``--delta``, ``--max_cond``, ``--l2`` (FTSL / FTFSL only: neither paper has a regulariser; the
primal-dual step becomes regularised dual averaging (Xiao 2010; Duchi, Hazan & Singer 2011 Eq. 3) with
psi = lambda/2 ||x||^2, x_{t+1} = -eta (G~_t^1/2 + eta t lambda I)^-1 gbar_t, which App. A.1's
low-rank form applies with h + eta t lambda in place of h. The mirror forms' composite step would
shrink every stored weight, and is not built).
"""
from __future__ import annotations

import numpy as np

from ..kernels import kernel_batch, lazy
from .base import Learner, Param, adopt, require
from .feature_table import MIN_CAP, FeatureTable

__all__ = ["SketchedAdaGrad", "SADA", "FastSADA", "FTSL", "FTFSL", "MAX_SKETCH_SIZE"]

_kernels = lazy("streamlearn.algos._sketched_adagrad_kernels")
MAX_SKETCH_SIZE = 256
N_LEAD = 6  # = _kernels.N_LEAD: w_bar, gbar, scratch, mark, buffer position + 1, re-base stamp (then Z: tau - 1)
N_INTS = 12  # = _kernels.N_INTS
_SMALL = ("ints", "flt", "C", "M", "U", "lam", "b", "cb", "z", "e")


class SketchedAdaGrad(FeatureTable, Learner):
    """Base of the four learners: ``fast`` (fast FD, Alg. 3) and ``dual`` (primal-dual step)."""

    name = "s-ada"
    fast = False
    dual = False
    compiled_kernels = ((_kernels, "sada_run"),)
    PARAMS = (
        Param("sketch_size", int, 10,
              "S-ADA / Fast S-ADA / FTSL / FTFSL sketch size tau (FD keeps tau - 1 directions; the fast forms "
              "a basis of up to 2 tau).", short="-m", structural=True, low=1, high=MAX_SKETCH_SIZE,
              why="O(tau^3) work per example and tau + 5 floats per feature seen (plus 2 tau per buffered feature)"),
        Param("learning_rate", float, 1.0, "Step size eta of the sketched AdaGrad learners.", short="-l",
              low=0, low_open=True),
        Param("delta", float, 1e-6, "Sketched AdaGrad: delta inside the root, G~ = S + (rho + delta) I "
              "(0 = pseudo-inverse).", low=0),
        Param("l2", float, 0.0, "FTSL / FTFSL: l2 regulariser lambda, the primal-dual step's t lambda/2 ||x||^2 "
              "(regularised dual averaging: x = -eta (G~^1/2 + eta t lambda I)^-1 gbar); S-ADA / Fast S-ADA take "
              "only 0.", low=0),
        Param("max_cond", float, 1e6, "Sketched AdaGrad: re-base the basis representation V = C [Z; G] on "
              "every feature when the fold's condition number exceeds this (above 1e7 it acts as 1e7: a larger one is "
              "not resolved in double precision).", low=1, finite=False),
    )

    def __init__(self, **hyper):
        super().__init__(**hyper)
        tau = int(self.hyper["sketch_size"])
        self.tau = tau
        self.k = tau - 1
        self.R = 2 * tau if self.fast else tau
        self.nbmax = self.R
        self.ncol = N_LEAD + self.k  # the buffer's G columns live in gbuf
        self._alloc_table(MIN_CAP)
        self.ints = np.zeros(N_INTS, np.int64)
        self.flt = np.zeros(2)
        self.C = np.zeros((self.R, self.k + self.nbmax))
        self.M = np.zeros((self.R, self.R))
        self.U = np.eye(self.R)
        self.lam = np.zeros(self.R)
        self.b = np.zeros(self.k)
        self.cb = np.zeros(self.nbmax)
        self.z = np.zeros(self.R)
        self.e = np.zeros(self.R)
        self.bslot = np.zeros(64, np.int64)
        self.gbuf = np.zeros((64, self.nbmax))
        self.ctr = np.zeros(1, np.int64)
        self.hist = np.zeros((self._hcap(tau), tau, tau))
        self._apply_hyper()

    def _apply_hyper(self):
        h = self.hyper
        self.eta = float(h["learning_rate"])
        self.delta = float(h["delta"])
        self.max_cond = float(h["max_cond"])
        self.l2 = float(h.get("l2") or 0.0)
        if not self.l2 >= 0:
            raise ValueError(f"--l2 must be >= 0, got {self.l2}")
        if self.l2 > 0 and not self.dual:
            raise ValueError(f"--l2 is supported by ftsl and ftfsl (the primal-dual step), not by {self.name}: "
                             "its mirror step would shrink every stored weight")
        if not self.eta > 0:
            raise ValueError(f"-l/--learning_rate must be > 0, got {self.eta}")
        if not self.delta >= 0:
            raise ValueError(f"--delta must be >= 0, got {self.delta}")
        if not self.max_cond >= 1:
            raise ValueError(f"--max_cond must be >= 1, got {self.max_cond}")
        key = (self.delta, self.l2, self.eta if self.l2 > 0 else None)  # what the stored (1/h_perp, e) depend on
        old = getattr(self, "_delta_set", key)
        self._delta_set = key
        if self.dual and self.examples_learned and old != self._delta_set:
            # the stored (1/h_perp, e) of the last step follow delta (and eta l2): recompute when they change
            self._refresh_dual()

    def _refresh_dual(self):
        r = int(self.ints[2])
        lam, U = self.lam[:r], self.U[:r, :r]
        hp2 = self.flt[0] + self.delta
        c = self.eta * self.l2 * float(self.ints[0])
        if hp2 > 0 or c > 0:
            ihp = 1.0 / (np.sqrt(max(hp2, 0.0)) + c)
            coef = 1.0 / (np.sqrt(np.maximum(lam, 0.0) + hp2) + c) - ihp
        else:
            ihp = 0.0
            top = lam[0] if r else 0.0
            keep = (lam > 1e-12 * top) & (top > 0)
            coef = np.where(keep, 1.0 / np.sqrt(np.where(keep, lam, 1.0)), 0.0)
        self.flt[1] = ihp
        self.e[:] = 0.0
        self.e[:r] = U @ (coef * (U.T @ self.z[:r]))

    # -- table ------------------------------------------------------------------------------
    def _grow(self, needed):
        FeatureTable._grow(self, needed)
        if self.bslot.shape[0] < needed:
            new = max(needed, 2 * self.bslot.shape[0])
            self.bslot = np.zeros(new, np.int64)
            g = np.zeros((new, self.nbmax))
            g[:self.gbuf.shape[0]] = self.gbuf
            self.gbuf = g
        self.ints[4] = _kernels.relist_buffer(self.keys, self.tab, self.bslot)

    def _state(self):
        return _kernels.SadaState(self.keys, self.tab, self.shift, self.ints, self.flt, self.C, self.M, self.U,
                                  self.lam, self.b, self.cb, self.z, self.e, self.bslot, self.ctr, self.hist,
                                  self.gbuf)

    @staticmethod
    def _hcap(tau) -> int:
        """Re-bases the lazy history holds at most: 256, fewer for large tau (about 4 MiB)."""
        return int(min(256, max(16, 2 ** 19 // (tau * tau))))

    # -- learning -----------------------------------------------------------------------------
    def _run(self, batch, learn):
        n = batch.n
        pred = np.empty(n)
        loss = np.empty(n)
        if n == 0:
            return pred, loss
        offsets, indices, values, labels, weights = kernel_batch(batch)
        maxs = max(int(np.max(offsets[1:] - offsets[:-1])), 1)
        slot_buf = np.empty(maxs, np.int64)
        hyper = _kernels.SadaHyper(self.mask, self.loss.code, self.tau, self.fast, self.dual, self.eta, self.delta,
                                   self.max_cond, self.l2)
        start = 0
        while True:
            nxt, learned = _kernels.sada_run(offsets, indices, values, labels, weights, start, bool(learn),
                                             self._state(), hyper, slot_buf, pred, loss)
            self.examples_learned += int(learned)
            if nxt >= n:
                break
            s = int(offsets[nxt + 1] - offsets[nxt])
            self._grow(max(int(self.ints[1]), int(self.ints[4])) + s)
            start = nxt
        return pred, loss

    # -- introspection (tests, benchmarks) ------------------------------------------------------
    def _rows(self, keys):
        keys = np.asarray(keys, np.int64)
        out = np.zeros((len(keys), self.ncol + self.nbmax))
        _kernels.table_rows(self.keys, self.tab, self.shift, keys, out, self.hist, self.ints, self.k, self.gbuf)
        return out

    def weights_dense(self, keys):
        """The weights w at the given masked keys (mirror: w_bar + Z^T b + G^T cb; primal-dual:
        -eta (gbar / h_perp + V^T e))."""
        rows = self._rows(keys)
        k, nb = self.k, int(self.ints[3])
        ZG = rows[:, N_LEAD:N_LEAD + k + nb]
        if self.dual:
            r = int(self.ints[2])
            coeff = self.C[:r, :k + nb].T @ self.e[:r]
            return -self.eta * (rows[:, 1] * self.flt[1] + ZG @ coeff)
        return rows[:, 0] + ZG @ np.concatenate([self.b, self.cb[:nb]])

    def basis_dense(self, keys):
        """V = C [Z; G] restricted to the given keys (r x len(keys))."""
        rows = self._rows(keys)
        r, nb = int(self.ints[2]), int(self.ints[3])
        return self.C[:r, :self.k + nb] @ rows[:, N_LEAD:N_LEAD + self.k + nb].T

    @property
    def rho(self) -> float:
        return float(self.flt[0])

    @property
    def n_rebase(self) -> int:
        return int(self.ints[6])

    @property
    def n_flush(self) -> int:
        return int(self.ints[11])

    @property
    def n_shrink(self) -> int:
        return int(self.ints[7])

    @property
    def n_fold(self) -> int:
        return int(self.ints[8])

    def extra_summary(self) -> dict:
        return {"shrinks": self.n_shrink, "folds": self.n_fold, "rebases": self.n_rebase, "flushes": self.n_flush}

    # -- state ------------------------------------------------------------------------------------
    def _arrays(self):
        order = self._sorted_slots()
        rows = self.tab[order].copy()
        rows[:, 2:4] = 0.0  # scratch and marks
        G = int(self.ints[6] - self.ints[10])  # re-bases the lazy history holds
        return {"keys": self.keys[order], "rows": rows, "hist": self.hist[:G].copy(),
                "gbuf": self.gbuf[:int(self.ints[4])].copy(),
                **{f: getattr(self, f) for f in _SMALL}}

    @classmethod
    def _tau(cls, hyper) -> int:
        tau = hyper.get("sketch_size")
        tau = 10 if tau is None else int(tau)
        require(1 <= tau <= MAX_SKETCH_SIZE, f"sketch_size {tau} is out of range 1..{MAX_SKETCH_SIZE}")
        return tau

    @classmethod
    def saved_shapes(cls, hyper):
        tau = cls._tau(hyper)
        k, R = tau - 1, (2 * tau if cls.fast else tau)
        f = np.float64
        return {"ints": ((N_INTS,), np.int64), "flt": ((2,), f), "C": ((R, k + R), f), "M": ((R, R), f),
                "U": ((R, R), f), "lam": ((R,), f), "b": ((k,), f), "cb": ((R,), f), "z": ((R,), f), "e": ((R,), f)}

    @classmethod
    def build_bytes(cls, hyper):
        tau = cls._tau(hyper)
        return 8 * (3 * (2 * tau) ** 2 + 10 * tau + cls._hcap(tau) * tau * tau)

    def _load_arrays(self, arrays):
        """Load the saved state, checking what the kernels index with: the counters (basis rows,
        buffer rows, Z rows in use), the keys (distinct, ascending, within the mask), one row per key
        the buffer flags and the re-base stamps (within the history, which must fit its bound)."""
        for k, (shape, dt) in self.saved_shapes(self.hyper).items():
            setattr(self, k, adopt(k, arrays[k], shape, dt))
        for k in ("keys", "rows"):
            require(k in arrays, f"array {k} is missing")
        keys, rows = arrays["keys"], arrays["rows"]
        require(np.dtype(keys.dtype) == np.int64 and np.dtype(rows.dtype) == np.float64 and len(keys.shape) == 1
                and tuple(rows.shape) == (keys.shape[0], self.ncol),
                f"arrays keys/rows do not fit this model ({self.ncol} columns)")
        keys, rows = adopt("keys", keys), adopt("rows", rows)
        require(not len(keys) or (keys[0] >= 0 and keys[-1] <= self.mask and (np.diff(keys) > 0).all()),
                f"array keys: not distinct ascending features within 0..{self.mask}")
        t, occ, r, nb, nbs, nz, reb, shr, fold, defer, hbase, flushes = (int(x) for x in self.ints)
        flags = rows[:, 4] if len(keys) else np.zeros(0)  # buffer position + 1, 0 = not buffered
        require(t >= 0 and occ == len(keys) and 0 <= r <= self.R and 0 <= nb <= min(r, self.nbmax)
                and nz in (0, self.k) and nbs == int((flags != 0).sum()) and min(reb, shr, fold) >= 0
                and defer in (0, 1) and (defer == 0 or (self.fast and r == self.R))
                and 0 <= hbase <= reb and reb - hbase < self.hist.shape[0] and flushes >= 0,
                f"array ints: counters {list(self.ints)} out of range")
        pos = np.sort(flags[flags != 0])
        require(np.array_equal(pos, np.arange(1, nbs + 1)), "array rows: the buffer positions are not 1..n once each")
        require("gbuf" in arrays, "array gbuf is missing")
        gb = adopt("gbuf", arrays["gbuf"])
        require(np.dtype(gb.dtype) == np.float64 and tuple(gb.shape) == (nbs, self.nbmax),
                f"array gbuf has shape {tuple(gb.shape)}, expected ({nbs}, {self.nbmax})")
        require("hist" in arrays, "array hist is missing")
        tau, G = self.tau, reb - hbase
        hist = adopt("hist", arrays["hist"])
        require(np.dtype(hist.dtype) == np.float64 and tuple(hist.shape) == (G, tau, tau),
                f"array hist has shape {tuple(hist.shape)}, expected ({G}, {tau}, {tau})")
        stamps = rows[:, 5] if len(keys) else np.zeros(0)
        require(((stamps >= hbase) & (stamps <= reb) & (stamps == np.floor(stamps))).all(),
                "array rows: a re-base stamp outside the history")
        self.hist = np.zeros((self._hcap(tau), tau, tau))
        self.hist[:G] = hist
        self._load_table(keys, np.array(rows, np.float64))
        self.bslot = np.zeros(max(64, nbs), np.int64)
        self.gbuf = np.zeros((self.bslot.shape[0], self.nbmax))
        self.gbuf[:nbs] = gb
        self.ints[4] = _kernels.relist_buffer(self.keys, self.tab, self.bslot)
        self.ctr = np.zeros(1, np.int64)


class SADA(SketchedAdaGrad):
    """Sparse S-ADA: FD (Yang Alg. 1), G~ = B B^T + rho I, mirror descent."""

    name = "s-ada"


class FastSADA(SketchedAdaGrad):
    """Sparse Fast S-ADA: fast FD (Yang Alg. 3 lines 5-11, 14-16), mirror descent."""

    name = "fast-s-ada"
    fast = True


class FTSL(SketchedAdaGrad):
    """Sparse FTSL (Yang Alg. 2): FD, primal-dual step."""

    name = "ftsl"
    dual = True


class FTFSL(SketchedAdaGrad):
    """Sparse FTFSL (Yang Alg. 3): fast FD, primal-dual step."""

    name = "ftfsl"
    fast = True
    dual = True
