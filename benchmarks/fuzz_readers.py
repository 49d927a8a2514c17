#!/usr/bin/env python3
"""Long fuzz run of the VW text, LIBSVM and Parquet readers against the pure-Python oracle of
``tests/fuzz_oracle.py`` (issue 6, part 1).

For each text format, ``--lines`` random lines (default 100,000) in files of
``--lines_per_file`` lines: mostly well-formed lines, a quarter of them damaged (bad numbers,
``nan``/``inf``, ``1e400``, stray ``|`` and ``:``, invalid UTF-8, NUL bytes, cuts), LF / CRLF /
mixed line ends, with or without a final newline, random ``-q`` pairs, ``--noconstant``,
feature names kept or not, random chunk sizes; each file read in memory, from a file or by
the CLI's parallel reader (2 threads), plain and ``strict``. Then per format the special
files: empty, 1 MB lines (good, and bad at their very end), a 2 MB number, random bytes.
For Parquet, ``--parquet`` random tables (accepted schemas, then wrong column types,
missing / renamed / duplicated columns, list<string> where list<int> is expected, nulls,
NaN, inf, nested types), read with random -q / names / record-batch sizes; and
``--damaged`` Parquet files with random truncations / flipped bytes, read in a child process
(so a crash in the Parquet library itself would be counted, not fatal).

Every line must be parsed exactly as the oracle says (or, if malformed, skipped and reported
as ``(file, line, reason)`` with the oracle's reason; ``strict`` must stop there with
``FILE:LINE: reason``). Prints one table (format, lines generated, good lines, bad lines,
mismatches vs oracle, crashes, seconds) and exits 1 on any mismatch or crash.

Usage::

    nice python3 benchmarks/fuzz_readers.py                 # 100,000 lines per text format
    nice python3 benchmarks/fuzz_readers.py --lines 1000000 --parquet 20000 --seed 7

Needs nothing from ../shared.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import fuzz_oracle as fo  # noqa: E402


def text_run(fmt, n_lines, per_file, seed, workdir, log):
    res = fo.CaseResult()
    generated = 0
    k = 0
    while generated < n_lines:
        r = random.Random(f"{seed}-{fmt}-{k}")
        k += 1
        n = min(per_file, n_lines - generated)
        lines = fo.gen_lines(r, fmt, n, p_mutate=0.25)
        data = fo.join_lines(r, lines)
        generated += n
        cfg = fo.random_config(r, fmt)
        reader = r.choice(["memory", "memory", "file", "parallel"])
        path = None
        if reader != "memory":
            path = workdir / f"fuzz_{fmt}_{k}.{fmt}"
            path.write_bytes(data)
        res.add(fo.check_text(data, fmt, path=path, reader=reader, **cfg))
        if path is not None:
            path.unlink()
        if k % 20 == 0:
            log(f"  {fmt}: {generated} lines, {len(res.mismatches)} mismatches, "
                f"{len(res.crashes)} crashes")
    # the special files
    r = random.Random(f"{seed}-{fmt}-special")
    specials = [b"", b"\n\n \t\r\n", fo.long_line(fmt, 1 << 20) + b"\n",
                fo.long_line(fmt, 1 << 20, bad_at_end=True),  # no final newline either
                (b"1 |a x:0." if fmt == "vw" else b"1 1:0.") + b"0" * 2000000 + b"1e2000001\n"]
    specials += [bytes(r.randrange(256) for _ in range(r.randrange(2000))) for _ in range(50)]
    for data in specials:
        generated += len(fo.text_lines(data))
        res.add(fo.check_text(data, fmt, chunk_bytes=r.choice([1 << 12, 1 << 20])))
    return generated, res


def parquet_run(n_tables, seed, workdir, log):
    res = fo.CaseResult()
    rows = rejected = 0
    path = workdir / "fuzz.parquet"
    for k in range(n_tables):
        r = random.Random(f"{seed}-parquet-{k}")
        table = fo.gen_parquet_table(r)
        cfg = fo.random_config(r, "vw")
        one = fo.check_parquet(table, path, pairs=cfg["pairs"], constant=cfg["constant"],
                               keep_names=cfg["keep_names"],
                               batch_rows=r.choice([None, 1, 2, 5]))
        rows += table.num_rows
        try:
            fo.parquet_plan(table.schema)
        except fo.SchemaError:
            rejected += 1
        res.add(one)
        if (k + 1) % 500 == 0:
            log(f"  parquet: {k + 1} tables, {len(res.mismatches)} mismatches, "
                f"{len(res.crashes)} crashes")
    return rows, rejected, res


def damaged_child(n, seed, workdir):
    """(child process) Read ``n`` damaged Parquet files; print JSON counts."""
    import pyarrow.parquet as pq

    from streamlearn.errors import InputError
    from streamlearn.io import ReaderConfig, read_batches

    r = random.Random(f"{seed}-damaged")
    crashes = []
    errors = ok = 0
    for k in range(n):
        t = fo.gen_parquet_table(random.Random(f"{seed}-damaged-{k}"), n_rows=r.randint(1, 300))
        p = workdir / f"damaged_{k}.parquet"
        try:
            pq.write_table(t, p, compression=r.choice(["none", "snappy", "zstd"]))
        except Exception:  # noqa: BLE001
            continue
        data = bytearray(p.read_bytes())
        if r.random() < 0.3:
            data = data[: r.randrange(0, len(data))]
        else:
            # mostly in the data pages (the first half), some in the footer
            hi = len(data) // 2 if r.random() < 0.7 else len(data)
            for _ in range(r.randint(1, 16)):
                data[r.randrange(4, max(5, hi))] = r.randrange(256)
        p.write_bytes(bytes(data))
        try:
            for _ in read_batches([str(p)], ReaderConfig(fmt="parquet")):
                pass
            ok += 1
        except InputError as e:
            errors += 1
            if str(p) not in str(e):
                crashes.append(f"error does not name the file: {e}")
        except Exception as e:  # noqa: BLE001
            crashes.append(f"{type(e).__name__}: {e}")
        p.unlink()
    print(json.dumps({"n": n, "errors": errors, "ok": ok, "crashes": crashes}))


def damaged_run(n, seed, workdir):
    run = subprocess.run([sys.executable, __file__, "--damaged_child", str(n), "--seed", str(seed),
                          "--workdir", str(workdir)], capture_output=True, text=True)
    if run.returncode != 0:
        return {"n": n, "errors": 0, "ok": 0,
                "crashes": [f"child exited {run.returncode}: {run.stderr[-2000:]}"]}
    return json.loads(run.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=100_000, help="lines per text format")
    ap.add_argument("--lines_per_file", type=int, default=1000)
    ap.add_argument("--parquet", type=int, default=3000, help="random Parquet tables")
    ap.add_argument("--damaged", type=int, default=500, help="damaged Parquet files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--damaged_child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="streamlearn_fuzz_"))
    workdir.mkdir(parents=True, exist_ok=True)
    if a.damaged_child is not None:
        damaged_child(a.damaged_child, a.seed, workdir)
        return 0

    def log(msg):
        if not a.quiet:
            print(msg, file=sys.stderr, flush=True)

    rows = []
    details = []
    for fmt in ("vw", "libsvm"):
        t = time.time()
        gen, res = text_run(fmt, a.lines, a.lines_per_file, a.seed, workdir, log)
        rows.append((fmt, gen, res.good, res.bad, len(res.mismatches), len(res.crashes),
                     time.time() - t))
        details += res.mismatches[:5] + res.crashes[:5]
    t = time.time()
    n_rows, rejected, res = parquet_run(a.parquet, a.seed, workdir, log)
    rows.append((f"parquet ({a.parquet} tables, {rejected} rejected)", n_rows, res.good,
                 res.bad - rejected, len(res.mismatches), len(res.crashes), time.time() - t))
    details += res.mismatches[:5] + res.crashes[:5]
    t = time.time()
    dmg = damaged_run(a.damaged, a.seed, workdir)
    rows.append((f"parquet damaged bytes ({dmg['errors']} InputError, {dmg['ok']} read)",
                 dmg["n"], None, None, 0, len(dmg["crashes"]), time.time() - t))
    details += dmg["crashes"][:5]

    head = ("format", "lines generated", "good lines", "bad lines", "mismatches", "crashes",
            "seconds")
    w0 = max(len(head[0]), *(len(r[0]) for r in rows))
    print(f"{head[0]:<{w0}} " + " ".join(f"{h:>15}" for h in head[1:]))
    for r in rows:
        cells = ["-" if x is None else (f"{x:.1f}" if isinstance(x, float) else str(x)) for x in r[1:]]
        print(f"{r[0]:<{w0}} " + " ".join(f"{c:>15}" for c in cells))
    print("(parquet: lines = rows; bad = rows skipped and reported; a rejected table is one "
          "error naming the column)")
    bad = sum(r[4] + r[5] for r in rows)
    if bad:
        print("\nFAIL: first mismatches / crashes:")
        for d in details[:20]:
            print("  " + d.replace("\n", "\n  "))
        return 1
    print("OK: no mismatch, no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
