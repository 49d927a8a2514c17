"""CompAdaGrad (``--algo compadagrad``, streamlearn.algos.compadagrad) against the dense reference
``tests/naive_sketched_adagrad.py`` (Mehta et al. 2016 Eq. 5 written with explicit d x d matrices),
diagonal AdaGrad (``--algo adagrad --adaptive``) and full-matrix AdaGrad."""
import gzip
import os
import subprocess
import sys

import numpy as np
import pytest

from naive_sketched_adagrad import CompAdaGrad as DenseComp, FullAdaGrad
from streamlearn.algos import make_learner
from streamlearn.api import load_model, save_model
from streamlearn.batch import Batch

HERE = os.path.dirname(os.path.abspath(__file__))
A9A = os.path.join(HERE, "..", "sample_data", "a9a_train_3k.libsvm.gz")


def _a9a_batch():
    """sample_data's a9a lines as a Batch: LIBSVM index j is coordinate j (no constant feature)."""
    offs, idx, val, lab = [0], [], [], []
    with gzip.open(A9A, "rt") as f:
        for line in f:
            tok = line.split()
            lab.append(float(tok[0]))
            for t in tok[1:]:
                j, v = t.split(":")
                idx.append(int(j))
                val.append(float(v))
            offs.append(len(idx))
    n = len(lab)
    return Batch(offsets=np.array(offs, np.int64), indices=np.array(idx, np.uint32), values=np.array(val),
                 labels=np.array(lab), weights=np.ones(n))


def _learner(algo, **hyper):
    return make_learner(algo, dict(hyper, bit_precision=hyper.pop("bit_precision", 18)))


def _stream(T, d, seed=0, density=0.5, weights=None):
    """Dense-ish logistic data with correlated features (x = z B, a few latent factors), some entries
    zero so that features join the map over time; column j is coordinate j."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((4, d))
    X = rng.standard_normal((T, 4)) @ B + 0.3 * rng.standard_normal((T, d))
    X[rng.random((T, d)) > density] = 0.0
    X /= np.sqrt(d)
    y = np.where(X @ rng.standard_normal(d) + 0.5 * rng.standard_normal(T) > 0, 1.0, -1.0)
    return X, y


def _batch(X, y, w=None):
    return Batch.from_dense(X, y, weights=w, hashes=np.arange(X.shape[1], dtype=np.uint32))


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _dense_map(model, d):
    """The learner's unnormalised count-sketch Pi0 (k x d): column j is s(j) e_{h(j)}."""
    b, s = model.subspace_map(np.arange(d))
    Pi = np.zeros((model.k, d))
    Pi[b, np.arange(d)] = s
    return Pi


# -------------------------------------------------------------------------------- k = 0

@pytest.mark.parametrize("loss", ["logistic", "squared", "hinge"])
@pytest.mark.parametrize("lr", [0.05, 0.7])
def test_k0_is_adagrad_adaptive_bit_for_bit(loss, lr):
    """Issue 18 part 2: -k 0 is diagonal AdaGrad (mirror-descent form): --algo adagrad --adaptive's
    predictions and weights, bit for bit, over sample_data's a9a (3,000 lines)."""
    batch = _a9a_batch()
    comp = _learner("compadagrad", subspace_dim=0, learning_rate=lr, loss_function=loss)
    ada = _learner("adagrad", adaptive=True, learning_rate=lr, loss_function=loss)
    pc, lc = comp.learn_batch(batch)
    pa, la = ada.learn_batch(batch)
    assert np.array_equal(pc, pa) and np.array_equal(lc, la)
    assert np.array_equal(comp.w.astype(np.float32), ada.w) and np.array_equal(comp.w, ada.w.astype(np.float64))
    assert np.array_equal(comp.G, ada.G.astype(np.float64))
    assert np.count_nonzero(ada.w) > 50  # it learned


def test_k0_importance_weights_and_duplicates_are_adagrads():
    """Importance weights (G += h l'^2 x^2, step -eta h l' x / sqrt(G)) and a feature twice in one
    example: still adagrad --adaptive bit for bit."""
    rng = np.random.default_rng(5)
    X, y = _stream(400, 12, seed=5)
    w = rng.choice([0.5, 1.0, 3.0], size=len(y))
    b = _batch(X, y, w)
    dup = b.indices.copy()
    dup[::7] = dup[1::7][: len(dup[::7])] if len(dup) > 1 else dup[::7]
    b = Batch(offsets=b.offsets, indices=dup, values=b.values, labels=b.labels, weights=b.weights)
    comp = _learner("compadagrad", subspace_dim=0, learning_rate=0.4, loss_function="logistic")
    ada = _learner("adagrad", adaptive=True, learning_rate=0.4, loss_function="logistic")
    assert np.array_equal(comp.learn_batch(b)[0], ada.learn_batch(b)[0])


@pytest.mark.parametrize("cw,dc,l1,l2", [(2.0, 0.05, 0.0, 0.0), (1.0, 0.0, 0.0, 0.3), (1.5, 0.01, 0.02, 0.1),
                                         (1.0, 0.0, 0.2, 0.0)])
def test_k0_composite_steps_match_the_dense_reference(cw, dc, l1, l2):
    """k = 0 with a complement weight, delta_c and the paper's l1 / l2 composite steps (applied to
    every feature seen in every round, lazily here) against the dense reference's per-coordinate
    composite step. Without --l1/--l2 the state is float32 (adagrad's), hence the looser bound."""
    X, y = _stream(1500, 15, seed=2, density=0.4)
    ref = DenseComp(15, np.zeros((0, 15)), 0.3, 0.0, dc, comp_weight=cw, l1=l1, l2=l2)
    p_ref = ref.run(X, y)
    model = _learner("compadagrad", subspace_dim=0, learning_rate=0.3, loss_function="logistic",
                     complement_delta=dc, complement_weight=cw, l1=l1, l2=l2, bit_precision=6)
    p, _ = model.learn_batch(_batch(X, y))
    tol = 1e-9 if l1 or l2 else 1e-5
    assert _rel(p, p_ref) < tol
    assert _rel(model.weights_at(np.arange(15)), ref.w) < tol
    if l1 >= 0.2:
        assert np.count_nonzero(ref.w == 0) > 0 and np.array_equal(model.weights_at(np.arange(15)) == 0, ref.w == 0)


# -------------------------------------------------------------------------------- k > 0

@pytest.mark.parametrize("k,dr,dc,cw", [(4, 1e-6, 0.0, 1.0), (10, 0.01, 0.05, 1.5)])
def test_sparse_learner_equals_the_dense_reference(k, dr, dc, cw):
    """Issue 18: the sparse learner equals the dense reference with the same map to 1e-6 relative over
    5,000 examples: predictions, and the weights its lazy form gives (bsum / rsum against the
    explicit n x n solve), with features joining the map over the first rounds."""
    d, T = 24, 5000
    X, y = _stream(T, d, seed=k, density=0.35)
    model = _learner("compadagrad", subspace_dim=k, learning_rate=0.25, loss_function="logistic",
                     subspace_delta=dr, complement_delta=dc, complement_weight=cw, subspace_seed=3,
                     bit_precision=8)
    ref = DenseComp(d, _dense_map(model, d), 0.25, dr, dc, comp_weight=cw, complement="diag", map_on_seen=True)
    half = T // 2
    p1 = ref.run(X[:half], y[:half])
    q1, _ = model.learn_batch(_batch(X[:half], y[:half]))
    assert _rel(model.weights_at(np.arange(d)), ref.w) < 1e-6  # the lazy weights mid-stream
    p2 = ref.run(X[half:], y[half:])
    q2, _ = model.learn_batch(_batch(X[half:], y[half:]))
    p, q = np.concatenate([p1, p2]), np.concatenate([q1, q2])
    assert np.abs(p).max() < 16  # no round skipped by the float32 loss test (adagrad's)
    assert _rel(q, p) < 1e-6
    assert _rel(model.weights_at(np.arange(d)), ref.w) < 1e-6
    # the subspace did something: not diagonal AdaGrad, not the paper's diag(G_perp) either
    diag = DenseComp(d, np.zeros((0, d)), 0.25, dr, dc, comp_weight=cw).run(X, y)
    assert _rel(q, diag) > 1e-3
    # with the paper's complement diag(G_perp) it is another algorithm (by more than the tolerance)
    paper = DenseComp(d, _dense_map(model, d), 0.25, dr, dc, comp_weight=cw, complement="perp",
                      map_on_seen=True).run(X[:500], y[:500])
    assert _rel(q[:500], paper) > 1e-5


def _composite_pair(T, d, k, l1, l2, seed, lr=0.25, **extra):
    X, y = _stream(T, d, seed=seed, density=0.35)
    model = _learner("compadagrad", subspace_dim=k, learning_rate=lr, loss_function="logistic", subspace_seed=3,
                     bit_precision=8, l1=l1, l2=l2, **extra)
    ref = DenseComp(d, _dense_map(model, d), lr, extra.get("subspace_delta", 1e-6), extra.get("complement_delta", 0.0),
                    comp_weight=extra.get("complement_weight", 1.0), complement="diag", map_on_seen=True, l1=l1, l2=l2)
    return X, y, model, ref


@pytest.mark.parametrize("k,l1,l2,T", [(4, 0.0, 0.1, 1000), (3, 0.03, 0.05, 500)])
def test_composite_steps_at_k_positive_match_the_dense_reference(k, l1, l2, T):
    """Issue 18 part 2: --l2 / --l1 at k > 0, the paper's composite mirror-descent step (Mehta Eq. 2:
    the dense reference solves (A + eta l2 I) x = A x_t - eta g, or the LASSO of Sec. 4.2 by
    coordinate descent, with the explicit n x n A) against the learner's eager step (Lemma 5 / 6 in
    closed form; Newton on the 2k-dimensional optimality system for l1), to 1e-6 relative: the
    predictions, the weights mid-stream and at the end, and (l1) exactly the same zero weights."""
    d = 24
    X, y, model, ref = _composite_pair(T, d, k, l1, l2, seed=k)
    half = T // 2
    p1 = ref.run(X[:half], y[:half])
    q1, _ = model.learn_batch(_batch(X[:half], y[:half]))
    assert _rel(model.weights_at(np.arange(d)), ref.w) < 1e-6
    p2 = ref.run(X[half:], y[half:])
    q2, _ = model.learn_batch(_batch(X[half:], y[half:]))
    p, q = np.concatenate([p1, p2]), np.concatenate([q1, q2])
    assert _rel(q, p) < 1e-6
    w = model.weights_at(np.arange(d))
    assert _rel(w, ref.w) < 1e-6
    assert np.array_equal(w == 0, ref.w == 0)
    if l1:
        assert 0 < np.count_nonzero(ref.w == 0) < d - 2  # the l1 step zeroes some weights, not all
    # the regulariser did something: not the step without it
    plain = DenseComp(d, _dense_map(model, d), 0.25, 1e-6, 0.0, complement="diag", map_on_seen=True).run(X, y)
    assert _rel(q, plain) > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("l1,l2", [(0.0, 0.2), (0.02, 0.0), (0.01, 0.1)])
def test_composite_steps_at_k_positive_over_5000_examples(l1, l2):
    """The same over 5,000 examples with k = 10, delta_c, a complement weight and importance weight 1
    (about a minute for the l1 reference's coordinate descent)."""
    d, T = 24, 5000
    X, y, model, ref = _composite_pair(T, d, 10, l1, l2, seed=7, complement_delta=0.05, complement_weight=1.5,
                                       subspace_delta=0.01)
    p = ref.run(X, y)
    q, _ = model.learn_batch(_batch(X, y))
    assert _rel(q, p) < 1e-6 and _rel(model.weights_at(np.arange(d)), ref.w) < 1e-6


def test_composite_steps_at_k_positive_batch_split_and_restore(tmp_path):
    """The eager form (its list of the features in the map) does not depend on how the stream is cut
    into batches, and a model saved mid-stream continues bit for bit; a model whose list is broken
    is refused on load."""
    X, y = _stream(400, 30, seed=11, density=0.3)
    full = _learner("compadagrad", subspace_dim=4, l1=0.01, l2=0.05, loss_function="logistic", bit_precision=20)
    p_full, _ = full.learn_batch(_batch(X, y))
    cut = _learner("compadagrad", subspace_dim=4, l1=0.01, l2=0.05, loss_function="logistic", bit_precision=20)
    parts = [cut.learn_batch(_batch(X[a:a + 37], y[a:a + 37]))[0] for a in range(0, 200, 37)]
    save_model(str(tmp_path / "m.slm"), cut, {"quadratic": [], "constant": True})
    back = load_model(str(tmp_path / "m.slm"))[0]
    m = sum(len(q) for q in parts)
    p_rest, _ = back.learn_batch(_batch(X[m:], y[m:]))
    assert np.array_equal(np.concatenate(parts + [p_rest]), p_full)
    arrays = back._arrays()
    arrays = {f: np.array(a) for f, a in arrays.items()}
    arrays["head"][1] = arrays["head"][0]  # the list no longer ends where head says
    with pytest.raises(ValueError, match="list of the features"):
        back._load_arrays(arrays)


def test_one_feature_per_bucket_is_full_matrix_adagrad():
    """Mehta Sec. 2: when the map keeps every coordinate (each bucket holds one feature, all seen in
    round 1) the complement is empty and CompAdaGrad is full-matrix AdaGrad with (G + delta I)^1/2."""
    d = 6
    X, y = _stream(800, d, seed=8, density=1.0)
    for seed in range(200):
        model = _learner("compadagrad", subspace_dim=16, learning_rate=0.3, loss_function="logistic",
                         subspace_delta=0.1, subspace_seed=seed, bit_precision=6)
        if len(set(model.subspace_map(np.arange(d))[0])) == d:
            break
    else:
        pytest.fail("no seed maps the 6 features to distinct buckets")
    p, _ = model.learn_batch(_batch(X, y))
    full = FullAdaGrad(d, 0.3, 0.1).run(X, y)
    assert _rel(p, full) < 1e-8


def test_map_is_seeded_and_balanced():
    a = _learner("compadagrad", subspace_dim=10, subspace_seed=1)
    b = _learner("compadagrad", subspace_dim=10, subspace_seed=1)
    c = _learner("compadagrad", subspace_dim=10, subspace_seed=2)
    d = _learner("compadagrad", subspace_dim=10, random_seed=5)
    idx = np.arange(20000)
    ba, sa = a.subspace_map(idx)
    assert np.array_equal(ba, b.subspace_map(idx)[0]) and np.array_equal(sa, b.subspace_map(idx)[1])
    assert not np.array_equal(ba, c.subspace_map(idx)[0]) and not np.array_equal(ba, d.subspace_map(idx)[0])
    counts = np.bincount(ba, minlength=10)
    assert counts.min() > 1800 and counts.max() < 2200 and abs(sa.mean()) < 0.03


def test_b30_touches_only_the_features_pages(tmp_path):
    """-b 30: four tables of 2^30 float64 entries (32 GiB) are allocated lazily; learning touches the
    features' pages only (every feature joins the map exactly once) and the saved model holds only
    those pages (a dense table anywhere would not fit in memory or in the file bound)."""
    batch = _a9a_batch()
    model = _learner("compadagrad", subspace_dim=10, learning_rate=0.3, loss_function="logistic", bit_precision=30)
    model.learn_batch(batch)
    assert model.pages.active and model.pages.worth_it()
    assert int(model.nseen.sum()) == len(np.unique(batch.indices))
    path = tmp_path / "b30.slm"
    save_model(str(path), model, {"quadratic": [], "constant": True})
    assert path.stat().st_size < 8 << 20
    back = load_model(str(path))[0]
    assert np.array_equal(back.predict_batch(batch)[0], model.predict_batch(batch)[0])


def test_jacobi_eigh_matches_numpy():
    rng = np.random.default_rng(0)
    for k in (1, 2, 5, 10, 30):
        B = rng.standard_normal((k, 3))
        A = B @ B.T + np.diag(rng.random(k) * 1e-9)
        lam, V = np.zeros(k), np.zeros((k, k))
        from streamlearn.algos import _compadagrad_kernels as K
        K.eigh(A.copy(), lam, V)
        assert np.allclose(np.sort(lam), np.linalg.eigvalsh(A), atol=1e-12 * max(1.0, np.abs(A).max()))
        assert np.allclose(V @ np.diag(lam) @ V.T, A, atol=1e-12) and np.allclose(V.T @ V, np.eye(k), atol=1e-12)


# -------------------------------------------------------------------------------- options, files

def test_l1_l2_not_with_srht():
    with pytest.raises(ValueError, match="srht"):
        _learner("compadagrad", subspace_dim=3, l2=0.1, subspace_map="srht", bit_precision=6)
    assert _learner("compadagrad", subspace_dim=3, l2=0.1).eager


def test_save_and_restore_mid_stream_is_exact(tmp_path):
    X, y = _stream(600, 20, seed=4, density=0.3)
    b1, b2 = _batch(X[:300], y[:300]), _batch(X[300:], y[300:])
    for hyper in ({"subspace_dim": 5}, {"subspace_dim": 0, "l1": 0.01, "l2": 0.1}, {"subspace_dim": 0},
                  {"subspace_dim": 5, "l1": 0.01, "l2": 0.1}):
        a = _learner("compadagrad", loss_function="logistic", bit_precision=23, **hyper)
        a.learn_batch(b1)
        save_model(str(tmp_path / "m.slm"), a, {"quadratic": [], "constant": True})
        c = load_model(str(tmp_path / "m.slm"))[0]
        pa, pc = a.learn_batch(b2)[0], c.learn_batch(b2)[0]
        assert np.array_equal(pa, pc)


def test_cli_k_flag_and_usage_errors(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."))
    run = lambda *a: subprocess.run([sys.executable, "-m", "streamlearn", "train", A9A, "--quiet", *a],
                                    capture_output=True, text=True, env=env)
    ok = run("--algo", "compadagrad", "-k", "4", "--loss_function", "logistic", "--metrics", str(tmp_path / "m.json"))
    assert ok.returncode == 0, ok.stderr
    bad = run("--algo", "compadagrad", "-k", "4", "--l1", "0.1", "--subspace_map", "srht", "-b", "8")
    assert bad.returncode == 2 and "srht" in bad.stderr
    big = run("--algo", "compadagrad", "-k", "100000")
    assert big.returncode == 2 and "subspace_dim" in big.stderr


# -------------------------------------------------------------------------------- --subspace_map srht

def _srht_dense_map(model):
    from naive_sketched_adagrad import hadamard

    return hadamard(len(model.w))[model.rows] * model.signs


@pytest.mark.parametrize("k,dc,cw", [(4, 0.05, 1.0), (8, 0.01, 2.0)])
def test_srht_is_mehta_eq5_exactly(k, dc, cw):
    """--subspace_map srht is the paper's algorithm (complement diag(G_perp), unscaled SRHT over all 2^b
    coordinates): equal to the dense reference with the same Pi to 1e-6 over 2,000 examples."""
    d = 20
    X, y = _stream(2000, d, seed=k + 1, density=0.5)
    model = _learner("compadagrad", subspace_dim=k, subspace_map="srht", learning_rate=0.25,
                     loss_function="logistic", subspace_delta=1e-4, complement_delta=dc, complement_weight=cw,
                     bit_precision=5)
    Xn = np.zeros((len(y), 32))
    Xn[:, :d] = X
    ref = DenseComp(32, _srht_dense_map(model), 0.25, 1e-4, dc, comp_weight=cw)
    p_ref = ref.run(Xn, y)
    p, _ = model.learn_batch(_batch(X, y))
    assert np.abs(p).max() < 16
    assert _rel(p, p_ref) < 1e-6
    assert _rel(model.weights_at(np.arange(32)), ref.w) < 1e-6


def test_srht_full_dimension_is_full_matrix_adagrad():
    """k = n with the unscaled SRHT (Pi orthogonal): the complement is empty, full-matrix AdaGrad."""
    X, y = _stream(600, 8, seed=9, density=0.6)
    model = _learner("compadagrad", subspace_dim=8, subspace_map="srht", learning_rate=0.3,
                     loss_function="logistic", subspace_delta=0.1, complement_delta=0.5, bit_precision=3)
    p, _ = model.learn_batch(_batch(X, y))
    assert _rel(p, FullAdaGrad(8, 0.3, 0.1).run(X, y)) < 1e-8


def test_srht_limits_and_round_trip(tmp_path):
    with pytest.raises(ValueError, match="-b at most 20"):
        _learner("compadagrad", subspace_dim=4, subspace_map="srht", bit_precision=21)
    X, y = _stream(300, 20, seed=1)
    a = _learner("compadagrad", subspace_dim=4, subspace_map="srht", loss_function="logistic", bit_precision=6)
    a.learn_batch(_batch(X[:150], y[:150]))
    save_model(str(tmp_path / "s.slm"), a, {"quadratic": [], "constant": True})
    c = load_model(str(tmp_path / "s.slm"))[0]
    assert np.array_equal(a.learn_batch(_batch(X[150:], y[150:]))[0], c.learn_batch(_batch(X[150:], y[150:]))[0])
