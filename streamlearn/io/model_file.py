"""Self-describing, checksummed model files (``.slm``); loading never uses pickle.

Layout (little-endian)::

    magic        8 bytes   b"SLMODEL\\x00"
    version      uint32    FORMAT_VERSION
    header_len   uint64
    header       JSON (utf-8): format_version, package_version, algo, meta
                 (every hyper-parameter and counter), reader (hashing settings), arrays
                 (name, dtype, shape, encoding, offset, nbytes)
    payload      the arrays, one after another
    sha256       32 bytes over everything above

Array encodings: ``raw`` (the bytes), or ``sparse`` for 1-D arrays that are mostly zero (a
uint32/uint64 index array plus the non-zero values; zero is tested on the bit pattern, so
``-0.0`` and NaN round-trip exactly). Files are written to a temporary file in the target
directory, flushed, fsync'ed and renamed, so an existing model is never half-overwritten, even
when the writer is killed (see :class:`atomic_writer`). No time stamp is stored: the same
training run writes a byte-identical file.
"""
from __future__ import annotations

import hashlib
import json
import os  # noqa: F401 - the read side; tests patch model_file.os
import struct

import numpy as np

from .. import __version__
from ..errors import ModelFileError
from ..memory import SparseTable, lazy_zeros
from .writing import AtomicFile, atomic_writer, resolve_output  # noqa: F401 - the writing side's names here too

__all__ = ["FORMAT_VERSION", "MAGIC", "write_model", "encode_model", "read_model", "atomic_writer", "AtomicFile",
           "resolve_output", "all_finite"]

MAGIC = b"SLMODEL\x00"
#: 2: the learners' kernel state as named tuples (issue 14), whose saved arrays no longer carry
#: the defaults of formats that no released build wrote (BEAR/MISSION without ``lrange``,
#: Oja-SON without the label range, the frame column, ``--diag_frame`` or ``--no_invariant``).
#: Files of an older format are refused with a message to re-train.
FORMAT_VERSION = 2
_ALLOWED_DTYPES = {"float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                   "uint32", "uint64", "bool"}


def _sparse_pays(nnz: int, a) -> bool:
    """Whether the sparse encoding of ``nnz`` non-zeros beats the raw bytes of ``a``."""
    return nnz * (a.dtype.itemsize + 8) < a.nbytes // 2


def _encode(a):
    """Return ``(encoding, parts, extra)``; parts are buffers (no copy of a dense array).

    A :class:`~streamlearn.memory.SparseTable` (a big table given by its non-zeros) is encoded
    without reading its zeros, in the bytes a scan of the dense array would give."""
    if isinstance(a, SparseTable):
        if a.size >= 1024 and a.dtype.itemsize in (4, 8) and _sparse_pays(a.vals.size, a):
            idx = a.idx.astype(np.uint32 if a.size < 2**32 else np.uint64)
            return "sparse", [memoryview(idx).cast("B"), memoryview(np.ascontiguousarray(a.vals)).cast("B")], \
                {"nnz": int(idx.size), "index_dtype": str(idx.dtype)}
        a = a.dense()
    a = np.ascontiguousarray(a)
    flat = a.reshape(-1)
    if flat.size >= 1024 and a.dtype.itemsize in (4, 8):
        bits = flat.view(np.uint32 if a.dtype.itemsize == 4 else np.uint64)
        step = 1 << 22  # in blocks: no 2^28-byte temporary for a -b 28 table
        nz = np.concatenate([np.flatnonzero(bits[i:i + step]) + i for i in range(0, flat.size, step)])
        if _sparse_pays(nz.size, a):
            idx = nz.astype(np.uint32 if flat.size < 2**32 else np.uint64)
            return "sparse", [memoryview(idx).cast("B"), memoryview(flat[nz]).cast("B")], \
                {"nnz": int(nz.size), "index_dtype": str(idx.dtype)}
    return "raw", [memoryview(flat).cast("B") if flat.size else b""], {}


class EncodedModel:
    """A model file's bytes as buffers (no copy of the arrays): :attr:`size` is known before
    anything is written, :meth:`write_to` writes the file (and its SHA-256) to a binary file."""

    def __init__(self, parts):
        self.parts = parts
        self.size = sum(len(p) for p in parts) + 32

    def write_to(self, f) -> int:
        h = hashlib.sha256()
        for part in self.parts:
            f.write(part)
            h.update(part)
        f.write(h.digest())
        return self.size


def encode_model(algo: str, meta: dict, arrays: dict, reader: dict) -> EncodedModel:
    """The model file of these arguments (the bytes depend only on them: no time stamp)."""
    entries, chunks, off = [], [], 0
    for name, a in arrays.items():
        if not isinstance(a, SparseTable):
            a = np.asarray(a)
        if str(a.dtype) not in _ALLOWED_DTYPES:
            raise TypeError(f"array {name!r} has unsupported dtype {a.dtype}")
        enc, parts, extra = _encode(a)
        nbytes = sum(len(p) for p in parts)
        entries.append({"name": name, "dtype": str(a.dtype), "shape": list(a.shape), "encoding": enc,
                        "offset": off, "nbytes": nbytes, **extra})
        chunks.extend(parts)
        off += nbytes
    header = {
        "format_version": FORMAT_VERSION,
        "package": "streamlearn",
        "package_version": __version__,
        "algo": algo,
        "meta": meta,
        "reader": reader,
        "arrays": entries,
    }
    hb = json.dumps(header, sort_keys=True).encode()
    return EncodedModel([MAGIC, struct.pack("<IQ", FORMAT_VERSION, len(hb)), hb, *chunks])


def model_write_error(path: str, e: OSError) -> ModelFileError:
    """The one-line error of a model that could not be written to ``path`` (the user's name)."""
    return ModelFileError(f"{path}: cannot write model file: {e.strerror or e}; "
                          "nothing was written (an existing file is unchanged)")


def write_model(path: str, algo: str, meta: dict, arrays: dict, reader: dict) -> int:
    """Write a model file atomically (:class:`atomic_writer`: ``-`` is standard output, a FIFO
    or device is written in place, a symlink's target is replaced); returns its size in bytes.

    The bytes depend only on the arguments (no time stamp), so the same training run gives a
    byte-identical file.
    Raises :class:`ModelFileError` when the file cannot be written (full disk, no
    permission, ...); the existing ``path`` is then unchanged.
    """
    model = encode_model(algo, meta, arrays, reader)
    try:
        with atomic_writer(path) as f:
            model.write_to(f)
    except OSError as e:
        raise model_write_error(path, e) from None
    return model.size


def all_finite(a) -> bool:
    """True when every element of ``a`` is finite (checked in blocks: no full-size temporary;
    a :class:`~streamlearn.memory.SparseTable` by its stored values)."""
    if isinstance(a, SparseTable):
        return bool(np.isfinite(a.vals).all())
    flat = np.ascontiguousarray(a).reshape(-1)
    step = 1 << 22  # in blocks: no full-size temporary for a 2^28 table
    for i in range(0, flat.size, step):
        if not np.isfinite(flat[i:i + step]).all():
            return False
    return True


def read_model(path: str, sparse: bool = False):
    """Read and verify a model file; returns ``(header, arrays)``. With ``sparse``, arrays
    stored sparse come back as :class:`~streamlearn.memory.SparseTable` (what the learners'
    ``from_state`` take: a ``-b 32`` table loads in O(non-zeros)); else as dense arrays.

    Raises :class:`ModelFileError` (one clear sentence naming the file) when the file is
    missing, not a streamlearn model, of a format no longer read or written by a newer one,
    truncated or corrupt.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read model file: {e.strerror or e}") from None
    if len(data) < 20 or data[:8] != MAGIC:
        raise ModelFileError(f"{path}: not a streamlearn model file")
    version, hlen = struct.unpack_from("<IQ", data, 8)
    if version > FORMAT_VERSION:
        raise ModelFileError(f"{path}: model format version {version} is newer than this streamlearn "
                             f"({__version__}) reads (<= {FORMAT_VERSION}); upgrade streamlearn")
    if version < FORMAT_VERSION:
        raise ModelFileError(f"{path}: model file format {version} is no longer read; re-train")
    if len(data) < 20 + hlen + 32:
        raise ModelFileError(f"{path}: model file is truncated")
    if hashlib.sha256(data[:-32]).digest() != data[-32:]:
        raise ModelFileError(f"{path}: model file is corrupt (checksum mismatch)")
    try:
        header = json.loads(data[20:20 + hlen])
    except ValueError:
        raise ModelFileError(f"{path}: model file header is not valid JSON") from None
    base = 20 + hlen
    payload_end = len(data) - 32
    arrays = {}
    try:
        for e in header["arrays"]:
            if e["dtype"] not in _ALLOWED_DTYPES:
                raise ModelFileError(f"{path}: array {e['name']!r} has unsupported dtype {e['dtype']}")
            start, end = base + e["offset"], base + e["offset"] + e["nbytes"]
            if end > payload_end:
                raise ModelFileError(f"{path}: model file is truncated")
            buf = data[start:end]
            dt = np.dtype(e["dtype"])
            shape = tuple(e["shape"])
            if e["encoding"] == "raw":
                a = np.frombuffer(buf, dtype=dt).reshape(shape).copy()
            elif e["encoding"] == "sparse":
                idt = np.dtype(e["index_dtype"])
                nnz = e["nnz"]
                idx = np.frombuffer(buf, dtype=idt, count=nnz)
                vals = np.frombuffer(buf, dtype=dt, offset=nnz * idt.itemsize, count=nnz)
                if sparse and len(shape) == 1:
                    a = SparseTable(shape[0], dt, idx.copy(), vals.copy())
                else:
                    a = lazy_zeros(shape, dt)  # a -b 28 table: only its non-zeros become resident
                    a.reshape(-1)[idx] = vals
            else:
                raise ModelFileError(f"{path}: unknown array encoding {e['encoding']!r}")
            arrays[e["name"]] = a
    except (KeyError, TypeError, ValueError) as ex:
        raise ModelFileError(f"{path}: model file header is malformed ({ex})") from None
    return header, arrays
