"""What the progress display costs (issue 20): ``-P off`` vs ``-P bar`` (tqdm, redrawn at most 10
times a second), ``-P table`` (VW's table) and ``-P bar --history_file``, on the 200,000-example
synthetic file (``gen_sparse.py``), for a fast learner (adagrad: the C fast path, where a fixed
cost shows most) and a slower one.

Two measures, both robust to a busy machine: (1) the process CPU seconds of a whole run
(``streamlearn.api.train`` in this process, the same call the CLI makes; reader threads
included), median of ``--repeat`` alternating rounds (off, bar, table, history, off, ...),
ratio against ``off`` in the same round (on a loaded machine this ratio is noisy: ``table``,
which prints 18 lines, spreads as widely); (2) the CPU seconds spent inside the bar's
``update`` calls (tqdm's drawing included; ``time.thread_time``, so time the thread waits for
the GIL or a core is not counted), as a share of the run's CPU seconds and of its wall time:
the bar's own cost, measured directly. The updates run on the learner's thread, between
batches, so the share of wall time is what the bar takes from throughput.

    python3 benchmarks/progress_overhead.py [--n 200000] [--repeat 5] [--algos adagrad,oja-son]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import gen_sparse, need_shared, table  # noqa: E402

MODES = ("off", "bar", "table", "bar + history")


class Timed:
    """A monitor wrapper adding up the CPU seconds spent in ``update`` (the per-batch cost)."""

    def __init__(self, mon):
        self.mon, self.seconds, self.calls = mon, 0.0, 0

    def start(self, total, unit):
        return self.mon.start(total, unit)

    def update(self, ev, pos):
        t = time.thread_time()
        self.mon.update(ev, pos)
        self.seconds += time.thread_time() - t
        self.calls += 1

    def close(self, failed):
        self.mon.close(failed)

    def log(self, line):
        self.mon.log(line)


def one_run(vw, algo, mode, d, sink):
    from streamlearn.api import RunConfig, train
    from streamlearn.cli.common import configure_kernels
    from streamlearn.cli.progress import BarMonitor

    configure_kernels()
    hyper = {"loss_function": "logistic"}
    if algo == "oja-son":
        hyper["sketch_size"] = 5
    cfg = RunConfig(data=[str(vw)], algo=algo, hyper=hyper, table=(mode == "table"),
                    history_file=str(Path(d) / "h.jsonl") if "history" in mode else None)
    mon = Timed(BarMonitor(force=True, stream=sink)) if mode.startswith("bar") else None
    lines = []
    t0, w0 = time.process_time(), time.perf_counter()
    s = train(cfg, log=(mon.log if mon else lines.append) if mode != "table" else sink_log(sink), monitor=mon)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    assert s["examples"] > 0
    return cpu, wall, (mon.seconds, mon.calls) if mon else (0.0, 0)


def sink_log(sink):
    return lambda line: sink.write(line + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--algos", default="adagrad,oja-son")
    a = ap.parse_args()
    need_shared()
    vw, _ = gen_sparse(a.n)
    rows = []
    with tempfile.TemporaryDirectory() as d, open(Path(d) / "stderr.txt", "w") as sink:
        for algo in a.algos.split(","):
            one_run(vw, algo, "off", d, sink)  # compile / warm the caches
            cpu = {m: [] for m in MODES}
            inside = {m: [] for m in MODES}
            for _ in range(a.repeat):
                for mode in MODES:
                    c, wall, (secs, calls) = one_run(vw, algo, mode, d, sink)
                    cpu[mode].append(c)
                    inside[mode].append((secs / c, calls, secs / wall))
            base = statistics.median(cpu["off"])
            for mode in MODES:
                med = statistics.median(cpu[mode])
                share = statistics.median(x[0] for x in inside[mode])
                share_wall = statistics.median(x[2] for x in inside[mode])
                rows.append({"learner": algo, "-P": mode, "CPU s (median)": f"{med:.2f}",
                             "ratio vs off": f"{med / base:.3f}",
                             "in bar.update": "" if mode in ("off", "table") else
                             f"{100 * share:.2f}% of CPU, {100 * share_wall:.2f}% of wall ({inside[mode][0][1]} calls)"})
        drawn = (Path(d) / "stderr.txt").read_text().count("100%|")
    load = os.getloadavg()[0]
    print(f"{a.n:,} examples ({vw.name}), {a.repeat} alternating rounds; bars drawn to a file: {drawn}; "
          f"load average {load:.1f} on {os.cpu_count()} CPUs")
    print(table(rows, ["learner", "-P", "CPU s (median)", "ratio vs off", "in bar.update"]))


if __name__ == "__main__":
    main()
