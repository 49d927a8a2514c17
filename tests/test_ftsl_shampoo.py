"""FTSL-Shampoo for ``--oaa K`` (``--algo ftsl-shampoo``) against the dense references of
``tests/naive_sketched_adagrad.py`` (``Shampoo``, ``FTSLShampoo``: Yang et al. 2025 Alg. 4-5), the
softmax learner's outputs (``-p``, ``--probabilities``), hashing (``-b``) and the options."""
import numpy as np
import pytest

from naive_sketched_adagrad import FTSLShampoo as RefFTSLShampoo
from naive_sketched_adagrad import Shampoo as RefShampoo
from streamlearn.algos import make_learner
from streamlearn.batch import Batch


def _stream(n, d, K, seed=0, sparse=0.0):
    """Dense (or ``sparse``: that share of entries zeroed) features on scales 0.2..2, labels the
    argmax of K noisy linear scores."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.uniform(0.2, 2.0, d)
    if sparse:
        X[rng.random((n, d)) < sparse] = 0.0
    y = np.argmax(X @ rng.standard_normal((d, K)) + 0.5 * rng.standard_normal((n, K)), axis=1) + 1.0
    return X, y


def _hashes(d, seed=1):
    return np.random.default_rng(seed).choice(2**32, d, replace=False).astype(np.uint32)


def _learner(K, bits=18, **hp):
    L = make_learner("ftsl-shampoo", dict(oaa=K, bit_precision=bits, **hp))
    L.set_probabilities(True)
    return L


def _learn(L, X, y, hashes):
    p, loss = L.learn_batch(Batch.from_dense(X, y, hashes=hashes))
    return p, loss, L.last_probabilities


def _ref_probs(R, X, y):
    """The dense reference run one example at a time, with the softmax it predicted from."""
    probs = []
    for i in range(len(y)):
        s = R.W @ X[i]
        e = np.exp(s - s.max())
        probs.append(e / e.sum())
        R.step(X[i], y[i])
    return np.array(probs)


def _rel(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def test_full_size_sketches_equal_full_shampoo():
    """tau_L = K and tau_R = d: the sketched learner is full (primal-dual) Shampoo: the same
    probabilities, losses and weight matrix to 1e-9 relative."""
    n, d, K, eta, eps = 400, 7, 3, 0.5, 1e-3
    X, y = _stream(n, d, K, seed=3)
    h = _hashes(d)
    L = _learner(K, learning_rate=eta, shampoo_eps=eps, left_sketch_size=K, right_sketch_size=d)
    _, loss, probs = _learn(L, X, y, h)
    R = RefShampoo(K, d, eta, eps, form="dual")
    ref_probs = _ref_probs(R, X, y)
    ref_loss = -np.log(ref_probs[np.arange(n), y.astype(int) - 1])
    assert _rel(probs, ref_probs) < 1e-9
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-9)
    W = L.weights_dense(h.astype(np.int64) & L.row_mask)
    assert _rel(W, R.W) < 1e-9
    assert L.n_rebase > 0  # the sparse basis was re-based along the way
    # one size smaller on the right it is a different algorithm
    S = _learner(K, learning_rate=eta, shampoo_eps=eps, left_sketch_size=K, right_sketch_size=d - 2)
    _, _, small = _learn(S, X, y, h)
    assert _rel(small, ref_probs) > 1e-4


def test_sparse_learner_equals_dense_ftsl_shampoo():
    """Sketched on both sides (tau_L = 2 < K, tau_R = 5 < d), sparse rows, 5,000 examples: the
    hashed sparse learner (basis V = F Z, re-bases) is the dense FTSLShampoo (Alg. 5) to 1e-6
    relative: weights, cross-entropies, probabilities, and the sketches' accumulated shrinks."""
    n, d, K, eta, eps = 5000, 16, 4, 0.3, 1e-3
    X, y = _stream(n, d, K, seed=5, sparse=0.5)
    h = _hashes(d, seed=2)
    L = _learner(K, learning_rate=eta, shampoo_eps=eps, left_sketch_size=2, right_sketch_size=5)
    pred, loss, probs = _learn(L, X, y, h)
    R = RefFTSLShampoo(K, d, eta, eps, 2, 5)
    ref_probs = _ref_probs(R, X, y)
    ref_loss = -np.log(ref_probs[np.arange(n), y.astype(int) - 1])
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-6)
    assert _rel(probs, ref_probs) < 1e-6
    W = L.weights_dense(h.astype(np.int64) & L.row_mask)
    assert _rel(W, R.W) < 1e-6
    np.testing.assert_allclose(L.flt, [R.left.rho, R.right.rho], rtol=1e-6)
    assert R.left.rho > 0 and R.right.rho > 0  # both sides did shrink
    assert L.n_rebase > 10 and L.extra_summary()["rebases_on_every_feature"] > 0  # lazy re-bases, flushes
    clear = np.sort(ref_probs, axis=1)[:, -1] - np.sort(ref_probs, axis=1)[:, -2] > 1e-6
    np.testing.assert_array_equal(pred[clear], np.argmax(ref_probs, axis=1)[clear] + 1)


def test_importance_weight_scales_the_gradient():
    """Weight h: the gradient of h times the loss, G = h q a^T. Weight 0 learns nothing; weight 2
    on every example doubles G, which Shampoo undoes exactly when eps is 4 times larger (L~ and
    R~ scale by 4, their -1/4 powers by 1/sqrt(2) each)."""
    n, d, K = 300, 6, 3
    X, y = _stream(n, d, K, seed=7)
    h = _hashes(d)
    L = _learner(K, left_sketch_size=2, right_sketch_size=3)
    L.learn_batch(Batch.from_dense(X, y, hashes=h, weights=np.zeros(n)))
    assert not L.tab.any() and not L.UL.any() and L.examples_learned == n
    A = _learner(K, left_sketch_size=2, right_sketch_size=3, shampoo_eps=1e-3)
    B = _learner(K, left_sketch_size=2, right_sketch_size=3, shampoo_eps=4e-3)
    _, _, pa = _learn(A, X, y, h)
    pb, _ = B.learn_batch(Batch.from_dense(X, y, hashes=h, weights=np.full(n, 2.0)))
    assert _rel(B.last_probabilities, pa) < 1e-9


def test_bits_24_and_18_same_predictions():
    """Hashing: with no collisions among the features, -b 24 and -b 18 give the same predictions
    (the table holds the features seen, not 2^b rows)."""
    n, d, K = 1500, 30, 5
    X, y = _stream(n, d, K, seed=11, sparse=0.6)
    h = _hashes(d, seed=4)
    rows18 = (h.astype(np.int64) & ((1 << (18 - 3)) - 1))
    assert len(np.unique(rows18)) == d  # no collision at -b 18 (5 classes take 3 bits)
    a = _learner(K, bits=18)
    b = _learner(K, bits=24)
    pa, la, qa = _learn(a, X, y, h)
    pb, lb, qb = _learn(b, X, y, h)
    np.testing.assert_array_equal(pa, pb)
    np.testing.assert_allclose(qa, qb, rtol=1e-9, atol=1e-12)
    assert a.keys.shape == b.keys.shape  # sized by the features seen


def test_predict_only_leaves_state_and_unseen_features():
    n, d, K = 200, 10, 3
    X, y = _stream(n, d, K, seed=2)
    h = _hashes(d)
    L = _learner(K, sketch_size=4)
    _learn(L, X[:, :6], y, h[:6])
    keys, tab = L.keys.copy(), L.tab.copy()
    p, _ = L.predict_batch(Batch.from_dense(X, y, hashes=h))  # 4 features never seen
    np.testing.assert_array_equal(L.keys, keys)
    np.testing.assert_array_equal(L.tab, tab)
    p6, _ = L.predict_batch(Batch.from_dense(X[:, :6], y, hashes=h[:6]))
    np.testing.assert_array_equal(p, p6)


@pytest.mark.parametrize("hyper,msg", [
    ({}, "needs --oaa K"),
    ({"oaa": 3, "loss_function": "squared"}, "softmax regression"),
    ({"oaa": 3, "loss_function": "multiclass_logistic"}, "softmax already"),
    ({"oaa": 3, "sketch_size": 0}, "sketch_size"),
    ({"oaa": 3, "shampoo_eps": 0.0}, "shampoo_eps"),
])
def test_bad_options(hyper, msg):
    with pytest.raises(ValueError, match=msg):
        make_learner("ftsl-shampoo", hyper)


def _write_libsvm(path, X, y):
    with open(path, "w") as f:
        for xi, yi in zip(X, y):
            f.write(f"{int(yi)} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(xi) if v) + "\n")


def test_cli_predictions_probabilities_and_model(tmp_path, invoke_cli):
    """``-p`` gives class ids, ``--probabilities`` the softmax (rows sum to 1, argmax = -p's
    class); a saved model predicts a second file as the trained learner does."""
    X, y = _stream(600, 8, 4, seed=9)
    train, test = tmp_path / "train.libsvm", tmp_path / "test.libsvm"
    _write_libsvm(train, X[:400], y[:400])
    _write_libsvm(test, X[400:], y[400:])
    model, p1, p2, p3, p4 = (tmp_path / f for f in ("m.slm", "p1", "p2", "p3", "p4"))
    base = ["train", train, "--oaa", 4, "--algo", "ftsl-shampoo", "-m", 3, "-l", 0.3]
    r = invoke_cli(*base, "-p", p1, "-f", model)
    assert r.exit_code == 0, r.output
    r = invoke_cli(*base, "-p", p2, "--probabilities")
    assert r.exit_code == 0, r.output
    cls = np.loadtxt(p1)
    probs = np.array([[float(t.split(":")[1]) for t in line.split()] for line in open(p2)])
    assert probs.shape == (400, 4)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(np.argmax(probs, axis=1) + 1, cls)
    assert np.mean(cls != y[:400]) < 0.5  # learns (chance 0.75)
    r = invoke_cli("predict", "-i", model, test, "-p", p3)
    assert r.exit_code == 0, r.output
    r = invoke_cli("predict", "-i", model, test, "-p", p4, "--probabilities")
    assert r.exit_code == 0, r.output
    probs4 = np.array([[float(t.split(":")[1]) for t in line.split()] for line in open(p4)])
    np.testing.assert_array_equal(np.argmax(probs4, axis=1) + 1, np.loadtxt(p3))
