"""Per-phase timeline of one ``train`` run: the single-process CLI or ``--engine dask`` (issue 19).

Runs the command in a child process with the phases wrapped (nothing else changed): the
interpreter's start, the CLI's imports, ``train_dask``'s set-up (partition plan, the dask import,
the workers' imports), every partition task (the learner built from the state, its stream: time
the learner waited for a batch, time it learned; the state read back, the chain's lift), the
merge tree, the finish, the model write, the exit; on the reader threads each batch's Parquet
decode (``iter_batches``) and conversion (``_convert``). Beside it a sampler reads every thread's
CPU (``/proc/self/task/*/stat``) every ``--sample-ms``: the cores busy per time slice and per
thread (pyarrow's pool threads included), so the serial stretches show.

Prints: the phases (thread, start, end, seconds; relative to the process's start), each thread's
CPU, and a strip chart of cores busy per slice. ``python3 benchmarks/dask_timeline.py FILE.parquet
[--engine-args "--engine dask --workers 2 --worker_threads"]`` (default: the 1M-example gen_sparse
Parquet file of ``benchmarks/distributed.py``'s speed section, and both the CLI and the engine).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
ROOT = Path(_HERE).parent
if sys.path and os.path.abspath(sys.path[0]) == _HERE:  # benchmarks/distributed.py is named like the
    sys.path.pop(0)                                       # dask.distributed package: not on the path


# ---------------------------------------------------------------------------- the child's side

def _proc_start_epoch() -> float:
    """The process's start (epoch seconds) from /proc (clock-tick resolution)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        btime = next(int(ln.split()[1]) for ln in f if ln.startswith("btime"))
    return btime + start_ticks / os.sysconf("SC_CLK_TCK")


class _Recorder:
    def __init__(self):
        self.t0 = _proc_start_epoch()
        self.events = []  # (thread, label, start, end, thread cpu)
        self.lock = threading.Lock()
        self.samples = []  # (t, {tid: (name, ticks)})
        self.names = {}  # native thread id -> Python thread name
        self._stop = threading.Event()

    def now(self):
        return time.time() - self.t0

    def add(self, label, start, end, cpu=None, thread=None):
        with self.lock:
            self.events.append((thread or threading.current_thread().name, label, start, end, cpu))

    def span(self, label):
        rec = self

        class _Span:
            def __enter__(self):
                self.s, self.c = rec.now(), time.thread_time()
                return self

            def __exit__(self, *exc):
                rec.add(label, self.s, rec.now(), time.thread_time() - self.c)
        return _Span()

    def wrap(self, label, fn):
        def wrapped(*a, **k):
            with self.span(label if isinstance(label, str) else label(*a, **k)):
                return fn(*a, **k)
        wrapped.__wrapped__ = fn
        return wrapped

    def sample_loop(self, every):
        tasks = "/proc/self/task"
        while not self._stop.is_set():
            snap = {}
            for tid in os.listdir(tasks):
                try:
                    with open(f"{tasks}/{tid}/stat") as f:
                        s = f.read()
                except OSError:
                    continue
                name = s[s.index("(") + 1:s.rindex(")")]
                rest = s.rsplit(")", 1)[1].split()
                snap[int(tid)] = (name, int(rest[11]) + int(rest[12]))
            for th in threading.enumerate():  # Python threads by name (the rest: pyarrow's, numpy's)
                if th.native_id in snap:
                    self.names[th.native_id] = th.name
            self.samples.append((self.now(), snap))
            self._stop.wait(every)

    def start_sampler(self, every):
        th = threading.Thread(target=self.sample_loop, args=(every,), name="timeline-sampler", daemon=True)
        th.start()
        return th

    def stop(self):
        self._stop.set()


def _instrument(rec: _Recorder):
    """Wrap the phases of the CLI and the engine (module attributes looked up at call time)."""
    import streamlearn.api as api
    import streamlearn.evaluate as evaluate
    import streamlearn.io.model_file as model_file
    import streamlearn.io.parquet as parquet

    def timed_reader(fn):
        def read_parquet_file(*a, **k):
            it = fn(*a, **k)
            rg = k.get("row_groups")
            tag = f"rg {rg[0]}-{rg[-1]}" if rg else "file"
            c0 = time.thread_time()
            s0 = rec.now()
            n = 0
            while True:
                s, c = rec.now(), time.thread_time()
                try:
                    b = next(it)
                except StopIteration:
                    break
                rec.add("  read batch (decode+convert)", s, rec.now(), time.thread_time() - c)
                n += 1
                yield b
            rec.add(f"read {tag} ({n} batches)", s0, rec.now(), time.thread_time() - c0)
        return read_parquet_file
    parquet.read_parquet_file = timed_reader(parquet.read_parquet_file)
    parquet._convert = rec.wrap("  convert", parquet._convert)

    orig_run_stream = evaluate.run_stream

    def run_stream(learner, batches, **kw):
        waited = [0.0]

        def waiting(it):
            it = iter(it)
            while True:
                s = time.perf_counter()
                try:
                    b = next(it)
                except StopIteration:
                    return
                finally:
                    waited[0] += time.perf_counter() - s
                yield b
        s, c = rec.now(), time.thread_time()
        ev = orig_run_stream(learner, waiting(batches), **kw)
        e = rec.now()
        rec.add(f"run_stream (waited for batches {waited[0]:.2f} s)", s, e, time.thread_time() - c)
        return ev
    evaluate.run_stream = run_stream
    api.train = rec.wrap("api.train", api.train)
    model_file.encode_model = rec.wrap("encode_model", model_file.encode_model)
    try:
        import streamlearn.distributed.engine as engine
    except ImportError:
        return
    import streamlearn.distributed.partitions as partitions  # noqa: F401

    engine.train_dask = rec.wrap("train_dask", engine.train_dask)
    engine.plan_partitions = rec.wrap("plan_partitions", engine.plan_partitions)
    engine.plan_chains = rec.wrap("plan_chains", engine.plan_chains)
    engine.require_dask = rec.wrap("require_dask (dask import)", engine.require_dask)
    engine._prepare_worker = rec.wrap("_prepare_worker", engine._prepare_worker)
    engine.state_of = rec.wrap("state_of", engine.state_of)
    engine.learner_of = rec.wrap("learner_of", engine.learner_of)
    engine.lift = rec.wrap("lift", engine.lift)
    engine.combine_results = rec.wrap("combine_results", engine.combine_results)
    engine.finish_pass = rec.wrap("finish_pass", engine.finish_pass)
    engine._learn_partition = rec.wrap(lambda base, part, *a, **k: f"learn partition {part.row_groups[0]}-"
                                       f"{part.row_groups[-1]}" if part.row_groups else "learn partition",
                                       engine._learn_partition)
    api.initial_learner = rec.wrap("initial_learner", api.initial_learner)
    api._output_plan = rec.wrap("_output_plan", api._output_plan)
    engine._read_ahead = rec.wrap(lambda ahead, *a: f"start read-ahead of {ahead.then[0][1].row_groups}", engine._read_ahead)
    # dask's import, when and on which thread it happens (its wrapper patches dask.threaded.get once loaded)
    import builtins
    real_import = builtins.__import__

    def timed_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "dask" or name.startswith("dask.")) and name not in sys.modules:
            with rec.span(f"import {name}"):
                mod = real_import(name, globals, locals, fromlist, level)
        else:
            mod = real_import(name, globals, locals, fromlist, level)
        dt = sys.modules.get("dask.threaded")
        if dt is not None and hasattr(dt, "get") and not hasattr(dt.get, "__wrapped__"):
            dt.get = rec.wrap("dask.threaded.get (the pass)", dt.get)
        return mod
    builtins.__import__ = timed_import


def child(argv, sample_ms, out):
    rec = _Recorder()
    rec.add("interpreter start -> timeline child", 0.0, rec.now(), None, "MainThread")
    rec.start_sampler(sample_ms / 1000)
    s = rec.now()
    c = time.thread_time()
    import streamlearn.cli  # noqa: F401  (what entry() imports first)
    rec.add("import streamlearn.cli", s, rec.now(), time.thread_time() - c)
    s = rec.now()
    c = time.thread_time()
    _instrument(rec)
    rec.add("(timeline instrumentation: imports the engine and api modules)", s, rec.now(), time.thread_time() - c)
    sys.argv = ["streamlearn"] + argv
    from streamlearn.__main__ import entry
    import streamlearn.cli as cli
    s = rec.now()
    fast_exit = cli._fast_exit

    def done(code):  # the console script leaves with os._exit: write the record first
        rec.add("entry() (the command)", s, rec.now(), None, "MainThread")
        rec.stop()
        t = os.times()
        Path(out).write_text(json.dumps({"events": rec.events, "samples": rec.samples, "names": rec.names,
                                         "cpu": t.user + t.system, "end": rec.now()}))
        fast_exit(code)
    cli._fast_exit = done
    entry()


# ---------------------------------------------------------------------------- the parent's side

def report(data, label, slice_s=0.1):
    events = sorted(data["events"], key=lambda e: (e[2], e[0]))
    samples = data["samples"]
    print(f"\n== {label}: wall {data['end']:.2f} s from the process's start, CPU {data['cpu']:.2f} s "
          f"(user + system, all threads) ==")
    rows = []
    for th, lab, s, e, cpu in events:
        if lab.startswith("  "):
            continue
        rows.append(f"{th[:22]:<22} {s:7.3f} {e:7.3f} {e - s:7.3f} {'' if cpu is None else f'{cpu:7.3f}':>7}  {lab}")
    print(f"{'thread':<22} {'start':>7} {'end':>7} {'wall':>7} {'thr CPU':>7}  phase")
    print("\n".join(rows))
    # per-batch sums per thread (reader batches, conversions)
    sums = {}
    for th, lab, s, e, cpu in events:
        if lab.startswith("  "):
            k = (th, lab.strip())
            n, w, c = sums.get(k, (0, 0.0, 0.0))
            sums[k] = (n + 1, w + e - s, c + (cpu or 0.0))
    if sums:
        print("\nper-batch work, summed per thread:")
        for (th, lab), (n, w, c) in sorted(sums.items()):
            print(f"  {th[:22]:<22} {lab:<30} {n:4d} x  wall {w:6.2f} s  thread CPU {c:6.2f} s")
    # CPU per thread (from the sampler)
    if len(samples) >= 2:
        tick = 1 / os.sysconf("SC_CLK_TCK")
        names = {int(k): v for k, v in data.get("names", {}).items()}
        last, first_seen = {}, {}
        for t, snap in samples:
            for tid, (name, ticks) in snap.items():
                last[int(tid)] = max(last.get(int(tid), 0), ticks)
                first_seen.setdefault(int(tid), t)
        per = {}
        for tid, ticks in last.items():
            name = names.get(tid, "native (pyarrow pool, ...)")
            if name.startswith("ThreadPoolExecutor") or name.startswith("Thread-"):
                name = "dask worker thread"
            n, c = per.get(name, (0, 0.0))
            per[name] = (n + 1, c + ticks * tick)
        print("\nCPU per thread (sampler, to each thread's last sample; threads of one name summed):")
        for name, (n, cpu) in sorted(per.items(), key=lambda x: -x[1][1]):
            if cpu > 0:
                print(f"  {name:<28} x{n:<3} {cpu:6.2f} s")
        print(f"\ncores busy per {slice_s:.1f} s slice (all threads; from the sampler):")
        nb = int(samples[-1][0] / slice_s) + 1
        busy = [0.0] * nb
        prev_t, prev = samples[0][0], samples[0][1]
        for t, snap in samples[1:]:
            d = sum(max(0, v[1] - prev[k][1]) for k, v in snap.items() if k in prev)
            d += sum(v[1] for k, v in snap.items() if k not in prev)  # a thread born since
            i = int(((prev_t + t) / 2) / slice_s)
            if 0 <= i < nb:
                busy[i] += d * tick / slice_s
            prev_t, prev = t, snap
        for k in range(0, nb, 20):
            print(f"  {k * slice_s:6.1f} s: " + " ".join(f"{b:.1f}" for b in busy[k:k + 20]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?")
    ap.add_argument("--engine-args", nargs="*", default=["--engine dask --workers 2 --worker_threads"],
                    help="one run per string (the CLI alone first unless --no-cli)")
    ap.add_argument("--no-cli", action="store_true")
    ap.add_argument("--sample-ms", type=float, default=20)
    ap.add_argument("--slice", type=float, default=0.1)
    ap.add_argument("--child", nargs=argparse.REMAINDER)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child is not None:
        child(a.child, a.sample_ms, a.out)
        return
    data = a.data
    if data is None:
        sys.path.append(_HERE)
        from _common import CACHE
        data = str(CACHE / "gs200000x5.parquet")
        if not os.path.exists(data):
            sys.exit(f"{data}: run benchmarks/distributed.py --section speed once first (it writes it)")
    runs = ([] if a.no_cli else [""]) + list(a.engine_args)
    out = "/tmp/streamlearn_timeline.json"
    for extra in runs:
        argv = ["train", data, "-f", "/tmp/streamlearn_timeline.slm", "--quiet"] + extra.split()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--sample-ms", str(a.sample_ms), "--out", out,
               "--child"] + argv
        print(f"\nload average {os.getloadavg()[0]:.2f}; streamlearn {' '.join(argv)}")
        r = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd="/tmp", capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr[-3000:])
        report(json.loads(Path(out).read_text()), "CLI (one process)" if not extra else extra, a.slice)


if __name__ == "__main__":
    main()
