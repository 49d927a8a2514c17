#!/usr/bin/env python3
"""streamlearn ``--oaa K`` vs Vowpal Wabbit ``--oaa K``, side by side on every multiclass set in
../shared/datasets, one pass of progressive validation, both with no other flag.

Rows per data set: VW (``vw F --oaa K``, its default learner, -b 18); streamlearn ``train F
--oaa K`` with the default adagrad (VW's update rule); ``--loss_function multiclass_logistic``
(the joint softmax); ``--algo oja-son``. Progressive error = the summary's average loss (the
weighted 0/1 loss for both tools); examples/s = examples / whole-process wall time (start-up,
parsing and learning; best of --repeat), and its ratio to VW's in the same run. LIBSVM files
are converted to VW text for VW (``y | i:v``: both tools hash feature i to the same index).

Two speed ratios: against vw_run's whole process (VW's C++ driver hosted by the Python wheel)
and against the C++ driver alone (vw_run's ``wall=`` line, what a native ``vw`` would take).
Start-up of a numpy-based Python process (printed: ``python3 -c 'import numpy'``) weighs on the
small files, and where VW's driver finishes faster than that floor no Python tool reaches 1.0x
of it; a second table runs pmlb_letter, mnist_test10k and news20_train repeated ``--scale``
times (one file, one pass) for the examples/s of both tools at scale.

    python3 benchmarks/vs_vw_multiclass.py [--repeat 1] [--only letter_scale,news20_train] [--scale 5]
        [--runs oja-son] [--oja_newton]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from _common import CACHE, gunzip_to, need_shared, run_rss, streamlearn_cmd, table, vw_cmd, vw_text_sets

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


def _vw(vwfile, K, repeat, *extra):
    """(whole-process wall, error, examples, peak RSS, VW's own wall): the last is vw_run's
    ``wall=`` line, VW's C++ driver alone, without the Python process that hosts the wheel."""
    best = None
    for _ in range(repeat):
        wall, rss, _, err = run_rss(vw_cmd(vwfile, "--oaa", K, *extra))
        m = re.search(r"average loss = ([\d.]+)", err)
        n = int(re.search(r"number of examples = (\d+)", err).group(1))
        inner = float(re.search(r"vw_run: wall=([\d.]+)", err).group(1))
        if best is None or wall < best[0]:
            best = (wall, float(m.group(1)), n, rss, inner)
    return best


def _startup_floor(repeat):
    """Wall time of ``python3 -c 'import numpy'``: what any Python process built on numpy pays
    before its first example (best of ``repeat``, at least 3)."""
    return min(run_rss([sys.executable, "-c", "import numpy"])[0] for _ in range(max(3, repeat)))


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
    ap.add_argument("--oja_newton", action="store_true",
                    help="also run VW --OjaNewton --oaa K, the peer of the oja-son rows ('vs VW Oja')")
    ap.add_argument("--runs", default="", help="only our runs whose label contains this text (e.g. oja-son); "
                    "VW's row is always run")
    a = ap.parse_args()
    need_shared()
    only = set(filter(None, a.only.split(",")))
    # compile the numba kernels once (oja-son, the softmax) so that no row pays for it
    run_rss(streamlearn_cmd("warmup", "--algo", "adagrad", "--algo", "oja-son"))
    rows = []
    for name, K, src, vwfile in vw_text_sets(SETS, only):
        vw_wall, vw_err, n, vw_rss, vw_inner = _vw(vwfile, K, a.repeat)
        rows.append({"dataset": name, "K": K, "n": n, "run": "VW --oaa K", "error": f"{vw_err:.4f}",
                     "d err (pts)": "", "examples/s": f"{n / vw_wall:,.0f}", "speed vs VW": "1.00x",
                     "RSS MB": f"{vw_rss:.0f}", "VW C++ s": f"{vw_inner:.3f}", "wall s": f"{vw_wall:.3f}"})
        oja = None
        if a.oja_newton:  # Oja-SON's own peer: VW's --OjaNewton (m = 10, its defaults) under --oaa
            oja = _vw(vwfile, K, a.repeat, "--OjaNewton")
            rows.append({"dataset": "", "K": "", "n": "", "run": "VW --OjaNewton --oaa K", "error": f"{oja[1]:.4f}",
                         "d err (pts)": f"{100 * (oja[1] - vw_err):+.2f}", "examples/s": f"{n / oja[0]:,.0f}",
                         "speed vs VW": f"{vw_wall / oja[0]:.2f}x", "VW C++ s": f"{oja[4]:.3f}",
                         "wall s": f"{oja[0]:.3f}", "RSS MB": f"{oja[3]:.0f}"})
        for label, extra in OURS:
            if a.runs and a.runs not in label:
                continue
            wall, err, n2, rss = _ours(src, K, extra, a.repeat)
            assert n2 == n, (name, label, n2, n)
            rows.append({"dataset": "", "K": "", "n": "", "run": label, "error": f"{err:.4f}",
                         "d err (pts)": f"{100 * (err - vw_err):+.2f}", "examples/s": f"{n / wall:,.0f}",
                         "speed vs VW": f"{vw_wall / wall:.2f}x", "vs VW C++": f"{vw_inner / wall:.2f}x",
                         "vs VW Oja": f"{oja[0] / wall:.2f}x" if oja and "oja-son" in label else "",
                         "RSS MB": f"{rss:.0f}", "wall s": f"{wall:.3f}"})
        print(f"  done {name}", flush=True)
    print("\nMulticlass, one pass of progressive validation, -b 18, no other flag (error: weighted 0/1 loss; "
          f"examples/s: whole-process wall time, best of {a.repeat})")
    print(table(rows, ["dataset", "K", "n", "run", "error", "d err (pts)", "examples/s", "speed vs VW",
                       "VW C++ s", "wall s", "vs VW C++", "vs VW Oja", "RSS MB"]))
    floor = _startup_floor(a.repeat)
    print(f"\n'speed vs VW': whole process against whole process (vw_run hosts VW's C++ driver in a Python "
          f"process, as the `vowpalwabbit` wheel ships no executable). 'vs VW C++': our whole process against "
          f"VW's driver alone (vw_run's wall= line), what a native `vw` binary would take. Start-up floor of "
          f"any numpy-based Python process here: `python3 -c 'import numpy'` = {floor:.3f} s; where 'VW C++ s' "
          f"is below it, 1.0x against the C++ driver is out of reach for a Python tool.")
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
    for name, K, src, vw1 in vw_text_sets([s for s in SETS if s[0] in SCALED], only):
        vwfile = _repeat(vw1, CACHE / f"{name}_x{a.scale}.vw", a.scale)
        ours_in = vwfile
        if str(src).endswith(".libsvm.gz"):
            ours_in = _repeat(gunzip_to(src, CACHE / f"{name}.libsvm"), CACHE / f"{name}_x{a.scale}.libsvm", a.scale)
        vw_wall, vw_err, n, vw_rss, vw_inner = _vw(vwfile, K, a.repeat)
        rows.append({"dataset": f"{name} x{a.scale}", "K": K, "n": n, "run": "VW --oaa K", "error": f"{vw_err:.4f}",
                     "examples/s": f"{n / vw_wall:,.0f}", "speed vs VW": "1.00x", "VW C++ s": f"{vw_inner:.3f}",
                     "wall s": f"{vw_wall:.3f}", "RSS MB": f"{vw_rss:.0f}"})
        for label, extra in OURS[:2]:
            wall, err, n2, rss = _ours(ours_in, K, extra, a.repeat)
            rows.append({"dataset": "", "K": "", "n": "", "run": label, "error": f"{err:.4f}",
                         "examples/s": f"{n / wall:,.0f}", "speed vs VW": f"{vw_wall / wall:.2f}x",
                         "wall s": f"{wall:.3f}", "vs VW C++": f"{vw_inner / wall:.2f}x", "RSS MB": f"{rss:.0f}"})
        print(f"  done {name} x{a.scale}", flush=True)
    print(f"\nThroughput at scale: each set repeated {a.scale} times, one pass, -b 18, whole-process wall "
          f"time, best of {a.repeat} (ours reads the LIBSVM file where the set is LIBSVM, VW its VW text)")
    print(table(rows, ["dataset", "K", "n", "run", "error", "examples/s", "speed vs VW", "VW C++ s", "wall s",
                       "vs VW C++", "RSS MB"]))


if __name__ == "__main__":
    main()
