"""Input sources: open files / stdin, detect gzip and the format, cut text into chunks of
complete lines, parse them (on ``cfg.parse_threads`` threads), and dispatch binary formats to
their reader. The one reader pipeline: :func:`read_batches`.

Format readers are looked up in :data:`READERS` (format name -> function). A reader is called
as ``reader(stream, name, cfg)`` and yields :class:`~streamlearn.batch.Batch` objects, where

* ``stream`` is a binary file object positioned at the start of the data (already
  decompressed if the input was gzip; a regular uncompressed file is passed as the opened,
  seekable file object; standard input is not seekable);
* ``name`` is the display name of the source (the path, or ``"<stdin>"``);
* ``cfg`` is the :class:`ReaderConfig`.

Binary formats announce a magic number with :func:`register_reader` (e.g. Parquet:
``register_reader("parquet", read_parquet, magic=b"PAR1")``); ``fmt="auto"`` checks these
magic numbers on the raw bytes first. Formats listed in :data:`LAZY_READERS` are imported on
first use (the module is expected to call :func:`register_reader`). Text (VW, LIBSVM, or
``auto``) is parsed here by :func:`text_batches`, whatever reader is registered for it.
"""
from __future__ import annotations

import gzip
import importlib
import io
import os
import re
import stat
import sys
import time
import zlib
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator

import numpy as np

from .. import kernels
from ..batch import Batch
from ..errors import ConfigError, InputError
from ..signals import block_in_this_thread
from ._text_codes import ERR_TOO_MANY_FEATURES, ERROR_REASONS, FMT_LIBSVM, FMT_VW
from .interactions import Interactions, chunk_namespaces

__all__ = [
    "ReaderConfig",
    "read_batches",
    "register_reader",
    "READERS",
    "MAGIC",
    "LAZY_READERS",
    "LAZY_MAGIC",
    "open_input",
    "iter_chunks",
    "text_batches",
    "parse_text",
    "sniff_text_format",
    "chunk_batch",
    "TEXT_FORMATS",
]

GZIP_MAGIC = b"\x1f\x8b"

#: format name -> reader function ``reader(stream, name, cfg) -> Iterator[Batch]``.
READERS: dict[str, Callable] = {}
#: magic bytes at the very start of a (raw) file -> format name, checked by ``fmt="auto"``.
MAGIC: dict[bytes, str] = {}
#: format name -> module imported on first use (it registers the reader).
LAZY_READERS: dict[str, str] = {"parquet": "streamlearn.io.parquet"}
#: magic bytes of the lazily imported formats (so ``auto`` need not import them to sniff).
LAZY_MAGIC: dict[bytes, str] = {b"PAR1": "parquet"}
#: the formats :func:`text_batches` parses (``auto``: sniffed per stream)
TEXT_FORMATS = ("auto", "vw", "libsvm")

#: defaults of :attr:`ReaderConfig.max_line_bytes` (256 MiB) and
#: :attr:`ReaderConfig.max_example_features` (2^22: 4,194,304 features, ~55 MB of parsed arrays)
MAX_LINE_BYTES = 256 << 20
MAX_EXAMPLE_FEATURES = 1 << 22
#: the largest values they take (2^40 bytes; the kernels' saturating counts need < 2^56)
MAX_LINE_BYTES_LIMIT = 1 << 40
MAX_EXAMPLE_FEATURES_LIMIT = 1 << 40


def register_reader(fmt: str, reader: Callable, magic: bytes | None = None) -> None:
    """Register ``reader`` for format ``fmt`` (and the magic bytes that identify it)."""
    READERS[fmt] = reader
    if magic:
        MAGIC[bytes(magic)] = fmt


@dataclass(slots=True)
class ReaderConfig:
    """How to read input: every field a reader reads (setting any other attribute raises
    ``AttributeError``).

    Parameters
    ----------
    fmt : str
        ``"auto"`` (Parquet by magic bytes if a Parquet reader is available; else the first
        non-blank line decides: a ``|`` means VW text, otherwise LIBSVM), ``"vw"``,
        ``"libsvm"`` or any registered format.
    quadratic : tuple of str
        VW ``-q`` pairs of namespace first letters, e.g. ``("ab",)``; ``:`` is VW's wildcard.
    cubic : tuple of str
        VW ``--cubic`` triples, e.g. ``("abc",)``.
    interactions : tuple of str
        VW ``--interactions`` of any order (two letters or more), e.g. ``("abcd", "a:")``.
        All three lists are processed together as VW 9 does (sorted, duplicates merged,
        wildcards expanded: :mod:`streamlearn.io.interactions`).
    leave_duplicate_interactions : bool
        VW's ``--leave_duplicate_interactions``.
    ignore, keep, ignore_linear : tuple of str
        VW's ``--ignore`` / ``--keep`` / ``--ignore_linear`` namespace first letters.
    constant : bool
        Add VW's constant feature (hash 11650396, value 1) to every example.
    keep_names : bool
        Fill ``Batch.name_start/name_end/ns_start/ns_end`` (spans into ``Batch.text``).
    chunk_bytes : int
        Approximate number of bytes parsed per call (one batch per chunk).
    strict : bool
        Raise :class:`~streamlearn.errors.InputError` at the first malformed line instead of
        skipping it (skipped lines are listed in ``batch.extra["errors"]``).
    parse_threads : int
        Threads parsing the chunks of a text input at the same time (results in order, and
        the same whatever the number); 1 parses on the thread that reads.
    label_column : str or None
        Parquet: the label column (default ``label``).
    parquet_batch_rows : int or None
        Parquet: rows per Arrow record batch, i.e. per batch (default
        :data:`streamlearn.io.parquet.DEFAULT_BATCH_ROWS`).
    max_line_bytes : int
        The longest text line read (bytes before its newline): a longer one, or a stream
        with no newline that goes on past it (``/dev/zero``, a gzip bomb), stops the read with
        an :class:`~streamlearn.errors.InputError` naming the file and line, instead of
        growing a buffer without limit (:data:`MAX_LINE_BYTES`).
    max_example_features : int
        The most features an example may have, its linear ones, the constant and its
        interactions together (:data:`MAX_EXAMPLE_FEATURES`): a line (or Parquet row) with
        more is malformed, found before its interactions are generated, so that one line's
        ``-q`` products cannot take unbounded memory.

    ``inter`` is the :class:`~streamlearn.io.interactions.Interactions` of these fields as
    the kernels take them, validated when the config is made and computed once.
    """

    fmt: str = "auto"
    quadratic: tuple = ()
    cubic: tuple = ()
    interactions: tuple = ()
    leave_duplicate_interactions: bool = False
    ignore: tuple = ()
    keep: tuple = ()
    ignore_linear: tuple = ()
    constant: bool = True
    keep_names: bool = False
    chunk_bytes: int = 1 << 20  # 1 MiB: as fast as 4 MiB, half the RSS in flight (benchmarks/memory_stream.py)
    strict: bool = False
    parse_threads: int = 1
    label_column: str | None = None
    parquet_batch_rows: int | None = None
    max_line_bytes: int = MAX_LINE_BYTES
    max_example_features: int = MAX_EXAMPLE_FEATURES
    _inter: tuple = field(default=(None, None), init=False, repr=False, compare=False)

    def __post_init__(self):
        for f in _NS_FIELDS:
            v = getattr(self, f)
            setattr(self, f, (v,) if isinstance(v, str) else tuple(v or ()))
        self.inter  # noqa: B018 - validate the interactions here, once
        if int(self.chunk_bytes) < 1:
            raise ConfigError("chunk_bytes must be positive")
        self.chunk_bytes = int(self.chunk_bytes)
        if int(self.parse_threads) < 1:
            raise ConfigError("parse_threads must be positive")
        self.parse_threads = int(self.parse_threads)
        self.max_line_bytes = _limit("--max_line_bytes", self.max_line_bytes, MAX_LINE_BYTES_LIMIT)
        self.max_example_features = _limit("--max_example_features", self.max_example_features,
                                           MAX_EXAMPLE_FEATURES_LIMIT)

    @property
    def inter(self) -> Interactions:
        """The :class:`~streamlearn.io.interactions.Interactions` of the namespace fields
        (computed once; again if a field is reassigned)."""
        key = tuple(getattr(self, f) for f in _NS_FIELDS) + (bool(self.leave_duplicate_interactions),)
        of, inter = self._inter
        if of != key:
            inter = Interactions(self.quadratic, self.cubic, self.interactions, self.ignore,
                                 self.keep, self.ignore_linear, self.leave_duplicate_interactions)
            self._inter = (key, inter)
        return inter


_NS_FIELDS = ("quadratic", "cubic", "interactions", "ignore", "keep", "ignore_linear")


def _limit(option: str, v, most: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= most:
        raise ConfigError(f"{option} must be an integer in 1..{most}, got {v!r}")
    return int(v)


# ----------------------------------------------------------------------------------------
# opening and chunking


class _Prefixed(io.RawIOBase):
    """A non-seekable stream that first returns ``prefix`` and then the rest of ``raw``."""

    def __init__(self, prefix: bytes, raw):
        self._prefix = prefix
        self._raw = raw

    def readable(self):
        return True

    def readinto(self, b):
        if self._prefix:
            n = min(len(b), len(self._prefix))
            b[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._raw.read1(len(b)) if hasattr(self._raw, "read1") else self._raw.read(len(b))
        n = len(data)
        b[:n] = data
        return n


def _read_head(raw, n: int) -> bytes:
    head = b""
    while len(head) < n:
        d = raw.read(n - len(head))
        if not d:
            break
        head += d
    return head


FLUSH_SECONDS = 0.2
#: feature entries a text batch aims at, at most (see text_batches), and the smallest chunk
BATCH_ENTRIES = 1 << 21
MIN_CHUNK_BYTES = 1 << 14
FIRST_CHUNK_BYTES = 1 << 16


def _is_regular(f) -> bool:
    try:
        return stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):
        return False


def _stdin_raw():
    """Standard input as an unbuffered file object. The reader thread blocks in its reads;
    a raw ``FileIO`` has no buffer lock, so an exit (an interrupt, an error) while it waits
    cannot trip CPython's "could not acquire lock for <stdin> at interpreter shutdown"
    abort, as ``sys.stdin.buffer`` would."""
    try:
        return open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)
    except (AttributeError, OSError, ValueError):  # a replaced sys.stdin (tests, embedding)
        return sys.stdin.buffer


class _Input:
    """An opened input: ``raw`` (file object), ``head`` (first raw bytes), ``stream``
    (decompressed data from the start), ``gz``, ``name``."""

    def __init__(self, path: str):
        self.path = path
        self.name = "<stdin>" if path == "-" else str(path)
        self._own = None
        try:
            if path == "-":
                raw = _stdin_raw()
            else:
                raw = open(path, "rb")
                self._own = raw
            seekable = raw.seekable() if path != "-" else False
            head = _read_head(raw, 8)
            if seekable:
                raw.seek(0)
            else:
                raw = _Prefixed(head, raw)
        except OSError as e:
            self.close()
            raise InputError(f"{self.name}: cannot read input file: {e.strerror or e}") from None
        self.raw = raw
        # a pipe / terminal / socket: its data may trickle in, so chunks are handed on after
        # FLUSH_SECONDS rather than only when full (a regular file is read in full chunks)
        self.flush_after = None if seekable and _is_regular(raw) else FLUSH_SECONDS
        self.head = head
        self.gz = head[:2] == GZIP_MAGIC
        self.stream = gzip.GzipFile(fileobj=raw, mode="rb") if self.gz else raw

    def content_head(self, n: int = 8) -> bytes:
        """The first bytes of the content (decompressed for gzip, without consuming them), for
        sniffing a binary format inside gzip (``x.parquet.gz``); ``b""`` if a gzip stream
        cannot be decompressed (its reader reports that)."""
        if not self.gz:
            return self.head[:n]
        try:
            return bytes(self.stream.peek(n)[:n])
        except READ_ERRORS:
            return b""

    def close(self):
        if self._own is not None:
            try:
                self._own.close()
            except OSError:
                pass
            self._own = None


def open_input(path: str) -> _Input:
    """Open ``path`` (``"-"`` = standard input, binary); gzip is detected by its magic bytes.
    Raises :class:`InputError` for a missing/unreadable file."""
    return _Input(path)


def _readinto_full(stream, mv, name: str, flush_after=None, have_line=None):
    """Fill ``mv`` from ``stream`` as far as possible. Returns ``(bytes read, error, eof)``:
    the read is short at the end of the stream (``eof``), when reading failed (truncated/
    corrupt gzip, I/O error), in which case ``error`` is the :class:`InputError` to raise once
    the complete lines already read have been used, or, with ``flush_after`` seconds, when
    that long has passed and ``have_line(n)`` says a complete line is in hand (slow pipes)."""
    n = 0
    total = len(mv)
    t0 = time.monotonic() if flush_after is not None else 0.0
    try:
        while n < total:
            # at most _READ_STEP per call: a gzip stream decompresses each call into a
            # temporary of its size (a long line's big buffer would be doubled)
            r = stream.readinto(mv[n:n + _READ_STEP])
            if not r:
                return n, None, True
            n += r
            if flush_after is not None and time.monotonic() - t0 >= flush_after and have_line(n):
                return n, None, False
    except READ_ERRORS as e:
        return n, read_error(name, e), True
    return n, None, False


_READ_STEP = 4 << 20

#: what reading an input stream can raise (truncated or corrupt gzip, I/O): see :func:`read_error`
READ_ERRORS = (EOFError, zlib.error, OSError)  # gzip.BadGzipFile is an OSError


def read_error(name: str, e: BaseException) -> InputError:
    """The :class:`InputError` for a failed read of input ``name`` (truncated or corrupt gzip,
    I/O error)."""
    if isinstance(e, EOFError):
        return InputError(f"{name}: gzip stream is truncated")
    if isinstance(e, (gzip.BadGzipFile, zlib.error)):
        return InputError(f"{name}: corrupt gzip stream ({e})")
    return InputError(f"{name}: read error: {getattr(e, 'strerror', None) or e}")


class LineTooLong(InputError):
    """A text line longer than ``ReaderConfig.max_line_bytes`` (raised by :func:`iter_chunks`
    after every complete line before it was yielded; :func:`text_batches` names the line)."""

    def __init__(self, name: str, limit: int):
        super().__init__(f"{name}: a line longer than {limit} bytes (--max_line_bytes)")
        self.name, self.limit = name, limit


def _first_long_line(arr: np.ndarray, limit: int):
    """Offset of the first line of ``arr`` longer than ``limit`` bytes (before its newline),
    or None. Only a chunk longer than ``limit`` can hold one, so the usual chunk (1 MiB, under
    the 256 MiB default) costs one comparison."""
    if len(arr) <= limit:
        return None
    nl = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(arr)]))
    long = np.flatnonzero(ends - starts > limit)
    return int(starts[long[0]]) if len(long) else None


def iter_chunks(stream, name: str, chunk_bytes, flush_after=None,
                max_line_bytes: int | None = None) -> Iterator[np.ndarray]:
    """Yield ``uint8`` arrays of complete lines (each ends with ``\\n`` except possibly the
    last chunk of the stream). Each array is a zero-copy view of a fresh buffer, so it stays
    valid after the next chunk is read. A line longer than ``chunk_bytes`` makes the chunk grow,
    up to ``max_line_bytes``: a longer line (or a stream that goes on without a newline)
    raises :class:`LineTooLong` once the complete lines before it were yielded, so memory
    stays bounded whatever the input.
    With ``flush_after`` (seconds; for pipes), a chunk is handed on once that long has passed
    and it holds a complete line, so a slowly written stream is learned from as it comes.
    ``chunk_bytes`` may be a one-element list, read before each chunk (the caller may change it)."""
    budget = chunk_bytes if isinstance(chunk_bytes, list) else [chunk_bytes]
    limit = max_line_bytes
    carry = b""
    size = None  # None: the budget's size (a long line doubles it until the line fits)

    def lines(arr):
        """``arr``, or the complete lines before a line past the limit (then raise)."""
        at = None if limit is None else _first_long_line(arr, limit)
        if at is None:
            return arr, None
        return (arr[:at] if at else None), LineTooLong(name, limit)

    while True:
        want = max(size or budget[0], len(carry) + 1)
        if size is not None and limit is not None:
            want = min(want, limit + 2)  # room for the longest line, its newline and one byte
        buf = bytearray(want)
        c = len(carry)
        buf[:c] = carry
        carry = b""  # a long line's old buffer is freed before the read (peak 1.5x the line)
        mv = memoryview(buf)
        got, err, eof = _readinto_full(stream, mv[c:], name, flush_after,
                                       lambda m: buf.rfind(b"\n", 0, c + m) >= 0)
        n = c + got
        mv.release()
        if err is not None:
            # the good lines read before the failure are still learned from; the last,
            # incomplete line is dropped with the rest of the damaged stream
            k = buf.rfind(b"\n", 0, n)
            if k >= 0:
                arr, long = lines(np.frombuffer(buf, dtype=np.uint8, count=k + 1))
                if arr is not None:
                    yield arr
                if long is not None:
                    raise long
            raise err
        if eof:  # end of stream
            if n:
                arr, long = lines(np.frombuffer(buf, dtype=np.uint8, count=n))
                if arr is not None:
                    yield arr
                if long is not None:
                    raise long
            return
        k = buf.rfind(b"\n", 0, n)
        if k < 0:  # no complete line yet: read a bigger piece
            if limit is not None and n > limit:
                raise LineTooLong(name, limit)
            carry = buf  # not handed out: copied into the bigger buffer, not first into bytes
            size = 2 * len(buf)
            continue
        carry = bytes(buf[k + 1:n])
        size = None
        arr, long = lines(np.frombuffer(buf, dtype=np.uint8, count=k + 1))
        if arr is not None:
            yield arr
        if long is not None:
            raise long


_NONBLANK = re.compile(rb"[^ \t\r\n\v\f]")


def sniff_text_format(chunk: np.ndarray) -> str | None:
    """``"vw"`` if the first non-blank line contains ``|``, ``"libsvm"`` if it does not,
    ``None`` if the chunk is blank."""
    data = chunk.data
    m = _NONBLANK.search(data)
    if m is None:
        return None
    start = m.start()
    end = start
    n = len(chunk)
    nl = np.flatnonzero(chunk[start:] == 10)
    end = start + int(nl[0]) if len(nl) else n
    return "vw" if 124 in chunk[start:end] else "libsvm"


def parse_text(text, cfg: ReaderConfig | None, name: str, fmt: str) -> Batch:
    """Parse VW text or LIBSVM (``fmt``) held in memory into one batch (for tests and the
    Python API); ``extra["errors"]`` lists the skipped lines, spans point into ``text``."""
    import io as _io
    from dataclasses import replace

    from ..batch import concat_batches

    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    cfg1 = replace(cfg or ReaderConfig(fmt=fmt), fmt=fmt, chunk_bytes=max(len(data) + 1, 1))
    batches = list(text_batches(_io.BytesIO(data), name, cfg1, fmt))
    if len(batches) == 1:
        return batches[0]
    out = concat_batches(batches)
    out.source = name
    out.extra["errors"] = [e for b in batches for e in b.extra.get("errors", [])]
    return out


def _looks_binary(chunk: np.ndarray) -> bool:
    """Whether a chunk's first 4 KiB look like binary data rather than text: a NUL byte, or
    more than 10% control bytes other than whitespace (for the "not what it claims" error)."""
    head = chunk[:4096]
    if head.size == 0:
        return False
    ctrl = (head < 32) & ~np.isin(head, (9, 10, 11, 12, 13))
    return bool((head == 0).any() or ctrl.mean() > 0.1)


def chunk_batch(chunk: np.ndarray, name: str, cfg: ReaderConfig, fmt: str, line_base: int = 0):
    """Parse one chunk of complete lines (``uint8``; the last line may lack ``\\n``) in ``fmt``
    (``"vw"``, ``"libsvm"``, or ``"auto"`` to sniff it) with :func:`streamlearn.kernels.parse_chunk`
    -> ``(batch, n_lines)``: the batch (``None`` when the chunk holds no example and no
    malformed line) with line numbers after ``line_base``, and the number of lines in the
    chunk. Raises :class:`InputError` at the first malformed line when ``cfg.strict``."""
    if fmt == "auto":
        fmt = sniff_text_format(chunk) or "auto"
    code = FMT_LIBSVM if fmt == "libsvm" else FMT_VW
    inter = cfg.inter
    terms, toff = inter.arrays(chunk_namespaces(chunk, fmt) if inter.wildcard else None)
    keep = bool(cfg.keep_names)
    (offsets, indices, values, labels, weights, ex_line, tag_start, tag_end,
     name_start, name_end, ns_start, ns_end, err_line, err_code, n_lines) = kernels.parse_chunk(
        chunk, code, terms, toff, inter.nsflags, bool(cfg.constant), keep, cfg.max_example_features)
    errors = [(name, line_base + int(ln) + 1, _reason(int(c), cfg)) for ln, c in zip(err_line, err_code)]
    if errors and cfg.strict:
        src, ln, reason = errors[0]
        raise InputError(f"{src}:{ln}: {reason}")
    n_lines = int(n_lines)
    if len(labels) == 0 and not errors:
        return None, n_lines
    # the raw bytes stay with the batch only when something points into them (tags, names):
    # a batch in flight then holds its arrays, not also the chunk (bounded-memory pipeline)
    text = chunk if keep or (tag_start >= 0).any() else None
    return Batch(
        offsets=offsets,
        indices=indices,
        values=values,
        labels=labels,
        weights=weights,
        lines=ex_line + (line_base + 1),
        source=name,
        text=text,
        tag_start=tag_start if text is not None else None,
        tag_end=tag_end if text is not None else None,
        name_start=name_start if keep else None,
        name_end=name_end if keep else None,
        ns_start=ns_start if keep else None,
        ns_end=ns_end if keep else None,
        extra={"errors": errors, "format": "binary" if errors and _looks_binary(chunk) else fmt,
               "bytes": len(chunk)},
    ), n_lines


def _reason(code: int, cfg: ReaderConfig) -> str:
    """The reason reported for a malformed line's error ``code``."""
    if code == ERR_TOO_MANY_FEATURES:
        return (f"more than {cfg.max_example_features} features with its interactions "
                "(--max_example_features)")
    return ERROR_REASONS.get(code, f"error {code}")


class _Now:
    """A finished "future" (``done()``, ``result()``): a chunk parsed on the reading thread."""

    __slots__ = ("_value", "_exc")

    def __init__(self, fn, *args):
        self._value = self._exc = None
        try:
            self._value = fn(*args)
        except BaseException as e:  # noqa: BLE001 - raised by result(), in stream order
            self._exc = e

    def done(self):
        return True

    def cancel(self):
        return False

    def result(self):
        if self._exc is not None:
            raise self._exc
        return self._value


def text_batches(stream, name: str, cfg: ReaderConfig, fmt: str, flush_after=None) -> Iterator[Batch]:
    """Parse a text stream in ``fmt`` (``"vw"``, ``"libsvm"`` or ``"auto"``) into batches,
    one per chunk (``flush_after``: see :func:`iter_chunks`).

    The chunks are parsed by ``cfg.parse_threads`` threads at the same time (one: on this
    thread), each chunk in place, results taken in order; line numbers are made absolute and
    the ``strict`` error raised here, so both name the right line whatever the threads."""
    workers = cfg.parse_threads
    # each chunk is parsed as a whole stream: never strict (the error is raised in finish())
    wcfg = replace(cfg, strict=False) if cfg.strict else cfg
    line_base = 0
    pending = deque()
    ex = None
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor  # here: it imports logging (start-up)

        ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="streamlearn-parse",
                                initializer=block_in_this_thread)  # signals land on the main thread
    submit = ex.submit if ex is not None else _Now

    def finish(fut):
        nonlocal line_base
        batch, n_lines = fut.result()
        base = line_base
        line_base += n_lines
        if batch is None:
            return None
        if batch.nnz > BATCH_ENTRIES:
            per_entry = batch.extra.get("bytes", budget[0]) / batch.nnz
            budget[0] = max(MIN_CHUNK_BYTES, min(budget[0], int(per_entry * BATCH_ENTRIES)))
        elif batch.nnz < BATCH_ENTRIES // 2 and budget[0] < cfg.chunk_bytes:
            budget[0] = min(cfg.chunk_bytes, 2 * budget[0])
        if base:
            batch.lines += base
            errs = batch.extra.get("errors")
            if errs:
                batch.extra["errors"] = [(s, ln + base, r) for s, ln, r in errs]
        errs = batch.extra.get("errors")
        if errs and cfg.strict:
            s, ln, reason = errs[0]
            raise InputError(f"{s}:{ln}: {reason}")
        return batch

    failed_read = None
    # interactions can make a chunk's batch far bigger than its text (--cubic: thousands of
    # features per line): later chunks shrink so that a batch holds about BATCH_ENTRIES
    # entries, which keeps the pipeline's memory bounded by a few such batches
    # (starting small when there are interactions, growing back while batches stay small)
    budget = [min(cfg.chunk_bytes, FIRST_CHUNK_BYTES) if cfg.inter else cfg.chunk_bytes]
    chunks = iter_chunks(stream, name, budget, flush_after, cfg.max_line_bytes)
    try:
        while True:
            # only a failed *read* is caught here (damaged stream: the chunks read before it
            # still count); the strict error raised by finish() must stop the run at once
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            except InputError as e:
                failed_read = e
                break
            if fmt == "auto":
                fmt = sniff_text_format(chunk) or "auto"
            pending.append(submit(chunk_batch, chunk, name, wcfg, fmt))
            # in order; a parsed head is handed on at once (a slow pipe's batches must not
            # wait for later chunks); at most ``workers`` chunks in flight here, so the
            # pipeline's memory is bounded by a few chunks whatever the stream's length
            while pending and (len(pending) >= workers or pending[0].done()):
                b = finish(pending.popleft())
                if b is not None:
                    yield b
        while pending:
            b = finish(pending.popleft())
            if b is not None:
                yield b
        if isinstance(failed_read, LineTooLong):
            # every line before it was parsed: line_base counts them
            raise InputError(f"{name}:{line_base + 1}: line longer than {failed_read.limit} bytes "
                             "(--max_line_bytes; is this a text file?)")
        if failed_read is not None:
            raise failed_read
    finally:
        for f in pending:
            f.cancel()
        if ex is not None:
            ex.shutdown(wait=True)


def _reader_for(fmt: str) -> Callable:
    if fmt not in READERS and fmt in LAZY_READERS:
        try:
            importlib.import_module(LAZY_READERS[fmt])
        except ModuleNotFoundError as e:
            if e.name != LAZY_READERS[fmt]:
                raise
    if fmt not in READERS:
        known = ", ".join(sorted(set(READERS) | {"auto"}))
        raise ConfigError(f"unknown input format {fmt!r} (known: {known})")
    return READERS[fmt]


def _magic_format(head: bytes) -> str | None:
    for magic, fmt in MAGIC.items():
        if head.startswith(magic):
            return fmt
    for magic, fmt in LAZY_MAGIC.items():
        if head.startswith(magic):
            return fmt
    return None


def read_batches(paths: str | Iterable[str], cfg: ReaderConfig | None = None) -> Iterator[Batch]:
    """Read the inputs ``paths`` in order (``"-"`` = standard input) and yield batches: text
    through :func:`text_batches` (``cfg.parse_threads`` parsing threads), other formats through
    their registered reader.

    Gzip is detected by its magic bytes (files and stdin). Errors in the data raise
    :class:`~streamlearn.errors.InputError` naming the file (and line where known):
    missing/unreadable file, truncated or corrupt gzip, and with ``cfg.strict`` the first
    malformed line. Without ``strict``, malformed lines are skipped and listed in
    ``batch.extra["errors"]`` as ``(source, line, reason)``. Line numbers restart at 1 in
    each file.
    """
    cfg = cfg or ReaderConfig()
    if isinstance(paths, (str, bytes)):
        paths = [paths]
    if cfg.fmt != "auto":
        _reader_for(cfg.fmt)  # unknown format -> ConfigError before any I/O
    for k, path in enumerate(paths):
        src = open_input(path)
        try:
            fmt = cfg.fmt
            if fmt == "auto":
                # the decompressed head: a gzip'd Parquet file is Parquet
                fmt = _magic_format(src.content_head()) or "auto"
            if fmt in TEXT_FORMATS:
                yield from _stamped(text_batches(src.stream, src.name, cfg, fmt, src.flush_after), k, src)
                continue
            try:
                reader = _reader_for(fmt)
            except ConfigError:
                if cfg.fmt == "auto":
                    raise InputError(f"{src.name}: looks like {fmt}, but no {fmt} reader is "
                                     "available") from None
                raise
            yield from _stamped(reader(src.stream, src.name, cfg), k, None)
        finally:
            src.close()


def _stamped(batches, k: int, src):
    """``batches`` of input ``k``, each stamped with how far the input is read,
    ``batch.extra["input_pos"] = (k, position)`` (:mod:`streamlearn.io.position`): a text
    input's bytes (gzip: the compressed bytes consumed), a binary one's rows (``src`` None)."""
    from .position import raw_position

    pos = 0
    fd = None
    if src is not None and src.gz:
        fd = 0 if src.path == "-" else src._own.fileno()
    for b in batches:
        if src is None:
            pos += b.n + len(b.extra.get("errors") or ())
        elif fd is not None:
            pos = raw_position(fd)
        else:
            pos += b.extra.get("bytes", 0)
        b.extra["input_pos"] = (k, pos)
        yield b
