"""How far a run has read its inputs: the size of each input, known before reading, and the
position :func:`~streamlearn.io.read_batches` stamps on each batch, for a progress bar's
position and ETA.

Each input is measured in its own unit: a text file (plain or gzip) in the bytes of the file
on disk (for gzip, the compressed bytes consumed), a Parquet file in rows (from its footer's
metadata). Standard input has a size only when it is a regular file (``< data.vw``); a pipe,
a FIFO or a device has none (no ETA). :class:`Extents` turns a batch's stamp
``batch.extra["input_pos"] = (input index, position)`` into one position over all inputs and
passes, in bytes (Parquet rows scaled to the file's bytes when inputs are mixed) or in rows
when every input is Parquet.
"""
from __future__ import annotations

import os
import stat

__all__ = ["input_extent", "Extents", "raw_position"]

PARQUET_MAGIC = b"PAR1"


def _parquet_rows(path: str):
    try:
        import pyarrow.parquet as pq

        return int(pq.read_metadata(path).num_rows)
    except Exception:  # unreadable: the reader reports it; no size here
        return None


def input_extent(path: str):
    """``(unit, size, disk_bytes)`` of one input (``unit``: ``"bytes"`` or ``"rows"``), or None
    when its size cannot be known before reading it (a pipe, a terminal, a FIFO)."""
    try:
        st = os.fstat(0) if path == "-" else os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if path != "-":
        try:
            with open(path, "rb") as f:
                head = f.read(4)
        except OSError:
            return None
        if head == PARQUET_MAGIC:
            rows = _parquet_rows(path)
            return None if rows is None else ("rows", rows, st.st_size)
    elif os.lseek(0, 0, os.SEEK_CUR) != 0:  # stdin already partly read by someone else
        return None
    return ("bytes", st.st_size, st.st_size)


def raw_position(fd: int):
    """The byte offset of file descriptor ``fd`` (None when it has none: a pipe)."""
    try:
        return os.lseek(fd, 0, os.SEEK_CUR)
    except OSError:
        return None


class Extents:
    """The sizes of a run's inputs (``paths``, directories already expanded) over ``passes``.

    ``total`` is None when any input's size is unknown; ``unit`` is ``"rows"`` when every input
    is Parquet, else ``"bytes"``. :meth:`position` maps a batch's stamp to the run's position
    in that unit."""

    def __init__(self, paths, passes: int = 1):
        self.paths = list(paths)
        self.passes = max(1, int(passes))
        self.sizes = [input_extent(p) for p in self.paths]
        self.known = bool(self.sizes) and all(s is not None for s in self.sizes)
        self.unit = "rows" if self.known and all(s[0] == "rows" for s in self.sizes) else "bytes"
        self._per = [self._in_unit(s, s[1]) if s is not None else 0 for s in self.sizes]
        self._before = [sum(self._per[:k]) for k in range(len(self._per))]
        self.per_pass = sum(self._per)
        self.total = self.per_pass * self.passes if self.known else None

    def _in_unit(self, s, pos):
        unit, size, disk = s
        if unit == self.unit or size <= 0:
            return pos
        return pos * disk / size  # Parquet rows as a share of the file's bytes (mixed inputs)

    def position(self, stamp, pass_index: int = 0):
        """The run's position at a batch stamped ``(input index, position in that input)``."""
        k, pos = stamp
        s = self.sizes[k] if 0 <= k < len(self.sizes) else None
        if s is None or pos is None:
            return None
        return pass_index * self.per_pass + self._before[k] + min(self._in_unit(s, pos), self._per[k])
