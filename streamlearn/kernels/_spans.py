"""Numba-free helper shared by the numba and the C hashing paths."""
from __future__ import annotations

import numpy as np

__all__ = ["string_spans"]


def string_spans(names, seed: int = 0):
    """Pack ``names`` (str/bytes) for the compiled ``hash_spans`` kernels: ``(buf, starts, ends,
    seeds)`` with every name ``buf[starts[i]:ends[i]]`` (UTF-8) and one 32-bit ``seed`` each."""
    enc = [n.encode("utf-8") if isinstance(n, str) else bytes(n) for n in names]
    lens = np.fromiter((len(b) for b in enc), dtype=np.int64, count=len(enc))
    ends = np.cumsum(lens)
    starts = ends - lens
    buf = np.frombuffer(b"".join(enc), dtype=np.uint8)
    if len(buf) == 0:
        buf = np.zeros(1, np.uint8)
    seeds = np.full(len(enc), seed & 0xFFFFFFFF, dtype=np.uint64)
    return buf, starts, ends, seeds
