#!/usr/bin/env python3
"""BEAR and MISSION with ``--oaa K`` (their own softmax over K class sketches) against Vowpal
Wabbit ``--oaa K``, one pass of progressive validation, on the multiclass sets of issue 21:
letter (LIBSVM's scaled part and PMLB's unscaled one), satimage (unscaled pixels) and
20 Newsgroups (news20_train, word counts).

Rows per data set: VW (``vw F --oaa K``, its defaults); then for bear and mission: the defaults
(``-b 18``: a sketch far larger than the feature space), compression factor 1 (``--sketch_width
ceil(d / R)``: R x W cells per class for the d distinct features the default run counted) and
every row as wide as the feature space (``--sketch_width d``: the other reading of "a sketch as
large as the feature space", R d cells per class), each with and without ``--unit_norm``. Each run
is made with this tree ("after") and with the
revision ``--baseline`` ("before", default 5d79dbc, the main this work started from), in the
same run, so the ratios share the machine's load. Error: the summary's average loss (the 0/1
loss for both tools); time: whole-process wall and CPU (user + sys) seconds, start-up and
parsing included, kernels compiled beforehand (``streamlearn warmup``).

    python3 benchmarks/bear_multiclass.py [--only news20_train] [--algos bear,mission] [--baseline REV|none]
        [--defaults_only] [--variants "--step_rule adagrad;--step_rule adagrad --top_k 20000"]

``--variants``: extra rows, each the defaults plus the given options (``;`` between rows), for
every algorithm that has them (``--step_rule``: mission only); the word ``CF1`` in a row stands
for ``--sketch_width ceil(d / R)`` (compression factor 1 on each data set) and ``Wd`` for ``--sketch_width d``; ``--defaults_only``:
no CF 1 / W = d rows.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess

from _baseline import baseline_cmd, baseline_tree
from _common import CACHE, need_shared, streamlearn_cmd, table, vw_cmd, vw_text_sets

SETS = [  # name, path, K
    ("letter_scale", "letter_scale/letter_scale.libsvm.gz", 26),
    ("pmlb_letter", "pmlb_letter/letter.libsvm.gz", 26),
    ("pmlb_satimage", "pmlb_satimage/satimage.libsvm.gz", 6),
    ("news20_train", "news20/news20_train.vw.gz", 20),
]
R = 5  # --sketch_rows default


def timed(cmd):
    """(wall s, CPU s = user + sys) of ``cmd`` under /usr/bin/time; its stderr."""
    p = subprocess.run(["/usr/bin/time", "-f", "@@T %e %U %S", *map(str, cmd)], capture_output=True)
    err = p.stderr.decode()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{err[-2000:]}")
    e, u, s = map(float, re.findall(r"@@T ([\d.]+) ([\d.]+) ([\d.]+)", err)[-1])
    return e, u + s, err


def ours(prefix, src, K, extra):
    mj = CACHE / "bear_mc_metrics.json"
    if mj.exists():
        mj.unlink()
    wall, cpu, _ = timed(prefix("train", src, "--oaa", K, *extra, "--quiet", "--metrics", mj))
    m = json.loads(mj.read_text())
    return wall, cpu, m["average_loss"], m.get("learner", {})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated data set names")
    ap.add_argument("--algos", default="bear,mission")
    ap.add_argument("--baseline", default="5d79dbc", help="revision for the 'before' rows ('none': skip them)")
    ap.add_argument("--no_unit_norm", action="store_true", help="skip the --unit_norm rows")
    ap.add_argument("--defaults_only", action="store_true", help="skip the CF 1 and W = d rows")
    ap.add_argument("--variants", default="", help="';'-separated option sets: extra rows at the defaults")
    a = ap.parse_args()
    need_shared()
    only = set(filter(None, a.only.split(",")))
    algos = a.algos.split(",")
    trees = [("after", streamlearn_cmd)]
    if a.baseline != "none":
        tree = baseline_tree(a.baseline)
        trees.append(("before", lambda *args, _t=tree: baseline_cmd(_t, *args)))
    for _, prefix in trees:  # compile every tree's kernels before any timed row
        subprocess.run(prefix("warmup", *sum((["--algo", x] for x in algos), [])), capture_output=True, check=True)
    load = os.getloadavg()
    rows = []
    for name, K, src, vwfile in vw_text_sets(SETS, only):
        wall, cpu, err = timed(vw_cmd(vwfile, "--oaa", K))
        vw_err = float(re.search(r"average loss = ([\d.]+)", err).group(1))
        rows.append({"dataset": name, "K": K, "run": "VW --oaa K", "error": f"{vw_err:.4f}", "wall s": f"{wall:.2f}",
                     "CPU s": f"{cpu:.2f}"})
        print(f"  {name}: VW {vw_err:.4f} {wall:.2f} s", flush=True)
        d = None
        for algo in algos:
            variants = [v.split() for v in a.variants.split(";") if v.strip()]
            if algo != "mission":
                variants = [v for v in variants if "--step_rule" not in v]
            for cf1 in ((None,) if a.defaults_only else (None, "cells", "row")) + tuple(map(tuple, variants)):
                for unit in ((False,) if a.no_unit_norm or isinstance(cf1, tuple) else (False, True)):
                    extra = ["--algo", algo]
                    if isinstance(cf1, tuple):
                        extra += [x for o in cf1 for x in (["--sketch_width", math.ceil(d / R)] if o == "CF1" else
                                                           ["--sketch_width", d] if o == "Wd" else [o])]
                    if cf1 == "cells":  # R x W = d cells per class (the papers' compression factor 1)
                        extra += ["--sketch_width", math.ceil(d / R)]
                    elif cf1 == "row":  # each of the R rows as wide as the feature space (W = d)
                        extra += ["--sketch_width", d]
                    if unit:
                        extra += ["--unit_norm"]
                    name_cf = " ".join(cf1) if isinstance(cf1, tuple) else {None: "defaults", "cells": "CF 1",
                                                                            "row": "W = d"}[cf1]
                    label = f"{algo} {name_cf}{' --unit_norm' if unit else ''}"
                    row = {"dataset": "", "K": "", "run": label}
                    for tag, prefix in trees:
                        wall, cpu, e, learner = ours(prefix, src, K, extra)
                        if d is None:
                            d = learner["distinct_features"]
                        row[f"error {tag}"] = f"{e:.4f}"
                        row[f"d err {tag} (pts)"] = f"{100 * (e - vw_err):+.1f}"
                        row[f"wall s {tag}"] = f"{wall:.2f}"
                        row[f"CPU s {tag}"] = f"{cpu:.2f}"
                        if tag == "after":
                            row["CF"] = f"{learner.get('compression_factor', float('nan')):.3g}"
                    rows.append(row)
                    print(f"  {name}: {label}: " + ", ".join(f"{k} {v}" for k, v in row.items() if k.startswith(("error", "wall"))),
                          flush=True)
    cols = ["dataset", "K", "run", "CF", "error", "error after", "d err after (pts)", "error before", "d err before (pts)",
            "wall s", "wall s after", "wall s before", "CPU s", "CPU s after", "CPU s before"]
    print(f"\nMulticlass BEAR / MISSION vs VW --oaa K: one pass of progressive validation; error = 0/1 loss; "
          f"d err = points above VW; after = this tree, before = {a.baseline}; load average at start "
          f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (2 cores)")
    print(table(rows, cols))


if __name__ == "__main__":
    main()
