"""BEAR / MISSION keep the intercept apart (issue 21: the constant feature competed for a top-k
slot): its weight is used in every prediction, learned by the same update as the other
coordinates, outside the sketch and never in the heap; models saved before keep the constant
as a heap feature."""
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlearn.algos._sketch_kernels")

from streamlearn.algos import LEARNERS  # noqa: E402
from streamlearn.batch import CONSTANT_HASH, Batch  # noqa: E402

from naive_olbfgs import dense_topk  # noqa: E402

DATA = Path(__file__).parent / "data"


def _stream(seed, K, n=120, p=16):
    """A constant column (key CONSTANT_HASH) and p Gaussian features; binary labels with an
    offset, or K classes with class biases, so the intercept matters."""
    rng = np.random.default_rng(seed)
    X = np.hstack([np.ones((n, 1)), rng.normal(size=(n, p))])
    if K:
        Wt = rng.normal(size=(K, p)) * (rng.random((K, p)) < 0.4) * 2
        y = (X[:, 1:] @ Wt.T + 0.8 * np.arange(K)).argmax(1) + 1.0
    else:
        beta = np.zeros(p)
        beta[:8] = rng.uniform(0.5, 1.5, 8) * rng.choice([-1, 1], 8)
        y = np.where(X[:, 1:] @ beta + 1.0 + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("algo", ["mission", "bear"])
@pytest.mark.parametrize("K", [0, 3])
def test_intercept_kept_apart_equals_topk_reference(algo, K, collision_free_keys, learner_weights):
    """k = 5 of 16 features, no collisions: the learner equals BEAR Alg. 2 / MISSION with the
    top-k set of line 10 and an intercept always in the model (dense_topk), predictions, weights,
    intercept and selected sets. On this stream a constant treated as a feature (main before
    the fix) leaves the top-k set during the pass, so the two models differ."""
    X, y = _stream(0, K)
    p = X.shape[1] - 1
    R, W, k, b, eta = 3, 64, 5, 4, 0.3
    keys = np.concatenate([[CONSTANT_HASH], collision_free_keys(p, R, W, seed=7)]).astype(np.uint32)
    code = 3 if K else 1
    extra = dict(curvature_damping=0.5) if algo == "bear" else {}
    ref_kw = dict(second_order=algo == "bear", damping=0.5 if algo == "bear" else 0.0)
    Bref, pref, sets, _ = dense_topk(X, y, K, code, b, eta, 1, k, intercept=0, **ref_kw)
    # the old rule (the constant an ordinary feature) on the same stream: it is evicted
    Bold, pold, _, hist = dense_topk(X, y, K, code, b, eta, 1, k, intercept=None, **ref_kw)
    inside = [any(0 in h for h in step) for step in hist]
    assert any(a and not c for a, c in zip(inside, inside[1:])), "the stream must evict the constant"
    assert not np.array_equal(pold, pref)
    kw = dict(oaa=K) if K else dict(loss_function="logistic")
    L = LEARNERS[algo](sketch_rows=R, sketch_width=W, top_k=k, minibatch=b, learning_rate=eta, example_norm="none",
                       **kw, **extra)
    pred = L.learn_batch(Batch.from_dense(X, y, hashes=keys))[0]
    L.finish()
    np.testing.assert_allclose(pred, pref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(learner_weights(L, keys), Bref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(L.intercept, Bref[:, 0], rtol=1e-9, atol=1e-12)
    cls, hk, _, _ = L.top_features()
    for c in range(max(K, 1)):
        assert set(hk[cls == c].tolist()) == {int(keys[j]) for j in sets[c].w}
    assert CONSTANT_HASH not in hk.tolist()
    # the sketch holds the features' weights only (a Count Sketch is linear): the constant's
    # cells were never written, its weight lives in L.intercept
    from streamlearn.algos import _sketch_kernels as sk
    for c in range(max(K, 1)):
        S = np.zeros((R, W))
        sk.sketch_add_keys(S, L.seeds, keys[1:], Bref[c, 1:])
        np.testing.assert_allclose(L.sketch[:, :, c], S, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("algo", ["mission", "bear"])
def test_intercept_saved_and_reloaded(algo, same_state):
    """The intercept is part of the saved state (meta.intercept 'kept', array intercept); a
    reloaded learner continues identically."""
    X, y = _stream(1, 0)
    keys = np.arange(1, X.shape[1] + 1, dtype=np.uint32) * np.uint32(2654435761)
    keys[0] = CONSTANT_HASH
    b = Batch.from_dense(X, y, hashes=keys)
    A = LEARNERS[algo](sketch_rows=3, sketch_width=32, top_k=4, minibatch=3, loss_function="logistic")
    A.learn_batch(b.slice(0, 60))
    A.finish()
    assert A.intercept[0] != 0.0
    meta, arrays = A.state_dict()
    meta = json.loads(json.dumps(meta))
    assert meta["intercept"] == "kept" and arrays["intercept"].shape == (1,)
    B = LEARNERS[algo].from_state(meta, {k: np.array(v) for k, v in arrays.items()})
    same_state(A, B)
    np.testing.assert_array_equal(A.learn_batch(b.slice(60, 120))[0], B.learn_batch(b.slice(60, 120))[0])
    # a damaged file: an intercept kept apart but missing, or the constant in such a model's heap
    bad = dict(arrays)
    del bad["intercept"]
    with pytest.raises(ValueError, match="intercept is missing"):
        LEARNERS[algo].from_state(meta, bad)
    with pytest.raises(ValueError, match="meta.intercept"):
        LEARNERS[algo].from_state(dict(meta, intercept="somewhere"), arrays)
    bad = {k: np.array(v) for k, v in arrays.items()}
    bad["hkeys"][0, 0] = CONSTANT_HASH
    with pytest.raises(ValueError, match="constant feature in the heap"):
        LEARNERS[algo].from_state(meta, bad)


@pytest.mark.parametrize("algo", ["bear", "mission"])
def test_binary_model_saved_before_the_intercept_predicts_and_continues_as_trained(algo, tmp_path, invoke_cli):
    """A binary model written before the intercept was kept apart (tests/data/sketch_binary_v1,
    main at 49872af, the constant in its heap) loads with the constant as a heap feature,
    predicts and continues training exactly as that version did, and is saved again in its
    format; a new run on the same data keeps the constant out of the heap and differs."""
    v1 = DATA / "sketch_binary_v1"
    data = v1 / "input.vw"
    pred, cont, saved = tmp_path / "p.txt", tmp_path / "c.txt", tmp_path / "again.slm"
    r = invoke_cli("predict", "-i", v1 / f"{algo}.slm", data, "-p", pred, "--quiet")
    assert r.exit_code == 0, r.output
    assert pred.read_text() == (v1 / f"{algo}.predict.txt").read_text()
    r = invoke_cli("train", "-i", v1 / f"{algo}.slm", data, "-p", cont, "-f", saved, "--quiet")
    assert r.exit_code == 0, r.output
    assert cont.read_text() == (v1 / f"{algo}.continue.txt").read_text()
    from streamlearn.api import load_model
    L = load_model(str(saved))
    L = L[0] if isinstance(L, tuple) else L
    assert not L.keep_intercept and L.state_dict()[0]["intercept"] == "heap"
    assert "intercept" not in L.state_dict()[1]
    assert CONSTANT_HASH in L.top_features()[1].tolist()  # this old model's constant is a heap feature
    new = tmp_path / "new.slm"
    r = invoke_cli("train", "--algo", algo, "--sketch_rows", 3, "--sketch_width", 16, "--top_k", 3, data,
                   "-f", new, "--quiet")
    assert r.exit_code == 0, r.output
    N = load_model(str(new))
    N = N[0] if isinstance(N, tuple) else N
    assert N.keep_intercept and CONSTANT_HASH not in N.top_features()[1].tolist() and N.intercept[0] != 0.0


@pytest.mark.parametrize("algo", ["mission", "bear"])
def test_merge_averages_the_intercept(algo):
    """The Count Sketch merge (distributed/merge.py) averages the intercept like the sketch's
    cells, weighted by the examples each node learned."""
    from streamlearn.distributed.merge import merge_states, state_of

    X, y = _stream(2, 0)
    keys = np.arange(1, X.shape[1] + 1, dtype=np.uint32) * np.uint32(2654435761)
    keys[0] = CONSTANT_HASH
    b = Batch.from_dense(X, y, hashes=keys)
    nodes = []
    for lo, hi in ((0, 40), (40, 120)):
        L = LEARNERS[algo](sketch_rows=3, sketch_width=32, top_k=4, minibatch=4, loss_function="logistic")
        L.learn_batch(b.slice(lo, hi))
        L.finish()
        nodes.append(L)
    merged = merge_states([state_of(L, {}) for L in nodes])
    w = np.array([40.0, 80.0])
    expect = (w[0] * nodes[0].intercept + w[1] * nodes[1].intercept) / w.sum()
    np.testing.assert_allclose(merged.arrays["intercept"], expect, rtol=1e-12)
    assert nodes[0].intercept[0] != nodes[1].intercept[0]


@pytest.mark.parametrize("algo", ["mission", "bear"])
def test_compression_factor_does_not_count_the_intercept(algo):
    """The HyperLogLog behind ``distinct_features`` / ``compression_factor`` counts the features
    the sketch holds: the constant, kept apart, is not one of them (it was counted: p + 1)."""
    X, y = _stream(2, 0, n=40, p=16)
    keys = np.concatenate([[CONSTANT_HASH], np.arange(1, 17) * 0x9E3779B1 % 2**32]).astype(np.uint32)
    L = LEARNERS[algo](sketch_rows=2, sketch_width=8, top_k=4, loss_function="logistic")
    L.learn_batch(Batch.from_dense(X, y, hashes=keys))
    L.finish()
    s = L.extra_summary()
    assert s["distinct_features"] == 16
    assert s["compression_factor"] == pytest.approx(1.0, abs=0.01)  # 16 cells; 17 / 16 counting it
