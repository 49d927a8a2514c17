"""The per-feature hash table of the sketched learners (Oja-SON, FD-SON, RFD-SON, S-ADA / FTSL):
their Python side (allocation, growth, loading); the kernels are in
:mod:`streamlearn.algos._feature_table_kernels`.

A learner mixes :class:`FeatureTable` in, sets ``self.ncol`` (the row width) and keeps
``self.keys`` (int64, -1 = free), ``self.tab`` (float64, cap x ncol) and ``self.shift``
(64 - log2(cap)); its kernels find a feature's slot with ``_feature_table_kernels._find``.
Nothing here is O(2^b): the capacity follows the features seen.
"""
from __future__ import annotations

import numpy as np

from ..kernels import lazy

__all__ = ["FeatureTable", "MIN_CAP"]

#: the smallest capacity (slots)
MIN_CAP = 1 << 10

_kernels = lazy("streamlearn.algos._feature_table_kernels")


def capacity_for(n: int, cap: int = MIN_CAP) -> int:
    """The smallest power-of-two capacity >= ``cap`` that holds ``n`` features at most half full."""
    while n > (cap >> 1):
        cap <<= 1
    return cap


class FeatureTable:
    """Mixin: ``keys`` / ``tab`` / ``shift`` of an open-addressing table of ``self.ncol`` columns."""

    def _alloc_table(self, cap: int) -> None:
        self.keys = np.full(cap, -1, np.int64)
        self.tab = np.zeros((cap, self.ncol))
        self.shift = 64 - (cap.bit_length() - 1)

    def _grow(self, needed: int) -> bool:
        """Double the capacity until ``needed`` features fit at most half full; True if it grew."""
        cap = capacity_for(needed, self.keys.shape[0])
        if cap == self.keys.shape[0]:
            return False
        old_keys, old_tab = self.keys, self.tab
        self._alloc_table(cap)
        _kernels.rehash(old_keys, old_tab, self.keys, self.tab, self.shift)
        return True

    def _sorted_slots(self) -> np.ndarray:
        """The occupied slots in ascending key order (what a saved model stores, so that its
        bytes do not depend on the table's capacity or insertion history)."""
        occ = np.flatnonzero(self.keys >= 0)
        return occ[np.argsort(self.keys[occ], kind="stable")]

    def _load_table(self, keys, rows) -> None:
        """A fresh table holding ``rows[i]`` at feature ``keys[i]`` (a loaded model)."""
        self._alloc_table(capacity_for(len(keys)))
        _kernels.rehash(np.array(keys, np.int64), rows, self.keys, self.tab, self.shift)
