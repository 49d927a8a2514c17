"""The kernel seam: every compiled entry point, bound once per process to its C or numba
implementation.

Readers and learners call the names bound here and never ask which backend runs them.
Numba kernel modules (``io/_*_kernels.py``, ``algos/_<name>_kernels.py``) are reached through
one lazy-import idiom, :func:`lazy`, so that ``streamlearn --help`` and the C paths never
import numba::

    _kernels = lazy("streamlearn.algos._bear_kernels")   # module level, imports nothing
    _kernels.bear_run(...)                                # first use imports the module
"""
from __future__ import annotations

import importlib

__all__ = ["lazy"]


class _Lazy:
    """A module imported on first attribute access (then cached in ``sys.modules``)."""

    __slots__ = ("_name", "_mod")

    def __init__(self, name: str):
        self._name = name
        self._mod = None

    def __getattr__(self, attr):
        mod = self._mod
        if mod is None:
            mod = self._mod = importlib.import_module(self._name)
        return getattr(mod, attr)

    def __repr__(self):
        return f"<lazy kernels {self._name}{' (loaded)' if self._mod is not None else ''}>"


def lazy(name: str) -> _Lazy:
    """The numba kernel module ``name`` (dotted, absolute), imported on first attribute access.
    The one lazy-import idiom for kernel modules: bind it once at module level as ``_kernels``."""
    return _Lazy(name)
