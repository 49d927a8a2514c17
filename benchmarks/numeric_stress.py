#!/usr/bin/env python3
"""Numeric safety (issue 6, part 3): every learner over 1,000,000 examples whose feature
values span 1e-30..1e30 (log-uniform magnitudes, random signs) with importance weights up to
1e6, at -b 28. Each run must end normally (exit 0) with a model whose every float is finite;
the table also gives the largest |value| in the model, the peak RSS (untouched features of
the 2^28 table must not be resident) and the wall time.

    python3 benchmarks/numeric_stress.py                     # 1M examples, squared/logistic/hinge
    python3 benchmarks/numeric_stress.py --n 100000 --losses squared
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import _common  # noqa: E402
from stress_gen import stress_lines  # noqa: E402

LEARNERS = {
    "adagrad": [],
    "adagrad --adaptive": ["--adaptive"],
    "oja-son m=10": ["--algo", "oja-son", "--sketch_size", "10"],
    "bear": ["--algo", "bear"],
    "bear --no_clip": ["--algo", "bear", "--no_clip"],
    "mission": ["--algo", "mission"],
    "mission --no_clip": ["--algo", "mission", "--no_clip"],
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--bits", type=int, default=28)
    ap.add_argument("--losses", default="squared,logistic,hinge")
    ap.add_argument("--only", default=None)
    ap.add_argument("--workdir", default="/tmp/streamlearn_bench")
    a = ap.parse_args(argv)
    import numpy as np

    from streamlearn.api import load_model
    from streamlearn.io.model_file import all_finite

    wd = Path(a.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    data = wd / f"stress_{a.n}.vw"
    if not data.exists():
        with open(data, "wb") as f:
            for chunk in stress_lines(a.n, seed=0):
                f.write(chunk)
    model = wd / "stress.slm"
    print(f"{'learner':22s} {'loss':9s} {'examples':>10s} {'exit':>4s} {'finite':>6s} {'max |x| in model':>17s} "
          f"{'avg loss':>10s} {'RSS MB':>7s} {'wall s':>7s}")
    bad = 0
    for name, extra in LEARNERS.items():
        if a.only and a.only not in name:
            continue
        for loss in a.losses.split(","):
            if model.exists():
                model.unlink()
            cmd = _common.streamlearn_cmd("train", data, "-b", a.bits, "--loss_function", loss, "-f", model,
                                          "--quiet", "--metrics", wd / "stress.json", *extra)
            try:
                wall, rss, _, err = _common.run_rss(cmd)
                rc = 0
            except RuntimeError as e:
                wall, rss, rc, err = float("nan"), float("nan"), 1, str(e)
            finite, biggest, ex, avg = False, float("nan"), 0, float("nan")
            if rc == 0:
                import json
                m = json.loads((wd / "stress.json").read_text())
                ex, avg = m["examples"], m["average_loss"]
                learner, _, _ = load_model(str(model))
                _, arrays = learner.state_dict()
                fl = [np.asarray(v) for v in arrays.values() if np.asarray(v).dtype.kind == "f" and np.size(v)]
                finite = all(all_finite(v) for v in fl)
                biggest = max(float(np.abs(v).max()) for v in fl)
            else:
                print(err[-1500:], file=sys.stderr)
            bad += (rc != 0) or not finite
            print(f"{name:22s} {loss:9s} {ex:>10,d} {rc:>4d} {str(finite):>6s} {biggest:17.3g} {avg:10.3g} "
                  f"{rss:7.0f} {wall:7.1f}", flush=True)
    print("all finite, all exit 0: " + ("PASS" if bad == 0 else f"MISS ({bad} runs)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
