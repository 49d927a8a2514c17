"""Diagonal AdaGrad (``--algo adagrad``, the default learner).

Duchi, Hazan & Singer (2011), diagonal version: ``G += g*g``, ``w -= eta g / sqrt(G)``.
With ``--normalized``: the normalized, adaptive, importance-invariant update that Vowpal
Wabbit's default learner uses (Ross, Mineiro & Langford 2013), so VW users find their default
(VW: ``-l 0.5``, the default here when ``--normalized`` is given).

State: ``w``, ``G`` (and ``N``, the per-feature scale, for ``--normalized``) as float32 arrays
of length ``2**b``, like VW's weight table; arithmetic is float64.

Kernel: :func:`streamlearn.kernels.adagrad_run`, the seam's binding of
:func:`streamlearn.algos._adagrad_kernels.adagrad_run` (numba) or of its bit-identical C port,
so that an AdaGrad run over text never starts numba.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from .base import Learner, Param, lazy_copy, lazy_zeros

__all__ = ["AdaGrad"]


class AdaGrad(Learner):
    name = "adagrad"
    PARAMS = (
        Param("learning_rate", float, None,
              "Step size eta (adagrad: 0.1; with --normalized: 0.5, VW's default).", short="-l"),
        Param("normalized", bool, False,
              "Use VW's default update: normalized, adaptive, importance-invariant (Ross et al. 2013).",
              structural=True),
    )

    def __init__(self, **hyper):
        super().__init__(**hyper)
        size = 1 << self.bits
        self.w = lazy_zeros(size, np.float32)
        self.G = lazy_zeros(size, np.float32)
        self.N = lazy_zeros(size if self.hyper["normalized"] else 1, np.float32)
        self.scal = np.zeros(4, np.float64)  # sum_norm_x, total_weight, min_label, max_label
        self._apply_hyper()

    compiled_kernels = ((kernels.lazy("streamlearn.algos._adagrad_kernels"), "adagrad_run"),)

    def compiles_on_first_use(self) -> bool:
        return kernels.backend() != "c" and super().compiles_on_first_use()

    def _apply_hyper(self):
        lr = self.hyper["learning_rate"]
        self.eta = float(lr if lr is not None else (0.5 if self.hyper["normalized"] else 0.1))

    def _run(self, batch, learn):
        pred = np.empty(batch.n)
        loss = np.empty(batch.n)
        args = (batch.offsets, batch.indices, batch.values, batch.labels, batch.weights,
                self.w, self.G, self.N, self.scal, self.mask, self.loss.code, self.eta,
                bool(self.hyper["normalized"]), learn, pred, loss)
        n = kernels.adagrad_run(*args)
        self.examples_learned += n
        return pred, loss

    per_hash_weights = True

    def audit_columns(self, hashes):
        """``[w, G]`` of the features (VW's audit ``weight@adaptive sum``)."""
        idx = np.asarray(hashes, np.int64) & self.mask
        return [self.w[idx], self.G[idx]]

    def readable_weights(self):
        """``(indices, [w, G] or [w, G, N])`` where ``w != 0`` (VW's text model: the weight and
        its adaptive (and normalizer) state)."""
        nz = np.flatnonzero(self.w)
        cols = [self.w[nz], self.G[nz]] + ([self.N[nz]] if self.hyper["normalized"] else [])
        return nz, cols

    def label_range(self):
        return float(self.scal[2]), float(self.scal[3])

    def learn_batch(self, batch):
        return self._run(batch, True)

    def predict_batch(self, batch):
        return self._run(batch, False)

    def _arrays(self):
        return {"w": self.w, "G": self.G, "N": self.N, "scal": self.scal}

    def _load_arrays(self, arrays):
        for k in ("w", "G", "N", "scal"):
            a = np.asarray(arrays[k])
            cur = getattr(self, k)
            if a.shape != cur.shape or a.dtype != cur.dtype:
                raise ValueError(f"array {k}: shape/dtype {a.shape}/{a.dtype} does not fit {cur.shape}/{cur.dtype}")
            setattr(self, k, lazy_copy(a))
