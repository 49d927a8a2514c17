"""The run loop's exploding-loss warning (issue 21: BEAR / MISSION printed progressive losses of
1e4-1e10 on unscaled input with no hint) and multiclass sketch-learner checks."""
import math

import numpy as np
import pytest

from streamlearn.algos.losses import get_loss
from streamlearn.batch import Batch
from streamlearn.evaluate import EXPLODED_AFTER, EXPLODED_FACTOR, _LossWatch


class _Fake:
    def __init__(self, multiclass=False, n_classes=0, loss="squared"):
        self.multiclass = multiclass
        self.n_classes = n_classes
        self.loss = get_loss(loss)


def _batch(labels, weights=None):
    n = len(labels)
    return Batch(np.zeros(n + 1, np.int64), np.zeros(0, np.uint32), np.zeros(0), np.asarray(labels, float),
                 np.ones(n) if weights is None else np.asarray(weights, float))


def test_loss_watch_fires_once_past_the_threshold_multiclass():
    K = 4
    w = _LossWatch(_Fake(True, K))
    limit = EXPLODED_FACTOR * math.log(K)
    # a loss just under the limit never fires, however long the run
    assert w.check(_batch(np.ones(200)), np.full(200, 0.99 * limit)) is None
    # then a blow-up: fires when the running average passes the limit, once
    hit = w.check(_batch(np.ones(200)), np.full(200, 1e6))
    assert hit is not None and hit[0] == 400 and hit[1] > limit and hit[2] == pytest.approx(limit)
    assert w.check(_batch(np.ones(10)), np.full(10, 1e9)) is None


def test_loss_watch_waits_for_enough_examples_and_ignores_unlabeled():
    w = _LossWatch(_Fake(True, 3))
    n = EXPLODED_AFTER - 1
    assert w.check(_batch(np.ones(n)), np.full(n, 1e9)) is None  # too few labeled examples yet
    assert w.check(_batch([np.nan] * 30), np.full(30, np.nan)) is None  # unlabeled: nothing counted
    assert w.n == n
    assert w.check(_batch([1.0]), np.array([1e9])) is not None


def test_loss_watch_reference_scales_with_the_labels():
    """Squared loss: the reference is the zero predictor's loss (mean y^2), so a regression on
    labels ~1e3 with losses ~1e4 is not an explosion, but losses 1e9 are."""
    w = _LossWatch(_Fake(False, 0, "squared"))
    y = np.full(100, 1000.0)
    assert w.check(_batch(y), np.full(100, 1e4)) is None
    assert w.check(_batch(y), np.full(100, 1e9)) is not None
    # importance weights count: a blow-up on weight-0 rows is none
    w = _LossWatch(_Fake(False, 0, "logistic"))
    assert w.check(_batch(np.ones(100), np.zeros(100)), np.full(100, 1e9)) is None


def _unscaled(path, n=240, K=3, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            y = i % K + 1
            x = rng.integers(0, 256, size=8) + 40 * y  # pixel-like values, class-dependent
            f.write(f"{y} " + " ".join(f"{j + 1}:{v}" for j, v in enumerate(x)) + "\n")
    return path


@pytest.mark.parametrize("algo", ["mission", "bear"])
def test_exploding_loss_warns_once_and_suggests_unit_norm(algo, tmp_path, invoke_cli):
    data = _unscaled(tmp_path / "px.libsvm")
    r = invoke_cli("train", data, "--algo", algo, "--oaa", 3, "-l", 1.0, "-P", "off", "--metrics", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    assert r.output.count("progressive loss exploded") == 1, r.output
    assert "try --unit_norm" in r.output
    # scaled input: no warning
    r = invoke_cli("train", data, "--algo", algo, "--oaa", 3, "-l", 1.0, "--unit_norm", "-P", "off")
    assert r.exit_code == 0, r.output
    assert "exploded" not in r.output, r.output
    # --quiet silences it
    r = invoke_cli("train", data, "--algo", algo, "--oaa", 3, "-l", 1.0, "--quiet")
    assert r.exit_code == 0 and "exploded" not in r.output
