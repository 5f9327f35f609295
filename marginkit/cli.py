"""The ``marginkit`` command line (also ``python -m marginkit``).

Commands
--------
``marginkit demo``
    Every registered solver family on bundled data (LIBSVM's ``heart_scale`` and a
    synthetic XOR), one table: status, certificate (verified from the data alone),
    margin bounds, iterations, time, training accuracy. Runs in seconds.
``marginkit fit TRAIN [--test TEST] --solver NAME [--kernel K] [--C C] [--output model.npz]``
    Solve on a LIBSVM/svmlight file (plain, ``.gz``, ``.xz``; a path or a name in
    ``$MARGINKIT_DATA``) and report status, certificate, iterations, time and accuracies.
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
import sys
import time

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
        out[key] = _literal(value)
    return out


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
        opt = "--solver" if "unknown solver" in str(exc) else "--param/--C"
        raise UsageError(f"argument {opt}: {exc}") from None
    try:
        resolve_kernel(kernel, kernel_params or None)
    except (TypeError, ValueError) as exc:
        opt = "--kernel" if "unknown kernel" in str(exc) else "--kernel-param/--gamma"
        raise UsageError(f"argument {opt}: {exc}") from None
    try:
        cfg = Config(solver=solver, kernel=kernel, kernel_params=kernel_params or None,
                     solver_params=solver_params, **fields)
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
def _demo_data(name):
    from . import datasets

    if name == "heart_scale":
        return datasets.load_heart_scale()
    make_xor = getattr(datasets, "make_xor", None)
    if make_xor is None:
        return None
    X, y = make_xor(n_samples=200, random_state=0)[:2]
    return X, y


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
            cfg = _config(solver, kernel, None, dict(params), time_limit=args.time_limit,
                          random_state=0, verbose=args.verbose)
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
    print(f"total {time.perf_counter() - t_start:.2f} s; certificates are checked by "
          "certificate.verify(X, y), from the data alone")
    return 1 if failed else 0


# ----------------------------------------------------------------------------- fit
def cmd_fit(args):
    solver_params = _key_values(args.param, "--param")
    kernel_params = _key_values(args.kernel_param, "--kernel-param")
    if args.C is not None:
        solver_params["C"] = args.C
    if args.gamma is not None:
        kernel_params["gamma"] = args.gamma
    cfg = _config(args.solver, args.kernel, kernel_params, solver_params,
                  max_iter=args.max_iter, time_limit=args.time_limit,
                  random_state=args.random_state, verbose=args.verbose)
    X, y = _load(args.train, "TRAIN", n_features=args.n_features)
    vector = 8.0 * X.shape[1]  # bytes of one float64 vector over the features
    if vector > cfg.memory_budget:
        # a two-line file can name feature 3e9: each model vector would take 24 GB
        raise UsageError(
            f"argument TRAIN: {args.train} has {X.shape[1]} features (its highest index); "
            f"one float64 vector over them takes {vector / 2**30:.3g} GiB, more than the "
            f"memory budget of {cfg.memory_budget / 2**30:.3g} GiB")
    X_test = y_test = None
    if args.test is not None:
        X_test, y_test = _load(args.test, "--test")
        if X_test.shape[1] != X.shape[1]:
            if X_test.shape[1] > X.shape[1]:
                print(f"note: {args.test} has {X_test.shape[1]} features, the training file "
                      f"{X.shape[1]}; the extra columns are ignored", file=sys.stderr)
            X_test = _match_features(X_test, X.shape[1])
    from ._api import compose
    from ._validation import check_y

    task = getattr(compose(cfg)[0], "task", "classification")
    try:  # the labels are the user's: a problem with them is a usage error
        check_y(y, X.shape[0], task=task, name=f"the labels of {args.train}")
    except (ValueError, TypeError) as exc:
        raise UsageError(f"argument TRAIN: {exc}") from None
    try:
        row = run_job(X, y, cfg, X_test, y_test, verify=not args.no_verify)
    except Exception as exc:  # noqa: BLE001 - reported in one line; --traceback shows it
        if args.traceback:
            raise
        print(f"marginkit fit: solver {args.solver!r} failed on {args.train}: "
              f"{type(exc).__name__}: {exc} (run with --traceback for details)", file=sys.stderr)
        return 1
    res = row["result"]
    lines = [
        ("data", f"{args.train}: {X.shape[0]} samples x {X.shape[1]} features, "
                 f"labels {list(np.asarray(res.classes_).tolist()) if res.classes_ is not None else 'real'}"),
        ("solver", f"{res.solver} (kernel {row['kernel']})"),
        ("status", res.status),
    ]
    if res.certificate is None:
        lines.append(("certificate", "none"))
    else:
        ver = {True: "verified from the data", False: "FAILED verification",
               None: "not verified (--no-verify or n x n Gram too large)"}[row["verified"]]
        value = _fmt(res.certificate.value, 6)
        lines.append(("certificate", f"{res.certificate.kind}, value {value}, {ver}"))
    if res.margin_bounds is not None:
        lines.append(("margin", row["margin"]))
    if res.certified_mask is not None:
        lines.append(("certified", f"{int(np.sum(res.certified_mask))} of {X.shape[0]} training points"))
    lines += [("iterations", str(res.n_iter)), ("time", f"{res.time_s:.4g} s"),
              ("train acc", f"{row['train_acc']:.4f}")]
    if X_test is not None:
        lines.append(("test acc", f"{row['test_acc']:.4f} ({X_test.shape[0]} samples)"))
    if args.output:
        try:
            res.save(args.output)
        except (TypeError, OSError) as exc:
            raise UsageError(f"argument --output: {exc}") from None
        lines.append(("saved", f"{args.output} (load with marginkit.load_result)"))
    for key, val in lines:
        print(f"{key:<12}{val}")
    return 0


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
        q.add_argument("--traceback", action="store_true", help="show tracebacks of errors")

    d = sub.add_parser("demo", help="run every solver family on bundled data (seconds)")
    d.add_argument("--solver", action="append", metavar="NAME",
                   help="only this solver (repeatable; unknown to the demo: run on its data sets)")
    d.add_argument("--time-limit", type=_positive_float, default=2.0,
                   help="seconds per solve (default: 2)")
    d.add_argument("-v", "--verbose", action="count", default=0, help="progress lines")
    d.add_argument("--traceback", action="store_true", help="re-raise solver failures")
    d.set_defaults(func=cmd_demo)

    f = sub.add_parser("fit", help="solve on a LIBSVM/svmlight file")
    f.add_argument("train", metavar="TRAIN", help="training file or data set name")
    f.add_argument("--test", metavar="TEST", help="test file or data set name")
    f.add_argument("--solver", required=True, help="solver name (see 'marginkit plugins')")
    f.add_argument("--C", type=_positive_float, default=None, help="SVM box constraint C")
    f.add_argument("--gamma", type=_positive_float, default=None, help="kernel gamma")
    f.add_argument("--n-features", type=_positive_int, default=None,
                   help="number of features of TRAIN (default: highest index)")
    f.add_argument("--random-state", type=_nonneg_int, default=None, help="seed")
    f.add_argument("--output", metavar="MODEL.npz", help="save the Result (no pickle)")
    f.add_argument("--no-verify", action="store_true", help="do not re-check the certificate")
    f.add_argument("-v", "--verbose", action="count", default=0,
                   help="progress lines on long runs (-vv: every iteration)")
    common(f)
    f.set_defaults(func=cmd_fit)

    from . import _bench

    b = sub.add_parser("bench", help="side-by-side comparison with LIBLINEAR, LIBSVM, scikit-learn",
                       description=(_bench.__doc__ or "").strip().splitlines()[0])
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
        args = parser.parse_args(argv)
        if args.command is None:
            raise UsageError("choose a command: demo, fit, bench, plugins (see 'marginkit --help')")
        prog = f"marginkit {args.command}"
        if args.command == "bench":  # the bench module parses its own arguments again
            raw = list(sys.argv[1:] if argv is None else argv)
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
