"""One-against-all multiclass over any binary learner (``--oaa K``): :class:`OneAgainstAll`.

The reduction of Vowpal Wabbit's ``--oaa`` (``vowpalwabbit/core/src/reductions/oaa.cc``): K
binary learners of the same class, learner ``c`` trained on the label ``+1`` if ``y == c``
else ``-1``; the prediction is the class of the largest of the K raw scores (ties: the lowest
class, as VW's ``if (pred[i] > pred[prediction])`` scan). Labels are class ids 1..K (VW's
default 1-indexing); any other label is skipped and reported like a malformed line.

* **Progressive validation holds exactly.** VW's oaa predicts all K classes first
  (``multipredict``) and then updates each class with that prediction; the K learners share
  no state, so running the batch through class 1's learner, then class 2's, ... (each
  predicting example i before learning it) gives the same K scores and the same updates. A
  batch is parsed once; the class learners share it (a shallow copy with its own labels).
* **Memory and collisions are VW's.** VW keeps the K classes inside one ``2^b`` weight table:
  the parser multiplies every feature index by ``total_feature_width << stride_shift``
  (``vw.cc``, ``setup_example``; ``total_feature_width = 2^s``, ``s = ceil(log2 K)``,
  ``parse_args.cc``), and ``learner::learn(ec, c)`` adds ``ft_offset = c * stride``
  (``learner.cc``, ``increment_offset``; the bottom learner's ``feature_width_below`` is the
  stride). Class ``c``'s weight of feature hash ``h`` is therefore slot ``((h << s) + c) mod 2^b``
  (in weights of ``stride`` floats), i.e. slot ``h mod 2^(b-s)`` of a table of ``2^(b-s)``:
  each class learner here gets ``bit_precision = b - s`` (``b - s < 1`` is a usage error),
  which is VW's collision pattern exactly and the same memory. (``-q`` products keep the
  pattern: VW's ``(i1 * FNV) ^ i2`` on indices scaled by a power of two is the scaled
  product of the unscaled ones.)
* **Per-class state is VW's.** VW's gd keeps its normalized-update sums (``normalized_sum_norm_x``,
  ``total_weight``) per model (``gd_per_model_states[ft_offset / stride]``, ``gd.cc``), so the
  K learners are independent there too.
* ``--probabilities`` (logistic loss, as VW's ``oaa-prob``): ``p_c = sigma(s_c) / sum_k sigma(s_k)``;
  the per-example loss returned is VW's multiclass log loss ``-log p_y`` (999 when ``p_y`` is
  0), weighted by the run; the run reports the 0/1 loss as the average loss (VW's table and
  summary) and this cross-entropy as ``average multiclass log loss``.

Nothing here knows a particular learner: any registered class without ``native_multiclass``
gets ``--oaa`` this way (:func:`streamlearn.algos.make_learner`).
"""
from __future__ import annotations

import copy

import numpy as np

from .base import COMMON_PARAMS, Learner, check_saved_meta, load_budget, require

_OAA = next(p for p in COMMON_PARAMS if p.name == "oaa")

__all__ = ["OneAgainstAll", "class_bits", "class_label_mask", "oaa_probabilities"]


def class_bits(K: int) -> int:
    """``s = ceil(log2 K)``: the bits VW's ``--oaa K`` takes from ``-b`` for the class index."""
    return max(0, int(K - 1).bit_length())


def class_label_mask(labels: np.ndarray, K: int) -> np.ndarray:
    """Rows whose label is not a class id 1..K (unlabeled rows, NaN, are fine)."""
    with np.errstate(invalid="ignore"):
        ok = np.isnan(labels) | ((labels == np.floor(labels)) & (labels >= 1) & (labels <= K))
    return ~ok


def oaa_probabilities(scores: np.ndarray) -> np.ndarray:
    """VW's ``--oaa --probabilities``: ``sigma(s_c)`` normalised over the classes (rows of
    ``scores``, shape ``(n, K)``)."""
    with np.errstate(over="ignore"):
        s = 1.0 / (1.0 + np.exp(-scores))
    return s / s.sum(axis=1, keepdims=True)


class OneAgainstAll(Learner):
    """``--oaa K`` over K learners of ``base_cls`` (see the module docstring). ``hyper`` is the
    whole run's (``oaa`` and ``bit_precision`` included); each class learner gets the same
    hyper-parameters with ``bit_precision - ceil(log2 K)`` bits and no ``oaa``."""

    multiclass = True

    def __init__(self, base_cls: type[Learner], **hyper):
        K = hyper.get("oaa")
        if K is None or int(K) < 2:
            raise ValueError(f"--oaa must be at least 2, got {K}")
        _OAA.check(K)  # its bound, before K learners are built (a model's header too)
        self.base_cls = base_cls
        self.name = base_cls.name
        self.PARAMS = base_cls.PARAMS
        self.wants_names = base_cls.wants_names
        self.compiled_kernels = base_cls.compiled_kernels
        super().__init__(**{k: v for k, v in hyper.items() if k != "oaa"})  # validates names and -b
        self.hyper["oaa"] = self.n_classes = K = int(K)
        self.class_shift = class_bits(K)
        cb = self.bits - self.class_shift
        if cb < 1:
            raise ValueError(f"--oaa {K} needs -b/--bit_precision of at least {self.class_shift + 1} "
                             f"(each class gets -b minus ceil(log2 {K}) = {self.class_shift} bits, as VW's --oaa); "
                             f"got -b {self.bits}")
        sub = {k: v for k, v in self.hyper.items() if k != "oaa"}
        sub["bit_precision"] = cb
        self.learners = [base_cls(**sub) for _ in range(K)]
        self.probabilities = False
        self.last_probabilities = None

    # -- options --------------------------------------------------------------------------------
    def set_probabilities(self, on: bool = True) -> None:
        """``--probabilities``: keep VW's per-class probabilities of each batch (logistic loss only)."""
        if on and self.loss.name != "logistic":
            raise ValueError("--probabilities needs --loss_function logistic (the classes' sigmoids are "
                             f"normalised, as VW's --oaa --probabilities); got {self.loss.name}")
        self.probabilities = bool(on)

    def override(self, **hyper) -> None:
        K = hyper.get("oaa")
        if K is not None and int(K) != self.n_classes:
            raise ValueError(f"--oaa {K} differs from the model's {self.n_classes}; it cannot change when "
                             "continuing from a saved model")
        rest = {k: v for k, v in hyper.items() if k != "oaa"}
        b = rest.get("bit_precision")
        if b is not None and b != self.bits:
            raise ValueError(f"--bit_precision {b} differs from the model's {self.bits}; it cannot change "
                             "when continuing from a saved model")
        rest.pop("bit_precision", None)
        for lrn in self.learners:
            lrn.override(**rest)
        for k, v in rest.items():
            if v is not None:
                self.hyper[k] = v

    def compiles_on_first_use(self) -> bool:
        return self.learners[0].compiles_on_first_use()

    # -- labels ---------------------------------------------------------------------------------
    def bad_labels(self, labels):
        return class_label_mask(labels, self.n_classes)

    def label_problem(self, label) -> str:
        return f"label {label:g} is not a class of --oaa {self.n_classes} (1..{self.n_classes})"

    # -- learning -------------------------------------------------------------------------------
    def _run(self, batch, learn: bool):
        K, n = self.n_classes, batch.n
        bad = self.bad_labels(batch.labels)
        if bad.any():
            raise ValueError(self.label_problem(batch.labels[np.flatnonzero(bad)[0]]))
        unl = np.isnan(batch.labels)
        scores = np.empty((n, K))
        before = self.learners[0].examples_learned
        sub = copy.copy(batch)  # shallow: only the labels differ per class
        for c, lrn in enumerate(self.learners):
            sub.labels = np.where(batch.labels == c + 1, 1.0, -1.0)
            sub.labels[unl] = np.nan
            p, _ = lrn.learn_batch(sub) if learn else lrn.predict_batch(sub)
            scores[:, c] = p
        self.examples_learned += self.learners[0].examples_learned - before
        pred = np.argmax(scores, axis=1).astype(np.float64) + 1.0  # first maximum: the lowest class
        pred[np.isnan(scores).any(axis=1)] = np.nan  # a degenerated class learner is reported, not hidden
        probs = oaa_probabilities(scores)
        y = np.where(unl, 1, batch.labels).astype(np.int64) - 1
        py = probs[np.arange(n), y]
        with np.errstate(divide="ignore"):
            loss = np.where(py > 0, -np.log(py), 999.0)  # VW: 999 when p_y is 0
        loss[unl] = np.nan
        self.last_probabilities = probs if self.probabilities else None
        return pred, loss

    def finish(self) -> None:
        for lrn in self.learners:
            lrn.finish()

    def extra_summary(self) -> dict:
        return {"oaa_classes": self.n_classes, "bits_per_class": self.bits - self.class_shift}

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self):
        meta = {"algo": self.name, "hyper": dict(self.hyper), "examples_learned": self.examples_learned,
                "reduction": "oaa", "classes": []}
        arrays = {}
        for c, lrn in enumerate(self.learners):
            m, a = lrn.state_dict()
            meta["classes"].append(m)
            arrays.update({f"class{c + 1}.{k}": v for k, v in a.items()})
        return meta, arrays

    def _arrays(self):
        return self.state_dict()[1]

    @classmethod
    def restore(cls, base_cls: type[Learner], meta: dict, arrays: dict) -> "OneAgainstAll":
        """The learner :meth:`state_dict` saved (``meta['reduction'] == 'oaa'``). Checked before
        anything is built: the class count (a list of exactly K class states, K within what
        the file can hold), each class's ``-b`` (``b - ceil(log2 K)``) and loss, and the memory
        the K learners take; each class learner then checks its own state."""
        hyper = check_saved_meta(COMMON_PARAMS + base_cls.PARAMS, meta)
        K = hyper.get("oaa")
        require(isinstance(K, int) and K >= 2, f"oaa {K!r} is not a class count >= 2")
        classes = meta.get("classes")
        require(isinstance(classes, list) and len(classes) == K,
                f"{len(classes) if isinstance(classes, list) else 'no'} class learners saved for --oaa {K}")
        sub = {k: v for k, v in hyper.items() if k != "oaa"}
        sub["bit_precision"] = int(hyper.get("bit_precision", 18)) - class_bits(K)
        require(sub["bit_precision"] >= 1, f"--oaa {K} leaves no bits of -b {hyper.get('bit_precision')}")
        for c, m in enumerate(classes):
            ch = check_saved_meta(COMMON_PARAMS + base_cls.PARAMS, m)
            for k in ("bit_precision", "loss_function"):
                require(ch.get(k) == sub.get(k), f"class {c + 1}: {k} {ch.get(k)!r}, expected {sub.get(k)!r}")
            require(not ch.get("oaa"), f"class {c + 1}: a nested --oaa")
        budget = load_budget()
        need = K * (base_cls.build_bytes(sub) + 4096)
        require(budget is None or need <= budget,
                f"--oaa {K} declares {need / 2**20:.0f} MiB of class learners, far more than the file holds")
        obj = cls(base_cls, **hyper)
        obj.examples_learned = int(meta.get("examples_learned", 0))
        for c, m in enumerate(classes):
            pre = f"class{c + 1}."
            obj.learners[c] = base_cls.from_state(m, {k[len(pre):]: v for k, v in arrays.items() if k.startswith(pre)})
        return obj
