#!/usr/bin/env python3
"""Oja-SON's untuned defaults over every binary set of ../shared/datasets (issue 15 part 1:
"defaults chosen so that an untuned run is good on unscaled data").

For each set (shuffled copies of label-sorted ones, as ``vs_vw.py``) and each loss (squared,
the default, and logistic): the progressive error of the default adagrad (VW's rule: the
reference an untuned user gets) and of ``--algo oja-son`` with each candidate setting.

    python3 benchmarks/oja_son_defaults.py [--only a9a,rcv1_small] [--variants "" "--alpha 10"]
"""
from __future__ import annotations

import argparse
import shlex

from _common import CACHE, need_shared, read_preds, run_rss, streamlearn_cmd, table
from vs_vw import BINARY, _err, _vw_text, labels_of, source

VARIANTS = ["", "--alpha 10", "--no_invariant", "--diag_frame data"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None)
    ap.add_argument("--variants", nargs="+", default=VARIANTS)
    a = ap.parse_args()
    need_shared()
    only = set(a.only.split(",")) if a.only else None
    rows = []
    worst = {}
    for name, rel in BINARY:
        if only and name not in only:
            continue
        src, _ = source(name, rel)
        y = labels_of(_vw_text(name, src))
        for loss in ("squared", "logistic"):
            lf = ["--loss_function", "logistic"] if loss == "logistic" else []
            row = {"dataset": name, "loss": loss}
            for label, extra in [("adagrad", [])] + [(f"oja-son {v}".strip(), ["--algo", "oja-son", *shlex.split(v)])
                                                     for v in a.variants]:
                sp = CACHE / f"osd.{name}.{loss}.pred"
                try:
                    run_rss(streamlearn_cmd("train", src, *lf, *extra, "-p", sp, "--quiet"))
                    e = _err(read_preds(sp), y, loss == "squared")
                    row[label] = f"{e:.4f}"
                    if label != "adagrad":
                        d = 100 * (e - float(row["adagrad"]))
                        worst[label] = max(worst.get(label, -1e9), d)
                except RuntimeError:
                    row[label] = "failed"
            rows.append(row)
        print(f"  done {name}", flush=True)
    cols = ["dataset", "loss", "adagrad"] + [f"oja-son {v}".strip() for v in a.variants]
    print("\nProgressive error, one pass, no other flag (adagrad = VW's default rule)")
    print(table(rows, cols))
    for k, v in worst.items():
        print(f"{k}: worst gap to adagrad {v:+.2f} points")


if __name__ == "__main__":
    main()
