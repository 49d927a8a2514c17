import numpy as np
import pytest

from naive_adagrad import adagrad_reference, vw_normalized_reference
from streamlearn.algos import AdaGrad
from streamlearn.batch import Batch


def _data(n=600, d=25, seed=0, scale_spread=True):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * (10 ** rng.uniform(-1, 1, d) if scale_spread else 1.0)
    X[rng.random((n, d)) < 0.5] = 0.0
    theta = rng.standard_normal(d)
    y = np.sign(X @ theta + 0.1 * rng.standard_normal(n))
    y[y == 0] = 1
    return X, y


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
@pytest.mark.parametrize("normalized", [False, True])
def test_kernel_matches_numpy_reference(loss, normalized):
    X, y = _data()
    imp = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    b = Batch.from_dense(X, y, weights=imp)
    eta = 0.3
    learner = AdaGrad(loss_function=loss, learning_rate=eta, normalized=normalized, bit_precision=10)
    pred, lossv = learner.learn_batch(b)
    ref = (vw_normalized_reference if normalized else adagrad_reference)(X, y, loss, eta, imp)
    np.testing.assert_allclose(pred, ref, rtol=1e-5, atol=1e-6)
    assert np.isfinite(lossv).all()
    # the model actually learned something
    assert np.mean(np.sign(pred[300:]) != y[300:]) < 0.3


def test_progressive_predictions_are_made_before_the_update():
    X, y = _data(n=5)
    learner = AdaGrad(loss_function="logistic")
    pred, _ = learner.learn_batch(Batch.from_dense(X, y))
    assert pred[0] == 0.0  # first prediction from the zero model
    assert np.any(pred[1:] != 0.0)


def test_unlabeled_rows_do_not_update():
    X, y = _data(n=50)
    y2 = y.copy()
    y2[10:20] = np.nan
    a = AdaGrad(loss_function="logistic")
    pa, la = a.learn_batch(Batch.from_dense(X, y2))
    keep = ~np.isnan(y2)
    b = AdaGrad(loss_function="logistic")
    b.learn_batch(Batch.from_dense(X[keep], y[keep]))
    np.testing.assert_array_equal(a.w, b.w)
    assert np.isnan(la[10:20]).all()


def test_vw_wexpmx_solves_lambert_equation():
    from streamlearn.algos._adagrad_kernels import wexpmx
    for x in [-5.0, -3.0, -0.5, 0.0, 0.7, 1.0, 2.5, 10.0, 100.0, 600.0]:
        w = wexpmx(x) + x
        # w e^w = e^x  <=>  w + log w = x
        assert abs(w + np.log(w) - x) < 1e-9 * max(1.0, abs(x))


@pytest.mark.parametrize("normalized", [False, True])
def test_vanishing_gradients_do_not_divide_by_zero(normalized):
    # a separable stream drives the logistic margin so high that g^2 underflows float32
    X = np.tile([[50.0, 1.0]], (400, 1))
    y = np.ones(400)
    learner = AdaGrad(loss_function="logistic", normalized=normalized, learning_rate=5.0)
    pred, loss = learner.learn_batch(Batch.from_dense(X, y))
    assert np.isfinite(pred).all() and np.isfinite(learner.w).all()
    assert pred[-1] > 5
