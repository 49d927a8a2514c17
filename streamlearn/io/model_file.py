"""Self-describing, checksummed model files (``.slm``); loading never uses pickle.

Layout (little-endian)::

    magic        8 bytes   b"SLMODEL\\x00"
    version      uint32    FORMAT_VERSION
    header_len   uint64
    header       JSON (utf-8): format_version, package_version, created, algo, meta
                 (every hyper-parameter and counter), reader (hashing settings), arrays
                 (name, dtype, shape, encoding, offset, nbytes)
    payload      the arrays, one after another
    sha256       32 bytes over everything above

Array encodings: ``raw`` (the bytes), or ``sparse`` for 1-D arrays that are mostly zero (a
uint32/uint64 index array plus the non-zero values; zero is tested on the bit pattern, so
``-0.0`` and NaN round-trip exactly). Files are written to a temporary file in the target
directory, flushed, fsync'ed and renamed, so an existing model is never half-overwritten.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import time

import numpy as np

from .. import __version__
from ..errors import ModelFileError

__all__ = ["FORMAT_VERSION", "MAGIC", "write_model", "read_model", "atomic_writer"]

MAGIC = b"SLMODEL\x00"
FORMAT_VERSION = 1
_ALLOWED_DTYPES = {"float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                   "uint32", "uint64", "bool"}


class atomic_writer:
    """Context manager: a binary file object that becomes ``path`` only on success."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        self.tmp = None
        self.f = None

    def __enter__(self):
        d = os.path.dirname(os.path.abspath(self.path))
        fd, self.tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=d)
        self.f = os.fdopen(fd, "wb")
        return self.f

    def __exit__(self, et, ev, tb):
        try:
            if et is None:
                self.f.flush()
                os.fsync(self.f.fileno())
                self.f.close()
                os.replace(self.tmp, self.path)
            else:
                self.f.close()
                os.unlink(self.tmp)
        except BaseException:
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)
            raise
        return False


def _encode(a: np.ndarray):
    a = np.ascontiguousarray(a)
    if a.ndim == 1 and a.size >= 1024 and a.dtype.itemsize in (4, 8):
        bits = a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint64)
        nz = np.flatnonzero(bits)
        if nz.size * (a.dtype.itemsize + 8) < a.nbytes // 2:
            idx = nz.astype(np.uint32 if a.size < 2**32 else np.uint64)
            return "sparse", [idx.tobytes(), a[nz].tobytes()], {"nnz": int(nz.size), "index_dtype": str(idx.dtype)}
    return "raw", [a.tobytes()], {}


def write_model(path: str, algo: str, meta: dict, arrays: dict, reader: dict) -> int:
    """Write a model file atomically; returns its size in bytes."""
    entries, chunks, off = [], [], 0
    for name, a in arrays.items():
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
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "algo": algo,
        "meta": meta,
        "reader": reader,
        "arrays": entries,
    }
    hb = json.dumps(header, sort_keys=True).encode()
    h = hashlib.sha256()
    size = 0
    with atomic_writer(path) as f:
        for part in (MAGIC, struct.pack("<IQ", FORMAT_VERSION, len(hb)), hb, *chunks):
            f.write(part)
            h.update(part)
            size += len(part)
        f.write(h.digest())
    return size + 32


def read_model(path: str):
    """Read and verify a model file; returns ``(header, arrays)``.

    Raises :class:`ModelFileError` (one clear sentence naming the file) when the file is
    missing, not a streamlearn model, written by a newer format, truncated or corrupt.
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
                a = np.zeros(shape, dtype=dt)
                a[idx] = vals
            else:
                raise ModelFileError(f"{path}: unknown array encoding {e['encoding']!r}")
            arrays[e["name"]] = a
    except (KeyError, TypeError, ValueError) as ex:
        raise ModelFileError(f"{path}: model file header is malformed ({ex})") from None
    return header, arrays
