"""Distributed training (issue 19): merge rules against their definitions, ``streamlearn
merge``, partitions, and ``train --engine dask`` on a 2-worker LocalCluster (processes)."""
from __future__ import annotations

import gzip
import os
import pickle
import signal
import struct
import threading
import time

import mmh3
import numpy as np
import pytest

from conftest import A9A, ROOT

from streamlearn.algos import make_learner
from streamlearn.distributed import merge as M

# -- references written from the definitions -----------------------------------------------------


def vw_do_weighting(nodes):
    """VW's accumulate_weighted_avg (accumulate.cc / do_weighting), one coordinate at a time:
    total = sum_i G_i; node i scales (w, G, N) by G_i / total (w set to 0 where total is 0),
    then everything is summed."""
    n = len(nodes[0]["w"])
    w, G, N = np.zeros(n), np.zeros(n), np.zeros(n)
    for j in range(n):
        total = sum(float(nd["G"][j]) for nd in nodes)
        for nd in nodes:
            wj, gj, nj = float(nd["w"][j]), float(nd["G"][j]), float(nd["N"][j])
            if total > 0:
                ratio = gj / total
                wj, gj, nj = wj * ratio, gj * ratio, nj * ratio
            else:
                wj = 0.0
            w[j] += wj
            G[j] += gj
            N[j] += nj
    return w, G, N


def ref_hash(key, seed):
    return mmh3.hash(struct.pack("<I", int(key)), int(seed), signed=False)


def ref_sketch(weights: dict, seeds, W):
    """The Count Sketch of the weight vector ``{key: w}``: ADD w * sign into every row's bucket."""
    sk = np.zeros((seeds.shape[0], W))
    for key, w in weights.items():
        for r in range(seeds.shape[0]):
            b = (ref_hash(key, seeds[r, 0]) * W) >> 32
            s = 1.0 if ref_hash(key, seeds[r, 1]) >> 31 == 0 else -1.0
            sk[r, b] += s * w
    return sk


def adagrad_state(rng, hyper, touched=0.5, examples=100, scal=None):
    lrn = make_learner("adagrad", hyper)
    st = M.state_of(lrn, {"quadratic": [], "constant": True, "unit_norm": False})
    n = st.arrays["w"].shape[0]
    on = rng.random(n) < touched
    st.arrays["w"] = np.where(on, rng.normal(size=n), 0).astype(np.float32)
    if st.arrays["G"].shape[0] == n:
        st.arrays["G"] = np.where(on, rng.random(n) * 3, 0).astype(np.float32)
    if st.arrays["N"].shape[0] == n:
        st.arrays["N"] = np.where(on, rng.random(n) + 0.5, 0).astype(np.float32)
    st.arrays["scal"][[0, 1, 4]] = rng.random(3) * 10
    st.arrays["scal"][2:4] = sorted(rng.normal(size=2))
    st.meta["examples_learned"] = examples
    return st


# -- rules ---------------------------------------------------------------------------------------


def test_adagrad_merge_is_vw_weighted_average():
    rng = np.random.default_rng(1)
    hyper = {"bit_precision": 5, "loss_function": "logistic"}
    nodes = [adagrad_state(rng, hyper, examples=e) for e in (10, 30, 7)]
    merged = M.merge_states(nodes)
    w, G, N = vw_do_weighting([{k: s.arrays[k] for k in ("w", "G", "N")} for s in nodes])
    np.testing.assert_allclose(merged.arrays["w"], w, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(merged.arrays["G"], G, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(merged.arrays["N"], N, rtol=2e-6, atol=1e-7)
    none = np.all([s.arrays["G"] == 0 for s in nodes], axis=0)
    assert none.any() and (merged.arrays["w"][none] == 0).all()
    sc = [s.arrays["scal"] for s in nodes]
    ms = merged.arrays["scal"]
    for i in (0, 1, 4):  # VW: normalized_sum_norm_x, total_weight (and t) are additive
        assert ms[i] == pytest.approx(sum(s[i] for s in sc))
    assert ms[2] == min(s[2] for s in sc) and ms[3] == max(s[3] for s in sc)
    assert merged.examples == 47
    M.learner_of(merged)  # a valid adagrad state


def test_adagrad_sgd_merge_averages_by_examples():
    rng = np.random.default_rng(2)
    hyper = {"bit_precision": 4, "sgd": True}
    a, b = adagrad_state(rng, hyper, examples=30), adagrad_state(rng, hyper, examples=10)
    m = M.merge_states([a, b])
    want = (30 * a.arrays["w"].astype(np.float64) + 10 * b.arrays["w"]) / 40
    np.testing.assert_allclose(m.arrays["w"], want, rtol=1e-6)


def test_merge_from_a_common_base_adds_what_each_node_added():
    rng = np.random.default_rng(3)
    hyper = {"bit_precision": 4}
    base = adagrad_state(rng, hyper, examples=50)
    nodes = []
    for e in (20, 5):
        s = adagrad_state(rng, hyper, examples=50 + e)
        nodes.append(s)
    m = M.merge_states(nodes, base=base)
    assert m.examples == 75
    for i in (0, 1, 4):
        want = base.arrays["scal"][i] + sum(s.arrays["scal"][i] - base.arrays["scal"][i] for s in nodes)
        assert m.arrays["scal"][i] == pytest.approx(want)


def mix_reference(rule, base, nodes):
    """The :data:`MIX_RULES` other than VW's, one coordinate at a time from their definitions: with
    dw_i = w_i - w_0, dG_i = G_i - G_0 and lambda_i the examples node i learned from the base,
    delta: w_0 + sum dG_i dw_i / sum dG_i, G_0 + sum dG_i; examples: w_0 + sum lambda_i dw_i / sum lambda_i,
    G = sum G_i^2 / sum G_i (VW's); sqrtk: delta's step times sqrt((sum dG_i)^2 / sum dG_i^2), G as delta;
    N: sum dG_i N_i / sum dG_i (the base's where no node added to G)."""
    b = {k: base.arrays[k].astype(np.float64) for k in ("w", "G", "N")}
    nd = [{k: s.arrays[k].astype(np.float64) for k in ("w", "G", "N")} for s in nodes]
    lam = [s.examples - base.examples for s in nodes]
    n = len(b["w"])
    w, G, N = b["w"].copy(), b["G"].copy(), b["N"].copy()
    for j in range(n):
        dG = [x["G"][j] - b["G"][j] for x in nd]
        dw = [x["w"][j] - b["w"][j] for x in nd]
        tot = sum(dG)
        if rule == "examples":
            w[j] = b["w"][j] + sum(l * d for l, d in zip(lam, dw)) / sum(lam)
            gs = [x["G"][j] for x in nd]
            G[j] = sum(g * g for g in gs) / sum(gs) if sum(gs) > 0 else 0.0
        else:
            step = sum(g * d for g, d in zip(dG, dw)) / tot if tot > 0 else 0.0
            if rule == "sqrtk" and tot > 0:
                step *= np.sqrt(tot * tot / sum(g * g for g in dG))
            w[j] = b["w"][j] + step
            G[j] = b["G"][j] + tot
        if tot > 0:
            N[j] = sum(g * x["N"][j] for g, x in zip(dG, nd)) / tot
    return w, G, N


@pytest.mark.parametrize("rule", ["delta", "examples", "sqrtk"])
def test_adagrad_mixing_rules_follow_their_definitions(rule):
    """Nodes that went on from a common base, each touching a random subset of the coordinates (some
    touched by one node only, some by none): each rule against its reference, a tree of merges equal
    to one merge, and only the coordinates a node changed travel."""
    rng = np.random.default_rng(11)
    hyper = {"bit_precision": 6, "loss_function": "logistic"}
    base = adagrad_state(rng, hyper, examples=40)
    n = base.arrays["w"].shape[0]
    nodes = []
    for e in (12, 30, 5):
        s = M.State(base.algo, dict(base.meta, examples_learned=40 + e),
                    {k: np.array(v, copy=True) for k, v in base.arrays.items()}, dict(base.reader))
        on = rng.random(n) < 0.3
        s.arrays["w"][on] += rng.normal(size=on.sum()).astype(np.float32)
        s.arrays["G"][on] += (rng.random(on.sum()) * 2 + 0.1).astype(np.float32)
        s.arrays["N"][on] = np.maximum(s.arrays["N"][on], rng.random(on.sum()) * 2).astype(np.float32)
        s.arrays["scal"][[0, 1, 4]] += rng.random(3)
        nodes.append(s)
    merged = M.merge_states(nodes, base=base, mix=rule)
    w, G, N = mix_reference(rule, base, nodes)
    for k, want in (("w", w), ("G", G), ("N", N)):
        np.testing.assert_allclose(merged.arrays[k], want, rtol=2e-6, atol=1e-6, err_msg=k)
    assert merged.examples == 87
    accs = [M.lift(s, base, rule) for s in nodes]
    tree = M.finish(M.combine([M.combine(accs[:2]), accs[2]]), base)
    for k in merged.arrays:
        np.testing.assert_allclose(tree.arrays[k], merged.arrays[k], rtol=1e-6, atol=1e-12)
    changed = np.flatnonzero(nodes[0].arrays["G"] != base.arrays["G"])
    assert np.array_equal(accs[0]["units"][0]["sp"]["idx"], changed)
    vw = M.merge_states(nodes, base=base)
    assert not np.allclose(vw.arrays["w"], merged.arrays["w"])  # a rule, not VW's under another name
    with pytest.raises(M.MergeError, match="unknown mixing rule"):
        M.lift(nodes[0], base, "mean")


def _nodes_from(base, rng, examples=(12, 30, 5), frac=0.3):
    """Nodes that went on from ``base``, each changing a random subset of the coordinates."""
    n = base.arrays["w"].shape[0]
    nodes = []
    for e in examples:
        s = M.State(base.algo, dict(base.meta, examples_learned=base.examples + e),
                    {k: np.array(v, copy=True) for k, v in base.arrays.items()}, dict(base.reader))
        on = rng.random(n) < frac
        s.arrays["w"][on] += rng.normal(size=on.sum()).astype(np.float32)
        s.arrays["G"][on] += (rng.random(on.sum()) * 2 + 0.1).astype(np.float32)
        s.arrays["scal"][[0, 1, 4]] += rng.random(3)
        nodes.append(s)
    return nodes


@pytest.mark.parametrize("nesterov", [False, True])
def test_bmuf_is_block_momentum_on_the_averaged_update(nesterov):
    """BMUF (Chen & Huo 2016, eqs. 4-7) over three blocks, from its definition, keeping W(t) and the
    filtered update D(t) explicitly: W_avg(t) = the plain merge (VW's rule) of the k nodes that started
    from W_g(t-1); G(t) = W_avg(t) - W_g(t-1); D(t) = eta D(t-1) + G(t), eta = 1 - 1/k, block learning rate
    1; W(t) = W(t-1) + D(t); W_g(t) = W(t) (classical) or W(t) + eta D(t) (Nesterov). G, N, the scalars
    and the examples are VW's merge; a tree of merges gives the same."""
    rng = np.random.default_rng(5)
    rule = "bmuf-nesterov" if nesterov else "bmuf"
    start = adagrad_state(rng, {"bit_precision": 6, "loss_function": "logistic"}, examples=40)
    k = 3
    eta = 1 - 1 / k
    W = start.arrays["w"].astype(np.float64)
    D = np.zeros_like(W)
    wg = W.copy()
    base = start
    for t in range(3):
        nodes = _nodes_from(base, rng)
        np.testing.assert_allclose(base.arrays["w"], wg, rtol=1e-6, atol=1e-6)  # the nodes start from W_g(t-1)
        vw = M.merge_states(nodes, base=base)  # W_avg(t)
        merged = M.merge_states(nodes, base=base, mix=rule)
        G = vw.arrays["w"].astype(np.float64) - wg
        D = eta * D + G
        W = W + D
        wg = W + eta * D if nesterov else W
        np.testing.assert_allclose(merged.arrays["w"], wg, rtol=1e-5, atol=1e-5, err_msg=f"block {t + 1}")
        for key in ("G", "N", "scal"):
            np.testing.assert_array_equal(merged.arrays[key], vw.arrays[key])
        assert merged.examples == vw.examples and merged.mixing["w"].shape == W.shape
        accs = [M.lift(s, base, rule) for s in nodes]
        tree = M.finish(M.combine([M.combine(accs[:2]), accs[2]]), base, rule)
        np.testing.assert_allclose(tree.arrays["w"], merged.arrays["w"], rtol=1e-6, atol=1e-6)
        base = merged
    if not nesterov:  # block 1 of classical BMUF is the plain merge (no momentum yet): checked above via W_g
        assert not np.allclose(merged.arrays["w"], vw.arrays["w"])  # later blocks are not
    # the model a learner loads is W_g; the momentum is not part of it
    assert M.learner_of(merged).state_dict()[1].keys() == M.learner_of(vw).state_dict()[1].keys()


def test_bmuf_leaves_other_learners_to_their_rule():
    rng = np.random.default_rng(8)
    hyper = {"sketch_width": 64, "sketch_rows": 3, "top_k": 4, "loss_function": "logistic"}
    wa = {int(k): float(rng.normal()) for k in rng.integers(0, 2**32, 30)}
    wb = {int(k): float(rng.normal()) for k in rng.integers(0, 2**32, 30)}
    nodes = [sketch_state("mission", wa, 30, hyper, names=list(wa)[:4]),
             sketch_state("mission", wb, 10, hyper, names=list(wb)[:4])]
    plain, bmuf = M.merge_states(nodes), M.merge_states(nodes, mix="bmuf")
    for key in plain.arrays:
        np.testing.assert_array_equal(bmuf.arrays[key], plain.arrays[key])
    assert bmuf.mixing == {}


def test_tree_of_merges_equals_one_merge():
    rng = np.random.default_rng(4)
    hyper = {"bit_precision": 6}
    nodes = [adagrad_state(rng, hyper, examples=int(rng.integers(1, 99))) for _ in range(7)]
    base = M.fresh_state(nodes[0])
    flat = M.finish(M.combine(M.lift(s, base) for s in nodes), base)
    accs = [M.lift(s, base) for s in nodes]
    tree = M.finish(M.combine([M.combine(accs[:3]), M.combine(accs[3:5]), M.combine(accs[5:])]), base)
    for k in flat.arrays:
        np.testing.assert_allclose(tree.arrays[k], flat.arrays[k], rtol=1e-6, atol=1e-12)


def test_oaa_merges_class_by_class():
    rng = np.random.default_rng(5)
    hyper = {"bit_precision": 6, "oaa": 3}
    states = []
    for e in (12, 20):
        st = M.state_of(make_learner("adagrad", hyper), {"quadratic": []})
        for k, a in st.arrays.items():
            if k.endswith((".w", ".G", ".N")) and a.shape[0] > 1:
                st.arrays[k] = (rng.random(a.shape) * (rng.random(a.shape) < 0.6)).astype(np.float32)
        st.meta["examples_learned"] = e
        for c in st.meta["classes"]:
            c["examples_learned"] = e
        states.append(st)
    m = M.merge_states(states)
    for c in (1, 2, 3):
        nodes = [{k: s.arrays[f"class{c}.{k}"] for k in ("w", "G", "N")} for s in states]
        w, G, _ = vw_do_weighting(nodes)
        np.testing.assert_allclose(m.arrays[f"class{c}.w"], w, rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(m.arrays[f"class{c}.G"], G, rtol=2e-6, atol=1e-7)
    assert M.learner_of(m).n_classes == 3


def sketch_state(algo, weights: dict, examples: int, hyper, names=None):
    """A bear/mission state whose sketch is ``ref_sketch(weights)`` and whose heap holds the
    keys of ``names`` (built by the merge's own heap builder from a fresh learner)."""
    lrn = make_learner(algo, hyper)
    st = M.state_of(lrn, {"quadratic": []})
    seeds = st.arrays["seeds"]
    W = st.arrays["sketch"].shape[2]
    st.arrays["sketch"][0] = ref_sketch(weights, seeds, W)
    keys = np.array(sorted(names or []), np.uint32)
    nm = np.zeros((len(keys), 64), np.uint8)
    for i, k in enumerate(keys):
        b = f"f{k}".encode()
        nm[i, :len(b)] = list(b)
    k = st.arrays["hkeys"].shape[1]
    T = st.arrays["htbl"].shape[1]
    w = M.sketch_query(st.arrays["sketch"][0], seeds, keys)
    hk, hw, hp, hn, ht, n, names_, nl = M._heap_arrays(keys, w, nm, np.array([len(f"f{x}") for x in keys], np.int32),
                                                       k, T)
    for f, v in zip(("hkeys", "hw", "htpos", "hname", "htbl", "names", "name_len"), (hk, hw, hp, hn, ht, names_, nl)):
        st.arrays[f][0] = v
    st.arrays["hsize"][0] = n
    st.arrays["counters"][0] = examples // 10
    st.meta["examples_learned"] = examples
    return st


@pytest.mark.parametrize("algo", ["mission", "bear"])
def test_count_sketch_merge_is_the_sketch_of_the_merged_weights(algo):
    rng = np.random.default_rng(6)
    hyper = {"sketch_width": 64, "sketch_rows": 3, "top_k": 4, "loss_function": "logistic"}
    wa = {int(k): float(rng.normal()) for k in rng.integers(0, 2**32, 30)}
    wb = {int(k): float(rng.normal()) for k in rng.integers(0, 2**32, 30)}
    a = sketch_state(algo, wa, 30, hyper, names=list(wa)[:4])
    b = sketch_state(algo, wb, 10, hyper, names=list(wb)[:4])
    m = M.merge_states([a, b])
    seeds = a.arrays["seeds"]
    avg = {}
    for wd, lam in ((wa, 30 / 40), (wb, 10 / 40)):
        for k, v in wd.items():
            avg[k] = avg.get(k, 0.0) + lam * v
    np.testing.assert_allclose(m.arrays["sketch"][0], ref_sketch(avg, seeds, 64), atol=1e-12)
    # the heap: the top_k of |QUERY(merged sketch)| over the union of both heaps' members
    cand = sorted(set(list(wa)[:4]) | set(list(wb)[:4]))
    q = {k: float(np.median([(1.0 if ref_hash(k, seeds[r, 1]) >> 31 == 0 else -1.0)
                             * m.arrays["sketch"][0, r, (ref_hash(k, seeds[r, 0]) * 64) >> 32] for r in range(3)]))
         for k in cand}
    want = sorted((k for k in cand if q[k] != 0), key=lambda k: (-abs(q[k]), k))[:4]
    n = int(m.arrays["hsize"][0])
    assert sorted(int(x) for x in m.arrays["hkeys"][0, :n]) == sorted(want)
    for s in range(n):
        key = int(m.arrays["hkeys"][0, s])
        assert m.arrays["hw"][0, s] == pytest.approx(q[key])
        nid = m.arrays["hname"][0, s]
        assert bytes(m.arrays["names"][0, nid, :m.arrays["name_len"][0, nid]]).decode() == f"f{key}"
    assert m.arrays["counters"][0] == 4 and m.arrays["counters"][1] == m.arrays["counters"][2] == 0
    assert (m.arrays["hll"] == np.maximum(a.arrays["hll"], b.arrays["hll"])).all()
    lrn = M.learner_of(m)  # the loader checks the heap's position map and the seeds
    if algo == "bear":
        assert (lrn.rs_len == 0).all() and (lrn.ring_sr == 0).all()


@pytest.mark.parametrize("algo,opt", [("mission", {"step_rule": "adagrad"}), ("bear", {"initial_scaling": "adagrad"})])
def test_mission_adagrad_accumulators_merge_as_base_plus_what_each_node_added(algo, opt):
    """--step_rule adagrad's (bear: --initial_scaling adagrad's) count-min sketches of squared
    gradients are linear: the merge is the base's plus each node's increment (the sketch of all
    nodes' squared gradients), whatever the weights' averaging does."""
    rng = np.random.default_rng(8)
    hyper = {"sketch_width": 32, "sketch_rows": 3, "top_k": 4, **opt}
    base = sketch_state(algo, {}, 10, hyper)
    base.arrays["acc"] = rng.uniform(0, 2, base.arrays["acc"].shape)
    base.arrays["iacc"] = rng.uniform(0, 2, base.arrays["iacc"].shape)
    nodes = []
    for n in (30, 10):
        st = sketch_state(algo, {}, 10 + n, hyper)
        st.arrays["acc"] = base.arrays["acc"] + rng.uniform(0, 1, base.arrays["acc"].shape)
        st.arrays["iacc"] = base.arrays["iacc"] + rng.uniform(0, 1, base.arrays["iacc"].shape)
        nodes.append(st)
    m = M.merge_states(nodes, base=base)
    for f in ("acc", "iacc"):
        want = nodes[0].arrays[f] + nodes[1].arrays[f] - base.arrays[f]
        np.testing.assert_allclose(m.arrays[f], want, rtol=1e-12)
    assert "acc" not in M.merge_states([sketch_state(algo, {}, 1, {"sketch_width": 16})]).arrays
    lrn = M.learner_of(m)  # the loader checks the accumulators' shapes and signs
    if algo == "bear":
        assert (lrn.ring_rdr == 0).all() and lrn.h0 == 1


def test_merge_refuses_what_differs():
    rng = np.random.default_rng(7)
    a = adagrad_state(rng, {"bit_precision": 5})
    with pytest.raises(M.MergeError, match="--bit_precision"):
        M.merge_states([a, adagrad_state(rng, {"bit_precision": 6})])
    with pytest.raises(M.MergeError, match="--learning_rate"):
        M.merge_states([a, adagrad_state(rng, {"bit_precision": 5, "learning_rate": 0.1})])
    b = adagrad_state(rng, {"bit_precision": 5})
    b.reader = dict(b.reader, quadratic=["ab"])
    with pytest.raises(M.MergeError, match="hashing setting quadratic"):
        M.merge_states([a, b])
    s1 = sketch_state("mission", {}, 1, {"sketch_width": 16, "random_seed": 1})
    s2 = sketch_state("mission", {}, 1, {"sketch_width": 16, "random_seed": 2})
    with pytest.raises(M.MergeError, match="--random_seed"):
        M.merge_states([s1, s2])
    o = M.state_of(make_learner("ftsl", {"bit_precision": 8}), {})
    with pytest.raises(M.MergeError, match="no merge rule"):
        M.merge_states([o, o])
    f1 = M.state_of(make_learner("fd-son", {"bit_precision": 8, "sketch_size": 4}), {})
    f2 = M.state_of(make_learner("fd-son", {"bit_precision": 8, "sketch_size": 5}), {})
    with pytest.raises(M.MergeError, match="--sketch_size"):
        M.merge_states([f1, f2])


def test_merge_names_step_defaults_that_resolve_differently():
    """Models of two step-defaults versions with the same hyper-parameters: refused, naming the
    version and the setting, when those resolve to other steps (mission --oaa: version 2's auto rule
    is sgd, version 3's adagrad; bear --oaa: gamma I vs AdaGrad's diagonal); merged when they resolve
    alike (binary runs, whose defaults never changed)."""
    def oaa_state(algo, version, hyper):
        st = M.state_of(make_learner(algo, {"oaa": 3, "sketch_width": 16, "top_k": 8, **hyper}), {})
        st.meta = dict(st.meta, step_defaults=version)
        return st
    with pytest.raises(M.MergeError, match=r"step defaults \(version 2 vs 3 of mission's\): --learning_rate 3.0 vs 0.6, --step_rule 'sgd' vs 'adagrad'"):
        M.merge_states([oaa_state("mission", 2, {}), oaa_state("mission", 3, {})])
    with pytest.raises(M.MergeError, match=r"version 1 vs 2 of bear's\): --learning_rate 0.1 vs 1.0, --initial_scaling 'gamma' vs 'adagrad', --curvature_damping 0.01 vs 1.0"):
        M.merge_states([oaa_state("bear", 1, {}), oaa_state("bear", 2, {})])
    given = {"step_rule": "sgd", "learning_rate": 3.0}  # given explicitly: the same steps, merged
    M.merge_states([oaa_state("mission", 2, given), oaa_state("mission", 3, given)])
    b1 = M.state_of(make_learner("mission", {"sketch_width": 16}), {})
    b2 = M.state_of(make_learner("mission", {"sketch_width": 16}), {})
    b1.meta = {k: v for k, v in b1.meta.items() if k != "step_defaults"}  # a binary model of version 1
    M.merge_states([b1, b2])


def fd_reference(A, ell):
    """Frequent directions (Liberty 2013) with a 2*ell buffer, shrinking by the ell-th
    singular value squared."""
    B = np.zeros((0, A.shape[1]))
    for row in A:
        B = np.vstack([B, row])
        if len(B) == 2 * ell:
            _, s, Vt = np.linalg.svd(B, full_matrices=False)
            s2 = np.maximum(s[:ell] ** 2 - s[ell - 1] ** 2, 0)
            B = np.sqrt(s2)[:, None] * Vt[:ell]
    return B


def test_fd_merge_keeps_the_frequent_directions_bound():
    rng = np.random.default_rng(8)
    d, ell = 20, 5
    P = rng.normal(size=(3, d))  # rank 3 plus noise: what a sketch of 5 directions can hold
    A1 = 3 * rng.normal(size=(200, 3)) @ P + 0.1 * rng.normal(size=(200, d))
    A2 = 3 * rng.normal(size=(150, 3)) @ P + 0.1 * rng.normal(size=(150, d))
    B = M.fd_merge([fd_reference(A1, ell), fd_reference(A2, ell)], ell)
    assert B.shape == (ell, d)
    A = np.vstack([A1, A2])
    E = A.T @ A - B.T @ B
    eig = np.linalg.eigvalsh(E)
    assert eig.min() > -1e-8 * np.abs(eig).max()  # B^T B never exceeds A^T A
    assert eig.max() <= (A ** 2).sum() / ell  # ||A^T A - B^T B||_2 <= ||A||_F^2 / ell
    # and it is a sketch worth the name: much better than nothing
    assert eig.max() < 0.01 * np.linalg.eigvalsh(A.T @ A).max()


# -- the sketched second-order learners: per-feature tables and sketches ----------------------------

SON = ("oja-son", "fd-son", "rfd-son")


def _son_batches(lines):
    import io

    from streamlearn.io import ReaderConfig
    from streamlearn.io.source import text_batches
    return list(text_batches(io.BytesIO("".join(lines).encode()), "a9a", ReaderConfig(), "libsvm"))


def _son_learn(algo, lines, start=None, m=6):
    """A learner of ``algo`` (logistic, sketch m) after one pass over ``lines`` (from ``start``, a state)."""
    learner = M.learner_of(start) if start is not None else \
        make_learner(algo, {"loss_function": "logistic", "sketch_size": m, "bit_precision": 10})
    for b in _son_batches(lines):
        learner.learn_batch(b)
    return learner


def _curvature(algo, learner, keys):
    """The curvature the sketch holds over ``keys``: Oja ``V^T Lambda V``, FD ``S^T S``."""
    if algo == "oja-son":
        V = learner.sketch_dense(keys)
        return V.T @ (np.maximum(learner.lam, 0)[:, None] * V)
    S = learner.sketch_dense(keys)
    return S.T @ S


def _top(C, k, shrink):
    lam, U = np.linalg.eigh(C)
    lam, U = lam[::-1], U[:, ::-1]
    lam = np.maximum(lam, 0)
    cut = lam[k - 1] if shrink else 0.0
    keep = np.maximum(lam[:k] - cut, 0)
    if shrink:
        keep[k - 1] = 0.0
    return (U[:, :k] * keep) @ U[:, :k].T


@pytest.fixture(scope="module")
def son_lines():
    return gzip.open(A9A, "rt").read().splitlines(True)


@pytest.mark.parametrize("algo", SON)
def test_son_merge_from_scratch(algo, son_lines):
    """Nodes trained from scratch on parts of a9a: the merged model predicts the example-weighted
    average of the nodes' predictions (its weights are that average: prediction is linear in them), its
    sketch holds Oja's example-weighted average curvature cut to the top m directions, or the frequent-
    directions merge of the nodes' sketches (stack, shrink by the m-th eigenvalue); the merged state loads
    and learns on."""
    m = 6
    parts = (son_lines[:900], son_lines[900:1500], son_lines[1500:2400])
    nodes = [_son_learn(algo, p, m=m) for p in parts]
    states = [M.state_of(n, {}) for n in nodes]
    merged = M.merge_states(states)
    lr = M.learner_of(merged)
    ex = np.array([len(p) for p in parts], float)
    assert lr.examples_learned == merged.examples == ex.sum()
    test = _son_batches(son_lines[2400:2700])
    got = np.concatenate([lr.predict_batch(b)[0] for b in test])
    node_preds = [np.concatenate([n.predict_batch(b)[0] for b in test]) for n in nodes]
    want = sum(e * p for e, p in zip(ex, node_preds)) / ex.sum()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    keys = np.unique(np.concatenate([s.arrays["keys"] for s in states]))
    assert np.array_equal(merged.arrays["keys"], keys)  # the union of the tables, by key
    Cs = [_curvature(algo, n, keys) for n in nodes]
    if algo == "oja-son":
        want_c = _top(sum(e * C for e, C in zip(ex, Cs)) / ex.sum(), m, shrink=False)
    else:
        want_c = _top(sum(Cs), m, shrink=True)
        # within the frequent-directions bound of the stacked sketches: 0 <= sum C_i - C <= s_m^2 I
        E = np.linalg.eigvalsh(sum(Cs) - _curvature(algo, lr, keys))
        assert E.min() > -1e-8 * E.max()
    np.testing.assert_allclose(_curvature(algo, lr, keys), want_c, atol=1e-8 * np.abs(want_c).max())
    assert np.abs(want_c).max() > 0
    lr.learn_batch(test[0])  # the merged state is a valid learner state
    assert np.isfinite(lr.predict_batch(test[0])[0]).all()


@pytest.mark.parametrize("algo", ("oja-son", "fd-son"))
def test_son_merge_under_mixing_counts_the_base_once(algo, son_lines):
    """Nodes that continued from a common base (a pass of iterative mixing): a tree of merges equals one
    merge; FD's merged sketch is the base's plus what each node added (sum_i S_i^T S_i - (k - 1) S_0^T S_0),
    shrunk; the weights are the example-weighted average."""
    m = 5
    base_lr = _son_learn(algo, son_lines[:600], m=m)
    base = M.state_of(base_lr, {})
    parts = (son_lines[600:1200], son_lines[1200:1500], son_lines[1500:2200])
    nodes = [_son_learn(algo, p, start=base) for p in parts]
    states = [M.state_of(n, {}) for n in nodes]
    flat = M.merge_states(states, base=base)
    tree = M.finish(M.combine([M.combine([M.lift(states[0], base), M.lift(states[1], base)]),
                               M.lift(states[2], base)]), base)
    for k in flat.arrays:
        np.testing.assert_allclose(tree.arrays[k], flat.arrays[k], atol=1e-9, err_msg=k)
    lr = M.learner_of(flat)
    assert lr.examples_learned == 2200
    keys = flat.arrays["keys"]
    if algo == "fd-son":
        C = sum(_curvature(algo, n, keys) for n in nodes) - 2 * _curvature(algo, base_lr, keys)
        np.testing.assert_allclose(_curvature(algo, lr, keys), _top(C, m, shrink=True),
                                   atol=1e-8 * np.abs(C).max())
        ws = [n.weights_dense(keys) for n in nodes]
        ex = np.array([len(p) for p in parts], float)
        np.testing.assert_allclose(lr.weights_dense(keys), sum(e * w for e, w in zip(ex, ws)) / ex.sum(), atol=1e-12)


def test_rfd_merge_averages_alpha_by_examples(son_lines):
    """RFD-SON's adaptive alpha under mixing: the base's, plus the nodes' increments averaged in proportion to
    the examples each learned (as the weights), plus half of the merge's own shrink (the m-th eigenvalue it
    discards); the sum of the shrinks (flt[1]) is a sum. A tree of merges gives the same alpha."""
    m = 5
    base_lr = _son_learn("rfd-son", son_lines[:600], m=m)
    base = M.state_of(base_lr, {})
    parts = (son_lines[600:1200], son_lines[1200:1500], son_lines[1500:2200])
    states = [M.state_of(_son_learn("rfd-son", p, start=base), {}) for p in parts]
    flat = M.merge_states(states, base=base)
    tree = M.finish(M.combine([M.combine([M.lift(states[0], base), M.lift(states[1], base)]),
                               M.lift(states[2], base)]), base)
    a0, s0 = base.arrays["flt"][0], base.arrays["flt"][1]
    inc = np.array([s.arrays["flt"][0] - a0 for s in states])
    shrinks = np.array([s.arrays["flt"][1] - s0 for s in states])
    assert (inc > 0).all() and len(set(np.round(inc, 12))) == 3  # each node grew alpha by its own amount
    ex = np.array([len(p) for p in parts], float)
    merge_shrink = flat.arrays["flt"][1] - s0 - shrinks.sum()  # what the merge itself discarded
    assert merge_shrink >= 0
    want = a0 + (ex * inc).sum() / ex.sum() + 0.5 * merge_shrink
    assert flat.arrays["flt"][0] == pytest.approx(want, rel=1e-12)
    assert tree.arrays["flt"][0] == pytest.approx(want, rel=1e-12)
    assert flat.arrays["flt"][0] < a0 + inc.sum()  # not the sum of the increments
    # from scratch (streamlearn merge of independent models): the same rule from the fresh learner's alpha0
    alone = [M.state_of(_son_learn("rfd-son", p, m=m), {}) for p in parts]
    fresh = M.fresh_state(alone[0])
    got = M.merge_states(alone)
    f0 = fresh.arrays["flt"]
    inc = np.array([s.arrays["flt"][0] - f0[0] for s in alone])
    mshrink = got.arrays["flt"][1] - f0[1] - sum(s.arrays["flt"][1] - f0[1] for s in alone)
    assert got.arrays["flt"][0] == pytest.approx(f0[0] + (ex * inc).sum() / ex.sum() + 0.5 * mshrink, rel=1e-12)


@pytest.mark.parametrize("algo", ("fd-son", "rfd-son"))
def test_engine_compacts_fd_sketch_rows_at_every_tree_node(algo, son_lines):
    """lift(compact=True) (what the engine's tasks send): a leaf's m + tau sketch rows and every tree
    node's rows are cut to m (the top directions of their sum); the table, weights and counters are
    the exact merge's; the curvature differs from the exact merge's by no more than the frequent-directions
    argument allows (both shrinks below what they merge by at most their m-th eigenvalue, and the cuts
    drop at most `dropped`)."""
    m = 5
    base_lr = _son_learn(algo, son_lines[:600], m=m)
    base = M.state_of(base_lr, {})
    parts = [son_lines[600 + 300 * i:900 + 300 * i] for i in range(6)]
    states = [M.state_of(_son_learn(algo, p, start=base), {}) for p in parts]
    exact = M.merge_states(states, base=base)

    def rows(acc):
        return sum(R.shape[0] for _, R in acc["units"][0]["sk"]["rows"])
    assert min(rows(M.lift(s, base)) for s in states) > m  # a leaf holds m + tau rows uncompacted
    accs = [M.lift(s, base, compact=True) for s in states]
    assert max(rows(a) for a in accs) == m
    halves = [M.combine(accs[:3]), M.combine(accs[3:])]
    top = M.combine(halves)
    assert rows(halves[0]) == rows(top) == m  # not 3 m, 6 m
    dropped = float(top["units"][0]["sk"]["dropped"][0])
    assert dropped > 0
    comp = M.finish(top, base)
    for k in exact.arrays:
        if k not in ("rows", "D", "H", "flt", "ints"):
            np.testing.assert_allclose(comp.arrays[k], exact.arrays[k], atol=1e-12, err_msg=k)
    keys = exact.arrays["keys"]
    le, lc = M.learner_of(exact), M.learner_of(comp)
    np.testing.assert_allclose(lc.weights_dense(keys), le.weights_dense(keys), atol=1e-12)
    shrink_e = exact.arrays["flt"][1] - base.arrays["flt"][1]
    shrink_c = comp.arrays["flt"][1] - base.arrays["flt"][1]
    ev = np.linalg.eigvalsh(_curvature(algo, le, keys) - _curvature(algo, lc, keys))
    assert ev.min() >= -shrink_e - 1e-10 and ev.max() <= dropped + shrink_c + 1e-10
    assert np.abs(ev).max() < 0.01 * np.linalg.eigvalsh(_curvature(algo, le, keys)).max()


def test_son_table_columns_merge_by_declared_rule():
    """Each per-feature column merges by the rule its name declares; a table with columns the rule does not
    know is refused, naming it (a new per-feature array is one line in merge.TABLE_COLUMNS)."""
    m = 4
    assert [r for _, r in M._table_layout("fd-son", m, m + 3)] == ["weight", "zero", "zero"] + ["sketch"] * m
    pre = M._table_layout("fd-son", m, m + 3 + 6)[m + 3:]  # FD-SON with the diagonal pre-scaling
    assert pre == [("c", "mean"), ("snap", "snap"), ("s2", "max"), ("f", "frame"), ("G", "delta"), ("buf", "zero")]
    assert [r for _, r in M._table_layout("oja-son", m, m + 7)][:3] == ["weight", "delta", "zero"]
    with pytest.raises(M.MergeError, match="9 columns per feature.*TABLE_COLUMNS"):
        M._table_layout("fd-son", m, m + 5)
    # the frame of the pre-scaling is recomputed from the merged accumulator and scale (VW's rule)
    f = M._pscale_np(np.array([4.0, 0.0, 1.0]), np.array([1.0, 1.0, 0.0]), 0.25, True)
    np.testing.assert_allclose(f, [4.0 ** -0.25, 0.0, 0.0])


def test_states_cross_the_wire_as_plain_data():
    cloudpickle = pytest.importorskip("cloudpickle")
    rng = np.random.default_rng(9)
    st = adagrad_state(rng, {"bit_precision": 5})
    acc = M.lift(st, M.fresh_state(st))
    sk = sketch_state("bear", {5: 1.0}, 3, {"sketch_width": 16})
    for obj in (st, acc, sk):
        for dumps in (pickle.dumps, cloudpickle.dumps):
            blob = dumps(obj)
            assert b"numba" not in blob
            back = pickle.loads(blob)
            if isinstance(obj, M.State):
                assert back.meta == obj.meta and back.reader == obj.reader
                assert all(type(back.arrays[k]) is np.ndarray and np.array_equal(back.arrays[k], v)
                           for k, v in obj.arrays.items())


# -- the merge command ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def halves(tmp_path_factory):
    d = tmp_path_factory.mktemp("halves")
    lines = gzip.open(A9A, "rt").read().splitlines(True)
    out = []
    for i, part in enumerate((lines[:1500], lines[1500:])):
        p = d / f"h{i}.svm"
        p.write_text("".join(part))
        out.append(p)
    return out


def test_merge_command_writes_vw_merge_and_refuses_differences(halves, tmp_path, invoke_cli):
    models = []
    for i, h in enumerate(halves):
        m = tmp_path / f"m{i}.slm"
        r = invoke_cli("train", h, "--loss_function", "logistic", "-f", m, "--quiet")
        assert r.exit_code == 0, r.output
        models.append(m)
    out = tmp_path / "merged.slm"
    r = invoke_cli("merge", *models, "-f", out)
    assert r.exit_code == 0, r.output
    from streamlearn.api import load_model
    states = [M.state_of(*load_model(str(m))[:2]) for m in models]
    merged = M.state_of(*load_model(str(out))[:2])
    w, G, _ = vw_do_weighting([{k: s.arrays[k] for k in ("w", "G", "N")} for s in states])
    nz = np.flatnonzero(w)
    assert len(nz) > 50
    np.testing.assert_allclose(merged.arrays["w"][nz], w[nz], rtol=2e-6)
    assert merged.examples == 3000
    # a model of other hyper-parameters: usage error naming the option; the output is untouched
    other = tmp_path / "other.slm"
    assert invoke_cli("train", halves[0], "--loss_function", "logistic", "-l", "0.1", "-f", other,
                      "--quiet").exit_code == 0
    before = out.read_bytes()
    r = invoke_cli("merge", models[0], other, "-f", out)
    assert r.exit_code == 2 and "--learning_rate" in r.output and "other.slm" in r.output
    assert out.read_bytes() == before
    r = invoke_cli("merge", models[0], models[0], "-f", models[0])
    assert r.exit_code == 2


# -- partitions ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory, halves):
    """sample_data's a9a as 4 Parquet files of 750 rows (one row group each)."""
    from streamlearn.api import ConvertConfig, convert
    d = tmp_path_factory.mktemp("pq")
    lines = gzip.open(A9A, "rt").read().splitlines(True)
    for i in range(4):
        src = d / f"p{i}.svm"
        src.write_text("".join(lines[750 * i:750 * (i + 1)]))
        (d / "pq").mkdir(exist_ok=True)
        convert(ConvertConfig(inputs=[str(src)], output=str(d / "pq" / f"p{i}.parquet"), quiet=True))
        src.unlink()
    return d / "pq"


def test_parquet_split_by_row_group_covers_every_row_once(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamlearn.distributed.partitions import plan_partitions
    from streamlearn.io import ReaderConfig
    from streamlearn.io.parquet import read_parquet_file

    n = 1000
    t = pa.table({"label": np.where(np.arange(n) % 3, 1.0, -1.0), "indices": [[i % 50, 60 + i % 7] for i in range(n)],
                  "values": [[1.0, float(i)] for i in range(n)]})
    f = tmp_path / "one.parquet"
    pq.write_table(t, f, row_group_size=100)
    parts = plan_partitions([str(f)], min_parts=4)
    assert len(parts) >= 4 and all(p.parquet for p in parts)
    groups = [g for p in parts for g in p.row_groups]
    assert groups == list(range(10))
    assert sum(p.rows for p in parts) == n
    rc = ReaderConfig()
    whole = [b for b in read_parquet_file(str(f), rc)]
    pieces = [b for p in parts for b in read_parquet_file(p.path, rc, row_groups=p.row_groups)]
    assert np.array_equal(np.concatenate([b.labels for b in whole]), np.concatenate([b.labels for b in pieces]))
    assert np.array_equal(np.concatenate([b.values for b in whole]), np.concatenate([b.values for b in pieces]))
    # a big target keeps the file whole; text files are one partition each
    assert len(plan_partitions([str(f)], min_parts=1)) == 1
    txt = tmp_path / "a.vw"
    txt.write_text("1 | a\n")
    (p,) = plan_partitions([str(txt)], min_parts=4)
    assert not p.parquet and p.row_groups is None


def test_consecutive_chains_are_runs_of_about_equal_bytes():
    from streamlearn.distributed.partitions import Partition, chains

    def cut(sizes, n):
        return chains([Partition("x", None, -1, b, False) for b in sizes], n, "consecutive")

    assert cut([1] * 4, 2) == [[0, 1], [2, 3]]
    assert cut([1] * 10, 3) == [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]]
    assert cut([10, 1, 1, 1, 1], 2) == [[0], [1, 2, 3, 4]]  # by bytes, not by count
    assert cut([1, 1, 1, 1, 10], 2) == [[0, 1, 2, 3], [4]]
    assert cut([1] * 3, 4) == [[0], [1], [2]]  # never an empty chain
    assert cut([5], 1) == [[0]]
    for sizes, n in (([3, 1, 4, 1, 5, 9, 2, 6], 3), ([1] * 7, 7), ([2] * 9, 4)):
        c = cut(sizes, n)
        assert [i for run in c for i in run] == list(range(len(sizes))) and len(c) == min(n, len(sizes))


def test_strided_chains_deal_the_partitions_out_in_turn():
    from streamlearn.distributed.partitions import Partition, chains

    def cut(sizes, n):
        return chains([Partition("x", None, -1, b, False) for b in sizes], n)  # strided: the default

    assert cut([1] * 16, 4) == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    assert cut([1] * 5, 2) == [[0, 2, 4], [1, 3]]
    assert cut([10, 1, 1, 1, 1], 2) == [[0, 2, 4], [1, 3]]  # in turn, whatever the sizes
    assert cut([1] * 3, 4) == [[0], [1], [2]]  # never an empty chain
    assert cut([1] * 6, 1) == [list(range(6))]  # one chain: the file order, as the CLI reads it
    for sizes, n in (([3, 1, 4, 1, 5, 9, 2, 6], 3), ([1] * 7, 7), ([2] * 9, 4)):
        c = cut(sizes, n)
        assert sorted(i for run in c for i in run) == list(range(len(sizes))) and len(c) == min(n, len(sizes))
        assert all(run == sorted(run) and run for run in c)
    with pytest.raises(ValueError, match="chain order"):
        chains([], 2, "random")


def test_a_large_parquet_file_is_cut_near_the_target_size(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamlearn.distributed.partitions import plan_partitions

    n = 1000
    t = pa.table({"label": np.ones(n), "indices": [[i % 50] for i in range(n)], "values": [[1.0] for _ in range(n)]})
    f = tmp_path / "one.parquet"
    pq.write_table(t, f, row_group_size=100)
    size = sum(p.nbytes for p in plan_partitions([str(f)], min_parts=1))
    parts = plan_partitions([str(f)], min_parts=2, target_bytes=size // 5)
    assert len(parts) == 5 and [g for p in parts for g in p.row_groups] == list(range(10))


def test_one_big_text_file_suggests_convert(tmp_path, monkeypatch):
    from streamlearn.distributed import partitions
    txt = tmp_path / "big.vw"
    txt.write_text("1 | a\n")
    monkeypatch.setattr(partitions.os.path, "getsize", lambda p: 1 << 30)
    said = []
    partitions.plan_partitions([str(txt)], min_parts=2, log=said.append)
    assert said and "streamlearn convert" in said[0] and "big.vw" in said[0]


# -- the engine ----------------------------------------------------------------------------------

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    """A LocalCluster of 2 worker processes shared by the engine tests (the last one kills a worker)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=50) as c:
        yield c


def test_worker_threads_run_on_one_blas_thread_and_give_it_back(parquet_dir, tmp_path, monkeypatch):
    """--worker_threads: the tasks call BLAS at once (the SON learners' canonical forms, searches and merges), so the
    whole run holds BLAS to one thread, whatever a task (the merge's own limit) takes and gives back: no call's
    rounding depends on how many threads it got (fd-son's searched models differed from run to run), and the end of
    the run gives the process's setting back."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from streamlearn.api import RunConfig
    from streamlearn.distributed import engine as E

    def blas_threads():
        return {i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"}
    before = blas_threads()
    real_link = E.train_link
    seen = []

    def link(*a, **k):
        seen.append(blas_threads())
        out = real_link(*a, **k)
        seen.append(blas_threads())
        return out
    monkeypatch.setattr(E, "train_link", link)
    E.train_dask(RunConfig(data=[str(parquet_dir)], algo="fd-son", hyper={"loss_function": "logistic"}, passes=2,
                           quiet=True, final_model=str(tmp_path / "fd.slm")), workers=2, worker_threads=True)
    assert len(seen) == 16 and all(b <= {1} for b in seen)  # 4 links a pass, before and after each
    assert blas_threads() == before


def test_engine_equals_merge_of_models_trained_by_hand(parquet_dir, tmp_path, invoke_cli):
    """An embedded cluster of 2 worker processes, 4 Parquet partitions, one pass: two chains of
    two partitions (strided: files 0, 2 and 1, 3); the engine's model is the merge of the 2 models
    trained by hand, each on its chain's two files in order (same bytes, so the same predictions).
    With worker threads and consecutive chains: files 0, 1 and 2, 3."""
    import json

    from streamlearn.api import RunConfig
    from streamlearn.distributed.engine import train_dask

    files = sorted(parquet_dir.iterdir())
    for name, runs in (("hand", ((0, 2), (1, 3))), ("hand_consecutive", ((0, 1), (2, 3)))):
        hand = []
        for run in runs:
            m = tmp_path / f"{name}{run[0]}.slm"
            assert invoke_cli("train", *[files[i] for i in run], "--loss_function", "logistic", "-f", m,
                              "--quiet").exit_code == 0
            hand.append(m)
        assert invoke_cli("merge", *hand, "-f", tmp_path / f"{name}.slm", "--quiet").exit_code == 0
    assert (tmp_path / "hand.slm").read_bytes() != (tmp_path / "hand_consecutive.slm").read_bytes()
    said = []
    summary = train_dask(RunConfig(data=[str(parquet_dir)], hyper={"loss_function": "logistic"},
                                   final_model=str(tmp_path / "dask.slm"), metrics=str(tmp_path / "m.json")),
                         workers=2, log=said.append)
    text = "\n".join(said)
    assert "LocalCluster of 2 worker processes" in text and "dashboard" in text
    assert "per-pass progressive loss under mixing" in text
    assert (tmp_path / "dask.slm").read_bytes() == (tmp_path / "hand.slm").read_bytes()
    # the same with the workers as threads of this process (--worker_threads)
    said = []
    train_dask(RunConfig(data=[str(parquet_dir)], hyper={"loss_function": "logistic"},
                         final_model=str(tmp_path / "threads.slm")), workers=2, worker_threads=True, log=said.append,
               chain_order="consecutive")
    assert "2 worker threads in this process on dask's local threaded scheduler" in "\n".join(said)
    assert "2 chains of consecutive partitions (2, 2)" in "\n".join(said)
    assert (tmp_path / "threads.slm").read_bytes() == (tmp_path / "hand_consecutive.slm").read_bytes()
    # the same threads on a dask.distributed LocalCluster(processes=False) give the same bytes
    said = []
    train_dask(RunConfig(data=[str(parquet_dir)], hyper={"loss_function": "logistic"},
                         final_model=str(tmp_path / "threads_d.slm")), workers=2, worker_threads=True, log=said.append,
               chain_order="consecutive", threads_on="distributed")
    assert "LocalCluster of 2 worker threads in this process" in "\n".join(said)
    assert (tmp_path / "threads_d.slm").read_bytes() == (tmp_path / "threads.slm").read_bytes()
    # --mix bmuf-nesterov: the same chains, their merge extrapolated by block momentum (merge_states' rule)
    got = []
    s2 = train_dask(RunConfig(data=[str(parquet_dir)], hyper={"loss_function": "logistic"}, quiet=True),
                    workers=2, worker_threads=True, chain_order="consecutive", mix="bmuf-nesterov",
                    on_pass=lambda p, st: got.append(st))
    from streamlearn.api import load_model
    hand = [M.state_of(*load_model(str(tmp_path / f"hand_consecutive{i}.slm"))[:2]) for i in (0, 2)]
    want = M.merge_states(hand, mix="bmuf-nesterov")
    np.testing.assert_array_equal(got[0].arrays["w"], want.arrays["w"])
    np.testing.assert_array_equal(got[0].mixing["w"], want.mixing["w"])
    assert s2["engine"]["mix"] == "bmuf-nesterov" and not np.array_equal(want.arrays["w"], M.merge_states(hand).arrays["w"])
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["examples"] == 3000 == summary["examples"] and m["engine"]["partitions"] == 4
    assert m["engine"]["chains"] == 2 and "2 chains of strided partitions (2, 2)" in text
    assert m["engine"]["passes"][0]["merge_bytes"] > 0
    preds = []
    for model in ("dask.slm", "hand.slm"):
        r = invoke_cli("predict", "-i", tmp_path / model, parquet_dir, "-p", tmp_path / f"{model}.txt", "--quiet")
        assert r.exit_code == 0
        preds.append((tmp_path / f"{model}.txt").read_text())
    assert preds[0] == preds[1]


def test_worker_threads_read_each_partition_once_ahead_of_its_task(parquet_dir, tmp_path, monkeypatch):
    """--worker_threads: every partition is read once per pass, its reading started before its task
    (the chains' first by the client in pass 1, every other by the reader of the link before it), and
    the model is byte for byte the one of tasks that read their own partitions; a failed pass leaves
    no read-ahead behind."""
    import collections

    from streamlearn.api import RunConfig
    from streamlearn.distributed import engine as E
    from streamlearn.errors import StreamlearnError

    reads = []
    real = E._partition_reader

    rows = []

    depths = []

    def spy(part, *a, **k):
        reads.append((os.path.basename(part.path), bool(k.get("now"))))
        rows.append(k.get("batch_rows"))
        depths.append((os.path.basename(part.path), a[3] if len(a) > 3 else k.get("depth", 1)))
        return real(part, *a, **k)
    monkeypatch.setattr(E, "_partition_reader", spy)
    hyper = {"loss_function": "logistic"}
    models = {}
    for ahead in (True, False):
        reads.clear()
        rows.clear()
        models[ahead] = tmp_path / f"m{ahead}.slm"
        E.train_dask(RunConfig(data=[str(parquet_dir)], hyper=hyper, passes=2, quiet=True,
                               final_model=str(models[ahead])), workers=2, worker_threads=True,
                     chain_order="consecutive", read_ahead=ahead)
        assert collections.Counter(f for f, _ in reads) == {f"p{i}.parquet": 2 for i in range(4)}
        # pass 1: all four ahead; pass 2: the chains' first links (p0, p2) read when their tasks start
        assert sorted(f for f, now in reads if not now) == (["p0.parquet", "p2.parquet"] if ahead else
                                                            sorted(f for f, _ in reads))
        assert E._READ_AHEAD == {}
        # two chains in one process share the CLI's batch memory: half the rows per batch
        assert set(rows) == {8192} == {E.batch_rows_for(2)}
        if ahead:  # the chains' first partitions of pass 1 (p0, p2) read deeper ahead while dask is imported
            first = dict(reversed(depths))  # each file's first reader (pass 1), in whatever order the threads ran
            assert first == {"p0.parquet": E.READ_AHEAD_START_DEPTH, "p1.parquet": E.READ_AHEAD_DEPTH,
                             "p2.parquet": E.READ_AHEAD_START_DEPTH, "p3.parquet": E.READ_AHEAD_DEPTH}
            assert E.READ_AHEAD_DEPTH < E.READ_AHEAD_START_DEPTH
            assert sorted(d for _, d in depths) == [E.READ_AHEAD_DEPTH] * 6 + [E.READ_AHEAD_START_DEPTH] * 2
        depths.clear()
    assert models[True].read_bytes() == models[False].read_bytes()
    E.train_dask(RunConfig(data=[str(parquet_dir)], hyper=hyper, passes=2, quiet=True,
                           final_model=str(tmp_path / "start1.slm")), workers=2, worker_threads=True,
                 chain_order="consecutive", read_ahead_start=1)
    assert {d for _, d in depths} == {1}
    assert (tmp_path / "start1.slm").read_bytes() == models[True].read_bytes()
    assert E.batch_rows_for(1) is None and E.batch_rows_for(3) == 5461 and E.batch_rows_for(16) == E.MIN_BATCH_ROWS
    # the batches do not change what is learned: 750-row partitions cut into batches of 97 rows, same bytes
    monkeypatch.setattr(E, "batch_rows_for", lambda n: 97)
    rows.clear()
    from streamlearn.io import parquet as P
    sizes = []
    real_convert = P._convert

    def convert(rb, *a, **k):
        sizes.append(rb.num_rows)
        return real_convert(rb, *a, **k)
    monkeypatch.setattr(P, "_convert", convert)
    E.train_dask(RunConfig(data=[str(parquet_dir)], hyper=hyper, passes=2, quiet=True,
                           final_model=str(tmp_path / "small_batches.slm")), workers=2, worker_threads=True,
                 chain_order="consecutive")
    assert set(rows) == {97} and max(sizes) == 97 and sum(sizes) == 2 * 3000
    assert (tmp_path / "small_batches.slm").read_bytes() == models[True].read_bytes()

    real_learn = E._learn_partition

    def fail_p2(base, part, *a, **k):
        if part.path.endswith("p2.parquet"):
            raise RuntimeError("lost p2")
        return real_learn(base, part, *a, **k)
    monkeypatch.setattr(E, "_learn_partition", fail_p2)
    with pytest.raises(StreamlearnError, match="lost p2"):
        E.train_dask(RunConfig(data=[str(parquet_dir)], hyper=hyper, quiet=True), workers=2, worker_threads=True,
                     chain_order="consecutive")
    assert E._READ_AHEAD == {}
    deadline = time.monotonic() + 10
    while any(t.name == "streamlearn-reader" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == "streamlearn-reader" for t in threading.enumerate())


def test_engine_without_chains_merges_one_model_per_partition(parquet_dir, cluster, tmp_path):
    """``chain=False`` (what the benchmark compares chaining with): the 4 partitions are learned
    from the same state and merged, as ``merge`` of the 4 models trained one by one."""
    from streamlearn.api import RunConfig, load_model, train
    from streamlearn.distributed.engine import train_dask

    hyper = {"loss_function": "logistic"}
    hand = []
    for f in sorted(parquet_dir.iterdir()):
        train(RunConfig(data=[str(f)], hyper=hyper, quiet=True, final_model=str(tmp_path / "h.slm")))
        hand.append(M.state_of(*load_model(str(tmp_path / "h.slm"))[:2]))
    want = M.merge_states(hand)
    got = []
    s = train_dask(RunConfig(data=[str(parquet_dir)], hyper=hyper, quiet=True), scheduler=cluster.scheduler_address,
                   chain=False, on_pass=lambda p, st: got.append(st))
    assert s["engine"]["chains"] == 4
    np.testing.assert_array_equal(got[0].arrays["w"], want.arrays["w"])
    assert got[0].examples == want.examples == 3000
    # another mixing rule reaches the tasks: from a fresh base "delta" sums G where VW's rule averages it
    delta = M.merge_states(hand, mix="delta")
    assert not np.allclose(delta.arrays["G"], want.arrays["G"])
    got = []
    train_dask(RunConfig(data=[str(parquet_dir)], hyper=hyper, quiet=True), scheduler=cluster.scheduler_address,
               chain=False, mix="delta", on_pass=lambda p, st: got.append(st))
    np.testing.assert_array_equal(got[0].arrays["G"], delta.arrays["G"])
    np.testing.assert_array_equal(got[0].arrays["w"], delta.arrays["w"])


@pytest.mark.slow
def test_engine_cli_on_a_running_scheduler(parquet_dir, tmp_path, cluster, run_cli, cli_ok):
    r = cli_ok(run_cli("train", parquet_dir, "--engine", "dask", "--scheduler", cluster.scheduler_address,
                       "--passes", 2, "--save_every_pass", "-f", tmp_path / "m.slm", text=True))
    assert "pass 2: per-pass progressive loss under mixing" in r.stderr and "number of examples = 6000" in r.stderr
    cli_ok(run_cli("predict", "-i", tmp_path / "m.slm", parquet_dir, "--quiet"))


def test_engine_usage_errors(parquet_dir, tmp_path, invoke_cli):
    r = invoke_cli("train", parquet_dir, "--engine", "dask", "--algo", "ftsl", "-f", tmp_path / "x.slm")
    assert r.exit_code == 2 and "no merge rule" in r.output
    r = invoke_cli("train", parquet_dir, "--engine", "dask", "-p", tmp_path / "p.txt")
    assert r.exit_code == 2 and "-p" in r.output
    r = invoke_cli("train", parquet_dir, "--workers", "2")
    assert r.exit_code == 2 and "--engine dask" in r.output
    r = invoke_cli("train", parquet_dir, "--worker_threads")
    assert r.exit_code == 2 and "--worker_threads: only with --engine dask" in r.output
    r = invoke_cli("train", parquet_dir, "--mix", "bmuf")
    assert r.exit_code == 2 and "--mix: only with --engine dask" in r.output
    r = invoke_cli("train", parquet_dir, "--engine", "dask", "--algo", "mission", "--mix", "bmuf", "-f", tmp_path / "x.slm")
    assert r.exit_code == 2 and "--mix bmuf" in r.output and "mission" in r.output
    r = invoke_cli("train", parquet_dir, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:1", "--worker_threads")
    assert r.exit_code == 2 and "--worker_threads" in r.output and "--scheduler" in r.output
    assert not (tmp_path / "x.slm").exists()


def test_engine_without_dask_says_how_to_install(run_cli, parquet_dir, tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "distributed.py").write_text("raise ImportError('no dask here')\n")
    r = run_cli("train", parquet_dir, "--engine", "dask", env={"PYTHONPATH": f"{ROOT}{os.pathsep}{shim}"}, text=True)
    # the checkout first, then the shim, which shadows the installed package
    assert r.returncode == 2 and "pip install 'streamlearn[dask]'" in r.stderr
    # --worker_threads runs on dask's threaded scheduler: it never imports dask.distributed
    r = run_cli("train", parquet_dir, "--engine", "dask", "--worker_threads", "--workers", 2, "--passes", 2,
                "--mix", "bmuf-nesterov", "-f", tmp_path / "m.slm", env={"PYTHONPATH": f"{ROOT}{os.pathsep}{shim}"},
                text=True)
    assert r.returncode == 0, r.stderr
    assert "local threaded scheduler" in r.stderr and "number of examples = 6000" in r.stderr
    assert "(mixing rule bmuf-nesterov)" in r.stderr
    assert "pass 2: per-pass progressive loss under mixing" in r.stderr and (tmp_path / "m.slm").stat().st_size > 0


def _bad_partition_dir(parquet_dir, tmp_path):
    import shutil
    d = tmp_path / "withbad"
    shutil.copytree(parquet_dir, d)
    (d / "p9.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    return d


def test_engine_bad_partition_fails_naming_it_or_is_skipped(parquet_dir, tmp_path, cluster):
    from streamlearn.api import RunConfig
    from streamlearn.distributed.engine import train_dask
    from streamlearn.errors import InputError

    d = _bad_partition_dir(parquet_dir, tmp_path)
    out = tmp_path / "m.slm"
    with pytest.raises(InputError, match="p9.parquet"):
        train_dask(RunConfig(data=[str(d)], final_model=str(out), quiet=True), scheduler=cluster.scheduler_address)
    assert not out.exists()
    said = []
    s = train_dask(RunConfig(data=[str(d)], final_model=str(out), quiet=True), scheduler=cluster.scheduler_address,
                   skip_bad_partitions=True, log=said.append)
    assert s["examples"] == 3000 and out.exists()
    assert any("p9.parquet" in line and "skipped partition" in line for line in said)


def _kill_a_busy_worker(client, done):
    """Kill (SIGKILL) the first worker process seen running a partition task."""
    pids = client.run(os.getpid)
    while not done.is_set():
        for addr, keys in client.processing().items():
            if any("-part" in str(k) for k in keys) and addr in pids:
                os.kill(pids[addr], signal.SIGKILL)
                return addr
        time.sleep(0.005)
    return None


def test_engine_survives_a_worker_killed_mid_pass(parquet_dir, tmp_path, cluster):
    from distributed import Client

    from streamlearn.api import RunConfig
    from streamlearn.distributed.engine import train_dask

    out = tmp_path / "m.slm"
    with Client(cluster) as client:
        done = threading.Event()
        killed = []
        t = threading.Thread(target=lambda: killed.append(_kill_a_busy_worker(client, done)))
        t.start()
        try:
            summary = train_dask(RunConfig(data=[str(parquet_dir)], final_model=str(out), quiet=True,
                                           hyper={"loss_function": "logistic"}, passes=2),
                                 scheduler=cluster.scheduler_address, mix="vw")  # (every row learned every pass)
        finally:
            done.set()
            t.join()
    assert killed and killed[0] is not None  # a worker died while it ran a partition
    assert summary["examples"] == 6000 and out.exists()
    from streamlearn.api import load_model
    assert load_model(str(out))[0].examples_learned == 6000


def test_engine_restarts_a_pass_whose_base_state_was_lost(parquet_dir, tmp_path, cluster, monkeypatch):
    """The scattered base state has no lineage (Dask's memory manager keeps one replica of it):
    losing it with a worker cancels the pass's tasks. The engine runs the pass again, from a fresh
    scatter, and says so; the model is the one an undisturbed run writes. Here the first pass's
    root task is cancelled by hand as soon as it is submitted (what a lost base replica does to it,
    through the tasks between them). Not the base itself: Client.cancel of a key whose dependents no
    client holds (the pass's inner tasks) trips an assertion in dask's scheduler (``stimulus_cancel``,
    distributed 2026.8), whose handler then drops the client's stream; the pass hung on it once in
    three full-suite runs, and CI's run until its time limit."""
    import distributed

    from streamlearn.api import RunConfig
    from streamlearn.distributed.engine import train_dask

    real_submit = distributed.Client.submit
    lost = []

    def submit(self, fn, *args, key=None, **kw):
        fut = real_submit(self, fn, *args, key=key, **kw)
        if "-finish-" in str(key) and not lost:
            lost.append(key)
            self.cancel(fut)  # finish_pass(level, base): the pass's root
        return fut

    # both runs on the cluster's 2 workers (a test before this one kills a worker, which its nanny restarts): the
    # chains, and the default mixing rule with them, follow the workers present
    with distributed.Client(cluster) as c:
        c.wait_for_workers(2, timeout=120)
    cfg = dict(data=[str(parquet_dir)], quiet=True, hyper={"loss_function": "logistic"}, passes=2)
    want = train_dask(RunConfig(final_model=str(tmp_path / "want.slm"), **cfg), scheduler=cluster.scheduler_address)
    monkeypatch.setattr(distributed.Client, "submit", submit)
    said = []
    s = train_dask(RunConfig(final_model=str(tmp_path / "got.slm"), **cfg), scheduler=cluster.scheduler_address,
                   log=said.append)
    # (the default mixing here is linesearch-last: pass 1 holds a tenth of the rows out)
    assert lost and s["examples"] == want["examples"] == 5700
    assert any("pass 1" in line and "starts again" in line for line in said), said
    assert (tmp_path / "got.slm").read_bytes() == (tmp_path / "want.slm").read_bytes()


class _FakeRoot:
    """A pass's root future that is never done (pending: a cluster without workers), or done after ``ready`` polls."""

    def __init__(self, ready=None):
        self.polls, self.ready = 0, ready

    def result(self, timeout=None):
        self.polls += 1
        if self.ready is not None and self.polls > self.ready:
            return "state", {"ev": {}}
        raise TimeoutError(f"timed out after {timeout} s.")


class _FakeClient:
    def __init__(self, workers_per_poll):
        self.seq, self.i = list(workers_per_poll), 0

    def scheduler_info(self):
        n = self.seq[min(self.i, len(self.seq) - 1)]
        self.i += 1
        return {"workers": {f"tcp://w{j}": {} for j in range(n)}}


def test_await_pass_fails_when_the_cluster_stays_without_workers_and_not_before():
    from streamlearn.distributed.engine import _await_pass
    from streamlearn.errors import StreamlearnError

    t = [0.0]

    def clock():
        t[0] += 10.0  # each poll: 10 s later
        return t[0]

    # workers present all along: a slow pass is never limited (done at the 30th poll)
    root = _FakeRoot(ready=30)
    assert _await_pass(root, _FakeClient([2]), 0, 60.0, 5.0, clock)[0] == "state" and root.polls == 31
    # no worker from the first poll: fails once 60 s have passed without one, naming the pass
    root = _FakeRoot()
    with pytest.raises(StreamlearnError, match=r"pass 3 failed: the cluster has had no worker for 60 s"):
        _await_pass(root, _FakeClient([0]), 2, 60.0, 5.0, clock)
    assert root.polls == 7  # the first poll without workers starts the clock; 6 more reach 60 s
    # workers gone for 50 s, back (a restarted nanny, an autoscaler), then gone again: the clock restarts
    root = _FakeRoot(ready=14)
    assert _await_pass(root, _FakeClient([0] * 6 + [1] + [0] * 6 + [1]), 0, 60.0, 5.0, clock)[0] == "state"


def test_engine_fails_instead_of_hanging_when_every_worker_is_gone(parquet_dir, tmp_path, monkeypatch):
    """Dask keeps the tasks of a cluster whose workers all left pending for ever (checked here: the
    pass does not finish); the engine fails the run after NO_WORKERS_TIMEOUT with a clear message and
    writes no model."""
    from distributed import Client, LocalCluster

    from streamlearn.api import RunConfig
    from streamlearn.distributed import engine
    from streamlearn.errors import StreamlearnError

    monkeypatch.setattr(engine, "NO_WORKERS_TIMEOUT", 2.0)
    monkeypatch.setattr(engine, "NO_WORKERS_POLL", 0.5)
    out = tmp_path / "m.slm"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=50) as cluster, Client(cluster) as client:
        done = threading.Event()

        def scale_to_zero_when_busy():
            while not done.is_set():
                if any(any("-part" in str(k) for k in keys) for keys in client.processing().values()):
                    cluster.scale(0)
                    return
                time.sleep(0.005)

        th = threading.Thread(target=scale_to_zero_when_busy)
        th.start()
        t0 = time.monotonic()
        try:
            cfg = RunConfig(data=[str(parquet_dir)], final_model=str(out), quiet=True, passes=2)
            with pytest.raises(StreamlearnError, match="pass 1 failed: the cluster has had no worker for 2 s"):
                engine.train_dask(cfg, scheduler=cluster.scheduler_address)
        finally:
            done.set()
            th.join()
        assert time.monotonic() - t0 < 60
    assert not out.exists()
# -- --mix linesearch: a line search along the merged move ----------------------------------------


def _tiny_line_search_problem(loss_function="logistic", seed=3):
    """A base state, a merged state 4 chains reached from it (random weights on a tiny table) and a batch of
    rows that touch them."""
    from streamlearn.batch import Batch

    rng = np.random.default_rng(seed)
    learner = make_learner("adagrad", {"loss_function": loss_function, "bit_precision": 6})
    base = M.state_of(learner, {})
    base.arrays["w"] = rng.normal(0, 0.3, 64).astype(np.float32)
    if loss_function == "squared":
        base.arrays["scal"][2:4] = (-1.0, 1.0)  # the label range seen: the prediction's clip
    merged = M.State(base.algo, base.meta, dict(base.arrays, w=(base.arrays["w"] + rng.normal(0, 0.4, 64)).astype(np.float32)),
                     base.reader)
    n = 40
    nnz = rng.integers(1, 6, n)
    offsets = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)
    indices = rng.integers(0, 2**32, offsets[-1], dtype=np.uint64).astype(np.uint32)
    values = rng.normal(0, 1, offsets[-1])
    # labels drawn from the model at alpha = 2.3, so that the loss's minimum is inside [1, 4]
    wstar = base.arrays["w"] + 2.3 * (merged.arrays["w"].astype(np.float64) - base.arrays["w"])
    m = np.array([np.dot(wstar[indices[a:b] & 63], values[a:b]) for a, b in zip(offsets[:-1], offsets[1:])])
    if loss_function == "squared":
        labels = np.clip(m, -1, 1) + rng.normal(0, 0.3, n)
    else:
        labels = np.where(rng.random(n) < 1 / (1 + np.exp(-m)), 1.0, -1.0)
    weights = rng.choice([0.5, 1.0, 2.0], n)
    return base, merged, Batch(offsets, indices, values, labels, weights)


def _brute_force_losses(base, merged, batch, grid, lo, hi, loss):
    """Per alpha: the weights w_0 + alpha (w_avg - w_0) written out, every row's margin summed feature by
    feature, clipped to [lo, hi], its loss times its importance weight, summed."""
    w0 = base.arrays["w"].astype(np.float64)
    d = merged.arrays["w"].astype(np.float64) - w0
    out = []
    for a in grid:
        w = w0 + a * d
        total = 0.0
        for i in range(batch.n):
            m = 0.0
            for k in range(batch.offsets[i], batch.offsets[i + 1]):
                m += w[int(batch.indices[k]) & 63] * batch.values[k]
            m = min(max(m, lo), hi)
            y = batch.labels[i]
            if loss == "logistic":
                l = np.log1p(np.exp(-y * m))
            else:
                l = (m - y) ** 2
            total += batch.weights[i] * l
        out.append(total)
    return np.array(out)


def _alpha_sums(LS, base, merged, batch, grid):
    """The summed loss of ``w_0 + alpha d`` for each alpha of ``grid`` (the search's table at beta = 0)."""
    return LS.loss_table(base, merged, batch, grid, (0.0,))[:, 0].sum(axis=0)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_line_search_alpha_is_the_brute_force_grid_minimum(loss):
    from streamlearn.distributed import linesearch as LS

    base, merged, batch = _tiny_line_search_problem(loss)
    grid = LS.alpha_grid(4)
    np.testing.assert_allclose(grid, [1, 1.25, 1.5, 1.75, 2, 2.25, 2.5, 2.75, 3, 3.25, 3.5, 3.75, 4])
    assert list(LS.alpha_grid(8, cap=2)) == [1, 1.25, 1.5, 1.75, 2] and list(LS.alpha_grid(1)) == [1]
    lo, hi = (-50.0, 50.0) if loss == "logistic" else (-1.0, 1.0)
    want = _brute_force_losses(base, merged, batch, grid, lo, hi, loss)
    got = _alpha_sums(LS, base, merged, batch, grid)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    # the sums of two halves add up to the whole's (what the engine's chains and tree add)
    halves = _alpha_sums(LS, base, merged, batch.slice(0, 17), grid) + _alpha_sums(LS, base, merged, batch.slice(17, 40), grid)
    np.testing.assert_allclose(halves, got, rtol=1e-12)
    state, alpha, beta = LS.search(base, merged, [batch.slice(0, 17), batch.slice(17, 40)], nodes=4)
    assert alpha == grid[int(np.argmin(want))] and beta == 0.0  # no previous move: alpha alone
    w0 = base.arrays["w"].astype(np.float64)
    w = (w0 + alpha * (merged.arrays["w"].astype(np.float64) - w0)).astype(np.float32)
    np.testing.assert_array_equal(state.arrays["w"], w)
    np.testing.assert_array_equal(state.mixing["w"], (w.astype(np.float64) - w0).astype(np.float32))
    for k in ("G", "N", "scal"):  # only the weights move
        np.testing.assert_array_equal(state.arrays[k], merged.arrays[k])
    # the same inputs, the same alpha
    assert LS.search(base, merged, [batch], nodes=4)[1:] == (alpha, 0.0)
    # with the previous pass's move in the base: (alpha, beta) minimise the brute-force loss of
    # w_0 + alpha d + beta d_prev, written out as a base whose weights are w_0 + beta d_prev
    rng = np.random.default_rng(11)
    d_prev = rng.normal(0, 0.3, 64).astype(np.float32)
    base2 = M.State(base.algo, base.meta, base.arrays, base.reader, {"w": d_prev})
    table = []
    for b in LS.BETAS:
        shifted = M.State(base.algo, base.meta, dict(base.arrays, w=w0 + b * d_prev.astype(np.float64)), base.reader)
        moved = M.State(base.algo, base.meta, dict(merged.arrays, w=merged.arrays["w"].astype(np.float64)
                                                   + b * d_prev.astype(np.float64)), base.reader)
        table.append(_brute_force_losses(shifted, moved, batch, grid, lo, hi, loss))
    table = np.array(table)
    np.testing.assert_allclose(LS.loss_table(base2, merged, batch, grid, LS.BETAS)[0], table, rtol=1e-10)
    j, i = np.unravel_index(int(np.argmin(table)), table.shape)
    state2, a2, b2 = LS.search(base2, merged, [batch], nodes=4)
    assert (a2, b2) == (grid[i], LS.BETAS[j])
    np.testing.assert_allclose(state2.arrays["w"], w0 + a2 * (merged.arrays["w"].astype(np.float64) - w0)
                               + b2 * d_prev.astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_line_search_problem_is_not_trivial(loss):
    """The tiny problem's minimum is inside the grid, neither end (else the test above could not fail)."""
    from streamlearn.distributed import linesearch as LS

    base, merged, batch = _tiny_line_search_problem(loss)
    sums = _alpha_sums(LS, base, merged, batch, LS.alpha_grid(4))
    assert 0 < int(np.argmin(sums)) < len(sums) - 1


def test_alpha_one_is_vw_rule_bit_for_bit(halves):
    """alpha = 1 is VW's merge exactly; a line search with one chain, or without sampled rows, is alpha = 1; and
    outside the engine (``merge_states``, ``lift`` / ``finish``) the rule is VW's."""
    from streamlearn.api import RunConfig, load_model, train
    from streamlearn.distributed import linesearch as LS

    states = []
    for i, h in enumerate(halves):
        m = str(h) + ".slm"
        train(RunConfig(data=[str(h)], hyper={"loss_function": "logistic"}, quiet=True, final_model=m))
        states.append(M.state_of(*load_model(m)[:2]))
    base = M.fresh_state(states[0])
    vw = M.merge_states(states, base=base)
    for rule in M.LINESEARCH_RULES:
        ls = M.merge_states(states, base=base, mix=rule)
        for k in vw.arrays:
            np.testing.assert_array_equal(ls.arrays[k], vw.arrays[k])
    _, _, batch = _tiny_line_search_problem()
    for got, alpha, beta in ((LS.apply_alpha(base, vw, 1.0), 1.0, 0.0), LS.search(base, vw, [batch], nodes=1),
                             LS.search(base, vw, [], nodes=4)):
        assert (alpha, beta) == (1.0, 0.0) and got.arrays.keys() == vw.arrays.keys()
        for k in vw.arrays:
            assert got.arrays[k] is vw.arrays[k]


def test_sampled_rows_do_not_depend_on_the_batches():
    """The sample is every 10th row of a partition (rows 9, 19, ...), at most the cap, however the partition is
    cut into batches; held out, the other rows are learned in order."""
    from streamlearn.distributed import linesearch as LS

    _, _, batch = _tiny_line_search_problem(seed=5)
    want = np.arange(9, 40, 10)
    for sizes in ((40,), (3, 7, 1, 29), (10, 10, 10, 10), (9, 1, 30)):
        parts, a = [], 0
        for s in sizes:
            parts.append(batch.slice(a, a + s))
            a += s
        for holdout in (True, False):
            out = []
            learned = list(LS.sampled(iter(parts), holdout, out))
            sample = np.concatenate([b.labels for b in out])
            np.testing.assert_array_equal(sample, batch.labels[want])
            rest = np.concatenate([b.labels for b in learned])
            np.testing.assert_array_equal(rest, np.delete(batch.labels, want) if holdout else batch.labels)
        out = []
        list(LS.sampled(iter(parts), True, out, every=10, cap=2))
        np.testing.assert_array_equal(np.concatenate([b.labels for b in out]), batch.labels[want[:2]])


def test_engine_line_search_on_sample_data(parquet_dir, tmp_path, invoke_cli):
    """2 worker threads, 4 partitions of 750 rows, consecutive chains: with ``linesearch-learned`` pass 1's
    model is the merge of the 2 models trained by hand, times the alpha of 1, 1.25, ..., 2 whose logistic loss
    over rows 9, 19, ... of every partition is least (the base is 0: the margins are alpha times the merged
    model's raw predictions); ``linesearch`` holds those rows out (300 fewer learned); both runs are
    deterministic and give valid models."""
    from streamlearn.api import RunConfig, load_model
    from streamlearn.distributed.engine import train_dask

    files = sorted(parquet_dir.iterdir())
    hand = []
    for run in ((0, 1), (2, 3)):
        m = tmp_path / f"h{run[0]}.slm"
        assert invoke_cli("train", *[files[i] for i in run], "--loss_function", "logistic", "-f", m,
                          "--quiet").exit_code == 0
        hand.append(M.state_of(*load_model(str(m))[:2]))
    merged = M.merge_states(hand)
    lines = gzip.open(A9A, "rt").read().splitlines(True)
    (tmp_path / "sample.svm").write_text("".join(lines[750 * i + r] for i in range(4) for r in range(9, 750, 10)))
    from streamlearn.distributed.engine import _write_model
    _write_model(str(tmp_path / "merged.slm"), merged)
    assert invoke_cli("predict", "-i", tmp_path / "merged.slm", tmp_path / "sample.svm", "-r", tmp_path / "raw.txt",
                      "--quiet").exit_code == 0
    raw = np.array([float(s.split()[0]) for s in (tmp_path / "raw.txt").read_text().splitlines()])
    y = np.array([1.0 if float(s.split()[0]) > 0 else -1.0 for s in (tmp_path / "sample.svm").read_text().splitlines()])
    grid = np.arange(1.0, 2.01, 0.25)
    alpha = grid[int(np.argmin([np.logaddexp(0, -y * np.clip(a * raw, -50, 50)).sum() for a in grid]))]
    runs = {}
    for rule in ("linesearch-learned", "linesearch", "linesearch"):
        got, said = [], []
        s = train_dask(RunConfig(data=[str(parquet_dir)], hyper={"loss_function": "logistic"}, passes=2,
                                 final_model=str(tmp_path / f"{rule}.slm")), workers=2, worker_threads=True,
                       chain_order="consecutive", mix=rule, on_pass=lambda p, st: got.append(st), log=said.append)
        e = s["engine"]
        assert e["mix"] == rule and [p["alpha_rows"] for p in e["passes"]] == [300, 300]
        assert all(p["alpha"] in grid for p in e["passes"]) and "merged move times" in "\n".join(said)
        assert e["passes"][0]["beta"] == 0.0 and e["passes"][1]["beta"] in (0, 0.25, 0.5, 0.75, 1)
        assert s["examples"] == (6000 if rule == "linesearch-learned" else 5400)
        w = got[-1].arrays["w"]
        assert np.all(np.isfinite(w)) and np.any(w != 0)
        if rule == "linesearch-learned":
            assert e["passes"][0]["alpha"] == alpha
            np.testing.assert_allclose(got[0].arrays["w"], (alpha * merged.arrays["w"].astype(np.float64)),
                                       rtol=1e-6, atol=0)
            np.testing.assert_array_equal(got[0].arrays["G"], merged.arrays["G"])
        elif rule in runs:  # the same inputs, the same alphas and bytes
            assert [p["alpha"] for p in e["passes"]] == runs[rule]
            assert (tmp_path / f"{rule}.slm").read_bytes() == first_bytes
        else:
            first_bytes = (tmp_path / f"{rule}.slm").read_bytes()
        runs[rule] = [p["alpha"] for p in e["passes"]]
        r = invoke_cli("predict", "-i", tmp_path / f"{rule}.slm", A9A, "--quiet", "--metrics", tmp_path / "pm.json")
        assert r.exit_code == 0
        import json
        assert json.loads((tmp_path / "pm.json").read_text())["error_rate"] < 0.25


def test_line_search_usage_errors(parquet_dir, tmp_path, invoke_cli):
    for algo, why in ((("--oaa", "3", "--loss_function", "multiclass_logistic"), "its own rule"),
                      (("--algo", "mission", "--oaa", "3"), "its own rule"), (("--oaa", "3"), "not with --oaa")):
        r = invoke_cli("train", parquet_dir, "--engine", "dask", "--worker_threads", *algo, "--mix", "linesearch",
                       "-f", tmp_path / "x.slm")
        assert r.exit_code == 2 and "--mix linesearch" in r.output and why in r.output, r.output
    r = invoke_cli("train", parquet_dir, "--engine", "dask", "--worker_threads", "--sgd", "--mix", "linesearch-last",
                   "-f", tmp_path / "x.slm")
    assert r.exit_code == 2 and "--mix linesearch-last" in r.output and "which --sgd" in r.output, r.output
    assert not (tmp_path / "x.slm").exists()


def test_rotating_and_last_pass_samples():
    """``linesearch-rotate``: pass p holds out the rows r % 10 == (9 - p) % 10 (another tenth each pass), so over
    3 passes every row is learned in at least 2 (a rule that ignored the phase would hold out rows 9, 19, ...
    every pass and never learn them); one pass: VW's rule (no sample). ``linesearch-last``: rows 9, 19, ...
    held out until the last pass, which learns every row and marks its sample for the leave-one-chain-out
    margins; one pass is the last."""
    from streamlearn.distributed import linesearch as LS

    _, _, batch = _tiny_line_search_problem(seed=7)
    parts, a = [], 0
    for s in (3, 14, 1, 22):  # cut into batches: the sample follows the partition's row numbers
        parts.append(batch.slice(a, a + s))
        a += s
    rows = np.arange(batch.n, dtype=float)

    def run(plan):
        holdout, phase = plan[:2]
        tagged = [b.__class__(b.offsets, b.indices, b.values, rows[o:o + b.n], b.weights)
                  for b, o in zip(parts, np.cumsum([0] + [b.n for b in parts[:-1]]))]
        out = []
        learned = np.concatenate([b.labels for b in LS.sampled(iter(tagged), holdout, out, phase=phase)])
        return learned.astype(int), np.concatenate([b.labels for b in out]).astype(int)

    times = np.zeros(batch.n, int)
    for p in range(3):
        plan = LS.sample_plan("linesearch-rotate", p, 3)
        assert plan == (True, 9 - p)
        learned, sample = run(plan)
        np.testing.assert_array_equal(sample, np.arange(9 - p, batch.n, 10))
        np.testing.assert_array_equal(learned, np.setdiff1d(np.arange(batch.n), sample))
        times[learned] += 1
    assert times.min() == 2 and times.max() == 3 and set(np.flatnonzero(times == 2) % 10) == {7, 8, 9}
    assert LS.sample_plan("linesearch-rotate", 0, 1) is None
    assert [LS.sample_plan("linesearch-last", p, 3) for p in range(3)] == [(True, 9), (True, 9), (False, 9, True)]
    assert LS.sample_plan("linesearch-last", 0, 1) == (False, 9, True)
    learned, sample = run(LS.sample_plan("linesearch-last", 2, 3))
    np.testing.assert_array_equal(learned, np.arange(batch.n))
    np.testing.assert_array_equal(sample, np.arange(9, batch.n, 10))
    for start in range(0, 25):  # the phase and the cap against the definition, wherever a batch starts
        for phase in range(10):
            for cap in (0, 1, 3, 100):
                want = [r - start for r in [r for r in range(60) if r % 10 == phase][:cap] if start <= r < start + 17]
                assert list(LS.sample_rows(start, 17, 10, cap, phase)) == want


def test_cross_margins_are_the_merge_of_the_other_chains(halves):
    """``linesearch-cross`` / ``-last``: a sampled row of chain c is judged by the margin of VW's merge of the
    other chains' states (from the pass's summed accumulator and chain c's own weights), the same as merging
    the others by hand."""
    from streamlearn.distributed import linesearch as LS

    base, _, batch = _tiny_line_search_problem(seed=11)
    rng = np.random.default_rng(2)
    assert base.arrays["G"].shape == base.arrays["w"].shape
    base.arrays["G"] = np.where(rng.random(64) < 0.5, rng.uniform(0.1, 2, 64), 0).astype(np.float32)
    chains = []
    for c in range(3):
        moved = rng.random(64) < 0.6
        w = np.where(moved, base.arrays["w"] + rng.normal(0, 0.5, 64), base.arrays["w"]).astype(np.float32)
        G = np.where(moved, base.arrays["G"] + rng.uniform(0.1, 3, 64), base.arrays["G"]).astype(np.float32)
        chains.append(M.State(base.algo, dict(base.meta, examples_learned=10 * (c + 1)),
                              dict(base.arrays, w=w, G=G), base.reader))
    acc = M.combine([M.lift(s, base) for s in chains])
    w0 = base.arrays["w"].astype(np.float64)
    idx = batch.indices.astype(np.int64) & 63
    for c in range(3):
        got = LS.cross_margins(base, acc, batch, LS.own_values(chains[c], batch))
        others = M.finish(M.combine([M.lift(s, base) for i, s in enumerate(chains) if i != c]), base)
        d = others.arrays["w"].astype(np.float64) - w0
        want = [np.dot(d[idx[a:b]], batch.values[a:b]) for a, b in zip(batch.offsets[:-1], batch.offsets[1:])]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        mine = [np.dot(chains[c].arrays["w"].astype(np.float64)[idx[a:b]] - w0[idx[a:b]], batch.values[a:b])
                for a, b in zip(batch.offsets[:-1], batch.offsets[1:])]
        assert not np.allclose(got, mine)  # (not the chain's own move)


def test_engine_rotate_and_last_on_sample_data(parquet_dir, tmp_path):
    """2 worker threads, 4 partitions of 750 rows. ``linesearch-last``, 2 passes: pass 1 is ``linesearch``'s
    (rows 9, 19, ... held out), pass 2 learns every row (2,700 + 3,000) and searches on the same 300 rows;
    one pass learns all 3,000. ``linesearch-rotate``: 2,700 rows a pass, pass 1 ``linesearch``'s, pass 2 not;
    with one pass the model is VW's rule's, byte for byte."""
    from streamlearn.api import RunConfig
    from streamlearn.distributed.engine import train_dask

    def run(rule, passes):
        got = []
        m = tmp_path / f"{rule}{passes}.slm"
        s = train_dask(RunConfig(data=[str(parquet_dir)], hyper={"loss_function": "logistic"}, passes=passes,
                                 final_model=str(m)), workers=2, worker_threads=True, chain_order="consecutive",
                       mix=rule, on_pass=lambda p, st: got.append(st))
        return s, got, m.read_bytes()

    ls, ls_states, _ = run("linesearch", 2)
    last, last_states, _ = run("linesearch-last", 2)
    assert last["examples"] == 5700 and [p["alpha_rows"] for p in last["engine"]["passes"]] == [300, 300]
    np.testing.assert_array_equal(last_states[0].arrays["w"], ls_states[0].arrays["w"])
    assert not np.array_equal(last_states[1].arrays["w"], ls_states[1].arrays["w"])
    one, _, _ = run("linesearch-last", 1)
    assert one["examples"] == 3000 and one["engine"]["passes"][0]["alpha_rows"] == 300
    rot, rot_states, _ = run("linesearch-rotate", 2)
    assert rot["examples"] == 5400
    np.testing.assert_array_equal(rot_states[0].arrays["w"], ls_states[0].arrays["w"])
    assert not np.array_equal(rot_states[1].arrays["w"], ls_states[1].arrays["w"])
    rot1, _, rot1_bytes = run("linesearch-rotate", 1)
    vw1, _, vw1_bytes = run("vw", 1)
    assert rot1["examples"] == 3000 and rot1["engine"]["passes"][0]["alpha"] is None and rot1_bytes == vw1_bytes


def test_default_mixing_is_linesearch_last_only_where_it_was_measured_to_help():
    """``--mix auto`` (the default): linesearch-last for plain adagrad (binary or regression, VW's adaptive merge)
    over 2 or more passes and chains; VW's rule for one pass (the search would only rescale the move), one chain
    (the engine is then one sequential run), ``--oaa``, softmax, updates without per-coordinate squared gradients
    (``--sgd``, ``--normalized`` or ``--invariant`` alone) and the learners with their own merges."""
    from streamlearn.distributed.linesearch import LAST, auto_rule

    def base(algo="adagrad", **hy):
        return M.state_of(make_learner(algo, {"bit_precision": 8, **hy}), {"quadratic": []})

    plain = base(loss_function="logistic")
    assert auto_rule(plain, 2, 2) == auto_rule(plain, 3, 8) == auto_rule(base(), 2, 4) == LAST
    assert auto_rule(plain, 1, 4) == auto_rule(plain, 3, 1) == "vw"
    assert auto_rule(base(adaptive=True, loss_function="logistic"), 2, 2) == LAST
    for other in (base(oaa=3), base(loss_function="multiclass_logistic", oaa=3), base(sgd=True),
                  base(normalized=True), base(invariant=True), base("bear", oaa=3), base("mission", oaa=3),
                  base("oja-son", oaa=3)):
        assert auto_rule(other, 3, 4) == "vw", other.algo
    # the SON and Count Sketch learners: the held-out tenth's line search, scored by their own predictions
    for algo in SON + ("bear", "mission"):
        assert auto_rule(base(algo), 3, 4) == auto_rule(base(algo), 2, 2) == "linesearch", algo
        assert auto_rule(base(algo), 1, 4) == auto_rule(base(algo), 3, 1) == "vw", algo


@pytest.mark.parametrize("algo", SON)
def test_son_line_search_moves_every_weight_column(algo, son_lines):
    """``table_moved(base, merged, alpha)`` (the SON learners' line search): each feature's weights moved to
    ``base + alpha (merged - base)``. Prediction is linear in the weights (re-based states: b = 0), so the moved
    learner predicts ``p_base + alpha (p_merged - p_base)`` row by row: at alpha = 0 exactly the base learner's
    predictions (the merged sketch, accumulators and scales kept; a weight column left unmoved fails this),
    at 1 the merge's; the other columns are the merge's; a feature the base lacks starts from 0."""
    from streamlearn.distributed.linesearch import table_moved

    fresh = M.state_of(_son_learn(algo, [], m=5), {})
    first = [M.state_of(_son_learn(algo, p, m=5), {}) for p in (son_lines[:400], son_lines[400:700])]
    base = M.merge_states(first, base=fresh)  # a pass's merge: re-based, as the engine's every base
    nodes = [M.state_of(_son_learn(algo, p, start=base), {}) for p in (son_lines[700:1300], son_lines[1300:1700])]
    merged = M.merge_states(nodes, base=base)
    rows = _son_batches(son_lines[2000:2400])[0]
    pred = lambda st: np.asarray(M.learner_of(st).predict_batch(rows)[0], np.float64)  # noqa: E731
    p0, p1 = pred(base), pred(merged)
    assert np.abs(p1 - p0).max() > 1e-3  # the pass moved the predictions
    np.testing.assert_array_equal(table_moved(base, merged, 1.0).arrays["rows"], merged.arrays["rows"])
    np.testing.assert_allclose(pred(table_moved(base, merged, 0.0)), p0, rtol=1e-9, atol=1e-12)
    for a in (2.5, 4.0):
        np.testing.assert_allclose(pred(table_moved(base, merged, a)), p0 + a * (p1 - p0), rtol=1e-9, atol=1e-9)
    moved = table_moved(base, merged, 3.0)
    names = [n for n, _ in M._table_layout(algo, 5, merged.arrays["rows"].shape[1])]
    new = ~np.isin(merged.arrays["keys"], base.arrays["keys"])
    assert new.any()
    for j, n in enumerate(names):
        got, m1 = moved.arrays["rows"][:, j], merged.arrays["rows"][:, j]
        if n in ("w", "c", "snap"):
            np.testing.assert_allclose(got[new], 3.0 * m1[new], rtol=1e-12, err_msg=n)
        else:
            np.testing.assert_array_equal(got, m1, err_msg=n)
    for k in merged.arrays:
        if k != "rows":
            np.testing.assert_array_equal(moved.arrays[k], merged.arrays[k], err_msg=k)
    # the next pass, with momentum: its move plus beta times this pass's (kept in mixing, by feature)
    nodes2 = [M.state_of(_son_learn(algo, p, start=moved), {}) for p in (son_lines[1700:1850], son_lines[1850:2000])]
    merged2 = M.merge_states(nodes2, base=moved)
    q0, q1 = pred(moved), pred(merged2)
    keys2, wcols = merged2.arrays["keys"], [j for j, n in enumerate(names) if n in ("w", "c", "snap")]

    def at(st):  # a state's weight columns at merged2's features (0 where it has none)
        out = np.zeros((len(keys2), len(wcols)))
        pos = {int(k): i for i, k in enumerate(st.arrays["keys"])}
        for i, k in enumerate(keys2):
            if int(k) in pos:
                out[i] = st.arrays["rows"][pos[int(k)], wcols]
        return out

    def with_weights(W):  # merged2 with its weight columns replaced
        rows = np.array(merged2.arrays["rows"], copy=True)
        rows[:, wcols] = W
        return M.State(merged2.algo, merged2.meta, dict(merged2.arrays, rows=rows), merged2.reader)
    # this pass's move (moved - base, feature by feature) as weights: its share of the margins
    qd = pred(with_weights(at(moved) - at(base))) - pred(with_weights(0.0))
    np.testing.assert_allclose(pred(table_moved(moved, merged2, 2.0, 0.5)), q0 + 2.0 * (q1 - q0) + 0.5 * qd,
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("algo", ["bear", "mission"])
def test_sketch_line_search_moves_the_sketch_with_momentum_and_picks_the_least_loss(algo, son_lines):
    """``sketch_moved(base, merged, alpha, beta)``: the sketch and intercept are ``S_0 + alpha (S_avg - S_0) +
    beta d_prev`` cell by cell (``d_prev``: the previous pass's move, kept in ``mixing``), each heap member's weight
    the QUERY of the moved sketch (the members the merge's), the rest the merge's. ``search``: the (alpha, beta)
    of the grid whose moved learner has the least logistic loss on the sample (computed here from the learners'
    predictions; beta only once a previous move is kept)."""
    from streamlearn.distributed.linesearch import BETAS, alpha_grid, search, sketch_moved

    lines = son_lines

    def learn(start, part):
        lr = M.learner_of(start)
        for b in _son_batches(part):
            lr.learn_batch(b)
        return M.state_of(lr, {})

    fresh = M.state_of(make_learner(algo, {"loss_function": "logistic", "bit_precision": 12, "top_k": 30}), {})
    merged = M.merge_states([learn(fresh, lines[:300]), learn(fresh, lines[300:700])], base=fresh)
    one = sketch_moved(fresh, merged, 2.0)
    S0, I0 = fresh.arrays["sketch"], fresh.arrays["intercept"]
    np.testing.assert_allclose(one.arrays["sketch"], S0 + 2.0 * (merged.arrays["sketch"] - S0), rtol=1e-12)
    np.testing.assert_allclose(one.arrays["intercept"], I0 + 2.0 * (merged.arrays["intercept"] - I0), rtol=1e-12)
    n = int(one.arrays["hsize"][0])
    assert n > 5 and n == int(merged.arrays["hsize"][0])
    keys = one.arrays["hkeys"][0, :n]
    assert set(keys.tolist()) == set(merged.arrays["hkeys"][0, :n].tolist())
    np.testing.assert_array_equal(one.arrays["hw"][0, :n], M.sketch_query(one.arrays["sketch"][0], one.arrays["seeds"], keys))
    assert not np.allclose(one.arrays["hw"][0, :n], merged.arrays["hw"][0, :n])
    for k in ("counters", "hll", "lrange", "seeds"):
        np.testing.assert_array_equal(one.arrays[k], merged.arrays[k], err_msg=k)
    merged2 = M.merge_states([learn(one, lines[700:1000]), learn(one, lines[1000:1300])], base=one)
    two = sketch_moved(one, merged2, 1.5, 0.5)
    S1 = one.arrays["sketch"]
    np.testing.assert_allclose(two.arrays["sketch"], S1 + 1.5 * (merged2.arrays["sketch"] - S1) + 0.5 * (S1 - S0),
                               rtol=1e-12, atol=1e-15)
    sample = _son_batches(lines[1300:1700])[0]
    grid = alpha_grid(2)
    losses = np.zeros((len(BETAS), len(grid)))
    for j, b in enumerate(BETAS):
        for i, a in enumerate(grid):
            p = np.asarray(M.learner_of(sketch_moved(one, merged2, float(a), b)).predict_batch(sample)[0], np.float64)
            losses[j, i] = np.sum(sample.weights * np.log1p(np.exp(-sample.labels * p)))
    j, i = np.unravel_index(int(np.argmin(losses)), losses.shape)
    out, a, b = search(one, merged2, [sample], 2)
    assert (a, b) == (float(grid[i]), BETAS[j]) and len(set(np.round(losses.ravel(), 9))) > 1
    np.testing.assert_array_equal(out.arrays["sketch"], sketch_moved(one, merged2, a, b).arrays["sketch"])
    assert search(fresh, merged, [sample], 2)[2] == 0.0  # no previous move kept yet: beta 0


@pytest.mark.parametrize("algo,loss", [("oja-son", "squared"), ("fd-son", "logistic"), ("rfd-son", "squared")])
def test_son_search_predicts_three_times_and_equals_predicting_every_pair(algo, loss, son_lines, monkeypatch):
    """The SON learners' losses over the (beta, alpha) grid come from three raw predictions (their margin is affine
    in the moved weight columns) plus two checks: equal to predicting every pair with the learner itself, the
    squared loss's clip to the label range included."""
    from streamlearn.distributed import linesearch as LS

    def learn(start, part):
        lr = M.learner_of(start) if start is not None else \
            make_learner(algo, {"loss_function": loss, "sketch_size": 5, "bit_precision": 10})
        for b in _son_batches(part):
            lr.learn_batch(b)
        return M.state_of(lr, {})

    fresh = M.state_of(make_learner(algo, {"loss_function": loss, "sketch_size": 5, "bit_precision": 10}), {})
    one = LS.table_moved(fresh, M.merge_states([learn(None, son_lines[:500]), learn(None, son_lines[500:1000])],
                                              base=fresh), 2.0)
    two = M.merge_states([learn(one, son_lines[1000:1500]), learn(one, son_lines[1500:2000])], base=one)
    sample = _son_batches(son_lines[2000:2600])[0]
    grid = LS.alpha_grid(4)
    built = []
    real = M.learner_of
    monkeypatch.setattr(M, "learner_of", lambda st: built.append(1) or real(st))
    fast = LS.predicted_losses(one, two, sample, grid, LS.BETAS)
    assert len(built) == 5
    monkeypatch.setattr(LS, "_affine_predictions", lambda *a: None)
    slow = LS.predicted_losses(one, two, sample, grid, LS.BETAS)
    assert len(built) == 5 + len(grid) * len(LS.BETAS)
    np.testing.assert_allclose(fast, slow, rtol=1e-12)
    if loss == "squared":  # the clip acts on this grid (far moves leave the label range)
        lo, hi = LS._label_range(two)
        far = np.asarray(real(LS.table_moved(one, two, 4.0, 1.0)).predict_batch(sample)[0])
        assert lo < hi and (far.max() == hi or far.min() == lo)


def test_predicted_search_cost_is_bounded():
    """The learners scored by their predictions search at most PREDICTED_ALPHAS alphas (even from 1 to the chains,
    on the grid's steps) over at most PREDICTED_ROWS sampled rows (every k-th): the grid and sample of 4 chains
    and a small pass unchanged."""
    from streamlearn.batch import Batch
    from streamlearn.distributed import linesearch as LS

    np.testing.assert_array_equal(LS.predicted_grid(LS.alpha_grid(4)), LS.alpha_grid(4))
    np.testing.assert_array_equal(LS.predicted_grid(LS.alpha_grid(4), (0.25, 0.5)), [0.25, 0.5, *LS.alpha_grid(4)])
    g = LS.predicted_grid(LS.alpha_grid(100))
    assert len(g) == LS.PREDICTED_ALPHAS and g[0] == 1.0 and g[-1] == 100.0
    assert np.all(np.diff(g) > 0) and np.all(np.isin(g, LS.alpha_grid(100)))
    n = 2 * LS.PREDICTED_ROWS + 5
    b = Batch(np.arange(n + 1, dtype=np.int64), np.zeros(n, np.uint32), np.arange(n, dtype=np.float64),
              np.ones(n), np.ones(n))
    t = LS.thinned(b)
    # every 2nd row would leave PREDICTED_ROWS + 3: every 3rd is the least that fits
    assert len(range(0, n, 2)) > LS.PREDICTED_ROWS >= t.n
    np.testing.assert_array_equal(t.values, np.arange(0, n, 3, dtype=np.float64))
    small = b.take(np.arange(100))
    assert LS.thinned(small) is small


def test_son_line_search_picks_the_least_loss_and_the_engine_defaults_to_it(parquet_dir, tmp_path):
    """``search`` for oja-son: the alpha of the grid whose moved learner has the least summed logistic loss on the
    sample (computed here from the moved learners' predictions); the engine's default for it over 2 passes and 2
    chains is ``linesearch`` (a tenth held out of every pass: 2 x 2,700 rows learned), printed with each pass's
    alpha; the leave-one-chain-out rules are refused for it, naming the one that applies."""
    from streamlearn.api import RunConfig
    from streamlearn.distributed.engine import train_dask
    from streamlearn.distributed.linesearch import alpha_grid, search, table_moved
    from streamlearn.errors import ConfigError

    lines = gzip.open(A9A, "rt").read().splitlines(True)
    fresh = M.state_of(_son_learn("oja-son", [], m=4), {})
    nodes = [M.state_of(_son_learn("oja-son", p, m=4), {}) for p in (lines[:300], lines[300:600], lines[600:900])]
    merged = M.merge_states(nodes, base=fresh)
    sample = _son_batches(lines[900:1300])[0]
    grid = (0.25, 0.5, 0.75) + tuple(alpha_grid(3))  # the SON learners also try shorter steps than the merge's
    losses = []
    for a in grid:
        p = np.asarray(M.learner_of(table_moved(fresh, merged, float(a))).predict_batch(sample)[0], np.float64)
        losses.append(float(np.sum(sample.weights * np.log1p(np.exp(-sample.labels * p)))))
    out, alpha, beta = search(fresh, merged, [sample], 3)
    assert alpha == float(grid[int(np.argmin(losses))]) and beta == 0.0
    assert len(set(np.round(losses, 9))) > 1
    np.testing.assert_array_equal(out.arrays["rows"], table_moved(fresh, merged, alpha).arrays["rows"])
    none = search(fresh, merged, [], 3)
    np.testing.assert_array_equal(none[0].arrays["rows"], merged.arrays["rows"])
    assert none[1:] == (1.0, 0.0) and search(fresh, merged, [sample], 1)[1] == 1.0

    said = []
    run = train_dask(RunConfig(data=[str(parquet_dir)], final_model=str(tmp_path / "o.slm"), table=False,
                               algo="oja-son", hyper={"loss_function": "logistic", "sketch_size": 4}, passes=2),
                     workers=2, worker_threads=True, log=said.append)
    assert run["engine"]["mix"] == "linesearch" and run["examples"] == 5400
    assert all(ps["alpha"] is not None and 0.25 <= ps["alpha"] <= 2.0 for ps in run["engine"]["passes"])
    assert any(line.startswith("mixing rule linesearch (the default") for line in said), said
    bear = train_dask(RunConfig(data=[str(parquet_dir)], final_model=str(tmp_path / "b.slm"), quiet=True,
                                algo="bear", hyper={"loss_function": "logistic"}, passes=2),
                      workers=2, worker_threads=True)
    assert bear["engine"]["mix"] == "linesearch" and bear["examples"] == 5400
    assert [ps["beta"] is not None for ps in bear["engine"]["passes"]] == [True, True]
    with pytest.raises(ConfigError, match="--mix linesearch-last.*--algo oja-son searches with --mix linesearch"):
        train_dask(RunConfig(data=[str(parquet_dir)], final_model=str(tmp_path / "x.slm"), quiet=True,
                             algo="oja-son", passes=2), workers=2, worker_threads=True, mix="linesearch-last")
    assert not (tmp_path / "x.slm").exists()


def test_engine_default_mixing_resolves_and_says_so(parquet_dir, tmp_path):
    """The engine's default: 2 worker threads, 2 passes of plain adagrad take linesearch-last (pass 1 holds out
    a tenth of the rows, pass 2 learns all: 2,700 + 3,000 examples) and print it; with one pass it is VW's rule."""
    from streamlearn.api import RunConfig
    from streamlearn.distributed.engine import train_dask

    said = []
    two = train_dask(RunConfig(data=[str(parquet_dir)], final_model=str(tmp_path / "a.slm"), table=False,
                               hyper={"loss_function": "logistic"}, passes=2),
                     workers=2, worker_threads=True, log=said.append)
    assert two["examples"] == 5700 and two["engine"]["mix"] == "linesearch-last"
    assert any(line.startswith("mixing rule linesearch-last (the default") for line in said), said
    said.clear()
    one = train_dask(RunConfig(data=[str(parquet_dir)], final_model=str(tmp_path / "b.slm"), table=False,
                               hyper={"loss_function": "logistic"}, passes=1),
                     workers=2, worker_threads=True, log=said.append)
    assert one["examples"] == 3000 and one["engine"]["mix"] == "vw"
    assert not any(line.startswith("mixing rule") for line in said)


def test_a_line_search_over_one_chain_holds_no_row_out(parquet_dir, tmp_path):
    """``--mix linesearch`` with one worker (one chain): one state a pass is one sequential run, nothing to search,
    so no row is sampled or held out: every row is learned in every pass and the model is VW's rule's."""
    from streamlearn.api import RunConfig
    from streamlearn.distributed.engine import train_dask

    got = {}
    for mix in ("linesearch", "vw"):
        s = train_dask(RunConfig(data=[str(parquet_dir)], final_model=str(tmp_path / f"{mix}.slm"), quiet=True,
                                 hyper={"loss_function": "logistic"}, passes=2),
                       workers=1, worker_threads=True, mix=mix)
        got[mix] = s["examples"]
    assert got == {"linesearch": 6000, "vw": 6000}
    assert (tmp_path / "linesearch.slm").read_bytes() == (tmp_path / "vw.slm").read_bytes()


@pytest.mark.parametrize("algo", ["mission", "bear"])
def test_a_chain_hands_its_partial_minibatch_on_as_one_stream_would(parquet_dir, tmp_path, invoke_cli, algo):
    """Minibatch learners (minibatch 7 here, which no 750-row partition is a multiple of): a chain's link hands
    its buffered partial minibatch to the next partition, so each chain learns its files as one stream: the
    engine's model is the merge of one `train` run per chain over its files in order. (Learning the partial
    minibatch at every partition's end, as before, made other minibatches than one stream: BEAR's curvature
    pairs from a few rows.)"""
    from streamlearn.api import RunConfig
    from streamlearn.distributed.engine import train_dask

    files = sorted(parquet_dir.iterdir())
    hyper = ["--loss_function", "logistic", "--minibatch", "7", "--sketch_width", "64", "--top_k", "40"]
    hand = []
    for run in ((0, 1), (2, 3)):
        m = tmp_path / f"hand{run[0]}.slm"
        r = invoke_cli("train", *[files[i] for i in run], "--algo", algo, *hyper, "-f", m, "--quiet")
        assert r.exit_code == 0, r.output
        hand.append(m)
    assert invoke_cli("merge", *hand, "-f", tmp_path / "hand.slm", "--quiet").exit_code == 0
    train_dask(RunConfig(data=[str(parquet_dir)], algo=algo, final_model=str(tmp_path / "threads.slm"), quiet=True,
                         hyper={"loss_function": "logistic", "minibatch": 7, "sketch_width": 64, "top_k": 40}),
               workers=2, worker_threads=True, chain_order="consecutive")
    assert (tmp_path / "threads.slm").read_bytes() == (tmp_path / "hand.slm").read_bytes()
