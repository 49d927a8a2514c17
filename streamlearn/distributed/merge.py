"""Mergeable model states: per learner, a pure merge of saved states (plain NumPy arrays).

A :class:`State` is what a model file holds (``algo``, ``meta``, ``arrays``, the reader's
hashing settings) with every array dense and NumPy: it pickles (and cloudpickles) as plain
data, and no numba object crosses the wire. :func:`merge_states` combines the states that
nodes reached from one common ``base`` (the state they all started from; a fresh learner
when the models were trained from scratch) into one. It is written as
``finish(combine(lift(s) for s in states))`` so that a tree reduction (Dask's ``split_every``)
gives exactly what one flat merge gives: :func:`lift` turns a state into an accumulator of
sums, :func:`combine` adds accumulators (associative and commutative), :func:`finish` turns the
total into a state.

Rules (each tested on its own against its definition, ``tests/test_distributed.py``):

* **adagrad** (VW's ``gd``, any of its rules), **one-against-all** (per class) and the softmax
  learner: VW's AllReduce / ``vw-merge`` rule for adaptive updates (``accumulate.cc``,
  ``accumulate_weighted_avg`` / ``do_weighting``; ``gd.cc``, ``merge_weights_with_save_resume``):
  with ``G_i`` node i's accumulated squared gradients of a coordinate,
  ``w = sum_i G_i w_i / sum_i G_i``, ``G = sum_i G_i^2 / sum_i G_i`` and the normalizer
  ``N = sum_i G_i N_i / sum_i G_i`` (VW's "crude max"); where ``sum_i G_i = 0`` the weight is 0
  and ``N`` the sum (VW leaves it unweighted). Note that VW's rule, which the issue calls
  "accumulators summed", gives the G-weighted mean of ``G``, not its sum: the sum would grow
  K-fold on every mixing round. Without ``--adaptive`` the weights (and ``N``) are averaged
  in proportion to the examples each node learned (VW's ``merge_weights_simple``).
  VW's additive scalars (``normalized_sum_norm_x``, ``total_weight``, t) and the example
  counts are summed over what each node added to the base; the label range is the union.
  ``--l1`` / ``--l2`` states are folded into the weights first (VW's ``sync_weights``).
* **bear / mission**: a Count Sketch is linear, so the merged sketch is exactly the sketch of
  the merged weights: cell by cell the average of the node sketches weighted by the examples
  each learned (a sum with unit weights; same seeds and width required, and checked). The
  top-k heap is rebuilt from the merged sketch over the union of the nodes' heap members
  (QUERYed, the k largest ``|w|`` kept, names kept); HyperLogLog registers take their maximum
  (an exact union); BEAR's oLBFGS history is restarted (its pairs belong to one trajectory);
  iteration counts are summed. MISSION's ``--step_rule adagrad`` accumulators (count-min sketches
  of squared gradients, also linear) are the base's plus what each node added: exactly the
  sketch of all nodes' squared gradients.
* **oja-son, fd-son, rfd-son** (a per-feature table beside a sketch, ``w = u_bar + Z^T b``): each
  node is read in canonical form (its effective weights per feature, with b, the buffer and FD's
  lazy re-bases applied, and its sketch as explicit rows); the tables are merged by key (the union
  of the features), each column by the rule its name declares (:data:`TABLE_COLUMNS`,
  :data:`TABLE_COLUMN_RULES`: the weights averaged in proportion to the examples learned,
  accumulators of squared gradients as the base plus what each node added, scales by maximum, the
  pre-scaling's frame recomputed); the merged state is re-based (F = I, b = 0, an empty buffer and
  re-base history). FD-SON / RFD-SON sketches: the frequent-directions merge (Liberty 2013;
  Ghashami et al. 2016: stacking sketches and shrinking keeps the FD error bound), with the base's
  sketch counted once, ``sum_i S_i^T S_i - (k - 1) S_0^T S_0``, shrunk by its m-th eigenvalue (m - 1
  directions; RFD's alpha is the base's plus the nodes' increments averaged in proportion to their
  examples, as the weights, plus half the merge's shrink, as in an eigen step); from a fresh base it is
  exactly stack-and-shrink. Oja-SON's sketch has no exact merge (Oja's iterate depends on the
  order of the stream): its ``V^T Lambda V`` estimates an average curvature, so the nodes'
  estimates are averaged in proportion to their examples and cut to the top m eigen-pairs
  (an approximation: ``benchmarks/distributed.py --section merge_cost`` measures it).

States must agree on the learner, every hyper-parameter and the hashing settings
(:func:`check_compatible` names the first difference).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["State", "MergeError", "MIX_RULES", "state_of", "learner_of", "fresh_state", "check_compatible", "lift",
           "combine", "finish", "merge_states", "BMUF_RULES", "fd_merge", "compact_rows",
           "sketch_query", "state_nbytes", "LINESEARCH_RULES"]


class MergeError(ValueError):
    """States that cannot be merged (different learners, hyper-parameters, hashing settings, or
    a learner without a merge rule)."""


@dataclass
class State:
    """A learner's saved state as plain data: ``algo``, JSON-able ``meta``, dense NumPy
    ``arrays`` and the ``reader`` (hashing) settings of the model file."""

    algo: str
    meta: dict
    arrays: dict
    reader: dict = field(default_factory=dict)
    #: the mixing rule's own state between passes, not part of the model (BMUF's block momentum:
    #: ``{weight array name: delta}``, :func:`finish`); empty for the other rules
    mixing: dict = field(default_factory=dict)

    @property
    def examples(self) -> int:
        return int(self.meta.get("examples_learned", 0))


def state_nbytes(obj) -> int:
    """Bytes of the arrays in a state or accumulator (what a merge moves)."""
    if isinstance(obj, State):
        return sum(int(a.nbytes) for a in obj.arrays.values()) + sum(int(a.nbytes) for a in obj.mixing.values())
    if isinstance(obj, dict):
        return sum(state_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(state_nbytes(v) for v in obj)
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    return 0


def _dense(a):
    from ..memory import SparseTable

    if isinstance(a, SparseTable):
        return np.array(a.dense(), copy=True)
    return np.array(a, copy=True)


def state_of(learner, reader: dict, finish: bool = True) -> State:
    """The :class:`State` of ``learner`` (``finish``: buffered updates learned first, ``finish()``; else a
    partial minibatch stays buffered in the state, as a model file holds it, for a learner that goes on with the
    same stream: a chain's next partition)."""
    if finish:
        learner.finish()
    meta, arrays = learner.state_dict()
    import json

    meta = json.loads(json.dumps(meta))  # plain JSON data, as a model file holds it
    return State(learner.name, meta, {k: _dense(v) for k, v in arrays.items()}, dict(reader))


def learner_of(state: State):
    """The learner of ``state`` (``ValueError`` for a state that does not fit its learner)."""
    from ..algos import learner_from_state

    return learner_from_state(state.algo, state.meta, state.arrays)


def fresh_state(like: State) -> State:
    """The state of a new learner with ``like``'s hyper-parameters (what training from
    scratch starts from)."""
    from ..algos import make_learner

    return state_of(make_learner(like.algo, dict(like.meta["hyper"])), like.reader)


# -- compatibility ------------------------------------------------------------------------------


#: arrays whose shape may differ between nodes: BEAR's oLBFGS ring (its capacity grows; restarted)
_FREE_ARRAYS = ("rs_keys", "rs_vals", "rr_keys", "rr_vals")


def check_compatible(states, names=None) -> None:
    """:class:`MergeError` naming the first difference between the states (and which inputs,
    ``names``) in learner, reduction, hyper-parameters, update rule or hashing settings."""
    names = names or [f"model {i + 1}" for i in range(len(states))]
    a, na = states[0], names[0]
    if a.algo not in _RULES:
        raise MergeError(f"{na}: --algo {a.algo} has no merge rule yet (mergeable: {', '.join(_RULES)})")
    for b, nb in zip(states[1:], names[1:]):
        def differ(what, x, y):
            raise MergeError(f"{na} and {nb} differ in {what}: {x!r} vs {y!r}; only models trained with the "
                             "same learner, hyper-parameters and hashing settings can be merged")
        if a.algo != b.algo:
            differ("--algo", a.algo, b.algo)
        for k in ("reduction", "update_rule"):
            if a.meta.get(k) != b.meta.get(k):
                differ(k.replace("_", " "), a.meta.get(k), b.meta.get(k))
        ha, hb = a.meta.get("hyper", {}), b.meta.get("hyper", {})
        for k in sorted(set(ha) | set(hb)):
            if ha.get(k) != hb.get(k):
                differ(f"--{k}", ha.get(k), hb.get(k))
        va, vb = a.meta.get("step_defaults", 1), b.meta.get("step_defaults", 1)
        if va != vb:  # the same hyper-parameters may resolve to other steps (sketch learners' --oaa defaults)
            sa, sb = _step_settings(a, va), _step_settings(b, vb)
            diff = ", ".join(f"{k} {sa[k]!r} vs {sb.get(k)!r}" for k in sa if sa[k] != sb.get(k))
            if diff:
                raise MergeError(f"{na} and {nb} were trained under different step defaults (version {va} "
                                 f"vs {vb} of {a.algo}'s): {diff}; continue one with the other's settings "
                                 "given explicitly, or merge models of one version")
        for k in sorted(set(a.reader) | set(b.reader)):
            if a.reader.get(k) != b.reader.get(k):
                differ(f"the hashing setting {k}", a.reader.get(k), b.reader.get(k))
        free = _FREE_ARRAYS + (_TABLE_ARRAYS if a.algo in TABLE_COLUMNS else ())
        for k in sorted(set(a.arrays) | set(b.arrays)):
            if k.rsplit(".", 1)[-1] in free or k.rsplit(".", 1)[-1].startswith("pend_"):
                continue  # restarted (BEAR's ring) or required empty (a pending minibatch)
            x, y = a.arrays.get(k), b.arrays.get(k)
            if x is None or y is None or x.shape != y.shape or x.dtype != y.dtype:
                differ(f"the array {k}", None if x is None else (x.shape, str(x.dtype)),
                       None if y is None else (y.shape, str(y.dtype)))
        if "seeds" in a.arrays and not np.array_equal(a.arrays["seeds"], b.arrays["seeds"]):
            differ("the Count Sketch seeds", "…", "…")


def _step_settings(state: State, version: int) -> dict:
    """The step settings ``state``'s hyper-parameters resolve to under its step-defaults ``version``
    (a learner built from the hyper-parameters alone: no arrays are read)."""
    from ..algos import make_learner

    learner = make_learner(state.algo, dict(state.meta.get("hyper", {})))
    learner.step_defaults = version
    learner._apply_hyper()
    return learner.step_settings()


# -- AdaGrad family: VW's do_weighting ----------------------------------------------------------


def _linear_lift(w, G, N, lam, adaptive: bool, has_n=None) -> dict:
    """Accumulator of one weight table (``w``, its squared-gradient sums ``G``, normalizer ``N``)."""
    w = np.asarray(w, np.float64)
    N = np.asarray(N, np.float64)
    if has_n is None:
        has_n = N.shape[0] > 1 or N.shape == w.shape
    if adaptive:
        G = np.asarray(G, np.float64)
        out = {"wG": w * G, "G": G.copy(), "GG": G * G}
        if has_n:
            out["NG"] = (N.reshape(-1, 1) * G.reshape(N.shape[0], -1)).reshape(-1) if N.shape != G.shape else N * G
            out["Nsum"] = N.copy()
        return out
    out = {"wl": lam * w, "lam": np.array([lam]), "wsum": w.copy(), "n": np.array([1.0])}
    if has_n:
        out["Nl"], out["Nsum"] = lam * N, N.copy()
    return out


def _sparse_sum(a: dict, b: dict) -> dict:
    """The sum of two sparse column sets ``{"idx": sorted indices, col: values}``: per index of
    either, ``a + b`` where both hold it, else the one value as it is (-0.0 included).

    The indices of each are unique (``np.flatnonzero``, or an earlier sum), so an index occurs
    once or twice in the stable merge of the two: its values are the sum of the pair, summed in one
    vectorised add (``np.add.reduceat`` over 100,000 short runs cost 1.4-2 ms of CPU per column, and
    ``np.unique`` sorted the merged indices again: 16 ms for two chains' adagrad states at -b 18,
    9 ms now, the same bytes); runs of more than two (indices repeated within one input) are
    summed by ``reduceat`` in the same order."""
    idx = np.concatenate([a["idx"], b["idx"]])
    order = np.argsort(idx, kind="stable")
    idx = idx[order]
    n = len(idx)
    if not n:
        return {k: v[:0] for k, v in a.items()}
    first = np.empty(n, bool)
    first[0] = True
    np.not_equal(idx[1:], idx[:-1], out=first[1:])
    start = np.flatnonzero(first)
    lens = np.diff(start, append=n)
    out = {"idx": idx[start]}
    pairs = lens.max() <= 2
    if pairs:
        at = np.flatnonzero(lens == 2)
        left = start[at]
    for k in a:
        if k != "idx":
            col = np.concatenate([a[k], b[k]])[order]
            if pairs:
                v = col[start]
                v[at] = col[left] + col[left + 1]
            else:
                v = np.add.reduceat(col, start)
            out[k] = v
    return out


def _linear_finish(acc: dict, adaptive: bool, w_shape, G_shape, N_shape, n_rows=None):
    """``(w, G, N)`` (float32) of a summed :func:`_linear_lift` accumulator."""
    if adaptive:
        Gs = acc["G"]
        pos = Gs > 0
        safe = np.where(pos, Gs, 1.0)
        w = np.where(pos, acc["wG"] / safe, 0.0)  # VW: *weight = 0 where no node has a gradient
        G = np.where(pos, acc["GG"] / safe, 0.0)
        if "NG" in acc:
            Grow = Gs if Gs.shape == acc["Nsum"].shape else Gs.reshape(acc["Nsum"].shape[0], -1).sum(axis=1)
            NG = acc["NG"] if acc["NG"].shape == acc["Nsum"].shape else \
                acc["NG"].reshape(acc["Nsum"].shape[0], -1).sum(axis=1)
            rpos = Grow > 0
            N = np.where(rpos, NG / np.where(rpos, Grow, 1.0), acc["Nsum"])
        else:
            N = np.zeros(N_shape)
    else:
        G = np.zeros(G_shape)
        lam = float(acc["lam"][0])
        if lam > 0:
            w = acc["wl"] / lam
            N = acc["Nl"] / lam if "Nl" in acc else np.zeros(N_shape)
        else:  # no node learned anything: the plain mean
            n = float(acc["n"][0])
            w = acc["wsum"] / n
            N = acc["Nsum"] / n if "Nsum" in acc else np.zeros(N_shape)
    return (w.astype(np.float32).reshape(w_shape), G.astype(np.float32).reshape(G_shape),
            N.astype(np.float32).reshape(N_shape))


#: AdaGrad's ``scal``: which entries add (sum_norm_x, total_weight, t), which are the label range
_SCAL_ADD = (0, 1, 4)


def _adagrad_lift(meta, arrays, base_meta, base_arrays, lam, mix="vw") -> dict:
    """Sparse: only the coordinates where a node's ``w``, ``G`` or ``N`` is non-zero travel (``mix="delta"``:
    only those it changed from the base)."""
    w, G, N, scal = arrays["w"], arrays["G"], arrays["N"], np.asarray(arrays["scal"], np.float64)
    if scal[5] != 0.0 or scal[6] != 1.0:
        raise MergeError("an adagrad state with unfolded --l1/--l2 terms (learner.finish() folds them)")
    n = w.shape[0]
    adaptive = G.shape[0] == n
    has_n = N.shape[0] == n
    if mix != "vw" and adaptive:
        return _adagrad_delta_lift(arrays, base_arrays, has_n, mix, lam)
    nz = w != 0
    if adaptive:
        nz |= G != 0
    if has_n:
        nz |= N != 0
    idx = np.flatnonzero(nz)
    cols = _linear_lift(w[idx], G[idx] if adaptive else G, N[idx] if has_n else N, lam, adaptive, has_n)
    acc = {k: cols.pop(k) for k in ("lam", "n") if k in cols}
    acc["sp"] = dict(cols, idx=idx)
    bs = np.asarray(base_arrays["scal"], np.float64)
    acc["dscal"] = np.array([scal[i] - bs[i] for i in _SCAL_ADD])
    acc["lo"], acc["hi"] = np.array([scal[2]]), np.array([scal[3]])
    return acc


def _adagrad_delta_lift(arrays, base_arrays, has_n, mix, lam) -> dict:
    """The accumulator of the :data:`MIX_RULES` other than ``"vw"``: sums over the coordinates a node
    changed from the base (``dG = G_i - G_0``, ``dw = w_i - w_0``): ``dG`` and ``dG N_i``; ``dG dw``
    (delta, sqrtk), ``dG^2`` (sqrtk, examples), ``lambda_i dw`` with the examples learned ``lambda_i``
    and the node count (examples); the additive scalars as in VW's rule."""
    w, G, N = (np.asarray(arrays[k], np.float64) for k in ("w", "G", "N"))
    bw, bG, bN = (np.asarray(base_arrays[k], np.float64) for k in ("w", "G", "N"))
    dG = G - bG
    nz = (dG != 0) | (w != bw)
    if has_n:
        nz |= N != bN
    idx = np.flatnonzero(nz)
    dG, dw = dG[idx], w[idx] - bw[idx]
    sp = {"idx": idx, "dG": dG}
    if has_n:
        sp["dGN"] = dG * N[idx]
    if mix in ("delta", "sqrtk"):
        sp["dGdw"] = dG * dw
    if mix in ("sqrtk", "examples"):
        sp["dG2"] = dG * dG
    scal, bs = np.asarray(arrays["scal"], np.float64), np.asarray(base_arrays["scal"], np.float64)
    acc = {"sp": sp, "dscal": np.array([scal[i] - bs[i] for i in _SCAL_ADD]),
           "lo": np.array([scal[2]]), "hi": np.array([scal[3]])}
    if mix == "examples":
        sp["lw"] = lam * dw
        acc.update(lamx=np.array([lam]), nk=np.array([1.0]))
    return acc


def _adagrad_delta_finish(acc, bw, bG, bN, has_n):
    """``(w, G, N)`` of a summed :func:`_adagrad_delta_lift` accumulator (its rule told by its columns)."""
    sp = acc["sp"]
    idx, dG = sp["idx"], sp["dG"]
    w, G, N = (np.array(a, np.float32) for a in (bw, bG, bN))
    w0, g0 = np.asarray(bw, np.float64)[idx], np.asarray(bG, np.float64)[idx]
    pos = dG > 0
    safe = np.where(pos, dG, 1.0)
    if "lw" in sp:  # examples: VW's G rule over k nodes, G_i = G_0 + dG_i (0 where untouched)
        k, lam = float(acc["nk"][0]), float(acc["lamx"][0])
        w[idx] = w0 + (sp["lw"] / lam if lam > 0 else 0.0)
        den = k * g0 + dG
        G[idx] = np.where(den > 0, (k * g0 * g0 + 2 * g0 * dG + sp["dG2"]) / np.where(den > 0, den, 1.0), 0.0)
    else:
        step = np.where(pos, sp["dGdw"] / safe, 0.0)
        if "dG2" in sp:  # sqrtk: times the square root of the nodes' participation ratio
            step *= np.sqrt(np.where(pos, dG * dG / np.where(pos, sp["dG2"], 1.0), 1.0))
        w[idx] = w0 + step
        G[idx] = g0 + dG
    if has_n:
        N[idx] = np.where(pos, sp["dGN"] / safe, np.asarray(bN, np.float64)[idx])
    return w, G, N


def _adagrad_finish(acc, base_meta, base_arrays):
    bw, bG, bN = base_arrays["w"], base_arrays["G"], base_arrays["N"]
    n = bw.shape[0]
    adaptive, has_n = bG.shape[0] == n, bN.shape[0] == n
    sp = dict(acc["sp"])
    idx = sp.pop("idx")
    if "dG" in sp:  # a MIX_RULES rule other than VW's
        w, G, N = _adagrad_delta_finish(acc, bw, bG, bN, has_n)
    else:
        sub = dict(sp, **{k: acc[k] for k in ("lam", "n") if k in acc})
        w_, G_, N_ = _linear_finish(sub, adaptive, idx.shape, idx.shape if adaptive else bG.shape,
                                    idx.shape if has_n else bN.shape)
        w = np.zeros(n, np.float32)
        w[idx] = w_
        G = np.zeros(bG.shape, np.float32)
        N = np.zeros(bN.shape, np.float32)
        if adaptive:
            G[idx] = G_
        if has_n:
            N[idx] = N_
    scal = np.array(base_arrays["scal"], np.float64)
    for j, i in enumerate(_SCAL_ADD):
        scal[i] += acc["dscal"][j]
    scal[2], scal[3] = acc["lo"][0], acc["hi"][0]
    scal[5], scal[6] = 0.0, 1.0
    return {"w": w, "G": G, "N": N, "scal": scal}


def _softmax_lift(meta, arrays, base_meta, base_arrays, lam) -> dict:
    acc = _linear_lift(arrays["W"], arrays["G"], arrays["N"], lam, True)
    s, bs = np.asarray(arrays["scal"], np.float64), np.asarray(base_arrays["scal"], np.float64)
    acc["dscal"] = s - bs  # sum h ||x/N||^2, sum h: additive
    return acc


def _softmax_finish(acc, base_meta, base_arrays):
    W, G, N = _linear_finish(acc, True, base_arrays["W"].shape, base_arrays["G"].shape, base_arrays["N"].shape)
    return {"W": W, "G": G, "N": N, "scal": np.asarray(base_arrays["scal"], np.float64) + acc["dscal"]}


# -- Count Sketch family -------------------------------------------------------------------------

def sketch_query(sk, seeds, keys) -> np.ndarray:
    """QUERY one class's ``R x W`` sketch for ``keys``: the median over rows of ``sign * cell``
    (the learners' own compiled QUERY, ``_sketch_kernels.sketch_query_keys``)."""
    from ..kernels import lazy

    keys = np.ascontiguousarray(keys, np.uint32)
    out = np.zeros(len(keys))
    if len(keys):
        lazy("streamlearn.algos._sketch_kernels").sketch_query_keys(
            np.ascontiguousarray(sk, np.float64), np.ascontiguousarray(seeds), keys, out)
    return out


def _heap_arrays(keys, w, names, name_len, k, T):
    from ..algos.sketch import heap_homes

    """One class's heap (``hkeys, hw, htpos, hname, htbl, size, names, name_len``) of the
    members ``keys`` with weights ``w``: sorted by ``|w|`` ascending (a valid min-heap), the
    position map filled by linear probing from each key's home entry, name ids in slot order."""
    n = len(keys)
    hkeys = np.zeros(k, np.uint32)
    hw = np.zeros(k)
    htpos = np.zeros(k, np.int32)
    hname = np.arange(k, dtype=np.int32)
    htbl = np.full(T, -1, np.int32)
    nm = np.zeros((k, names.shape[1]), np.uint8)
    nl = np.zeros(k, np.int32)
    order = np.lexsort((keys, np.abs(w)))
    hkeys[:n], hw[:n] = keys[order], w[order]
    nm[:n], nl[:n] = names[order], name_len[order]
    tmask = T - 1
    homes = heap_homes(hkeys[:n], tmask)
    for s in range(n):
        i = int(homes[s])
        while htbl[i] >= 0:
            i = (i + 1) & tmask
        htbl[i] = s
        htpos[s] = i
    return hkeys, hw, htpos, hname, htbl, n, nm, nl


def _sketch_lift(meta, arrays, base_meta, base_arrays, lam) -> dict:
    if len(arrays["pend_offsets"]) > 1:
        raise MergeError("a bear/mission state with a pending minibatch (learner.finish() learns it)")
    sk = np.asarray(arrays["sketch"], np.float64)
    kc = sk.shape[0]
    cand = []
    for c in range(kc):
        n = int(arrays["hsize"][c])
        ids = arrays["hname"][c, :n]
        cand.append((arrays["hkeys"][c, :n].copy(), arrays["names"][c, ids].copy(), arrays["name_len"][c, ids].copy()))
    cnt, bc = arrays["counters"], base_arrays["counters"]
    # MISSION --step_rule adagrad: count-min sketches of squared gradients (linear, as the Count
    # Sketch): the base's plus what each node added is the sketch of every node's squared gradients
    extra = {f"d_{f}": np.asarray(arrays[f], np.float64) - np.asarray(base_arrays[f], np.float64)
             for f in ("acc", "iacc") if f in arrays}
    return {**extra, "S": lam * sk, "lam": np.array([lam]), "Ssum": sk.copy(), "n": np.array([1.0]), "cand": cand,
            "hll": arrays["hll"].copy(), "dt": np.array([cnt[0] - bc[0], cnt[3] - bc[3]], np.int64),
            "lo": np.array([arrays["lrange"][0]]), "hi": np.array([arrays["lrange"][1]]),
            # the intercept kept apart from the sketch (absent in models saved before): averaged alike
            "I": lam * np.asarray(arrays.get("intercept", np.zeros(kc)), np.float64),
            "Isum": np.asarray(arrays.get("intercept", np.zeros(kc)), np.float64).copy()}


def _set_heap(arrays: dict, c: int, keys, names, lens) -> None:
    """Class ``c``'s heap in ``arrays`` (written in place) rebuilt from the candidate ``keys`` (with their
    ``names``, ``lens``): each QUERYed from ``arrays["sketch"]``, zeros dropped (the heap never holds a zero
    weight, ``_offer_class``), the ``top_k`` largest ``|w|`` kept (ties: the smaller key)."""
    k, T = arrays["hkeys"].shape[1], arrays["htbl"].shape[1]
    w = sketch_query(arrays["sketch"][c], arrays["seeds"], keys)
    keep = w != 0.0
    keys, w, names, lens = keys[keep], w[keep], names[keep], lens[keep]
    if len(keys) > k:
        top = np.lexsort((keys, -np.abs(w)))[:k]
        keys, w, names, lens = keys[top], w[top], names[top], lens[top]
    hk, hw, hp, hn, ht, n, nm, nl = _heap_arrays(keys, w, names, lens, k, T)
    arrays["hkeys"][c], arrays["hw"][c], arrays["htpos"][c], arrays["hname"][c] = hk, hw, hp, hn
    arrays["htbl"][c], arrays["hsize"][c], arrays["names"][c], arrays["name_len"][c] = ht, n, nm, nl


def requery_heaps(arrays: dict) -> None:
    """A bear / mission state's heaps (in ``arrays``, replaced by new arrays) rebuilt over their members from
    ``arrays["sketch"]`` (:func:`_set_heap`; after the sketch was moved: a line search,
    :mod:`~streamlearn.distributed.linesearch`)."""
    for name in ("hkeys", "hw", "htpos", "hname", "htbl", "hsize", "names", "name_len"):
        arrays[name] = np.array(arrays[name], copy=True)
    for c in range(arrays["hkeys"].shape[0]):
        n = int(arrays["hsize"][c])
        ids = arrays["hname"][c, :n]
        _set_heap(arrays, c, arrays["hkeys"][c, :n].copy(), arrays["names"][c, ids].copy(),
                  arrays["name_len"][c, ids].copy())


def _union_candidates(a, b):
    out = []
    for (ka, na, la), (kb, nb, lb) in zip(a, b):
        keys = np.concatenate([ka, kb])
        _, first = np.unique(keys, return_index=True)
        first = np.sort(first)
        out.append((keys[first], np.concatenate([na, nb])[first], np.concatenate([la, lb])[first]))
    return out


def _sketch_finish(acc, base_meta, base_arrays):
    out = {k: np.array(v, copy=True) for k, v in base_arrays.items()}
    lam = float(acc["lam"][0])
    sk = acc["S"] / lam if lam > 0 else acc["Ssum"] / float(acc["n"][0])
    out["sketch"] = sk
    if "intercept" in out:
        out["intercept"] = acc["I"] / lam if lam > 0 else acc["Isum"] / float(acc["n"][0])
    for c in range(base_arrays["hkeys"].shape[0]):
        _set_heap(out, c, *acc["cand"][c])
    out["hll"] = acc["hll"]
    for f in ("acc", "iacc"):
        if f"d_{f}" in acc:
            out[f] = (np.asarray(base_arrays[f], np.float64) + acc[f"d_{f}"]).astype(base_arrays[f].dtype)
    cnt = np.array(base_arrays["counters"], np.int64)
    cnt[0] += acc["dt"][0]
    cnt[3] += acc["dt"][1]
    cnt[1] = cnt[2] = 0  # BEAR's oLBFGS ring restarts
    out["counters"] = cnt
    out["lrange"] = np.array([acc["lo"][0], acc["hi"][0]])
    for f in ("rs_len", "rr_len", "ring_sr", "ring_rr", "ring_rdr", "rs_keys", "rs_vals", "rr_keys", "rr_vals"):
        if f in out:
            out[f][...] = 0
    return out


# -- the sketched second-order learners: a per-feature table and a sketch -------------------------
#
# State (algos/feature_table.py, oja_son.py, fd_son.py): a row of columns per feature seen, keyed by
# the masked feature index, holding w = w_bar + Z^T b and the sketch's Z column; small matrices
# beside it. A node is first read in canonical form: its effective weights per feature (the
# buffer, b and FD's lazy re-bases applied) and its sketch as explicit rows over its features.
# Then every table column is merged by key, by the rule its name declares (:data:`TABLE_COLUMN_RULES`),
# and the sketches by the learner's rule; the merged state is re-based (F = I, b = 0, Z the merged
# sketch's orthonormal directions, an empty buffer and re-base history).

#: a table's columns by name: (those before Z's m columns, those after it; the latter present only
#: with the diagonal pre-scaling, ``--diag_frame precond`` / FD-SON's pre-scaling). A new column
#: is one name here and, if new, one rule in :data:`TABLE_COLUMN_RULES`.
TABLE_COLUMNS = {
    "oja-son": (("w", "D", "scratch"), ("c", "snap", "s2", "f")),
    "fd-son": (("w", "scratch", "stamp"), ("c", "snap", "s2", "f", "G", "buf")),
    "rfd-son": (("w", "scratch", "stamp"), ("c", "snap", "s2", "f", "G", "buf")),
}
#: how a per-feature column merges (a feature a node never saw counts as a fresh row there: zeros):
#: ``weight``: the effective weight w~ (w_bar + Z^T b + G^T c), averaged in proportion to the examples
#: each node learned (VW's merge without adaptive sums, ``merge_weights_simple``); ``mean``: the same
#: for a column as stored (the pre-scaling's original-coordinate weight c, after each node's flush
#: c += f (w~ - snap)); ``delta``: the base's value plus what each node added (sums of squared gradients:
#: what one sequential pass would have accumulated); ``max``: the largest (s^2 = max x^2 seen);
#: ``snap``: the merged w~ (the snapshot the pre-scaling's flush measures from: c holds the weight);
#: ``frame``: recomputed from the merged accumulator and scale (:data:`TABLE_FRAME`); ``zero``: scratch,
#: caches and re-base stamps (0 in a re-based state with an empty buffer); ``sketch``: Z's columns.
TABLE_COLUMN_RULES = {"w": "weight", "D": "delta", "scratch": "zero", "stamp": "zero", "c": "mean", "snap": "snap",
                      "s2": "max", "f": "frame", "G": "delta", "buf": "zero"}
#: the pre-scaling's frame f = _pscale(accumulator column, s2, r, vw_rule): which column, and (r, vw_rule)
TABLE_FRAME = {"oja-son": ("D", lambda lr: (lr.dpow, lr.vw_rule)), "fd-son": ("G", lambda lr: (0.25, True)),
               "rfd-son": ("G", lambda lr: (0.25, True))}
#: the arrays indexed by feature (their shapes differ between nodes)
_TABLE_ARRAYS = ("keys", "rows", "bkey", "bval", "hP0", "hc0")


def _pscale_np(dv, s2, r, vwr):
    """NumPy ``_oja_son_kernels._pscale``: the pre-scaling's frame of accumulator ``dv`` and scale ``s2``."""
    dv = np.asarray(dv, np.float64)
    s2 = np.asarray(s2, np.float64)
    pos = s2 > 0
    safe = np.where(pos, s2, 1.0)
    if vwr:
        ok = pos & (dv > 0)
        d = np.where(ok, dv / safe, 1.0)
        f = d ** -r / np.sqrt(safe)
        return np.where(ok, f, 0.0)
    f = (0.1 + dv / safe) ** -r / np.sqrt(safe)
    return np.where(pos, f, 0.0)


def _table_layout(algo, m, ncol):
    """``[(column name, rule)]`` of a table of ``ncol`` columns (Z's m columns named ``z``)."""
    pre, post = TABLE_COLUMNS[algo]
    extra = ncol - len(pre) - m
    if extra not in (0, len(post)):
        raise MergeError(f"--algo {algo}: its table has {ncol} columns per feature, the merge rule knows "
                         f"{len(pre)} + m ({m}) + {len(post)} (declare new columns in merge.TABLE_COLUMNS)")
    names = list(pre) + ["z"] * m + list(post[:extra])
    for n in names:
        if n != "z" and n not in TABLE_COLUMN_RULES:
            raise MergeError(f"--algo {algo}: the table column {n!r} has no merge rule (merge.TABLE_COLUMN_RULES)")
    return [(n, "sketch" if n == "z" else TABLE_COLUMN_RULES[n]) for n in names]


def _table_canonical(algo, meta, arrays):
    """``(keys, rows, w~, sketch rows (r x n), learner)`` of one node: its features, their up-to-date
    table rows, effective weights and explicit sketch (Oja: Lambda^1/2 V; FD: [D F Z; G])."""
    from ..algos import learner_from_state

    try:
        lr = learner_from_state(algo, meta, arrays)
    except ValueError as e:
        raise MergeError(f"--algo {algo}: a state that does not load ({e})") from None
    keys = np.asarray(arrays["keys"], np.int64)
    m = lr.m
    if algo == "oja-son":
        rows = np.array(arrays["rows"], np.float64, copy=True)
        Z = rows[:, 3:3 + m]
        wt = rows[:, 0] + Z @ np.asarray(arrays["b"], np.float64)
        V = np.asarray(arrays["F"], np.float64) @ Z.T
        lam = np.maximum(np.asarray(arrays["lam"], np.float64), 0.0)
        S = np.sqrt(lam)[:, None] * V
    else:  # FDSON.weights_dense / sketch_dense, the table read once (its lazy re-bases applied)
        rows = lr._rows(keys)
        Z = rows[:, 3:3 + m]
        tau = int(arrays["ints"][2])
        boff = np.asarray(arrays["boff"], np.int64)
        bkey = np.asarray(arrays["bkey"], np.int64)
        bval = np.asarray(arrays["bval"], np.float64)
        G = np.zeros((m, len(keys)))
        for q in range(tau):
            e = slice(int(boff[q]), int(boff[q + 1]))
            np.add.at(G[q], np.searchsorted(keys, bkey[e]), bval[e])
        wt = rows[:, 0] + Z @ np.asarray(arrays["b"], np.float64) + G.T @ np.asarray(arrays["c"], np.float64)
        S = np.vstack([np.asarray(arrays["D"], np.float64)[:, None] * (np.asarray(arrays["F"], np.float64) @ Z.T), G])
    return keys, rows, wt, S, lr


def _rows_at(keys, rows, at):
    """``rows`` of the sorted ``keys`` at the keys ``at`` (in any order; zeros where absent)."""
    out = np.zeros((len(at), rows.shape[1]))
    if len(keys) and len(at):
        pos = np.clip(np.searchsorted(keys, at), 0, len(keys) - 1)
        hit = keys[pos] == at
        out[hit] = rows[pos[hit]]
    return out


def _table_lift(algo):
    def lift_fn(meta, arrays, base_meta, base_arrays, lam):
        keys, rows, wt, S, lr = _table_canonical(algo, meta, arrays)
        m = lr.m
        layout = _table_layout(algo, m, rows.shape[1])
        names = [n for n, _ in layout]
        col = {n: i for i, n in enumerate(names) if n != "z"}
        bkeys = np.asarray(base_arrays["keys"], np.int64)
        brows = _rows_at(bkeys, np.asarray(base_arrays["rows"], np.float64), keys) if len(bkeys) else \
            np.zeros_like(rows)
        if "snap" in col:  # the pre-scaling's flush: c += f (w~ - snap), so that c is the weight
            rows[:, col["c"]] += rows[:, col["f"]] * (wt - rows[:, col["snap"]])
        sp = {"idx": keys}
        for n, rule in layout:
            if rule == "weight":
                sp[n] = lam * wt
            elif rule == "mean":
                sp[n] = lam * rows[:, col[n]]
            elif rule == "delta":
                sp[n] = rows[:, col[n]] - brows[:, col[n]]
            elif rule == "max":
                sp["max:" + n] = rows[:, col[n]]
        sp["n"] = np.ones(len(keys))  # nodes that hold the feature (the plain mean when no node learned)
        sp["wsum"] = wt
        ints = np.asarray(arrays["ints"], np.int64)
        bints = np.asarray(base_arrays["ints"], np.int64)
        flt = np.asarray(arrays["flt"], np.float64)
        bflt = np.asarray(base_arrays["flt"], np.float64)
        lo, hi = _label_range(algo, len(flt))
        return {"tsp": sp, "lam": np.array([lam]), "n": np.array([1.0]), "nodes_n": np.array([1], np.int64),
                "sk": {"keys": keys, "rows": [(lam, S)]},
                "dints": ints - bints, "maxints": ints.copy(), "dflt": flt - bflt,
                "dalpha": np.array([lam * (flt[0] - bflt[0])]),
                "lo": flt[[lo]] if lo is not None else np.zeros(1), "hi": flt[[hi]] if hi is not None else np.zeros(1)}
    return lift_fn


def _label_range(algo, nflt):
    """The indices of the label range learned so far in ``flt`` (None: not kept)."""
    if algo == "oja-son":
        return 1, 2
    return (3, 4) if nflt >= 5 else (None, None)


def _union_rows(a, b):
    """Two ``{"keys", "rows": [(weight, R x n)]}`` stacks over the union of their keys (compacted,
    :func:`compact_rows`, where either carries a ``cap``)."""
    keys = np.union1d(a["keys"], b["keys"])
    out = []
    for src in (a, b):
        pos = np.searchsorted(keys, src["keys"])
        for w, R in src["rows"]:
            M = np.zeros((R.shape[0], len(keys)))
            M[:, pos] = R
            out.append((w, M))
    res = {"keys": keys, "rows": out}
    if "cap" in a or "cap" in b:
        res["cap"] = a.get("cap", b.get("cap"))
        res["dropped"] = a.get("dropped", np.zeros(1)) + b.get("dropped", np.zeros(1))
        res = compact_rows(res)
    return res


def compact_rows(sk: dict) -> dict:
    """A frequent-directions sketch accumulator ``{"keys", "rows": [(1, R)], "cap"}`` cut to its top
    ``cap`` (the sketch size m) directions: one block ``sqrt(lambda_j) v_j`` of the top eigen-pairs of
    ``sum_i R_i^T R_i``, the rest dropped (``dropped`` sums the largest eigenvalue dropped at each cut:
    the merged curvature is below the exact merge's by at most that much in any direction, on top of
    the frequent-directions shrink; Ghashami et al. 2016's mergeability, truncating instead of shrinking
    so that the base's sketch, subtracted at the end, is not shrunk twice). The engine compacts every
    leaf and every tree node, so an accumulator carries m rows over its keys however many nodes
    it sums (``lift(..., compact=True)``); ``streamlearn merge`` does not (exact)."""
    cap = int(sk["cap"][0])
    if sum(R.shape[0] for _, R in sk["rows"]) <= cap:
        return sk
    with _one_blas_thread():
        lam, V, nxt = _directions_([(1.0, R) for _, R in sk["rows"]], len(sk["keys"]), cap)
    rows = np.sqrt(np.maximum(lam, 0.0))[:, None] * V
    return dict(sk, rows=[(1.0, rows)], dropped=sk.get("dropped", np.zeros(1)) + nxt)


def _sparse_union(a, b):
    """:func:`_sparse_sum`, but ``max:`` columns take the maximum."""
    idx = np.concatenate([a["idx"], b["idx"]])
    uniq, inv = np.unique(idx, return_inverse=True)
    out = {"idx": uniq}
    for k in a:
        if k == "idx":
            continue
        v = np.concatenate([a[k], b[k]])
        if k.startswith("max:"):
            r = np.full(len(uniq), -np.inf)
            np.maximum.at(r, inv, v)
        else:
            r = np.zeros(len(uniq))
            np.add.at(r, inv, v)
        out[k] = r
    return out


def _one_blas_thread():
    """A context with one BLAS thread where ``threadpoolctl`` is installed: the merge's products are
    thin (r x n, r a few dozen rows), too small for threads, and OpenBLAS's threads spin for a core
    that a busy machine does not give them."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        import contextlib
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _directions(blocks, n, k, minus=None):
    with _one_blas_thread():
        return _directions_(blocks, n, k, minus)


def _directions_(blocks, n, k, minus=None):
    """The top ``k`` eigen-pairs of ``C = sum_i w_i R_i^T R_i`` (minus ``minus = (c, R0)``: ``c R0^T R0``), blocks
    ``(w_i, R_i)`` of rows over ``n`` features: ``(eigenvalues (k,), directions (k x n), the next eigenvalue)``.
    In the rows' span, O(r^2 n) for r rows in all: with ``A`` the stacked rows and ``A A^T = U G U^T``,
    ``Q = A^T U G^-1/2`` is an orthonormal basis of it and ``Q^T C Q = G^1/2 U^T W U G^1/2`` (W the rows'
    weights). Eigenvalues are clipped at 0; rows with nothing left are completed by unit vectors
    orthogonal to the others (eigenvalue 0)."""
    parts = [(w, R) for w, R in blocks if R.size] + ([(-minus[0], minus[1])] if minus is not None and minus[1].size
                                                     else [])
    lam = np.zeros(0)
    V = np.zeros((0, n))
    if parts and n:
        A = np.vstack([R for _, R in parts])
        wrow = np.concatenate([np.full(R.shape[0], float(w)) for w, R in parts])
        g, Ug = np.linalg.eigh(A @ A.T)
        keep = g > max(float(g.max()), 0.0) * 1e-12
        g, Ug = g[keep], Ug[:, keep]
        if len(g):
            sq = np.sqrt(g)
            Msmall = sq[:, None] * ((Ug.T * wrow) @ Ug) * sq[None, :]
            lam, U = np.linalg.eigh(0.5 * (Msmall + Msmall.T))
            order = np.argsort(-lam, kind="stable")
            lam, U = np.maximum(lam[order], 0.0), U[:, order]
            V = ((Ug / sq) @ U).T @ A  # (Q U)^T
    nxt = float(lam[k]) if len(lam) > k else 0.0
    lam, V = lam[:k], V[:k]
    kk = min(k, n)
    if V.shape[0] < kk:  # complete with unit vectors orthogonal to the rows kept
        extra = []
        for j in range(n):
            e = np.zeros(n)
            e[j] = 1.0
            for v in list(V) + extra:
                e -= (v @ e) * v
            nr = np.linalg.norm(e)
            if nr > 0.5:
                extra.append(e / nr)
            if V.shape[0] + len(extra) == kk:
                break
        V = np.vstack([V] + [e[None, :] for e in extra]) if extra else V
        lam = np.concatenate([lam, np.zeros(V.shape[0] - len(lam))])
    return lam, V, nxt


def _table_finish(algo):
    def finish_fn(acc, base_meta, base_arrays):
        from ..algos import learner_from_state

        base = learner_from_state(algo, base_meta, base_arrays)
        m = base.m
        sp = acc["tsp"]
        keys = sp["idx"]
        n = len(keys)
        layout = _table_layout(algo, m, base.ncol)
        lam = float(acc["lam"][0])
        w = sp["w"] / lam if lam > 0 else sp["wsum"] / np.maximum(sp["n"], 1.0)
        bkeys = np.asarray(base_arrays["keys"], np.int64)
        brows = _rows_at(bkeys, np.asarray(base_arrays["rows"], np.float64), keys)
        rows = np.zeros((n, len(layout)))
        col = {nm: i for i, (nm, _) in enumerate(layout) if nm != "z"}
        for j, (nm, rule) in enumerate(layout):
            if rule == "weight":
                rows[:, j] = w
            elif rule == "mean":
                rows[:, j] = sp[nm] / lam if lam > 0 else 0.0
            elif rule == "delta":
                rows[:, j] = brows[:, j] + sp[nm]
            elif rule == "max":
                rows[:, j] = np.maximum(sp["max:" + nm], 0.0)
            elif rule == "snap":
                rows[:, j] = w
        if "f" in col:
            acc_col, rv = TABLE_FRAME[algo]
            r, vwr = rv(base)
            rows[:, col["f"]] = _pscale_np(rows[:, col[acc_col]], rows[:, col["s2"]], r, vwr)
        sk = acc["sk"]
        pos = np.searchsorted(keys, sk["keys"])
        blocks = []
        for wi, R in sk["rows"]:
            M = np.zeros((R.shape[0], n))
            M[:, pos] = R
            blocks.append((wi, M))
        nodes = int(acc["nodes_n"][0])
        out = {k: np.array(v, copy=True) for k, v in base_arrays.items() if k not in _TABLE_ARRAYS}
        ints = np.asarray(base_arrays["ints"], np.int64) + acc["dints"]
        flt = np.asarray(base_arrays["flt"], np.float64) + acc["dflt"]
        if algo == "oja-son":
            # Oja's Lambda, V estimate the curvature's average (Gamma_t = 1/t): the nodes' estimates are
            # averaged in proportion to the examples each learned (the base's with weight 1 - no more)
            tot = sum(wi for wi, _ in blocks)
            blocks = [(wi / tot if tot > 0 else 1.0 / max(len(blocks), 1), R) for wi, R in blocks]
            lam_m, V, _ = _directions(blocks, n, m)
            na = min(int(acc["maxints"][1]), V.shape[0])
            Zt = np.zeros((m, n))
            Zt[:na] = V[:na]
            lamv = np.zeros(m)
            lamv[:na] = lam_m[:na]
            assigned = np.full(m, -1, np.int64)
            if na:
                assigned[:na] = keys[np.argmax(np.abs(Zt[:na]), axis=1)]
            ints[1], ints[2], ints[4] = na, n, ints[0]
            flt[0] = float(m)  # the cond(Z) bound of a fresh (orthonormal, F = I) sketch
            out.update(F=np.eye(m), K=np.eye(m), lam=lamv, b=np.zeros(m), assigned=assigned)
        else:
            # FD sketches are sums: the base's sketch, then what each node added: sum_i S_i^T S_i minus
            # (nodes - 1) S_0^T S_0, shrunk to m - 1 directions by its m-th eigenvalue (Liberty 2013; a
            # mergeable summary, Ghashami et al. 2016); from a fresh base, exactly stack-and-shrink (fd_merge)
            blocks = [(1.0, R) for _, R in blocks]
            minus = None
            if nodes > 1 and int(np.asarray(base_arrays["ints"])[0]) > 0:
                bk, _, _, S0, _ = _table_canonical(algo, base_meta, base_arrays)
                M0 = np.zeros((S0.shape[0], n))
                M0[:, np.searchsorted(keys, bk)] = S0
                minus = (float(nodes - 1), M0)
            lam_m, V, _ = _directions(blocks, n, m, minus)
            smm = float(lam_m[m - 1]) if m and len(lam_m) >= m else 0.0
            na = V.shape[0]
            D = np.zeros(m)
            D[:na] = np.sqrt(np.maximum(lam_m[:na] - smm, 0.0))
            if m:
                D[m - 1] = 0.0
            Zt = np.zeros((m, n))
            Zt[:na] = V
            flt[1] += smm
            b_alpha = float(np.asarray(base_arrays["flt"])[0])
            if base.robust:
                # RFD's alpha: the nodes' increments averaged in proportion to their examples (as the weights;
                # their sum would count every node's own early shrinks), then half the merge's own shrink
                d_alpha = float(acc["dalpha"][0]) / lam if lam > 0 else float(acc["dflt"][0]) / max(nodes, 1)
                flt[0] = b_alpha + d_alpha + 0.5 * smm
            else:
                flt[0] = b_alpha
            flt[2] = float(ints[0])  # every feature re-based now
            alpha = float(flt[0])
            sst = np.zeros((2 * m, 2 * m))
            sst[np.arange(m), np.arange(m)] = D * D
            H = np.linalg.inv(alpha * np.eye(2 * m) + sst) if alpha > 0 else np.linalg.pinv(sst)
            K = np.eye(m)
            ints[1], ints[2], ints[3], ints[4], ints[7], ints[9] = n, 0, na, 0, 0, 64
            out.update(F=np.eye(m), K=K, D=D, b=np.zeros(m), c=np.zeros(m), H=H, ZG=np.zeros((m, m)),
                       GG=np.zeros((m, m)), boff=np.zeros(m + 1, np.int64), bkey=np.zeros(0, np.int64),
                       bval=np.zeros(0), hP0=np.zeros((0, m, m)), hc0=np.zeros((0, m)))
        rows[:, [j for j, (nm, _) in enumerate(layout) if nm == "z"]] = Zt.T
        lo, hi = _label_range(algo, len(flt))
        if lo is not None:
            flt[lo], flt[hi] = acc["lo"][0], acc["hi"][0]
        out.update(keys=keys, rows=rows, ints=ints, flt=flt)
        return out
    return finish_fn


#: algo -> (lift, finish) of one (binary) learner's arrays
_RULES = {"adagrad": (_adagrad_lift, _adagrad_finish), "bear": (_sketch_lift, _sketch_finish),
          "mission": (_sketch_lift, _sketch_finish),
          **{a: (_table_lift(a), _table_finish(a)) for a in TABLE_COLUMNS}}


def _combine_acc(a, b):
    if isinstance(a, list):  # per-class accumulators (oaa) or candidate lists
        if a and isinstance(a[0], tuple):
            return _union_candidates(a, b)
        return [_combine_acc(x, y) for x, y in zip(a, b)]
    out = {}
    for k, x in a.items():
        y = b[k]
        if k == "lo":
            out[k] = np.minimum(x, y)
        elif k in ("hi", "hll", "maxints"):
            out[k] = np.maximum(x, y)
        elif k == "sp":
            out[k] = _sparse_sum(x, y)
        elif k == "tsp":
            out[k] = _sparse_union(x, y)
        elif k == "sk":
            out[k] = _union_rows(x, y)
        elif k == "cand" or isinstance(x, (list, dict)):
            out[k] = _combine_acc(x, y)
        else:
            out[k] = x + y
    return out


# -- the merge -----------------------------------------------------------------------------------


def _unit(state: State):
    """``(kind, units)``: the per-learner pieces of a state: ``[(meta, arrays)]`` for a plain
    learner, one per class for one-against-all."""
    kind = state.meta.get("reduction")
    if kind == "oaa":
        K = len(state.meta["classes"])
        units = []
        for c in range(K):
            pre = f"class{c + 1}."
            units.append((state.meta["classes"][c], {k[len(pre):]: v for k, v in state.arrays.items()
                                                     if k.startswith(pre)}))
        return kind, units
    return kind, [(state.meta, state.arrays)]


def _rule(state: State):
    kind = state.meta.get("reduction")
    if kind == "softmax":
        return _softmax_lift, _softmax_finish
    if kind not in (None, "oaa") or state.algo not in _RULES:
        raise MergeError(f"--algo {state.algo}" + (f" ({kind})" if kind else "")
                         + f" has no merge rule yet (mergeable: {', '.join(_RULES)}, their --oaa)")
    return _RULES[state.algo]


#: how the adaptive AdaGrad states of nodes that started from one base mix (``lift(mix=...)``;
#: other learners, and adagrad without ``--adaptive``, have their one rule). Per coordinate, with
#: ``w_0, G_0`` the base's, ``dw_i = w_i - w_0``, ``dG_i = G_i - G_0`` (0 where node i did not touch it),
#: ``lambda_i`` the examples node i learned, k nodes:
#:
#: * ``"vw"`` (default; ``streamlearn merge``): VW's AllReduce rule (module docstring), the G-weighted
#:   mean of the weights, in which each node's copy of the base counts: a step that one node took
#:   alone is shrunk by the k - 1 others' copies of the base;
#: * ``"delta"``: ``w = w_0 + sum dG_i dw_i / sum dG_i``, ``G = G_0 + sum dG_i`` (what a sequential pass
#:   accumulates): a step one node took alone is kept whole;
#: * ``"examples"``: ``w = w_0 + sum lambda_i dw_i / sum lambda_i`` (McDonald et al.'s mixing weighted by
#:   examples), ``G`` by VW's rule;
#: * ``"sqrtk"``: delta's step times ``sqrt(k_eff)``, ``k_eff = (sum dG_i)^2 / sum dG_i^2`` (1 to k, the
#:   nodes that shared the coordinate): between averaging and summing the steps.
#:
#: * ``"bmuf"``, ``"bmuf-nesterov"``: block-wise model-update filtering (Chen & Huo 2016, "Scalable
#:   training of deep learning machines by incremental block training with intra-block parallel
#:   optimization and blockwise model-update filtering", ICASSP): the merge by VW's rule gives the
#:   averaged model ``W_avg(t)``; its difference from the model the pass started from is the block's
#:   update ``G(t) = W_avg(t) - W_g(t-1)``, filtered by block momentum, ``D(t) = eta D(t-1) + zeta G(t)``
#:   (block learning rate ``zeta`` = 1, block momentum ``eta = 1 - 1/k`` for k merged chains),
#:   ``W(t) = W(t-1) + D(t)``; the next pass starts from ``W_g(t) = W(t)`` (classical block momentum)
#:   or ``W(t) + eta D(t)`` (Nesterov). ``D`` travels with the merged state (``State.mixing``);
#:   ``G`` and ``N`` are merged by VW's rule. Weights of the adagrad family only (plain, ``--oaa``,
#:   softmax); the other learners keep their one rule.
#:
#: * ``"linesearch"``, ``"linesearch-learned"``, ``"linesearch-last"`` (and, measured only, ``"linesearch-rotate"``,
#:   ``"linesearch-cross"``): VW's merge ``w_avg``, then the weights
#:   moved to ``w_0 + alpha (w_avg - w_0) + beta d_prev`` (``d_prev``: the previous pass's move, in ``State.mixing``)
#:   with alpha in [1, k], beta in [0, 1] chosen every pass by the least summed loss over a sample of the pass's
#:   examples (every 10th row of each partition, held out of learning, or learned too, or held out until the last
#:   pass and judged there by the other chains' merge: :mod:`~streamlearn.distributed.linesearch`, ``sample_plan``). The search needs data, so it runs in the engine
#:   (``finish_pass``); here (``streamlearn merge``, and :func:`lift` / :func:`finish`) it is VW's rule.
#:
#: ``N`` (``--normalized``) is the dG-weighted mean of the nodes' in ``"delta"``, ``"examples"`` and ``"sqrtk"``.
#: ``benchmarks/distributed.py --section mixing`` measures them.
MIX_RULES = ("vw", "delta", "examples", "sqrtk", "bmuf", "bmuf-nesterov", "linesearch", "linesearch-learned",
             "linesearch-rotate", "linesearch-cross", "linesearch-last")
BMUF_RULES = ("bmuf", "bmuf-nesterov")
LINESEARCH_RULES = ("linesearch", "linesearch-learned", "linesearch-rotate", "linesearch-cross", "linesearch-last")


def lift(state: State, base: State, mix: str = "vw", compact: bool = False) -> dict:
    """The accumulator of ``state``, a node's state reached from ``base`` (``mix``: :data:`MIX_RULES`;
    ``compact``: FD-SON / RFD-SON sketch rows cut to m at this node and every node it is combined at,
    :func:`compact_rows`)."""
    if mix not in MIX_RULES:
        raise MergeError(f"unknown mixing rule {mix!r} (known: {', '.join(MIX_RULES)})")
    lift_fn, _ = _rule(state)
    if mix in BMUF_RULES + LINESEARCH_RULES or (mix != "vw" and lift_fn is not _adagrad_lift):
        mix = "vw"  # BMUF filters VW's merge (finish), the line search moves it (engine); the other learners' one rule
    _, units = _unit(state)
    _, bunits = _unit(base)
    lam = float(max(state.examples - base.examples, 0))
    accs = []
    for (m, a), (bm, ba) in zip(units, bunits):
        ex = max(int(m.get("examples_learned", 0)) - int(bm.get("examples_learned", 0)), 0)
        acc = lift_fn(m, a, bm, ba, float(ex) if len(units) > 1 else lam, **({"mix": mix} if mix != "vw" else {}))
        if compact and state.algo in ("fd-son", "rfd-son"):
            acc["sk"] = compact_rows(dict(acc["sk"], cap=np.array([len(a["D"])], np.int64)))
        acc["examples"] = np.array([ex], np.int64)
        accs.append(acc)
    return {"units": accs, "examples": np.array([state.examples - base.examples], np.int64),
            "nodes": np.array([1], np.int64)}


def combine(accs) -> dict:
    """The sum of accumulators (associative, commutative: any tree gives the same)."""
    accs = list(accs)
    out = accs[0]
    for a in accs[1:]:
        out = _combine_acc(out, a)
    return out


def _bmuf(state: State, base: State, nodes: int, nesterov: bool) -> State:
    """Block momentum on the weights of ``state``, VW's merge of ``nodes`` chains that started from
    ``base`` (:data:`MIX_RULES`, ``"bmuf"``): the next pass's state, its momentum in ``mixing``."""
    eta = 1.0 - 1.0 / max(int(nodes), 1)
    arrays, mixing = dict(state.arrays), {}
    for k, w_avg in state.arrays.items():
        if not (k in ("w", "W") or (k.startswith("class") and k.endswith(".w"))):
            continue
        wg_prev = np.asarray(base.arrays[k], np.float64)
        d_prev = np.asarray(base.mixing.get(k, 0.0), np.float64)
        w_prev = wg_prev - eta * d_prev if nesterov else wg_prev  # W(t-1)
        d = eta * d_prev + (np.asarray(w_avg, np.float64) - wg_prev)  # zeta = 1
        w = w_prev + d
        arrays[k] = (w + eta * d if nesterov else w).astype(w_avg.dtype)
        mixing[k] = d.astype(np.float32)
    return State(state.algo, state.meta, arrays, state.reader, mixing)


def finish(acc: dict, base: State, mix: str = "vw") -> State:
    """The merged :class:`State` of a summed accumulator of nodes that started from ``base``
    (``mix``: :data:`MIX_RULES`; only BMUF's rules act here, on VW's merge)."""
    if mix in BMUF_RULES and (base.algo == "adagrad" or base.meta.get("reduction") == "softmax"):
        return _bmuf(finish(acc, base), base, int(acc["nodes"][0]), mix == "bmuf-nesterov")
    _, fin = _rule(base)
    kind, bunits = _unit(base)
    meta = dict(base.meta)
    meta["examples_learned"] = base.examples + int(acc["examples"][0])
    arrays = {}
    if kind == "oaa":
        meta["classes"] = []
        for c, ((bm, ba), ua) in enumerate(zip(bunits, acc["units"])):
            cm = dict(bm)
            cm["examples_learned"] = int(bm.get("examples_learned", 0)) + int(ua["examples"][0])
            meta["classes"].append(cm)
            arrays.update({f"class{c + 1}.{k}": v for k, v in fin(ua, bm, ba).items()})
    else:
        arrays = fin(acc["units"][0], base.meta, base.arrays)
    return State(base.algo, meta, arrays, dict(base.reader))


def merge_states(states, base: State | None = None, names=None, mix: str = "vw") -> State:
    """Merge ``states`` (nodes that all started from ``base``; None: from scratch, a fresh
    learner of the same hyper-parameters) by the learner's rule (module docstring; ``mix``:
    :data:`MIX_RULES`)."""
    states = list(states)
    if not states:
        raise MergeError("nothing to merge")
    check_compatible(states, names)
    _rule(states[0])
    if base is None:
        base = fresh_state(states[0])
    return finish(combine(lift(s, base, mix) for s in states), base, mix)


# -- frequent directions (FD-SON / RFD-SON / FTSL, when they merge) -------------------------------


def fd_merge(sketches, ell: int) -> np.ndarray:
    """Merge frequent-directions sketches (rows: directions; Liberty 2013, Ghashami, Liberty,
    Phillips & Woodruff 2016, Sec. 3 "mergeability"): stack them, take the SVD
    ``B = U S V^T`` and shrink, ``B' = sqrt(max(S^2 - s_ell^2, 0)) V^T`` (``s_ell`` the
    ``ell``-th largest singular value), keeping ``ell`` rows. If every input satisfies
    ``0 <= A_i^T A_i - B_i^T B_i <= Delta_i I``, the merge satisfies it for the stacked data
    with ``Delta = sum Delta_i + s_ell^2`` and, overall, ``||A^T A - B^T B||_2 <= ||A||_F^2 / ell``
    (for sketches of ``ell`` rows built the same way)."""
    B = np.vstack([np.asarray(s, np.float64) for s in sketches])
    d = B.shape[1]
    _, s, Vt = np.linalg.svd(B, full_matrices=False)
    out = np.zeros((ell, d))
    if len(s) <= ell:
        out[:len(s)] = s[:, None] * Vt
        return out
    delta = s[ell - 1] ** 2
    shrunk = np.sqrt(np.maximum(s[:ell] ** 2 - delta, 0.0))
    out[:] = shrunk[:, None] * Vt[:ell]
    return out
