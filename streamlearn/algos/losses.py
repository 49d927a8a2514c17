"""Loss functions: names, integer codes for kernels, NumPy references and links.

Gradient convention (VW's): ``p`` is the raw prediction, ``y`` the label.

* ``squared``:  loss ``(p - y)**2``, derivative ``2 (p - y)``; any real label.
* ``logistic``: loss ``log(1 + exp(-y p))`` with ``y`` in {-1, +1}, derivative ``-y / (1 + exp(y p))``.
* ``hinge``:    loss ``max(0, 1 - y p)`` with ``y`` in {-1, +1}, derivative ``-y`` where ``y p < 1``.
* ``quantile``: VW's pinball loss ``tau (y - p)`` for ``y > p``, ``(1 - tau) (p - y)`` otherwise
  (any real label; ``tau``: ``--quantile_tau``, default 0.5), derivative ``-tau`` / ``1 - tau``
  (0 at ``p = y``). Only the learners whose kernels pass ``tau`` take it (``Learner.losses``).

For the classification losses a label ``> 0`` is the positive class and any other label
(``-1`` or ``0``) the negative one, so LIBSVM files with {0, 1} labels work unchanged.
The compiled versions live in :mod:`streamlearn.algos._loss_kernels` (same formulas).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Loss", "LOSSES", "SQUARED", "LOGISTIC", "HINGE", "QUANTILE", "get_loss", "best_constant"]

SQUARED, LOGISTIC, HINGE, QUANTILE = 0, 1, 2, 3


@dataclass(frozen=True)
class Loss:
    name: str
    code: int
    classification: bool
    tau: float = 0.5  # quantile loss only

    def target(self, labels):
        """Labels as the loss sees them ({-1,+1} for classification losses)."""
        labels = np.asarray(labels, dtype=np.float64)
        return np.where(labels > 0, 1.0, -1.0) if self.classification else labels

    def value(self, p, labels):
        """Per-example loss (NumPy reference)."""
        p = np.asarray(p, dtype=np.float64)
        y = self.target(labels)
        if self.code == SQUARED:
            return (p - y) ** 2
        if self.code == LOGISTIC:
            return np.logaddexp(0.0, -y * p)
        if self.code == QUANTILE:
            e = y - p
            return np.where(e > 0, self.tau * e, -(1.0 - self.tau) * e)
        return np.maximum(0.0, 1.0 - y * p)

    def derivative(self, p, labels):
        """d loss / d p (NumPy reference)."""
        p = np.asarray(p, dtype=np.float64)
        y = self.target(labels)
        if self.code == SQUARED:
            return 2.0 * (p - y)
        if self.code == LOGISTIC:
            return -y / (1.0 + np.exp(y * p))
        if self.code == QUANTILE:
            e = y - p
            return np.where(e > 0, -self.tau, np.where(e < 0, 1.0 - self.tau, 0.0))
        return np.where(y * p < 1.0, -y, 0.0)

    def link(self, p):
        """Prediction in label space: probability for logistic, identity otherwise."""
        p = np.asarray(p, dtype=np.float64)
        if self.code == LOGISTIC:
            return 1.0 / (1.0 + np.exp(-p))
        return p


LOSSES = {
    "squared": Loss("squared", SQUARED, False),
    "logistic": Loss("logistic", LOGISTIC, True),
    "hinge": Loss("hinge", HINGE, True),
    "quantile": Loss("quantile", QUANTILE, False),
}


def get_loss(name: str, tau: float = 0.5) -> Loss:
    """The loss called ``name`` (``squared``, ``logistic``, ``hinge`` or ``quantile`` with ``tau``)."""
    try:
        loss = LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown loss function {name!r}; choose from {', '.join(LOSSES)}") from None
    return Loss(name, QUANTILE, False, float(tau)) if name == "quantile" else loss


def best_constant(loss: Loss, wsum: float, wlabel_sum: float, wpos: float, wlabel_sq_sum: float):
    """VW's 'best constant' and its average loss, from weighted label sums.

    ``wsum`` = sum of weights, ``wlabel_sum`` = sum w*y, ``wpos`` = weight of positive labels,
    ``wlabel_sq_sum`` = sum w*y^2 (labels as the loss sees them).
    """
    if wsum <= 0:
        return 0.0, 0.0
    if loss.code == QUANTILE:
        return None, None  # a weighted quantile of every label: not kept by a streaming run
    if loss.code == SQUARED:
        c = wlabel_sum / wsum
        return c, max(0.0, wlabel_sq_sum / wsum - c * c)
    p = wpos / wsum
    if loss.code == LOGISTIC:
        if p <= 0.0 or p >= 1.0:
            return (float("inf") if p >= 1 else float("-inf")), 0.0
        c = float(np.log(p / (1 - p)))
        return c, float(-(p * np.log(p) + (1 - p) * np.log(1 - p)))
    # hinge: the best constant in [-1, 1] is the majority sign; loss = 2 * minority fraction
    c = 1.0 if p >= 0.5 else -1.0
    return c, 2.0 * min(p, 1 - p)
