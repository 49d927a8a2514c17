"""The Count-Sketch learners' base (``--algo bear``, ``--algo mission``): :class:`SketchLearner`.

Shared by BEAR (Aghazadeh et al., "BEAR: Sketching BFGS Algorithm for Ultra-High Dimensional
Feature Selection in Sublinear Memory") and MISSION (Aghazadeh et al., ICML 2018, BEAR's
first-order baseline):

* the weights live in a Count Sketch (``--sketch_rows`` x ``--sketch_width`` float64 cells,
  or sized by ``--sketch_bytes``), keyed by the **full 32-bit feature hash** (``-b`` is not
  used for indexing; without a size option the sketch gets ``2**min(b, 26)`` cells in all);
* a top-k heap (``--top_k``) holds the features with the largest ``|weight|`` with their
  original ``namespace^name`` (captured when a feature enters the heap, at most
  ``NAME_BYTES`` = 64 bytes each; longer names are truncated), so memory is O(sketch + k);
* predictions use only the top-k features: ``p = sum over x's features in the top-k of
  QUERY(h) * x_h`` (as in the paper; NOTES_BEAR item 6), plus the intercept: the constant
  feature's weight (VW's constant hash, ``batch.CONSTANT_HASH``; absent with ``--noconstant``) is
  kept apart, one float per class outside the sketch and the heap, learned by the same update as
  the other coordinates and used in every prediction. The papers' models have no intercept; as
  a heap member it would compete for a slot, and out of the heap its weight is learned while the
  model does not use it (issue 21: on rcv1 one sketch seed ended with the constant entering the
  heap late with a large weight, predicting 93% positive). Models saved before keep the constant
  as a feature like any other (``meta.intercept`` absent: ``"heap"``);
* learning runs on minibatches of ``--minibatch`` labeled examples with the mean gradient;
  every example is predicted with the model as it is before its minibatch's update
  (progressive validation; one driver, ``_sketch_kernels.minibatch_run``). A minibatch may
  straddle calls to :meth:`~SketchLearner.learn_batch`: its first part is buffered (with its
  feature names) and :meth:`~SketchLearner.finish` learns a final partial minibatch, so results
  never depend on how the stream is cut into batches;
* ``--oaa K``: K classes, one sketch + heap per class, softmax cross-entropy (the paper's
  multi-class extension); ``pred`` is the class id 1..K, ``loss`` the cross-entropy.

A learner of the family declares its parameters (``SKETCH_PARAMS`` + its own), its kernel
module (``kernels``, with ``<name>_run``) and its hyper-parameter tuple (:meth:`_hyper_tuple`);
its own state beyond :class:`~streamlearn.algos._sketch_kernels.SketchState` (BEAR's ring of
pairs) goes through :meth:`_extra_state` / :meth:`_set_extra_state`.
"""
from __future__ import annotations

import copy
import math
import struct

import numpy as np

from ..batch import CONSTANT_HASH, Batch, concat_batches, empty_batch, unit_norm_rows
from ..kernels import kernel_array, kernel_batch, lazy
from ..memory import MovedAxis, physical_memory
from .base import COMMON_PARAMS, Learner, Param, adopt, lazy_zeros, require

__all__ = ["SketchLearner", "SKETCH_PARAMS", "MINIBATCH_PARAM", "NAME_BYTES", "HLL_BITS", "hll_estimate"]

NAME_BYTES = 64  # = _sketch_kernels.NAME_BYTES (kept here so importing needs no numba)
HLL_BITS = 12
#: without --sketch_width / --sketch_bytes the sketch has 2^min(b, this) cells (2^26: 512 MiB)
DEFAULT_CELLS_BITS = 26
#: --top_k when not given (and no learner's --oaa default applies: SketchLearner.default_top_k_oaa)
DEFAULT_TOP_K = 1000
#: a Count Sketch (or its count-min of squared gradients) of at most this many bytes is allocated
#: as numpy does (transparent huge pages where the kernel gives them, THP "madvise"), a larger one
#: with small pages (:func:`~streamlearn.memory.lazy_zeros`: untouched pages never resident). Every
#: QUERY / ADD of a feature reads R cells on R random pages: with 4 kB pages each is a TLB miss
#: (a page walk, nested under a hypervisor), which huge pages make rare. The cost: a sketch this
#: small may become fully resident even if it is sparsely used (a loaded model's is anyway).
HUGE_PAGE_SKETCH_BYTES = 64 << 20
_I64 = np.zeros(0, np.int64)
_U8 = np.zeros(0, np.uint8)
#: The pending minibatch's arrays in a model file: ``pend_<field>``.
_PEND_FIELDS = ("offsets", "indices", "values", "labels", "weights", "lines", "text",
                "name_start", "name_end", "ns_start", "ns_end")
_PEND_DTYPES = (np.int64, np.uint32, np.float64, np.float64, np.float64, np.int64, np.uint8,
                np.int64, np.int64, np.int64, np.int64)

_kernels = lazy("streamlearn.algos._sketch_kernels")


def _pow2_at_least(x: int) -> int:
    t = 8
    while t < x:
        t *= 2
    return t


def _spans(batch: Batch):
    """The batch's feature-name spans as the kernels take them (empty arrays where absent)."""
    if batch.name_start is None or batch.text is None:
        return _kernels.Spans(_U8, _I64, _I64, _I64, _I64)
    ns = batch.ns_start is not None

    def i64(x):
        return kernel_array(x, np.int64)

    return _kernels.Spans(kernel_array(batch.text, np.uint8), i64(batch.name_start),
                          i64(batch.name_end), i64(batch.ns_start) if ns else _I64,
                          i64(batch.ns_end) if ns else _I64)


def _sketch_zeros(shape) -> np.ndarray:
    """A zero float64 sketch of ``shape``: on huge pages up to :data:`HUGE_PAGE_SKETCH_BYTES`, else
    :func:`lazy_zeros`."""
    n = 8 * math.prod(shape)
    return np.zeros(shape, np.float64) if n <= HUGE_PAGE_SKETCH_BYTES else lazy_zeros(shape, np.float64)


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


SKETCH_PARAMS = (
    Param("sketch_rows", int, 5, "Count Sketch rows (hash functions), R.", structural=True, low=1, high=64,
          why="every feature of every example costs R sketch updates"),
    Param("sketch_width", int, 0,
          "Count Sketch buckets per row, W (0: from --sketch_bytes, else 2^min(b,26) / R).", structural=True,
          low=0, high=2**32 - 1, why="buckets are a 32-bit hash modulo W"),
    Param("sketch_bytes", int, 0,
          "Count Sketch memory budget in bytes (8 per cell, per class); sets W.", structural=True, low=0),
    Param("sketch_seed", int, 0, "Seed of the Count Sketch hash functions.", structural=True,
          low=0, high=2**64 - 1),
    Param("top_k", int, None, "Number of features kept (per class) in the top-k heap (default 1000; bear and "
          "mission with --oaa K: 6000).",
          structural=True, low=1, high=1_000_000, why="the heap's arrays and names, ~100 bytes per entry and class",
          absent=DEFAULT_TOP_K),  # a model stores its top-k; one without: the only default until 2026-11-27
    Param("learning_rate", float, None,
          "Step size eta (bear: 0.1, 1 with --oaa K on unit-norm examples; mission: 0.01, 0.6 with --oaa K on "
          "unit-norm examples; adagrad: 0.1).", short="-l", low=0, low_open=True),
    Param("step_schedule", ("constant", "inverse"), "constant",
          "Step schedule of bear/mission: constant, or inverse: eta * t0 / (t0 + t), t = minibatch count."),
    Param("t0", float, 100.0, "T0 of --step_schedule inverse.", low=0, low_open=True),
    Param("no_clip", bool, False,
          "Squared loss: take the gradient at the raw score, not at the score clipped to the range of the "
          "labels learned so far (the default, as VW clips; it keeps extreme feature values from making "
          "the steps grow geometrically). bear's curvature pairs always use the unclipped gradient."),
)
SKETCH_PARAMS += (
    Param("example_norm", ("auto", "unit", "none"), "auto",
          "bear/mission: scale each example's feature values to unit L2 norm inside the learner (unit; as "
          "--unit_norm, saved with the model) or not (none). auto: unit for bear (binary runs: models saved "
          "before 2026-11-27 none) and for mission with --oaa K, none for binary mission "
          "(benchmarks/bear_defaults.py --example_norm). With "
          "unit under --oaa the step defaults are --step_rule adagrad, --learning_rate 0.6 and --top_k 6000 "
          "(mission; models saved before 2026-11-27: sgd, -l 3, or -l 1 before that) and --minibatch 1, "
          "--initial_scaling adagrad, --learning_rate 1, --curvature_damping 1 and --top_k 6000 (bear; models "
          "saved before 2026-11-28: gamma, -l 0.1, damping 0.01, top-k 1000) "
          "(benchmarks/bear_multiclass.py).", structural=True,
          absent="none"),  # models saved before it continue unscaled, with the old defaults
)
MINIBATCH_PARAM = Param("minibatch", int, None, "Minibatch size b of bear/mission (bear: 10, mission: 1; "
                        "bear with --oaa and unit examples: 1).",
                        low=1, high=65536, why="a minibatch's examples are held in memory until it is learned")


class SketchLearner(Learner):
    """Shared state and plumbing of BEAR and MISSION (see the module docstring). The arrays of
    :class:`~streamlearn.algos._sketch_kernels.SketchState` are attributes of the same names."""

    PARAMS = SKETCH_PARAMS
    default_lr = 0.01
    default_minibatch = 1
    wants_names = True  # readers keep feature-name spans so the heap can capture names
    selects_features = True
    native_multiclass = True  # --oaa K: per-class sketches + softmax, not the one-against-all reduction
    #: The learner's kernel module (``lazy(...)``) and the name of its run kernel there.
    kernels = None
    run_kernel = ""

    #: ``--top_k``'s default with ``--oaa K`` (None: the option's default); a model stores its top-k
    default_top_k_oaa = None

    @classmethod
    def _top_k_default(cls, hyper: dict) -> dict:
        """``hyper`` with ``top_k`` set to :attr:`default_top_k_oaa` when it is not given and ``--oaa K``
        is (the saved hyper-parameters then hold it, so models continue with their own)."""
        if hyper.get("top_k") is None and hyper.get("oaa") and cls.default_top_k_oaa is not None:
            return dict(hyper, top_k=cls.default_top_k_oaa)
        return hyper

    def __init__(self, **hyper):
        super().__init__(**hyper)
        h = self.hyper
        K, self.kc, R, W, k = self._dims(h)  # (top_k not given: resolved there)
        h["top_k"] = k  # saved resolved: a model keeps its heap size whatever the defaults become
        self.n_classes = K
        self.multiclass = K > 0
        ram = physical_memory()
        if ram is not None and 8 * self.kc * R * W > ram:
            # larger than this machine's memory: refused as the failed allocation would be (the
            # caller's usage error, api.make_learner), also where overcommit lets it succeed
            raise MemoryError(f"Count Sketch of {8 * self.kc * R * W} bytes > {ram} bytes of memory")
        self.R, self.W = R, W
        self.k = k
        # (R, W, K): a feature's K class cells of a row adjacent (one QUERY / ADD of all classes
        # touches R cache-line groups); saved as (K, R, W) (_arrays). Untouched pages never resident.
        self.sketch = _sketch_zeros((R, W, self.kc))
        self.seeds = self._seeds()  # [row, 0] bucket seed, [row, 1] sign seed
        T = _pow2_at_least(2 * k)
        self.hkeys = np.zeros((self.kc, k), np.uint32)
        self.hw = np.zeros((self.kc, k), np.float64)
        self.htpos = np.zeros((self.kc, k), np.int32)
        self.hname = np.tile(np.arange(k, dtype=np.int32), (self.kc, 1))
        # the position maps as the kernels keep them (_sketch_kernels): entries slot << 32 | hash, the
        # classes interleaved, (T, K), built at first use (a loaded model's from its file's htbl); model
        # files hold htbl, (K, T) heap slots (a property)
        self._T = T
        self._htk = None
        self.hsize = np.zeros(self.kc, np.int64)
        self.names = np.zeros((self.kc, k, NAME_BYTES), np.uint8)
        self.name_len = np.zeros((self.kc, k), np.int32)
        self.hll = np.zeros(1 << HLL_BITS, np.uint8)
        self.counters = np.zeros(4, np.int64)  # t, ring head, ring count, pairs rejected
        self.lrange = np.zeros(2, np.float64)  # squared loss: label range learned so far
        self.intercept = np.zeros(self.kc, np.float64)  # the constant feature's weight per class
        #: the intercept kept apart (False: a model saved before, the constant a heap feature)
        self.keep_intercept = True
        self.step_defaults = self.STEP_DEFAULTS  # a loaded model: the version it was trained with
        self._pending: Batch | None = None
        self.probabilities = False
        self.last_probabilities = None
        self._apply_hyper()

    @classmethod
    def _dims(cls, hyper):
        """``(K, kc, R, W, k)`` of the hyper-parameters (``ValueError`` when out of range):
        ``--oaa K`` (0: binary), ``kc = max(1, K)`` sketches and heaps, ``R x W`` cells each,
        heaps of ``k``."""
        h = {p.name: p.default for p in COMMON_PARAMS + cls.PARAMS}
        h.update({n: v for n, v in cls._top_k_default(hyper).items() if v is not None})
        K = int(h["oaa"] or 0)  # --oaa is a common option (base.COMMON_PARAMS)
        if K < 0 or K == 1:
            raise ValueError("--oaa must be 0 (binary / regression) or at least 2")
        kc = max(1, K)
        R = int(h["sketch_rows"])
        if R < 1:
            raise ValueError("--sketch_rows must be at least 1")
        W, B = int(h["sketch_width"]), int(h["sketch_bytes"])
        if W < 0 or B < 0:
            raise ValueError("--sketch_width and --sketch_bytes must be >= 0 (0: not given)")
        if W and B:
            raise ValueError("give --sketch_width or --sketch_bytes, not both")
        if W <= 0:
            bits = int(h["bit_precision"])
            W = B // (8 * R * kc) if B > 0 else (1 << min(max(bits, 1), DEFAULT_CELLS_BITS)) // R
        if W < 1 or W >= 1 << 32:
            if int(h["sketch_width"]) > 0:
                how = "--sketch_width"
            elif B > 0:
                how = f"--sketch_bytes {B} / (8 bytes x {R} rows x {kc} sketches)"
            else:
                how = f"2^{int(h['bit_precision'])} cells (-b) / {R} rows (--sketch_rows)"
            raise ValueError(f"sketch width {W} out of range (1 .. 2^32-1): {how}; give a larger -b, --sketch_bytes "
                             "or --sketch_width, or fewer --sketch_rows")
        k = DEFAULT_TOP_K if h["top_k"] is None else int(h["top_k"])
        if k < 1:
            raise ValueError("--top_k must be at least 1")
        return K, kc, R, W, k

    def _seeds(self) -> np.ndarray:
        """The Count Sketch's hash seeds, ``(R, 2)``: ``[row, 0]`` bucket, ``[row, 1]`` sign."""
        import mmh3  # only a few seeds, computed once
        h = self.hyper
        seeds = np.zeros((self.R, 2), np.uint32)
        # --random_seed (0 by default: the hash functions of --sketch_seed alone) moves every one
        seed = (int(h["sketch_seed"]) + 0x9E3779B1 * int(h["random_seed"])) & 0xFFFFFFFF
        for r in range(self.R):
            for role in range(2):
                seeds[r, role] = mmh3.hash(struct.pack("<II", r, role), seed, signed=False)
        return seeds

    def _check_counters(self) -> None:
        """Learner-specific checks of a loaded ``counters`` (BEAR: the ring's head and count)."""

    def _check_pending(self, pend: dict) -> None:
        """Check the saved pending minibatch (rows learned by the next call) and keep it."""
        off, nnz = pend["offsets"], len(pend["indices"])
        n = len(off) - 1
        require(off[0] == 0 and off[-1] == nnz and (np.diff(off) >= 0).all() and len(pend["values"]) == nnz,
                "pending minibatch: offsets do not fit its indices / values")
        for f in ("labels", "weights", "lines"):
            require(len(pend[f]) == n, f"pending minibatch: {f} has {len(pend[f])} rows, not {n}")
        lab, wt = pend["labels"], pend["weights"]
        require(not np.isnan(lab).any() and (self.bad_labels(lab) is None or not self.bad_labels(lab).any()),
                "pending minibatch: a label the learner cannot learn from")
        require((wt >= 0).all(), "pending minibatch: a negative importance weight")
        kw = {}
        if len(pend["name_start"]):
            L = len(pend["text"])
            for a, b in (("name_start", "name_end"), ("ns_start", "ns_end")):
                st, en = pend[a], pend[b]
                if a == "ns_start" and not len(st) and not len(en):
                    continue
                require(len(st) == nnz and len(en) == nnz, f"pending minibatch: {a} / {b} do not fit its entries")
                known = st >= 0
                require(((st >= -1) & (~known | ((st <= en) & (en <= L)))).all(),
                        f"pending minibatch: {a} / {b} outside its text")
            kw = {f: pend[f] for f in ("text", "name_start", "name_end")}
            if len(pend["ns_start"]):
                kw.update(ns_start=pend["ns_start"], ns_end=pend["ns_end"])
        else:
            require(not len(pend["ns_start"]) and not len(pend["name_end"]),
                    "pending minibatch: namespace spans without name spans")
        self._pending = Batch(*(pend[f] for f in _PEND_FIELDS[:5]), lines=pend["lines"], **kw)

    # -- hyper-parameters ---------------------------------------------------------------------
    @classmethod
    def check_options(cls, given):
        if given.get("oaa") and "loss_function" in given:
            raise ValueError("--loss_function does not apply with --oaa (multiclass uses softmax "
                             "cross-entropy)")

    #: defaults of --learning_rate / --minibatch for --oaa K on unit-norm examples (None: as above)
    default_lr_unit_oaa = None
    default_minibatch_unit_oaa = None
    #: version of the step defaults above; a model records the version it was trained with (meta
    #: ``step_defaults``, written when above 1; absent: 1), so that a model trained without ``-l``
    #: continues with the step it was trained with after a default changes
    STEP_DEFAULTS = 1
    #: ``default_lr_unit_oaa`` of earlier versions (version -> step)
    default_lr_unit_oaa_before: dict = {}
    #: the step-defaults version from which ``--example_norm auto`` is unit for binary runs too (None: never)
    unit_binary_from = None

    def _apply_hyper(self):
        norm = self.hyper.get("example_norm") or "auto"
        ub = self.unit_binary_from
        self.unit = norm == "unit" or (norm == "auto" and (self.multiclass or (ub is not None and self.step_defaults >= ub)))
        mc = self.unit and self.multiclass
        lr = self.hyper["learning_rate"]
        unit_lr = self.default_lr_unit_oaa_before.get(self.step_defaults, self.default_lr_unit_oaa)
        dlr = unit_lr if mc and unit_lr is not None else self.default_lr
        self.eta = float(dlr if lr is None else lr)
        mb = self.hyper.get("minibatch")
        dmb = self.default_minibatch_unit_oaa if mc and self.default_minibatch_unit_oaa is not None \
            else self.default_minibatch
        self.b = int(dmb if mb is None else mb)
        if self.b < 1:
            raise ValueError("--minibatch must be at least 1")
        self.schedule = 0 if self.hyper["step_schedule"] == "constant" else 1
        self.t0 = float(self.hyper["t0"])
        self.clip = not self.hyper.get("no_clip")
        if self.schedule and self.t0 <= 0:
            raise ValueError("--t0 must be positive")

    def step_settings(self) -> dict:
        """The step settings the hyper-parameters resolve to under this learner's step-defaults
        version (``merge`` compares them between models of different versions)."""
        return {"--learning_rate": self.eta, "--minibatch": self.b}

    @property
    def const_key(self) -> int:
        """The kernels' ``const_key``: the constant feature's hash when the intercept is kept apart,
        else -1."""
        return CONSTANT_HASH if self.keep_intercept else -1

    def _extra_meta(self):
        out = {"intercept": "kept" if self.keep_intercept else "heap"}
        if self.step_defaults > 1:
            out["step_defaults"] = self.step_defaults
        return out

    def _load_extra_meta(self, meta):
        mode = meta.get("intercept", "heap")  # saved before the intercept was kept apart: in the heap
        require(mode in ("kept", "heap"), f"meta.intercept = {mode!r} is not 'kept' or 'heap'")
        self.keep_intercept = mode == "kept"
        v = meta.get("step_defaults", 1)  # saved before the step defaults changed: the first ones
        require(type(v) is int and 1 <= v <= self.STEP_DEFAULTS,
                f"meta.step_defaults = {v!r} is not a version 1..{self.STEP_DEFAULTS} of {self.name}'s step defaults")
        self.step_defaults = v
        self._apply_hyper()

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

    # -- kernel state -------------------------------------------------------------------------
    #: the most classes a class membership map serves (one bit each of a uint64)
    MASK_MAX_CLASSES = 64  # = _mission_kernels.MASK_MAX_CLASSES (here so that importing needs no numba)

    def _stale_membership(self) -> None:
        """The class membership map (``--oaa K``, K <= 64; else none; kept by the run kernel, see
        :mod:`._mission_kernels`), marked stale: the run kernel rebuilds it from the heaps before its
        first minibatch. Derived state, never saved."""
        on = self.multiclass and self.kc <= self.MASK_MAX_CLASSES
        self.mkeys = np.zeros(1024 if on else 0, np.uint32)
        self.mmask = np.zeros(self.mkeys.shape[0], np.uint64)
        self.mcount = np.full(1, -1, np.int64)

    def membership(self) -> dict:
        """The class membership map as ``{hash: mask}`` (bit c: class c's heap holds the feature;
        tests), or ``None`` when there is none or it is stale (rebuilt at the next minibatch)."""
        if self.mkeys.shape[0] == 0 or self.mcount[0] < 0:
            return None
        occ = self.mmask != 0
        return dict(zip(self.mkeys[occ].tolist(), self.mmask[occ].tolist()))

    @property
    def htk(self) -> np.ndarray:
        """``(T, K)`` int64: the heaps' position maps as the kernels keep them, entries ``slot << 32 |
        hash`` (-1: empty), a feature's home entries of every class adjacent (empty maps at first use)."""
        if self._htk is None:
            self._htk = np.full((self._T, self.kc), -1, np.int64)
        return self._htk

    @property
    def htbl(self) -> np.ndarray:
        """``(K, T)`` int32: the position maps as model files hold them, each entry a heap slot or -1 (a copy)."""
        t = self.htk.T
        return np.where(t < 0, -1, t >> 32).astype(np.int32)

    def _set_table(self, htbl) -> None:
        """The kernels' position maps from a model file's ``htbl`` (checked: every entry -1 or a member's
        slot) and the heaps' keys."""
        self._htk = None
        tk = np.full((htbl.shape[1], self.kc), -1, np.int64)
        for c in range(self.kc):  # class by class: small temporaries (loading costs about the file's size)
            at = np.flatnonzero(htbl[c] >= 0)
            slots = htbl[c, at].astype(np.int64)
            tk[at, c] = (slots << 32) | self.hkeys[c, slots].astype(np.int64)
        self._htk = tk

    def _state(self):
        """The :class:`~streamlearn.algos._sketch_kernels.SketchState` of the attributes."""
        return _kernels.SketchState(*(getattr(self, f) for f in _kernels.SketchState._fields))

    def _hyper_tuple(self):  # pragma: no cover - implemented by subclasses
        """The learner's hyper-parameter tuple (its type selects its minibatch update)."""
        raise NotImplementedError

    def _extra_state(self):
        """The learner's own kernel state beyond the sketch (passed after it), or None."""
        return None

    def _set_extra_state(self, extra) -> None:
        """Keep what the run kernel returned as ``extra`` (e.g. reallocated arrays)."""

    def set_probabilities(self, on: bool = True) -> None:
        """``--probabilities`` with ``--oaa K``: each learn / predict call leaves the softmax of
        the class scores the prediction was made from (the model's own link, as the loss is the
        softmax cross-entropy) in ``last_probabilities`` (``(n, K)``)."""
        if on and not self.multiclass:
            raise ValueError("--probabilities is for multiclass runs (--oaa K)")
        self.probabilities = bool(on)

    def _call(self, batch, learn, flush, skip):
        n = batch.n
        pred = np.empty(n)
        loss = np.empty(n)
        pend = np.empty(n + 1, np.int64)
        scores = np.empty((n if self.probabilities else 0, self.kc))
        args = (*kernel_batch(batch), _spans(batch), self._state())
        extra = self._extra_state()
        if extra is not None:
            args += (extra,)
        out = getattr(self.kernels, self.run_kernel)(*args, self._hyper_tuple(), learn, flush, skip,
                                                     pred, loss, pend, scores)
        if extra is not None:
            self._set_extra_state(out[2])
        self.examples_learned += int(out[0])
        if self.probabilities and n > skip:  # (not finish(): nothing predicted there)
            scores = scores[skip:]  # rows < skip were predicted (and reported) by an earlier call
            e = np.exp(scores - scores.max(axis=1, keepdims=True))
            self.last_probabilities = e / e.sum(axis=1, keepdims=True)
        return pred, loss, pend[:out[1]]

    def _scaled(self, batch):
        """``batch`` with unit-norm rows (``--example_norm unit``; a shallow copy, the caller's
        values untouched), else ``batch``."""
        if not self.unit or batch.nnz == 0:
            return batch
        return unit_norm_rows(copy.copy(batch))

    def learn_batch(self, batch):
        """Progressive validation (predict, record, learn) over ``batch``; see the module
        docstring for minibatches that straddle calls."""
        self._check_labels(batch.labels)
        batch = self._scaled(batch)
        skip = 0
        work = batch
        if self._pending is not None and self._pending.n:
            skip = self._pending.n
            work = concat_batches([self._pending, batch], names=True)
        pred, loss, pend = self._call(work, True, False, skip)
        self._pending = work.take(pend) if len(pend) else None
        return pred[skip:], loss[skip:]

    def predict_batch(self, batch):
        self._check_labels(batch.labels)
        batch = self._scaled(batch)
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
                _kernels.sketch_query_class(self.sketch, c, self.seeds, keys, w)
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

    def audit_columns(self, hashes):
        """``[w]``: the Count Sketch's estimate (QUERY) of each feature's weight, keyed on the
        full 32-bit hash; ``[]`` under ``--oaa`` (one sketch per class)."""
        if self.multiclass:
            return []
        return [self.query(hashes)]

    def query(self, hashes, cls: int = 0) -> np.ndarray:
        """QUERY the sketch of class ``cls`` (0-based) for the given 32-bit hashes (the constant
        feature's: the intercept, when it is kept apart)."""
        keys = np.ascontiguousarray(hashes, np.uint32)
        out = np.empty(len(keys))
        _kernels.sketch_query_class(self.sketch, cls, self.seeds, keys, out)
        if self.keep_intercept:
            out[keys == CONSTANT_HASH] = self.intercept[cls]
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
            # weights of the model / cells that hold them: d / (R W) per class (K d / K R W)
            "compression_factor": round(d / (self.R * self.W), 4),
            "top_k": self.k,
            "heap_size": int(self.hsize.sum()),
            "iterations": int(self.counters[0]),
        }
        return out

    # -- state --------------------------------------------------------------------------------
    def _arrays(self):
        a = {f: getattr(self, f) for f in self._STATE_FIELDS}
        # the heaps' arrays a snapshot, consistent with htbl (a copy of the kernels' packed maps, which
        # learning on goes on changing)
        for f in ("hkeys", "hw", "htpos", "hname", "hsize", "names", "name_len"):
            a[f] = a[f].copy()
        if not self.keep_intercept:  # a model saved before: its format
            del a["intercept"]
        a["sketch"] = self.saved_sketch()
        p = self._pending if self._pending is not None else empty_batch()
        spans = _spans(p)
        for f, dt in zip(_PEND_FIELDS, _PEND_DTYPES):
            x = getattr(spans, f) if f in spans._fields else getattr(p, f)
            a["pend_" + f] = np.asarray(x, dt)
        return a

    # -- per-feature AdaGrad sums (mission --step_rule adagrad, bear --initial_scaling adagrad) ----
    def _ensure_sq_sums(self, on: bool) -> None:
        """``acc``: the count-min sketch of squared gradients in the weight sketch's buckets,
        ``(R, W, K)`` (``(0, 0, K)`` when ``on`` is false), and ``iacc``: the intercept's sums, per
        class (Spring et al. 2019); kept when already of that shape."""
        shape = (self.R, self.W, self.kc) if on else (0, 0, self.kc)
        if getattr(self, "acc", None) is None or self.acc.shape != shape:
            self.acc = _sketch_zeros(shape)
            self.iacc = np.zeros(self.kc, np.float64)

    def _sq_sums_arrays(self, a: dict) -> None:
        """``acc`` (saved ``(K, R, W)``, as the weight sketch) and ``iacc`` into the arrays ``a``."""
        a["acc"] = MovedAxis(self.acc, 2) if self._lazy_save else np.ascontiguousarray(np.moveaxis(self.acc, 2, 0))
        a["iacc"] = self.iacc

    def _load_sq_sums(self, arrays, on: bool, option: str) -> None:
        """``acc`` / ``iacc`` from a model's arrays: present exactly when ``on`` (``option`` names
        the flag that keeps them), of the sketch's shape, non-negative (their square roots divide)."""
        if not on:
            for f in ("acc", "iacc"):
                require(f not in arrays, f"array {f} in a model without {option}")
            return
        for f in ("acc", "iacc"):
            require(f in arrays, f"array {f} is missing")
        acc = adopt("acc", arrays["acc"], (self.kc, self.R, self.W), np.float64)
        iacc = adopt("iacc", arrays["iacc"], (self.kc,), np.float64)
        require((acc >= 0).all() and (iacc >= 0).all(), "array acc / iacc: a negative sum of squares")
        self.acc = np.ascontiguousarray(np.moveaxis(acc, 0, 2))
        self.iacc = iacc

    def saved_sketch(self) -> np.ndarray:
        """The sketch as model files hold it, ``(K, R, W)`` (one class's ``R x W`` after the
        other): a view for one class, a transposed copy for ``--oaa K``."""
        sk = self.sketch
        if self.kc == 1:
            return sk.reshape(1, self.R, self.W)
        if self._lazy_save:  # file_state: written class by class, no transposed copy
            return MovedAxis(sk, 2)
        return np.ascontiguousarray(np.moveaxis(sk, 2, 0))

    #: set while :meth:`file_state` gives the arrays to a model file: the ``--oaa K`` sketch and count-min sums
    #: are then :class:`~streamlearn.memory.MovedAxis` views, written class by class without a transposed copy
    _lazy_save = False

    def file_state(self):
        """:meth:`state_dict` for a model file (the same bytes), the ``--oaa K`` sketch and count-min sums as
        :class:`~streamlearn.memory.MovedAxis` (no transposed copies in fresh pages at the end of a run)."""
        self._lazy_save = True
        try:
            return self.state_dict()
        finally:
            self._lazy_save = False

    # the state's fields in the order of SketchState (kept here: no numba import to load a model)
    _STATE_FIELDS = ("sketch", "seeds", "hkeys", "hw", "htpos", "hname", "htbl", "hsize", "names", "name_len",
                     "hll", "counters", "lrange", "intercept")

    @classmethod
    def saved_shapes(cls, hyper):
        K, kc, R, W, k = cls._dims(hyper)
        T = _pow2_at_least(2 * k)
        out = {"sketch": ((kc, R, W), np.float64), "seeds": ((R, 2), np.uint32), "htbl": ((kc, T), np.int32),
               "hsize": ((kc,), np.int64), "names": ((kc, k, NAME_BYTES), np.uint8),
               "hll": ((1 << HLL_BITS,), np.uint8), "counters": ((4,), np.int64), "lrange": ((2,), np.float64)}
        for f, dt in (("hkeys", np.uint32), ("hw", np.float64), ("htpos", np.int32), ("hname", np.int32),
                      ("name_len", np.int32)):
            out[f] = ((kc, k), dt)
        return out

    @classmethod
    def build_bytes(cls, hyper):
        """The heap's name ids and position map (filled at construction), the seeds (one hash
        each) and the heap arrays the kernels touch as members enter."""
        K, kc, R, W, k = cls._dims(hyper)
        return kc * (k * 4 * 5 + _pow2_at_least(2 * k) * 8) + R * 256

    def _load_arrays(self, arrays):
        """Load the saved state, checking every index the kernels follow: heap sizes within
        ``k``, name ids a permutation, distinct heap keys, the position map (``htbl`` / ``htpos``)
        a valid linear-probing table of exactly the heap's members (so ``tbl_find`` ends and
        never leaves the arrays), the seeds those of the hyper-parameters, the counters, and the
        pending minibatch a valid batch of learnable rows."""
        htbl = None  # the file's position maps: converted for the kernels once checked
        for f in self._STATE_FIELDS:
            if f == "htbl":
                require(f in arrays, f"array {f} is missing")
                htbl = adopt(f, arrays[f], (self.kc, self._T), np.int32)
                continue
            cur = getattr(self, f)
            if f == "intercept" and not self.keep_intercept:  # saved before: the constant in the sketch
                require(f not in arrays, "array intercept in a model whose meta.intercept is 'heap'")
                continue
            require(f in arrays, f"array {f} is missing")
            if f == "sketch":  # saved (K, R, W); kept (R, W, K)
                sk = adopt(f, arrays[f], (self.kc, self.R, self.W), cur.dtype)
                self.sketch = (sk.reshape(self.R, self.W, 1) if self.kc == 1
                               else np.ascontiguousarray(np.moveaxis(sk, 0, 2)))
                continue
            setattr(self, f, adopt(f, arrays[f], cur.shape, cur.dtype))
        require(np.array_equal(self.seeds, self._seeds()),
                "array seeds: not the Count Sketch seeds of --sketch_seed / --random_seed")
        k = self.k
        require(((self.hsize >= 0) & (self.hsize <= k)).all(), f"array hsize: a heap size outside 0..{k}")
        require(not self.keep_intercept or not (self.hkeys == CONSTANT_HASH)[
            np.arange(k)[None, :] < self.hsize[:, None]].any(),
            "array hkeys: the constant feature in the heap of a model that keeps the intercept apart")
        require(((self.name_len >= 0)).all(), "array name_len: a negative length")
        ids = np.sort(self.hname, axis=1)
        require((ids == np.arange(k, dtype=np.int32)[None, :]).all(),
                "array hname: the name ids are not a permutation of 0..top_k-1")
        for c in range(self.kc):
            _check_position_map(c, int(self.hsize[c]), self.hkeys[c], self.htpos[c], htbl[c])
        self._set_table(htbl)
        cnt = self.counters
        require((cnt >= 0).all(), "array counters: a negative counter")
        self._check_counters()
        require(self.lrange[0] <= self.lrange[1], "array lrange: min above max")
        require(int(self.hll.max()) <= 33 - HLL_BITS, f"array hll: a register above {33 - HLL_BITS} (a 32-bit hash's rank)")
        pend = {}
        for f, dt in zip(_PEND_FIELDS, _PEND_DTYPES):
            require("pend_" + f in arrays, f"array pend_{f} is missing")
            a = arrays["pend_" + f]
            require(len(a.shape) == 1 and np.dtype(a.dtype) == np.dtype(dt),
                    f"array pend_{f}: shape/dtype {tuple(a.shape)}/{a.dtype} is not 1-D {np.dtype(dt)}")
            pend[f] = adopt("pend_" + f, a)
        self._pending = None
        if len(pend["offsets"]) > 1:
            self._check_pending(pend)


_FIB = 0x9E3779B1


def heap_homes(keys, tmask: int) -> np.ndarray:
    """Each heap key's home entry in a position map of ``tmask + 1`` entries (the kernels'
    ``_sketch_kernels._home``, vectorised)."""
    return ((((np.asarray(keys).astype(np.uint64) * np.uint64(_FIB)) & np.uint64(0xFFFFFFFF)) >> np.uint64(8))
            .astype(np.int64) & tmask)


def _check_position_map(c: int, n: int, hkeys, htpos, htbl) -> None:
    """``ValueError`` unless class ``c``'s heap of ``n`` members (``hkeys[:n]``, distinct) and its
    position map form the open-addressing table the kernels assume (``_sketch_kernels``: linear
    probing from ``home(key)``, no tombstones): ``htbl`` holds -1 or a member's slot, each member
    exactly once, at ``htpos[slot]``, and no empty entry lies between a member's home and its
    entry (else ``tbl_find`` would miss it). Vectorised: load time only."""
    T = htbl.shape[0]
    tmask = T - 1
    keys = hkeys[:n].astype(np.int64)
    require(len(np.unique(keys)) == n, f"array hkeys: class {c}: a feature twice in the heap")
    require(((htbl >= -1) & (htbl < n)).all(), f"array htbl: class {c}: an entry outside -1..{n - 1}")
    occ = np.flatnonzero(htbl >= 0)
    require(len(occ) == n, f"array htbl: class {c}: {len(occ)} entries for {n} heap members")
    pos = htpos[:n].astype(np.int64)
    require(((pos >= 0) & (pos < T)).all(), f"array htpos: class {c}: a position outside 0..{T - 1}")
    require((htbl[pos] == np.arange(n)).all(), f"array htpos: class {c}: does not point at its htbl entries")
    home = heap_homes(keys, tmask)
    empty = np.concatenate([[0], np.cumsum(np.tile(htbl < 0, 2))])  # empties in [0, i) of two laps
    end = np.where(pos >= home, pos, pos + T)  # probe path home .. pos, wrapping once
    require((empty[end + 1] - empty[home] == 0).all(),
            f"array htbl: class {c}: a member not reachable from its hash's home entry")
