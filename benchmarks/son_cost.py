"""Oja-SON cost flat in -b: wall time and peak RSS of ``streamlearn train --algo oja-son -m 10``
at -b 18, 22, 26 on the 200,000-example file of ``shared/tools/gen_sparse.py`` (VW text), and
examples/s against VW ``--OjaNewton --sketch_size 10`` at the same -b in the same run.

Targets (issue 3): wall(b=26) / wall(b=18) <= 1.3; examples/s at -b 18 >= 1.0x VW OjaNewton.
Each configuration is run --repeat times (best wall reported; RSS of that run). VW at -b 26 is
skipped unless --vw-26 (its O(m^2 2^b) start-up takes minutes and GBs there).

Run: python benchmarks/son_cost.py [--repeat 2] [--data /tmp/gs.vw] [--vw-26]

``--vs-m`` measures instead the learning time per example against the sketch size m (issue 16
defect 10: it grew like m^3, against the documented O(m^2 + m s)): the default learner on
rcv1_small (VW text, 1,000 examples of ~75 features, repeated as needed) in one process per tree,
each m learned in chunks of 50 examples until at least max(3 m, 600) examples (so every
amortised step, the full Gram-Schmidt every max(16, m) examples, is paid) or --budget seconds,
then the fitted exponent of time per example in m. ``--baseline REV`` runs the same measurement
with revision REV of this repository (git archive) in the same run: before / after side by side.

Run: python benchmarks/son_cost.py --vs-m [--baseline main] [--ms 10,50,100,200,400,800] [--budget 60]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402

from _common import VW_RUN, run_rss, table, vw_summary  # noqa: E402

N = 200_000


def ours(data, bits, m, out):
    cmd = [sys.executable, "-m", "streamlearn", "train", str(data), "--algo", "oja-son", "-b", str(bits),
           "--sketch_size", str(m), "--quiet", "--metrics", str(out)]
    wall, rss, _, _ = run_rss(cmd)
    met = json.loads(Path(out).read_text())
    return wall, rss, met


def vw(data, bits, m):
    wall, rss, _, err = run_rss([str(VW_RUN), str(data), "--OjaNewton", "--sketch_size", str(m), "-b", str(bits),
                                 "--binary"])
    s = vw_summary(err)
    return s.get("wall", wall), rss, s


#: run in a child process with a tree's package first on sys.path: prints one JSON line per m
_PER_M = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, TREE)
from streamlearn import api
from streamlearn.algos.oja_son import OjaSON
from streamlearn.batch import concat_batches
from streamlearn.io import read_batches
cfg = api.RunConfig(data=[DATA])
B = concat_batches(list(read_batches([DATA], api._reader_config(cfg, api._reader_settings(cfg), False))))
OjaSON(sketch_size=2).learn_batch(B.take(np.arange(20)))  # compile (numba cache) outside the timing
for m in MS:
    need = max(3 * m, 600)
    L = OjaSON(sketch_size=m, **HYPER)
    done, spent = 0, 0.0
    while done < need and spent < BUDGET:
        idx = np.arange(done, done + 50) % B.n
        t = time.perf_counter()
        L.learn_batch(B.take(idx))
        spent += time.perf_counter() - t
        done += 50
    print(json.dumps({"m": m, "n": done, "s": spent, "remat": L.n_remat}), flush=True)
"""


def per_m(tree, data, ms, budget, hyper):
    code = (f"TREE = {str(tree)!r}; DATA = {str(data)!r}; MS = {list(ms)!r}; BUDGET = {budget!r}; "
            f"HYPER = {hyper!r}\n" + _PER_M)
    env = dict(os.environ, STREAMLEARN_NO_C="1") if not any((Path(tree) / "streamlearn" / "kernels").glob("_cfast_lib*")) \
        else dict(os.environ)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return {r["m"]: r for r in map(json.loads, out.stdout.split("\n")[:-1])}


def _exponent(rows, lo):
    ms = [m for m in rows if m >= lo]
    if len(ms) < 2:
        return float("nan")
    x = np.log(ms)
    y = np.log([rows[m]["s"] / rows[m]["n"] for m in ms])
    return float(np.polyfit(x, y, 1)[0])


def vs_m(a):
    from _common import DATASETS, ROOT
    data = Path(a.data) if a.data != "/tmp/gs.vw" else DATASETS / "vw_rcv1_small" / "rcv1_small_train.vw.gz"
    ms = [int(x) for x in a.ms.split(",")]
    # this tree's defaults, the same with Oja's step uncapped (the numbers of the defaults before the
    # cap: Z then grows fast and re-materialisations, O(m^2 n) each, come often), and the baseline's
    trees = [("this tree", ROOT, {}), ("this tree, --oja_clip 0", ROOT, {"oja_clip": 0.0})]
    if a.baseline:
        from _baseline import baseline_tree
        trees.append((a.baseline, baseline_tree(a.baseline), {}))
    res = {label: per_m(tree, data, ms, a.budget, hyper) for label, tree, hyper in trees}
    print(f"Oja-SON learning time per example vs sketch size m on {data.name} (default options, -b 18; "
          f"chunks of 50 examples until max(3 m, 600) examples or {a.budget:g} s; learn_batch time only)")
    cols = ["m"]
    for label, _, _ in trees:
        cols += [f"{label} ms/ex", f"{label} n", f"{label} remats"]
    if a.baseline:
        cols.append("speed-up")
    rows = []
    for m in ms:
        row = {"m": m}
        for label, _, _ in trees:
            r = res[label][m]
            row.update({f"{label} ms/ex": f"{1e3 * r['s'] / r['n']:.3f}", f"{label} n": r["n"],
                        f"{label} remats": r["remat"]})
        if a.baseline:
            b, c = res[a.baseline][m], res["this tree"][m]
            row["speed-up"] = f"{(b['s'] / b['n']) / (c['s'] / c['n']):.1f}x"  # baseline / this tree
        rows.append(row)
    print(table(rows, cols))
    for label, _, _ in trees:
        print(f"{label}: fitted exponent of time per example in m: {_exponent(res[label], min(ms)):.2f} over all m, "
              f"{_exponent(res[label], 100):.2f} over m >= 100")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/tmp/gs.vw")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--vw-26", action="store_true")
    ap.add_argument("--vs-m", action="store_true", help="time per example against the sketch size m")
    ap.add_argument("--ms", default="10,50,100,200,400,800")
    ap.add_argument("--budget", type=float, default=60.0, help="--vs-m: seconds per m and tree at most")
    ap.add_argument("--baseline", default=None, help="--vs-m: also run revision REV of this repository")
    a = ap.parse_args()
    if a.vs_m:
        return vs_m(a)
    data = Path(a.data)
    if not data.exists():
        subprocess.run([sys.executable, str(Path(VW_RUN).parent / "gen_sparse.py"), "--out", str(data.with_suffix(""))],
                       check=True)
    out = Path(os.environ.get("STREAMLEARN_BENCH_DIR", "/tmp/streamlearn_bench"))
    out.mkdir(parents=True, exist_ok=True)
    # warm the numba cache so no run pays compilation
    ours(data, 18, 10, out / "son_cost_warm.json")
    rows = []
    for bits in (18, 22, 26):
        best = None
        for _ in range(a.repeat):
            r = ours(data, bits, 10, out / f"son_cost_{bits}.json")
            if best is None or r[0] < best[0]:
                best = r
        wall, rss, met = best
        row = {"b": bits, "wall": wall, "rss": rss, "learn_s": met.get("seconds"),
               "err": met.get("error_rate"), "loss": met.get("average_loss")}
        if bits < 26 or a.vw_26:
            vbest = None
            for _ in range(a.repeat):
                r = vw(data, bits, 10)
                if vbest is None or r[0] < vbest[0]:
                    vbest = r
            row.update(vw_wall=vbest[0], vw_rss=vbest[1], vw_err=vbest[2].get("average_loss"))
        rows.append(row)
    print(f"Oja-SON m=10 on {data} ({N:,} examples), best of {a.repeat}; wall = whole process "
          "(start-up, parsing, learning); VW via vw_run (wheel; its own timer).")
    print(f"{'-b':>3}  {'ours wall s':>11}  {'ours ex/s':>9}  {'ours RSS MB':>11}  {'ours err':>8}  "
          f"{'VW wall s':>9}  {'VW ex/s':>8}  {'VW RSS MB':>9}  {'VW err':>7}  {'ours/VW speed':>13}")
    for r in rows:
        line = (f"{r['b']:>3}  {r['wall']:>11.2f}  {N / r['wall']:>9,.0f}  {r['rss']:>11.0f}  {r['err']:>8.4f}  ")
        if "vw_wall" in r:
            line += (f"{r['vw_wall']:>9.2f}  {N / r['vw_wall']:>8,.0f}  {r['vw_rss']:>9.0f}  {r['vw_err']:>7.4f}  "
                     f"{r['vw_wall'] / r['wall']:>12.2f}x")
        else:
            line += f"{'(skipped)':>9}"
        print(line)
    w = {r["b"]: r["wall"] for r in rows}
    print(f"wall(b=26) / wall(b=18) = {w[26] / w[18]:.3f}  (target <= 1.3)")


if __name__ == "__main__":
    main()
