#!/usr/bin/env python3
"""Throughput of streamlearn vs Vowpal Wabbit on the same files, side by side (issue 5).

Generates the 200,000-example file with ``gen_sparse.py`` (VW text + LIBSVM), a gzip copy
and a Parquet conversion (``streamlearn convert``), then runs, alternating in one
process-level loop (``--reps`` rounds, each case once per round):

* VW (``vw_run FILE``): default learner (on the VW text and on its gzip copy: the gzip rows
  are compared with VW reading the same gzip file), and ``--OjaNewton --sketch_size 10``;
* streamlearn adagrad (VW's default rule and ``--adaptive``) on VW text, LIBSVM, gzip text, Parquet, and
  plain on a lean Parquet file (``convert --no_names --compression none``: only the columns an
  AdaGrad run reads, no decompression);
* streamlearn ``--algo oja-son --sketch_size 10`` (if registered) on VW text and Parquet;
* interactions: the same examples with their features split over namespaces ``a`` and ``b``
  (``gs.q.vw``), VW and streamlearn (both their default learner) with ``-q ab``, ``-q ::`` and
  ``--cubic aab``; with ``--baseline DIR`` (another checkout, e.g. the main branch) every
  streamlearn case also runs on that checkout, in the same rounds, and a before/after table
  follows (the change's cost on every input path, interleaved with it).

For each case: examples/s and MB/s over the process wall time, the in-run rate (VW: the
time ``vw_run`` reports around its Workspace; streamlearn: ``seconds`` of ``--metrics``, both
excluding interpreter start-up), peak RSS (``wait4`` rusage of the child tree) and the ratio to
the matching VW run (medians over the rounds), and the "marginal" rate: examples/s once
started, from the wall time minus that of the same command on the first 1,000 lines. Then: wall of a 1,000-line run with a warm
numba cache, wall of ``streamlearn --help``, ``python -c "import streamlearn.cli"`` module
check, and the peak RSS of ``train`` over a stream of ``--stream_n`` examples piped through
stdin vs a 100,000-example stream (lines generated on the fly by repeating a block of
gen_sparse lines).

Usage::

    python3 benchmarks/throughput.py                 # everything (~10 min on 2 cores)
    python3 benchmarks/throughput.py --no_stream     # skip the 10M-example RSS check
    python3 benchmarks/throughput.py --reps 5 --workdir /tmp/slbench

No timed assertions: the script prints the table and the targets, PASS/MISS.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(os.environ.get("STREAMLEARN_TOOLS", ROOT.parent / "shared" / "tools"))
if not TOOLS.exists():
    TOOLS = Path("/work/shared/tools")
PY = sys.executable
ENV = dict(os.environ)
ENV["PYTHONPATH"] = str(ROOT) + (os.pathsep + ENV["PYTHONPATH"] if ENV.get("PYTHONPATH") else "")
SL = [PY, "-m", "streamlearn"]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

#: input files gs.KIND (lean.parquet: ``convert --no_names --compression none``)
KINDS = ("vw", "libsvm", "vw.gz", "parquet", "lean.parquet", "q.vw")
SMALL_N = 1000  # the small file of each format: start-up cost, subtracted for "marginal" rates


def run(cmd, stdin=None, stdout=subprocess.DEVNULL, capture_err=True, shell=False):
    """Run ``cmd``; returns (wall seconds, peak RSS MB of the child tree, stderr text, rc);
    the CPU seconds (user + sys) of the child tree go to ``run.cpu``."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, env=ENV, shell=shell,
                         stderr=subprocess.PIPE if capture_err else None)
    err = p.stderr.read().decode("utf-8", "replace") if capture_err else ""
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    run.cpu = ru.ru_utime + ru.ru_stime
    return wall, ru.ru_maxrss / 1024.0, err, p.returncode


def learners():
    out = subprocess.run(SL + ["train", "--help"], capture_output=True, text=True, env=ENV).stdout
    m = re.search(r"--algo \[([^\]]+)\]", out)
    return m.group(1).split("|") if m else ["adagrad"]


def prepare(wd: Path, n: int):
    wd.mkdir(parents=True, exist_ok=True)
    gs = wd / "gs"
    if not (wd / "gs.vw").exists() or not (wd / "gs.libsvm").exists():
        subprocess.run([PY, str(TOOLS / "gen_sparse.py"), "--out", str(gs), "--n", str(n)], check=True)
    if not (wd / "gs.vw.gz").exists():
        with open(wd / "gs.vw.gz", "wb") as f:
            subprocess.run(["gzip", "-c", str(wd / "gs.vw")], stdout=f, check=True)
    for kind in ("vw", "libsvm"):
        small = wd / f"k1.{kind}"
        if not small.exists():
            with open(wd / f"gs.{kind}", "rb") as f, open(small, "wb") as g:
                g.writelines(f.readline() for _ in range(SMALL_N))
    if not (wd / "k1.vw.gz").exists():
        with open(wd / "k1.vw.gz", "wb") as f:
            subprocess.run(["gzip", "-c", str(wd / "k1.vw")], stdout=f, check=True)
    if not (wd / "k1.parquet").exists():
        run(SL + ["convert", str(wd / "k1.vw"), "-o", str(wd / "k1.parquet")])
    for stem in ("k1", "gs"):  # the lean Parquet case: no names/namespaces, no compression
        if not (wd / f"{stem}.lean.parquet").exists():
            run(SL + ["convert", str(wd / f"{stem}.vw"), "-o", str(wd / f"{stem}.lean.parquet"),
                      "--no_names", "--compression", "none"])
    for stem in ("gs", "k1"):  # namespaces a (first 20 features) and b (the rest), for -q
        if not (wd / f"{stem}.q.vw").exists():
            with open(wd / f"{stem}.vw") as f, open(wd / f"{stem}.q.vw", "w") as g:
                for line in f:
                    head, _, feats = line.partition("|")
                    toks = feats.split()
                    g.write(f"{head}|a {' '.join(toks[:20])} |b {' '.join(toks[20:])}\n")
    conv = None
    if not (wd / "gs.parquet").exists():
        conv, _, err, rc = run(SL + ["convert", str(wd / "gs.vw"), "-o", str(wd / "gs.parquet")])
        if rc:
            sys.exit("convert failed: " + err)
    return conv


def cases(wd: Path, bits: int, algos, baseline=None):
    vw = str(TOOLS / "vw_run")
    f = {k: str(wd / f"gs.{k}") for k in KINDS}
    c = [("VW default", "vw", [vw, f["vw"], "-b", str(bits), "--quiet"], None),
         ("VW default vw.gz", "vw.gz", [vw, f["vw.gz"], "-b", str(bits), "--quiet"], None),
         ("VW --OjaNewton m=10", "vw", [vw, f["vw"], "-b", str(bits), "--OjaNewton", "--sketch_size", "10",
                                        "--quiet"], None)]
    for plain in (False, True):  # VW's default rule (C path); plain AdaGrad, --adaptive (numba)
        for kind in ("vw", "libsvm", "vw.gz", "parquet"):
            extra = ["--adaptive", "-l", "0.1"] if plain else []
            name = f"sl adagrad{' --adaptive' if plain else ''} {kind}"
            c.append((name, kind, SL + ["train", f[kind], "-b", str(bits), "--quiet", "--metrics", "METRICS"] + extra,
                      "VW default vw.gz" if kind == "vw.gz" else "VW default"))
    c.append(("sl adagrad lean.parquet", "lean.parquet",
              SL + ["train", f["lean.parquet"], "-b", str(bits), "--quiet", "--metrics", "METRICS"], "VW default"))
    for flags in (["-q", "ab"], ["-q", "::"], ["--cubic", "aab"]):
        tag = " ".join(flags)
        c.append((f"VW {tag}", "q.vw", [vw, f["q.vw"], "-b", str(bits), "--quiet"] + flags, None))
        c.append((f"sl adagrad {tag}", "q.vw",
                  SL + ["train", f["q.vw"], "-b", str(bits), "--quiet", "--metrics", "METRICS"]
                  + flags, f"VW {tag}"))
    if "oja-son" in algos:
        for kind in ("vw", "parquet"):
            c.append((f"sl oja-son m=10 {kind}", kind,
                      SL + ["train", f[kind], "-b", str(bits), "--algo", "oja-son", "--sketch_size", "10",
                            "--quiet", "--metrics", "METRICS"], "VW --OjaNewton m=10"))
    if baseline:  # every streamlearn case on the other checkout too, in the same rounds
        for name, kind, cmd, base in list(c):
            if name.startswith("sl "):
                c.append(("base " + name[3:], kind, ["env", f"PYTHONPATH={baseline}"] + cmd, base))
    return c


def stream_rss(wd: Path, n: int, block_lines: int = 2000):
    """Peak RSS (MB) and wall of ``train -`` fed ``n`` generated examples through a pipe."""
    producer = _common.repeat_producer(wd / "gs.vw", n, block_lines)
    metrics = wd / f"stream_{n}.json"
    wall, rss, err, rc = run(SL + ["train", "-", "--quiet", "--metrics", str(metrics)], stdin=producer.stdout)
    producer.stdout.close()
    producer.wait()
    if rc:
        raise RuntimeError(err)
    ex = json.loads(metrics.read_text())["examples"]
    return wall, rss, ex


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", default="/tmp/streamlearn_bench")
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bits", type=int, default=18)
    ap.add_argument("--stream_n", type=int, default=10_000_000)
    ap.add_argument("--no_stream", action="store_true", help="skip the big stdin RSS check")
    ap.add_argument("--only", default=None, help="regex: run only the matching cases")
    ap.add_argument("--baseline", default=None,
                    help="another checkout (e.g. /work/main): every streamlearn case also runs on it "
                         "(same rounds; a before/after table follows)")
    ap.add_argument("--no_compile", action="store_true",
                    help="do not byte-compile the checkout first (see the note printed)")
    a = ap.parse_args(argv)
    wd = Path(a.workdir)
    conv = prepare(wd, a.n)
    if not a.no_compile:
        # pip install byte-compiles the package; a checkout without __pycache__ (or run with
        # PYTHONDONTWRITEBYTECODE=1, which never writes it) compiles every streamlearn module
        # in every run: ~0.05 s of start-up an install does not pay
        subprocess.run([PY, "-m", "compileall", "-q", str(ROOT / "streamlearn")], check=False,
                       stdout=subprocess.DEVNULL)
        print("# streamlearn byte-compiled first, as pip install does (--no_compile: not)")
    algos = learners()
    cs = cases(wd, a.bits, algos, a.baseline)
    if a.only:
        cs = [c for c in cs if re.search(a.only, c[0]) or c[0].startswith("VW")]
    sizes = {k: os.path.getsize(wd / f"gs.{k}") for k in KINDS}
    print(f"# data: {a.n} examples; bytes: " + ", ".join(f"{k}={v / 1e6:.1f} MB" for k, v in sizes.items()))
    if conv:
        print(f"# convert gs.vw -> gs.parquet: {conv:.2f} s")
    print(f"# cores: {os.cpu_count()}; load average before: {os.getloadavg()[0]:.2f}; "
          f"rounds: {a.reps} (alternating); learners: {', '.join(algos)}")
    # warm-up: numba caches, page cache
    for name, kind, cmd, _ in cs:
        run([x.replace("METRICS", str(wd / "warm.json")) for x in cmd])
    res = {c[0]: {"wall": [], "rss": [], "inrun": [], "cpu": [], "small": []} for c in cs}
    for r in range(a.reps):
        for name, kind, cmd, _ in cs:
            mpath = wd / "m.json"
            big = str(wd / f"gs.{kind}")
            small = [x.replace("METRICS", str(wd / "s.json")).replace(big, str(wd / f"k1.{kind}")) for x in cmd]
            res[name]["small"].append(run(small)[0])
            wall, rss, err, rc = run([x.replace("METRICS", str(mpath)) for x in cmd])
            if rc:
                print(f"! {name} failed (exit {rc}): {err.strip().splitlines()[-1:]}")
                continue
            if name.startswith("VW"):
                m = re.search(r"vw_run: wall=([\d.]+) s", err)
                inrun = float(m.group(1)) if m else wall
            else:
                inrun = json.loads(mpath.read_text())["seconds"]
            res[name]["wall"].append(wall)
            res[name]["rss"].append(rss)
            res[name]["inrun"].append(inrun)
            res[name]["cpu"].append(run.cpu)
    hdr = (f"{'case':34s} {'wall s':>7s} {'ex/s':>9s} {'MB/s':>7s} {'RSS MB':>7s} {'x VW':>6s} "
           f"{'in-run ex/s':>11s} {'x VW':>6s} {'CPU s':>6s} {'1k s':>5s} {'marg ex/s':>9s} {'x VW':>6s}")
    print(hdr)
    print("-" * len(hdr))
    med = {}
    for name, kind, cmd, base in cs:
        d = res[name]
        if not d["wall"]:
            continue
        w, i, rss = statistics.median(d["wall"]), statistics.median(d["inrun"]), max(d["rss"])
        s = statistics.median(d["small"])
        marg = (a.n - SMALL_N) / max(w - s, 1e-3)  # examples/s once started (start-up subtracted)
        med[name] = (w, i, marg)
        ratio = ratio_in = ratio_m = ""
        if base and base in med:
            ratio = f"{med[base][0] / w:6.2f}"
            ratio_in = f"{med[base][1] / i:6.2f}"
            ratio_m = f"{marg / med[base][2]:6.2f}"
        print(f"{name:34s} {w:7.2f} {a.n / w:9.0f} {sizes[kind] / 1e6 / w:7.1f} {rss:7.0f} {ratio:>6s} "
              f"{a.n / i:11.0f} {ratio_in:>6s} {statistics.median(d['cpu']):6.2f} {s:5.2f} {marg:9.0f} "
              f"{ratio_m:>6s}")

    if a.baseline:
        print(f"\nbefore/after: {a.baseline} (base) vs {ROOT} (this), medians of the same rounds")
        print(f"{'case':34s} {'base s':>7s} {'this s':>7s} {'base/this':>9s} {'in-run base/this':>16s}")
        for name, *_ in cs:
            other = "base " + name[3:]
            if name.startswith("sl ") and name in med and other in med:
                (wb, ib, _), (wt, it, _) = med[other], med[name]
                print(f"{name:34s} {wb:7.2f} {wt:7.2f} {wb / wt:9.3f} {ib / it:16.3f}")

    # start-up
    small = wd / "k1.vw"
    run(SL + ["train", str(small), "--quiet"])
    t1k = statistics.median(run(SL + ["train", str(small), "--quiet"])[0] for _ in range(5))
    th = statistics.median(run(SL + ["--help"])[0] for _ in range(5))
    tpy = statistics.median(run([PY, "-c", "pass"])[0] for _ in range(5))
    mods = subprocess.run([PY, "-c", "import sys, streamlearn.cli; print(' '.join(sorted({m.split('.')[0] "
                           "for m in sys.modules} & {'numba', 'pyarrow', 'scipy'})))"],
                          capture_output=True, text=True, env=ENV).stdout.strip()
    print(f"\n1,000-line train (warm cache): {t1k:.2f} s wall   streamlearn --help: {th:.2f} s   "
          f"(python -c pass: {tpy:.2f} s)")
    print(f"import streamlearn.cli pulls in: {mods or 'none of numba/pyarrow/scipy'}")

    stream = None
    if not a.no_stream:
        w1, r1, e1 = stream_rss(wd, 100_000)
        w2, r2, e2 = stream_rss(wd, a.stream_n)
        stream = (r1, r2)
        print(f"stdin stream: {e1:,} examples peak RSS {r1:.0f} MB ({w1:.1f} s); "
              f"{e2:,} examples peak RSS {r2:.0f} MB ({w2:.1f} s, {e2 / w2:,.0f} ex/s): ratio {r2 / r1:.3f}")

    print("\ntargets (process wall; in-run; marginal = start-up subtracted):")

    def tgt(label, name, base, need):
        if name in med and base in med:
            x, xi, xm = (med[base][0] / med[name][0], med[base][1] / med[name][1],
                         med[name][2] / med[base][2])
            verdict = " / ".join("PASS" if v >= need else "MISS" for v in (x, xi, xm))
            print(f"  {label}: {x:.2f}x / {xi:.2f}x / {xm:.2f}x (need >= {need}x) {verdict}")

    tgt("adagrad VW text", "sl adagrad vw", "VW default", 1.0)
    tgt("adagrad LIBSVM", "sl adagrad libsvm", "VW default", 1.0)
    tgt("adagrad Parquet vs VW on text", "sl adagrad parquet", "VW default", 2.0)
    tgt("adagrad lean Parquet vs VW on text", "sl adagrad lean.parquet", "VW default", 2.0)
    tgt("oja-son m=10 VW text", "sl oja-son m=10 vw", "VW --OjaNewton m=10", 1.0)
    print(f"  1,000-line warm run {t1k:.2f} s (<= 1.0) {'PASS' if t1k <= 1.0 else 'MISS'}")
    print(f"  --help {th:.2f} s (<= 0.5) {'PASS' if th <= 0.5 else 'MISS'}")
    if stream:
        print(f"  RSS {a.stream_n:,} vs 100k: {stream[1] / stream[0]:.3f} (<= 1.1) "
              f"{'PASS' if stream[1] <= 1.1 * stream[0] else 'MISS'}")
    print(f"# load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
