"""Sparse FD-SON and RFD-SON: sketched online Newton with the (Robust) Frequent Directions sketch
(``--algo fd-son``, ``--algo rfd-son``).

Luo, Agarwal, Cesa-Bianchi & Langford (2016), *Efficient Second Order Online Learning by
Sketching* (SON): Alg. 1 (SON) with Alg. 2's Frequent Directions sketch in App. F's epoch form
(Alg. 6: a 2m-row sketch ``[D V; G]`` whose buffer G of m to-sketch vectors is folded in by one
eigen step every m examples), made sparse as App. F's Alg. 8-11 (``V = F Z``, ``K = Z Z^T``,
``w = w_bar + Z^T b``), with the corrections of ``NOTES_FD.md``: the 1/2 in Alg. 9's
Sherman-Morrison vector, the w_bar correction read from the buffer before it is cleared,
``N1 = U1 F + U2 Q1``, the first epoch handled explicitly (a re-base), K of the basis.

An m-row FD sketch keeps m - 1 directions (the m-th is zeroed by every shrink): FD-SON equals full
online Newton at m = d + 1.

Per learned example O(m s + m^2) (s features): ``S x`` from ``D F (Z x)`` and ``G x``, two
Sherman-Morrison steps on ``H = (alpha I + S S^T)^-1`` (2m x 2m), the Newton step
``u = w - A^-1 g`` with ``A^-1 = (I - S^T H S) / alpha`` into ``w_bar`` (on x's features), ``b`` and the
buffer's coefficients ``c``. Every m-th example the eigen step, O(m^3 + m^2 s): see
:func:`streamlearn.algos._fd_son_kernels._eigen_step`. Nothing is O(2^b): per-feature state
(w_bar and Z's column) lives in a hash table of the features seen.

Re-bases (NOTES_FD item 5). ``F_new = N1`` is forced by the sparse update ``Z += N1^-1 N2 G``: a new
sketch direction that lies mostly in the buffer has a small coefficient on the old Z, so cond(F)
grows by a factor per eigen step whenever the sketch's directions change, and reaches ``--max_cond``
every few eigen steps. What bounds the rounding of ``V = F Z`` is the condition number of F with its
columns scaled to unit norm (a column's scale only moves Z's row's exponent): that is what ``--max_cond``
bounds. A re-base (``w_bar += Z^T b``, ``Z <- F Z``,
``F = I``) costs O(m^2 n) for n features seen; it is therefore lazy: recorded in a history of
transforms (kept in dyadic blocks, and from every 16th record composed to the last) and applied to a
feature when it is next read, O(m^2 log) per feature. It is done on every feature (which also recomputes V's Gram matrix from the table,
correcting the rounding of the lazily applied transforms) only once n / 8 examples have passed
since the last such one. ``K`` is the Gram matrix ``V V^T`` (I up to rounding), carried through each
eigen step in V's coordinates; the drift guard re-orthonormalises V's active rows against it.

Options (``--name``): ``sketch_size`` m (0..1024; 0 = online gradient descent with step 1/alpha: no
sketch, A = alpha I), ``alpha`` (A = alpha I + S^T S), ``no_diag`` (no pre-scaling, below), ``sigma_eta`` (the to-sketch scale:
``g^ = sqrt(sigma_eta h) l'(p) x``, held constant), ``projection_c`` (Alg. 1 line 4, SON Lemma 1:
|w^T x| <= C; 0 = off), ``max_cond`` (re-base when the new F's column-equilibrated condition number exceeds it),
``no_invariant``, ``no_clip``. Importance weight h: the step of the loss h l, whose gradient is
``g = h l'(p) x`` and whose exp-concavity is sigma / h, hence the sketched ``sqrt(sigma_eta h) l'(p) x``.

Deviations from the paper (defaults; ``--no_invariant --no_clip --no_diag`` with ``--alpha`` / ``--alpha0`` and
``--sigma_eta`` given is the paper's algorithm exactly, as the dense reference ``tests/naive_fd_son.py``
runs it, ``sketch="fd-epoch"`` / ``"rfd-epoch"``):

* **Importance-invariant step** (``--no_invariant`` for the paper's ``u = w - A^-1 g``): the step
  along ``A^-1 x`` moves the prediction as h infinitesimal gradient steps would (Karampatziakis &
  Langford 2011, VW's default update, Oja-SON's), with ``q = x^T A^-1 x`` (``A^+`` while RFD's alpha
  is 0): the plain step when ``h l'' q`` is small, never past the label (squared), the margin (hinge)
  or the logistic flow. The paper's step overshoots by about ``||x||^2 / alpha`` off the sketch (a9a:
  15 non-zeros) and diverges with squared loss on raw data.
* **Squared loss clipped** (``--no_clip``): the prediction reported and the derivative are taken at p
  clipped to the range of the labels learned so far (as VW's squared loss; saved in the model).
* **Defaults from a benchmark over every binary set** (``benchmarks/fd_son.py --section defaults``):
  with the pre-scaling FD-SON ``--alpha 0.5 --sigma_eta 1/128``; with ``--no_diag`` ``--alpha 8
  --sigma_eta 1/8`` (the paper's sigma for squared loss with C = 1); RFD-SON ``--alpha0 0.25`` (0 gives
  the pseudo-inverse start, which with the logistic loss overshoots on unscaled features). Models saved
  before these options continue as they were trained (the paper's step, no clip, sigma_eta 1, alpha0 0 /
  0.001; no pre-scaling before ``--no_diag`` existed).
* **Diagonal pre-scaling** (``--no_diag`` turns it off), as Oja-SON's ``--diag_frame precond --diag_rule vw``
  (SON Sec. 5.2 used as a preconditioner): the sketch and the Newton step run on ``x~ = f x``, ``f_j = (G_j /
  s_j^2)^-1/4 / s_j`` (``s_j = max |x_j|`` seen, ``G_j = sum h (l' x_j)^2``: VW's normalized adaptive rule,
  Ross, Mineiro & Langford 2013), and every weight change is mapped back to the original coordinates
  with the frame of its round (a snapshot of ``w~_j`` per feature, flushed before ``f_j`` changes; exact).
  The step is multiplied by VW's global normaliser and a weight by ``s_old / s_new`` when its feature's
  scale grows; off the sketch the step is then AdaGrad's (m = 0, alpha = 2: VW's default learner), so
  rare features of sparse text get their own step instead of 1/alpha for all. The dense reference's
  ``prescale=True`` is written from that definition.

RFD-SON (:class:`RFDSON`, Luo et al. 2019, Alg. 3 in the epoch sketch): the same learner whose alpha
grows by half of every shrink from ``--alpha0``; while alpha = 0 the step is the pseudo-inverse one
(``A^+ = S^T (S S^T)^+2 S``, eigenvalues <= 1e-9 of the largest count as zero), O(m^3) per example, and
the projection is SON Lemma 2 in the semi-norm of the singular A. A buffer of rank < m shrinks by
0 (as the dense reference: its m-th eigenvalue is then rounding noise).
"""
from __future__ import annotations

import numpy as np

from ..kernels import kernel_batch, lazy
from .base import Learner, Param, adopt, require
from .feature_table import MIN_CAP, FeatureTable

__all__ = ["FDSON"]

#: the largest --sketch_size (2m x 2m matrices; a row of m + 2 floats per feature)
MAX_SKETCH_SIZE = 1024
N_COLS_EXTRA = 3  # w_bar, scratch, re-base stamp
N_PRE = 6  # = _fd_son_kernels.N_PRE: the pre-scaling's columns after Z's (c_j, snapshot, s_j^2, f_j, G_j, scratch)
N_INTS = 10  # the kernel's 9 counters, then the history's capacity
_SMALL_STATE = ("ints", "F", "K", "D", "b", "c", "H", "ZG", "GG", "flt", "boff")

_kernels = lazy("streamlearn.algos._fd_son_kernels")
#: RFD-SON's default alpha_0 for logistic loss without projection (alpha_0 = 0 diverges there)
LOGISTIC_ALPHA0 = 1e-3
#: defaults chosen by ``benchmarks/fd_son.py --section defaults`` (every binary set, both losses): without the
#: pre-scaling (--no_diag) ...
DEFAULT_ALPHA, DEFAULT_ALPHA0, DEFAULT_SIGMA_ETA = 8.0, 0.25, 0.125
#: ... and with it (the off-sketch step is then AdaGrad's with learning rate 1 / alpha)
PRE_ALPHA, PRE_ALPHA0, PRE_SIGMA_ETA = 0.5, DEFAULT_ALPHA0, 1.0 / 128
#: the to-sketch scale of models saved with sigma_eta unset (before 2026-11-26)
OLD_SIGMA_ETA = 1.0


#: = _fd_son_kernels.FULL_REBASE_RATIO
FULL_REBASE_RATIO = 8


def _hist_rows(hcap) -> int:
    return 2 * hcap + (hcap >> 4) + 1  # = _fd_son_kernels.n_hist_rows: the dyadic blocks, then the suffixes


def _kernels_hist_min() -> int:
    return 64  # = _fd_son_kernels.HIST_MIN (not imported here: --help must not load numba)


class FDSON(FeatureTable, Learner):
    """Sparse FD-SON (SON Alg. 1 + App. F's epoch Frequent Directions sketch)."""

    name = "fd-son"
    compiled_kernels = ((_kernels, "fd_run"), (_kernels, "full_rebase"))
    PARAMS = (
        Param("sketch_size", int, 10,
              "FD-SON / RFD-SON sketch size m: m rows, m - 1 directions kept (0 = online gradient descent "
              "with step 1/alpha).", short="-m", structural=True, low=0, high=MAX_SKETCH_SIZE,
              why="2m x 2m matrices, m + 2 floats per feature seen, O(m^2) work per example and an O(m^3) "
                  "eigen step every m examples"),
        Param("alpha", float, None, f"FD-SON regulariser alpha: A_t = alpha I + S^T S (1/alpha is the step "
              f"size off the sketch; the paper's runs tune it). Default {PRE_ALPHA:g} with the pre-scaling (the "
              f"off-sketch step is AdaGrad's with learning rate 1/alpha), {DEFAULT_ALPHA:g} with --no_diag.",
              low=0, low_open=True),
        Param("sigma_eta", float, None, f"FD-SON / RFD-SON: to-sketch scale sigma+eta, g^ = sqrt(sigma+eta) g. "
              f"Default 1/{1 / PRE_SIGMA_ETA:g} with the pre-scaling, 1/{1 / DEFAULT_SIGMA_ETA:g} with --no_diag "
              f"(the paper's sigma for squared loss with C = 1).", low=0),
        Param("projection_c", float, 0.0, "FD-SON / RFD-SON: projection constant C of SON Alg. 1 "
              "(|w^T x| <= C); 0 = no projection.", low=0),
        Param("max_cond", float, 1e4, "FD-SON / RFD-SON: re-base the sketch's representation V = F Z when "
              "the condition number of F with its columns scaled to unit norm exceeds this.", low=1, finite=False),
        Param("no_invariant", bool, False,
              "FD-SON / RFD-SON: take the paper's plain Newton step u = w - A^-1 g instead of the "
              "importance-invariant one (default), which moves the prediction as many infinitesimal steps would "
              "and never past the label or margin.",
              absent=True),  # models saved before the option continue with the paper's step
        Param("no_clip", bool, False,
              "FD-SON / RFD-SON, squared loss: do not clip the prediction (and the derivative) to the range of "
              "the labels learned so far (clipped by default, as VW's squared loss).", structural=True,
              absent=True),  # models saved before the option were not clipped (flt has no label range)
        Param("no_diag", bool, False,
              "FD-SON / RFD-SON: turn off the diagonal pre-scaling (on by default: the sketch and the Newton step "
              "run on x~ = f x with VW's normalized adaptive per-feature scale f, each update mapped back to the "
              "original coordinates with the f of its round, as Oja-SON's --diag_frame precond --diag_rule vw).",
              structural=True,
              absent=True),  # models saved before the option had no pre-scaling
    )

    def __init__(self, **hyper):
        super().__init__(**hyper)
        m = int(self.hyper["sketch_size"])
        self.m = m
        self.precond = self._precond(self.hyper)
        self.ncol = m + N_COLS_EXTRA + (N_PRE if self.precond else 0)
        self._alloc_table(MIN_CAP)
        self.ints = np.zeros(N_INTS, np.int64)
        self._alloc_history(_kernels_hist_min())
        self.F = np.eye(m)
        self.K = np.zeros((m, m))
        self.D = np.zeros(m)
        self.b = np.zeros(m)
        self.c = np.zeros(m)
        self.ZG = np.zeros((m, m))
        self.GG = np.zeros((m, m))
        self.boff = np.zeros(m + 1, np.int64)
        self.clip = not bool(self.hyper["no_clip"])
        # alpha now, sum of the shrinks, t at the last re-base on every feature (, the label range: --no_clip off
        # or the pre-scaling; then with the pre-scaling VW's normaliser's sums of h ||x / s||^2 and of h)
        self.flt = np.zeros(self._n_flt(self.hyper))
        self.bslot = np.zeros(0, np.int64)
        self.bkey = np.zeros(0, np.int64)
        self.bval = np.zeros(0)
        self.H = np.zeros((2 * m, 2 * m))
        self._apply_hyper()

    robust = False

    def _alpha_given(self) -> float:
        a = self.hyper["alpha"]
        return float(a if a is not None else (PRE_ALPHA if self.precond else DEFAULT_ALPHA))

    def _apply_hyper(self):
        h = self.hyper
        # alpha now (the kernel's flt[0]): FD-SON's --alpha; RFD-SON's grows from --alpha0 by half of
        # every shrink, and a new --alpha0 (continuing a saved model) shifts it by the difference
        a = self._alpha_given()
        old = getattr(self, "_alpha_set", None)
        if not self.robust or old is None:
            self.alpha = a
        else:
            self.alpha = float(self.flt[0]) if a == old else float(self.flt[0]) + (a - old)
        self._alpha_set = a
        se = h["sigma_eta"]
        self.sigma_eta = float(se if se is not None else (PRE_SIGMA_ETA if self.precond else DEFAULT_SIGMA_ETA))
        self.proj_c = float(h["projection_c"])
        self.max_cond = float(h["max_cond"])
        self.invariant = not bool(h["no_invariant"])
        if not self.alpha > 0 and not self.robust:
            raise ValueError(f"--alpha must be > 0, got {self.alpha}")
        if not self.sigma_eta >= 0:
            raise ValueError(f"--sigma_eta must be >= 0, got {self.sigma_eta}")
        if not self.proj_c >= 0:
            raise ValueError(f"--projection_c must be >= 0, got {self.proj_c}")
        if not self.max_cond >= 1:
            raise ValueError(f"--max_cond must be >= 1, got {self.max_cond}")
        if self.alpha != self.flt[0] or not self.examples_learned:
            self.flt[0] = self.alpha
            if self.alpha > 0:  # alpha changed (continuing a saved model): H for the new alpha
                self.H = np.linalg.inv(self.alpha * np.eye(2 * self.m) + self._sst())

    def _sst(self):
        """``S S^T`` (2m x 2m) from the small matrices: ``[[D K D, D F Z G^T], [., G G^T]]`` (K = V V^T)."""
        m = self.m
        DF = self.D[:, None] * self.F
        out = np.zeros((2 * m, 2 * m))
        out[:m, :m] = self.D[:, None] * self.K * self.D[None, :]
        out[:m, m:] = DF @ self.ZG
        out[m:, :m] = out[:m, m:].T
        out[m:, m:] = self.GG
        return out

    # -- hash table, buffer and re-base history ----------------------------------------------
    def _alloc_history(self, hcap):
        m = self.m
        rows = _hist_rows(hcap)
        self.hP = np.zeros((rows, m, m))
        self.hc = np.zeros((rows, m))
        self.ints[9] = hcap

    def _grow_history(self, occupied):
        """The history holds hcap >= features seen / (8 m) re-bases, as many as there can be between two
        re-bases on every feature (at least features seen / 8 examples apart); its blocks keep their levels."""
        m = self.m
        hcap = int(self.ints[9])
        new = hcap
        while m > 0 and occupied > new * m * FULL_REBASE_RATIO:
            new <<= 1
        if new == hcap:
            return
        oldP, oldc = self.hP, self.hc
        self._alloc_history(new)
        lvl = 0
        while (hcap >> lvl) >= 1:
            a, b = 2 * hcap - ((2 * hcap) >> lvl), 2 * new - ((2 * new) >> lvl)
            nblk = hcap >> lvl
            self.hP[b:b + nblk] = oldP[a:a + nblk]
            self.hc[b:b + nblk] = oldc[a:a + nblk]
            lvl += 1
        ns = _hist_rows(hcap) - 2 * hcap  # the suffixes
        self.hP[2 * new:2 * new + ns] = oldP[2 * hcap:]
        self.hc[2 * new:2 * new + ns] = oldc[2 * hcap:]

    def _grow(self, needed):
        if super()._grow(needed):
            _kernels.remap_buffer(self.keys, self.shift, self.bkey, self.bslot, int(self.ints[4]))

    def _grow_buffer(self, needed):
        cap = self.bval.shape[0]
        if needed <= cap:
            return
        cap = max(needed, 2 * cap, 64)
        nb = int(self.ints[4])
        for f, dt in (("bslot", np.int64), ("bkey", np.int64), ("bval", np.float64)):
            new = np.zeros(cap, dt)
            new[:nb] = getattr(self, f)[:nb]
            setattr(self, f, new)

    # -- learning -----------------------------------------------------------------------
    def _run(self, batch, learn):
        n = batch.n
        pred = np.empty(n)
        loss = np.empty(n)
        if n == 0:
            return pred, loss
        offsets, indices, values, labels, weights = kernel_batch(batch)
        maxs = max(int(np.max(offsets[1:] - offsets[:-1])), 1)
        slot_buf = np.empty(maxs, np.int64)
        hyper = _kernels.FdHyper(self.mask, self.loss.code, self.robust, self.sigma_eta, self.proj_c, self.max_cond,
                                 self.invariant, self.clip, self.precond)
        fields = _kernels.FdState._fields
        m = self.m
        xt = np.empty(maxs)
        sx = np.zeros(2 * m)
        rs = np.zeros(_kernels.N_RS)
        ws = np.zeros((2, m, m))
        K = _kernels
        start, resume = 0, K.RESUME_NONE
        while True:
            state = K.FdState(*(getattr(self, f) for f in fields))
            nxt, learned, st = K.fd_run(offsets, indices, values, labels, weights, start, resume, bool(learn), state,
                                        hyper, slot_buf, xt, sx, rs, ws, pred, loss)
            self.examples_learned += int(learned)
            start, resume = int(nxt), K.RESUME_NONE
            # the rare paths, compiled apart (fd_run stopped at example nxt and says what it needs)
            if st == K.ST_DONE:
                break
            if st == K.ST_GROW:
                s = int(offsets[nxt + 1] - offsets[nxt])
                self._grow(int(self.ints[1]) + s)
                self._grow_buffer(int(self.ints[4]) + s)
                self._grow_history(int(self.ints[1]))
            elif st == K.ST_COMPACT:
                K.compact_history(self.keys, self.tab, self.ints, self.hP, self.hc)
            elif st == K.ST_REBASE:
                K.full_rebase(self.keys, self.tab, self.ints, self.F, self.K, self.b, self.c, self.flt, self.boff,
                              self.bslot, self.bval, self.hP, self.hc, ws)
                resume = K.RESUME_STEP
            else:  # RFD with alpha = 0: the pseudo-inverse projection or step
                s = int(offsets[nxt + 1] - offsets[nxt])
                project = st == K.ST_PINV_PROJECT
                K.pinv_apply(self.F, self.D, self.ZG, self.GG, self.ints, sx, rs, self.b, self.c, self.tab, slot_buf,
                             xt, s, self.loss.code, self.invariant, project)
                if project:
                    resume = K.RESUME_PROJECTED
                else:
                    start += 1
        return pred, loss

    # -- introspection (tests, benchmarks) ----------------------------------------------------
    def _rows(self, keys):
        keys = np.asarray(keys, np.int64)
        out = np.zeros((len(keys), self.tab.shape[1]))
        _kernels.table_lookup_rows(self.keys, self.tab, keys, self.shift, out, self.hP, self.hc, int(self.ints[7]))
        return out

    def weights_dense(self, keys):
        """Effective weights ``w = w_bar + Z^T b + G^T c`` at the given masked keys (with the pre-scaling: ``w~``,
        in the pre-scaled coordinates; :meth:`weights_original`)."""
        keys = np.asarray(keys, np.int64)
        rows = self._rows(keys)
        w = rows[:, 0] + rows[:, N_COLS_EXTRA:N_COLS_EXTRA + self.m] @ self.b
        return w + self.buffer_dense(keys).T @ self.c

    def weights_original(self, keys):
        """The weights in the original coordinates, ``w_j = c_j + f_j (w~_j - snap_j)`` with the pre-scaling
        (:meth:`weights_dense` without it)."""
        wt = self.weights_dense(keys)
        if not self.precond:
            return wt
        rows = self._rows(keys)
        cw = N_COLS_EXTRA + self.m
        return rows[:, cw] + rows[:, cw + 3] * (wt - rows[:, cw + 1])

    def buffer_dense(self, keys):
        """The buffer G restricted to the given masked keys (m x len(keys); rows >= tau are 0)."""
        keys = np.asarray(keys, np.int64)
        pos = {int(k): i for i, k in enumerate(keys)}
        G = np.zeros((self.m, len(keys)))
        for q in range(int(self.ints[2])):
            for e in range(int(self.boff[q]), int(self.boff[q + 1])):
                j = pos.get(int(self.bkey[e]))
                if j is not None:
                    G[q, j] += self.bval[e]
        return G

    def sketch_dense(self, keys):
        """The sketch ``S = [D F Z; G]`` (2m x len(keys)) restricted to the given masked keys."""
        rows = self._rows(keys)
        top = self.D[:, None] * (self.F @ rows[:, N_COLS_EXTRA:N_COLS_EXTRA + self.m].T)
        return np.vstack([top, self.buffer_dense(keys)])

    @property
    def n_rebase(self) -> int:
        return int(self.ints[5])

    @property
    def n_eigen(self) -> int:
        return int(self.ints[6])

    @property
    def n_compact(self) -> int:
        """How many times the re-base history was full and every feature was brought up to date."""
        return int(self.ints[8])

    def extra_summary(self) -> dict:
        return {"eigen_steps": self.n_eigen, "rebases": self.n_rebase, "history_compactions": self.n_compact}

    # -- state ----------------------------------------------------------------------------
    def _arrays(self):
        order = self._sorted_slots()
        nb = int(self.ints[4])
        R = int(self.ints[7])  # the history's level-0 records (the other levels are rebuilt on loading)
        return {"keys": self.keys[order], "rows": self.tab[order], "bkey": self.bkey[:nb].copy(),
                "bval": self.bval[:nb].copy(), "hP0": self.hP[:R].copy(), "hc0": self.hc[:R].copy(),
                **{f: getattr(self, f) for f in _SMALL_STATE}}

    @classmethod
    def check_saved(cls, meta, arrays):
        """Models saved before 2026-11-26 hold ``sigma_eta`` (and RFD-SON's ``alpha0``) unset: read as what
        that version meant by it (1; alpha0 1e-3 for logistic loss without projection, else 0), not as
        today's defaults. (Those models have no ``no_diag``; models saved since hold it, and their unset
        alpha, alpha0 and sigma_eta mean the defaults of their pre-scaling setting.)"""
        hyper = meta.get("hyper") if isinstance(meta, dict) else None
        if isinstance(hyper, dict) and "no_diag" not in hyper and (hyper.get("sigma_eta", 0) is None
                                                                   or hyper.get("alpha0", 0) is None):
            hyper = dict(hyper)
            if hyper.get("sigma_eta", 0) is None:
                hyper["sigma_eta"] = OLD_SIGMA_ETA
            if hyper.get("alpha0", 0) is None:
                pc = hyper.get("projection_c")
                logistic = hyper.get("loss_function") == "logistic" and not (isinstance(pc, (int, float)) and pc > 0)
                hyper["alpha0"] = LOGISTIC_ALPHA0 if logistic else 0.0
            meta = {**meta, "hyper": hyper}
        return super().check_saved(meta, arrays)

    @classmethod
    def _m(cls, hyper) -> int:
        m = hyper.get("sketch_size")
        m = 10 if m is None else int(m)
        require(0 <= m <= MAX_SKETCH_SIZE, f"sketch_size {m} is out of range 0..{MAX_SKETCH_SIZE}")
        return m

    @classmethod
    def _precond(cls, hyper) -> bool:
        nd = hyper.get("no_diag")
        return not (nd if nd is not None else next(p.default for p in cls.PARAMS if p.name == "no_diag"))

    @classmethod
    def _n_flt(cls, hyper) -> int:
        return 7 if cls._precond(hyper) else (3 if hyper.get("no_clip") else 5)

    @classmethod
    def saved_shapes(cls, hyper):
        m = cls._m(hyper)
        sq = ((m, m), np.float64)
        return {"ints": ((N_INTS,), np.int64), "F": sq, "K": sq, "D": ((m,), np.float64), "b": ((m,), np.float64),
                "c": ((m,), np.float64), "H": ((2 * m, 2 * m), np.float64), "ZG": sq, "GG": sq,
                "flt": ((cls._n_flt(hyper),), np.float64),
                "boff": ((m + 1,), np.int64)}

    @classmethod
    def build_bytes(cls, hyper):
        m = cls._m(hyper)
        return 8 * (7 * m * m + 8 * m)

    def _load_arrays(self, arrays):
        """Load the saved state, checking what the kernels index with: the counters, the keys
        (distinct, ascending, within the mask), the rows (one per key), the buffer (offsets
        ascending within its entries, at most m rows, entries among the stored keys)."""
        m = self.m
        for k, (shape, dt) in self.saved_shapes(self.hyper).items():
            require(k in arrays, f"array {k} is missing")
            setattr(self, k, adopt(k, arrays[k], shape, dt))
        for k in ("keys", "rows", "bkey", "bval", "hP0", "hc0"):
            require(k in arrays, f"array {k} is missing")
        keys, rows, bkey, bval = arrays["keys"], arrays["rows"], arrays["bkey"], arrays["bval"]
        require(np.dtype(keys.dtype) == np.int64 and np.dtype(rows.dtype) == np.float64
                and len(keys.shape) == 1 and tuple(rows.shape) == (keys.shape[0], self.ncol),
                f"arrays keys/rows do not fit this model ({self.ncol} columns)")
        require(np.dtype(bkey.dtype) == np.int64 and np.dtype(bval.dtype) == np.float64
                and len(bkey.shape) == 1 and tuple(bval.shape) == tuple(bkey.shape),
                "arrays bkey/bval do not fit this model")
        keys, rows = adopt("keys", keys), adopt("rows", rows)
        require(not len(keys) or (keys[0] >= 0 and keys[-1] <= self.mask and (np.diff(keys) > 0).all()),
                f"array keys: not distinct ascending features within 0..{self.mask}")
        t, nocc, tau, na, nbuf, nreb, neig, nhist, ncomp, hcap = (int(x) for x in self.ints)
        require(t >= 0 and nocc == len(keys) and 0 <= tau < max(m, 1) and 0 <= na <= m and nbuf == len(bkey)
                and nreb >= 0 and neig >= 0 and ncomp >= 0, f"array ints: counters {list(self.ints)} out of range")
        hmin = _kernels_hist_min()
        require(hcap >= hmin and hcap & (hcap - 1) == 0 and (hcap == hmin or (hcap >> 1) * m * FULL_REBASE_RATIO < nocc)
                and 0 <= nhist <= hcap, f"array ints: re-base history of {nhist} in {hcap} does not fit this model")
        hP0, hc0 = arrays["hP0"], arrays["hc0"]
        require(np.dtype(hP0.dtype) == np.float64 and np.dtype(hc0.dtype) == np.float64
                and tuple(hP0.shape) == (nhist, m, m) and tuple(hc0.shape) == (nhist, m),
                "arrays hP0/hc0 do not fit this model")
        stamps = rows[:, 2] if len(keys) else np.zeros(0)
        require(((stamps >= 0) & (stamps <= nhist) & (stamps == np.floor(stamps))).all(),
                "array rows: a re-base stamp out of range")
        bo = self.boff
        require(bo[0] == 0 and (np.diff(bo[:tau + 1]) >= 0).all() and bo[tau] == nbuf,
                "array boff: not the buffer rows' offsets")
        require(np.isin(bkey, keys).all(), "array bkey: a buffer entry on a feature that is not stored")
        require(self.flt[1] >= 0 and self.flt[0] >= 0 and (self.robust or self.flt[0] == self.alpha),
                "array flt: not this model's alpha")
        if self.precond:
            pre = rows[:, N_COLS_EXTRA + m:]
            require(bool(np.all(pre[:, 2:5] >= 0)) and self.flt[5] >= 0 and self.flt[6] >= 0,
                    "array rows/flt: a negative scale, frame or sum of the pre-scaling")
        self._load_table(keys, rows)
        self._alloc_history(hcap)
        self.hP[:nhist] = hP0
        self.hc[:nhist] = hc0
        _kernels.rebuild_levels(self.hP, self.hc, nhist)
        self.bkey = np.array(bkey, np.int64)
        self.bval = np.array(bval, np.float64)
        self.bslot = np.zeros(nbuf, np.int64)
        _kernels.remap_buffer(self.keys, self.shift, self.bkey, self.bslot, nbuf)


class RFDSON(FDSON):
    """Sparse RFD-SON: FD-SON whose regulariser grows by half of every shrink (Robust Frequent
    Directions, Luo, Chen, Zhang, Li & Zhang 2019, Alg. 3 lines 6-9: alpha_t = alpha_(t-1) +
    Sigma_mm / 2), from ``--alpha0`` (default 0.25; the paper's 0: until the first shrink the step uses
    the pseudo-inverse of S^T S, SON App. D, with the rank threshold of NOTES_FD item 7). The to-sketch
    scale is held constant (Alg. 3's sqrt(mu_t + eta_t) with eta_t = 0: NOTES_FD item 8)."""

    name = "rfd-son"
    robust = True
    PARAMS = tuple(Param("alpha0", float, DEFAULT_ALPHA0, "RFD-SON: initial regulariser alpha_0 (alpha_t = alpha_0 + "
                         "half of the sketch's shrinks; 0 = the paper's hyper-parameter-free start, pseudo-inverse "
                         "until the first shrink; refused for logistic loss without projection, where it diverges).",
                         low=0)
                   if p.name == "alpha" else p for p in FDSON.PARAMS)

    def _alpha_given(self) -> float:
        a0 = self.hyper["alpha0"]  # (None only in models saved before 2026-11-26: check_saved reads it)
        return float(a0 if a0 is not None else (PRE_ALPHA0 if self.precond else DEFAULT_ALPHA0))

    def _diverges_at_zero(self) -> bool:
        return self.hyper["loss_function"] == "logistic" and not float(self.hyper["projection_c"]) > 0

    def _apply_hyper(self):
        a0 = self._alpha_given()
        if not a0 >= 0:
            raise ValueError(f"--alpha0 must be >= 0, got {a0}")
        if a0 == 0 and self._diverges_at_zero():
            raise ValueError("--algo rfd-son: logistic loss with --alpha0 0 and no projection diverges (the "
                             "pseudo-inverse Newton step); give --alpha0 > 0")
        if a0 == 0 and int(self.hyper["sketch_size"]) == 0:
            raise ValueError("--algo rfd-son: --sketch_size 0 with --alpha0 0 never learns (A = 0); give --alpha0 > 0")
        super()._apply_hyper()
