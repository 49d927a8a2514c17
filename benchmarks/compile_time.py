"""First-run (cold numba cache) and warm-run times of ``streamlearn train`` per learner.

Each cold run is a fresh process with a fresh, empty ``NUMBA_CACHE_DIR``, so it compiles every
numba kernel the learner's run calls (issue 15 part 5: target under 15 s on a 1,000-line file);
the warm run repeats it with the cache the cold run filled. ``streamlearn warmup`` (all learners,
cold) is timed with ``--warmup``. Wall time depends on what else the machine runs; the CPU
seconds of the process (user + system) are steadier, so both are printed.

``--against DIR`` runs the same table for another checkout (e.g. a ``git worktree`` of the
commit before a change) interleaved with this one, run by run, so both are measured in the same
minutes, and prints the ratios. A checkout without its own C library uses this one's.

``--ir`` also counts, for each learner's cold run, the numba libraries compiled and the LLVM IR
lines they lower to and link (summed over libraries: a helper's code is linked and optimised
again inside each caller); these counts do not depend on the machine's load, so they show a
change's effect on a busy machine where the timings do not.

``--speed FILE`` (with ``--against``) also times warm runs (kernels cached) of each learner on
FILE for both checkouts, best of ``--speed_repeat``: a change that cuts compile time must not
slow the kernels.

Run: python benchmarks/compile_time.py [--lines 1000] [--repeat 2] [--algo bear ...]
                                       [--against /path/to/other/checkout] [--warmup] [--ir]
                                       [--speed FILE [--speed_repeat 3]]
(needs nothing from ../shared: the data are the first --lines lines of sample_data/a9a_train_3k).
"""
from __future__ import annotations

import argparse
import gzip
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALGOS = ("adagrad", "oja-son", "fd-son", "rfd-son", "bear", "mission")


def c_library(checkout: Path):
    libs = sorted((checkout / "streamlearn" / "kernels").glob("_cfast_lib*.so"))
    return libs[0] if libs else None


def timed(cmd, env, cwd):
    """Run ``cmd`` in ``cwd`` (``python -m`` imports from there first); returns (wall s, CPU s of the
    child (user + system))."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def env_for(checkout: Path, cache_dir: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout), NUMBA_CACHE_DIR=cache_dir)
    lib = c_library(checkout) or c_library(ROOT)
    if lib is not None and "STREAMLEARN_C_LIB" not in os.environ:
        env["STREAMLEARN_C_LIB"] = str(lib)
    return env


def train_cmd(algo, data):
    return [sys.executable, "-m", "streamlearn", "train", "--algo", algo, str(data), "--quiet"]


def measure(checkout: Path, algo: str, data: Path):
    """(cold wall, cold CPU, warm wall, warm CPU) of one learner in a fresh numba cache."""
    with tempfile.TemporaryDirectory(prefix="sl-numba-cache-") as cache:
        env = env_for(checkout, cache)
        cold = timed(train_cmd(algo, data), env, checkout)
        warm = timed(train_cmd(algo, data), env, checkout)
    return cold + warm


#: run in the child of an --ir run: counts the libraries numba finalizes and their IR lines
_IR_PROBE = """
import sys
from numba.core import codegen as cg
n = [0, 0, 0]
add, fin = cg.CPUCodeLibrary.add_ir_module, cg.CPUCodeLibrary.finalize
def add_ir_module(self, m):
    n[1] += str(m).count("\\n")
    return add(self, m)
def finalize(self):
    fin(self)
    n[0] += 1
    n[2] += str(self._final_module).count("\\n")
cg.CPUCodeLibrary.add_ir_module, cg.CPUCodeLibrary.finalize = add_ir_module, finalize
from streamlearn.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    if e.code:
        raise
print("IR", *n, file=sys.stderr)
"""


def measure_ir(checkout: Path, algo: str, data: Path):
    """(libraries compiled, lowered IR lines, optimised IR lines) of a cold run of ``algo``."""
    with tempfile.TemporaryDirectory(prefix="sl-numba-cache-") as cache:
        cmd = [sys.executable, "-c", _IR_PROBE, "train", "--algo", algo, str(data), "--quiet"]
        p = subprocess.run(cmd, env=env_for(checkout, cache), cwd=checkout, capture_output=True, text=True)
    line = [x for x in p.stderr.splitlines() if x.startswith("IR ")]
    if p.returncode != 0 or not line:
        raise RuntimeError(f"IR count of {algo} in {checkout} failed:\n{p.stderr[-2000:]}")
    return tuple(int(x) for x in line[-1].split()[1:])


def measure_warmup(checkout: Path):
    with tempfile.TemporaryDirectory(prefix="sl-numba-cache-") as cache:
        return timed([sys.executable, "-m", "streamlearn", "warmup"], env_for(checkout, cache), checkout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1000, help="lines of sample_data/a9a_train_3k.libsvm.gz")
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell (the best is shown)")
    ap.add_argument("--algo", action="append", choices=ALGOS, help="learner (may repeat; default all)")
    ap.add_argument("--against", type=Path, help="another checkout to compare with, run by run")
    ap.add_argument("--warmup", action="store_true", help="also time `streamlearn warmup` (all learners)")
    ap.add_argument("--ir", action="store_true", help="also count compiled libraries and IR lines (load-independent)")
    ap.add_argument("--speed", type=Path, help="also time warm runs on this file (kernel speed)")
    ap.add_argument("--speed_repeat", type=int, default=3)
    a = ap.parse_args()
    algos = a.algo or list(ALGOS)
    checkouts = [("this", ROOT)] + ([("against", a.against.resolve())] if a.against else [])
    with tempfile.TemporaryDirectory(prefix="sl-compile-time-") as d:
        data = Path(d) / f"a9a_{a.lines}.libsvm"
        with gzip.open(ROOT / "sample_data" / "a9a_train_3k.libsvm.gz", "rt") as f, open(data, "w") as out:
            for i, line in enumerate(f):
                if i >= a.lines:
                    break
                out.write(line)
        res = {}  # (checkout, algo) -> list of (cold wall, cold cpu, warm wall, warm cpu)
        for _ in range(a.repeat):
            for algo in algos:
                for name, path in checkouts:  # interleaved: both checkouts in the same minutes
                    res.setdefault((name, algo), []).append(measure(path, algo, data))
            if a.warmup:
                for name, path in checkouts:
                    res.setdefault((name, "warmup (all)"), []).append(measure_warmup(path) + (float("nan"),) * 2)
    rows = algos + (["warmup (all)"] if a.warmup else [])
    print(f"streamlearn train --algo A (first {a.lines} lines of a9a_train_3k), fresh NUMBA_CACHE_DIR per "
          f"cold run; best of {a.repeat}; load average at the end {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    hdr = f"{'learner':<14} {'cold wall s':>11} {'cold CPU s':>10} {'warm wall s':>11} {'warm CPU s':>10}"
    if a.against:
        hdr += f" | {'before wall':>11} {'before CPU':>10} {'before warm':>11} | {'cold CPU ratio':>14} {'cold wall ratio':>15}"
    print(hdr)
    for algo in rows:
        best = [min(v) for v in zip(*res[("this", algo)])]
        line = f"{algo:<14} {best[0]:>11.2f} {best[1]:>10.2f} {best[2]:>11.2f} {best[3]:>10.2f}"
        if a.against:
            other = [min(v) for v in zip(*res[("against", algo)])]
            line += (f" | {other[0]:>11.2f} {other[1]:>10.2f} {other[2]:>11.2f} | "
                     f"{best[1] / other[1]:>13.2f}x {best[0] / other[0]:>14.2f}x")
        print(line)
    print(f"(cold: a first run that compiles the learner's kernels; warm: the same run with them cached; "
          f"ratio = this / {a.against})" if a.against else "")
    if a.ir:
        with tempfile.TemporaryDirectory(prefix="sl-compile-ir-") as d:
            data = Path(d) / "a9a.libsvm"
            with gzip.open(ROOT / "sample_data" / "a9a_train_3k.libsvm.gz", "rt") as f, open(data, "w") as out:
                out.writelines(line for i, line in zip(range(a.lines), f))
            ir_table(algos, checkouts, data)
    if a.speed:
        speed(a.speed, algos, checkouts, a.speed_repeat)


def ir_table(algos, checkouts, data):
    """Compile work of each learner's cold run, counted (not timed)."""
    print("\ncompile work of a cold run (counts, independent of load): numba libraries compiled, LLVM IR "
          "lines lowered, IR lines linked and optimised (summed over libraries)")
    hdr = f"{'learner':<14} {'libraries':>9} {'lowered':>9} {'optimised':>9}"
    if len(checkouts) > 1:
        hdr += f" | {'before lib':>10} {'lowered':>9} {'optimised':>9} | {'lowered ratio':>13} {'optimised ratio':>15}"
    print(hdr)
    for algo in algos:
        res = [measure_ir(path, algo, data) for _, path in checkouts]
        line = f"{algo:<14} {res[0][0]:>9} {res[0][1]:>9} {res[0][2]:>9}"
        if len(res) > 1:
            o = res[1]
            line += f" | {o[0]:>10} {o[1]:>9} {o[2]:>9} | {res[0][1] / o[1]:>12.2f}x {res[0][2] / o[2]:>14.2f}x"
        print(line)


def speed(data: Path, algos, checkouts, repeat):
    """Warm runs (cache filled by a first run) of each learner on ``data``, best of ``repeat``,
    each checkout in turn."""
    best = {}
    with tempfile.TemporaryDirectory(prefix="sl-speed-") as d:
        for name, path in checkouts:
            for algo in algos:
                timed(train_cmd(algo, data), env_for(path, f"{d}/{name}"), path)  # compile once
        for _ in range(repeat):
            for algo in algos:
                for name, path in checkouts:
                    t = timed(train_cmd(algo, data), env_for(path, f"{d}/{name}"), path)
                    old = best.get((name, algo))
                    best[(name, algo)] = t if old is None else (min(old[0], t[0]), min(old[1], t[1]))
    print(f"\nkernel speed: warm `streamlearn train --algo A {data.name}`, best of {repeat}")
    hdr = f"{'learner':<14} {'wall s':>8} {'CPU s':>8}"
    if len(checkouts) > 1:
        hdr += f" | {'before wall':>11} {'before CPU':>10} | {'CPU ratio':>9} {'wall ratio':>10}"
    print(hdr)
    for algo in algos:
        w, c = best[("this", algo)]
        line = f"{algo:<14} {w:>8.2f} {c:>8.2f}"
        if len(checkouts) > 1:
            ow, oc = best[("against", algo)]
            line += f" | {ow:>11.2f} {oc:>10.2f} | {c / oc:>8.3f}x {w / ow:>9.3f}x"
        print(line)


if __name__ == "__main__":
    main()
