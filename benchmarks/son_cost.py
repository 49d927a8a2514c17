"""Oja-SON cost flat in -b: wall time and peak RSS of ``streamlearn train --algo oja-son -m 10``
at -b 18, 22, 26 on the 200,000-example file of ``shared/tools/gen_sparse.py`` (VW text), and
examples/s against VW ``--OjaNewton --sketch_size 10`` at the same -b in the same run.

Targets (issue 3): wall(b=26) / wall(b=18) <= 1.3; examples/s at -b 18 >= 1.0x VW OjaNewton.
Each configuration is run --repeat times (best wall reported; RSS of that run). VW at -b 26 is
skipped unless --vw-26 (its O(m^2 2^b) start-up takes minutes and GBs there).

Run: python benchmarks/son_cost.py [--repeat 2] [--data /tmp/gs.vw] [--vw-26]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))

from _common import VW_RUN, run_rss, vw_summary  # noqa: E402

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/tmp/gs.vw")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--vw-26", action="store_true")
    a = ap.parse_args()
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
