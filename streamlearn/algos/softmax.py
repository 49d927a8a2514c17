"""Softmax (multinomial logistic) regression with AdaGrad steps: ``--algo adagrad --oaa K
--loss_function multiclass_logistic`` (:class:`SoftmaxAdaGrad`).

One linear model per class, ``s_c = w_c^T x``, trained jointly on the cross-entropy
``-log softmax(s)_y`` (the classes are coupled through the softmax, so this is one learner,
not K independent ones as ``--oaa`` alone). The update rules are AdaGrad's: by default the
normalized adaptive rule of VW's default learner without its importance-invariant step (which
has no closed form for the softmax), ``--adaptive`` alone plain AdaGrad; see
:mod:`streamlearn.algos._softmax_kernels` for the formulas.

Memory and collisions are those of VW's ``--oaa K``: a table of ``2^(b - s)`` rows of K
weights (``s = ceil(log2 K)``), class ``c`` of feature hash ``h`` at row ``h mod 2^(b-s)``,
i.e. VW's slot ``(h << s) + c``; the K weights of a feature are contiguous, so an example's K
scores are one pass over its features. ``pred`` is the class id (argmax, ties to the lowest),
``loss`` the cross-entropy; ``--probabilities`` gives the softmax.
"""
from __future__ import annotations

import numpy as np

from ..kernels import lazy
from ..memory import PageSet
from .base import COMMON_PARAMS, Learner, adopting, all_nonnegative, check_saved_arrays, check_saved_meta, lazy_zeros, require
from .losses import Loss
from .multiclass import class_bits, class_label_mask

__all__ = ["SoftmaxAdaGrad", "SoftmaxClasses", "MULTICLASS_LOGISTIC"]

_kernels = lazy("streamlearn.algos._softmax_kernels")

#: the binary learner's options the softmax implements (any other one given is refused)
SUPPORTED = ("learning_rate", "adaptive", "normalized")

#: the loss object of ``--loss_function multiclass_logistic`` (code 3: no binary kernel takes it)
MULTICLASS_LOGISTIC = Loss("multiclass_logistic", 3, True)


class SoftmaxClasses:
    """Mixin of the joint softmax learners over ``self.n_classes`` classes (softmax AdaGrad,
    FTSL-Shampoo): their loss name, ``--probabilities`` switch and label checks."""

    @property
    def loss_name(self) -> str:
        return MULTICLASS_LOGISTIC.name

    def _init_classes(self, K) -> int:
        """After ``Learner.__init__``: the softmax loss and the class layout of ``K`` classes in
        the hashed rows (as VW's --oaa: the low ``ceil(log2 K)`` bits of an index are the class);
        returns the row bits left."""
        self.hyper["loss_function"] = MULTICLASS_LOGISTIC.name
        self.loss = MULTICLASS_LOGISTIC
        self.n_classes = K = int(K)
        self.class_shift = class_bits(K)
        rb = self.bits - self.class_shift
        if rb < 1:
            raise ValueError(f"--oaa {K} needs -b/--bit_precision of at least {self.class_shift + 1} "
                             f"(-b minus ceil(log2 {K}) = {self.class_shift} bits per class, as VW's --oaa); "
                             f"got -b {self.bits}")
        self.row_mask = (1 << rb) - 1
        return rb

    def set_probabilities(self, on: bool = True) -> None:
        self.probabilities = bool(on)

    def bad_labels(self, labels):
        return class_label_mask(labels, self.n_classes)

    def label_problem(self, label) -> str:
        return f"label {label:g} is not a class of --oaa {self.n_classes} (1..{self.n_classes})"


class SoftmaxAdaGrad(SoftmaxClasses, Learner):
    """Joint softmax regression over ``--oaa K`` classes with AdaGrad's update rules."""

    name = "adagrad"
    multiclass = True
    native_multiclass = True
    compiled_kernels = ((_kernels, "softmax_run"),)

    def __init__(self, base_cls: type[Learner], **hyper):
        self.PARAMS = base_cls.PARAMS  # the binary learner's options (learning rate, update rule)
        hyper = dict(hyper)
        loss = hyper.pop("loss_function", None)
        if loss != MULTICLASS_LOGISTIC.name:
            raise ValueError(f"SoftmaxAdaGrad is --loss_function {MULTICLASS_LOGISTIC.name}, got {loss}")
        K = hyper.get("oaa")
        if K is None or int(K) < 2:
            raise ValueError(f"--loss_function {MULTICLASS_LOGISTIC.name} needs --oaa K with K >= 2, got {K}")
        own = {p.name for p in base_cls.PARAMS}
        other = sorted(k for k, v in hyper.items() if k in own and k not in SUPPORTED and v is not None)
        if other:
            raise ValueError(f"--loss_function {MULTICLASS_LOGISTIC.name} does not take option(s): "
                             + ", ".join("--" + k for k in other))
        super().__init__(**hyper)
        rb = self._init_classes(K)
        self.rule = self._rule()
        rows = 1 << rb
        self.W = lazy_zeros((rows, K), np.float32)
        self.G = lazy_zeros((rows, K), np.float32)
        self.N = lazy_zeros(rows if self.rule == 1 else 1, np.float32)
        self.scal = np.zeros(2, np.float64)  # sum h ||x / N||^2, sum h (rule 1)
        self.pages = PageSet(rows)  # rows that updates touch (tracked from 2^22 rows on, as AdaGrad)
        self.probabilities = False
        self.last_probabilities = None
        self._apply_hyper()

    def _rule(self) -> int:
        """The update rule from the hyper-parameters, named as for the binary ``--algo adagrad``:
        1 normalized adaptive (the default, as VW's default learner, or ``--adaptive
        --normalized``), 0 plain AdaGrad (``--adaptive`` alone); ``--normalized`` alone (VW:
        normalized, not adaptive) has no softmax rule here and is refused."""
        adaptive, normalized = self.hyper.get("adaptive"), self.hyper.get("normalized")
        if not adaptive and not normalized:
            return 1
        if adaptive and not normalized:
            return 0
        if adaptive and normalized:
            return 1
        raise ValueError(f"--loss_function {MULTICLASS_LOGISTIC.name} takes the default (normalized adaptive) "
                         "rule, --adaptive (plain AdaGrad) or --adaptive --normalized; not --normalized alone")

    #: default step of the normalized rule: 1.0, not the binary rule's 0.5 (over the seven
    #: multiclass sets of benchmarks/vs_vw_multiclass.py, -l 1.0 has the lower mean and worst-case
    #: progressive error of 0.1, 0.25, 0.5, 1, 2); plain AdaGrad: 0.1 as the binary learner
    DEFAULT_LR = {0: 0.1, 1: 1.0}

    def _apply_hyper(self):
        lr = self.hyper.get("learning_rate")
        self.eta = float(lr if lr is not None else self.DEFAULT_LR[self.rule])

    def _run(self, batch, learn):
        bad = self.bad_labels(batch.labels)
        if bad.any():
            raise ValueError(self.label_problem(batch.labels[np.flatnonzero(bad)[0]]))
        n = batch.n
        if learn:
            self.pages.mark(batch.indices, self.row_mask)
        pred = np.empty(n)
        loss = np.empty(n)
        probs = np.empty((n if self.probabilities else 0, self.n_classes))
        learned = _kernels.softmax_run(
            np.ascontiguousarray(batch.offsets, np.int64), np.ascontiguousarray(batch.indices, np.uint32),
            np.ascontiguousarray(batch.values, np.float64), np.ascontiguousarray(batch.labels, np.float64),
            np.ascontiguousarray(batch.weights, np.float64), self.W, self.G, self.N, self.scal,
            self.row_mask, self.eta, self.rule, learn, pred, loss, probs)
        self.examples_learned += int(learned)
        self.last_probabilities = probs if self.probabilities else None
        return pred, loss

    def extra_summary(self) -> dict:
        return {"oaa_classes": self.n_classes, "bits_per_class": self.bits - self.class_shift}

    def _arrays(self):
        """``W`` and ``G`` flat (row-major, K per row), so that a big table whose touched rows
        are known is saved as a :class:`SparseTable` of those rows' entries (O(touched), not
        O(2^b), as AdaGrad's tables)."""
        out = {"W": self.W.reshape(-1), "G": self.G.reshape(-1), "N": self.N, "scal": self.scal}
        pages = self.pages
        if pages.worth_it():
            rows = pages.entries()
            K = self.n_classes
            flat = (rows[:, None] * K + np.arange(K, dtype=np.int64)[None, :]).reshape(-1)
            out["W"] = pages.table(out["W"], flat)
            out["G"] = pages.table(out["G"], flat)
            if self.N.shape[0] == pages.size:
                out["N"] = pages.table(self.N, rows)
        return out

    def _load_arrays(self, arrays):
        K = self.n_classes
        for k in ("G", "N", "scal"):  # the kernel divides by sqrt(G), N and sqrt(sum h / sum ...)
            require(k not in arrays or all_nonnegative(arrays[k]), f"array {k}: a negative entry")
        for k in ("W", "G", "N", "scal"):
            cur = getattr(self, k)
            require(k in arrays, f"array {k} is missing")
            setattr(self, k, self.pages.load(k, arrays[k], cur.shape, cur.dtype, width=K if k in ("W", "G") else 1,
                                             track=k != "scal", owned=adopting()))

    def state_dict(self):
        meta, arrays = super().state_dict()
        meta["reduction"] = "softmax"
        return meta, arrays

    @classmethod
    def restore(cls, base_cls, meta, arrays):
        """The learner :meth:`state_dict` saved; the tables' shapes (``2^(b - ceil(log2 K))`` rows
        of K) are checked before they are built, and their floats are finite; the kernel indexes
        them with ``hash & row_mask`` only."""
        hyper = check_saved_meta(COMMON_PARAMS + base_cls.PARAMS, meta)
        K, b = hyper.get("oaa"), hyper.get("bit_precision", 18)
        require(isinstance(K, int) and K >= 2, f"oaa {K!r} is not a class count >= 2")
        require(1 <= b <= 32 and b - class_bits(K) >= 1, f"-b {b} does not fit --oaa {K}")
        check_saved_arrays(arrays, {"W": (((1 << (b - class_bits(K))) * K,), np.float32),
                                    "G": (((1 << (b - class_bits(K))) * K,), np.float32),
                                    "scal": ((2,), np.float64)})
        obj = cls(base_cls, **hyper)
        obj.examples_learned = int(meta.get("examples_learned", 0))
        obj._load_arrays(arrays)
        return obj
