"""``train --engine dask`` (issue 19) against one sequential run.

Accuracy (``--skip-accuracy`` to leave out): a9a, ijcnn1, news20_binary and covtype (20k subset:
every 5th row held out as its test set), each training file written as Parquet in 1, 2, 4 and 8
files of consecutive rows (the partitions), for every mergeable learner (adagrad, mission, bear,
oja-son, fd-son, rfd-son; logistic loss, defaults otherwise). Sequential: ``train`` with ``--passes 1``
and ``--passes 3`` over the same files in the same order. Engine: 3 passes of iterative parameter mixing
on a LocalCluster of ``--acc-workers`` (2, 4) worker processes (one cluster per worker count; the model
after pass 1 is taken from the run). Columns: progressive error of pass 1 (sequential / engine), test error after
1 and 3 passes (sequential / engine) and the gaps in points, bytes per merge (the largest
accumulator a task sends), peak worker RSS. ``--acc-order shuffled-N``: the training rows (sequential and
engine alike) in one fixed random order, seed N, instead of the file's (whether a gap comes from partitions
that are not alike: ijcnn1's file is train then validation rows).

Throughput (``--skip-speed``): 1,000,000 examples, gen_sparse.py's 200,000-example file five times, as Parquet (one file,
its row groups the partitions), one pass of adagrad: the single-process CLI, and the CLI with
``--engine dask --workers 1`` and ``2`` (embedded cluster, started and stopped by the run; worker
processes, then ``--worker_threads``, on Dask's threaded scheduler, and three "(before)" variants of it: every task
reading its partition when it starts (``train_dask(read_ahead=False)``), the chains' first partitions read one batch
ahead while dask is imported (``read_ahead_start=1``), and the same threads on a dask.distributed
``LocalCluster(processes=False)``; ``--speed-runs "workers 2 --worker_threads"`` for just these four); with any
2-worker run, also two CLI processes at once, each on half of the file's row groups (no engine, nothing merged or
shared: the most two workers could do on this machine):
wall seconds, examples/s, CPU-seconds per example (the command's own CPU and its children's,
workers included), cores busy (CPU / wall: the CLI's Parquet reader decodes on pyarrow's threads while
the kernel learns, so one process keeps more than one core busy) and the ratios to the CLI; the engine's fixed overhead per pass is the pass
time on a 3,000-example input (same ``-b``), and its start-up + shutdown the rest of the wall.

Chaining (``--section chaining``): a9a and news20_binary as 16 Parquet partitions; per pass, the test
error of the single-process CLI (``--passes p``) and of the engine with 2 and 4 workers, the
partitions chained per worker (one model per worker merged each pass) or not (one model per
partition, each from the merged state); ``--chain-learners`` for the learners.

Merge cost (``--section merge_cost``): no engine; k = 2, 4 models trained from scratch on k parts of
consecutive rows, merged (``streamlearn merge``'s rule), test error against one model over the
whole file, for adagrad and the SON learners (Oja-SON's merge is an approximation: this measures it).

Mixing (``--section mixing``): the engine's arithmetic in one process (the same task functions, one after
another; no Dask): adagrad on ``--chain-sets`` as 16 partitions, ``--mix-workers`` chains, each chain cut into
``--mix-rounds`` segments with a merge after each (1: the engine's pass; more: mixing more often), by each of
``--mix-rules`` (``merge.MIX_RULES``, BMUF's included); test error after each pass against the CLI's. The BMUF
table of the issue-19 notes: ``--section mixing --chain-sets news20_binary a9a ijcnn1 --mix-workers 2 4 8
--mix-rounds 1 --mix-rules vw bmuf bmuf-nesterov`` (about 2 minutes). The line search's table (``linesearch``,
``linesearch-learned``: the links sample their rows, ``finish_pass`` searches, as in the engine; column alphas:
each pass's multiplier): ``--section mixing --chain-sets news20_binary a9a ijcnn1 covtype --mix-workers 2 4 8
--mix-rounds 1 --mix-rules vw bmuf-nesterov linesearch linesearch-learned`` (under a minute); ``news20`` (20
classes, ``--oaa 20``) and ``RULE:per-class`` (one alpha per class) for the one-against-all question.
``linesearch-rotate`` (each pass holds out another tenth): the same command with it in ``--mix-rules``;
``linesearch-rotate:vw`` / ``:learned`` with ``--chain-passes 1``: what it does with one pass (``ONE_PASS``);
``RULE:phase=N``: the sample shifted to the rows ``r % 10 == N`` (where the rule takes 9; how much the choice of
rows matters). ``linesearch-cross`` (every row learned, judged by the other chains' merge) and
``linesearch-last`` (the tenth held out until the last pass, judged there by the other chains' merge): the
same command.

Line search variants (``--section linesearch``, ``--ls-variants``): the prototype the rule was chosen with,
in one process on batches read once: the sample learned or held out, alpha capped, alpha = 1 on pass 1, a
leave-one-chain-out margin (``sample=loo``), the smallest alpha within ``tol`` of the least loss, a fixed alpha.

Diagnosis (``--section diagnose``): why adagrad loses accuracy under mixing: the engine's arithmetic in one
process on ``--chain-sets`` (16 partitions, ``--diag-workers`` chains) with the merge cut in two, the weights
(VW's G-weighted mean over all nodes, or over only the nodes that touched a coordinate: rare features kept
exactly) and the accumulators (VW's rule, or summed as one sequential run adds them), each swapped; an oracle
step multiplier; the rows in file order and shuffled (``--diag-orders``); 1 worker as the check against the CLI.

Run: ``python3 benchmarks/distributed.py [--section speed accuracy chaining merge_cost mixing]`` (default:
speed and accuracy; needs ../shared and ``pip install 'dask[distributed]'``). The 2-worker throughput
target in one table: ``python3 benchmarks/distributed.py --section speed --repeat 7 --speed-runs
"workers 2 --worker_threads"`` (the CLI, ``--worker_threads`` on Dask's threaded scheduler, and its two
"(before)" variants, interleaved; about 5 minutes); ``--against /work/main`` adds every engine run of another
tree, interleaved with this one's (before / after on one table). A per-phase timeline of one run:
``benchmarks/dask_timeline.py``.
"""
from __future__ import annotations

import argparse
import atexit
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

_HERE = str(Path(__file__).resolve().parent)
if sys.path and os.path.abspath(sys.path[0]) == _HERE:  # this file is named like the dask.distributed package:
    sys.path.append(sys.path.pop(0))                      # look here last
from _common import CACHE, DATASETS, ROOT, gen_sparse, need_shared, table  # noqa: E402

#: the models this run writes: one directory per process, so that two runs at once (the Parquet partitions
#: and data sets under CACHE / "distributed" are shared) do not overwrite each other's models
MODELS = CACHE / "distributed" / f"models-{os.getpid()}"
MODELS.mkdir(parents=True, exist_ok=True)
atexit.register(shutil.rmtree, MODELS, True)  # (ignore_errors)

sys.path.insert(0, str(ROOT))

SETS = {
    "a9a": ("a9a/a9a_train.libsvm.gz", "a9a/a9a_test.libsvm.gz"),
    "ijcnn1": ("ijcnn1/ijcnn1_train.libsvm.gz", "ijcnn1/ijcnn1_test.libsvm.gz"),
    "news20_binary": ("news20/news20_binary_train.vw.gz", "news20/news20_binary_test.vw.gz"),
    "covtype": ("covtype_subset20k/covtype_subset20k.libsvm.gz", None),
    "news20": ("news20/news20_train.vw.gz", "news20/news20_test.vw.gz"),  # 20 classes: --oaa 20 (SET_HYPER)
}
#: hyper-parameters a data set needs beside the logistic loss (mixing: multiclass news20 as --oaa 20)
SET_HYPER = {"news20": {"oaa": 20}}
LEARNERS = ("adagrad", "mission", "bear", "oja-son", "fd-son", "rfd-son")
PARTS = (1, 2, 4, 8)


def _lines(path):
    with gzip.open(path, "rt") as f:
        return f.readlines()


def prepare(name, parts):
    """``(dir of `parts` Parquet files, test file)`` of data set ``name`` (cached)."""
    from streamlearn.api import ConvertConfig, convert

    train, test = SETS[name]
    base = CACHE / "distributed" / name
    out = base / f"p{parts}"
    test_path = base / ("test" + (".vw" if train.endswith(".vw.gz") else ".libsvm"))
    if out.exists() and test_path.exists():
        return out, test_path
    base.mkdir(parents=True, exist_ok=True)
    lines = _lines(DATASETS / train)
    if test is None:  # covtype: every 5th row is the test set
        test_lines = lines[4::5]
        lines = [ln for i, ln in enumerate(lines) if i % 5 != 4]
    else:
        test_lines = _lines(DATASETS / test)
    test_path.write_text("".join(test_lines))
    out.mkdir(exist_ok=True)
    n = len(lines)
    ext = ".vw" if train.endswith(".vw.gz") else ".libsvm"
    for i in range(parts):
        chunk = base / f"chunk{ext}"
        chunk.write_text("".join(lines[i * n // parts:(i + 1) * n // parts]))
        convert(ConvertConfig(inputs=[str(chunk)], output=str(out / f"part{i:02d}.parquet"), quiet=True))
        chunk.unlink()
    return out, test_path


def test_error(model, test):
    from streamlearn.api import RunConfig, predict
    return predict(RunConfig(data=[str(test)], initial_model=str(model), quiet=True))["error_rate"]


def _ordered_data(name, parts, order):
    """``(partition dir, test file)`` of ``name`` in ``parts`` partitions (accuracy and diagnose sections): the
    training rows in file order, or (``shuffled-N``) in the fixed random order of seed N (sequential and engine
    read the same rows)."""
    if order == "file":
        return prepare(name, parts)
    _, d, test = _shuffled(name, parts, int(order.split("-", 1)[1]))
    return d, test


def accuracy(args):
    from distributed import LocalCluster

    from streamlearn.api import RunConfig, train
    from streamlearn.distributed.engine import _write_model, train_dask

    rows = []
    seq_runs = {}
    work = MODELS
    work.mkdir(parents=True, exist_ok=True)
    for nw in args.acc_workers:
      with LocalCluster(n_workers=nw, threads_per_worker=1, processes=True, dashboard_address=":0",
                        silence_logs=50) as cluster:
        for name in args.sets:
            for algo in args.learners:
                hyper = {"loss_function": "logistic", **SET_HYPER.get(name, {})}
                seq = seq_runs.setdefault((name, algo), {})
                d1, test = _ordered_data(name, 1, args.acc_order)
                for passes in (1, 3):
                    if passes in seq:
                        continue
                    m = work / f"seq{passes}.slm"
                    s = train(RunConfig(data=[str(d1)], algo=algo, hyper=hyper, passes=passes, quiet=True,
                                        final_model=str(m)))
                    seq[passes] = (s["error_rate"], test_error(m, test))
                for parts in args.parts:
                    d, _ = _ordered_data(name, parts, args.acc_order)
                    m1 = work / "eng1.slm"
                    m3 = work / "eng3.slm"

                    def keep(p, state, m1=m1):
                        if p == 1:
                            _write_model(str(m1), state)
                    t0 = time.perf_counter()
                    s = train_dask(RunConfig(data=[str(d)], algo=algo, hyper=hyper, passes=3, quiet=True,
                                             final_model=str(m3)), scheduler=cluster.scheduler_address,
                                   on_pass=keep, chain_order=args.acc_chain_order,
                                   mix=args.acc_mix if (algo == "adagrad" or args.acc_mix == "auto") else "vw")
                    wall = time.perf_counter() - t0
                    e = s["engine"]["passes"]
                    t1, t3 = test_error(m1, test), test_error(m3, test)
                    rows.append({
                        "data": name + ("" if args.acc_order == "file" else f" ({args.acc_order})"), "algo": algo,
                        "workers": nw, "parts": parts, "chains": args.acc_chain_order,
                        "mix": s["engine"]["mix"],
                        "prog1 seq": f"{seq[1][0]:.4f}", "prog1 eng": f"{e[0]['progressive_error']:.4f}",
                        "prog3 eng": f"{e[2]['progressive_error']:.4f}",
                        "test1 seq": f"{seq[1][1]:.4f}", "test1 eng": f"{t1:.4f}",
                        "gap1 pt": f"{100 * (t1 - seq[1][1]):+.2f}",
                        "test3 seq": f"{seq[3][1]:.4f}", "test3 eng": f"{t3:.4f}",
                        "gap3 pt": f"{100 * (t3 - seq[3][1]):+.2f}",
                        "merge MB": f"{max(p['merge_bytes'] for p in e) / 1e6:.2f}",
                        "s/pass": f"{wall / 3:.1f}",
                        "worker RSS MB": f"{max(p['peak_worker_rss'] for p in e) / 1e6:.0f}",
                    })
                    print(table(rows[-1:], list(rows[-1])), flush=True) if args.verbose else None
    cols = list(rows[0]) if rows else []
    print(f"\nAccuracy: sequential vs --engine dask ({', '.join(map(str, args.acc_workers))} worker processes, "
          "iterative parameter mixing), logistic loss; error rates; gap = engine - sequential test error, in points; "
          "merge MB: the largest accumulator a task sent; worker RSS: the largest peak of a task's process; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(table(rows, cols))
    within = [r for r in rows if abs(float(r["gap3 pt"])) <= 0.5]
    worse = [r for r in rows if float(r["gap3 pt"]) > 0.5]
    print(f"\nwithin 0.5 point after 3 passes: {len(within)}/{len(rows)}; more than 0.5 point worse than the "
          f"sequential run: {len(worse)}/{len(rows)} (the others are more than 0.5 point better)")


def chaining(args):
    """Per pass, test error of the single-process CLI (``--passes p``) and of the engine on
    ``args.chain_parts`` partitions with 2 and 4 workers, partitions chained per worker (one
    model per worker merged each pass) or not (one model per partition, each from the merged
    state)."""
    from distributed import LocalCluster

    from streamlearn.api import RunConfig, train
    from streamlearn.distributed.engine import _write_model, train_dask

    work = MODELS
    work.mkdir(parents=True, exist_ok=True)
    hyper = {"loss_function": "logistic"}
    P = args.chain_passes
    rows = []
    for name in args.chain_sets:
      for algo in args.chain_learners:
        d1, test = prepare(name, 1)
        dn, _ = prepare(name, args.chain_parts)
        row = {"data": name, "algo": algo, "run": "CLI (one process)"}
        for p in range(1, P + 1):
            m = work / "seq.slm"
            s = train(RunConfig(data=[str(d1)], algo=algo, hyper=hyper, passes=p, quiet=True, final_model=str(m)))
            row[f"test err % p{p}"] = f"{100 * test_error(m, test):.2f}"
        rows.append(row)
        seq = [float(row[f"test err % p{p}"]) for p in range(1, P + 1)]
        for w in args.chain_workers:
            with LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=":0",
                              silence_logs=50) as cluster:
                for chain in [c == "chained" for c in args.chain_modes]:
                    models = {}

                    def keep(p, state, models=models):
                        models[p] = work / f"eng{p}.slm"
                        _write_model(str(models[p]), state)
                    t0 = time.perf_counter()
                    s = train_dask(RunConfig(data=[str(dn)], algo=algo, hyper=hyper, passes=P, quiet=True),
                                   scheduler=cluster.scheduler_address, on_pass=keep, chain=chain)
                    wall = time.perf_counter() - t0
                    e = s["engine"]
                    row = {"data": name, "algo": algo,
                           "run": f"dask {w} workers, " + (f"{e['chains']} chains" if chain else
                                                           f"{e['chains']} leaves (unchained)")}
                    for p in range(1, P + 1):
                        err = 100 * test_error(models[p], test)
                        row[f"test err % p{p}"] = f"{err:.2f} ({err - seq[p - 1]:+.2f})"
                    row["prog err % p1"] = f"{100 * e['passes'][0]['progressive_error']:.2f}"
                    row["s/pass"] = f"{wall / P:.1f}"
                    rows.append(row)
                    if args.verbose:
                        print(table(rows[-1:], list(rows[-1])), flush=True)
    cols = ["data", "algo", "run"] + [f"test err % p{p}" for p in range(1, P + 1)] + ["prog err % p1", "s/pass"]
    print(f"\nChaining: logistic loss, {args.chain_parts} Parquet partitions of consecutive rows; test error % "
          "after each pass (in brackets: minus the CLI's after as many passes, points); load average "
          f"{os.getloadavg()[0]:.1f}")
    print(table(rows, cols))


def merge_cost(args):
    """What a merge costs in accuracy, without an engine: the training file cut into k parts of consecutive
    rows, one model per part trained from scratch (one pass), ``merge``d; test error of the merged model
    against one model trained on the whole file in one pass, and the parts' own (mean)."""
    from streamlearn.api import RunConfig, load_model, train
    from streamlearn.distributed.engine import _write_model
    from streamlearn.distributed.merge import merge_states, state_of

    work = MODELS
    work.mkdir(parents=True, exist_ok=True)
    hyper = {"loss_function": "logistic"}
    rows = []
    for name in args.chain_sets:
        for algo in args.merge_learners:
            d1, test = prepare(name, 1)
            m = work / "seq.slm"
            train(RunConfig(data=[str(d1)], algo=algo, hyper=hyper, quiet=True, final_model=str(m)))
            seq = 100 * test_error(m, test)
            for k in args.merge_parts:
                dk, _ = prepare(name, k)
                states, errs = [], []
                t_train = 0.0
                for f in sorted(dk.iterdir()):
                    t0 = time.perf_counter()
                    train(RunConfig(data=[str(f)], algo=algo, hyper=hyper, quiet=True, final_model=str(m)))
                    t_train += time.perf_counter() - t0
                    errs.append(100 * test_error(m, test))
                    states.append(state_of(*load_model(str(m))[:2]))
                t0 = time.perf_counter()
                merged = merge_states(states)
                t_merge = time.perf_counter() - t0
                _write_model(str(work / "merged.slm"), merged)
                err = 100 * test_error(work / "merged.slm", test)
                rows.append({"data": name, "algo": algo, "parts": k, "one model %": f"{seq:.2f}",
                             "parts' mean %": f"{np.mean(errs):.2f}", "merged %": f"{err:.2f}",
                             "merged - one, pt": f"{err - seq:+.2f}", "merge s": f"{t_merge:.2f}",
                             "train s (all parts)": f"{t_train:.1f}"})
                if args.verbose:
                    print(table(rows[-1:], list(rows[-1])), flush=True)
    print(f"\nMerge cost: k models trained from scratch on k parts (one pass each, logistic loss), merged, "
          f"test error % against one model over the whole file (one pass); load average {os.getloadavg()[0]:.1f}")
    print(table(rows, list(rows[0]) if rows else []))


def _sequential_errors(data, test, hyper, passes):
    """Test error % of one sequential run (the CLI's ``train``) after 1..``passes`` passes."""
    from streamlearn.api import RunConfig, train

    out = []
    m = MODELS / "seq.slm"
    for p in range(1, passes + 1):
        train(RunConfig(data=[str(data)], hyper=dict(hyper), passes=p, quiet=True, final_model=str(m)))
        out.append(100 * test_error(m, test))
    return out


def _in_process_chains(data_dir, algo, hyper, workers, rounds, order):
    """The engine's arithmetic in this process: the initial state, each chain's partitions cut
    into ``rounds`` segments (``segs[chain][round]``), and ``learn(state, segment)``, which runs
    the segment's partitions in order from ``state`` as a worker's chain does."""
    from streamlearn.api import RunConfig, initial_learner
    from streamlearn.distributed.engine import _learn_partition
    from streamlearn.distributed.merge import state_of
    from streamlearn.distributed.partitions import chains as plan_chains, plan_partitions

    cfg = RunConfig(data=[str(data_dir)], algo=algo, hyper=dict(hyper), quiet=True)
    parts = plan_partitions(cfg.data, min_parts=workers)
    segs = [[c[r * len(c) // rounds:(r + 1) * len(c) // rounds] for r in range(rounds)]
            for c in plan_chains(parts, workers, order)]

    def learn(st, seg, mix="vw", samples=None, sample=None):
        for i in seg:
            st, stats = _learn_partition(st, parts[i], cfg, False, False, True, mix=mix, sample=sample)
            if samples is not None:
                samples.extend(stats.get("ls_sample", []))
        return st

    return state_of(*initial_learner(cfg)), segs, learn


def _mixing_run(data_dir, test, algo, hyper, workers, passes, rounds, mix):
    """The engine's arithmetic in this process (no Dask): the same task functions, one after another. Each
    pass cuts the partitions into ``workers`` chains (as the engine) and each chain into ``rounds`` segments of
    consecutive partitions; after every round the chains' states are merged by ``mix`` and the next round
    starts from the merged state. rounds = 1 is the engine's pass. A line search (``linesearch``,
    ``linesearch-learned``) runs as the engine's tasks do: the links sample their partitions' rows
    (``_learn_partition``), the pass's finish (``finish_pass``) searches along VW's merged move. Test error %
    after each pass, and the multiplier each merge chose (1 for the other rules)."""
    from streamlearn.distributed.engine import _write_model, finish_pass
    from streamlearn.batch import concat_batches
    from streamlearn.distributed.linesearch import own_values, sample_plan
    from streamlearn.distributed.merge import combine, lift

    base, segs, learn = _in_process_chains(data_dir, algo, hyper, workers, rounds, "strided")
    out, alphas = [], []
    model = MODELS / "mix.slm"
    for p in range(passes):
        plan = sample_plan(mix, p, passes)
        for r in range(rounds):
            accs, samples, owns = [], [], []
            for chain in segs:
                mine = []
                st = learn(base, chain[r], mix, mine, plan)
                if chain[r]:
                    accs.append(lift(st, base, mix))
                    if plan is not None and len(plan) > 2 and plan[2] and mine:  # (as the engine's _close_chain)
                        mine = [concat_batches(mine)]
                        owns.append(own_values(st, mine[0]))
                samples.extend(mine)
            if accs:  # (a round can be empty for every chain: more rounds than a chain has partitions)
                extra = {} if plan is None else {"ls_sample": samples, **({"ls_own": owns} if owns else {})}
                base, stats = finish_pass((combine(accs), extra), base, mix)
                a, b = stats.get("ls_alpha", 1.0), stats.get("ls_beta", 0.0)
                alphas.append(f"{a:g}" + (f"+{b:g}" if b else ""))
        _write_model(str(model), base)
        out.append(100 * test_error(model, test))
    return out, alphas


def _cached_partitions(data_dir, hyper, workers):
    """The engine's plan for ``data_dir`` read once into memory: ``(cfg, initial state, chains, batches per
    partition)`` (the learners learn the same whatever the batches, so learning from these is the engine's
    arithmetic)."""
    from streamlearn.api import RunConfig, initial_learner
    from streamlearn.distributed.engine import _partition_reader
    from streamlearn.distributed.merge import state_of
    from streamlearn.distributed.partitions import chains as plan_chains, plan_partitions

    cfg = RunConfig(data=[str(data_dir)], hyper=dict(hyper), quiet=True)
    parts = plan_partitions(cfg.data, min_parts=workers)
    base = state_of(*initial_learner(cfg))
    batches = [list(_partition_reader(p, cfg, base.reader, False)) for p in parts]
    return cfg, base, plan_chains(parts, workers, "strided"), batches


def _split_sample(batches, every, cap):
    """A partition's batches cut into ``(learned rows, sampled rows)`` batches (:func:`linesearch.split_batch`,
    the sampled rows held out)."""
    from streamlearn.distributed.linesearch import split_batch

    out, start = [], 0
    for b in batches:
        learn, sample = split_batch(b, start, True, every, cap)
        out.append((learn, sample if sample is not None else b.take(np.zeros(0, np.int64))))
        start += b.n
    return out


def _loo_sums(base, merged, own, batch, grid, K):
    from streamlearn.distributed.linesearch import _clip_ranges, _loss_of, move_margins

    (m0, md), = move_margins(base, merged, batch)
    (_, mc), = move_margins(base, own, batch)
    mloo = (K * md - mc) / max(K - 1, 1)
    loss, _ = _loss_of(merged)
    lo, hi = _clip_ranges(merged)[0]
    p = np.clip(m0[None, :] + np.asarray(grid)[:, None] * mloo[None, :], lo, hi)
    return (loss.value(p, np.broadcast_to(batch.labels, p.shape)) * batch.weights[None, :]).sum(axis=1)


def _linesearch_run(data_dir, test, hyper, workers, passes, sample="learned", cap=None, first=True, every=10,
                    sample_cap=4096, fixed=None, tol=None, mom=None):
    """``--mix linesearch`` as the engine runs it, in this process: each pass, the chains learn their partitions
    from the merged state (sample ``holdout``: without the sampled rows), VW's merge gives ``w_avg``, the sampled
    rows of every partition give the summed loss of ``w_0 + alpha (w_avg - w_0)`` on the grid, and the next
    pass starts from the best alpha's state (``first`` False: alpha = 1 on pass 1; ``cap``: alpha at most;
    ``fixed``: this alpha every pass, no search). Test error % and the chosen alpha after each pass."""
    from streamlearn.distributed.engine import _write_model
    from streamlearn.distributed.linesearch import alpha_grid, apply_alpha, loss_table
    from streamlearn.distributed.merge import combine, finish, learner_of, lift, state_of
    from streamlearn.evaluate import run_stream

    cfg, base, chains, batches = _cached_partitions(data_dir, hyper, workers)
    split = [_split_sample(bs, every, sample_cap) for bs in batches]
    grid = alpha_grid(len(chains), cap)
    out, alphas = [], []
    model = MODELS / "ls.slm"
    for p in range(passes):
        accs, finals = [], []
        for chain in chains:
            st = base
            for i in chain:
                learner = learner_of(st)
                if sample == "holdout":
                    stream = [a for a, _ in split[i] if a.n]
                else:
                    stream = batches[i]
                run_stream(learner, iter(stream), learn=True)
                st = state_of(learner, base.reader)
            accs.append(lift(st, base, "vw"))
            finals.append(st)
        merged = finish(combine(accs), base, "vw")
        if fixed is not None:
            alpha = float(fixed)
        elif p == 0 and not first:
            alpha = 1.0
        elif sample == "loo":  # leave one chain out: a row's move without its own chain's, (K d - d_c) / (K - 1)
            sums = 0.0
            K = len(chains)
            for c, chain in enumerate(chains):
                for i in chain:
                    for _, s in split[i]:
                        if s.n:
                            sums = sums + _loo_sums(base, merged, finals[c], s, grid, K)
            alpha = float(grid[int(np.argmin(sums))])
        else:
            sums = sum(loss_table(base, merged, s, grid, (0.0,))[0, 0] for parts in split for _, s in parts if s.n)
            alpha = float(grid[int(np.argmin(sums))])
            if tol is not None:  # the smallest alpha within tol (relative) of the least loss
                alpha = float(grid[int(np.flatnonzero(sums <= sums.min() * (1 + tol))[0])])
        beta = 0.0
        if mom is not None and p > 0 and fixed is None:  # 2-D: w_0 + alpha d + beta d_prev, beta on a grid
            betas = np.linspace(0, float(mom), 5)  # (d_prev: base.mixing, the move apply_alpha made last pass)
            tot = sum(loss_table(base, merged, s, grid, betas)[0] for parts in split for _, s in parts if s.n)
            j, i = np.unravel_index(int(np.argmin(tot)), tot.shape)
            alpha, beta = float(grid[i]), float(betas[j])
        base = apply_alpha(base, merged, alpha, beta)
        alphas.append(alpha if not beta else f"{alpha:g}+{beta:g}")
        _write_model(str(model), base)
        out.append(100 * test_error(model, test))
    return out, alphas


def linesearch(args):
    """``--mix linesearch``'s variants against VW's rule (``--section linesearch``): sample learned or held out,
    alpha capped, alpha = 1 on pass 1 or not; test error % after each pass, minus the CLI's; the alphas chosen."""
    (MODELS).mkdir(parents=True, exist_ok=True)
    hyper = {"loss_function": "logistic"}
    P = args.chain_passes
    rows = []
    for name in args.chain_sets:
        d1, test = prepare(name, 1)
        dn, _ = prepare(name, args.chain_parts)
        seq = _sequential_errors(d1, test, hyper, P)
        rows.append({"data": name, "workers": "CLI", "variant": "",
                     **{f"test err % p{p}": f"{e:.2f}" for p, e in enumerate(seq, 1)}})
        for w in args.mix_workers:
            for v in args.ls_variants:
                kw = dict(x.split("=") for x in v.split(",")) if v != "vw" else {"fixed": "1"}
                kw = {k: (None if val == "none" else float(val) if k in ("cap", "fixed", "tol", "mom") else int(val)
                          if k in ("every", "sample_cap") else val == "1" if k == "first" else val)
                      for k, val in kw.items()}
                errs, alphas = _linesearch_run(dn, test, hyper, w, P, **kw)
                row = {"data": name, "workers": w, "variant": v}
                for p, (e, q) in enumerate(zip(errs, seq), 1):
                    row[f"test err % p{p}"] = f"{e:.2f} ({e - q:+.2f})"
                row["alphas"] = " ".join(a if isinstance(a, str) else f"{a:g}" for a in alphas)
                rows.append(row)
                if args.verbose:
                    print(table(rows[-1:], list(rows[-1])), flush=True)
    print(f"\nLine search along the merged move (in one process): adagrad, logistic loss, {args.chain_parts} "
          "partitions, strided chains; test error % after each pass (minus the CLI's); alphas: chosen per pass; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(table(rows, list(dict.fromkeys(k for r in rows for k in r))))


def mixing(args):
    """Mixing rules (merge.MIX_RULES) and mixing more often than once a pass (rounds), adagrad, logistic
    loss, ``args.chain_parts`` partitions, test error % after each pass against the CLI's after as many."""

    (MODELS).mkdir(parents=True, exist_ok=True)
    from streamlearn.distributed import linesearch as LS

    P = args.chain_passes
    rows = []
    for name in args.chain_sets:
        hyper = {"loss_function": args.mix_loss, **SET_HYPER.get(name, {})}
        d1, test = prepare(name, 1)
        dn, _ = prepare(name, args.chain_parts)
        seq = _sequential_errors(d1, test, hyper, P)
        rows.append({"data": name, "workers": "CLI", "rounds": "", "mix": "",
                     **{f"test err % p{p}": f"{e:.2f}" for p, e in enumerate(seq, 1)}})
        for w in args.mix_workers:
            for r in args.mix_rounds:
                for mix in args.mix_rules:
                    # "linesearch:per-class": --oaa's classes searched one by one (linesearch.PER_CLASS)
                    LS.PER_CLASS = mix.endswith(":per-class")
                    # "linesearch-rotate:vw" / ":learned": what the rule does with --passes 1 (linesearch.ONE_PASS)
                    one_pass, plan = LS.ONE_PASS, LS.sample_plan
                    if mix.split(":")[-1] in ("vw", "learned"):
                        LS.ONE_PASS = mix.split(":")[-1]
                    if ":phase=" in mix:  # the sample shifted: rows r % 10 == N where the rule takes 9
                        shift = int(mix.split(":phase=")[1].split(":")[0]) - (LS.SAMPLE_EVERY - 1)
                        LS.sample_plan = lambda *a, _p=plan, _s=shift: (
                            None if _p(*a) is None else (_p(*a)[0], (_p(*a)[1] + _s) % LS.SAMPLE_EVERY, *_p(*a)[2:]))
                    try:
                        errs, alphas = _mixing_run(dn, test, "adagrad", hyper, w, P, r, mix.split(":")[0])
                    finally:
                        LS.PER_CLASS = False
                        LS.ONE_PASS, LS.sample_plan = one_pass, plan
                    row = {"data": name, "workers": w, "rounds": r, "mix": mix}
                    for p, (e, q) in enumerate(zip(errs, seq), 1):
                        row[f"test err % p{p}"] = f"{e:.2f} ({e - q:+.2f})"
                    row["alphas"] = " ".join(alphas)
                    rows.append(row)
                    if args.verbose:
                        print(table(rows[-1:], list(rows[-1])), flush=True)
    print(f"\nMixing rules and rounds per pass (the engine's arithmetic in one process): adagrad, {args.mix_loss} loss, "
          f"{args.chain_parts} Parquet partitions of consecutive rows in one chain per worker, each chain cut into "
          "`rounds` segments with a merge after each; test error % after each pass (in brackets: minus the CLI's "
          "after as many passes, points); alphas: the merged move's multiplier of each merge, +beta: the previous "
          f"pass's move's (linesearch's choice; 1: the rule's own merge); load average {os.getloadavg()[0]:.1f}")
    print(table(rows, list(dict.fromkeys(k for r in rows for k in r))))


def _diag_merge(states, base, variant):
    """Merge adagrad ``states`` reached from ``base`` by one cell of the diagnosis (``benchmarks`` only, not an
    engine rule): weights ``vw`` (VW's G-weighted mean over every node: a node that did not touch a coordinate
    still votes for the base's weight with the base's G) or ``touch`` (the same mean over only the nodes whose G
    grew there: a coordinate one node saw gets exactly that node's weight); accumulators ``vw`` (VW's
    sum G_i^2 / sum G_i) or ``sum`` (G_0 + sum_i (G_i - G_0): the squared gradients of every example, as one
    sequential run adds them); ``step`` multiplies the merged weight's move from the base (an oracle knob; ``sqrtk``:
    per coordinate, the square root of the number of nodes that touched it)."""
    from streamlearn.distributed.merge import State, combine, finish, lift

    wmode, gmode, step = variant
    out = finish(combine([lift(s, base) for s in states]), base)  # VW's rule: scal and N as the engine has them
    w0 = np.asarray(base.arrays["w"], np.float64)
    G0 = np.asarray(base.arrays["G"], np.float64)
    W = np.stack([np.asarray(s.arrays["w"], np.float64) for s in states])
    G = np.stack([np.asarray(s.arrays["G"], np.float64) for s in states])
    touched = G > G0
    wt = np.where(touched, G, 0.0) if wmode == "touch" else G
    den = wt.sum(0)
    w = np.where(den > 0, (wt * W).sum(0) / np.where(den > 0, den, 1.0), w0 if wmode == "touch" else 0.0)
    if step == "sqrtk":  # per coordinate: the square root of the number of nodes that moved it
        w = w0 + np.sqrt(np.maximum(1, touched.sum(0))) * (w - w0)
    else:
        w = w0 + float(step) * (w - w0)
    if gmode == "sum":
        g = G0 + (G - G0).sum(0)
    else:
        g = np.asarray(out.arrays["G"], np.float64)
    arrays = dict(out.arrays, w=w.astype(np.float32), G=g.astype(np.float32))
    return State(out.algo, out.meta, arrays, out.reader)


def _diag_run(data_dir, test, hyper, workers, passes, variant, rounds=1, strided=False):
    """The engine's pass in this process (as :func:`_mixing_run`), merged by :func:`_diag_merge`; test error %
    after each pass, and the share of the coordinates touched in pass 1 that only one chain touched."""
    from streamlearn.distributed.engine import _write_model

    base, segs, learn = _in_process_chains(data_dir, None, hyper, workers, rounds,
                                           "strided" if strided else "consecutive")
    out, single = [], None
    model = MODELS / "diag.slm"
    for p in range(passes):
        for r in range(rounds):
            states = [learn(base, chain[r]) for chain in segs]
            if single is None:
                t = np.stack([np.asarray(s.arrays["G"]) > np.asarray(base.arrays["G"]) for s in states]).sum(0)
                single = float((t == 1).sum() / max(1, (t > 0).sum()))
            base = _diag_merge(states, base, variant)
        _write_model(str(model), base)
        out.append(100 * test_error(model, test))
    return out, single


def _shuffled(name, parts, seed):
    """``prepare(name, parts)`` with the training rows in a random order (seed ``seed``), and the one-file copy."""
    from streamlearn.api import ConvertConfig, convert

    train, _ = SETS[name]
    _, test_path = prepare(name, 1)
    base = CACHE / "distributed" / f"{name}_shuf{seed}"
    out = base / f"p{parts}"
    one = base / "p1"
    if out.exists() and one.exists():
        return one, out, test_path
    base.mkdir(parents=True, exist_ok=True)
    lines = _lines(DATASETS / train)
    if SETS[name][1] is None:
        lines = [ln for i, ln in enumerate(lines) if i % 5 != 4]
    lines = [lines[i] for i in np.random.default_rng(seed).permutation(len(lines))]
    ext = ".vw" if train.endswith(".vw.gz") else ".libsvm"
    for d, k in ((out, parts), (one, 1)):
        d.mkdir(exist_ok=True)
        n = len(lines)
        for i in range(k):
            chunk = base / f"chunk{ext}"
            chunk.write_text("".join(lines[i * n // k:(i + 1) * n // k]))
            convert(ConvertConfig(inputs=[str(chunk)], output=str(d / f"part{i:02d}.parquet"), quiet=True))
            chunk.unlink()
    return one, out, test_path


def diagnose(args):
    """Why the engine's adagrad loses accuracy on news20 at 4 workers (issue 19): the same arithmetic as the
    engine in one process, with the merge cut into its two parts (weights, accumulators), each part swapped for
    a variant (:func:`_diag_merge`); the data in file order and shuffled; 1 worker (one chain: exactly the
    CLI's order) as the check that the arithmetic is the CLI's."""

    (MODELS).mkdir(parents=True, exist_ok=True)
    hyper = {"loss_function": "logistic"}
    P = args.chain_passes
    rows = []
    variants = [("vw", "vw", "1"), ("touch", "vw", "1"), ("vw", "sum", "1"), ("touch", "sum", "1")]
    variants += [("vw", "vw", k) for k in args.diag_steps]
    if args.diag_only_steps:
        variants = [("vw", "vw", k) for k in ["1"] + args.diag_steps]
    for name in args.chain_sets:
        for order in args.diag_orders:
            d1, test = _ordered_data(name, 1, order)
            dn, _ = _ordered_data(name, args.chain_parts, order)
            seq = _sequential_errors(d1, test, hyper, P)
            rows.append({"data": name, "order": order, "workers": "CLI", "weights": "", "G": "", "step": "",
                         **{f"test err % p{p}": f"{e:.2f}" for p, e in enumerate(seq, 1)}})
            for w in args.diag_workers:
                for v in (variants if w > 1 else variants[:1]):
                    errs, single = _diag_run(dn, test, hyper, w, P, v, strided=args.diag_strided)
                    row = {"data": name, "order": order, "workers": w, "weights": v[0], "G": v[1], "step": v[2],
                           "chains": "strided" if args.diag_strided else "consecutive"}
                    for p, (e, q) in enumerate(zip(errs, seq), 1):
                        row[f"test err % p{p}"] = f"{e:.2f} ({e - q:+.2f})"
                    row["one-chain coords %"] = f"{100 * single:.1f}"
                    rows.append(row)
                    if args.verbose:
                        print(table(rows[-1:], list(rows[-1])), flush=True)
    print(f"\nDiagnosis (adagrad, logistic loss, {args.chain_parts} partitions, one chain per worker, the engine's "
          "arithmetic in one process): weights vw = VW's G-weighted mean over all nodes, touch = over the nodes that "
          "touched the coordinate; G vw = VW's sum G_i^2/sum G_i, sum = G_0 + the nodes' increments; step: the merged "
          "move from the base times this; test error % after each pass (in brackets: minus the CLI's after as many "
          "passes on the same order, points); one-chain coords: of the coordinates touched in pass 1, the share only "
          f"one chain touched; load average {os.getloadavg()[0]:.1f}")
    cols = list(dict.fromkeys(k for r in rows for k in r))
    print(table(rows, cols))


def _run_timed_all(cmds, root=ROOT):
    """Commands run at once, each its own process (PYTHONPATH ``root``): (wall until the last ends, the CPU of all,
    their stderr texts); a failed one ends the benchmark with its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(root)),
                              cwd=str(CACHE)) for c in cmds]  # (not here: python -m puts the cwd first, and this file is named distributed.py)
    errs = [pr.communicate()[1] for pr in procs]
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for c, pr, e in zip(cmds, procs, errs):
        if pr.returncode:
            sys.exit(f"failed: {' '.join(map(str, c))}\n{e[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), errs


def _run_timed(cmd, root=ROOT):
    wall, cpu, errs = _run_timed_all([cmd], root)
    return wall, cpu, errs[0]


def _halves(pq: Path):
    """The Parquet file ``pq`` as two files of its first and last row groups (half of them each), cached beside it."""
    import pyarrow.parquet as pqm
    out = [pq.with_name(pq.stem + f".half{i}.parquet") for i in (1, 2)]
    if not all(o.exists() for o in out):
        f = pqm.ParquetFile(pq)
        n = f.num_row_groups
        for o, groups in zip(out, (range(n // 2), range(n // 2, n))):
            pqm.write_table(f.read_row_groups(list(groups)), o, row_group_size=f.metadata.row_group(0).num_rows,
                            compression="lz4")
    return out


def _uncompiled(tree) -> list:
    """The modules of ``tree``/streamlearn whose byte code is missing or older than the source: with
    PYTHONDONTWRITEBYTECODE=1 (as in a fresh worktree), every run compiles them again (``import
    streamlearn.distributed.engine`` 4 ms compiled, ~30 ms not; the CLI's imports ~60 ms more), an
    install does not, and a tree that does it is slower by that much on every row of the table."""
    import importlib.util
    import struct

    out = []
    for f in sorted(Path(tree, "streamlearn").rglob("*.py")):
        c = Path(importlib.util.cache_from_source(str(f)))
        try:
            head = c.read_bytes()[:16]
        except OSError:
            out.append(f)
            continue
        st = f.stat()
        if struct.unpack("<I", head[4:8])[0] == 0 and struct.unpack("<II", head[8:16]) != (
                int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF):
            out.append(f)
    return out


def speed(args):
    # gen_sparse.py's 200,000-example file five times over (generating 1,000,000 distinct
    # examples takes gen_sparse.py an hour on a loaded 2-core machine; throughput is the same)
    n = 1_000_000
    _, ls = gen_sparse(200_000)
    pq = CACHE / "gs200000x5.parquet"
    if not pq.exists():
        subprocess.run([sys.executable, "-m", "streamlearn", "convert", *[str(ls)] * 5, "-o", str(pq)], check=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    import pyarrow.parquet as pqm
    groups = pqm.ParquetFile(pq).metadata.num_row_groups
    small = CACHE / "distributed" / "gs_small.parquet"
    if not small.exists():
        small.parent.mkdir(parents=True, exist_ok=True)
        head = CACHE / "distributed" / "gs_small.libsvm"
        with open(ls) as f, open(head, "w") as g:
            for i, line in zip(range(3000), f):
                g.write(line)
        subprocess.run([sys.executable, "-m", "streamlearn", "convert", str(head), "-o", str(small)], check=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    cli = [sys.executable, "-m", "streamlearn", "train"]
    # this tree byte-compiled first, as pip install does; another tree (--against) is only checked
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "streamlearn")], check=False,
                   stdout=subprocess.DEVNULL)
    for tree in [ROOT] + ([args.against] if args.against else []):
        stale = _uncompiled(tree)
        if stale:
            print(f"note: {tree}: {len(stale)} modules without current byte code ({', '.join(str(f.relative_to(tree)) for f in stale[:5])}"
                  f"{', ...' if len(stale) > 5 else ''}): they compile in every run of that tree "
                  f"('python3 -m compileall -q {tree}/streamlearn' to compare like with like)")
    load0 = os.getloadavg()[0]
    out = CACHE / "distributed" / "speed.slm"
    metrics = CACHE / "distributed" / "speed.json"
    threads2 = ["--engine", "dask", "--workers", "2", "--worker_threads"]
    # (label, options, train_dask keyword arguments that are not CLI options: the "(before)" runs)
    runs = (("CLI (one process)", [], None), ("--engine dask --workers 1", ["--engine", "dask", "--workers", "1"], None),
            ("--engine dask --workers 2", ["--engine", "dask", "--workers", "2"], None),
            ("--engine dask --workers 1 --worker_threads", ["--engine", "dask", "--workers", "1", "--worker_threads"], None),
            ("--engine dask --workers 2 --worker_threads", threads2, None),
            # every task reads its partition when it starts (what --worker_threads did before the read-ahead)
            ("--engine dask --workers 2 --worker_threads, no read-ahead (before)", threads2, "read_ahead=False"),
            # the chains' first partitions read one batch ahead while dask is imported (as every read-ahead does)
            ("--engine dask --workers 2 --worker_threads, start read-ahead 1 batch (before)", threads2,
             "read_ahead_start=1"),
            # the same threads on a dask.distributed LocalCluster(processes=False), what --worker_threads ran
            # on before it used dask's threaded scheduler
            ("--engine dask --workers 2 --worker_threads, on dask.distributed (before)", threads2,
             "threads_on='distributed'"))
    runs = [r for r in runs if r[0] == runs[0][0] or any(k in r[0] for k in args.speed_runs)]
    # the bound on 2 cores: two CLI processes at once, each on half of the file's row groups (no engine, no merge,
    # nothing shared): what any two workers could do at best here
    pair = "two CLI processes at once, one on each half of the file (no engine: the bound for 2 workers)"
    # (label, options, keyword arguments, tree): --against TREE adds every engine run of that tree, interleaved
    runs = [(label, extra, kw, ROOT) for label, extra, kw in runs]
    if args.against:
        runs = runs[:1] + [r for label, extra, kw, root in runs[1:]
                           for r in ((label, extra, kw, root), (f"{label} [{args.against}]", extra, kw, args.against))]
    if "workers 2" in " ".join(args.speed_runs) and args.input_copies == 1:
        runs.insert(1, (pair, [], None, ROOT))

    def shim(kw):
        return [sys.executable, "-c", "import functools, streamlearn.distributed.engine as e; "
                f"e.train_dask = functools.partial(e.train_dask, {kw}); "
                "from streamlearn.__main__ import entry; entry()", "train"]
    # interleaved: every round runs each command once, so that the load of other processes falls on all alike;
    # each figure is the median over the rounds (the model metrics of the round with the median wall)
    got = {label: [] for label, _, _, _ in runs}
    for _ in range(args.repeat):
        for label, extra, kw, root in runs:
            if label == pair:
                halves = _halves(pq)
                ms = [metrics.with_name(f"half{i}.json") for i in (1, 2)]
                wall, cpu, _ = _run_timed_all([cli + [str(h), "-f", str(out.with_name(f"half{i}.slm")), "--metrics",
                                                      str(m)] for i, (h, m) in enumerate(zip(halves, ms), 1)], root)
                hm = [json.loads(m.read_text()) for m in ms]
                ex = sum(m["examples"] for m in hm)
                loss = sum(m["average_loss"] * m["examples"] for m in hm) / ex
                got[label].append((wall, cpu, {"examples": ex, "average_loss": loss}))
                continue
            wall, cpu, err = _run_timed((shim(kw) if kw else cli) + [str(pq)] * args.input_copies
                                        + ["-f", str(out), "--metrics", str(metrics)] + extra, root)
            got[label].append((wall, cpu, json.loads(metrics.read_text())))
    rows = []
    base = None
    for label, _, _, _ in runs:
        rs = sorted(got[label], key=lambda r: r[0])
        wall, m = rs[len(rs) // 2][0], rs[len(rs) // 2][2]
        cpu = float(np.median([r[1] for r in rs]))
        ex = m["examples"]
        row = {"run": label, "wall s": f"{wall:.2f}", "ex/s": f"{ex / wall:,.0f}",
               "CPU us/ex": f"{1e6 * cpu / ex:.2f}", "cores busy": f"{cpu / wall:.2f}",
               "avg loss": f"{m['average_loss']:.4f}"}
        if "engine" in m:
            e = m["engine"]
            p = e["passes"][0]
            row["pass s"] = f"{p['seconds']:.2f}"
            row["start s"] = f"{e.get('cluster_start_seconds', 0):.2f}"
            row["imports s"] = f"{e.get('worker_import_seconds', 0):.2f}"
            row["stop s"] = f"{e.get('cluster_stop_seconds', 0):.2f}"
            row["client s"] = f"{wall - p['seconds'] - e.get('cluster_start_seconds', 0) - e.get('worker_import_seconds', 0) - e.get('cluster_stop_seconds', 0):.2f}"
            row["tasks s"] = f"{p['task_seconds']:.2f}"
            row["task CPU s"] = "n/a" if p["task_cpu_seconds"] is None else f"{p['task_cpu_seconds']:.2f}"
            row["state s"] = f"{p.get('state_seconds', 0):.2f}"
            row["merge s"] = f"{p.get('merge_seconds', 0):.2f}"
            row["merge MB"] = f"{p['merge_bytes'] / 1e6:.1f}"
            row["worker RSS MB"] = f"{p['peak_worker_rss'] / 1e6:.0f}"
        if base is None:
            base = (wall, cpu)
        row["ex/s vs CLI"] = f"{base[0] / wall:.2f}x"
        row["CPU/ex vs CLI"] = f"{cpu / base[1]:.2f}x"
        row["walls"] = " ".join(f"{r[0]:.1f}" for r in got[label])
        row["CPUs"] = " ".join(f"{r[1]:.1f}" for r in got[label])
        rows.append(row)
    # fixed costs on the 3,000-example file (one partition), 3 passes, interleaved with the CLI's --passes 3 run:
    # per pass (pass 1 also pays the first task's cold costs) and per run (the wall beyond the CLI's)
    def _label(w, threads):
        return f"--engine dask --workers {w}" + (" --worker_threads" if threads else "")

    # (the label exactly, or a variant of it: "workers 2" is a substring of "workers 2 --worker_threads")
    over_runs = [(w, threads) for w, threads in ((1, False), (2, False), (1, True), (2, True))
                 if any(r[0] == _label(w, threads) or r[0].startswith(_label(w, threads) + ",") for r in runs)]
    small_got = {k: [] for k in [None] + over_runs}
    for _ in range(max(1, args.repeat)):
        for k in small_got:
            eng = [] if k is None else (["--engine", "dask", "--workers", str(k[0])] + (["--worker_threads"] if k[1] else []))
            wall, _, _ = _run_timed(cli + [str(small), "-f", str(out), "--metrics", str(metrics), "--passes", "3"] + eng)
            m = json.loads(metrics.read_text())
            small_got[k].append((wall, [p["seconds"] for p in m["engine"]["passes"]] if k else []))
    cli_small = float(np.median([g[0] for g in small_got[None]]))
    over = []
    for k in over_runs:
        passes = np.median([g[1] for g in small_got[k]], axis=0)
        wall = float(np.median([g[0] for g in small_got[k]]))
        over.append(f"{k[0]} worker{'s' if k[0] > 1 else ''}{' (threads)' if k[1] else ''}: passes "
                    + ", ".join(f"{p:.3f}" for p in passes)
                    + f" s; run {wall:.2f} s against the CLI's {cli_small:.2f} s: {wall - cli_small - passes.sum():+.2f} s "
                      "outside the passes")
    n *= args.input_copies
    print(f"\nThroughput: gen_sparse.py n=200,000 x 5 x {args.input_copies} = {n:,} examples as one Parquet file ({pq.stat().st_size / 1e6:.0f} MB, {groups} row "
          f"groups{f', given {args.input_copies} times' if args.input_copies > 1 else ''}), adagrad (VW's default rule, C kernel), one pass, -b 18; medians of {args.repeat} "
          f"interleaved rounds (walls, CPUs: each round's, seconds; CPU: the process's and its children's user + system); "
          f"load average {os.getloadavg()[0]:.1f} (at start {load0:.1f})")
    print(table(rows, ["run", "wall s", "ex/s", "ex/s vs CLI", "CPU us/ex", "CPU/ex vs CLI", "cores busy", "pass s", "merge MB",
                       "worker RSS MB", "avg loss", "walls", "CPUs"]))
    print("\nWhere the engine's wall time goes (seconds): cluster start (processes spawned, scheduler), the "
          "workers' imports, the pass (tasks: wall summed over the partition tasks, learning included; their CPU; "
          "state: building the learner from the broadcast state and reading it back; merge: lift, combine and "
          "finish), cluster stop; client: the rest of the wall, the client's own start-up (Python, streamlearn and "
          "dask.distributed imports, partition plan) and the model write")
    print(table(rows[1:], ["run", "wall s", "start s", "imports s", "pass s", "tasks s", "task CPU s", "state s",
                           "merge s", "stop s", "client s"]))
    print(f"engine fixed overhead (3 passes over 3,000 examples in one partition, medians of {max(1, args.repeat)} "
          "rounds interleaved with the CLI's run; per pass: the pass's wall, tasks, merge and broadcast, pass 1 with "
          "the first task's cold costs; outside the passes: the run's wall minus the CLI's and the passes, i.e. the "
          "cluster's start and stop, the imports and the plan):\n  " + "\n  ".join(over))


def _order_arg(v):
    if v == "file" or (v.startswith("shuffled-") and v[9:].isdigit()):
        return v
    raise argparse.ArgumentTypeError(f"{v!r}: file or shuffled-N (N a seed)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=[k for k in SETS if k not in SET_HYPER], choices=list(SETS),
                    help="accuracy: the data sets (news20, 20 classes as --oaa 20, only when named)")
    ap.add_argument("--learners", nargs="+", default=list(LEARNERS), choices=list(LEARNERS))
    ap.add_argument("--parts", nargs="+", type=int, default=list(PARTS))
    ap.add_argument("--acc-workers", nargs="+", type=int, default=[2, 4], help="accuracy: worker processes")
    ap.add_argument("--acc-order", default="file", type=_order_arg,
                    help="accuracy: the training rows in file order, or shuffled-N (a fixed random order, seed N: "
                         "whether a gap comes from partitions that are not alike, e.g. ijcnn1's train then validation rows)")
    ap.add_argument("--acc-chain-order", default="strided", choices=("strided", "consecutive"),
                    help="accuracy: how the engine deals the partitions to its chains (train_dask(chain_order=...))")
    ap.add_argument("--acc-mix", default="auto", choices=("auto", "vw", "bmuf", "bmuf-nesterov", "linesearch",
                                                          "linesearch-last"),
                    help="accuracy: the engine's mixing rule (train --mix; auto: the engine's default, for every learner; "
                         "the others for adagrad, the other learners then merging by their own rule: the table's "
                         "mix column says what ran)")
    ap.add_argument("--section", nargs="+", choices=("speed", "accuracy", "chaining", "merge_cost", "mixing", "diagnose",
                                                  "linesearch"),
                    default=["speed", "accuracy"], help="what to run (chaining: --chain-* below)")
    ap.add_argument("--chain-sets", nargs="+", default=["a9a", "news20_binary"], choices=list(SETS))
    ap.add_argument("--chain-parts", type=int, default=16)
    ap.add_argument("--chain-workers", nargs="+", type=int, default=[2, 4])
    ap.add_argument("--chain-passes", type=int, default=3)
    ap.add_argument("--chain-learners", nargs="+", default=["adagrad"])
    ap.add_argument("--chain-modes", nargs="+", default=["chained", "unchained"], choices=("chained", "unchained"))
    ap.add_argument("--mix-workers", nargs="+", type=int, default=[2, 4])
    ap.add_argument("--mix-rounds", nargs="+", type=int, default=[1, 2, 4])
    ap.add_argument("--mix-loss", default="logistic", choices=("logistic", "squared", "hinge"),
                    help="mixing: the loss (squared: the CLI's default)")
    ap.add_argument("--mix-rules", nargs="+", default=["vw", "delta", "examples", "sqrtk", "bmuf", "bmuf-nesterov"])
    ap.add_argument("--ls-variants", nargs="+", default=["vw", "sample=learned", "sample=holdout"],
                    help="linesearch: variants, comma-separated key=value (sample=learned|holdout, cap=N|none, "
                         "first=0|1, every=N, sample_cap=N, fixed=ALPHA); vw: alpha = 1 (VW's rule)")
    ap.add_argument("--diag-workers", nargs="+", type=int, default=[1, 4])
    ap.add_argument("--diag-orders", nargs="+", default=["file", "shuffled-1"], type=_order_arg,
                    help="diagnose: the rows in file order, or shuffled with seed N (shuffled-N)")
    ap.add_argument("--diag-steps", nargs="*", default=["2"], help="diagnose: step multipliers (numbers or sqrtk)")
    ap.add_argument("--diag-strided", action="store_true",
                    help="diagnose: the engine's default chains (partitions dealt out in turn: chain c takes c, c+K, ... of "
                         "K chains) instead of runs of consecutive partitions")
    ap.add_argument("--diag-only-steps", action="store_true", help="diagnose: VW's rule and the step multipliers only")
    ap.add_argument("--merge-learners", nargs="+", default=["adagrad", "oja-son", "fd-son", "rfd-son"])
    ap.add_argument("--merge-parts", nargs="+", type=int, default=[2, 4])
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="speed: interleaved rounds (medians)")
    ap.add_argument("--speed-runs", nargs="+", default=["workers 1", "workers 2"],
                    help="speed: which engine runs beside the CLI (substrings of their labels, e.g. 'workers 2 --worker_threads')")
    ap.add_argument("--against", metavar="TREE",
                    help="speed: also every engine run of the streamlearn tree TREE (e.g. /work/main), interleaved, "
                         "labelled [TREE] (the CLI and the fixed-overhead runs: this tree's)")
    ap.add_argument("--input-copies", type=int, default=1,
                    help="speed: the 1M-example Parquet file given this many times (a longer run against the same "
                         "fixed costs)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    need_shared()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    if "speed" in args.section and not args.skip_speed:
        speed(args)
    if "accuracy" in args.section and not args.skip_accuracy:
        accuracy(args)
    if "chaining" in args.section:
        chaining(args)
    if "merge_cost" in args.section:
        merge_cost(args)
    if "mixing" in args.section:
        mixing(args)
    if "diagnose" in args.section:
        diagnose(args)
    if "linesearch" in args.section:
        linesearch(args)


if __name__ == "__main__":
    main()
