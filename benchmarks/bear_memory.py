"""Peak RSS of BEAR / MISSION over a stream with 10^7 distinct feature names.

The stream is generated on the fly (never held in memory): example i has 20 features named
``f<i*20+j>`` in namespace ``w`` (all distinct), hashed with the VW hash, a random label; each
generated block becomes a Batch with name spans pointing into its text (as the VW reader
gives). The learner's memory is the sketch (fixed by --sketch_bytes) + the top-k heap + a
constant; it must not grow with the number of distinct features. Peak RSS (ru_maxrss) is
printed after every 10^6 distinct features.

Run: python benchmarks/bear_memory.py [--algo bear] [--distinct 10000000] [--sketch_mb 16]
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from streamlearn.algos import LEARNERS  # noqa: E402
from streamlearn.batch import Batch  # noqa: E402


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def make_block(start, n, per, rng):
    """n examples x per distinct features; names f<id> in namespace w; hash = murmur3 of the
    name with the namespace hash as seed (VW's rule), via the compiled hash."""
    from streamlearn.algos._sketch_kernels import murmur3_u32_array
    ids = np.arange(start, start + n * per, dtype=np.int64)
    # text "w f<id> w f<id> ..." with spans
    names = [b"f%d" % i for i in ids.tolist()]
    lens = np.fromiter((len(x) for x in names), np.int64, len(names))
    tok = lens + 3  # "w " + name + " "
    pos = np.zeros(len(names) + 1, np.int64)
    np.cumsum(tok, out=pos[1:])
    text = np.frombuffer(b"".join(b"w " + x + b" " for x in names), np.uint8)
    keys = np.empty(len(ids), np.uint64)
    murmur3_u32_array((ids & 0xFFFFFFFF).astype(np.uint32), 0x77, keys)  # distinct keys per id
    offsets = np.arange(0, n * per + 1, per, dtype=np.int64)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return Batch(offsets, keys.astype(np.uint32), np.ones(n * per), y, np.ones(n),
                 text=text, name_start=pos[:-1] + 2, name_end=pos[:-1] + 2 + lens,
                 ns_start=pos[:-1], ns_end=pos[:-1] + 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--algo", default="bear", choices=["bear", "mission"])
    ap.add_argument("--distinct", type=int, default=10_000_000)
    ap.add_argument("--sketch_mb", type=float, default=16)
    ap.add_argument("--top_k", type=int, default=1000)
    ap.add_argument("--per", type=int, default=20)
    ap.add_argument("--block", type=int, default=5000)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    base0 = rss_mb()
    L = LEARNERS[a.algo](sketch_bytes=int(a.sketch_mb * 2**20), top_k=a.top_k,
                         loss_function="logistic", minibatch=10)
    warm = make_block(0, 20, a.per, rng)  # compile kernels before measuring
    L.predict_batch(warm)
    base = rss_mb()
    print(f"# {a.algo}: sketch {L.R} x {L.W} = {L.sketch.nbytes / 2**20:.1f} MiB, top_k {a.top_k}; "
          f"RSS before learner {base0:.0f} MiB, after compile {base:.0f} MiB")
    print("| distinct features | peak RSS MiB | growth since first row MiB | HLL estimate | CF | s |")
    print("|---|---|---|---|---|---|")
    t = time.time()
    seen = 0
    first = None
    step = a.block * a.per
    next_report = 1_000_000
    while seen < a.distinct:
        n = min(a.block, (a.distinct - seen) // a.per)
        if n <= 0:
            break
        L.learn_batch(make_block(seen, n, a.per, rng))
        seen += n * a.per
        if seen >= next_report or seen >= a.distinct:
            r = rss_mb()
            first = r if first is None else first
            s = L.extra_summary()
            print(f"| {seen:,} | {r:.0f} | {r - first:+.0f} | {s['distinct_features']:,} | "
                  f"{s['compression_factor']:.1f} | {time.time() - t:.0f} |", flush=True)
            next_report += 1_000_000
    L.finish()
    print(f"# model arrays: {L.model_arrays_bytes / 2**20:.1f} MiB; heap {int(L.hsize.sum())} names, "
          f"e.g. {L.top_features()[3][:3]}")


if __name__ == "__main__":
    main()
