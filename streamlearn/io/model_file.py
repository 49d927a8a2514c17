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
from ..memory import MovedAxis, SparseTable
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


def _nonzero_bits(flat) -> int:
    """The entries of the 1-D array ``flat`` (4- or 8-byte items) whose bits are not all zero (-0.0 counts), in blocks of
    2^22 (no full-size temporary)."""
    bits = flat.view(np.uint32 if flat.dtype.itemsize == 4 else np.uint64)
    step = 1 << 22
    return sum(int(np.count_nonzero(bits[i:i + step])) for i in range(0, bits.size, step))


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
    if isinstance(a, MovedAxis):  # the same bytes as the moved copy, written block by block when raw
        base = a.base
        if base.size >= 1024 and base.dtype.itemsize in (4, 8) and base.flags.c_contiguous \
                and not _sparse_pays(_nonzero_bits(base.reshape(-1)), base):
            return "raw", [_Blocks(a)], {}
        a = np.asarray(a)
    a = np.ascontiguousarray(a)
    flat = a.reshape(-1)
    if flat.size >= 1024 and a.dtype.itemsize in (4, 8):
        bits = flat.view(np.uint32 if a.dtype.itemsize == 4 else np.uint64)
        step = 1 << 22  # in blocks: no 2^28-byte temporary for a -b 28 table
        # counted first: a dense array's indices are never built (they were three temporaries of 8 bytes an
        # entry, in fresh pages: a tenth of a second per --oaa 20 sketch at the end of every run)
        if _sparse_pays(_nonzero_bits(flat), a):
            nz = np.concatenate([np.flatnonzero(bits[i:i + step]) + i for i in range(0, flat.size, step)])
            idx = nz.astype(np.uint32 if flat.size < 2**32 else np.uint64)
            return "sparse", [memoryview(idx).cast("B"), memoryview(flat[nz]).cast("B")], \
                {"nnz": int(nz.size), "index_dtype": str(idx.dtype)}
    return "raw", [memoryview(flat).cast("B") if flat.size else b""], {}


class _Blocks:
    """A raw array's bytes given block by block (:meth:`MovedAxis.blocks`): ``len`` is their count."""

    def __init__(self, a: MovedAxis):
        self.a = a

    def __len__(self) -> int:
        return self.a.nbytes

    def chunks(self):
        for b in self.a.blocks():
            yield memoryview(b).cast("B")


class EncodedModel:
    """A model file's bytes as buffers (no copy of the arrays): :attr:`size` is known before
    anything is written, :meth:`write_to` writes the file (and its SHA-256) to a binary file."""

    def __init__(self, parts):
        self.parts = parts
        self.size = sum(len(p) for p in parts) + 32

    def write_to(self, f) -> int:
        h = hashlib.sha256()
        for part in self.parts:
            for chunk in (part.chunks() if isinstance(part, _Blocks) else (part,)):
                f.write(chunk)
                h.update(chunk)
        f.write(h.digest())
        return self.size


def encode_model(algo: str, meta: dict, arrays: dict, reader: dict, estimator: dict | None = None) -> EncodedModel:
    """The model file of these arguments (the bytes depend only on them: no time stamp).
    ``estimator``: what the Python API keeps besides the learner (classes, input columns;
    :mod:`streamlearn.estimator`), stored under the header's ``estimator`` key."""
    entries, chunks, off = [], [], 0
    for name, a in arrays.items():
        if not isinstance(a, (SparseTable, MovedAxis)):
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
    if estimator:
        header["estimator"] = estimator
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
    return write_encoded(path, encode_model(algo, meta, arrays, reader))


def write_encoded(path: str, model) -> int:
    """Write an encoded model (:func:`encode_model`) to ``path`` atomically, as
    :func:`write_model` does; returns its size in bytes."""
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
    if isinstance(a, MovedAxis):  # the same entries in another order
        a = a.base
    flat = np.ascontiguousarray(a).reshape(-1)
    step = 1 << 22  # in blocks: no full-size temporary for a 2^28 table
    for i in range(0, flat.size, step):
        if not np.isfinite(flat[i:i + step]).all():
            return False
    return True


#: a header longer than this is refused before it is read from a stream (a file's own size bounds it)
MAX_HEADER_BYTES = 256 << 20
#: at most this many dimensions per array, and this many arrays (a --oaa model has ~20 per class)
MAX_NDIM = 8
_INDEX_DTYPES = {"uint32", "uint64"}
_CHUNK = 1 << 20


def _bad(path, why):
    return ModelFileError(f"{path}: model file header is malformed ({why})")


def _reject_constant(name):
    raise ValueError(f"{name} is not a number a model file holds")


def _parse_header(path: str, hb: bytes) -> dict:
    """The header JSON as a dict, or :class:`ModelFileError`: not JSON, NaN / Infinity anywhere
    (a counter or hyper-parameter that is not finite), nesting too deep, not an object."""
    try:
        header = json.loads(hb, parse_constant=_reject_constant)
    except RecursionError:
        raise _bad(path, "nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, NaN / Infinity
        what = str(e) if "not a number" in str(e) else "not valid JSON"
        raise ModelFileError(f"{path}: model file header is {what}") from None
    if not isinstance(header, dict):
        raise _bad(path, "not a JSON object")
    return header


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_layout(path: str, header: dict) -> int:
    """Check the header's fields and every array entry against the format (types, known
    dtypes and encodings, shapes, byte counts that match the shape, arrays laid out one after
    another from offset 0) before anything is allocated; returns the payload's length."""
    if not _is_int(header.get("format_version")):
        raise _bad(path, "format_version is not an integer")
    if not isinstance(header.get("algo"), str):
        raise _bad(path, f"algo is {type(header.get('algo')).__name__}, not a string")
    for k in ("meta", "reader"):
        if not isinstance(header.get(k, {}), dict):
            raise _bad(path, f"{k} is not an object")
    entries = header.get("arrays")
    if not isinstance(entries, list):
        raise _bad(path, "arrays is not a list")
    seen, off = set(), 0
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise _bad(path, "an array entry without a name")
        name = e["name"]
        if name in seen:
            raise _bad(path, f"array {name!r} twice")
        seen.add(name)
        dt, shape, enc = e.get("dtype"), e.get("shape"), e.get("encoding")
        if not isinstance(dt, str) or dt not in _ALLOWED_DTYPES:
            raise ModelFileError(f"{path}: array {name!r} has unsupported dtype {dt}")
        if not isinstance(shape, list) or len(shape) > MAX_NDIM or not all(_is_int(d) and d >= 0 for d in shape):
            raise _bad(path, f"array {name!r}: shape {shape!r}")
        if not _is_int(e.get("offset")) or not _is_int(e.get("nbytes")):
            raise _bad(path, f"array {name!r}: offset / nbytes not integers")
        if e["offset"] != off:
            raise _bad(path, f"array {name!r}: offset {e['offset']}, expected {off} (arrays are stored in order)")
        size = 1
        for d in shape:
            size *= d
        item = np.dtype(dt).itemsize
        if enc == "raw":
            want = size * item
        elif enc == "sparse":
            nnz, idt = e.get("nnz"), e.get("index_dtype")
            if not _is_int(nnz) or not 0 <= nnz <= size:
                raise _bad(path, f"array {name!r}: nnz {nnz!r} for {size} entries")
            if not isinstance(idt, str) or idt not in _INDEX_DTYPES:
                raise _bad(path, f"array {name!r}: index dtype {idt!r} (uint32 or uint64)")
            want = nnz * (np.dtype(idt).itemsize + item)
        else:
            raise ModelFileError(f"{path}: unknown array encoding {enc!r}")
        if e["nbytes"] != want:
            raise _bad(path, f"array {name!r}: {e['nbytes']} bytes stored, its shape needs {want}")
        off += want
    return off


def _read_exact(f, n: int) -> bytes:
    """``n`` bytes from ``f`` (fewer only at the end of the file)."""
    parts, got = [], 0
    while got < n:
        b = f.read(min(n - got, _CHUNK))
        if not b:
            break
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def _read_into(f, a: np.ndarray) -> bool:
    """Fill ``a``'s bytes from ``f``; False at a premature end of the file."""
    buf = a.reshape(-1).view(np.uint8)
    got, n = 0, buf.size
    while got < n:
        k = f.readinto(buf[got:min(n, got + _CHUNK)])
        if not k:
            return False
        got += k
    return True


def _hash_file(f, n: int):
    """SHA-256 of the next ``n`` bytes of ``f`` (in chunks: no copy of the file in memory)."""
    h = hashlib.sha256()
    left = n
    while left > 0:
        b = f.read(min(left, _CHUNK))
        if not b:
            return None
        h.update(b)
        left -= len(b)
    return h.digest()


def read_model(path: str, sparse: bool = False, data: bytes | None = None):
    """Read and verify a model file; returns ``(header, arrays)``. With ``sparse``, arrays
    stored sparse come back as :class:`~streamlearn.memory.SparseTable` (of the stored shape;
    what the learners' ``from_state`` take: a ``-b 32`` table loads in O(non-zeros), and a
    declared shape is checked before it is allocated); else as dense arrays.

    The file is untrusted input: the magic is read from its first bytes (``/dev/zero`` is
    refused at once), the checksum is verified, then the header is checked against the format
    before anything it declares is allocated (dtypes, shapes, byte counts, the arrays' layout,
    the file's size, no NaN / Infinity, bounded nesting), and the arrays are read straight into
    their own buffers, so loading costs the file's size in memory, not a multiple of it.

    With ``data`` (a model file's bytes, e.g. an unpickled estimator's), those are read instead
    of the file; ``path`` only names them in messages.

    Raises :class:`ModelFileError` (one clear sentence naming the file) when the file is
    missing, not a streamlearn model, of a format no longer read or written by a newer one,
    truncated, corrupt or malformed.
    """
    import io
    import stat

    try:
        f = open(path, "rb") if data is None else io.BytesIO(data)
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read model file: {e.strerror or e}") from None
    try:
        with f:
            st = os.fstat(f.fileno()) if data is None else None
            regular = data is None and stat.S_ISREG(st.st_mode)
            head = _read_exact(f, 20)
            if len(head) < 20 or head[:8] != MAGIC:
                raise ModelFileError(f"{path}: not a streamlearn model file")
            version, hlen = struct.unpack_from("<IQ", head, 8)
            if version > FORMAT_VERSION:
                raise ModelFileError(f"{path}: model format version {version} is newer than this streamlearn "
                                     f"({__version__}) reads (<= {FORMAT_VERSION}); upgrade streamlearn")
            if version < FORMAT_VERSION:
                raise ModelFileError(f"{path}: model file format {version} is no longer read; re-train")
            if regular:
                size = st.st_size
                if size < 20 + hlen + 32:
                    raise ModelFileError(f"{path}: model file is truncated")
                f.seek(0)
                if _hash_file(f, size - 32) != _read_exact(f, 32):
                    raise ModelFileError(f"{path}: model file is corrupt (checksum mismatch)")
                f.seek(20)
                hb = _read_exact(f, hlen)
                header = _parse_header(path, hb)
                payload = _check_layout(path, header)
                if 20 + hlen + payload + 32 != size:
                    raise ModelFileError(f"{path}: model file is truncated" if 20 + hlen + payload + 32 > size else
                                         f"{path}: model file header is malformed (the arrays it lists end "
                                         f"{size - 52 - hlen - payload} bytes before the checksum)")
                src = f
                arrays = _read_arrays(path, src, header, sparse)
            else:  # a pipe or a device: the header says how much to read, the checksum comes last
                if hlen > MAX_HEADER_BYTES:
                    raise ModelFileError(f"{path}: model file header is malformed ({hlen} bytes long)")
                hb = _read_exact(f, hlen)
                if len(hb) < hlen:
                    raise ModelFileError(f"{path}: model file is truncated")
                header = _parse_header(path, hb)
                payload = _check_layout(path, header)
                body = _read_exact(f, payload + 32)
                if len(body) < payload + 32:
                    raise ModelFileError(f"{path}: model file is truncated")
                if f.read(1):
                    raise ModelFileError(f"{path}: model file is corrupt (data after the checksum)")
                if hashlib.sha256(head + hb + body[:payload]).digest() != body[payload:]:
                    raise ModelFileError(f"{path}: model file is corrupt (checksum mismatch)")
                src = io.BytesIO(body)
                del body
                arrays = _read_arrays(path, src, header, sparse)
    except MemoryError:
        raise ModelFileError(f"{path}: model file needs more memory than this machine has") from None
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read model file: {e.strerror or e}") from None
    return header, arrays


def _read_arrays(path: str, f, header: dict, sparse: bool) -> dict:
    """The arrays of a checked header, read from ``f`` (at the payload's start) into buffers of
    their own (writable, owned: a learner may keep them without a copy)."""
    arrays = {}
    for e in header["arrays"]:
        dt = np.dtype(e["dtype"])
        shape = tuple(e["shape"])
        if e["encoding"] == "raw":
            a = np.empty(shape, dt)
            if not _read_into(f, a):
                raise ModelFileError(f"{path}: model file is truncated")
        else:
            nnz = e["nnz"]
            idx = np.empty(nnz, np.dtype(e["index_dtype"]))
            vals = np.empty(nnz, dt)
            if not (_read_into(f, idx) and _read_into(f, vals)):
                raise ModelFileError(f"{path}: model file is truncated")
            size = int(np.prod(shape, dtype=object)) if shape else 1
            if nnz and (int(idx[-1]) >= size or (nnz > 1 and not (idx[1:] > idx[:-1]).all())):
                raise ModelFileError(f"{path}: array {e['name']!r}: sparse indices out of range or not ascending")
            t = SparseTable(size, dt, idx, vals, shape=shape)
            a = t if sparse else t.dense()
        arrays[e["name"]] = a
    return arrays
