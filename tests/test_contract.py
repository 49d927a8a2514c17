"""Contract tests run over every registered learner (CONVENTIONS.md item 10)."""
import numpy as np
import pytest

from streamlearn.algos import LEARNERS
from streamlearn.api import load_model, save_model
from streamlearn.batch import Batch, concat_batches

# small settings so each learner runs quickly; learners not listed use their defaults
SMALL = {
    "adagrad": {},
    "oja-son": {"sketch_size": 3},
    "bear": {"sketch_width": 200, "top_k": 20, "minibatch": 4},
    "mission": {"sketch_width": 200, "top_k": 20},
}


def _stream(n=300, d=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[rng.random((n, d)) < 0.7] = 0
    y = np.where(X @ rng.standard_normal(d) > 0, 1.0, -1.0)
    hashes = rng.integers(0, 2**32, d, dtype=np.uint64).astype(np.uint32)
    return Batch.from_dense(X, y, hashes=hashes)


def _cut(b, sizes):
    out, a = [], 0
    for s in sizes:
        out.append(b.slice(a, min(a + s, b.n)))
        a += s
        if a >= b.n:
            break
    if a < b.n:
        out.append(b.slice(a, b.n))
    return out


def _make(name, **extra):
    hyper = dict(SMALL.get(name, {}), bit_precision=12, loss_function="logistic", **extra)
    cls = LEARNERS[name]
    known = {p.name for p in cls.PARAMS} | {"bit_precision", "loss_function"}
    return cls(**{k: v for k, v in hyper.items() if k in known})


def _run(learner, batches):
    ps, ls = [], []
    for b in batches:
        p, l = learner.learn_batch(b)
        ps.append(p)
        ls.append(l)
    learner.finish()
    return np.concatenate(ps), np.concatenate(ls)


def _same_state(a, b):
    ma, aa = a.state_dict()
    mb, ab = b.state_dict()
    assert ma == mb
    assert aa.keys() == ab.keys()
    for k in aa:
        assert np.asarray(aa[k]).tobytes() == np.asarray(ab[k]).tobytes(), k


names = sorted(LEARNERS)


@pytest.mark.parametrize("name", names)
def test_batch_size_invariance(name):
    b = _stream()
    p1, l1 = _run(_make(name), [b])
    p2, l2 = _run(_make(name), _cut(b, [1, 7, 50, 3, 100]))
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(l1, l2)


@pytest.mark.parametrize("name", names)
def test_same_settings_same_model(name):
    b = _stream()
    x, y = _make(name), _make(name)
    _run(x, [b])
    _run(y, [b])
    _same_state(x, y)


@pytest.mark.parametrize("name", names)
def test_save_reload_continue_equals_uninterrupted(name, tmp_path):
    b = _stream(n=400)
    first, second = b.slice(0, 200), b.slice(200, 400)
    whole = _make(name)
    p_whole, _ = _run(whole, [first, second])
    part = _make(name)
    _run(part, [first])
    path = str(tmp_path / "m.slm")
    save_model(path, part, {"quadratic": [], "constant": True})
    back, reader, header = load_model(path)
    assert header["algo"] == name
    _same_state(part, back)
    # reloaded model predicts bit-identically
    np.testing.assert_array_equal(part.predict_batch(second)[0], back.predict_batch(second)[0])
    p_rest, _ = _run(back, [second])
    np.testing.assert_array_equal(p_rest, p_whole[200:])
    _same_state(whole, back)


@pytest.mark.parametrize("name", names)
def test_unlabeled_rows_are_predicted_not_learned(name):
    b = _stream(n=120)
    lab = b.labels.copy()
    lab[::3] = np.nan
    with_unl = Batch(b.offsets, b.indices, b.values, lab, b.weights)
    keep = ~np.isnan(lab)
    rows = np.flatnonzero(keep)
    only = concat_batches([b.slice(i, i + 1) for i in rows])
    x = _make(name)
    px, lx = _run(x, [with_unl])
    y = _make(name)
    _run(y, [only])
    assert np.isnan(lx[~keep]).all() and np.isfinite(px).all()
    _same_state(x, y)


@pytest.mark.parametrize("name", names)
def test_learns_something(name):
    b = _stream(n=2000, d=20)
    p, l = _run(_make(name), [b])
    if _make(name).multiclass:
        return
    err = np.mean(np.where(p[1000:] > 0, 1, -1) != b.labels[1000:])
    assert err < 0.35, err
