"""The linear learner (``--algo adagrad``, the default): Vowpal Wabbit's ``gd`` reduction.

With no flag it is VW's default learner: the normalized, adaptive, importance-invariant update
(Ross, Mineiro & Langford 2013, NAG; Duchi, Hazan & Singer 2011, AdaGrad; Karampatziakis &
Langford 2011, invariant updates) at ``-l 0.5``, ``--power_t 0.5``, ``--initial_t 0``. VW's
switches keep VW's meaning (vowpalwabbit/core/src/reductions/gd.cc, ``gd_setup``): naming any
of ``--adaptive``, ``--normalized``, ``--invariant`` turns on only the ones named, ``--sgd``
none of them, and then the default learning rate is 10 unless both adaptive and normalized are
on (and, without adaptive and normalized, ``--initial_t`` defaults to 1 and ``eta`` is
multiplied by ``initial_t^power_t``). Plain diagonal AdaGrad is ``--adaptive``. ``--l1`` /
``--l2`` are VW's truncated gradient and shrinking, ``--loss_function quantile`` VW's pinball
loss (``--quantile_tau``).

State: ``w``, ``G`` (adaptive) and ``N`` (normalized, the per-feature scale) as float32 arrays
of length ``2**b``, like VW's weight table; arithmetic is float64. ``scal`` holds the scalars
of VW's shared data (:func:`streamlearn.algos._adagrad_kernels.adagrad_run`). From ``-b 22``
on, the pages of the tables that updates touch are tracked (:class:`~streamlearn.memory.PageSet`),
so a model is saved and loaded in the size of what was learned, not of ``2**b``.

Models written before VW's default became the default (no ``update_rule`` in their meta: hyper
``normalized`` True/False, ``learning_rate`` None meaning 0.5 / 0.1) keep their rule exactly:
the kernel's ``LEGACY`` path.

Kernel: :func:`streamlearn.kernels.adagrad_run`, the seam's binding of
:func:`streamlearn.algos._adagrad_kernels.adagrad_run` (numba) or of its bit-identical C port
(the default rule and the legacy ones), so that such a run over text never starts numba.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..memory import PageSet, own_cache_lines
from .base import COMMON_PARAMS, Learner, Param, adopting, all_nonnegative, check_saved_arrays, check_saved_meta, lazy_zeros, require
from .losses import get_loss

__all__ = ["AdaGrad", "ADAPTIVE", "NORMALIZED", "INVARIANT", "SQRT_RATE", "LEGACY"]

# bits of the kernel's ``rule`` (same values as _adagrad_kernels, which is not imported here:
# the C path never loads numba)
ADAPTIVE, NORMALIZED, INVARIANT, SQRT_RATE, LEGACY = 1, 2, 4, 8, 16
_SCAL = 8  # sum_norm_x, total_weight, min_label, max_label, t, gravity, contraction, spare


class AdaGrad(Learner):
    name = "adagrad"
    losses = ("squared", "logistic", "hinge", "quantile")
    PARAMS = (
        Param("learning_rate", float, None,
              "Step size eta (adagrad: 0.5, VW's default; 10 when --sgd/--adaptive/--normalized/--invariant "
              "select a rule that is not both adaptive and normalized, as VW).", short="-l", low=0, low_open=True),
        Param("sgd", bool, None, "Plain stochastic gradient descent: none of VW's adaptive, normalized and "
              "invariant updates (VW's --sgd).", structural=True),
        Param("adaptive", bool, None, "Per-feature adaptive learning rates (AdaGrad). Naming any of --adaptive, "
              "--normalized, --invariant turns on only the ones named; naming none: all three (VW's default). "
              "--adaptive alone is plain diagonal AdaGrad.", structural=True),
        Param("normalized", bool, None, "Per-feature normalized updates (scale-invariant, Ross et al. 2013).",
              structural=True),
        Param("invariant", bool, None, "Importance-invariant (safe) updates (Karampatziakis & Langford 2011).",
              structural=True),
        Param("power_t", float, None, "t power value: the rate decays as G^-power_t (adaptive) or t^-power_t "
              "(default 0.5, as VW).", low=0),
        Param("initial_t", float, None, "Initial t: adaptive G and the normalized sums start from it; 1 for "
              "rules neither adaptive nor normalized (as VW).", structural=True, low=0),
        Param("l1", float, None, "L1 regularization: VW's truncated gradient (default 0).", low=0),
        Param("l2", float, None, "L2 regularization: VW's weight shrinking (default 0).", low=0),
        Param("no_clip", bool, None, "Do not clip predictions to VW's label range (squared loss: the labels "
              "learned so far; logistic: [-50, 50]); the gradient is then taken at the raw prediction."),
        Param("quantile_tau", float, None, "Quantile of --loss_function quantile (default 0.5).",
              structural=True, low=0, high=1, low_open=True, high_open=True),
    )

    def __init__(self, _legacy: bool = False, **hyper):
        super().__init__(**hyper)
        h = self.hyper
        for k in ("power_t", "initial_t", "l1", "l2"):
            if h[k] is not None and not h[k] >= 0:
                raise ValueError(f"--{k} must be >= 0, got {h[k]}")
        if h["learning_rate"] is not None and not h["learning_rate"] > 0:
            raise ValueError(f"-l/--learning_rate must be > 0, got {h['learning_rate']}")
        tau = 0.5 if h["quantile_tau"] is None else float(h["quantile_tau"])
        if not 0.0 < tau < 1.0:
            raise ValueError(f"--quantile_tau must be in (0, 1), got {tau}")
        if self.loss.name == "quantile":
            self.loss = get_loss("quantile", tau)
        self.tau = tau
        self.legacy = bool(_legacy)
        self.named = bool(h["sgd"] or h["adaptive"] or h["normalized"] or h["invariant"])
        if self.named:
            self.rule = (ADAPTIVE * bool(h["adaptive"]) | NORMALIZED * bool(h["normalized"])
                         | INVARIANT * bool(h["invariant"]))
        else:
            self.rule = ADAPTIVE | NORMALIZED | INVARIANT
        if self.legacy:
            self.rule |= LEGACY
        size = 1 << self.bits
        self.w = lazy_zeros(size, np.float32)
        self.G = lazy_zeros(size if self.rule & ADAPTIVE else 1, np.float32)
        self.N = lazy_zeros(size if self.rule & NORMALIZED else 1, np.float32)
        self.scal = np.zeros(_SCAL, np.float64)
        self.scal[6] = 1.0  # l2 contraction
        if self.loss.name == "logistic" and not self.legacy:
            self.scal[2], self.scal[3] = -50.0, 50.0  # VW's prediction range for logistic loss
        t0 = self._initial_t()
        self.scal[4] = t0
        if t0 > 0 and self.rule & NORMALIZED:
            self.scal[0] = self.scal[1] = t0  # VW: initial_t fake examples of norm 1
        self.scal = own_cache_lines(self.scal)  # written at every example: no line shared with other data
        self.pages = PageSet(size)  # where w, G, N may be non-zero (tracked from -b 22 on)
        self._apply_hyper()

    compiled_kernels = ((kernels.lazy("streamlearn.algos._adagrad_kernels"), "adagrad_run"),)

    def compiles_on_first_use(self) -> bool:
        return not self._c_serves() and super().compiles_on_first_use()

    def _c_serves(self) -> bool:
        from ..kernels import _cfast
        return kernels.backend() == "c" and _cfast.adagrad_rule_ok(self.loss.code, self.rule, self.hp)

    def _initial_t(self) -> float:
        t = self.hyper["initial_t"]
        if t is not None:
            return float(t)
        return 1.0 if self.named and not self.rule & (ADAPTIVE | NORMALIZED) else 0.0

    def _apply_hyper(self):
        h = self.hyper
        power_t = 0.5 if h["power_t"] is None else float(h["power_t"])
        lr = h["learning_rate"]
        if lr is None:
            both = (self.rule & (ADAPTIVE | NORMALIZED)) == (ADAPTIVE | NORMALIZED)
            lr = 0.5 if (not self.named or both) else 10.0
        eta = float(lr)
        if not self.legacy and self.named and not self.rule & (ADAPTIVE | NORMALIZED):
            eta *= self._initial_t() ** power_t  # VW: eta *= t^power_t for the non-adaptive rules
        self.eta = eta
        if power_t == 0.5:
            self.rule |= SQRT_RATE
        else:
            self.rule &= ~SQRT_RATE
        g0 = self._initial_t() if self.rule & ADAPTIVE and not self.legacy else 0.0
        if h.get("no_clip") and self.legacy:
            raise ValueError("--no_clip: this model was saved before VW's default update became the default; "
                             "its rule always clips")
        self.hp = np.array([power_t, float(h["l1"] or 0.0), float(h["l2"] or 0.0), self.tau, g0,
                            1.0 if h.get("no_clip") else 0.0], np.float64)
        self.last_raw = None

    def _run(self, batch, learn):
        if learn:
            self.pages.mark(batch.indices, self.mask)
        pred = np.empty(batch.n)
        loss = np.empty(batch.n)
        raw = np.empty(batch.n)
        args = (batch.offsets, batch.indices, batch.values, batch.labels, batch.weights,
                self.w, self.G, self.N, self.scal, self.mask, self.loss.code, self.eta,
                self.rule, self.hp, learn, pred, loss, raw)
        n = kernels.adagrad_run(*args)
        self.examples_learned += n
        self.last_raw = raw
        return pred, loss

    _TABLES = ("w", "G", "N")

    per_hash_weights = True

    def _cols(self, idx):
        """``[w, G if adaptive, N if normalized]`` at ``idx``."""
        cols = [self.w[idx]]
        if self.rule & ADAPTIVE:
            cols.append(self.G[idx])
        if self.rule & NORMALIZED:
            cols.append(self.N[idx])
        return cols

    def audit_columns(self, hashes):
        """``[w, G]`` of the features as VW's audit prints them (``weight@adaptive sum``; the
        weight through the --l1 / --l2 state, VW's ``trunc_weight * contraction``; no ``G``
        without the adaptive rule)."""
        idx = np.asarray(hashes, np.int64) & self.mask
        w = self.w[idx].astype(np.float64)
        gravity, contraction = float(self.scal[5]), float(self.scal[6])
        if gravity:
            w = np.sign(w) * np.maximum(np.abs(w) - gravity, 0.0)
        cols = [(w * contraction).astype(np.float32)]
        if self.rule & ADAPTIVE:
            cols.append(self.G[idx])
        return cols

    def readable_weights(self):
        """``(indices, [w, G, N])`` where ``w != 0`` (VW's text model: the weight and the
        adaptive / normalizer state its rule keeps)."""
        idx = self.pages.entries() if self.pages.worth_it() else np.arange(len(self.w))
        nz = idx[self.w[idx] != 0]
        return nz, self._cols(nz)

    def label_range(self):
        return float(self.scal[2]), float(self.scal[3])

    def finish(self):
        """End of a pass: fold the --l1 / --l2 state into the weights, as VW does at the end
        of every pass (``sync_weights``)."""
        if self.scal[5] != 0.0 or self.scal[6] != 1.0:
            w = self.w
            if self.pages.worth_it():  # a big table: only its touched pages
                idx = self.pages.entries()
                idx = idx[w[idx] != 0]
            else:
                idx = np.flatnonzero(w)
            wj = w[idx].astype(np.float64)
            g = self.scal[5]
            wj = np.where(g < np.abs(wj), np.where(wj > 0, wj - g, wj + g), 0.0) * self.scal[6]
            w[idx] = wj
            self.scal[5], self.scal[6] = 0.0, 1.0

    def _extra_meta(self):
        return {"update_rule": "legacy" if self.legacy else "vw"}

    @classmethod
    def saved_shapes(cls, hyper):
        b = hyper.get("bit_precision", 18)
        require(1 <= b <= 32, f"bit_precision {b} is not in 1..32")
        return {"w": ((1 << b,), np.float32)}

    @classmethod
    def from_state(cls, meta: dict, arrays: dict):
        require(isinstance(meta, dict) and meta.get("update_rule", "legacy") in ("legacy", "vw"),
                "meta.update_rule is not 'vw' or 'legacy'")
        if meta.get("update_rule", "legacy") != "legacy":
            return super().from_state(meta, arrays)
        check_saved_meta(COMMON_PARAMS + cls.PARAMS, meta)
        check_saved_arrays(arrays, cls.saved_shapes(meta["hyper"]))
        # a model written before VW's default became the default: hyper `normalized` True (VW's
        # rule, -l 0.5) or False (plain Duchi AdaGrad, -l 0.1); learning_rate None = that default
        hyper = dict(meta["hyper"])
        norm = bool(hyper.get("normalized"))
        hyper.update(adaptive=True, normalized=norm, invariant=norm)
        if hyper.get("learning_rate") is None:
            hyper["learning_rate"] = 0.5 if norm else 0.1
        obj = cls(_legacy=True, **hyper)
        obj.examples_learned = int(meta.get("examples_learned", 0))
        require("scal" in arrays, "array scal is missing")
        scal = np.asarray(arrays["scal"])
        if scal.shape == (4,) and scal.dtype == np.float64:
            arrays = dict(arrays, scal=np.concatenate([scal, [0.0, 0.0, 1.0, 0.0]]))
        obj._load_arrays(arrays)
        return obj

    def _arrays(self):
        pages = self.pages
        if not pages.worth_it():  # small or mostly touched tables: model_file scans them
            return {"w": self.w, "G": self.G, "N": self.N, "scal": self.scal}
        entries = pages.entries()
        out = {k: pages.table(getattr(self, k), entries) if getattr(self, k).shape[0] == pages.size
               else getattr(self, k) for k in self._TABLES}
        out["scal"] = self.scal
        return out

    def _load_arrays(self, arrays):
        # shapes and dtypes are checked (PageSet.load), floats finite (Learner.check_saved);
        # the kernels index every table with ``hash & mask`` only: no index array to check
        for k in ("G", "N"):  # the kernels divide by sqrt(G) and N
            require(k not in arrays or all_nonnegative(arrays[k]), f"array {k}: a negative entry")
        for k in ("w", "G", "N", "scal"):
            require(k in arrays, f"array {k} is missing")
            cur = getattr(self, k)
            setattr(self, k, self.pages.load(k, arrays[k], cur.shape, cur.dtype, track=k in self._TABLES,
                                             owned=adopting()))
        self.scal = own_cache_lines(self.scal)  # written at every example: no line shared with other data
        sc = self.scal  # sum h ||x/N||^2, sum h, label range, t, gravity, contraction (divisors)
        require(sc[0] >= 0 and sc[1] >= 0 and sc[2] <= sc[3] and sc[4] >= 0 and sc[5] >= 0 and sc[6] != 0,
                "array scal: sums, t, gravity or contraction out of range")
