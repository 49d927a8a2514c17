"""Large, sparsely touched arrays that stay mostly non-resident.

Hashed feature tables (``-b 28``: 2^28 entries) and count sketches are touched only where
features land. numpy asks the kernel for transparent huge pages on large arrays (madvise),
so touching one feature faults in 2 MB around it and a sparsely used 1 GB table becomes
fully resident; :func:`lazy_zeros` opts out (4 kB pages, untouched ones never resident) and
:func:`lazy_copy` copies such an array without writing (and so touching) its zero pages.
"""
from __future__ import annotations

import numpy as np

__all__ = ["lazy_zeros", "lazy_copy"]

_BLOCK = 1 << 20


def _hugepage_switch():
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # numpy < 2
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            return None
    return _set_madvise_hugepage


def lazy_zeros(shape, dtype) -> np.ndarray:
    """``np.zeros(shape, dtype)`` with small pages: untouched entries cost no memory."""
    switch = _hugepage_switch()
    if switch is None:
        return np.zeros(shape, dtype)
    old = switch(False)
    try:
        return np.zeros(shape, dtype)
    finally:
        switch(old)


def lazy_copy(a) -> np.ndarray:
    """A copy of ``a`` (bit for bit, ``-0.0`` and NaN included) in a :func:`lazy_zeros` array,
    writing only the entries whose bits are not zero."""
    a = np.ascontiguousarray(a)
    if a.nbytes < (4 << 20) or a.dtype.itemsize not in (1, 2, 4, 8):
        return a.copy()
    out = lazy_zeros(a.shape, a.dtype)
    src, dst = a.reshape(-1), out.reshape(-1)
    bits = src.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])
    for i in range(0, src.size, _BLOCK):
        nz = np.flatnonzero(bits[i:i + _BLOCK]) + i
        dst[nz] = src[nz]
    return out
