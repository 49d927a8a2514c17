"""Why BEAR ~ MISSION on real text: the oLBFGS direction and the sketchability of the weights.

Three measurements on a binary data set of bear_real.py (rows L2-normalised as there):

1. **Direction** (``--what direction``). BEAR is trained on the first part of the training file
   at the given sketch size; then, for the next ``--minibatches`` minibatches, the kernel's own
   helpers compute the minibatch gradient ``g`` on the active set (effective top-k weights, as
   Alg. 2 line 3-4) and the two-loop direction ``z`` (Alg. 1) from the learner's ring, before
   the minibatch is learned. Printed (median [10%, 90%]): cos(z, g); the two-loop's scaling
   gamma = s.r / r.r of the newest pair; the gain |z| / |g| on the active members of the
   top-k and off it; the share of |z|^2 on the top-k; cos^2(s, r) of the newest stored pair
   (1 means the pair carries no curvature information beyond a scalar: then z = gamma g);
   and the same for the *raw* pair r - delta s (the curvature the loss has along s, without
   ``--curvature_damping``). BEAR's advantage in Fig. 1 is a large top-k gain relative to the
   off-top-k gain (NOTES_BEAR item 3); with cos^2(s, r) ~ 1 both gains equal gamma and BEAR is
   MISSION with step eta * gamma.
2. **Energy** (``--what energy``). BEAR and MISSION are trained with a 5 x p sketch (nearly no
   collisions) and every training feature is QUERYed: the share of ||w||^2 on the heap's
   members, the k-th largest |w| and the l2 norm of the non-members' weights ("tail"). A
   sketch of width W adds noise of about tail / sqrt(W) to every QUERY, so the k-th member
   stays recoverable while W >> W* = (tail / |w|_(k))^2, i.e. CF << CF* = p / (5 W*). The
   weight vector, not the optimiser, sets CF*: two learners with the same W* lose accuracy
   at the same CF.
3. **Share** (``--what share``): the share of each row's |x|^2 on the heap's features, against
   Fig. 1's design.

Findings (news20_binary, top_k 1000, rows L2-normalised; commit of this script):

* b=10, step 3, damping 0.1 (bear_real's tuned choice at CF 1-10), CF 10: cos(z, g) = 0.999,
  gamma = 9.6 ~ 1/delta, gain |z|/|g| 9.2 on the top-k vs 9.4 off it, cos^2(s, r) = 0.994.
  The raw curvature along s is s.r/s.s = 0.0035, 30x below delta: the damping *is* the pair,
  the two-loop returns ~ g / delta and BEAR is MISSION at step eta/delta = 30 (MISSION's tuned
  step is 30). The raw pair would be anisotropic (cos^2 = 0.17, raw gamma 44 vs 1/0.0035).
  Same on rcv1 (step 10, delta 0.01: cos(z, g) = 1.000, gamma 82).
* Undamped (Alg. 2 as printed), b=10 diverges on both data sets (saturated logistic on
  separable text: curvature along s 1e-14 .. 1e-49, gamma 1e11 .. 1e47). At b=100 (step 0.3,
  constant) it is stable for one pass and has BEAR's mechanism: cos(z, g) = 0.28, gain 662 on
  the top-k vs 259 off it, 83% of |z|^2 on the top-k (6% of A_t) -- and still loses *more*
  accuracy with CF than MISSION (bear_real --minibatch 100: -3.2 vs -0.8 points at CF 10).
* Energy (CF ~1): every learner at a comparable loss has the same W* ~ 1400-1800 cells per
  row (CF* ~ 14-18): BEAR 3/0.1 1718, BEAR 1/0.01 1816, MISSION 30 1757, MISSION 10 1489
  (b=10); BEAR 0.3/0 (undamped) 1426 with 96% of ||w||^2 on the heap vs MISSION 30 1384 with
  88% (b=100). BEAR concentrates energy on the first members, not on the k-th one: the tail
  that the sketch must absorb is the rare words' weights, which keep receiving gradient because
  predictions use only the top-k, and no optimiser changes that.
* Fig. 1's design for comparison (``--dataset fig1``: b=10, step 0.1, undamped, top_k 8, CF 3):
  gamma = 0.005 (= b / (2 (p + b)), NOTES_BEAR item 3), gain 0.46 on the top-k vs 0.052 off it
  (x9), 43% of |z|^2 on the top-k (0.8% of A_t). On news20_binary, b=100, step 0.1, undamped,
  CF 1: gain 410 vs 124 (x3.3, top_k 1000) and 523 vs 133 (x3.9, top_k 100), 89-92% of |z|^2
  on the top-k (13% / 1.6% of A_t): the mechanism is there at a third of Fig. 1's contrast,
  yet a 3-seed grid (b=100, top_k 100, 3 passes, steps 0.1-100 x damping 0/0.001/0.01, each
  learner at its best mean test accuracy) shows no separation: CF 30 BEAR -2.5 vs MISSION -3.8
  points, CF 100 -7.5 vs -7.8 (MISSION's CF-100 row stopped at step 10).
* Share (``--what share``): the heap's features carry 56% of a news20_binary row's |x|^2 at
  top_k 1000 (19% at top_k 100), 15% / 3% on rcv1_small (10 passes), against 0.8% for Fig. 1's
  8 true features of 1000 Gaussian ones. The less of each row the top-k carries, the more r
  spreads off the top-k and the smaller gamma is against the step along s.

Run: python benchmarks/bear_diagnose.py --what direction --minibatch 10 --lr 3 --damping 0.1
     python benchmarks/bear_diagnose.py --what direction --dataset fig1 --top_k 8 --cf 3 \
         --lr 0.1 --damping 0 --minibatches 40
     python benchmarks/bear_diagnose.py --what energy --bear 3:0.1,0.3:0.01 --mission 30,10
     python benchmarks/bear_diagnose.py --what share [--dataset rcv1 --passes 10]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import bear_real as br  # noqa: E402
from streamlearn.algos.bear import Bear  # noqa: E402
from streamlearn.algos.mission import Mission  # noqa: E402
from streamlearn.batch import unit_norm_rows  # noqa: E402


def _sparse_sub(ak, av, bk, bv, c):
    """Entries of ``a - c b`` (sparse vectors given as keys + values)."""
    d = {}
    for k, v in zip(ak.tolist(), av.tolist()):
        d[k] = d.get(k, 0.0) + v
    for k, v in zip(bk.tolist(), bv.tolist()):
        d[k] = d.get(k, 0.0) - c * v
    return np.array(list(d.values()), np.float64)


def direction(tr, a, extra):
    from streamlearn.algos import _bear_kernels as bk
    from streamlearn.algos import _sketch_kernels as sk
    # Load two_loop from numba's cache before bear_run: loaded after bear_run (whose cached
    # library links it), its array return failed with "NRT_adapt_ndarray_to_python: 'descr'
    # is NULL" (numba 0.68; the library itself calls two_loop only inside bear_update).
    z0, f0, l0 = np.zeros((1, 1), np.int64), np.zeros((1, 1)), np.zeros(1, np.int64)
    bk.two_loop(np.zeros(1), np.zeros(1, np.int64), z0, f0, l0, z0, f0, l0, np.ones(1),
                np.ones(1), 0, 0)
    p = len(np.unique(tr.indices))
    W = max(1, int(round(p / a.cf / 5)))
    L = Bear(sketch_rows=5, sketch_width=W, top_k=a.top_k, minibatch=a.minibatch,
             learning_rate=a.lr, loss_function=a.loss, curvature_damping=a.damping,
             **{"example_norm": "none", **extra})  # rows normalised (or not) here
    nq = min(a.minibatches, (tr.n // 2) // a.minibatch)
    start = ((tr.n - nq * a.minibatch) // a.minibatch) * a.minibatch
    with np.errstate(all="ignore"):
        L.learn_batch(tr.slice(0, start))
    rows = []
    for q in range(nq):
        m = tr.slice(start + q * a.minibatch, start + (q + 1) * a.minibatch)
        off = np.ascontiguousarray(m.offsets, np.int64)
        idx = np.ascontiguousarray(m.indices, np.uint32)
        val = np.ascontiguousarray(m.values, np.float64)
        mb = np.arange(m.n, dtype=np.int64)
        akeys, _, loc, abk, asg = sk.build_active(off, idx, mb, m.n, L.seeds, L.W)
        nA = len(akeys)
        beta = np.empty((1, nA))
        inh = np.empty((1, nA), np.bool_)
        sk.eff_weights(L.sketch, L.htbl, L.hkeys, akeys, abk, asg, beta, inh, np.empty(L.R), L.intercept,
                       sk.const_index(akeys, L.const_key))
        P = np.empty((m.n, 1))
        sk.mb_predict(off, val, mb, m.n, loc, beta, P)
        G = np.empty((1, nA))
        sk.mb_gradient(L.loss_code, off, val, np.ascontiguousarray(m.labels, np.float64),
                       np.ascontiguousarray(m.weights, np.float64), mb, m.n, loc, P, G, L.lrange)
        g = G.ravel()
        z = bk.two_loop(g, akeys.astype(np.int64), L.rs_keys, L.rs_vals, L.rs_len, L.rr_keys,
                        L.rr_vals, L.rr_len, L.ring_sr, L.ring_rr, L.counters[1], L.counters[2])
        if L.counters[2] > 0:
            sl = (L.counters[1] - 1) % L.tau
            sK, sV = L.rs_keys[sl, :L.rs_len[sl]], L.rs_vals[sl, :L.rs_len[sl]]
            rK, rV = L.rr_keys[sl, :L.rr_len[sl]], L.rr_vals[sl, :L.rr_len[sl]]
            ss = sV @ sV
            sr, rr = L.ring_sr[sl], L.ring_rr[sl]
            raw = _sparse_sub(rK, rV, sK, sV, L.damping)
            sr_raw = sr - L.damping * ss
            pair = (sr / rr, sr * sr / (ss * rr), sr_raw * sr_raw / (ss * (raw @ raw)),
                    sr_raw / ss, sr_raw / (raw @ raw))
        else:
            pair = (np.nan,) * 5
        im = inh.ravel()
        nz2 = z @ z
        rows.append((z @ g / np.sqrt(nz2 * (g @ g)),
                     pair[0],
                     np.linalg.norm(z[im]) / np.linalg.norm(g[im]) if im.any() and g[im].any() else np.nan,
                     np.linalg.norm(z[~im]) / np.linalg.norm(g[~im]) if g[~im].any() else np.nan,
                     (z[im] @ z[im]) / nz2, im.mean()) + pair[1:])
        with np.errstate(all="ignore"):
            L.learn_batch(m)
    r = np.array(rows)
    names = ["cos(z, g)", "gamma = s.r / r.r (newest pair)", "|z| / |g| on the top-k",
             "|z| / |g| off the top-k", "share of |z|^2 on the top-k",
             "share of A_t in the top-k", "cos^2(s, r) newest pair",
             "raw pair (r - delta s): cos^2(s, r)", "raw pair: s.r / s.s (curvature along s)",
             "raw pair: s.r / r.r"]
    print(f"\n### direction: b={a.minibatch}, step {a.lr:g}, damping {L.damping:g}, CF {a.cf:g} "
          f"(5 x {W}), {nq} minibatches after {start} rows; pairs rejected so far "
          f"{int(L.counters[3])} of {int(L.counters[0])}")
    print("| quantity | median | 10% | 90% |\n|---|---|---|---|")
    for j, nm in enumerate(names):
        col = r[:, j]
        col = col[np.isfinite(col)]
        if len(col):
            print(f"| {nm} | {np.median(col):.3g} | {np.quantile(col, .1):.3g} | "
                  f"{np.quantile(col, .9):.3g} |")


def energy(tr, te, a, extra):
    keys = np.unique(tr.indices)
    p = len(keys)
    print(f"\n### energy at CF ~1 (5 x {p} sketch), b={a.minibatch}, top_k={a.top_k}, "
          f"{a.passes} pass(es), extra {extra or '{}'}")
    print("| learner | train loss (last pass) | test acc (top-k) | ||w|| | share of ||w||^2 on the "
          "heap | |w|_(k) | tail l2 | W* = (tail/|w|_(k))^2 | CF* = p / (5 W*) |")
    print("|---|---|---|---|---|---|---|---|---|")
    runs = [(Bear, f"BEAR {lr:g}/{d:g}", lr, dict(curvature_damping=d, **extra))
            for lr, d in (map(float, x.split(":")) for x in a.bear.split(",") if x)]
    runs += [(Mission, f"MISSION {lr:g}", lr, dict(extra)) for lr in br.floats(a.mission)]
    for cls, nm, lr, ex in runs:
        L, pl, _ = br.fit(cls, tr, 0, p, a.top_k, lr, a.minibatch, a.passes, ex)
        w = L.query(keys, 0)
        inh = np.isin(keys, L.hkeys[0, :L.hsize[0]])
        e = w * w
        wk = np.sort(np.abs(w))[::-1][a.top_k - 1]
        tail = np.sqrt(e[~inh].sum())
        ws = (tail / wk) ** 2
        acc = br.accuracy(L.predict_batch(te)[0], te.labels, 0)
        print(f"| {nm} | {pl:.3f} | {acc:.4f} | {np.sqrt(e.sum()):.3g} | {e[inh].sum() / e.sum():.3f} | "
              f"{wk:.3g} | {tail:.3g} | {ws:.0f} | {p / (5 * ws):.1f} |", flush=True)


def row_share(b, members):
    """Per row of ``b``: the share of the row's squared norm on the features in ``members``."""
    rows = np.repeat(np.arange(b.n), np.diff(b.offsets))
    on = np.isin(b.indices, members)
    tot = np.bincount(rows, weights=b.values ** 2, minlength=b.n)
    top = np.bincount(rows, weights=b.values ** 2 * on, minlength=b.n)
    return top[tot > 0] / tot[tot > 0]


def share(tr, a, extra):
    """Share of each row's squared norm on the heap's features (row mean and median).

    BEAR's edge in Fig. 1 (NOTES_BEAR item 3) is that its pairs have s on the top-k while
    r = H s spreads over every feature the minibatch's rows touch, so gamma = s.r / r.r (the
    step off the top-k) is much smaller than the quasi-Newton step along s. That needs rows
    whose energy lies mostly off the top-k: 8 of 1000 Gaussian features carry 0.8% of a row in
    Fig. 1's design. The heap a learner selects on text (at CF ~1) carries far more;
    ``--what direction`` measures the resulting gains on and off the top-k.
    """
    from bear_fig1 import problem
    fb, beta, keys = problem(0)
    print("\n### share of |x|^2 on the top-k")
    print("| data | heap | top_k | share (mean) | share (median) |")
    print("|---|---|---|---|---|")
    sh = row_share(fb, keys[beta != 0])
    print(f"| Fig. 1 design (p=1000 Gaussian) | true support | 8 | {sh.mean():.4f} | "
          f"{np.median(sh):.4f} |")
    p = len(np.unique(tr.indices))
    for k in sorted({a.top_k, 100, 1000}):
        L, _, _ = br.fit(Mission, tr, 0, p, k, 30.0, a.minibatch, a.passes, dict(extra))
        sh = row_share(tr, L.hkeys[0, :L.hsize[0]])
        print(f"| {a.dataset} | MISSION step 30, CF ~1 | {k} | {sh.mean():.4f} | "
              f"{np.median(sh):.4f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--what", choices=("direction", "energy", "share"), default="direction")
    ap.add_argument("--dataset", choices=("news20_binary", "rcv1", "fig1"), default="news20_binary",
                    help="fig1: BEAR Fig. 1's design (bear_fig1.problem(0), squared loss; "
                         "direction only)")
    ap.add_argument("--minibatch", type=int, default=10)
    ap.add_argument("--top_k", type=int, default=1000)
    ap.add_argument("--cf", type=float, default=10, help="direction: compression factor")
    ap.add_argument("--lr", type=float, default=3, help="direction: BEAR step")
    ap.add_argument("--damping", type=float, default=0.1, help="direction: BEAR damping")
    ap.add_argument("--minibatches", type=int, default=100, help="direction: minibatches measured")
    ap.add_argument("--bear", default="3:0.1", help="energy: BEAR step:damping list")
    ap.add_argument("--mission", default="30", help="energy: MISSION step list")
    ap.add_argument("--passes", type=int, default=1, help="energy: passes")
    ap.add_argument("--t0", type=float, default=0,
                    help="step schedule eta t0 / (t0 + t) with this t0 (0: constant step)")
    a = ap.parse_args()
    a.loss = "logistic"
    if a.dataset == "fig1":
        from bear_fig1 import problem
        tr, a.loss = problem(0)[0], "squared"
    else:
        tr = unit_norm_rows(br.load(br.DATA[a.dataset][0], names=True))
    extra = dict(step_schedule="inverse", t0=a.t0) if a.t0 else {}
    if a.what == "direction":
        direction(tr, a, extra)
    elif a.what == "share":
        share(tr, a, extra)
    else:
        energy(tr, unit_norm_rows(br.load(br.DATA[a.dataset][1])), a, extra)


if __name__ == "__main__":
    main()
