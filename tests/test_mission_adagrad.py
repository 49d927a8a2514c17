"""MISSION ``--step_rule adagrad``: per-feature AdaGrad steps whose squared-gradient sums live in
a count-min sketch sharing the weight sketch's buckets (Spring et al., ICML 2019). Checked
against dense NumPy references written from the description: AdaGrad (Duchi et al. 2011) on
dense weights, and a count-min sketch (Cormode and Muthukrishnan 2005) built with ``np.add.at``."""
import numpy as np
import pytest

pytest.importorskip("streamlearn.algos._mission_kernels")

from streamlearn.algos.mission import Mission  # noqa: E402
from streamlearn.batch import Batch  # noqa: E402

from naive_olbfgs import dense_grad  # noqa: E402


def dense_adagrad(X, y, K, code, b, eta, passes, w=None):
    """Minibatch AdaGrad on dense weights ``(max(K, 1), p)``: per minibatch of ``b`` rows (a pass
    ends with a partial one) the mean gradient ``g`` (:func:`dense_grad`, the learners'
    convention), then for every coordinate with ``g != 0``: ``G += g^2``, ``B -= eta g / sqrt(G)``.
    Returns the weights and the predictions made before each row's step (class ids for K > 0)."""
    n, p = X.shape
    w = np.ones(n) if w is None else w
    B = np.zeros((max(K, 1), p))
    G2 = np.zeros_like(B)
    preds = []
    lrange = [0.0, 0.0]
    for _ in range(passes):
        for a in range(0, n, b):
            idx = slice(a, min(a + b, n))
            g, P = dense_grad(X[idx], y[idx], w[idx], B, code, K, lrange)
            preds.append(P.argmax(1) + 1.0 if code == 3 else P[:, 0])
            nz = g != 0
            G2[nz] += g[nz] ** 2
            B[nz] -= eta * g[nz] / np.sqrt(G2[nz])
    return B, np.concatenate(preds)


@pytest.mark.parametrize("K,loss,b", [(4, None, 3), (0, "logistic", 5)])
def test_adagrad_equals_dense_adagrad_without_collisions(K, loss, b, collision_free_keys, learner_weights):
    """No collisions and k >= p: the count-min sums are each feature's exact sums, and MISSION
    equals dense AdaGrad (predictions, weights) over two passes; plain MISSION (sgd) does not."""
    rng = np.random.default_rng(40 + K)
    n, p, R, W = 70, 12, 3, 50
    X = rng.normal(size=(n, p))
    X[rng.random((n, p)) < 0.4] = 0.0  # sparse rows: features with g = 0 in a minibatch keep their step
    if K:
        y = rng.integers(1, K + 1, n).astype(float)
        code, kw = 3, dict(oaa=K, example_norm="none")
    else:
        y = np.where(X[:, :3] @ np.array([1.0, -1.0, 0.5]) > 0, 1.0, -1.0)
        code, kw = 1, dict(loss_function=loss)
    keys = collision_free_keys(p, R, W, seed=7)
    Bref, pref = dense_adagrad(X, y, K, code, b, 0.3, 2)
    L = Mission(sketch_rows=R, sketch_width=W, top_k=p, minibatch=b, learning_rate=0.3, step_rule="adagrad", **kw)
    batch = Batch.from_dense(X, y, hashes=keys)
    preds = []
    for _ in range(2):
        preds.append(L.learn_batch(batch)[0])
        L.finish()
    np.testing.assert_allclose(np.concatenate(preds), pref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(learner_weights(L, keys), Bref, rtol=1e-9, atol=1e-12)
    S = Mission(sketch_rows=R, sketch_width=W, top_k=p, minibatch=b, learning_rate=0.3, **kw)
    for _ in range(2):
        S.learn_batch(batch)
        S.finish()
    assert not np.allclose(learner_weights(S, keys), Bref, rtol=1e-3)


def test_count_min_add_query_is_the_reference_and_over_estimates():
    """The accumulator's ADD + QUERY (``cm_add_query``) on a stream of (feature, class, g^2) with
    many collisions (64 features, 3 x 8 cells): the cells equal a count-min sketch built with
    ``np.add.at`` on the same buckets, each answer is the minimum over rows after the ADD, and
    never below the feature's exact sum (so a collision only shortens a step)."""
    from streamlearn.algos._mission_kernels import cm_add_query
    from streamlearn.algos._sketch_kernels import build_active
    rng = np.random.default_rng(2)
    R, W, K, p = 3, 8, 2, 64
    keys = rng.integers(0, 2**32, p, dtype=np.uint64).astype(np.uint32)
    seeds = Mission(sketch_rows=R, sketch_width=W).seeds
    akeys, _, _, abk, _ = build_active(np.array([0, p]), keys, np.array([0]), 1, seeds, W)
    assert np.array_equal(akeys, keys)
    acc = np.zeros((R, W, K))
    ref = np.zeros((R, W, K))
    exact = np.zeros((p, K))
    for _ in range(400):
        a, c, g2 = int(rng.integers(p)), int(rng.integers(K)), float(rng.exponential())
        got = cm_add_query(acc, c, abk, a, g2)
        np.add.at(ref, (np.arange(R), abk[a], c), g2)
        exact[a, c] += g2
        assert got == ref[np.arange(R), abk[a], c].min()
        assert got >= exact[a, c] * (1 - 1e-12)
    np.testing.assert_allclose(acc, ref, rtol=1e-12)
    assert (acc.sum(axis=(1,)) > 0).all()


def test_adagrad_model_round_trip_and_old_models_stay_sgd():
    """The accumulator is saved: a model saved mid-stream continues exactly as the run that was
    not interrupted; a model saved before --step_rule (no such hyper-parameter) continues with
    sgd, as a learner given --step_rule sgd; a sgd model holds no accumulator."""
    rng = np.random.default_rng(9)
    X = rng.normal(size=(60, 10))
    y = rng.integers(1, 4, 60).astype(float)
    keys = (np.arange(1, 11) * 2654435761 % 2**32).astype(np.uint32)
    b1, b2 = Batch.from_dense(X[:30], y[:30], hashes=keys), Batch.from_dense(X[30:], y[30:], hashes=keys)
    kw = dict(oaa=3, sketch_rows=2, sketch_width=12, top_k=5)  # collisions: the count-min's over-estimates matter
    full = Mission(step_rule="adagrad", **kw)
    assert full.eta == Mission.default_lr_adagrad_unit_oaa
    full.learn_batch(b1)
    meta, arrays = full.state_dict()
    assert arrays["acc"].shape == (3, 2, 12) and (arrays["acc"] > 0).any()
    cont = Mission.from_state(meta, arrays)
    np.testing.assert_array_equal(cont.learn_batch(b2)[1], full.learn_batch(b2)[1])
    np.testing.assert_array_equal(cont.sketch, full.sketch)
    np.testing.assert_array_equal(cont.acc, full.acc)
    with pytest.raises(ValueError, match="acc"):
        Mission.from_state(meta, {**arrays, "acc": -arrays["acc"]})
    auto = Mission(**kw)  # --oaa K on unit rows: auto is adagrad (step defaults version 3), saved as auto
    assert auto.adagrad and auto.eta == 0.6 and auto.k == 5
    auto.learn_batch(b1)
    meta, arrays = auto.state_dict()
    assert meta["hyper"]["step_rule"] == "auto" and meta["step_defaults"] == 3 and "acc" in arrays
    cont = Mission.from_state(meta, arrays)
    assert cont.adagrad
    np.testing.assert_array_equal(cont.learn_batch(b2)[1], auto.learn_batch(b2)[1])
    # a model saved with auto under step defaults version 2 (sgd) holds no accumulator and stays sgd
    sgd = Mission(step_rule="sgd", **kw)
    sgd.learn_batch(b1)
    meta, arrays = sgd.state_dict()
    meta = {**meta, "step_defaults": 2, "hyper": {**meta["hyper"], "step_rule": "auto"}}
    assert "acc" not in arrays
    v2 = Mission.from_state(meta, arrays)
    assert not v2.adagrad and v2.eta == 3.0
    old_meta = {**meta, "hyper": {k: v for k, v in meta["hyper"].items() if k != "step_rule"}}
    old = Mission.from_state(old_meta, arrays)
    given = Mission.from_state({**meta, "hyper": {**meta["hyper"], "step_rule": "sgd"}}, arrays)
    assert not old.adagrad and not given.adagrad
    np.testing.assert_array_equal(old.learn_batch(b2)[1], given.learn_batch(b2)[1])


@pytest.mark.parametrize("K", [0, 3])
def test_adagrad_step_of_a_gradient_whose_square_underflows(K, collision_free_keys, learner_weights):
    """A feature value of 1e-300 makes ``g^2`` underflow to 0 in cells that hold nothing yet: the sum is 0
    and the step ``-eta g / sqrt(g^2)`` is taken as its limit ``-eta sign(g)`` (it divided by zero and
    stopped the run). The other features' steps are AdaGrad's, ``-eta sign(g)`` too on a first step."""
    R, W, p, eta = 3, 50, 3, 0.3
    keys = collision_free_keys(p, R, W, seed=11)
    X = np.array([[1.0, 1e-300, -1e-300]])
    kw = dict(oaa=K, example_norm="none") if K else dict(loss_function="logistic")
    y = np.array([2.0 if K else 1.0])
    L = Mission(sketch_rows=R, sketch_width=W, top_k=p, minibatch=1, learning_rate=eta, step_rule="adagrad", **kw)
    L.learn_batch(Batch.from_dense(X, y, hashes=keys))
    L.finish()
    w = learner_weights(L, keys)
    assert np.isfinite(w).all()
    # first step on every (class, feature): -eta sign(g), g = dloss * x; class 2 (or the label +1) is pulled up
    sign_d = np.array([1.0, -1.0, 1.0]) if K else np.array([-1.0])  # softmax: p - y; logistic: -y / (1 + e^0)
    expect = -eta * sign_d[:, None] * np.sign(X[0])[None, :]
    np.testing.assert_array_equal(w, expect)
