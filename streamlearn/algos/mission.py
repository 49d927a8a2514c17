"""MISSION (``--algo mission``): SGD on Count-Sketched weights with a top-k heap.

Aghazadeh et al., "MISSION: Ultra Large-Scale Feature Selection using Count-Sketches",
ICML 2018; the first-order baseline of BEAR (Aghazadeh et al., BEAR paper Sec. 6).
This module also holds :class:`SketchLearner`, the plumbing BEAR and MISSION share:

* the weights live in a Count Sketch (``--sketch_rows`` x ``--sketch_width`` float64 cells,
  or sized by ``--sketch_bytes``), keyed by the **full 32-bit feature hash** (``-b`` is not
  used for indexing; without a size option the sketch gets ``2**b`` cells in all);
* a top-k heap (``--top_k``) holds the features with the largest ``|weight|`` with their
  original ``namespace^name`` (captured when a feature enters the heap, at most
  ``NAME_BYTES`` = 64 bytes each; longer names are truncated), so memory is O(sketch + k);
* predictions use only the top-k features: ``p = sum over x's features in the top-k of
  QUERY(h) * x_h`` (as in the paper; NOTES_BEAR item 6);
* learning runs on minibatches of ``--minibatch`` labeled examples with the mean gradient;
  every example is predicted with the model as it is before its minibatch's update
  (progressive validation). A minibatch may straddle calls to :meth:`learn_batch`: its
  first part is buffered (with its feature names) and :meth:`finish` learns a final partial
  minibatch, so results never depend on how the stream is cut into batches;
* ``--oaa K``: K classes, one sketch + heap per class, softmax cross-entropy (the paper's
  multi-class extension); ``pred`` is the class id 1..K, ``loss`` the cross-entropy.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from ..batch import Batch
from .base import Learner, Param, lazy_copy, lazy_zeros

__all__ = ["SketchLearner", "Mission", "NAME_BYTES", "take_rows", "concat_keep_names"]

NAME_BYTES = 64  # = _sketch_kernels.NAME_BYTES (kept here so importing needs no numba)
HLL_BITS = 12
_I64 = np.zeros(0, np.int64)
_U8 = np.zeros(0, np.uint8)


def _sk():
    from . import _sketch_kernels
    return _sketch_kernels


def _pow2_at_least(x: int) -> int:
    t = 8
    while t < x:
        t *= 2
    return t


def _span(x, n):
    return _I64 if x is None else np.ascontiguousarray(x, np.int64)


def take_rows(batch: Batch, rows: np.ndarray) -> Batch:
    """Rows ``rows`` of ``batch`` as a compact new batch that owns its feature-name bytes
    (only the byte range its spans use is copied; spans are re-based)."""
    rows = np.asarray(rows, np.int64)
    starts = batch.offsets[rows]
    ends = batch.offsets[rows + 1]
    counts = ends - starts
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    ent = (np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])) if len(rows) else _I64
    ent = ent.astype(np.int64)
    kw = {}
    has_names = batch.name_start is not None and batch.text is not None
    if has_names and len(ent):
        ns, ne = batch.name_start[ent], batch.name_end[ent]
        ss = batch.ns_start[ent] if batch.ns_start is not None else np.full(len(ent), -1, np.int64)
        se = batch.ns_end[ent] if batch.ns_end is not None else np.full(len(ent), -1, np.int64)
        used = np.concatenate([ns[ns >= 0], ss[ss >= 0]])
        usedE = np.concatenate([ne[ns >= 0], se[ss >= 0]])
        lo = int(used.min()) if len(used) else 0
        hi = int(usedE.max()) if len(usedE) else 0
        kw = dict(text=np.array(batch.text[lo:hi], np.uint8),
                  name_start=np.where(ns >= 0, ns - lo, -1), name_end=np.where(ns >= 0, ne - lo, -1),
                  ns_start=np.where(ss >= 0, ss - lo, -1), ns_end=np.where(ss >= 0, se - lo, -1))
    return Batch(offsets, batch.indices[ent].copy(), batch.values[ent].copy(),
                 batch.labels[rows].copy(), batch.weights[rows].copy(),
                 lines=batch.lines[rows].copy(), source=batch.source, **kw)


def concat_keep_names(a: Batch, b: Batch) -> Batch:
    """``a`` followed by ``b``, keeping feature-name spans (texts are concatenated)."""
    offsets = np.concatenate([a.offsets, b.offsets[1:] + a.nnz])
    kw = {}
    if b.name_start is not None or a.name_start is not None:
        ta = a.text if a.text is not None else _U8
        tb = b.text if b.text is not None else _U8
        sh = len(ta)

        def sp(x, nnz, shift):
            if x is None:
                return np.full(nnz, -1, np.int64)
            x = np.asarray(x, np.int64)
            return np.where(x >= 0, x + shift, -1)

        kw = dict(text=np.concatenate([ta, tb]).astype(np.uint8),
                  name_start=np.concatenate([sp(a.name_start, a.nnz, 0), sp(b.name_start, b.nnz, sh)]),
                  name_end=np.concatenate([sp(a.name_end, a.nnz, 0), sp(b.name_end, b.nnz, sh)]),
                  ns_start=np.concatenate([sp(a.ns_start, a.nnz, 0), sp(b.ns_start, b.nnz, sh)]),
                  ns_end=np.concatenate([sp(a.ns_end, a.nnz, 0), sp(b.ns_end, b.nnz, sh)]))
    return Batch(offsets, np.concatenate([a.indices, b.indices]),
                 np.concatenate([a.values, b.values]), np.concatenate([a.labels, b.labels]),
                 np.concatenate([a.weights, b.weights]), lines=np.concatenate([a.lines, b.lines]),
                 source=b.source, **kw)


def hll_estimate(reg: np.ndarray) -> float:
    """HyperLogLog cardinality estimate (Flajolet et al. 2007, with the small- and
    large-range corrections for 32-bit hashes)."""
    m = reg.shape[0]
    alpha = 0.7213 / (1 + 1.079 / m)
    est = alpha * m * m / float(np.sum(np.ldexp(1.0, -reg.astype(np.int64))))
    zeros = int(np.count_nonzero(reg == 0))
    if est <= 2.5 * m and zeros:
        est = m * math.log(m / zeros)
    elif est > (1 << 32) / 30.0:
        est = -(2.0 ** 32) * math.log1p(-est / 2.0 ** 32)
    return est


_SKETCH_PARAMS = (
    Param("sketch_rows", int, 5, "Count Sketch rows (hash functions), R.", structural=True),
    Param("sketch_width", int, 0,
          "Count Sketch buckets per row, W (0: from --sketch_bytes, else 2^b / R).", structural=True),
    Param("sketch_bytes", int, 0,
          "Count Sketch memory budget in bytes (8 per cell, per class); sets W.", structural=True),
    Param("sketch_seed", int, 0, "Seed of the Count Sketch hash functions.", structural=True),
    Param("top_k", int, 1000, "Number of features kept (per class) in the top-k heap.",
          structural=True),
    Param("oaa", int, 0, "Multiclass with K classes (labels 1..K): one sketch + heap per class, "
          "softmax cross-entropy.", structural=True),
    Param("learning_rate", float, None,
          "Step size eta (bear: 0.1, mission: 0.01; adagrad: 0.1).", short="-l"),
    Param("step_schedule", ("constant", "inverse"), "constant",
          "Step schedule of bear/mission: constant, or inverse: eta * t0 / (t0 + t), t = minibatch count."),
    Param("t0", float, 100.0, "T0 of --step_schedule inverse."),
)


class SketchLearner(Learner):
    """Shared state and plumbing of BEAR and MISSION (see the module docstring)."""

    PARAMS = _SKETCH_PARAMS
    default_lr = 0.01
    default_minibatch = 1
    wants_names = True  # readers keep feature-name spans so the heap can capture names

    def __init__(self, **hyper):
        super().__init__(**hyper)
        h = self.hyper
        K = int(h["oaa"])
        if K < 0 or K == 1:
            raise ValueError("--oaa must be 0 (binary / regression) or at least 2")
        self.n_classes = K
        self.multiclass = K > 0
        self.kc = max(1, K)
        R = int(h["sketch_rows"])
        if R < 1:
            raise ValueError("--sketch_rows must be at least 1")
        W, B = int(h["sketch_width"]), int(h["sketch_bytes"])
        if W and B:
            raise ValueError("give --sketch_width or --sketch_bytes, not both")
        if W <= 0:
            W = B // (8 * R * self.kc) if B > 0 else (1 << self.bits) // R
        if W < 1 or W >= 1 << 32:
            raise ValueError(f"sketch width {W} out of range (1 .. 2^32-1)")
        self.R, self.W = R, W
        k = int(h["top_k"])
        if k < 1:
            raise ValueError("--top_k must be at least 1")
        self.k = k
        self.sketch = lazy_zeros((self.kc, R, W), np.float64)  # untouched pages never resident
        self.seeds = np.zeros((R, 2), np.uint32)  # [row, 0] bucket seed, [row, 1] sign seed
        import mmh3  # only a few seeds, computed once
        # --random_seed (0 by default: the hash functions of --sketch_seed alone) moves every one
        seed = (int(h["sketch_seed"]) + 0x9E3779B1 * int(h["random_seed"])) & 0xFFFFFFFF
        for r in range(R):
            for role in range(2):
                self.seeds[r, role] = mmh3.hash(struct.pack("<II", r, role), seed, signed=False)
        T = _pow2_at_least(2 * k)
        self.hkeys = np.zeros((self.kc, k), np.uint32)
        self.hw = np.zeros((self.kc, k), np.float64)
        self.htpos = np.zeros((self.kc, k), np.int32)
        self.hname = np.tile(np.arange(k, dtype=np.int32), (self.kc, 1))
        self.htbl = np.full((self.kc, T), -1, np.int32)
        self.hsize = np.zeros(self.kc, np.int64)
        self.names = np.zeros((self.kc, k, NAME_BYTES), np.uint8)
        self.name_len = np.zeros((self.kc, k), np.int32)
        self.hll = np.zeros(1 << HLL_BITS, np.uint8)
        self.counters = np.zeros(4, np.int64)  # t, ring head, ring count, pairs rejected
        self.lrange = np.zeros(2, np.float64)  # squared loss: label range learned so far
        self._pending: Batch | None = None
        self._apply_hyper()

    # -- hyper-parameters ---------------------------------------------------------------------
    def _apply_hyper(self):
        lr = self.hyper["learning_rate"]
        self.eta = float(self.default_lr if lr is None else lr)
        mb = self.hyper.get("minibatch")
        self.b = int(self.default_minibatch if mb is None else mb)
        if self.b < 1:
            raise ValueError("--minibatch must be at least 1")
        self.schedule = 0 if self.hyper["step_schedule"] == "constant" else 1
        self.t0 = float(self.hyper["t0"])
        if self.schedule and self.t0 <= 0:
            raise ValueError("--t0 must be positive")

    @property
    def loss_code(self) -> int:
        return 3 if self.multiclass else self.loss.code

    @property
    def loss_name(self) -> str:
        return "softmax" if self.multiclass else self.loss.name  # --oaa: softmax cross-entropy

    # -- learning -----------------------------------------------------------------------------
    def bad_labels(self, labels):
        """Rows whose label is not a class id 1..K (``--oaa K``; unlabeled rows are fine)."""
        if not self.multiclass:
            return None
        with np.errstate(invalid="ignore"):
            ok = np.isnan(labels) | ((labels == np.floor(labels)) & (labels >= 1) & (labels <= self.n_classes))
        return ~ok

    def label_problem(self, label) -> str:
        return f"label {label:g} is not a class of --oaa {self.n_classes} (1..{self.n_classes})"

    def _check_labels(self, labels):
        bad = self.bad_labels(labels)
        if bad is not None and bad.any():
            raise ValueError(self.label_problem(labels[np.flatnonzero(bad)[0]]))

    def _call(self, batch, learn, flush, skip):  # pragma: no cover - implemented by subclasses
        raise NotImplementedError

    def _kernel_args(self, batch):
        has = batch.name_start is not None and batch.text is not None
        text = np.ascontiguousarray(batch.text, np.uint8) if has else _U8
        return (np.ascontiguousarray(batch.offsets, np.int64), np.ascontiguousarray(batch.indices, np.uint32),
                np.ascontiguousarray(batch.values, np.float64), np.ascontiguousarray(batch.labels, np.float64),
                np.ascontiguousarray(batch.weights, np.float64), text,
                _span(batch.name_start, 0) if has else _I64, _span(batch.name_end, 0) if has else _I64,
                _span(batch.ns_start, 0) if has and batch.ns_start is not None else _I64,
                _span(batch.ns_end, 0) if has and batch.ns_end is not None else _I64)

    def learn_batch(self, batch):
        """Progressive validation (predict, record, learn) over ``batch``; see the module
        docstring for minibatches that straddle calls."""
        self._check_labels(batch.labels)
        skip = 0
        work = batch
        if self._pending is not None and self._pending.n:
            skip = self._pending.n
            work = concat_keep_names(self._pending, batch)
        pred, loss, pend = self._call(work, True, False, skip)
        self._pending = take_rows(work, pend) if len(pend) else None
        return pred[skip:], loss[skip:]

    def predict_batch(self, batch):
        self._check_labels(batch.labels)
        pred, loss, _ = self._call(batch, False, False, 0)
        return pred, loss

    def finish(self) -> None:
        """Learn the buffered partial minibatch (end of the stream or of a pass)."""
        if self._pending is not None and self._pending.n:
            p = self._pending
            self._pending = None
            self._call(p, True, True, p.n)

    @property
    def pending_rows(self) -> int:
        return 0 if self._pending is None else self._pending.n

    # -- selection ----------------------------------------------------------------------------
    def top_features(self, refresh: bool = True):
        """The heap members of every class as ``(cls, hashes, weights, names)``, each class's
        members sorted by ``|weight|`` descending; with ``refresh`` the weights are QUERYed
        from the sketch now (a member's heap weight dates from its last minibatch). ``cls`` is
        0-based; names are ``str`` (``""`` if unknown; a trailing ``"..."`` marks truncation)."""
        cls_l, keys_l, w_l, names = [], [], [], []
        for c in range(self.kc):
            n = int(self.hsize[c])
            keys = self.hkeys[c, :n].copy()
            w = self.hw[c, :n].copy()
            if refresh and n:
                _sk().sketch_query_keys(self.sketch[c], self.seeds, keys, w)
            order = np.lexsort((keys, -np.abs(w)))
            for s in order:
                nid = int(self.hname[c, s])
                L = int(self.name_len[c, nid])
                raw = bytes(self.names[c, nid, :min(L, NAME_BYTES)])
                nm = raw.decode("utf-8", "replace") + ("..." if L > NAME_BYTES else "")
                names.append(nm)
            cls_l.append(np.full(n, c, np.int64))
            keys_l.append(keys[order])
            w_l.append(w[order])
        return (np.concatenate(cls_l), np.concatenate(keys_l), np.concatenate(w_l), names)

    def query(self, hashes, cls: int = 0) -> np.ndarray:
        """QUERY the sketch of class ``cls`` (0-based) for the given 32-bit hashes."""
        keys = np.ascontiguousarray(hashes, np.uint32)
        out = np.empty(len(keys))
        _sk().sketch_query_keys(self.sketch[cls], self.seeds, keys, out)
        return out

    # -- summary ------------------------------------------------------------------------------
    @property
    def sketch_cells(self) -> int:
        return int(self.sketch.size)

    def distinct_features(self) -> float:
        return hll_estimate(self.hll)

    def extra_summary(self) -> dict:
        d = self.distinct_features()
        out = {
            "sketch": f"{self.R} x {self.W}" + (f" x {self.kc} classes" if self.multiclass else ""),
            "sketch_bytes": int(self.sketch.nbytes),
            "distinct_features": int(round(d)),
            "compression_factor": round(d / self.sketch_cells, 4),
            "top_k": self.k,
            "heap_size": int(self.hsize.sum()),
            "iterations": int(self.counters[0]),
        }
        return out

    # -- state --------------------------------------------------------------------------------
    _STATE = ("sketch", "seeds", "hkeys", "hw", "htpos", "hname", "htbl", "hsize", "names",
              "name_len", "hll", "counters")

    def _arrays(self):
        a = {k: getattr(self, k) for k in self._STATE}
        a["lrange"] = self.lrange
        p = self._pending
        if p is None:
            from ..batch import empty_batch
            p = empty_batch()
        has = p.name_start is not None and p.text is not None
        a.update({
            "pend_offsets": np.asarray(p.offsets, np.int64), "pend_indices": np.asarray(p.indices, np.uint32),
            "pend_values": np.asarray(p.values, np.float64), "pend_labels": np.asarray(p.labels, np.float64),
            "pend_weights": np.asarray(p.weights, np.float64), "pend_lines": np.asarray(p.lines, np.int64),
            "pend_text": np.asarray(p.text, np.uint8) if has else _U8,
            "pend_name_start": _span(p.name_start, 0) if has else _I64,
            "pend_name_end": _span(p.name_end, 0) if has else _I64,
            "pend_ns_start": _span(p.ns_start, 0) if has and p.ns_start is not None else _I64,
            "pend_ns_end": _span(p.ns_end, 0) if has and p.ns_end is not None else _I64,
        })
        return a

    def _load_arrays(self, arrays):
        for k in self._STATE:
            a = np.asarray(arrays[k])
            cur = getattr(self, k)
            if a.shape != cur.shape or a.dtype != cur.dtype:
                raise ValueError(f"array {k}: shape/dtype {a.shape}/{a.dtype} does not fit "
                                 f"{cur.shape}/{cur.dtype}")
            setattr(self, k, lazy_copy(a) if k == "sketch" else np.array(a, copy=True))
        lr = np.asarray(arrays.get("lrange", np.zeros(2)), np.float64)  # absent before 0.1.0's issue 6
        if lr.shape != (2,):
            raise ValueError("array lrange: shape does not fit (2,)")
        self.lrange = lr.copy()
        off = np.array(arrays["pend_offsets"], np.int64)
        if len(off) > 1:
            kw = {}
            if len(arrays["pend_name_start"]):
                kw = dict(text=np.array(arrays["pend_text"], np.uint8),
                          name_start=np.array(arrays["pend_name_start"], np.int64),
                          name_end=np.array(arrays["pend_name_end"], np.int64))
                if len(arrays["pend_ns_start"]):
                    kw.update(ns_start=np.array(arrays["pend_ns_start"], np.int64),
                              ns_end=np.array(arrays["pend_ns_end"], np.int64))
            self._pending = Batch(off, np.array(arrays["pend_indices"], np.uint32),
                                  np.array(arrays["pend_values"], np.float64),
                                  np.array(arrays["pend_labels"], np.float64),
                                  np.array(arrays["pend_weights"], np.float64),
                                  lines=np.array(arrays["pend_lines"], np.int64), **kw)
        else:
            self._pending = None


class Mission(SketchLearner):
    """MISSION: minibatch SGD whose weights live in a Count Sketch; predictions and the
    selected features come from the top-k heap."""

    name = "mission"
    PARAMS = _SKETCH_PARAMS + (
        Param("minibatch", int, None, "Minibatch size b of bear/mission (bear: 10, mission: 1)."),
    )
    default_lr = 0.01
    default_minibatch = 1

    def _call(self, batch, learn, flush, skip):
        a = self._kernel_args(batch)
        n = batch.n
        pred = np.empty(n)
        loss = np.empty(n)
        pend = np.empty(n + 1, np.int64)
        learned, npend = _mk().mission_run(
            *a, self.sketch, self.seeds, self.hkeys, self.hw, self.htpos, self.hname, self.htbl,
            self.hsize, self.names, self.name_len, self.hll, self.counters, self.loss_code,
            self.eta, self.schedule, self.t0, self.b, learn, flush, skip, pred, loss, pend, self.lrange)
        self.examples_learned += int(learned)
        return pred, loss, pend[:npend]


def _mk():
    from . import _mission_kernels
    return _mission_kernels
