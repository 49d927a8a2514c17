"""BEAR vs MISSION vs feature hashing on real text (BEAR paper Sec. 7, Fig. 2, Tables 3-4).

Data (../shared/datasets, VW text): news20_binary (comp.* vs rest), rcv1_small (VW's RCV1
subset) and the 20-class news20. One pass over the training file (as the paper), then test
accuracy of the top-k model (predictions use only the heap's features) for compression
factors CF = distinct training features / sketch cells (all classes' sketches together for
multiclass). Feature hashing = AdaGrad (``streamlearn.algos.AdaGrad``) with 2^b = the sketch's
cells (same bytes: w + G float32 vs one float64 cell); one-vs-all AdaGrads for news20 multiclass.
Same minibatch and step for BEAR and MISSION (as in the paper), 5-row sketches.

Run: python benchmarks/bear_real.py [--datasets news20_binary,rcv1,news20] [--cfs 1,3,10,30,100]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from streamlearn.algos import AdaGrad  # noqa: E402
from streamlearn.algos.bear import Bear  # noqa: E402
from streamlearn.algos.mission import Mission  # noqa: E402
from streamlearn.batch import concat_batches  # noqa: E402
from streamlearn.io import ReaderConfig, read_batches  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets")
if not os.path.isdir(ROOT):
    ROOT = "/work/shared/datasets"
DATA = {
    "news20_binary": ("news20/news20_binary_train.vw.gz", "news20/news20_binary_test.vw.gz", 0),
    "rcv1": ("vw_rcv1_small/rcv1_small_train.vw.gz", "vw_rcv1_small/rcv1_small_test.vw.gz", 0),
    "news20": ("news20/news20_train.vw.gz", "news20/news20_test.vw.gz", 20),
}
GROUPS = ("alt.atheism comp.graphics comp.os.ms-windows.misc comp.sys.ibm.pc.hardware "
          "comp.sys.mac.hardware comp.windows.x misc.forsale rec.autos rec.motorcycles "
          "rec.sport.baseball rec.sport.hockey sci.crypt sci.electronics sci.med sci.space "
          "soc.religion.christian talk.politics.guns talk.politics.mideast talk.politics.misc "
          "talk.religion.misc").split()


def load(path, names=False):
    return concat_batches_keep(list(read_batches([os.path.join(ROOT, path)],
                                                 ReaderConfig(fmt="vw", keep_names=names))))


def concat_batches_keep(bs):
    from streamlearn.algos.mission import concat_keep_names
    out = bs[0]
    for b in bs[1:]:
        out = concat_keep_names(out, b)
    return out


def accuracy(pred, labels, K):
    if K:
        return float(np.mean(pred == labels))
    return float(np.mean((pred > 0) == (labels > 0)))


def run_sketch(cls, tr, te, K, W, k, lr, b, extra):
    L = cls(sketch_rows=5, sketch_width=W, top_k=k, minibatch=b, learning_rate=lr, oaa=K,
            loss_function="logistic", **extra)
    t = time.time()
    _, loss = L.learn_batch(tr)
    L.finish()
    dt = time.time() - t
    L.progressive_loss = float(np.nanmean(loss))
    if te is None:
        return None, dt, L
    pred, _ = L.predict_batch(te)
    return accuracy(pred, te.labels, K), dt, L


def tune(cls, tr, K, W, k, b, extra, grid):
    """The step with the lowest progressive (train) loss: no test data used."""
    res = []
    for lr in grid:
        with np.errstate(all="ignore"):
            _, _, L = run_sketch(cls, tr, None, K, W, k, lr, b, extra)
        pl = L.progressive_loss if np.isfinite(L.progressive_loss) else np.inf
        res.append((pl, lr))
    return min(res)[1], res


def run_fh(tr, te, K, bits, lr):
    if not K:
        L = AdaGrad(bit_precision=bits, loss_function="logistic", learning_rate=lr)
        L.learn_batch(tr)
        return accuracy(L.predict_batch(te)[0], te.labels, 0)
    scores = []
    for c in range(1, K + 1):
        L = AdaGrad(bit_precision=bits, loss_function="logistic", learning_rate=lr)
        trc = tr.slice(0, tr.n)
        trc.labels = np.where(tr.labels == c, 1.0, -1.0)
        L.learn_batch(trc)
        tec = te.slice(0, te.n)
        tec.labels = np.full(te.n, np.nan)
        scores.append(L.predict_batch(tec)[0])
    return float(np.mean(np.argmax(scores, 0) + 1 == te.labels))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="news20_binary,rcv1,news20")
    ap.add_argument("--cfs", default="1,3,10,30,100")
    ap.add_argument("--top_k", type=int, default=1000)
    ap.add_argument("--minibatch", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--damping", type=float, default=1.0)
    ap.add_argument("--fh_lr", type=float, default=0.5)
    ap.add_argument("--tune", default="", help="comma list of steps: pick each algorithm's step "
                    "by progressive training loss at CF 10 (default: --lr for both)")
    a = ap.parse_args()
    for ds in a.datasets.split(","):
        trp, tep, K = DATA[ds]
        tr, te = load(trp, names=(ds == "news20")), load(tep)
        p = len(np.unique(tr.indices))
        kc = max(1, K)
        print(f"\n## {ds}: {tr.n} train / {te.n} test examples, {p} distinct training features, "
              f"{'%d classes, ' % K if K else ''}top_k={a.top_k}{' per class' if K else ''}, "
              f"b={a.minibatch}, step={a.lr}, bear damping={a.damping}, one pass")
        lr_b = lr_m = a.lr
        if a.tune:
            grid = [float(x) for x in a.tune.split(",")]
            W10 = max(1, int(round(p / 10 / (5 * kc))))
            lr_b, rb = tune(Bear, tr, K, W10, a.top_k, a.minibatch, {"curvature_damping": a.damping}, grid)
            lr_m, rm = tune(Mission, tr, K, W10, a.top_k, a.minibatch, {}, grid)
            print("tuning (progressive train loss at CF 10): BEAR " +
                  ", ".join(f"{lr:g}: {pl:.3f}" for pl, lr in rb) + f" -> {lr_b:g}; MISSION " +
                  ", ".join(f"{lr:g}: {pl:.3f}" for pl, lr in rm) + f" -> {lr_m:g}")
        print("| CF | sketch (per class) | BEAR acc | MISSION acc | FH (AdaGrad -b) acc | BEAR s | MISSION s |")
        print("|---|---|---|---|---|---|---|")
        last_bear = None
        for cf in [float(x) for x in a.cfs.split(",")]:
            cells = p / cf
            W = max(1, int(round(cells / (5 * kc))))
            bits = max(1, int(round(math.log2(max(2.0, cells / kc)))))
            ab, tb, Lb = run_sketch(Bear, tr, te, K, W, a.top_k, lr_b, a.minibatch,
                                    {"curvature_damping": a.damping})
            am, tm, _ = run_sketch(Mission, tr, te, K, W, a.top_k, lr_m, a.minibatch, {})
            af = run_fh(tr, te, K, bits, a.fh_lr)
            cf_real = Lb.extra_summary()["distinct_features"] / Lb.sketch_cells
            print(f"| {cf:g} (HLL: {cf_real:.3g}) | 5 x {W} | {ab:.4f} | {am:.4f} | {af:.4f} (b={bits}) | "
                  f"{tb:.1f} | {tm:.1f} |", flush=True)
            if last_bear is None:
                last_bear = Lb
        if K and last_bear is not None:
            from streamlearn.select import select_rows
            for c in (15, 12):
                rows = [r for r in select_rows(last_bear, 20) if r.cls == c]
                print(f"\nTop 20 features of class {c} ({GROUPS[c - 1]}), BEAR at CF {a.cfs.split(',')[0]}:")
                print(", ".join(f"{r.name} ({r.weight:+.3f})" for r in rows))


if __name__ == "__main__":
    main()
