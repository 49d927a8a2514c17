"""``convert``: VW text / LIBSVM (plain or gzip, files or stdin) -> Parquet (sparse schema).

>>> from streamlearn.convert import ConvertConfig, convert
>>> convert(ConvertConfig(inputs=["sample_data/a9a_train_3k.libsvm.gz"], output="a9a.parquet"))  # doctest: +SKIP

The file holds one row per example:

==============  ======================  ==================================================
column          type                    content
==============  ======================  ==================================================
``label``       double                  the label (null = unlabeled)
``weight``      double                  importance weight
``tag``         string                  the tag (null = none)
``indices``     list<uint32>            full 32-bit VW feature hashes of the linear features
``values``      list<double>            their values (namespace weights multiplied in)
``names``       list<string>            the feature names as written in the text
``namespaces``  list<string>            each feature's namespace ("" = default); ``-q`` uses it
==============  ======================  ==================================================

The text is read with ``keep_names=True``, no constant and no interactions, so the reader adds
the constant and ``-q`` pairs at train time exactly as the text reader does (same features
in the same order, hence the same progressive loss). Output is written to a temporary file in
the destination directory and renamed when complete; ``-`` writes it to standard output, and a
FIFO or device is written in place.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from .errors import ConfigError, InputError
from .io.source import MAX_EXAMPLE_FEATURES, MAX_LINE_BYTES

__all__ = ["ConvertConfig", "convert", "batch_to_arrow", "SPARSE_SCHEMA"]

DEFAULT_ROW_GROUP = 65536


@dataclass
class ConvertConfig:
    """Options of a conversion (the CLI fills it)."""

    inputs: list = field(default_factory=lambda: ["-"])
    output: str = "out.parquet"
    fmt: str = "auto"  # input text format: auto / vw / libsvm
    row_group_size: int = DEFAULT_ROW_GROUP
    compression: str = "lz4"  # or snappy, zstd, gzip, none (lz4: fastest to decode of the compressed ones)
    names: bool = True  # keep feature names and namespaces
    strict: bool = False
    quiet: bool = False
    chunk_bytes: int = 1 << 22
    max_line_bytes: int = MAX_LINE_BYTES  # a longer text line is an input error
    max_example_features: int = MAX_EXAMPLE_FEATURES  # a line with more features is malformed


def _list_type(t):
    import pyarrow as pa

    return pa.list_(pa.field("element", t, nullable=False))


def _schema(names: bool):
    import pyarrow as pa

    # the feature lists and their elements are never null: declared so, Parquet stores no
    # definition levels for them and pyarrow decodes them ~15% faster (readers accept either)
    fields = [
        pa.field("label", pa.float64()),
        pa.field("weight", pa.float64()),
        pa.field("tag", pa.string()),
        pa.field("indices", _list_type(pa.uint32()), nullable=False),
        pa.field("values", _list_type(pa.float64()), nullable=False),
    ]
    if names:
        fields += [pa.field("names", _list_type(pa.string()), nullable=False),
                   pa.field("namespaces", _list_type(pa.string()), nullable=False)]
    return pa.schema(fields, metadata={b"streamlearn": b"sparse-v1"})


def SPARSE_SCHEMA(names: bool = True):  # noqa: N802 - documented constant-like accessor
    """The Arrow schema ``convert`` writes."""
    return _schema(names)


def _gather_strings(text, start, end):
    """Spans of ``text`` -> (int32/int64 offsets, uint8 data) without a Python loop; spans
    with ``start < 0`` become empty strings."""
    start = np.asarray(start, np.int64)
    end = np.asarray(end, np.int64)
    valid = start >= 0
    lens = np.where(valid, end - start, 0)
    offs = np.zeros(len(start) + 1, np.int64)
    np.cumsum(lens, out=offs[1:])
    total = int(offs[-1])
    if total:
        pos = np.arange(total, dtype=np.int64) + np.repeat(np.where(valid, start, 0) - offs[:-1], lens)
        data = np.asarray(text)[pos]
    else:
        data = np.zeros(0, np.uint8)
    return offs, data


def _string_array(text, start, end, nullable):
    import pyarrow as pa

    offs, data = _gather_strings(text, start, end)
    n = len(offs) - 1
    typ = pa.string() if offs[-1] < 2**31 else pa.large_string()
    o = offs.astype(np.int32) if typ == pa.string() else offs
    validity = None
    nulls = 0
    if nullable:
        valid = np.asarray(start) >= 0
        nulls = int(n - valid.sum())
        if nulls:
            validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(o), pa.py_buffer(data)], null_count=nulls)
    return arr.cast(pa.string()) if typ != pa.string() else arr


def _list_array(offsets, child):
    import pyarrow as pa

    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), child, type=_list_type(child.type))


def batch_to_arrow(batch, names: bool = True):
    """One :class:`~streamlearn.batch.Batch` (read with no constant, no ``-q``) -> an Arrow
    record batch of the sparse schema."""
    import pyarrow as pa

    n = batch.n
    labels = pa.array(batch.labels, mask=np.isnan(batch.labels))
    weights = pa.array(batch.weights)
    if batch.tag_start is not None and np.any(batch.tag_start >= 0):
        tags = _string_array(batch.text, batch.tag_start, batch.tag_end, nullable=True)
    else:
        tags = pa.nulls(n, pa.string())
    offs = batch.offsets
    if offs[-1] >= 2**31:  # pragma: no cover - a 4 MB chunk never holds that many
        raise InputError(f"{batch.source}: batch too large to convert")
    cols = [labels, weights, tags,
            _list_array(offs, pa.array(batch.indices, pa.uint32())),
            _list_array(offs, pa.array(batch.values, pa.float64()))]
    if names:
        nnz = batch.nnz
        if batch.name_start is not None:
            nm = _string_array(batch.text, batch.name_start, batch.name_end, nullable=False)
            ns = _string_array(batch.text, batch.ns_start, batch.ns_end, nullable=False)
        else:
            nm = ns = pa.array([""] * nnz, pa.string())
        cols += [_list_array(offs, nm), _list_array(offs, ns)]
    return pa.RecordBatch.from_arrays(cols, schema=_schema(names))


def convert(cfg: ConvertConfig, log=None) -> dict:
    """Convert ``cfg.inputs`` to one Parquet file ``cfg.output``; returns a summary dict
    (``examples``, ``skipped_lines``, ``row_groups``, ``bytes``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .io import ReaderConfig, read_batches

    log = log or (lambda line: None)
    if cfg.fmt not in ("auto", "vw", "libsvm"):
        raise ConfigError(f"convert reads VW text or LIBSVM, not {cfg.fmt!r}")
    if cfg.row_group_size < 1:
        raise ConfigError("--row_group_size must be >= 1")
    for p in cfg.inputs:
        if p != "-" and not os.path.isfile(p):
            raise InputError(f"{p}: no such file" if not os.path.exists(p) else f"{p}: not a regular file")
    from .io.writing import OutputPlan

    # -o is checked before reading (not an input, creatable; '-': standard output, not a
    # terminal), written to a locked temporary beside it and renamed (a FIFO: written in place)
    plan = OutputPlan([("-o", cfg.output, "Parquet file")], [(None, p) for p in cfg.inputs])
    rc = ReaderConfig(fmt=cfg.fmt, quadratic=(), constant=False, keep_names=bool(cfg.names),
                      chunk_bytes=cfg.chunk_bytes, strict=cfg.strict, max_line_bytes=cfg.max_line_bytes,
                      max_example_features=cfg.max_example_features)
    schema = _schema(cfg.names)
    examples = skipped = groups = 0
    pending, pending_rows = [], 0
    written = [None]

    def write(sink):
        nonlocal examples, skipped, pending_rows
        with pq.ParquetWriter(sink, schema, compression=cfg.compression,
                              write_statistics=["label", "weight"]) as w:
            def flush(final):
                # full row groups of exactly row_group_size rows; the rest waits (or, at the
                # end, becomes the last, smaller group)
                nonlocal pending, pending_rows, groups
                if not pending_rows:
                    return
                tab = pa.Table.from_batches(pending, schema=schema)
                rgs = cfg.row_group_size
                while len(tab) >= rgs or (final and len(tab)):
                    k = min(rgs, len(tab))
                    w.write_table(tab.slice(0, k), row_group_size=k)
                    groups += 1
                    tab = tab.slice(k)
                pending = tab.to_batches()
                pending_rows = len(tab)

            for batch in read_batches(list(cfg.inputs), rc):
                for src, line, reason in batch.extra.get("errors", ()):
                    skipped += 1
                    if not cfg.quiet:
                        log(f"warning: {src}:{line}: {reason}; line skipped")
                if batch.n == 0:
                    continue
                pending.append(batch_to_arrow(batch, cfg.names))
                pending_rows += batch.n
                examples += batch.n
                if pending_rows >= cfg.row_group_size:
                    flush(False)
            flush(True)
        try:
            sink.flush()
            written[0] = os.fstat(sink.fileno()).st_size if _is_regular(sink) else None
        except (OSError, ValueError):
            pass

    try:
        plan.stage("-o", write)
        plan.commit()
    finally:
        plan.discard()
    size = written[0]
    summary = {"examples": examples, "skipped_lines": skipped, "row_groups": groups,
               "bytes": size, "output": cfg.output}
    if not cfg.quiet:
        log(f"wrote {'standard output' if cfg.output == '-' else cfg.output}: {examples} examples, "
            f"{groups} row groups" + (f", {size} bytes" if size is not None else "")
            + (f" ({skipped} malformed lines skipped)" if skipped else ""))
    return summary


def _is_regular(f) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(f.fileno()).st_mode)
