"""Memory and time of loading a model (issue 16, defect 9: "loading a model costs about 3x the
file size in RAM"), side by side with another checkout (``--against DIR``, e.g. a clone of main).

For each learner, one model is trained on FILE (by this checkout; both checkouts read the same
format), then each checkout loads it in a fresh process: first a small model of the same
learner (imports, kernel modules), then the peak RSS is reset (``/proc/self/clear_refs``) and
the model is loaded with ``streamlearn.api.load_model``; the growth of the peak RSS (VmHWM) and
the load time are printed with the peak's ratio to the file size. Where a model's arrays are
stored raw, the state is the file and the ratio shows the cost of loading it (1 is the floor);
where tables are stored sparse (AdaGrad at large -b) the state is every 4 kB page a non-zero
lands on, far more than the file by design; Oja-SON keeps its stored rows in a hash table at
half load (about 2x the rows). Usage::

    python3 benchmarks/model_load_memory.py [FILE] [--multiclass FILE] [--against DIR]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import DATASETS  # noqa: E402

LEARNERS = {
    "adagrad -b 16": ["-b", "16"],  # tables stored raw (mostly non-zero)
    "adagrad -b 20": ["-b", "20"],  # stored sparse: the state is the table pages its non-zeros touch
    "adagrad --oaa 4 -b 22": ["-b", "22", "--oaa", "4"],
    "softmax --oaa 4 -b 20": ["-b", "20", "--oaa", "4", "--loss_function", "multiclass_logistic"],
    "oja-son m=40 -b 22": ["--algo", "oja-son", "--sketch_size", "40", "-b", "22"],
    "mission top_k 50000": ["--algo", "mission", "--top_k", "50000", "-b", "18"],
    "bear top_k 50000": ["--algo", "bear", "--top_k", "50000", "-b", "18"],
}

_PROBE = r"""
import os, sys, time
from streamlearn.api import load_model
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
load_model(sys.argv[1])
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status("VmRSS")
t = time.perf_counter()
learner, _, _ = load_model(sys.argv[2])
dt = time.perf_counter() - t
print(status("VmHWM") - before, dt)
"""


def _probe(checkout: Path, small: str, model: str):
    env = dict(os.environ, PYTHONPATH=str(checkout))
    r = subprocess.run([sys.executable, "-c", _PROBE, small, model], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return None, None
    peak, dt = r.stdout.split()
    return int(peak), float(dt)


def _train(data: str, out: str, opts, lines: int | None = None):
    cmd = [sys.executable, "-m", "streamlearn", "train", data, *opts, "-f", out, "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if lines is None:
        subprocess.run(cmd, check=True, env=env)
    else:  # a small model of the same learner: the first lines only
        import gzip
        opener = gzip.open if data.endswith(".gz") else open
        with opener(data, "rt") as f:
            head = "".join(next(f) for _ in range(lines))
        subprocess.run([*cmd[:4], "-", *cmd[5:]], input=head, text=True, check=True, env=env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", default=str(DATASETS / "vw_rcv1_small" / "rcv1_small_train.vw.gz"))
    ap.add_argument("--multiclass", default=str(DATASETS / "vw_rcv1_multiclass" / "rcv1_multiclass.vw.gz"),
                    help="data of the --oaa models (labels 1..4)")
    ap.add_argument("--against", type=Path, default=None, help="another checkout, e.g. a clone of main")
    a = ap.parse_args()
    if not os.access("/proc/self/clear_refs", os.W_OK):
        sys.exit("needs Linux's /proc/self/clear_refs")
    print(f"file: {a.file}")
    cols = f"{'learner':<24} {'file MB':>8} {'peak MB':>8} {'x file':>7} {'load s':>7}"
    if a.against:
        cols += f" | {'other MB':>8} {'x file':>7} {'load s':>7} {'ratio':>6}"
    print(cols)
    with tempfile.TemporaryDirectory() as d:
        for name, opts in LEARNERS.items():
            data = a.multiclass if "--oaa" in opts else a.file
            model, small = os.path.join(d, "m.slm"), os.path.join(d, "small.slm")
            try:
                _train(data, model, opts)
                _train(data, small, opts, lines=50)
            except subprocess.CalledProcessError:
                print(f"{name:<24} (training failed: labels of FILE do not fit)")
                continue
            size = os.path.getsize(model)
            peak, dt = _probe(ROOT, small, model)
            row = f"{name:<24} {size / 2**20:8.2f} {peak / 2**20:8.2f} {peak / size:7.2f} {dt:7.3f}"
            if a.against:
                p2, dt2 = _probe(a.against, small, model)
                row += (f" | {p2 / 2**20:8.2f} {p2 / size:7.2f} {dt2:7.3f} {p2 / max(peak, 1):6.2f}" if p2 is not None
                        else " | (does not load)")
            print(row, flush=True)


if __name__ == "__main__":
    main()
