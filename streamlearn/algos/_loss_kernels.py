"""Compiled loss functions (same formulas as :mod:`streamlearn.algos.losses`)."""
import math

from numba import njit

__all__ = ["target", "loss_value", "loss_deriv"]

SQUARED, LOGISTIC, HINGE = 0, 1, 2


@njit(cache=True, nogil=True, inline="always")
def target(code, label):
    """Label as the loss sees it: {-1,+1} for classification losses."""
    if code == SQUARED:
        return label
    return 1.0 if label > 0.0 else -1.0


@njit(cache=True, nogil=True, inline="always")
def loss_value(code, p, y):
    """Loss of raw prediction p against target y."""
    if code == SQUARED:
        return (p - y) * (p - y)
    if code == LOGISTIC:
        z = -y * p
        if z > 0:
            return z + math.log1p(math.exp(-z))
        return math.log1p(math.exp(z))
    m = 1.0 - y * p
    return m if m > 0.0 else 0.0


@njit(cache=True, nogil=True, inline="always")
def loss_deriv(code, p, y):
    """d loss / d p."""
    if code == SQUARED:
        return 2.0 * (p - y)
    if code == LOGISTIC:
        z = y * p
        if z > 0:
            e = math.exp(-z)
            return -y * e / (1.0 + e)
        return -y / (1.0 + math.exp(z))
    return -y if y * p < 1.0 else 0.0
