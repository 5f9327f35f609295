"""Hostile but legal edits and inputs found by review: each test fails without its fix.

A certificate edited after the run (its arrays given another shape or dtype) must be
rejected, never verified for a claim that does not hold.
"""
import copy

import numpy as np
import pytest

import marginkit as mk


def _infeasibility_certificate():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 3)), rng.choice([-1, 1], 40)
    res = mk.solve(X, y, solver="nvn")
    assert res.status == "infeasible"
    return res.certificate


def _nearly_flat_separable():
    """Two points separable through the origin with a margin of about 1e-4."""
    X = np.array([[1.0, 1e-4], [1.0, -1e-4]])
    y = np.array([1, -1])
    assert mk.solve(X, y, solver="perceptron").status == "separable"
    return X, y


def test_an_infeasibility_certificate_with_p_as_a_matrix_is_rejected():
    """p replaced by k copies of the uniform vector as the columns of an n x k matrix (each
    scaled 1/k, so sum(p) = 1): the columns' norms, added in quadrature, are 1/sqrt(k) of
    ||p||_G, below eps for k large, on data that are separable."""
    X, y = _nearly_flat_separable()
    cert = copy.copy(_infeasibility_certificate())
    k = 100_000
    cert.p = np.full((2, k), 1.0 / (2 * k))
    verdict = cert.check(X, y)
    assert not verdict and "p must be a real vector" in verdict.reason
    cert.p = np.full((2, 1), 0.5)
    assert not cert.check(X, y)
    cert.p = np.full(2, 0.5)  # the claim itself: false on separable data
    assert not cert.check(X, y)


def test_a_separator_certificate_with_alpha_of_another_kind_is_rejected():
    X, y = _nearly_flat_separable()
    cert = mk.solve(X, y, solver="perceptron").certificate
    assert cert.verify(X, y)
    for alpha in (cert.alpha.reshape(-1, 1), cert.alpha + 0j, cert.alpha.astype(object)):
        forged = copy.copy(cert)
        forged.alpha = alpha
        verdict = forged.check(X, y)
        assert not verdict and "alpha must be a real vector" in verdict.reason


def _random_labels(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 3)), rng.choice([-1, 1], n)


def test_a_nystroem_fit_edited_after_the_run_is_not_the_runs():
    """An infeasible run under nystroem (12 centres): a separator forged on a map whose
    fitted state was edited (every row a centre, a narrow base kernel, P = I) must not
    verify beside the run's verified infeasibility certificate."""
    from marginkit.certificates import SeparatorCertificate
    from marginkit.kernels.builtin import RBFKernel

    X, y = _random_labels()
    kp = {"n_components": 12, "random_state": 0, "base_params": {"gamma": 0.5}}
    res = mk.solve(X, y, solver="nvn", kernel="nystroem", kernel_params=kp)
    assert res.status == "infeasible" and res.certificate.verify(X, y)
    cert = res.certificate
    for edit in ("all", "centres", "base", "projection"):
        k = copy.deepcopy(cert.kernel)
        if edit in ("all", "centres"):
            k.components_ = X.copy()
        if edit in ("all", "base"):
            k.base_kernel = RBFKernel(gamma=1e4)
        if edit in ("all", "projection"):
            k.normalization_ = np.eye(k.components_.shape[0])
        forged = SeparatorCertificate(np.ones(len(y)), 1.0, k, cert.classes, cert.config)
        assert not forged.check(X, y), edit
    # the referee's copy of an untouched fit is the fit: the run's claim still holds
    assert cert.verify(X, y)


def test_random_features_of_an_integer_seed_are_redrawn_by_the_referee():
    """rff with random_state=0: its frequencies scaled by 1000 after the run (a much
    narrower kernel) are not the seed's. A separator of the edited map is checked on the
    seed's map, where it is none."""
    from marginkit.certificates import SeparatorCertificate

    X, y = _random_labels(30, seed=3)
    kp = {"n_components": 200, "random_state": 0, "gamma": 0.05}
    run = mk.solve(X, y, solver="nvn", kernel="rff", kernel_params=kp)
    k = copy.deepcopy(run.kernel)
    k.frequencies_ = k.frequencies_ * 1000.0
    # the edited map's rows are nearly orthogonal: alpha = 1 separates
    alpha = np.ones(len(y))
    Q = k.feature_map(X) * y[:, None]
    Q /= np.linalg.norm(Q, axis=1)[:, None]
    assert np.min(Q @ (Q.T @ alpha)) > 0.01
    forged = SeparatorCertificate(alpha, 1.0, k, run.classes_, run.config)
    assert not forged.check(X, y)
    honest = SeparatorCertificate(alpha, 1.0, run.kernel, run.classes_, run.config)
    assert not honest.check(X, y)  # the same alpha on the run's own map


def test_random_features_drawn_without_an_integer_seed_are_redrawn_by_the_referee():
    """rff with random_state=None or a Generator: the referee used the stored frequencies
    as they were, so a separable run's frequencies scaled by 1e-9 after the run (every
    point mapped to about the same features) verified an infeasibility certificate, the
    balanced p. The fit now keeps the seed of its draw, from which the referee redraws the
    map; the run's own certificate still verifies, after a pickle round trip too."""
    import pickle

    from marginkit.certificates import InfeasibilityCertificate, SeparatorCertificate

    X, y = _random_labels(30, seed=3)
    p = np.where(y > 0, 0.5 / np.sum(y > 0), 0.5 / np.sum(y < 0))
    for rs in (None, np.random.default_rng(5)):
        kp = {"n_components": 200, "random_state": rs, "gamma": 0.05}
        for _ in range(8):
            # the draw is random: one whose verified margin exceeds the claims' eps (1e-6,
            # nvn's), as the check below needs (a draw with a margin of 1.8e-7 failed it)
            run = mk.solve(X, y, solver="nvn", kernel="rff", kernel_params=kp)
            if run.margin_bounds[0] > 1e-6:
                break
        assert run.status == "separable" and run.certificate.verify(X, y)
        stored = pickle.loads(pickle.dumps(run))
        assert stored.certificate.verify(X, y)
        k = copy.copy(stored.kernel)  # the same parameters (a Generator is compared by identity)
        k.frequencies_ = k.frequencies_ * 1e-9
        forged = InfeasibilityCertificate(p, 0.0, 1e-3, k, stored.classes_, stored.config)
        Q = k.feature_map(X) * y[:, None]
        Q /= np.linalg.norm(Q, axis=1)[:, None]
        assert np.linalg.norm(Q.T @ p) < 1e-3 * forged.eps  # infeasible on the edited map
        # on the run's map every p has ||p||_G >= the verified margin > eps
        assert run.margin_bounds[0] > forged.eps
        verdict = forged.check(X, y)
        assert not verdict and "exceeds eps" in verdict.reason
        referee = k.referee_copy()
        np.testing.assert_array_equal(referee.frequencies_, run.kernel.frequencies_)
        np.testing.assert_array_equal(referee.offsets_, run.kernel.offsets_)
        # non-finite frequencies are redrawn too, never evaluated
        k.frequencies_[0, 0] = np.nan
        assert not forged.check(X, y)
        alpha = stored.certificate.alpha
        assert SeparatorCertificate(alpha, 1.0, k, stored.classes_, stored.config).check(X, y)
        # a fit without its seed cannot be replayed: rejected, naming the fix
        del k.__dict__["seed_"]
        verdict = SeparatorCertificate(alpha, 1.0, k, stored.classes_, stored.config).check(X, y)
        assert not verdict and "refit the kernel" in verdict.reason


def test_random_features_of_an_integer_seed_keep_their_draw():
    """The seed a fit keeps is the integer random_state itself: its map is the one the
    seed drew before the draw became replayable for other random states."""
    k = mk.get_plugin("kernel", "rff")(n_components=7, random_state=11, gamma=0.5)
    k.fit(np.zeros((4, 3)))
    rng = np.random.default_rng(11)
    np.testing.assert_array_equal(k.frequencies_, rng.normal(scale=1.0, size=(3, 7)))
    np.testing.assert_array_equal(k.offsets_, rng.uniform(0.0, 2.0 * np.pi, size=7))
    assert k.seed_ == 11


def test_executor_rows_read_a_boolean_mask_as_numpy_does():
    """A feature map's fit that selects rows with a boolean mask (a numpy idiom) got the
    mask's 0/1 values as row numbers: n copies of rows 0 and 1, silently."""
    import pytest

    from marginkit._executors import Block, Executor, ExecutorRows

    X = np.arange(20.0).reshape(10, 2)
    ex = Executor([Block(X[:4], None), Block(X[4:], None, 1, 4)], [4, 6], 2, X.dtype, False)
    rows = ExecutorRows(ex)
    mask = np.zeros(10, dtype=bool)
    mask[[1, 7, 8]] = True
    np.testing.assert_array_equal(rows[mask], X[mask])
    np.testing.assert_array_equal(rows[[2, 2, 5]], X[[2, 2, 5]])
    assert rows[[]].shape == (0, 2)
    for bad in (np.array([1.9, 3.2]), mask[:5], [3, 1], [-1, 2], [10]):
        with pytest.raises(IndexError):
            rows[bad]


def test_a_loaded_nystroem_separator_verifies_on_a_dask_array_of_its_rows(tmp_path):
    """A loaded result keeps the kernel's parameters only; its referee fitted the map
    lazily on the first row chunk of a dask X, another map than the run's (drawn among
    all rows), and rejected the run's separator on the same data as a dask array."""
    import pytest

    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 2))
    y = np.where(np.sum(X**2, axis=1) > 1.2, 1, -1)
    kp = {"n_components": 30, "random_state": 0, "base_params": {"gamma": 1.0}}
    res = mk.solve(X, y, solver="snkp", kernel="nystroem", kernel_params=kp)
    assert res.status == "separable"
    path = tmp_path / "res.npz"
    res.save(path)
    loaded = mk.load_result(path)
    assert loaded.certificate.verify(X, y)
    assert loaded.certificate.verify(da.from_array(X, chunks=(40, -1)), y)


def test_csr_with_many_empty_columns_is_refused_within_the_budget_by_transposing_kernels():
    """The sparse products of rbf, poly, spline (and a Nystroem map of one) transpose X to
    CSC, O(n_features) memory however few its entries: a tiny LIBSVM file with a feature
    index of 1e11 ended in a MemoryError (or, where memory is overcommitted, in filling
    it). Checked against memory_budget before the solve, as the linear solvers' vectors."""
    import pytest
    import scipy.sparse as sp

    d = 1_000_000
    X = sp.csr_matrix((np.array([1.0, 1.0, -1.0]), np.array([0, d - 1, 1]),
                       np.array([0, 2, 3])), shape=(2, d))
    y = np.array([1, -1])
    budget = 2.0**20
    for solver, kernel, kp in (("dcd", "rbf", {}), ("snkp", "poly", {}),
                               ("fista", "nystroem", {"n_components": 2})):
        with pytest.raises(ValueError, match="columns: the sparse products of kernel"):
            mk.solve(X, y, solver=solver, kernel=kernel, kernel_params=kp,
                     memory_budget=budget)
    # laplacian merges rows (no transposition): not refused
    res = mk.solve(X, y, solver="fista_svm", kernel="laplacian", memory_budget=budget)
    assert res.status in ("certified", "max_iter")


def test_dask_arrays_with_an_empty_row_chunk_are_solved_checked_and_scored():
    """Filtering rows of a dask array (X[mask]) often leaves empty row chunks: solve,
    verify and decision_function refused them ("X chunk 1 is empty")."""
    import pytest
    import scipy.sparse as sp

    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 4))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1, -1)
    kp = {"n_components": 10, "random_state": 0}
    mem = mk.solve(X, y, solver="fista", kernel="nystroem", kernel_params=kp)
    for M in (X, sp.csr_matrix(X)):
        Xe = da.from_array(M, chunks=((30, 0, 30), (4,)), asarray=not sp.issparse(M))
        res = mk.solve(Xe, y, solver="fista", kernel="nystroem", kernel_params=kp)
        assert res.status == mem.status and res.n_iter == mem.n_iter
        assert res.certificate.verify(Xe, y) and res.certificate.verify(X, y)
        np.testing.assert_allclose(res.decision_function(Xe).compute(),
                                   mem.decision_function(X), rtol=0, atol=1e-12)
        sep = mk.solve(Xe, y, solver="perceptron")
        assert sep.status == "separable" and sep.certificate.verify(Xe, y)


def _edit_header(path, out, old, new):
    """A copy of a Result.save file with one string of its JSON header replaced."""
    import io
    import zipfile

    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    text = bytes(np.load(io.BytesIO(members["__meta__.npy"]))).decode()
    assert old in text
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(text.replace(old, new, 1).encode(), dtype=np.uint8))
    members["__meta__.npy"] = buf.getvalue()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out


def test_a_loaded_status_is_the_claim_its_certificate_checks(tmp_path):
    """A max_iter fista result certifies some points (57%, the configured fraction is
    0.9); its file edited to status "certified" loaded with a certificate that verified
    (of the points, not of the status). Loaded, the certificate now checks the status's
    claim; a claim status with a certificate of another kind is refused."""
    import pytest

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(200) > 0, 1, -1)
    res = mk.solve(X, y, solver="fista", max_iter=50,
                   stop=[("certified_points", {"fraction": 0.9})])
    assert res.status == "max_iter" and res.certificate.verify(X, y)
    assert 0 < res.certificate.mask.sum() < 0.9 * len(y)
    res.save(tmp_path / "run.npz")
    forged = _edit_header(tmp_path / "run.npz", tmp_path / "forged.npz",
                          '"status": "max_iter"', '"status": "certified"')
    loaded = mk.load_result(forged)
    assert loaded.status == "certified" and not loaded.certificate.verify(X, y)
    assert mk.load_result(tmp_path / "run.npz").certificate.verify(X, y)
    other = _edit_header(tmp_path / "run.npz", tmp_path / "other.npz",
                         '"status": "max_iter"', '"status": "separable"')
    with pytest.raises(ValueError, match="needs a 'separator' certificate"):
        mk.load_result(other)


def test_a_newton_decrement_certificate_on_an_edited_rff_fit_is_rejected():
    """iterated_tikhonov with rff (random_state=1): the chain of a run on frequencies
    scaled by 30 after the fit, grafted on the run's certificate with the edited kernel,
    verified with the run's configuration; the referee now redraws the seed's map."""
    X, y = _random_labels(80, seed=0)
    y = np.where(np.sum(X**2, axis=1) > 2.5, 1, -1)
    run = mk.solve(X, y, solver="iterated_tikhonov", kernel="rff",
                   kernel_params={"n_components": 40, "random_state": 1})
    assert run.status == "converged" and run.certificate.verify(X, y)
    edited = copy.deepcopy(run.certificate.kernel)
    edited.frequencies_ = edited.frequencies_ * 30.0
    Z = edited.feature_map(X)  # the edited map's features: a linear run on them
    other = mk.solve(Z, y, solver="iterated_tikhonov")
    assert other.status == "converged" and other.certificate.verify(Z, y)
    forged = copy.deepcopy(run.certificate)
    forged.kernel = edited
    forged.chain, forged.targets = other.certificate.chain, other.certificate.targets
    assert not forged.check(X, y)


# ----------------------------------------------------- compiled kernels called directly
def _compiled_cases():
    import scipy.sparse as sp

    from marginkit.kernels import _gram
    from marginkit.solvers.svm import _fast, _kernel_fast
    from marginkit.utils._rows import row_block

    BIG = 1 << 12  # past the block's 2 rows and 3 columns
    B = row_block(np.ones((2, 3)))
    LD = np.longdouble
    _CASES = {
        "ref_rmatvec": lambda: _fast.ref_rmatvec(B, np.zeros(3, np.uint8), np.zeros(3),
            np.ones(BIG), np.ones(BIG), np.zeros(3, LD), np.zeros(3)),
        "ref_rmatvec_short_a": lambda: _fast.ref_rmatvec(row_block(sp.random(2000, 100000,
            density=1e-3, format="csr", random_state=0)), np.zeros(100000, np.uint8),
            np.zeros(100000), np.ones(2000), np.ones(2000), np.zeros(1, LD), np.zeros(1)),
        "ref_matvec_ld": lambda: _fast.ref_matvec_ld(B, np.ones(3), np.ones(3), np.zeros(BIG, LD),
            np.zeros(BIG)),
        "fresh_coefficients": lambda: _fast.fresh_coefficients(np.zeros(BIG, LD), np.ones(1),
            np.ones(1), np.zeros(2, LD)),
        "fresh_margins": lambda: _fast.fresh_margins(B, np.ones(5), np.ones(5), np.zeros(3, LD),
            np.zeros(1, LD), 1.0, 0.0, 1.0, np.ones(2)),
        "fresh_tail": lambda: _fast.fresh_tail(np.zeros(0, LD), 0, 0, 0, np.zeros(0), 1, 0, 1),
        "w_bar_sq": lambda: _fast.w_bar_sq(np.ones(BIG), 0.0, np.ones(1), np.ones(1)),
        "dot": lambda: _fast.dot(np.ones(BIG), np.ones(1)),
        "projected_gradient": lambda: _fast.projected_gradient(row_block(np.ones((4, 3))),
            np.ones(1), np.ones(1), np.ones(3), 0, 0, np.ones(1), 0, 1, 0, 1, np.ones(1),
            np.zeros(1)),
        # found by review: a plug-in's feature map one row short reached these
        "fista_iteration": lambda: _fast.fista_iteration(B, np.ones(BIG), np.zeros(BIG),
            np.zeros(BIG), np.zeros(3), np.zeros(3), 0.0, 0.0, np.ones(3), np.zeros(3), 0.0,
            np.zeros(BIG), 0.0, 1.0, 1.0, np.ones(BIG), 1.0, np.ones(BIG), np.zeros(BIG),
            np.zeros(3), np.zeros(3), np.zeros((1, 3)), np.zeros((1, 4)),
            np.zeros(BIG, np.intp)),
        "fista_svm_gradient": lambda: _fast.fista_svm_gradient(B, np.ones(BIG), np.zeros(BIG),
            np.zeros(BIG), np.zeros(3), np.zeros(3), 0.0, 0.0, np.ones(3), np.zeros(3), 0.0,
            np.zeros(BIG), 0.0, 1.0, 1.0, np.zeros(3), np.zeros(BIG), np.zeros(BIG), 0.0,
            np.ones(BIG), np.zeros((1, 2))),
        "fista_svm_finish": lambda: _fast.fista_svm_finish(B, np.ones(BIG), np.zeros(BIG),
            np.zeros(BIG), 0.0, np.ones(BIG), 1.0, np.ones(BIG), np.ones(3), np.zeros(3),
            np.zeros(BIG), np.zeros(3), np.zeros((1, 3)), np.zeros((1, 4)),
            np.zeros(BIG, np.intp)),
        "fista_blocks_short": lambda: _fast.fista_iteration(B, np.ones(2), np.zeros(2),
            np.zeros(2), np.zeros(3), np.zeros(3), 0.0, 0.0, np.ones(3), np.zeros(3), 0.0,
            np.zeros(2), 0.0, 1.0, 1.0, np.ones(2), 1.0, np.ones(2), np.zeros(2),
            np.zeros(3), np.zeros(3), np.zeros((4, 1)), np.zeros((4, 4)), np.zeros(2, np.intp)),
        "pegasos_epoch": lambda: _fast.pegasos_epoch(B, np.ones(BIG), np.arange(BIG),
            np.zeros(3), np.zeros(6), np.ones(3), np.zeros(BIG), np.ones(BIG), 0.0, 1.0, 1.0,
            np.ones(BIG)),
        "pegasos_order": lambda: _fast.pegasos_epoch(B, np.ones(2), np.array([0, BIG]),
            np.zeros(3), np.zeros(6), np.ones(3), np.zeros(2), np.ones(2), 0.0, 1.0, 1.0,
            np.ones(2)),
        "violations": lambda: _kernel_fast.violations(np.ones(1), np.ones(BIG), np.ones(1),
            np.ones(1), np.zeros(1)),
        "fista_point": lambda: _kernel_fast.fista_point(np.ones(BIG), np.ones(1), np.ones(1),
            np.ones(1), np.ones(1), np.ones(1), 0, 0, 0, 1, 1, True, np.zeros(1), np.zeros(1)),
        "diff_sq": lambda: _kernel_fast.diff_sq(np.ones(BIG), np.ones(1)),
        "active_violations": lambda: _kernel_fast.active_violations(np.ones(5), np.ones(5),
            np.ones(5), np.ones(1), np.arange(5), np.zeros(5)),
        "projected_gradient_sq": lambda: _kernel_fast.projected_gradient_sq(np.ones(1),
            np.ones(BIG), np.ones(1)),
        "dot_dense_dense": lambda: _gram.dot_dense_dense(np.ones((300, 50)), np.ones((300, 50)),
            np.zeros((1, 1))),
        "dot_dense_dense_k": lambda: _gram.dot_dense_dense(np.ones((3, 50)), np.ones((3, 5)),
            np.zeros((3, 3))),
        "mirror_upper": lambda: _gram.mirror_upper(np.zeros((3000, 1))),
        "dist_dense_dense": lambda: _gram.dist_dense_dense(np.ones((1, 2)), np.ones((1, 2)),
            np.zeros((2000, 2000)), 2),
        "rbf_exponent": lambda: _gram.rbf_exponent(np.zeros((2000, 2000)), np.ones(1), np.ones(1),
            1.0),
    }
    return _CASES


@pytest.mark.parametrize("name", sorted(_compiled_cases()))
def test_compiled_kernels_check_the_lengths_they_read(name):
    """The compiled kernels of the package's private modules, called with vectors of
    other lengths than their block (or their other vectors): each refuses with a
    ValueError naming the function and the argument. Before, their loops read and wrote
    out of bounds (segfaults, heap corruption reported by free(), garbage results; found
    by review). The library's own callers always pass matching lengths."""
    with pytest.raises(ValueError, match=r"^(\w+: |Gram block: )"):
        _compiled_cases()[name]()
