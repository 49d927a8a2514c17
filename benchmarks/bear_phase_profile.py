#!/usr/bin/env python3
"""Where a BEAR run's learning time goes: a per-phase CPU profile of Alg. 2's iteration.

Runs ``streamlearn train ARGS --algo bear`` in this process with BEAR's iteration kernel
(:func:`streamlearn.algos._bear_kernels.bear_update`) replaced by an instrumented copy: its source
with a read of the thread's CPU clock (``clock_gettime(CLOCK_THREAD_CPUTIME_ID)``, ~1 us a read
here: ~0.1 s over news20) before each phase, summed per phase over the run; ``--tsc``: the CPU's
cycle counter instead (``llvm.readcyclecounter``: cheap, but wall time, inflated by other load).
The two-loop and the offers are split the same way (``NESTED``; parts of their caller's phase).
The copies are made from the tree's source at run time, so they follow edits; the anchors below
are the first lines of each phase (a missing anchor is an error). The model is the learner's own
(the copies compute the same thing: ``-f`` gives the same file). The run kernel is compiled here,
uncached (~20 s), so the process's CPU time and page faults printed at the end include the compile.

    python3 benchmarks/bear_phase_profile.py /work/shared/datasets/news20/news20_train.vw.gz \
        --oaa 20 --initial_scaling adagrad -l 1 --curvature_damping 0.1 --top_k 6000
"""
from __future__ import annotations

import inspect
import resource
import sys
import textwrap
import time
from collections import namedtuple

import numpy as np
from numba import njit

from _phase_clock import CLOCK_THREAD_CPUTIME_ID as _CLOCK_THREAD_CPUTIME_ID
from _phase_clock import clock_gettime as _clock_gettime, rdtsc as _rdtsc

#: (phase name, the stripped first line of the phase in bear_update's source)
PHASES = [
    ("active set + prefetch", "akeys, aocc, loc, abk, asg = _build_active("),
    ("membership masks", "mkeys, mmask, mcount = extra.mkeys"),
    ("line 3: eff. weights", "slot = np.empty((K, nA), np.int64)"),
    ("predict + gradient", "_mb_predict(offsets, values, mb, nmb, loc, beta0, P0)"),
    ("count-min A, D", "dvec = np.empty(D if hyper.h0 == 1 else 0, np.float64)"),
    ("two-loop", "z = np.empty(D, np.float64)"),
    ("line 6: ADD", "dl = np.empty(K, np.float64)"),
    ("lines 7,10: offers", "beta1 = np.empty((K, nA), np.float64)"),
    ("G1, s, r, damping", "P = np.empty((nmb, K), np.float64)"),
    ("ring push", "rs_keys, rs_vals, rr_keys, rr_vals, rs_code, rr_code, pfeat = _ring_push("),
]
#: phases inside the functions bear_update calls: (module attribute, the call's last argument in
#: bear_update, phases as above); their times are parts of the caller's phase
NESTED = [
    ("_two_loop", "hyper.gmax)", [
        ("  two-loop: union index", "tau = rs_keys.shape[0]"),
        ("  two-loop: q = g", "S = nU[0]"),
        ("  two-loop: first loop", "alpha = np.empty(count, np.float64)"),
        ("  two-loop: H0", "newest = head - 1"),
        ("  two-loop: second loop, z", "# second loop"),
    ]),
    ("_offer_active_map", "aconst, ev)", [
        ("  offers: query all", "V = np.empty((nA, K), np.float64)"),
        ("  offers: heaps", "nev = "),  # (nev = np.int64(0) since heap10; its first assignment)
    ]),
]


@njit(inline="always")
def _now(ts):
    """This thread's CPU time in ns (``ts[2]`` = 1), or the cycle counter (``ts[2]`` = 0)."""
    if ts[2] == 0:
        return _rdtsc()
    _clock_gettime(_CLOCK_THREAD_CPUTIME_ID, ts.ctypes)
    return ts[0] * 1000000000 + ts[1]


@njit(inline="always")
def _tick(ticks, i, t0):
    t = _now(ticks[-3:])
    ticks[i] += t - t0
    return t


def instrumented_source(src: str, name: str, anchors, base: int, tvar: str, param: bool) -> str:
    """``src`` (a function's source) renamed ``name + '_prof'``, with the clock read before each anchor's
    line and at the end (before a final ``return``): phase ``base + i`` sums the time from anchor ``i``
    to the next. ``tvar``: the expression of the sums' array; ``param``: add it as a last parameter."""
    lines = [ln for ln in textwrap.dedent(src).splitlines() if not ln.startswith("@")]
    if param:
        for i, ln in enumerate(lines):
            if ln.rstrip().endswith("):"):
                lines[i] = ln.rstrip()[:-2] + ", ticks):"
                break
    last = max(i for i, ln in enumerate(lines) if ln.startswith("    ") and not ln.startswith("     "))
    if not lines[last].strip().startswith("return"):
        last = len(lines)
    out = []
    nxt = 0
    for i, ln in enumerate(lines):
        ind = ln[:len(ln) - len(ln.lstrip())]
        if i == last:
            out.append(f"    _t0 = _tick({tvar}, {base + len(anchors) - 1}, _t0)")
        if nxt < len(anchors) and ln.strip().startswith(anchors[nxt][1]):
            if nxt == 0:
                out.append(f"{ind}_t0 = _now({tvar}[-3:])")
            else:
                out.append(f"{ind}_t0 = _tick({tvar}, {base + nxt - 1}, _t0)")
            nxt += 1
        out.append(ln)
    if last == len(lines):
        out.append(f"    _t0 = _tick({tvar}, {base + len(anchors) - 1}, _t0)")
    if nxt < len(anchors):
        sys.exit(f"{name}'s source has no anchor for: {[a[0] for a in anchors[nxt:]]}")
    return "\n".join(out).replace(f"def {name}(", f"def {name}_prof(", 1)


def main():
    import streamlearn.algos._bear_kernels as bk
    from streamlearn.algos import _sketch_kernels as sk
    from streamlearn.algos.bear import Bear

    ProfHyper = namedtuple("ProfHyper", bk.BearHyper._fields + ("ticks",))
    ns = dict(vars(sk))
    ns.update(vars(bk))
    ns.update(_rdtsc=_rdtsc, _tick=_tick, _now=_now)
    names = [p[0] for p in PHASES]
    src = instrumented_source(inspect.getsource(bk.bear_update.py_func), "bear_update", PHASES, 0, "hyper.ticks", False)
    for fname, last_arg, phases in NESTED:
        fsrc = instrumented_source(inspect.getsource(getattr(bk, fname).py_func), fname, phases,
                                   len(names), "ticks", True)
        exec(fsrc, ns)
        ns[fname + "_prof"] = njit(nogil=True)(ns[fname + "_prof"])
        assert src.count(f"{fname}(") == 1 and src.count(last_arg) == 1, fname
        src = src.replace(f"{fname}(", f"{fname}_prof(").replace(last_arg, last_arg[:-1] + ", hyper.ticks)")
        names += [p[0] for p in phases]
    exec(src, ns)
    sk.implements_update(ProfHyper)(njit(nogil=True)(ns["bear_update_prof"]))

    @njit(nogil=True)
    def prof_run(offsets, indices, values, labels, weights, spans, state, ring, hyper,
                 learn, flush, skip, pred_out, loss_out, pending_out, score_out):
        return sk.minibatch_run(offsets, indices, values, labels, weights, spans, state, ring, hyper,
                                learn, flush, skip, pred_out, loss_out, pending_out, score_out)

    tsc = "--tsc" in sys.argv
    if tsc:
        sys.argv.remove("--tsc")
    # the phases' sums, then the clock's scratch: timespec (2), the clock (1: thread CPU, 0: cycles)
    buf = np.zeros(len(names) + 3, np.int64)
    buf[-1] = 0 if tsc else 1
    ticks = buf[:len(names)]

    class Kern:
        def __getattr__(self, name):
            return getattr(bk, name)

        @staticmethod
        def bear_run(*args):
            return prof_run(*args)

    orig = Bear._hyper_tuple
    Bear._hyper_tuple = lambda self: ProfHyper(*orig(self), buf)
    Bear.kernels = Kern()

    import os
    os.environ["STREAMLEARN_SLOW_EXIT"] = "1"  # sys.exit, not os._exit: the table below is printed
    from streamlearn.cli import main as cli_main
    argv = sys.argv[1:]
    if "--algo" not in argv:
        argv = ["--algo", "bear"] + argv
    sys.argv = ["streamlearn", "train"] + argv + ["--quiet"]
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.process_time()
    try:
        cli_main()
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    t1 = time.process_time()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    tot = int(ticks[:len(PHASES)].sum())
    unit = "Gcycles" if tsc else "CPU s"
    print(f"{'phase':28s} {unit:>8s} {'share':>6s}")
    for name, t in zip(names, ticks):
        print(f"{name:28s} {t / 1e9:8.3f} {100 * t / max(tot, 1):5.1f}%")
    print(f"{'sum of phases':28s} {tot / 1e9:8.3f}")
    print(f"process CPU {t1 - t0:.2f} s (compile included); minor faults {r1.ru_minflt - r0.ru_minflt}, "
          f"major {r1.ru_majflt - r0.ru_majflt}")


if __name__ == "__main__":
    main()
