"""MISSION (issue 4 parts 3, 5, 7): equal to plain minibatch SGD without collisions and with
k >= p; top-k prediction; multiclass; recovery on a small sparse problem."""
import numpy as np
import pytest

pytest.importorskip("streamlearn.algos._mission_kernels")

from streamlearn.algos.mission import Mission  # noqa: E402
from streamlearn.batch import Batch  # noqa: E402

from naive_olbfgs import dense_olbfgs  # noqa: E402


@pytest.mark.parametrize("loss,code,b", [("squared", 0, 1), ("squared", 0, 8), ("logistic", 1, 5),
                                         ("hinge", 2, 4)])
def test_mission_equals_sgd_without_collisions(loss, code, b, collision_free_keys, learner_weights):
    rng = np.random.default_rng(20 + b)
    n, p, R, W = 130, 20, 3, 80
    X = rng.normal(size=(n, p))
    beta = np.zeros(p)
    beta[:3] = [1.0, -1.0, 0.5]
    y = X @ beta
    if code:
        y = np.where(y > 0, 1.0, -1.0)
    w = rng.uniform(0.5, 2.0, n)  # importance weights
    keys = collision_free_keys(p, R, W, seed=3)
    Bref, pref = dense_olbfgs(X, y, 0, code, b, 0.05, 2, second_order=False, w=w)
    L = Mission(sketch_rows=R, sketch_width=W, top_k=p, minibatch=b, learning_rate=0.05,
                loss_function=loss)
    batch = Batch.from_dense(X, y, weights=w, hashes=keys)
    preds = []
    for _ in range(2):  # the reference ends each pass with a partial minibatch: finish() too
        preds.append(L.learn_batch(batch)[0])
        L.finish()
    preds = np.concatenate(preds)
    np.testing.assert_allclose(preds, pref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(learner_weights(L, keys), Bref, rtol=1e-9, atol=1e-12)


def test_squared_loss_gradient_uses_the_label_range(collision_free_keys, learner_weights):
    """Squared loss: the gradient is taken at the score clipped to the labels' range so far
    (as VW clips); with a large step the scores overshoot, the clip binds, and the learner
    still equals the reference that clips (and not the one that does not)."""
    rng = np.random.default_rng(5)
    n, p, R, W = 120, 20, 3, 80
    X = rng.normal(size=(n, p)) * 3.0
    y = X[:, :3] @ np.array([1.0, -1.0, 0.5])
    keys = collision_free_keys(p, R, W, seed=3)
    Bref, pref = dense_olbfgs(X, y, 0, 0, 4, 0.05, 1, second_order=False)
    Bnc, pnc = dense_olbfgs(X, y, 0, 0, 4, 0.05, 1, second_order=False, clip=False)
    assert np.abs(pnc).max() > np.abs(y).max() * 10  # unclipped SGD runs away here
    L = Mission(sketch_rows=R, sketch_width=W, top_k=p, minibatch=4, learning_rate=0.05)
    pred = L.learn_batch(Batch.from_dense(X, y, hashes=keys))[0]
    L.finish()
    np.testing.assert_allclose(pred, pref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(learner_weights(L, keys), Bref, rtol=1e-9, atol=1e-12)
    assert not np.allclose(Bref, Bnc)
    np.testing.assert_array_equal(L.lrange, [y.min(), y.max()])


def test_mission_multiclass_equals_softmax_sgd(collision_free_keys, learner_weights):
    rng = np.random.default_rng(30)
    n, p, K = 90, 10, 4
    X = rng.normal(size=(n, p))
    y = rng.integers(1, K + 1, n).astype(float)
    keys = collision_free_keys(p, 3, 40, seed=4)
    Bref, pref = dense_olbfgs(X, y, K, 3, 6, 0.2, 2, second_order=False)
    L = Mission(sketch_rows=3, sketch_width=40, top_k=p, minibatch=6, learning_rate=0.2, oaa=K,
                example_norm="none")  # the paper's algorithm: examples as given
    batch = Batch.from_dense(X, y, hashes=keys)
    preds = np.concatenate([L.learn_batch(batch)[0] for _ in range(2)])
    np.testing.assert_array_equal(preds, pref)
    np.testing.assert_allclose(learner_weights(L, keys), Bref, rtol=1e-9, atol=1e-12)


def test_mission_recovers_sparse_support():
    rng = np.random.default_rng(31)
    n, p = 900, 200
    X = rng.normal(size=(n, p))
    beta = np.zeros(p)
    sup = rng.choice(p, 5, replace=False)
    beta[sup] = rng.uniform(0.8, 1.2, 5)
    y = X @ beta
    keys = rng.integers(0, 2**32, p).astype(np.uint32)
    L = Mission(sketch_rows=3, sketch_width=100, top_k=5, minibatch=10, learning_rate=0.01)
    batch = Batch.from_dense(X, y, hashes=keys)
    for _ in range(10):
        L.learn_batch(batch)
    _, hk, w, _ = L.top_features()
    assert set(hk.tolist()) == set(keys[sup].tolist())
    assert L.extra_summary()["compression_factor"] == pytest.approx(p / 300, rel=0.05)


def test_oaa_bad_labels_mask_and_api_error():
    L = Mission(oaa=3)
    lab = np.array([1, 3, 0, 4, 2.5, np.nan, -1, 2])
    assert L.bad_labels(lab).tolist() == [False, False, True, True, True, False, True, False]
    assert Mission().bad_labels(lab) is None  # binary / regression: any label
    b = Batch.from_dense(np.ones((2, 2)), np.array([1.0, 4.0]))
    with pytest.raises(ValueError, match=r"label 4 is not a class of --oaa 3 \(1\.\.3\)"):
        L.learn_batch(b)


def test_no_clip_equals_unclipped_sgd(collision_free_keys, learner_weights):
    """--no_clip: the gradient at the raw scores, equal to the reference without the clip (on
    the stream where the clip binds, so the default would not equal it)."""
    rng = np.random.default_rng(5)
    n, p, R, W = 120, 20, 3, 80
    X = rng.normal(size=(n, p)) * 3.0
    y = X[:, :3] @ np.array([1.0, -1.0, 0.5])
    keys = collision_free_keys(p, R, W, seed=3)
    Bnc, pnc = dense_olbfgs(X, y, 0, 0, 4, 0.01, 1, second_order=False, clip=False)
    Bc, _ = dense_olbfgs(X, y, 0, 0, 4, 0.01, 1, second_order=False)
    assert not np.allclose(Bc, Bnc)
    L = Mission(sketch_rows=R, sketch_width=W, top_k=p, minibatch=4, learning_rate=0.01, no_clip=True)
    pred = L.learn_batch(Batch.from_dense(X, y, hashes=keys))[0]
    L.finish()
    np.testing.assert_allclose(pred, pnc, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(learner_weights(L, keys), Bnc, rtol=1e-9, atol=1e-12)
