"""Compiled kernels of the per-feature hash table that the sketched second-order learners
(Oja-SON, FD-SON, RFD-SON) keep their per-feature state in (:mod:`streamlearn.algos.feature_table`).

Open addressing with linear probing keyed by the masked feature index: ``keys[slot]`` (``EMPTY`` =
-1 = free) and ``tab[slot]`` the feature's row (the learner decides its columns). The capacity is a
power of two, 2^(64 - shift), kept at least twice the number of stored features; the home slot of
a key is Fibonacci hashing (Knuth, TAOCP vol. 3, Sec. 6.4: the top bits of ``key * 2^64 / phi``).
"""
import numpy as np
from numba import njit

from ..kernels._jit import KERNEL

__all__ = ["EMPTY", "HASH_MULT", "rehash"]

EMPTY = -1
HASH_MULT = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: Fibonacci hashing


@njit(cache=True, nogil=True, inline="always")
def _find(keys, key, shift, capmask):
    """Slot of ``key`` (>= 0), or ``-1 - slot`` of the empty slot where it would go."""
    h = np.int64((np.uint64(key) * HASH_MULT) >> np.uint64(shift))
    while True:
        k = keys[h]
        if k == key:
            return h
        if k == EMPTY:
            return -1 - h
        h = (h + 1) & capmask


@njit(**KERNEL)
def rehash(keys, tab, new_keys, new_tab, new_shift):
    """Move every occupied slot of ``(keys, tab)`` into the larger empty table ``(new_keys, new_tab)``."""
    capmask = new_keys.shape[0] - 1
    ncol = tab.shape[1]
    for s in range(keys.shape[0]):
        key = keys[s]
        if key == EMPTY:
            continue
        h = -1 - _find(new_keys, key, new_shift, capmask)
        new_keys[h] = key
        for c in range(ncol):
            new_tab[h, c] = tab[s, c]
