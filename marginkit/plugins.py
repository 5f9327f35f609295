"""Base classes of the four plug-in kinds: Solver, Smoother, Kernel, StoppingRule.

A plug-in declares its parameters in a table (``param_table``: name -> ``Param``),
which validates constructor arguments and lets ``marginkit.testing.check_plugin``
check the contract. Composition (``marginkit.solve``) checks what a solver needs
from the other plug-ins (``Solver.requires``) and what stopping rules need from a
solver's state (``StoppingRule.requires`` against ``Solver.provides``) before running.

The run loop (``marginkit._api.run``) is::

    t0 = now; problem.deadline = t0 + seconds of a time_limit rule (or None)
    problem.stop = tuple(rules)             # the run's rules, read only for the solver
    state = solver.start(problem)
    k = 0                                   # the loop's own iteration count
    while True:
        state.n_iter, state.elapsed = k, now - t0   # written by the loop only
        record state.snapshot() into Result.history
        status = first rule whose check(state) fires            # rules only read the state
        if status is a claim ("separable", "infeasible", "certified", or a certificate
                              the state offers for "converged"):
            certificate = state.certificate(status)     # the claim, checkable from the data
            verdict = problem.check_certificate(certificate)    # confirm: the referee
            stop only if the verdict holds, else state.refuted(status, verdict), go on
        elif status: stop
        if k >= max_iter: stop with "max_iter"
        state.step(); k += 1            # one iteration, GIL released inside Cython
    fields = solver.finalize(problem, state, status)

``start``, the steps, the referee and ``finalize`` run on the BLAS threads the loop
chooses (one thread when the cores are busy, else the default; results are the same
beyond BLAS rounding): ``marginkit.utils._threads.BlasChoice``.

The protocol is one-way. The loop owns ``n_iter`` and ``elapsed``: it assigns both on
the state after every step (a state may count its own steps, the loop's count is the one
kept), and a rule reads them. A stopping rule reads the state and never writes into it,
nor keeps anything of a run on itself. What a solver needs to know of the rules (a
threshold its cheap pre-checks aim at, the tolerance schedule of its subproblems) it
reads from ``problem.stop``, before or while it runs: each rule's parameters (``params``)
and, for a rule that can be stated as thresholds on state fields, its ``triggers(problem)``
(``Trigger`` objects).

Stopping rules are checked *before* each step (iteration 0 included), as in the
papers' algorithm boxes ("if G alpha_k > 0, halt").

Confirm, the float64 re-check: a claim is reported only after the referee has
re-checked it from the data, whichever rule made it (built-in or third-party). The
referee is the certificate's own ``check`` (``marginkit.certificates``), which recomputes
the claim from X, y and the kernel in float64 by a path of its own (never the solver's
fast path, never a number the certificate stores about itself) against the thresholds of
the run's configuration. A certificate that does not verify is never reported: the run
goes on, and a certificate ``finalize`` returns is dropped when it does not verify.
"""
import dataclasses
import functools
import weakref

import numpy as np
import scipy.sparse as sp

from ._executors import local_executor
from ._validation import Param, check_params, check_random_state, checked_block

__all__ = ["Plugin", "Solver", "SolverState", "Smoother", "Kernel", "StoppingRule", "Param",
           "Problem", "Trigger", "PluginError", "triggers_on"]


class PluginError(RuntimeError):
    """A plug-in raised an exception where marginkit's compiled loops call it (a Python
    smoother's ``argmin_simplex`` or ``value``). The message names the plug-in; the
    plug-in's own exception is the ``__cause__``."""


@dataclasses.dataclass
class Problem:
    """A validated problem handed to ``Solver.start``.

    ``executor`` gives a blocked solver the row blocks of X and y; ``check_certificate``
    is the referee of the run's claims (see the module docstring).

    Attributes
    ----------
    X : ndarray (C or F order) or CSR matrix, float32/float64 (never modified by solvers)
    y : float64 ndarray, +-1 for classification, real for regression
    classes_ : original labels (``classes_[1]`` is +1), None for regression
    kernel : Kernel instance (the run's own: ``Kernel.for_run``)
    smoother : Smoother instance or None
    params : dict of validated solver parameters
    rng : numpy.random.Generator of the run, built from ``random_state`` of ``Config``
        (a seed, None, a RandomState or a Generator, as ``check_random_state`` takes it)
        when the problem is made
    config : the Config of the run
    sample_weight : float64 ndarray of shape (n_samples,) or None
        The validated per-sample weights of a weighted run (``solve(..., sample_weight=w)``:
        finite, >= 0, not all zero, read-only), None for an unweighted one. Only solvers
        with ``sample_weight = True`` receive them; the referee checks the run's claims
        with them.
    features : object or None
        Feature rows computed before the run and shared by several runs on the same X
        (``solve(..., features=F)``, e.g. a fitted ``NystroemFeatures``); only solvers
        with ``takes_features = True`` receive them, and they check that ``F`` is the
        map of this problem before using it. None otherwise.
    stop : tuple of StoppingRule
        The run's stopping rules, set by the run loop before ``Solver.start``. Read only:
        a solver may read their parameters and ``triggers`` (to aim a cheap pre-check at
        the rules' thresholds, or to schedule its own tolerances); it never changes them.
    deadline : float or None
        The ``time.perf_counter()`` time at which the run's ``time_limit`` ends it (its
        clock starts before ``Solver.start``), set by the run loop with ``stop``; None
        without a time limit. A solver whose start-up may outlast it (an eigenvalue
        estimate) cuts that short for a cheaper valid choice.
    """

    X: object
    y: np.ndarray
    classes_: object
    kernel: object
    smoother: object
    params: dict
    rng: object = None
    config: object = None
    stop: tuple = ()
    deadline: object = None
    sample_weight: object = None
    features: object = None

    def __post_init__(self):
        self.rng = check_random_state(self.rng)
        # read-only views: no solver, kernel or rule of the run can write into the data
        self.X, self.y = _frozen(self.X), _frozen(self.y)

    @property
    def executor(self):
        """The row blocks of ``X`` and ``y`` as a ``marginkit._executors.Executor`` on which
        a blocked solver runs its block kernels (in memory: one block, built on first use;
        on a dask array: the chunks, where the workers hold them)."""
        ex = self.__dict__.get("_executor")
        if ex is None:
            ex = self.__dict__["_executor"] = local_executor(self.X, self.y)
        return ex

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_features(self):
        return self.X.shape[1]

    @property
    def dtype(self):
        return self.X.dtype

    @property
    def sparse(self):
        return sp.issparse(self.X)

    def labels(self):
        """The training labels as the user gave them (``classes_`` values), or y."""
        if self.classes_ is None:
            return self.y
        classes = np.asarray(self.classes_)
        if classes.dtype == np.float64 and classes.tolist() == [-1.0, 1.0]:
            # labels -1 and +1 (LIBSVM's): they are y itself, read-only
            out = self.y.view()
            out.flags.writeable = False
            return out
        return classes[(self.y > 0).astype(np.intp)]

    def referee_data(self, blocked=False):
        """``(X, labels)``: the training data as a referee reads them (``blocked``: the
        check runs passes over row blocks; the Dask backend then runs them on its chunks)."""
        return self.X, self.labels()

    def check_certificate(self, certificate):
        """The referee's ``Verdict`` on ``certificate`` for this problem's training data:
        the float64 re-check (confirm) a claim passes before the run reports it; a
        weighted run's certificate is checked with the run's weights."""
        data = self.referee_data(getattr(certificate, "blocked", False))
        if self.sample_weight is not None:
            return certificate.check(*data, sample_weight=self.sample_weight)
        return certificate.check(*data)



def triggers_on(problem, field):
    """The ``Trigger`` objects on the state field ``field`` declared by the run's rules
    (``problem.stop``), in rule order; rules that declare none are left out. Any problem
    with ``stop`` (the in-memory ``Problem``, the Dask backend's) serves."""
    out = []
    for rule in getattr(problem, "stop", ()):
        declared = rule.triggers(problem)
        if declared:
            out.extend(t for t in declared if t.field == field)
    return out


class Plugin:
    """Common behaviour: a declarative parameter table and ``get_params``."""

    kind = None
    name = None
    #: name -> Param; the constructor accepts exactly these keywords.
    param_table = {}

    def __init__(self, **params):
        # the owner's name is only needed in error messages: passed as the plug-in itself
        self.params = check_params(self.param_table, params, owner=self)

    def _owner(self):
        return f"{self.kind or 'plug-in'} {self.name or type(self).__name__!r}"

    def get_params(self, deep=True):
        """The constructor's parameters (``deep`` is accepted for scikit-learn's ``clone``,
        which re-creates a plug-in given as an estimator's hyper-parameter this way)."""
        return dict(self.params)

    def set_params(self, **params):
        """Change parameters in place (scikit-learn's ``set_params``, used by
        ``GridSearchCV`` for ``solver__C``-style names); returns self.

        The plug-in is re-constructed on the merged parameters, so they are validated by
        its table as in the constructor and anything the constructor derives from them
        (and any fitted state) is rebuilt. An estimator that received this instance fits
        a copy of it, so results already computed keep the parameters they were run with.
        """
        if not params:
            return self
        type(self).__init__(self, **{**self.params, **params})
        return self

    def __getattr__(self, item):
        # parameters are readable as attributes (rule.fraction, kernel.gamma)
        params = self.__dict__.get("params")
        if params is not None and item in params:
            return params[item]
        raise AttributeError(item)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, state):
        self.__dict__.update(state)


class SolverState:
    """Mutable state of one run. Subclasses (often Cython cdef classes) implement ``step``.

    Attributes every state has: ``n_iter`` (steps taken) and ``elapsed`` (seconds since
    the run started), both assigned by the run loop after every step (the loop's values
    win over any the state keeps itself), and ``problem`` (the ``Problem`` of the run;
    the run loop sets it when ``start`` did not). Anything listed in the solver's
    ``provides`` must be an attribute (read by stopping rules and verbose output).

    Claims: a state whose solver can end with a claim status (``"separable"``,
    ``"infeasible"``, ``"certified"``; see ``marginkit.certificates.CLAIM_KINDS``)
    implements ``certificate(status)``: the certificate of that claim at the current
    iterate, or None to decline it for now. The run stops on the claim only when the
    certificate's ``check`` holds on the training data (confirm, the float64 re-check of
    the module docstring); after a refuted claim the loop calls ``refuted(status,
    verdict)`` if the state has it (e.g. to wait until its own measure has improved before
    offering the claim again). A state may also return a certificate for ``"converged"``
    (iterated Tikhonov's Newton decrement), which is then checked the same way. A state
    without ``certificate`` has its claims checked through the certificate of
    ``solver.finalize(problem, state, status)``.

    Optional: ``step_batch(triggers, limit)`` takes between 1 and ``limit`` steps in one
    call (``solve`` uses it when every rule of the run declares its ``triggers`` and
    nothing else runs between steps: no callback, no verbose output). ``triggers`` is the
    list of every ``Trigger`` of the run's rules; the state stops after the first step on
    which one of them holds (or after ``limit`` steps) and returns ``(steps, snapshots)``:
    the number of steps taken and the ``snapshot`` values of all of them but the last
    (dict of lists; the loop records the last one and checks the rules on it as after any
    step). It returns None, without taking a step, when a trigger is on a field it cannot
    evaluate between its steps (the loop then calls ``step``). History, statuses and
    results must be those of single steps.
    """

    n_iter = 0
    elapsed = 0.0
    problem = None

    def step(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def snapshot(self):
        """Per-iteration numbers for ``Result.history`` (dict of floats)."""
        return {}


class Solver(Plugin):
    """A solver plug-in.

    Class attributes
    ----------------
    requires : dict
        ``{"smoother": ("argmin_simplex",), "kernel": ("feature_map",)}``: attribute
        names the solver needs on the other plug-ins. Composition fails with a message
        naming the missing piece and the compatible registered choices.
    provides : tuple of str
        State attributes stopping rules may read (``min_margin``, ``dual_norm``, ...).
    default_stop : tuple
        Stopping specs used when ``stop=None``.
    default_smoother : str or None
        Smoother used when the solver needs one and ``smoother=None``.
    default_max_iter : int
    task : "classification" or "regression"
    sample_weight : bool
        Whether the solver solves the weighted problem (``Problem.sample_weight``);
        ``solve`` refuses weights for a solver without it.
    takes_features : bool
        Whether the solver runs on feature rows given to ``solve(..., features=F)``
        (``Problem.features``); ``solve`` refuses them for a solver without it.
    blocked : bool
        Whether the solver is written against ``Problem.executor`` (a driver plus block
        kernels, docs/plugins.rst "A blocked solver"): it then runs on dask arrays too,
        its kernels on the workers holding the chunks. An optional method
        ``blocked_refusal(kernel)`` returns why a kernel cannot run on row chunks (a
        message) or None; without it a blocked solver runs the linear kernel there.
    sparse_rows : bool
        Whether every iteration reads every stored entry of the rows of X (the linear
        kernel): the SVM estimator then gives a dense X with at most a quarter of
        non-zero entries as a CSR copy (``marginkit.utils._sparse.sparse_copy``).
    dual_tol_param : str or None
        The parameter that is the solver's own tolerance on ||p||_G, which its state
        provides as ``dual_tol`` and the ``dual_certificate`` rule without an eps reads
        (``eps`` of ``isnkpvn``). ``PerceptronClassifier``'s ``tol`` stands for it unless
        the user gave it (it sets it when the solver's own rules read it, else it is the
        eps of the ``dual_certificate`` rule it adds). None: the solver has no such
        tolerance.
    """

    kind = "solver"
    requires = {}
    provides = ()
    default_stop = ()
    default_smoother = None
    default_max_iter = 10_000
    task = "classification"
    sample_weight = False
    takes_features = False
    blocked = False
    sparse_rows = False
    dual_tol_param = None

    def start(self, problem):  # pragma: no cover - abstract
        """Return a ``SolverState`` for ``problem`` (a ``marginkit.plugins.Problem``)."""
        raise NotImplementedError

    def finalize(self, problem, state, status):  # pragma: no cover - abstract
        """Return a dict of ``Result`` fields (coef_, dual_coef_, certificate, ...)."""
        raise NotImplementedError


class Smoother(Plugin):
    """A prox-function d(p) on the simplex, used to smooth min_{p in simplex} <g, p>.

    Solvers that need the closed-form smoothed minimizer require ``argmin_simplex``.
    """

    kind = "smoother"
    #: norm in which d is 1-strongly convex ("l1" or "l2")
    strong_convexity_norm = "l1"

    def argmin_simplex(self, g, mu, q=None):  # pragma: no cover - abstract
        """argmin over the simplex of <g, p> + mu d_q(p)."""
        raise NotImplementedError

    def value(self, p, q=None):  # pragma: no cover - abstract
        """d_q(p)."""
        raise NotImplementedError


def _frozen(M):
    """M on read-only views of its arrays (dense arrays, CSR/CSC/COO matrices and arrays,
    of the same type as M; other sparse formats as a private copy), anything else as is."""
    def view(a):
        a = a.view()
        a.flags.writeable = False
        return a

    if isinstance(M, np.ndarray):
        return view(M)
    if sp.issparse(M):
        if M.format in ("csr", "csc"):
            return type(M)((view(M.data), view(M.indices), view(M.indptr)), shape=M.shape,
                           copy=False)
        if M.format == "coo":
            return type(M)((view(M.data), (view(M.row), view(M.col))), shape=M.shape,
                           copy=False)
        return M.copy()
    return M


#: the keywords a kernel's two operands may be passed by (marginkit's, scikit-learn's)
_OPERAND_KEYWORDS = (("A", "X", "a", "x"), ("B", "Y", "b", "y"))
#: the wrappers ``_guarded`` made (a user's ``functools.wraps`` copy of one is not one)
_WRAPPERS = weakref.WeakSet()


def _guard_kind(raw):
    """How ``_guarded`` wraps the class attribute ``raw``: ``"static"`` (a staticmethod, or
    a callable object, which Python never binds), ``"class"`` (a classmethod),
    ``"method"`` (a function or any other method-like descriptor: compiled, decorated, a
    partialmethod), or None: not a method to guard (a property or other data descriptor,
    marginkit's own, a wrapper already)."""
    fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    module = getattr(fn, "__module__", None) or ""
    try:
        ours = fn in _WRAPPERS
    except TypeError:  # an object without weak references is not a wrapper
        ours = False
    if ours or module.partition(".")[0] == "marginkit":
        return None
    kind = type(raw)
    if isinstance(raw, staticmethod):
        return "static"
    if isinstance(raw, classmethod):
        return "class"
    if hasattr(kind, "__set__") or hasattr(kind, "__delete__"):
        return None  # a property: left as Python has it
    if hasattr(kind, "__get__"):
        return "method"
    return "static" if callable(raw) else None


def _guarded(raw, name, owner, how):
    """The kernel plug-in ``owner``'s method ``name`` (``raw``: the class attribute, of
    kind ``how``: ``_guard_kind``) given read-only views of its array arguments (the same
    object twice when it was given one object twice), bound as Python binds it; for
    ``__call__``, its block checked as a callable kernel's is (``checked_block``). The
    operands are the first two positional array arguments, or the keywords ``A``/``X``
    and ``B``/``Y`` (lower case too); a call whose first operand is not an array is not
    checked."""
    inner = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw

    def target(args):
        """(the callable to call, the arguments that are data)."""
        if how == "static":
            return inner, args
        this, rest = args[0], args[1:]
        if how == "class":
            return functools.partial(inner, this), rest
        return type(raw).__get__(raw, this, type(this)), rest

    @functools.wraps(inner)
    def method(*args, **kwargs):
        seen = {}

        def frozen(a):
            if id(a) not in seen:
                seen[id(a)] = (a, _frozen(a))
            return seen[id(a)][1]

        fn, data = target(args)
        data = tuple(frozen(a) for a in data)
        kwargs = {k: frozen(v) for k, v in kwargs.items()}
        out = fn(*data, **kwargs)
        if name == "diag":
            A = data[0] if data else next((kwargs[k] for k in _OPERAND_KEYWORDS[0]
                                           if k in kwargs), None)
            return out if not hasattr(A, "shape") else \
                checked_diag(out, A, f"kernel plug-in {owner}")
        if name not in ("__call__", "feature_map"):
            return out
        ops = list(data[:2])
        for keys in _OPERAND_KEYWORDS[len(ops):]:
            ops.append(next((kwargs[k] for k in keys if k in kwargs), None))
        A, B = (M if hasattr(M, "shape") else None for M in ops)
        if A is None:
            return out
        if name == "feature_map":
            for orig, view in seen.values():
                if out is view:
                    out = orig  # an identity map returns what it was given, as unguarded
                    break
            return checked_features(out, A, f"kernel plug-in {owner}")
        same = B is None or B is A
        return checked_block(out, A, A if same else B, same, f"kernel plug-in {owner}")

    method.__name__ = name  # a partialmethod or an object has none: bound methods pickle
    if not isinstance(getattr(inner, "__qualname__", None), str):
        method.__qualname__ = f"{owner}.{name}"
    _WRAPPERS.add(method)
    if how == "static":
        return staticmethod(method)
    if how == "class":
        return classmethod(method)
    return method


def checked_diag(out, A, owner):
    """A kernel's diagonal K(a_i, a_i) of the rows of A as returned, when it is one finite
    real number per row (a vector, or a column; one number for all rows): as a vector,
    float32 when the values are float32 (the kernel's own precision, as ``checked_block``
    keeps), float64 otherwise. ``ValueError`` naming ``owner`` otherwise (found by
    review: a diag of the wrong length or 2-D was read as it was, and a NaN one collapsed
    a solver's tolerance to 1e-20 with a warning that blamed the data)."""
    n = A.shape[0]
    try:
        d = np.asarray(out)
        if d.dtype.kind == "c":
            raise TypeError("complex values")
        d = d.astype(np.float32 if d.dtype == np.float32 else np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{owner}: diag() returned a non-numeric result ({exc})") from None
    if d.ndim == 0:
        d = np.full(n, d[()], dtype=d.dtype)  # one value for every row (an RBF-like kernel)
    if d.shape not in ((n,), (n, 1)):
        raise ValueError(f"{owner}: diag() returned shape {d.shape} for {n} rows; it must "
                         f"return K(a_i, a_i) for each row, shape ({n},)")
    d = d.reshape(n)
    if not np.isfinite(d).all():
        raise ValueError(f"{owner}: diag() returned NaN or infinity; K(a_i, a_i) must be "
                         "finite")
    return d


def checked_features(out, A, owner):
    """A feature matrix Phi(A) as returned, when it is 2-D with one row per row of A (the
    solvers' compiled loops read it with A's labels: found by review, a plug-in's map one
    row short was read and written out of bounds); ``ValueError`` naming ``owner`` (the
    kernel) otherwise."""
    if out is not None and not hasattr(out, "shape"):
        out = np.asarray(out)  # a list of rows, as check_X would read it
    shape = getattr(out, "shape", None)
    if shape is None or len(shape) != 2 or shape[0] != A.shape[0]:
        got = f"shape {tuple(shape)}" if shape is not None else f"a {type(out).__name__}"
        raise ValueError(
            f"{owner}: feature_map returned {got} for {A.shape[0]} rows; it "
            f"must return one row of features per row it is given (an array or sparse "
            f"matrix of shape ({A.shape[0]}, n_features))")
    return out


def referee_block(kernel, A, B):
    """``kernel.careful_block(A, B)`` for a referee: checked (``checked_careful_block``)
    unless it is the method of marginkit's own kernel class, not replaced on the instance.
    Checked where the referee calls it, not inside the method (found by review: a
    careful_block declared as a staticmethod or classmethod, or set on the instance, or
    inherited from a built-in class by a subclass with its own __call__, went unchecked;
    and a __call__ written as careful_block(A, B)[0] recursed)."""
    out = kernel.careful_block(A, B)
    own = type(kernel).__module__.partition(".")[0] == "marginkit"
    if own and "careful_block" not in getattr(kernel, "__dict__", {}):
        return out
    return checked_careful_block(out, A, B, kernel, type(kernel).__name__)


def checked_careful_block(out, A, B, kernel, owner):
    """A kernel plug-in's own ``careful_block(A, B)``, checked before any referee reads it:
    a pair (K, E) of real blocks of shape (len(A), len(B)), K finite and E a bound
    (non-negative, no NaN; None: none), and K within both error bounds of the kernel's
    own ``self(A, B)``, the kernel that predicts (E + ``evaluation_bound`` + the trusted
    rounding of ``__call__``'s block). Found by review: a negative E, or a careful block
    of another kernel than ``__call__``'s (K + 10 I), made the referee confirm a false
    "separable" claim. Returns (K in float64, E)."""
    where = f"kernel plug-in {owner}: careful_block(A, B)"
    try:
        K, E = out
    except (TypeError, ValueError):
        raise ValueError(f"{where} must return a pair (K, E): the block and a bound on each "
                         "entry's error") from None
    shape = (A.shape[0], B.shape[0])
    try:
        K = np.asarray(K.toarray() if sp.issparse(K) else K, dtype=np.float64)
        E = None if E is None else np.asarray(E.toarray() if sp.issparse(E) else E,
                                              dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must return real arrays") from None
    if K.shape != shape or (E is not None and E.shape != shape):
        raise ValueError(f"{where} returned K of shape {K.shape} and E of shape "
                         f"{None if E is None else E.shape}; both must be {shape}")
    if not np.all(np.isfinite(K)):
        raise ValueError(f"{where} returned a K that is not finite")
    if E is not None and not np.all(E >= 0.0):
        raise ValueError(f"{where} returned an error bound E with negative or NaN entries; "
                         "E bounds |K - K_exact| entry by entry (inf where unknown)")
    if kernel is not None:
        K_call, E_call = trusted_block(kernel(A, B), kernel.trusted_ulps)
        E0 = np.zeros(shape) if E is None else E
        with np.errstate(over="ignore", invalid="ignore"):
            allowed = E0 + kernel.evaluation_bound(A, B, K, E0) + E_call
            apart = np.abs(K - K_call)
        if np.any(apart > allowed):
            worst = float(np.max(np.where(apart > allowed, apart, 0.0)))
            raise ValueError(
                f"{where} differs from the kernel's own K(A, B) (__call__, which predicts) "
                f"by up to {worst:.3g}, more than both error bounds allow: the referee "
                "checks claims on the kernel that predicts; make careful_block compute "
                "that kernel (or declare __call__'s extra error with evaluation_slack)")
    return K, E


def trusted_block(K, ulps):
    """(K in float64, the bound on each entry's error of a block trusted to ``ulps``
    units in the last place of float64, and to one float32 rounding more, 2^-24 |K|,
    when K is float32): ``Kernel.careful_block``'s default."""
    rel = 2.0 * ulps * (np.finfo(np.float64).eps / 2)
    if getattr(K, "dtype", None) == np.float32:
        rel += 2.0 ** -24
    K = np.asarray(K, dtype=np.float64)
    return K, rel * np.abs(K)


class Kernel(Plugin):
    """A positive semi-definite kernel.

    ``__call__(A, B)`` returns the Gram block K(A, B) as a dense float array.
    Kernels with an explicit finite feature map (``linear``, approximations) set
    ``feature_map`` so that K(A, B) = Phi(A) Phi(B)^T and solvers can work in
    feature space without forming the n x n Gram.

    A subclass defined outside marginkit (a plug-in) gets read-only views of the arrays
    it is given in ``__call__``, ``diag``, ``returned_gram``, ``careful_block`` and
    ``feature_map`` (writing into them raises ``ValueError``: the caller's data are never
    modified), the blocks its ``__call__`` returns are checked as a callable kernel's
    are: real numbers of shape (len(A), len(B)), finite, symmetric for K(A, A) (a sparse
    block is made dense; ``ValueError`` naming the plug-in otherwise), and its
    ``feature_map(A)`` must return a 2-D matrix with one row per row of A. This holds
    for those methods as the class has them when it is created (its own, a mixin's or a
    base class's; plain functions and staticmethods); every call of a map, however it
    is reached, gives it a read-only view of X (``_referee.map_rows``).
    """

    kind = "kernel"
    #: the Gram matrix is given by the user (X is the (n, n) Gram)
    precomputed = False
    #: the methods whose array arguments a plug-in gets as read-only views
    _GUARDED = ("__call__", "diag", "returned_gram", "careful_block", "feature_map")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__module__.partition(".")[0] == "marginkit":
            return  # the built-in kernels: they never write into their operands
        for name in cls._GUARDED:
            # the method as the class resolves it: its own, a mixin's or a base's (found by
            # review: a __call__ from a mixin went unguarded), unless it is marginkit's
            raw = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
            how = None if raw is None else _guard_kind(raw)
            if how is not None:
                setattr(cls, name, _guarded(raw, name, cls.__name__, how))

    def for_run(self, config=None):
        """The kernel one run (``marginkit.solve`` with ``config``) works on.

        A kernel without state of its own serves every run as it is: ``self``. A kernel
        fitted to data (``nystroem``, ``rff``) returns a private copy, so that the run's fit
        never changes this instance, another run, or a ``Result`` that holds it.
        """
        return self

    def __call__(self, A, B=None):  # pragma: no cover - abstract
        raise NotImplementedError

    def diag(self, A):
        """K(x_i, x_i) for each row of A (default: through 1 x 1 blocks)."""
        return np.array([self(A[i : i + 1], A[i : i + 1])[0, 0] for i in range(A.shape[0])])

    def returned_gram(self, A):
        """The square block K(A, A) of float64 rows A with the precision the kernel
        computed it in: float32 when the kernel returned float32 (a plug-in or callable
        computing in float32), whose own rounding a positive semi-definite check then
        allows for (``iterated_tikhonov``'s exact Gram), else float64."""
        # (A, A): not every plug-in gives B a default (found by review: self(A) failed
        # for __call__(self, A, B))
        K = self(A, A)
        if getattr(K, "dtype", None) == np.float32:
            return K
        return np.asarray(K, dtype=np.float64)

    #: entries of a kernel without its own error bound are trusted to this many units in
    #: the last place by the referee (``careful_block``)
    trusted_ulps = 4

    def careful_block(self, A, B):
        """K(A, B) in float64 by the path the referee trusts, and a bound on each entry's error.

        Certificates check their claims from this block (``marginkit.certificates``). The
        built-in kernels compute it by a path of its own (distance kernels from explicit
        differences) with a proven bound; this default evaluates the kernel on float64 input
        and trusts its values to ``trusted_ulps`` units in the last place, so the accuracy of
        a kernel that does not override it is the kernel's own responsibility. A block the
        kernel returns in float32 (a callable that computes in float32) is trusted to one
        float32 rounding more, 2^-24 |K|: the bound is that of this very block, whatever
        the kernel returns for other blocks (found by review: a callable returning float32
        for 2 x 2 blocks only, the size a probe asked, won float32's allowance for its
        float64 Gram matrix, and an indefinite one passed the PSD proof).
        """
        def as64(M):
            if sp.issparse(M):
                return M.astype(np.float64)
            return np.ascontiguousarray(M, dtype=np.float64)

        return trusted_block(self(as64(A), as64(B)), self.trusted_ulps)

    def evaluation_slack(self, A, B):
        """``(tau, floor)``: the kernel's own evaluation ``self(A, B)`` on float64 rows (the
        one ``Result.predict`` and ``decision_function`` use) is within
        E + tau (K + E) + floor of the exact K(a_i, b_j), entry by entry, given
        ``(K, E) = careful_block(A, B)``, for any rows and layout ``self`` may be
        evaluated on (predict evaluates any rows of X against the support); tau and
        floor are numbers (arrays that broadcast against K are taken entry by entry by
        ``evaluation_bound`` and by their largest entry elsewhere). (0, 0) by default:
        the evaluation is ``careful_block``'s own (this class's default) or within its
        bound; a kernel whose ``__call__`` takes a faster, less accurate path returns
        more."""
        return 0.0, 0.0

    def evaluation_bound(self, A, B, K, E):
        """The bound of ``evaluation_slack`` on each entry's error of ``self(A, B)``, given
        ``(K, E) = careful_block(A, B)``. A certificate that stores a predictor checks it
        with this bound, so that the predictor it certifies is the one predict
        evaluates."""
        tau, floor = self.evaluation_slack(A, B)
        if not np.any(tau) and not np.any(floor):  # (NaN is not 0: it propagates)
            return E
        return E + tau * (K + E) + floor


@dataclasses.dataclass(frozen=True)
class Trigger:
    """A threshold on one state field at which a stopping rule fires:
    ``getattr(state, field) <op> value``, ``op`` one of ``"<", "<=", ">", ">="``."""

    field: str
    op: str
    value: float

    _OPS = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__}

    def __post_init__(self):
        if self.op not in ("<", "<=", ">", ">="):
            raise ValueError(f"Trigger op={self.op!r}: use one of '<', '<=', '>', '>='")
        value = float(self.value)
        if value != value:
            # every comparison with NaN is False: a trigger that can never hold (found by
            # review: the solvers that read triggers failed on it with numpy's message)
            raise ValueError(f"Trigger({self.field!r}, {self.op!r}, nan): the value is NaN, "
                             "so the trigger never holds; give a number (or +-inf)")
        object.__setattr__(self, "value", value)

    def holds(self, state):
        """Whether the threshold is met on ``state``."""
        return self._OPS[self.op](float(getattr(state, self.field)), self.value)


class StoppingRule(Plugin):
    """A stopping rule. ``check(state)`` returns a status string to stop, or None.

    The statuses a rule may return: the claims ``"separable"``, ``"infeasible"``,
    ``"certified"`` (re-checked from the data before the run stops on them),
    ``"converged"``, ``"max_iter"`` and ``"time_limit"``; any other answer (True, a
    number, another string) is refused with an error naming the rule.

    A rule reads the state and never writes into it; it keeps nothing of a run on itself
    (one instance may serve concurrent runs). A rule whose test is a threshold on state
    fields declares it in ``triggers(problem)``, so that a solver can read it (a cheap
    pre-check aimed at it, several steps in compiled code up to it: ``step_batch``);
    ``check`` then fires exactly when one of its triggers holds.
    """

    kind = "stopping"
    #: state attributes needed (checked against the solver's ``provides``)
    requires = ()
    #: status the rule reports when it fires
    status = "converged"
    #: what a user can change when a run ends on its budget before this rule fired (one
    #: clause of the warning that says so; "" for nothing beyond max_iter/time_limit)
    advice = ""

    def triggers(self, problem):
        """The thresholds this rule fires on for the run of ``problem`` (a tuple of
        ``Trigger``), or None when its test is not a threshold on state fields."""
        return None

    def check(self, state):  # pragma: no cover - abstract
        raise NotImplementedError
