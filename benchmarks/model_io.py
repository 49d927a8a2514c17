"""Model save/load time at large -b (issue 15 part 6): AdaGrad's tables have 2^b entries; a
model that touched a few tens of thousands of features must save and load in its own size.

For each -b, one run of the default learner over FILE, then, side by side in this process:

* save: ``save_model`` as the CLI's ``-f`` does (the touched pages only), and the same with
  page tracking switched off (the whole-table scan every save did before);
* load: ``load_model`` as ``-i`` does (sparse arrays), and the former path (dense arrays from
  the file, then a copy of each table that scans it);

and checks that both saves wrote the same bytes. Usage::

    python3 benchmarks/model_io.py [FILE] [--bits 24 28 32]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks._common import DATASETS  # noqa: E402
from streamlearn.api import load_model, make_learner, save_model  # noqa: E402
from streamlearn.io import ReaderConfig, read_batches  # noqa: E402
from streamlearn.io.model_file import read_model  # noqa: E402
from streamlearn.memory import SparseTable, lazy_copy  # noqa: E402


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", default=str(DATASETS / "vw_rcv1_small" / "rcv1_small_train.vw.gz"))
    ap.add_argument("--bits", type=int, nargs="+", default=[24, 28, 32])
    a = ap.parse_args()
    batches = list(read_batches([a.file], ReaderConfig()))
    print(f"file: {a.file} ({sum(b.n for b in batches)} examples)")
    print(f"{'-b':>3} {'touched':>8} {'file KB':>8} {'train s':>8} {'save s':>7} {'scan s':>7} "
          f"{'ratio':>6} {'load s':>7} {'old s':>7} {'ratio':>6}  same bytes")
    with tempfile.TemporaryDirectory() as d:
        for bits in a.bits:
            learner = make_learner("adagrad", {"bit_precision": bits})
            t_train, _ = _timed(lambda: [learner.learn_batch(b) for b in batches])
            p1, p2 = os.path.join(d, "tracked.slm"), os.path.join(d, "scan.slm")
            t_save, _ = _timed(lambda: save_model(p1, learner, {}))
            learner.pages.active = False
            t_scan, _ = _timed(lambda: save_model(p2, learner, {}))
            learner.pages.active = True
            same = Path(p1).read_bytes() == Path(p2).read_bytes()
            t_load, (back, _, _) = _timed(lambda: load_model(p1))
            t_old, _ = _timed(lambda: [lazy_copy(v) for k, v in read_model(p1)[1].items() if k in "wGN"])
            w = read_model(p1, sparse=True)[1]["w"]
            touched = int(np.count_nonzero(w.vals if isinstance(w, SparseTable) else w))
            print(f"{bits:>3} {touched:>8} {os.path.getsize(p1) / 1024:>8.0f} {t_train:>8.2f} {t_save:>7.2f} "
                  f"{t_scan:>7.2f} {t_scan / t_save:>6.1f} {t_load:>7.2f} {t_old:>7.2f} {t_old / t_load:>6.1f}  {same}")


if __name__ == "__main__":
    main()
