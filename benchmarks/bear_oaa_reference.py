#!/usr/bin/env python3
"""Why BEAR ``--oaa`` is far behind VW on 20 Newsgroups (issue 21): a full-memory reference.

A plain sparse NumPy version of BEAR Alg. 1-2 with ``--oaa K`` at the CLI's multiclass defaults
(softmax, unit-norm rows with the constant feature, one-example minibatches, history 5,
``--curvature_damping`` 0.01, step 0.1), *without* the Count Sketch and the top-k heap: every
weight is exact and in the model (a feature's weight is in the secant pair once it is non-zero,
as BEAR's same-set pair; the intercept always). It runs beside the same loop with other
initial matrices / step rules, one pass of progressive validation each:

* ``bear``: Alg. 1's H0 = gamma I, gamma = s.r / r.r of the newest pair;
* ``sgd``: no pairs, z = g (MISSION without the sketch);
* ``adagrad``: no pairs, z = g / sqrt(sum of g^2) per coordinate (MISSION ``--step_rule adagrad``);
* ``bear-adagrad``: H0 = min(1, s.r / r.D r) D, D AdaGrad's diagonal on the example's features
  (``--initial_scaling adagrad``), damping r + delta D^-1 s.

Printed per run: progressive error; pairs rejected; median [10%, 90%] of gamma, cos(z, g),
|z| / |g| and the raw curvature along s (s.r / s.s before damping). ``cos(z, g)`` ~ 1 means the
two-loop returned gamma g: the pairs, from single examples whose supports barely overlap, carry
no curvature beyond one scalar, and BEAR is SGD with the step eta * gamma set by the previous
example's curvature; one scalar cannot give rare words larger steps than frequent ones, which is
what AdaGrad (and VW) do.

    python3 benchmarks/bear_oaa_reference.py [--n 3000] [--runs "bear:0.1:0.01,sgd:3,adagrad:0.5"]

``--runs``: comma-separated ``rule:step[:damping]``. The reference costs about 1 ms per example
per oLBFGS run (NumPy), so a full news20 pass takes a minute.

``--check N``: no defect on the real data: the learner (``Bear``, defaults of ``--oaa``, top_k at
least the features, a 5 x 2^22 sketch: the medians are exact for the few thousand features of N
rows) against ``tests/naive_olbfgs.dense_olbfgs`` (dense Alg. 1-2, the intercept apart) on the
first N rows; prints the largest difference of the scores' argmax and of the weights.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from _common import DATASETS, need_shared, read_batch, table  # noqa: E402

from streamlearn.batch import CONSTANT_HASH  # noqa: E402


def load_rows(path, n):
    b = read_batch(path)
    n = b.n if not n else min(n, b.n)
    off, ind = b.offsets, b.indices.astype(np.int64)
    uniq, inv = np.unique(np.concatenate([ind[:off[n]], [CONSTANT_HASH]]), return_inverse=True)
    cidx, inv = int(inv[-1]), inv[:-1]
    rows = []
    for i in range(n):  # the reader adds the constant feature (value 1) to every row
        u, j = np.unique(inv[off[i]:off[i + 1]], return_inverse=True)
        v = np.bincount(j, weights=b.values[off[i]:off[i + 1]])
        rows.append((u, v / np.linalg.norm(v), int(b.labels[i]) - 1))
    return rows, len(uniq), cidx


def grad(ix, v, y, Wx):
    P = v @ Wx
    e = np.exp(P - P.max())
    pi = e / e.sum()
    pred = int(np.argmax(P))
    pi[y] -= 1
    return np.outer(v, pi), pred


def run(rows, p, K, cidx, rule, eta, damp, tau=5, eps=1e-8):
    W = np.zeros((p, K))
    A = np.zeros((p, K))
    Q = np.zeros((p, K))
    pairs = []  # oldest first: (idx, s, r, s.r, r.r, r.D r)
    errs = rej = 0
    st = []
    pairs_on = rule in ("bear", "bear-adagrad")
    for ix, v, y in rows:
        W0 = W[ix].copy()
        g, pred = grad(ix, v, y, W0)
        errs += pred != y
        D = None
        if rule in ("adagrad", "bear-adagrad"):
            A[ix] += g * g
            D = np.where(A[ix] > 0, 1 / np.sqrt(np.where(A[ix] > 0, A[ix], 1.0)), 0.0)
        gam = np.nan
        if not pairs_on or not pairs:
            z = g * D if D is not None else g.copy()
        else:
            Q[ix] = g
            alphas = []
            for jx, s, r, sr, _, _ in reversed(pairs):
                a = np.sum(s * Q[jx]) / sr
                alphas.append(a)
                Q[jx] -= a * r
            allx = np.unique(np.concatenate([ix] + [pp[0] for pp in pairs]))
            if D is None:
                gam = pairs[-1][3] / pairs[-1][4]
                Q[allx] *= gam
            else:  # gamma D on the example's features, 0 off them
                gam = min(1.0, pairs[-1][3] / pairs[-1][5])
                keep = Q[ix] * gam * D
                Q[allx] = 0.0
                Q[ix] = keep
            for (jx, s, r, sr, _, _), a in zip(pairs, reversed(alphas)):
                Q[jx] += s * (a - np.sum(r * Q[jx]) / sr)
            z = Q[ix].copy()
            Q[allx] = 0.0
        W[ix] = W0 - eta * z
        if not pairs_on:
            continue
        inmodel = W0 != 0
        inmodel[np.searchsorted(ix, cidx)] = True  # the intercept: always in the model
        s = np.where(inmodel, W[ix] - W0, 0.0)
        g1, _ = grad(ix, v, y, W0 + s)
        raw = g1 - g
        r = raw + (damp * np.where(D > 0, s / np.where(D > 0, D, 1.0), 0.0) if D is not None else damp * s)
        sr, ss, rr = np.sum(s * r), np.sum(s * s), np.sum(r * r)
        rdr = np.sum(r * r * D) if D is not None else rr
        if rr > 0 and sr > eps * np.sqrt(ss * rr) and rdr > 0 and np.isfinite(sr + rr + rdr):
            pairs.append((ix, s, r, sr, rr, rdr))
            if len(pairs) > tau:
                pairs.pop(0)
        else:
            rej += 1
        gn, zn = np.linalg.norm(g), np.linalg.norm(z)
        st.append((gam, np.sum(z * g) / (zn * gn), zn / gn, np.sum(s * raw) / ss if ss > 0 else np.nan))
    return errs / len(rows), rej, np.array(st) if st else None


def check(path, K, n):
    """The learner against the dense reference on the first ``n`` rows (see the docstring)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from naive_olbfgs import dense_olbfgs

    from streamlearn.algos.bear import Bear
    from streamlearn.batch import Batch

    b = read_batch(path)
    off = b.offsets
    keys = np.unique(b.indices[:off[n]])  # the constant feature included (the reader adds it)
    X = np.zeros((n, len(keys)))
    for i in range(n):
        np.add.at(X[i], np.searchsorted(keys, b.indices[off[i]:off[i + 1]]), b.values[off[i]:off[i + 1]])
    X /= np.linalg.norm(X, axis=1, keepdims=True)  # unit rows, the constant included (--example_norm auto)
    ic = int(np.searchsorted(keys, CONSTANT_HASH))
    y = b.labels[:n].astype(float)
    t = time.process_time()
    Bref, pref = dense_olbfgs(X, y, K, 3, 1, 0.1, 1, damping=0.01, intercept=ic)
    L = Bear(oaa=K, top_k=len(keys), sketch_width=1 << 22, example_norm="none", minibatch=1, learning_rate=0.1,
             curvature_damping=0.01)
    hashes = keys.astype(np.uint32)
    pred, _ = L.learn_batch(Batch.from_dense(X, y, hashes=hashes))
    L.finish()
    W = np.array([L.query(hashes, c) for c in range(K)])
    print(f"{n} rows of {path.name}, {len(keys)} features: predictions differ in {int(np.sum(pred != pref))}, "
          f"largest weight difference {np.abs(W - Bref).max():.2e} (largest weight {np.abs(Bref).max():.3g}); "
          f"{time.process_time() - t:.1f} CPU s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="news20/news20_train.vw.gz")
    ap.add_argument("--K", type=int, default=20)
    ap.add_argument("--n", type=int, default=0, help="first n rows (0: all)")
    ap.add_argument("--runs", default="bear:0.1:0.01,sgd:3,adagrad:0.5,bear-adagrad:0.5:0.1")
    ap.add_argument("--check", type=int, default=0, help="compare the learner with the dense reference on N rows")
    a = ap.parse_args()
    need_shared()
    if a.check:
        return check(DATASETS / a.data, a.K, a.check)
    rows, p, cidx = load_rows(DATASETS / a.data, a.n)
    load = os.getloadavg()
    out = []

    def q(x):
        x = x[np.isfinite(x)]
        return f"{np.median(x):.3g} [{np.quantile(x, .1):.3g}, {np.quantile(x, .9):.3g}]" if len(x) else "-"

    for spec in a.runs.split(","):
        parts = spec.split(":")
        rule, eta = parts[0], float(parts[1])
        damp = float(parts[2]) if len(parts) > 2 else 0.0
        t = time.process_time()
        err, rej, st = run(rows, p, a.K, cidx, rule, eta, damp)
        row = {"rule": rule, "step": eta, "damping": damp if rule.startswith("bear") else "",
               "error": f"{err:.4f}", "pairs rejected": rej if rule.startswith("bear") else ""}
        if st is not None:
            row.update({"gamma": q(st[:, 0]), "cos(z, g)": q(st[:, 1]), "|z|/|g|": q(st[:, 2]),
                        "raw s.r/s.s": q(st[:, 3])})
        row["CPU s"] = f"{time.process_time() - t:.1f}"
        out.append(row)
        print("  " + ", ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    print(f"\nFull-memory reference of BEAR --oaa {a.K} on {a.data}, {len(rows)} rows ({p} features), one pass, "
          f"b = 1, unit-norm rows; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (2 cores)")
    print(table(out, list(out[0])))


if __name__ == "__main__":
    main()
