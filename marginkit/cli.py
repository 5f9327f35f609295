"""The ``marginkit`` command line (also ``python -m marginkit``).

Commands
--------
``marginkit demo``
    Every registered solver family on bundled data (LIBSVM's ``heart_scale`` and a
    synthetic XOR), one table: status, certificate (verified from the data alone),
    margin bounds, iterations, time, training accuracy. Runs in seconds.
``marginkit fit TRAIN [--test TEST] [--solver NAME] [-m MODEL] [-c C] [-e EPS] [-B 1] [-q]``
    Solve on a LIBSVM/svmlight file (plain, ``.gz``, ``.xz``; a path or a name in
    ``$MARGINKIT_DATA``) and report status, certificate, iterations, time and accuracies;
    ``-m`` saves the model (read without pickle). The default solver is ``dcd``;
    more than two classes are solved one-vs-rest. Runs are repeatable: the seed is 0
    unless ``--random-state`` says otherwise. ``-c``, ``-e``, ``-q`` mean what they
    mean to LIBLINEAR users where marginkit has the notion; ``-B 1`` is what ``dcd`` and
    ``fista`` do anyway (other values are refused); ``-s``, LIBLINEAR's ``-v N`` and
    LIBSVM's ``-h 0``, ``-m 100``, ``-t``, ``-g``, ... are refused with the marginkit
    equivalent named. ``--memory-budget`` bounds the memory of kernel matrices. TEST is
    scored as ``predict`` scores it.
``marginkit predict MODEL TEST [-o OUT] [-q]``
    Predict TEST with a saved model, write one label per line to OUT and print
    ``Accuracy = 85.01% (13841/16281)``, as LIBLINEAR's ``predict`` does (rows whose
    label the model does not know, e.g. placeholders of unlabeled data, count as wrong).
``marginkit bench [--data a9a,madelon] [--methods ...] [--quick]``
    Side-by-side comparison with LIBLINEAR, LIBSVM and scikit-learn
    (``marginkit._bench``).
``marginkit plugins``
    Registered plug-ins of each kind, where they come from, and the entry points that
    failed to load (with the reason).

Exit codes: 0 success, 2 a usage error (one line naming the bad argument: options,
files, labels), 1 a solver failed while running (one line; ``--traceback`` shows the
traceback). No traceback is printed otherwise.
"""
import argparse
import ast
import importlib.metadata
import os
import re
import sys
import time
import warnings

import numpy as np

__all__ = ["main", "build_parser", "DEMO_JOBS", "run_job", "format_table"]

#: families run by ``marginkit demo``: (solvers, kernels, data sets, solver parameters).
#: Solvers not registered (yet) are skipped; any solver given with ``--solver`` is added.
DEMO_JOBS = (
    (("perceptron", "normalized_perceptron", "nkp", "snkp", "nvn", "snkpvn", "isnkpvn"),
     ("linear", "rbf"), ("heart_scale", "xor"), {}),
    (("fista", "dcd"), ("linear",), ("heart_scale",), {}),
    (("iterated_tikhonov",), ("rbf",), ("heart_scale",), {"loss": "logistic"}),
)


class UsageError(Exception):
    """A user mistake: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit code 2) instead of a usage dump."""

    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')", self.prog)


#: LIBLINEAR options without a marginkit meaning, and what to use instead
REFUSED_OPTIONS = {
    "-s": "marginkit solvers have names, not numbers: use --solver NAME (the default, dcd, is "
          "LIBLINEAR's dual coordinate descent; 'marginkit plugins' lists the others)",
}


#: options of LIBLINEAR's train and LIBSVM's svm-train that marginkit fit does not take
#: (``-s`` is answered by the parser, ``-v N``, ``-h 0`` and ``-m 100`` by ``_misread_option``),
#: and what to use instead
FOREIGN_OPTIONS = {
    "-w": "LIBLINEAR's -wi W (weight W of class i) is not a marginkit fit option; in Python, "
          "marginkit.sklearn.SVMClassifier(class_weight={i: W}) (or fit(X, y, "
          "sample_weight=...)) gives point i the box [0, C w_i]",
    "-n": "-n (nu) is not a marginkit option: the SVM solvers take C (-c)",
    "-p": "-p (the epsilon of support vector regression) is not a marginkit option: "
          "regression is --solver iterated_tikhonov --param loss=squared",
    "-C": "LIBLINEAR's -C (search for the best C) is not a marginkit option; in Python, "
          "sklearn.model_selection.GridSearchCV(marginkit.sklearn.SVMClassifier(), "
          "{'C': [...]})",
    "-R": "LIBLINEAR's -R (regularized bias) is not a marginkit option: -B 1 with dcd or fista "
          "regularizes the intercept, as LIBLINEAR's -B 1 does",
    "-t": "LIBSVM's -t (kernel type number) is not a marginkit option: use --kernel NAME "
          "(linear, rbf, poly, ...; 'marginkit plugins' lists them)",
    "-g": "LIBSVM's -g G is --gamma G here (or --kernel-param gamma=G)",
    "-d": "LIBSVM's -d D (polynomial degree) is --kernel-param degree=D here",
    "-r": "LIBSVM's -r R (coef0) is --kernel-param coef0=R here",
    "-b": "LIBSVM's -b 1 (probability estimates) is not a marginkit fit option; in Python, "
          "marginkit.sklearn.IteratedTikhonovClassifier().predict_proba",
}


def _foreign_option(argv):
    """The first LIBLINEAR/LIBSVM option of ``FOREIGN_OPTIONS`` in the ``fit`` arguments
    ``argv`` (``-w1``, ``-w-1``, ``-n``, ``-g``, ``-g0.5``, ...), also at the end of a
    cluster of flags (``-qw1``, ``-qg 0.5``), or None; option values and the arguments
    after ``--`` are not options."""
    for tok in argv:
        if tok == "--":
            return None
        m = re.fullmatch(f"-[{FLAG_LETTERS}]*(.)(.*)", tok)
        if m is None or f"-{m.group(1)}" not in FOREIGN_OPTIONS:
            continue
        if m.group(1) != "w" or re.fullmatch(r"[+-]?[\w.]+", m.group(2)):
            return f"-{m.group(1)}"
    return None


#: LIBLINEAR's -v N (N-fold cross-validation), which marginkit's -v (verbose) would misread
CROSS_VALIDATION = (
    "LIBLINEAR's -v N (N-fold cross-validation) is not a marginkit option; here -v means "
    "verbose (-v, -vv, --verbose). For cross-validation use --test TEST for a held-out "
    "file, or scikit-learn: cross_val_score(marginkit.sklearn.SVMClassifier(solver='dcd'), "
    "X, y, cv=N); a training file named N: write ./N")

#: options of marginkit fit that LIBLINEAR/LIBSVM give another meaning, recognized by the
#: form of the value that follows them (option -> (value pattern, what to use instead))
MISREAD_OPTIONS = {
    "-v": (r"\d+", CROSS_VALIDATION),
    "-h": (r"[01]", "LIBSVM's -h 0/1 (shrinking heuristics) is not a marginkit option; here "
                    "-h prints help. dcd shrinks by default: --param shrinking=False turns "
                    "it off (a training file named 0 or 1: write ./0)"),
    "-m": (r"\d+(\.\d*)?", "LIBSVM's -m M (kernel cache size in MB) is not a marginkit "
                           "option; here -m MODEL names the model file (write -m ./M for a "
                           "file of that name). The memory of kernel matrices is "
                           "--memory-budget BYTES (e.g. --memory-budget 100M)"),
}


#: the short options of ``marginkit fit`` that take no value, which a cluster of short
#: options may hold before its last one (``-qh 0`` is ``-q -h 0``); a cluster that
#: repeats the option's own letter is marginkit's (``-vv 5``: verbose 2 and a file 5,
#: LIBLINEAR has no ``-vv``)
FLAG_LETTERS = "qv"


def _joined_values(argv):
    """``argv`` with ``-qm=VALUE`` (a cluster of flags ending in an option joined to its
    value by ``=``) written ``-qmVALUE``, as ``-m=VALUE`` is read: argparse 3.11 keeps the
    ``=`` in the value of a cluster's last option (a model file named ``=100``)."""
    out = list(argv)
    for i, tok in enumerate(out):
        if tok == "--":
            break
        m = re.fullmatch(f"-([{FLAG_LETTERS}]+[a-zA-Z])=(.*)", tok)
        if m is not None:
            out[i] = f"-{m.group(1)}{m.group(2)}"
    return out


def _misread_option(argv):
    """The first option of ``MISREAD_OPTIONS`` in the ``fit`` arguments ``argv`` with a
    value of LIBLINEAR's/LIBSVM's form, after it or joined to it (``-v 5``, ``-v5``,
    ``-h 0``, ``-m 100``, ``-m100``), also at the end of a cluster of flags (``-qh 0``,
    ``-qm100``), or None; nothing after ``--``."""
    for i, tok in enumerate(argv):
        if tok == "--":
            return None
        following = argv[i + 1] if i + 1 < len(argv) else None
        for opt, (value, _) in MISREAD_OPTIONS.items():
            flags = FLAG_LETTERS.replace(opt[1:], "")
            m = re.fullmatch(f"-[{flags}]*{opt[1:]}(.*)", tok)
            if m is None:
                continue
            if re.fullmatch(value, m.group(1)) or \
                    (m.group(1) == "" and following is not None and re.fullmatch(value, following)):
                return opt
    return None


class _Refused(argparse.Action):
    """An option refused with one line naming the marginkit equivalent."""

    def __init__(self, option_strings, dest, **kwargs):
        kwargs["nargs"] = "?"
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        raise UsageError(f"argument {option_string}: {REFUSED_OPTIONS[option_string]}",
                         parser.prog)


#: settings of the run (``Config`` fields) that ``--param`` might be given for a solver
#: parameter, and the option that sets each
RUN_OPTIONS = {"memory_budget": "--memory-budget", "max_iter": "--max-iter",
               "time_limit": "--time-limit", "random_state": "--random-state",
               "verbose": "-v", "solver": "--solver", "kernel": "--kernel",
               "kernel_params": "--kernel-param"}

#: the hint added to a library message that says "raise memory_budget"
MEMORY_BUDGET_HINT = "; marginkit fit takes it as --memory-budget BYTES (e.g. 8G)"

#: the units of ``--memory-budget`` (bytes; powers of 1024, as the messages' GiB)
_BYTE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


# ----------------------------------------------------------------------------- helpers
def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _key_values(pairs, option):
    out = {}
    for item in pairs or ():
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"argument {option}: {item!r} must be NAME=VALUE (e.g. {option} eps=1e-6)")
        if key in out:
            raise UsageError(f"argument {option}: {key} is given twice ({key}={out[key]!r} and "
                             f"{item!r}); give it once")
        out[key] = _literal(value)
    return out


def _check_output(path, inputs, option="--output (-m)", what="the model", streams=False):
    """Refuse, before any work, an output path (``option``: fit's model, predict's labels)
    that is not a file to write (a directory, a device such as /dev/null, a FIFO: found by
    review, a traceback and a write that blocked) or that is one of the input files (the
    training data, the test data or the model would be overwritten). ``streams``: a
    character device (/dev/stdout) and a pipe with a reader (``-o >(cmd)``) are outputs
    too (predict's lines; found by review: refusing them broke ``-o /dev/stdout``); a
    FIFO nobody reads is refused (the write would block)."""
    import errno
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"argument {option}: {_os_message(exc, path)}") from None
    if streams and stat.S_ISCHR(mode):
        return
    if streams and stat.S_ISFIFO(mode):
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            return
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise UsageError(f"argument {option}: {_os_message(exc, path)}") from None
        raise UsageError(f"argument {option}: {path} is a FIFO that nothing reads; writing "
                         f"{what} there would block")
    if not stat.S_ISREG(mode):
        raise UsageError(f"argument {option}: {path} is not a regular file (a directory, a "
                         f"device or a FIFO); name a file to write {what} to")
    from .datasets import find_data_file

    for name, other in inputs:
        if other is None:
            continue
        same = False
        # the file as named, and the file the loader reads: a data set name is looked up
        # in $MARGINKIT_DATA (found by review: "fit heart_scale -m
        # $MARGINKIT_DATA/heart_scale.xz" replaced the data set with the model)
        for candidate in (lambda: other, lambda: find_data_file(other)):
            try:
                same = same or os.path.samefile(path, candidate())
            except (OSError, ValueError, TypeError):
                pass
        if same:
            raise UsageError(f"argument {option}: {path} is the input file {name}; writing {what} "
                             "there would overwrite it")


def _fmt(v, digits=4):
    if v is None:
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "NO"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.{digits}g}"
    return str(v)


def format_table(rows, columns):
    """Plain-text table: ``rows`` are dicts, ``columns`` (key, header) pairs."""
    cells = [[_fmt(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (_, h) in enumerate(columns)]
    line = "  ".join(h.ljust(w) for (_, h), w in zip(columns, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    for c in cells:
        out.append("  ".join(x.ljust(w) for x, w in zip(c, widths)))
    return "\n".join(out)


def _load(path, option, n_features=None):
    from .datasets import load_libsvm

    try:
        return load_libsvm(path, n_features=n_features)
    except (OSError, ValueError, TypeError) as exc:  # OSError: missing, unreadable, a folder
        raise UsageError(f"argument {option}: {exc}") from None
    except MemoryError:
        raise UsageError(f"argument {option}: {path}: not enough memory to hold the data") from None


def _cut_refusal(kernel, what, where, n_extra):
    """Why the columns of a test file beyond the training width may not be cut for a
    model on ``kernel`` (None when cutting is exact). Features the model never saw have
    no weight in a linear model or one of dot products with its support (linear, poly),
    as in LIBLINEAR; a distance kernel (rbf, laplacian, spline, a plug-in, a map of one)
    measures them, so dropping them would change every kernel value K(x, x_i)."""
    from .kernels.approximation import NystroemKernel
    from .kernels.builtin import LinearKernel, PolynomialKernel

    base = kernel.base_kernel if isinstance(kernel, NystroemKernel) else kernel
    if kernel is None or isinstance(base, (LinearKernel, PolynomialKernel)):
        return None
    name = getattr(kernel, "name", None) or type(kernel).__name__
    return (f"argument {what}: {where} has {n_extra} feature(s) beyond the model's; the "
            f"kernel {name!r} measures distances in them, so they cannot be ignored as a "
            "linear model's are: pass a file with the training features only")


def _match_features(X, n):
    """Pad or cut the columns of a CSR test matrix to the training width ``n``."""
    import scipy.sparse as sp

    if X.shape[1] == n:
        return X
    if X.shape[1] < n:
        return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n))
    return X[:, :n]


def _config(solver, kernel, kernel_params, solver_params, **fields):
    """A validated Config whose plug-ins compose; ``UsageError`` naming the argument otherwise."""
    from ._api import _instantiate, compose, resolve_kernel
    from ._config import Config

    try:
        _instantiate("solver", solver, solver_params)
    except (TypeError, ValueError) as exc:
        # -c and -e are checked alone (_liblinear_options): what is left is --param's
        opt = "--solver" if "unknown solver" in str(exc) else "--param"
        raise UsageError(f"argument {opt}: {exc}") from None
    try:
        resolve_kernel(kernel, kernel_params or None)
    except (TypeError, ValueError) as exc:
        opt = "--kernel" if "unknown kernel" in str(exc) else "--kernel-param/--gamma"
        raise UsageError(f"argument {opt}: {exc}") from None
    try:
        # warn=False: the status line says how the run ended (and -v's last line why)
        cfg = Config(solver=solver, kernel=kernel, kernel_params=kernel_params or None,
                     solver_params=solver_params, warn=False, **fields)
        compose(cfg)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return cfg


def _certificate_check(res, X, y, max_gram=20_000):
    """certificate.verify(X, y), or None when the check would form too large a Gram."""
    cert = res.certificate
    if cert is None:
        return None
    kernel = getattr(cert, "kernel", None) or res.kernel
    if getattr(kernel, "feature_map", None) is None and X.shape[0] > max_gram:
        return None
    return bool(cert.verify(X, y))


def run_job(X, y, config, X_test=None, y_test=None, verify=True):
    """Solve once and return a row of measurements (dict)."""
    from ._api import solve

    res = solve(X, y, config=config)
    row = {
        "solver": res.solver,
        "kernel": getattr(res.kernel, "name", None) or str(config.kernel),
        "status": res.status,
        "cert": None if res.certificate is None else res.certificate.kind,
        "cert_value": None if res.certificate is None else res.certificate.value,
        "verified": _certificate_check(res, X, y) if verify else None,
        "margin": None if res.margin_bounds is None else
        "[{}, {}]".format(*(_fmt(b, 3) for b in res.margin_bounds)),
        "n_iter": res.n_iter,
        "time_s": res.time_s,
        "train_acc": res.score(X, y),
        "result": res,
    }
    if X_test is not None:
        row["test_acc"] = res.score(X_test, y_test)
    return row


# ----------------------------------------------------------------------------- demo
#: what the demo's columns mean, printed under its table
DEMO_LEGEND = (
    "status is what a run found: separable, infeasible, certified and converged are claims, each "
    "with a certificate (a separator, a proof that none has a margin above eps, certified "
    "points, a bounded "
    "Newton decrement) that verify(X, y) re-checks from the data alone; margin bounds bracket "
    "the best normalized margin rho_K (positive: separable).\n"
    "With the linear kernel neither data set is separable: nvn, snkpvn and isnkpvn prove it "
    "to their own tolerance, and the perceptron, normalized_perceptron, nkp and snkp rows "
    "run with the dual_certificate rule at 1e-3 (PerceptronClassifier's default tol='auto'): "
    "a proof that no separator has a normalized margin above 1e-3. The rbf kernel separates "
    "both. max_iter (none here) would mean no claim within the budget.")


def _demo_data(name):
    from . import datasets

    if name == "heart_scale":
        return datasets.load_heart_scale()
    make_xor = getattr(datasets, "make_xor", None)
    if make_xor is None:
        return None
    X, y = make_xor(n_samples=200, random_state=0)[:2]
    return X, y


def _demo_config(cfg):
    """``cfg`` with the ``dual_certificate`` rule at ``AUTO_DUAL_TOL`` added where it can
    act (``perceptron``, ``normalized_perceptron``, ``nkp``, ``snkp``), as
    ``PerceptronClassifier``'s default ``tol="auto"`` does: on data that is not separable
    they then end with a checked proof that no separator has a normalized margin above
    the tolerance, instead of running to ``max_iter``."""
    from ._api import with_dual_certificate
    from .stopping import AUTO_DUAL_TOL

    return with_dual_certificate(cfg, AUTO_DUAL_TOL)[0]


def cmd_demo(args):
    from ._registry import list_plugins

    registered = set(list_plugins()["solver"])
    kernels = set(list_plugins()["kernel"])
    jobs = [(s, k, d, p) for solvers, ks, ds, p in DEMO_JOBS for d in ds for s in solvers for k in ks]
    in_table = {j[0] for j in jobs}
    for name in dict.fromkeys(args.solver or ()):
        if name not in registered:
            raise UsageError(f"argument --solver: unknown solver {name!r}; registered: {sorted(registered)}")
        if name not in in_table:
            jobs += [(name, k, d, {}) for d in ("heart_scale", "xor") for k in ("linear", "rbf")]
    if args.solver:
        jobs = [j for j in jobs if j[0] in args.solver]
    data, rows, notes, failed = {}, [], [], 0
    missing = sorted({j[0] for j in jobs if j[0] not in registered})
    if missing:
        notes.append(f"not registered (skipped): {', '.join(missing)}")
    t_start = time.perf_counter()
    for solver, kernel, dname, params in jobs:
        if solver not in registered or kernel not in kernels:
            continue
        if dname not in data:
            data[dname] = _demo_data(dname)
            if data[dname] is None:
                notes.append(f"data set {dname!r} unavailable (marginkit.datasets has no generator)")
        if data[dname] is None:
            continue
        X, y = data[dname]
        try:
            cfg = _demo_config(_config(solver, kernel, None, dict(params),
                                       time_limit=args.time_limit, random_state=0,
                                       verbose=args.verbose))
        except UsageError as exc:
            notes.append(f"{solver}/{kernel} on {dname}: skipped ({exc})")
            continue
        try:
            row = run_job(X, y, cfg)
        except Exception as exc:  # noqa: BLE001 - one broken solver must not hide the others
            if args.traceback:
                raise
            failed += 1
            notes.append(f"{solver}/{kernel} on {dname}: FAILED {type(exc).__name__}: {exc}")
            continue
        row["data"] = f"{dname} {X.shape[0]}x{X.shape[1]}"
        rows.append(row)
    columns = [("data", "data"), ("solver", "solver"), ("kernel", "kernel"), ("status", "status"),
               ("cert", "certificate"), ("verified", "verified"), ("margin", "margin bounds"),
               ("n_iter", "iter"), ("time_s", "time [s]"), ("train_acc", "train acc")]
    if rows:
        print(format_table(rows, columns))
    else:
        print("no solver of the demo is registered yet")
    for note in notes:
        print(f"note: {note}")
    if rows:
        print(DEMO_LEGEND)
    print(f"total {time.perf_counter() - t_start:.2f} s; certificates are checked by "
          "certificate.verify(X, y), from the data alone")
    return 1 if failed else 0


# ----------------------------------------------------------------------------- fit
#: the solver of ``marginkit fit`` when ``--solver`` is not given
DEFAULT_SOLVER = "dcd"


def _solver_class(name):
    from ._registry import get_plugin

    try:
        return get_plugin("solver", name)
    except ValueError as exc:
        raise UsageError(f"argument --solver: {exc}") from None


def _solvers_with(param):
    from ._registry import get_plugin, list_plugins

    return [n for n in list_plugins()["solver"]
            if param in getattr(get_plugin("solver", n), "param_table", {})]


def _solvers_with_bias_one():
    """The registered solvers that fit an intercept regularized as a feature of value 1
    (LIBLINEAR's ``-B 1``): those whose dual has rows y_i (z_i, 1), ``formulation`` "hsvm"."""
    from ._api import _instantiate
    from ._registry import list_plugins

    names = []
    for name in list_plugins()["solver"]:
        try:
            if getattr(_instantiate("solver", name), "formulation", None) == "hsvm":
                names.append(name)
        except Exception:  # noqa: BLE001 - a plug-in that needs parameters is not one of them
            continue
    return names


def _check_bias(args):
    """LIBLINEAR's ``-B``: ``-B 1`` is what the H-SVM solvers (dcd, fista) do anyway, an
    intercept regularized as a feature of value 1 (docs/svm.md, "What C means"); accepted
    for them and changing nothing. Other values and other solvers are refused."""
    if args.bias is None:
        return
    with_bias = _solvers_with_bias_one()
    what = (f"{' and '.join(with_bias) or 'no registered solver'} fit an intercept regularized "
            "as a feature of value 1, which is LIBLINEAR's -B 1")
    if args.solver not in with_bias:
        from ._api import _instantiate

        _solver_class(args.solver)  # an unknown name is --solver's error
        try:
            free = getattr(_instantiate("solver", args.solver), "formulation", None) == "svm"
        except Exception:  # noqa: BLE001 - a plug-in that needs parameters
            free = False
        own = " (its intercept is unregularized, as LIBSVM's)" if free else ""
        raise UsageError(f"argument -B: {what}; solver {args.solver!r} does not{own}, so -B "
                         "is accepted only with them, as -B 1")
    if args.bias != 1:
        raise UsageError(
            f"argument -B: -B {args.bias:.17g} is not available: {what} (so -B 1 is accepted "
            "and changes nothing); they have no other bias value and cannot leave the "
            "intercept out")


def _check_param_names(args, solver_params):
    """``--param NAME=...`` naming a setting of the run rather than of the solver: refused
    with the option that sets it."""
    table = getattr(_solver_class(args.solver), "param_table", {})
    for key in solver_params:
        if key in RUN_OPTIONS and key not in table:
            raise UsageError(
                f"argument --param: {key} is a setting of the run, not a parameter of solver "
                f"{args.solver!r}: use {RUN_OPTIONS[key]}")


def _liblinear_options(args, solver_params):
    """``-c``/``--C``, ``-e`` and ``-B`` in marginkit's terms: solver parameters and
    stopping rules."""
    from ._api import _instantiate

    cls = _solver_class(args.solver)
    table = getattr(cls, "param_table", {})
    stop = None
    _check_bias(args)
    if args.C is not None:
        if "C" in solver_params:
            raise UsageError(
                f"argument -c/--C: C is also given by --param C={solver_params['C']!r}; set "
                "it once")
        if "C" not in table:
            hints = getattr(_solver_class(args.solver), "param_hints", None) or {}
            hint = f"; {hints['C']}" if "C" in hints else ""
            raise UsageError(
                f"argument -c/--C: solver {args.solver!r} has no C (the box of the SVM dual); "
                f"the solvers that take it: {', '.join(_solvers_with('C'))}{hint}")
        try:
            _instantiate("solver", args.solver, {"C": args.C})
        except (TypeError, ValueError) as exc:
            raise UsageError(f"argument -c/--C: {exc}") from None
        solver_params["C"] = args.C
    if args.tol is not None:
        default = getattr(cls, "default_stop", None)  # a property: set per instance
        default = [(r, {}) if isinstance(r, str) else tuple(r) for r in
                   (default if isinstance(default, (tuple, list)) else ())]
        if "tol" in table:  # iterated Tikhonov: the target Newton decrement
            if "tol" in solver_params:
                raise UsageError(
                    f"argument -e: tol is also given by --param tol={solver_params['tol']!r}; "
                    "set it once")
            solver_params["tol"] = args.tol
        elif any(name == "dual_certificate" for name, _ in default):
            # von Neumann family: the infeasibility claim ||p||_G <= -e
            stop = [("dual_certificate", {**params, "eps": args.tol})
                    if name == "dual_certificate" else (name, params) for name, params in default]
        elif "error_bound" in getattr(cls, "provides", ()):
            # SVM family: run until the error bound on the dual, ||r - r*||, is at most -e
            stop = [("tolerance", {"tol": args.tol, "attribute": "error_bound"})]
            if "bound_check" in table:  # dcd: compute the bound every epoch
                solver_params.setdefault("bound_check", "always")
        else:
            raise UsageError(
                f"argument -e: solver {args.solver!r} has no tolerance to set; bound the run "
                "with --max-iter or --time-limit")
        try:  # a value out of a rule's or the solver's range is the option's fault
            for name, params in stop or ():
                _instantiate("stopping", name, params)
            if "tol" in table:
                _instantiate("solver", args.solver, {"tol": args.tol})
        except (TypeError, ValueError) as exc:
            raise UsageError(f"argument -e: {exc}") from None
    return stop


def _unknown_labels(y, classes):
    """The labels of a data file that are not ``classes`` (sorted, unique) and the mask of
    the rows that hold them."""
    classes = np.asarray(classes)
    if classes.dtype.kind in "biuf":
        known = np.isin(y, classes.astype(np.float64))
    else:  # labels of a model saved from Python: strings are never numbers of a file
        known = np.zeros(y.shape, dtype=bool)
    return np.unique(y[~known]), ~known


def _labels_text(labels):
    return ", ".join(_label_text(v, quoted=True) for v in labels[:5]) \
        + (", ..." if len(labels) > 5 else "")


def _unknown_labels_note(y, classes, path):
    """The note on the rows of a test file whose label is not a class of the model, or
    None: as LIBLINEAR's predict, such a row (a placeholder of unlabeled data, say) is
    predicted and counts as wrong in the accuracy (``predict`` and ``fit --test``)."""
    unknown, rows = _unknown_labels(y, classes)
    if not unknown.size:
        return None
    known = ", ".join(_label_text(c, quoted=True) for c in classes)
    return (f"note: {path}: labels {_labels_text(unknown)} are not classes of the model "
            f"({known}); their {int(np.count_nonzero(rows))} rows count as wrong in the "
            "accuracy")


def _label_text(v, quoted=False):
    """A label as LIBSVM's tools print it (%.17g for numbers: 1, -1, 2.5); any other
    label (the string classes of a model saved from Python) as it is, or ``quoted`` in
    a message, so that the class '1' is not read as the number 1."""
    if isinstance(v, (np.floating, float, np.integer, int)) and not isinstance(v, (bool, np.bool_)):
        return "%.17g" % v
    v = v.item() if isinstance(v, np.generic) else v
    return repr(v) if quoted else str(v)


def _result_line(res, row):
    if res.certificate is None:
        cert = "no certificate"
    else:
        ver = {True: "verified from the data", False: "FAILED verification",
               None: "not verified (--no-verify or n x n Gram too large)"}[row["verified"]]
        cert = f"certificate {res.certificate.kind}, value {_fmt(res.certificate.value, 6)}, {ver}"
    return f"{res.status}, {cert}"


def _command_line_names(text):
    """A library message in the command line's terms: solver='x' as --solver x,
    kernel='x' as --kernel x, and the run settings memory_budget, max_iter, time_limit
    and random_state as their options (not a quoted status 'max_iter', nor the name of
    the max_iter stopping rule)."""
    text = re.sub(r"\bsolver='([\w-]+)'", r"--solver \1", text)
    text = re.sub(r"\bkernel='([\w-]+)'", r"--kernel \1", text)
    for name in ("memory_budget", "max_iter", "time_limit", "random_state"):
        text = re.sub(rf"(?<![\w'\"-]){name}\b(?!=| stopping rule)", RUN_OPTIONS[name], text)
    return text


def _warning_notes(caught):
    """The library's warnings of a run as one 'note:' line each on stderr, in the command
    line's terms (a Python warning names a source line and Python's parameter names)."""
    seen = set()
    for w in caught:
        text = _command_line_names(str(w.message))
        if text not in seen:
            seen.add(text)
            print(f"note: {text}", file=sys.stderr)


def _unfinished_notes(results, classes=None):
    """A note on stderr for each run that stopped at its budget without its claim (what
    the library's ConvergenceWarning says, with the command line's option names), as
    LIBLINEAR warns when it reaches its iteration limit."""
    from ._api import unfinished_result

    for i, res in enumerate(results):
        why = unfinished_result(res)
        if why is None:
            continue
        why = _command_line_names(why)
        which = "" if classes is None else f" (class {_label_text(classes[i])} against the rest)"
        print(f"note: {res.solver}{which} stopped with status {res.status} after "
              f"{res.n_iter} iterations {why}", file=sys.stderr)


def cmd_fit(args):
    from ._model_file import Model

    if args.model:
        _check_output(args.model, (("TRAIN", args.train), ("--test", args.test)))
    solver_params = _key_values(args.param, "--param")
    kernel_params = _key_values(args.kernel_param, "--kernel-param")
    _check_param_names(args, solver_params)
    stop = _liblinear_options(args, solver_params)
    if args.gamma is not None:
        if "gamma" in kernel_params:
            raise UsageError(f"argument --gamma: gamma is also given by --kernel-param "
                             f"(gamma={kernel_params['gamma']!r}); give it once")
        kernel_params["gamma"] = args.gamma
    verbose = 0 if args.quiet else args.verbose
    budget = {} if args.memory_budget is None else {"memory_budget": args.memory_budget}
    cfg = _config(args.solver, args.kernel, kernel_params, solver_params, stop=stop,
                  max_iter=args.max_iter, time_limit=args.time_limit,
                  random_state=args.random_state, verbose=verbose, **budget)
    X, y = _load(args.train, "TRAIN", n_features=args.n_features)
    vector = 8.0 * X.shape[1]  # bytes of one float64 vector over the features
    if vector > cfg.memory_budget:
        # a two-line file can name feature 3e9: each model vector would take 24 GB
        raise UsageError(
            f"argument TRAIN: {args.train} has {X.shape[1]} features (its highest index); "
            f"one float64 vector over them takes {vector / 2**30:.3g} GiB, more than the "
            f"memory budget of {cfg.memory_budget / 2**30:.3g} GiB (--memory-budget)")
    from ._api import compose
    from ._validation import check_y

    task = getattr(compose(cfg)[0], "task", "classification")
    classes = np.unique(y) if task == "classification" else None
    if classes is not None and classes.dtype.kind == "f" and \
            np.any(classes != np.round(classes)):
        # (found by review: a regression file ran one problem per distinct value)
        frac = classes[classes != np.round(classes)]
        raise UsageError(
            f"argument TRAIN: the labels of {args.train} are continuous ({classes.size} "
            f"distinct values, {float(frac[0])!r} among them), not classes (the estimators "
            "refuse them too, as scikit-learn's do); regression is --solver "
            "iterated_tikhonov --param loss=squared")
    one_vs_rest = classes is not None and classes.size > 2
    if not one_vs_rest:
        try:  # the labels are the user's: a problem with them is a usage error
            check_y(y, X.shape[0], task=task, name=f"the labels of {args.train}")
        except (ValueError, TypeError) as exc:
            raise UsageError(f"argument TRAIN: {exc}") from None
    X_test = y_test = None
    if args.test is not None:
        X_test, y_test = _load(args.test, "--test")
        if X_test.shape[1] > X.shape[1]:
            reason = _cut_refusal(compose(cfg)[1], "--test", args.test,
                                  X_test.shape[1] - X.shape[1])
            if reason is not None:
                raise UsageError(reason)
        if X_test.shape[1] != X.shape[1]:
            if X_test.shape[1] > X.shape[1] and not args.quiet:
                print(f"note: {args.test} has {X_test.shape[1]} features, the training file "
                      f"{X.shape[1]}; the extra columns are ignored", file=sys.stderr)
            X_test = _match_features(X_test, X.shape[1])
        note = None if classes is None else _unknown_labels_note(y_test, classes, args.test)
        if note is not None and not args.quiet:
            print(note, file=sys.stderr)
    # one solve for two classes (or regression); one per class (class against the rest)
    problems = [(None, y)] if not one_vs_rest else \
        [(c, (y == c).astype(np.int8)) for c in classes]
    rows = []
    for c, labels in problems:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                rows.append(run_job(X, labels, cfg, verify=not args.no_verify))
            if not args.quiet:
                _warning_notes(caught)
        except Exception as exc:  # noqa: BLE001 - reported in one line; --traceback shows it
            if args.traceback:
                raise
            which = "" if c is None else f" (class {_label_text(c)} against the rest)"
            # the library's advice is for Python users; say how the command line takes it
            hint = MEMORY_BUDGET_HINT if "raise memory_budget" in str(exc) else ""
            print(f"marginkit fit: solver {args.solver!r} failed on {args.train}{which}: "
                  f"{type(exc).__name__}: {exc}{hint} (run with --traceback for details)",
                  file=sys.stderr)
            # the library refuses input it cannot solve with ValueError / TypeError (data
            # it cannot scale, a memory budget too small): bad input, exit code 2 as for
            # the parser's refusals; anything else is the solver's failure, 1
            return 2 if isinstance(exc, (ValueError, TypeError)) else 1
    results = [row["result"] for row in rows]
    if not args.quiet:
        _unfinished_notes(results, classes if one_vs_rest else None)
    model = Model(results, classes) if one_vs_rest else Model.binary(results[0])
    res = results[0]
    labels = "real" if res.classes_ is None else \
        f"{[_label_text(c) for c in (classes if one_vs_rest else res.classes_)]}".replace("'", "")
    lines = [
        ("data", f"{args.train}: {X.shape[0]} samples x {X.shape[1]} features, labels {labels}"
                 + (f" (one-vs-rest: {len(results)} problems)" if one_vs_rest else "")),
        ("solver", f"{res.solver} (kernel {rows[0]['kernel']})"),
    ]
    if not one_vs_rest:
        lines.append(("status", res.status))
        cert = _result_line(res, rows[0]).split(", ", 1)[1]
        lines.append(("certificate", "none" if res.certificate is None else
                      cert[len("certificate "):]))
        if res.margin_bounds is not None:
            lines.append(("margin", rows[0]["margin"]))
        if res.certified_mask is not None:
            lines.append(("certified", f"{int(np.sum(res.certified_mask))} of {X.shape[0]} "
                                       "training points"))
        lines += [("iterations", str(res.n_iter)), ("time", f"{res.time_s:.4g} s")]
    else:
        for c, r, row in zip(classes, results, rows):
            lines.append((f"class {_label_text(c)}",
                          f"{_result_line(r, row)}; {r.n_iter} iterations, {r.time_s:.4g} s"))
        lines.append(("time", f"{sum(r.time_s for r in results):.4g} s"))
    if task == "classification":
        lines.append(("train acc", f"{float(np.mean(model.predict(X) == y)):.4f}"))
    else:
        lines.append(("train R^2", f"{res.score(X, y):.4f}"))
    if X_test is not None:
        if task == "classification":
            acc = float(np.mean(model.predict(X_test) == y_test))
            lines.append(("test acc", f"{acc:.4f} ({X_test.shape[0]} samples)"))
        else:
            lines.append(("test R^2", f"{res.score(X_test, y_test):.4f} ({X_test.shape[0]} samples)"))
    if args.model:
        try:
            model.save(args.model)
        except (TypeError, OSError) as exc:
            raise UsageError(f"argument --output (-m): {exc}") from None
        how = "marginkit predict" if one_vs_rest else "marginkit predict or marginkit.load_result"
        lines.append(("saved", f"{args.model} (read it with {how})"))
        # what predict will find: the model read back as predict reads it
        from ._model_file import load_model

        try:
            reason = load_model(args.model).unpredictable_reason()
        except ValueError as exc:  # a plug-in's certificate that does not hold its model
            load_model(args.model, allow_unbound=True)  # (any other fault is raised)
            reason = f"{exc} (marginkit predict --allow-unbound reads it)"
        if reason is not None:
            print(f"note: marginkit predict cannot use this model: {reason}", file=sys.stderr)
    if not args.quiet:
        width = max(12, max(len(key) + 1 for key, _ in lines))  # long class labels
        for key, val in lines:
            print(f"{key:<{width}}{val}")
    return 0


# ----------------------------------------------------------------------------- predict
def cmd_predict(args):
    from ._model_file import load_model

    try:
        model = load_model(args.model, allow_unbound=args.allow_unbound)
    except (OSError, ValueError) as exc:
        hint = ""
        try:
            load_model(args.test)
            hint = (f"; {args.test} is a model file: marginkit predict takes MODEL first, "
                    "then TEST (LIBLINEAR's predict takes TEST MODEL OUTPUT)")
        except (OSError, ValueError):
            pass
        raise UsageError(f"argument MODEL: {_os_message(exc, args.model)}{hint}") from None
    reason = model.unpredictable_reason()
    if reason is not None:
        raise UsageError(f"argument MODEL: {args.model}: cannot predict a data file: {reason}")
    if args.output:
        # found by review: "-o TEST" replaced the test data with the labels, "-o MODEL"
        # the model, and "-o FIFO" blocked
        _check_output(args.output, (("MODEL", args.model), ("TEST", args.test)),
                      "-o/--output", "the predicted labels", streams=True)
    n = model.n_features
    X, y = _load(args.test, "TEST")
    if X.shape[1] > n:
        reason = _cut_refusal(model.results[0].kernel, "TEST", args.test, X.shape[1] - n)
        if reason is not None:
            raise UsageError(reason)
    if X.shape[1] > n and not args.quiet:
        # as LIBLINEAR does: features the model never saw have no weight
        print(f"note: {args.test} has {X.shape[1]} features, the model {n}; the extra "
              "columns are ignored", file=sys.stderr)
    X = _match_features(X, n)
    try:
        pred = model.predict(X)
    except Exception as exc:  # noqa: BLE001 - reported in one line; --traceback shows it
        if args.traceback:
            raise
        print(f"marginkit predict: predicting {args.test} with {args.model} failed: "
              f"{type(exc).__name__}: {exc} (run with --traceback for details)", file=sys.stderr)
        return 2 if isinstance(exc, (ValueError, TypeError)) else 1  # as fit's
    if args.output:
        try:
            with open(args.output, "w") as fh:
                fh.writelines(_label_text(v) + "\n" for v in pred)
        except OSError as exc:
            raise UsageError(f"argument -o/--output: {_os_message(exc, args.output)}") from None
    if not args.quiet:
        note = _unknown_labels_note(y, model.classes_, args.test)
        if note is not None:
            print(note, file=sys.stderr)
        numeric = np.asarray(model.classes_).dtype.kind in "biuf"
        correct = int(np.count_nonzero(np.asarray(pred, dtype=np.float64) == y)) if numeric else 0
        print(f"Accuracy = {100.0 * correct / max(len(y), 1):.2f}% ({correct}/{len(y)})")
    return 0


def _os_message(exc, path):
    """One line for an OSError (``[Errno 2] No such file...`` without the errno)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{path}: {exc.strerror}"
    return str(exc)


# ----------------------------------------------------------------------------- plugins
def _origin(kind, name, reg):
    obj = reg._items[name]
    if reg._builtin.get(name) is obj:
        return f"built-in ({getattr(obj, '__module__', '?')})"
    eps = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=reg.group)}
    if name in eps:
        return f"entry point {eps[name]} (group {reg.group})"
    return f"registered at run time ({getattr(obj, '__module__', '?')})"


def cmd_plugins(args):
    from ._registry import KINDS, REGISTRIES, failed_plugins

    failed = failed_plugins()
    for kind in KINDS:
        reg = REGISTRIES[kind]
        names = reg.names()
        title = "stopping rules" if kind == "stopping" else kind + "s"
        print(f"{title} ({len(names)}):")
        width = max([len(n) for n in names] + [4])
        for name in names:
            print(f"  {name:<{width}}  {_origin(kind, name, reg)}")
        for name, err in sorted(failed[kind].items()):
            print(f"  {name:<{width}}  FAILED to load from group {reg.group}: {err}")
    return 0


# ----------------------------------------------------------------------------- parser
def build_parser():
    p = _Parser(prog="marginkit", description="Margin-based classifiers with certificates.")
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    def common(q, solver_required=True):
        q.add_argument("--kernel", default="linear", help="kernel name (default: linear)")
        q.add_argument("--kernel-param", action="append", metavar="NAME=VALUE",
                       help="kernel parameter, repeatable (e.g. gamma=0.5)")
        q.add_argument("--param", action="append", metavar="NAME=VALUE",
                       help="solver parameter, repeatable (e.g. eps=1e-6)")
        q.add_argument("--max-iter", type=_positive_int, default=None, help="iteration cap")
        q.add_argument("--time-limit", type=_positive_float, default=None, help="seconds per solve")
        q.add_argument("--memory-budget", type=_bytes, default=None, metavar="BYTES",
                       help="memory a solver may take for kernel matrices and working "
                            "vectors, in bytes or with a unit: 8G, 512M, 1e10 (default: 2G); "
                            "what the messages 'raise memory_budget' ask for")
        q.add_argument("--traceback", action="store_true", help="show tracebacks of errors")

    d = sub.add_parser("demo", help="run every solver family on bundled data (seconds)",
                       description="Run every solver family on bundled data sets (a few "
                                   "seconds) and print one table: status, certificate "
                                   "(verified from the data alone), margin bounds, "
                                   "iterations and time per run.")
    d.add_argument("--solver", action="append", metavar="NAME",
                   help="only this solver (repeatable; unknown to the demo: run on its data sets)")
    d.add_argument("--time-limit", type=_positive_float, default=2.0,
                   help="seconds per solve (default: 2)")
    d.add_argument("-v", "--verbose", action="count", default=0, help="progress lines")
    d.add_argument("--traceback", action="store_true", help="re-raise solver failures")
    d.set_defaults(func=cmd_demo)

    f = sub.add_parser(
        "fit", help="solve on a LIBSVM/svmlight file; -m MODEL saves the model",
        description="Solve on a LIBSVM/svmlight file (plain, .gz, .xz; a path or a data set "
                    "name looked up in $MARGINKIT_DATA), report status, certificate, "
                    "iterations, time and accuracies, and save the model with -m. More than "
                    "two classes are solved one-vs-rest (one problem per class).")
    f.add_argument("train", metavar="TRAIN", help="training file or data set name")
    f.add_argument("--test", metavar="TEST", help="test file or data set name")
    f.add_argument("--solver", default=DEFAULT_SOLVER,
                   help=f"solver name (default: {DEFAULT_SOLVER}, the dual coordinate descent "
                        "of LIBLINEAR's linear SVM: fast on large sparse files, and it stops "
                        "with a certificate that is checked from the data; 'marginkit plugins' "
                        "lists the others)")
    f.add_argument("-c", dest="C", type=_positive_float, default=None,
                   help="as LIBLINEAR's -c: C, the box of the dual, for the SVM solvers "
                        "(default: 64/n samples); a given C also sets the perturbation mu to "
                        "1/(2C) unless --param mu=... is given. The solvers standardize the "
                        "features (scale='std'); LIBLINEAR uses them as given: add --param "
                        "scale=None for that (with a large C on sparse 0/1 features, many "
                        "times fewer dcd epochs)")
    f.add_argument("--C", type=_positive_float, default=None, help="the same as -c")
    f.add_argument("-e", dest="tol", type=_positive_float, default=None, metavar="EPS",
                   help="tolerance: SVM solvers run until their bound on the distance of the "
                        "dual to its optimum is at most EPS; iterated_tikhonov's target Newton "
                        "decrement; isnkpvn's eps")
    f.add_argument("-B", dest="bias", type=_number, default=None, metavar="BIAS",
                   help="as LIBLINEAR's -B 1: dcd and fista always fit an intercept "
                        "regularized as a feature of value 1, so -B 1 changes nothing; "
                        "other values, and -B with other solvers, are refused")
    f.add_argument("-s", action=_Refused, metavar="TYPE",
                   help="refused: solvers have names, not numbers (use --solver)")
    f.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    f.add_argument("--gamma", type=_positive_float, default=None, help="kernel gamma")
    f.add_argument("--n-features", type=_positive_int, default=None,
                   help="number of features of TRAIN (default: highest index)")
    f.add_argument("--random-state", type=_nonneg_int, default=0, metavar="SEED",
                   help="seed of the solvers' random choices, e.g. dcd's order of the "
                        "coordinates (default: 0, so the same command gives the same model, "
                        "as LIBLINEAR's train does)")
    f.add_argument("-m", "--output", dest="model", metavar="MODEL",
                   help="save the model (no pickle): two classes, a file that "
                        "marginkit.load_result reads; more classes, an archive of one such "
                        "result per class; 'marginkit predict' and marginkit.load_model "
                        "read both")
    f.add_argument("--no-verify", action="store_true", help="do not re-check the certificate")
    f.add_argument("-v", "--verbose", action="count", default=0,
                   help="progress lines on long runs (-vv: every iteration); takes no value: "
                        "LIBLINEAR's -v N (cross-validation) is refused with the marginkit way")
    common(f)
    f.set_defaults(func=cmd_fit)

    r = sub.add_parser(
        "predict", help="predict a LIBSVM/svmlight file with a saved model, print accuracy",
        description="Predict the samples of TEST with MODEL (written by 'marginkit fit -m'), "
                    "print 'Accuracy = 85.01% (13841/16281)' and, with -o, write one "
                    "predicted label per line. Rows whose label is not a class of the model "
                    "(placeholders of unlabeled data, say) are predicted and count as wrong, "
                    "as in LIBLINEAR, with a note naming those labels. Features of TEST "
                    "beyond the model's are "
                    "ignored by linear and poly models, as LIBLINEAR does, and refused for "
                    "a distance kernel (rbf, laplacian, ...), whose values they change.")
    r.add_argument("model", metavar="MODEL", help="model file written by 'marginkit fit -m'")
    r.add_argument("test", metavar="TEST", help="test file or data set name (its labels score "
                                                "the accuracy)")
    r.add_argument("-o", "--output", metavar="OUT", help="write the predicted labels, one a line")
    r.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    r.add_argument("--allow-unbound", action="store_true",
                   help="read a model whose certificate does not hold the model it predicts "
                        "with (an earlier format, or a plug-in's certificate; refused by "
                        "default: see marginkit.load_result)")
    r.add_argument("--traceback", action="store_true", help="show tracebacks of errors")
    r.set_defaults(func=cmd_predict)

    from . import _bench

    b = sub.add_parser("bench", help="side-by-side comparison with LIBLINEAR, LIBSVM, scikit-learn",
                       description=(_bench.__doc__ or "").strip().splitlines()[0]
                       .replace("``", ""))
    _bench.build_parser(b)
    b.set_defaults(func=lambda args: _bench.main(args.raw_argv))

    g = sub.add_parser("plugins", help="list registered plug-ins and failed entry points")
    g.set_defaults(func=cmd_plugins)
    return p


def _version():
    from . import __version__

    return f"marginkit {__version__}"


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return v


def _nonneg_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return v


def _number(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _bytes(text):
    """A number of bytes: 1e10, 4G, 512M, 8GiB (units are powers of 1024)."""
    m = re.fullmatch(r"\s*(.*?)\s*([kmgt]?)(i?b)?\s*", text, re.I)
    try:
        v = float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of bytes (e.g. 8G, 512M, 1e10)") from None
    if not np.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of bytes")
    return v


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not np.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number")
    return v


def main(argv=None):
    """Run the command line; return the exit code."""
    parser = build_parser()
    prog = parser.prog
    try:
        raw = argv = _joined_values(sys.argv[1:] if argv is None else argv)
        misread = _misread_option(raw[1:]) if raw and raw[0] == "fit" else None
        if misread is not None:
            raise UsageError(f"argument {misread}: {MISREAD_OPTIONS[misread][1]}", f"{prog} fit")
        foreign = _foreign_option(raw[1:]) if raw and raw[0] == "fit" else None
        if foreign is not None:
            raise UsageError(f"argument {foreign}: {FOREIGN_OPTIONS[foreign]}", f"{prog} fit")
        try:
            args = parser.parse_args(argv)
        except UsageError as exc:
            extra = exc.args[0].split("unrecognized arguments:", 1)[-1].split("(see")[0].split()
            if raw and raw[0] == "fit" and "unrecognized arguments" in exc.args[0] and \
                    extra and not any(tok.startswith("-") for tok in extra):
                # LIBLINEAR's train TRAIN MODEL: the model file is -m here
                msg = exc.args[0].replace(f"(see '{prog} --help')", f"(see '{prog} fit --help')")
                raise UsageError(f"{msg}; the model file is given with -m MODEL (LIBLINEAR's "
                                 "train takes it as a second argument)", f"{prog} fit") from None
            raise
        if args.command is None:
            raise UsageError("choose a command: demo, fit, predict, bench, plugins "
                             "(see 'marginkit --help')")
        prog = f"marginkit {args.command}"
        if args.command == "bench":  # the bench module parses its own arguments again
            args.raw_argv = raw[raw.index("bench") + 1:]
        return int(args.func(args) or 0)
    except UsageError as exc:
        prog = exc.args[1] if len(exc.args) > 1 else prog
        print(f"{prog}: error: {exc.args[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `marginkit plugins | head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
