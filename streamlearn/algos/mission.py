"""MISSION (``--algo mission``): SGD on Count-Sketched weights with a top-k heap.

Aghazadeh et al., "MISSION: Ultra Large-Scale Feature Selection using Count-Sketches",
ICML 2018; the first-order baseline of BEAR (BEAR paper
Sec. 6). Each minibatch of ``--minibatch`` labeled examples (default 1) is one iteration: QUERY
the active set's weights (members of the top-k heap only), mean gradient, ADD ``-eta g`` to the
sketch, re-QUERY and offer the active set to the heap. The sketch, heap, options and
minibatch driver are the family's (:mod:`streamlearn.algos.sketch`). Deviation from the paper:
predictions use only the top-k features, as BEAR's (NOTES_BEAR item 6).
"""
from __future__ import annotations

from ..kernels import lazy
from .sketch import MINIBATCH_PARAM, SKETCH_PARAMS, SketchLearner

__all__ = ["Mission"]

_kernels = lazy("streamlearn.algos._mission_kernels")


class Mission(SketchLearner):
    """MISSION: minibatch SGD whose weights live in a Count Sketch; predictions and the
    selected features come from the top-k heap."""

    name = "mission"
    PARAMS = SKETCH_PARAMS + (MINIBATCH_PARAM,)
    default_lr = 0.01
    default_minibatch = 1
    default_lr_unit_oaa = 3.0  # --oaa K on unit-norm examples (benchmarks/bear_multiclass.py)
    STEP_DEFAULTS = 2  # version 1: default_lr_unit_oaa 1.0 (models saved before record no version)
    default_lr_unit_oaa_before = {1: 1.0}
    kernels = _kernels
    run_kernel = "mission_run"
    compiled_kernels = ((_kernels, "mission_run"),)

    def _hyper_tuple(self):
        return _kernels.MissionHyper(self.loss_code, self.eta, self.schedule, self.t0, self.b, self.clip,
                                     self.const_key)
