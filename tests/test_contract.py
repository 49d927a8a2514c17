"""Contract tests run over every registered learner (CONVENTIONS.md item 10)."""
import numpy as np
import pytest

from streamlearn.algos import LEARNERS, SOFTMAX_LEARNERS, make_learner
from streamlearn.api import load_model, save_model
from streamlearn.batch import Batch, concat_batches

# small settings so each learner runs quickly; learners not listed use their defaults
SMALL = {
    "adagrad": {},
    "oja-son": {"sketch_size": 3},
    "fd-son": {"sketch_size": 3},
    "rfd-son": {"sketch_size": 3, "alpha0": 0.5},
    "bear": {"sketch_width": 200, "top_k": 20, "minibatch": 4},
    "mission": {"sketch_width": 200, "top_k": 20},
    "s-ada": {"sketch_size": 3},
    "fast-s-ada": {"sketch_size": 3},
    "ftsl": {"sketch_size": 3},
    "ftfsl": {"sketch_size": 3},
    "compadagrad": {"subspace_dim": 3},
    "ftsl-shampoo": {"sketch_size": 3},
}


def _stream(n=300, d=40, seed=0, classes=0):
    classes = 3 if classes == "softmax" else classes
    """A sparse stream: labels -1/+1, or with ``classes`` K the class 1..K of the largest of K
    linear scores."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[rng.random((n, d)) < 0.7] = 0
    if classes:
        y = np.argmax(X @ rng.standard_normal((d, classes)), axis=1) + 1.0
    else:
        y = np.where(X @ rng.standard_normal(d) > 0, 1.0, -1.0)
    hashes = rng.integers(0, 2**32, d, dtype=np.uint64).astype(np.uint32)
    return Batch.from_dense(X, y, hashes=hashes)


def _make(name, oaa=0, **extra):
    """The learner as a run builds it (``algos.make_learner``): binary with logistic loss;
    ``oaa``: ``--oaa 3`` (native softmax or the one-against-all reduction, logistic loss for
    the latter); ``oaa="softmax"``: ``--oaa 3 --loss_function multiclass_logistic``."""
    cls = LEARNERS[name]
    if oaa == "softmax":
        loss = {"oaa": 3, "loss_function": "multiclass_logistic"}
    elif oaa:
        # native multiclass is softmax (--loss_function with --oaa is a usage error there)
        loss = {"oaa": oaa} if cls.native_multiclass else {"oaa": oaa, "loss_function": "logistic"}
    else:
        loss = {"loss_function": "logistic"}
    hyper = dict(SMALL.get(name, {}), bit_precision=12, **loss, **extra)
    known = {p.name for p in cls.PARAMS} | {"bit_precision", "loss_function", "oaa"}
    return make_learner(name, {k: v for k, v in hyper.items() if k in known})


def _cases():
    """Every learner (binary, logistic loss), every learner again with ``--oaa 3`` on a 3-class
    stream (its own multiclass or the one-against-all reduction), and each softmax learner
    (``--loss_function multiclass_logistic``): a new learner joins all of them."""
    out = []
    for name in sorted(LEARNERS):
        if not getattr(LEARNERS[name], "multiclass_only", False):  # e.g. ftsl-shampoo: softmax only
            out.append(pytest.param(name, 0, id=name))
        out.append(pytest.param(name, 3, id=f"{name}-oaa3"))
        if name in SOFTMAX_LEARNERS:
            out.append(pytest.param(name, "softmax", id=f"{name}-softmax3"))
    return out


CASES = _cases()


@pytest.mark.parametrize("name,oaa", CASES)
def test_batch_size_invariance(name, oaa, cut_batches, run_learner):
    b = _stream(classes=oaa)
    p1, l1 = run_learner(_make(name, oaa), [b])
    p2, l2 = run_learner(_make(name, oaa), cut_batches(b, [1, 7, 50, 3, 100]))
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(l1, l2)


@pytest.mark.parametrize("name,oaa", CASES)
def test_same_settings_same_model(name, oaa, run_learner, same_state):
    b = _stream(classes=oaa)
    x, y = _make(name, oaa), _make(name, oaa)
    assert x.multiclass == bool(oaa)
    run_learner(x, [b])
    run_learner(y, [b])
    same_state(x, y)


@pytest.mark.parametrize("name,oaa", CASES)
def test_save_reload_continue_equals_uninterrupted(name, oaa, tmp_path, run_learner, same_state):
    b = _stream(n=400, classes=oaa)
    first, second = b.slice(0, 200), b.slice(200, 400)
    whole = _make(name, oaa)
    p_whole, _ = run_learner(whole, [first, second])
    part = _make(name, oaa)
    run_learner(part, [first])
    path = str(tmp_path / "m.slm")
    save_model(path, part, {"quadratic": [], "constant": True})
    back, reader, header = load_model(path)
    assert header["algo"] == name
    assert back.multiclass == bool(oaa)
    same_state(part, back)
    # reloaded model predicts bit-identically
    np.testing.assert_array_equal(part.predict_batch(second)[0], back.predict_batch(second)[0])
    p_rest, _ = run_learner(back, [second])
    np.testing.assert_array_equal(p_rest, p_whole[200:])
    same_state(whole, back)


@pytest.mark.parametrize("name,oaa", CASES)
def test_unlabeled_rows_are_predicted_not_learned(name, oaa, run_learner, same_state):
    b = _stream(n=120, classes=oaa)
    lab = b.labels.copy()
    lab[::3] = np.nan
    with_unl = Batch(b.offsets, b.indices, b.values, lab, b.weights)
    keep = ~np.isnan(lab)
    rows = np.flatnonzero(keep)
    only = concat_batches([b.slice(i, i + 1) for i in rows])
    x = _make(name, oaa)
    px, lx = run_learner(x, [with_unl])
    y = _make(name, oaa)
    run_learner(y, [only])
    assert np.isnan(lx[~keep]).all() and np.isfinite(px).all()
    same_state(x, y)


@pytest.mark.parametrize("name,oaa", CASES)
def test_learns_something(name, oaa, run_learner):
    b = _stream(n=2000, d=20, classes=oaa)
    p, l = run_learner(_make(name, oaa), [b])
    if oaa:  # the prediction is the class id (chance: an error rate of 1 - 1/oaa)
        oaa = 3 if oaa == "softmax" else oaa
        assert set(np.unique(p).tolist()) <= set(range(1, oaa + 1))
        err = np.mean(p[1000:] != b.labels[1000:])
        assert err < 0.35, err
        return
    err = np.mean(np.where(p[1000:] > 0, 1, -1) != b.labels[1000:])
    assert err < 0.35, err
