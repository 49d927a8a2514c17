"""CompAdaGrad for hashed sparse data (``--algo compadagrad``): full-matrix AdaGrad in a
k-dimensional subspace plus diagonal AdaGrad in its complement.

Mehta, Rendell, Varghese & Webers (2016), *CompAdaGrad: A Compressed, Complementary,
Computationally-Efficient Adaptive Gradient Method* (``../shared/papers/compadagrad_mehta2016.txt``;
``../shared/design/NOTES_ADA.md``): composite mirror descent (Eq. 2)

    x_{t+1} = argmin_x  eta <g_t, x> + eta phi(x) + 1/2 ||x - x_t||^2_{A_t},
    A_t = Pi^T (Pi G_t Pi^T + delta_r I)^{1/2} Pi  +  cw P_perp D_t P_perp        (Eq. 5)

with P the orthogonal projector onto the rows of the k x n map Pi, P_perp = I - P, cw the
complement weight (the paper's tau), n = 2^b hashed coordinates.

The map: a count-sketch of the features seen
---------------------------------------------
Coordinate j has a bucket h(j) in [0, k) and a sign s(j) = +-1 (a seeded hash of j:
``--subspace_seed`` and ``--random_seed``). Row r of Pi_t is gamma_r sum s(j) e_j over the
coordinates j of bucket r that are *in the map* (G_jj > 0: a non-zero gradient has reached them),
gamma_r = n_r^{-1/2} for n_r such coordinates: the rows are orthonormal and disjoint, so
Pi Pi^T = I and P = sum_r u_r u_r^T is block diagonal over the buckets. A coordinate joins the map
in the round its first gradient arrives. (A map over all 2^b slots would spread each row over
2^b / k coordinates, so a sparse x would overlap it by sqrt(k / 2^b): the subspace would move the
predictions by that factor, less the larger -b. Over the features seen it does not depend on
-b.) A joining coordinate has had no gradient, so Pi_t G_t Pi_t^T = Gamma_t S0_t Gamma_t with
S0 = sum imp (Pi0 g)(Pi0 g)^T over the unnormalised +-1 map Pi0: one k x k matrix, O(k^2) per example.

The complement's diagonal
-------------------------
The paper's D_t = diag(G_perp)^{1/2} + delta_c I, G_perp = sum (P_perp g)(P_perp g)^T, cannot be kept
lazily: (P_perp g)_j = g_j - s_j m_r (m_r = gamma_r^2 sum_{i in B_r} s_i g_i) is non-zero on *every*
coordinate of every bucket g touches (the complement of g touches whole buckets), so every
coordinate's D_j changes in every such round, by a different amount, and the complement step
(Lemma 6) sums 1 / D_j over the bucket: O(features seen) per example. Here
D = cw (diag(G)^{1/2} + delta_c I), G = sum imp g g^T: diagonal AdaGrad's own accumulators, which
change only on the features of the example. Mehta's Thm. 3 still holds with ||Z_perp||_{2,1}
replaced by diagonal AdaGrad's sum_j (sum_t g_tj^2)^{1/2}: the complement's dual-norm term is
||P_perp g||^2 in (P_perp D P_perp)^+, which is <= ||g||^2_{D^-1} (a maximum over Im(P_perp) is at most
the one over R^n), and the AdaGrad lemma bounds the sum of those. At k = 0 both are diagonal
AdaGrad; ``tests/naive_sketched_adagrad.py``'s ``CompAdaGrad(..., complement="diag", map_on_seen=True)``
is this definition written densely (explicit n x n A_t, a dense solve), and the learner equals it
to 1e-6 (``tests/test_compadagrad.py``).

The step and its lazy form (phi = 0)
------------------------------------
The step decouples (Mehta Eq. 10-11): x_{t+1} - x_t = Pi^T a + y with

* a = -eta imp K^+ Pi g, K = (Gamma S0 Gamma + delta_r I)^{1/2} (Lemma 5, unscaled map, lambda = 0): an
  eigen-decomposition of a k x k matrix (cyclic Jacobi, O(k^3) flops, ~k = 10);
* y = argmin over Pi y = 0 of eta imp <g, y> + 1/2 y^T D y (Lemma 6 with lambda = 0; the Lagrange
  condition eta imp g + D y + Pi^T nu = 0): y_j = d_j + s_j c_r / D_j for j in bucket r, where
  d_j = -eta imp g_j / D_j is diagonal AdaGrad's step (zero off x's features) and
  c_r = -(sum_{j in B_r} s_j d_j) / Phi_r, Phi_r = sum_{j in B_r, in the map} 1 / D_j, the one value
  that makes sum_{j in B_r} s_j y_j = 0 (y orthogonal to row r; buckets x does not touch get c_r = 0).

Both moves reach every coordinate of a touched bucket, but only as s_j x (a bucket scalar) and
s_j / D_j x (a bucket scalar), and D_j changes only when j is in an example. So the learner keeps,
per bucket, ``bsum_r = sum gamma_r a_r`` and ``rsum_r = sum c_r`` (plus Phi_r and n_r, updated by
the features of each example: Phi_r += 1 / D_new - 1 / D_old), and per coordinate its materialised
weight ``w_j`` and the values ``bsnap_j``, ``rsnap_j`` of its bucket's sums when it was last
materialised. Its weight is

    x_j = w_j + s_j ((bsum_r - bsnap_j) + (rsum_r - rsnap_j) / D_j)      (j in the map; else w_j = 0)

exactly the dense x_j: every round since j was last materialised added s_j gamma_r a_r and
s_j c_r / D_j with this same D_j (j was in no example, so G_jj did not change). A learning round
materialises x's features with their old D_j (and snapshots the sums), adds imp g_j^2 to G_jj,
updates Phi and the map, takes the subspace step (``bsum``), d_j on x's features and c_r into
``rsum``: O(s + k^2) plus the k x k eigen step (Jacobi started from the last eigenbasis, where
Gamma S0 Gamma + imp z z^T is nearly diagonal: a few sweeps), nothing O(2^b) (O(k) per touched bucket).
``tests/test_compadagrad.py`` checks the lazy weights against the dense definition.

k = 0 is diagonal AdaGrad
-------------------------
With k = 0 there is no map: D_j = cw (sqrt(G_jj) + delta_c), the step d_j, written in
``--algo adagrad --adaptive``'s operation order, its VW semantics included (label-range clip, the
float32 loss test for whether to update, importance weight imp: G += imp l'^2 x^2, step
-eta imp l' x / D), and its float32 state (w and G rounded to float32 when stored): with the
defaults (``--complement_weight 1 --complement_delta 0``), ``-k 0`` gives ``--algo adagrad
--adaptive``'s predictions bit for bit at the same ``-l``. For k > 0 the state is float64 (the lazy
differences ``bsum_r - bsnap_j`` need it).

Composite steps
---------------
``--l2`` / ``--l1``: the paper's phi(x) = l2/2 ||x||^2 + l1 ||x||_1, eta phi per round. At k = 0 the
step is per coordinate, x_j <- soft(D_j x_j - eta imp g_j, eta l1) / (D_j + eta l2) in every round
for every feature seen, applied lazily (Duchi et al. 2011 Sec. 5: between two rounds with j the
rounds with g_j = 0 shrink x_j in closed form).

With k > 0 the step moves every feature of the map in every round, and not lazily: the shrink
factors D_j / (D_j + eta l2) differ per feature while the constraint Pi y = 0 couples the features of a
bucket, so a feature's weight after m idle rounds is a degree-m polynomial in its own D_j, with
coefficients from each round (no finite per-bucket summary). The learner keeps the weights of the
features in the map materialised and takes the exact step on all of them (the eager form, O(N k + k^3)
per learned example for N features in the map, with a gradient or without; the features of the map
linked in the order they joined, through ``lastt``, with their positions in ``bsnap``):

* ``--l2`` alone (Mehta Sec. 4.1, unscaled map): the subspace part Pi^T a, a = (K + eta l2 I)^-1 (K Pi x_t -
  Pi g) (Lemma 5), and the complement part per bucket (Lemma 6; Pi D Pi^T is diagonal, the buckets being
  disjoint);
* ``--l1`` (Sec. 4.2's LASSO, argmin <g - A x_t, x> + 1/2 x^T (A + eta l2 I) x + eta l1 ||x||_1): with
  a = Pi x as a variable and nu its multiplier, x is separable (a soft-threshold per feature) given
  (a, nu), and Newton's method solves the 2k piecewise-linear optimality equations, exactly once the
  pattern of zero weights stops changing (usually a few steps; the paper uses LARS over all n
  coordinates).

Both equal the dense reference (``CompAdaGrad(..., l1=, l2=)``: an n x n solve, coordinate descent for
l1) to 1e-6 (``tests/test_compadagrad.py``). Not with ``--subspace_map srht``.

Cost per learned example: O(s + k^2) plus the O(k^3) Jacobi eigen step (small at k ~ 10; with
``--l1`` / ``--l2`` and k > 0, O(N k) more for the N features in the map); memory
four float64 tables of 2^b (w, G, and the two snapshots; allocated lazily, only pages touched become
resident) and O(k^2).

``--subspace_map srht``: the paper's own algorithm for small dense d, exactly Eq. 5 (diag(G_perp) in
the complement) with the unscaled SRHT Pi = R H Sigma over all n = 2^b coordinates (the analysis'
orthonormal rows; NOTES_ADA: the printed sqrt(n/k) scaling shrinks the subspace step by (n/k)^1.5):
dense weights, the step by Lemma 5 and Lemma 6 with k + 3 fast Walsh-Hadamard transforms,
O(k 2^b b) per example (-b at most 20). Equal to the dense reference
``CompAdaGrad(..., Pi=H[rows] * signs)`` (``tests/test_compadagrad.py``).

Options: ``-k/--subspace_dim`` (0..256), ``-l/--learning_rate`` eta, ``--subspace_delta`` delta_r
(inside the root, Eq. 5), ``--complement_delta`` delta_c (outside), ``--complement_weight`` cw,
``--subspace_seed``, ``--l1``, ``--l2``.
"""
from __future__ import annotations

import numpy as np

from ..kernels import kernel_batch, lazy
from ..memory import PageSet
from .base import Learner, Param, adopting, all_nonnegative, lazy_zeros, require

__all__ = ["CompAdaGrad", "MAX_SUBSPACE_DIM"]

#: the largest -k (k x k matrices and an O(k^3) eigen step per example)
MAX_SUBSPACE_DIM = 256
#: the largest -b of --subspace_map srht (dense: k transforms of 2^b entries per example)
MAX_SRHT_BITS = 20

_kernels = lazy("streamlearn.algos._compadagrad_kernels")

_TABLES = ("w", "G", "bsnap", "rsnap", "lastt")
_SMALL = ("bsum", "rsum", "phi", "nseen", "S0", "scal", "V")



def _symmetric(S) -> bool:
    """S0 is symmetric up to round-off: the kernel adds imp z0[p] z0[q] entry by entry, and
    (imp z0[p]) z0[q] and (imp z0[q]) z0[p] may differ in the last bit."""
    return bool(np.abs(S - S.T).max(initial=0.0) <= 1e-12 * np.abs(S).max(initial=0.0))

class CompAdaGrad(Learner):
    """CompAdaGrad (Mehta et al. 2016) with a lazily kept count-sketch subspace map."""

    name = "compadagrad"
    losses = ("squared", "logistic", "hinge")
    PARAMS = (
        Param("subspace_dim", int, 10, "CompAdaGrad: dimension k of the subspace where full-matrix AdaGrad runs "
              "(a count-sketch of the features seen into k buckets); 0 = diagonal AdaGrad (with the defaults, "
              "--algo adagrad --adaptive bit for bit).", short="-k", structural=True, low=0,
              high=MAX_SUBSPACE_DIM, why="an O(k^3) eigen step per example"),
        Param("learning_rate", float, 0.5, "Step size eta.", short="-l", low=0, low_open=True),
        Param("subspace_map", ("countsketch", "srht"), "countsketch", "CompAdaGrad's subspace map: countsketch "
              "(the features seen, O(s + k^2) per example) or srht (the paper's subsampled randomised Hadamard "
              "transform of all 2^b coordinates, exact Mehta Eq. 5: dense, O(k 2^b b) per example; -b <= 20).",
              structural=True),
        Param("subspace_seed", int, 0, "Seed of the subspace map's hash (with --random_seed).", structural=True,
              low=0, high=2**64 - 1),
        Param("subspace_delta", float, 1e-6, "CompAdaGrad: delta_r inside the subspace root, "
              "(Pi G Pi^T + delta_r I)^1/2 (Mehta Eq. 5); 0 = pseudo-inverse.", low=0),
        Param("complement_delta", float, 0.0, "CompAdaGrad: delta_c added to the complement's sqrt(G_jj) "
              "(Mehta Eq. 5).", low=0),
        Param("complement_weight", float, 1.0, "CompAdaGrad: weight of the complement's regulariser "
              "(Mehta's tau; its step is divided by it).", low=0, low_open=True),
        Param("l1", float, 0.0, "CompAdaGrad: l1 regulariser, the composite step's eta l1 ||x||_1 "
              "(with -k > 0 every feature seen moves in every round: O(features seen x k) per example; "
              "not with --subspace_map srht).", structural=True, low=0),
        Param("l2", float, 0.0, "CompAdaGrad: l2 regulariser, the composite step's eta l2/2 ||x||^2 "
              "(with -k > 0 every feature seen moves in every round: O(features seen x k) per example; "
              "not with --subspace_map srht).", structural=True, low=0),
    )

    compiled_kernels = ((_kernels, "comp_run"),)

    def __init__(self, **hyper):
        super().__init__(**hyper)
        h = self.hyper
        self.k = int(h["subspace_dim"])
        self.prox = float(h["l1"]) > 0.0 or float(h["l2"]) > 0.0
        if self.k > 0 and self.prox and h["subspace_map"] == "srht":
            raise ValueError("--algo compadagrad: --l1 / --l2 are not implemented with --subspace_map srht "
                             "(use the default countsketch map, or -k 0)")
        self.eager = self.k > 0 and self.prox
        self.seed = (int(h["subspace_seed"]) + 0x9E3779B97F4A7C15 * int(h["random_seed"])) & 0xFFFFFFFFFFFFFFFF
        size = 1 << self.bits
        kk = max(self.k, 1)
        self.srht = h["subspace_map"] == "srht" and self.k > 0
        if self.srht:
            if self.bits > MAX_SRHT_BITS:
                raise ValueError(f"--algo compadagrad: --subspace_map srht is dense, O(k 2^b b) per example: "
                                 f"-b at most {MAX_SRHT_BITS}, got {self.bits}")
            if self.k > size:
                raise ValueError(f"--algo compadagrad: -k {self.k} is more than the 2^b = {size} coordinates")
            rng = np.random.default_rng(self.seed)
            self.signs = rng.choice(np.array([-1.0, 1.0]), size=size)
            self.rows = np.sort(rng.choice(size, size=self.k, replace=False)).astype(np.int64)
        self.w = lazy_zeros(size, np.float64)
        self.G = lazy_zeros(size, np.float64)
        self.bsnap = lazy_zeros(size if self.k else 1, np.float64)
        self.rsnap = lazy_zeros(size if self.k else 1, np.float64)
        self.lastt = lazy_zeros(size if self.prox else 1, np.float64)
        self.bsum = np.zeros(kk)
        self.rsum = np.zeros(kk)
        self.phi = np.zeros(kk)
        self.nseen = np.zeros(kk)
        self.S0 = np.zeros((self.k, self.k))
        self.V = np.eye(self.k)
        self.scal = np.zeros(3)
        self.head = np.zeros(2 if self.eager else 1)
        if self.loss.name == "logistic":
            self.scal[0], self.scal[1] = -50.0, 50.0  # VW's prediction range for logistic loss (as adagrad)
        self.pages = PageSet(size)
        self.last_raw = None
        self._apply_hyper()

    def _apply_hyper(self):
        h = self.hyper
        self.eta = float(h["learning_rate"])

    def _hp(self):
        h = self.hyper
        return _kernels.CompHyper(self.mask, self.loss.code, self.k, np.uint64(self.seed), self.eta,
                                  float(h["subspace_delta"]), float(h["complement_delta"]),
                                  float(h["complement_weight"]), float(h["l1"]), float(h["l2"]))

    def _state(self):
        return _kernels.CompState(*(getattr(self, f) for f in _kernels.CompState._fields))

    def _run(self, batch, learn):
        n = batch.n
        pred = np.empty(n)
        loss = np.empty(n)
        raw = np.empty(n)
        if n == 0:
            self.last_raw = raw
            return pred, loss
        if learn:
            self.pages.mark(batch.indices, self.mask)
        offsets, indices, values, labels, weights = kernel_batch(batch)
        if self.srht:
            st = _kernels.SrhtState(self.w, self.G, self.signs, self.rows, self.S0, self.scal)
            learned = _kernels.srht_run(offsets, indices, values, labels, weights, bool(learn), st, self._hp(),
                                        pred, loss, raw)
        else:
            learned = _kernels.comp_run(offsets, indices, values, labels, weights, bool(learn), self._state(),
                                        self._hp(), pred, loss, raw)
        self.examples_learned += int(learned)
        self.last_raw = raw
        return pred, loss

    # -- introspection (tests, benchmarks) ------------------------------------------------------
    def subspace_map(self, idx):
        """``(buckets, signs)`` of the masked coordinates ``idx`` (the unnormalised count-sketch map
        Pi0; with --subspace_map srht, Pi is ``H[rows] * signs``)."""
        idx = np.asarray(idx, np.int64)
        b = np.empty(len(idx), np.int64)
        s = np.empty(len(idx), np.float64)
        if self.k:
            _kernels.map_of(idx, self.k, np.uint64(self.seed), b, s)
        else:
            b[:], s[:] = 0, 0.0
        return b, s

    def weights_at(self, idx):
        """The current weights x_j of the masked coordinates ``idx`` (the lazy parts applied)."""
        idx = np.ascontiguousarray(idx, np.int64)
        if self.srht:
            return self.w[idx].copy()
        out = np.empty(len(idx))
        _kernels.weights_of(idx, self._state(), self._hp(), out)
        return out

    def label_range(self):
        return float(self.scal[0]), float(self.scal[1])

    def extra_summary(self) -> dict:
        return {"subspace_dim": self.k, "subspace_features": int(self.nseen.sum()) if self.k else 0}

    # -- model files ----------------------------------------------------------------------------
    @classmethod
    def _sizes(cls, hyper):
        b = hyper.get("bit_precision", 18)
        require(1 <= b <= 32, f"bit_precision {b} is not in 1..32")
        k = hyper.get("subspace_dim", 10)
        require(0 <= k <= MAX_SUBSPACE_DIM, f"subspace_dim {k} is not in 0..{MAX_SUBSPACE_DIM}")
        prox = (hyper.get("l1") or 0.0) > 0 or (hyper.get("l2") or 0.0) > 0
        return 1 << b, k, prox

    @classmethod
    def saved_shapes(cls, hyper):
        size, k, prox = cls._sizes(hyper)
        kk = max(k, 1)
        out = {"w": ((size,), np.float64), "G": ((size,), np.float64),
               "bsnap": ((size if k else 1,), np.float64), "rsnap": ((size if k else 1,), np.float64),
               "lastt": ((size if prox else 1,), np.float64), "S0": ((k, k), np.float64), "V": ((k, k), np.float64),
               "scal": ((3,), np.float64)}
        out.update({f: ((kk,), np.float64) for f in ("bsum", "rsum", "phi", "nseen")})
        if k > 0 and prox:
            out["head"] = ((2,), np.float64)
        if hyper.get("subspace_map") == "srht" and k > 0:
            out = {"w": ((size,), np.float64), "G": ((size,), np.float64), "signs": ((size,), np.float64),
                   "rows": ((k,), np.int64), "S0": ((k, k), np.float64), "scal": ((3,), np.float64)}
        return out

    def _arrays(self):
        if self.srht:
            return {f: getattr(self, f) for f in ("w", "G", "signs", "rows", "S0", "scal")}
        pages = self.pages
        out = {}
        entries = pages.entries() if pages.worth_it() else None
        for f in _TABLES:
            a = getattr(self, f)
            out[f] = pages.table(a, entries) if entries is not None and a.shape[0] == pages.size else a
        for f in _SMALL + (("head",) if self.eager else ()):
            out[f] = getattr(self, f)
        return out

    def _load_arrays(self, arrays):
        if self.srht:  # the map is the model's: rows distinct in range, signs +-1
            for f in ("w", "G", "signs", "rows", "S0", "scal"):
                setattr(self, f, np.array(arrays[f], dtype=getattr(self, f).dtype).reshape(getattr(self, f).shape))
            require(bool(np.isin(self.signs, (-1.0, 1.0)).all()), "array signs: not +-1")
            require(bool(((self.rows >= 0) & (self.rows < len(self.w))).all()) and len(np.unique(self.rows)) == self.k,
                    "array rows: out of range or repeated")
            require(all_nonnegative(self.G), "array G: a negative entry")
            require(_symmetric(self.S0), "array S0: not symmetric")
            return
        # shapes / dtypes / finiteness are checked (saved_shapes, Learner.check_saved); the kernels
        # index the tables with ``hash & mask`` and buckets < k only: no index array to check
        for f in _TABLES:
            cur = getattr(self, f)
            setattr(self, f, self.pages.load(f, arrays[f], cur.shape, cur.dtype, track=cur.shape[0] == self.pages.size,
                                             owned=adopting()))
        for f in _SMALL + (("head",) if self.eager else ()):
            setattr(self, f, np.array(arrays[f], dtype=np.float64).reshape(getattr(self, f).shape))
        require(all_nonnegative(self.G), "array G: a negative entry")
        require(all_nonnegative(self.lastt), "array lastt: a negative entry")
        require(bool((self.phi >= 0).all()) and bool((self.nseen >= 0).all())
                and bool((self.nseen == np.floor(self.nseen)).all()) and float(self.nseen.sum()) <= len(self.w),
                "array phi / nseen: out of range")
        require(_symmetric(self.S0), "array S0: not symmetric")
        require(self.k == 0 or float(np.abs(self.V.T @ self.V - np.eye(self.k)).max()) < 1e-6, "array V: not orthogonal")
        sc = self.scal
        require(sc[0] <= sc[1] and sc[2] >= 0, "array scal: label range or round count out of range")
        if self.eager:
            require(bool(_kernels.check_list(self._state(), self._hp())),
                    "arrays lastt / bsnap / head: not the list of the features in the map")
