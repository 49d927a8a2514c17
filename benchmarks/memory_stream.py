#!/usr/bin/env python3
"""Bounded memory for every learner (issue 6, part 6): peak RSS of ``train -`` fed N examples
through a pipe (default 10,000,000), next to a 100,000-example run of the same command, and
the RSS sampled over the run (at 25/50/75/100% of its wall time; the peaks are the kernel's
high-water marks, ``ru_maxrss``), for adagrad (VW's default rule and
--adaptive, plain AdaGrad), oja-son (m = 10), bear and mission.

The stream is generated on the fly by repeating a block of lines of the gen_sparse file (it
is created with ``../shared/tools/gen_sparse.py`` if missing), so nothing is stored on disk.

    python3 benchmarks/memory_stream.py                 # 10M examples per learner
    python3 benchmarks/memory_stream.py --n 1000000 --only bear
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

PY = sys.executable
CASES = {
    "adagrad": [],
    "adagrad --adaptive": ["--adaptive"],
    "oja-son m=10": ["--algo", "oja-son", "--sketch_size", "10"],
    "bear": ["--algo", "bear", "--loss_function", "logistic"],
    "mission": ["--algo", "mission", "--loss_function", "logistic"],
}


def run_stream(src: Path, n: int, extra, wd: Path):
    import psutil

    prod = _common.repeat_producer(src, n)
    metrics = wd / "memstream.json"
    cmd = [PY, "-m", "streamlearn", "train", "-", "--quiet", "--metrics", str(metrics), *extra]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=prod.stdout, stderr=subprocess.PIPE)
    prod.stdout.close()
    samples = []
    proc = psutil.Process(p.pid)

    done = threading.Event()

    def sample():  # never poll() the child: wait4 below must be the one that reaps it
        while not done.is_set():
            try:
                rss = proc.memory_info().rss
                if rss:  # 0 once the child is a zombie
                    samples.append((time.perf_counter() - t0, rss / 2**20))
            except psutil.Error:
                break
            done.wait(0.25)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    # the peak is the kernel's high-water mark of the process (wait4's ru_maxrss), not the
    # largest sample: a 0.3 s run gets one or two samples, which miss its peak
    err_chunks = []
    eth = threading.Thread(target=lambda: err_chunks.append(p.stderr.read()), daemon=True)
    eth.start()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    done.set()
    eth.join()
    th.join()
    prod.wait()
    if p.returncode:
        raise RuntimeError(b"".join(err_chunks).decode()[-2000:])
    ex = json.loads(metrics.read_text())["examples"]
    peak = ru.ru_maxrss / 1024  # KiB on Linux
    at = []
    for q in (0.25, 0.5, 0.75, 1.0):
        before = [r for t, r in samples if t <= q * wall]
        at.append(before[-1] if before else float("nan"))
    return wall, ex, peak, at


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--small", type=int, default=100_000)
    ap.add_argument("--workdir", default="/tmp/streamlearn_bench")
    ap.add_argument("--only", default=None, help="substring of the case names to run")
    a = ap.parse_args(argv)
    wd = Path(a.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    src = wd / "gs.vw"
    if not src.exists():
        _common.need_shared()
        vw, _ = _common.gen_sparse()
        src = vw
    rows = []
    for name, extra in CASES.items():
        if a.only and a.only not in name:
            continue
        w1, e1, r1, _ = run_stream(src, a.small, extra, wd)
        w2, e2, r2, at = run_stream(src, a.n, extra, wd)
        rows.append((name, e1, r1, e2, r2, r2 / r1, *at, w2))
        print(f"{name}: done ({w2:.0f} s)", file=sys.stderr, flush=True)
    hdr = (f"{'learner':22s} {'small n':>9s} {'peak MB':>8s} {'big n':>11s} {'peak MB':>8s} {'ratio':>6s} "
           f"{'RSS@25%':>8s} {'@50%':>7s} {'@75%':>7s} {'@100%':>7s} {'wall s':>7s}")
    print(hdr)
    for r in rows:
        print(f"{r[0]:22s} {r[1]:>9,d} {r[2]:8.0f} {r[3]:>11,d} {r[4]:8.0f} {r[5]:6.3f} "
              f"{r[6]:8.0f} {r[7]:7.0f} {r[8]:7.0f} {r[9]:7.0f} {r[10]:7.0f}")
    worst = max(r[5] for r in rows) if rows else float("nan")
    print(f"worst peak ratio {a.n:,} vs {a.small:,}: {worst:.3f} (target <= 1.1) "
          f"{'PASS' if worst <= 1.1 else 'MISS'}")
    return 0 if worst <= 1.1 else 1


if __name__ == "__main__":
    sys.exit(main())
