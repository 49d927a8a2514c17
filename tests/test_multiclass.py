"""Multiclass: the one-against-all reduction (--oaa K over any binary learner) against K
separate binary runs, the softmax learner against a NumPy reference, VW golden runs
(tests/data/oaa_golden_*, made by tests/data/make_oaa_vw_golden.sh with VW 9.11.9), model
files, --probabilities and the reporting (0/1 loss as average loss, cross-entropy apart)."""
import json

import numpy as np
import pytest

from naive_softmax import softmax_reference
from streamlearn.algos import LEARNERS, make_learner
from streamlearn.algos.multiclass import OneAgainstAll, class_bits
from streamlearn.algos.softmax import SoftmaxAdaGrad
from streamlearn.api import load_model, save_model
from streamlearn.batch import Batch

from conftest import ROOT

DATA = ROOT / "tests" / "data"
#: ours with VW's default update rule (VW's gd: normalized, adaptive, invariant, -l 0.5)
VW_DEFAULT = []  # (it is streamlearn's default)


def _stream(n=400, d=30, K=4, seed=0, hashes=None):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.choice([0.01, 1.0, 30.0], d)
    X[rng.random((n, d)) < 0.6] = 0
    y = np.argmax(X @ rng.standard_normal((d, K)), axis=1) + 1.0
    w = rng.choice([1.0, 0.5, 3.0], n)
    if hashes is None:
        hashes = rng.integers(0, 2**32, d, dtype=np.uint64).astype(np.uint32)
    b = Batch.from_dense(X, y, hashes=hashes)
    return Batch(b.offsets, b.indices, b.values, b.labels, w), X, y, w


@pytest.mark.parametrize("algo,hyper", [
    ("adagrad", {"loss_function": "logistic"}),
    ("adagrad", {"normalized": True}),
    ("adagrad", {"loss_function": "hinge", "learning_rate": 0.3}),
    ("oja-son", {"loss_function": "logistic", "sketch_size": 3}),
])
@pytest.mark.parametrize("K,bits", [(3, 12), (5, 6), (8, 4)])
def test_oaa_equals_k_binary_runs_over_relabelled_data(algo, hyper, K, bits, cut_batches, run_learner):
    """--oaa K is K binary learners with b - ceil(log2 K) bits, learner c on +1/-1 = (y == c):
    scores and updates bit for bit (small -b: many collisions inside each class's table)."""
    batch, _, y, _ = _stream(K=K)
    lab = batch.labels.copy()
    lab[::9] = np.nan  # unlabeled rows: predicted, not learned
    batch = Batch(batch.offsets, batch.indices, batch.values, lab, batch.weights)
    oaa = make_learner(algo, dict(hyper, oaa=K, bit_precision=bits))
    assert isinstance(oaa, OneAgainstAll) and oaa.learners[0].bits == bits - class_bits(K)
    pred, loss = run_learner(oaa, cut_batches(batch, [1, 50, 7, 100]))
    scores = []
    for c in range(1, K + 1):
        ref = LEARNERS[algo](**dict(hyper, bit_precision=bits - class_bits(K)))
        yc = np.where(lab == c, 1.0, -1.0)
        yc[np.isnan(lab)] = np.nan
        p, _ = run_learner(ref, [Batch(batch.offsets, batch.indices, batch.values, yc, batch.weights)])
        scores.append(p)
        assert oaa.learners[c - 1].state_dict()[0] == ref.state_dict()[0]
        for k, a in ref.state_dict()[1].items():
            assert np.asarray(a).tobytes() == np.asarray(oaa.learners[c - 1].state_dict()[1][k]).tobytes(), k
    S = np.array(scores).T
    want = np.array([1 + max(range(K), key=lambda c: (S[i, c], -c)) for i in range(len(S))], float)
    np.testing.assert_array_equal(pred, want)  # argmax, ties to the lowest class
    # the loss is VW's multiclass log loss over the normalised sigmoids
    sig = 1 / (1 + np.exp(-S))
    p = sig / sig.sum(1, keepdims=True)
    lab_ok = ~np.isnan(lab)
    np.testing.assert_allclose(loss[lab_ok], -np.log(p[lab_ok, lab[lab_ok].astype(int) - 1]), rtol=1e-12)
    assert np.isnan(loss[~lab_ok]).all()
    assert oaa.examples_learned == int(lab_ok.sum())


def test_oaa_ties_go_to_the_lowest_class(run_learner):
    batch, *_ = _stream(n=3, K=3)
    pred, _ = make_learner("adagrad", {"oaa": 3}).predict_batch(batch)
    np.testing.assert_array_equal(pred, [1, 1, 1])  # all scores 0


def test_oaa_bits_and_classes_are_usage_errors():
    with pytest.raises(ValueError, match=r"--oaa 5 needs -b/--bit_precision of at least 4"):
        make_learner("adagrad", {"oaa": 5, "bit_precision": 3})
    make_learner("adagrad", {"oaa": 5, "bit_precision": 4})
    with pytest.raises(ValueError, match="at least 2"):
        make_learner("oja-son", {"oaa": 1})
    with pytest.raises(ValueError, match="needs --oaa K"):
        make_learner("adagrad", {"loss_function": "multiclass_logistic"})
    with pytest.raises(ValueError, match="is for --algo adagrad"):
        make_learner("oja-son", {"oaa": 3, "loss_function": "multiclass_logistic"})
    with pytest.raises(ValueError, match="not directly"):
        LEARNERS["adagrad"](oaa=3)


@pytest.mark.parametrize("rule,normalized", [({"adaptive": True}, False), ({}, True),
                                             ({"adaptive": True, "normalized": True}, True)])
def test_softmax_kernel_matches_numpy_reference(rule, normalized, run_learner, cut_batches):
    K, d = 5, 30
    rng = np.random.default_rng(4)
    hashes = (np.arange(d, dtype=np.uint32) * 7 + 3)  # distinct rows of a 2^(12-3) table
    batch, X, y, w = _stream(n=500, d=d, K=K, seed=3, hashes=hashes)
    y = y.copy()
    y[rng.random(len(y)) < 0.1] = np.nan
    w[::11] = 0.0  # weight 0: predicted and counted, no update
    batch = Batch(batch.offsets, batch.indices, batch.values, y, w)
    L = make_learner("adagrad", {"oaa": K, "loss_function": "multiclass_logistic", "bit_precision": 12,
                                 **rule})
    assert isinstance(L, SoftmaxAdaGrad) and L.eta == (1.0 if normalized else 0.1)
    L.set_probabilities(True)
    preds, losses, probs = [], [], []
    for b in cut_batches(batch, [1, 9, 120]):
        p, l = L.learn_batch(b)
        preds.append(p), losses.append(l), probs.append(L.last_probabilities)
    rp, rl, rprob = softmax_reference(X, y, K, L.eta, normalized, imp=w)
    # the class is the reference's argmax wherever that is not a tie up to rounding (classes no
    # example has pushed apart have exactly tied scores in exact arithmetic)
    top2 = np.sort(rprob, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-9
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(np.concatenate(preds)[clear], rp[clear])
    np.testing.assert_allclose(np.concatenate(losses), rl, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.concatenate(probs), rprob, rtol=1e-10, atol=1e-12)
    assert L.examples_learned == int((~np.isnan(y)).sum())


def test_softmax_learns_and_its_layout_is_vws():
    """K weights per feature row, 2^(b - ceil(log2 K)) rows: VW's --oaa memory."""
    L = make_learner("adagrad", {"oaa": 26, "loss_function": "multiclass_logistic", "bit_precision": 10})
    assert L.W.shape == (32, 26) and L.W.dtype == np.float32
    batch, _, y, _ = _stream(n=3000, d=20, K=4, seed=5)
    L = make_learner("adagrad", {"oaa": 4, "loss_function": "multiclass_logistic", "adaptive": True, "normalized": True})
    p, _ = L.learn_batch(batch)
    assert np.mean(p[1500:] != y[1500:]) < 0.2


@pytest.mark.parametrize("hyper", [{"oaa": 3, "loss_function": "logistic"},
                                   {"oaa": 3, "loss_function": "logistic", "bit_precision": 26},
                                   {"oaa": 3, "loss_function": "multiclass_logistic", "adaptive": True, "normalized": True},
                                   {"oaa": 3, "loss_function": "multiclass_logistic", "bit_precision": 26}])
def test_model_file_round_trip_keeps_the_wrapped_learner(hyper, tmp_path):
    """Save, load, continue: the same predictions (at -b 26 each class / row table has 2^24
    entries, so the touched-page path of the model file is the one taken)."""
    batch, *_ = _stream(n=300, K=3)
    L = make_learner("adagrad", dict(hyper))
    L.learn_batch(batch.slice(0, 200))
    save_model(str(tmp_path / "m.slm"), L, {"quadratic": [], "constant": True})
    back, _, header = load_model(str(tmp_path / "m.slm"))
    assert type(back) is type(L) and header["algo"] == "adagrad" and back.n_classes == 3
    if hyper.get("bit_precision"):
        assert (tmp_path / "m.slm").stat().st_size < 100_000  # touched entries only
    np.testing.assert_array_equal(back.learn_batch(batch.slice(200, 300))[0], L.learn_batch(batch.slice(200, 300))[0])


# -- CLI: VW golden runs, predict, --probabilities, reporting ----------------------------------------

def _summary(name):
    out = {}
    for line in (DATA / f"{name}.summary").read_text().splitlines():
        k, v = line.split(" = ")
        out[k] = float(v)
    return out


@pytest.mark.parametrize("name,args", [("oaa_golden_b18", []), ("oaa_golden_b8", ["-b", "8"])])
def test_oaa_matches_vw_golden(name, args, tmp_path, invoke_cli):
    """VW's --oaa 26 on 400 letter lines (weights, tags): the same predicted classes, line for
    line, and VW's summary figures; at -b 8 each class has 3 bits, so this checks VW's
    (h << s) + c layout through its collisions."""
    r = invoke_cli("train", DATA / "oaa_golden_input.vw", "--oaa", 26, *VW_DEFAULT, *args,
                   "-p", tmp_path / "p.txt", "--metrics", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "p.txt").read_text() == (DATA / f"{name}.pred").read_text()
    vw, m = _summary(name), json.loads((tmp_path / "m.json").read_text())
    assert m["examples"] == vw["number of examples"] and m["total_features"] == vw["total feature number"]
    assert m["weighted_examples"] == vw["weighted example sum"] and m["weighted_label_sum"] == 0
    assert round(m["average_loss"], 6) == vw["average loss"] and m["multiclass_log_loss"] is None
    assert m["error_rate"] == m["average_loss"] and m["best_constant"] is None


def test_probabilities_match_vw_golden(tmp_path, invoke_cli):
    r = invoke_cli("train", DATA / "oaa_golden_input.vw", "--oaa", 26, *VW_DEFAULT, "--loss_function", "logistic",
                   "--probabilities", "-p", tmp_path / "p.txt", "--metrics", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    ours = (tmp_path / "p.txt").read_text().splitlines()
    theirs = (DATA / "oaa_golden_prob.pred").read_text().splitlines()
    assert len(ours) == len(theirs) == 400

    def parse(line):
        toks = line.split()
        tag = toks[-1] if ":" not in toks[-1] else None
        cls = [t.split(":") for t in toks if ":" in t]
        return [int(c) for c, _ in cls], np.array([float(p) for _, p in cls]), tag

    for a, b in zip(ours, theirs):
        ca, pa, ta = parse(a)
        cb, pb, tb = parse(b)
        assert ca == cb == list(range(1, 27)) and ta == tb
        np.testing.assert_allclose(pa, pb, rtol=1e-3, atol=3e-5)  # VW sums its scores in float32
    vw, m = _summary("oaa_golden_prob"), json.loads((tmp_path / "m.json").read_text())
    assert round(m["average_loss"], 6) == vw["average loss"]
    assert m["multiclass_log_loss"] == pytest.approx(vw["average multiclass log loss"], rel=2e-6)
    assert f"average multiclass log loss = {m['multiclass_log_loss']:.6f}" in r.output
    # VW's progress rows show the class with its probability: all 26 scores are 0 at first
    first = [line for line in r.output.splitlines() if line.split()[2:3] == ["1"]][0]
    assert first.split()[-2:] == ["1(4%)", "17"]


def test_predict_with_an_oaa_model_writes_classes_or_probabilities(tmp_path, invoke_cli):
    src = DATA / "oaa_golden_input.vw"
    model = tmp_path / "m.slm"
    assert invoke_cli("train", src, "--algo", "oja-son", "--oaa", 26, "--loss_function", "logistic",
                      "-f", model, "--quiet").exit_code == 0
    r = invoke_cli("predict", "-i", model, src, "-p", tmp_path / "c.txt", "--metrics", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    cls = [line.split()[0] for line in (tmp_path / "c.txt").read_text().splitlines()]
    assert len(cls) == 400 and set(cls) <= {str(c) for c in range(1, 27)}
    m = json.loads((tmp_path / "m.json").read_text())
    lines = src.read_text().splitlines()
    w = np.array([2.0 if (i + 1) % 7 == 0 else 1.0 for i in range(len(lines))])
    wrong = np.array([int(c) != int(line.split()[0]) for c, line in zip(cls, lines)])
    assert m["average_loss"] == pytest.approx(float((wrong * w).sum() / w.sum()), rel=1e-12)
    assert m["multiclass_log_loss"] is None
    r = invoke_cli("predict", "-i", model, src, "--probabilities", "-p", tmp_path / "p.txt", "--metrics",
                   tmp_path / "m2.json")
    assert r.exit_code == 0, r.output
    rows = (tmp_path / "p.txt").read_text().splitlines()
    probs = np.array([[float(t.split(":")[1]) for t in row.split() if ":" in t] for row in rows])
    assert probs.shape == (400, 26) and np.allclose(probs.sum(1), 1, atol=1e-4)
    assert [str(int(np.argmax(p)) + 1) for p in probs] == cls  # the class is the most probable one
    m2 = json.loads((tmp_path / "m2.json").read_text())
    assert m2["average_loss"] == m["average_loss"] and m2["multiclass_log_loss"] > 0


def _probabilities(path):
    return np.array([[float(t.split(":")[1]) for t in row.split() if ":" in t]
                     for row in path.read_text().splitlines()])


@pytest.mark.parametrize("algo", ["bear", "mission"])
def test_sketch_learners_probabilities_are_the_softmax_of_their_class_scores(algo, tmp_path, invoke_cli):
    """--oaa K --probabilities with the Count-Sketch learners: the softmax of the K class scores,
    each the sum over the example's features in that class's top-k of the QUERYed weight times
    the value, plus the class's intercept times the constant's value. Progressive: uniform before the first update, the most probable class is the
    prediction, and -log p(label) averages to the reported cross-entropy. predict: equal to
    the softmax computed here from the saved model's heaps."""
    from streamlearn.io import ReaderConfig, read_batches
    src = DATA / "oaa_golden_input.vw"
    model = tmp_path / "m.slm"
    opts = ["--algo", algo, "--oaa", 26, "--sketch_width", 512, "--top_k", 30, "--quiet"]
    r = invoke_cli("train", src, *opts, "--probabilities", "-p", tmp_path / "p.txt", "-f", model,
                   "--metrics", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    probs = _probabilities(tmp_path / "p.txt")
    lines = src.read_text().splitlines()
    y = np.array([int(line.split()[0]) for line in lines])
    w = np.array([2.0 if (i + 1) % 7 == 0 else 1.0 for i in range(len(lines))])
    assert probs.shape == (400, 26) and np.allclose(probs.sum(1), 1, atol=1e-4)
    assert np.allclose(probs[0], 1 / 26, rtol=1e-5)  # all scores 0 before any update
    assert probs.std(axis=1)[200:].min() > 1e-3  # and learned afterwards
    m = json.loads((tmp_path / "m.json").read_text())
    ce = -np.log(probs[np.arange(400), y - 1])
    assert float((ce * w).sum() / w.sum()) == pytest.approx(m["multiclass_log_loss"], rel=1e-4)
    assert invoke_cli("train", src, *opts, "-p", tmp_path / "c.txt").exit_code == 0
    cls = np.array([int(x.split()[0]) for x in (tmp_path / "c.txt").read_text().splitlines()])
    assert (np.argmax(probs, axis=1) + 1 == cls).mean() > 0.99  # ties at %g's precision aside

    r = invoke_cli("predict", "-i", model, src, "--probabilities", "-p", tmp_path / "q.txt")
    assert r.exit_code == 0, r.output
    learner, _, _ = load_model(str(model))
    kc, keys, wts, _ = learner.top_features(refresh=True)
    heap = [dict(zip(keys[kc == c].tolist(), wts[kc == c].tolist())) for c in range(26)]
    from streamlearn.batch import CONSTANT_HASH
    assert CONSTANT_HASH not in keys.tolist()
    for c in range(26):  # the intercept: the constant feature's weight, kept apart from the heap
        heap[c][CONSTANT_HASH] = float(learner.intercept[c])
    (b,) = list(read_batches([str(src)], ReaderConfig()))
    assert learner.unit  # --oaa: --example_norm auto scales each example to unit norm, predict too
    from streamlearn.batch import unit_norm_rows
    b = unit_norm_rows(b)
    scores = np.zeros((b.n, 26))
    for i in range(b.n):
        for k in range(b.offsets[i], b.offsets[i + 1]):
            for c in range(26):
                scores[i, c] += heap[c].get(int(b.indices[k]), 0.0) * b.values[k]
    e = np.exp(scores - scores.max(1, keepdims=True))
    assert np.abs(scores).max() > 0.1
    np.testing.assert_allclose(_probabilities(tmp_path / "q.txt"), e / e.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("args,msg", [
    (["--oaa", "3", "--probabilities"], "--probabilities needs --loss_function logistic"),
    (["--probabilities"], "--probabilities is for multiclass runs"),
    (["--loss_function", "multiclass_logistic"], "needs --oaa K"),
    (["--algo", "oja-son", "--oaa", "3", "--loss_function", "multiclass_logistic"], "is for --algo adagrad"),
    (["--oaa", "26", "-b", "5"], "--oaa 26 needs -b/--bit_precision of at least 6"),
])
def test_multiclass_usage_errors_exit_2(args, msg, tmp_path, run_cli):
    r = run_cli("train", DATA / "oaa_golden_input.vw", *args, "-p", tmp_path / "p.txt")
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr.decode()
    assert not (tmp_path / "p.txt").exists()


@pytest.mark.parametrize("algo,extra", [("bear", ["--sketch_width", "64", "--top_k", "8"]), ("adagrad", [])])
def test_softmax_runs_report_zero_one_loss_and_cross_entropy_apart(algo, extra, tmp_path, invoke_cli):
    """Every multiclass run reports as VW's --oaa: average loss = the weighted 0/1 loss (table
    and summary), the cross-entropy of a softmax learner as average multiclass log loss."""
    args = ["--oaa", 26, *extra] + (["--loss_function", "multiclass_logistic"] if algo == "adagrad" else [])
    r = invoke_cli("train", DATA / "oaa_golden_input.vw", "--algo", algo, *args, "-P", "100",
                   "-p", tmp_path / "p.txt", "--metrics", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "m.json").read_text())
    pred = np.array([float(x.split()[0]) for x in (tmp_path / "p.txt").read_text().splitlines()])
    lines = (DATA / "oaa_golden_input.vw").read_text().splitlines()
    y = np.array([float(line.split()[0]) for line in lines])
    w = np.array([2.0 if (i + 1) % 7 == 0 else 1.0 for i in range(len(lines))])
    assert m["average_loss"] == pytest.approx(float(((pred != y) * w).sum() / w.sum()), rel=1e-12)
    assert m["error_rate"] == m["average_loss"]
    assert m["multiclass_log_loss"] > 0 and m["multiclass_log_loss"] != m["average_loss"]
    assert f"average multiclass log loss = {m['multiclass_log_loss']:.6f}" in r.output
    # -P 100: rows every 100 of cumulative weight (VW's), the last at weight 400.0 (example 350)
    row = [line for line in r.output.splitlines() if line.split()[3:4] == ["400.0"]][0].split()
    k = int(row[2])
    zero_one = float(((pred[:k] != y[:k]) * w[:k]).sum() / w[:k].sum())
    assert float(row[0]) == pytest.approx(zero_one, abs=1e-6)  # the table's loss is 0/1 too
