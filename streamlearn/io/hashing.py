"""VW-compatible feature hashing: the one place where names become indices.

Rules (VW 9, checked against ``vw --audit``):

* namespace hash = ``hashstring(namespace, 0)``; the default namespace (``|`` followed by a
  blank) has hash 0;
* feature hash = ``hashstring(name, namespace_hash)``;
* ``hashstring(s, h)`` = ``int(s) + h`` (mod 2**32) when ``s`` is all digits (after trimming
  blanks), else MurmurHash3 x86_32 of the UTF-8 bytes of ``s`` with seed ``h``;
* the constant feature has hash :data:`CONSTANT_HASH` (11650396) and value 1;
* a quadratic feature ``f1 * f2`` has hash ``(h1 * 16777619) ^ h2`` (mod 2**32) and value
  ``v1 * v2``.

Hashes are full 32-bit values; learners mask them with ``(1 << bits) - 1``.

The scalar functions here are conveniences for Python code and tests; the readers hash inside
their compiled kernels (:mod:`streamlearn.io._hash_kernels`).
"""
from __future__ import annotations

import numpy as np

from ..kernels import hash_strings, namespace_hash, numba_fast_load  # the seam's (C or numba, bit-identical)

numba_fast_load()  # before the first numba kernel is loaded (kernels._numba_load)
from ._hash_kernels import (  # noqa: E402
    CONSTANT_HASH,
    FNV_PRIME,
    hash_spans,
)
from ._hash_kernels import hashstring as _hashstring_kernel  # noqa: E402
from ._hash_kernels import murmur3_32 as _murmur_kernel  # noqa: E402

__all__ = [
    "CONSTANT_HASH",
    "FNV_PRIME",
    "murmur3_32",
    "hashstring",
    "namespace_hash",
    "feature_hash",
    "quadratic_hash",
    "hash_strings",
    "hash_spans",
]


def _as_u8(s) -> np.ndarray:
    if isinstance(s, str):
        s = s.encode("utf-8")
    return np.frombuffer(bytes(s), dtype=np.uint8)


def murmur3_32(data, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of ``data`` (bytes or str, UTF-8) as an unsigned int; equals
    ``mmh3.hash(data, seed, signed=False)``."""
    a = _as_u8(data)
    return int(_murmur_kernel(a, 0, len(a), np.uint64(seed & 0xFFFFFFFF)))


def hashstring(s, seed: int = 0) -> int:
    """VW's ``hashstring(s, seed)`` (see module docstring)."""
    a = _as_u8(s)
    return int(_hashstring_kernel(a, 0, len(a), np.uint64(seed & 0xFFFFFFFF)))


def feature_hash(name, namespace: str | bytes | None = None) -> int:
    """Full 32-bit hash of feature ``name`` in ``namespace`` (default namespace if ``None``)."""
    return hashstring(name, namespace_hash(namespace))


def quadratic_hash(h1: int, h2: int) -> int:
    """Hash of the interaction of two features with hashes ``h1`` (first namespace) and ``h2``."""
    return ((h1 * FNV_PRIME) & 0xFFFFFFFF) ^ (h2 & 0xFFFFFFFF)

