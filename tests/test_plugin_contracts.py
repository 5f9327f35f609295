"""A run's certificate and model are the run's, whatever a plug-in hands back (found by
review, 2026-12-07): a solver plug-in's certificate built without the run's
configuration was checked against a kernel and a threshold of its own; a finalize that
returned another model than its certificate's had its claim reported; a kernel plug-in's
model was established through its map and predicted by its function; a subclass of the
linear kernel with another map skipped the map check; a plug-in's diag() and a stopping
rule's trigger values were read unchecked."""
import numpy as np
import pytest

import marginkit as mk
from marginkit.certificates import InfeasibilityCertificate, SeparatorCertificate
from marginkit.datasets import make_xor
from marginkit.kernels.builtin import LinearKernel, RBFKernel
from marginkit.plugins import Kernel, Solver, SolverState, StoppingRule, Trigger
from marginkit._validation import Param


class _Claims(StoppingRule):
    """Claims the status ``what`` at the first iteration."""

    param_table = {"what": Param("separable", str)}

    def check(self, state):
        return self.what


class _OwnConfigState(SolverState):
    """Offers certificates built with config=None: an RBF kernel's separator, and an
    infeasibility proof with a threshold of its own."""

    dual_norm = 1.0  # a dual_certificate rule of eps < 1 does not fire on it

    def __init__(self, pb):
        self.problem = pb

    def step(self):
        pass

    def certificate(self, status):
        pb = self.problem
        n = pb.n_samples
        if status == "separable":
            return SeparatorCertificate(np.full(n, 1.0 / n), 0.0, RBFKernel(gamma=50.0),
                                        pb.classes_, config=None)
        if status == "infeasible":
            return InfeasibilityCertificate(np.full(n, 1.0 / n), 0.0, 0.9999999, pb.kernel,
                                            pb.classes_, config=None)
        return None


class _OwnConfigSolver(Solver):
    provides = ("dual_norm",)

    def start(self, problem):
        return _OwnConfigState(problem)

    def finalize(self, problem, state, status):
        return {}


def _offering(name, make):
    """Register solver ``name``: its state offers ``make(problem)`` for every claim."""

    class _State(_OwnConfigState):
        def certificate(self, status):
            return make(self.problem)

    class _Solver(_OwnConfigSolver):
        def start(self, problem):
            return _State(problem)

    mk.register("solver", name, overwrite=True)(_Solver)


@pytest.fixture(autouse=True)
def _plugins():
    """This module's plug-ins (the registry is reset around every test)."""
    mk.register("solver", "contracts_own_config", overwrite=True)(_OwnConfigSolver)
    mk.register("stopping", "contracts_claims", overwrite=True)(_Claims)
    mk.register("solver", "contracts_other_model", overwrite=True)(_OtherModelSolver)
    mk.register("kernel", "contracts_almost_linear", overwrite=True)(_AlmostLinear)
    mk.register("kernel", "contracts_square_raises", overwrite=True)(_SquareRaises)
    mk.register("kernel", "contracts_affine", overwrite=True)(_AffineMap)
    mk.register("kernel", "contracts_diag", overwrite=True)(_Diag)


def test_a_plugin_certificate_is_checked_with_the_runs_kernel():
    """XOR is not linearly separable; the certificate's own RBF kernel separates it. The
    run's kernel (linear) is the one the claim is checked with: refused."""
    X, y = make_xor(200, random_state=0)
    r = mk.solve(X, y, solver="contracts_own_config", kernel="linear",
                 stop=("contracts_claims", {"what": "separable"}), max_iter=3)
    assert r.status != "separable"
    assert r.certificate is None


def test_a_plugin_certificate_is_checked_with_the_runs_threshold():
    """Two clusters far apart (normalized margin close to 1): an infeasibility proof of
    its own threshold 0.9999999 is refused against the run's tolerance."""
    rng = np.random.default_rng(0)
    y = np.where(rng.random(200) < 0.5, 1, -1)
    X = np.c_[np.full(200, 1.0) * y, 0.01 * rng.standard_normal(200)]
    claim = ("contracts_claims", {"what": "infeasible"})
    for rules in ([claim], [claim, ("dual_certificate", {"eps": 0.5})]):
        # no threshold configured (refused), or the rule's 0.5 (||p||_G is about 1)
        r = mk.solve(X, y, solver="contracts_own_config", stop=rules, max_iter=3)
        assert r.status != "infeasible"
        assert r.certificate is None


class _OtherModelState(_OwnConfigState):
    min_margin = 1.0  # the separated rule fires at once

    def certificate(self, status):
        pb = self.problem
        if status != "separable":
            return None
        Xn = pb.X / np.linalg.norm(pb.X, axis=1, keepdims=True)
        alpha = np.full(pb.n_samples, 1.0 / pb.n_samples)
        return SeparatorCertificate(alpha, 0.0, pb.kernel, pb.classes_, config=pb.config,
                                    coef=(alpha * pb.y) @ Xn, intercept=0.0)


def _plugin_solver(finalize=None, state=None, max_iter=3, stop=()):
    """A plug-in solver whose state does nothing (``state``: another SolverState class)
    and whose ``finalize(problem, state, status)`` returns ``finalize``'s dict (default: a
    coefficient of ones), for the run loop's checks of what plug-ins answer."""

    class Still(SolverState):
        def step(self):
            pass

    class PlugIn(Solver):
        default_max_iter = max_iter
        default_stop = stop

        def start(self, problem):
            return (state or Still)()

        def finalize(self, problem, st, status):
            if finalize is not None:
                return finalize(problem, st, status)
            return {"coef_": np.ones(problem.n_features)}

    return PlugIn()


class _OtherModelSolver(Solver):
    default_stop = ("separated",)
    provides = ("min_margin",)

    def start(self, problem):
        return _OtherModelState(problem)

    def finalize(self, problem, state, status):
        return {"coef_": np.array([0.0, 1.0]), "intercept_": 0.0}


def test_a_plugin_finalize_must_return_the_model_its_certificate_checks():
    """The certificate proves a separator; finalize returns another coef_ (right on half
    the points). The run refuses, naming the solver, as load_result refuses such a file."""
    rng = np.random.default_rng(1)
    y = np.where(rng.random(100) < 0.5, 1, -1)
    X = np.c_[2.0 * y + 0.1 * rng.standard_normal(100), rng.standard_normal(100)]
    with pytest.raises(TypeError, match="contracts_other_model.*coef_ is not the coef its "
                                        "certificate checks"):
        mk.solve(X, y, solver="contracts_other_model")


C_SHIFT = 9e-4  # |K - <Phi, Phi>| = 8.1e-7: within the map check's tolerance


class _AlmostLinear(Kernel):
    """Its map adds a constant feature its function does not have (8.1e-7 apart)."""

    param_table = {}

    def __call__(self, A, B=None):
        B = A if B is None else B
        return np.asarray(A @ B.T, dtype=np.float64)

    def feature_map(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.hstack([X, np.full((X.shape[0], 1), C_SHIFT)])


class _SquareRaises(Kernel):
    """Its function refuses square blocks (so the map check cannot compare it) and is
    the plain linear kernel on others; its map adds a feature of 1."""

    param_table = {}

    def __call__(self, A, B=None):
        if B is None or B is A:
            raise NotImplementedError("square blocks not supported")
        return np.asarray(A @ B.T, dtype=np.float64)

    def feature_map(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.hstack([X, np.ones((X.shape[0], 1))])


class _AffineMap(Kernel):
    """K(a, b) = a . b + 1 with the matching map: a correct plug-in."""

    param_table = {}

    def __call__(self, A, B=None):
        B = A if B is None else B
        return np.asarray(A @ B.T, dtype=np.float64) + 1.0

    def feature_map(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.hstack([X, np.ones((X.shape[0], 1))])


@pytest.mark.parametrize("kernel", ["contracts_almost_linear", "contracts_square_raises"])
@pytest.mark.parametrize("solver", ["snkp", "nkp", "nvn", "isnkpvn"])
def test_a_plugin_kernel_model_is_established_as_predict_evaluates_it(kernel, solver):
    """Under the kernel functions the three points are not separable (p = (1/2, 1/2, 0)
    has p^T G p = 0); through the maps they are. A separator claim is reported only
    when predict, which evaluates the function, classifies every training point."""
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    y = np.array([1, 1, -1])
    r = mk.solve(X, y, solver=solver, kernel=kernel, max_iter=200)
    if r.status == "separable":
        assert np.array_equal(r.predict(X), y)
    else:
        assert r.status != "separable"
        assert not np.array_equal(r.predict(X), y)


@pytest.mark.parametrize("solver", ["snkp", "nkp", "isnkpvn"])
def test_a_plugin_whose_map_matches_its_function_still_certifies(solver):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    y = np.where(X[:, 0] > 0.3, 1, -1)
    X[:, 0] += 0.5 * y
    r = mk.solve(X, y, solver=solver, kernel="contracts_affine")
    assert r.status == "separable"
    assert r.certificate.verify(X, y)
    assert np.array_equal(r.predict(X), y)


def test_a_subclass_of_the_linear_kernel_may_not_redefine_it():
    """The linear kernel is the identity map wherever marginkit meets one; a subclass
    whose map appended a feature was solved and checked through that map and predicted
    as X @ coef_ (2 of 3 training points wrong)."""
    with pytest.raises(TypeError, match="redefines feature_map"):
        class _LinPlusOne(LinearKernel):
            def feature_map(self, X):
                X = np.asarray(X, dtype=np.float64)
                return np.hstack([X, np.ones((X.shape[0], 1))])
    with pytest.raises(TypeError, match="redefines __call__, diag"):
        class _LinOther(LinearKernel):
            def __call__(self, A, B=None):
                return A @ (A if B is None else B).T

            def diag(self, A):
                return np.ones(A.shape[0])

    class _Named(LinearKernel):
        """A subclass that keeps the kernel (a name, a docstring) is fine."""

    X, y = make_xor(40, random_state=0)
    X = X + np.array([3.0, 0.0]) * np.where(y > 0, 1, -1)[:, None]
    assert mk.solve(X, y, solver="snkp", kernel=_Named()).status == "separable"


def test_a_linear_kernel_instance_with_its_own_map_is_refused():
    k = LinearKernel()
    k.feature_map = lambda X: np.asarray(X)[:, :1]
    X, y = make_xor(40, random_state=0)
    with pytest.raises(TypeError, match="feature_map set on the instance"):
        mk.solve(X, y, solver="snkp", kernel=k)


class _Diag(Kernel):
    """The linear kernel with a diag() given by ``how``."""

    param_table = {"how": Param("ok", str)}

    def __call__(self, A, B=None):
        B = A if B is None else B
        return np.asarray(A @ B.T, dtype=np.float64)

    def diag(self, A):
        d = np.einsum("ij,ij->i", A, A)
        return {"ok": d, "nan": np.full_like(d, np.nan), "short": d[:3],
                "2d": np.c_[d, d], "column": d[:, None]}[self.how]


@pytest.mark.parametrize("how, match", [("nan", "diag\\(\\) returned NaN"),
                                        ("short", "diag\\(\\) returned shape \\(3,\\)"),
                                        ("2d", "diag\\(\\) returned shape \\(40, 2\\)")])
@pytest.mark.parametrize("solver", ["iterated_tikhonov", "dcd"])
def test_a_plugin_diag_is_checked(how, match, solver):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match=match):
        mk.solve(X, y, solver=solver, kernel="contracts_diag", kernel_params={"how": how})
    assert mk.get_plugin("kernel", "contracts_diag")(how="column").diag(X).shape == (40,)


def test_a_trigger_value_is_a_number_and_infinite_n_iter_triggers_run():
    with pytest.raises(ValueError, match="the value is NaN"):
        Trigger("n_iter", ">=", float("nan"))

    class _AtInf(StoppingRule):
        def triggers(self, problem):
            return (Trigger("n_iter", ">=", self.at),)

        def check(self, state):
            return "max_iter" if state.n_iter >= self.at else None

    for at in (np.inf, -np.inf):
        _AtInf.at = at
        mk.register("stopping", "contracts_at_inf", overwrite=True)(_AtInf)
        rng = np.random.default_rng(0)
        X = rng.standard_normal((200, 3))
        y = np.where(X[:, 0] > 0, 1, -1)
        r = mk.solve(X, y, solver="dcd", stop=("contracts_at_inf", "certified_points"))
        assert r.status == ("certified" if at > 0 else "max_iter")


class _BoundsSolver(Solver):
    """Returns margin bounds of its own choosing, with or without its vectors."""

    param_table = {"vectors": Param(True, bool)}

    def start(self, problem):
        return _OwnConfigState(problem)

    def finalize(self, problem, state, status):
        n = problem.n_samples
        out = {"margin_bounds": (0.9, 0.95)}
        if self.vectors:
            out.update(dual_coef_=np.full(n, 1.0 / n), dual_vector=np.full(n, 1.0 / n))
        return out


def test_a_plugin_solver_margin_bounds_are_the_referees():
    """A plug-in's margin bounds were reported as it gave them (0.9 where the referee's
    upper bound for its own p is lower); they are recomputed from its dual_coef_ and
    dual_vector (without them: no lower bound, the uniform p's upper bound)."""
    from marginkit.certificates import labels_pm, margin_bounds

    mk.register("solver", "contracts_bounds", overwrite=True)(_BoundsSolver)
    X, y = make_xor(100, random_state=0)
    r = mk.solve(X, y, solver="contracts_bounds", max_iter=2)
    n = len(y)
    want = margin_bounds(X, labels_pm(y, r.classes_), LinearKernel(), np.full(n, 1.0 / n),
                         np.full(n, 1.0 / n))
    assert r.margin_bounds == tuple(float(v) for v in want)
    assert r.margin_bounds[1] < 0.9
    r = mk.solve(X, y, solver="contracts_bounds", vectors=False, max_iter=2)
    assert r.margin_bounds == (-np.inf, float(want[1]))


class _RaisesOnBlocks(Kernel):
    """An exact plug-in (K = a . b + 1, map [a, 1]) whose function refuses blocks of more
    than one row: the map check cannot compare it, and predict used to call it."""

    param_table = {}

    def __call__(self, A, B=None):
        B = A if B is None else B
        if A.shape[0] > 1:
            raise NotImplementedError("one row at a time")
        return np.asarray(A @ B.T, dtype=np.float64) + 1.0

    def feature_map(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.hstack([X, np.ones((X.shape[0], 1))])


@pytest.mark.parametrize("kernel", ["contracts_affine", "contracts_raises_on_blocks"])
@pytest.mark.parametrize("solver", ["snkp", "nkp", "isnkpvn"])
def test_a_plugin_map_model_predicts_through_the_map(kernel, solver):
    """A separator proved through a plug-in's map predicts through that map
    (extra["feature_space_coef"]): small honest margins certify (5e-4 here: an extra
    check through the function refused them, found by review), predict never calls the
    function, and the saved result loads with the same model."""
    import os
    import tempfile

    mk.register("kernel", "contracts_raises_on_blocks", overwrite=True)(_RaisesOnBlocks)
    x = np.linspace(-1.0, 1.0, 200)
    y = np.where(x > 0, 1, -1)
    X = (x + 5e-4 * y)[:, None]
    r = mk.solve(X, y, solver=solver, kernel=kernel, max_iter=100_000)
    assert r.status == "separable" and r.certificate.verify(X, y)
    w = r.extra["feature_space_coef"]
    assert np.array_equal(r.certificate.coef, w)
    assert np.array_equal(r.predict(X), y)
    np.testing.assert_allclose(r.decision_function(X), np.c_[X, np.ones(200)] @ w)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "r.npz")
        r.save(path)
        back = mk.load_result(path)
    assert np.array_equal(back.predict(X), y)


def test_a_plugin_claim_threshold_is_at_most_the_users_rule():
    """A plug-in's claim_thresholds() of 0.9999999 beside a configured
    dual_certificate(eps=0.5): the claim is checked against 0.5 (found by review)."""

    class _Own(_OwnConfigSolver):
        def claim_thresholds(self, rules):
            return {"dual_tol": 0.9999999}

    mk.register("solver", "contracts_own_threshold", overwrite=True)(_Own)
    rng = np.random.default_rng(0)
    y = np.where(rng.random(200) < 0.5, 1, -1)
    X = np.c_[np.full(200, 1.0) * y, 0.01 * rng.standard_normal(200)]
    r = mk.solve(X, y, solver="contracts_own_threshold", max_iter=3,
                 stop=[("contracts_claims", {"what": "infeasible"}),
                       ("dual_certificate", {"eps": 0.5})])
    assert r.status != "infeasible" and r.certificate is None


def test_a_certificate_whose_config_cannot_be_set_is_named():
    from marginkit.certificates import Certificate, Verdict

    class _Fixed(Certificate):
        kind = "infeasibility"

        @property
        def config(self):  # read only
            return None

        def check(self, X, y, sample_weight=None):
            return Verdict.reject(self.kind, "never")

    _offering("contracts_fixed_config", lambda pb: _Fixed())
    X, y = make_xor(40, random_state=0)
    with pytest.raises(TypeError, match="_Fixed offered for this run does not take the run's "
                                        "configuration"):
        mk.solve(X, y, solver="contracts_fixed_config", max_iter=2,
                 stop=("contracts_claims", {"what": "infeasible"}))


def test_a_linear_kernel_redefined_through_a_mixin_is_refused():
    class _MapMixin:
        def feature_map(self, X):
            return np.asarray(X)[:, :1]

    with pytest.raises(TypeError, match="redefines feature_map"):
        class _L(_MapMixin, LinearKernel):
            pass


def test_a_plugin_diag_may_give_one_value_for_all_rows():
    class _Flat(Kernel):
        param_table = {}

        def __call__(self, A, B=None):
            B = A if B is None else B
            sq = (np.einsum("ij,ij->i", A, A)[:, None] + np.einsum("ij,ij->i", B, B)[None]
                  - 2 * A @ B.T)
            return np.exp(-np.maximum(sq, 0.0))

        def diag(self, A):
            return 1.0

    assert np.array_equal(_Flat().diag(np.zeros((4, 2))), np.ones(4))
    X, y = make_xor(60, random_state=0)
    assert mk.solve(X, y, solver="iterated_tikhonov", kernel=_Flat()).status == "converged"


def test_a_claim_needs_one_of_marginkits_certificate_types():
    """A subclass whose check accepts anything would referee itself (found by review:
    XOR "separable" under the linear kernel)."""
    from marginkit.certificates import Verdict

    class _Accepting(SeparatorCertificate):
        def check(self, X, y, sample_weight=None):
            return Verdict(True, self.kind)

    _offering("contracts_accepting", lambda pb: _Accepting(
        np.full(pb.n_samples, 1.0 / pb.n_samples), 0.0, pb.kernel, pb.classes_,
        config=pb.config))
    X, y = make_xor(40, random_state=0)
    with pytest.raises(TypeError, match="offered a _Accepting for the claim 'separable': a "
                                        "claim is re-checked by one of marginkit's"):
        mk.solve(X, y, solver="contracts_accepting", max_iter=2,
                 stop=("contracts_claims", {"what": "separable"}))


def test_a_kernel_model_on_a_map_predicts_through_the_map():
    """A plug-in solver's support-model certificate on a map kernel (map [x, 9e-4],
    function x . y): the referee checks the model through the map, and predict reads the
    map too (it read the function: 2 of 3 training points wrong, found by review)."""
    from marginkit.certificates import predictor_fingerprint

    class _State(_OwnConfigState):
        min_margin = 1.0

        def certificate(self, status):
            pb = self.problem
            Phi = np.hstack([pb.X, np.full((pb.n_samples, 1), C_SHIFT)])
            Phi /= np.linalg.norm(Phi, axis=1, keepdims=True)
            G = (pb.y[:, None] * Phi) @ (pb.y[:, None] * Phi).T
            alpha = np.linalg.lstsq(G, np.ones(pb.n_samples), rcond=None)[0]
            if status != "separable" or not np.all(G @ alpha > 0):
                return None
            sd = np.linalg.norm(np.hstack([pb.X, np.full((pb.n_samples, 1), C_SHIFT)]), axis=1)
            coef = alpha * pb.y / sd
            return SeparatorCertificate(alpha, 0.0, pb.kernel, pb.classes_, config=pb.config,
                                        support_coef=coef, intercept=0.0,
                                        predictor=predictor_fingerprint(pb.X.copy(), coef))

    class _Solver(_OtherModelSolver):  # its rules: separated at once
        def start(self, problem):
            return _State(problem)

        def finalize(self, problem, state, status):
            cert = state.certificate("separable")
            return {"support_": problem.X.copy(), "support_coef_": cert.support_coef,
                    "dual_coef_": cert.alpha, "intercept_": 0.0}

    mk.register("solver", "contracts_support_model", overwrite=True)(_Solver)
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    y = np.array([1, 1, -1])
    r = mk.solve(X, y, solver="contracts_support_model", kernel="contracts_almost_linear")
    assert r.status == "separable" and r.certificate.verify(X, y)
    assert np.array_equal(r.predict(X), y)


@pytest.mark.parametrize("solver", ["snkp", "fista"])
def test_a_plugin_map_declaring_fitted_saves_and_loads(solver, tmp_path):
    """load_result compared a feature-space model's width with the map's through the
    approximations' private _n_outputs(), which a plug-in declaring fitted = True does
    not have (an AttributeError; found by review)."""

    class _FittedAffine(_AffineMap):
        fitted = True

    mk.register("kernel", "contracts_fitted_affine", overwrite=True)(_FittedAffine)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    X[:, 0] += 0.2 * y
    r = mk.solve(X, y, solver=solver, kernel="contracts_fitted_affine")
    r.save(tmp_path / "r.npz")
    back = mk.load_result(tmp_path / "r.npz")
    assert np.array_equal(back.predict(X), r.predict(X))


def test_a_certified_mask_without_a_verified_certificate_is_empty():
    """Found by review: a plug-in's finalize reported every point certified with no
    certificate at all (the model misclassified half of them); solve kept the mask, and
    save / load_result too. The mask is the verified certificate's, none without one."""
    from marginkit.plugins import Solver, SolverState

    X, y = mk.datasets.make_xor(100, random_state=0)[:2]

    masker = _plugin_solver(lambda problem, state, status: {
        "coef_": np.zeros(problem.n_features), "intercept_": 0.0,
        "certified_mask": np.ones(problem.n_samples, bool)}, max_iter=2)
    r = mk.solve(X, y, solver=masker)
    assert r.certificate is None and not r.certified_mask.any()
    # the built-in solvers' masks are their verified certificates'
    r = mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": 1.0}, C=1.0)
    assert r.certified_mask.any()
    assert np.array_equal(r.certified_mask, r.certificate.mask) and r.certificate.verify(X, y)


@pytest.mark.parametrize("answer,match", [
    (lambda limit: (0, {}), "returned 0 steps"),
    (lambda limit: (-3, {}), "returned -3 steps"),
    (lambda limit: (2.0, {"x": [1.0]}), "returned 2.0 steps"),
    (lambda limit: (limit + 1000, {"x": [1.0] * (limit + 999)}), "returned 1050 steps"),
    (lambda limit: (limit, {"x": [1.0]}), "took 50 steps but returned 1 snapshots"),
    (lambda limit: (2, {"x": [1.0], "y": [2.0]}), r"field\(s\) \['y'\]"),
    (lambda limit: (2, [1.0]), "snapshots of type list"),
    (lambda limit: 3, "must return"),
])
def test_a_step_batch_answer_is_checked(answer, match):
    """Found by review: a step_batch count of 0 made solve spin forever (its history
    growing), more than limit steps ran past max_iter, and snapshots of the wrong length or
    of unknown fields gave a history of other length than n_iter or a bare KeyError."""
    X, y = make_xor(60, random_state=0)[:2]

    class Batched(SolverState):
        def step(self):
            pass

        def snapshot(self):
            return {"x": 1.0}

        def step_batch(self, triggers, limit):
            return answer(limit)

    batcher = _plugin_solver(state=Batched, max_iter=50, stop=(("max_iter", {"n": 50}),))

    with pytest.raises((ValueError, TypeError), match=match):
        mk.solve(X, y, solver=batcher, max_iter=50)


def test_an_honest_step_batch_gives_the_single_steps_history():
    X, y = make_xor(60, random_state=0)[:2]

    class Batched(SolverState):
        def step(self):
            pass

        def snapshot(self):
            return {"x": 1.0}

        def step_batch(self, triggers, limit):
            return limit, {"x": [1.0] * (limit - 1)}

    batcher = _plugin_solver(state=Batched, max_iter=50, stop=(("max_iter", {"n": 50}),))

    r = mk.solve(X, y, solver=batcher, max_iter=50)
    assert r.n_iter == 50 and len(r.history["x"]) == 51


@pytest.mark.parametrize("declared", [(), (Trigger("n_iter", ">=", 1e18),)])
def test_a_rule_that_fires_where_its_triggers_do_not_hold_is_named(declared):
    """Found by review: under dcd's batches of steps, a rule declaring no threshold (or
    another one than its check tests) was consulted at the ends of batches only; the run
    went on to its budget past where the rule fired, and reported the rule's status. A
    rule that states its thresholds truly stops the batched run where single steps stop."""
    X, y = mk.datasets.make_separable(300, margin=0.01, random_state=0)[:2]

    class AtThree(StoppingRule):
        def triggers(self, problem):
            return declared

        def check(self, state):
            return "converged" if state.n_iter >= 3 else None

    with pytest.raises(ValueError, match="'AtThree': check\\(\\) returned 'converged' at "
                                         "iteration 50 where none of the thresholds"):
        mk.solve(X, y, solver="dcd", stop=[AtThree()], max_iter=50)

    class Honest(AtThree):
        def triggers(self, problem):
            return (Trigger("n_iter", ">=", 3),)

    a = mk.solve(X, y, solver="dcd", stop=[Honest()], max_iter=50, random_state=0)
    b = mk.solve(X, y, solver="dcd", stop=[Honest()], max_iter=50, random_state=0,
                 callback=lambda s: None)
    assert a.status == b.status == "converged" and a.n_iter == b.n_iter == 3
    assert np.array_equal(a.dual_coef_, b.dual_coef_)


@pytest.mark.parametrize("field,value", [("config", None), ("n_iter", -5), ("solver", "snkp"),
                                         ("status", "separable"), ("time_s", 0.0)])
def test_finalize_cannot_rewrite_what_describes_the_run(field, value):
    """Found by review: a plug-in's finalize set config to another run's, n_iter to -5, or
    solver to a built-in that never ran; save then failed as on an edited file."""
    X, y = make_xor(60, random_state=0)[:2]
    rewrites = _plugin_solver(
        lambda problem, state, status: {"coef_": np.ones(problem.n_features), field: value})
    with pytest.raises(ValueError, match=rf"finalize returned \['{field}'\], which the run "
                                         "loop sets"):
        mk.solve(X, y, solver=rewrites)


@pytest.mark.parametrize("snapshot,error", [
    (lambda state: {"v": np.ones(state.n_iter + 1)}, ValueError),
    (lambda state: [("v", 1.0)], TypeError),
    (lambda state: {"v": 1.0} if state.n_iter < 2 else {"w": 1.0}, ValueError),
])
def test_a_snapshot_is_checked_when_it_is_taken(snapshot, error):
    """Found by review: a snapshot that was not a dict, or whose vector grew, failed only
    after the whole run, by numpy's or Python's error naming neither the solver nor
    snapshot()."""
    X, y = make_xor(60, random_state=0)[:2]

    class Snapping(SolverState):
        def step(self):
            pass

        def snapshot(self):
            return snapshot(self)

    with pytest.raises(error, match=r"solver 'PlugIn': snapshot\(\)"):
        mk.solve(X, y, solver=_plugin_solver(state=Snapping, max_iter=10), warn=False)


def test_triggers_given_as_a_generator_and_finalize_repeating_the_status():
    """Found by review of the run-loop checks: a rule whose triggers() is a generator was
    refused (the batch read it, the check then saw none), and a finalize returning the
    run's own status was refused."""
    X, y = mk.datasets.make_separable(300, margin=0.01, random_state=0)[:2]

    class AtThree(StoppingRule):
        def triggers(self, problem):
            return (t for t in (Trigger("n_iter", ">=", 3),))

        def check(self, state):
            return "converged" if state.n_iter >= 3 else None

    r = mk.solve(X, y, solver="dcd", stop=[AtThree()], max_iter=50, random_state=0)
    assert r.status == "converged" and r.n_iter == 3

    repeats = _plugin_solver(lambda problem, state, status: {
        "coef_": np.ones(problem.n_features), "status": status,
        "n_iter": np.int64(state.n_iter)})
    assert mk.solve(X, y, solver=repeats).status == "max_iter"
