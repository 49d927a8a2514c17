"""The lazy re-base history shared by FTSL-Shampoo's and the sketched AdaGrad learners' sparse bases
(the idea of :mod:`streamlearn.algos._fd_son_kernels`; SON App. F's V = F Z representation).

A re-base replaces every stored feature's column c (its coordinates in the basis) by T c. Instead of
touching every feature, the learners record T in a history of suffix products: ``S[g]`` takes a
column stamped with re-base ``hbase + g`` to the current representation. A new re-base T updates
every held product, ``S[g] <- T S[g]``, and appends ``S[G] = T`` (:func:`_hist_push`); a feature is
brought up to date when it is next read, ``c <- S[g] c`` (each learner gathers its own columns:
FTSL-Shampoo's Z column, the sketched AdaGrad learners' [w_bar, Z column]); the learners empty the
history (every feature brought up to date) once it holds enough re-bases.
"""
import numpy as np
from numba import njit

from ..kernels._jit import INNER

__all__ = ["_hist_push"]


@njit(**INNER)
def _hist_push(S, G, T, nrow, ninner):
    """Record the re-base ``T`` (rows ``:nrow``, acting on the first ``ninner`` coordinates) after
    the G held ones: ``S[g][:nrow] <- T[:nrow, :ninner] S[g][:ninner]`` for g < G (rows past nrow
    set to 0), ``S[G] = T`` (rows past nrow 0). O(G nrow ninner ncol)."""
    ncol = S.shape[2]
    tmp = np.empty((S.shape[1], ncol))
    for g in range(G):
        for i in range(nrow):
            # row i of T S[g], the inner loop over S[g]'s contiguous rows (the same sums, in q order)
            for j in range(ncol):
                tmp[i, j] = 0.0
            for q in range(ninner):
                t = T[i, q]
                for j in range(ncol):
                    tmp[i, j] += t * S[g, q, j]
        for i in range(S.shape[1]):
            for j in range(ncol):
                S[g, i, j] = tmp[i, j] if i < nrow else 0.0
    for i in range(S.shape[1]):
        for j in range(ncol):
            S[G, i, j] = T[i, j] if i < nrow else 0.0
