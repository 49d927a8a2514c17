#!/usr/bin/env python3
"""Where sparse FTFSL's (S-ADA's, FTSL's) learning time goes, per phase, on issue 18's cost streams,
and the ceiling an exact FTFSL could reach against diagonal AdaGrad (issue 18, "Cost": FTFSL tau = 10
at most 15x AdaGrad's time per example at s ~ 150).

The learner's run kernel (:func:`streamlearn.algos._sketched_adagrad_kernels.sada_run`) is replaced,
in this process, by an instrumented copy made from the tree's source at run time (so it follows
edits; a missing anchor is an error, as ``bear_phase_profile.py``): a clock read before each phase
of the per-example loop (``TOP``: the anchors are the phases' first lines), and clock reads around
the calls of the helpers in ``CALLS`` (each helper's whole call, inclusive; ``_sa_eig_update`` is
itself split by its own anchors). The copies compute the same thing: every profiled pass's
predictions are checked bit for bit against an uninstrumented learner's.

Clocks. The per-example phases and the per-feature catch-up calls are timed with the CPU's cycle
counter (``llvm.readcyclecounter``, ~11 ns a read here), converted by its rate measured against
``perf_counter``; the rare, long calls (shrink, cut, fold, cond, solve, re-base, history push,
flush) with this thread's CPU clock (``clock_gettime(CLOCK_THREAD_CPUTIME_ID)``: a system call of
~850 ns a read on this machine, as much as a whole phase of an example, so not usable per phase).
The cycle counter is wall time: a phase interval is taken exclusive of the thread-clock calls inside
it, and an interval longer than ``--preempt_us`` (default 150 us; no per-example phase of these
streams takes that long) is a preemption (the machine is shared): dropped, and the phase's mean over
its kept intervals stands for it (the dropped share is printed). The timers' own costs (measured by
loops of reads, printed) are subtracted from every bucket: the reads inside it, plus one of its own.
Each profiled pass's thread CPU time is printed next to the sum of the phases.

Streams (2,000 examples, logistic loss, eta 0.5, ``-b 18``, as ``benchmarks/sketched_adagrad.py --part cost``):
``uD`` the cost part's uniform stream (``sparse_stream``: 149 random features of d = D and a
constant), ``mnist`` the first 2,000 rows of mnist_test10k (digit 0 against the rest, a constant
feature, random 32-bit hashes; ``mnistpos``: every label +1), ``news20b`` the first 2,000 of
news20_binary's training rows (real text, s ~ 147). Times: ``timed`` (best of 5 passes after an untimed first) for AdaGrad
(``--adaptive``, the benchmark's reference) and the learner; the profile sums 5 more passes.
AdaGrad skips its update where its float32 loss is 0 (margin > ~16.6, VW's rule): on a stream its
passes have made separable, most examples are a prediction only; its update fraction is printed,
and ``fresh`` rows time one pass of a fresh learner (compiled before) over 10,000 new examples of
the same kind, where AdaGrad updates on most examples.

    python3 benchmarks/sketched_adagrad_phase_profile.py [--streams u100000,u10000,u1000,u200,mnist,news20b]
        [--algo ftfsl] [--tau 10] [--clock tsc|thread] [--passes 5]
"""
from __future__ import annotations

import argparse
import gzip
import inspect
import os
import re
import sys
import textwrap
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _common import read_batch  # noqa: E402
from sketched_adagrad import DATASETS, one_pass, read_libsvm, sparse_stream, timed, update_fraction  # noqa: E402
from streamlearn.algos import make_learner  # noqa: E402
from streamlearn.batch import Batch  # noqa: E402

#: sada_run's per-example phases: (name, the stripped first line of the phase; searched in order)
TOP = [
    ("look-up: table slots, dedup", "a = offsets[i]"),
    ("gather: w_bar.x, gbar.x, Zx, Gx", "r = ints[I_R]"),
    ("predict: Vx = C [Zx; Gx], p", "for ii in range(r):"),
    ("deferred shrink (cut + fold)", "if ints[I_DEFER] == 1:"),
    ("after shrink: Zx, Vx again", "r = ints[I_R]"),
    ("gradient, Vg, gbar, z, residual", "gl = imp * loss_deriv("),
    ("new direction: basis growth", "if gg > 0.0 and res > RES_TOL * gg"),
    ("eigen: M += cc^T, _sa_eig_update", "# line 10:"),
    ("FD rotate (non-fast forms)", "if not fast:"),
    ("step coefficients", "ihp = _sa_coefs("),
    ("step: e = U diag U^T z / mirror w", "if dual:"),
    ("fold (FD) / defer flag", "if not fast:"),
]
#: _sa_eig_update's phases (inclusive in "eigen" above)
EIG = [
    ("t = U^T cc", "for ii in range(r, rr):"),
    ("rank-one eigen update (secular)", "W = np.empty((rr, rr))"),
    ("U <- U W (rotation)", "row = np.empty(rr)"),
]
#: helpers whose calls are timed whole (inclusive): (function, bucket name, the functions whose source
#: holds the calls to rewrite, clock: "tsc" or "thr")
CALLS = [
    ("_sa_current", "catch-up: stale feature read", ["sada_run"], "tsc"),
    ("_sa_bring", "catch-up after the shrink", ["sada_run"], "tsc"),
    ("_sa_shrink", "shrink (cut + fold)", ["sada_run"], "thr"),
    ("_sa_cut", "cut: rho, lam", ["sada_run", "_sa_shrink"], "thr"),
    ("_sa_rotate", "cut: C <- U^T C, z (rotate)", ["sada_run", "_sa_cut"], "thr"),
    ("_sa_fold", "fold (incl. re-base)", ["sada_run", "_sa_shrink"], "thr"),
    ("_sa_cond", "fold: cond(P1)", ["_sa_fold"], "thr"),
    ("_solve", "fold: P1^-1 P2", ["_sa_fold"], "thr"),
    ("_sa_rebase", "re-base (incl. flush)", ["_sa_fold"], "thr"),
    ("_hist_push", "re-base: history push", ["_sa_rebase"], "thr"),
    ("_sa_flush", "re-base: flush (all features)", ["_sa_rebase"], "thr"),
]
#: the tail of the ticks array (negative indices): the thread clock's timespec, the reads of either clock,
#: the cycles spent in thread-clock calls (outermost), their nesting depth, the preemption threshold
#: (cycles), and per level (0: sada_run, 1: _sa_eig_update) the counters at its last phase boundary
#: and the thread-clock calls' time (in 1/1000 ns, their timers' cost taken off: T_CTHR, T_CTSC per read)
#: pending for the enclosing phase
T_TS, T_NTSC, T_NTHR, T_SPAN, T_DEPTH, T_THRESH, T_LV = -2, -3, -4, -5, -6, -7, -13
T_PEND, T_CTHR, T_CTSC = -14, -15, -16
N_TAIL = 16


from _phase_clock import CLOCK_THREAD_CPUTIME_ID, clock_gettime as _clock_gettime, rdtsc as _rdtsc, read_tsc  # noqa: E402


@njit(inline="always")
def _tsc(ticks):
    ticks[T_NTSC] += 1
    return _rdtsc()


@njit(inline="always")
def _thr(ticks):
    ticks[T_NTHR] += 1
    ts = ticks[T_TS:]
    _clock_gettime(CLOCK_THREAD_CPUTIME_ID, ts.ctypes)
    return ts[0] * 1000000000 + ts[1]


@njit(inline="always")
def _start(ticks, lv):
    t = _tsc(ticks)
    b = T_LV + 3 * lv
    ticks[b] = ticks[T_NTSC]
    ticks[b + 1] = ticks[T_NTHR]
    ticks[b + 2] = ticks[T_SPAN]
    return t


@njit(inline="always")
def _sw(ticks, ph, t0, lv, nb):
    """A phase boundary of level ``lv``: the cycles since ``t0`` (less the thread-clock calls inside) to
    phase ``ph`` with the reads since the level's last boundary, unless a preemption (dropped, counted)."""
    t = _tsc(ticks)
    b = T_LV + 3 * lv
    d = t - t0 - (ticks[T_SPAN] - ticks[b + 2])
    ticks[nb + ph] += 1
    ticks[5 * nb + ph] += ticks[T_PEND]
    ticks[T_PEND] = 0
    if d <= ticks[T_THRESH]:
        ticks[ph] += d
        ticks[2 * nb + ph] += ticks[T_NTSC] - ticks[b]
        ticks[3 * nb + ph] += ticks[T_NTHR] - ticks[b + 1]
    else:
        ticks[4 * nb + ph] += 1
    ticks[b] = ticks[T_NTSC]
    ticks[b + 1] = ticks[T_NTHR]
    ticks[b + 2] = ticks[T_SPAN]
    return t


@njit
def _read_loop(ticks, n, thread):
    """n reads of the cycle counter (or, ``thread``, of the thread clock): the clock units they took."""
    t0 = _thr(ticks) if thread else _tsc(ticks)
    t = t0
    for _ in range(n):
        t = _thr(ticks) if thread else _tsc(ticks)
    return t - t0


TSC_WRAP = """def {fn}_T({ps}, ticks):
    _t0 = _tsc(ticks)
    _n0 = ticks[T_NTSC]
    _s0 = ticks[T_SPAN]
    _r = {target}({args})
    _t1 = _tsc(ticks)
    _d = _t1 - _t0 - (ticks[T_SPAN] - _s0)
    ticks[{nb} + {b}] += 1
    if _d <= ticks[T_THRESH]:
        ticks[{b}] += _d
        ticks[2 * {nb} + {b}] += ticks[T_NTSC] - _n0
    else:
        ticks[4 * {nb} + {b}] += 1
    return _r
"""
THR_WRAP = """def {fn}_T({ps}, ticks):
    _a0 = _tsc(ticks)
    _nt0 = ticks[T_NTSC] - 1
    _nh0 = ticks[T_NTHR]
    ticks[T_DEPTH] += 1
    _h0 = _thr(ticks)
    _mt = ticks[T_NTSC]
    _mh = ticks[T_NTHR]
    _r = {target}({args})
    _h1 = _thr(ticks)
    ticks[{b}] += _h1 - _h0
    ticks[{nb} + {b}] += 1
    ticks[2 * {nb} + {b}] += ticks[T_NTSC] - _mt
    ticks[3 * {nb} + {b}] += ticks[T_NTHR] - _mh
    _a1 = _tsc(ticks)
    ticks[T_DEPTH] -= 1
    if ticks[T_DEPTH] == 0:
        # the enclosing cycle-counter interval leaves this call out (its two reads count as one)
        ticks[T_SPAN] += _a1 - _a0
        ticks[T_PEND] += ((_h1 - _h0) * 1000 - ticks[T_CTHR] * (ticks[T_NTHR] - _mh)
                          - ticks[T_CTSC] * (ticks[T_NTSC] - _mt - 1))
        ticks[T_NTSC] = _nt0 + 1
        ticks[T_NTHR] = _nh0
    return _r
"""


def _source(fn) -> list:
    lines = textwrap.dedent(inspect.getsource(fn.py_func)).splitlines()
    lines = [ln for ln in lines if not ln.startswith("@")]
    # drop the docstring (it may name the helpers as calls)
    body = "\n".join(lines)
    body = re.sub(r'(\):\n)    """(?:.|\n)*?"""\n', r"\1", body, count=1)
    return body.splitlines()


def _rewrite_calls(src: str, name: str) -> str:
    """Every call ``name(...)`` becomes ``name_T(..., ticks)``."""
    out = []
    pos = 0
    for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\(", src):
        if m.start() < pos:
            continue
        depth = 0
        j = m.end() - 1
        while True:
            ch = src[j]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        out.append(src[pos:m.start()] + f"{name}_T(" + src[m.end():j] + ", ticks)")
        pos = j + 1
    if not out:
        sys.exit(f"no call of {name} to rewrite")
    out.append(src[pos:])
    return "".join(out)


def _with_phases(lines, anchors, base, nb, lv):
    """Cycle-counter reads before each anchor (``_ph`` = the running phase, summed at each boundary), a
    start read as the body's first statement and a last boundary before the final ``return`` (or at the end)."""
    out = []
    nxt = 0
    body_started = False
    last_ret = max((i for i, ln in enumerate(lines) if ln.startswith("    return") and not ln.startswith("     ")),
                   default=-1)
    sw = f"_t0 = _sw(ticks, _ph, _t0, {lv}, {nb})"
    for i, ln in enumerate(lines):
        ind = ln[:len(ln) - len(ln.lstrip())]
        if not body_started and i > 0 and ln.startswith("    ") and not ln.strip().startswith("#"):
            out.append("    _ph = -1")
            out.append(f"    _t0 = _start(ticks, {lv})")
            body_started = True
        if i == last_ret:
            out.append(f"    if _ph >= 0:\n        {sw}")
        if nxt < len(anchors) and ln.strip().startswith(anchors[nxt][1]):
            out.append(f"{ind}if _ph >= 0:\n{ind}    {sw}\n{ind}else:\n{ind}    _t0 = _start(ticks, {lv})")
            out.append(f"{ind}_ph = {base + nxt}")
            nxt += 1
        out.append(ln)
    if last_ret < 0:
        out.append(f"    if _ph >= 0:\n        {sw}")
    if nxt < len(anchors):
        sys.exit(f"no anchor for: {[a[0] for a in anchors[nxt:]]}")
    return out


def build(kmod, coarse=False):
    """The instrumented ``sada_run_P(..., ticks)`` and the bucket names."""
    names = [p[0] for p in TOP] + [p[0] for p in EIG] + [c[1] for c in CALLS]
    nb = len(names)
    ns = dict(vars(kmod))
    ns.update(_tsc=_tsc, _thr=_thr, _start=_start, _sw=_sw, np=np, T_NTSC=T_NTSC, T_NTHR=T_NTHR,
              T_SPAN=T_SPAN, T_DEPTH=T_DEPTH, T_THRESH=T_THRESH, T_PEND=T_PEND, T_CTHR=T_CTHR, T_CTSC=T_CTSC)
    srcs = {}
    # the functions to copy: sada_run and every caller listed in CALLS
    copied = {"sada_run", "_sa_eig_update"} | {f for c in CALLS for f in c[2]}
    for f in copied:
        lines = _source(getattr(kmod, f))
        lines[0] = lines[0].replace(f"def {f}(", f"def {f}_P(", 1)
        lines[0] = lines[0].rstrip()[:-2] + ", ticks):"
        srcs[f] = lines
    # phase anchors: sada_run (outer, buckets 0..), _sa_eig_update (its own boundaries: a saved _ph)
    srcs["sada_run"] = _with_phases(srcs["sada_run"], TOP, 0, nb, 0)
    eig = _with_phases(srcs["_sa_eig_update"], EIG, len(TOP), nb, 1)
    srcs["_sa_eig_update"] = eig
    texts = {f: "\n".join(v) for f, v in srcs.items()}
    texts["sada_run"] = _rewrite_calls(texts["sada_run"], "_sa_eig_update").replace("_sa_eig_update_T(", "_sa_eig_update_P(")
    for i, (fn, _bucket, callers, clock) in enumerate(CALLS):
        b = len(TOP) + len(EIG) + i
        if coarse and clock == "tsc":
            continue  # --coarse: no timer around the per-feature calls (their bucket stays empty)
        for c in callers:
            texts[c] = _rewrite_calls(texts[c], fn)
        target = f"{fn}_P" if fn in copied else fn
        ps = ", ".join(inspect.signature(getattr(kmod, fn).py_func).parameters)
        args = ps + (", ticks" if fn in copied else "")
        texts[fn + "_T"] = (TSC_WRAP if clock == "tsc" else THR_WRAP).format(fn=fn, ps=ps, target=target, args=args,
                                                                             nb=nb, b=b)
    # each instrumented function keeps its own running phase and read count (_ph, _nl): a caller's phase
    # includes its callees' time and reads
    order = ["_sa_eig_update"] + [f for f in texts if f != "_sa_eig_update" and f != "sada_run"] + ["sada_run"]
    for f in order:
        exec(texts[f], ns)
    for f in order:
        key = f if f.endswith("_T") else f + "_P"
        ns[key] = njit(nogil=True)(ns[key])
    return ns["sada_run_P"], names, nb, texts


def stream(name, n=2000, seed=0):
    """``uD``: the cost part's uniform stream over d = D (``seed`` 0: the benchmark's; 1: fresh data);
    ``mnist``: mnist_test10k's first 2,000 rows (seed 1: the rows after them), digit 0 (file label 1)
    against the rest, a constant feature, random 32-bit hashes; ``mnistpos``: the same rows with every
    label +1 (``read_libsvm``'s label > 0 on the file's labels 1..10); ``news20b``: news20_binary's
    training rows (real text, s ~ 147): the first ``n`` (seed 1: the rows after them)."""
    if name.startswith("u"):
        return sparse_stream(n, int(name[1:]), 149, seed)
    if name == "news20b":
        b = read_batch(DATASETS / "news20/news20_binary_train.vw.gz")
        return b.slice(0, min(n, b.n)) if seed == 0 else b.slice(min(2000, b.n), min(2000 + n, b.n))
    path = DATASETS / "mnist_test10k/mnist_test10k.libsvm.gz"
    X, y = read_libsvm(str(path))
    if name == "mnist":
        with gzip.open(path, "rt") as f:
            raw = np.array([float(ln.split(None, 1)[0]) for ln in f if ln.strip()])
        y = np.where(raw > 1, 1.0, -1.0)  # digits 1..9 (labels 2..10) against digit 0 (label 1)
    rows = slice(0, n) if seed == 0 else slice(2000, min(2000 + n, X.shape[0]))
    h = np.random.default_rng(0).integers(0, 2**32, X.shape[1], dtype=np.uint64).astype(np.uint32)
    return Batch.from_dense(X[rows], y[rows], hashes=h)


def ada():
    return make_learner("adagrad", {"loss_function": "logistic", "adaptive": True, "learning_rate": 0.5,
                                    "bit_precision": 18})


def sketched(algo, tau):
    return make_learner(algo, {"loss_function": "logistic", "learning_rate": 0.5, "bit_precision": 18,
                               "sketch_size": tau, "delta": 1e-6})


def ada_update_fraction(batch):
    """The fraction of a pass (after 6) on which AdaGrad updates: float32 1 + e^-yp > 1, p clipped to
    the label range (``_adagrad_kernels._updates``)."""
    L = ada()
    for _ in range(6):
        L.learn_batch(batch)
    return update_fraction(L.learn_batch(batch)[0], batch.labels)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", default="u100000,u10000,u1000,u200,mnist,mnistpos")
    ap.add_argument("--algo", default="ftfsl", choices=["ftfsl", "ftsl", "s-ada", "fast-s-ada"])
    ap.add_argument("--tau", type=int, default=10)
    ap.add_argument("--preempt_us", type=float, default=150.0,
                    help="a cycle-counter interval longer than this is a preemption: dropped")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--fresh_n", type=int, default=10_000, help="examples of the fresh one-pass rows (0: none)")
    ap.add_argument("--coarse", action="store_true",
                    help="no timers around the per-feature catch-up calls (to see what they cost)")
    ap.add_argument("--show_source", action="store_true", help="print the instrumented sada_run and exit")
    a = ap.parse_args()

    import streamlearn.algos._sketched_adagrad_kernels as km
    import streamlearn.algos.sketched_adagrad as sa
    t_c = time.process_time()
    prof, names, nb, texts = build(km, a.coarse)
    if a.show_source:
        for f, t in texts.items():
            print(t, "\n")
        return
    ticks = np.zeros(6 * nb + N_TAIL, np.int64)
    # the clocks: the cycle counter's rate (cycles per ns) and each read's cost
    _read_loop(ticks, 10, False)
    _read_loop(ticks, 10, True)
    read_tsc()
    p0, c0 = time.perf_counter(), read_tsc()
    time.sleep(0.2)
    p1, c1 = time.perf_counter(), read_tsc()
    rate = (c1 - c0) / ((p1 - p0) * 1e9)
    c_tsc = min(_read_loop(ticks, 200_000, False) / 200_000 for _ in range(5))  # cycles per read
    c_thr = min(_read_loop(ticks, 20_000, True) / 20_000 for _ in range(5))  # ns per read
    thr_bucket = np.array([False] * (len(TOP) + len(EIG)) + [c[3] == "thr" for c in CALLS])

    class Kern:
        def __getattr__(self, name):
            return getattr(km, name)

        @staticmethod
        def sada_run(*args):
            return prof(*args, ticks)

    print(f"# {a.algo} tau={a.tau}; cycle counter {rate:.3f} cycles/ns, {c_tsc / rate:.1f} ns a read; thread clock "
          f"{c_thr:.0f} ns a read (both subtracted); preemption threshold {a.preempt_us:.0f} us", flush=True)
    summary = []
    for sname in a.streams.split(","):
        batch = stream(sname)
        s = batch.nnz / batch.n
        load0 = os.getloadavg()[0]
        # interleaved: AdaGrad, the learner, the profile, the learner again
        t_ada, _ = timed(ada, batch)
        t_l, L = timed(lambda: sketched(a.algo, a.tau), batch)
        upd = ada_update_fraction(batch)
        # the profiled learner: the same passes as timed's (one untimed), then --passes profiled
        ref = sketched(a.algo, a.tau)
        P = sketched(a.algo, a.tau)
        orig = sa._kernels
        ref.learn_batch(batch)
        sa._kernels = Kern()
        try:
            P.learn_batch(batch)
            ticks[:] = 0
            ticks[T_THRESH] = int(a.preempt_us * 1e3 * rate)
            ticks[T_CTHR] = int(1000 * c_thr)
            ticks[T_CTSC] = int(1000 * c_tsc / rate)
            thr = 0.0
            for _ in range(a.passes):
                sa._kernels = orig
                pr, _ = ref.learn_batch(batch)
                sa._kernels = Kern()
                t0 = time.thread_time()
                pp, _ = P.learn_batch(batch)
                thr += time.thread_time() - t0
                if not np.array_equal(pr, pp):
                    sys.exit(f"{sname}: the instrumented kernel's predictions differ from the learner's")
        finally:
            sa._kernels = orig
        t_l2, _ = timed(lambda: sketched(a.algo, a.tau), batch)
        t_l = min(t_l, t_l2)
        t_ada2, _ = timed(ada, batch)
        t_ada = min(t_ada, t_ada2)
        load1 = os.getloadavg()[0]
        nex = a.passes * batch.n
        us = {}
        cnt = {}
        drop = {}
        for j, nm in enumerate(names):
            calls = ticks[nb + j]
            kept = calls - ticks[4 * nb + j]
            if thr_bucket[j]:
                ns_ = ticks[j] - c_thr * ticks[3 * nb + j] - c_tsc / rate * ticks[2 * nb + j]
            else:
                ns_ = (ticks[j] - c_tsc * ticks[2 * nb + j]) / rate - c_thr * ticks[3 * nb + j]
            ns_ = max(ns_, 0.0) * (calls / kept if kept > 0 else 0.0) + ticks[5 * nb + j] / 1000

            us[nm] = ns_ / 1e3 / nex
            cnt[nm] = calls / nex
            drop[nm] = ticks[4 * nb + j] / max(calls, 1)
        tot = sum(us[p[0]] for p in TOP)
        fresh = ""
        if a.fresh_n:
            fb = stream(sname, a.fresh_n, seed=1)  # mnist: rows 2,000.. (at most 8,000)
            (f_ada, _, pa), (f_l, fl, _) = one_pass([ada, lambda: sketched(a.algo, a.tau)], fb)
            f_upd = update_fraction(pa, fb.labels)
            fresh = (f_ada, f_l, fl.n_rebase, fl.n_fold, f_upd, fb.n)
        print(f"\n## stream {sname}: s = {s:.1f}, load {load0:.2f} -> {load1:.2f}")
        print(f"adagrad --adaptive (timed, best of 5): {t_ada:.2f} us/ex; it updates on {100 * upd:.0f}% of a pass")
        print(f"{a.algo} (timed, best of 5): {t_l:.2f} us/ex = {t_l / t_ada:.1f}x; re-bases {L.n_rebase} / folds "
              f"{L.n_fold} / flushes {L.n_flush} over its 6 passes")
        print(f"profiled passes: thread CPU {1e6 * thr / nex:.2f} us/ex (timers included), phases' sum {tot:.2f} "
              f"us/ex (timers' cost taken off, preemptions dropped)")
        print(f"{'phase':40s} {'us/ex':>7s} {'share':>6s} {'calls/ex':>9s} {'dropped':>8s}  clock")
        for j, nm in enumerate(names):
            if j == len(TOP):
                print("  of which (inclusive, inside the phases above):")
            print(f"{'  ' if j >= len(TOP) else ''}{nm:40s} {us[nm]:7.3f} {100 * us[nm] / tot:5.1f}% {cnt[nm]:9.3f} "
                  f"{100 * drop[nm]:7.2f}%  {'thread' if thr_bucket[j] else 'cycles'}")
        if fresh:
            print(f"fresh one pass over {fresh[5]} new examples (best of 3): adagrad {fresh[0]:.2f} us/ex (updates on "
                  f"{100 * fresh[4]:.0f}%), {a.algo} {fresh[1]:.2f} us/ex = {fresh[1] / fresh[0]:.1f}x (re-bases {fresh[2]} / "
                  f"folds {fresh[3]})")
        summary.append((sname, s, t_ada, t_l, us, tot, fresh, load1))
    ceiling(summary, a)


def ceiling(summary, a):
    """Per stream: the learner's time; minus every phase that exists only because of re-bases; minus also
    the per-round eigen work beyond O(tau^2) (U <- U W); as ratios to AdaGrad's time. The profile's
    shares are applied to the timed figure (and, for the fresh rows, to the fresh pass's time)."""
    print(f"\n## ceiling ({a.algo} tau={a.tau}; each phase's share of the profile applied to the measured us/ex)")
    cols = ("stream", "ref", "ada us", "learner", "ratio", "re-base", "no re-b.", "ratio", "U W", "+ no UW", "ratio",
            "15x us", "short", "eigen", "rest")
    print("{:8s} {:6s} {:>7s} {:>8s} {:>6s} {:>8s} {:>8s} {:>6s} {:>6s} {:>8s} {:>6s} {:>7s} {:>7s} {:>6s} {:>6s}".format(*cols))
    for sname, s, t_ada, t_l, us, tot, fresh, load in summary:
        refs = [("timed", t_ada, t_l)] + ([("fresh", fresh[0], fresh[1])] if fresh else [])
        for ref, ta, tl in refs:
            f = tl / tot  # the instrumented copy's phases, scaled to the measured time
            reb = (us["catch-up: stale feature read"] + us["catch-up after the shrink"] + us["re-base (incl. flush)"]) * f
            uw = us["U <- U W (rotation)"] * f
            eig = us["eigen: M += cc^T, _sa_eig_update"] * f - uw
            nr = tl - reb
            nr2 = nr - uw
            need = 15 * ta
            short = nr2 - need
            print(f"{sname:8s} {ref:6s} {ta:7.2f} {tl:8.2f} {tl / ta:5.1f}x {reb:8.2f} {nr:8.2f} {nr / ta:5.1f}x {uw:6.2f} "
                  f"{nr2:8.2f} {nr2 / ta:5.1f}x {need:7.2f} {short:7.2f} {eig:6.2f} {nr2 - eig:6.2f}")
    print("(us/ex. ref: AdaGrad and the learner timed as benchmarks/sketched_adagrad.py --part cost (best of 5 passes "
          "over the same 2,000 examples after one), or one pass of fresh learners over new examples; re-base: stale "
          "catch-up reads + catch-up after a shrink + re-bases with their flushes; no re-b.: the learner without them; "
          "U W: the eigen update's O(r^3) rotation of U; '+ no UW': without it too; 15x us: 15 x AdaGrad; short: what "
          "'+ no UW' exceeds it by (negative: met); eigen: the rest of the eigen phase (M, t, the secular solve); rest: "
          "everything else of '+ no UW' (look-up, gather, prediction, folds, basis growth, step))")


if __name__ == "__main__":
    main()
