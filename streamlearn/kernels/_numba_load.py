"""Loading cached numba kernels without numba's whole-context refresh (start-up time).

Before numba loads a function from its on-disk cache, ``Cache.load_overload`` calls
``target_context.refresh()``, which imports and installs every typing and lowering registry numba
has (numpy, linalg, random, typed containers, jitclass, the extensions' entry points): about 0.4 s
of CPU in every process that runs a numba kernel, most of a short run's start-up beside
``import numba`` itself. Code loaded from the cache never uses those registries: it is machine
code already. What it needs are the symbols it links against: numba's C helpers, the exception
objects and the math functions (installed when the target context is created) and the NRT's
allocator (installed by ``rtsys.initialize``, which the refresh would call first).

:func:`install` replaces ``load_overload`` with one that initialises the NRT (and injects Python's
hash secret, for code that hashes) and then loads. A cache entry that needs more than its machine
code (object mode, lifted loops, initialisers to re-run such as numpy.random's) gets numba's
full refresh first, as does every compile (numba's compiler refreshes
on its own), so only entries made of machine code take the short path. The loaded code is the
same either way (tests/test_numba_load.py compares the models of whole runs). numba's own
maintainers tried the same deferral (numba/numba pull request 9806).

Only numba versions whose cache format this was checked against are patched (``VERSIONS``);
any other version keeps numba's own path. Installed by :mod:`streamlearn.kernels` before it
imports the first kernel module.
"""
from __future__ import annotations

import threading

__all__ = ["install", "uninstall", "installed", "VERSIONS"]

# [low, high): numba versions whose Cache.load_overload / _load_overload / CompileResult payload
# this module was checked against (pyproject requires numba >= 0.59)
VERSIONS = ((0, 59), (0, 69))
# CompileResult._reduce's payload: (libdata, fndesc, env, signature, objectmode, lifted, typeann,
# reload_init, referenced_envs); a nopython function's referenced environments (its exceptions'
# arguments) are only handed to the code generator, as numba's path does
_PAYLOAD_LEN = 9

_lock = threading.Lock()
_stock = None  # numba's own Cache.load_overload while ours is installed


def _version_ok() -> bool:
    import numba
    try:
        v = tuple(int(p) for p in numba.__version__.split(".")[:2])
    except ValueError:
        return False
    return VERSIONS[0] <= v < VERSIONS[1]


def _machine_code_only(data) -> bool:
    """Whether a cache entry's payload is machine code alone (nothing the refresh would set up)."""
    if not isinstance(data, tuple) or len(data) != _PAYLOAD_LEN:
        return False
    objectmode, lifted, reload_init = data[4], data[5], data[7]
    return not objectmode and not lifted and not reload_init


def _load_overload(self, sig, target_context):
    """``numba.core.caching.Cache.load_overload`` without the refresh for machine-code entries."""
    from numba.core.runtime import rtsys
    with self._guard_against_spurious_io_errors():
        if not self._enabled:
            return None
        data = self._cache_file.load(self._index_key(sig, target_context.codegen()))
        if data is None:
            return None
        if _machine_code_only(data):
            rtsys.initialize(target_context)
            import numba.cpython.hashing  # noqa: F401  (injects the hash secret's symbols)
        else:
            target_context.refresh()
        return self._impl.rebuild(target_context, data)
    return None  # the guard swallowed an I/O error: numba compiles instead


def install() -> bool:
    """Install the short load path (idempotent); False when this numba version is not one it was
    checked against (numba's own path stays)."""
    global _stock
    with _lock:
        if _stock is not None:
            return True
        if not _version_ok():
            return False
        from numba.core import caching
        needed = ("_load_overload", "_guard_against_spurious_io_errors", "_index_key")
        if not all(hasattr(caching.Cache, n) for n in needed):
            return False
        _stock = caching.Cache.load_overload
        caching.Cache.load_overload = _load_overload
        return True


def uninstall() -> None:
    """Put numba's own ``load_overload`` back (tests compare the two paths)."""
    global _stock
    with _lock:
        if _stock is not None:
            from numba.core import caching
            caching.Cache.load_overload = _stock
            _stock = None


def installed() -> bool:
    return _stock is not None
