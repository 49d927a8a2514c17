"""A line search along each pass's merged move (``--mix linesearch``): the multiplier of the move chosen from data.

Iterative parameter mixing (McDonald, Hall & Mann 2010) moves the model, every pass, by the *mean* of the K
chains' moves, where one sequential pass makes all of them one after another; on sparse text the mean is too
short (a fixed multiplier of 2 on the move closes news20's gap at 4 workers), on dense data it is about right
(the same multiplier costs a9a 2 points). So the multiplier is chosen every pass, from data: with ``w_0`` the
state the pass started from and ``w_avg`` its merge by VW's rule (:mod:`~streamlearn.distributed.merge`), the
move is ``d = w_avg - w_0`` and the next pass starts from ``w_0 + alpha d + beta d_prev`` (``d_prev``: the move
the previous pass made, carried in ``State.mixing``; beta = 0 on the first pass) with

    (alpha, beta) = argmin over alpha in {1, 1.25, ..., alpha_max}, beta in {0, 0.25, ..., 1} of
                    sum_i h_i loss(y_i, clip(x_i . w_0 + alpha x_i . d + beta x_i . d_prev))

over a fixed, deterministic sample of the pass's examples (:func:`sample_rows`), ``alpha_max`` = K (the
chains merged) unless capped: a line search along the merged move plus a momentum term whose weight is chosen
by the same data (a fixed block momentum, BMUF, helps sparse data and costs dense data, as a fixed alpha does).
A linear model's margin is linear in alpha and beta, so each sampled example costs three dot products
(``m_0 = x.w_0``, ``m_d = x.d``, ``m_p = x.d_prev``) and the loss at every point of the grid is a function of
the cached margins: the sums of disjoint samples add (:func:`loss_table`), and the choice is exact on the grid.
``G`` and ``N`` are VW's merge as they are; only the weights move. alpha = 1, beta = 0 is VW's rule exactly
(the merged weights themselves); one chain (K = 1) is not searched.

The ``clip`` is the learner's own prediction clip (VW's label range ``scal[2:4]`` of the merged state, unless
``--no_clip``). Plain adagrad (binary or regression, any VW rule) and ``--oaa`` (each class's table with its
one-against-all labels; one alpha for all classes, their losses summed, or, :data:`PER_CLASS`, one per class:
the benchmark measures it, but the engine does not offer it, as it made multiclass news20 worse than VW's rule);
the softmax learner keeps VW's rule (alpha = 1).

Oja-SON, FD-SON, RFD-SON, BEAR and MISSION (binary or regression, :func:`by_prediction`): their merge is moved to
``w_0 + alpha (w_avg - w_0) + beta d_prev`` in the arrays that hold the weights, feature by feature in the SON
learners' tables (re-based: each feature's weight columns hold its weight; :func:`table_moved`), cell by cell in
the Count Sketches (linear in the weights; the heaps re-QUERYed; :func:`sketch_moved`), and each pair of the grid
is scored by the learner's own predictions of the sample (:func:`predicted_losses`: the pre-scaling, the
sketch's median QUERY and the clip apply), one prediction pass per pair. The previous move travels in
``State.mixing`` as adagrad's does. The leave-one-chain-out rules are adagrad's only. Without beta (alpha
alone) BEAR gained nothing (news20_binary, 4 workers); with it, BEAR, MISSION and the SON learners end within 0.5
point of the sequential run, or better, on most of the accuracy table (README, "More than one machine").

Which rows are sampled, and whether they are learned, is the rule's :func:`sample_plan`, pass by pass:
``linesearch`` holds rows 9, 19, ... of every partition out of every pass; ``linesearch-learned`` learns them
(the search then favours long steps: the move was fitted to them); ``linesearch-last`` holds them out until the
last pass, which learns every row and judges each sampled row of chain c by the margin of VW's merge of the
other chains, ``w_-c = (sum_i G_i w_i - G_c w_c) / (sum_i G_i - G_c)`` per coordinate (:func:`cross_margins`:
the sums are the pass's accumulators, ``G_c, w_c`` chain c's final state at the row's entries,
:func:`own_values`), so that every row is learned and no move is judged on rows it, or its starting model,
learned; ``linesearch-cross`` does that every pass, ``linesearch-rotate`` holds out another tenth each pass
(measured, not offered on the command line).

``benchmarks/distributed.py --section mixing --mix-rules vw linesearch linesearch-learned linesearch-last``
measures them (the engine's task functions in one process).
"""
from __future__ import annotations

import numpy as np

from .merge import State

__all__ = ["ALPHA_STEP", "alpha_grid", "sample_rows", "move_margins",
           "apply_alpha", "supported", "PER_CLASS", "BETAS", "loss_table", "split_batch", "sampled", "search", "SAMPLE_EVERY", "SAMPLE_CAP",
           "ROTATE", "CROSS", "LAST", "rotate_phase", "sample_plan", "auto_rule", "ONE_PASS", "own_values", "cross_margins"]

#: the grid's spacing (alpha in 1, 1.25, 1.5, ..., alpha_max)
ALPHA_STEP = 0.25
#: the sample: every SAMPLE_EVERY-th example of a partition (its rows 9, 19, 29, ... counted from 0, as VW's
#: multi-pass holdout takes every 10th), at most SAMPLE_CAP of them per partition
SAMPLE_EVERY = 10
SAMPLE_CAP = 4096


def alpha_grid(nodes: int, cap: float | None = None) -> np.ndarray:
    """The multipliers tried: 1, 1 + ALPHA_STEP, ..., up to ``nodes`` (the chains merged; ``cap``: at most)."""
    hi = float(max(int(nodes), 1))
    if cap is not None:
        hi = max(1.0, min(hi, float(cap)))
    n = int(np.floor((hi - 1.0) / ALPHA_STEP + 1e-9)) + 1
    return 1.0 + ALPHA_STEP * np.arange(n)


def sample_rows(start: int, n: int, every: int = SAMPLE_EVERY, cap: int = SAMPLE_CAP, phase: int | None = None) -> np.ndarray:
    """Which of a batch's ``n`` rows, the partition's rows ``start`` to ``start + n - 1``, are in the sample
    (indices into the batch): those whose row number ``r`` has ``r % every == phase`` (None: ``every - 1``),
    the first ``cap`` of the partition."""
    phase = every - 1 if phase is None else int(phase) % every
    first = (phase - start) % every
    r = np.arange(first, n, every, dtype=np.int64)
    taken = (start + every - 1 - phase) // every  # sampled rows before this batch (r < start, r % every == phase)
    return r[:max(0, cap - taken)]


#: the rules that search along the merged move and how each pass samples (:func:`sample_plan`)
ROTATE = "linesearch-rotate"
#: every row learned; a sampled row judged by the merge of the *other* chains' states (leave its chain out)
CROSS = "linesearch-cross"
#: ``linesearch`` (the tenth held out, searched on) until the last pass, which learns every row and judges the
#: tenth, learned by its own chain only, by the other chains' merge (:data:`CROSS`)
LAST = "linesearch-last"


def rotate_phase(p: int, every: int = SAMPLE_EVERY) -> int:
    """``--mix linesearch-rotate``: the row numbers ``r`` held out in pass ``p`` (0-based) have
    ``r % every == rotate_phase(p)``, ``(every - 1 - p) % every``: another tenth each pass (pass 0: those of
    ``--mix linesearch``), so over ``passes`` >= 2 passes every row is learned in at least ``passes - 1`` of them
    (for ``passes`` <= ``every``)."""
    return (every - 1 - int(p)) % every


#: ``--mix linesearch-rotate`` with one pass (nothing would learn the held-out tenth): ``"vw"``, VW's rule (no
#: sample, no search), or ``"learned"``, the search on rows the pass also learned (``linesearch-learned``)
ONE_PASS = "vw"


def sample_plan(mix: str, p: int, passes: int):
    """How pass ``p`` (0-based) of ``passes`` samples under the line-search rule ``mix``: ``(holdout, phase)``
    for :func:`sampled` (``holdout``: the sampled rows are not learned; ``phase``: :func:`sample_rows`'s), plus
    ``True`` when the sampled rows are judged by the other chains' merge (:func:`cross_margins`), or None: no
    sample (the merge is VW's, nothing searched). ``linesearch``: every pass holds out the rows
    ``r % 10 == 9``; ``linesearch-learned``: those rows learned too; ``linesearch-cross``: learned, judged by the
    other chains; ``linesearch-last``: held out until the last pass, which learns them and judges them by the
    other chains; ``linesearch-rotate``: pass ``p`` holds out the rows ``r % 10 == rotate_phase(p)`` (one pass:
    :data:`ONE_PASS`)."""
    if mix == "linesearch":
        return True, SAMPLE_EVERY - 1
    if mix == "linesearch-learned":
        return False, SAMPLE_EVERY - 1
    if mix == CROSS:
        return False, SAMPLE_EVERY - 1, True
    if mix == LAST:
        return (False, SAMPLE_EVERY - 1, True) if int(p) >= int(passes) - 1 else (True, SAMPLE_EVERY - 1)
    if mix == ROTATE:
        if int(passes) <= 1:
            return None if ONE_PASS == "vw" else (False, SAMPLE_EVERY - 1)
        return True, rotate_phase(p)
    return None


def auto_rule(base: State, passes: int, chains: int) -> str:
    """``--mix``'s default for a run of ``passes`` passes over ``chains`` chains (or independent partitions) from
    ``base``: :data:`LAST` for plain adagrad with VW's adaptive merge (binary or regression, not ``--oaa``, softmax
    or an update without ``--adaptive``'s squared gradients: ``--sgd``, ``--normalized`` alone, ...) and ``linesearch``
    for the learners scored by their predictions (:func:`by_prediction`) when ``passes`` >= 2 and ``chains`` >= 2,
    else ``"vw"``, VW's rule (the learner's own merge). One pass: ``LAST`` would
    only rescale the merged move (the same errors as VW's rule, measured); one chain: there is nothing to average,
    and the engine equals one sequential run (``benchmarks/distributed.py --section mixing`` has the table)."""
    if passes < 2 or chains < 2 or not supported(base) or base.meta.get("reduction"):
        return "vw"
    if by_prediction(base):
        return "linesearch"
    if base.arrays["G"].shape != base.arrays["w"].shape:  # no per-coordinate squared gradients (not adaptive)
        return "vw"
    return LAST


def supported(state: State) -> bool:
    """Whether the line search applies to ``state``'s learner: adagrad, plain (binary or regression) or
    ``--oaa``, and the SON and Count Sketch learners (:func:`by_prediction`); softmax and the sketch learners'
    ``--oaa`` keep their merge (alpha = 1)."""
    return by_prediction(state) or (state.algo == "adagrad" and state.meta.get("reduction") in (None, "oaa"))


#: the learners whose alpha is scored by their own predictions (:func:`by_prediction`)
PREDICTED = ("oja-son", "fd-son", "rfd-son", "bear", "mission")
#: of those, the Count Sketch learners (their move is the sketch's, with the previous move: :func:`sketch_moved`)
SKETCHED = ("bear", "mission")


def by_prediction(state: State) -> bool:
    """Oja-SON, FD-SON, RFD-SON, BEAR and MISSION (binary or regression, not ``--oaa``): the search scores each
    (alpha, beta) by the learner's own predictions of the sampled rows under :func:`moved` (one prediction pass
    over the sample per pair: their margins are not a function of the weights alone: the pre-scaling's frame,
    the Count Sketch's median QUERY and the clip apply)."""
    return (state.algo in PREDICTED and not state.meta.get("reduction")
            and not int(state.meta.get("hyper", {}).get("oaa") or 0))


def table_moved(base: State, merged: State, alpha: float, beta: float = 0.0) -> State:
    """``merged`` (a re-based table state: ``b = 0``, an empty buffer, so each feature's weight columns hold its
    weight) with every weight column moved to ``base + alpha (merged - base) + beta d_prev`` feature by feature (a
    feature the base lacks: 0 there; ``d_prev``: the previous pass's move of the feature, ``base.mixing``, 0 where
    it had none): the effective weight ``w``, the pre-scaling's original-coordinate weight ``c`` and its snapshot
    (:data:`~streamlearn.distributed.merge.TABLE_COLUMN_RULES` ``weight`` / ``mean`` / ``snap``); the sketch,
    accumulators and scales stay the merge's. The base is a fresh state or the previous pass's merge, itself
    re-based. The result carries its move in ``mixing`` (``tkeys``, ``tmove``: the features and their weight
    columns' move, the next pass's ``d_prev``)."""
    from .merge import _rows_at, _table_layout

    # (m: the length of b, as in every table state; no learner built for the layout)
    layout = _table_layout(merged.algo, len(merged.arrays["b"]), merged.arrays["rows"].shape[1])
    cols = [j for j, (_, rule) in enumerate(layout) if rule in ("weight", "mean", "snap")]
    keys = np.asarray(merged.arrays["keys"], np.int64)
    rows = np.array(merged.arrays["rows"], np.float64, copy=True)
    bkeys = np.asarray(base.arrays["keys"], np.int64)
    brows = _rows_at(bkeys, np.asarray(base.arrays["rows"], np.float64), keys)[:, cols]
    if alpha != 1.0 or beta != 0.0:
        w = brows + alpha * (rows[:, cols] - brows)
        if beta != 0.0:
            w = w + beta * _rows_at(np.asarray(base.mixing["tkeys"], np.int64),
                                    np.asarray(base.mixing["tmove"], np.float64), keys)
        rows[:, cols] = w
    mixing = dict(merged.mixing, tkeys=keys.copy(), tmove=rows[:, cols] - brows)
    return State(merged.algo, merged.meta, dict(merged.arrays, rows=rows.astype(merged.arrays["rows"].dtype)),
                 merged.reader, mixing)


#: the Count Sketch arrays a line search moves (the weights of every class: a sketch is linear in them)
SKETCH_WEIGHTS = ("sketch", "intercept")


def sketch_moved(base: State, merged: State, alpha: float, beta: float = 0.0) -> State:
    """``merged`` (bear's merge) with its sketch and intercept moved to ``S_0 + alpha (S_avg - S_0) + beta d_prev``
    (``d_prev``: the previous pass's move, ``base.mixing``): a Count Sketch is linear, so this is the sketch of the
    weights so moved; the heaps re-QUERYed over their members (:func:`~streamlearn.distributed.merge.requery_heaps`).
    The result carries its move in ``mixing`` (the next pass's ``d_prev``)."""
    from .merge import requery_heaps

    arrays, mixing = _moved_arrays(base, merged, [(k, alpha, beta) for k in SKETCH_WEIGHTS if k in merged.arrays],
                                   np.float64)
    if alpha != 1.0 or beta != 0.0:
        requery_heaps(arrays)
    return State(merged.algo, merged.meta, arrays, merged.reader, mixing)


def _moved_arrays(base: State, merged: State, moves, mix_dtype):
    """``(arrays, mixing)``: ``merged``'s arrays with each ``(name, alpha, beta)`` of ``moves`` at
    ``w_0 + alpha (w_avg - w_0) + beta d_prev`` (``w_0``: ``base``'s; ``d_prev``: ``base.mixing``'s; alpha = 1, beta = 0:
    ``merged``'s own array), and ``merged.mixing`` with each such array's move from ``w_0`` (in ``mix_dtype``)."""
    arrays, mixing = dict(merged.arrays), dict(merged.mixing)
    for k, a, b in moves:
        w0 = np.asarray(base.arrays[k], np.float64)
        if a != 1.0 or b != 0.0:
            w = w0 + a * (np.asarray(merged.arrays[k], np.float64) - w0)
            if b != 0.0:
                w = w + b * np.asarray(base.mixing[k], np.float64)
            arrays[k] = w.astype(merged.arrays[k].dtype)
        mixing[k] = (np.asarray(arrays[k], np.float64) - w0).astype(mix_dtype)
    return arrays, mixing


def moved(base: State, merged: State, alpha: float, beta: float = 0.0) -> State:
    """:func:`sketch_moved` or :func:`table_moved` by ``merged``'s learner."""
    if merged.algo in SKETCHED:
        return sketch_moved(base, merged, alpha, beta)
    return table_moved(base, merged, alpha, beta)


#: the learners scored by their predictions: at most this many alphas (an even grid from 1 to the chains, on
#: multiples of ALPHA_STEP) and sampled rows (every k-th of the pass's sample) a search, so that its cost, one
#: prediction pass over the sample per (alpha, beta) pair, stays bounded however many chains and partitions
PREDICTED_ALPHAS = 13
PREDICTED_ROWS = 16384
#: the SON learners' search also tries these alphas below 1 (a shorter step than the merge's own): on ijcnn1, whose
#: consecutive partitions differ, their later passes drifted with alpha >= 1 (fd-son 2 workers over 4 partitions
#: +5.6 points after 3 passes, -0.03 with these); BEAR and MISSION do not (MISSION on news20_binary lost 2.4
#: points with them): ``benchmarks/distributed.py --section accuracy``
PREDICTED_LOW = (0.25, 0.5, 0.75)


def predicted_grid(grid, low=()) -> np.ndarray:
    """``grid`` (:func:`alpha_grid`) cut to :data:`PREDICTED_ALPHAS` points evenly from its first to its last
    (rounded to multiples of ALPHA_STEP; itself when it has no more), after the alphas ``low``."""
    grid = np.asarray(grid, np.float64)
    if len(grid) > PREDICTED_ALPHAS:
        grid = np.unique(np.round(np.linspace(grid[0], grid[-1], PREDICTED_ALPHAS) / ALPHA_STEP) * ALPHA_STEP)
    return np.concatenate([np.asarray(low, np.float64), grid])


def thinned(batch):
    """``batch`` with every k-th row kept (rows 0, k, 2k, ...), k the least that leaves at most
    :data:`PREDICTED_ROWS`; itself when it has no more."""
    if batch.n <= PREDICTED_ROWS:
        return batch
    k = -(-batch.n // PREDICTED_ROWS)
    return batch.take(np.arange(0, batch.n, k))


def predicted_losses(base: State, merged: State, batch, grid, betas=(0.0,)) -> np.ndarray:
    """``[beta, alpha]``: the summed (importance-weighted) loss of the learner of :func:`moved`
    ``(base, merged, alpha, beta)`` predicting ``batch``'s labeled rows."""
    from .merge import learner_of

    loss, _ = _loss_of(merged)
    lab = np.asarray(batch.labels, np.float64)
    ok = ~np.isnan(lab)
    h = np.asarray(batch.weights, np.float64)[ok]
    grid, betas = np.asarray(grid, np.float64), np.asarray(betas, np.float64)

    def predict(a, b, state=None):
        return np.asarray(learner_of(state or moved(base, merged, float(a), float(b))).predict_batch(batch)[0],
                          np.float64)

    out = np.zeros((len(betas), len(grid)))
    P = None if merged.algo in SKETCHED else _affine_predictions(base, merged, batch, grid, betas, predict)
    for j, b in enumerate(betas):
        for i, a in enumerate(grid):
            pred = P[j, i] if P is not None else predict(a, b)
            out[j, i] = float((loss.value(pred[ok], lab[ok]) * h).sum())
    return out


def _affine_predictions(base: State, merged: State, batch, grid, betas, predict):
    """The SON learners' predictions of ``batch`` at every (beta, alpha) from three raw ones: their margin is affine in
    the weight columns :func:`table_moved` moves (the sketch and the rest fixed), so with ``--no_clip`` scoring
    states ``r(a, b) = r00 + a (r10 - r00) + b (r01 - r00)``, then clipped as the learner clips (squared loss: to
    the label range learned). Checked against the learner's own predictions at two more points (the merge itself
    and the grid's far corner); None (predict every pair) when they differ by more than 1e-9 relative."""
    raw_meta = dict(merged.meta, hyper=dict(merged.meta.get("hyper", {}), no_clip=True))

    def raw(a, b):
        st = moved(base, merged, a, b)
        return predict(a, b, State(st.algo, raw_meta, st.arrays, st.reader, st.mixing))

    try:
        r00, r10 = raw(0.0, 0.0), raw(1.0, 0.0)
        r01 = raw(0.0, 1.0) if np.any(betas != 0.0) else r00
    except ValueError:
        return None
    lo_hi = None
    _, no_clip = _loss_of(merged)
    if not no_clip and (merged.meta.get("hyper", {}).get("loss_function") or "squared") in ("squared", "quantile"):
        lo, hi = _label_range(merged)
        lo_hi = (lo, hi) if lo is not None and lo < hi else None
    P = (r00[None, None, :] + grid[None, :, None] * (r10 - r00)[None, None, :]
         + betas[:, None, None] * (r01 - r00)[None, None, :])
    if lo_hi is not None:
        P = np.clip(P, *lo_hi)
    for (j, i) in ((0, int(np.argmin(np.abs(grid - 1.0)))), (len(betas) - 1, len(grid) - 1)):
        want = predict(grid[i], betas[j])
        if not np.allclose(P[j, i], want, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(want).max(initial=0.0)))):
            return None
    return P


def _label_range(state: State):
    """The label range a SON state has learned (``(lo, hi)``; ``(None, None)``: not kept)."""
    from .merge import _label_range as idx

    flt = np.asarray(state.arrays["flt"], np.float64)
    lo, hi = idx(state.algo, len(flt))
    return (None, None) if lo is None else (float(flt[lo]), float(flt[hi]))


#: ``--oaa``: one alpha per class (each class's summed loss), or one for all (the classes' losses summed)
PER_CLASS = False


def _weight_keys(state: State):
    if state.meta.get("reduction") == "oaa":
        return [f"class{c + 1}.w" for c in range(len(state.meta["classes"]))]
    return ["w"]


def _row_sums(batch, contrib):
    """Per row of ``batch``, the sum of its entries' ``contrib`` (float64)."""
    rows = np.repeat(np.arange(batch.n), np.diff(np.asarray(batch.offsets, np.int64)))
    return np.bincount(rows, weights=contrib, minlength=batch.n)


def _touched(w, batch) -> np.ndarray:
    """``w``'s entries at ``batch``'s indices (masked to ``w``'s size, a power of 2), in float64."""
    idx = np.asarray(batch.indices, np.int64) & (len(w) - 1)
    return np.asarray(w)[idx].astype(np.float64)


def move_margins(base: State, merged: State, batch) -> list:
    """Per weight table (one, or one per class for ``--oaa``): ``(m_0, m_d)``, the margins of ``batch``'s rows
    under the pass's start ``base`` and under the move ``merged - base`` (the move taken entry by entry, in
    float64, at the entries the rows touch)."""
    out = []
    v = np.asarray(batch.values, np.float64)
    for k in _weight_keys(base):
        g0 = _touched(base.arrays[k], batch)
        gd = _touched(merged.arrays[k], batch) - g0
        out.append((_row_sums(batch, g0 * v), _row_sums(batch, gd * v)))
    return out


def _targets(state: State, labels) -> list:
    """Per weight table, the labels its loss sees (``--oaa``: +1 for the class, -1 for the others)."""
    labels = np.asarray(labels, np.float64)
    if state.meta.get("reduction") == "oaa":
        return [np.where(labels == c + 1, 1.0, -1.0) for c in range(len(state.meta["classes"]))]
    return [labels]


def _loss_of(state: State):
    """``(loss, no_clip)`` of the learner whose state is ``state`` (its hyper-parameters)."""
    from ..algos.losses import get_loss

    h = state.meta.get("hyper", {})
    tau = h.get("quantile_tau")
    return get_loss(h.get("loss_function") or "squared", 0.5 if tau is None else float(tau)), bool(h.get("no_clip"))


def _clip_ranges(state: State) -> list:
    if state.meta.get("reduction") == "oaa":
        return [tuple(np.asarray(state.arrays[f"class{c + 1}.scal"], np.float64)[2:4])
                for c in range(len(state.meta["classes"]))]
    return [tuple(np.asarray(state.arrays["scal"], np.float64)[2:4])]


def apply_alpha(base: State, merged: State, alpha, beta=0.0) -> State:
    """``merged`` with its weights moved to ``w_0 + alpha (w_avg - w_0) + beta d_prev`` (``d_prev``: the move the
    previous pass made, ``base.mixing``; alpha = 1, beta = 0: ``merged``'s weights themselves). A list: one value per
    weight table (``--oaa``'s classes). The result carries the move it made in ``mixing`` (the next pass's
    ``d_prev``)."""
    keys = _weight_keys(base)
    alphas = [float(a) for a in alpha] if np.ndim(alpha) else [float(alpha)] * len(keys)
    betas = [float(b) for b in beta] if np.ndim(beta) else [float(beta)] * len(keys)
    arrays, mixing = _moved_arrays(base, merged, zip(keys, alphas, betas), np.float32)
    return State(merged.algo, merged.meta, arrays, merged.reader, mixing)


def split_batch(batch, start: int, holdout: bool, every: int = SAMPLE_EVERY, cap: int = SAMPLE_CAP,
                phase: int | None = None):
    """``(rows to learn, sampled rows)`` of ``batch``, the partition's rows from ``start`` on
    (:func:`sample_rows` with ``phase``; ``holdout``: the sampled rows are not learned, else the batch is learned
    whole)."""
    s = sample_rows(start, batch.n, every, cap, phase)
    sample = batch.take(s) if len(s) else None
    if not holdout or not len(s):
        return batch, sample
    keep = np.ones(batch.n, bool)
    keep[s] = False
    return batch.take(np.flatnonzero(keep)), sample


def sampled(batches, holdout: bool, out: list, every: int = SAMPLE_EVERY, cap: int = SAMPLE_CAP,
            phase: int | None = None):
    """The batches to learn of a partition's ``batches`` (:func:`split_batch`, ``phase``); the sampled rows are
    appended to ``out`` as batches."""
    start = 0
    for b in batches:
        learn, s = split_batch(b, start, holdout, every, cap, phase)
        start += b.n
        if s is not None:
            out.append(s)
        if learn.n:
            yield learn


#: the multipliers of the previous pass's move tried beside each alpha (from the second pass on)
BETAS = (0.0, 0.25, 0.5, 0.75, 1.0)


def own_values(state: State, batch):
    """``linesearch-cross``: a chain's final ``state``'s ``(w, G)`` at ``batch``'s entries (float64), what its
    own share of VW's merge is at the rows it sampled."""
    return _touched(state.arrays["w"], batch), _touched(state.arrays["G"], batch)


def cross_margins(base: State, acc: dict, batch, own) -> np.ndarray:
    """``linesearch-cross``: per row of ``batch`` (sampled by one chain, whose ``own_values`` are ``own``), the
    margin of the move of VW's merge without that chain, ``x . (w_-c - w_0)`` with, per coordinate,
    ``w_-c = (sum_i G_i w_i - G_c w_c) / (sum_i G_i - G_c)`` (0 where the others have no squared gradient, as
    VW's merge), from the pass's summed accumulator ``acc``."""
    from .merge import _rows_at

    sp = acc["units"][0]["sp"]
    idx = np.asarray(batch.indices, np.int64) & (len(base.arrays["w"]) - 1)
    SG, SwG = _rows_at(np.asarray(sp["idx"], np.int64),
                       np.column_stack([np.asarray(sp["G"], np.float64), np.asarray(sp["wG"], np.float64)]), idx).T
    wc, Gc = own
    den = SG - Gc
    ok = den > 1e-12 * np.maximum(SG, 1e-300)
    w_loo = np.where(ok, (SwG - wc * Gc) / np.where(ok, den, 1.0), 0.0)
    w0 = _touched(base.arrays["w"], batch)
    return _row_sums(batch, (w_loo - w0) * np.asarray(batch.values, np.float64))


def loss_table(base: State, merged: State, batch, grid, betas, md=None) -> np.ndarray:
    """``[unit, beta, alpha]``: the summed loss of ``w_0 + alpha d + beta d_prev`` over ``batch`` (``d_prev``:
    ``base.mixing``, the previous pass's move; three margins a row); sums of disjoint batches add. ``md``: the
    rows' margins of the move ``d`` given (one weight table: :func:`cross_margins`), not ``merged``'s."""
    grid, betas = np.asarray(grid, np.float64), np.asarray(betas, np.float64)
    keys = _weight_keys(base)
    out = np.zeros((len(keys), len(betas), len(grid)))
    if batch.n == 0:
        return out
    loss, no_clip = _loss_of(merged)
    lab = np.asarray(batch.labels, np.float64)
    ok = ~np.isnan(lab)
    h = np.asarray(batch.weights, np.float64)[ok]
    targets, ranges = _targets(merged, lab), _clip_ranges(merged)
    margins = move_margins(base, merged, batch)
    if md is not None:  # (linesearch-cross: the move's margins given, one table)
        margins = [(margins[0][0], np.asarray(md, np.float64))]
    for u, (k, (m0, md)) in enumerate(zip(keys, margins)):
        mp = (_row_sums(batch, _touched(base.mixing[k], batch) * np.asarray(batch.values, np.float64))
              if np.any(betas) else np.zeros(batch.n))
        y = targets[u][ok]
        for j, b in enumerate(betas):
            p = (m0[ok] + b * mp[ok])[None, :] + grid[:, None] * md[ok][None, :]
            if not no_clip:
                p = np.clip(p, *ranges[u])
            out[u, j] = (loss.value(p, np.broadcast_to(y, p.shape)) * h[None, :]).sum(axis=1)
    return out


def search(base: State, merged: State, samples, nodes: int, cap: float | None = None, md=None):
    """``(next state, alpha, beta)``: ``merged`` (VW's merge of ``nodes`` chains that started from ``base``) moved to
    ``w_0 + alpha (w_avg - w_0) + beta d_prev`` by the pair of :func:`alpha_grid` x :data:`BETAS` (beta = 0 on
    the first pass: no previous move) with the least summed loss over ``samples`` (batches; ties: the smallest
    beta, then alpha); alpha = 1, beta = 0 without samples. The learners the search does not apply to
    (:func:`supported`): ``merged`` as it is. ``--oaa``: one pair for all classes (:data:`PER_CLASS`: one per
    class; alpha, beta then their means)."""
    if not supported(base):
        return merged, 1.0, 0.0
    keys = _weight_keys(base)
    grid = alpha_grid(nodes, cap)
    betas = np.asarray(BETAS if keys and all(k in base.mixing for k in keys) else (0.0,))
    if not samples or int(nodes) <= 1:  # one chain: its state is a sequential pass's, nothing to search
        return (moved(base, merged, 1.0) if by_prediction(base) else apply_alpha(base, merged, 1.0)), 1.0, 0.0
    from ..batch import concat_batches

    if by_prediction(base):  # (beta 0 until a previous move is kept; ties: the smallest beta, then alpha)
        kept = [k for k in SKETCH_WEIGHTS if k in base.arrays] if base.algo in SKETCHED else ["tmove"]
        pb = np.asarray(BETAS if all(k in base.mixing for k in kept) else (0.0,))
        grid = predicted_grid(grid, () if base.algo in SKETCHED else PREDICTED_LOW)
        t = predicted_losses(base, merged, thinned(concat_batches(list(samples))), grid, pb)
        if not np.all(np.isfinite(t)):
            return moved(base, merged, 1.0), 1.0, 0.0
        j, i = np.unravel_index(int(np.argmin(t)), t.shape)
        a, b = float(grid[i]), float(pb[j])
        return moved(base, merged, a, b), a, b
    sums = loss_table(base, merged, concat_batches(list(samples)), grid, betas, md=md)  # (the sums of the batches')
    if not np.all(np.isfinite(sums)):
        return apply_alpha(base, merged, 1.0), 1.0, 0.0

    def best(t):
        j, i = np.unravel_index(int(np.argmin(t)), t.shape)
        return float(grid[i]), float(betas[j])
    if PER_CLASS and len(keys) > 1:
        pairs = [best(t) for t in sums]
        a, b = [p[0] for p in pairs], [p[1] for p in pairs]
        return apply_alpha(base, merged, a, b), float(np.mean(a)), float(np.mean(b))
    a, b = best(sums.sum(axis=0))
    return apply_alpha(base, merged, a, b), a, b
