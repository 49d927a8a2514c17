"""Parquet input: Arrow record batches -> CSR :class:`streamlearn.batch.Batch`, streamed.

Files are read with ``pyarrow.parquet.ParquetFile.iter_batches`` (only the needed columns),
so memory stays bounded by a row group whatever the file's size. Arrow buffers become the
CSR arrays without a Python loop per row: list columns give their offsets and child
buffers; strings are hashed in compiled code over the Arrow string buffers
through the kernel seam (:mod:`streamlearn.kernels`: the C ports when the library is available,
and such a run never imports numba; else the numba kernels of
:mod:`streamlearn.io._parquet_kernels` and :mod:`streamlearn.io._hash_kernels`).

Accepted schemas (see ``man/streamlearn.1``, PARQUET SCHEMAS)
------------------------------------------------------------
Sparse (any of these columns present):

* ``label`` (number; null = unlabeled), optional ``weight`` (number; null = 1) and ``tag``
  (string);
* ``indices: list<integer>`` + ``values: list<number>``: the index *is* the feature hash, as
  a LIBSVM index is (VW hashes an all-digit name in the default namespace to the number
  itself); optional ``names: list<string>`` / ``namespaces: list<string>`` parallel to
  ``indices`` (written by ``streamlearn convert``: kept feature names, and the namespaces
  ``-q`` needs; without ``namespaces`` features are in the default namespace ``' '``);
* any other ``list<string>`` column ``ns`` (each string a feature with value 1) or
  ``map<string, number>`` column ``ns`` (feature -> value): hashed as VW hashes
  ``|ns feature:value`` (namespace = column name).

Wide (no list or map column): every numeric (or boolean) column other than the label,
``weight`` and ``tag`` is a feature named after its column, hashed as VW hashes feature
``colname`` in the default namespace; the label column is ``label`` or ``--label_column``.
Zero, null and NaN feature values are dropped (in every schema), as VW drops zero-valued
features; so are null strings in a ``list<string>`` namespace column.

Bad rows are skipped and listed in ``batch.extra["errors"]`` as ``(file, row, reason)`` (row
1-based), or raise :class:`~streamlearn.errors.InputError` ``file:row: reason`` with
``cfg.strict``, as malformed text lines are: a label or weight that is NaN or infinite (null
is fine: unlabeled / weight 1), a negative weight, an infinite feature value, a ``-q`` product
that overflows, or more than ``cfg.max_example_features`` features with the interactions
(counted before they are generated).
A column of the wrong type (or a duplicated column name) stops the read with one error naming
the column.

The constant feature is added as the text readers add it (hash 11650396, value 1, after the
linear features, before ``-q`` interactions) unless ``cfg.constant`` is false.
"""
from __future__ import annotations

import functools

import io
import os

import numpy as np

from .. import kernels
from ..batch import Batch
from ..errors import InputError

__all__ = ["PARQUET_MAGIC", "DEFAULT_BATCH_ROWS", "is_parquet_path", "expand_paths", "directory_files",
           "read_parquet", "read_parquet_file", "parquet_reader", "register"]

PARQUET_MAGIC = b"PAR1"
#: rows per Arrow record batch (= per streamlearn Batch) unless ``cfg.parquet_batch_rows``
DEFAULT_BATCH_ROWS = 16384

_RESERVED = ("weight", "tag", "indices", "values", "names", "namespaces")


def is_parquet_path(path: str) -> bool:
    """True for a directory, a ``*.parquet`` name, or a file starting with ``PAR1``."""
    if path == "-":
        return False
    if os.path.isdir(path) or path.endswith(".parquet"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == PARQUET_MAGIC
    except OSError:
        return False


def directory_files(path: str):
    """``(parquet, others)``: the files below directory ``path`` (recursively, each list sorted),
    ``*.parquet`` or not, skipping names starting with ``_`` or ``.`` (``_SUCCESS``, ``.crc``, hidden
    directories), as Spark and pyarrow datasets do."""
    parquet, others = [], []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for f in sorted(files):
            if not f.startswith((".", "_")):
                (parquet if f.endswith(".parquet") else others).append(os.path.join(root, f))
    return sorted(parquet), sorted(others)


def expand_paths(path: str) -> list:
    """A file -> ``[file]``; a directory -> its ``*.parquet`` files (:func:`directory_files`)."""
    if not os.path.isdir(path):
        return [path]
    out = directory_files(path)[0]
    if not out:
        raise InputError(f"{path}: directory holds no .parquet files")
    return out


# --------------------------------------------------------------------------------------------
# schema


class _Plan:
    """What to read from a file and how (decided once from its schema)."""

    def __init__(self):
        self.label = None
        self.weight = None
        self.tag = None
        self.sparse = False
        self.indices = None
        self.values = None
        self.names = None
        self.namespaces = None
        self.ns_cols = []  # (column, kind) kind in {"list", "map"}
        self.wide_cols = []
        self.columns = []


def _schema_error(src, col, typ, expected):
    return InputError(f"{src}: Parquet column '{col}' has type {typ}; expected {expected}")


def _plan(schema, src, cfg, need_ns):
    import pyarrow.types as pt

    def numeric(t):
        return pt.is_integer(t) or pt.is_floating(t) or pt.is_boolean(t) or pt.is_decimal(t)

    def stringy(t):
        return pt.is_string(t) or pt.is_large_string(t) or getattr(pt, "is_string_view", lambda _: False)(t)

    def listy(t):
        return pt.is_list(t) or pt.is_large_list(t)

    fields = {f.name: f.type for f in schema}
    if len(fields) != len(schema):
        seen = set()
        for f in schema:
            if f.name in seen:
                raise InputError(f"{src}: Parquet column '{f.name}' appears more than once")
            seen.add(f.name)
    p = _Plan()
    label_col = cfg.label_column
    if label_col is not None and label_col not in fields:
        raise InputError(f"{src}: no Parquet column '{label_col}' (--label_column); columns: "
                         + ", ".join(fields))
    label_col = label_col or "label"
    if label_col in fields:
        if not numeric(fields[label_col]):
            raise _schema_error(src, label_col, fields[label_col], "a number (the label)")
        p.label = label_col
    for name, exp in (("weight", "a number (importance weight)"),):
        if name in fields and name != label_col:
            if not numeric(fields[name]):
                raise _schema_error(src, name, fields[name], exp)
            p.weight = name
    if "tag" in fields and label_col != "tag":
        if not stringy(fields["tag"]):
            raise _schema_error(src, "tag", fields["tag"], "string")
        p.tag = "tag"

    has_idx = "indices" in fields
    has_val = "values" in fields
    if has_idx or has_val:
        if not (has_idx and has_val):
            missing = "values" if has_idx else "indices"
            raise InputError(f"{src}: Parquet column '{missing}' is missing; the sparse schema "
                             "needs both 'indices: list<integer>' and 'values: list<float>'")
        t = fields["indices"]
        if not (listy(t) and pt.is_integer(t.value_type)):
            raise _schema_error(src, "indices", t, "list<integer> (feature hashes)")
        t = fields["values"]
        if not (listy(t) and (numeric(t.value_type))):
            raise _schema_error(src, "values", t, "list<float>")
        p.indices, p.values, p.sparse = "indices", "values", True
        for name in ("names", "namespaces"):
            if name in fields:
                t = fields[name]
                if not (listy(t) and stringy(t.value_type)):
                    raise _schema_error(src, name, t, "list<string> parallel to 'indices'")
                setattr(p, name, name)

    for name, t in fields.items():
        if name in (label_col,) or name in _RESERVED:
            continue
        if listy(t):
            if not stringy(t.value_type):
                raise _schema_error(src, name, t, "list<string> (features of namespace "
                                    f"'{name}') or map<string, float>")
            p.ns_cols.append((name, "list"))
            p.sparse = True
        elif pt.is_map(t):
            if not (stringy(t.key_type) and numeric(t.item_type)):
                raise _schema_error(src, name, t, "map<string, float> (feature -> value of "
                                    f"namespace '{name}')")
            p.ns_cols.append((name, "map"))
            p.sparse = True
    if not p.sparse:
        for name, t in fields.items():
            if name in (label_col, "weight", "tag"):
                continue
            if not numeric(t):
                raise _schema_error(src, name, t, "a number (wide schema: every column other than "
                                    "the label, 'weight' and 'tag' is a numeric feature; the sparse "
                                    "schema needs 'indices: list<integer>' + 'values: list<float>' "
                                    "or list<string> / map<string, float> namespace columns)")
            p.wide_cols.append(name)
        if p.label is None and not p.wide_cols:
            raise InputError(f"{src}: Parquet file has no feature columns")
    if p.label is None:
        raise InputError(f"{src}: no Parquet label column '{label_col}' (a number; null = "
                         "unlabeled); name another with --label_column")
    cols = [c for c in (p.label, p.weight, p.tag, p.indices, p.values) if c]
    if p.names and need_ns[0]:
        cols.append(p.names)
    if p.namespaces and (need_ns[0] or need_ns[1]):
        cols.append(p.namespaces)
    cols += [c for c, _ in p.ns_cols] + p.wide_cols
    if not need_ns[0]:
        p.names = None
    if not (need_ns[0] or need_ns[1]):
        p.namespaces = None
    p.columns = cols
    return p


# --------------------------------------------------------------------------------------------
# Arrow -> numpy (zero-copy where the layout allows)


def _offsets(arr):
    """int64 offsets (len n+1) of a list / string / map array, honouring its slice offset."""
    import pyarrow.types as pt

    t = arr.type
    wide = pt.is_large_list(t) or pt.is_large_string(t)
    dt = np.int64 if wide else np.int32
    buf = arr.buffers()[1]
    o = np.frombuffer(buf, dtype=dt, count=arr.offset + len(arr) + 1)[arr.offset:]
    return o.astype(np.int64)


def _row_spans(arr):
    """(starts, ends) int64 per row of a list/map array; null rows are empty."""
    o = _offsets(arr)
    starts = o[:-1]
    ends = o[1:].copy()
    if arr.null_count:
        valid = _valid(arr)
        ends[~valid] = starts[~valid]
    return starts, ends


def _pos_map(s, e, s_their, size):
    """``None`` when a parallel list column's rows start where ours do; else an int64 map
    (length ``size``) from our flat positions to theirs (-1 outside any row)."""
    if np.array_equal(s, s_their):
        return None
    lens = e - s
    rows = np.repeat(np.arange(len(s)), lens)
    within = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    m = np.full(size, -1, np.int64)
    m[s[rows] + within] = s_their[rows] + within
    return m


@functools.cache
def _numpy_types():
    """Arrow type id -> NumPy dtype of the fixed-width numeric types :func:`_numpy` views."""
    import pyarrow as pa

    return {t.id: np.dtype(d) for t, d in (
        (pa.float64(), np.float64), (pa.float32(), np.float32), (pa.int8(), np.int8), (pa.int16(), np.int16),
        (pa.int32(), np.int32), (pa.int64(), np.int64), (pa.uint8(), np.uint8), (pa.uint16(), np.uint16),
        (pa.uint32(), np.uint32), (pa.uint64(), np.uint64))}


def _numpy(arr):
    """A numeric Arrow array -> NumPy, as ``Array.to_numpy(zero_copy_only=False)`` gives it (a view
    of the data buffer, slice offset honoured; with nulls, a copy with NaN at the nulls, integers
    as float64) without calling it: ``Array.to_numpy`` imports pandas on its first call (pyarrow
    26), ~0.65 CPU-s in every process that reads Parquet, every ``--engine dask`` worker included."""
    dt = _numpy_types().get(arr.type.id)
    bufs = arr.buffers() if dt is not None else None
    if dt is None or len(bufs) < 2 or bufs[1] is None:
        return arr.to_numpy(zero_copy_only=False)
    if not len(arr):
        return np.zeros(0, dt)
    out = np.frombuffer(bufs[1], dt, count=len(arr), offset=arr.offset * dt.itemsize)
    if arr.null_count:
        out = out.astype(np.float64 if dt.kind in "iu" else dt)
        out[~_valid(arr)] = np.nan
    return out


def _float64(arr, src, col):
    """A numeric Arrow array -> float64 numpy (nulls -> NaN); zero-copy for float64."""
    import pyarrow as pa

    if arr.type != pa.float64():
        try:
            # integers beyond 2**53 round to the nearest double (as text numbers do); a safe
            # cast refused them and failed the whole file
            arr = arr.cast(pa.float64(), safe=not pa.types.is_integer(arr.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise InputError(f"{src}: Parquet column '{col}': cannot read as a number ({e})") from None
    return _numpy(arr)


def _strings(arr):
    """A string array -> (uint8 data, int64 offsets[n+1]) (nulls are empty strings)."""
    import pyarrow as pa
    import pyarrow.types as pt

    if not (pt.is_string(arr.type) or pt.is_large_string(arr.type)):
        arr = arr.cast(pa.large_string())
    bufs = arr.buffers()
    off = _offsets(arr)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(1, np.uint8)
    return data, off


# --------------------------------------------------------------------------------------------
# one record batch


def _convert(rb, plan, cfg, src, first_row, keep_names):
    from ._parquet_codes import ROW_INF_VALUE, ROW_QUADRATIC_OVERFLOW, ROW_TOO_MANY_FEATURES

    inter = cfg.inter

    n = rb.num_rows
    col = {name: rb.column(i) for i, name in enumerate(rb.schema.names)}
    bad_rows = []  # (row mask, reason)
    labels = _float64(col[plan.label], src, plan.label) if plan.label else np.full(n, np.nan)
    if plan.label:
        nf = ~np.isfinite(labels) & _valid(col[plan.label])  # null = unlabeled; NaN is not
        if nf.any():
            bad_rows.append((nf, f"label (column '{plan.label}') is NaN or infinite"))
    if plan.weight:
        weights = _float64(col[plan.weight], src, plan.weight)
        nf = ~np.isfinite(weights) & _valid(col[plan.weight])
        if nf.any():
            bad_rows.append((nf, "importance weight (column 'weight') is NaN or infinite"))
        neg = weights < 0  # NaN (null or bad) compares False
        if neg.any():
            bad_rows.append((neg, "negative importance weight (column 'weight'; use 0 to hold an "
                             "example out of training, as VW says)"))
        if np.isnan(weights).any():  # null = 1 (bad rows are dropped below)
            weights = np.where(np.isnan(weights), 1.0, weights)
    else:
        weights = np.ones(n)

    parts = []  # (starts, ends, idx, val, letters, name_data, name_off, ns_data, ns_off)
    base = 0
    if plan.indices:
        ia, va = col[plan.indices], col[plan.values]
        s, e = _row_spans(ia)
        s2, e2 = _row_spans(va)
        bad_len = (e - s) != (e2 - s2)
        if bad_len.any():  # bad rows, dropped at the end: read them as empty
            bad_rows.append((bad_len, "Parquet columns 'indices' and 'values' have lists of "
                             "different lengths"))
            e = np.where(bad_len, s, e)
            e2 = np.where(bad_len, s2, e2)
        child = ia.values
        if child.null_count:
            bad_rows.append((_rows_holding(~_valid(child), s, e),
                             "Parquet column 'indices' holds a null index"))
            child = child.fill_null(0)
        raw = _numpy(child)
        if raw.dtype.kind == "i" and len(raw) and raw.min() < 0:
            bad_rows.append((_rows_holding(raw < 0, s, e), "Parquet column 'indices' holds a "
                             "negative index; expected feature hashes in [0, 2**32)"))
        idx = raw if raw.dtype == np.uint32 else raw.astype(np.uint32)
        vals = _float64(va.values, src, "values")
        m = _pos_map(s, e, s2, len(idx))
        if m is not None:
            v2 = np.zeros(len(idx))
            v2[m >= 0] = vals[m[m >= 0]]
            vals = v2
        elif len(vals) != len(idx):
            v2 = np.zeros(len(idx))
            k = min(len(vals), len(idx))
            v2[:k] = vals[:k]
            vals = v2
        letters = np.full(len(idx), 32, np.uint8)
        name_info = ns_info = None
        if plan.namespaces:
            nsa = col[plan.namespaces]
            ns_data, ns_off = _strings(nsa.values)
            s3, e3 = _row_spans(nsa)
            if not np.array_equal((e3 - s3)[~bad_len], (e - s)[~bad_len]):
                raise InputError(f"{src}: Parquet column 'namespaces' must hold one namespace per "
                                 "entry of 'indices' (list<string> of the same lengths)")
            m3 = _pos_map(s, e, s3, len(idx))
            lens = ns_off[1:] - ns_off[:-1]
            first_b = ns_data[np.minimum(ns_off[:-1], len(ns_data) - 1)]
            lt = np.where(lens > 0, first_b, 32).astype(np.uint8)
            if m3 is None:
                k = min(len(lt), len(idx))
                letters[:k] = lt[:k]
            else:
                letters[m3 >= 0] = lt[m3[m3 >= 0]]
            ns_info = (ns_data, ns_off, m3)
        if plan.names:
            na = col[plan.names]
            name_data, name_off = _strings(na.values)
            s4, e4 = _row_spans(na)
            if not np.array_equal((e4 - s4)[~bad_len], (e - s)[~bad_len]):
                raise InputError(f"{src}: Parquet column 'names' must hold one name per entry of "
                                 "'indices' (list<string> of the same lengths)")
            name_info = (name_data, name_off, _pos_map(s, e, s4, len(idx)))
        parts.append((s, e, idx, vals, letters, name_info, ns_info))
        base += len(idx)

    for name, kind in plan.ns_cols:
        a = col[name]
        s, e = _row_spans(a)
        seed = kernels.namespace_hash(name)
        if kind == "list":
            data, soff = _strings(a.values)
            hashes = kernels.hash_string_part(data, soff, 0, len(soff) - 1, np.uint64(seed))
            vals = np.ones(len(hashes))
            if a.values.null_count:  # a null string is no feature (value 0: dropped)
                vals[~_valid(a.values)] = 0.0
            names_info = (data, soff, None)
        else:
            keys = a.keys if hasattr(a, "keys") else a.values.field(0)
            items = a.items if hasattr(a, "items") else a.values.field(1)
            data, soff = _strings(keys)
            hashes = kernels.hash_string_part(data, soff, 0, len(soff) - 1, np.uint64(seed))
            vals = _float64(items, src, name)
            names_info = (data, soff, None)
        nsb = np.frombuffer(name.encode("utf-8"), np.uint8)
        letter = int(nsb[0]) if len(nsb) else 32  # the first byte, as in text (`|name`)
        letters = np.full(len(hashes), letter, np.uint8)
        parts.append((s, e, hashes, vals, letters, names_info, ("ns", nsb)))

    if plan.wide_cols:
        X = np.empty((n, len(plan.wide_cols)))
        for j, c in enumerate(plan.wide_cols):
            X[:, j] = _float64(col[c], src, c)
        hashes = _wide_hashes(tuple(plan.wide_cols))
        s, e, idx, vals, colj = kernels.wide_part(X, hashes)
        parts.append((s, e, idx, vals, np.full(len(idx), 32, np.uint8), ("wide", colj), None))

    # flatten parts
    if parts:
        bases = np.cumsum([0] + [len(p[2]) for p in parts])
        starts = np.stack([p[0] + bases[i] for i, p in enumerate(parts)])
        ends = np.stack([p[1] + bases[i] for i, p in enumerate(parts)])
        if len(parts) == 1:
            fidx, fval, flet = parts[0][2], parts[0][3], parts[0][4]
        else:
            fidx = np.concatenate([p[2] for p in parts])
            fval = np.concatenate([p[3] for p in parts])
            flet = np.concatenate([p[4] for p in parts])
    else:
        bases = np.zeros(1, np.int64)
        starts = np.zeros((0, n), np.int64)
        ends = np.zeros((0, n), np.int64)
        fidx, fval, flet = np.zeros(0, np.uint32), np.zeros(0), np.zeros(0, np.uint8)
    if not fval.flags.c_contiguous:
        fval = np.ascontiguousarray(fval)
    terms, toff = inter.arrays(np.unique(flet) if inter.wildcard else None)
    offsets, indices, values, srcpos, row_status = kernels.assemble_rows(
        np.ascontiguousarray(starts), np.ascontiguousarray(ends), fidx, fval, flet, terms, toff,
        inter.nsflags, bool(cfg.constant), bool(keep_names), cfg.max_example_features)

    batch = Batch(offsets, indices, values, labels, weights,
                  lines=np.arange(first_row + 1, first_row + n + 1, dtype=np.int64), source=src)
    texts = []
    tlen = [0]

    def add_text(arr):
        pos = tlen[0]
        texts.append(arr)
        tlen[0] += len(arr)
        return pos

    if plan.tag:
        tarr = col[plan.tag]
        data, off = _strings(tarr)
        b0 = add_text(data)
        ts = off[:-1] + b0
        te = off[1:] + b0
        if tarr.null_count:
            valid = _valid(tarr)
            ts = np.where(valid, ts, -1)
            te = np.where(valid, te, -1)
        batch.tag_start, batch.tag_end = ts, te
    if keep_names:
        nnz = len(indices)
        name_start = np.full(nnz, -1, np.int64)
        name_end = np.full(nnz, -1, np.int64)
        ns_start = np.full(nnz, -1, np.int64)
        ns_end = np.full(nnz, -1, np.int64)
        has = srcpos >= 0
        for i, p in enumerate(parts):
            sel = has & (srcpos >= bases[i]) & (srcpos < bases[i + 1])
            if not sel.any():
                continue
            loc = srcpos[sel] - bases[i]
            ninfo, nsinfo = p[5], p[6]
            if ninfo is None:
                continue
            if isinstance(ninfo[0], str):  # wide: ("wide", column of each entry)
                # wide: the name is the column name
                cols = plan.wide_cols
                cat = "".join(cols).encode("utf-8")
                cb = add_text(np.frombuffer(cat, np.uint8))
                coff = np.cumsum([0] + [len(c.encode("utf-8")) for c in cols])
                js = ninfo[1][loc]
                name_start[sel] = coff[js] + cb
                name_end[sel] = coff[js + 1] + cb
                continue
            data, soff, pm = ninfo
            b = add_text(data)
            k = loc if pm is None else pm[loc]
            name_start[sel] = soff[k] + b
            name_end[sel] = soff[k + 1] + b
            if nsinfo is not None:
                if isinstance(nsinfo[0], str):  # ("ns", name bytes)
                    b2 = add_text(nsinfo[1])
                    ns_start[sel] = b2
                    ns_end[sel] = b2 + len(nsinfo[1])
                else:
                    d2, o2, pm2 = nsinfo
                    b2 = add_text(d2)
                    k2 = loc if pm2 is None else pm2[loc]
                    st, en = o2[k2] + b2, o2[k2 + 1] + b2
                    empty = st == en
                    ns_start[sel] = np.where(empty, -1, st)
                    ns_end[sel] = np.where(empty, -1, en)
        batch.name_start, batch.name_end = name_start, name_end
        batch.ns_start, batch.ns_end = ns_start, ns_end
    if texts:
        batch.text = texts[0] if len(texts) == 1 else np.concatenate(texts)
    batch.extra["errors"] = []
    if row_status.any():
        bad_rows.append((row_status == ROW_INF_VALUE, "a feature value is infinite"))
        bad_rows.append((row_status == ROW_QUADRATIC_OVERFLOW, "-q interaction value (product "
                         "of two feature values) overflows the double range"))
        bad_rows.append((row_status == ROW_TOO_MANY_FEATURES,
                         f"more than {cfg.max_example_features} features with its interactions "
                         "(--max_example_features)"))
    if bad_rows:
        batch = _drop_bad_rows(batch, bad_rows, src, first_row, cfg)
    return batch


def _rows_holding(entry_mask, s, e):
    """Rows (spans ``[s, e)`` into a list column's child) holding a flagged child entry."""
    cs = np.zeros(len(entry_mask) + 1, np.int64)
    np.cumsum(entry_mask, out=cs[1:])
    return (cs[e] - cs[s]) > 0


def _valid(arr):
    """Validity (not null) of each entry of an Arrow array, as a bool numpy array.

    Read from the validity bitmap (honouring the slice offset): ``Array.is_valid()`` imports
    ``pyarrow.compute`` (~40 ms of start-up) on a first null, e.g. a file whose tags are all
    null. Arrays without a bitmap (null type, unions) go through ``is_valid()``."""
    n = len(arr)
    if not arr.null_count:
        return np.ones(n, bool)
    buf = arr.buffers()[0]
    if buf is None or arr.type.id in _NO_BITMAP_TYPES():
        return arr.is_valid().to_numpy(zero_copy_only=False)
    bits = np.unpackbits(np.frombuffer(buf, np.uint8), count=arr.offset + n, bitorder="little")
    return bits[arr.offset:].astype(bool)


_NO_BITMAP = []


def _NO_BITMAP_TYPES():
    """Arrow type ids whose first buffer is not a validity bitmap (null, unions, run-end
    encoded)."""
    if not _NO_BITMAP:
        import pyarrow as pa
        ids = {pa.null().id}
        for make in (lambda: pa.sparse_union([pa.field("a", pa.int8())]),
                     lambda: pa.dense_union([pa.field("a", pa.int8())]),
                     lambda: pa.run_end_encoded(pa.int32(), pa.int8())):
            try:
                ids.add(make().id)
            except (AttributeError, TypeError, ValueError, NotImplementedError):
                pass
        _NO_BITMAP.append(frozenset(ids))
    return _NO_BITMAP[0]


def _drop_bad_rows(batch, bad_rows, src, first_row, cfg):
    """Drop the rows flagged in ``bad_rows`` (``(mask, reason)``, first reason wins) and list
    them in ``extra["errors"]`` as ``(src, row, reason)``; raise at the first with ``strict``."""
    reason = {}
    for mask, why in bad_rows:
        for i in np.flatnonzero(mask).tolist():
            reason.setdefault(i, why)
    if not reason:
        return batch
    errors = [(src, first_row + i + 1, reason[i]) for i in sorted(reason)]
    if cfg.strict:
        s, row, why = errors[0]
        raise InputError(f"{s}:{row}: {why}")
    keep = np.ones(batch.n, bool)
    keep[sorted(reason)] = False
    counts = np.diff(batch.offsets)
    ekeep = np.repeat(keep, counts)
    offsets = np.zeros(int(keep.sum()) + 1, np.int64)
    np.cumsum(counts[keep], out=offsets[1:])

    def rows(x):
        return None if x is None else x[keep]

    def entries(x):
        return None if x is None else x[ekeep]

    out = Batch(offsets, batch.indices[ekeep], batch.values[ekeep], batch.labels[keep],
                batch.weights[keep], lines=batch.lines[keep], source=batch.source,
                text=batch.text, tag_start=rows(batch.tag_start), tag_end=rows(batch.tag_end),
                name_start=entries(batch.name_start), name_end=entries(batch.name_end),
                ns_start=entries(batch.ns_start), ns_end=entries(batch.ns_end))
    out.extra["errors"] = errors
    return out


_WIDE_CACHE = {}


def _wide_hashes(cols):
    h = _WIDE_CACHE.get(cols)
    if h is None:
        h = _WIDE_CACHE[cols] = kernels.hash_strings(list(cols), 0)
    return h


# --------------------------------------------------------------------------------------------
# files


def _same_regular_file(f, path) -> bool:
    """Whether the open file object ``f`` is the regular file at ``path``."""
    import stat

    try:
        st = os.fstat(f.fileno())
        return stat.S_ISREG(st.st_mode) and os.path.samestat(st, os.stat(path))
    except (OSError, TypeError, ValueError, AttributeError):
        return False


#: bytes per read when a non-seekable Parquet stream is copied to a temporary file
SPOOL_BYTES = 1 << 20


def _spool(stream, name):
    """Copy a non-seekable Parquet stream (stdin, a pipe, a decompressed file) to a temporary
    file in ``$TMPDIR`` and return it (open; deleted when closed). Parquet's footer is at the
    end, so the file needs random access; on disk, not in memory, RAM stays bounded by a row
    group whatever the stream's size."""
    import tempfile

    from .source import READ_ERRORS, read_error

    def no_room(e):
        return InputError(f"{name}: cannot copy the Parquet stream to a temporary file in "
                          f"{tempfile.gettempdir()} ({e.strerror or e}; set TMPDIR to a "
                          "directory with room)")

    try:
        tmp = tempfile.NamedTemporaryFile(prefix="streamlearn-", suffix=".parquet")
    except OSError as e:
        raise no_room(e) from None
    try:
        read = getattr(stream, "read1", stream.read)
        while True:
            try:
                b = read(SPOOL_BYTES)
            except READ_ERRORS as e:
                raise read_error(name, e) from None
            if not b:
                break
            try:
                tmp.write(b)
            except OSError as e:
                raise no_room(e) from None
        try:
            tmp.flush()
        except OSError as e:
            raise no_room(e) from None
    except BaseException:
        tmp.close()
        raise
    return tmp


def _open(source, name=None):
    """A path or a binary file object -> (``ParquetFile``, display name, temporary copy or
    ``None``: the caller closes it when done)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = name or ("<stdin>" if source == "-" else str(source))
    if source == "-":
        from .source import _stdin_raw

        source = _stdin_raw()  # a stream like any other pipe (spooled below)
    spool, opened = None, False
    try:
        if not isinstance(source, (str, os.PathLike)):
            plain = isinstance(source, (io.BufferedReader, io.FileIO)) and source.seekable()
            if plain and _same_regular_file(source, name):
                # pyarrow reads a path with its own file I/O; through the Python object
                # every read is a fresh bytes object (2x the page faults, ~0.1 s per 100 MB)
                source = name
            elif not plain:
                # stdin, a pipe or a decompressed (gzip) stream: Parquet needs random access
                spool = _spool(source, name)
                source = spool.name
        # column chunks are read through a 1 MiB buffer instead of whole (and not pre-buffered
        # as a row group): the Arrow pool's peak fell from 99 to 39 MB on the benchmark file
        # (65,536-row groups), as fast
        pf = pq.ParquetFile(source, pre_buffer=False, buffer_size=1 << 20)
        opened = True
        return pf, name, spool
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except PermissionError:
        raise InputError(f"{name}: permission denied") from None
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"{name}: not a readable Parquet file ({str(e).splitlines()[0]})") from None
    finally:
        if spool is not None and not opened:  # failed: drop the copy
            spool.close()


def read_parquet_file(source, cfg, batch_rows=None, name=None, row_groups=None):
    """Yield :class:`Batch` objects of one Parquet file (one per Arrow record batch).

    ``source`` is a path, ``"-"`` or a binary file object (copied to a temporary file first
    if not seekable). ``row_groups``: only these row groups (consecutive, in order; a
    partition of :mod:`streamlearn.distributed`), row numbers in messages still the file's."""
    import pyarrow as pa

    pf, src, spool = _open(source, name)
    first = 0
    try:
        keep_names = bool(cfg.keep_names)
        plan = _plan(pf.schema_arrow, src, cfg, (keep_names, bool(cfg.inter) or bool(cfg.inter.nsflags.any())))
        rows = int(batch_rows or cfg.parquet_batch_rows or DEFAULT_BATCH_ROWS)
        kw = {}
        if row_groups is not None:
            row_groups = [int(g) for g in row_groups]
            md = pf.metadata
            first = sum(md.row_group(g).num_rows for g in range(row_groups[0])) if row_groups else 0
            kw["row_groups"] = row_groups
        it = pf.iter_batches(batch_size=rows, columns=plan.columns, use_threads=True, **kw)
        for rb in it:
            if rb.num_rows == 0:
                continue
            yield _convert(rb, plan, cfg, src, first, keep_names)
            first += rb.num_rows
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{src}: cannot read Parquet data after row {first} "
                         f"({str(e).splitlines()[0]})") from None
    finally:
        if spool is not None:
            spool.close()


def parquet_reader(stream, name, cfg):
    """The ``"parquet"`` reader of :mod:`streamlearn.io.source` (``reader(stream, name, cfg)``)."""
    yield from read_parquet_file(stream, cfg, name=name)


def read_parquet(paths, cfg, batch_rows=None):
    """Yield the batches of Parquet files / directories ``paths`` (a path or a list)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for p in paths:
        for f in expand_paths(os.fspath(p)):
            yield from read_parquet_file(f, cfg, batch_rows)


def register():
    """Register :func:`parquet_reader` with :mod:`streamlearn.io.source` for ``--format
    parquet`` and the ``PAR1`` magic (done on import; ``source.LAZY_READERS`` imports this
    module on first use)."""
    from .source import register_reader

    register_reader("parquet", parquet_reader, magic=PARQUET_MAGIC)


register()
