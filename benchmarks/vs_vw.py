#!/usr/bin/env python3
"""streamlearn AdaGrad vs Vowpal Wabbit's default learner, side by side on the same files.

Accuracy: one pass of progressive validation with logistic loss on a9a_train, w8a_shuffled,
ijcnn1_train and news20_binary_train (LIBSVM files are converted to VW text for VW; both tools
then hash every feature to the same index). Progressive error is computed the same way for
both (sign of the raw prediction vs the label) from their -p outputs.
Speed: the 200,000-example file of gen_sparse.py in VW text and LIBSVM, examples/s, MB/s and
peak RSS, as ratios to VW in the same run (runs alternate, best of --repeat).

    python3 benchmarks/vs_vw.py [--repeat 3] [--skip-accuracy] [--skip-speed]
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from _common import (CACHE, DATASETS, gen_sparse, gunzip_to, labels_of, libsvm_to_vw, metrics, need_shared,
                     read_preds, run_rss, streamlearn_cmd, table, vw_cmd, vw_summary)

REAL = [
    ("a9a_train", "a9a/a9a_train.libsvm.gz"),
    ("w8a_shuffled", "w8a/w8a_shuffled.libsvm.gz"),
    ("ijcnn1_train", "ijcnn1/ijcnn1_train.libsvm.gz"),
    ("news20_binary_train", "news20/news20_binary_train.vw.gz"),
]
GRID = [0.03, 0.1, 0.3, 1.0]


def _err(pred, y):
    return float(np.mean(np.where(pred > 0, 1, -1) != np.where(y > 0, 1, -1)))


def accuracy(bits):
    rows = []
    for name, rel in REAL:
        src = DATASETS / rel
        if rel.endswith(".libsvm.gz"):
            vwfile = libsvm_to_vw(src, CACHE / f"{name}.vw")
            ours_in = src
        else:
            vwfile = gunzip_to(src, CACHE / f"{name}.vw")
            ours_in = src
        y = labels_of(vwfile)
        vp = CACHE / f"{name}.vw.pred"
        _, _, _, err = run_rss(vw_cmd(vwfile, "--loss_function", "logistic", "-b", bits, "-p", vp))
        vws = vw_summary(err)
        vw_err = _err(read_preds(vp), y)
        row = {"dataset": name, "n": len(y), "VW loss": f"{vws['average_loss']:.4f}", "VW err": f"{vw_err:.4f}"}
        # ours, VW's update (--normalized, -l 0.5 like VW)
        sp = CACHE / f"{name}.sl.pred"
        mj = CACHE / f"{name}.sl.json"
        run_rss(streamlearn_cmd("train", ours_in, "--loss_function", "logistic", "-b", bits, "--normalized",
                                "--quiet", "-p", sp, "--metrics", mj))
        m = metrics(mj)
        row["ours --normalized loss"] = f"{m['average_loss']:.4f}"
        row["ours --normalized err"] = f"{m['error_rate']:.4f}"
        row["pred err check"] = f"{_err(read_preds(sp), y):.4f}"
        # ours, plain AdaGrad, best of a small grid
        best = None
        for lr in GRID:
            run_rss(streamlearn_cmd("train", ours_in, "--loss_function", "logistic", "-b", bits, "-l", lr,
                                    "--quiet", "--metrics", mj))
            m = metrics(mj)
            if best is None or m["error_rate"] < best[1]:
                best = (lr, m["error_rate"], m["average_loss"])
        row["adagrad best -l"] = best[0]
        row["adagrad loss"] = f"{best[2]:.4f}"
        row["adagrad err"] = f"{best[1]:.4f}"
        row["d err (pts) norm/plain"] = f"{100 * (float(row['ours --normalized err']) - vw_err):+.2f} / {100 * (best[1] - vw_err):+.2f}"
        rows.append(row)
        print(f"  done {name}", flush=True)
    cols = ["dataset", "n", "VW loss", "VW err", "ours --normalized loss", "ours --normalized err",
            "adagrad best -l", "adagrad loss", "adagrad err", "d err (pts) norm/plain"]
    print("\nProgressive validation, logistic loss, one pass, -b %s (VW: default learner, -l 0.5)" % bits)
    print(table(rows, cols))


def speed(repeat, bits):
    vw, ls = gen_sparse(200_000)
    size = {"vw": os.path.getsize(vw), "libsvm": os.path.getsize(ls)}
    n = 200_000
    cases = [
        ("VW default (VW text)", "vw", lambda: vw_cmd(vw, "--loss_function", "logistic", "-b", bits, "--quiet")),
        ("streamlearn adagrad (VW text)", "vw", lambda: streamlearn_cmd("train", vw, "--loss_function", "logistic", "-b", bits, "--quiet")),
        ("streamlearn adagrad --normalized (VW text)", "vw", lambda: streamlearn_cmd("train", vw, "--loss_function", "logistic", "-b", bits, "--normalized", "--quiet")),
        ("streamlearn adagrad (LIBSVM)", "libsvm", lambda: streamlearn_cmd("train", ls, "--loss_function", "logistic", "-b", bits, "--quiet")),
        ("streamlearn adagrad --normalized (LIBSVM)", "libsvm", lambda: streamlearn_cmd("train", ls, "--loss_function", "logistic", "-b", bits, "--normalized", "--quiet")),
    ]
    # warm the numba cache once
    run_rss(streamlearn_cmd("train", ls, "--loss_function", "logistic", "-b", bits, "--quiet"))
    best = {}
    for _ in range(repeat):
        for label, fmt, cmd in cases:
            wall, rss, _, _ = run_rss(cmd())
            w0, r0 = best.get(label, (float("inf"), 0))
            best[label] = (min(w0, wall), max(r0, rss))
    vw_wall = best[cases[0][0]][0]
    rows = []
    for label, fmt, _ in cases:
        wall, rss = best[label]
        rows.append({"run": label, "wall s": f"{wall:.2f}", "examples/s": f"{n / wall:,.0f}",
                     "MB/s": f"{size[fmt] / wall / 1e6:.0f}", "peak RSS MB": f"{rss:.0f}",
                     "speed vs VW": f"{vw_wall / wall:.2f}x"})
    print(f"\nThroughput on gen_sparse.py n=200,000 ({size['vw'] / 1e6:.0f} MB VW text), -b {bits}, "
          f"whole-process wall time (start-up included), best of {repeat}")
    print(table(rows, ["run", "wall s", "examples/s", "MB/s", "peak RSS MB", "speed vs VW"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bits", default="18")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    a = ap.parse_args()
    need_shared()
    if not a.skip_accuracy:
        accuracy(a.bits)
    if not a.skip_speed:
        speed(a.repeat, a.bits)


if __name__ == "__main__":
    main()
