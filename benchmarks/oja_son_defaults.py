#!/usr/bin/env python3
"""Oja-SON's untuned defaults over every binary and multiclass set of ../shared/datasets (issue 15
part 1: "defaults chosen so that an untuned run is good on unscaled data").

Binary table: for each set (shuffled copies of label-sorted ones, as ``vs_vw.py``) and each loss
(squared, the default, and logistic), the progressive error of the default adagrad (VW's rule: the
reference an untuned user gets) and of ``--algo oja-son`` with each candidate setting. Multiclass
table: ``--oaa K`` on the sets of ``vs_vw_multiclass.py`` (error = the summary's 0/1 loss), adagrad
and oja-son with each setting (VW's own ``--oaa`` numbers: ``vs_vw_multiclass.py``).

``--variants`` are oja-son option strings ("" = the defaults; ``--diag_rule nag`` = the defaults
before VW's rule became the diagonal step's; ``--oja_clip 0`` = those before the Oja step cap). ``--baseline REV`` adds a column of oja-son's defaults run by revision REV of this repository
(extracted with git archive into the cache) in the same run.

    python3 benchmarks/oja_son_defaults.py [--only a9a,rcv1_small] [--variants "" "--alpha 10"]
        [--baseline main] [--no-binary] [--no-multiclass]
"""
from __future__ import annotations

import argparse
import json
import shlex

from _baseline import baseline_cmd, baseline_tree
from _common import CACHE, DATASETS, need_shared, read_preds, run_rss, streamlearn_cmd, table
from vs_vw import BINARY, _err, _vw_text, labels_of, source
from vs_vw_multiclass import SETS as MULTICLASS

VARIANTS = ["", "--diag_rule nag", "--diag_frame data"]


def _columns(variants, base):
    """(label, command builder) for adagrad and each oja-son variant (and the baseline's)."""
    cols = [("adagrad", lambda *a: streamlearn_cmd(*a))]
    for v in variants:
        extra = ["--algo", "oja-son", *shlex.split(v)]
        cols.append((f"oja-son {v}".strip(), lambda *a, e=extra: streamlearn_cmd(*a[:2], *e, *a[2:])))
    if base is not None:  # the baseline revision's defaults
        tree, rev = base
        cols.append((f"{rev}: oja-son", lambda *a: baseline_cmd(tree, *a[:2], "--algo", "oja-son", *a[2:])))
    return cols


def binary(only, cols):
    rows, worst = [], {}
    for name, rel in BINARY:
        if only and name not in only:
            continue
        src, _ = source(name, rel)
        y = labels_of(_vw_text(name, src))
        for loss in ("squared", "logistic"):
            lf = ["--loss_function", "logistic"] if loss == "logistic" else []
            row = {"dataset": name, "loss": loss}
            for label, cmd in cols:
                sp = CACHE / f"osd.{name}.{loss}.pred"
                try:
                    run_rss(cmd("train", src, *lf, "-p", sp, "--quiet"))
                    e = _err(read_preds(sp), y, loss == "squared")
                    row[label] = f"{e:.4f}"
                    if label != "adagrad":
                        worst[label] = max(worst.get(label, -1e9), 100 * (e - float(row["adagrad"])))
                except RuntimeError:
                    row[label] = "failed"
            rows.append(row)
        print(f"  done {name}", flush=True)
    print("\nBinary: progressive error, one pass, no other flag (adagrad = VW's default rule)")
    print(table(rows, ["dataset", "loss"] + [c for c, _ in cols]))
    for k, v in worst.items():
        print(f"{k}: worst gap to adagrad {v:+.2f} points")


def multiclass(only, cols):
    rows, worst = [], {}
    mj = CACHE / "osd_mc_metrics.json"
    for name, rel, K in MULTICLASS:
        if only and name not in only:
            continue
        row = {"dataset": name, "K": K}
        for label, cmd in cols:
            try:
                run_rss(cmd("train", DATASETS / rel, "--oaa", K, "--quiet", "--metrics", mj))
                e = json.loads(mj.read_text())["average_loss"]
                row[label] = f"{e:.4f}"
                if label != "adagrad":
                    worst[label] = max(worst.get(label, -1e9), 100 * (e - float(row["adagrad"])))
            except RuntimeError:
                row[label] = "failed"
        rows.append(row)
        print(f"  done {name}", flush=True)
    print("\nMulticlass --oaa K: progressive 0/1 loss, one pass, no other flag")
    print(table(rows, ["dataset", "K"] + [c for c, _ in cols]))
    for k, v in worst.items():
        print(f"{k}: worst gap to adagrad {v:+.2f} points")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="comma-separated data set names")
    ap.add_argument("--variants", nargs="+", default=VARIANTS)
    ap.add_argument("--baseline", default=None, help="also run these variants with revision REV (git)")
    ap.add_argument("--no-binary", action="store_true")
    ap.add_argument("--no-multiclass", action="store_true")
    a = ap.parse_args()
    need_shared()
    only = set(a.only.split(",")) if a.only else None
    base = (baseline_tree(a.baseline), a.baseline) if a.baseline else None
    cols = _columns(a.variants, base)
    if not a.no_binary:
        binary(only, cols)
    if not a.no_multiclass:
        multiclass(only, cols)


if __name__ == "__main__":
    main()
