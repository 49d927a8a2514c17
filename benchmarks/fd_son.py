#!/usr/bin/env python3
"""FD-SON and RFD-SON (issue 17, "Shown by"): accuracy on the SON synthetic design and on real
data, alpha0 sensitivity, and cost, each next to AdaGrad, Oja-SON and VW in the same run.

Sections (``--section synthetic,alpha0,real,cost,defaults``; default the first four):

* ``synthetic``: SON Sec. 5.1's design (``tests/naive_fd_son.py``'s ``son_synthetic``: d = 100,
  T = 5,000, kappa in {10, 50, 100, 200}, seeds 0-4), written once per (kappa, seed) as LIBSVM
  (``%.9g``) into the cache; one pass of progressive validation, logistic loss, no constant
  feature (the design has no bias). Learners: FD-SON m = 10, FD-SON m = 0 (A = alpha I: online
  gradient descent with step 1/alpha), RFD-SON m = 10, diagonal AdaGrad (``--adaptive``), AdaGrad
  with VW's default rule (adaptive + normalized + invariant) and Oja-SON m = 10 (its defaults
  otherwise). Each takes the best point of a step grid, chosen per kappa by the mean error over
  the seeds (one setting for all seeds of a kappa); the grid is widened by a factor 4 on any side
  where the best sits at the edge until it does not (or a hard limit, reported). The issue's
  targets are checked and printed PASS / MISS; on a MISS the dense reference ``NaiveFDSON``
  (``fd-epoch``) runs the same files at the sparse learner's best setting (slow: ~30 s a file).
  When the CLI refuses ``--sketch_size 0`` for fd-son (before that option lands), FD-SON m = 0
  is run instead by a 5-line NumPy OGD (SON Alg. 1 with A = alpha I), and the table says so.
* ``alpha0``: at to-sketch scale ``--sigma_eta 1``, alpha0 (FD-SON: ``--alpha``) in
  {1e-4, 1e-3, ..., 100}, max/min progressive error over alpha0 per synthetic file, for RFD-SON and
  FD-SON, logistic loss (the synthetic section's) and squared loss (SON Sec. 5's; RFD-SON also
  at alpha0 = 0 there). Target: RFD <= 1.5 on >= 3 of every 4 files, FD >= 5.
* ``real``: a9a, ijcnn1, splice, australian, breast-cancer, diabetes (label-sorted files are
  replaced by a shuffled copy, as ``vs_vw.py``), with the constant feature (streamlearn and VW
  both add it by default). FD-SON m = 10, RFD-SON m = 10, Oja-SON m = 10 and AdaGrad (VW's rule)
  each untuned (defaults) and tuned (the same widening grid as above, best progressive error of
  the one pass: the SON paper's protocol), VW's default (``vw_run``, untuned), and SON's Table 2
  (FD-SON, Oja-SON) and Table 3 (Oja-SON m = 10 with the diagonal, AdaGrad) numbers; both
  losses by default (SON's tables use squared loss). Target: FD-SON m = 10 on splice <= 0.235.
* ``cost``: FD-SON m = 10 (logistic) time per example on two streams of
  ``../shared/tools/gen_sparse.py`` that differ only in d (10^3 vs 10^5; same n, same ~50
  non-zeros an example); ``-b 26`` vs ``-b 18`` on gen_sparse's 200,000-example file; FD-SON vs
  AdaGrad (VW's rule), Oja-SON and VW ``--OjaNewton --sketch_size 10`` (logistic) on that file, whole
  processes, best of ``--repeat``, ratios from the same run; and the eigen steps' share of a
  pass, derived as described in :func:`eigen_share`; FD-SON with and without ``--no_diag``.
* ``defaults``: every binary set of ../shared/datasets (``vs_vw.BINARY``: shuffled copies of
  label-sorted ones, the constant feature), both losses, no option but the loss: FD-SON and RFD-SON
  at their defaults next to VW's default (``vw_run``), AdaGrad (VW's rule) and Oja-SON, and the two
  with ``--no_diag`` (no diagonal pre-scaling: their defaults before it); ``--variants`` adds columns;
  a summary of the gaps to VW and AdaGrad.

Runs of the streamlearn CLI are made in this process (``streamlearn.cli.main(argv)``; one import
and one numba cache load for thousands of short runs) unless ``--subprocess``; cost timings always
use separate processes. An option this tree's CLI does not have yet makes its row say "skipped"
and the script goes on. Needs ../shared (datasets, vw_run, gen_sparse.py).

    python3 benchmarks/fd_son.py [--section synthetic,alpha0,real,cost] [--quick] [--seeds 0,1,2,3,4]
        [--losses squared,logistic] [--repeat 2] [--subprocess] [--rev REV]

``--quick``: seeds 0-1, the real section on splice, australian, breast-cancer and diabetes only,
one loss (squared), cost on 50,000 examples of gen_sparse and 20,000 for the d streams.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _common import (CACHE, GEN_SPARSE, ROOT, labels_of, need_shared, read_preds, run_rss,  # noqa: E402
                     streamlearn_cmd, table, vw_cmd, vw_summary)

OUT = CACHE / "fd_son"
#: the streamlearn tree under test: this one, or ``--rev REV``'s (git archive, _baseline.py)
TREE = ROOT
KAPPAS = (10, 50, 100, 200)
SUBPROCESS = False
SKIP = "skipped"  # a run the CLI refused as a usage error (an option not there yet)
FAIL = "failed"  # a run that stopped on bad state (diverged: NaN/inf), or crashed


# -- running streamlearn --------------------------------------------------------------------------
def use_tree(tree: Path):
    """Import streamlearn (in-process runs) and the dense references from ``tree``."""
    global TREE
    TREE = Path(tree)
    if not any((TREE / "streamlearn" / "kernels").glob("_cfast_lib*")):
        os.environ["STREAMLEARN_NO_C"] = "1"  # that tree's numba kernels: the same results
    sys.path.insert(0, str(TREE))
    sys.path.insert(0, str(TREE / "tests"))  # tests/naive_fd_son.py


def sl_cmd(*args):
    """The ``streamlearn *args`` command of the tree under test (a separate process)."""
    if TREE == ROOT:
        return streamlearn_cmd(*args)
    from _baseline import baseline_cmd
    return baseline_cmd(TREE, *args)


def sl(data, *args, preds=None) -> dict | str:
    """``streamlearn train data args --quiet --metrics ...``: the metrics dict, or SKIP / FAIL plus
    the message (a str)."""
    mj = OUT / f"run_metrics.{os.getpid()}.json"  # per process: two sections may run at once
    argv = ["train", str(data), *map(str, args), "--quiet", "--metrics", str(mj)]
    if preds is not None:
        argv += ["-p", str(preds)]
    if mj.exists():
        mj.unlink()
    if SUBPROCESS:
        p = subprocess.run(sl_cmd(*argv), capture_output=True, text=True)
        code, err = p.returncode, p.stderr
    else:
        from streamlearn.cli import main
        buf = io.StringIO()
        code = 0
        with contextlib.redirect_stderr(buf):
            try:
                main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except Exception as e:  # noqa: BLE001 - a crash is reported as a failed run
                code, buf = 1, io.StringIO(f"{type(e).__name__}: {e}")
        err = buf.getvalue()
    if code == 0:
        return json.loads(mj.read_text())
    msg = " ".join(err.strip().split())[-300:]
    return f"{SKIP if code == 2 else FAIL}: {msg}"


def err_of(r) -> float:
    """Progressive error of a run; a failed (diverged) run counts as inf, so it is never the best."""
    if isinstance(r, dict):
        e = r.get("error_rate")
        return float(e) if e is not None else math.inf
    return math.inf


# -- the widening step grid ------------------------------------------------------------------------
class Axis:
    """One tuned option on a log2 grid with exponent step ``step`` (factor 2^step), widened at an
    edge up to exponents in [lo_lim, hi_lim]."""

    def __init__(self, flag, e0, e1, step=2, lim=(-24, 24)):
        self.flag, self.step, self.lim = flag, step, lim
        self.exps = list(range(e0, e1 + 1, step))

    def value(self, e):
        return 2.0 ** e

    def describe(self):
        return f"{self.flag} 2^{self.exps[0]}..2^{self.exps[-1]} (x{2 ** self.step})"


def tune(files, fixed, axes, runner=None):
    """Best grid point by mean error over ``files`` (``fixed`` + one value per axis), widening.

    Returns a dict: ``point`` (option -> value), ``errs`` (per file at the best point), ``mean``,
    ``grid`` (the final grid, described), ``edge`` (axes whose best still sits at an edge after
    widening to the limit), ``note`` (the first skip/fail message, if every point failed)."""
    runner = runner or (lambda f, args: sl(f, *args))
    cache = {}

    def point_errs(exps):
        out = []
        for f in files:
            key = (str(f), exps)
            if key not in cache:
                args = list(fixed)
                for ax, e in zip(axes, exps):
                    args += [ax.flag, repr(ax.value(e))]
                cache[key] = runner(f, args)
            out.append(cache[key])
        return out

    while True:
        best, best_mean, best_runs = None, math.inf, None
        for exps in itertools.product(*(ax.exps for ax in axes)):
            runs = point_errs(exps)
            mean = float(np.mean([err_of(r) for r in runs]))
            if mean < best_mean:
                best, best_mean, best_runs = exps, mean, runs
        if best is None:  # every point skipped or failed
            note = next(r for r in cache.values() if isinstance(r, str))
            return {"point": None, "errs": None, "mean": math.nan, "grid": ", ".join(a.describe() for a in axes),
                    "edge": [], "note": note}
        widened, edge = False, []
        for ax, e in zip(axes, best):
            if e == ax.exps[0]:
                if e - ax.step >= ax.lim[0]:
                    ax.exps.insert(0, e - ax.step)
                    widened = True
                else:
                    edge.append(ax.flag)
            elif e == ax.exps[-1]:
                if e + ax.step <= ax.lim[1]:
                    ax.exps.append(e + ax.step)
                    widened = True
                else:
                    edge.append(ax.flag)
        if not widened:
            return {"point": {ax.flag: ax.value(e) for ax, e in zip(axes, best)},
                    "errs": [err_of(r) for r in best_runs], "mean": best_mean,
                    "grid": ", ".join(a.describe() for a in axes), "edge": edge, "note": None}


def fmt_point(pt):
    if not pt:
        return "-"
    return " ".join(f"{k} {_num(v)}" for k, v in pt.items())


def _num(v):
    e = math.log2(v) if v > 0 else None
    if e is not None and abs(e - round(e)) < 1e-9:
        return f"2^{int(round(e))}"
    return f"{v:g}"


def pct(e):
    return "-" if e is None or not math.isfinite(e) else f"{100 * e:.2f}"


# -- synthetic data ---------------------------------------------------------------------------------
def synthetic_file(kappa, seed) -> Path:
    from naive_fd_son import son_synthetic

    p = OUT / f"son_synth_k{kappa}_s{seed}.libsvm"
    if not p.exists():
        X, y = son_synthetic(T=5000, d=100, kappa=float(kappa), seed=seed)
        tmp = p.with_suffix(".tmp")
        with open(tmp, "w") as f:
            for xi, yi in zip(X, y):
                f.write(f"{int(yi)} " + " ".join(f"{j + 1}:{v:.9g}" for j, v in enumerate(xi)) + "\n")
        tmp.replace(p)
    return p


_DENSE = {}


def dense_of(path: Path, d=100):
    """The file's examples as a dense matrix (what the streamlearn runs read, rounding included)."""
    if path not in _DENSE:
        X, y = [], []
        with open(path) as f:
            for line in f:
                t = line.split()
                y.append(float(t[0]))
                row = np.zeros(d)
                for tok in t[1:]:
                    i, v = tok.split(":")
                    row[int(i) - 1] = float(v)
                X.append(row)
        _DENSE[path] = (np.array(X), np.array(y))
    return _DENSE[path]


def dense_ogd(path, args):
    """FD-SON with m = 0 (SON Alg. 1 with A = alpha I, no projection): u = w - g / alpha, logistic
    loss; the stand-in while the CLI has no ``--sketch_size 0`` for fd-son."""
    from naive_fd_son import deriv

    alpha = float(args[args.index("--alpha") + 1])
    X, y = dense_of(path)
    w = np.zeros(X.shape[1])
    wrong = 0
    for x, yi in zip(X, y):
        p = float(w @ x)
        wrong += (p > 0) != (yi > 0)
        w -= deriv("logistic", p, yi) * x / alpha
        if not np.all(np.isfinite(w)):
            return f"{FAIL}: dense OGD diverged"
    return {"error_rate": wrong / len(y)}


def dense_fdson(path, m, alpha, c, loss="logistic"):
    from naive_fd_son import NaiveFDSON

    X, y = dense_of(path)
    p = NaiveFDSON(X.shape[1], m, alpha, sketch="fd-epoch", c=c, loss=loss).run(X, y)
    return float(np.mean((p > 0) != (y > 0)))


# -- section 1: synthetic ----------------------------------------------------------------------------
SYN_BASE = ["--loss_function", "logistic", "--noconstant"]


def synthetic_learners():
    """(label, fixed options, axes factory): the learners of the synthetic section and their grids."""
    return [
        # FD-SON / RFD-SON without the pre-scaling (--no_diag): the SON paper's design, on which the issue's
        # targets were set and met (the pre-scaled learners: the defaults and real sections)
        ("FD-SON m=10", ["--algo", "fd-son", "--sketch_size", "10", "--no_diag"],
         lambda: [Axis("--alpha", 0, 12), Axis("--sigma_eta", -4, 2)]),
        ("FD-SON m=0", ["--algo", "fd-son", "--sketch_size", "0", "--no_diag"], lambda: [Axis("--alpha", 0, 12)]),
        ("RFD-SON m=10", ["--algo", "rfd-son", "--sketch_size", "10", "--no_diag"], lambda: [Axis("--sigma_eta", -12, 2)]),
        ("AdaGrad (--adaptive)", ["--algo", "adagrad", "--adaptive"], lambda: [Axis("-l", -6, 4)]),
        ("AdaGrad (VW's rule)", ["--algo", "adagrad"], lambda: [Axis("-l", -6, 4)]),
        ("Oja-SON m=10", ["--algo", "oja-son", "--sketch_size", "10"], lambda: [Axis("--alpha", -8, 4)]),
    ]


def synthetic(seeds, kappas, dense_seeds):
    t0 = time.perf_counter()
    files = {(k, s): synthetic_file(k, s) for k in kappas for s in seeds}
    print(f"\n== synthetic: SON Sec. 5.1 design, d = 100, T = 5,000, seeds {list(seeds)}, logistic loss, "
          f"one pass, progressive error (%); files in {OUT}", flush=True)
    res, notes = {}, []
    for label, fixed, axes_f in synthetic_learners():
        for k in kappas:
            fl = [files[(k, s)] for s in seeds]
            r = tune(fl, fixed + SYN_BASE, axes_f())
            if r["point"] is None and label == "FD-SON m=0":
                notes.append(f"FD-SON m=0: the CLI refused it ({r['note'][:160]}); run by the NumPy OGD "
                             "stand-in (SON Alg. 1 with A = alpha I), same files and grid")
                r = tune(fl, ["--alpha"], [Axis("--alpha", 0, 12)],
                         runner=lambda f, args: dense_ogd(f, args[1:]))
                r["stand_in"] = True
            res[(label, k)] = r
        print(f"  done {label} ({time.perf_counter() - t0:.0f} s)", flush=True)
    labels = [lab for lab, _, _ in synthetic_learners()]
    rows = []
    for lab in labels:
        row = {"learner": lab + (" [NumPy OGD]" if res[(lab, kappas[0])].get("stand_in") else "")}
        for k in kappas:
            r = res[(lab, k)]
            row[f"kappa {k}"] = pct(r["mean"]) if r["point"] else SKIP
        rows.append(row)
    print("\nMean progressive error (%) over the seeds, best grid point per kappa")
    print(table(rows, ["learner"] + [f"kappa {k}" for k in kappas]))
    rows = []
    for lab in labels:
        for k in kappas:
            r = res[(lab, k)]
            rows.append({"learner": lab, "kappa": k, "best setting": fmt_point(r["point"]),
                         "per seed (%)": " ".join(pct(e) for e in r["errs"]) if r["errs"] else (r["note"] or "")[:90],
                         "grid (after widening)": r["grid"] + (f"; AT EDGE: {r['edge']}" if r["edge"] else "")})
    print(f"\nBest settings, per-seed errors (seeds {list(seeds)}) and the grids")
    print(table(rows, ["learner", "kappa", "best setting", "per seed (%)", "grid (after widening)"]))
    for n in notes[:1]:
        print("note:", n)
    print("note: FD-SON with m = 10 keeps 9 directions (the m-th row is the insertion slot); Oja-SON m = 10 keeps 10.")
    misses = synthetic_targets(res, kappas, seeds)
    if misses and dense_seeds:
        dense_check(res, misses, files, seeds[:dense_seeds])
    if 10 in misses and 200 in misses:  # the invariance target: does one more sketch row close it?
        more_rows(files, kappas, seeds)
    print(f"(synthetic section: {time.perf_counter() - t0:.0f} s)")
    return res


def _check(ok, text):
    print(f"{'PASS' if ok else 'MISS'}: {text}")
    return ok


def synthetic_targets(res, kappas, seeds):
    """The issue's four synthetic targets; returns the kappas whose FD-SON target missed."""
    misses = set()
    fd = lambda k: res.get(("FD-SON m=10", k))  # noqa: E731
    ada = lambda k: res.get(("AdaGrad (--adaptive)", k))  # noqa: E731
    m0 = lambda k: res.get(("FD-SON m=0", k))  # noqa: E731
    print("\nTargets (issue 17; AdaGrad = diagonal AdaGrad, --adaptive; points = percentage points)")
    for k, need in ((200, 2.0), (100, 1.5)):
        if k not in kappas or not fd(k)["point"] or not ada(k)["point"]:
            continue
        gap = 100 * (ada(k)["mean"] - fd(k)["mean"])
        per = [100 * (a - f) for a, f in zip(ada(k)["errs"], fd(k)["errs"])]
        text = (f"kappa {k}: FD-SON m=10 {pct(fd(k)['mean'])}% vs AdaGrad {pct(ada(k)['mean'])}%: "
                f"better by {gap:.2f} points (target >= {need}); per seed {' '.join(f'{g:+.2f}' for g in per)}")
        ok = gap >= need
        if k == 200:
            ok = ok and all(g > 0 for g in per)
            text += " (and better on every seed)"
        if not _check(ok, text):
            misses.add(k)
    if 200 in kappas and fd(200)["point"] and m0(200) and m0(200)["point"]:
        gap = 100 * (m0(200)["mean"] - fd(200)["mean"])
        src = " (m=0 by the NumPy OGD stand-in)" if m0(200).get("stand_in") else ""
        if not _check(gap >= 2.5, f"kappa 200: FD-SON m=10 {pct(fd(200)['mean'])}% vs its own m=0 "
                      f"{pct(m0(200)['mean'])}%{src}: better by {gap:.2f} points (target >= 2.5)"):
            misses.add(200)
    if 200 in kappas and 10 in kappas and fd(200)["point"] and fd(10)["point"]:
        a, b = fd(200)["mean"], fd(10)["mean"]
        if not _check(a <= b, f"FD-SON m=10 error at kappa 200 {pct(a)}% <= at kappa 10 {pct(b)}% "
                      f"(difference {100 * (a - b):+.2f} points; per seed at 200 minus at 10: "
                      + " ".join(f"{100 * (x - y):+.2f}" for x, y in zip(fd(200)["errs"], fd(10)["errs"])) + ")"):
            misses.update((10, 200))
    return sorted(misses)


def more_rows(files, kappas, seeds):
    """FD-SON with m = 11 and m = 12 (10 and 11 directions kept: the design's 10 large
    eigenvalues all in the sketch) at the smallest and largest kappa, tuned as m = 10."""
    lo, hi = min(kappas), max(kappas)
    print(f"\nFD-SON with more rows, kappa {lo} vs {hi} (same grid and protocol as m = 10): "
          "the design has 10 large directions; an m-row FD sketch keeps m - 1")
    rows = []
    for m in (11, 12):
        r = {k: tune([files[(k, s)] for s in seeds], ["--algo", "fd-son", "--sketch_size", str(m)] + SYN_BASE,
                      [Axis("--alpha", 0, 12), Axis("--sigma_eta", -4, 2)]) for k in (lo, hi)}
        rows.append({"learner": f"FD-SON m={m} ({m - 1} directions)", f"kappa {lo} %": pct(r[lo]["mean"]),
                     f"kappa {hi} %": pct(r[hi]["mean"]),
                     "difference (points)": f"{100 * (r[hi]['mean'] - r[lo]['mean']):+.2f}",
                     "best settings": f"{fmt_point(r[lo]['point'])} / {fmt_point(r[hi]['point'])}"})
    print(table(rows, ["learner", f"kappa {lo} %", f"kappa {hi} %", "difference (points)", "best settings"]))


#: --dense-grid: the dense reference also at alpha x4 and /4 of the sparse learner's best
DENSE_GRID = False


def dense_check(res, kappas, files, seeds):
    """The dense reference NaiveFDSON(fd-epoch) on the same files at the sparse learner's best
    setting (and, with --dense-grid, at alpha x4 and /4): is the algorithm or the implementation
    short? ~30-60 s a run."""
    print(f"\nDense reference (tests/naive_fd_son.py NaiveFDSON, sketch fd-epoch, m = 10, logistic) on the "
          f"files of the missed targets, seeds {list(seeds)}: the sparse learner's best setting"
          + (", and alpha x4, /4" if DENSE_GRID else ""))
    rows = []
    for k in kappas:
        pt = res[("FD-SON m=10", k)]["point"]
        a, c = pt["--alpha"], pt["--sigma_eta"]
        for s in seeds:
            f = files[(k, s)]
            row = {"kappa": k, "seed": s, "alpha": _num(a), "sigma_eta": _num(c)}
            row["sparse err %"] = pct(err_of(sl(f, "--algo", "fd-son", "--sketch_size", 10, "--alpha", a,
                                                "--sigma_eta", c, *SYN_BASE)))
            for lab, aa in (("dense err %", a), ("dense alpha x4", 4 * a), ("dense alpha /4", a / 4)):
                if lab == "dense err %" or DENSE_GRID:
                    row[lab] = pct(dense_fdson(f, 10, aa, c))
            rows.append(row)
            print(f"  dense kappa {k} seed {s} done", flush=True)
    print(table(rows, ["kappa", "seed", "alpha", "sigma_eta", "sparse err %", "dense err %", "dense alpha x4",
                       "dense alpha /4"]))
    print("(sparse = dense: the implementation is the algorithm; a MISS is then the algorithm's / the design's)")


# -- section 2: alpha0 sensitivity -----------------------------------------------------------------
ALPHA0S = [1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0]


#: --alpha0-opts: options added to every run of the alpha0 section (e.g. "--no_invariant --no_clip": the paper's step)
ALPHA0_OPTS: list = []


def alpha0(seeds, kappas, losses):
    t0 = time.perf_counter()
    files = [(k, s, synthetic_file(k, s)) for k in kappas for s in seeds]
    for loss in losses:
        print(f"\n== alpha0: max/min progressive error over alpha0 (FD-SON: --alpha) in "
              f"{{{', '.join(f'{a:g}' for a in ALPHA0S)}}}, --sigma_eta 1, m = 10, --no_diag, {loss} loss, synthetic files"
              + (" (RFD-SON also at alpha0 = 0)" if loss == "squared" else "")
              + (f"; with {' '.join(ALPHA0_OPTS)}" if ALPHA0_OPTS else "; defaults otherwise (the invariant step, the clip)"),
              flush=True)
        rows, n_rfd, n_fd, n_both = [], 0, 0, 0
        for k, s, f in files:
            base = ["--sketch_size", 10, "--sigma_eta", 1, "--loss_function", loss, "--noconstant", "--no_diag",
                    *ALPHA0_OPTS]
            rfd = {a: err_of(sl(f, "--algo", "rfd-son", "--alpha0", a, *base)) for a in ALPHA0S}
            fd = {a: err_of(sl(f, "--algo", "fd-son", "--alpha", a, *base)) for a in ALPHA0S}
            rfd_vals = list(rfd.values())
            if loss == "squared":
                r0 = err_of(sl(f, "--algo", "rfd-son", "--alpha0", 0, *base))
                rfd_vals.append(r0)
            rr, rdiv = _ratio(rfd_vals)
            fr, fdiv = _ratio(list(fd.values()))
            n_rfd += rr <= 1.5
            n_fd += fr >= 5
            n_both += rr <= 1.5 and fr >= 5
            fin = [a for a in ALPHA0S if math.isfinite(fd[a])]
            row = {"kappa": k, "seed": s, "RFD max/min": _ratio_text(rr, rdiv),
                   "RFD err % min..max": _range(rfd_vals),
                   "FD max/min": _ratio_text(fr, fdiv), "FD err % min..max": _range(list(fd.values())),
                   "FD best alpha": f"{min(fin, key=fd.get):g}" if fin else "-",
                   "RFD err % by alpha0": " ".join(pct(rfd[a]) for a in ALPHA0S)
                   + (f" | 0: {pct(r0)}" if loss == "squared" else ""),
                   "FD err % by alpha": " ".join(pct(fd[a]) if math.isfinite(fd[a]) else "div" for a in ALPHA0S)}
            rows.append(row)
        print(table(rows, ["kappa", "seed", "RFD max/min", "RFD err % min..max", "FD max/min", "FD err % min..max",
                           "FD best alpha", "RFD err % by alpha0", "FD err % by alpha"]))
        n = len(files)
        _check(n_rfd >= 0.75 * n, f"{loss}: RFD-SON max/min <= 1.5 on {n_rfd} of {n} files (target >= 3 of 4)")
        _check(n_fd >= 0.75 * n, f"{loss}: FD-SON max/min >= 5 on {n_fd} of {n} files (target: >= 5, "
               "read on >= 3 of 4 files as RFD's)")
        print(f"({loss}: both on {n_both} of {n} files; 'div' / 'inf (k diverged)': runs stopped on NaN/inf state, "
              "counted as an infinite ratio; a flat row near 50% error is chance, not robustness)")
    print(f"(alpha0 section: {time.perf_counter() - t0:.0f} s)")


def _ratio(errs):
    """max/min error over the settings; a diverged run makes the ratio infinite."""
    fin = [e for e in errs if math.isfinite(e)]
    div = len(errs) - len(fin)
    if not fin:
        return math.nan, div
    if div:
        return math.inf, div
    return (max(fin) / min(fin) if min(fin) > 0 else math.inf), 0


def _ratio_text(r, div):
    if div:
        return f"inf ({div} diverged)" if math.isfinite(r) or r == math.inf else f"- (all {div} diverged)"
    return f"{r:.2f}"


def _range(errs):
    fin = [e for e in errs if math.isfinite(e)]
    return f"{pct(min(fin))}..{pct(max(fin))}" if fin else "-"


# -- section 3: real data --------------------------------------------------------------------------
REAL = [  # name, file; SON Table 2 (FD-SON, Oja-SON, %), Table 3 (Oja-SON m=10 with diagonal, AdaGrad)
    ("a9a", "a9a/a9a_train.libsvm.gz", None, None, 0.155953, 0.156414),
    ("ijcnn1", "ijcnn1/ijcnn1_train.libsvm.gz", None, None, 0.034645, 0.036913),
    ("splice", "splice/splice.libsvm.gz", 22.6, 22.9, 0.229, 0.301),
    ("australian", "australian/australian.libsvm.gz", 16.0, 15.8, 0.157971, 0.289855),
    ("breast-cancer", "breast-cancer_scale/breast-cancer_scale.libsvm.gz", 5.3, 3.7, 0.036603, 0.358712),
    ("diabetes", "diabetes_scale/diabetes_scale.libsvm.gz", 35.4, 32.8, 0.328125, 0.391927),
]


def real_learners():
    return [
        ("FD-SON m=10", ["--algo", "fd-son", "--sketch_size", "10"],
         lambda: [Axis("--alpha", -2, 10), Axis("--sigma_eta", -6, 2)]),
        ("RFD-SON m=10", ["--algo", "rfd-son", "--sketch_size", "10"], lambda: [Axis("--sigma_eta", -12, 4)]),
        ("Oja-SON m=10", ["--algo", "oja-son", "--sketch_size", "10"], lambda: [Axis("--alpha", -8, 6)]),
        ("AdaGrad", ["--algo", "adagrad"], lambda: [Axis("-l", -6, 6)]),
    ]


def real(only, losses):
    from vs_vw import _err, _vw_text, source

    t0 = time.perf_counter()
    print("\n== real data: one pass, progressive error (%), constant feature on (both tools' default); "
          "'default' = no option but --algo and the loss, 'tuned' = best of the widening grid (SON's protocol: "
          "best progressive error of the one pass); VW = vw_run with the loss only", flush=True)
    rows, gridrows, notes = [], [], []
    splice = {}
    for name, rel, t2fd, t2oja, t3oja, t3ada in REAL:
        if only and name not in only:
            continue
        src, note = source(name, rel)
        if note:
            notes.append(f"{name}: labels sorted in {rel}; used {note}")
        vwfile = _vw_text(name, src)
        y = labels_of(vwfile)
        for loss in losses:
            lf = ["--loss_function", loss]
            row = {"dataset": name, "n": len(y), "loss": loss}
            for lab, fixed, axes_f in real_learners():
                d = sl(src, *fixed, *lf)
                row[f"{lab} default"] = pct(err_of(d)) if isinstance(d, dict) else d.split(":")[0]
                r = tune([src], fixed + lf, axes_f())
                row[f"{lab} tuned"] = pct(r["mean"]) if r["point"] else SKIP
                gridrows.append({"dataset": name, "loss": loss, "learner": lab, "best setting": fmt_point(r["point"]),
                                 "grid (after widening)": r["grid"] + (f"; AT EDGE: {r['edge']}" if r["edge"] else "")})
                if lab == "FD-SON m=10" and name == "splice":
                    splice[loss] = r["mean"]
            vp = OUT / f"real_{name}_{loss}.vw.pred"
            try:
                run_rss(vw_cmd(vwfile, *lf, "-p", vp, "--quiet"))
                row["VW default"] = pct(_err(read_preds(vp), y, False))
            except RuntimeError as e:
                row["VW default"] = FAIL
                notes.append(f"vw on {name}: {str(e)[-200:]}")
            row["SON T2 FD-SON"] = "-" if t2fd is None else f"{t2fd:.1f}"
            row["SON T2 Oja-SON"] = "-" if t2oja is None else f"{t2oja:.1f}"
            row["SON T3 Oja-SON m=10"] = f"{100 * t3oja:.2f}"
            row["SON T3 AdaGrad"] = f"{100 * t3ada:.2f}"
            rows.append(row)
        print(f"  done {name} ({time.perf_counter() - t0:.0f} s)", flush=True)
    cols = ["dataset", "n", "loss"]
    for lab, _, _ in real_learners():
        cols += [f"{lab} tuned", f"{lab} default"]
    cols += ["VW default", "SON T2 FD-SON", "SON T2 Oja-SON", "SON T3 Oja-SON m=10", "SON T3 AdaGrad"]
    print(table(rows, cols))
    print("(SON's Tables 2 and 3: squared loss, best of 1/alpha or AdaGrad's scale in 2^-3..2^6; Table 3's "
          "Oja-SON is VW's, with the diagonal adaptation; 'failed' = the run stopped on NaN/inf state)")
    print("\nTuned settings and grids")
    print(table(gridrows, ["dataset", "loss", "learner", "best setting", "grid (after widening)"]))
    for n in notes:
        print("note:", n)
    for loss, e in splice.items():
        _check(e <= 0.235, f"splice, {loss} loss: FD-SON m=10 tuned {pct(e)}% <= 23.5% (SON Table 2: 22.6%, squared)")
    print(f"(real section: {time.perf_counter() - t0:.0f} s)")


# -- section 5: untuned defaults ---------------------------------------------------------------------
#: the learners of the defaults section: label, options (per loss: a dict, or one list for both)

def default_learners(extra):
    cols = [("AdaGrad", ["--algo", "adagrad"]),
            ("Oja-SON", ["--algo", "oja-son"]),
            ("FD-SON", ["--algo", "fd-son"]),
            ("RFD-SON", ["--algo", "rfd-son"]),
            ("FD-SON --no_diag", ["--algo", "fd-son", "--no_diag"]),
            ("RFD-SON --no_diag", ["--algo", "rfd-son", "--no_diag"])]
    for v in extra:
        cols.append((v, v.split()))
    return cols


def defaults(only, losses, extra):
    """Every binary set of ../shared/datasets (``vs_vw.BINARY``; shuffled copies of label-sorted ones, the
    constant feature as VW adds it), one pass, progressive error (%) from the predictions, no option but
    the loss: VW's default (vw_run), AdaGrad (streamlearn's default: VW's rule), Oja-SON, FD-SON and
    RFD-SON at their defaults (with the diagonal pre-scaling), and FD-SON / RFD-SON with ``--no_diag`` (their
    defaults before the pre-scaling)."""
    from vs_vw import BINARY, _err, _vw_text, source

    t0 = time.perf_counter()
    cols = default_learners(extra)
    print(f"\n== defaults: every binary set, one pass, progressive error (%), no option but the loss; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    rows, gaps, fails = [], {}, {}
    for name, rel in BINARY:
        if only and name not in only:
            continue
        src, _ = source(name, rel)
        vwfile = _vw_text(name, src)
        y = labels_of(vwfile)
        for loss in losses:
            lf = ["--loss_function", loss]
            row = {"dataset": name, "n": len(y), "loss": loss}
            vp = OUT / f"def.{name}.{loss}.vw.pred"
            try:
                run_rss(vw_cmd(vwfile, *lf, "-p", vp))
                ev = _err(read_preds(vp), y, loss == "squared")
                row["VW"] = pct(ev)
            except RuntimeError:
                ev, row["VW"] = math.nan, FAIL
            ada = None
            for lab, opts in cols:
                o = opts[loss] if isinstance(opts, dict) else opts
                sp = OUT / f"def.{name}.{loss}.{os.getpid()}.pred"
                r = sl(src, *o, *lf, preds=sp)
                if isinstance(r, str):
                    row[lab] = "div" if "NaN" in r or "nan" in r or "inf" in r else FAIL
                    fails[lab] = fails.get(lab, 0) + 1
                    continue
                e = _err(read_preds(sp), y, loss == "squared")
                row[lab] = pct(e)
                if lab == "AdaGrad":
                    ada = e
                g = gaps.setdefault(lab, [])
                g.append((100 * (e - ev), 100 * (e - ada) if ada is not None else math.nan, name, loss))
            rows.append(row)
        print(f"  done {name} ({time.perf_counter() - t0:.0f} s)", flush=True)
    labs = [lab for lab, _ in cols]
    print(table(rows, ["dataset", "n", "loss", "VW"] + labs))
    print("('div': the run stopped on NaN/inf state; 'failed': another error)")
    srows = []
    for lab in labs:
        g = gaps.get(lab, [])
        gv = [x[0] for x in g if math.isfinite(x[0])]
        ga = [x[1] for x in g if math.isfinite(x[1])]
        worst = max(g, key=lambda x: x[0]) if g else None
        srows.append({"learner": lab, "runs": len(g) + fails.get(lab, 0), "diverged/failed": fails.get(lab, 0),
                      "mean vs VW (pts)": f"{np.mean(gv):+.2f}" if gv else "-",
                      "median vs VW": f"{np.median(gv):+.2f}" if gv else "-",
                      "mean vs AdaGrad": f"{np.mean(ga):+.2f}" if ga else "-",
                      "worst vs VW": f"{worst[0]:+.2f} ({worst[2]}, {worst[3]})" if worst else "-",
                      "within 1 pt of VW": f"{sum(x <= 1.0 for x in gv)}/{len(g) + fails.get(lab, 0)}"})
    print("\nSummary over the runs that finished (error minus VW's / AdaGrad's, percentage points; + = worse)")
    print(table(srows, ["learner", "runs", "diverged/failed", "mean vs VW (pts)", "median vs VW", "mean vs AdaGrad",
                        "worst vs VW", "within 1 pt of VW"]))
    print(f"(defaults section: {time.perf_counter() - t0:.0f} s)")


# -- section 4: cost ---------------------------------------------------------------------------------
def gen(n, d, seed=17):
    prefix = OUT / f"gs_n{n}_d{d}_s{seed}"
    vw = Path(str(prefix) + ".vw")
    if not vw.exists():
        subprocess.run([sys.executable, str(GEN_SPARSE), "--n", str(n), "--d", str(d), "--seed", str(seed),
                        "--out", str(prefix)], check=True, capture_output=True)
    return vw


#: a whole-process run longer than this (seconds) is not repeated
SLOW_RUN = 60.0


_WARM = set()


def timed(cmd_args, repeat):
    """Best of ``repeat`` whole-process streamlearn runs: (wall s, RSS MB, metrics) or a str. The
    first run of each option set is preceded by an untimed one on a small file (numba's cache:
    a tree's first run compiles its kernels)."""
    best = None
    mj = OUT / "cost_metrics.json"
    key = tuple(map(str, cmd_args[1:]))
    if key not in _WARM:
        _WARM.add(key)
        try:
            run_rss(sl_cmd("train", gen(2000, 1000), *cmd_args[1:], "--quiet"))
        except RuntimeError:
            pass
    for _ in range(repeat):
        try:
            wall, rss, _, _ = run_rss(sl_cmd("train", *cmd_args, "--quiet", "--metrics", mj))
        except RuntimeError as e:
            return f"{FAIL}: {str(e).splitlines()[-1][:200]}"
        met = json.loads(mj.read_text())
        if best is None or wall < best[0]:
            best = (wall, rss, met)
        if wall > SLOW_RUN:  # a slow run is long enough to time once (keeps the section rerunnable)
            break
    return best


def vw_timed(data, args, repeat):
    best = None
    for _ in range(repeat):
        wall, rss, _, err = run_rss(vw_cmd(data, *args))
        s = vw_summary(err)
        w = s.get("wall", wall)
        if best is None or w < best[0]:
            best = (w, rss, s)
    return best


def eigen_share(data, m=10, n_max=50_000, extra=None):
    """Share of FD-SON's learning time spent in the eigen steps (and in the re-bases they make).

    The learner reports counts, not times, so: learn the examples one call each (Python API,
    ``learn_batch`` on a one-example batch) and time every call in thread CPU time (wall time
    charges a call for the time other processes held the core, which on a loaded machine
    inflates the long calls most). A call whose example completes
    the buffer runs that epoch's eigen step (the learner's eigen-step counter moves). Each call
    also pays the same fixed Python overhead and one example's work, estimated by the median
    of the calls without an eigen step; the eigen steps' cost is the calls' time above that
    median, summed. The share is that cost over the learning time of the same pass made by a
    fresh learner in one ``learn_batch`` call (no per-call overhead). An eigen step run between
    Python calls finds colder caches than inside one pass, so this is an upper estimate."""
    from streamlearn import api
    from streamlearn.algos import make_learner
    from streamlearn.batch import concat_batches
    from streamlearn.io import read_batches

    cfg = api.RunConfig(data=[str(data)])
    B = concat_batches(list(read_batches([str(data)], api._reader_config(cfg, api._reader_settings(cfg), False))))
    n = min(B.n, n_max)
    B = B.take(np.arange(n))
    hyper = {"sketch_size": m, "loss_function": "logistic", **(extra or {})}
    make_learner("fd-son", dict(hyper)).learn_batch(B.take(np.arange(50)))  # compile / cache load
    t_pass = math.inf
    clock = time.thread_time  # CPU time of this thread: a call descheduled by other processes is not charged
    for _ in range(2):  # best of two one-call passes
        L = make_learner("fd-son", dict(hyper))
        t = clock()
        L.learn_batch(B)
        t_pass = min(t_pass, clock() - t)
    ones = [B.take(np.array([i])) for i in range(n)]
    L = make_learner("fd-son", dict(hyper))
    times = np.empty(n)
    eig = np.zeros(n, bool)
    reb = np.zeros(n, bool)
    for i, b in enumerate(ones):
        e0, r0 = L.n_eigen, L.n_rebase
        t = clock()
        L.learn_batch(b)
        times[i] = clock() - t
        eig[i], reb[i] = L.n_eigen > e0, L.n_rebase > r0
    base = float(np.median(times[~eig]))
    excess = times[eig] - base
    out = {"n": n, "pass_s": t_pass, "eigen_steps": int(eig.sum()), "rebases": int(reb.sum()),
           "eigen_s": float(excess.sum()), "rebase_s": float((times[reb] - base).sum()),
           "call_median_us": 1e6 * base, "eigen_us": 1e6 * float(np.mean(excess)) if eig.any() else math.nan}
    out["share"] = out["eigen_s"] / t_pass
    out["rebase_share"] = out["rebase_s"] / t_pass
    return out


def cost(repeat, quick):
    t0 = time.perf_counter()
    n_d = 20_000 if quick else 50_000
    n_b = 50_000 if quick else 200_000
    print(f"\n== cost: whole processes, best of {repeat} (a run over {SLOW_RUN:.0f} s: once); 'learn s' = the run's own "
          f"timer (reading + learning, no start-up); logistic loss everywhere; load average at start "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores", flush=True)
    # d = 10^3 vs 10^5 at fixed non-zeros
    rows, per = [], {}
    for d in (1000, 100_000):
        f = gen(n_d, d)
        for lab, algo in (("FD-SON m=10", ["--algo", "fd-son"]), ("FD-SON m=10 --no_diag", ["--algo", "fd-son", "--no_diag"]),
                          ("AdaGrad", ["--algo", "adagrad"])):
            r = timed([f, *algo, "-b", 18, "--loss_function", "logistic"], repeat)
            if isinstance(r, str):
                rows.append({"d": d, "learner": lab, "wall s": r})
                continue
            wall, rss, met = r
            us = 1e6 * met["seconds"] / met["examples"]
            per[(lab, d)] = us
            rows.append({"d": d, "learner": lab, "n": met["examples"], "nnz/ex": f"{met['total_features'] / met['examples']:.1f}",
                         "wall s": f"{wall:.2f}", "learn s": f"{met['seconds']:.2f}", "us/example": f"{us:.1f}",
                         "eigen steps": met.get("learner", {}).get("eigen_steps", ""),
                         "rebases": met.get("learner", {}).get("rebases", ""), "RSS MB": f"{rss:.0f}"})
    print(f"\nTime per example vs d at fixed non-zeros: gen_sparse.py --n {n_d:,} --seed 17, --d 1000 vs 100000, -b 18")
    print(table(rows, ["d", "learner", "n", "nnz/ex", "wall s", "learn s", "us/example", "eigen steps", "rebases", "RSS MB"]))
    if ("FD-SON m=10", 1000) in per and ("FD-SON m=10", 100_000) in per:
        r = per[("FD-SON m=10", 100_000)] / per[("FD-SON m=10", 1000)]
        _check(r <= 1.5, f"FD-SON m=10 time per example d = 10^5 / d = 10^3 = {r:.2f} (target <= 1.5)")
    if ("FD-SON m=10 --no_diag", 1000) in per and ("FD-SON m=10 --no_diag", 100_000) in per:
        r = per[("FD-SON m=10 --no_diag", 100_000)] / per[("FD-SON m=10 --no_diag", 1000)]
        _check(r <= 1.5, f"FD-SON m=10 --no_diag time per example d = 10^5 / d = 10^3 = {r:.2f} (target <= 1.5)")
    # -b 18 vs -b 26, vs AdaGrad, vs VW OjaNewton
    f = gen(n_b, 100_000, seed=0) if quick else _gen_default()
    rows, res = [], {}
    for lab, args in (("FD-SON m=10 -b 18", ["--algo", "fd-son", "-b", 18]),
                      ("FD-SON m=10 -b 26", ["--algo", "fd-son", "-b", 26]),
                      ("FD-SON m=10 --no_diag -b 18", ["--algo", "fd-son", "--no_diag", "-b", 18]),
                      ("AdaGrad -b 18", ["--algo", "adagrad", "-b", 18]),
                      ("Oja-SON m=10 -b 18", ["--algo", "oja-son", "-b", 18])):
        r = timed([f, *args, "--loss_function", "logistic"], repeat)
        if isinstance(r, str):
            rows.append({"run": lab, "wall s": r})
            continue
        wall, rss, met = r
        res[lab] = (wall, met["seconds"])
        rows.append({"run": lab, "wall s": f"{wall:.2f}", "ex/s": f"{met['examples'] / wall:,.0f}",
                     "learn s": f"{met['seconds']:.2f}", "RSS MB": f"{rss:.0f}", "err %": pct(met["error_rate"]),
                     "eigen steps": met.get("learner", {}).get("eigen_steps", ""),
                     "rebases": met.get("learner", {}).get("rebases", "")})
    n = met["examples"] if isinstance(r, tuple) else n_b
    try:
        w, rss, s = vw_timed(f, ["--OjaNewton", "--sketch_size", "10", "-b", "18", "--loss_function", "logistic"],
                             repeat)
        res["VW"] = (w, w)
        rows.append({"run": "VW --OjaNewton --sketch_size 10 -b 18", "wall s": f"{w:.2f}", "ex/s": f"{n / w:,.0f}",
                     "RSS MB": f"{rss:.0f}", "err %": "", "learn s": "(vw_run's timer)"})
    except RuntimeError as e:
        rows.append({"run": "VW --OjaNewton", "wall s": f"{FAIL}: {str(e)[-120:]}"})
    print(f"\n{f.name} ({n:,} examples, gen_sparse.py)")
    print(table(rows, ["run", "wall s", "ex/s", "learn s", "RSS MB", "err %", "eigen steps", "rebases"]))
    a, b = res.get("FD-SON m=10 -b 18"), res.get("FD-SON m=10 -b 26")
    if a and b:
        _check(b[0] / a[0] <= 1.3, f"FD-SON wall -b 26 / -b 18 = {b[0] / a[0]:.2f} (learn s: {b[1] / a[1]:.2f}; "
               "target <= 1.3)")
    g = res.get("AdaGrad -b 18")
    if a and g:
        _check(a[1] / g[1] <= 15, f"FD-SON m=10 / AdaGrad time per example = {a[1] / g[1]:.2f} (learn s; whole "
               f"processes: {a[0] / g[0]:.2f}; target <= 15)")
    v = res.get("VW")
    if a and v:
        _check(v[0] / a[0] >= 1.0, f"FD-SON m=10 examples/s / VW --OjaNewton --sketch_size 10 = {v[0] / a[0]:.2f}x "
               "(whole processes, -b 18; target >= 1.0)")
    nd, oj = res.get("FD-SON m=10 --no_diag -b 18"), res.get("Oja-SON m=10 -b 18")
    if nd and v:
        print(f"FD-SON m=10 --no_diag examples/s / VW --OjaNewton --sketch_size 10 = {v[0] / nd[0]:.2f}x (whole "
              "processes, -b 18)")
    if a and oj:
        print(f"FD-SON m=10 examples/s / Oja-SON m=10 = {oj[0] / a[0]:.2f}x (whole processes; learn s: "
              f"{oj[1] / a[1]:.2f}x)" + (f"; --no_diag: {oj[0] / nd[0]:.2f}x" if nd else ""))
    # eigen steps' share
    rows = []
    for (lab, data), (opt, extra) in itertools.product((("a9a", _a9a_vw()), (f.name, f)),
                                                       (("", None), ("--no_diag", {"no_diag": True}))):
        s = eigen_share(data, n_max=10_000 if quick else 20_000, extra=extra)
        rows.append({"data": lab, "options": opt, "n": s["n"], "pass learn s": f"{s['pass_s']:.3f}", "eigen steps": s["eigen_steps"],
                     "rebases": s["rebases"], "us / eigen step": f"{s['eigen_us']:.1f}",
                     "eigen share": f"{100 * s['share']:.1f}%", "of which re-bases": f"{100 * s['rebase_share']:.1f}%",
                     "median call us": f"{s['call_median_us']:.1f}"})
    print("\nEigen steps' share of an FD-SON m=10 pass (logistic, -b 18, first n examples), derived from per-call "
          "thread CPU time (eigen_share(): the eigen-step calls' time above the median call, over a one-call pass's "
          "time; the two come from different passes, and an eigen step run between Python calls finds colder caches "
          "than inside one pass, so the share is an upper estimate and can read above 100%)")
    print(table(rows, ["data", "options", "n", "pass learn s", "eigen steps", "rebases", "us / eigen step", "eigen share",
                       "of which re-bases", "median call us"]))
    print(f"(cost section: {time.perf_counter() - t0:.0f} s)")


def _gen_default():
    from _common import gen_sparse
    return gen_sparse()[0]


def _a9a_vw():
    from vs_vw import _vw_text, source
    src, _ = source("a9a", "a9a/a9a_train.libsvm.gz")
    return _vw_text("a9a", src)


def main():
    global SUBPROCESS, DENSE_GRID, ALPHA0_OPTS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--section", default="synthetic,alpha0,real,cost",
                    help="comma-separated: synthetic, alpha0, real, cost, defaults (not run unless named)")
    ap.add_argument("--variants", nargs="*", default=[],
                    help="defaults section: extra option strings to run as columns (e.g. \"--algo fd-son --alpha 8\")")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default 0-4; --quick 0,1)")
    ap.add_argument("--kappas", default=",".join(map(str, KAPPAS)))
    ap.add_argument("--losses", default=None, help="real section's losses (default squared,logistic; --quick squared)")
    ap.add_argument("--alpha0-losses", default="logistic,squared")
    ap.add_argument("--alpha0-opts", default="", help="alpha0 section: options added to every run "
                    "(\"--no_invariant --no_clip\": the paper's step, as before the defaults changed)")
    ap.add_argument("--only", default=None, help="real section: comma-separated data set names")
    ap.add_argument("--dense-seeds", type=int, default=None,
                    help="seeds the dense reference runs on a MISS (default 1; --quick 0 = none)")
    ap.add_argument("--dense-grid", action="store_true", help="the dense reference also at alpha x4, /4")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--subprocess", action="store_true", help="one process per streamlearn run")
    ap.add_argument("--rev", default=None, help="run revision REV of this repository (git archive into the cache: "
                    "e.g. another helper's branch) instead of this tree")
    a = ap.parse_args()
    need_shared()
    if a.rev:
        from _baseline import baseline_tree
        use_tree(baseline_tree(a.rev))
    else:
        use_tree(ROOT)
    OUT.mkdir(parents=True, exist_ok=True)
    SUBPROCESS = a.subprocess
    DENSE_GRID = a.dense_grid
    ALPHA0_OPTS = a.alpha0_opts.split()
    seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else ([0, 1] if a.quick else [0, 1, 2, 3, 4])
    kappas = [int(k) for k in a.kappas.split(",")]
    losses = a.losses.split(",") if a.losses else (["squared"] if a.quick else ["squared", "logistic"])
    only = set(a.only.split(",")) if a.only else ({"splice", "australian", "breast-cancer", "diabetes"} if a.quick
                                                  else None)
    dense_seeds = a.dense_seeds if a.dense_seeds is not None else (0 if a.quick else 1)
    rev = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", a.rev or "HEAD"],
                         capture_output=True, text=True)
    br = a.rev or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True,
                                 text=True).stdout.strip()
    print(f"benchmarks/fd_son.py running {br} @ {rev.stdout.strip()[:90]} ({TREE}); "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {'quick' if a.quick else 'full'}", flush=True)
    t0 = time.perf_counter()
    sections = a.section.split(",")
    for s in sections:
        if s not in ("synthetic", "alpha0", "real", "cost", "defaults"):
            sys.exit(f"unknown section {s!r}")
    if "synthetic" in sections:
        synthetic(seeds, kappas, dense_seeds)
    if "alpha0" in sections:
        alpha0(seeds, kappas, a.alpha0_losses.split(","))
    if "real" in sections:
        real(only, losses)
    if "cost" in sections:
        cost(a.repeat, a.quick)
    if "defaults" in sections:
        defaults(set(a.only.split(",")) if a.only else None, a.losses.split(",") if a.losses else
                 ["squared", "logistic"], a.variants)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
