"""The run loop's exploding-loss warning (issue 21: BEAR / MISSION printed progressive losses of
1e4-1e10 on unscaled input with no hint) and multiclass sketch-learner checks."""
import math

import numpy as np
import pytest

from streamlearn.algos.losses import get_loss
from streamlearn.batch import Batch
from streamlearn.evaluate import EXPLODED_AFTER, EXPLODED_FACTOR, _LossWatch

from conftest import heap_masks
from test_mission_adagrad import dense_adagrad  # noqa: E402
from naive_olbfgs import dense_olbfgs


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
    """Pixel-like values with the examples as given (--example_norm none, the paper's algorithm
    and the default before issue 21): the loss explodes and the run says so, once; scaled
    input (--unit_norm, or the --oaa default --example_norm auto) does not."""
    data = _unscaled(tmp_path / "px.libsvm")
    r = invoke_cli("train", data, "--algo", algo, "--oaa", 3, "-l", 1.0, "--example_norm", "none", "-P", "off",
                   "--metrics", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    assert r.output.count("progressive loss exploded") == 1, r.output
    assert "try --unit_norm" in r.output
    # scaled input: no warning
    for scaled in (["--unit_norm", "--example_norm", "none"], []):
        r = invoke_cli("train", data, "--algo", algo, "--oaa", 3, "-l", 1.0, *scaled, "-P", "off")
        assert r.exit_code == 0, r.output
        assert "exploded" not in r.output, r.output
    # --quiet silences it
    r = invoke_cli("train", data, "--algo", algo, "--oaa", 3, "-l", 1.0, "--example_norm", "none", "--quiet")
    assert r.exit_code == 0 and "exploded" not in r.output


def test_multiclass_compression_factor_is_per_class():
    """--oaa K: K sketches of R x W cells hold K d weights: the compression factor is d / (R W),
    as for one class (it was d / (K R W), so CF 1 for a multiclass sketch read as 1/K)."""
    from streamlearn.algos.mission import Mission
    rng = np.random.default_rng(3)
    n, p = 60, 40
    X = rng.normal(size=(n, p))
    y = rng.integers(1, 4, n).astype(float)
    keys = rng.integers(0, 2**32, p).astype(np.uint32)
    L = Mission(sketch_rows=2, sketch_width=20, top_k=5, oaa=3)
    L.learn_batch(Batch.from_dense(X, y, hashes=keys))
    s = L.extra_summary()
    assert s["distinct_features"] == pytest.approx(p, abs=2)
    assert s["compression_factor"] == pytest.approx(p / 40, abs=0.05)
    assert s["sketch_bytes"] == 3 * 2 * 20 * 8


@pytest.mark.parametrize("algo", ["mission", "bear"])
def test_example_norm_unit_is_the_reference_on_unit_rows(algo, collision_free_keys, learner_weights):
    """--oaa K defaults to --example_norm unit: exactly the paper's algorithm (the dense
    references) run on the examples scaled to unit L2 norm; the caller's batch is not changed.
    The defaults it brings: mission AdaGrad steps -l 0.6, bear --minibatch 1 with AdaGrad's initial
    scaling and -l 1; binary runs keep the old ones."""
    from streamlearn.algos.bear import Bear
    from streamlearn.algos.mission import Mission
    rng = np.random.default_rng(31)
    n, p, K = 80, 10, 3
    X = rng.normal(size=(n, p)) * rng.uniform(0.1, 50.0, size=(n, 1))  # rows of very different lengths
    y = rng.integers(1, K + 1, n).astype(float)
    Xu = X / np.linalg.norm(X, axis=1, keepdims=True)
    keys = collision_free_keys(p, 3, 40, seed=5)
    if algo == "mission":  # the defaults: AdaGrad steps -l 0.6 (sgd: -l 3)
        L = Mission(sketch_rows=3, sketch_width=40, top_k=p, oaa=K)
        assert (L.adagrad, L.eta, L.b, Mission().eta, Mission().adagrad) == (True, 0.6, 1, 0.01, False)
        assert Mission(oaa=K, step_rule="sgd").eta == 3.0 and not Mission(oaa=K, example_norm="none").adagrad
        Bref, pref = dense_adagrad(Xu, y, K, 3, 1, 0.6, 1)
    else:
        # the defaults: --minibatch 1, AdaGrad's initial scaling with -l 1 (binary and unscaled
        # runs keep Alg. 1's gamma I, -l 0.1, b = 10)
        L = Bear(sketch_rows=3, sketch_width=40, top_k=p, oaa=K, curvature_damping=0.5)
        assert (L.eta, L.b, L.h0, Bear().b, Bear(oaa=K, example_norm="none").b) == (1.0, 1, 1, 10, 10)
        assert (Bear().h0, Bear().eta, Bear(oaa=K, example_norm="none").h0, Bear(oaa=K, initial_scaling="gamma").eta) \
            == (0, 0.1, 0, 0.1)
        assert (Bear(oaa=K).damping, Bear(oaa=K, initial_scaling="gamma").damping) == (1.0, 0.01)
        Bref, pref = dense_olbfgs(Xu, y, K, 3, 1, 1.0, 1, damping=0.5, h0="adagrad")
    batch = Batch.from_dense(X, y, hashes=keys)
    before = batch.values.copy()
    preds = L.learn_batch(batch)[0]
    np.testing.assert_array_equal(batch.values, before)
    np.testing.assert_array_equal(preds, pref)
    np.testing.assert_allclose(learner_weights(L, keys), Bref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("algo", ["bear", "mission"])
def test_oaa_model_saved_before_example_norm_continues_as_trained(algo, tmp_path, invoke_cli):
    """A --oaa model written before --example_norm and the class-interleaved sketch
    (tests/data/sketch_oaa_v1/make.sh, main at 5d79dbc) loads as --example_norm none with the old
    step defaults and continues training exactly as that version did; a new run on the same data
    scales the examples and differs."""
    from pathlib import Path
    v1 = Path(__file__).parent / "data" / "sketch_oaa_v1"
    data = Path(__file__).parent / "data" / "oaa_golden_input.vw"
    out, new = tmp_path / "cont.txt", tmp_path / "new.txt"
    r = invoke_cli("train", "-i", v1 / f"{algo}.slm", data, "-p", out, "--quiet")
    assert r.exit_code == 0, r.output
    assert out.read_text() == (v1 / f"{algo}.continue.txt").read_text()
    r = invoke_cli("train", "--algo", algo, "--oaa", 26, "--sketch_rows", 3, "--sketch_width", 64, "--top_k", 20,
                   data, "-p", new, "--quiet")
    assert r.exit_code == 0, r.output
    assert new.read_text() != out.read_text()


def test_step_default_version_is_saved_and_old_models_keep_their_step():
    """mission --oaa K on unit-norm examples: sgd defaults to -l 3 (step defaults version 2; version 3
    makes AdaGrad the rule, -l 0.6, and --top_k 6000). The model records the version (meta
    ``step_defaults``); a model without it (saved under version 1, -l 1) continues with -l 1, exactly as
    a learner given -l 1; one saved under version 2 with --step_rule adagrad and no -l keeps its -l 2."""
    from streamlearn.algos.mission import Mission
    kw = dict(oaa=3, sketch_rows=2, sketch_width=30, top_k=6, step_rule="sgd")
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 8))
    y = rng.integers(1, 4, 40).astype(float)
    batch = Batch.from_dense(X, y, hashes=(np.arange(1, 9) * 2654435761 % 2**32).astype(np.uint32))
    new = Mission(**kw)
    assert new.eta == 3.0
    meta, arrays = new.state_dict()
    assert meta["step_defaults"] == 3
    assert Mission.from_state(meta, arrays).eta == 3.0
    assert Mission(oaa=3).k == 6000 and Mission().k == 1000 and Mission(oaa=3, top_k=7).k == 7
    k1000 = Mission(**{**kw, "top_k": 1000})  # a model whose hyper-parameters lack top_k: the old default, 1000
    m1000, a1000 = k1000.state_dict()
    assert Mission.from_state({**m1000, "hyper": {k: v for k, v in m1000["hyper"].items() if k != "top_k"}},
                              a1000).k == 1000
    ada = Mission(**{**kw, "step_rule": "adagrad"})
    assert ada.eta == 0.6
    ameta, aarrays = ada.state_dict()
    assert Mission.from_state({**ameta, "step_defaults": 2}, aarrays).eta == 2.0
    old_meta = {k: v for k, v in meta.items() if k != "step_defaults"}
    old = Mission.from_state(old_meta, arrays)
    assert old.eta == 1.0
    given = Mission(**kw, learning_rate=1.0)
    np.testing.assert_array_equal(old.learn_batch(batch)[1], given.learn_batch(batch)[1])
    np.testing.assert_array_equal(old.sketch, given.sketch)
    assert not np.array_equal(Mission(**kw).learn_batch(batch)[1], given.learn_batch(batch)[1])
    with pytest.raises(ValueError, match="step_defaults"):
        Mission.from_state({**meta, "step_defaults": 4}, arrays)


def _check_membership(L):
    """The map equals the scan of the heaps, counts its entries, and each entry is reachable
    from its hash's home entry (no empty entry on the way: a look-up finds it)."""
    got = L.membership()
    assert got == heap_masks(L)
    assert int(L.mcount[0]) == len(got) and 2 * len(got) <= len(L.mkeys)
    T = len(L.mkeys)
    occ = L.mmask != 0
    for e in np.flatnonzero(occ):
        h = (int(L.mkeys[e]) * 0x9E3779B1) & 0xFFFFFFFF
        i = (h * T) >> 32
        while i != e:
            assert occ[i], "an empty entry between a key's home and its entry"
            i = (i + 1) % T


def test_membership_map_follows_the_heaps_through_evictions_loads_and_merges():
    """mission --oaa K keeps, for each heap member, the mask of the classes whose heaps hold it
    (one look-up per feature instead of K): after learning with many evictions, after a model is
    loaded (rebuilt from its heaps) and after a merge of two models, it equals a scan of the heaps;
    and it changes no result (the same run with per-class look-ups: K > 64 has no map)."""
    from streamlearn.algos.mission import Mission
    from streamlearn.distributed import merge as M
    rng = np.random.default_rng(8)
    n, p, K = 150, 400, 5
    kw = dict(oaa=K, sketch_rows=3, sketch_width=97, top_k=6)

    def batch(seed):
        r = np.random.default_rng(seed)
        X = r.normal(size=(n, p)) * (r.random((n, p)) < 0.04)
        return Batch.from_dense(X, r.integers(1, K + 1, n).astype(float), hashes=keys)

    keys = rng.choice(2**32, p, replace=False).astype(np.uint32)
    L = Mission(**kw)
    assert L.membership() is None  # stale until the first minibatch
    L.learn_batch(batch(1))
    m1 = dict(L.membership())
    _check_membership(L)
    L.learn_batch(batch(2))
    _check_membership(L)
    assert L.membership() != m1  # members left and entered
    # loaded: rebuilt from the heaps before the next minibatch
    meta, arrays = L.state_dict()
    L2 = Mission.from_state(meta, arrays)
    assert L2.membership() is None
    L2.learn_batch(batch(3))
    _check_membership(L2)
    # merged: the heaps of the merged state
    other = Mission(**kw)
    other.learn_batch(batch(4))
    m = M.learner_of(M.merge_states([M.state_of(L, {}), M.state_of(other, {})]))
    m.learn_batch(batch(5))
    _check_membership(m)
    # the map changes nothing: the same stream with per-class look-ups (the map switched off)
    A, B = Mission(**kw), Mission(**kw)
    B.mkeys = np.zeros(0, np.uint32)
    B.mmask = np.zeros(0, np.uint64)
    for s in (1, 2):
        np.testing.assert_array_equal(A.learn_batch(batch(s))[1], B.learn_batch(batch(s))[1])
    np.testing.assert_array_equal(A.hkeys, B.hkeys)
    np.testing.assert_array_equal(A.sketch, B.sketch)
    assert B.membership() is None and Mission(oaa=65, sketch_width=8, top_k=2).mkeys.shape == (0,)


def test_bear_step_default_version_is_saved_and_old_models_keep_their_scaling():
    """bear --oaa K on unit-norm examples: step defaults version 2 makes --initial_scaling auto AdaGrad's
    diagonal with -l 1, --curvature_damping 1 and --top_k 6000. The model records the version; a model
    without it (version 1: Alg. 1's gamma I, -l 0.1, damping 0.01, no squared sums saved) loads with
    those and continues exactly as a learner given them."""
    from streamlearn.algos.bear import Bear
    kw = dict(oaa=3, sketch_rows=2, sketch_width=30, top_k=6)
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 8))
    y = rng.integers(1, 4, 40).astype(float)
    batch = Batch.from_dense(X, y, hashes=(np.arange(1, 9) * 2654435761 % 2**32).astype(np.uint32))
    new = Bear(**kw)
    assert (new.h0, new.eta, new.damping) == (1, 1.0, 1.0)
    assert Bear(oaa=3).k == 6000 and Bear().k == 1000
    new.learn_batch(batch)
    meta, arrays = new.state_dict()
    assert meta["step_defaults"] == 3 and meta["hyper"]["initial_scaling"] == "auto" and "acc" in arrays
    back = Bear.from_state(meta, arrays)
    assert (back.h0, back.eta, back.damping) == (1, 1.0, 1.0)
    np.testing.assert_array_equal(back.learn_batch(batch)[1], new.learn_batch(batch)[1])
    # version 1: what a model saved before 2026-11-28 without --initial_scaling / -l / damping holds
    gamma = dict(kw, initial_scaling="gamma", learning_rate=0.1, curvature_damping=0.01)
    v1 = Bear(**gamma)
    v1.learn_batch(batch)
    meta1, arrays1 = v1.state_dict()
    meta1 = {k: v for k, v in meta1.items() if k != "step_defaults"}
    meta1["hyper"] = {**meta1["hyper"], "initial_scaling": "auto", "learning_rate": None, "curvature_damping": None}
    old = Bear.from_state(meta1, arrays1)
    assert (old.h0, old.eta, old.damping, old.step_defaults) == (0, 0.1, 0.01, 1)
    np.testing.assert_array_equal(old.learn_batch(batch)[1], v1.learn_batch(batch)[1])
    np.testing.assert_array_equal(old.sketch, v1.sketch)
    with pytest.raises(ValueError, match="acc"):  # a version-2 model's squared sums in a version-1 file
        Bear.from_state({**meta, "step_defaults": 1}, arrays)


def test_bear_binary_examples_are_unit_norm_by_default_and_old_models_keep_theirs():
    """Step defaults version 3: ``--example_norm auto`` is unit for binary bear too (raw counts blew it up:
    ``benchmarks/bear_defaults.py --example_norm``): it learns what ``--example_norm unit`` learns. A binary model
    saved before (version 2 or none recorded, ``auto`` in its hyper-parameters) loads with the examples as given
    and continues exactly as a learner given ``--example_norm none``; binary mission keeps them as given."""
    from streamlearn.algos.bear import Bear
    from streamlearn.algos.mission import Mission
    rng = np.random.default_rng(3)
    X = rng.poisson(2.0, size=(60, 10)).astype(float)
    y = np.where(X[:, 0] > X[:, 1], 1.0, -1.0)
    batch = Batch.from_dense(X, y, hashes=(np.arange(1, 11) * 2654435761 % 2**32).astype(np.uint32))
    kw = dict(sketch_rows=2, sketch_width=40, top_k=6, loss_function="logistic")
    auto, unit, none = Bear(**kw), Bear(**kw, example_norm="unit"), Bear(**kw, example_norm="none")
    assert auto.unit and not none.unit and not Mission(**kw).unit
    got = [lr.learn_batch(batch)[0] for lr in (auto, unit, none)]
    np.testing.assert_array_equal(got[0], got[1])
    assert not np.allclose(got[0], got[2])
    meta, arrays = auto.state_dict()
    assert meta["step_defaults"] == 3 and meta["hyper"]["example_norm"] == "auto"
    np.testing.assert_array_equal(Bear.from_state(meta, arrays).learn_batch(batch)[1], auto.learn_batch(batch)[1])
    m2, a2 = none.state_dict()
    for old in ({**m2, "step_defaults": 2}, {k: v for k, v in m2.items() if k != "step_defaults"}):
        back = Bear.from_state({**old, "hyper": {**old["hyper"], "example_norm": "auto"}}, a2)
        assert not back.unit
        np.testing.assert_array_equal(back.learn_batch(batch)[1], Bear.from_state(m2, a2).learn_batch(batch)[1])


def test_settings_show_what_defaults_and_auto_resolve_to(tmp_path, invoke_cli):
    """The settings printed before the table give the step a sketch learner runs with, not None / auto."""
    data = tmp_path / "d.vw"
    data.write_text("1 | a b\n2 | b c\n3 | c a\n")
    out = invoke_cli("train", "--algo", "bear", "--oaa", 3, data).output
    for line in ("learning_rate = 1.0", "minibatch = 1", "curvature_damping = 1.0", "initial_scaling = adagrad (auto)"):
        assert line + "\n" in out, out
    out = invoke_cli("train", "--algo", "mission", data, "--step_rule", "auto").output
    assert "learning_rate = 0.01\n" in out and "step_rule = sgd (auto)\n" in out, out
    out = invoke_cli("train", "--algo", "bear", "--oaa", 3, "-l", 0.5, "--initial_scaling", "gamma", data).output
    assert "learning_rate = 0.5\n" in out and "initial_scaling = gamma\n" in out and "curvature_damping = 0.01\n" in out


@pytest.mark.parametrize("algo, kw", [("mission", {"step_rule": "adagrad"}), ("bear", {"initial_scaling": "adagrad"}),
                                      ("mission", {})])
def test_model_arrays_bytes_is_the_saved_arrays_size(algo, kw):
    """``model_arrays_bytes`` (the metrics' model_array_bytes) sizes the saved arrays without copying the
    ``--oaa K`` sketch and count-min sums into the saved layout; the size is the saved arrays' all the same,
    and the arrays saved afterwards are still in the saved layout ``(K, R, W)``."""
    from streamlearn.algos import LEARNERS
    L = LEARNERS[algo](oaa=3, sketch_rows=2, sketch_width=30, top_k=6, **kw)
    L.sketch[1, 7, 2] = 5.0  # an asymmetric cell: the saved layout is visible
    assert L.model_arrays_bytes == sum(a.nbytes for a in L.state_dict()[1].values())
    arrays = L.state_dict()[1]
    assert arrays["sketch"].shape == (3, 2, 30) and arrays["sketch"][2, 1, 7] == 5.0
    if "acc" in arrays:
        assert arrays["acc"].shape == (3, 2, 30)


@pytest.mark.parametrize("algo", ["mission", "bear"])
def test_run_path_heaps_keep_order_position_map_and_names(algo, tmp_path, invoke_cli):
    """The run kernels' heap code (_sketch_kernels._offer_class, which the heap unit tests of
    test_sketch.py call one key at a time) in a whole run: after a stream with many entries and
    evictions, every class's heap is a min-heap on |w|, full, its position map finds each member
    (checked by the loader) and each member's stored name hashes to its key."""
    from streamlearn.api import load_model
    from streamlearn.io.hashing import feature_hash
    rng = np.random.default_rng(3)
    lines = []
    for _ in range(400):
        feats = " ".join(f"w{int(j)}:{rng.uniform(0.1, 2):.3f}" for j in rng.integers(0, 300, 12))
        lines.append(f"{rng.integers(1, 4)} |t {feats}")
    data = tmp_path / "d.vw"
    data.write_text("\n".join(lines) + "\n")
    model = tmp_path / "m.slm"
    r = invoke_cli("train", "--algo", algo, "--oaa", 3, "--top_k", 16, data, "-f", model, "--quiet")
    assert r.exit_code == 0, r.output
    L = load_model(str(model))[0]
    for c in range(3):
        n = int(L.hsize[c])
        assert n == 16
        a = np.abs(L.hw[c, :n])
        assert all(a[(i - 1) // 2] <= a[i] for i in range(1, n))
        for s in range(n):
            nid = L.hname[c, s]
            ns, name = bytes(L.names[c, nid, :L.name_len[c, nid]]).decode().split("^")
            assert feature_hash(name, ns) == int(L.hkeys[c, s])
