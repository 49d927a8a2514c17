#!/usr/bin/env python3
"""FTSL-Shampoo (``--algo ftsl-shampoo --oaa K``) against diagonal AdaGrad on the same softmax
loss, the ``--oaa`` reduction, full Shampoo and VW's ``--oaa``, one pass of progressive
validation, best step of 2^-10..2^4 for every learner (VW too), side by side.

Rows per data set (K classes, d features + the constant):
* ``ftsl-shampoo tau=10``: ``--algo ftsl-shampoo -m 10`` (left sketch min(10, K));
* ``full shampoo``: ``--algo ftsl-shampoo --left_sketch_size K --right_sketch_size d+1`` (full
  primal-dual Shampoo, ``tests/test_ftsl_shampoo.py``; dense sets of small d only);
* ``softmax adagrad (diag)``: ``--loss_function multiclass_logistic --adaptive`` (plain diagonal
  AdaGrad, the same softmax cross-entropy); ``softmax adagrad (norm.)``: its default normalized
  adaptive rule;
* ``oaa adagrad``: the ``--oaa`` one-against-all reduction (default adagrad, VW's rule);
* ``vw --oaa``: VW 9.11.9 ``--oaa K -l STEP`` (``vw_run``; LIBSVM converted to ``y | i:v``).

streamlearn's learners run in this process on the parsed stream (``read_batches``: the CLI's
reader, constant feature included), so the step grid costs no start-up; error = progressive 0/1
error of the one pass. satimage is stored in runs of equal labels: it is shuffled here
(``numpy.random.default_rng(2016)``, as ``../shared/tools/shuffle_lines.py``). ``satimage01``: the same
stream with the pixels (0..255) divided by 255: Shampoo's R^-1/4 only partly undoes the 100:1 scale of
the pixels against the constant feature, so on the raw pixels FTSL-Shampoo and full Shampoo only tie
the ``--oaa`` reduction (VW's normalized rule is scale-invariant), and on the scaled ones they beat it. Then the time per
example of FTSL-Shampoo at ``-b 24`` against ``-b 18`` (warm kernels, best of 3 interleaved; its table holds
the features seen, so only collisions differ). Prints the load average it ran under.

    python3 benchmarks/ftsl_shampoo.py [--sets satimage,letter,mnist,news20] [--steps -10:4]
    python3 benchmarks/ftsl_shampoo.py --diagnose [n]   # news20: the right factor's rho^R (see diagnose)
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import CACHE, DATASETS, libsvm_to_vw, need_shared, run, table, vw_cmd  # noqa: E402

from streamlearn.algos import make_learner  # noqa: E402
from streamlearn.batch import concat_batches  # noqa: E402
from streamlearn.io.source import read_batches  # noqa: E402

SETS = {  # name: (path under datasets, K, d (without the constant), shuffle, full Shampoo)
    "satimage": ("pmlb_satimage/satimage.libsvm.gz", 6, 36, True, True),
    "satimage01": ("pmlb_satimage/satimage.libsvm.gz", 6, 36, True, True),  # pixels / 255 (see _prepare)
    "letter": ("letter_scale/letter_scale.libsvm.gz", 26, 16, False, True),
    "mnist": ("mnist_test10k/mnist_test10k.libsvm.gz", 10, 778, False, False),
    "news20": ("news20/news20_train.vw.gz", 20, None, False, False),
}


def _prepare(name):
    path, K, d, shuffle, _ = SETS[name]
    src = DATASETS / path
    CACHE.mkdir(parents=True, exist_ok=True)
    if shuffle:
        import gzip
        out = CACHE / f"{name}_shuffled.libsvm"
        if not out.exists():
            lines = gzip.open(src, "rb").readlines()
            order = np.random.default_rng(2016).permutation(len(lines))
            out.write_bytes(b"".join(lines[i] for i in order))
        src = out
    if str(src).endswith(".vw.gz") or str(src).endswith(".vw"):
        vw = src
    else:
        vw = libsvm_to_vw(src, CACHE / f"{name}_ftsl.vw")
    batch = concat_batches(list(read_batches(str(src))))
    if name == "satimage01":  # satimage's pixels are 0..255 against the constant feature's 1: scaled to 0..1
        from streamlearn.batch import Batch
        vals = np.where(batch.values == 1.0, 1.0, batch.values / 255.0)  # raw pixels are >= 27; the constant is 1
        batch = Batch(offsets=batch.offsets, indices=batch.indices, values=vals, labels=batch.labels,
                      weights=batch.weights)
        vw = _scaled_vw(vw, CACHE / "satimage01_ftsl.vw")
    return batch, vw, K, d


def _scaled_vw(src, out):
    """The VW text ``y | i:v`` of ``src`` with every value divided by 255 (VW adds its own constant)."""
    if not out.exists():
        lines = []
        for line in open(src):
            head, feats = line.rstrip("\n").split("|", 1)
            toks = [f"{i}:{float(v) / 255.0:.9g}" for i, v in (t.split(":") for t in feats.split())]
            lines.append(f"{head}| {' '.join(toks)}\n")
        out.write_text("".join(lines))
    return out


def _ours(batch, algo, hyper):
    L = make_learner(algo, dict(hyper))
    t = time.perf_counter()
    pred, _ = L.learn_batch(batch)
    L.finish()
    return float(np.mean(pred != batch.labels)), time.perf_counter() - t, L


def _vw(vwfile, K, step):
    _, _, err = run(vw_cmd(vwfile, "--oaa", K, "-l", step))
    m = re.search(r"average loss = ([\d.]+)", err)
    return float(m.group(1)) if m else float("nan")


def _runs(K, d, full):
    out = [("ftsl-shampoo tau=10", "ftsl-shampoo", {"oaa": K, "sketch_size": 10})]
    if full:
        out.append(("full shampoo", "ftsl-shampoo", {"oaa": K, "left_sketch_size": K, "right_sketch_size": d + 1}))
    out += [("softmax adagrad (diag)", "adagrad", {"oaa": K, "loss_function": "multiclass_logistic", "adaptive": True}),
            ("softmax adagrad (norm.)", "adagrad", {"oaa": K, "loss_function": "multiclass_logistic"}),
            ("oaa adagrad", "adagrad", {"oaa": K})]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="satimage,satimage01,letter,mnist,news20")
    ap.add_argument("--steps", default="-10:4", help="exponents lo:hi of the step grid 2^lo..2^hi")
    ap.add_argument("--no_vw", action="store_true")
    ap.add_argument("--timing_sets", default="satimage,news20", help="sets for the -b 24 / -b 18 timing ('' = none)")
    ap.add_argument("--timing_step", type=float, default=None,
                    help="the step of the timing runs (default: FTSL-Shampoo's best on the set, else 2^-4)")
    args = ap.parse_args()
    need_shared()
    lo, hi = map(int, args.steps.split(":"))
    steps = [2.0 ** e for e in range(lo, hi + 1)]
    print(f"load average at start: {os.getloadavg()}; steps 2^{lo}..2^{hi}", flush=True)
    best_step = {}
    for name in filter(None, args.sets.split(",")):
        batch, vwfile, K, d = _prepare(name)
        full = SETS[name][4]
        rows = []
        for label, algo, hyper in _runs(K, d, full):
            best = None
            t0 = time.perf_counter()
            for st in steps:
                err, secs, L = _ours(batch, algo, dict(hyper, learning_rate=st))
                if best is None or err < best[0]:
                    best = (err, st, secs, L.extra_summary())
            rows.append({"learner": label, "error %": f"{100 * best[0]:.2f}", "best step": f"2^{int(np.log2(best[1]))}",
                         "s/run": f"{best[2]:.1f}", "grid s": f"{time.perf_counter() - t0:.0f}"})
            best_step[(name, label)] = best[1]
            print(f"  {name}: {label}: {100 * best[0]:.2f}% at 2^{int(np.log2(best[1]))} {best[3]}", flush=True)
        if not args.no_vw:
            errs = [(_vw(vwfile, K, st), st) for st in steps]
            e, st = min(errs, key=lambda x: (np.nan_to_num(x[0], nan=9.0), x[1]))
            rows.append({"learner": "vw --oaa", "error %": f"{100 * e:.2f}", "best step": f"2^{int(np.log2(st))}"})
        ref = float(rows[0]["error %"])
        for r in rows:
            r["vs ftsl (points)"] = f"{float(r['error %']) - ref:+.2f}"
        print(f"\n{name} (n = {batch.n}, K = {K}, one pass, progressive error, best step per row)")
        print(table(rows, ["learner", "error %", "vs ftsl (points)", "best step", "s/run", "grid s"]), flush=True)
        print()
    # -b 24 vs -b 18 time per example (warm kernels)
    trows = []
    for name in filter(None, args.timing_sets.split(",")):
        batch, _, K, d = _prepare(name)
        st = best_step.get((name, "ftsl-shampoo tau=10"), args.timing_step or 2.0 ** -4)
        from streamlearn.batch import Batch  # warm the kernels (compiled on a first use) before timing
        warm = Batch.from_dense(np.eye(3), np.array([1.0, 2.0, 1.0]))
        make_learner("ftsl-shampoo", {"oaa": K}).learn_batch(warm)
        per, times = {}, {18: [], 24: []}
        for _ in range(3):  # interleaved, so that a change of load weighs on both alike
            for b in (18, 24):
                err, secs, L = _ours(batch, "ftsl-shampoo", {"oaa": K, "learning_rate": st, "bit_precision": b})
                times[b].append(secs)
                per[b] = (min(times[b]) / batch.n, err, L.extra_summary())
        trows.append({"set": name, "us/example -b 18": f"{1e6 * per[18][0]:.1f}", "us/example -b 24": f"{1e6 * per[24][0]:.1f}",
                      "ratio 24/18": f"{per[24][0] / per[18][0]:.2f}", "error -b 18 %": f"{100 * per[18][1]:.2f}",
                      "error -b 24 %": f"{100 * per[24][1]:.2f}", "features seen 18/24":
                      f"{per[18][2]['features_seen']}/{per[24][2]['features_seen']}",
                      "rebases 18/24": f"{per[18][2]['rebases']}/{per[24][2]['rebases']}"})
    if trows:
        print("ftsl-shampoo tau=10 time per example, -b 24 vs -b 18 (best of 3, warm)")
        print(table(trows, list(trows[0])))
    print(f"\nload average at end: {os.getloadavg()}")


def diagnose(name, n, steps):
    """Why FTSL-Shampoo loses on sparse text (issue 18): the right factor's escaped mass rho^R, which
    Alg. 5 adds back as rho^R I, against each feature's own curvature. R = sum_t G_t^T G_t with
    G_t = h q_t a_t^T, so R_jj = sum_t h^2 ||q_t||^2 a_tj^2 <= 2 sum_t a_tj^2 (||q||^2 <= 2):
    the percentiles of sum_t a_tj^2 bound what full Shampoo would apply to feature j, while the
    sketch applies (eps + rho^R)^-1/4 to every feature outside its tau directions. Then the error
    against the right sketch size (rho^R shrinks as the sketch grows) and diagonal softmax AdaGrad,
    on the first n examples, best step of ``steps``."""
    batch, _, K, _ = _prepare(name)
    n = min(n, batch.n)
    sub = batch.slice(0, n)
    end = int(sub.offsets[n])
    _, inv = np.unique(sub.indices[:end], return_inverse=True)
    mass = np.bincount(inv, weights=sub.values[:end] ** 2)
    rows = []
    for label, algo, hyper in [("softmax adagrad (diag)", "adagrad", {"oaa": K, "loss_function": "multiclass_logistic",
                                                                     "adaptive": True}),
                               ("ftsl-shampoo tau=10", "ftsl-shampoo", {"oaa": K, "sketch_size": 10}),
                               ("ftsl-shampoo tau=10, left K", "ftsl-shampoo", {"oaa": K, "sketch_size": 10,
                                                                               "left_sketch_size": K}),
                               ("ftsl-shampoo tau=10, right 60", "ftsl-shampoo", {"oaa": K, "sketch_size": 10,
                                                                                 "right_sketch_size": 60})]:
        best = min((_ours(sub, algo, dict(hyper, learning_rate=st)) + (st,) for st in steps), key=lambda r: r[0])
        L = best[2]
        rho = L.flt if algo == "ftsl-shampoo" else [np.nan, np.nan]
        rows.append({"learner": label, "error %": f"{100 * best[0]:.2f}", "best step": f"2^{int(np.log2(best[3]))}",
                     "rho^L": f"{rho[0]:.3g}", "rho^R": f"{rho[1]:.3g}"})
        print(f"  {rows[-1]}", flush=True)
    print(f"\n{name}, first {n} examples ({len(mass)} features): one pass, best step of 2^{int(np.log2(steps[0]))}.."
          f"2^{int(np.log2(steps[-1]))}")
    print(table(rows, ["learner", "error %", "best step", "rho^L", "rho^R"]))
    q = [50, 90, 99, 99.9, 100]
    print("\nper-feature sum_t a_tj^2 (R_jj <= 2x this) against the sketch's rho^R:")
    print(table([{"percentile": f"{p}", "sum_t a_tj^2": f"{np.percentile(mass, p):.3g}"} for p in q],
                ["percentile", "sum_t a_tj^2"]))
    rhoR = float(rows[1]["rho^R"])
    print(f"features whose R_jj bound is below rho^R / 1000 = {rhoR / 1000:.3g}: {100 * np.mean(2 * mass < rhoR / 1000):.2f}%")


if __name__ == "__main__":
    if "--diagnose" in sys.argv:  # python3 benchmarks/ftsl_shampoo.py --diagnose [n]
        i = sys.argv.index("--diagnose")
        n = int(sys.argv[i + 1]) if len(sys.argv) > i + 1 else 4000
        need_shared()
        print(f"load average at start: {os.getloadavg()}", flush=True)
        diagnose("news20", n, [2.0 ** e for e in range(-8, 5, 2)])
        sys.exit(0)
    main()
