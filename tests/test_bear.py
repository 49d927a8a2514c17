"""BEAR (issue 4 parts 4, 5, 7): oLBFGS two-loop vs dense NumPy, BEAR == minibatch oLBFGS
without collisions, ring buffer, curvature guard, reload, batch-cut invariance, multiclass."""
import numpy as np
import pytest

sk = pytest.importorskip("streamlearn.algos._sketch_kernels")
bk = pytest.importorskip("streamlearn.algos._bear_kernels")

from streamlearn.algos import COMMON_PARAMS, LEARNERS  # noqa: E402
from streamlearn.algos.bear import Bear  # noqa: E402
from streamlearn.batch import CONSTANT_HASH, Batch  # noqa: E402

from conftest import heap_masks  # noqa: E402
from naive_olbfgs import dense_olbfgs, dense_two_loop  # noqa: E402


# -- helpers (the dense references are in naive_olbfgs.py; collision_free_keys and
# learner_weights are conftest fixtures) --
def named_batch(X, y, hashes, prefix="f", ns="s"):
    """A CSR batch from dense X whose entries carry names ``ns^<prefix><j>`` in ``text``."""
    b = Batch.from_dense(X, y, hashes=hashes)
    col = {int(h): j for j, h in enumerate(hashes)}
    parts, nsS, nsE, nmS, nmE = [], [], [], [], []
    pos = 0
    for h in b.indices:
        nm = f"{prefix}{col[int(h)]}".encode()
        nsS.append(pos)
        nsE.append(pos + len(ns))
        nmS.append(pos + len(ns) + 1)
        nmE.append(pos + len(ns) + 1 + len(nm))
        tok = ns.encode() + b" " + nm + b" "
        parts.append(tok)
        pos += len(tok)
    b.text = np.frombuffer(b"".join(parts), np.uint8).copy()
    b.name_start, b.name_end = np.array(nmS, np.int64), np.array(nmE, np.int64)
    b.ns_start, b.ns_end = np.array(nsS, np.int64), np.array(nsE, np.int64)
    return b


# -- two-loop ---------------------------------------------------------------------------------
def _ring(tau, pairs_sparse):
    """Push sparse pairs (keys, s, r dicts) through ring_push; returns the ring arrays."""
    rs_keys = np.zeros((tau, 2), np.int64)
    rs_vals = np.zeros((tau, 2))
    rr_keys = np.zeros((tau, 2), np.int64)
    rr_vals = np.zeros((tau, 2))
    rs_len = np.zeros(tau, np.int64)
    rr_len = np.zeros(tau, np.int64)
    sr = np.zeros(tau)
    rr = np.zeros(tau)
    counters = np.zeros(4, np.int64)
    for ck, s, r in pairs_sparse:
        rs_keys, rs_vals, rr_keys, rr_vals = bk.ring_push(
            ck, s, r, rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len, sr, rr, counters, 1e-8)
    return rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len, sr, rr, counters


@pytest.mark.parametrize("npairs", [0, 1, 3, 5, 8])
def test_two_loop_matches_dense(npairs):
    rng = np.random.default_rng(npairs)
    U = 40  # universe of coordinates (class << 32 | hash)
    ukeys = (np.int64(1) << 32) * rng.integers(0, 2, U) + rng.integers(0, 2**32, U)
    tau = 5
    pairs_dense, sparse = [], []
    A = rng.normal(size=(U, U))
    H = A @ A.T / U + np.eye(U)  # SPD: every pair passes the curvature guard
    for _ in range(npairs):
        sup = rng.choice(U, rng.integers(5, 25), replace=False)  # own support per pair
        s = np.zeros(U)
        s[sup] = rng.normal(size=len(sup))
        r = H @ s
        r[rng.random(U) < 0.2] = 0.0  # r on a different support than s
        if s @ r <= 1e-8 * np.linalg.norm(s) * np.linalg.norm(r):
            continue
        pairs_dense.append((s, r))
        sparse.append((ukeys, s, r))
    ring = _ring(tau, sparse)
    assert ring[-1][2] == min(len(pairs_dense), tau)
    act = rng.choice(U, 15, replace=False)  # the current active coordinates
    g = np.zeros(U)
    g[act] = rng.normal(size=15)
    zd = dense_two_loop(g, pairs_dense[-tau:])
    rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len, sr, rr, counters = ring
    z = bk.two_loop(g[act], ukeys[act], rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len,
                    sr, rr, counters[1], counters[2])
    np.testing.assert_allclose(z, zd[act], rtol=1e-10, atol=1e-12)


def test_ring_overwrites_oldest_and_guard():
    ck = np.arange(3, dtype=np.int64)
    pairs = [(ck, np.array([i + 1.0, 0, 0]), np.array([1.0, 0, 0])) for i in range(7)]
    ring = _ring(3, pairs)
    rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len, sr, rr, counters = ring
    assert counters[2] == 3 and counters[1] == 7 % 3
    # the three newest (s = 5, 6, 7) remain; newest at head - 1
    newest = (counters[1] - 1) % 3
    assert rs_vals[newest, 0] == 7.0
    assert sorted(rs_vals[:, 0].tolist()) == [5.0, 6.0, 7.0]
    assert rs_len.tolist() == [1, 1, 1]
    # a pair with s.r <= 0 (or tiny relative to |s||r|) is dropped, not stored
    bad = [(ck, np.array([1.0, 0, 0]), np.array([-1.0, 0, 0])),
           (ck, np.array([1.0, 0, 0]), np.array([1e-12, 1.0, 0])),
           (ck, np.array([1.0, 0, 0]), np.zeros(3))]
    ring = _ring(3, bad)
    assert ring[-1][2] == 0 and ring[-1][3] == 3


def test_ring_grows_capacity():
    ck = np.arange(50, dtype=np.int64)
    s = np.linspace(1, 2, 50)
    ring = _ring(2, [(ck, s, 2 * s)])
    assert ring[0].shape[1] >= 50 and ring[2][0] == 50
    np.testing.assert_array_equal(ring[1][0, :50], s)


@pytest.mark.parametrize("cap,s", [(8, [1.0, 0, 2.0, 0, 3.0, 0]), (6, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])])
def test_ring_push_stores_the_pair_and_nothing_after_it(cap, s):
    """A pair with r on every coordinate: s's non-zero entries in order, r by position, and the
    entries after s's last (stale, saved with the ring) unchanged, also when s ends in zeros;
    ``cap`` 8: room after s's last entry, 6: none (s on every coordinate of a ring as wide as the pair)."""
    ck = np.arange(10, 16, dtype=np.int64)
    s = np.array(s)
    r = 2 * s + 1.0
    rs_keys = np.full((2, cap), -7, np.int64)
    rs_vals = np.full((2, cap), -7.0)
    rr_keys = np.full((2, cap), -7, np.int64)
    rr_vals = np.full((2, cap), -7.0)
    rs_len, rr_len, sr, rr, counters = np.zeros(2, np.int64), np.zeros(2, np.int64), np.zeros(2), np.zeros(2), \
        np.zeros(4, np.int64)
    rs_keys, rs_vals, rr_keys, rr_vals = bk.ring_push(ck, s, r, rs_keys, rs_vals, rs_len, rr_keys, rr_vals, rr_len,
                                                      sr, rr, counters, 1e-8)
    assert rs_keys.shape == (2, cap) and counters[2] == 1
    nz = s != 0
    n = int(nz.sum())
    assert rs_len[0] == n and rr_len[0] == 6
    np.testing.assert_array_equal(rs_keys[0, :n], ck[nz])
    np.testing.assert_array_equal(rs_vals[0, :n], s[nz])
    assert (rs_keys[0, n:] == -7).all() and (rs_vals[0, n:] == -7.0).all()
    np.testing.assert_array_equal(rr_keys[0, :6], ck)
    np.testing.assert_array_equal(rr_vals[0, :6], r)
    assert (rs_keys[1] == -7).all() and (rr_vals[1] == -7.0).all()


# -- BEAR vs dense minibatch oLBFGS -------------------------------------------------------------
@pytest.mark.parametrize("loss,code,damping,const", [("squared", 0, 0.0, False), ("logistic", 1, 0.0, False),
                                                     ("logistic", 1, 1.0, False), ("squared", 0, 0.0, True)])
def test_bear_equals_olbfgs_without_collisions(loss, code, damping, const, collision_free_keys, learner_weights):
    """``const``: column 0 is the constant feature (an offset in the labels): its weight is the
    intercept, in the model from the first step (the reference's ``intercept``)."""
    rng = np.random.default_rng(7)
    n, p, R, W = 150, 24, 3, 96
    X = rng.normal(size=(n, p))
    beta = np.zeros(p)
    beta[:4] = [1.0, -0.8, 1.2, 0.9]
    y = X @ beta + 0.1 * rng.normal(size=n)
    if code == 1:
        y = np.where(y > 0, 1.0, -1.0)
    keys = collision_free_keys(p, R, W)
    if const:
        X[:, 0] = 1.0
        y = y + 2.0
        keys[0] = CONSTANT_HASH
    eta, b, passes = 0.1, 10, 3
    Bref, pref = dense_olbfgs(X, y, 0, code, b, eta, passes, damping=damping, intercept=0 if const else None)
    if const:  # the constant as a feature (before issue 21's fix) gives another model: no pair at t = 0
        assert not np.allclose(dense_olbfgs(X, y, 0, code, b, eta, passes, damping=damping)[1], pref)
    L = Bear(sketch_rows=R, sketch_width=W, top_k=p, minibatch=b, learning_rate=eta,
             loss_function=loss, curvature_damping=damping, example_norm="none")
    batch = Batch.from_dense(X, y, hashes=keys)
    preds = np.concatenate([L.learn_batch(batch)[0] for _ in range(passes)])
    L.finish()
    np.testing.assert_allclose(preds, pref, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(learner_weights(L, keys), Bref, rtol=1e-7, atol=1e-9)
    assert L.counters[2] == 5  # the history is full
    assert L.examples_learned == passes * n


def test_bear_multiclass_equals_joint_olbfgs(collision_free_keys, learner_weights):
    rng = np.random.default_rng(8)
    n, p, K, R, W = 120, 12, 3, 3, 64
    X = rng.normal(size=(n, p))
    Wt = rng.normal(size=(K, p)) * (rng.random((K, p)) < 0.4) * 2
    y = (X @ Wt.T).argmax(1) + 1.0
    keys = collision_free_keys(p, R, W, seed=1)
    Bref, pref = dense_olbfgs(X, y, K, 3, 10, 0.5, 2, damping=0.5)
    L = Bear(sketch_rows=R, sketch_width=W, top_k=p, minibatch=10, learning_rate=0.5, oaa=K, example_norm="none",
             curvature_damping=0.5)
    assert L.multiclass
    batch = Batch.from_dense(X, y, hashes=keys)
    out = [L.learn_batch(batch) for _ in range(2)]
    preds = np.concatenate([o[0] for o in out])
    np.testing.assert_array_equal(preds, pref)
    np.testing.assert_allclose(learner_weights(L, keys), Bref, rtol=1e-7, atol=1e-9)
    # softmax's r is on every (class, feature) of its minibatch: the pairs were stored without codes
    # and the two-loop read them by position (a reloaded ring, indexed from its keys, takes the codes:
    # test_bear_membership_map_and_pair_index_change_no_result)
    assert (L.rr_code[:, 0] == -2).all() and (L.rr_len == K * L.pnf).all()
    loss = out[-1][1]
    assert np.all(loss > 0) and np.all(np.isfinite(loss))
    acc = np.mean(L.predict_batch(batch)[0] == y)
    assert acc > 0.8
    with pytest.raises(ValueError):
        L.learn_batch(Batch.from_dense(X[:2], np.array([0.0, 1.0]), hashes=keys))


@pytest.mark.parametrize("K,code", [(3, 3), (0, 1)])
def test_initial_scaling_adagrad_equals_dense(K, code, collision_free_keys, learner_weights):
    """--initial_scaling adagrad (H0 = gamma D, D the AdaGrad diagonal on the minibatch's features)
    == the dense reference without collisions, multiclass and binary, with the intercept."""
    rng = np.random.default_rng(21)
    n, p, R, W = 90, 12, 3, 64
    X = rng.normal(size=(n, p)) * (rng.random((n, p)) < 0.4)
    X[:, -1] = 1.0  # the constant feature (intercept)
    if K:
        y = (X @ (rng.normal(size=(K, p)) * 2).T).argmax(1) + 1.0
    else:
        y = np.where(X[:, :3] @ np.array([1.0, -1.0, 0.7]) > 0, 1.0, -1.0)
    keys = collision_free_keys(p - 1, R, W, seed=2)
    keys = np.append(keys, CONSTANT_HASH).astype(keys.dtype)
    Bref, pref = dense_olbfgs(X, y, K, code, 5, 0.3, 2, damping=0.1, h0="adagrad", intercept=p - 1)
    L = Bear(sketch_rows=R, sketch_width=W, top_k=p, minibatch=5, learning_rate=0.3, oaa=K, example_norm="none",
             curvature_damping=0.1, initial_scaling="adagrad", **({} if K else {"loss_function": "logistic"}))
    batch = Batch.from_dense(X, y, hashes=keys)
    preds = np.concatenate([L.learn_batch(batch)[0] for _ in range(2)])
    np.testing.assert_allclose(preds, pref, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(learner_weights(L, keys), Bref, rtol=1e-7, atol=1e-9)
    assert L.counters[2] == 5  # pairs were used
    if K:  # the cap gamma <= 1 binds in the last minibatch (the newest pair's s.r / r.D r > 1)
        assert L.ring_sr[(L.counters[1] - 1) % 5] > L.ring_rdr[(L.counters[1] - 1) % 5]
    # and it is not Alg. 1's scalar scaling
    Bg, _ = dense_olbfgs(X, y, K, code, 5, 0.3, 2, damping=0.1, intercept=p - 1)
    assert np.abs(Bg - Bref).max() > 0.1


class _BearTopkR(Bear):
    secant_topk = True


def test_secant_topk_equals_masked_olbfgs_without_collisions(collision_free_keys, learner_weights):
    """Bear.secant_topk (r restricted to the top-k set) == dense oLBFGS with r masked there."""
    rng = np.random.default_rng(17)
    n, p, R, W = 120, 20, 3, 80
    X = rng.normal(size=(n, p)) * (rng.random((n, p)) < 0.5)
    y = np.where(X[:, :3] @ np.array([1.0, -1.0, 0.7]) > 0, 1.0, -1.0)
    keys = collision_free_keys(p, R, W, seed=3)
    Bref, pref = dense_olbfgs(X, y, 0, 1, 10, 0.2, 2, damping=0.5, mask_r=True)
    L = _BearTopkR(sketch_rows=R, sketch_width=W, top_k=p, minibatch=10, learning_rate=0.2,
                   loss_function="logistic", curvature_damping=0.5, example_norm="none")
    batch = Batch.from_dense(X, y, hashes=keys)
    preds = np.concatenate([L.learn_batch(batch)[0] for _ in range(2)])
    np.testing.assert_allclose(preds, pref, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(learner_weights(L, keys), Bref, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("masked", [False, True])
def test_secant_pair_support_vs_top_k(masked):
    """Alg. 2's r = g(beta_t+1) - g(beta_t) lives on all of A_t (also off the top-k; this is
    what makes gamma = s.r/r.r small on text); with Bear.secant_topk it lives on the top-k set
    of the iteration only (regression for the heap-full blow-up of BEAR on news20)."""
    rng = np.random.default_rng(5)
    n, p = 200, 300
    X = (rng.random((n, p)) < 0.05) * rng.integers(1, 4, (n, p)).astype(float)
    y = np.where(X[:, :10].sum(1) > X[:, 10:20].sum(1), 1.0, -1.0)
    keys = rng.permutation(np.unique(rng.integers(0, 2**32, 2 * p).astype(np.uint32)))[:p]
    cls = _BearTopkR if masked else Bear
    L = cls(sketch_rows=3, sketch_width=64, top_k=20, minibatch=10, learning_rate=0.1,
            loss_function="logistic", curvature_damping=1.0)
    batch = Batch.from_dense(X, y, hashes=keys)
    off = 0
    for a in range(0, n, 10):
        before = set(L.top_features()[1].tolist())
        pushed = int(L.counters[2]), int(L.counters[1])
        L.learn_batch(batch.slice(a, a + 10))
        if (int(L.counters[2]), int(L.counters[1])) == pushed:
            continue  # pair rejected
        slot = (int(L.counters[1]) - 1) % L.tau
        rk = set((L.rr_keys[slot, :L.rr_len[slot]] & 0xFFFFFFFF).tolist())
        sk_ = set((L.rs_keys[slot, :L.rs_len[slot]] & 0xFFFFFFFF).tolist())
        assert sk_ <= before
        off += len(rk - before)
        if masked:
            assert rk <= before
    assert (off == 0) if masked else (off > 0)


def test_prediction_uses_only_top_k(collision_free_keys):
    rng = np.random.default_rng(9)
    n, p = 400, 40
    X = rng.normal(size=(n, p))
    beta = np.zeros(p)
    beta[:3] = [2.0, -1.5, 1.0]
    y = X @ beta
    keys = collision_free_keys(p, 3, 160, seed=2)
    L = Bear(sketch_rows=3, sketch_width=160, top_k=3, minibatch=10, learning_rate=0.1, example_norm="none")
    batch = Batch.from_dense(X, y, hashes=keys)
    for _ in range(5):
        L.learn_batch(batch)
    cls, hk, w, names = L.top_features()
    assert set(hk.tolist()) == set(keys[:3].tolist())
    allw = L.query(keys)
    Xt = rng.normal(size=(5, p))
    pred, _ = L.predict_batch(Batch.from_dense(Xt, np.full(5, np.nan), hashes=keys))
    top = np.isin(keys, hk)
    np.testing.assert_allclose(pred, Xt[:, top] @ allw[top], rtol=1e-12)


# -- streaming contracts ------------------------------------------------------------------------
def _stream(seed=10, n=203, p=60, K=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * (rng.random((n, p)) < 0.3)
    beta = np.zeros(p)
    beta[:6] = rng.uniform(0.8, 1.2, 6)
    y = np.where(X @ beta > 0, 1.0, -1.0) if K == 0 else rng.integers(1, K + 1, n).astype(float)
    y[rng.random(n) < 0.05] = np.nan  # unlabeled rows: predicted, never learned
    keys = rng.integers(0, 2**32, p).astype(np.uint32)
    return named_batch(X, y, keys), keys


@pytest.mark.parametrize("cls", ["bear", "mission"])
@pytest.mark.parametrize("K", [0, 3])
def test_batch_cut_invariance(cls, K, same_state):
    batch, _ = _stream(K=K)
    hyper = dict(sketch_rows=3, sketch_width=40, top_k=8, minibatch=7,
                 loss_function="logistic", oaa=K)
    A = LEARNERS[cls](**hyper)
    pa, la = A.learn_batch(batch)
    A.finish()
    rng = np.random.default_rng(0)
    for trial in range(3):
        B = LEARNERS[cls](**hyper)
        cuts = np.sort(rng.choice(np.arange(1, batch.n), 6 + trial * 5, replace=False))
        bounds = [0, *cuts.tolist(), batch.n]
        outs = [B.learn_batch(batch.slice(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]
        B.finish()
        np.testing.assert_array_equal(np.concatenate([o[0] for o in outs]), pa)
        np.testing.assert_array_equal(np.concatenate([o[1] for o in outs]), la)
        same_state(A, B)
        assert A.top_features()[3] == B.top_features()[3]


@pytest.mark.parametrize("cls,extra", [("bear", {}), ("mission", {}), ("bear", {"initial_scaling": "adagrad"})])
def test_reload_bit_identical_mid_minibatch(cls, extra, same_state):
    batch, _ = _stream(seed=11)
    hyper = dict(sketch_rows=3, sketch_width=32, top_k=6, minibatch=9, history=3, **extra) \
        if cls == "bear" else dict(sketch_rows=3, sketch_width=32, top_k=6, minibatch=9)
    A = LEARNERS[cls](**hyper)
    A.learn_batch(batch.slice(0, 100))  # leaves a partial minibatch buffered
    assert A.pending_rows > 0
    meta, arrays = A.state_dict()
    import json
    meta = json.loads(json.dumps(meta))  # the meta must be JSON-able
    B = LEARNERS[cls].from_state(meta, {k: np.array(v) for k, v in arrays.items()})
    same_state(A, B)
    pa, la = A.learn_batch(batch.slice(100, batch.n))
    pb, lb = B.learn_batch(batch.slice(100, batch.n))
    A.finish()
    B.finish()
    np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(la, lb)
    same_state(A, B)
    # and equal to an uninterrupted run
    C = LEARNERS[cls](**hyper)
    pc, _ = C.learn_batch(batch)
    C.finish()
    np.testing.assert_array_equal(pc[100:], pa)
    same_state(A, C)


@pytest.mark.parametrize("cls", ["bear", "mission"])
def test_unlabeled_rows_do_not_update(cls):
    batch, _ = _stream(seed=12)
    A = LEARNERS[cls](sketch_rows=3, sketch_width=40, top_k=8, minibatch=4)
    A.learn_batch(batch)
    A.finish()
    meta, arr = A.state_dict()
    u = batch.slice(0, 30)
    u.labels = np.full(30, np.nan)
    pred, loss = A.learn_batch(u)
    A.finish()
    assert np.all(np.isnan(loss))
    _, arr2 = A.state_dict()
    for k in arr:
        np.testing.assert_array_equal(arr[k], arr2[k])
    p2, _ = A.predict_batch(u)
    np.testing.assert_array_equal(pred, p2)


def test_names_and_summary():
    batch, keys = _stream(seed=13)
    A = Bear(sketch_rows=3, sketch_width=50, top_k=10, minibatch=5, loss_function="logistic")
    for _ in range(3):
        A.learn_batch(batch)
    A.finish()
    cls, hk, w, names = A.top_features()
    assert len(hk) == 10 and np.all(np.diff(np.abs(w)) <= 0)
    col = {int(k): j for j, k in enumerate(keys)}
    assert names == [f"s^f{col[int(h)]}" for h in hk]
    s = A.extra_summary()
    assert s["distinct_features"] == pytest.approx(60, abs=3)
    assert s["compression_factor"] == pytest.approx(60 / 150, abs=0.03)
    assert s["sketch_bytes"] == 3 * 50 * 8


def test_sizing_options():
    assert Bear(sketch_bytes=8000, sketch_rows=5).W == 200
    assert Bear(sketch_bytes=8000, sketch_rows=5, oaa=4).W == 50
    assert Bear(bit_precision=10, sketch_rows=4).W == 256
    with pytest.raises(ValueError):
        Bear(sketch_bytes=100, sketch_width=10)
    with pytest.raises(ValueError):
        Bear(oaa=1)
    names = [p.name for p in Bear.PARAMS + COMMON_PARAMS]  # --oaa is common to every learner
    assert {"sketch_rows", "sketch_width", "sketch_bytes", "top_k", "minibatch", "history",
            "oaa", "learning_rate", "step_schedule", "t0"} <= set(names)
    assert Bear.native_multiclass


def test_inverse_schedule_and_override():
    batch, _ = _stream(seed=14)
    A = Bear(sketch_rows=3, sketch_width=40, top_k=8, step_schedule="inverse", t0=5.0)
    A.learn_batch(batch)
    A.override(learning_rate=0.05, step_schedule="constant")
    assert A.eta == 0.05 and A.schedule == 0
    with pytest.raises(ValueError):
        A.override(top_k=3)


def test_select_module_and_command(tmp_path, invoke_cli):
    import json

    from streamlearn.api import save_model
    from streamlearn.select import format_rows, select_rows

    batch, keys = _stream(seed=15)
    A = Bear(sketch_rows=3, sketch_width=50, top_k=6, minibatch=5, loss_function="logistic")
    for _ in range(3):
        A.learn_batch(batch)
    A.finish()
    rows = select_rows(A, 4)
    assert len(rows) == 4 and all(r.name.startswith("s^f") for r in rows)
    assert [abs(r.weight) for r in rows] == sorted((abs(r.weight) for r in rows), reverse=True)
    path = tmp_path / "m.slm"
    save_model(str(path), A, {})
    res = invoke_cli("select", "-i", path, "--top_k", "4")
    assert res.exit_code == 0, res.output
    assert res.output == format_rows(rows, "tsv")
    assert res.output.splitlines()[0] == "name\thash\tweight"
    res = invoke_cli("select", "-i", path, "--format", "json")
    data = json.loads(res.output)
    assert len(data) == 6 and data[0]["name"] == rows[0].name and data[0]["hash"] == rows[0].hash
    M = Bear(sketch_rows=3, sketch_width=20, top_k=3, oaa=3)
    b3, _ = _stream(seed=16, K=3)
    M.learn_batch(b3)
    M.finish()
    r3 = select_rows(M)
    assert {r.cls for r in r3} <= {1, 2, 3} and "\tclass" in format_rows(r3).splitlines()[0]


# -- issue 21 defect 1: the label-range clip must not enter the curvature pairs ---------------
def _sec6_problem(seed, P=1000, N=900, k=8):
    """BEAR Sec. 6's design as benchmarks/bear_fig1.py draws it: y = X beta*, beta* 8-sparse."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, P))
    beta = np.zeros(P)
    sup = rng.choice(P, k, replace=False)
    beta[sup] = rng.uniform(0.8, 1.2, k)
    keys = rng.permutation(np.unique(rng.integers(0, 2**32, 2 * P).astype(np.uint32)))[:P]
    return Batch.from_dense(X, X @ beta, hashes=keys)


@pytest.mark.parametrize("seed", [1000, 1013])
def test_clip_does_not_blow_up_curvature_pairs(seed):
    """Compression factor 3 (3 x 111 cells for 1,000 features), step 0.1, --sketch_seed 0 (the CLI's
    default), up to 50 passes: with the clip inside both gradients of r = g(beta1) - g(beta0), these
    two data seeds reached weights of 7e27 and 1e5 (losses 1e56 and 1e10). With r from the
    unclipped derivative every weight stays below 10 (the true weights are in [0.8, 1.2])."""
    batch = _sec6_problem(seed)
    L = Bear(sketch_rows=3, sketch_width=111, sketch_seed=0, top_k=8, minibatch=10, learning_rate=0.1,
             example_norm="none")
    for _ in range(50):
        _, loss = L.learn_batch(batch)
        L.finish()
        assert np.all(np.isfinite(loss))
        if np.mean(loss) < 1e-12:
            break
    _, _, w, _ = L.top_features()
    assert np.max(np.abs(w)) < 10.0
    assert np.mean(loss) < 100.0


def test_curvature_pairs_unclipped_equal_reference(collision_free_keys, learner_weights):
    """Squared loss with a step large enough that the clip binds: BEAR (no collisions, k >= p)
    equals the dense oLBFGS whose step uses the clipped gradient and whose r uses the unclipped
    one, and not the one that clips r too (the defect); --no_clip equals the reference without
    any clip."""
    rng = np.random.default_rng(11)
    n, p, R, W = 200, 20, 3, 80
    X = rng.normal(size=(n, p)) * 2.0
    y = X[:, :3] @ np.array([1.0, -1.0, 0.5])
    keys = collision_free_keys(p, R, W, seed=4)
    Bref, pref = dense_olbfgs(X, y, 0, 0, 10, 0.3, 1)
    Bold, _ = dense_olbfgs(X, y, 0, 0, 10, 0.3, 1, clip_r=True)
    Bnc, pnc = dense_olbfgs(X, y, 0, 0, 10, 0.3, 1, clip=False)
    assert not np.allclose(Bref, Bold) and not np.allclose(Bref, Bnc)
    for kw, (Bexp, pexp) in (({}, (Bref, pref)), ({"no_clip": True}, (Bnc, pnc))):
        L = Bear(sketch_rows=R, sketch_width=W, top_k=p, minibatch=10, learning_rate=0.3, example_norm="none", **kw)
        pred = L.learn_batch(Batch.from_dense(X, y, hashes=keys))[0]
        L.finish()
        np.testing.assert_allclose(pred, pexp, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(learner_weights(L, keys), Bexp, rtol=1e-8, atol=1e-10)


def test_mb_gradient_clip_flag():
    """The kernel's gradient: clipped to the label range learned so far (and says so) or not."""
    args = (np.array([0, 1], np.int64), np.array([2.0]), np.array([1.0]), np.array([1.0]),
            np.array([0], np.int64), 1, np.array([0], np.int64), np.array([[5.0]]))
    Gc, Gu = np.zeros((1, 1)), np.zeros((1, 1))
    assert sk.mb_gradient(0, *args, Gc, np.zeros(2), True) is True
    assert sk.mb_gradient(0, *args, Gu, np.zeros(2), False) is False
    assert Gc[0, 0] == 0.0 and Gu[0, 0] > 0.0  # clipped to the label 1: no error


# -- class membership map and the two-loop's pair index (issue 21: bear --oaa at VW's pace) -----
def test_bear_membership_map_and_pair_index_change_no_result(same_state):
    """bear --oaa K keeps MISSION's class membership map (one look-up per feature for Alg. 2 line 3):
    after learning with many evictions, after a load (rebuilt from the heaps) and after a merge it
    equals a scan of the heaps; the two-loop's pair index (codes derived from the keys, never saved)
    is rebuilt after a load. Neither changes a result: the same stream with per-class look-ups (the
    map switched off), and a run reloaded mid-stream, give the uninterrupted run's predictions and
    state to the bit."""
    from streamlearn.distributed import merge as M
    rng = np.random.default_rng(8)
    n, p, K = 120, 300, 5
    keys = rng.choice(2**32, p, replace=False).astype(np.uint32)
    kw = dict(oaa=K, sketch_rows=5, sketch_width=61, top_k=6, history=3)

    def batch(seed):
        r = np.random.default_rng(seed)
        X = r.normal(size=(n, p)) * (r.random((n, p)) < 0.04)
        return Batch.from_dense(X, r.integers(1, K + 1, n).astype(float), hashes=keys)

    A, B = Bear(**kw), Bear(**kw)
    B.mkeys, B.mmask = np.zeros(0, np.uint32), np.zeros(0, np.uint64)  # no map: every class's heap
    assert A.membership() is None  # stale until the first minibatch
    pa = [A.learn_batch(batch(s))[0] for s in (1, 2)]
    m1 = A.membership()
    assert m1 == heap_masks(A) and int(A.mcount[0]) == len(m1)
    pb = [B.learn_batch(batch(s))[0] for s in (1, 2)]
    np.testing.assert_array_equal(np.concatenate(pa), np.concatenate(pb))
    same_state(A, B)
    assert B.membership() is None
    # reloaded mid-stream: map stale, pairs not indexed; continues as the uninterrupted run
    meta, arrays = A.state_dict()
    C = Bear.from_state(meta, {k: np.array(v) for k, v in arrays.items()})
    assert C.membership() is None and (C.pnf == -1).all() and int(C.counters[2]) == 3
    np.testing.assert_array_equal(C.learn_batch(batch(3))[0], A.learn_batch(batch(3))[0])
    same_state(A, C)
    assert A.membership() == heap_masks(A) != m1  # members left and entered
    assert C.membership() == heap_masks(C)
    # merged: the map of the merged heaps
    other = Bear(**kw)
    other.learn_batch(batch(4))
    m = M.learner_of(M.merge_states([M.state_of(A, {}), M.state_of(other, {})]))
    m.learn_batch(batch(5))
    assert m.membership() == heap_masks(m)
    assert Bear(oaa=65, sketch_width=8, top_k=2).mkeys.shape == (0,) and Bear().mkeys.shape == (0,)


def test_ring_rejects_a_coordinate_of_a_class_the_model_lacks():
    """A loaded ring's coordinates index the two-loop's classes: a class outside 0..K-1 is refused."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 6))
    L = Bear(oaa=3, sketch_rows=3, sketch_width=16, top_k=4, minibatch=5)
    L.learn_batch(Batch.from_dense(X, rng.integers(1, 4, 40).astype(float), hashes=np.arange(1, 7, dtype=np.uint32)))
    meta, arrays = L.state_dict()
    assert int(L.counters[2]) > 0
    arrays = {k: np.array(v) for k, v in arrays.items()}
    Bear.from_state(meta, arrays)
    slot = (int(L.counters[1]) - 1) % L.tau
    arrays["rr_keys"][slot, 0] = (3 << 32) | 5
    with pytest.raises(ValueError, match="array rr_keys: a coordinate whose class is outside 0..2"):
        Bear.from_state(meta, arrays)


def test_saved_ring_holds_only_the_stored_pairs_and_continues_exactly(same_state):
    """Long pairs that the ring has since dropped (3 examples of 300 features, then 40 of 5) leave the
    in-memory ring 300 wide; the saved state cuts it to the longest pair still stored and zeroes what lies past
    each pair's length, and the learner loaded from it continues exactly as the one in memory."""
    rng = np.random.default_rng(3)
    big = Batch.from_dense(rng.standard_normal((3, 300)), np.ones(3),
                           hashes=rng.integers(1, 2**32, 300, dtype=np.uint64).astype(np.uint32))
    keys = rng.integers(1, 2**32, 40, dtype=np.uint64).astype(np.uint32)

    def small(n, seed):
        r = np.random.default_rng(seed)
        return Batch.from_dense(r.standard_normal((n, 5)), np.sign(r.standard_normal(n)), hashes=keys[r.integers(0, 40, 5)])

    A = Bear(history=3, minibatch=1, sketch_rows=3, sketch_width=64, top_k=50, loss_function="logistic")
    A.learn_batch(big)
    for i in range(8):
        A.learn_batch(small(5, i))
    A.finish()
    cap = A.rs_vals.shape[1]
    meta, arrays = A.state_dict()
    used = max(int(arrays["rs_len"].max()), int(arrays["rr_len"].max()))
    assert used < 300 <= cap  # the big pair was dropped; memory still holds its width
    for f, n in (("rs_keys", "rs_len"), ("rs_vals", "rs_len"), ("rr_keys", "rr_len"), ("rr_vals", "rr_len")):
        assert arrays[f].shape == (3, used), f
        past = np.arange(used)[None, :] >= arrays[n][:, None]
        assert (arrays[f][past] == 0).all() and (arrays[f][~past] == getattr(A, f)[:, :used][~past]).all(), f
    B = Bear.from_state(meta, {k: np.array(v) for k, v in arrays.items()})
    same_state(A, B)
    for i in range(8, 14):
        b = small(5, i) if i != 10 else big
        pa, _ = A.learn_batch(b)
        pb, _ = B.learn_batch(b)
        np.testing.assert_array_equal(pa, pb)
    A.finish()
    B.finish()
    same_state(A, B)
