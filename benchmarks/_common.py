"""Helpers shared by the benchmark scripts: locating ../shared, running commands with their
peak RSS, converting LIBSVM to VW text, reading VW's summary."""
from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("STREAMLEARN_SHARED", ROOT.parent / "shared"))
DATASETS = SHARED / "datasets"
VW_RUN = SHARED / "tools" / "vw_run"
GEN_SPARSE = SHARED / "tools" / "gen_sparse.py"
CACHE = Path(os.environ.get("STREAMLEARN_BENCH_DIR", "/tmp/streamlearn_bench"))


def read_batch(path, fmt="vw", keep_names=False):
    """One ``Batch`` with every row of the file ``path``, read as the CLI reads it (the constant feature
    added)."""
    from streamlearn.batch import concat_batches
    from streamlearn.io import ReaderConfig, read_batches

    bs = list(read_batches([str(path)], ReaderConfig(fmt=fmt, keep_names=keep_names)))
    return concat_batches(bs, names=keep_names) if len(bs) > 1 else bs[0]


def need_shared():
    if not DATASETS.exists() or not VW_RUN.exists():
        sys.exit(f"benchmarks need the shared folder with datasets and tools (looked in {SHARED}); "
                 "set STREAMLEARN_SHARED")
    CACHE.mkdir(parents=True, exist_ok=True)


def run(cmd, stdin=None, env=None):
    """Run ``cmd``; returns (wall seconds, peak RSS MB of the process tree, stdout, stderr)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = p.communicate()
    wall = time.perf_counter() - t
    # the children have been reaped by communicate(); RUSAGE_CHILDREN's maxrss is a running max,
    # so callers that need a per-run figure use peak_rss() below instead
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{err.decode()[-2000:]}")
    return wall, out.decode(), err.decode()


def run_rss(cmd, stdin=None):
    """Run ``cmd`` under /usr/bin/time -v; returns (wall s, peak RSS MB, stdout, stderr)."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "@@RSS %M", *map(str, cmd)], stdin=stdin,
                       capture_output=True)
    wall = time.perf_counter() - t
    err = p.stderr.decode()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{err[-2000:]}")
    m = re.findall(r"@@RSS (\d+)", err)
    rss = int(m[-1]) / 1024 if m else float("nan")
    return wall, rss, p.stdout.decode(), err


def repeat_producer(src, n: int, block_lines: int = 2000):
    """A process writing ``n`` lines to its stdout pipe by repeating the first ``block_lines``
    lines of ``src`` (a 10,000,000-example stream without storing it)."""
    gen = (
        "import sys\n"
        f"lines = open({str(src)!r}, 'rb').readlines()[:{block_lines}]\n"
        f"n = {n}; k = len(lines); block = b''.join(lines); out = sys.stdout.buffer\n"
        "full, rest = divmod(n, k)\n"
        "for _ in range(full): out.write(block)\n"
        "out.write(b''.join(lines[:rest])); out.flush()\n"
    )
    return subprocess.Popen([sys.executable, "-c", gen], stdout=subprocess.PIPE)


def streamlearn_cmd(*args):
    return [sys.executable, "-m", "streamlearn", *map(str, args)]


def vw_cmd(data, *args):
    return [str(VW_RUN), str(data), *map(str, args)]


def vw_summary(stderr: str) -> dict:
    out = {}
    for key, pat in [("examples", r"number of examples = (\d+)"), ("average_loss", r"average loss = ([-\d.naif]+)"),
                     ("wall", r"vw_run: wall=([\d.]+)")]:
        m = re.search(pat, stderr)
        if m:
            out[key] = float(m.group(1)) if key != "examples" else int(m.group(1))
    return out


def libsvm_to_vw(src: Path, dst: Path) -> Path:
    """``y i:v ...`` -> ``y | i:v ...`` (VW hashes an all-digit name in the default namespace to
    the number itself, so both tools see the same feature indices)."""
    if dst.exists():
        return dst
    op = gzip.open if str(src).endswith(".gz") else open
    tmp = dst.with_suffix(".tmp")
    with op(src, "rt") as f, open(tmp, "w") as g:
        for line in f:
            parts = line.split(None, 1)
            if not parts:
                continue
            g.write(f"{parts[0]} | {parts[1] if len(parts) > 1 else ''}".rstrip() + "\n")
    tmp.replace(dst)
    return dst


def gunzip_to(src: Path, dst: Path) -> Path:
    if not dst.exists():
        tmp = dst.with_suffix(".tmp")
        with gzip.open(src, "rb") as f, open(tmp, "wb") as g:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                g.write(b)
        tmp.replace(dst)
    return dst


def vw_text_sets(sets, only=()):
    """``(name, K, source file, VW text file)`` for each ``(name, path under DATASETS, K)`` of ``sets`` named in
    ``only`` (every one when empty), converted (LIBSVM) or unpacked (gzip) into CACHE once."""
    for name, rel, K in sets:
        if only and name not in only:
            continue
        src, dst = DATASETS / rel, CACHE / f"{name}.vw"
        yield name, K, src, (libsvm_to_vw(src, dst) if rel.endswith(".libsvm.gz") else gunzip_to(src, dst))


def gen_sparse(n=200_000) -> tuple[Path, Path]:
    prefix = CACHE / f"gs{n}"
    vw, ls = Path(str(prefix) + ".vw"), Path(str(prefix) + ".libsvm")
    if not (vw.exists() and ls.exists()):
        subprocess.run([sys.executable, str(GEN_SPARSE), "--n", str(n), "--out", str(prefix)], check=True)
    return vw, ls


def labels_of(path: Path):
    import numpy as np
    op = gzip.open if str(path).endswith(".gz") else open
    with op(path, "rt") as f:
        return np.array([float(line.split(None, 1)[0]) for line in f if line.strip()])


def read_preds(path: Path):
    import numpy as np
    with open(path) as f:
        return np.array([float(line.split()[0]) for line in f if line.strip()])


def metrics(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def table(rows, cols):
    widths = [max([len(str(c))] + [len(str(r.get(c, ""))) for r in rows]) for c in cols]
    line = "  ".join(str(c).ljust(w) for c, w in zip(cols, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(cols, widths)))
    return "\n".join(out)
