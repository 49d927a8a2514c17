"""The C fast path (``streamlearn/kernels/_c/cfast.c``), loaded with :mod:`ctypes`: one wrapper
per entry point, each with its argument guard (``*_args_ok``) beside it.

The library is a plain C99 port of the numba kernels on the start-up-critical path of a
``train --algo adagrad`` run over VW text, LIBSVM or Parquet: the chunk parser
(:func:`streamlearn.io._text_kernels.parse_chunk`), the Parquet reader's kernels
(:mod:`streamlearn.io._parquet_kernels` and :func:`streamlearn.io._hash_kernels.hash_spans`),
VW's hashing and the AdaGrad kernel (:func:`streamlearn.algos._adagrad_kernels.adagrad_run`).
It gives bit-identical results (tests/test_cfast.py) without importing numba, whose start-up
(import, target initialisation, cache loads: ~0.6 CPU-s) costs more than such a run's parsing
and learning. The numba kernels stay the reference and the fallback: :mod:`streamlearn.kernels`
binds each entry point to the wrapper here when the library loads, and calls numba wherever a
guard says the C port would not compute exactly what numba computes.

The library is compiled by ``pip install`` (``setup.py``, an extension without Python API
use) beside this module; :func:`load` takes another path (the CLI passes ``STREAMLEARN_C_LIB``;
the tests use it for a checkout). ctypes calls release the GIL, so the reader and parser
threads keep overlapping with the learner as with the ``nogil`` numba kernels.
"""
from __future__ import annotations

import ctypes
import glob
import os
import threading

import numpy as np

__all__ = ["load", "lib", "library_path", "parse_chunk", "adagrad_args_ok", "adagrad_rule_ok", "adagrad_run",
           "hash_string_part_args_ok", "hash_string_part", "hash_spans_args_ok", "hash_spans",
           "wide_part_args_ok", "wide_part", "assemble_rows_args_ok", "assemble_rows",
           "murmur3_32", "hashstring", "scan_float", "pow10_entry", "wexpmx"]

_lock = threading.Lock()
_lib = None  # the loaded CDLL (None: not loaded yet)
_lib_path = None  # the path it was loaded from
_c_i64 = ctypes.c_int64
_p = ctypes.c_void_p


class _ParseOut(ctypes.Structure):
    """``cf_parse_out`` of cfast.c."""
    _fields_ = [(name, _p) for name in (
        "offsets", "indices", "values", "labels", "weights", "ex_line", "tag_start", "tag_end",
        "name_start", "name_end", "ns_start", "ns_end", "err_line", "err_code")] + [
        (name, _c_i64) for name in ("n_ex", "nnz", "nn", "n_err", "n_lines", "cap", "feat_owned")] + [
        ("letters", _p), ("scr_a", _p), ("scr_b", _p)]


def library_path(path: str | None = None) -> str | None:
    """``path`` if it is a file, else (no ``path``) the compiled library beside this module,
    or None."""
    if path:
        return path if os.path.isfile(path) else None
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "_cfast_lib*.so"))
                   + glob.glob(os.path.join(here, "_cfast_lib*.pyd"))
                   + glob.glob(os.path.join(here, "_cfast_lib*.dylib")))
    return found[0] if found else None


def load(path: str | None = None):
    """The library at ``path`` (default: the one beside this module), loaded once; None when
    there is none or it cannot be loaded. The wrappers below call the last one loaded."""
    global _lib, _lib_path
    with _lock:
        found = library_path(path)
        if found is None:
            return None
        if _lib is not None and _lib_path == found:
            return _lib
        try:
            lib = ctypes.CDLL(found)
            _declare(lib)
        except (OSError, AttributeError):
            return None
        _lib, _lib_path = lib, found
        return lib


def _declare(lib):
    u64, i64, dbl = ctypes.c_uint64, ctypes.c_int64, ctypes.c_double
    lib.cf_murmur3_32.argtypes = [_p, i64, i64, u64]
    lib.cf_murmur3_32.restype = u64
    lib.cf_hashstring.argtypes = [_p, i64, i64, u64]
    lib.cf_hashstring.restype = u64
    lib.cf_scan_float.argtypes = [_p, i64, i64, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(i64)]
    lib.cf_scan_float.restype = dbl
    lib.cf_pow10_entry.argtypes = [i64, ctypes.POINTER(dbl), ctypes.POINTER(dbl)]
    lib.cf_pow10_entry.restype = None
    lib.cf_wexpmx.argtypes = [dbl]
    lib.cf_wexpmx.restype = dbl
    lib.cf_count_byte.argtypes = [_p, i64, i64]
    lib.cf_count_byte.restype = i64
    lib.cf_parse_chunk.argtypes = [_p, i64, i64, _p, _p, i64, _p, i64, i64, i64, ctypes.POINTER(_ParseOut)]
    lib.cf_parse_chunk.restype = ctypes.c_int
    lib.cf_parse_free.argtypes = [ctypes.POINTER(_ParseOut)]
    lib.cf_parse_free.restype = None
    lib.cf_adagrad_run.argtypes = [_p, _p, _p, _p, _p, i64, _p, _p, _p, _p, i64, i64, dbl, i64, i64, _p, _p, _p]
    lib.cf_adagrad_run.restype = i64
    lib.cf_hash_string_part.argtypes = [_p, _p, i64, i64, u64, _p]
    lib.cf_hash_string_part.restype = None
    lib.cf_hash_spans.argtypes = [_p, _p, _p, _p, i64, _p]
    lib.cf_hash_spans.restype = None
    lib.cf_wide_count.argtypes = [_p, i64, i64]
    lib.cf_wide_count.restype = i64
    lib.cf_wide_fill.argtypes = [_p, i64, i64, _p, _p, _p, _p, _p, _p]
    lib.cf_wide_fill.restype = None
    lib.cf_assemble_count.argtypes = [_p, _p, i64, i64, _p, _p, _p, _p, i64, _p, i64, i64]
    lib.cf_assemble_count.restype = i64
    lib.cf_assemble_rows.argtypes = [_p, _p, i64, i64, _p, _p, _p, _p, _p, i64, _p, i64, i64, i64, _p, _p, _p,
                                     _p, _p, _p, _p]
    lib.cf_assemble_rows.restype = i64


def lib():
    """The loaded library (:func:`load` with no path when none is loaded yet)."""
    return _lib if _lib is not None else load()


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def _u8(buf) -> np.ndarray:
    a = np.asarray(buf)
    if a.dtype != np.uint8 or a.ndim != 1 or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a, dtype=np.uint8).reshape(-1)
    return a


def _take(addr, n: int, dtype) -> np.ndarray:
    """A numpy copy of ``n`` elements of ``dtype`` at C address ``addr``."""
    out = np.empty(n, dtype)
    if n:
        ctypes.memmove(out.ctypes.data, addr, out.nbytes)
    return out


_EMPTY_I64 = np.empty(0, np.int64)


def _inter_args(terms, toff, nsflags):
    """The interaction arguments as the C kernels take them (checked: the C side trusts them)."""
    terms = np.ascontiguousarray(terms, dtype=np.int64)
    toff = np.ascontiguousarray(toff, dtype=np.int64)
    nsflags = np.ascontiguousarray(nsflags, dtype=np.uint8)
    if (len(toff) < 1 or toff[0] != 0 or toff[-1] != len(terms) or len(nsflags) != 256
            or (len(toff) > 1 and (np.diff(toff).min() < 2 or np.diff(toff).max() > _IX_MAX_ORDER))
            or (len(terms) and (terms.min() < 0 or terms.max() > 255))):
        raise ValueError("bad interaction arrays (terms, toff, nsflags)")
    return terms, toff, nsflags


#: the longest interaction the C kernels take (``IX_MAX_ORDER`` in cfast.c)
_IX_MAX_ORDER = 64
#: the kernels' bound on ``max_feats`` (their saturating counts stay clear of int64 overflow)
MAX_FEATS_LIMIT = 1 << 56


def _max_feats(v) -> int:
    """``max_feats`` as the C kernels take it (checked: they trust it)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 0 <= v < MAX_FEATS_LIMIT:
        raise ValueError(f"max_feats must be an integer in [0, 2**56), got {v!r}")
    return int(v)


def parse_chunk(buf, fmt, terms, toff, nsflags, add_constant, keep_names, max_feats):
    """Same arguments and results as :func:`streamlearn.io._text_kernels.parse_chunk` (the
    arrays it returns are, as there, views of arrays sized by its initial estimate). It needs
    no guard: it converts its arguments to the dtypes the numba kernel is called with."""
    b = _u8(buf)
    terms, toff, nsflags = _inter_args(terms, toff, nsflags)
    max_feats = _max_feats(max_feats)
    L = len(b)
    c = lib()
    bp = _ptr(b) if L else None
    max_lines = (c.cf_count_byte(bp, L, 10) if L else 0) + 1
    cap = L // 4 + max_lines * (2 if add_constant else 1) + 16  # the numba kernel's estimate
    i64 = np.int64
    offsets = np.empty(max_lines + 1, i64)
    labels = np.empty(max_lines, np.float64)
    weights = np.empty(max_lines, np.float64)
    ex_line = np.empty(max_lines, i64)
    tag_start = np.empty(max_lines, i64)
    tag_end = np.empty(max_lines, i64)
    indices = np.empty(cap, np.uint32)
    values = np.empty(cap, np.float64)
    names = [np.empty(cap if keep_names else 0, i64) for _ in range(4)]
    out = _ParseOut()
    for name, a in (("offsets", offsets), ("labels", labels), ("weights", weights), ("ex_line", ex_line),
                    ("tag_start", tag_start), ("tag_end", tag_end), ("indices", indices), ("values", values)):
        setattr(out, name, _ptr(a))
    if keep_names:
        out.name_start, out.name_end, out.ns_start, out.ns_end = (_ptr(a) for a in names)
    out.cap = cap
    try:
        if c.cf_parse_chunk(bp, L, int(fmt), _ptr(terms), _ptr(toff), len(toff) - 1, _ptr(nsflags),
                            int(bool(add_constant)), int(bool(keep_names)), max_feats, ctypes.byref(out)) != 0:
            raise MemoryError("streamlearn C parser: out of memory")
        n_ex, nnz, nn, n_err = out.n_ex, out.nnz, out.nn, out.n_err
        if out.feat_owned:  # the chunk outgrew the estimate: the arrays moved to C memory
            indices = _take(out.indices, nnz, np.uint32)
            values = _take(out.values, nnz, np.float64)
            if keep_names:
                names = [_take(getattr(out, k), nn, i64) for k in ("name_start", "name_end", "ns_start", "ns_end")]
        err_line = _take(out.err_line, n_err, i64) if n_err else _EMPTY_I64.copy()
        err_code = _take(out.err_code, n_err, i64) if n_err else _EMPTY_I64.copy()
        n_lines = int(out.n_lines)
    finally:
        c.cf_parse_free(ctypes.byref(out))
    return (offsets[:n_ex + 1], indices[:nnz], values[:nnz], labels[:n_ex], weights[:n_ex],
            ex_line[:n_ex], tag_start[:n_ex], tag_end[:n_ex],
            names[0][:nn], names[1][:nn], names[2][:nn], names[3][:nn], err_line, err_code, n_lines)


_ADAGRAD_DTYPES = (np.int64, np.uint32, np.float64, np.float64, np.float64)


#: rule bits (streamlearn.algos._adagrad_kernels): the C port serves VW's default rule
#: (ADAPTIVE | NORMALIZED | INVARIANT | SQRT_RATE) and the LEGACY ones
_DEFAULT_RULE, _LEGACY, _SQRT_RATE, _RULE_BITS = 1 | 2 | 4 | 8, 16, 8, 31


def adagrad_rule_ok(loss_code, rule, hp) -> bool:
    """Whether the C port implements this update rule: the legacy rules (``hp`` unused), or VW's
    default (adaptive + normalized + invariant, ``--power_t 0.5``) without ``--l1`` / ``--l2`` /
    ``--initial_t`` / ``--no_clip`` and with a loss code 0..2. Everything else runs on numba."""
    if not isinstance(rule, int) or rule & ~_RULE_BITS or loss_code not in (0, 1, 2):
        return False
    if rule & _LEGACY:
        return (rule & ~_SQRT_RATE) in (_LEGACY | 1, _LEGACY | 1 | 2 | 4)
    return (rule == _DEFAULT_RULE and isinstance(hp, np.ndarray) and hp.dtype == np.float64
            and hp.shape[0] >= 5 and hp[1] == 0.0 and hp[2] == 0.0 and hp[4] == 0.0
            and (hp.shape[0] < 6 or hp[5] == 0.0))


def adagrad_args_ok(offsets, indices, values, labels, weights, w, G, N, scal, mask, loss_code, eta,
                    rule, hp, learn, pred_out, loss_out, raw_out) -> bool:
    """Whether the C kernel computes exactly what numba would for these arguments: a rule it
    implements (:func:`adagrad_rule_ok`), the dtypes numba's specialisation would see (other
    dtypes change numba's arithmetic, e.g. float32 values), contiguous 1-D arrays, writable
    float32 state with room for every masked index, a known loss code."""
    if not adagrad_rule_ok(loss_code, rule, hp):
        return False
    for a, dt in zip((offsets, indices, values, labels, weights), _ADAGRAD_DTYPES):
        if not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != 1 or not a.flags.c_contiguous:
            return False
    for a, dt in ((w, np.float32), (G, np.float32), (N, np.float32), (scal, np.float64),
                  (pred_out, np.float64), (loss_out, np.float64), (raw_out, np.float64)):
        if (not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != 1 or not a.flags.c_contiguous
                or not a.flags.writeable):
            return False
    if not isinstance(mask, int) or not 0 <= mask < 1 << 32:
        return False
    n = labels.shape[0]
    normalized = bool(rule & 2)
    return (offsets.shape[0] == n + 1 and weights.shape[0] >= n and pred_out.shape[0] >= n
            and loss_out.shape[0] >= n and raw_out.shape[0] >= n and scal.shape[0] >= 5
            and w.shape[0] > mask and G.shape[0] > mask and (not normalized or N.shape[0] > mask))


def adagrad_run(offsets, indices, values, labels, weights, w, G, N, scal, mask, loss_code, eta,
                rule, hp, learn, pred_out, loss_out, raw_out) -> int:
    """Same arguments and result as :func:`streamlearn.algos._adagrad_kernels.adagrad_run`
    (the arrays must pass :func:`adagrad_args_ok`)."""
    n = labels.shape[0]
    if n == 0:
        return 0
    nnz = int(offsets[n])
    if nnz and (int(offsets[0]) < 0 or nnz > indices.shape[0] or nnz > values.shape[0]):
        raise IndexError("offsets point past the feature arrays")
    return int(lib().cf_adagrad_run(
        _ptr(offsets), _ptr(indices), _ptr(values), _ptr(labels), _ptr(weights), n,
        _ptr(w), _ptr(G), _ptr(N), _ptr(scal), int(mask), int(loss_code), float(eta),
        int(rule), int(bool(learn)), _ptr(pred_out), _ptr(loss_out), _ptr(raw_out)))


# -- Parquet reader kernels (streamlearn/io/_parquet_kernels.py, _hash_kernels.hash_spans) ------
#
# Each ``*_args_ok`` says whether the C port computes exactly what the numba kernel computes
# for these arguments: the dtypes the reader passes (numba would specialise differently on
# others), C-contiguous arrays of the expected dimensions, and every span inside its buffer
# (numba wraps negative indices; C would read outside the arrays). The kernel seam
# (:mod:`streamlearn.kernels`) calls numba when one is False.


def _arr(a, dt, ndim=1) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == dt and a.ndim == ndim and a.flags.c_contiguous


def _spans_ok(s: np.ndarray, e: np.ndarray, size: int) -> bool:
    """``0 <= s <= e <= size`` everywhere (empty arrays are fine)."""
    if s.size == 0:
        return True
    return bool(s.min() >= 0 and e.max() <= size and (e >= s).all())


def hash_string_part_args_ok(data, soff, lo, hi, seed) -> bool:
    if not (_arr(data, np.uint8) and _arr(soff, np.int64)):
        return False
    try:
        lo, hi, seed = int(lo), int(hi), int(seed)
    except (TypeError, ValueError):
        return False
    if not (0 <= lo <= hi and hi + 1 <= len(soff) and 0 <= seed < 1 << 64):
        return False
    return _spans_ok(soff[lo:hi], soff[lo + 1:hi + 1], len(data))


def hash_string_part(data, soff, lo, hi, seed) -> np.ndarray:
    """:func:`streamlearn.io._parquet_kernels.hash_string_part` (arguments passing
    :func:`hash_string_part_args_ok`)."""
    lo, hi = int(lo), int(hi)
    out = np.empty(hi - lo, np.uint32)
    if hi > lo:
        lib().cf_hash_string_part(_ptr(data), _ptr(soff), lo, hi, int(seed), _ptr(out))
    return out


def hash_spans_args_ok(buf, starts, ends, seeds) -> bool:
    if not (_arr(buf, np.uint8) and _arr(starts, np.int64) and _arr(ends, np.int64)
            and _arr(seeds, np.uint64)):
        return False
    n = len(starts)
    return len(ends) >= n and len(seeds) >= n and _spans_ok(starts, ends[:n], len(buf))


def hash_spans(buf, starts, ends, seeds) -> np.ndarray:
    """:func:`streamlearn.io._hash_kernels.hash_spans` (arguments passing
    :func:`hash_spans_args_ok`)."""
    n = len(starts)
    out = np.empty(n, np.uint32)
    if n:
        lib().cf_hash_spans(_ptr(buf), _ptr(starts), _ptr(ends), _ptr(seeds), n, _ptr(out))
    return out


def wide_part_args_ok(X, hashes) -> bool:
    return _arr(X, np.float64, 2) and _arr(hashes, np.uint32) and len(hashes) >= X.shape[1]


def wide_part(X, hashes):
    """:func:`streamlearn.io._parquet_kernels.wide_part` (arguments passing
    :func:`wide_part_args_ok`)."""
    n, d = X.shape
    c = lib()
    cnt = int(c.cf_wide_count(_ptr(X), n, d)) if n and d else 0
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    idx = np.empty(cnt, np.uint32)
    val = np.empty(cnt, np.float64)
    col = np.empty(cnt, np.int64)
    if n:
        c.cf_wide_fill(_ptr(X), n, d, _ptr(hashes), _ptr(starts), _ptr(ends), _ptr(idx), _ptr(val),
                       _ptr(col))
    return starts, ends, idx, val, col


def assemble_rows_args_ok(starts, ends, idx, val, letters, terms, toff, nsflags, add_constant,
                          want_src, max_feats) -> bool:
    if not (_arr(starts, np.int64, 2) and _arr(ends, np.int64, 2) and starts.shape == ends.shape
            and _arr(idx, np.uint32) and _arr(val, np.float64) and _arr(letters, np.uint8)
            and _arr(terms, np.int64) and _arr(toff, np.int64) and _arr(nsflags, np.uint8)):
        return False
    try:
        _inter_args(terms, toff, nsflags)
    except ValueError:
        return False
    if not isinstance(add_constant, (bool, np.bool_)) or not isinstance(want_src, (bool, np.bool_)):
        return False
    try:
        _max_feats(max_feats)
    except ValueError:
        return False
    return _spans_ok(starts, ends, min(len(idx), len(val), len(letters)))


def assemble_rows(starts, ends, idx, val, letters, terms, toff, nsflags, add_constant, want_src, max_feats):
    """:func:`streamlearn.io._parquet_kernels.assemble_rows` (arguments passing
    :func:`assemble_rows_args_ok`): the same arrays (views of larger ones, as there)."""
    k, n = starts.shape
    ninter = len(toff) - 1
    c = lib()
    add_constant, want_src = bool(add_constant), bool(want_src)
    lin_ignored = bool((nsflags & 2).any())
    if ninter or nsflags.any():
        cap = int(c.cf_assemble_count(_ptr(starts), _ptr(ends), k, n, _ptr(val), _ptr(letters),
                                      _ptr(terms), _ptr(toff), ninter, _ptr(nsflags),
                                      int(add_constant), int(max_feats))) + 16
    else:
        cap = int((ends - starts).sum()) + (n if add_constant else 0) + 16
    longest = int((ends - starts).sum(axis=0).max()) if k and n else 0
    indices = np.empty(cap, np.uint32)
    values = np.empty(cap, np.float64)
    src = np.empty(cap if (want_src or lin_ignored) else 0, np.int64)
    olet = np.empty(cap if ninter else 0, np.uint8)
    order = np.empty(longest + 1, np.int64)
    offsets = np.empty(n + 1, np.int64)
    status = np.zeros(n, np.int64)
    nnz = int(c.cf_assemble_rows(_ptr(starts), _ptr(ends), k, n, _ptr(idx), _ptr(val), _ptr(letters),
                                 _ptr(terms), _ptr(toff), ninter, _ptr(nsflags), int(add_constant),
                                 int(want_src), int(max_feats), _ptr(indices), _ptr(values), _ptr(src), _ptr(olet),
                                 _ptr(order), _ptr(offsets), _ptr(status)))
    return offsets, indices[:nnz], values[:nnz], (src[:nnz] if want_src else src[:0]), status


# -- scalar helpers (tests) --------------------------------------------------------------------

def murmur3_32(data, seed: int = 0) -> int:
    a = _u8(np.frombuffer(bytes(data), np.uint8)) if not isinstance(data, np.ndarray) else _u8(data)
    return int(lib().cf_murmur3_32(_ptr(a) if len(a) else None, 0, len(a), seed & 0xFFFFFFFF))


def hashstring(data, seed: int = 0) -> int:
    a = _u8(np.frombuffer(bytes(data), np.uint8)) if not isinstance(data, np.ndarray) else _u8(data)
    return int(lib().cf_hashstring(_ptr(a) if len(a) else None, 0, len(a), seed & 0xFFFFFFFF))


def scan_float(buf, s: int, e: int):
    """``(value, ok, end)`` as :func:`streamlearn.io._text_kernels.scan_float`."""
    b = _u8(buf)
    ok = ctypes.c_int(0)
    end = ctypes.c_int64(0)
    v = lib().cf_scan_float(_ptr(b) if len(b) else None, int(s), int(e), ctypes.byref(ok), ctypes.byref(end))
    return v, bool(ok.value), int(end.value)


def pow10_entry(q: int):
    hi, lo = ctypes.c_double(), ctypes.c_double()
    lib().cf_pow10_entry(int(q), ctypes.byref(hi), ctypes.byref(lo))
    return hi.value, lo.value


def wexpmx(x: float) -> float:
    return float(lib().cf_wexpmx(float(x)))
