#!/usr/bin/env python3
"""streamlearn vs Vowpal Wabbit, both untuned, side by side on every binary set in ../shared.

Accuracy (``--skip-accuracy`` skips it): for every binary data set in ``../shared/datasets``
(the train part where there is a train/test split; label-sorted sets replaced by their
``_shuffled`` copy, or by one made with ``tools/shuffle_lines.py`` --seed 2016 when the MANIFEST
has none), one pass of progressive validation of

* ``streamlearn train F --loss_function logistic`` vs ``vw F --loss_function logistic``, and
* ``streamlearn train F`` vs ``vw F`` (squared loss),

with no other flag (LIBSVM files are converted to VW text for VW: an all-digit feature name in
the default namespace hashes to the number, so both tools see the same indices). Progressive
error is computed the same way for both from their ``-p`` files (sign of the prediction vs the
label; threshold 0.5 for squared loss on {0,1} labels); average loss is each tool's own
summary. Speed: examples/s over the whole process (start-up included) and the ratio to VW.
``vw_0001`` has 0/1 labels; both tools get the file as it is: VW 9's logistic loss reads a 0 as
the soft label 0.5 (``--logistic_min -1``: half positive, half negative), streamlearn as the
negative class; for squared loss both regress on 0/1.

Then the default runs of ``--algo oja-son``, ``bear`` and ``mission`` (logistic loss, no other
flag) on the same sets: progressive error (``--skip-others`` skips them).

Speed (``--skip-speed``): the 200,000-example file of gen_sparse.py in VW text and LIBSVM,
examples/s, MB/s and peak RSS, as ratios to VW in the same run (runs alternate, best of --repeat).

    python3 benchmarks/vs_vw.py [--repeat 3] [--skip-accuracy] [--skip-others] [--skip-speed] [--only NAME]
"""
from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys

import numpy as np

from _common import (CACHE, DATASETS, SHARED, gen_sparse, gunzip_to, labels_of, libsvm_to_vw, metrics,
                     need_shared, read_preds, run_rss, streamlearn_cmd, table, vw_cmd, vw_summary)

#: every binary set of ../shared/datasets (train parts; the test parts are the same distributions)
BINARY = [
    ("a9a", "a9a/a9a_train.libsvm.gz"),
    ("agaricus", "agaricus/agaricus_train.libsvm.gz"),
    ("australian", "australian/australian.libsvm.gz"),
    ("breast-cancer", "breast-cancer_scale/breast-cancer_scale.libsvm.gz"),
    ("diabetes", "diabetes_scale/diabetes_scale.libsvm.gz"),
    ("heart", "heart_scale/heart_scale.libsvm.gz"),
    ("ijcnn1", "ijcnn1/ijcnn1_train.libsvm.gz"),
    ("w8a", "w8a/w8a.libsvm.gz"),
    ("reuters", "reuters/reuters_train.libsvm.gz"),
    ("cod-rna", "cod-rna/cod-rna.libsvm.gz"),
    ("covtype20k", "covtype_subset20k/covtype_subset20k.libsvm.gz"),
    ("splice", "splice/splice.libsvm.gz"),
    ("adult", "pmlb_adult/adult.libsvm.gz"),
    ("ionosphere", "pmlb_ionosphere/ionosphere.libsvm.gz"),
    ("magic", "pmlb_magic/magic.libsvm.gz"),
    ("spambase", "pmlb_spambase/spambase.libsvm.gz"),
    ("rcv1_small", "vw_rcv1_small/rcv1_small_train.vw.gz"),
    ("vw_0001", "vw_0001/0001_train.vw.gz"),
    ("news20_binary", "news20/news20_binary_train.vw.gz"),
]
OTHERS = ["oja-son", "bear", "mission"]


def _label_runs(path) -> int:
    runs, last = 0, None
    with gzip.open(path, "rt") as f:
        for line in f:
            lab = line.split(None, 1)[0] if line.strip() else None
            if lab != last:
                runs, last = runs + 1, lab
    return runs


def source(name, rel):
    """The file to use: ``rel``, or a shuffled copy when its labels come sorted (a handful of runs)."""
    src = DATASETS / rel
    if _label_runs(src) > 10:
        return src, ""
    shuffled = src.with_name(src.name.replace(".libsvm.gz", "_shuffled.libsvm.gz").replace(".vw.gz", "_shuffled.vw.gz"))
    if shuffled.exists():
        return shuffled, shuffled.name
    out = CACHE / f"{name}_shuffled{''.join(src.suffixes)}"
    if not out.exists():
        subprocess.run([sys.executable, str(SHARED / "tools" / "shuffle_lines.py"), str(src), str(out),
                        "--seed", "2016"], check=True)
    return out, f"{out.name} (shuffle_lines.py --seed 2016)"


def _err(pred, y, squared):
    lab = y > 0
    if squared and y.min() >= 0:  # {0,1} labels
        return float(np.mean((pred > 0.5) != lab))
    return float(np.mean((pred > 0) != lab))


def _vw_text(name, src):
    if ".libsvm" in src.name:
        return libsvm_to_vw(src, CACHE / f"{name}.vw")
    return gunzip_to(src, CACHE / f"{name}.vw")


def accuracy(only=None, others=True):
    rows, orows, notes = [], [], []
    for name, rel in BINARY:
        if only and name not in only:
            continue
        src, note = source(name, rel)
        if note:
            notes.append(f"{name}: labels sorted in {rel}; used {note}")
        vwfile = _vw_text(name, src)
        y = labels_of(vwfile)
        for loss in ("logistic", "squared"):
            lf = ["--loss_function", "logistic"] if loss == "logistic" else []
            vp = CACHE / f"{name}.{loss}.vw.pred"
            wall_v, _, _, err = run_rss(vw_cmd(vwfile, *lf, "-p", vp))
            vws = vw_summary(err)
            sp, mj = CACHE / f"{name}.{loss}.sl.pred", CACHE / f"{name}.{loss}.sl.json"
            wall_s, _, _, _ = run_rss(streamlearn_cmd("train", src, *lf, "-p", sp, "--metrics", mj, "--quiet"))
            m = metrics(mj)
            ev = _err(read_preds(vp), y, loss == "squared")
            es = _err(read_preds(sp), y, loss == "squared")
            rows.append({"dataset": name, "n": len(y), "loss": loss,
                         "VW err": f"{ev:.4f}", "ours err": f"{es:.4f}", "d err (pts)": f"{100 * (es - ev):+.2f}",
                         "VW avg loss": f"{vws.get('average_loss', float('nan')):.4f}",
                         "ours avg loss": f"{m['average_loss']:.4f}",
                         "VW ex/s": f"{len(y) / wall_v:,.0f}", "ours ex/s": f"{len(y) / wall_s:,.0f}",
                         "speed vs VW": f"{wall_v / wall_s:.2f}x"})
        if others:
            row = {"dataset": name, "n": len(y), "VW err (logistic)": rows[-2]["VW err"],
                   "adagrad err": rows[-2]["ours err"]}
            for algo in OTHERS:
                sp, mj = CACHE / f"{name}.{algo}.pred", CACHE / f"{name}.{algo}.json"
                try:
                    run_rss(streamlearn_cmd("train", src, "--algo", algo, "--loss_function", "logistic", "-p", sp,
                                            "--metrics", mj, "--quiet"))
                    row[f"{algo} err"] = f"{_err(read_preds(sp), y, False):.4f}"
                except RuntimeError as e:
                    row[f"{algo} err"] = "failed"
                    notes.append(f"{name} {algo}: {str(e).splitlines()[-1][:120]}")
            orows.append(row)
        print(f"  done {name}", flush=True)
    print("\nProgressive validation, one pass, both tools without flags (VW 9.11.9: its default learner; "
          "ex/s: whole process, start-up included)")
    print(table(rows, ["dataset", "n", "loss", "VW err", "ours err", "d err (pts)", "VW avg loss", "ours avg loss",
                       "VW ex/s", "ours ex/s", "speed vs VW"]))
    worst = max((float(r["d err (pts)"]), r["dataset"], r["loss"]) for r in rows) if rows else None
    if worst:
        print(f"largest error gap (ours - VW): {worst[0]:+.2f} points ({worst[1]}, {worst[2]} loss)")
    if orows:
        print("\nDefault runs of the other learners, --loss_function logistic only (progressive error)")
        print(table(orows, ["dataset", "n", "VW err (logistic)", "adagrad err"] + [f"{a} err" for a in OTHERS]))
    for n in notes:
        print("note:", n)


def speed(repeat, bits):
    vw, ls = gen_sparse(200_000)
    size = {"vw": os.path.getsize(vw), "libsvm": os.path.getsize(ls)}
    n = 200_000
    cases = [
        ("VW default (VW text)", "vw", lambda: vw_cmd(vw, "--loss_function", "logistic", "-b", bits, "--quiet")),
        ("streamlearn adagrad (VW text)", "vw", lambda: streamlearn_cmd("train", vw, "--loss_function", "logistic", "-b", bits, "--quiet")),
        ("streamlearn adagrad --adaptive -l 0.1 (VW text; plain AdaGrad, numba)", "vw", lambda: streamlearn_cmd("train", vw, "--loss_function", "logistic", "-b", bits, "--adaptive", "-l", "0.1", "--quiet")),
        ("streamlearn adagrad (LIBSVM)", "libsvm", lambda: streamlearn_cmd("train", ls, "--loss_function", "logistic", "-b", bits, "--quiet")),
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
    ap.add_argument("--skip-others", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--only", nargs="*", help="data set names (default: all)")
    a = ap.parse_args()
    need_shared()
    if not a.skip_accuracy:
        accuracy(a.only, not a.skip_others)
    if not a.skip_speed:
        speed(a.repeat, a.bits)


if __name__ == "__main__":
    main()
