#!/usr/bin/env python3
"""streamlearn ``--oaa K`` vs Vowpal Wabbit ``--oaa K``, side by side on every multiclass set in
../shared/datasets, one pass of progressive validation, both with no other flag.

Rows per data set: VW (``vw F --oaa K``, its default learner, -b 18); streamlearn ``train F
--oaa K`` with the default adagrad (VW's update rule); ``--loss_function multiclass_logistic``
(the joint softmax); ``--algo oja-son``. Progressive error = the summary's average loss (the
weighted 0/1 loss for both tools); examples/s = examples / whole-process wall time (start-up,
parsing and learning; best of --repeat), and its ratio to VW's in the same run. LIBSVM files
are converted to VW text for VW (``y | i:v``: both tools hash feature i to the same index).

Start-up (Python and numpy imports, ~0.3-0.5 s here) weighs on these small files; a second
table runs pmlb_letter, mnist_test10k and news20_train repeated ``--scale`` times (one file,
one pass) for the examples/s of both tools at scale.

    python3 benchmarks/vs_vw_multiclass.py [--repeat 1] [--only letter_scale,news20_train] [--scale 5]
        [--runs oja-son]
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from _common import CACHE, DATASETS, gunzip_to, libsvm_to_vw, need_shared, run_rss, streamlearn_cmd, table, vw_cmd

SETS = [  # name, path, K
    ("letter_scale", "letter_scale/letter_scale.libsvm.gz", 26),
    ("pmlb_letter", "pmlb_letter/letter.libsvm.gz", 26),
    ("pmlb_satimage", "pmlb_satimage/satimage.libsvm.gz", 6),
    ("pmlb_splice", "pmlb_splice/splice.libsvm.gz", 3),
    ("mnist_test10k", "mnist_test10k/mnist_test10k.libsvm.gz", 10),
    ("news20_train", "news20/news20_train.vw.gz", 20),
    ("vw_rcv1_multiclass", "vw_rcv1_multiclass/rcv1_multiclass.vw.gz", 2),
    ("vw_aloi_short", "vw_aloi_short/aloi_short_train.vw.gz", 1000),
]
OURS = [  # label, extra arguments
    ("adagrad (default: VW's rule)", []),
    ("adagrad multiclass_logistic", ["--loss_function", "multiclass_logistic"]),
    ("oja-son", ["--algo", "oja-son"]),
    ("oja-son --loss_function logistic", ["--algo", "oja-son", "--loss_function", "logistic"]),
]
#: throughput at scale: these sets repeated --scale times (one file, one pass), VW's update rule
SCALED = ["pmlb_letter", "mnist_test10k", "news20_train"]


def _vw(vwfile, K, repeat):
    best = None
    for _ in range(repeat):
        wall, rss, _, err = run_rss(vw_cmd(vwfile, "--oaa", K))
        m = re.search(r"average loss = ([\d.]+)", err)
        n = int(re.search(r"number of examples = (\d+)", err).group(1))
        if best is None or wall < best[0]:
            best = (wall, float(m.group(1)), n, rss)
    return best


def _ours(src, K, extra, repeat):
    mj = CACHE / "mc_metrics.json"
    best = None
    for _ in range(repeat):
        wall, rss, _, _ = run_rss(streamlearn_cmd("train", src, "--oaa", K, *extra, "--quiet", "--metrics", mj))
        m = json.loads(mj.read_text())
        if best is None or wall < best[0]:
            best = (wall, m["average_loss"], m["examples"], rss)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated data set names")
    ap.add_argument("--scale", type=int, default=5, help="repeat factor of the throughput table (0: skip it)")
    ap.add_argument("--runs", default="", help="only our runs whose label contains this text (e.g. oja-son); "
                    "VW's row is always run")
    a = ap.parse_args()
    need_shared()
    only = set(filter(None, a.only.split(",")))
    # compile the numba kernels once (oja-son, the softmax) so that no row pays for it
    run_rss(streamlearn_cmd("warmup", "--algo", "adagrad", "--algo", "oja-son"))
    rows = []
    for name, rel, K in SETS:
        if only and name not in only:
            continue
        src = DATASETS / rel
        vwfile = libsvm_to_vw(src, CACHE / f"{name}.vw") if rel.endswith(".libsvm.gz") else gunzip_to(src, CACHE / f"{name}.vw")
        vw_wall, vw_err, n, vw_rss = _vw(vwfile, K, a.repeat)
        rows.append({"dataset": name, "K": K, "n": n, "run": "VW --oaa K", "error": f"{vw_err:.4f}",
                     "d err (pts)": "", "examples/s": f"{n / vw_wall:,.0f}", "speed vs VW": "1.00x",
                     "RSS MB": f"{vw_rss:.0f}"})
        for label, extra in OURS:
            if a.runs and a.runs not in label:
                continue
            wall, err, n2, rss = _ours(src, K, extra, a.repeat)
            assert n2 == n, (name, label, n2, n)
            rows.append({"dataset": "", "K": "", "n": "", "run": label, "error": f"{err:.4f}",
                         "d err (pts)": f"{100 * (err - vw_err):+.2f}", "examples/s": f"{n / wall:,.0f}",
                         "speed vs VW": f"{vw_wall / wall:.2f}x", "RSS MB": f"{rss:.0f}"})
        print(f"  done {name}", flush=True)
    print("\nMulticlass, one pass of progressive validation, -b 18, no other flag (error: weighted 0/1 loss; "
          f"examples/s: whole-process wall time, best of {a.repeat})")
    print(table(rows, ["dataset", "K", "n", "run", "error", "d err (pts)", "examples/s", "speed vs VW", "RSS MB"]))
    if a.scale > 0:
        scaled(a, only)


def _repeat(src: Path, dst: Path, times: int) -> Path:
    if not dst.exists():
        body = src.read_bytes()
        tmp = dst.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            for _ in range(times):
                f.write(body)
        tmp.replace(dst)
    return dst


def scaled(a, only):
    rows = []
    for name, rel, K in SETS:
        if name not in SCALED or (only and name not in only):
            continue
        src = DATASETS / rel
        vw1 = libsvm_to_vw(src, CACHE / f"{name}.vw") if rel.endswith(".libsvm.gz") else gunzip_to(src, CACHE / f"{name}.vw")
        vwfile = _repeat(vw1, CACHE / f"{name}_x{a.scale}.vw", a.scale)
        ours_in = vwfile
        if rel.endswith(".libsvm.gz"):
            ours_in = _repeat(gunzip_to(src, CACHE / f"{name}.libsvm"), CACHE / f"{name}_x{a.scale}.libsvm", a.scale)
        vw_wall, vw_err, n, vw_rss = _vw(vwfile, K, a.repeat)
        rows.append({"dataset": f"{name} x{a.scale}", "K": K, "n": n, "run": "VW --oaa K", "error": f"{vw_err:.4f}",
                     "examples/s": f"{n / vw_wall:,.0f}", "speed vs VW": "1.00x", "RSS MB": f"{vw_rss:.0f}"})
        for label, extra in OURS[:2]:
            wall, err, n2, rss = _ours(ours_in, K, extra, a.repeat)
            rows.append({"dataset": "", "K": "", "n": "", "run": label, "error": f"{err:.4f}",
                         "examples/s": f"{n / wall:,.0f}", "speed vs VW": f"{vw_wall / wall:.2f}x",
                         "RSS MB": f"{rss:.0f}"})
        print(f"  done {name} x{a.scale}", flush=True)
    print(f"\nThroughput at scale: each set repeated {a.scale} times, one pass, -b 18, whole-process wall "
          f"time, best of {a.repeat} (ours reads the LIBSVM file where the set is LIBSVM, VW its VW text)")
    print(table(rows, ["dataset", "K", "n", "run", "error", "examples/s", "speed vs VW", "RSS MB"]))


if __name__ == "__main__":
    main()
