"""The dense FD-SON / RFD-SON references (tests/naive_fd_son.py) against the papers' own claims:
exactness at m = d + 1 (and not at m = d), the Sherman-Morrison H of the epoch sketch against a
direct inverse, and the FD / RFD error bounds. The sparse learners are tested against these."""
import numpy as np
import pytest

from naive_fd_son import FDSketch, NaiveFDSON, son_synthetic

D = 8


def _stream(T=60, d=D, seed=3, loss="squared"):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, d)) * np.linspace(0.3, 3.0, d)
    theta = rng.standard_normal(d)
    y = X @ theta + 0.1 * rng.standard_normal(T)
    if loss != "squared":
        y = np.where(y > 0, 1.0, -1.0)
    return X, y


def _close(a, b, rtol=1e-8):
    return np.abs(a - b) <= rtol * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))


@pytest.mark.parametrize("sketch", ["fd", "fd-epoch", "rfd", "rfd-epoch"])
@pytest.mark.parametrize("loss,C", [("squared", 0.0), ("logistic", 0.0), ("hinge", 0.0), ("squared", 1.5)])
def test_m_d_plus_1_is_online_newton(sketch, loss, C):
    X, y = _stream(loss=loss)
    c = 0.5 if loss == "squared" else 1.0
    full = NaiveFDSON(D, 0, 0.7, sketch="full", c=c, C=C, loss=loss).run(X, y)
    fd = NaiveFDSON(D, D + 1, 0.7, sketch=sketch, c=c, C=C, loss=loss).run(X, y)
    assert np.all(_close(fd, full)), np.max(np.abs(fd - full))
    assert np.ptp(full) > 0.1  # it learned something


@pytest.mark.parametrize("sketch", ["fd", "fd-epoch"])
def test_m_d_leaves_online_newton_at_round_d_plus_1(sketch):
    X, y = _stream()
    full = NaiveFDSON(D, 0, 0.7, sketch="full", c=0.5).run(X, y)
    fd = NaiveFDSON(D, D, 0.7, sketch=sketch, c=0.5).run(X, y)
    same = _close(fd, full)
    assert same[:D].all()  # rounds 1..d
    assert not same[D]  # round d + 1: the m-row sketch kept only m - 1 = d - 1 directions


@pytest.mark.parametrize("loss", ["squared", "hinge"])
@pytest.mark.parametrize("sketch", ["rfd", "rfd-epoch"])
def test_rfd_alpha0_zero_is_pseudo_inverse_online_newton(sketch, loss):
    """alpha0 = 0: RFD-SON at m = d + 1 never shrinks, so alpha stays 0 and it is SON App. D's
    pseudo-inverse ONS."""
    X, y = _stream(loss=loss)
    full = NaiveFDSON(D, 0, 0.0, sketch="full", c=0.5, loss=loss).run(X, y)
    model = NaiveFDSON(D, D + 1, 0.0, sketch=sketch, c=0.5, loss=loss)
    rfd = model.run(X, y)
    assert model.sk.alpha == 0.0
    assert np.all(_close(rfd, full)), np.max(np.abs(rfd - full))
    assert np.ptp(full) > 0.1


def test_rfd_alpha_grows_by_half_the_shrinks():
    X, y = _stream(T=200)
    model = NaiveFDSON(D, 4, 0.0, sketch="rfd", c=0.5)
    model.run(X, y)
    assert model.sk.shrunk > 0
    assert model.sk.alpha == pytest.approx(model.sk.shrunk / 2, rel=1e-12)


@pytest.mark.parametrize("m", [1, 3, 5])
def test_epoch_sherman_morrison_h_is_the_inverse_at_every_round(m):
    """Alg. 6 lines 2-3 with q = S g^ - (g^T g^ / 2) e keep H = (alpha I + S S^T)^-1."""
    rng = np.random.default_rng(7)
    d, alpha = 12, 0.3
    sk = FDSketch(d, m, alpha, epoch=True)
    for t in range(5 * m + 2):
        gh = rng.standard_normal(d) * 2.0
        sk.insert(gh)
        S = sk.sketch()
        direct = np.linalg.inv(alpha * np.eye(2 * m) + S @ S.T)
        assert np.allclose(sk.H, direct, rtol=0, atol=1e-10 * np.abs(direct).max()), t


def test_epoch_update_without_the_half_is_wrong():
    """NOTES_FD item 1: Alg. 9 line 3's q = S g^ - (g^T g^) e (no 1/2) does not give the inverse."""
    rng = np.random.default_rng(1)
    d, m, alpha = 10, 3, 0.5
    S = np.zeros((2 * m, d))
    H = np.eye(2 * m) / alpha
    gh = rng.standard_normal(d)
    S[m] = gh
    e = np.zeros(2 * m)
    e[m] = 1.0
    q = S @ gh - (gh @ gh) * e
    H = H - np.outer(H @ q, e @ H) / (1.0 + e @ H @ q)
    H = H - np.outer(H @ e, q @ H) / (1.0 + q @ H @ e)
    assert not np.allclose(H, np.linalg.inv(alpha * np.eye(2 * m) + S @ S.T), atol=1e-3)


def _spectral(M):
    return np.abs(np.linalg.eigvalsh((M + M.T) / 2)).max()


@pytest.mark.parametrize("epoch", [False, True])
def test_fd_and_rfd_error_bounds(epoch):
    """FD: ||A^T A - B^T B||_2 <= ||A - A_k||_F^2 / (m - k) for every k < m (Liberty 2013; Ghashami
    et al. 2016). RFD (Luo et al. 2019, Thm. 3): ||A^T A - B^T B - alpha I||_2 is at most half that."""
    rng = np.random.default_rng(11)
    T, d, m = 300, 30, 6
    A = rng.standard_normal((T, d)) * np.geomspace(5.0, 0.05, d)
    fd = FDSketch(d, m, 0.0, epoch=epoch)
    rfd = FDSketch(d, m, 0.0, epoch=epoch, robust=True)
    for a in A:
        fd.insert(a)
        rfd.insert(a)
    sv = np.linalg.svd(A, compute_uv=False)
    err_fd = _spectral(A.T @ A - fd.psd())
    err_rfd = _spectral(A.T @ A - rfd.psd() - rfd.alpha * np.eye(d))
    assert np.allclose(fd.psd(), rfd.psd())  # RFD's sketch is FD's; only alpha differs
    for k in range(m):
        tail = np.sum(sv[k:] ** 2)
        assert err_fd <= tail / (m - k) * (1 + 1e-9)
        assert err_rfd <= tail / (2 * (m - k)) * (1 + 1e-9)
    # 0 <= A^T A - B^T B <= (sum of shrinks) I, so RFD's alpha = half the shrinks centres the error:
    assert err_fd <= fd.shrunk * (1 + 1e-9)
    assert err_rfd <= 0.5 * fd.shrunk * (1 + 1e-9)
    # about half of FD's on this stream (not a theorem: at most half FD's bound, not of FD's error)
    assert err_rfd <= 0.51 * err_fd


def test_son_synthetic_design():
    """Same labels for every kappa, and the spectrum of the covariance is 1 except the top ten."""
    X10, y10 = son_synthetic(T=4000, d=50, kappa=10.0, seed=4)
    X200, y200 = son_synthetic(T=4000, d=50, kappa=200.0, seed=4)
    assert np.array_equal(y10, y200)
    assert 0.3 < np.mean(y10 > 0) < 0.7
    ev10 = np.linalg.eigvalsh(X10.T @ X10 / 4000)
    ev200 = np.linalg.eigvalsh(X200.T @ X200 / 4000)
    assert ev200.max() / ev10.max() == pytest.approx(20.0, rel=0.2)
    assert ev200[-11] < 2.0 and ev200[-10] > 15.0


@pytest.mark.parametrize("loss,p,y,h,q", [("squared", 0.3, 1.0, 1.0, 0.01), ("squared", -2.0, 1.0, 2.0, 5.0),
                                          ("logistic", 0.5, -1.0, 1.0, 3.0), ("logistic", -4.0, 1.0, 0.5, 40.0),
                                          ("hinge", 0.2, 1.0, 1.0, 0.3), ("hinge", -1.0, -1.0, 1.0, 5.0)])
def test_invariant_update_is_the_gradient_flow(loss, p, y, h, q):
    """invariant_update() (the step of the learners' default --invariant) is h units of gradient flow
    dp/ds = -l'(p) q: against an explicit Euler integration with 200,000 small steps; and for small h q it
    is the plain step -h l'(p) q."""
    from naive_fd_son import deriv, invariant_update
    n = 200_000
    z = p
    for _ in range(n):
        z -= deriv(loss, z, y) * q * h / n
    assert invariant_update(loss, p, y, h, q) == pytest.approx(z - p, rel=1e-3, abs=1e-6)
    assert invariant_update(loss, p, y, 1e-6, q) == pytest.approx(-1e-6 * deriv(loss, p, y) * q, rel=1e-4)
