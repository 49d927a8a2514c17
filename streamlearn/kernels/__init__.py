"""The kernel seam: every compiled entry point, bound once per process to its C or numba
implementation.

Readers and learners call the names bound here as attributes of this module
(``kernels.parse_chunk(...)``: a name imported from it would miss a later :func:`configure`)
and never ask which backend runs them. The binding is made at the first use of one of them (importing
streamlearn loads neither numba nor the C library): to the C fast path
(:mod:`streamlearn.kernels._cfast`, bit-identical) when :func:`configure` allows it and the
library loads, else to the numba kernels. A C-bound name still calls numba for arguments its
guard (``_cfast.*_args_ok``) refuses, so results never depend on the backend.
:func:`configure` rebinds (the CLI calls it with ``STREAMLEARN_NO_C`` / ``STREAMLEARN_C_LIB``;
the library reads no environment variable); :func:`backend` says which one is bound.

Entry points: :func:`parse_chunk` (:mod:`streamlearn.io._text_kernels`), :func:`adagrad_run`
(:mod:`streamlearn.algos._adagrad_kernels`), :func:`hash_string_part`, :func:`wide_part`,
:func:`assemble_rows` (:mod:`streamlearn.io._parquet_kernels`), :func:`hash_spans`
(:mod:`streamlearn.io._hash_kernels`), and on top of them :func:`hash_strings` and
:func:`namespace_hash`.

Numba kernel modules (``io/_*_kernels.py``, ``algos/_<name>_kernels.py``) are reached through
one lazy-import idiom, :func:`lazy`, so that ``streamlearn --help`` and the C paths never
import numba::

    _kernels = lazy("streamlearn.algos._bear_kernels")   # module level, imports nothing
    _kernels.bear_run(...)                                # first use imports the module
"""
from __future__ import annotations

import importlib
import threading

from ._spans import string_spans

__all__ = ["lazy", "numba_fast_load", "is_cached", "kernel_array", "kernel_batch", "configure", "backend", "parse_chunk", "adagrad_run", "hash_string_part",
           "hash_spans", "wide_part", "assemble_rows", "hash_strings", "namespace_hash"]


class _Lazy:
    """A module imported on first attribute access (then cached in ``sys.modules``)."""

    __slots__ = ("_name", "_mod")

    def __init__(self, name: str):
        self._name = name
        self._mod = None

    def __getattr__(self, attr):
        mod = self._mod
        if mod is None:
            numba_fast_load()
            mod = self._mod = importlib.import_module(self._name)
        return getattr(mod, attr)

    def __repr__(self):
        return f"<lazy kernels {self._name}{' (loaded)' if self._mod is not None else ''}>"


_fast_load_done = False


def numba_fast_load() -> None:
    """Load numba kernels from the cache without numba's whole-context refresh
    (:mod:`streamlearn.kernels._numba_load`); called before the first kernel module is imported."""
    global _fast_load_done
    if not _fast_load_done:
        from . import _numba_load
        _numba_load.install()
        _fast_load_done = True


def lazy(name: str) -> _Lazy:
    """The numba kernel module ``name`` (dotted, absolute), imported on first attribute access.
    The one lazy-import idiom for kernel modules: bind it once at module level as ``_kernels``."""
    return _Lazy(name)


def is_cached(kernel) -> bool:
    """Whether calling the numba kernel ``kernel`` (a dispatcher) costs no compile: it has
    compiled in this process, or numba's on-disk cache holds an index for it (a stale index,
    after an edit of the kernel's file, still compiles). Non-numba callables: True."""
    if getattr(kernel, "signatures", None):
        return True
    cache = getattr(kernel, "_cache", None)
    path = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    if path is None:
        return not hasattr(kernel, "_cache")
    import os
    return os.path.exists(path)


def kernel_array(a, dtype):
    """``a`` as a numba kernel takes it: a C-contiguous, writable array of ``dtype`` (a copy only
    when ``a`` is not one). numba compiles one specialisation per array type, and read-only or
    non-contiguous arrays are other types (Parquet gives read-only labels and weights): so the
    learners pass every batch array through this, and a kernel compiled (or warmed up) on text
    serves every input."""
    import numpy as np

    a = np.ascontiguousarray(a, dtype)
    return a if a.flags.writeable else a.copy()


def kernel_batch(batch):
    """A :class:`~streamlearn.batch.Batch`'s CSR arrays as the learners' kernels take them:
    ``(offsets int64, indices uint32, values float64, labels float64, weights float64)``, each
    through :func:`kernel_array`."""
    import numpy as np

    return (kernel_array(batch.offsets, np.int64), kernel_array(batch.indices, np.uint32),
            kernel_array(batch.values, np.float64), kernel_array(batch.labels, np.float64),
            kernel_array(batch.weights, np.float64))


#: entry point -> (numba kernel module, name of its C guard in _cfast or None: always C)
_ENTRY_POINTS = {
    "parse_chunk": (lazy("streamlearn.io._text_kernels"), None),
    "adagrad_run": (lazy("streamlearn.algos._adagrad_kernels"), "adagrad_args_ok"),
    "hash_string_part": (lazy("streamlearn.io._parquet_kernels"), "hash_string_part_args_ok"),
    "hash_spans": (lazy("streamlearn.io._hash_kernels"), "hash_spans_args_ok"),
    "wide_part": (lazy("streamlearn.io._parquet_kernels"), "wide_part_args_ok"),
    "assemble_rows": (lazy("streamlearn.io._parquet_kernels"), "assemble_rows_args_ok"),
}

_lock = threading.RLock()
_use_c = True
_lib_path = None
_backend = None  # "c" / "numba" once bound


def configure(use_c: bool = True, lib_path: str | None = None) -> None:
    """Choose the backend: the C fast path (the library at ``lib_path``, default the one
    installed beside :mod:`streamlearn.kernels._cfast`) when ``use_c`` and it loads, else
    numba. Takes effect at the next use of an entry point (the binding is lazy)."""
    global _use_c, _lib_path, _backend
    with _lock:
        _use_c, _lib_path = bool(use_c), lib_path
        g = globals()
        for name in _ENTRY_POINTS:
            g.pop(name, None)
        _backend = None


def backend() -> str:
    """``"c"`` or ``"numba"``: the backend the entry points are bound to (binding them now if
    they are not yet)."""
    _bind()
    return _backend


def _numba_call(name, mod):
    def call(*args):
        return getattr(mod, name)(*args)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{mod._name}.{name}`` (numba)."
    return call


def _c_call(name, mod, c_fn, ok):
    def call(*args):
        if ok(*args):
            return c_fn(*args)
        return getattr(mod, name)(*args)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{mod._name}.{name}``: its C port where ``{ok.__name__}`` holds, else numba."
    return call


def _bind() -> None:
    global _backend
    if _backend is not None:
        return
    with _lock:
        if _backend is not None:
            return
        c = None
        if _use_c:
            from . import _cfast
            if _cfast.load(_lib_path) is not None:
                c = _cfast
        g = globals()
        for name, (mod, guard) in _ENTRY_POINTS.items():
            if c is None:
                g[name] = _numba_call(name, mod)
            elif guard is None:
                g[name] = getattr(c, name)
            else:
                g[name] = _c_call(name, mod, getattr(c, name), getattr(c, guard))
        _backend = "numba" if c is None else "c"


def __getattr__(name):
    """An entry point not bound yet: bind them all (PEP 562 module ``__getattr__``)."""
    if name in _ENTRY_POINTS:
        with _lock:
            _bind()
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _entry(name):
    """The bound entry point ``name`` (from inside this module, where ``__getattr__`` is not
    consulted)."""
    f = globals().get(name)
    return f if f is not None else __getattr__(name)


def hash_strings(names, seed: int = 0):
    """VW's ``hashstring`` of each of ``names`` (str/bytes) with one ``seed`` -> ``uint32``
    array, in one compiled call (:func:`hash_spans`)."""
    return _entry("hash_spans")(*string_spans(names, seed))


def namespace_hash(name) -> int:
    """Hash of a namespace name; ``None``, ``""`` and ``" "`` denote the default namespace (0)."""
    if name is None or name in ("", " ", b"", b" "):
        return 0
    return int(hash_strings([name], 0)[0])
