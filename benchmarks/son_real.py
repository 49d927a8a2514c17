"""SON paper Sec. 5.2 / App. H Table 3 on the real datasets we have: progressive error rate of
one pass with squared loss, each method at the best step of a grid, next to the paper's numbers.

Methods: Oja-SON m = 0 and m = 10 with the defaults (diagonal pre-scaling as a preconditioner,
``--diag_frame precond``, diag_power 0.25, VW order, avg to-sketch scale, sigma_eta 1/2,
importance-invariant step; m = 0 is AdaGrad on max-normalised features), m = 10 with the defaults
at alpha = 1 (untuned), m = 10 in the paper's data frame (``--diag_frame data``, D^-1/2) and m = 10
exactly as the paper (``--diag_frame data --diag_power 0.5 --sketch_scale paper --diag_order paper
--no_invariant``),
AdaGrad (ours), VW's default learner (no tuning:
``vw --binary``, and tuned over -l 2^j), VW ``--OjaNewton --sketch_size 10`` (tuned over
--alpha). Grids: Oja-SON alpha = 2^j, j = -16..6 (the paper's -3..6 extended down: with the
pre-scaling alpha acts as a ridge proportional to diag(sum g g^T), and with the avg to-sketch
scale the best m = 10 alpha can be 2^-12 or less);
AdaGrad eta = 2^j, j = -10..3; VW -l and --alpha 2^j, j = -3..6. All learners see VW's
constant feature. Error = fraction of examples whose sign(prediction) differs from the label.

Datasets (``../shared/datasets``, see its MANIFEST): the paper's counts are given; differences
are noted in the output (cod-rna: training part only; covtype: 20k subset; a9a and mushrooms:
train followed by test, as the paper's counts are train+test). For w8a, cod-rna and magic the
published (label-sorted) order and the ``_shuffled`` copies are both run.

Run: python benchmarks/son_real.py [--jobs 2] [--only a9a,w8a] [--no-vw]

What these runs showed (the reasons for Oja-SON's defaults; formerly in oja_son.py)
-----------------------------------------------------------------------------------
* avg to-sketch scale: on cod-rna, m = 10 with the paper's scale stayed at the base rate for every
  alpha. The pre-scaled features D_t^{-1/2} x shrink like t^{-1/2}, so with the paper's scale
  ||g^||^2 ~ 1/t, Oja's steps Gamma_t ||g^||^2 ~ 1/t^2 are summable and V freezes at what the first
  examples said. With g^ = sqrt(sigma_eta t) g Oja's input has a stationary size and A_t in
  original coordinates is about alpha diag(sum g g^T) + sigma_eta sum g g^T. One pass, best alpha:
  cod-rna shuffled m = 10 0.333 -> 0.091 (m = 0: 0.159).
* --diag_frame precond (the default since 2026-11-22): with the importance-invariant step and the
  label-range clip it passes the 0.5-point target on all 16 rows of this benchmark (best alpha of
  the grid) and is stable at the default alpha = 1 on raw heavy-tailed sparse streams. Before
  those two it diverged there (gen_sparse: average squared loss 4e5; a9a at alpha 1: error 0.76).
  The paper's data frame (weights in pre-scaled coordinates, shrinking when D grows) cannot track
  drifting or label-sorted streams (ijcnn1, w8a), and on dense stationary ones (covtype) its full
  dense version loses to plain RLS (0.298 vs 0.251). With r = 1/4 the precond off-sketch step is
  AdaGrad's, and A_t is about alpha sqrt(diag G) + sigma_eta t^-1/2 sum g g^T with the second term
  sketched; sigma_eta = 1/2 (its default in this mode) was measured here.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from streamlearn.algos.adagrad import AdaGrad  # noqa: E402
from streamlearn.algos.oja_son import OjaSON  # noqa: E402
from streamlearn.batch import concat_batches  # noqa: E402
from streamlearn.io import ReaderConfig, read_batches  # noqa: E402

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("STREAMLEARN_SHARED", HERE.parent.parent / "shared"))
DS = SHARED / "datasets"
VW_RUN = SHARED / "tools" / "vw_run"
CACHE = Path(os.environ.get("STREAMLEARN_BENCH_DIR", "/tmp/streamlearn_bench"))

SON_GRID = [2.0 ** j for j in range(-16, 7)]
ADA_GRID = [2.0 ** j for j in range(-10, 4)]
VW_GRID = [2.0 ** j for j in range(-3, 7)]

# name: (files, paper Table 3 row: m=0 nodiag, m=10 nodiag, m=0 diag, m=10 diag, AdaGrad; note)
SETS = {
    "a9a": (["a9a/a9a_train.libsvm.gz", "a9a/a9a_test.libsvm.gz"], (0.204447, 0.195203, 0.155953, 0.155953, 0.156414), "train+test"),
    "australian": (["australian/australian.libsvm.gz"], (0.366667, 0.366667, 0.162319, 0.157971, 0.289855), ""),
    "breast-cancer": (["breast-cancer_scale/breast-cancer_scale.libsvm.gz"], (0.374817, 0.374817, 0.036603, 0.036603, 0.358712), "scaled"),
    "cod-rna": (["cod-rna/cod-rna.libsvm.gz"], (0.175107, 0.175107, 0.049710, 0.049643, 0.081066), "59,535 of 271,617"),
    "cod-rna_shuf": (["cod-rna/cod-rna_shuffled.libsvm.gz"], (0.175107, 0.175107, 0.049710, 0.049643, 0.081066), "shuffled"),
    "covtype": (["covtype_subset20k/covtype_subset20k.libsvm.gz"], (0.042304, 0.042312, 0.050827, 0.050818, 0.045507), "20k subset"),
    "diabetes": (["diabetes_scale/diabetes_scale.libsvm.gz"], (0.433594, 0.433594, 0.329427, 0.328125, 0.391927), "scaled"),
    "heart": (["heart_scale/heart_scale.libsvm.gz"], (0.477778, 0.388889, 0.244444, 0.244444, 0.362963), "scaled"),
    "ijcnn1": (["ijcnn1/ijcnn1_test.libsvm.gz"], (0.046826, 0.046826, 0.034536, 0.034645, 0.036913), "91,701 file"),
    "ionosphere": (["pmlb_ionosphere/ionosphere.libsvm.gz"], (0.188034, 0.148148, 0.182336, 0.182336, 0.190883), "pmlb"),
    "magic04": (["pmlb_magic/magic.libsvm.gz"], (0.000263, 0.000263, 0.000158, 0.000158, 0.000210), "pmlb order"),
    "magic04_shuf": (["pmlb_magic/magic_shuffled.libsvm.gz"], (0.000263, 0.000263, 0.000158, 0.000158, 0.000210), "shuffled"),
    "mushrooms": (["agaricus/agaricus_train.libsvm.gz", "agaricus/agaricus_test.libsvm.gz"], (0.003323, 0.002339, 0.002462, 0.002462, 0.001969), "agaricus"),
    "splice": (["splice/splice.libsvm.gz"], (0.343000, 0.343000, 0.294000, 0.229000, 0.301000), ""),
    "w8a": (["w8a/w8a.libsvm.gz"], (0.000101, 0.000101, 0.000422, 0.000422, 0.000221), "published order"),
    "w8a_shuf": (["w8a/w8a_shuffled.libsvm.gz"], (0.000101, 0.000101, 0.000422, 0.000422, 0.000221), "shuffled"),
}


def load(files):
    bs = list(read_batches([str(DS / f) for f in files], ReaderConfig(fmt="libsvm")))
    return concat_batches(bs)


def err(p, y):
    return float(np.mean(np.where(p > 0, 1.0, -1.0) != np.where(y > 0, 1.0, -1.0)))


def best(make, grid, b):
    es = []
    for a in grid:
        p, _ = make(a).learn_batch(b)
        es.append(err(p, b.labels) if np.all(np.isfinite(p)) else 1.0)
    i = int(np.argmin(es))
    return es[i], grid[i]


SON_KW = json.loads(os.environ.get("SON_REAL_KW", "{}"))  # extra options of the default-mode runs (experiments)


def ours(name):
    b = load(SETS[name][0])
    r = {"n": b.n}
    r["son0"] = best(lambda a: OjaSON(sketch_size=0, alpha=a, **SON_KW), SON_GRID, b)
    r["son10"] = best(lambda a: OjaSON(sketch_size=10, alpha=a, **SON_KW), SON_GRID, b)  # the defaults
    r["son10at1"] = (err(OjaSON(sketch_size=10, **SON_KW).learn_batch(b)[0], b.labels), None)  # untuned
    r["son10data"] = best(lambda a: OjaSON(sketch_size=10, alpha=a, diag_frame="data"), SON_GRID, b)
    r["son10paper"] = best(lambda a: OjaSON(sketch_size=10, alpha=a, diag_frame="data", diag_power=0.5,
                                            sketch_scale="paper", diag_order="paper", no_invariant=True),
                           SON_GRID, b)
    r["ada"] = best(lambda a: AdaGrad(learning_rate=a), ADA_GRID, b)
    return name, r


def vw_file(name):
    CACHE.mkdir(parents=True, exist_ok=True)
    dst = CACHE / f"son_real_{name}.vw"
    if not dst.exists():
        import gzip
        tmp = dst.with_suffix(".tmp")
        with open(tmp, "w") as g:
            for f in SETS[name][0]:
                with gzip.open(DS / f, "rt") as fh:
                    for line in fh:
                        parts = line.split(None, 1)
                        if parts:
                            g.write(f"{parts[0]} | {parts[1].strip() if len(parts) > 1 else ''}\n")
        tmp.replace(dst)
    return dst


def vw_err(path, *args):
    r = subprocess.run([str(VW_RUN), str(path), "--binary", *map(str, args)], capture_output=True, text=True,
                       env=dict(os.environ, VW_RUN_NOTIME="1"))
    m = re.search(r"average loss = ([-\d.naif]+)", r.stderr)
    return float(m.group(1)) if m else float("nan")


def vw_all(name):
    path = vw_file(name)
    r = {"vw_default": (vw_err(path), None)}
    for key, flag, extra in (("vw_tuned", "-l", []), ("vw_oja", "--alpha", ["--OjaNewton", "--sketch_size", "10"])):
        es = [vw_err(path, *extra, flag, a) for a in VW_GRID]
        es = [e if e == e else 1.0 for e in es]
        i = int(np.argmin(es))
        r[key] = (es[i], VW_GRID[i])
    return name, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-vw", action="store_true")
    a = ap.parse_args()
    names = [n for n in SETS if not a.only or n in a.only.split(",")]
    res = {n: {} for n in names}
    with ProcessPoolExecutor(a.jobs) as ex:
        for n, r in ex.map(ours, names):
            res[n].update(r)
        if not a.no_vw:
            for n, r in ex.map(vw_all, names):
                res[n].update(r)

    def f(x):
        return f"{x[0]:.4f}"

    cols = ["son0", "son10", "son10at1", "son10data", "son10paper", "ada"] + \
        ([] if a.no_vw else ["vw_default", "vw_tuned", "vw_oja"])
    heads = {"son0": "ours m=0", "son10": "ours m=10", "son10at1": "m=10 alpha=1", "son10data": "m=10 data-frm",
             "son10paper": "m=10 paper",
             "ada": "AdaGrad", "vw_default": "VW dflt", "vw_tuned": "VW -l best", "vw_oja": "VW Oja"}
    print("Progressive error, one pass, squared loss, best step of the grid. ours = Oja-SON defaults (diagonal "
          "pre-scaling as a preconditioner, D^-1/4, VW order, avg to-sketch scale, importance-invariant step)"
          + (f" with {SON_KW}" if SON_KW else "") + "; alpha=1 = the defaults untuned; data-frm = --diag_frame data "
          "(the paper's frame, D^-1/2); paper = SON Alg. 4-5 + Sec. 5.2 exactly (plain Newton step).")
    print("Paper (Table 3, Oja-SON with diagonal adaptation m=0 / m=10, and AdaGrad) in the last columns.")
    hdr = f"{'dataset':<14}{'n':>7}  " + "  ".join(f"{heads[c]:>14}" for c in cols) + \
        f"  {'paper m=0':>9}  {'paper m=10':>10}  {'paper Ada':>9}  {'gap*':>6}  note"
    print(hdr)
    print("-" * len(hdr))
    for n in names:
        r = res[n]
        paper = SETS[n][1]
        ref = min(r["ada"][0], r["vw_default"][0]) if "vw_default" in r else r["ada"][0]
        gap = r["son10"][0] - ref
        print(f"{n:<14}{r['n']:>7}  " + "  ".join(f"{f(r[c]):>14}" for c in cols)
              + f"  {paper[2]:>9.4f}  {paper[3]:>10.4f}  {paper[4]:>9.4f}  {100 * gap:>+6.2f}  {SETS[n][2]}")
    print("* gap = ours m=10 (best alpha) minus the better of AdaGrad and VW default, in points (target <= +0.5).")
    print("best steps (log2): " + "; ".join(
        f"{n}: " + ",".join(f"{c}={int(np.log2(res[n][c][1]))}" for c in cols if res[n][c][1]) for n in names))


if __name__ == "__main__":
    main()
