"""The dense sketched-AdaGrad references (tests/naive_sketched_adagrad.py) against the papers' own
claims and NOTES_ADA's corrections: full-rank exactness of S-ADA / Fast S-ADA / FTSL / FTFSL /
FTSL-Shampoo / CompAdaGrad, FTFSL = FTSL while nothing is discarded, the FD error bounds and
G~_t >= G~_{t-1} + g g^T, the printed Alg. 3 line 5 failing, and the delta = 0 guard. Pure NumPy,
a few seconds in all. The sparse learners of issue 18 are tested against these references."""
import numpy as np
import pytest

from naive_adagrad import adagrad_reference
from naive_sketched_adagrad import (
    FD, CompAdaGrad, DiagAdaGrad, FastFD, FastSADA, FDGeneral, FTFSL, FTSL, FTSLShampoo, FullAdaGrad,
    SADA, Shampoo, countsketch_map, eig_desc, hadamard, inv_root, l1_quadratic_min, sparse_sign_map,
    srht_map,
)

D = 8
ETA, DELTA = 0.5, 0.1


def _stream(T=150, d=D, seed=3, loss="logistic", rank=None):
    """Correlated Gaussian features (rank ``rank`` if given), labels from a random linear model."""
    rng = np.random.default_rng(seed)
    if rank is None:
        X = rng.standard_normal((T, d)) * np.linspace(0.3, 3.0, d)
    else:
        X = rng.standard_normal((T, rank)) @ rng.standard_normal((rank, d))
    X = X @ np.linalg.qr(rng.standard_normal((d, d)))[0]  # correlate the coordinates
    z = X @ rng.standard_normal(d)
    y = np.where(z > 0, 1.0, -1.0) if loss == "logistic" else z + 0.1 * rng.standard_normal(T)
    return X, y


def _rel(a, b):
    return np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))


def _learned(p, y, loss):
    """The run learned something: later predictions beat the first ones (guards against a
    comparison of two learners that never moved)."""
    if loss == "logistic":
        return np.mean(np.sign(p[-50:]) != y[-50:]) < 0.3
    return np.mean((p[-50:] - y[-50:]) ** 2) < 0.5 * np.mean(y[-50:] ** 2)


# ---------------------------------------------------------------- full-matrix / diagonal AdaGrad

def test_diag_adagrad_matches_the_existing_reference():
    """DiagAdaGrad (mirror, delta = 0) is tests/naive_adagrad.py's AdaGrad (which rounds its state
    to float32: the learner's storage), so both files share the loss and prediction conventions."""
    X, y = _stream()
    ours = DiagAdaGrad(D, ETA).run(X, y)
    theirs = adagrad_reference(X, y, "logistic", ETA)
    assert np.max(np.abs(ours - theirs)) < 1e-4
    assert _learned(ours, y, "logistic")


@pytest.mark.parametrize("form", ["mirror", "dual"])
@pytest.mark.parametrize("inside", [True, False])
def test_full_equals_diag_on_axis_aligned_gradients(form, inside):
    """One-hot rows make G_t diagonal: full-matrix AdaGrad is then diagonal AdaGrad (same delta
    placement), in both forms."""
    rng = np.random.default_rng(5)
    T = 120
    X = np.zeros((T, D))
    X[np.arange(T), rng.integers(0, D, T)] = rng.uniform(0.5, 2.0, T)
    y = np.where(rng.standard_normal(T) + X @ np.linspace(-1, 1, D) > 0, 1.0, -1.0)
    full = FullAdaGrad(D, ETA, DELTA, form=form, delta_inside=inside).run(X, y)
    diag = DiagAdaGrad(D, ETA, DELTA, form=form, delta_inside=inside).run(X, y)
    assert _rel(full, diag) < 1e-12
    assert np.ptp(full) > 0.5


def test_full_differs_from_diag_on_correlated_data():
    X, y = _stream()
    assert _rel(FullAdaGrad(D, ETA, DELTA).run(X, y), DiagAdaGrad(D, ETA, DELTA, delta_inside=True).run(X, y)) > 0.05


# ---------------------------------------------------------------- full-rank exactness (Yang)

@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("cls,form,taus", [
    (SADA, "mirror", [D, D + 3]),  # FD: tau = d already exact, the escaped mass added back
    (FTSL, "dual", [D, D + 3]),
    (FastSADA, "mirror", [D // 2 + 1, D]),  # fast FD: 2 tau > d never shrinks
    (FTFSL, "dual", [D // 2 + 1, D]),
])
def test_full_rank_sketch_is_full_matrix_adagrad(cls, form, taus, loss):
    X, y = _stream(loss=loss)
    eta = ETA
    full = FullAdaGrad(D, eta, DELTA, loss=loss, form=form).run(X, y)
    assert _learned(full, y, loss)
    for tau in taus:
        for lowrank in (False, True):
            sk = cls(D, tau, eta, DELTA, loss=loss, lowrank=lowrank).run(X, y)
            assert _rel(sk, full) < 1e-10, (tau, lowrank, _rel(sk, full))


@pytest.mark.parametrize("cls,form,tau", [(SADA, "mirror", D - 1), (FTSL, "dual", D - 1),
                                          (FastSADA, "mirror", D // 2), (FTFSL, "dual", D // 2)])
def test_one_size_smaller_is_not_exact(cls, form, tau):
    X, y = _stream()
    full = FullAdaGrad(D, ETA, DELTA, form=form).run(X, y)
    model = cls(D, tau, ETA, DELTA)
    assert _rel(model.run(X, y), full) > 1e-3
    assert model.sketch.shrinks > 0


@pytest.mark.parametrize("inside", [True, False])
def test_delta_placement_only_has_to_agree(inside):
    """NOTES_ADA puts delta inside the root; ADA-FULL's delta outside (Yang Sec. 2.1) gives the
    full-rank equality as well, provided full-matrix AdaGrad places it the same way. Mixing the
    placements does not."""
    X, y = _stream()
    full = FullAdaGrad(D, ETA, DELTA, form="dual", delta_inside=inside).run(X, y)
    other = FullAdaGrad(D, ETA, DELTA, form="dual", delta_inside=not inside).run(X, y)
    assert _rel(FTSL(D, D, ETA, DELTA, delta_inside=inside).run(X, y), full) < 1e-10
    assert _rel(FTFSL(D, D, ETA, DELTA, delta_inside=inside, lowrank=True).run(X, y), full) < 1e-10
    assert _rel(other, full) > 1e-3


def test_ftfsl_equals_ftsl_while_nothing_is_discarded():
    """Gradients of rank 3 < tau = 4: neither sketch discards, both are full-matrix primal-dual
    AdaGrad (and the mirror pair full-matrix mirror AdaGrad)."""
    X, y = _stream(rank=3)
    for form, a, b in (("dual", FTSL, FTFSL), ("mirror", SADA, FastSADA)):
        full = FullAdaGrad(D, ETA, DELTA, form=form).run(X, y)
        ma, mb = a(D, 4, ETA, DELTA), b(D, 4, ETA, DELTA)
        pa, pb = ma.run(X, y), mb.run(X, y)
        assert ma.sketch.shrinks == 0 and mb.sketch.shrinks == 0
        assert _rel(pa, full) < 1e-10 and _rel(pb, full) < 1e-10 and _rel(pa, pb) < 1e-10
        assert _learned(full, y, "logistic")


def test_ftfsl_and_ftsl_part_once_they_discard():
    """Generic gradients, tau = 3. FTSL first discards in round tau, and its rho enters G~ in that
    round; but then G~_tau = G_tau + rho (I - U U^T) differs from G_tau only outside the span of the
    gradients so far, where gbar_tau has no component: x_{tau+1} is still exact and prediction
    tau + 2 is the first to differ. FTFSL first shrinks at the end of round 2 tau; its rho enters
    at round 2 tau + 1 together with the clipped directions tau..2 tau, which gbar does reach:
    prediction 2 tau + 2 is the first to differ."""
    tau = 3
    X, y = _stream()
    full = FullAdaGrad(D, ETA, DELTA, form="dual").run(X, y)
    ftsl = FTSL(D, tau, ETA, DELTA).run(X, y)
    ftfsl = FTFSL(D, tau, ETA, DELTA).run(X, y)

    def same(a, b):
        return np.abs(a - b) <= 1e-10 * np.maximum(1.0, np.abs(b))

    s1, s2 = same(ftsl, full), same(ftfsl, full)
    assert s1[: tau + 1].all() and not s1[tau + 1]
    assert s2[: 2 * tau + 1].all() and not s2[2 * tau + 1]
    assert _rel(ftsl, ftfsl) > 1e-3


# ---------------------------------------------------------------- FD guarantees

def _spectral_min(M):
    return np.linalg.eigvalsh((M + M.T) / 2).min()


@pytest.mark.parametrize("fast", [False, True])
def test_fd_error_bounds(fast):
    """0 <= G_T - S_T <= rho_{1:T} I (Yang Lemma A.3, and A.4 for the fast sketch), and Lemma A.5:
    rho_{1:T} <= min_k sum_{i > k} lambda_i(G_T) / (tau - k) for k = 0..tau-1."""
    rng = np.random.default_rng(11)
    T, d, tau = 300, 20, 5
    A = rng.standard_normal((T, d)) * np.geomspace(5.0, 0.05, d)
    sk = FastFD(d, tau) if fast else FD(d, tau)
    for a in A:
        sk.insert(a)
        sk.end_round()
    rho = sk.rho + (sk.pending if fast else 0.0)  # every shrink so far
    G = A.T @ A
    E = G - sk.psd()
    scale = np.linalg.norm(G, 2)
    assert _spectral_min(E) >= -1e-10 * scale  # never over-approximates without rho
    assert _spectral_min(rho * np.eye(d) - E) >= -1e-10 * scale  # ... and rho covers the rest
    lam = eig_desc(G)[0]
    for k in range(tau):
        assert rho <= lam[k:].sum() / (tau - k) * (1 + 1e-9)
    assert sk.shrinks > 10


@pytest.mark.parametrize("cls", [FTSL, FTFSL, SADA, FastSADA])
def test_preconditioner_never_under_approximates_and_grows(cls):
    """At every round G~_t >= G~_{t-1} + g_t g_t^T (Yang App. A.4's chain for FTFSL; for FD it is
    B_t B_t^T + rho_t I >= B_{t-1} B_{t-1}^T + g g^T), hence G~_t >= G_t (Lemma A.3)."""
    X, y = _stream(T=80)
    model = cls(D, 3, ETA, DELTA)
    prev = np.zeros((D, D))
    G = np.zeros((D, D))
    for i in range(len(y)):
        x = X[i]
        p = model.step(x, y[i])
        g = float(model.loss.derivative(p, y[i])) * x
        G += np.outer(g, g)
        Gt = model.Gtilde
        tol = 1e-10 * max(1.0, np.abs(Gt).max())
        assert _spectral_min(Gt - prev - np.outer(g, g)) >= -tol, i
        assert _spectral_min(Gt - G) >= -tol, i
        prev = Gt
    assert model.sketch.shrinks > 5


# ---------------------------------------------------------------- NOTES_ADA's corrections

def test_printed_line5_needs_d_equal_2tau():
    with pytest.raises(ValueError, match="d = 2 tau"):
        FTFSL(D, 3, ETA, DELTA, line5="printed")


@pytest.mark.parametrize("cls,form", [(FTFSL, "dual"), (FastSADA, "mirror")])
def test_printed_line5_breaks_exactness(cls, form):
    """Where the printed g' = V^T (V^T g) type-checks (d = 2 tau), on gradients of rank 3 < tau the
    corrected line 5 (V (V^T g)) is full-matrix AdaGrad to 1e-10; the printed one is not: g' is not
    the projection, so columns are added on every round and the sketch shrinks."""
    X, y = _stream(rank=3)
    full = FullAdaGrad(D, ETA, DELTA, form=form).run(X, y)
    good = cls(D, D // 2, ETA, DELTA)
    bad = cls(D, D // 2, ETA, DELTA, line5="printed")
    assert _rel(good.run(X, y), full) < 1e-10 and good.sketch.shrinks == 0
    assert _rel(bad.run(X, y), full) > 1e-2 and bad.sketch.shrinks > 0


def test_line6_needs_a_tolerance():
    """With 2 tau > d, an exact test g' != g is true on round-off once V spans R^d: a junk column
    is added, r reaches 2 tau and the sketch shrinks, leaving full-matrix AdaGrad."""
    X, y = _stream()
    full = FullAdaGrad(D, ETA, DELTA, form="dual").run(X, y)
    good = FTFSL(D, D // 2 + 1, ETA, DELTA)
    bad = FTFSL(D, D // 2 + 1, ETA, DELTA, gs_tol=0.0)
    assert _rel(good.run(X, y), full) < 1e-10 and good.sketch.r == D
    assert _rel(bad.run(X, y), full) > 1e-2 and bad.sketch.shrinks > 0


def test_eig_desc_is_descending():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((6, 6))
    lam, U = eig_desc(A @ A.T)
    assert np.all(np.diff(lam) <= 0)
    assert np.allclose((U * lam) @ U.T, A @ A.T)


@pytest.mark.parametrize("cls,form", [(SADA, "mirror"), (FTSL, "dual")])
def test_delta_zero_is_guarded(cls, form):
    """The boxes literally (delta = 0) on gradients of rank 3 < tau: FD's lambda_tau is round-off
    (~1e-28 lambda_1). The guard counts it as 0, so rho stays 0 and the learner is pseudo-inverse
    full-matrix AdaGrad, also through App. A.1's low-rank formula (the sparse learners' form).
    Without the guard that formula divides by sqrt(rho) ~ 1e-14 and the run departs."""
    X, y = _stream(rank=3)
    full = FullAdaGrad(D, ETA, 0.0, form=form).run(X, y)
    assert np.all(np.isfinite(full)) and _learned(full, y, "logistic")
    for lowrank in (False, True):
        model = cls(D, 4, ETA, 0.0, lowrank=lowrank)
        p = model.run(X, y)
        assert model.sketch.rho == 0.0
        assert np.all(np.isfinite(p)) and _rel(p, full) < 1e-8
    unguarded = cls(D, 4, ETA, 0.0, lowrank=True, shrink_tol=0.0)
    p = unguarded.run(X, y)
    if unguarded.sketch.rho == 0.0:  # the guarded half above has run; this half needs round-off
        pytest.skip("this LAPACK returned an exact 0 for the rank-deficient eigenvalue: nothing to guard")
    assert 0 < unguarded.sketch.rho < 1e-20
    assert not np.all(np.isfinite(p)) or _rel(p, full) > 1.0


@pytest.mark.parametrize("cls", [FastSADA, FTFSL])
def test_delta_zero_fast_sketch_stays_finite(cls):
    X, y = _stream(rank=3)
    form = "mirror" if cls is FastSADA else "dual"
    full = FullAdaGrad(D, ETA, 0.0, form=form).run(X, y)
    for lowrank in (False, True):
        p = cls(D, 4, ETA, 0.0, lowrank=lowrank).run(X, y)
        assert np.all(np.isfinite(p)) and _rel(p, full) < 1e-8


# ---------------------------------------------------------------- Shampoo / FTSL-Shampoo

def _multiclass(T=150, K=3, d=5, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, d)) @ np.diag(np.linspace(0.5, 2.0, d))
    y = np.argmax(X @ rng.standard_normal((K, d)).T, axis=1) + 1.0
    return X, y


def test_ftsl_shampoo_full_size_is_shampoo():
    """Sketch sizes K (left) and d (right): Alg. 4 discards lambda_K I (resp. lambda_d I) from the
    whole space and rho adds it back, so L~_t, R~_t are Shampoo's (Yang Thm. 4.4's L_T, R_T)."""
    K, d = 3, 5
    X, y = _multiclass(K=K, d=d)
    pf, lf = Shampoo(K, d, ETA, DELTA).run(X, y)
    model = FTSLShampoo(K, d, ETA, DELTA, K, d)
    ps, ls = model.run(X, y)
    assert np.max(np.abs(ls - lf)) < 1e-10 * max(1.0, np.abs(lf).max())
    assert model.left.rho > 0 and model.right.rho > 0  # it did discard, and added it back
    assert np.mean(pf[-50:] != y[-50:]) < 0.3  # learned (chance is 2/3)
    small = FTSLShampoo(K, d, ETA, DELTA, 2, 3).run(X, y)[1]
    assert np.max(np.abs(small - lf)) > 1e-3


def test_shampoo_matrix_update_is_the_kronecker_update():
    """Yang App. A.6: W_{t+1} = -eta L~^{-1/4} Gbar R~^{-1/4} is x = -eta (L~^{1/4} (x) R~^{1/4})^{-1}
    vec(Gbar) (row-major vec), and Gupta et al.'s Lemma 8 (Yang Lemma A.9) with r = 1:
    eps I + sum g g^T <= (eps I + L)^{1/2} (x) (eps I + R)^{1/2}."""
    K, d = 3, 4
    X, y = _multiclass(T=40, K=K, d=d)
    model = Shampoo(K, d, ETA, DELTA)
    gg = np.zeros((K * d, K * d))
    for i in range(len(y)):
        W0 = model.W.copy()
        model.step(X[i], y[i])
        s = W0 @ X[i]
        p = np.exp(s - s.max())
        p /= p.sum()
        p[int(y[i]) - 1] -= 1.0
        g = np.outer(p, X[i]).ravel()
        gg += np.outer(g, g)
    lamL, UL = eig_desc(model.L + DELTA * np.eye(K))
    lamR, UR = eig_desc(model.R + DELTA * np.eye(d))
    L14 = (UL * lamL ** 0.25) @ UL.T
    R14 = (UR * lamR ** 0.25) @ UR.T
    x = -ETA * np.linalg.solve(np.kron(L14, R14), model.Gbar.ravel())
    assert np.allclose(x, model.W.ravel(), rtol=0, atol=1e-10 * np.abs(x).max())
    rhs = np.kron(L14 @ L14, R14 @ R14)
    assert _spectral_min(rhs - DELTA * np.eye(K * d) - gg) >= -1e-9 * np.abs(rhs).max()


def test_fd_general_rank_one_is_a_thin_svd():
    """NOTES_ADA: with G = q a^T, Alg. 4's eigendecomposition of B B^T + ||a||^2 q q^T is the SVD of
    the thin m x (tau + 1) matrix [B, ||a|| q]."""
    rng = np.random.default_rng(8)
    m, tau = 9, 4
    sk = FDGeneral(m, tau)
    for _ in range(20):
        q, a = rng.standard_normal(m), rng.standard_normal(3)
        B0 = sk.B.copy()
        lam_tau = sk.insert_psd((a @ a) * np.outer(q, q))
        U, s, _ = np.linalg.svd(np.column_stack([B0, np.linalg.norm(a) * q]), full_matrices=False)
        lam = s ** 2
        assert lam_tau == pytest.approx(lam[tau - 1], rel=1e-9)
        thin = (U[:, :tau] * np.maximum(lam[:tau] - lam[tau - 1], 0)) @ U[:, :tau].T
        assert np.allclose(sk.psd(), thin, atol=1e-10 * lam[0])


# ---------------------------------------------------------------- CompAdaGrad

N = 8  # a power of two for the SRHT


@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("make", [lambda: srht_map(N, 0), lambda: countsketch_map(N, 0, seed=1),
                                  lambda: sparse_sign_map(N, 0, seed=1)])
def test_compadagrad_k0_is_diagonal_adagrad_bit_for_bit(make, loss):
    """Mehta Sec. 2: k = 0, complement weight 1 (delta_c = 0, no regulariser) is diagonal AdaGrad;
    the complement step is written in AdaGrad's operation order, so the predictions are identical."""
    X, y = _stream(d=N, loss=loss)
    eta = ETA
    diag = DiagAdaGrad(N, eta, loss=loss).run(X, y)
    comp = CompAdaGrad(N, make(), eta, delta_r=0.3, delta_c=0.0, loss=loss).run(X, y)
    assert np.array_equal(comp, diag)
    assert _learned(diag, y, loss)


def test_compadagrad_k0_with_delta_and_weight_is_diagonal_adagrad():
    X, y = _stream(d=N)
    diag = DiagAdaGrad(N, ETA / 2.0, DELTA).run(X, y)  # comp_weight 2 halves the step
    comp = CompAdaGrad(N, srht_map(N, 0), ETA, 0.0, DELTA, comp_weight=2.0).run(X, y)
    assert _rel(comp, diag) < 1e-13


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_compadagrad_k_n_is_full_matrix_adagrad(loss):
    """k = n with the unscaled SRHT (an orthogonal Pi): the complement is empty and
    A = Pi^T (Pi G Pi^T + delta I)^{1/2} Pi = (G + delta I)^{1/2}, full-matrix AdaGrad."""
    X, y = _stream(d=N, loss=loss)
    eta = ETA
    full = FullAdaGrad(N, eta, DELTA, loss=loss).run(X, y)
    comp = CompAdaGrad(N, srht_map(N, N, seed=2), eta, DELTA, delta_c=0.7, comp_weight=3.0, loss=loss).run(X, y)
    assert _rel(comp, full) < 1e-10


@pytest.mark.parametrize("make", [lambda: srht_map(N, 3, seed=5), lambda: countsketch_map(N, 3, seed=5),
                                  lambda: sparse_sign_map(N, 3, s=2, seed=5)])
def test_compadagrad_on_data_inside_the_subspace_is_full_matrix_adagrad(make):
    """Mehta Sec. 3: when the data lie in the subspace the map keeps, CompAdaGrad is full-matrix
    AdaGrad (P_perp g = 0: the complement never moves; the subspace part is (G + delta I)^{1/2})."""
    Pi = make()
    rng = np.random.default_rng(6)
    Z = rng.standard_normal((120, 3)) * np.array([3.0, 1.0, 0.3])
    X = Z @ Pi
    y = np.where(Z @ rng.standard_normal(3) > 0, 1.0, -1.0)
    full = FullAdaGrad(N, ETA, DELTA).run(X, y)
    comp = CompAdaGrad(N, Pi, ETA, DELTA, delta_c=DELTA).run(X, y)
    assert _rel(comp, full) < 1e-10
    assert _learned(full, y, "logistic")
    Xg, yg = _stream(d=N)  # generic data: neither full-matrix nor diagonal AdaGrad
    comp = CompAdaGrad(N, Pi, ETA, DELTA, delta_c=DELTA).run(Xg, yg)
    assert _rel(comp, FullAdaGrad(N, ETA, DELTA).run(Xg, yg)) > 1e-3
    assert _rel(comp, DiagAdaGrad(N, ETA, DELTA).run(Xg, yg)) > 1e-3


def test_maps():
    H = hadamard(N)
    assert np.allclose(H @ H.T, np.eye(N)) and np.allclose(np.abs(H), 1 / np.sqrt(N))
    for Pi in (srht_map(N, 3, seed=1), countsketch_map(64, 5, seed=1), sparse_sign_map(N, 3, seed=1)):
        assert np.allclose(Pi @ Pi.T, np.eye(Pi.shape[0]))
    cs = countsketch_map(64, 5, seed=1)
    assert np.all(np.count_nonzero(cs, axis=0) == 1)
    assert np.allclose(srht_map(N, 2, seed=1, scaled=True), 2.0 * srht_map(N, 2, seed=1))


@pytest.mark.parametrize("scaled", [False, True])
def test_compadagrad_l2_step_is_mehta_lemma5_and_lemma6(scaled):
    """One l2 composite step from a non-zero state: the dense solve equals the paper's decoupled
    closed forms, Eq. 13 (Lemma 5, x_par = Pi^T (n/k K + lam I)^{-1} (K Pi x_t - k/n Pi g) for the
    scaled SRHT; the n/k factors are Pi Pi^T's, 1 unscaled) plus Eqs. 14-15 (Lemma 6)."""
    k, l2, eta = 3, 0.4, 0.7
    Pi = srht_map(N, k, seed=9, scaled=scaled)
    X, y = _stream(d=N, T=30)
    model = CompAdaGrad(N, Pi, eta, DELTA, 0.2, comp_weight=1.5, l2=l2)
    model.run(X[:29], y[:29])
    xt = model.w.copy()
    # the state after round 30's accumulation, before its step, as the decoupled formulas see it
    p = float(xt @ X[29])
    g = float(model.loss.derivative(p, y[29])) * X[29]
    model.step(X[29], y[29])
    c2 = (N / k) if scaled else 1.0  # Pi Pi^T = c2 I
    lamS, US = eig_desc(model.S)
    K = (US * np.sqrt(lamS + DELTA)) @ US.T
    gg, lam = eta * g, eta * l2
    x_par = Pi.T @ np.linalg.solve(c2 * K + lam * np.eye(k), K @ Pi @ xt - Pi @ gg / c2)  # Eq. 13
    Dm = np.diag(1.5 * (np.sqrt(model.Gperp) + 0.2))
    Pp = np.eye(N) - Pi.T @ Pi / c2
    B = np.linalg.inv(Dm + lam * np.eye(N))
    yv = -Pp @ gg + Dm @ Pp @ xt
    nu = np.linalg.solve(Pi @ B @ Pi.T, Pi @ B @ (-Pp @ gg + Dm @ Pp @ xt - Dm @ B @ yv - lam * B @ yv + yv))  # Eq. 15
    x_perp = B @ (-Pp @ gg + Dm @ Pp @ xt - Pi.T @ nu)  # Eq. 14
    assert np.allclose(x_par + x_perp, model.w, rtol=0, atol=1e-12 * np.abs(model.w).max())
    assert np.abs(Pi @ x_perp).max() < 1e-12 and np.abs(Pp @ x_par).max() < 1e-12


def test_scaled_srht_shrinks_the_subspace_step():
    """NOTES_ADA: the paper's scaled Pi = c R H Sigma (c^2 = n/k) makes A^(r) c^3 times larger
    (exactly, with delta_r scaled by c^2), so the subspace part of the step is c^3 = (n/k)^1.5 times
    smaller while the complement part is unchanged."""
    k = 2
    c = np.sqrt(N / k)
    X, y = _stream(d=N, T=1)
    un = CompAdaGrad(N, srht_map(N, k, seed=3), ETA, DELTA, DELTA)
    sc = CompAdaGrad(N, srht_map(N, k, seed=3, scaled=True), ETA, DELTA * c ** 2, DELTA)
    un.step(X[0] + 1.0, 1.0)
    sc.step(X[0] + 1.0, 1.0)
    P = un.P
    assert np.allclose(P @ sc.w, P @ un.w / c ** 3, atol=1e-14)
    assert np.allclose(un.Pperp @ sc.w, un.Pperp @ un.w, atol=1e-14)
    assert np.abs(P @ un.w).max() > 1e-3


def test_l1_quadratic_min_kkt():
    rng = np.random.default_rng(3)
    M = rng.standard_normal((6, 6))
    A = M @ M.T + 0.1 * np.eye(6)
    b = rng.standard_normal(6) * 3
    x = l1_quadratic_min(A, b, 1.0, np.zeros(6))
    grad = A @ x - b
    nz = x != 0
    assert np.allclose(grad[nz], -np.sign(x[nz]) * 1.0, atol=1e-10)
    assert np.all(np.abs(grad[~nz]) <= 1.0 + 1e-10)
    assert 0 < nz.sum() < 6


@pytest.mark.parametrize("k", [0, 3, N])
def test_compadagrad_l1_step_solves_the_composite_problem(k):
    """Every l1 step satisfies the optimality conditions of Mehta's Eq. 16 problem
    argmin <eta g - A x_t, x> + 1/2 x^T A x + eta l1 ||x||_1 (A = A^(r) + comp_weight A^(c)); k = 0
    takes the closed-form soft-threshold, k > 0 coordinate descent. A large l1 keeps w at 0."""
    X, y = _stream(d=N, T=60)
    l1 = 0.05
    model = CompAdaGrad(N, srht_map(N, k, seed=4), ETA, DELTA, DELTA, l1=l1)
    zeros = 0
    for i in range(len(y)):
        xt = model.w.copy()
        p = model.step(X[i], y[i])
        g = float(model.loss.derivative(p, y[i])) * X[i]
        A = model.A()
        grad = A @ (model.w - xt) + ETA * g
        nz = model.w != 0
        zeros += (~nz).sum()
        tol = 1e-9 * max(1.0, np.abs(grad).max())
        assert np.allclose(grad[nz], -ETA * l1 * np.sign(model.w[nz]), atol=tol), i
        assert np.all(np.abs(grad[~nz]) <= ETA * l1 + tol), i
    assert zeros > 0 and np.abs(model.w).max() > 0.05
    big = CompAdaGrad(N, srht_map(N, k, seed=4), ETA, DELTA, DELTA, l1=1e3)
    big.run(X, y)
    assert np.all(big.w == 0)
