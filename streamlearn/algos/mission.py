"""MISSION (``--algo mission``): SGD on Count-Sketched weights with a top-k heap.

Aghazadeh et al., "MISSION: Ultra Large-Scale Feature Selection using Count-Sketches",
ICML 2018; the first-order baseline of BEAR (BEAR paper
Sec. 6). Each minibatch of ``--minibatch`` labeled examples (default 1) is one iteration: QUERY
the active set's weights (members of the top-k heap only), mean gradient, ADD ``-eta g`` to the
sketch, re-QUERY and offer the active set to the heap. The sketch, heap, options and
minibatch driver are the family's (:mod:`streamlearn.algos.sketch`). Deviation from the paper:
predictions use only the top-k features, as BEAR's (NOTES_BEAR item 6).

``--step_rule adagrad``: per-feature AdaGrad steps (Duchi et al. 2011) whose squared-gradient
sums live in a count-min sketch sharing the weight sketch's buckets (Spring et al., "Compressing
Gradient Optimizers via Count-Sketches", ICML 2019); see :mod:`._mission_kernels`. It doubles
the sketch memory.

``--oaa K`` (K <= 64): a map from each heap member's hash to the mask of the classes whose heaps
hold it replaces the K per-class heap look-ups of a feature by one (:mod:`._mission_kernels`);
derived from the heaps (rebuilt on load), never saved, results unchanged.
"""
from __future__ import annotations

import numpy as np

from ..kernels import lazy
from .base import Param, require
from .sketch import MINIBATCH_PARAM, SKETCH_PARAMS, SketchLearner

__all__ = ["Mission"]

_kernels = lazy("streamlearn.algos._mission_kernels")


class Mission(SketchLearner):
    """MISSION: minibatch SGD whose weights live in a Count Sketch; predictions and the
    selected features come from the top-k heap."""

    name = "mission"
    PARAMS = SKETCH_PARAMS + (MINIBATCH_PARAM, Param(
        "step_rule", ("auto", "sgd", "adagrad"), "auto",
        "mission: sgd (one step eta for every weight) or adagrad (eta / sqrt(sum of the weight's squared "
        "gradients), the sums in a count-min sketch of the weight sketch's shape: twice the memory). "
        "auto: adagrad with --oaa K on unit-norm examples (sgd for models saved before 2026-11-27), sgd "
        "otherwise. adagrad's --learning_rate defaults to 0.5, 0.6 with --oaa K on unit-norm examples.",
        structural=True, absent="sgd"),)
    default_lr = 0.01
    default_minibatch = 1
    default_lr_unit_oaa = 3.0  # sgd, --oaa K on unit-norm examples (benchmarks/bear_multiclass.py)
    #: version 1: sgd's default_lr_unit_oaa 1.0 (models saved before record no version); 2: 3.0; 3: --step_rule
    #: auto is adagrad with --oaa K on unit-norm examples, its -l 0.6 (was 2), --top_k 6000 with --oaa K
    STEP_DEFAULTS = 3
    default_lr_unit_oaa_before = {1: 1.0}
    default_top_k_oaa = 6000  # benchmarks/bear_multiclass.py --variants (README's frontier)
    kernels = _kernels
    run_kernel = "mission_run"
    compiled_kernels = ((_kernels, "mission_run"),)

    #: --step_rule adagrad: the step defaults (--learning_rate; with --oaa K on unit-norm examples)
    default_lr_adagrad = 0.5  # VW's -l (not tuned for mission)
    default_lr_adagrad_unit_oaa = 0.6  # benchmarks/bear_multiclass.py --variants (README's frontier)
    default_lr_adagrad_unit_oaa_before = {1: 2.0, 2: 2.0}

    def _apply_hyper(self):
        super()._apply_hyper()  # self.unit, and sgd's step
        mc = self.multiclass and self.unit
        rule = self.hyper.get("step_rule") or "auto"
        if rule == "auto":  # the step-defaults version of the model (a loaded one: the version it was saved with)
            rule = "adagrad" if mc and self.step_defaults >= 3 else "sgd"
        self.adagrad = rule == "adagrad"
        if self.adagrad and self.hyper["learning_rate"] is None:
            self.eta = self.default_lr_adagrad_unit_oaa_before.get(self.step_defaults, self.default_lr_adagrad_unit_oaa) \
                if mc else self.default_lr_adagrad
        self._ensure_sq_sums(self.adagrad)
        if getattr(self, "mkeys", None) is None:
            self._stale_membership()

    def step_settings(self) -> dict:
        return {**super().step_settings(), "--step_rule": "adagrad" if self.adagrad else "sgd"}

    def _extra_state(self):
        return (self.acc, self.iacc, self.mkeys, self.mmask, self.mcount)

    def _set_extra_state(self, extra):
        self.mkeys, self.mmask = extra[2], extra[3]  # reallocated when the map grows

    def _hyper_tuple(self):
        return _kernels.MissionHyper(self.loss_code, self.eta, self.schedule, self.t0, self.b, self.clip,
                                     self.const_key, self.adagrad)

    def _arrays(self):
        a = super()._arrays()
        if self.adagrad:
            self._sq_sums_arrays(a)
        return a

    def _load_arrays(self, arrays):
        """The sketch state, then (``--step_rule adagrad``) the count-min accumulator and the
        intercept's sums: finite (checked on load) and non-negative (their square roots divide)."""
        super()._load_arrays(arrays)
        self._stale_membership()  # new heaps: the map is rebuilt from them
        self._load_sq_sums(arrays, self.adagrad, "--step_rule adagrad")
