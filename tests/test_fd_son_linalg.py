"""FD-SON's small dense kernels against NumPy: the symmetric eigen-solver (Householder + implicit QL)
and the radix sort that orders the table's features by key."""
import numpy as np
import pytest

from streamlearn.algos import _fd_son_kernels as fk


def _cases():
    rng = np.random.default_rng(3)
    out = [np.zeros((0, 0)), np.zeros((1, 1)), np.array([[2.0]]), np.zeros((5, 5)), np.eye(4), np.diag([3.0, -1.0, 2.0])]
    for n in (2, 3, 10, 11, 20):
        X = rng.standard_normal((n, n)) * np.logspace(0, 5, n)
        out.append(X.T @ X)  # ill-conditioned SPD
        Y = X[: n // 2]
        out.append(Y.T @ Y)  # rank-deficient: repeated zero eigenvalues
        S = rng.standard_normal((n, n))
        out.append(S + S.T)  # indefinite
    return out


@pytest.mark.parametrize("A", _cases(), ids=lambda A: f"n{A.shape[0]}")
def test_eigh_matches_numpy(A):
    w, V = fk.eigh(A)
    n = A.shape[0]
    scale = max(np.abs(A).max(), 1.0) if n else 1.0
    np.testing.assert_allclose(w, np.linalg.eigvalsh(A), rtol=0, atol=1e-12 * scale)
    assert (np.diff(w) >= 0).all()
    np.testing.assert_allclose(V.T @ V, np.eye(n), rtol=0, atol=1e-12)
    np.testing.assert_allclose(V @ np.diag(w) @ V.T, A, rtol=0, atol=1e-12 * scale)


def test_eigh_uses_the_symmetric_part():
    A = np.array([[1.0, 4.0], [0.0, 1.0]])
    np.testing.assert_allclose(fk.eigh(A)[0], [-1.0, 3.0], atol=1e-14)


@pytest.mark.parametrize("cap,n,hi", [(8, 0, 10), (8, 3, 10), (64, 1, 1), (1024, 500, 2**18),
                                      (1 << 15, 10000, 2**18), (4096, 2000, 2**62)])
def test_key_order_is_the_argsort_of_the_occupied_keys(cap, n, hi):
    rng = np.random.default_rng(cap + n)
    keys = np.full(cap, -1, np.int64)
    ks = np.unique(rng.integers(0, hi, n)) if n else np.zeros(0, np.int64)
    keys[rng.choice(cap, len(ks), replace=False)] = ks
    occ = np.flatnonzero(keys >= 0)
    np.testing.assert_array_equal(fk.key_order(keys), occ[np.argsort(keys[occ])])
