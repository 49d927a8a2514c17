"""``train --engine dask``: iterative parameter mixing on ``dask.distributed``.

Every pass (McDonald, Hall & Mann 2010, iterative parameter mixing; the merge is VW's AllReduce
rule for adaptive updates, Agarwal et al. 2014): the partitions
(:mod:`~streamlearn.distributed.partitions`) are dealt out to one chain per worker (in turn, so
that each chain spreads over the whole input); each partition is learned in one task, one progressive-validation pass, on the worker that
reads it (the client moves no data, only states), the chain's first from the current merged state
and every other from the state its predecessor reached (Dask runs a task where its input is, so a
chain stays on one worker unless that worker is lost). A pass therefore averages one model per
chain, however finely the input is cut (McDonald et al.'s mixing is per shard; averaging one
model per partition, thousands at scale, loses the most on sparse data: ``benchmarks/distributed.py``).
The chains' accumulators (:func:`~streamlearn.distributed.merge.lift`) are summed by a tree of
tasks, ``split_every`` = 8 at a time, into the next merged state, which is broadcast to the next
pass (``mix``: how adagrad's chains mix, VW's rule or block-wise model-update filtering, Chen & Huo
2016, whose block momentum travels with the merged state, or a line search along the merged move, whose
sample of rows every link keeps, ``stats["ls_sample"]``, and :func:`finish_pass` searches:
:mod:`~streamlearn.distributed.linesearch`; :data:`~streamlearn.distributed.merge.MIX_RULES`). The progressive loss each pass reports is *per-pass progressive loss under mixing*: every
example is predicted by its worker's model, which has learned from the merged state plus the part
of its own chain read so far, not from the whole stream before it.

Faults: tasks are pure functions of (state, partition, settings) and write nothing, so Dask
re-runs a task whose worker was lost; a partition that fails to parse fails the run naming its
file (``skip_bad_partitions``: it is left out of that pass and named in a warning); the model is
written, atomically, at the end (``save_every_pass``: after every pass too).

Embedded cluster: without a scheduler address, a ``LocalCluster`` of ``workers`` processes
(default: the cores), one thread each, each with an equal share of the memory as its limit,
starts and stops inside the run; its dashboard address is logged. ``worker_threads``: the workers
are ``workers`` threads of the client's process instead (the C / numba kernels and the Parquet reader release
the GIL): no worker processes to spawn and import, states passed by reference, but no per-worker
memory limit or crash isolation; they run on dask's local threaded scheduler (``dask.threaded.get``
over the same task graph, :func:`_pass_graph`), so ``dask.distributed``, whose import costs more CPU
than a short run's learning, is not imported at all. There, each partition's reading starts before its
task does (:func:`_read_ahead`): the chains' first partitions while the client imports dask (about 0.2 s
of CPU, on the GIL, beside the Parquet decoding, which is off it; :data:`READ_AHEAD_START_DEPTH` batches
ahead until dask is imported) and builds the graph, every other one
while the link before it learns its last batches; the tasks learn the same batches, so the same model.
The tasks that learn at once in this one process read smaller Parquet batches (:func:`batch_rows_for`: 8,192
rows for two, where the CLI reads 16,384), so that their batches in flight take one CLI run's memory; the
learners learn the same whatever the batches. The run holds BLAS to one thread (``threadpoolctl``, in the
``dask`` extra): its tasks call it at once, and a call's rounding must not depend on how many threads it got.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from dataclasses import dataclass, fields


from ..errors import ConfigError, InputError, StreamlearnError
from .merge import LINESEARCH_RULES, MergeError, State, _rule, combine, finish, learner_of, lift, state_nbytes, state_of
from .partitions import chains as plan_chains, plan_partitions

__all__ = ["train_dask", "train_partition", "SPLIT_EVERY", "EMBEDDED_CONFIG", "INSTALL_HINT", "require_dask"]

SPLIT_EVERY = 8
PASS_RESTARTS = 3  # a pass whose tasks are cancelled (its base state lost with a worker) runs again
#: seconds a pass waits while the cluster has no worker at all before it fails (dask keeps the tasks of
#: a cluster whose workers all died pending for ever; a cron job would hang)
NO_WORKERS_TIMEOUT = 120.0
NO_WORKERS_POLL = 5.0  # how often a waiting pass looks at the cluster's workers (seconds)

#: dask.distributed settings of the embedded LocalCluster (not of an existing cluster given by --scheduler):
#: its periodic callbacks run on the event loop, which in ``worker_threads`` mode is the client's own process.
#: The statistical profiler samples every worker thread's Python stack every 10 ms (it feeds the dashboard's
#: profile page); the event-loop tick checks for a blocked loop every 20 ms; the system monitor reads
#: psutil every 500 ms; work stealing re-balances queued tasks, which here are chains placed on purpose on one
#: worker each (the benchmark's speed section shows what they cost). Memory monitoring (the memory limit)
#: is left as it is.
EMBEDDED_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.scheduler.work-stealing": False,
}
INSTALL_HINT = ("--engine dask needs dask.distributed, an optional extra: "
                "pip install 'streamlearn[dask]' (or pip install 'dask[distributed]')")

#: RunConfig fields that the engine does not take (outputs written per example or in order)
_UNSUPPORTED = (("predictions", "-p"), ("raw_predictions", "-r"), ("audit", "--audit"),
                ("invert_hash", "--invert_hash"), ("readable_model", "--readable_model"),
                ("test_only", "-t"), ("save_on_interrupt", "--save_on_interrupt"),
                ("probabilities", "--probabilities"), ("select_out", "--select_out"))


def require_dask(core_only: bool = False, import_now: bool = True):
    """``dask.distributed`` (``core_only``: ``dask`` itself, all ``--worker_threads`` needs), or a
    :class:`ConfigError` saying how to install it. ``import_now=False`` (with ``core_only``): only
    find it (``importlib.util.find_spec``: no import; None), so that its import, about 0.2 s of
    CPU, can run later beside the first partitions' reading."""
    try:
        if core_only:
            if not import_now:
                from importlib.util import find_spec
                if find_spec("dask") is None:
                    raise ImportError("dask")
                return None
            import dask
            return dask
        import distributed
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return distributed


def _identity(x):
    return x


#: the fewest rows per Parquet batch :func:`batch_rows_for` gives
MIN_BATCH_ROWS = 4096


def batch_rows_for(concurrent: int):
    """Rows per Parquet batch of the tasks when ``concurrent`` of them learn at once in one process
    (``worker_threads``): the reader's default (:data:`~streamlearn.io.parquet.DEFAULT_BATCH_ROWS`,
    16,384) shared out between them (at least :data:`MIN_BATCH_ROWS`), so that the batches in flight
    (each task's reader decodes one or two ahead of its learner) take the memory of one CLI run, not
    ``concurrent`` times it; None (the default) for one task per process. The learners learn the same
    whatever the batches (the same model: ``tests/test_distributed.py``); what changes is the
    memory the process touches: with 2 chains of 16,384-row batches the run's peak RSS was about
    100 MB above the CLI's, mostly pages of the Arrow pool's mimalloc arena (transparent huge pages),
    and page faults cost about 0.2 s of system CPU per 1M examples on this VM
    (``benchmarks/distributed.py --section speed``)."""
    if concurrent <= 1:
        return None
    from ..io.parquet import DEFAULT_BATCH_ROWS

    return max(MIN_BATCH_ROWS, DEFAULT_BATCH_ROWS // int(concurrent))


def _pass_graph(task, p: int, run: str, bf, parts, chains, cfg, keep_names, skip_bad, use_c, mix, ahead=None,
                batch_rows=None, sample=None):
    """The task graph of pass ``p`` (0-based): one chain of :func:`train_link` tasks per entry of
    ``chains`` (None: one :func:`train_partition` leaf per partition), a tree of
    :func:`combine_results`, ``SPLIT_EVERY`` at a time, and :func:`finish_pass`; returns the root.
    ``task(key, fn, *args)`` adds a task (``client.submit`` on a cluster; an entry of a graph for
    dask's threaded scheduler) and returns what later tasks take as its result; ``bf`` is the base
    state as such a reference. ``ahead``: the run's read-ahead token (:func:`_start_reads`; threads of
    this process only: a link's reader, once through its partition, starts its successor's reading),
    or None. ``batch_rows``: rows per Parquet batch of every task (:func:`batch_rows_for`; None: the
    reader's default). ``sample``: how the pass's tasks sample rows for a line search
    (:func:`~streamlearn.distributed.linesearch.sample_plan`; None: none). The same graph on either scheduler
    computes the same states."""
    if chains is not None:
        level = []
        for c, run_parts in enumerate(chains):
            prev = None
            for j, i in enumerate(run_parts):
                ra = None if ahead is None else ReadAhead(ahead, _ahead_key(p, i),
                                                         tuple((_ahead_key(p, k), parts[k]) for k in run_parts[j + 1:]),
                                                         batch_rows)
                prev = task(f"streamlearn-pass{p}-chain{c}-part{i}-{run}", train_link, bf, prev, parts[i], cfg,
                            keep_names, skip_bad, use_c, j == len(run_parts) - 1, mix, ra, batch_rows, sample)
            level.append(prev)
    else:
        level = [task(f"streamlearn-pass{p}-part{i}-{run}", train_partition, bf, part, cfg, keep_names, skip_bad,
                      use_c, mix, batch_rows, sample) for i, part in enumerate(parts)]
    depth = 0
    while len(level) > 1:
        depth += 1
        level = [task(f"streamlearn-pass{p}-merge{depth}-{i}-{run}", combine_results, *level[i:i + SPLIT_EVERY])
                 for i in range(0, len(level), SPLIT_EVERY)]
    return task(f"streamlearn-pass{p}-finish-{run}", finish_pass, level[0], bf, mix)


# -- the tasks (pure: same inputs, same outputs; nothing written) ------------------------------


def _evaluation_fields(ev) -> dict:
    return {f.name: getattr(ev, f.name) for f in fields(ev) if f.name != "t0"}


def train_partition(base: State, part, cfg, keep_names: bool, skip_bad: bool, use_c: bool = True, mix: str = "vw",
                    batch_rows=None, sample=None):
    """One pass of the learner ``base`` over partition ``part``: ``(accumulator, stats)``
    (``accumulator`` None for a skipped partition). ``use_c``: the client's kernel backend
    choice (``STREAMLEARN_NO_C``), which the worker's kernel seam follows; ``mix``: the mixing
    rule (:data:`~streamlearn.distributed.merge.MIX_RULES`); ``batch_rows``: rows per Parquet batch (None: the
    reader's default; the learners learn the same whatever the batches, :func:`batch_rows_for`); ``sample``: the
    pass's line-search sample (:func:`_learn_partition`)."""
    state, stats = _learn_partition(base, part, cfg, keep_names, skip_bad, use_c, batch_rows=batch_rows, mix=mix,
                                    sample=sample)
    return _close_chain((state, stats), base, mix, sample)


def train_link(base: State, prev, part, cfg, keep_names: bool, skip_bad: bool, use_c: bool = True, last=False,
               mix: str = "vw", ahead=None, batch_rows=None, sample=None):
    """One link of a chain: partition ``part`` learned from ``prev`` (the previous link's
    ``(state, stats)``; None: the chain's first link, which starts from ``base``, the pass's
    merged state). Returns ``(state, stats)`` with the stats of the chain so far, or, for the
    ``last`` link, the chain's ``(accumulator, stats)`` against ``base``. ``ahead``: where this
    partition's reading may have been started ahead of the task, and the chain's partitions after it
    (a :class:`ReadAhead`; None: none); ``batch_rows``, ``sample``: as :func:`train_partition`'s."""
    start, stats0 = (base, None) if prev is None else prev
    # (a link before the chain's last hands a partial minibatch on to the next, as one stream over its partitions
    # would: finished at every partition's end, BEAR's and MISSION's minibatches of a few rows made other curvature
    # pairs and steps than one sequential pass, and on news20_binary in 8 partitions BEAR diverged under mixing)
    state, stats = _learn_partition(start, part, cfg, keep_names, skip_bad, use_c, ahead, batch_rows, mix, sample,
                                    finish=last)
    if stats0 is not None:
        stats = _add_stats(stats0, stats)
    if state is None:  # skipped: the chain goes on from where it was
        state = start
    return _close_chain((state, stats), base, mix, sample) if last else (state, stats)


def _close_chain(result, base: State, mix: str = "vw", sample=None):
    """``(state, stats)`` -> ``(accumulator against base, stats)`` (None: nothing was learned)."""
    state, stats = result[0], dict(result[1])
    if state is None or "ev" not in stats:  # every partition skipped
        return None, stats
    t0 = time.perf_counter()
    if sample is not None and len(sample) > 2 and sample[2] and stats.get("ls_sample"):  # the chain's own weights at the rows it sampled
        from ..batch import concat_batches
        from .linesearch import own_values
        sample = concat_batches(list(stats["ls_sample"]))
        stats["ls_sample"], stats["ls_own"] = [sample], [own_values(state, sample)]
    acc = lift(state, base, mix, compact=True)
    stats.update(acc_bytes=state_nbytes(acc), max_acc_bytes=state_nbytes(acc),
                 merge_seconds=stats.get("merge_seconds", 0.0) + time.perf_counter() - t0)
    return acc, stats


#: partitions whose reading started before their tasks ran (``--worker_threads``: the first partition
#: of every chain while the client imports dask and builds the graph; every other when the reader of
#: the chain's previous partition is through it, while that learner finishes): run token -> {key: reader}
#: (:func:`_read_ahead`). A task takes its reader out (:func:`_take_read`): the same batches it would
#: read itself. A run's entry exists while the run does (:func:`_start_reads`, :func:`_end_reads`).
_READ_AHEAD: dict = {}
_READ_AHEAD_LOCK = threading.Lock()
#: batches a read-ahead decodes before its task takes it (one in its queue, one waiting to be put), as a
#: task's own reader goes on ahead; a deeper queue cost about 7 % more CPU per example at 2 workers
#: (more batches in flight; ``benchmarks/distributed.py --section speed`` under load 7.7)
READ_AHEAD_DEPTH = 1
#: batches the chains' first partitions may decode ahead while the client imports dask and builds the
#: graph (:func:`train_dask`): the import runs on the GIL, on one core, and the Parquet decoding, off it,
#: can use the other; once dask is imported they go back to :data:`READ_AHEAD_DEPTH` (what was read stays
#: queued for the task). 8 faulted in ~8,000 more pages than 1 or 4 (more batches in flight than the run
#: holds later) and took ~0.2 s more CPU per 1M examples (6 interleaved rounds at load 5.8); with 4, each chain has
#: 4-5 batches decoded when its task starts, against 1-2 (the import itself takes a few ms longer: the batches'
#: conversion shares the GIL with it)
READ_AHEAD_START_DEPTH = 4


@dataclass(frozen=True)
class ReadAhead:
    """A link's read-ahead: the run's token, the ``key`` of the link's reader (if one was started)
    and ``then``, ``(key, partition)`` of the chain's later links, each started when the one before
    is read through; ``batch_rows``: the tasks' rows per Parquet batch (:func:`batch_rows_for`)."""

    run: str
    key: str
    then: tuple = ()
    batch_rows: int | None = None


def _ahead_key(p: int, i: int) -> str:
    return f"pass{p}-part{i}"


def _start_reads() -> str:
    """A new run's read-ahead token."""
    run = uuid.uuid4().hex
    with _READ_AHEAD_LOCK:
        _READ_AHEAD[run] = {}
    return run


def _end_reads(run: str) -> None:
    """The run is over: its read-aheads that no task took (a failed or interrupted pass) are stopped,
    and none starts any more."""
    with _READ_AHEAD_LOCK:
        left = _READ_AHEAD.pop(run, {})
    for reader in left.values():
        reader.close()


def _take_read(ahead):
    """The reader started for the link ``ahead`` (a :class:`ReadAhead`), or None (a start-up reader already
    back to :data:`READ_AHEAD_DEPTH`: :func:`_settle_reads` ran before any task)."""
    if ahead is None:
        return None
    with _READ_AHEAD_LOCK:
        return _READ_AHEAD.get(ahead.run, {}).pop(ahead.key, None)


def _settle_reads(run: str) -> None:
    """The run's read-aheads not yet taken read :data:`READ_AHEAD_DEPTH` batches ahead from now on (the
    client is through with its start-up: the tasks are about to take them)."""
    with _READ_AHEAD_LOCK:
        readers = list(_READ_AHEAD.get(run, {}).values())
    for reader in readers:
        reader.shrink(READ_AHEAD_DEPTH)


def _partition_reader(part, cfg, base_reader: dict, keep_names: bool, depth: int = 1, now: bool = False,
                      then=None, batch_rows=None):
    """Partition ``part``'s batches, read (and decoded) ``depth`` batches ahead on a thread while the
    learner runs, as the CLI reads; unit-norm rows (``--unit_norm``) are scaled by the consumer.
    ``now``: the reading starts at once (a :class:`~streamlearn.io.prefetch.Prefetcher`, which the
    caller closes or drains with :func:`_drained`), not at the first batch asked for. ``then``: a
    :class:`ReadAhead` whose reading starts when ``part`` is read through (:func:`_read_ahead`), or None.
    ``batch_rows``: rows per Parquet batch (None: the reader's default)."""
    from ..api import _reader_config
    from ..io.prefetch import Prefetcher, prefetch
    from ..io.source import read_batches

    rc = _reader_config(cfg, base_reader, keep_names)
    rc.parse_threads = 1
    rc.parquet_batch_rows = batch_rows

    def batches():
        if part.parquet:
            from ..io.parquet import read_parquet_file
            yield from read_parquet_file(part.path, rc, row_groups=part.row_groups)
        else:
            yield from read_batches([part.path], rc)
        if then:  # the next link's reading starts while this link's learner finishes
            _read_ahead(then, cfg, base_reader, keep_names)

    return Prefetcher(batches(), depth) if now else prefetch(batches(), depth)


def _drained(reader):
    """The batches of a :class:`~streamlearn.io.prefetch.Prefetcher`, which is closed at the end."""
    try:
        yield from reader
    finally:
        reader.close()


def _read_ahead(ahead, cfg, base_reader: dict, keep_names: bool, depth: int = READ_AHEAD_DEPTH) -> None:
    """Start reading the partition of the link ``ahead`` (:class:`ReadAhead` whose ``then[0]`` is
    ``(key, partition)``; ``depth`` batches ahead, :data:`READ_AHEAD_DEPTH` once the start-up is over,
    :func:`_settle_reads`) for its task, unless the run is over: a scheduling choice, the task learns the
    same batches either way."""
    key, part = ahead.then[0]
    nxt = ReadAhead(ahead.run, key, ahead.then[1:], ahead.batch_rows) if len(ahead.then) > 1 else None
    with _READ_AHEAD_LOCK:
        reads = _READ_AHEAD.get(ahead.run)
        if reads is not None and key not in reads:
            reads[key] = _partition_reader(part, cfg, base_reader, keep_names, depth, now=True,
                                           then=nxt, batch_rows=ahead.batch_rows)


def _learn_partition(base: State, part, cfg, keep_names: bool, skip_bad: bool, use_c: bool, ahead=None,
                     batch_rows=None, mix: str = "vw", sample=None, finish: bool = True):
    """The learner ``base`` after one pass over ``part``: ``(state, stats)`` (state None: skipped).
    ``ahead``: a :class:`ReadAhead` (its reader taken over if one was started; else the task reads
    the partition itself, and starts the chain's next when through) or None. ``sample``: the pass's plan for a
    line search (``(holdout, phase)`` of :func:`~streamlearn.distributed.linesearch.sample_plan` for the rule
    ``mix`` and the pass; None: no sample): the partition's sampled rows
    (:func:`~streamlearn.distributed.linesearch.sampled`; ``holdout``: held out of learning) are in
    ``stats["ls_sample"]``, a list of batches, which :func:`_add_stats` concatenates along the chain and the tree.
    ``finish``: the learner's partial minibatch is learned before its state is taken (else it stays buffered in
    the state, for the chain's next partition)."""
    import resource

    from .. import kernels

    from ..memory import bound_malloc

    if kernels._use_c != bool(use_c):
        kernels.configure(use_c=bool(use_c))
    bound_malloc()  # the CLI's malloc tuning for the reader pipeline (once per worker process)

    from ..evaluate import run_stream

    t0 = time.perf_counter()
    cpu0 = time.process_time()
    flt0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    _reset_peak_rss()
    learner = learner_of(base)
    t_state = time.perf_counter() - t0
    reader = _take_read(ahead)
    stream = (_partition_reader(part, cfg, base.reader, keep_names, then=ahead if ahead and ahead.then else None,
                                batch_rows=batch_rows)
              if reader is None else _drained(reader))
    if base.reader.get("unit_norm"):
        from ..batch import unit_norm_rows
        stream = map(unit_norm_rows, stream)
    stats = {"partitions": 1, "skipped": [], "warnings": []}
    if sample is not None:
        from .linesearch import sampled

        holdout, phase = sample[:2]
        stats["ls_sample"] = []
        stream = sampled(stream, bool(holdout), stats["ls_sample"], phase=phase)
    errors = []
    try:
        ev = run_stream(learner, stream, learn=True, strict=cfg.strict, binary=bool(base.reader.get("binary")),
                        on_errors=lambda errs: errors.extend(errs[:10 - len(errors)]), finish=finish)
    except StreamlearnError as e:
        msg = str(e) if part.path in str(e) else f"{part}: {e}"
        if not skip_bad:
            raise InputError(msg) from None
        stats["skipped"] = [msg]
        stats.pop("ls_sample", None)
        return None, stats
    t1 = time.perf_counter()
    state = state_of(learner, base.reader, finish=finish)
    t_state += time.perf_counter() - t1
    stats.update(ev=_evaluation_fields(ev), warnings=[f"{s}:{ln}: {r}" for s, ln, r in errors],
                 seconds=time.perf_counter() - t0, cpu=time.process_time() - cpu0, state_seconds=t_state,
                 page_faults=resource.getrusage(resource.RUSAGE_SELF).ru_minflt - flt0,
                 rss=_peak_rss())
    return state, stats


def _reset_peak_rss() -> None:
    """Start the process's peak RSS (``VmHWM``) again from its current RSS (Linux: ``/proc/self/clear_refs``),
    so that a long-lived worker reports the peak of this task, not of every task it ran before."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss() -> int:
    """The process's peak RSS in bytes since :func:`_reset_peak_rss` (``VmHWM``; elsewhere ``ru_maxrss``)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _add_stats(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        if k not in out:
            out[k] = v
        elif k == "ev":
            e = dict(out[k])
            for f, x in v.items():
                if f == "binary_labels":
                    e[f] = e[f] and x
                elif f == "label_lo":
                    e[f] = min(e[f], x)
                elif isinstance(x, (int, float)) and not isinstance(x, bool):
                    e[f] = e[f] + x
            out[k] = e
        elif k in ("rss", "max_acc_bytes"):
            out[k] = max(out[k], v)
        elif isinstance(v, list):
            out[k] = out[k] + v
        elif isinstance(v, (int, float)):
            out[k] = out[k] + v
    return out


def combine_results(*results):
    """Sum ``(accumulator, stats)`` pairs (a tree node: associative)."""
    t0 = time.perf_counter()
    accs = [a for a, _ in results if a is not None]
    stats = dict(results[0][1])  # inputs are other tasks' results (by reference in one process): not changed
    for _, s in results[1:]:
        stats = _add_stats(stats, s)
    acc = combine(accs) if accs else None
    stats["merge_seconds"] = stats.get("merge_seconds", 0.0) + time.perf_counter() - t0
    return acc, stats


def finish_pass(result, base: State, mix: str = "vw"):
    """The merged state of a pass (``base`` if every partition was skipped) and its stats. A line search
    (:data:`~streamlearn.distributed.merge.LINESEARCH_RULES`): VW's merge moved along its move from ``base`` by the
    alpha with the least loss over the pass's sampled rows (:func:`~streamlearn.distributed.linesearch.search`;
    ``stats``: ``ls_alpha``, ``ls_rows``, ``ls_seconds``; the rows themselves are not returned)."""
    t0 = time.perf_counter()
    acc, stats = result[0], dict(result[1])
    samples = stats.pop("ls_sample", None)
    own = stats.pop("ls_own", None)
    out = base if acc is None else finish(acc, base, mix)
    stats["merge_seconds"] = stats.get("merge_seconds", 0.0) + time.perf_counter() - t0
    if mix in LINESEARCH_RULES and acc is not None and samples is not None:  # (None: the pass sampled nothing)
        from .linesearch import search

        t1 = time.perf_counter()
        md = None
        if own is not None and samples:
            from .linesearch import cross_margins
            import numpy as np
            md = np.concatenate([cross_margins(base, acc, b, o) for b, o in zip(samples, own)])
        out, alpha, beta = search(base, out, samples or [], int(acc["nodes"][0]), md=md)
        stats.update(ls_alpha=alpha, ls_beta=beta, ls_rows=sum(b.n for b in samples or []),
                     ls_seconds=time.perf_counter() - t1)
    return out, stats


# -- the client -------------------------------------------------------------------------------


def _start_cluster(scheduler, workers, log, processes=True):
    distributed = require_dask()
    from distributed import Client, LocalCluster

    if scheduler:
        client = Client(scheduler)
        log(f"dask: scheduler {scheduler} ({len(client.scheduler_info().get('workers', {}))} workers), "
            f"dashboard {client.dashboard_link}")
        return client, None
    from ..memory import physical_memory

    import dask

    n = int(workers or os.cpu_count() or 1)
    ram = physical_memory()
    limit = int(ram * 0.9 / n) if ram else "auto"
    # the embedded cluster's own config (the workers copy it, spawned ones too; an existing cluster keeps its own)
    with dask.config.set(EMBEDDED_CONFIG):
        if not processes:  # one process, n worker threads (the kernels and the Parquet decoder release the GIL)
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=False, memory_limit=limit,
                                   dashboard_address=":0", silence_logs=40)
        else:
            # the worker processes are spawned (Dask's default), not forked: forking a process that already
            # runs threads (pyarrow's pools, BLAS, a notebook's or a test runner's) can leave a child
            # deadlocked on a lock some other thread held at the fork, and the cluster then waits for that
            # worker for ever (seen in the test suite: a forked worker that never ran). Spawning costs about
            # 1 s more per run (a fresh interpreter imports dask, numpy and streamlearn).
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=limit,
                                   dashboard_address=":0", silence_logs=40)
        client = Client(cluster)
    log(f"dask: LocalCluster of {n} worker {'processes' if processes else 'threads in this process'} (memory limit "
        f"{'auto' if limit == 'auto' else f'{limit / 2**30:.1f} GiB'} each), dashboard {client.dashboard_link}"
        f" (dask.distributed {distributed.__version__})")
    return client, cluster


def train_dask(cfg, scheduler=None, workers=None, skip_bad_partitions=False, save_every_pass=False, log=None,
               on_pass=None, chain=True, n_chains=None, worker_threads=False, mix="auto", chain_order="strided",
               threads_on="dask", read_ahead=True, read_ahead_start=None):
    """``train`` over ``cfg`` (:class:`streamlearn.api.RunConfig`) with iterative parameter
    mixing on Dask (module docstring); returns the run summary (``summary['engine']``: per-pass
    losses, partitions, chains, bytes per merge, seconds, peak worker RSS). ``on_pass(p, state)`` is
    called with each pass's merged :class:`~streamlearn.distributed.merge.State` (p from 1).
    ``n_chains``: chains per pass (default: the workers at the start); ``chain=False`` learns
    every partition from the merged state (one leaf per partition: what ``benchmarks/distributed.py``
    compares chaining with). ``worker_threads``: the workers are threads of this process, run by
    dask's local threaded scheduler (``dask.threaded.get``; ``dask.distributed`` is not imported): no
    processes to start, nothing serialised between them, no per-worker memory limit, no dashboard.
    ``threads_on="distributed"``: the same threads as a ``LocalCluster(processes=False)`` of
    ``dask.distributed`` instead (what ``worker_threads`` was before; ``benchmarks/distributed.py``
    compares the two).
    ``mix``: how adaptive adagrad states mix (:data:`~streamlearn.distributed.merge.MIX_RULES`, or ``"auto"``,
    the default: :func:`~streamlearn.distributed.linesearch.auto_rule`, ``linesearch-last`` for plain adagrad and
    ``linesearch`` for binary oja-son, fd-son, rfd-son, bear and mission over two or more passes and chains, else
    the learner's own merge). ``chain_order``: :data:`~streamlearn.distributed.partitions.CHAIN_ORDERS` (``strided``,
    the default: the partitions dealt out to the chains in turn; ``consecutive``: runs of consecutive
    partitions; :func:`~streamlearn.distributed.partitions.chains`). ``read_ahead`` (``worker_threads``,
    chained): each partition's reading starts before its task does, the chains' first while dask is
    imported, every other while the link before it finishes (:func:`_read_ahead`; the same batches, so
    the same model; False: every task reads its partition when it starts, which
    ``benchmarks/distributed.py`` compares); ``read_ahead_start``: batches the chains' first partitions decode
    ahead while dask is imported (None: :data:`READ_AHEAD_START_DEPTH`; 1: what the read-ahead did before)."""
    from ..api import _check_inputs, _output_plan, initial_learner
    from ..evaluate import Evaluation, ProgressSchedule
    from ..io.model_file import encode_model
    from ..report import settings_lines, summary_lines

    log = log or (lambda line: None)
    if threads_on not in ("dask", "distributed"):
        raise ConfigError(f"threads_on must be 'dask' or 'distributed', not {threads_on!r}")
    # dask's local threaded scheduler: dask.distributed not imported
    local = bool(worker_threads) and not scheduler and threads_on == "dask"
    require_dask(core_only=local, import_now=not local)  # local: imported below, while the first reads start
    for name, flag in _UNSUPPORTED:
        if getattr(cfg, name):
            raise ConfigError(f"{flag} is not available with --engine dask (the workers predict in parallel; "
                              "run 'streamlearn predict' on the model afterwards)")
    if (workers is not None or worker_threads) and scheduler:
        raise ConfigError(f"{'--workers' if workers is not None else '--worker_threads'} sets up the embedded cluster; "
                          "with --scheduler the cluster's workers are used")
    if workers is not None and workers < 1:
        raise ConfigError("--workers must be >= 1")
    if cfg.passes < 1:
        raise ConfigError("--passes must be >= 1")
    from .merge import MIX_RULES
    if mix not in MIX_RULES and mix != "auto":
        raise ConfigError(f"unknown mixing rule {mix!r} (known: auto, {', '.join(MIX_RULES)})")
    auto = mix == "auto"
    mix = "vw" if auto else mix  # (auto: resolved once the chains are known, below)
    from .partitions import CHAIN_ORDERS
    if chain_order not in CHAIN_ORDERS:
        raise ConfigError(f"unknown chain order {chain_order!r} (known: {', '.join(CHAIN_ORDERS)})")
    try:
        ProgressSchedule(cfg.progress)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    _check_inputs(cfg.data, None if cfg.quiet else log)
    plan = _output_plan(cfg, True)
    learner, reader = initial_learner(cfg)
    base = state_of(learner, reader)
    try:
        _rule(base)
    except MergeError as e:
        raise ConfigError(f"{e}: --engine dask cannot mix it") from None
    from .merge import BMUF_RULES
    if mix in LINESEARCH_RULES and base.meta.get("reduction") == "oaa":
        # the search runs on --oaa's classes (linesearch.supported; benchmarks/distributed.py measures it) but it
        # made news20's 20 classes worse than VW's rule at 2, 4 and 8 workers: not offered
        raise ConfigError(f"--mix {mix}: not with --oaa (the search over the classes' summed losses made multiclass "
                          "news20 1-2.6 points worse than VW's rule); leave --mix out")
    from .linesearch import sample_plan, supported as _searched
    if mix in LINESEARCH_RULES and not _searched(base):
        raise ConfigError(f"--mix {mix}: only plain adagrad (VW's gd) and binary oja-son, fd-son, rfd-son, bear, mission search along the merged move; "
                          f"--algo {base.algo}" + (f" ({base.meta['reduction']})" if base.meta.get("reduction") else "")
                          + " merges by its own rule (leave --mix out)")
    from .linesearch import by_prediction
    if mix in ("linesearch-cross", "linesearch-last") and by_prediction(base):
        raise ConfigError(f"--mix {mix}: the leave-one-chain-out margins are adagrad's (VW's merge without one chain); "
                          f"--algo {base.algo} searches with --mix linesearch (the default with 2+ passes and chains)")
    if mix in ("linesearch-cross", "linesearch-last") and base.arrays["G"].shape != base.arrays["w"].shape:
        raise ConfigError(f"--mix {mix}: the leave-one-chain-out margins need adagrad's per-coordinate squared "
                          "gradients (VW's adaptive merge: --adaptive, on by default), which --sgd, or --normalized / "
                          "--invariant without --adaptive, do not keep; use --mix linesearch")
    if mix in BMUF_RULES and not (base.algo == "adagrad" or base.meta.get("reduction") == "softmax"):
        raise ConfigError(f"--mix {mix}: only the adagrad learners (VW's gd, --oaa, softmax) mix by block momentum; "
                          f"--algo {base.algo} merges by its own rule (leave --mix out)")
    keep_names = bool(cfg.keep_names if cfg.keep_names is not None else learner.wants_names)
    n_hint = workers or (None if scheduler else os.cpu_count()) or 1
    parts = plan_partitions(cfg.data, min_parts=int(n_hint), log=log, skip_bad=skip_bad_partitions)
    if not cfg.quiet:
        for line in settings_lines(cfg, learner, reader, True):
            log(line)
        log(f"engine = dask, {len(parts)} partitions, {cfg.passes} passes of iterative parameter mixing"
            + ("" if mix == "vw" else f" (mixing rule {mix})"))
    from .. import kernels

    use_c = kernels._use_c
    t_up = time.perf_counter()
    # local threads, chained: partitions are read ahead of their tasks (:func:`_read_ahead`)
    ahead = _start_reads() if local and chain and read_ahead else None
    batch_rows = None

    def shared_batch_rows():
        """Rows per Parquet batch when the workers are threads of this process: the tasks learning at
        once (one per worker, at most one per chain or partition) share the CLI's batch memory."""
        return batch_rows_for(min(n_workers, len(chains) if chain else len(parts)))

    # worker threads of this process call BLAS at once (the SON learners' canonical forms, searches and merges): one
    # BLAS thread for the whole run, so that no call's rounding depends on how many threads it got (the merge's own
    # limit, taken and given back by one task, changed the others': fd-son / rfd-son models differed run to run)
    blas = contextlib.ExitStack()
    if local:
        client = cluster = None
        n_workers = int(workers or os.cpu_count() or 1)
        chains = plan_chains(parts, n_chains or n_workers, chain_order)
        batch_rows = shared_batch_rows()
        try:
            from .merge import _one_blas_thread
            blas.enter_context(_one_blas_thread())
            _prepare_worker()
            if ahead is not None:
                # the first partition of every chain starts reading (and decoding, off the GIL) now, while
                # this thread imports dask and builds the graph: the tasks take these readers over
                # (deeper while dask is imported: that import holds the GIL on one core, the decoding uses the other)
                start = READ_AHEAD_START_DEPTH if read_ahead_start is None else max(1, int(read_ahead_start))
                for c in chains:
                    _read_ahead(ReadAhead(ahead, "", tuple((_ahead_key(0, i), parts[i]) for i in c), batch_rows),
                                cfg, base.reader, keep_names, start)
            import dask
            if ahead is not None:
                _settle_reads(ahead)
        except BaseException:
            if ahead is not None:
                _end_reads(ahead)
            blas.close()
            raise
        if not cfg.quiet:
            log(f"dask: {n_workers} worker threads in this process on dask's local threaded scheduler "
                f"(dask {dask.__version__}; no dask.distributed, no dashboard)")
    else:
        client, cluster = _start_cluster(scheduler, workers, log if not cfg.quiet else (lambda line: None),
                                         not worker_threads)
    timing = {"cluster_start_seconds": time.perf_counter() - t_up}
    t_start = time.perf_counter()
    total_ev = None
    per_pass = []
    try:
        t_up = time.perf_counter()
        if not local:  # (local: imported, and the chains planned, above)
            if scheduler and not client.scheduler_info().get("workers"):
                client.wait_for_workers(1, timeout=60)
            client.run(_prepare_worker)  # imports on every worker at once, before the first pass is timed
            n_workers = len(client.scheduler_info().get("workers", {})) or 1
            chains = plan_chains(parts, n_chains or n_workers, chain_order)
            if worker_threads:  # threads of a dask.distributed LocalCluster(processes=False)
                batch_rows = shared_batch_rows()
        timing["worker_import_seconds"] = time.perf_counter() - t_up
        if not cfg.quiet:
            log(f"dask: {len(chains) if chain else len(parts)} "
                + (f"chains of {chain_order} partitions ({', '.join(str(len(c)) for c in chains)})" if chain
                   else "independent partitions") + f" per pass on {n_workers} workers")
        from concurrent.futures import CancelledError

        units = len(chains) if chain else len(parts)  # the states each pass merges
        if auto:
            from .linesearch import auto_rule
            mix = auto_rule(base, cfg.passes, units)
            if not cfg.quiet and mix != "vw":
                log(f"mixing rule {mix} (the default for plain adagrad and binary oja-son, fd-son, rfd-son, bear and "
                    "mission over 2 or more passes and chains; --mix vw: the learner's own merge)")
        for p in range(cfg.passes):
            t0 = time.perf_counter()
            for attempt in range(1 + PASS_RESTARTS):
                # the scattered base has no lineage: the Active Memory Manager keeps one replica of it,
                # and a worker lost with that replica cancels the whole pass ("already forgotten");
                # the pass is pure, so it is run again from a fresh scatter
                run = uuid.uuid4().hex[:12]
                if client is None:  # dask's local threaded scheduler: a task graph of this process
                    graph = {}

                    def task(key, fn, *args):
                        graph[key] = (fn, *args)
                        return key
                    bf = task(f"streamlearn-pass{p}-base-{run}", _identity, base)
                else:
                    def task(key, fn, *args):
                        return client.submit(fn, *args, key=key, pure=False)
                    bf = _scatter_base(client, base, p, NO_WORKERS_TIMEOUT)
                root = _pass_graph(task, p, run, bf, parts, chains if chain else None, cfg, keep_names,
                                   skip_bad_partitions, use_c, mix, ahead, batch_rows,
                                   # one state a pass (one chain) is one sequential run: nothing to search, so no
                                   # row is sampled, or held out of learning
                                   sample_plan(mix, p, cfg.passes) if units > 1 else None)
                try:
                    if client is None:
                        from dask.threaded import get as threaded_get
                        base, stats = threaded_get(graph, root, num_workers=n_workers)
                    else:
                        base, stats = _await_pass(root, client, p, NO_WORKERS_TIMEOUT, NO_WORKERS_POLL)
                    break
                except StreamlearnError:
                    raise
                except CancelledError as e:
                    if attempt == PASS_RESTARTS:
                        raise StreamlearnError(f"--engine dask: pass {p + 1} failed: its tasks were cancelled "
                                               f"{attempt + 1} times (workers lost): {e}") from None
                    log(f"warning: pass {p + 1}: a lost worker took the pass's state with it; the pass starts again")
                except Exception as e:  # a task's own error (not a lost worker: those are re-run)
                    raise StreamlearnError(f"--engine dask: pass {p + 1} failed: {type(e).__name__}: {e}") from None
            secs = time.perf_counter() - t0
            for msg in stats.get("skipped", []):
                log(f"warning: skipped partition (--skip_bad_partitions): {msg}")
            if not cfg.quiet:
                for w in stats.get("warnings", [])[:10]:
                    log(f"warning: {w}; line skipped")
            ev = stats.get("ev")
            if ev is None:
                raise InputError("every partition failed to parse (skipped): nothing was learned")
            total_ev = ev if total_ev is None else _add_stats({"ev": total_ev}, {"ev": ev})["ev"]
            avg = ev["loss_sum"] / ev["weighted_labeled"] if ev["weighted_labeled"] > 0 else float("nan")
            err = ev["err_sum"] / ev["weighted_labeled"] if ev["weighted_labeled"] > 0 else float("nan")
            per_pass.append({"pass": p + 1, "examples": ev["examples"], "progressive_loss": avg,
                             "progressive_error": err,
                             "seconds": secs, "task_seconds": stats.get("seconds", 0.0),
                             "state_seconds": stats.get("state_seconds", 0.0),
                             "merge_seconds": stats.get("merge_seconds", 0.0),
                             # --mix linesearch: the multiplier chosen, over how many sampled rows, in seconds
                             "alpha": stats.get("ls_alpha"), "beta": stats.get("ls_beta"),
                             "alpha_rows": stats.get("ls_rows"),
                             "alpha_seconds": stats.get("ls_seconds"),
                             "task_page_faults": stats.get("page_faults", 0),
                             # a task's CPU is its process's (the reader's threads included): with
                             # worker_threads every worker shares one process, so it is not a task's own
                             "task_cpu_seconds": None if worker_threads else stats.get("cpu", 0.0),
                             "merge_bytes": stats.get("max_acc_bytes", 0), "state_bytes": state_nbytes(base),
                             "peak_worker_rss": stats.get("rss", 0), "skipped_partitions": len(stats.get("skipped", []))})
            if not cfg.quiet:
                log(f"pass {p + 1}: per-pass progressive loss under mixing {avg:.6f} over {ev['examples']} examples, "
                    f"{len(parts)} partitions, {secs:.2f} s"
                    + (f"; merged move times {stats['ls_alpha']:g} plus {stats['ls_beta']:g} times the previous pass's "
                       f"(line search over {stats['ls_rows']} sampled rows, {stats['ls_seconds']:.3f} s)"
                       if "ls_alpha" in stats else ""))
            if on_pass is not None:
                on_pass(p + 1, base)
            if save_every_pass and cfg.final_model and p + 1 < cfg.passes:
                _write_model(cfg.final_model, base)
    finally:
        if ahead is not None:
            _end_reads(ahead)  # none left unless a pass failed
        blas.close()
        t_up = time.perf_counter()
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        timing["cluster_stop_seconds"] = time.perf_counter() - t_up
    learner = learner_of(base)
    ev = Evaluation(learner.loss_name, learner.loss.classification, learner.multiclass,
                    bool(learner.multiclass and learner.native_multiclass))
    for k, v in total_ev.items():
        setattr(ev, k, v)
    ev.t0 = t_start
    summary = ev.summary(learner.loss)
    summary.update(algo=learner.name, learner=learner.extra_summary(), model_bytes=None,
                   engine={"name": "dask", "mix": mix, "partitions": len(parts), "chains": len(chains) if chain else len(parts),
                           "passes": per_pass, **timing,
                           "loss_note": "per-pass progressive loss under mixing"})
    try:
        if cfg.final_model:
            meta, arrays = learner.file_state()
            model = encode_model(learner.name, meta, arrays, base.reader)
            summary["model_bytes"] = model.size
            plan.stage("-f", model.write_to)
        summary["model_array_bytes"] = learner.model_arrays_bytes
        if cfg.metrics:
            from ..outputs import metrics_text
            plan.stage("--metrics", lambda f: f.write(metrics_text(summary).encode()))
        plan.commit()
    finally:
        plan.discard()
    if not cfg.quiet:
        for line in summary_lines(summary):
            log(line)
        log("(average loss: the progressive loss of all passes, each under mixing: every example predicted by "
            "its worker's model, not by one model that saw every example before it)")
    return summary


def _scatter_base(client, base: State, p: int, no_workers_timeout: float):
    """``base`` scattered to every worker for pass ``p``; a cluster without a worker is waited for up to
    ``no_workers_timeout`` seconds, then the pass fails with a clear error (dask's own is a bare
    ``TimeoutError: No valid workers found``)."""
    try:
        if not client.scheduler_info().get("workers"):
            client.wait_for_workers(1, timeout=no_workers_timeout)
        return client.scatter(base, broadcast=True, hash=False)
    except TimeoutError:
        raise _no_workers(p, no_workers_timeout) from None


def _no_workers(p: int, seconds: float) -> StreamlearnError:
    return StreamlearnError(f"--engine dask: pass {p + 1} failed: the cluster has had no worker for {seconds:.0f} s "
                            "(every worker left or died)")


def _await_pass(root, client, p: int, no_workers_timeout: float, poll: float, clock=time.monotonic):
    """The result of pass ``p``'s root future (``root.result()``), failing the pass with a clear error
    once the cluster has had no worker for ``no_workers_timeout`` seconds: dask keeps the tasks of a
    cluster whose workers all left pending, waiting for one to join, so without this a run against a
    remote scheduler whose workers died would wait for ever. Workers that come back in time (a
    restarted nanny, an autoscaler) let the pass go on; a pass that is merely slow is not limited."""
    alone_since = None
    while True:
        try:
            return root.result(timeout=poll)
        except TimeoutError:
            pass
        if client.scheduler_info().get("workers"):
            alone_since = None
            continue
        now = clock()
        if alone_since is None:
            alone_since = now
        elif now - alone_since >= no_workers_timeout:
            raise _no_workers(p, now - alone_since)


def _prepare_worker() -> None:
    """Import what a task needs (a worker that joins later imports it in its first task)."""
    from .. import api  # noqa: F401
    from ..io import parquet  # noqa: F401


def _write_model(path: str, state: State) -> None:
    """``--save_every_pass``: the merged state so far, written atomically."""
    from ..io.model_file import encode_model, write_encoded

    learner = learner_of(state)
    meta, arrays = learner.file_state()
    write_encoded(path, encode_model(learner.name, meta, arrays, state.reader))
