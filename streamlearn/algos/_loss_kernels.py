"""Compiled loss functions (same formulas as :mod:`streamlearn.algos.losses`)."""
import math

from numba import njit

__all__ = ["target", "loss_value", "loss_deriv", "scalar_target", "value_tau", "deriv_tau", "QUANTILE"]

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


@njit(cache=True, nogil=True)
def logistic_flow(z, a):
    """The margin change ``d >= 0`` of ``a >= 0`` units of continuous gradient flow on the logistic
    loss from margin ``z = y p``: the flow is ``dz/ds = 1 / (1 + e^z)``, so ``d`` solves
    ``d + e^z (e^d - 1) = a``. Solved for ``d`` itself by Newton's method (the function is convex and
    increasing, so after the first step the iterates decrease monotonically to the root), which keeps
    full relative precision where VW's ``W(e^x) - x`` form subtracts two nearly equal numbers."""
    if not a > 0.0:
        return 0.0
    ez = math.exp(min(z, 700.0))
    d = a / (1.0 + ez)  # the first Newton step from 0: at or above the root
    for _ in range(200):
        f = d + ez * math.expm1(d) - a
        nd = d - f / (1.0 + ez * math.exp(d))
        if not nd < d:  # no further decrease: converged
            break
        d = nd
    return d


@njit(cache=True, nogil=True)
def invariant_step(code, p, y, us, ppu):
    """Importance-invariant update (Karampatziakis & Langford 2011): the step ``upd`` on the
    prediction scale (the prediction moves by ``upd * ppu``) equal to ``us`` = step x importance
    weight units of continuous gradient flow along a direction that moves the prediction ``ppu`` per
    unit of gradient, so it never steps past the label (squared), the margin (hinge) or the
    logistic loss's flow. For small ``us * ppu`` it is ``-us l'(p)``."""
    if code == SQUARED:
        return (y - p) * -math.expm1(-2.0 * us * ppu) / ppu
    if code == LOGISTIC:
        return y * logistic_flow(y * p, us * ppu) / ppu
    err = 1.0 - y * p
    if err <= 0.0:
        return 0.0
    return y * (us if us * ppu < err else err / ppu)


# -- scalar losses with a parameter (quantile), for the learners whose kernels pass one -----------
QUANTILE = 3


@njit(cache=True, nogil=True, inline="always")
def scalar_target(code, label):
    """Label as the loss sees it: {-1,+1} for the classification losses, the label itself for
    squared and quantile loss."""
    if code == SQUARED or code == QUANTILE:
        return label
    return 1.0 if label > 0.0 else -1.0


@njit(cache=True, nogil=True, inline="always")
def value_tau(code, p, y, tau):
    """:func:`loss_value`, and the quantile (pinball) loss ``tau e`` for ``e = y - p > 0``,
    ``-(1 - tau) e`` otherwise (VW's quantileloss)."""
    if code == QUANTILE:
        e = y - p
        return tau * e if e > 0.0 else -(1.0 - tau) * e
    return loss_value(code, p, y)


@njit(cache=True, nogil=True, inline="always")
def deriv_tau(code, p, y, tau):
    """:func:`loss_deriv`, and the quantile loss's: 0 at ``p = y``, ``-tau`` below, ``1 - tau`` above."""
    if code == QUANTILE:
        e = y - p
        if e == 0.0:
            return 0.0
        return -tau if e > 0.0 else 1.0 - tau
    return loss_deriv(code, p, y)
