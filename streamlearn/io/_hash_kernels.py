"""Compiled VW-compatible hashing (only ``@njit`` functions and their constants).

* :func:`murmur3_32` is MurmurHash3 x86_32 (Austin Appleby, public domain), the hash VW
  calls ``uniform_hash``; it is tested bit for bit against the ``mmh3`` package.
* :func:`hashstring` is VW's ``hashstring`` (``vw/core/hashstring.h``, VW 9): surrounding
  bytes ``<= 0x20`` are trimmed; an all-digit name maps to ``int(name) + seed`` (mod 2**32),
  any other name to ``murmur3_32(name, seed)``. The namespace hash is
  ``hashstring(namespace, 0)`` and a feature hash ``hashstring(name, namespace_hash)``.
* :data:`FNV_PRIME` combines the hashes of interacting features (VW 9
  ``interactions_predict.h``; :mod:`streamlearn.io._interact_kernels`), mod 2**32 (equal to
  VW's 64-bit value under any ``-b <= 32`` mask).

All arithmetic is done in ``uint64`` and masked to 32 bits, so numba's integer typing never
widens to float.
"""
import numpy as np
from numba import njit

__all__ = [
    "murmur3_32",
    "hashstring",
    "hash_spans",
    "CONSTANT_HASH",
    "FNV_PRIME",
]

M32 = np.uint64(0xFFFFFFFF)
_C1 = np.uint64(0xCC9E2D51)
_C2 = np.uint64(0x1B873593)
_N = np.uint64(0xE6546B64)
_F1 = np.uint64(0x85EBCA6B)
_F2 = np.uint64(0xC2B2AE35)
_U5 = np.uint64(5)
_U8 = np.uint64(8)
_U10 = np.uint64(10)
_U13 = np.uint64(13)
_U15 = np.uint64(15)
_U16 = np.uint64(16)
_U17 = np.uint64(17)
_U19 = np.uint64(19)
_U24 = np.uint64(24)

#: VW's ``constant`` feature hash (``constant = 11650396`` in VW's ``constant.h``).
CONSTANT_HASH = 11650396
#: VW's ``FNV_prime`` used to combine hashes of interacting features.
FNV_PRIME = 16777619
_FNV = np.uint64(FNV_PRIME)


@njit(cache=True, nogil=True)
def murmur3_32(buf, start, end, seed):
    """MurmurHash3 x86_32 of ``buf[start:end]`` (``uint8`` array) with ``seed``; returns a
    ``uint64`` holding the unsigned 32-bit hash."""
    h = np.uint64(seed) & M32
    n = end - start
    nblocks = n // 4
    p = start
    for _ in range(nblocks):
        k = (np.uint64(buf[p]) | (np.uint64(buf[p + 1]) << _U8)
             | (np.uint64(buf[p + 2]) << _U16) | (np.uint64(buf[p + 3]) << _U24))
        k = (k * _C1) & M32
        k = ((k << _U15) | (k >> _U17)) & M32
        k = (k * _C2) & M32
        h ^= k
        h = ((h << _U13) | (h >> _U19)) & M32
        h = (h * _U5 + _N) & M32
        p += 4
    rem = n & 3
    if rem > 0:
        k = np.uint64(0)
        if rem == 3:
            k ^= np.uint64(buf[p + 2]) << _U16
        if rem >= 2:
            k ^= np.uint64(buf[p + 1]) << _U8
        k ^= np.uint64(buf[p])
        k = (k * _C1) & M32
        k = ((k << _U15) | (k >> _U17)) & M32
        k = (k * _C2) & M32
        h ^= k
    h ^= np.uint64(n)
    h ^= h >> _U16
    h = (h * _F1) & M32
    h ^= h >> _U13
    h = (h * _F2) & M32
    h ^= h >> _U16
    return h


@njit(cache=True, nogil=True)
def hashstring(buf, start, end, seed):
    """VW 9 ``hashstring`` of ``buf[start:end]`` with seed ``seed`` (``uint64``, 32-bit value).

    Bytes ``<= 0x20`` are trimmed at both ends; an empty name hashes to ``seed``; an all-digit
    name to ``int(name) + seed`` (mod 2**32); anything else to ``murmur3_32(name, seed)``.
    """
    s = start
    e = end
    while s < e and buf[s] <= 32:
        s += 1
    while e > s and buf[e - 1] <= 32:
        e -= 1
    ret = np.uint64(0)
    for p in range(s, e):
        c = buf[p]
        if c >= 48 and c <= 57:
            ret = (ret * _U10 + np.uint64(c - 48)) & M32
        else:
            return murmur3_32(buf, s, e, seed)
    return (ret + (np.uint64(seed) & M32)) & M32


@njit(cache=True, nogil=True)
def hash_spans(buf, starts, ends, seeds):
    """``hashstring`` of many spans of one ``uint8`` buffer at once -> ``uint32`` array.

    For readers that hold names as one buffer plus offsets (e.g. Arrow string columns)."""
    n = len(starts)
    out = np.empty(n, np.uint32)
    for i in range(n):
        out[i] = np.uint32(hashstring(buf, starts[i], ends[i], np.uint64(seeds[i])))
    return out
