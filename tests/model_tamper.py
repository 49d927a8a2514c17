"""Rewrite one array or one header field of a model file and re-sign it (issue 16).

The SHA-256 at the end of a ``.slm`` file (:mod:`streamlearn.io.model_file`) detects accidents,
not intent: anyone can change a file and recompute it. This helper does exactly that, without
going through streamlearn's reader (which would refuse what the tests want to feed it), so that
the tests can check that a crafted model is refused with one clear error, never trusted.

Layout: ``magic (8) | version uint32 | header_len uint64 | header JSON | payload | sha256(32)``.
"""
from __future__ import annotations

import hashlib
import json
import struct

import numpy as np

__all__ = ["parse", "build", "tamper", "raw_arrays"]


def parse(data: bytes):
    """``(version, header dict, payload bytes)`` of a model file's bytes (no checks)."""
    version, hlen = struct.unpack_from("<IQ", data, 8)
    header = json.loads(data[20:20 + hlen])
    return version, header, data[20 + hlen:-32]


def raw_arrays(header, payload) -> dict:
    """``name -> (entry, bytes)``: each array's header entry and its stored bytes."""
    return {e["name"]: (e, payload[e["offset"]:e["offset"] + e["nbytes"]]) for e in header["arrays"]}


def build(version: int, header, payload: bytes, header_bytes: bytes | None = None) -> bytes:
    """A signed model file: ``header`` (a dict, or ``header_bytes`` as they are) and ``payload``."""
    hb = header_bytes if header_bytes is not None else json.dumps(header, sort_keys=True).encode()
    body = b"SLMODEL\x00" + struct.pack("<IQ", version, len(hb)) + hb + payload
    return body + hashlib.sha256(body).digest()


def tamper(src, dst, arrays: dict | None = None, header=None, entries=None, header_bytes=None) -> bytes:
    """Copy the model ``src`` to ``dst`` with changes, re-signed; returns the new bytes.

    ``arrays``: ``name -> ndarray`` to store instead (raw encoding, its own dtype and shape), or
    ``name -> callable(old ndarray) -> ndarray``, or ``name -> None`` to drop the array. The
    payload is laid out again. ``header``: ``callable(header dict)`` that edits the header after
    the layout (e.g. ``meta``, ``reader``, ``algo``, or an entry's ``offset`` / ``shape``).
    ``header_bytes``: ``callable(header JSON bytes) -> bytes`` for changes JSON cannot express.
    """
    with open(src, "rb") as f:
        data = f.read()
    version, hd, payload = parse(data)
    old = raw_arrays(hd, payload)
    new_entries, parts, off = [], [], 0
    for e in hd["arrays"]:
        name = e["name"]
        e = dict(e)
        blob = old[name][1]
        if arrays and name in arrays:
            v = arrays[name]
            if v is None:
                continue
            if callable(v):
                v = v(decode(e, blob))
            a = np.ascontiguousarray(v)
            e = {"name": name, "dtype": str(a.dtype), "shape": list(a.shape), "encoding": "raw"}
            blob = a.tobytes()
        e["offset"], e["nbytes"] = off, len(blob)
        off += len(blob)
        new_entries.append(e)
        parts.append(blob)
    hd["arrays"] = new_entries
    if header is not None:
        header(hd)
    hb = None
    if header_bytes is not None:
        hb = header_bytes(json.dumps(hd, sort_keys=True).encode())
    out = build(version, hd, b"".join(parts), hb)
    with open(dst, "wb") as f:
        f.write(out)
    return out


def decode(entry, blob: bytes) -> np.ndarray:
    """The array one header entry and its stored bytes describe (raw or sparse encoding)."""
    dt = np.dtype(entry["dtype"])
    shape = tuple(entry["shape"])
    if entry["encoding"] == "raw":
        return np.frombuffer(blob, dt).reshape(shape).copy()
    idt = np.dtype(entry["index_dtype"])
    nnz = entry["nnz"]
    idx = np.frombuffer(blob, idt, count=nnz)
    vals = np.frombuffer(blob, dt, offset=nnz * idt.itemsize, count=nnz)
    out = np.zeros(int(np.prod(shape)), dt)
    out[idx] = vals
    return out.reshape(shape)
