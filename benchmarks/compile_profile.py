"""Where a learner's first-run compile time goes: numba's compile events per function.

Runs ``streamlearn warmup --algo A`` (every loss, ``--oaa``, save / load / predict, the readers) in a
child process with a fresh, empty ``NUMBA_CACHE_DIR`` and numba's ``numba:compile`` event recorder
installed, then prints, per compiled function and signature, its compile seconds excluding and
including the compiles nested inside it (a helper is compiled when its first caller is typed), and
two lists of avoidable work that earlier cuts came from:

* functions compiled more than once: usually a caller passing a constant (``0``, a module-level
  code), which numba types as ``Literal[int]`` and compiles a version for (pass ``np.int64(...)``);
* numba's own implementations taking over 0.2 s inside one of ``streamlearn``'s functions (e.g.
  ``b[:n] = a[:n]`` pulls in broadcasting with its error-message string code; ``np.argsort`` a
  quicksort).

Times are CPU seconds of the whole compile pipeline and vary by +-1-2 s per function with the
machine's load; the counts do not. ``--no_c`` profiles the numba readers (what runs without the C
library) with adagrad. Needs nothing from ../shared.

Run: python benchmarks/compile_profile.py --algo fd-son [--top 25] [--no_c]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time
from numba.core import event
with event.install_recorder("numba:compile") as rec:
    from streamlearn import api
    from streamlearn.cli.common import configure_kernels
    configure_kernels()
    t0 = time.process_time()
    api.warmup([sys.argv[1]])
    cpu = time.process_time() - t0
rows, stack = [], []
for ts, e in rec.buffer:
    d = e.data["dispatcher"]
    key = [d.py_func.__module__.replace("streamlearn.", ""), d.py_func.__name__, str(e.data["args"])]
    if e.is_start:
        stack.append([key, ts, 0.0])
    elif stack:
        k, t, child = stack.pop()
        rows.append([*k, ts - t - child, ts - t, stack[-1][0][:2] if stack else None])
        if stack:
            stack[-1][2] += ts - t
print(json.dumps({"cpu": cpu, "rows": rows}))
"""


def profile(algo: str, no_c: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="sl-numba-cache-") as cache:
        env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=cache)
        if no_c:
            env["STREAMLEARN_NO_C"] = "1"
        p = subprocess.run([sys.executable, "-c", _CHILD, algo], env=env, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"warmup --algo {algo} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", default="adagrad", help="learner whose warm-up is profiled")
    ap.add_argument("--no_c", action="store_true", help="without the C library (the numba readers)")
    ap.add_argument("--top", type=int, default=25, help="functions listed")
    a = ap.parse_args()
    out = profile(a.algo, a.no_c)
    rows = out["rows"]
    ours = [r for r in rows if r[0].startswith(("algos", "io", "kernels"))]
    print(f"warmup --algo {a.algo}{' (STREAMLEARN_NO_C=1)' if a.no_c else ''}: {out['cpu']:.1f} s CPU, "
          f"{len(rows)} compiles ({len(ours)} of streamlearn's functions); load average {os.getloadavg()[0]:.1f}")
    print(f"\n{'excl s':>7} {'incl s':>7}  function (signature)")
    for mod, name, args, excl, incl, _ in sorted(ours, key=lambda r: -r[3])[:a.top]:
        print(f"{excl:7.2f} {incl:7.2f}  {mod}.{name} {args[:70]}")
    count = {}
    for mod, name, *_ in ours:
        count[(mod, name)] = count.get((mod, name), 0) + 1
    multi = [(k, n) for k, n in count.items() if n > 1]
    print("\ncompiled more than once (a constant argument typed as a Literal?):")
    for (mod, name), n in sorted(multi, key=lambda x: -x[1]) or [(("-", "none"), 0)]:
        sigs = [r[2] for r in ours if (r[0], r[1]) == (mod, name)]
        print(f"  {n} x {mod}.{name}" + "".join(f"\n      {s}" for s in sigs))
    print("\nnumba's own implementations over 0.2 s inside streamlearn's functions:")
    heavy = [r for r in rows if not r[0].startswith(("algos", "io", "kernels")) and r[5]
             and r[5][0].startswith(("algos", "io", "kernels")) and r[4] > 0.2]
    for mod, name, args, excl, incl, parent in sorted(heavy, key=lambda r: -r[4]) or [["-", "none", "", 0, 0, ["", ""]]]:
        print(f"  {incl:5.2f} s  {mod}.{name} {args[:60]}  in {'.'.join(parent)}")


if __name__ == "__main__":
    main()
