"""Selection quality of BEAR and MISSION (issue 21): retrain on the selected features.

What a user of ``streamlearn select`` needs to know is how good a model the selected features
make. For each data set and k, every selection below is fed to the same plain learner -- AdaGrad
(VW's default rule, ``--retrain_passes`` passes, logistic loss; ``--oaa K`` for the 20 classes;
squared loss on the synthetic design) trained on the training rows restricted to the selected
columns plus the intercept -- and its test accuracy is reported:

* **BEAR** and **MISSION** (Aghazadeh et al., BEAR Alg. 2 and its first-order baseline) at
  compression factors CF 1 .. 300, the top k of their heaps (``top_features``: per class with
  ``--oaa``), mean and sd over ``--seeds`` sketch seeds;
* **oracle**: the top k of a full-memory AdaGrad (the same learner, one weight per distinct
  training feature, no hashing collisions; one-against-all per class for ``--oaa``) by
  |w_i| x RMS(x_i), the size of the feature's typical contribution to the score. By |w_i| alone
  (printed as "oracle, raw |w|") VW's normalized rule keeps w in the units of 1 / x, so a word
  seen once in a long document (tiny x) gets a large weight: on news20_binary that top 100 is
  all document-frequency-1 words and retrains to the base rate. Also printed: the top k by |w|
  of full-memory plain SGD (``--sgd``), the model BEAR and MISSION sketch;
* **chi2**: scikit-learn's ``SelectKBest(chi2)`` on the whole training matrix (a batch
  baseline; per class, class-vs-rest, for ``--oaa``; on the synthetic design, whose features are
  Gaussian and so not valid chi2 input, ``SelectKBest(f_regression)``);
* **random**: k features drawn uniformly from the training vocabulary (per class for ``--oaa``),
  one draw per seed.

Also reported: the recall of the oracle's top k (|S & O| / k, averaged over classes) and, on the
synthetic design, of the true support.

Data: ``news20_binary`` (comp.* vs the rest), ``rcv1`` (VW's rcv1_small: 1,000 training rows,
500 test), ``news20`` (20 Newsgroups, ``--oaa 20``), all VW text in ../shared/datasets with every
row scaled to unit L2 norm (``train --unit_norm``; README: give BEAR unit-norm rows), 5-row
sketches, minibatch 10, logistic loss (softmax for ``--oaa``); and ``synthetic``: BEAR Sec. 6
(``bear_fig1.problem``: p = 1000 Gaussian features, n = 900 rows, an 8-sparse beta*, y = X beta*,
squared loss, 3-row sketch, BEAR step 0.1 b = 10, MISSION step 0.01 b = 30, passes until the
pass loss is below 1e-12, at most 50), with 900 fresh test rows of the same beta*; there the
"accuracy" is the test R^2 of the retrained model (x 100 in the tables, 100 = exact) and the
trials are data seeds 1000.. (each its own sketch seed, as in ``bear_fig1.py``).

Compression factor: CF = distinct training features p / sketch cells, cells = rows x width
(x K classes for ``--oaa``, as ``bear_real.py``: each class's own sketch is then K x CF
compressed), so ``--sketch_width`` = round(p / (CF x rows x max(K, 1))); the tables print the
width used and the exact CF it gives. Under ``--oaa`` the per-class selections overlap by
different amounts, so the tables give each union's size: the oracle's per-class top k share many
frequent words (news20, k 100: 536 distinct features against chi2's 1,938), which makes it a weak
reference there. BEAR / MISSION keep the intercept outside their heaps (k members), and the
constant (bias) feature is dropped from every other selection, so each method selects k real
features (the intercept is always part of the retrained model). At k = 1000 the sketch has fewer cells
than the heap has members from CF ~120 on (news20).

Steps: BEAR (step x ``--curvature_damping``) and MISSION (step) are tuned on the **training**
progressive loss of the last pass with sketch seed 0, per (k, CF); the other seeds reuse the
chosen step. For ``news20`` (--oaa 20, ~20 s per run) the steps are tuned once at the first CF
and k, and reused; each grid holds the learner's own ``--oaa`` defaults (BEAR: AdaGrad's initial
scaling with damping 1; MISSION: AdaGrad steps, -l 0.6), which the earlier grids (damping 0.01;
MISSION steps 3-30, sgd-sized) missed once those defaults changed.

Targets checked per row (means over the seeds): BEAR >= MISSION (a cell below also gives the
paired t of the seeds' differences, seed s giving both learners the same sketch hashes, and says
"a tie" when the seeds cannot tell the difference from 0 at two-sided 5%; the run ends with one
line counting the cells below and the real differences among them); at CF <= 10 BEAR within 2
points of the oracle; BEAR well above random, taken as BEAR - random >= half of oracle - random.

``--diagnose DATASET`` (one cell: the first ``--ks``, ``--diagnose_cf``) looks for why BEAR
misses the oracle: BEAR and MISSION at CF 1, near collision-free (20 p cells), with every feature
in the heap, selecting by QUERYing the whole vocabulary instead of the heap, 5x the passes, the
step x 1/3 and x 3, minibatch 1 and 100; then "the sketch alone": a finished full-memory SGD
weight vector stored in a Count Sketch of each CF and its top k QUERYed back (no learning, no
heap: the best any Count-Sketch selector can do at that CF); then BEAR's picks against the
oracle's, feature by feature (document frequency, oracle rank, sign).

Run: python benchmarks/selection_quality.py [--datasets news20_binary,rcv1,news20,synthetic]
     [--ks 100,1000] [--cfs 1,3,10,30,100,300] [--seeds 3] [--quick] [--json out.json]
     [--cache DIR]
     python benchmarks/selection_quality.py --diagnose news20_binary --ks 100 --diagnose_cf 10
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bear_fig1 import problem as fig1_problem  # noqa: E402
from bear_real import DATA, load  # noqa: E402

from streamlearn.algos import make_learner  # noqa: E402
from streamlearn.algos.bear import Bear  # noqa: E402
from streamlearn.algos.mission import Mission  # noqa: E402
from streamlearn.batch import CONSTANT_HASH, Batch, unit_norm_rows  # noqa: E402

LEARNERS = {"BEAR": Bear, "MISSION": Mission}


# -- data: hashed batches and the same rows over dense column ids ---------------------------------
class Data:
    """Training / test rows twice: as the reader hashed them (for BEAR / MISSION) and over column
    ids 0..p-1 of the distinct training features, the intercept as column p (for AdaGrad, chi2)."""

    def __init__(self, name, tr, te, K, loss, regression=False):
        self.name, self.tr, self.te, self.K, self.loss = name, tr, te, K, loss
        self.regression = regression
        vocab = np.unique(tr.indices)
        self.vocab = vocab[vocab != CONSTANT_HASH]
        self.p = len(self.vocab)
        self.tr_cols = self._cols(tr)
        self.te_cols = self._cols(te)

    def _cols(self, b):
        """(offsets, column ids, values) of ``b`` over the training vocabulary; features not in
        it are dropped, the constant is column p."""
        pos = np.searchsorted(self.vocab, b.indices)
        pos_c = np.minimum(pos, self.p - 1)
        known = self.vocab[pos_c] == b.indices
        const = b.indices == CONSTANT_HASH
        col = np.where(const, self.p, pos_c)
        keep = known | const
        rows = np.repeat(np.arange(b.n), np.diff(b.offsets))[keep]
        offsets = np.zeros(b.n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=b.n), out=offsets[1:])
        return offsets, col[keep].astype(np.int64), b.values[keep]

    def col_of_hash(self, h):
        return np.searchsorted(self.vocab, np.asarray(h, np.uint32))

    def restricted(self, which, cols):
        """The rows of ``which`` ("tr"/"te") keeping only the columns ``cols`` (and the
        intercept), renumbered 0..len(cols) (intercept last): a Batch for AdaGrad."""
        b = self.tr if which == "tr" else self.te
        offsets, col, val = self.tr_cols if which == "tr" else self.te_cols
        cols = np.unique(np.asarray(cols, np.int64))
        new = np.full(self.p + 1, -1, np.int64)
        new[cols] = np.arange(len(cols))
        new[self.p] = len(cols)
        m = new[col]
        keep = m >= 0
        rows = np.repeat(np.arange(b.n), np.diff(offsets))[keep]
        off = np.zeros(b.n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=b.n), out=off[1:])
        return Batch(off, m[keep].astype(np.uint32), val[keep].copy(), b.labels.copy(),
                     b.weights.copy()), len(cols) + 1

    def csr(self):
        """scipy CSR of the training rows without the intercept (chi2)."""
        from scipy.sparse import csr_matrix
        offsets, col, val = self.tr_cols
        keep = col < self.p
        rows = np.repeat(np.arange(self.tr.n), np.diff(offsets))[keep]
        return csr_matrix((val[keep], (rows, col[keep])), shape=(self.tr.n, self.p))


def load_text(name):
    trp, tep, K = DATA[name]
    tr, te = unit_norm_rows(load(trp)), unit_norm_rows(load(tep))
    return Data(name, tr, te, K, "logistic")


def synthetic(seed, n_test=900):
    """BEAR Sec. 6's design (bear_fig1.problem) plus ``n_test`` fresh rows of the same beta*."""
    tr, beta, keys = fig1_problem(seed)
    rng = np.random.default_rng(seed + 10**6)
    Xt = rng.normal(size=(n_test, len(beta)))
    te = Batch.from_dense(Xt, Xt @ beta, hashes=keys)
    d = Data(f"synthetic seed {seed}", tr, te, 0, "squared", regression=True)
    d.truth = d.col_of_hash(keys[np.flatnonzero(beta)])
    return d


# -- the plain learner, retrained ------------------------------------------------------------------
def adagrad(d, trb, width, passes, sgd=False):
    bits = max(1, math.ceil(math.log2(width + 1)))
    hyper = {"loss_function": d.loss, "bit_precision": bits}
    if sgd:
        hyper["sgd"] = True
    if d.K:
        hyper.update(oaa=d.K, bit_precision=bits + math.ceil(math.log2(d.K)))
    L = make_learner("adagrad", hyper)
    with np.errstate(all="ignore"):
        for _ in range(passes):
            L.learn_batch(trb)
    return L


def score(d, pred):
    """Test accuracy (percent); on the synthetic design, R^2 x 100."""
    y = d.te.labels
    if d.regression:
        return 100 * (1 - float(np.mean((pred - y) ** 2)) / float(np.var(y)))
    if d.K:
        return 100 * float(np.mean(pred == y))
    return 100 * float(np.mean((pred > 0) == (y > 0)))


def retrain(d, sel, passes):
    """Test score of AdaGrad trained on the training rows restricted to ``sel`` (a list of column
    arrays, one per class; their union is used)."""
    cols = np.unique(np.concatenate(sel))
    trb, width = d.restricted("tr", cols)
    teb, _ = d.restricted("te", cols)
    teb.labels = np.full(teb.n, np.nan)
    L = adagrad(d, trb, width, passes)
    return score(d, L.predict_batch(teb)[0])


# -- the selections ---------------------------------------------------------------------------------
def oracle(d, k, passes, mode="rms"):
    """Top k of a full-memory AdaGrad (VW's default rule; per class, one-against-all, for
    --oaa) by |w_i| x RMS(x_i) over the training rows (``mode="rms"``, the oracle): the size of
    the feature's typical contribution to the score. ``mode="raw"``: by |w_i| alone, which under
    the normalized rule (w in the units of 1 / x) picks features seen once in a long document;
    ``mode="sgd"``: |w_i| of full-memory plain SGD (``--sgd``), the model BEAR / MISSION sketch."""
    trb, width = d.restricted("tr", np.arange(d.p))
    cols = np.arange(d.p, dtype=np.uint32)
    _, col, val = d.tr_cols
    rms = np.sqrt(np.bincount(col, weights=val * val, minlength=d.p + 1)[:d.p] / d.tr.n)
    out = []
    for c in range(1, d.K + 1) if d.K else [None]:
        b = trb
        if c is not None:
            b = trb.slice(0, trb.n)
            b.labels = np.where(trb.labels == c, 1.0, -1.0)
        dd = Data.__new__(Data)
        dd.K, dd.loss = 0, d.loss
        L = adagrad(dd, b, width, passes, sgd=mode == "sgd")
        w = np.abs(L.audit_columns(cols)[0])
        if mode == "rms":
            w = w * rms
        out.append(np.argsort(-w, kind="stable")[:k])
    return out


def chi2_select(d, k):
    from sklearn.feature_selection import SelectKBest, chi2, f_regression
    X = d.csr()
    if d.regression:
        s = SelectKBest(f_regression, k=k).fit(X.toarray(), d.tr.labels).scores_
        return [np.argsort(-np.nan_to_num(s, nan=-np.inf), kind="stable")[:k]]
    out = []
    for c in range(1, d.K + 1) if d.K else [None]:
        y = (d.tr.labels > 0) if c is None else (d.tr.labels == c)
        s = SelectKBest(chi2, k=k).fit(X, y.astype(int)).scores_
        out.append(np.argsort(-np.nan_to_num(s, nan=-np.inf), kind="stable")[:k])
    return out


def random_select(d, k, seed):
    rng = np.random.default_rng(10_000 + seed)
    return [rng.choice(d.p, k, replace=False) for _ in range(max(1, d.K))]


def sketch_fit(d, name, W, rows, k, lr, b, passes, extra, seed, stop=False):
    """Train BEAR / MISSION; returns (learner, last-pass progressive loss)."""
    L = LEARNERS[name](sketch_rows=rows, sketch_width=W, top_k=k,
                       minibatch=b, learning_rate=lr, oaa=d.K, loss_function=d.loss,
                       sketch_seed=seed, **{**({} if d.K else {"example_norm": "none"}), **extra})
    pl = np.inf
    with np.errstate(all="ignore"):
        for _ in range(passes):
            _, loss = L.learn_batch(d.tr)
            L.finish()
            pl = float(np.nanmean(loss))
            if not np.isfinite(pl) or (stop and pl < 1e-12):
                break
    return L, (pl if np.isfinite(pl) else np.inf)


def sketch_runs(d, a, nm, grid, chosen, k, cf, W, rows):
    """BEAR / MISSION at width W over the seeds: the step tuned on seed 0's training loss (once
    for --oaa: ``chosen``), each seed's selection (columns per class) and own test score. With
    ``--cache DIR`` the result is kept in DIR (a re-run only retrains)."""
    path = None
    if a.cache:
        os.makedirs(a.cache, exist_ok=True)
        path = os.path.join(a.cache, f"{d.name}_k{k}_cf{cf:g}_{nm}_s{a.seeds}_"
                            f"p{a.sketch_passes[d.name]}_b{a.minibatch}.json")
        if os.path.exists(path):
            with open(path) as f:
                r = json.load(f)
            chosen.setdefault((nm,), (r["step"], r["extra"]))
            r["sel"] = [[np.asarray(c, np.int64) for c in sel] for sel in r["sel"]]
            return r
    key = (nm,) if d.K else (nm, k, cf)
    first = None
    if key not in chosen:
        best = None
        for lr, x in grid:
            L, pl = sketch_fit(d, nm, W, rows, k, lr, a.minibatch, a.sketch_passes[d.name], x, 0)
            if best is None or pl < best[1]:
                best = (L, pl, lr, x)
        chosen[key] = best[2:]
        first = best[0]
    lr, x = chosen[key]
    r = {"step": lr, "extra": x, "sel": [], "own": []}
    for s in range(a.seeds):
        L = first if (s == 0 and first is not None) else sketch_fit(
            d, nm, W, rows, k, lr, a.minibatch, a.sketch_passes[d.name], x, s)[0]
        r["sel"].append(sketch_select(d, L, k))
        r["own"].append(score(d, L.predict_batch(d.te)[0]))
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump({**r, "sel": [[c.tolist() for c in sel] for sel in r["sel"]]}, f)
        os.replace(path + ".tmp", path)
    return r


def sketch_select(d, L, k):
    """Per class, the top k heap members by |QUERYed weight| without the constant, as columns."""
    cls, keys, w, _ = L.top_features()
    out = []
    for c in range(max(1, d.K)):
        kc = keys[(cls == c) & (keys != CONSTANT_HASH)][:k]  # sorted by |weight| already
        out.append(d.col_of_hash(kc))
    return out


def recall(sel, ref):
    return 100 * float(np.mean([len(np.intersect1d(s, r)) / max(1, len(r)) for s, r in zip(sel, ref)]))


# -- tables -----------------------------------------------------------------------------------------
def nunion(sel):
    return len(np.unique(np.concatenate(sel)))


def nf(r, d):
    """`` [n]``: the mean number of distinct features of a per-class (--oaa) selection."""
    return f" [{np.mean(r['features']):.0f}]" if d.K else ""


#: every BEAR >= MISSION cell of the run: (cell, mean paired difference, paired t or None, significant)
VERSUS = []


def versus(res, cell=""):
    """The BEAR >= MISSION cell: the mean over the seeds of BEAR's minus MISSION's score. The
    seeds are paired (seed s gives both learners the same sketch hashes and, on the synthetic
    design, the same data), so a difference below 0 is also given its paired t statistic; when
    |t| is under Student's two-sided 5% point with seeds - 1 degrees of freedom the seeds cannot
    tell it from 0, and the cell says "a tie". Each cell is also kept in ``VERSUS`` for the
    run's summary line."""
    b, m = np.asarray(res["BEAR"]["acc"], float), np.asarray(res["MISSION"]["acc"], float)
    diff = b - m
    mu = float(diff.mean())
    t = sig = None
    if len(diff) > 1:
        from scipy.stats import t as student

        sd = float(diff.std(ddof=1))
        t = mu / (sd / math.sqrt(len(diff))) if sd > 0 else (0.0 if mu == 0 else math.copysign(math.inf, mu))
        sig = abs(t) >= float(student.ppf(0.975, len(diff) - 1))
    VERSUS.append((cell, mu, t, sig))
    if mu >= 0:
        return f"ok ({mu:+.2f})"
    if t is None:
        return f"MISS ({mu:+.2f})"
    return f"MISS ({mu:+.2f}, paired t {t:+.1f}{'' if sig else ': a tie'})"


def versus_summary():
    """One line: how many cells have BEAR's mean below MISSION's, and which of them the paired
    seeds show to be a real difference."""
    below = [v for v in VERSUS if v[1] < 0]
    real = [v for v in below if v[3]]
    print(f"\nBEAR >= MISSION over the run: BEAR's mean below in {len(below)} of {len(VERSUS)} cells; "
          f"below by more than its paired seeds can tell from 0 (two-sided 5%) in {len(real)}"
          + (": " + "; ".join(f"{c} ({mu:+.2f}, t {t:+.1f})" for c, mu, t, _ in real) if real else ""))


def ms(v):
    v = np.asarray(v, float)
    return f"{v.mean():.1f} ±{v.std():.1f}" if len(v) > 1 else f"{v.mean():.1f}"


def text_dataset(name, a, out):
    t0 = time.time()
    d = load_text(name)
    rows = 5
    kc = max(1, d.K)
    print(f"\n## {name}: {d.tr.n} train / {d.te.n} test rows, p = {d.p} distinct training features"
          f"{f', --oaa {d.K}' if d.K else ''}, unit-norm rows, {rows}-row sketches, minibatch "
          f"{a.minibatch}, {a.sketch_passes[name]} pass(es) of BEAR / MISSION, retraining: AdaGrad "
          f"{a.retrain_passes} passes (load {os.getloadavg()[0]:.1f})", flush=True)
    full = retrain(d, [np.arange(d.p)], a.retrain_passes)
    print(f"All {d.p} features, AdaGrad {a.retrain_passes} passes: test accuracy {full:.1f}")
    grid_b = [(lr, {"curvature_damping": dm}) for lr in a.bear_steps for dm in a.dampings]
    grid_m = [(lr, {}) for lr in a.mission_steps]
    if d.K:
        grid_b = [(lr, {"curvature_damping": dm}) for lr in a.mc_bear_steps for dm in a.mc_dampings]
        grid_m = [(lr, {}) for lr in a.mc_mission_steps]
    chosen = {}
    for k in a.ks:
        orc = oracle(d, k, a.retrain_passes)
        base = {"oracle": [retrain(d, orc, a.retrain_passes)]}
        rec = {"oracle": [100.0]}
        size = {"oracle": [nunion(orc)]}
        for n, sel in (("oracle, raw |w|", oracle(d, k, a.retrain_passes, "raw")),
                       ("full-memory SGD |w|", oracle(d, k, a.retrain_passes, "sgd")),
                       ("chi2", chi2_select(d, k))):
            base[n] = [retrain(d, sel, a.retrain_passes)]
            rec[n] = [recall(sel, orc)]
            size[n] = [nunion(sel)]
        base["random"], rec["random"], size["random"] = [], [], []
        for s in range(a.seeds):
            rs = random_select(d, k, s)
            base["random"].append(retrain(d, rs, a.retrain_passes))
            rec["random"].append(recall(rs, orc))
            size["random"].append(nunion(rs))
        nsel = len(np.unique(np.concatenate(orc)))
        print(f"\n### {name}, k = {k}{' per class' if d.K else ''} ({nsel} distinct oracle features)"
              f"; retrained test accuracy (%), recall of the oracle's top k (%)"
              + ("; [n]: distinct features in the union of the classes' selections" if d.K else ""))
        print("| selection | retrained accuracy | oracle recall | distinct features |")
        print("|---|---|---|---|")
        print(f"| all features | {full:.1f} | | {d.p} |")
        for n in base:
            print(f"| {n} | {ms(base[n])} | {ms(rec[n])} | {np.mean(size[n]):.0f} |")
        o, r = np.mean(base["oracle"]), np.mean(base["random"])
        print("\n| CF (exact) | sketch | BEAR step/damping | MISSION step | BEAR retrained | MISSION "
              "retrained | BEAR own top-k model | MISSION own | BEAR recall | MISSION recall | "
              "BEAR >= MISSION | BEAR >= oracle - 2 (CF <= 10) | BEAR well above random |")
        print("|" + "---|" * 13, flush=True)
        res_k = {"k": k, "baselines": base, "recall": rec, "features": size, "all": full, "cfs": []}
        for cf in a.cfs:
            W = max(1, int(round(d.p / (cf * rows * kc))))
            cf_real = d.p / (rows * W * kc)
            res = {}
            for nm, grid in (("BEAR", grid_b), ("MISSION", grid_m)):
                runs = sketch_runs(d, a, nm, grid, chosen, k, cf, W, rows)
                acc, rc = [], []
                for sel in runs["sel"]:
                    acc.append(retrain(d, sel, a.retrain_passes))
                    rc.append(recall(sel, orc))
                res[nm] = {"step": runs["step"], "extra": runs["extra"], "acc": acc,
                           "own": runs["own"], "recall": rc,
                           "features": [nunion(sel) for sel in runs["sel"]]}
            b = np.mean(res["BEAR"]["acc"])
            t1 = versus(res, f"{d.name} k {k} CF {cf:g}")
            t2 = ("ok" if b >= o - 2 else f"MISS ({b - o:+.1f})") if cf <= 10 else "-"
            t3 = "ok" if b - r >= 0.5 * (o - r) else f"MISS ({b - r:+.1f} vs {0.5 * (o - r):.1f})"
            dmp = res["BEAR"]["extra"].get("curvature_damping")
            print(f"| {cf:g} ({cf_real:.3g}) | {rows} x {W}{f' x {kc}' if d.K else ''} | "
                  f"{res['BEAR']['step']:g}/{dmp:g} | {res['MISSION']['step']:g} | "
                  f"{ms(res['BEAR']['acc'])}{nf(res['BEAR'], d)} | {ms(res['MISSION']['acc'])}"
                  f"{nf(res['MISSION'], d)} | {ms(res['BEAR']['own'])} | "
                  f"{ms(res['MISSION']['own'])} | {ms(res['BEAR']['recall'])} | "
                  f"{ms(res['MISSION']['recall'])} | {t1} | {t2} | {t3} |", flush=True)
            res_k["cfs"].append({"cf": cf, "cf_exact": cf_real, "width": W, **res})
        out.setdefault(name, []).append(res_k)
    print(f"\n({name}: {time.time() - t0:.0f} s)")


def synthetic_dataset(a, out):
    t0 = time.time()
    k, rows, trials = 8, 3, list(range(1000, 1000 + a.synthetic_trials))
    print(f"\n## synthetic (BEAR Sec. 6): p = 1000, n = 900 train + 900 test, 8-sparse beta*, "
          f"k = {k}, {rows}-row sketch, BEAR step 0.1 b 10, MISSION step 0.01 b 30, <= 50 passes; "
          f"retraining: AdaGrad (squared loss) {a.retrain_passes} passes; score = test R^2 x 100; "
          f"{len(trials)} data seeds (sketch seed = data seed) (load {os.getloadavg()[0]:.1f})",
          flush=True)
    ds = [synthetic(s) for s in trials]
    base = {n: [] for n in ("all", "oracle", "f_regression", "random", "truth")}
    rec = {n: [] for n in base}
    truth_rec = {n: [] for n in base}
    orcs = []
    for s, d in zip(trials, ds):
        orc = oracle(d, k, a.retrain_passes)
        orcs.append(orc)
        sels = {"all": [np.arange(d.p)], "oracle": orc, "f_regression": chi2_select(d, k),
                "random": random_select(d, k, s), "truth": [d.truth]}
        for n, sel in sels.items():
            base[n].append(retrain(d, sel, a.retrain_passes))
            if n != "all":
                rec[n].append(recall(sel, orc))
                truth_rec[n].append(recall(sel, [d.truth]))
    print("| selection | retrained R^2 x 100 | oracle recall | true-support recall |")
    print("|---|---|---|---|")
    for n in base:
        print(f"| {n} | {ms(base[n])} | {ms(rec[n]) if rec[n] else ''} | "
              f"{ms(truth_rec[n]) if truth_rec[n] else ''} |")
    o, r = np.mean(base["oracle"]), np.mean(base["random"])
    print("\n| CF (exact) | sketch | BEAR retrained | MISSION retrained | BEAR recall (oracle / truth)"
          " | MISSION recall (oracle / truth) | BEAR success | MISSION success | BEAR >= MISSION | "
          "BEAR >= oracle - 2 (CF <= 10) | BEAR well above random |")
    print("|" + "---|" * 11, flush=True)
    res_all = {"oracle": base["oracle"], "random": base["random"], "f_regression": base["f_regression"],
               "truth": base["truth"], "cfs": []}
    for cf in a.synthetic_cfs:
        W = max(1, int(round(1000 / (cf * rows))))
        res = {}
        for nm, lr, b in (("BEAR", 0.1, 10), ("MISSION", 0.01, 30)):
            acc, rc, tr_ = [], [], []
            for s, d, orc in zip(trials, ds, orcs):
                L, _ = sketch_fit(d, nm, W, rows, k, lr, b, 50, {}, s, stop=True)
                sel = sketch_select(d, L, k)
                acc.append(retrain(d, sel, a.retrain_passes))
                rc.append(recall(sel, orc))
                tr_.append(recall(sel, [d.truth]))
            res[nm] = {"acc": acc, "recall": rc, "truth": tr_}
        b = np.mean(res["BEAR"]["acc"])
        t1 = versus(res, f"synthetic CF {cf:g}")
        t2 = ("ok" if b >= o - 2 else f"MISS ({b - o:+.1f})") if cf <= 10 else "-"
        t3 = "ok" if b - r >= 0.5 * (o - r) else f"MISS ({b - r:+.1f} vs {0.5 * (o - r):.1f})"
        succ = {n: np.mean([t == 100 for t in res[n]["truth"]]) for n in res}
        print(f"| {cf:g} ({1000 / (rows * W):.3g}) | {rows} x {W} | {ms(res['BEAR']['acc'])} | "
              f"{ms(res['MISSION']['acc'])} | {ms(res['BEAR']['recall'])} / {ms(res['BEAR']['truth'])} | "
              f"{ms(res['MISSION']['recall'])} / {ms(res['MISSION']['truth'])} | {succ['BEAR']:.2f} | "
              f"{succ['MISSION']:.2f} | {t1} | {t2} | {t3} |", flush=True)
        res_all["cfs"].append({"cf": cf, "width": W, **res})
    out["synthetic"] = res_all
    print(f"\n(synthetic: {time.time() - t0:.0f} s)")


# -- why BEAR misses the oracle on text (--diagnose) ---------------------------------------------
def diagnose(name, a):
    """Variants of BEAR / MISSION at one (k, CF) cell of ``name``, each over ``--seeds`` sketch
    seeds: what the selection loses to the sketch (CF 1, near collision-free), the heap (training
    with every feature in the heap; selecting by QUERYing the whole vocabulary instead of the
    heap), the step and passes, the minibatch. Then BEAR's selection against the oracle's,
    feature by feature (names, document frequency, oracle rank)."""
    trp, _, _ = DATA[name]
    d = load_text(name)
    k, cf, rows, kc = a.ks[0], a.diagnose_cf, 5, max(1, d.K)
    passes = a.sketch_passes[name]
    df = np.bincount(d.tr_cols[1], minlength=d.p + 1)[:d.p]
    orc = oracle(d, k, a.retrain_passes)
    o_acc = retrain(d, orc, a.retrain_passes)
    sgd = oracle(d, k, a.retrain_passes, "sgd")
    print(f"\n## diagnose {name}: k = {k}, CF {cf:g}, {a.seeds} sketch seeds; oracle retrained "
          f"{o_acc:.1f} (median df of its features {np.median(df[orc[0]]):.0f}); full-memory SGD "
          f"|w| {retrain(d, sgd, a.retrain_passes):.1f} (recall {recall(sgd, orc):.0f}) "
          f"(load {os.getloadavg()[0]:.1f})", flush=True)
    W = max(1, int(round(d.p / (cf * rows * kc))))
    W1 = max(1, int(round(d.p / (rows * kc))))
    Wfree = 4 * d.p  # 20 p cells: a feature's 5 estimates are mostly exact, the median exact
    chosen = {}
    steps = {}
    for nm, grid in (("BEAR", [(lr, {"curvature_damping": dm}) for lr in a.bear_steps
                               for dm in a.dampings]), ("MISSION", [(lr, {}) for lr in a.mission_steps])):
        r = sketch_runs(d, a, nm, grid, chosen, k, cf, W, rows)
        steps[nm] = (r["step"], r["extra"])
    print("| variant | retrained accuracy | oracle recall | own top-k model | median df of "
          "selected | last-pass train loss |")
    print("|---|---|---|---|---|---|")

    def row(label, nm, width, heap, lr, x, b=None, npass=None, select="heap"):
        acc, rc, own, mdf, pl = [], [], [], [], []
        for s in range(a.seeds):
            L, loss = sketch_fit(d, nm, width, rows, heap - 1, lr, b or a.minibatch,
                                 npass or passes, x, s)
            if select == "heap":
                sel = sketch_select(d, L, k)
            else:  # QUERY every training feature, top k by |weight|
                sel = []
                for c in range(kc):
                    w = np.abs(L.query(d.vocab, c))
                    sel.append(np.argsort(-w, kind="stable")[:k])
            acc.append(retrain(d, sel, a.retrain_passes))
            rc.append(recall(sel, orc))
            own.append(score(d, L.predict_batch(d.te)[0]))
            mdf.append(np.median(df[np.concatenate(sel)]))
            pl.append(loss)
        print(f"| {label} | {ms(acc)} | {ms(rc)} | {ms(own)} | {np.mean(mdf):.0f} | "
              f"{np.mean(pl):.4f} |", flush=True)
        return L

    for nm in ("BEAR", "MISSION"):
        lr, x = steps[nm]
        tag = f"{nm} (step {lr:g}" + (f", damping {x['curvature_damping']:g})" if x else ")")
        Lc = row(f"{tag}, CF {cf:g} (the table's cell)", nm, W, k + 1, lr, x)
        if nm == "BEAR":
            L_bear = Lc
        row(f"{nm}, CF {cf:g}, selection = top k of QUERY over all features (not the heap)",
            nm, W, k + 1, lr, x, select="query")
        row(f"{nm}, CF 1", nm, W1, k + 1, lr, x)
        row(f"{nm}, CF {d.p / (rows * Wfree * kc):.2g} (near collision-free)", nm, Wfree, k + 1, lr, x)
        row(f"{nm}, near collision-free, every feature in the heap (no top-k restriction)",
            nm, Wfree, d.p + 1, lr, x)
        row(f"{nm}, CF {cf:g}, 5 x the passes", nm, W, k + 1, lr, x, npass=5 * passes)
        for f in (1 / 3, 3):
            row(f"{nm}, CF {cf:g}, step x {f:.3g}", nm, W, k + 1, lr * f, x)
        for b in (1, 100):
            row(f"{nm}, CF {cf:g}, minibatch {b}", nm, W, k + 1, lr, x, b=b)
    if not d.K:
        sketch_limit(d, a, k, orc, rows)
    # feature by feature: BEAR's last seed at the table's cell against the oracle
    if d.K:
        return
    sel = sketch_select(d, L_bear, k)[0]
    names = load(trp, names=True)
    first = np.unique(names.indices, return_index=True)
    name_of = {}
    for h, e in zip(*first):
        name_of[int(h)] = names.feature_name(int(e)) or str(h)
    nm_col = lambda c: name_of.get(int(d.vocab[c]), "?")  # noqa: E731
    rank = np.empty(d.p, np.int64)
    trb, width = d.restricted("tr", np.arange(d.p))
    dd = Data.__new__(Data)
    dd.K, dd.loss = 0, d.loss
    Lo = adagrad(dd, trb, width, a.retrain_passes)
    _, col, val = d.tr_cols
    rms = np.sqrt(np.bincount(col, weights=val * val, minlength=d.p + 1)[:d.p] / d.tr.n)
    wo = Lo.audit_columns(np.arange(d.p, dtype=np.uint32))[0] * rms
    rank[np.argsort(-np.abs(wo), kind="stable")] = np.arange(d.p)
    wb = L_bear.query(d.vocab)
    both = np.intersect1d(sel, orc[0])
    bo, oo = np.setdiff1d(sel, orc[0]), np.setdiff1d(orc[0], sel)
    agree = np.mean(np.sign(wb[both]) == np.sign(wo[both])) if len(both) else float("nan")
    print(f"\nBEAR (last seed) vs oracle, k = {k}: {len(both)} shared; BEAR-only {len(bo)} "
          f"(median df {np.median(df[bo]) if len(bo) else 0:.0f}, median oracle rank "
          f"{np.median(rank[bo]) if len(bo) else 0:.0f}, sign agrees with the oracle on "
          f"{100 * np.mean(np.sign(wb[bo]) == np.sign(wo[bo])) if len(bo) else 0:.0f}%); oracle-only "
          f"{len(oo)} (median df {np.median(df[oo]) if len(oo) else 0:.0f}, median BEAR |QUERY| rank "
          f"{np.median(np.argsort(np.argsort(-np.abs(wb)))[oo]) if len(oo) else 0:.0f}); shared "
          f"features' signs agree {100 * agree:.0f}%")
    top_b = sel[np.argsort(-np.abs(wb[sel]))][:15]
    top_o = orc[0][:15]
    print("| # | BEAR's pick (df, oracle rank, sign) | oracle's pick (df, BEAR in top k?) |")
    print("|---|---|---|")
    for i, (cb, co) in enumerate(zip(top_b, top_o)):
        print(f"| {i + 1} | {nm_col(cb)} ({df[cb]}, {rank[cb]}, {'+' if wb[cb] > 0 else '-'}) | "
              f"{nm_col(co)} ({df[co]}, {'yes' if co in sel else 'no'}) |")


def sketch_limit(d, a, k, orc, rows):
    """The sketch alone: store a finished full-memory weight vector w (plain SGD, the units
    BEAR / MISSION sketch, ``--retrain_passes`` passes) in a ``rows`` x W Count Sketch with random
    hashes, QUERY every feature (median of the rows' signed cells) and take the top k of the
    estimates. No learning dynamics, no heap: what any Count-Sketch selector could at best get
    at that CF. Estimate noise: sigma = ||w|| / sqrt(W) per row (the other features in a cell)
    against the k-th largest |w_i|."""
    trb, width = d.restricted("tr", np.arange(d.p))
    dd = Data.__new__(Data)
    dd.K, dd.loss = 0, d.loss
    L = adagrad(dd, trb, width, a.retrain_passes, sgd=True)
    w = L.audit_columns(np.arange(d.p, dtype=np.uint32))[0]
    top = np.argsort(-np.abs(w), kind="stable")[:k]
    wk = np.abs(w[top[-1]])
    e = float(np.sum(w[top] ** 2) / np.sum(w ** 2))
    print(f"\n### the sketch alone (full-memory SGD weights stored in a {rows}-row Count Sketch; "
          f"its top k holds {100 * e:.1f}% of ||w||^2; {a.seeds} hash seeds)")
    print("| CF | sketch | sigma / |w|_(k) | recall of w's own top k | oracle recall | retrained accuracy |")
    print("|---|---|---|---|---|---|")
    for cf in (0.05, 1, 3, 10, 30, 100, 300):
        W = max(1, int(round(d.p / (cf * rows))))
        rc, ro, acc = [], [], []
        for s in range(a.seeds):
            rng = np.random.default_rng(500 + s)
            est = np.empty((rows, d.p))
            for r in range(rows):
                bkt = rng.integers(0, W, d.p)
                sg = rng.choice([-1.0, 1.0], d.p)
                cells = np.bincount(bkt, weights=sg * w, minlength=W)
                est[r] = sg * cells[bkt]
            sel = np.argsort(-np.abs(np.median(est, 0)), kind="stable")[:k]
            rc.append(recall([sel], [top]))
            ro.append(recall([sel], orc))
            acc.append(retrain(d, [sel], a.retrain_passes))
        print(f"| {cf:g} | {rows} x {W} | {np.linalg.norm(w) / math.sqrt(W) / wk:.2f} | {ms(rc)} | "
              f"{ms(ro)} | {ms(acc)} |", flush=True)


def floats(s):
    return [float(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="news20_binary,rcv1,news20,synthetic",
                    help="any of news20_binary, rcv1, news20 (--oaa 20), synthetic")
    ap.add_argument("--ks", default="100,1000", help="k for the text data sets (synthetic: 8)")
    ap.add_argument("--cfs", default="1,3,10,30,100,300", help="compression factors (text)")
    ap.add_argument("--news20_cfs", default="1,10,100",
                    help="compression factors for news20 --oaa 20 (each run takes ~20 s)")
    ap.add_argument("--synthetic_cfs", default="1,3,10,30,100,300")
    ap.add_argument("--seeds", type=int, default=3, help="sketch seeds (and random draws)")
    ap.add_argument("--synthetic_trials", type=int, default=10, help="data seeds of the synthetic design")
    ap.add_argument("--minibatch", type=int, default=10)
    ap.add_argument("--retrain_passes", type=int, default=5)
    ap.add_argument("--passes", default="news20_binary=1,rcv1=5,news20=1",
                    help="passes of BEAR / MISSION per data set")
    ap.add_argument("--bear_steps", default="0.1,0.3,1,3,10")
    ap.add_argument("--dampings", default="0.01,0.1")
    ap.add_argument("--mission_steps", default="1,3,10,30,100")
    ap.add_argument("--mc_bear_steps", default="0.3,1,3")
    ap.add_argument("--mc_mission_steps", default="0.2,0.6,2,6",
                    help="--oaa: MISSION's steps tried (its --oaa default: AdaGrad steps, -l 0.6)")
    ap.add_argument("--mc_dampings", default="0.01,1", help="--oaa: BEAR's curvature dampings tried (its --oaa "
                    "default: 1, with AdaGrad's initial scaling)")
    ap.add_argument("--quick", action="store_true",
                    help="rcv1 and synthetic only, k = 100, CF 1,10,100, 2 seeds, 3 synthetic "
                         "trials, smaller step grids (a few minutes)")
    ap.add_argument("--diagnose", default=None, metavar="DATASET",
                    help="instead of the tables: why BEAR misses the oracle at one cell (the first "
                         "--ks, --diagnose_cf), variant by variant, and BEAR's picks vs the oracle's")
    ap.add_argument("--diagnose_cf", type=float, default=10)
    ap.add_argument("--json", default=None, help="also write every number to this JSON file")
    ap.add_argument("--cache", default=None, help="keep each BEAR / MISSION cell's tuned step and "
                    "selections in this directory; a re-run with the same settings only retrains")
    a = ap.parse_args()
    if a.quick:
        a.datasets = "rcv1,synthetic" if a.datasets == ap.get_default("datasets") else a.datasets
        a.ks, a.cfs, a.news20_cfs, a.synthetic_cfs = "100", "1,10,100", "10", "1,10,100"
        a.seeds, a.synthetic_trials = 2, 3
        a.bear_steps, a.dampings, a.mission_steps = "0.3,1,3", "0.01", "3,10,30"
        a.mc_bear_steps, a.mc_mission_steps, a.mc_dampings = "1", "0.6", "1"
    a.ks = [int(x) for x in a.ks.split(",")]
    a.bear_steps, a.dampings = floats(a.bear_steps), floats(a.dampings)
    a.mission_steps = floats(a.mission_steps)
    a.mc_bear_steps, a.mc_mission_steps = floats(a.mc_bear_steps), floats(a.mc_mission_steps)
    a.mc_dampings = floats(a.mc_dampings)
    a.synthetic_cfs = floats(a.synthetic_cfs)
    a.sketch_passes = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in a.passes.split(",")}
    out = {"args": {k: v for k, v in vars(a).items()}}
    if a.diagnose:
        diagnose(a.diagnose, a)
        return
    for name in a.datasets.split(","):
        if name == "synthetic":
            synthetic_dataset(a, out)
            continue
        if name not in DATA:
            ap.error(f"unknown data set {name!r}")
        a_cfs = a.cfs
        a.cfs = floats(a.news20_cfs if name == "news20" else a.cfs)
        text_dataset(name, a, out)
        a.cfs = a_cfs
    versus_summary()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=float)


if __name__ == "__main__":
    main()
