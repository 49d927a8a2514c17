"""The numba options of every kernel, in one place (CONVENTIONS.md item 7; no numba import here).

``KERNEL``: an entry point called from Python: cached on disk, releases the GIL, no fastmath, and no
cfunc wrapper (only a first-class function call would use it; it is compiled for every entry point).
``INNER``: a helper called only from other kernels: the same, without the CPython and cfunc
wrappers numba otherwise generates (and compiles) for every function it compiles, nested or not.
A first run compiles each helper once, so the wrappers were a tenth of a learner's compile time.
Such a helper cannot be called from Python (numba would jump to a missing entry point), so
helpers are private (``_name``); where tests or a learner's Python side call one, a public
``name`` with ``KERNEL`` options calls it (compiled only by such a call, never by a run).
``tests/test_kernel_hygiene.py`` checks both rules.
"""
__all__ = ["KERNEL", "INNER"]

KERNEL = {"cache": True, "nogil": True, "no_cfunc_wrapper": True}
INNER = {"cache": True, "nogil": True, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
