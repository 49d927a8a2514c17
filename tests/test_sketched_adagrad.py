"""The sparse S-ADA / Fast S-ADA / FTSL / FTFSL learners (streamlearn.algos.sketched_adagrad)
against the dense references of tests/naive_sketched_adagrad.py (Yang et al. 2025 Alg. 1-3 with
NOTES_ADA's corrections, App. A.1's low-rank inverse root): equal to 1e-6 relative over 5,000
examples of SON Sec. 5.1's design and over a sparse hashed stream; the full-rank limits (full-matrix
AdaGrad) and FTFSL = FTSL on gradients of rank < tau hold through the sparse learners; re-bases do
not change the result; -b does not matter; a saved model continues bit for bit."""
import numpy as np
import pytest

from naive_fd_son import son_synthetic
from naive_sketched_adagrad import FTFSL, FTSL, FastSADA, FullAdaGrad, SADA
from streamlearn.algos import LEARNERS, make_learner
from streamlearn.algos.losses import get_loss
from streamlearn.batch import Batch

REFS = {"s-ada": SADA, "fast-s-ada": FastSADA, "ftsl": FTSL, "ftfsl": FTFSL}
NAMES = list(REFS)


def _learner(name, tau, eta=0.5, delta=1e-6, loss="logistic", **kw):
    return make_learner(name, {"sketch_size": tau, "learning_rate": eta, "delta": delta, "loss_function": loss, **kw})


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b))))


def _batch(X, y, hashes=None, weights=None):
    return Batch.from_dense(X, y, hashes=np.arange(X.shape[1], dtype=np.uint32) if hashes is None else hashes,
                            weights=weights)


def _moved(p, y):
    """The run learned: its later predictions classify better than chance (guards comparisons of
    learners that never moved)."""
    half = len(y) // 2
    return np.mean(np.sign(p[half:]) == y[half:]) > 0.6


@pytest.fixture(scope="module")
def son5000():
    return son_synthetic(T=5000, d=100, kappa=200, seed=1)


@pytest.mark.parametrize("name", NAMES)
def test_equals_dense_reference_on_son_design(name, son5000):
    X, y = son5000
    L = _learner(name, 10)
    p, _ = L.learn_batch(_batch(X, y))
    ref = REFS[name](100, 10, 0.5, 1e-6, lowrank=True).run(X, y)
    assert _rel(p, ref) < 1e-6
    assert _moved(p, y)
    s = L.extra_summary()
    assert s["shrinks"] > (4000 if not L.fast else 300) and s["folds"] > 300  # the sketch did discard and fold


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("loss", ["squared", "hinge"])
def test_equals_dense_reference_other_losses(name, loss):
    X, y = son_synthetic(T=800, d=30, kappa=50, seed=2)
    if loss == "squared":
        y = X @ np.random.default_rng(0).standard_normal(30) / 10
    L = _learner(name, 4, eta=0.05 if loss == "squared" else 0.5, loss=loss)
    p, _ = L.learn_batch(_batch(X, y))
    ref = REFS[name](30, 4, 0.05 if loss == "squared" else 0.5, 1e-6, loss=loss, lowrank=True).run(X, y)
    assert _rel(p, ref) < 1e-6
    assert np.std(p[400:]) > 0


def _sparse_hashed(T=5000, d=300, seed=4, density=0.05):
    """A sparse stream over d features with random 32-bit hashes (distinct under -b 18 and -b 24)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, d)) * rng.gamma(1.0, 1.0, d)
    X[rng.random((T, d)) > density] = 0.0
    X[:, 0] = 1.0  # a constant feature
    y = np.where(X @ rng.standard_normal(d) > 0, 1.0, -1.0)
    while True:
        h = rng.integers(0, 2**32, d, dtype=np.uint64).astype(np.uint32)
        if len(np.unique(h & ((1 << 18) - 1))) == d:
            return X, y, h


@pytest.mark.parametrize("name", NAMES)
def test_equals_dense_reference_on_sparse_hashed_stream(name):
    X, y, h = _sparse_hashed()
    L = _learner(name, 8)
    p, _ = L.learn_batch(_batch(X, y, h))
    ref = REFS[name](X.shape[1], 8, 0.5, 1e-6, lowrank=True).run(X, y)
    assert _rel(p, ref) < 1e-6
    assert _moved(p, y)
    assert L.extra_summary()["folds"] > 100
    assert int(L.ints[1]) == X.shape[1]  # per-feature state only for the features seen


def _weighted(cls):
    class W(cls):
        """The reference learning from the gradient of h l (importance weight h)."""

        def run_weighted(self, X, y, h):
            out = []
            for i in range(len(y)):
                p = float(self.w @ X[i])
                self.t += 1
                self._learn(h[i] * float(self.loss.derivative(p, y[i])) * X[i])
                out.append(p)
            return np.array(out)
    return W


@pytest.mark.parametrize("name", ["ftsl", "ftfsl"])
def test_l2_is_regularised_dual_averaging(name):
    """--l2 lambda: x_{t+1} = -eta ((G~_t + delta I)^1/2 + eta t lambda I)^-1 gbar_t, the dense reference
    solving that system with d x d matrices, through shrinks and folds; it shrinks the weights;
    --l2 0 is the unregularised learner bit for bit; the mirror forms refuse it."""
    X, y = son_synthetic(T=600, d=20, kappa=50, seed=3)
    p0, _ = _learner(name, 4).learn_batch(_batch(X, y))
    q0, _ = _learner(name, 4, l2=0.0).learn_batch(_batch(X, y))
    assert np.array_equal(p0, q0)
    L = _learner(name, 4, l2=0.01)
    p, _ = L.learn_batch(_batch(X, y))
    ref = REFS[name](20, 4, 0.5, 1e-6, l2=0.01).run(X, y)
    assert _rel(p, ref) < 1e-6
    assert L.extra_summary()["shrinks"] > 50 and L.extra_summary()["folds"] > 20
    A = _learner(name, 4)
    A.learn_batch(_batch(X, y))
    keys = np.arange(20)
    assert np.linalg.norm(L.weights_dense(keys)) < np.linalg.norm(A.weights_dense(keys))
    for mirror in ("s-ada", "fast-s-ada"):
        with pytest.raises(ValueError, match="l2"):
            _learner(mirror, 4, l2=0.01)


@pytest.mark.parametrize("name", NAMES)
def test_importance_weights_scale_the_gradient(name):
    X, y = son_synthetic(T=600, d=20, kappa=30, seed=5)
    h = np.random.default_rng(1).choice([0.5, 1.0, 3.0], size=len(y))
    L = _learner(name, 4)
    p, _ = L.learn_batch(_batch(X, y, weights=h))
    ref = _weighted(REFS[name])(20, 4, 0.5, 1e-6, lowrank=True).run_weighted(X, y, h)
    assert _rel(p, ref) < 1e-6
    unweighted = REFS[name](20, 4, 0.5, 1e-6, lowrank=True).run(X, y)
    assert _rel(p, unweighted) > 1e-3  # the weights did matter


def _stream(T, d, seed, rank=None):
    rng = np.random.default_rng(seed)
    if rank is None:
        X = rng.standard_normal((T, d)) * np.linspace(0.3, 3.0, d)
    else:
        X = rng.standard_normal((T, rank)) @ rng.standard_normal((rank, d))
    X = X @ np.linalg.qr(rng.standard_normal((d, d)))[0]
    y = np.where(X @ rng.standard_normal(d) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("name,tau", [("s-ada", 8), ("ftsl", 8), ("fast-s-ada", 5), ("ftfsl", 5)])
@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_full_rank_is_full_matrix_adagrad(name, tau, loss):
    """tau >= d (FD) / 2 tau > d (fast FD): what is discarded is isotropic and added back, G~ = G + delta I
    (delta inside the root):
    full-matrix AdaGrad in the mirror (S-ADA) or primal-dual (FTSL) form, 1,000 rounds at d = 8."""
    d = 8
    X, y = _stream(1000, d, seed=6)
    if loss == "squared":
        y = X @ np.random.default_rng(2).standard_normal(d)
    eta = 0.5 if loss == "logistic" else 0.05
    L = _learner(name, tau, eta=eta, delta=0.1, loss=loss)
    p, _ = L.learn_batch(_batch(X, y))
    form = "dual" if L.dual else "mirror"
    full = FullAdaGrad(d, eta, 0.1, loss=loss, form=form).run(X, y)
    assert _rel(p, full) < 1e-9
    smaller = _learner(name, tau - 1, eta=eta, delta=0.1, loss=loss)
    q, _ = smaller.learn_batch(_batch(X, y))
    assert _rel(q, full) > 1e-6  # one size smaller it is a different algorithm


def test_ftfsl_equals_ftsl_below_rank_tau():
    """Gradients of rank 4 < tau = 6: neither sketch discards anything, so FTFSL = FTSL (and both
    are primal-dual full-matrix AdaGrad on the span); on full-rank data they part."""
    X, y = _stream(1500, 30, seed=7, rank=4)
    a, _ = _learner("ftsl", 6).learn_batch(_batch(X, y))
    b, _ = _learner("ftfsl", 6).learn_batch(_batch(X, y))
    assert _rel(a, b) < 1e-9
    assert _moved(a, y)
    X, y = _stream(500, 30, seed=7)
    a, _ = _learner("ftsl", 6).learn_batch(_batch(X, y))
    b, _ = _learner("ftfsl", 6).learn_batch(_batch(X, y))
    assert _rel(a, b) > 1e-6


@pytest.mark.parametrize("name", NAMES)
def test_rebases_do_not_change_the_result(name):
    """max_cond 1 re-bases on every fold (Z <- C [Z; G] on every feature); 1e8 only
    when the fold's matrix is that ill-conditioned: both equal the dense reference. (Without
    re-bases, 1e300, the fast forms drift to ~1e-5: the folds' conditioning compounds.)"""
    X, y, h = _sparse_hashed(T=1500, d=80, density=0.2)
    ref = REFS[name](80, 5, 0.5, 1e-6, lowrank=True).run(X, y)
    counts = {}
    for mc in (1.0, 1e8):
        L = _learner(name, 5, max_cond=mc)
        p, _ = L.learn_batch(_batch(X, y, h))
        s = L.extra_summary()
        assert _rel(p, ref) < 1e-6, mc
        counts[mc] = (s["rebases"], s["folds"])
    assert counts[1.0][0] >= counts[1.0][1] - 1 > 50  # every fold but the first (Z empty) re-based
    assert counts[1e8][0] < counts[1.0][0] / 2


def test_condition_estimate_does_not_read_an_unresolvable_cond_as_finite(monkeypatch):
    """The fold's cond(P1) comes from P^T P's eigenvalues, whose absolute error is ~ n eps
    lambda_max: a cond of 1e9 read as ~4e8 and an exactly singular P1 as finite, so --max_cond 1e9
    let an exactly singular P1 into the solve (ZeroDivisionError in a pass of a sparse stream).
    Past 1e7 the estimate is inf (a re-base); below it, it is numpy's to 1%."""
    from streamlearn.algos import _fd_son_kernels as F, _sketched_adagrad_kernels as K
    monkeypatch.setattr(K, "_eigh", F._eigh.py_func)  # the kernels' own eigh, from Python
    rng = np.random.default_rng(0)
    for c in (1e2, 1e4, 1e6, 5e6, 1e8, 1e9, 1e12):
        Q1 = np.linalg.qr(rng.standard_normal((9, 9)))[0]
        Q2 = np.linalg.qr(rng.standard_normal((9, 9)))[0]
        P = Q1 @ np.diag(np.logspace(0, -np.log10(c), 9)) @ Q2
        est = K._sa_cond.py_func(P)
        if c <= 5e6:
            assert est == pytest.approx(np.linalg.cond(P), rel=1e-2), c
        else:
            assert est == np.inf, c
    P = Q1 @ np.diag([1.0] * 8 + [0.0]) @ Q2  # singular: rounding leaves P^T P's least eigenvalue ~1e-17
    assert K._sa_cond.py_func(P) == np.inf


@pytest.mark.slow
def test_large_max_cond_keeps_learning_on_a_sparse_stream():
    """The stream that raised ZeroDivisionError at --max_cond 1e9 (5 passes of 2,000 examples of 150
    of 100,000 hashed features, tau = 10): it now learns every pass with finite predictions, also at
    --max_cond inf (an exactly singular P1 re-bases whatever --max_cond is)."""
    rng = np.random.default_rng(0)
    T, d, s = 2000, 100_000, 149
    idx = np.sort(rng.integers(0, d, (T, s)), axis=1)
    hashes = rng.integers(0, 2**32, d + 1, dtype=np.uint64).astype(np.uint32)
    ind = np.concatenate([hashes[idx], np.full((T, 1), hashes[d], np.uint32)], axis=1).ravel()
    vals = np.concatenate([rng.standard_normal((T, s)), np.ones((T, 1))], axis=1).ravel()
    w = rng.standard_normal(d + 1)
    z = (w[np.concatenate([idx, np.full((T, 1), d)], axis=1)] * vals.reshape(T, s + 1)).sum(axis=1)
    b = Batch(np.arange(T + 1, dtype=np.int64) * (s + 1), ind, vals, np.where(z > 0, 1.0, -1.0), np.ones(T))
    for mc in (1e9, 1e12, np.inf):
        L = _learner("s-ada", 10, max_cond=mc)
        for _ in range(6):
            p, _ = L.learn_batch(b)
            assert np.all(np.isfinite(p)), mc
        assert L.extra_summary()["folds"] > 6 * (T - 10), mc  # a new direction almost every example


def test_rank_one_eigen_update_equals_numpy():
    """The per-example eigen step diag(lam) + t t^T (deflation of zero components and of equal
    eigenvalues, the secular equation, Gu-Eisenstat eigenvectors) against numpy's eigh, on generic,
    rank-deficient, tied, nearly-deflated and zero cases."""
    from streamlearn.algos._sketched_adagrad_kernels import rank1_eig
    rng = np.random.default_rng(0)
    for trial in range(300):
        m = int(rng.integers(1, 22))
        lam = np.sort(np.abs(rng.standard_normal(m)) * 10 ** rng.uniform(-3, 3))[::-1].copy()
        t = rng.standard_normal(m) * 10 ** rng.uniform(-3, 3)
        kind = trial % 6
        if kind == 1:
            lam[-(m // 2):] = 0.0  # a rank-deficient sketch: repeated zeros
        elif kind == 2 and m > 3:
            lam[1] = lam[2] = lam[3]  # ties
        elif kind == 3:
            t[rng.integers(0, m, m // 2)] = 0.0  # g inside part of the eigen-basis
        elif kind == 4:
            t[0] *= 1e-14  # nearly deflated
        elif kind == 5:
            lam[:] = 0.0  # the first round
        A = np.diag(lam) + np.outer(t, t)
        mu, W = rank1_eig(lam, t)
        ref = np.linalg.eigvalsh(A)[::-1]
        scale = max(float(np.abs(ref).max()), 1e-300)
        assert np.abs(mu - ref).max() <= 1e-12 * scale, trial
        assert np.abs(A @ W - W * mu).max() <= 1e-12 * scale, trial
        assert np.abs(W.T @ W - np.eye(m)).max() <= 1e-12, trial
    mu, W = rank1_eig(np.array([3.0, 1.0]), np.zeros(2))  # nothing to add
    assert np.array_equal(mu, [3.0, 1.0]) and np.array_equal(W, np.eye(2))


@pytest.mark.parametrize("name", ["s-ada", "ftfsl"])
def test_lazy_rebases_stale_features_and_history(name):
    """Re-based on every fold (max_cond 1) over a stream whose features come back rarely: most reads
    are of stale features (their [w_bar, Z column] behind by several re-bases, caught up through the
    history), the history is emptied (flushes), and the learner still equals the dense reference; a
    model saved while rows are stale and the history is not empty continues bit for bit."""
    X, y, h = _sparse_hashed(T=1200, d=300, density=0.03, seed=5)
    ref = REFS[name](300, 6, 0.5, 1e-6, lowrank=True).run(X, y)
    L = _learner(name, 6, max_cond=1.0)
    batch = _batch(X, y, h)
    p, _ = L.learn_batch(batch)
    assert _rel(p, ref) < 1e-6
    s = L.extra_summary()
    assert s["rebases"] > 100 and s["flushes"] >= 3
    stamps = L.tab[L.keys >= 0, 5]
    assert (stamps < L.n_rebase).mean() > 0.5  # most features are stale at the end
    cut = 700
    A = _learner(name, 6, max_cond=1.0)
    A.learn_batch(batch.slice(0, cut))
    assert A.n_rebase > int(A.ints[10])  # the history holds re-bases
    meta, arrays = A.state_dict()
    assert arrays["hist"].shape[0] == A.n_rebase - int(A.ints[10])
    B = LEARNERS[name].from_state(meta, {k: np.array(v) for k, v in arrays.items()})
    q, _ = B.learn_batch(batch.slice(cut, len(y)))
    assert np.array_equal(q, p[cut:])


@pytest.mark.parametrize("name", NAMES)
def test_bit_precision_does_not_matter(name):
    """-b 24 and -b 18 give the same predictions on the same data (no collisions under either):
    identical when the keys are the same, equal to round-off when only the table layout differs."""
    X, y, h = _sparse_hashed(T=1500, d=120, density=0.1)
    small = (h & ((1 << 18) - 1)).astype(np.uint32)
    a, _ = _learner(name, 6, bit_precision=18).learn_batch(_batch(X, y, small))
    b, _ = _learner(name, 6, bit_precision=24).learn_batch(_batch(X, y, small))
    assert np.array_equal(a, b)
    c, _ = _learner(name, 6, bit_precision=18).learn_batch(_batch(X, y, h))
    d, _ = _learner(name, 6, bit_precision=24).learn_batch(_batch(X, y, h))
    assert _rel(c, d) < 1e-9
    assert np.array_equal(a, c)  # same keys under -b 18 either way


@pytest.mark.parametrize("name", NAMES)
def test_save_restore_continues_bit_for_bit(name):
    """Cut anywhere (mid-epoch of the fast forms, with a deferred shrink, before and after the
    first fold), the restored learner continues exactly."""
    X, y, h = _sparse_hashed(T=600, d=60, density=0.2)
    batch = _batch(X, y, h)
    full, _ = _learner(name, 4).learn_batch(batch)
    cls = LEARNERS[name]
    for cut in (1, 3, 7, 8, 9, 250):
        L = _learner(name, 4)
        L.learn_batch(batch.slice(0, cut))
        meta, arrays = L.state_dict()
        R = cls.from_state(meta, {k: np.array(v) for k, v in arrays.items()})
        q, _ = R.learn_batch(batch.slice(cut, len(y)))
        assert np.array_equal(q, full[cut:]), cut


@pytest.mark.parametrize("name", NAMES)
def test_predict_only_changes_nothing_and_skips_unseen(name):
    X, y, h = _sparse_hashed(T=300, d=50, density=0.2)
    L = _learner(name, 4)
    L.learn_batch(_batch(X[:200], y[:200], h))
    before = L.state_dict()[1]
    p, _ = L.predict_batch(_batch(X[200:], y[200:], h))
    after = L.state_dict()[1]
    assert all(np.array_equal(before[k], after[k]) for k in before)
    w = L.weights_dense(h & L.mask)
    assert np.allclose(p, X[200:] @ w, rtol=1e-9, atol=1e-12)


def test_weights_and_basis_introspection():
    """weights_dense is the w whose predictions the learner makes, and the basis V = C [Z; G] has
    orthonormal rows (the sketch is V^T M V)."""
    X, y, h = _sparse_hashed(T=700, d=40, density=0.3)
    for name in NAMES:
        L = _learner(name, 5)
        L.learn_batch(_batch(X[:600], y[:600], h))
        keys = h.astype(np.int64) & L.mask
        V = L.basis_dense(keys)
        assert np.allclose(V @ V.T, np.eye(V.shape[0]), atol=1e-8)
        p, _ = L.predict_batch(_batch(X[600:], y[600:], h))
        assert np.allclose(p, X[600:] @ L.weights_dense(keys), rtol=1e-9, atol=1e-12)


def test_options_are_checked():
    with pytest.raises(ValueError, match="sketch_size"):
        _learner("ftsl", 0)
    with pytest.raises(ValueError, match="delta"):
        _learner("s-ada", 3, delta=-1.0)
    with pytest.raises(ValueError, match="loss_function"):
        _learner("ftfsl", 3, loss="quantile")
    assert get_loss("hinge")  # the losses the learners take
