"""The Python estimators (streamlearn.estimator): one hashing contract with the command line
(an estimator fitted on X, y and ``streamlearn train`` on the same rows written as LIBSVM / VW
text learn bit-identical models and predict the same), model files both ways, pickling,
scikit-learn's estimator checks, River-style single examples and progressive validation."""
import copy
import gzip
import pickle
import re

import numpy as np
import pytest

import streamlearn
from conftest import A9A, ROOT
from streamlearn.api import LEARNERS, load_model

#: small sizes for the sketch learners (as the contract tests)
SMALL = {"adagrad": {}, "oja-son": {"sketch_size": 3}, "bear": {"sketch_width": 200, "top_k": 20, "minibatch": 4},
         "mission": {"sketch_width": 200, "top_k": 20}, "ftsl-shampoo": {"sketch_size": 3}}
ROWS = 300


def _read_libsvm(path, rows):
    """A slow, obvious reader: label and ``index:value`` pairs -> dense X (column index - 1)."""
    labels, feats = [], []
    with gzip.open(path, "rt") as f:
        for line in f:
            if len(labels) == rows:
                break
            tok = line.split()
            labels.append(float(tok[0]))
            feats.append({int(i): float(v) for i, v in (t.split(":") for t in tok[1:])})
    d = max(max(r) for r in feats if r)
    X = np.zeros((len(labels), d))
    for r, fs in enumerate(feats):
        for i, v in fs.items():
            X[r, i - 1] = v
    return X, np.array(labels)


@pytest.fixture(scope="module")
def a9a():
    X, y = _read_libsvm(A9A, ROWS)
    rng = np.random.default_rng(0)
    X = X * rng.choice([0.5, 1.0, 2.0], size=X.shape)  # not only ones: values must reach the learner as given
    return X, y


def _write_libsvm(path, X, y):
    with open(path, "w") as f:
        for row, lab in zip(X, y):
            nz = np.flatnonzero(row)
            f.write(f"{float(lab)!r} " + " ".join(f"{j + 1}:{float(row[j])!r}" for j in nz) + "\n")


def _write_vw(path, rows, y):
    """``rows``: dicts {name: value} or {namespace: {name: value}} -> VW text."""
    with open(path, "w") as f:
        for r, lab in zip(rows, y):
            parts = []
            flat = {k: v for k, v in r.items() if not isinstance(v, dict)}
            if flat:
                parts.append("| " + " ".join(f"{k}:{float(v)!r}" for k, v in flat.items()))
            for ns, fs in r.items():
                if isinstance(fs, dict):
                    parts.append(f"|{ns} " + " ".join(f"{k}:{float(v)!r}" for k, v in fs.items()))
            f.write(f"{float(lab)!r} " + " ".join(parts) + "\n")


def _dicts(X, names):
    return [{names[j]: float(row[j]) for j in np.flatnonzero(row)} for row in X]


def _state(learner):
    meta, arrays = learner.state_dict()
    return meta, {k: (a.dense() if hasattr(a, "dense") else np.asarray(a)) for k, a in arrays.items()}


def _same_state(a, b):
    """Bit-identical learner states; the feature names a bear / mission learner keeps for its
    top features are not compared (the estimators keep no names: only hashes)."""
    ma, aa = _state(a)
    mb, ab = _state(b)
    assert ma == mb
    assert aa.keys() == ab.keys()
    for k in aa:
        if k.startswith("name") and a.wants_names:
            continue
        assert aa[k].dtype == ab[k].dtype and np.array_equal(aa[k], ab[k]), k


def _cli_train(invoke_cli, tmp_path, data, algo, opts, extra=()):
    model = tmp_path / "cli.slm"
    args = ["train", data, "--algo", algo, "-f", model, "--quiet"]
    for k, v in opts.items():
        args += [f"--{k}"] if v is True else [f"--{k}", v]
    r = invoke_cli(*args, *extra)
    assert r.exit_code == 0, r.output
    preds = tmp_path / "cli.pred"
    r = invoke_cli("predict", "-i", model, data, "-p", preds, "--quiet")
    assert r.exit_code == 0, r.output
    return model, [ln.split()[0] for ln in preds.read_text().splitlines()]


def _printed(a):
    return ["{:.9g}".format(v) for v in np.asarray(a, np.float64)]


INPUTS = ["dense", "csr", "dataframe", "table", "dicts"]


def _inputs(kind, X):
    """(the estimator's X, the file format the CLI reads the same rows as, column names)."""
    names = [f"c{j}" for j in range(X.shape[1])]
    if kind == "dense":
        return X, "libsvm", None
    if kind == "csr":
        sp = pytest.importorskip("scipy.sparse")
        return sp.csr_matrix(X), "libsvm", None
    if kind == "dataframe":
        pd = pytest.importorskip("pandas")
        return pd.DataFrame(X, columns=names), "vw", names
    if kind == "table":
        import pyarrow as pa
        return pa.table({n: X[:, j] for j, n in enumerate(names)}), "vw", names
    return _dicts(X, names), "vw", names


def _cli_file(tmp_path, fmt, X, y, names):
    path = tmp_path / f"data.{fmt}"
    if fmt == "libsvm":
        _write_libsvm(path, X, y)
    else:
        _write_vw(path, _dicts(X, names), y)
    return path


# -- one hashing contract: estimator == CLI ---------------------------------------------------------


@pytest.mark.parametrize("kind", INPUTS)
def test_adagrad_classifier_equals_cli_on_every_input(a9a, kind, tmp_path, invoke_cli):
    X, y = a9a
    Xin, fmt, names = _inputs(kind, X)
    est = streamlearn.Classifier().fit(Xin, y)
    model, cli_pred = _cli_train(invoke_cli, tmp_path, _cli_file(tmp_path, fmt, X, y, names), "adagrad",
                                 {"loss_function": "logistic"})
    _same_state(est._learner, load_model(str(model))[0])
    assert _printed(est.decision_function(Xin)) == cli_pred
    assert np.array_equal(est.predict(Xin), np.where(np.asarray(cli_pred, float) > 0, 1.0, -1.0))


@pytest.mark.parametrize("algo", sorted(a for a in LEARNERS if not getattr(LEARNERS[a], "multiclass_only", False)))
def test_every_learner_equals_cli(a9a, algo, tmp_path, invoke_cli):
    X, y = a9a
    opts = dict(SMALL.get(algo, {}))
    est = streamlearn.Classifier(algo=algo, **opts).fit(X, y)
    model, cli_pred = _cli_train(invoke_cli, tmp_path, _cli_file(tmp_path, "libsvm", X, y, None), algo,
                                 dict(opts, loss_function="logistic"))
    _same_state(est._learner, load_model(str(model))[0])
    assert _printed(est.decision_function(X)) == cli_pred


@pytest.mark.parametrize("algo", sorted(LEARNERS))
def test_every_learner_multiclass_equals_cli_oaa(a9a, algo, tmp_path, invoke_cli):
    X, _ = a9a
    names = np.array(["red", "green", "blue"])
    cls = (np.arange(len(X)) * 7 + X[:, 0].astype(int)) % 3
    y = names[cls]  # string labels, mapped to 1..3 in sorted order: blue, green, red
    opts = dict(SMALL.get(algo, {}))
    est = streamlearn.Classifier(algo=algo, **opts).fit(X, y)
    assert est.classes_.tolist() == ["blue", "green", "red"]
    ids = np.searchsorted(est.classes_, y) + 1
    native = LEARNERS[algo].native_multiclass  # bear, mission: their softmax, no --loss_function
    model, cli_pred = _cli_train(invoke_cli, tmp_path, _cli_file(tmp_path, "libsvm", X, ids.astype(float), None),
                                 algo, dict(opts, oaa=3, **({} if native else {"loss_function": "logistic"})))
    _same_state(est._learner, load_model(str(model))[0])
    assert est.predict(X).tolist() == est.classes_[np.asarray(cli_pred, float).astype(int) - 1].tolist()
    p = est.predict_proba(X)
    assert p.shape == (len(X), 3) and np.allclose(p.sum(axis=1), 1.0)
    assert np.array_equal(est.classes_[np.argmax(est.decision_function(X), axis=1)], est.predict(X))


def test_softmax_classifier_equals_cli(a9a, tmp_path, invoke_cli):
    X, _ = a9a
    y = (np.arange(len(X)) % 4) + 10
    est = streamlearn.Classifier(loss_function="multiclass_logistic").fit(X, y)
    model, cli_pred = _cli_train(invoke_cli, tmp_path, _cli_file(tmp_path, "libsvm", X, (y - 9).astype(float), None),
                                 "adagrad", {"loss_function": "multiclass_logistic", "oaa": 4})
    _same_state(est._learner, load_model(str(model))[0])
    assert (est.predict(X) - 9).tolist() == np.asarray(cli_pred, float).astype(int).tolist()


def test_regressor_equals_cli_with_reader_transforms(a9a, tmp_path, invoke_cli):
    """-q (wildcard), --unit_norm, --noconstant and weights pass through the same code."""
    X, _ = a9a
    X = X[:, :20]
    y = X @ np.linspace(-1, 1, 20) + 0.5
    est = streamlearn.Regressor(quadratic=("::",), unit_norm=True, noconstant=True, learning_rate=0.3).fit(X, y)
    model, cli_pred = _cli_train(invoke_cli, tmp_path, _cli_file(tmp_path, "libsvm", X, y, None), "adagrad",
                                 {"learning_rate": 0.3, "unit_norm": True, "noconstant": True}, extra=("-q", "::"))
    _same_state(est._learner, load_model(str(model))[0])
    assert _printed(est.predict(X)) == cli_pred


def test_namespaced_dicts_and_vw_lines_equal_cli(tmp_path, invoke_cli):
    rng = np.random.default_rng(1)
    rows = [{"a": {f"x{k}": float(rng.integers(1, 4)) for k in rng.choice(9, 3, replace=False)},
             "b": {f"y{k}": 1.0 for k in rng.choice(5, 2, replace=False)}, "plain": float(i % 3)}
            for i in range(200)]
    y = np.where(rng.random(200) > 0.5, 1.0, -1.0)
    path = tmp_path / "ns.vw"
    _write_vw(path, rows, y)
    est = streamlearn.Classifier(quadratic="ab", ignore_linear="b").fit(rows, y)
    model, cli_pred = _cli_train(invoke_cli, tmp_path, path, "adagrad", {"loss_function": "logistic"},
                                 extra=("-q", "ab", "--ignore_linear", "b"))
    _same_state(est._learner, load_model(str(model))[0])
    assert _printed(est.decision_function(rows)) == cli_pred
    lines = path.read_text().splitlines()
    by_text = streamlearn.Classifier(quadratic="ab", ignore_linear="b").fit(lines)  # labels from the text
    _same_state(by_text._learner, est._learner)
    assert by_text.classes_.tolist() == [-1.0, 1.0]


def test_column_j_is_libsvm_index_j_plus_1_with_the_constant():
    from streamlearn.batch import CONSTANT_HASH

    est = streamlearn.Regressor().fit(np.array([[0.0, 2.0, 0.0, 3.0]]), [1.0])
    b = est._pred_rows(np.array([[0.0, 2.0, 0.0, 3.0]]))
    assert b.indices.tolist() == [2, 4, CONSTANT_HASH] and b.values.tolist() == [2.0, 3.0, 1.0]


# -- inputs and errors ---------------------------------------------------------------------------------


def test_bad_inputs_are_clear_errors(a9a):
    X, y = a9a
    est = streamlearn.Classifier().fit(X, y)
    with pytest.raises(ValueError, match=f"X has 3 features, but Classifier is expecting {X.shape[1]}"):
        est.predict(X[:, :3])
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.predict(bad)
    with pytest.raises(ValueError, match="bit_precision must be"):
        streamlearn.Classifier(bit_precision=40).fit(X, y)
    with pytest.raises(ValueError, match="does not take option"):
        streamlearn.Classifier(sketch_size=3).fit(X, y)
    with pytest.raises(ValueError, match="not in classes"):
        est.partial_fit(X[:2], ["a", "b"])
    with pytest.raises(streamlearn.estimator.NotFittedError):
        streamlearn.Regressor().predict(X)
    with pytest.raises(TypeError, match="unexpected keyword"):
        streamlearn.Regressor(learning_rat=0.1)
    with pytest.raises(ValueError, match="VW text"):
        streamlearn.Classifier().fit(["1 | a", "1 a:b:c |"])


def test_partial_fit_in_pieces_equals_fit(a9a):
    X, y = a9a
    whole = streamlearn.Classifier().fit(X, y)
    parts = streamlearn.Classifier()
    for a in range(0, len(X), 64):
        parts.partial_fit(X[a:a + 64], y[a:a + 64], classes=[-1.0, 1.0])
    _same_state(whole._learner, parts._learner)
    assert parts.n_features_in_ == X.shape[1]


def test_params_protocol():
    est = streamlearn.Classifier(algo="oja-son", sketch_size=4, quadratic=("ab",))
    p = est.get_params()
    assert p["algo"] == "oja-son" and p["sketch_size"] == 4 and p["learning_rate"] is None
    assert set(p) >= {"bit_precision", "loss_function", "oaa", "quadratic", "noconstant", "passes"}
    est.set_params(sketch_size=5)
    assert est.sketch_size == 5 and "sketch_size=5" in repr(est)
    with pytest.raises(ValueError, match="Invalid parameter"):
        est.set_params(nope=1)


# -- models both ways, pickling -------------------------------------------------------------------


def test_save_is_read_by_cli_and_load_reads_cli_models(a9a, tmp_path, invoke_cli):
    X, y = a9a
    yy = np.where(y > 0, "yes", "no")
    est = streamlearn.Classifier(learning_rate=0.7).fit(X, yy)
    path = tmp_path / "est.slm"
    assert est.save(path) == path.stat().st_size
    data = tmp_path / "d.libsvm"
    _write_libsvm(data, X, y)
    r = invoke_cli("predict", "-i", path, data, "-p", tmp_path / "p", "--quiet")
    assert r.exit_code == 0, r.output
    assert [ln.split()[0] for ln in (tmp_path / "p").read_text().splitlines()] == _printed(est.decision_function(X))
    back = streamlearn.load(path)
    assert isinstance(back, streamlearn.Classifier) and back.classes_.tolist() == ["no", "yes"]
    assert back.learning_rate == 0.7 and back.n_features_in_ == X.shape[1]
    assert np.array_equal(back.predict_proba(X), est.predict_proba(X))
    model, _ = _cli_train(invoke_cli, tmp_path, data, "adagrad", {"oaa": 2, "loss_function": "logistic"})
    cli = streamlearn.load(model)
    assert isinstance(cli, streamlearn.Classifier) and cli.classes_.tolist() == [1, 2]
    reg, _ = _cli_train(invoke_cli, tmp_path, data, "adagrad", {})
    assert isinstance(streamlearn.load(reg), streamlearn.Regressor)
    with pytest.raises(OSError, match="no such file|cannot read"):
        streamlearn.load(tmp_path / "missing.slm")


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "clone"])
def test_pickle_deepcopy_clone_round_trip(a9a, how):
    X, y = a9a
    est = streamlearn.Classifier(quadratic=("::",), bit_precision=16).fit(X[:100], y[:100])
    if how == "pickle":
        blob = pickle.dumps(est)
        assert b"numba" not in blob and b"CPUDispatcher" not in blob
        other = pickle.loads(blob)
    elif how == "deepcopy":
        other = copy.deepcopy(est)
    else:
        base = pytest.importorskip("sklearn.base")
        other = base.clone(est)
        assert not hasattr(other, "classes_") and other.get_params() == est.get_params()
        return
    assert np.array_equal(other.decision_function(X), est.decision_function(X))
    other.partial_fit(X[100:], y[100:])  # continues exactly as the original would
    est.partial_fit(X[100:], y[100:])
    _same_state(other._learner, est._learner)


# -- River style and progressive validation ----------------------------------------------------------


def test_learn_one_equals_partial_fit(a9a):
    X, y = a9a
    names = [f"c{j}" for j in range(X.shape[1])]
    rows = _dicts(X[:50], names)
    one = streamlearn.Classifier()
    for i, (x, t) in enumerate(zip(rows, y[:50])):
        one.learn_one(x, t, **({"classes": [-1.0, 1.0]} if i == 0 else {}))
    batch = streamlearn.Classifier().partial_fit(rows, y[:50], classes=[-1.0, 1.0])
    _same_state(one._learner, batch._learner)
    assert one.predict_one(rows[0]) == batch.predict(rows[:1])[0]
    p = one.predict_proba_one(rows[0])
    assert set(p) == {-1.0, 1.0} and abs(sum(p.values()) - 1) < 1e-12


def test_learn_one_takes_river_bool_labels_without_classes(a9a):
    """River's binary models learn from bool labels with no classes= up front: so does learn_one;
    other labels without classes= on the first call get a message naming the fix."""
    X, y = a9a
    names = [f"c{j}" for j in range(X.shape[1])]
    rows, yb = _dicts(X[:50], names), [bool(t > 0) for t in y[:50]]
    one = streamlearn.Classifier()
    for x, t in zip(rows, yb):
        one.learn_one(x, t)
    batch = streamlearn.Classifier().partial_fit(rows, yb, classes=[False, True])
    _same_state(one._learner, batch._learner)
    assert one.classes_.tolist() == [False, True] and one.predict_one(rows[0]) in (False, True)
    with pytest.raises(ValueError, match=r"classes="):
        streamlearn.Classifier().learn_one(rows[0], 1)


def test_progressive_val_equals_cli_table(a9a, tmp_path, invoke_cli):
    X, y = a9a
    data = tmp_path / "d.libsvm"
    _write_libsvm(data, X, y)
    r = invoke_cli("train", data, "--loss_function", "logistic")
    assert r.exit_code == 0
    table = [ln.split() for ln in r.output.splitlines() if re.match(r"^\d\.\d{6}|^n\.a\.", ln)]
    stream = ((X[a:a + 37], y[a:a + 37]) for a in range(0, len(X), 37))  # batches cut anywhere
    rows = list(streamlearn.progressive_val(stream, streamlearn.Classifier()))
    assert len(rows) == len(table) + 1 and rows[-1]["final"]
    for got, want in zip(rows, table):
        assert f"{got['average_loss']:.6f}" == want[0] and got["examples"] == int(want[2])
        assert f"{got['since_last']:.6f}" == want[1]
    summary = re.search(r"average loss = (\S+)", r.output).group(1)
    assert f"{rows[-1]['average_loss']:.6f}" == summary and rows[-1]["examples"] == len(X)


# -- README ---------------------------------------------------------------------------------------------


def test_readme_from_python_section_runs(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text()
    sec = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", sec, re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})


# -- scikit-learn's checks -------------------------------------------------------------------------------

#: checks that cannot pass for an online learner, and why
EXPECTED_FAILED = {
    "check_sample_weight_equivalence_on_dense_data":
        "an importance weight of 2 is one scaled online update (VW's meaning), not two updates",
    "check_sample_weight_equivalence_on_sparse_data": "as on dense data",
    "check_regressors_train": "the check sets alpha=0.01 (an option of algo='oja-son'), which algo='adagrad' "
                              "refuses, as the command line refuses --alpha with --algo adagrad",
}


try:
    from sklearn.utils.estimator_checks import parametrize_with_checks as _pwc
except ImportError:
    _pwc = None

def _expected_failed(est):
    if est.algo == "oja-son":  # takes alpha: check_regressors_train runs (and passes) here
        return {k: v for k, v in EXPECTED_FAILED.items() if k != "check_regressors_train"}
    return EXPECTED_FAILED


if _pwc is not None:
    @_pwc([streamlearn.Classifier(), streamlearn.Regressor(), streamlearn.Regressor(algo="oja-son")],
          expected_failed_checks=_expected_failed)
    def test_sklearn_estimator_checks(estimator, check):
        check(estimator)
else:
    def test_sklearn_estimator_checks():
        pytest.importorskip("sklearn")


def test_missing_cells_of_a_dataframe_are_dropped_and_refit_resets_the_columns():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [1.0, np.nan, 2.0], "b": [0.5, 1.0, np.nan]})
    est = streamlearn.Regressor().fit(df, [1.0, 2.0, 3.0])
    assert est.feature_names_in_.tolist() == ["a", "b"] and est.n_features_in_ == 2
    rows = [{"a": 1.0, "b": 0.5}, {"b": 1.0}, {"a": 2.0}]  # NaN: missing, as in the wide Parquet schema
    by_dicts = streamlearn.Regressor().fit(rows, [1.0, 2.0, 3.0])
    _same_state(est._learner, by_dicts._learner)
    est.fit(rows, [1.0, 2.0, 3.0])
    assert not hasattr(est, "n_features_in_") and not hasattr(est, "feature_names_in_")
    with pytest.raises(ValueError, match="feature names should match"):
        streamlearn.Regressor().fit(df, [1.0, 2.0, 3.0]).predict(df[["b", "a"]])


def test_a_damaged_estimator_header_is_a_clear_error(a9a, tmp_path):
    from streamlearn.api import save_model

    X, y = a9a
    est = streamlearn.Classifier().fit(X[:50], y[:50])
    for bad in ({"kind": "classifier", "classes": [1, 2, 3]}, {"kind": "classifier", "classes": [{"a": 1}, 2]},
                {"n_features_in": "many"}, ["not", "a", "dict"]):
        path = tmp_path / "bad.slm"
        save_model(str(path), est._learner, est._reader, bad)
        with pytest.raises(OSError, match="malformed"):
            streamlearn.load(path)
