"""The dense sketched-AdaGrad references (tests/naive_sketched_adagrad.py) on the designs NOTES_ADA's
"What to expect" quotes: one pass of progressive validation, logistic loss, the best step of
the grid eta = 2^-10..2^4 for every method, progressive error in percent.

Data: SON Sec. 5.1's synthetic design (tests/naive_fd_son.py ``son_synthetic``: T = 10,000 as
the paper (``--T``), d = 100, ten directions rising to kappa, the same Z, V, labels for every kappa) at kappa = 10 and
200 over --seeds data seeds; splice (../shared/datasets, 60 features plus a constant feature, in
file order); optionally covtype_subset20k and a9a (--real splice,covtype,a9a; full-matrix AdaGrad
on a9a's 124 features takes minutes per step size).

Methods: diagonal AdaGrad (mirror form, delta = 0: streamlearn's ``--adaptive`` rule), full-matrix
AdaGrad in the mirror (full-md) and primal-dual (full-pd) forms, S-ADA and Fast S-ADA (mirror),
FTSL and FTFSL (primal-dual), sketch size tau = 10 (--tau); CompAdaGrad with an unscaled SRHT of
k = 10 rows (the features zero-padded to a power of two), complement weight 1, the median over 3
subspace seeds (real data only: on the synthetic design a run costs seconds per step size).
delta = 1e-6 inside the root for the full-matrix and sketched methods (NOTES_ADA's placement),
delta_r = delta_c = 1e-6 for CompAdaGrad. The sketched methods apply G~^-1/2 by Yang App. A.1's
low-rank formula (``lowrank=True``; equal to the dense form to 1e-12 in
tests/test_naive_sketched_adagrad.py). A run whose predictions pass 1e8 counts as error 100%.

Run: python benchmarks/sketched_adagrad_reference.py [--seeds 2] [--jobs 2] [--real splice] [--T 10000]
[--methods diag,s-ada,...] [--etas=-3,1]
"""
from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # small matrices: threads only fight (10x slower on a busy 2-core box)

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from _common import DATASETS, table  # noqa: E402
from naive_fd_son import son_synthetic  # noqa: E402
from naive_sketched_adagrad import (  # noqa: E402
    FTFSL, FTSL, CompAdaGrad, DiagAdaGrad, FastSADA, FullAdaGrad, SADA, srht_map,
)

GRID = [2.0 ** j for j in range(-10, 5)]
DELTA = 1e-6
REAL = {
    "splice": "splice/splice.libsvm.gz",
    "covtype": "covtype_subset20k/covtype_subset20k.libsvm.gz",
    "a9a": "a9a/a9a_train.libsvm.gz",
}
METHODS = ["diag", "full-md", "full-pd", "s-ada", "fast-s-ada", "ftsl", "ftfsl", "comp-k10"]


def read_libsvm(path):
    """Dense X (with a constant feature 1 as the last column) and labels in {-1, +1}."""
    rows, labels, d = [], [], 0
    with gzip.open(path, "rt") as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            labels.append(1.0 if float(parts[0]) > 0 else -1.0)
            feats = [(int(i), float(v)) for i, v in (p.split(":") for p in parts[1:])]
            d = max(d, max((i for i, _ in feats), default=0))
            rows.append(feats)
    X = np.zeros((len(rows), d + 1))
    for r, feats in enumerate(rows):
        for i, v in feats:
            X[r, i - 1] = v
    X[:, d] = 1.0
    return X, np.array(labels)


def make(method, d, eta, tau, sub_seed=0):
    if method == "diag":
        return DiagAdaGrad(d, eta, 0.0)
    if method == "full-md":
        return FullAdaGrad(d, eta, DELTA, form="mirror")
    if method == "full-pd":
        return FullAdaGrad(d, eta, DELTA, form="dual")
    if method == "comp-k10":
        n = 1 << (d - 1).bit_length()
        return CompAdaGrad(n, srht_map(n, 10, seed=sub_seed), eta, DELTA, DELTA)
    cls = {"s-ada": SADA, "fast-s-ada": FastSADA, "ftsl": FTSL, "ftfsl": FTFSL}[method]
    return cls(d, tau, eta, DELTA, lowrank=True)


def error(model, X, y, limit=1e8):
    n = model.d
    wrong = 0
    for i in range(len(y)):
        x = X[i] if X.shape[1] == n else np.concatenate([X[i], np.zeros(n - X.shape[1])])
        p = model.step(x, y[i])
        if not abs(p) < limit:
            return 100.0
        wrong += (1.0 if p > 0 else -1.0) != y[i]
    return 100.0 * wrong / len(y)


def best(job):
    """(key, method, best error %, log2 of the best eta) over the grid."""
    key, method, loader, tau, sub_seed, grid = job
    X, y = loader()
    errs = [error(make(method, X.shape[1], eta, tau, sub_seed), X, y) for eta in grid]
    i = int(np.argmin(errs))
    return key, method, sub_seed, errs[i], int(np.log2(grid[i]))


class Synthetic:
    def __init__(self, kappa, seed, T):
        self.kappa, self.seed, self.T = kappa, seed, T

    def __call__(self):
        return son_synthetic(T=self.T, d=100, kappa=self.kappa, seed=self.seed)


class Real:
    def __init__(self, rel):
        self.path = str(DATASETS / rel)

    def __call__(self):
        return read_libsvm(self.path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--T", type=int, default=10_000)
    ap.add_argument("--tau", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--real", default="splice", help="comma-separated: splice, covtype, a9a ('' for none)")
    ap.add_argument("--kappas", default="10,200")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--etas", default="-10,4", help="log2 of the step grid's ends (default -10,4: 2^-10..2^4)")
    a = ap.parse_args()
    lo, hi = (int(v) for v in a.etas.split(","))
    grid = [2.0 ** j for j in range(lo, hi + 1)]
    methods = [m for m in a.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        sys.exit(f"unknown --methods {sorted(unknown)}; choose from {METHODS}")
    jobs = []
    for kappa in [float(k) for k in a.kappas.split(",") if k]:
        for seed in range(a.seeds):
            key = f"son kappa={kappa:g} seed={seed}"
            jobs += [(key, m, Synthetic(kappa, seed, a.T), a.tau, 0, grid) for m in methods if m != "comp-k10"]
    for name in [r for r in a.real.split(",") if r]:
        if not (DATASETS / REAL[name]).exists():
            sys.exit(f"missing {DATASETS / REAL[name]} (set STREAMLEARN_SHARED)")
        jobs += [(name, m, Real(REAL[name]), a.tau, 0, grid) for m in methods if m != "comp-k10"]
        if "comp-k10" in methods:
            jobs += [(name, "comp-k10", Real(REAL[name]), a.tau, s, grid) for s in range(3)]
    t0 = time.time()
    np.seterr(over="ignore")  # exp(y p) of a diverging grid point; such runs count as 100%
    with ProcessPoolExecutor(a.jobs, initializer=np.seterr, initargs=("ignore",)) as ex:
        results = []
        for r in ex.map(best, jobs):  # progress on stderr, so a long run shows partial results
            results.append(r)
            print(f"  {r[0]:<22} {r[1]:<11} sub={r[2]} {r[3]:6.2f}% (eta 2^{r[4]:+d})", file=sys.stderr, flush=True)
    res = {}
    for key, method, sub_seed, err, lg in results:
        res.setdefault(key, {}).setdefault(method, []).append((err, lg))
    rows = []
    for key, per in res.items():
        row = {"data": key}
        for m, vals in per.items():
            errs = sorted(vals)
            e, lg = errs[len(errs) // 2]  # median over subspace seeds (one value otherwise)
            row[m] = f"{e:.2f} ({lg:+d})"
            row["_" + m] = e
        rows.append(row)
    print(f"progressive error % (log2 best eta), one pass, logistic, tau = {a.tau}, "
          f"delta = {DELTA:g}, SON design T = {a.T}, step grid 2^{lo}..2^{hi}; {time.time() - t0:.0f} s")
    print(table(rows, ["data"] + [m for m in METHODS if any(m in r for r in rows)]))
    print("\npoints better than diagonal AdaGrad (diag error - method error; + = better):")
    groups = {}
    for r in rows:
        groups.setdefault(r["data"].split(" seed=")[0], []).append(r)
    diff_rows = []
    for g, rs in groups.items():
        for r in rs:
            diff_rows.append({"data": r["data"], **{m: f"{r['_diag'] - r['_' + m]:+.2f}" for m in METHODS[1:]
                                                      if "_" + m in r}})
        if len(rs) > 1:
            diff_rows.append({"data": g + " mean", **{m: f"{np.mean([r['_diag'] - r['_' + m] for r in rs]):+.2f}"
                                                      for m in METHODS[1:] if "_" + m in rs[0]}})
    print(table(diff_rows, ["data"] + [m for m in METHODS[1:] if any(m in r for r in diff_rows)]))


if __name__ == "__main__":
    main()
