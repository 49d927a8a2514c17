"""Command-line behaviour of the VW flags of --algo adagrad and of --binary / -r (which every
scalar learner takes)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import A9A, A9A_TEST, NEWS_TEST


def _read(path):
    return np.array([float(line.split()[0]) for line in path.read_text().splitlines()])


@pytest.mark.parametrize("algo,flag", [("bear", ["--power_t", "0.3"]), ("mission", ["--l1", "0.1"]),
                                       ("oja-son", ["--initial_t", "2"]), ("bear", ["--sgd"])])
def test_a_flag_for_another_learner_names_the_learners_taking_it(algo, flag, invoke_cli):
    r = invoke_cli("train", NEWS_TEST, "--algo", algo, *flag, "--quiet")
    assert r.exit_code == 2
    assert f"--algo {algo} does not take" in r.output and "taken by --algo adagrad" in r.output


@pytest.mark.parametrize("algo", ["oja-son", "bear", "mission"])
def test_quantile_loss_is_refused_where_the_kernel_cannot_take_it(algo, invoke_cli):
    r = invoke_cli("train", NEWS_TEST, "--algo", algo, "--loss_function", "quantile", "--quiet")
    assert r.exit_code == 2
    assert "does not take --loss_function quantile; it is taken by --algo adagrad" in r.output


@pytest.mark.parametrize("bad", [["--quantile_tau", "1.5"], ["--power_t", "-1"], ["-l", "0"], ["--l1", "-0.1"]])
def test_bad_values_are_usage_errors(bad, invoke_cli):
    r = invoke_cli("train", NEWS_TEST, "--loss_function", "quantile", *bad, "--quiet")
    assert r.exit_code == 2 and bad[0] in r.output


def test_binary_predictions_and_loss_and_the_model_keeps_it(tmp_path, invoke_cli):
    """--binary: -1/+1 predictions, 0/1 average loss (= the error rate), -r the raw scores; the
    model remembers it, so predict -i writes -1/+1 too (VW keeps --binary in its model)."""
    p, r, m, f = tmp_path / "p", tmp_path / "r", tmp_path / "m.json", tmp_path / "b.slm"
    res = invoke_cli("train", A9A, "--binary", "--loss_function", "logistic", "-p", p, "-r", r, "--metrics", m,
                     "-f", f, "--quiet")
    assert res.exit_code == 0, res.output
    pred, raw = _read(p), _read(r)
    assert set(np.unique(pred)) == {-1.0, 1.0}
    np.testing.assert_array_equal(pred, np.where(raw > 0, 1.0, -1.0))
    met = json.loads(m.read_text())
    assert met["average_loss"] == pytest.approx(met["error_rate"]) and 0.1 < met["average_loss"] < 0.25
    res = invoke_cli("predict", "-i", f, A9A_TEST, "-p", tmp_path / "t", "-r", tmp_path / "tr", "--quiet")
    assert res.exit_code == 0, res.output
    t, tr = _read(tmp_path / "t"), _read(tmp_path / "tr")
    np.testing.assert_array_equal(t, np.where(tr > 0, 1.0, -1.0))


def test_raw_predictions_are_the_scores_before_clipping(tmp_path, invoke_cli):
    """Squared loss clips predictions to the labels' range; -r writes the unclipped score."""
    p, r = tmp_path / "p", tmp_path / "r"
    res = invoke_cli("train", A9A, "-p", p, "-r", r, "--quiet")
    assert res.exit_code == 0, res.output
    pred, raw = _read(p), _read(r)
    assert pred.min() >= -1 and pred.max() <= 1
    np.testing.assert_allclose(pred, np.clip(raw, -1, 1), rtol=1e-8)
    assert (np.abs(raw) > 1).any()


@pytest.mark.parametrize("algo", ["oja-son", "mission"])
def test_binary_and_raw_work_for_other_learners(algo, tmp_path, invoke_cli):
    p, r = tmp_path / "p", tmp_path / "r"
    res = invoke_cli("train", NEWS_TEST, "--algo", algo, "--binary", "-p", p, "-r", r, "--quiet", "-b", "14")
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(_read(p), np.where(_read(r) > 0, 1.0, -1.0))
