#!/usr/bin/env python3
"""Where an FD-SON run's time goes, and how fast it could be: a per-phase profile of ``fd_run`` and a ceiling table
against VW ``--OjaNewton --sketch_size 10`` and our ``--algo oja-son`` measured in the same run (issue 17, "Cost").

Three kinds of child process, each running ``streamlearn train FILE --algo fd-son ARGS`` (default ``-b 18
--loss_function logistic``; default FILE: gen_sparse.py's 200,000-example file):

* **whole processes** (``python3 -m streamlearn train ... --quiet`` and ``vw_run FILE --OjaNewton --sketch_size 10
  ...``), under ``/usr/bin/time``: wall, user and system CPU; FD-SON (and with ``--no_diag``), Oja-SON and VW
  interleaved, ``--rounds`` rounds (default 3), after one untimed run of each on the file's first 2,000 lines
  (numba's cache), medians reported.
* **split** (one per FD-SON setting): the same CLI run in-process with ``FDSON._run`` and the kernels it calls from
  Python (``fd_run``, ``full_rebase``, ``compact_history``) wrapped by thread-CPU timers (``time.thread_time``:
  one read per call, a few hundred calls): the learning's CPU time; the rest of the process (reading, which runs
  in a prefetch thread, start-up, the driver) is the process's CPU minus it. Its model (``-f``) is the plain run's.
* **profile** (one per FD-SON setting): ``fd_run`` replaced by an instrumented copy made from the tree's source at
  run time (anchors below, the first lines of each phase; a missing anchor is an error), as are ``_eigen_step``
  (its phases) and the catch-up call (timed only for a stale feature: ``_catch_up_inplace`` returns at once for
  the others). Each anchor reads a clock and charges the time since the last read to the phase then running (the
  phase follows the control flow, not the text); the phases' sums over the run are printed. The copy computes the
  same thing: its model's md5 is checked against the split run's. It is compiled in that process, uncached.

The clock (``--clock``): ``tsc`` (default) the CPU's cycle counter (``llvm.readcyclecounter``, ~12 ns a read on this
machine's VM, ~25 reads an example: 0.3 us an example), or ``cpu``, the thread's CPU clock
(``clock_gettime(CLOCK_THREAD_CPUTIME_ID)``, a system call here: ~0.7 us a read, so ~18 us an example of timer,
more than half the learning; with it the catch-up is not timed apart). The cost of a read (the timer's time charged
to each interval) is measured in the same process before the run and subtracted from each phase (its count of
intervals times it). The cycle counter counts wall time (a preempted thread's wait too), so the phases are reported
as their shares of the net sum, applied to the split run's ``fd_run`` thread CPU (the 'CPU s' column); the raw
seconds (cycles / the counter's measured rate) are printed next to them.

The ceiling: FD-SON's whole process (best of the rounds) less what a representation that never re-bases would save at
best (the catch-up, cond(N1), the lazy and full re-bases, the history compactions), then less also the eigen step's
dense m x m algebra (the residual's Gram and eigh, Mt^T Mt and its eigh, N1 N2, the new K, the tail: drift guard,
buffer cleared, H), as ratios of examples/s to VW's and to Oja-SON's, by CPU (user + sys) and by wall. The cuts are
those phases' shares of the learning (profile x split run) applied to the whole process's own learning, estimated as
its CPU less the start-up (the same command on the file's first 2,000 lines) and less the reading thread's CPU (split
run), so that what is removed and what it is removed from come from the same runs. The learning runs on the main
thread, the reading beside it in the prefetch thread: a second removed from the learning is taken as a second of
wall (it holds while the learning thread is the longer of the two). Then what would still have to go for 1.0x VW.

Each run leaves nothing behind (its models are written in a temporary folder under the benchmark cache, removed at
the end). A run takes ~5 minutes (two uncached compiles of the instrumented kernel, ~35 s each).

    python3 benchmarks/fd_son_phase_profile.py [FILE] [--rounds 3] [--clock tsc|cpu] [--no-peers] [-- ARGS]
"""
from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CACHE, ROOT, gen_sparse, need_shared, table, vw_cmd  # noqa: E402

DEFAULT_ARGS = ["-b", "18", "--loss_function", "logistic"]

#: fd_run's phases: (phase name, the stripped first line where it starts, mode). Matched in order, each after the
#: previous one; mode "before": the clock is read before that line; "inside": the line opens a block (elif / else)
#: and the clock is read as the block's first statement. A name may come back (the phase resumes).
FD_RUN = [
    ("hash look-up (+ new keys)", "a = offsets[i]", "before"),
    ("pre-scaling: buffer share (G^T c)_j", "if precond and do_learn:  # the scales grow", "before"),
    ("pre-scaling: scales grow", "_grow_scale(tab, slot_buf, values, a, s, b, m)", "before"),
    ("scatter x, w.x, Z x", "# scatter x (x~ = f x", "before"),
    ("prediction: buffer dots / share, loss", "tau = ints[I_TAU]", "before"),
    ("pre-scaling: flush", "if precond and dl != 0.0:", "before"),
    ("pre-scaling: G_j, frames", "nx = _accumulate_g(", "before"),
    ("pre-scaling: x~, Z x~ again", "for k in range(s):", "before"),
    ("pre-scaling: G x~ again (buffer dots)", "_buffer_dots(tab, boff, bslot, bval, tau, m, gx)", "before"),
    ("buffer insert", "heta = imp * eta", "before"),
    ("eigen: rest (Z x after, S x)", "if outcome == EIG_FULL or tau + 1 == m:", "before"),
    ("eigen: tail (drift, clear, H)", "_eigen_tail(F, K, D, c, H, ZG, GG, boff, ints, flt)", "before"),
    ("eigen: rest (Z x after, S x)", "if outcome == EIG_DELTA:  # Z x after", "before"),
    ("Sherman-Morrison", "elif alpha > 0.0:", "inside"),
    ("Newton step", "alpha = flt[0]", "before"),
]
ENTRY = "fd_run entry"
#: the catch-up of a stale feature (learning), timed apart: this line of fd_run's look-up loop
CATCH_LINE = "_catch_up_inplace(tab, r, hP, hc, R, wz)"
CATCH = "history catch-up"
LOOKUP = FD_RUN[0][0]
#: _eigen_step's phases (it returns into "eigen: rest")
EIGEN = [
    ("eigen: residual Gram + eigh", "m = F.shape[0]", "before"),
    ("eigen: Mt^T Mt + eigh", "nb = na + r", "before"),
    ("eigen: top m, m-th row, N1 N2", "flt[1] += smm", "before"),
    ("eigen: new V's Gram K", "# the Gram matrix of the new V's kept rows", "before"),
    ("eigen: cond(N1)", "cn = _equilibrated_cond(N1)", "before"),
    ("eigen: Delta, w_bar fix, Z += Delta G", "Delta = _solve(N1, N2)", "before"),
    ("eigen: lazy re-base", "hcap = _hist_cap(hP)", "before"),
    ("eigen: full re-base hand-off", "else:  # a re-base on every feature", "inside"),
]
EIGEN_RET = "eigen: rest (Z x after, S x)"
#: Python-side kernels of FDSON._run, timed per call (thread CPU)
PY_KERNELS = [("full re-bases (full_rebase)", "full_rebase"), ("history compactions", "compact_history"),
              ("pinv_apply (RFD alpha = 0)", "pinv_apply")]
PY_REST = "FDSON._run's Python (growth, state)"

#: what exists only because the representation re-bases, and the eigen step's dense m x m algebra
REBASE_ONLY = [CATCH, "eigen: cond(N1)", "eigen: lazy re-base", "eigen: full re-base hand-off",
               "full re-bases (full_rebase)", "history compactions"]
DENSE = ["eigen: residual Gram + eigh", "eigen: Mt^T Mt + eigh", "eigen: top m, m-th row, N1 N2",
         "eigen: new V's Gram K", "eigen: tail (drift, clear, H)"]


def phase_names():
    names = [ENTRY]
    for n, _, _ in FD_RUN[:1]:
        names.append(n)
    names.append(CATCH)
    for n, _, _ in FD_RUN[1:] + EIGEN:
        if n not in names:
            names.append(n)
    return names


# -- the instrumented copies ------------------------------------------------------------------------------------
def _call_end(src: str, start: int) -> int:
    """The index of the ``)`` closing the call whose ``(`` is at ``start``."""
    depth = 0
    for i in range(start, len(src)):
        if src[i] == "(":
            depth += 1
        elif src[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced call")


def instrument(src: str, name: str, anchors, index, entry, ret, catch=None) -> str:
    """``src`` (a function's source) renamed ``name + '_prof'`` with a last parameter ``prof``: the clock read
    (``_ptick(prof, phase)``) at each anchor; at entry ``_pstart`` (``entry``: a phase index, or None for a tick to
    the first anchor's phase, done by the first anchor itself), and before each ``return`` a tick to ``ret``.
    ``catch``: (line, phase, back): that line timed as its own phase when the feature is stale."""
    lines = [ln for ln in textwrap.dedent(src).splitlines() if not ln.startswith("@")]
    for i, ln in enumerate(lines):
        if ln.rstrip().endswith("):"):
            lines[i] = ln.rstrip()[:-2] + ", prof):"
            body = i + 1
            break
    # skip the docstring
    while not lines[body].strip():
        body += 1
    if lines[body].strip().startswith('"""'):
        if lines[body].strip().count('"""') >= 2 and len(lines[body].strip()) > 3:
            body += 1
        else:
            body += 1
            while '"""' not in lines[body]:
                body += 1
            body += 1
    out = lines[:body]
    if entry is not None:
        ind = lines[body][:len(lines[body]) - len(lines[body].lstrip())]
        out.append(f"{ind}_pstart(prof, {entry})")
    nxt = 0
    i = body
    found_catch = catch is None
    while i < len(lines):
        ln = lines[i]
        st = ln.strip()
        ind = ln[:len(ln) - len(ln.lstrip())]
        if nxt < len(anchors) and st.startswith(anchors[nxt][1]):
            ph = index[anchors[nxt][0]]
            if anchors[nxt][2] == "inside":
                out.append(ln)
                j = i + 1
                while not lines[j].strip():
                    j += 1
                ind2 = lines[j][:len(lines[j]) - len(lines[j].lstrip())]
                out.append(f"{ind2}_ptick(prof, {ph})")
                nxt += 1
                i += 1
                continue
            out.append(f"{ind}_ptick(prof, {ph})")
            nxt += 1
        if catch is not None and st == catch[0]:
            out.append(f"{ind}if tab[r, C_T] != R:")
            out.append(f"{ind}    _ptick(prof, {catch[1]})")
            out.append(f"{ind}    {st}")
            out.append(f"{ind}    _ptick(prof, {catch[2]})")
            found_catch = True
            i += 1
            continue
        if st.startswith("return ") or st == "return":
            out.append(f"{ind}_ptick(prof, {ret})")
        out.append(ln)
        i += 1
    if nxt < len(anchors):
        sys.exit(f"{name}'s source has no anchor for: {[a[0] + ': ' + a[1] for a in anchors[nxt:]]}")
    if not found_catch:
        sys.exit(f"{name}'s source has no line {catch[0]!r} (the catch-up)")
    return "\n".join(out).replace(f"def {name}(", f"def {name}_prof(", 1)


def build_profiled(fk, clock_cpu):
    """The instrumented ``fd_run`` (and ``_eigen_step``), compiled; returns (fd_run_prof, names, prof array,
    timer's cost per interval in clock units)."""
    import numpy as np
    from numba import njit

    from _phase_clock import CLOCK_THREAD_CPUTIME_ID, rdtsc as _rdtsc, clock_gettime as cg

    # prof: [0:P] the phases' sums, [P:2P] their interval counts, then t0, the running phase, timespec (2), clock
    @njit(inline="always")
    def _pnow(prof):
        n = prof.shape[0]
        if prof[n - 1] == 0:
            return _rdtsc()
        ts = prof[n - 3:n - 1]
        cg(CLOCK_THREAD_CPUTIME_ID, ts.ctypes)
        return ts[0] * 1000000000 + ts[1]

    @njit(inline="always")
    def _ptick(prof, new):
        t = _pnow(prof)
        n = prof.shape[0]
        P = (n - 5) // 2
        ph = prof[n - 4]
        if ph >= 0:
            prof[ph] += t - prof[n - 5]
            prof[P + ph] += 1
        prof[n - 4] = new
        prof[n - 5] = t

    @njit(inline="always")
    def _pstart(prof, new):
        n = prof.shape[0]
        prof[n - 5] = _pnow(prof)
        prof[n - 4] = new

    names = phase_names()
    idx = {n: i for i, n in enumerate(names)}
    ns = dict(vars(fk))
    ns.update(_ptick=_ptick, _pstart=_pstart)
    esrc = instrument(inspect.getsource(fk._eigen_step.py_func), "_eigen_step", EIGEN, idx, None, idx[EIGEN_RET])
    exec(esrc, ns)
    ns["_eigen_step_prof"] = njit(**{k: v for k, v in fk.INNER.items() if k != "cache"})(ns["_eigen_step_prof"])
    src = instrument(inspect.getsource(fk.fd_run.py_func), "fd_run", FD_RUN, idx, idx[ENTRY], -1,
                     catch=None if clock_cpu else (CATCH_LINE, idx[CATCH], idx[LOOKUP]))
    if clock_cpu:  # the catch-up stays in the look-up's phase
        names[idx[CATCH]] = CATCH + " (in the look-up: not timed apart with --clock cpu)"
    k = src.index("_eigen_step(")
    e = _call_end(src, k + len("_eigen_step"))
    assert src.count("_eigen_step(") == 1, "fd_run calls _eigen_step once"
    src = src[:k] + "_eigen_step_prof(" + src[k + len("_eigen_step("):e] + ", prof)" + src[e + 1:]
    exec(src, ns)
    prof_run = njit(**{k: v for k, v in fk.KERNEL.items() if k != "cache"})(ns["fd_run_prof"])
    P = len(names)
    prof = np.zeros(2 * P + 5, np.int64)
    prof[-1] = 1 if clock_cpu else 0

    @njit
    def calib(prof, n):
        for _ in range(n):
            _ptick(prof, 0)

    cal = np.zeros_like(prof)
    cal[-1] = prof[-1]
    calib(cal, 10)
    costs = []
    for _ in range(5):
        cal[:] = 0
        cal[-1] = prof[-1]
        cal[-4] = -1
        calib(cal, 200_000)
        costs.append(cal[0] / max(cal[P], 1))
    return prof_run, names, prof, float(statistics.median(costs))


# -- the children ------------------------------------------------------------------------------------------------
def _cli(cli_main, argv):
    try:
        cli_main(["train", *argv, "--quiet"])
    except SystemExit as e:
        if e.code not in (0, None):
            raise


def child(mode, out, clock_cpu, argv):
    """Run the CLI in this process with the learning timed (mode 'split') or profiled ('profile'); write JSON."""
    t_start = time.perf_counter()
    import streamlearn.algos._fd_son_kernels as fk
    from streamlearn.algos.fd_son import FDSON

    res = {"mode": mode, "py": {}, "calls": {}}
    tt = time.thread_time
    learner = {}
    run_threads = set()
    if mode == "profile":
        prof_run, names, prof, cost = build_profiled(fk, clock_cpu)
        from _phase_clock import read_tsc as rd
        res.update(names=names, cost_per_interval=cost, clock="cpu" if clock_cpu else "tsc")
        orig_fd_run = prof_run

        def fd_run(*a):
            return prof_run(*a, prof)
        t_compiled = time.perf_counter()
    else:
        orig_fd_run = fk.fd_run
        fd_run = orig_fd_run
    acc = {"fd_run": 0.0}
    ncall = {"fd_run": 0}

    def timed(key, f):
        def w(*a):
            t = tt()
            try:
                return f(*a)
            finally:
                acc[key] = acc.get(key, 0.0) + tt() - t
                ncall[key] = ncall.get(key, 0) + 1
        return w

    wrapped = {"fd_run": timed("fd_run", fd_run)}
    for _, kname in PY_KERNELS:
        wrapped[kname] = timed(kname, getattr(fk, kname))
    originals = {k: getattr(fk, k) for k in wrapped}
    for k, f in wrapped.items():
        setattr(fk, k, f)
    orig_run = FDSON._run

    def _run(self, batch, learn):
        learner["L"] = self
        run_threads.add(threading.get_ident())
        t = tt()
        try:
            return orig_run(self, batch, learn)
        finally:
            acc["_run"] = acc.get("_run", 0.0) + tt() - t

    FDSON._run = _run
    from streamlearn.cli import main as cli_main
    warm = os.environ.get("FDPROF_WARM")
    if warm:  # the kernels compiled (the profile's) or loaded from the cache before the timed run
        wargv = [warm] + list(argv[1:])
        if "-f" in wargv:
            k = wargv.index("-f")
            del wargv[k:k + 2]
        _cli(cli_main, wargv)
        acc.clear()
        acc["fd_run"] = 0.0
        ncall.clear()
        if mode == "profile":
            prof[:] = 0
            prof[-1] = 1 if clock_cpu else 0
    if mode == "profile":
        c0, w0 = rd(), time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    m0 = tt()
    _cli(cli_main, argv)
    m1 = tt()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    if mode == "profile":
        res["tsc_hz"] = (rd() - c0) / (time.perf_counter() - w0)
        P = len(names)
        res["sums"] = [int(x) for x in prof[:P]]
        res["counts"] = [int(x) for x in prof[P:2 * P]]
        res["compile_s"] = t_compiled - t_start
    for k, f in originals.items():
        setattr(fk, k, f)
    L = learner.get("L")
    res.update(acc=acc, ncall=ncall, proc_cpu=(r1.ru_utime + r1.ru_stime), proc_cpu_run=(r1.ru_utime - r0.ru_utime
               + r1.ru_stime - r0.ru_stime), main_thread_cpu=m1 - m0,
               wall=time.perf_counter() - t_start, run_on_main=threading.get_ident() in run_threads,
               eigen=L.n_eigen if L else 0, rebases=L.n_rebase if L else 0, compactions=L.n_compact if L else 0,
               examples=int(L.examples_learned) if L else 0)
    Path(out).write_text(json.dumps(res))


# -- the parent --------------------------------------------------------------------------------------------------
def md5(p):
    return hashlib.md5(Path(p).read_bytes()).hexdigest()


def timed_proc(cmd, env=None):
    """(wall, user, sys, stderr) of a whole process under /usr/bin/time."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "@@T %U %S", *map(str, cmd)], capture_output=True, env=env)
    wall = time.perf_counter() - t
    err = p.stderr.decode()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{err[-2000:]}")
    u, s = re.findall(r"@@T ([\d.]+) ([\d.]+)", err)[-1]
    return wall, float(u), float(s), err


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clock", choices=("tsc", "cpu"), default="tsc")
    ap.add_argument("--no-peers", action="store_true", help="the profiles only (no whole-process rounds, no ceiling)")
    ap.add_argument("--settings", default="default,no_diag", help="FD-SON settings: default, no_diag (comma list)")
    ap.add_argument("--_child", nargs=2, metavar=("MODE", "OUT"), help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if a._child:
        child(a._child[0], a._child[1], a.clock == "cpu", rest)
        return
    need_shared()
    tmp = Path(tempfile.mkdtemp(prefix="fdprof_", dir=CACHE))
    try:
        report(a, rest, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # (the runs' models: ~30 MB each)


def report(a, rest, tmp):
    data = Path(a.file) if a.file else gen_sparse()[0]
    args = rest or DEFAULT_ARGS
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    head = tmp / "head.vw"
    with open(data, "rb") as f, open(head, "wb") as g:
        for _, ln in zip(range(2000), f):
            g.write(ln)
    settings = {"default": [], "no_diag": ["--no_diag"]}
    fd_sets = [s for s in a.settings.split(",") if s]
    print(f"FD-SON phase profile and ceiling: {data} ({sum(1 for _ in open(data, 'rb')):,} examples), args "
          f"{' '.join(args)}; tree {ROOT}; load average at start {load()} on {os.cpu_count()} cores", flush=True)

    runs = {f"FD-SON m=10{' --no_diag' if s == 'no_diag' else ''}": ["--algo", "fd-son", *settings[s]] for s in fd_sets}
    runs["Oja-SON m=10"] = ["--algo", "oja-son"]
    sl = lambda f, extra: [sys.executable, "-m", "streamlearn", "train", str(f), *extra, *args, "--quiet"]  # noqa: E731
    vwc = vw_cmd(data, "--OjaNewton", "--sketch_size", "10", *args)
    whole = {k: [] for k in list(runs) + ["VW --OjaNewton --sketch_size 10"]}
    fd_labs = {s: f"FD-SON m=10{' --no_diag' if s == 'no_diag' else ''}" for s in fd_sets}

    def kid(s, mode, tag):
        j, mf = tmp / f"{s}.{mode}.{tag}.json", tmp / f"{s}.{mode}.{tag}.model"
        cmd = [sys.executable, __file__, "--clock", a.clock, "--_child", mode, str(j), "--", str(data),
               "--algo", "fd-son", *settings[s], *args, "-f", str(mf)]
        p = subprocess.run(cmd, env=dict(env, FDPROF_WARM=str(head)), capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
        res = json.loads(j.read_text())
        res["md5"] = md5(mf)
        return res

    splits = {lab: [] for lab in fd_labs.values()}
    heads = {}
    if not a.no_peers:
        for lab, extra in runs.items():  # numba's cache (a tree's first run compiles)
            timed_proc(sl(head, extra), env)
        heads = {lab: timed_proc(sl(head, extra), env)[:3] for lab, extra in runs.items()}
        heads["VW --OjaNewton --sketch_size 10"] = timed_proc(vw_cmd(head, *vwc[2:]))[:3]
        print("  start-up: the same runs on the file's first 2,000 lines: " + ", ".join(
            f"{k} {v[0]:.2f} s wall {v[1] + v[2]:.2f} CPU" for k, v in heads.items()), flush=True)
    for r in range(a.rounds if not a.no_peers else 1):
        if not a.no_peers:
            for lab, extra in runs.items():
                w, u, s_, _ = timed_proc(sl(data, extra), env)
                whole[lab].append((w, u, s_))
            w, u, s_, err = timed_proc(vwc)
            whole["VW --OjaNewton --sketch_size 10"].append((w, u, s_))
        for s in fd_sets:  # the learning's thread CPU (split runs), interleaved with the rest
            splits[fd_labs[s]].append(kid(s, "split", r))
        print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1][0]:.2f} s wall {v[-1][1] + v[-1][2]:.2f} CPU"
                                               for k, v in whole.items() if v)
              + "; learning " + ", ".join(f"{k} {v[-1]['acc']['_run']:.2f} s" for k, v in splits.items())
              + f" (load {load()})", flush=True)
    kids = {}
    for s in fd_sets:
        lab = fd_labs[s]
        t = time.perf_counter()
        best = min(splits[lab], key=lambda x: x["acc"]["_run"])
        kids[lab] = {"split": best, "profile": kid(s, "profile", 0),
                     "learn_all": [x["acc"]["_run"] for x in splits[lab]]}
        print(f"  {lab}: profile run {time.perf_counter() - t:.1f} s (load {load()})", flush=True)
    n_ex = None
    # -- whole processes
    med = {}
    if not a.no_peers:
        rows = []
        for lab, v in whole.items():
            w = min(x[0] for x in v)
            c = min(x[1] + x[2] for x in v)
            med[lab] = (w, c)
            rows.append({"run": lab, "wall s": f"{w:.2f}", "user + sys s": f"{c:.2f}",
                         "median wall": f"{statistics.median(x[0] for x in v):.2f}",
                         "median CPU": f"{statistics.median(x[1] + x[2] for x in v):.2f}",
                         "walls": " ".join(f"{x[0]:.2f}" for x in v),
                         "CPUs": " ".join(f"{x[1] + x[2]:.2f}" for x in v)})
        print(f"\nWhole processes, best of {a.rounds} interleaved rounds (wall and CPU each the least; /usr/bin/time; "
              f"VW = vw_run, its Python start-up included)")
        print(table(rows, ["run", "wall s", "user + sys s", "median wall", "median CPU", "walls", "CPUs"]))
    # -- profiles
    for lab, out in kids.items():
        sp, pr = out["split"], out["profile"]
        n_ex = sp["examples"]
        names, sums, counts, cost = pr["names"], pr["sums"], pr["counts"], pr["cost_per_interval"]
        unit = pr["tsc_hz"] if pr["clock"] == "tsc" else 1e9
        net = [max(sm - c * cost, 0.0) for sm, c in zip(sums, counts)]
        tot_net = sum(net)
        fd_cpu = sp["acc"]["fd_run"]
        py = {name: sp["acc"].get(k, 0.0) for name, k in PY_KERNELS}
        py_rest = sp["acc"]["_run"] - fd_cpu - sum(py.values())
        cpu = {n: fd_cpu * x / tot_net for n, x in zip(names, net)}
        cpu.update(py)
        cpu[PY_REST] = py_rest
        out["cpu"] = cpu
        rows = []
        learn = sp["acc"]["_run"]
        print(f"\n(learning thread CPU of the split runs: {' '.join(f'{x:.2f}' for x in out['learn_all'])} s; the least "
              f"is used)")
        for n in names + [k for k, _ in PY_KERNELS] + [PY_REST]:
            i = names.index(n) if n in names else None
            rows.append({"phase": n, "CPU s": f"{cpu[n]:.3f}", "us/ex": f"{1e6 * cpu[n] / n_ex:.2f}",
                         "share": f"{100 * cpu[n] / learn:.1f}%",
                         "raw s": f"{sums[i] / unit:.3f}" if i is not None else "(thread CPU)",
                         "reads": f"{counts[i]:,}" if i is not None else f"{sp['ncall'].get(dict((a2, b2) for a2, b2 in PY_KERNELS).get(n, ''), 0)} calls" if n != PY_REST else ""})
        raw_tot = sum(sums) / unit
        print(f"\n{lab}: phases of the learning ({n_ex:,} examples learned; {sp['eigen']:,} eigen steps, "
              f"{sp['rebases']:,} re-bases, {sp['compactions']:,} compactions). 'CPU s' = the phase's share of the "
              f"profile's net sum applied to the split run's fd_run thread CPU ({fd_cpu:.3f} s); 'raw s' = the "
              f"profile's own clock ({pr['clock']}{', %.3f GHz' % (unit / 1e9) if pr['clock'] == 'tsc' else ''}), "
              f"timer included")
        print(table(rows, ["phase", "CPU s", "us/ex", "share", "raw s", "reads"]))
        ntot = sum(counts)
        print(f"learning (FDSON._run thread CPU, split run) {learn:.3f} s = {1e6 * learn / n_ex:.2f} us/example; "
              f"profile: fd_run thread CPU {pr['acc']['fd_run']:.3f} s, phases' raw sum {raw_tot:.3f} s, timer "
              f"{cost / unit * 1e9:.1f} ns an interval x {ntot:,} = {ntot * cost / unit:.3f} s subtracted; "
              f"models md5 split {sp['md5'][:8]} profile {pr['md5'][:8]} "
              f"({'identical' if sp['md5'] == pr['md5'] else 'DIFFERENT'}); split run's process CPU "
              f"{sp['proc_cpu_run']:.2f} s, of which outside the learning thread {sp['proc_cpu_run'] - sp['main_thread_cpu']:.2f} s "
              f"(reading: the prefetch thread)")
    if a.no_peers or not kids:
        return
    # -- the ceiling
    vw_w, vw_c = med["VW --OjaNewton --sketch_size 10"]
    oj_w, oj_c = med["Oja-SON m=10"]
    for lab, out in kids.items():
        if lab not in med:
            continue
        w, c = med[lab]
        cpu = out["cpu"]
        sp = out["split"]
        learn = sp["acc"]["_run"]
        reb = sum(cpu.get(n, 0.0) for n in REBASE_ONLY)
        dense = sum(cpu.get(n, 0.0) for n in DENSE)
        reading = sp["proc_cpu_run"] - sp["main_thread_cpu"] if sp["run_on_main"] else float("nan")
        # the learning inside the whole process: its CPU less the start-up (the same run on 2,000 lines) and the
        # reading thread (split run); the cuts are the profile's shares of the learning applied to it, so that the
        # whole process and what is taken from it come from the same runs (the machine's load inflates both)
        start_c = heads[lab][1] + heads[lab][2]
        L = c - start_c - reading
        fr, fdn = reb / learn, dense / learn
        rows = []
        for name, f in (("whole run", 0.0), ("- re-base-only phases", fr), ("- also the eigen step's dense part",
                                                                            fr + fdn)):
            cut = f * L
            cw, cc = w - cut, c - cut
            rows.append({"FD-SON": name, "share cut": f"{100 * f:.1f}%", "removed s": f"{cut:.2f}", "wall s": f"{cw:.2f}",
                         "CPU s": f"{cc:.2f}", "ex/s (wall)": f"{n_ex / cw:,.0f}", "/ VW wall": f"{vw_w / cw:.2f}x",
                         "/ VW CPU": f"{vw_c / cc:.2f}x", "/ Oja-SON wall": f"{oj_w / cw:.2f}x",
                         "/ Oja-SON CPU": f"{oj_c / cc:.2f}x"})
        print(f"\nCeiling, {lab} (whole processes, best of {a.rounds}: {w:.2f} s wall, {c:.2f} s CPU; VW {vw_w:.2f} s wall "
              f"{vw_c:.2f} s CPU = {n_ex / vw_w:,.0f} ex/s; Oja-SON {oj_w:.2f} / {oj_c:.2f} s). Learning in the whole process "
              f"{L:.2f} s CPU = {c:.2f} - start-up {start_c:.2f} (2,000 lines) - reading thread {reading:.2f}. Shares of the "
              f"learning (profile x split run): re-base-only {100 * fr:.1f}% ("
              + ", ".join(f"{n} {100 * cpu.get(n, 0) / learn:.1f}%" for n in REBASE_ONLY) + f"); dense {100 * fdn:.1f}% ("
              + ", ".join(f"{n} {100 * cpu.get(n, 0) / learn:.1f}%" for n in DENSE) + ")")
        print(table(rows, ["FD-SON", "share cut", "removed s", "wall s", "CPU s", "ex/s (wall)", "/ VW wall", "/ VW CPU",
                           "/ Oja-SON wall", "/ Oja-SON CPU"]))
        cut = (fr + fdn) * L
        cw, cc = w - cut, c - cut
        left_L = L - cut
        left = {n: v for n, v in cpu.items() if n not in REBASE_ONLY and n not in DENSE}
        big = sorted(left.items(), key=lambda kv: -kv[1])[:8]
        print(f"After both cuts: learning left {left_L:.2f} s ({1e6 * left_L / n_ex:.2f} us/example), start-up {start_c:.2f} s "
              f"(VW's on the same 2,000 lines: {heads['VW --OjaNewton --sketch_size 10'][1] + heads['VW --OjaNewton --sketch_size 10'][2]:.2f}). "
              f"For 1.0x VW by wall another {max(cw - vw_w, 0):.2f} s ({1e6 * max(cw - vw_w, 0) / n_ex:.2f} us/example, "
              f"{100 * max(cw - vw_w, 0) / max(left_L, 1e-9):.0f}% of the learning left) must go; by CPU "
              f"{max(cc - vw_c, 0):.2f} s ({100 * max(cc - vw_c, 0) / max(left_L, 1e-9):.0f}%); with only the re-base-only cut: "
              f"by wall {max(w - fr * L - vw_w, 0):.2f} s ({100 * max(w - fr * L - vw_w, 0) / max(L - fr * L, 1e-9):.0f}% of the "
              f"learning left then), by CPU {max(c - fr * L - vw_c, 0):.2f} s. The largest phases left (share of the "
              f"learning): " + ", ".join(f"{n} {100 * v / learn:.1f}%" for n, v in big))


if __name__ == "__main__":
    main()
