from pathlib import Path

import numpy as np
import pytest

from naive_adagrad import adagrad_reference, vw_gd_reference, vw_normalized_reference
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


#: VW command lines (as AdaGrad hyper-parameters) checked against the reference
RULES = {
    "default": {},
    "sgd": {"sgd": True},
    "adaptive": {"adaptive": True, "learning_rate": 0.5},
    "normalized": {"normalized": True},
    "invariant": {"invariant": True},
    "adaptive+normalized": {"adaptive": True, "normalized": True},
    "adaptive+invariant -l 0.3": {"adaptive": True, "invariant": True, "learning_rate": 0.3},
    "power_t 0.3": {"power_t": 0.3},
    "adaptive power_t 0.7": {"adaptive": True, "power_t": 0.7, "learning_rate": 0.2},
    "sgd power_t 0.2": {"sgd": True, "power_t": 0.2, "learning_rate": 0.05},
    "initial_t 2": {"initial_t": 2.0},
    "sgd initial_t 5": {"sgd": True, "initial_t": 5.0, "learning_rate": 0.2},
    "l1": {"l1": 1e-3},
    "l2": {"l2": 1e-3},
    "l1+l2 sgd": {"sgd": True, "l1": 1e-4, "l2": 1e-4, "learning_rate": 0.1},
}
_REF_KEYS = {"learning_rate": "lr", "quantile_tau": "tau"}


def _reference(X, y, loss, hyper, imp):
    kw = {_REF_KEYS.get(k, k): v for k, v in hyper.items()}
    return vw_gd_reference(X, y, loss, imp=imp, **kw)


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge", "quantile"])
@pytest.mark.parametrize("rule", list(RULES))
def test_kernel_matches_vw_gd_reference(loss, rule):
    """Every rule and flag, against VW's gd written out in NumPy (tests/naive_adagrad.py), with
    importance weights; the kernel is float64 arithmetic on float32 state like the reference."""
    X, y = _data()
    if loss in ("squared", "quantile"):
        y = X @ np.linspace(-1, 1, X.shape[1]) + 3.0  # real-valued labels away from 0
    hyper = dict(RULES[rule])
    if loss == "quantile":
        hyper["quantile_tau"] = 0.3
    if rule in ("sgd", "invariant", "normalized") and loss in ("squared", "quantile"):
        hyper["learning_rate"] = 0.01  # VW's default 10 diverges on these features (as in VW)
    imp = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    learner = AdaGrad(loss_function=loss, bit_precision=10, **hyper)
    pred, lossv = learner.learn_batch(Batch.from_dense(X, y, weights=imp))
    ref, raw = _reference(X, y, loss, hyper, imp)
    np.testing.assert_allclose(pred, ref, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(learner.last_raw, raw, rtol=2e-5, atol=1e-6)
    assert np.isfinite(lossv).all()
    if loss in ("logistic", "hinge"):  # the model actually learned something
        assert np.mean(np.sign(pred[300:]) != y[300:]) < 0.35


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
@pytest.mark.parametrize("normalized", [False, True])
def test_legacy_rules_match_their_references(loss, normalized):
    """The rules of model files written before VW's default became the default (plain Duchi
    AdaGrad, streamlearn's earlier --normalized) are kept for those models."""
    X, y = _data()
    imp = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    b = Batch.from_dense(X, y, weights=imp)
    eta = 0.3
    learner = AdaGrad(_legacy=True, loss_function=loss, learning_rate=eta, adaptive=True, normalized=normalized,
                      invariant=normalized, bit_precision=10)
    pred, lossv = learner.learn_batch(b)
    ref = (vw_normalized_reference if normalized else adagrad_reference)(X, y, loss, eta, imp)
    np.testing.assert_allclose(pred, ref, rtol=1e-5, atol=1e-6)


def test_defaults_are_vws():
    """No flag: adaptive + normalized + invariant at -l 0.5, power_t 0.5, initial_t 0; a named
    rule that is not adaptive+normalized defaults to -l 10 (VW's gd_setup); --sgd: t starts at 1."""
    from streamlearn.algos.adagrad import ADAPTIVE, INVARIANT, NORMALIZED, SQRT_RATE
    a = AdaGrad()
    assert a.rule == ADAPTIVE | NORMALIZED | INVARIANT | SQRT_RATE and a.eta == 0.5
    assert a.hp[0] == 0.5 and a.scal[4] == 0.0
    assert AdaGrad(adaptive=True).rule == ADAPTIVE | SQRT_RATE and AdaGrad(adaptive=True).eta == 10.0
    assert AdaGrad(adaptive=True, normalized=True).eta == 0.5
    s = AdaGrad(sgd=True)
    assert s.rule == SQRT_RATE and s.eta == 10.0 and s.scal[4] == 1.0
    assert AdaGrad(sgd=True, initial_t=4.0).eta == 10.0 * 2.0
    assert AdaGrad(loss_function="logistic").scal[2:4].tolist() == [-50.0, 50.0]


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


V2 = Path(__file__).parent / "data" / "adagrad_v2"


@pytest.mark.parametrize("name", ["plain_squared", "plain_logistic", "normalized_squared", "normalized_logistic"])
@pytest.mark.parametrize("use_c", [True, False])
def test_models_written_before_keep_predicting_and_learning_as_before(name, use_c, tmp_path, invoke_cli):
    """Models written by main at f89a066 (FORMAT_VERSION 2: hyper ``normalized`` True/False,
    ``learning_rate`` None) give the same predictions and, trained further, the same
    predictions and arrays, bit for bit, as that version gave (tests/data/adagrad_v2/make.sh)."""
    import fuzz_oracle as fo
    from conftest import A9A_TEST
    from streamlearn.io.model_file import read_model

    model = V2 / f"{name}.slm"
    with fo.kernel_backend(use_c):
        r = invoke_cli("predict", "-i", model, A9A_TEST, "-p", tmp_path / "p.txt", "--quiet")
        assert r.exit_code == 0, r.output
        r = invoke_cli("train", "-i", model, A9A_TEST, "-p", tmp_path / "c.txt", "-f", tmp_path / "c.slm", "--quiet")
        assert r.exit_code == 0, r.output
    assert (tmp_path / "p.txt").read_text() == (V2 / f"{name}.predict.txt").read_text()
    assert (tmp_path / "c.txt").read_text() == (V2 / f"{name}.continue.txt").read_text()
    _, arrays = read_model(tmp_path / "c.slm")
    want = np.load(V2 / f"{name}.continued_w.npz")
    for k in ("w", "G", "N"):
        np.testing.assert_array_equal(np.asarray(arrays[k]), want[k])
    np.testing.assert_array_equal(np.asarray(arrays["scal"])[:4], want["scal"])
    # and the re-saved model is still read with its old rule
    from streamlearn.api import load_model
    learner, _, _ = load_model(str(tmp_path / "c.slm"))
    assert learner.legacy and learner.eta == (0.5 if name.startswith("normalized") else 0.1)


def test_quantile_tau_estimates_the_quantile():
    """With a constant feature only, quantile loss drives the prediction to the tau-quantile of
    the labels (VW's pinball loss)."""
    rng = np.random.default_rng(5)
    y = rng.exponential(2.0, 20000)
    X = np.ones((len(y), 1))
    for tau in (0.2, 0.5, 0.9):
        a = AdaGrad(loss_function="quantile", quantile_tau=tau, bit_precision=4)
        pred, _ = a.learn_batch(Batch.from_dense(X, y))
        assert abs(pred[-2000:].mean() - np.quantile(y, tau)) < 0.1 * np.quantile(y, tau) + 0.05, tau


def test_l1_truncates_weights_to_zero():
    X, y = _data(n=400)
    dense = AdaGrad(loss_function="logistic", bit_precision=10)
    sparse = AdaGrad(loss_function="logistic", bit_precision=10, l1=0.01)
    for a in (dense, sparse):
        a.learn_batch(Batch.from_dense(X, y))
        a.finish()
    assert sparse.scal[5] == 0.0 and sparse.scal[6] == 1.0  # folded into the weights at the end
    assert np.count_nonzero(sparse.w) < np.count_nonzero(dense.w)


def test_adaptive_alone_is_plain_duchi_adagrad():
    """--adaptive (VW's) is diagonal AdaGrad as Duchi et al. write it (tests/naive_adagrad.py)
    when importance weights are 1 and no index repeats within an example; logistic loss, whose
    prediction range [-50, 50] the data never reach. (With weights, VW accumulates imp l'^2 x^2,
    not (imp l' x)^2; squared and hinge predictions are clipped to the label range.)"""
    X, y = _data()
    a = AdaGrad(loss_function="logistic", adaptive=True, learning_rate=0.3, bit_precision=10)
    pred, _ = a.learn_batch(Batch.from_dense(X, y))
    np.testing.assert_allclose(pred, adagrad_reference(X, y, "logistic", 0.3), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_no_clip_equals_reference_without_the_clip(loss):
    """--no_clip (issue 21): the prediction is the raw score and the update is taken at it; equal to
    VW's gd reference with its clip removed. The data make the clip bind (scores far outside the
    labels' range [-1, 1] early on), so the default's predictions differ."""
    X, y = _data(n=400, seed=5)
    X = X * 30.0
    L = AdaGrad(loss_function=loss, no_clip=True)
    assert not L._c_serves()
    p, _ = L.learn_batch(Batch.from_dense(X, y))
    np.testing.assert_array_equal(p, L.last_raw)
    ref, raw = vw_gd_reference(X, y, loss, clip=False)
    np.testing.assert_allclose(p, ref, rtol=1e-5, atol=1e-6)
    if loss == "squared":
        d, _ = AdaGrad(loss_function=loss).learn_batch(Batch.from_dense(X, y))
        assert np.max(np.abs(d)) <= 1.0 < np.max(np.abs(p))


def test_scal_sits_on_cache_lines_of_its_own():
    """The scalars the kernel writes at every example share no cache line with other data (false
    sharing with the reader threads and the engine's other chains): aligned to a line, fresh and
    loaded, the same values as before the move."""
    from streamlearn.algos import learner_from_state, make_learner
    from streamlearn.memory import CACHE_LINE, own_cache_lines

    a = np.arange(8, dtype=np.float64) - 0.0
    a[3] = -0.0
    b = own_cache_lines(a)
    assert b.ctypes.data % CACHE_LINE == 0 and b.tobytes() == a.tobytes() and b.shape == a.shape
    lrn = make_learner("adagrad", {"bit_precision": 10, "loss_function": "logistic"})
    assert lrn.scal.ctypes.data % CACHE_LINE == 0 and lrn.scal[2] == -50.0
    meta, arrays = lrn.state_dict()
    back = learner_from_state("adagrad", meta, {k: np.array(v) for k, v in arrays.items()})
    assert back.scal.ctypes.data % CACHE_LINE == 0 and back.scal.tobytes() == lrn.scal.tobytes()
