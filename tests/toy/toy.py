"""The toy learner (``--algo toy``): online gradient descent with a constant step."""
from __future__ import annotations

import numpy as np

from streamlearn.algos.base import Learner, Param
from streamlearn.kernels import lazy

__all__ = ["Toy"]

_kernels = lazy("toy._toy_kernels")


class Toy(Learner):
    """Plain SGD on a 2^b weight table."""

    name = "toy"
    PARAMS = (Param("learning_rate", float, 0.05, "Step size eta.", short="-l"),)

    def __init__(self, **hyper):
        super().__init__(**hyper)
        self.w = np.zeros(1 << self.bits)
        self.t = np.zeros(1, np.int64)

    def _run(self, batch, learn):
        pred, loss = np.empty(batch.n), np.empty(batch.n)
        state = _kernels.ToyState(*(getattr(self, f) for f in _kernels.ToyState._fields))
        hyper = _kernels.ToyHyper(self.mask, self.loss.code, float(self.hyper["learning_rate"]))
        self.examples_learned += int(_kernels.toy_run(batch.offsets, batch.indices, batch.values, batch.labels,
                                                      batch.weights, state, hyper, learn, pred, loss))
        return pred, loss

    def _arrays(self):
        return {f: getattr(self, f) for f in _kernels.ToyState._fields}

    def _load_arrays(self, arrays):
        for f in _kernels.ToyState._fields:
            setattr(self, f, np.array(arrays[f], dtype=getattr(self, f).dtype))
