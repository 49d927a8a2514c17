"""BEAR's --curvature_damping default for the logistic and hinge losses and --oaa.

Alg. 2 has no damping; it is the oLBFGS regularisation (r + delta s, Mokhtari & Ribeiro) that
bounds the quasi-Newton step where the loss is flat. A large delta makes BEAR plain SGD with
step eta/delta (MISSION), a small one leaves it second-order. This prints test error (binary;
w8a, which has no test file, progressive validation on its shuffled copy) or test accuracy
(news20 with 20 classes) with every default except the step and the damping, for MISSION and
BEAR at deltas 1, 0.1, 0.01 (and 0 for binary), at several steps around the default 0.1.

Measured (2026-11-23, 13 min): the mean over the six binary sets at the default step 0.1 is
0.142 test error at delta 0.01 against 0.194 at delta 1 (logistic; hinge 0.164 against 0.212),
and delta 0.01 is the better of the two at every step 0.03-1 for both losses; with 20 classes
the mean accuracy is 0.401 against 0.301 at step 0.1. Delta 1, the default until then, made
BEAR a slower MISSION (at step 0.1 on unit-norm news20_binary it predicted the base rate).
Delta 0.01 loses to delta 1 on dense a9a and ijcnn1 by up to 2 points and on raw-count news20
with 20 classes (0.257 against 0.418 at step 0.1), where unit-norm rows (the paper's) fix it.

``--example_norm``: instead, binary bear's ``--example_norm`` default (version 3 of its step defaults, 2026-11-27:
``auto`` is unit for binary runs too, as for ``--oaa``): one pass of ``streamlearn train --algo bear`` at every
default but ``--example_norm none`` / ``unit``, squared and logistic loss, on every binary set (train file, shuffled
copies of label-sorted sets): average progressive loss, progressive error and test error (where a test file
exists). Measured (2026-11-27): with the rows as given, bear's progressive loss exploded
(1e4-1e8) on cod-rna, news20_binary, spambase and magic (errors 23-48%), unit rows 13-34%; on sets already
scaled unit rows moved test error by -4.2 (agaricus, logistic) to +6.7 (agaricus, squared) points, rcv1_small
(1,000 rows) +3.8 / +9.0, the others within about 1.3.

Run: python benchmarks/bear_defaults.py [--steps 0.03,0.1,0.3,1] [--losses logistic,hinge] [--example_norm]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bear_real import load  # noqa: E402
from streamlearn.algos.bear import Bear  # noqa: E402
from streamlearn.algos.mission import Mission  # noqa: E402
from streamlearn.batch import unit_norm_rows  # noqa: E402

BINARY = {  # name: (train, test or None for progressive validation, format, L2-normalise)
    "news20_binary raw": ("news20/news20_binary_train.vw.gz", "news20/news20_binary_test.vw.gz", "vw", False),
    "news20_binary l2": ("news20/news20_binary_train.vw.gz", "news20/news20_binary_test.vw.gz", "vw", True),
    "rcv1_small": ("vw_rcv1_small/rcv1_small_train.vw.gz", "vw_rcv1_small/rcv1_small_test.vw.gz", "vw", False),
    "a9a": ("a9a/a9a_train.libsvm.gz", "a9a/a9a_test.libsvm.gz", "libsvm", False),
    "ijcnn1": ("ijcnn1/ijcnn1_train.libsvm.gz", "ijcnn1/ijcnn1_test.libsvm.gz", "libsvm", False),
    "w8a (prog. val.)": ("w8a/w8a_shuffled.libsvm.gz", None, "libsvm", False),
}
MULTI = {
    "news20 20 classes raw": ("news20/news20_train.vw.gz", "news20/news20_test.vw.gz", "vw", False),
    "news20 20 classes l2": ("news20/news20_train.vw.gz", "news20/news20_test.vw.gz", "vw", True),
}


def score(L, tr, te, K):
    with np.errstate(all="ignore"):
        pred, _ = L.learn_batch(tr)
        L.finish()
        if te is None:
            return float(np.mean((pred > 0) != (tr.labels > 0)))
        p = L.predict_batch(te)[0]
    return float(np.mean(p == te.labels)) if K else float(np.mean((p > 0) != (te.labels > 0)))


#: ``--example_norm``'s sets: name -> (train, test or None)
NORM_SETS = {
    "a9a": ("a9a/a9a_train.libsvm.gz", "a9a/a9a_test.libsvm.gz"),
    "ijcnn1": ("ijcnn1/ijcnn1_train.libsvm.gz", "ijcnn1/ijcnn1_test.libsvm.gz"),
    "w8a": ("w8a/w8a_shuffled.libsvm.gz", None),
    "covtype20k": ("covtype_subset20k/covtype_subset20k.libsvm.gz", None),
    "splice": ("splice/splice.libsvm.gz", None),
    "cod-rna": ("cod-rna/cod-rna_shuffled.libsvm.gz", None),
    "reuters": ("reuters/reuters_train_shuffled.libsvm.gz", "reuters/reuters_test.libsvm.gz"),
    "news20_binary": ("news20/news20_binary_train.vw.gz", "news20/news20_binary_test.vw.gz"),
    "agaricus": ("agaricus/agaricus_train.libsvm.gz", "agaricus/agaricus_test.libsvm.gz"),
    "rcv1_small": ("vw_rcv1_small/rcv1_small_train.vw.gz", "vw_rcv1_small/rcv1_small_test.vw.gz"),
    "spambase": ("pmlb_spambase/spambase_shuffled.libsvm.gz", None),
    "magic": ("pmlb_magic/magic_shuffled.libsvm.gz", None),
}


def example_norm_table(losses):
    """One pass of the CLI's bear with ``--example_norm none`` and ``unit`` (every other option at its default)."""
    import re
    import tempfile

    from _common import DATASETS, need_shared, run, streamlearn_cmd

    need_shared()

    def num(pat, text):
        m = re.search(pat, text)
        return float(m.group(1)) if m else float("nan")

    print("\n## binary bear, one pass: --example_norm none (the rows as given) against unit (the default from "
          "2026-11-27)")
    print("| data | loss | none: prog. loss | none: prog. error | none: test error | unit: prog. loss "
          "| unit: prog. error | unit: test error |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "m.slm")
        for loss in losses:
            for name, (trp, tep) in NORM_SETS.items():
                cells = []
                for norm in ("none", "unit"):
                    _, _, err = run(streamlearn_cmd("train", DATASETS / trp, "--algo", "bear", "--loss_function", loss,
                                                    "--example_norm", norm, "-f", model))
                    test = float("nan")
                    if tep:
                        _, _, perr = run(streamlearn_cmd("predict", "-i", model, DATASETS / tep))
                        test = num(r"error rate = ([-\d.e+naif]+)", perr)
                    cells += [num(r"average loss = ([-\d.e+naif]+)", err), num(r"error rate = ([-\d.e+naif]+)", err), test]
                fmt = lambda x: "-" if x != x else (f"{x:.3g}" if x > 10 else f"{x:.4f}")  # noqa: E731
                print(f"| {name} | {loss} | " + " | ".join(fmt(x) for x in cells) + " |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", default="0.03,0.1,0.3,1")
    ap.add_argument("--losses", default="logistic,hinge")
    ap.add_argument("--example_norm", action="store_true",
                    help="only the table of binary bear's --example_norm none / unit (squared and logistic loss)")
    a = ap.parse_args()
    if a.example_norm:
        example_norm_table(["squared", "logistic"])
        return
    steps = [float(x) for x in a.steps.split(",")]
    tables = [(loss, BINARY, 0, (1.0, 0.1, 0.01, 0.0)) for loss in a.losses.split(",")]
    tables.append(("softmax (--oaa 20)", MULTI, 20, (1.0, 0.1, 0.01)))
    for loss, sets, K, damps in tables:
        cols = ["MISSION"] + [f"BEAR d={d:g}" for d in damps]
        print(f"\n## {loss}: test {'accuracy' if K else 'error'}, every other option at its default")
        print("| data | step | " + " | ".join(cols) + " |")
        print("|---|---|" + "---|" * len(cols))
        means = np.zeros((len(steps), len(cols)))
        for name, (trp, tep, fmt, nrm) in sets.items():
            tr, te = load(trp, fmt=fmt), (load(tep, fmt=fmt) if tep else None)
            if nrm:
                tr, te = unit_norm_rows(tr), unit_norm_rows(te)
            for i, lr in enumerate(steps):
                kw = dict(learning_rate=lr, **({"oaa": K} if K else {"loss_function": loss, "example_norm": "none"}))
                r = [score(Mission(**kw), tr, te, K)]
                r += [score(Bear(curvature_damping=d, **kw), tr, te, K) for d in damps]
                means[i] += np.array(r) / len(sets)
                print(f"| {name} | {lr:g} | " + " | ".join(f"{x:.3f}" for x in r) + " |", flush=True)
        for i, lr in enumerate(steps):
            print(f"| **mean** | {lr:g} | " + " | ".join(f"{x:.3f}" for x in means[i]) + " |")


if __name__ == "__main__":
    main()
