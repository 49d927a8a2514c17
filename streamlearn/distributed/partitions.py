"""The units of work of a distributed run: :class:`Partition` and :func:`plan_partitions`.

Parquet files (given, or found in directories) are split by row group, from their footers
only (``pyarrow.parquet.ParquetFile.metadata``: no column data is read on the client):
consecutive row groups of one file form a partition, and the partitions are about as many as
the workers (each file gets its share by bytes, uncompressed as the footer states them; at least
one partition per file), or more where a share is above ``TARGET_BYTES`` (128 MB: Dask's per-task
cost of 0.2-1 ms is then nothing, and a lost worker re-runs little). The engine learns the
partitions in chains (:func:`chains`): one chain per worker, the partitions dealt out to the
chains in turn, each partition starting from the state its predecessor reached, so cutting finer
does not multiply the models that a pass averages (``benchmarks/distributed.py``). A text
file (VW, LIBSVM; gzip'd or not) is one partition: gzip cannot be split, nor can a text file
without reading it to find line ends; one large text file therefore runs on one worker, and
:func:`plan_partitions` says to ``streamlearn convert`` it to Parquet.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import ConfigError, InputError

__all__ = ["Partition", "plan_partitions", "chains", "CHAIN_ORDERS", "TARGET_BYTES"]

#: partitions of about this many (uncompressed) bytes or more
TARGET_BYTES = 128 << 20


@dataclass(frozen=True)
class Partition:
    """One task's input: ``path`` and, for Parquet, its ``row_groups`` (None: the whole file),
    with the rows and bytes the footer states (text: bytes on disk, rows unknown: -1)."""

    path: str
    row_groups: tuple | None
    rows: int
    nbytes: int
    parquet: bool

    def __str__(self) -> str:
        if self.row_groups is None:
            return self.path
        g = self.row_groups
        return f"{self.path} (row group{'s' if len(g) > 1 else ''} {g[0]}{'-' + str(g[-1]) if len(g) > 1 else ''})"


def _parquet_groups(path: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        md = pq.ParquetFile(path).metadata
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable Parquet file ({str(e).splitlines()[0]})") from None
    return [(md.row_group(i).num_rows, md.row_group(i).total_byte_size) for i in range(md.num_row_groups)]


def _split(path, groups, target, pieces):
    """Consecutive row groups of ``path`` in ``pieces`` runs (or fewer) of about ``target`` bytes."""
    out, cur, rows, nb = [], [], 0, 0
    total = sum(b for _, b in groups)
    per = max(1, -(-total // max(1, pieces)))
    for i, (r, b) in enumerate(groups):
        if r == 0:
            continue
        cur.append(i)
        rows += r
        nb += b
        if nb >= per:
            out.append(Partition(path, tuple(cur), rows, nb, True))
            cur, rows, nb = [], 0, 0
    if cur:
        out.append(Partition(path, tuple(cur), rows, nb, True))
    return out


def plan_partitions(paths, min_parts: int = 1, target_bytes: int = TARGET_BYTES, log=None, skip_bad=False):
    """The partitions of the inputs ``paths`` (files or directories of ``*.parquet``), in input
    order; about ``min_parts`` (the workers) when the row groups allow, at least one per file
    (and more where a file's share is above ``target_bytes``). ``log`` receives advice (one huge
    text file) and, with ``skip_bad``, the Parquet files whose footer cannot be read (left out;
    otherwise an :class:`InputError` naming the file)."""
    from ..io.parquet import expand_paths, is_parquet_path

    files = []
    for p in paths:
        if p == "-":
            raise ConfigError("-: standard input cannot be split across workers; save it to a file "
                             "('streamlearn convert - -o data.parquet') and train on that")
        if not os.path.exists(p):
            raise InputError(f"{p}: no such file")
        files.extend(expand_paths(p) if os.path.isdir(p) else [p])
    pq_files = []
    for f in [f for f in files if is_parquet_path(f)]:
        try:
            pq_files.append((f, _parquet_groups(f)))
        except InputError as e:
            if not skip_bad:
                raise
            files.remove(f)
            if log:
                log(f"warning: skipped partition (--skip_bad_partitions): {e}")
    pq_set = {f for f, _ in pq_files}
    total = sum(b for _, g in pq_files for _, b in g)
    want = max(1, min_parts)
    out = []
    groups = dict(pq_files)
    for f in files:
        if f in pq_set:
            share = sum(b for _, b in groups[f])
            pieces = max(1, round(want * share / total), -(-share // max(1, target_bytes))) if total else 1
            out.extend(_split(f, groups[f], target_bytes, pieces))
        else:
            out.append(Partition(f, None, -1, os.path.getsize(f), False))
    text = [p for p in out if not p.parquet]
    if log and text and len(out) < min_parts and max(p.nbytes for p in text) > 64 << 20:
        big = max(text, key=lambda p: p.nbytes)
        log(f"note: {big.path} is one text file: it is read by one worker (a text or gzip file cannot be "
            f"split); 'streamlearn convert {big.path} -o {os.path.splitext(big.path)[0]}.parquet' makes a "
            "Parquet file that the workers share by row group")
    return out


CHAIN_ORDERS = ("strided", "consecutive")


def chains(parts, n: int, order: str = "strided"):
    """The partitions (indices into ``parts``, in order) cut into at most ``n`` chains, none empty.
    ``strided`` (the default): the partitions dealt out in turn, chain c takes partitions c, c + n,
    c + 2n, ...: every chain is a spread of the whole input, as a shuffle would make it at the grain
    of a partition (the chains are as long as the partitions are alike in size, which
    :func:`plan_partitions` makes them within a file). ``consecutive``: runs of consecutive
    partitions of about equal bytes (``nbytes``). The order matters where the input is not in random order
    (neighbouring rows of one topic, day or source): averaging models that each saw one stretch of
    it loses more (``benchmarks/distributed.py --section diagnose``). A chain is learned by one
    worker, partition after partition, each from the state the previous one reached: a pass then
    merges ``n`` models, however finely the input is cut."""
    if order not in CHAIN_ORDERS:
        raise ValueError(f"unknown chain order {order!r} (known: {', '.join(CHAIN_ORDERS)})")
    n = max(1, min(int(n), len(parts)))
    if order == "strided":
        return [list(range(c, len(parts), n)) for c in range(n)]
    sizes = [max(int(p.nbytes), 1) for p in parts]
    total = sum(sizes)
    out, cur, acc = [], [], 0
    for i, b in enumerate(sizes):
        left = len(parts) - i  # partitions not yet placed, this one included
        need = n - len(out)  # chains still to start, this one included
        if cur and (left < need or acc + b / 2 > total * (len(out) + 1) / n and len(out) < n - 1):
            out.append(cur)
            cur = []
        cur.append(i)
        acc += b
    out.append(cur)
    return out
