"""The estimators' defaults against the scikit-learn estimator a user would pick instead.

    MARGINKIT_DATA=<data folder> python benchmarks/estimator_defaults.py [--only NAME ...]

One process, side by side: each case fits ``marginkit.sklearn``'s estimator with its
default hyper-parameters (unless the case names one, such as ``kernel="linear"``) and the
scikit-learn estimator with its own defaults, on the same training rows, and scores both
on held-out rows. Prints one table row per case: estimator, data, our time, theirs, the
ratio, our status (the one-vs-rest statuses counted) and test accuracy, theirs.

Cases (``--only`` selects by name):

* ``perceptron_a9a``: ``PerceptronClassifier()`` vs ``Perceptron()`` on a9a (a9a.t held out);
  ``perceptron_isnkpvn_a9a``: the same with ``solver="isnkpvn"``.
* ``tikhonov_digits``: ``IteratedTikhonovClassifier()`` (rbf, Nystroem ``n_components="auto"``)
  vs ``SVC()`` on the digits (10 classes, ``sklearn.datasets.load_digits``; 1,437 rows, 360
  held out); ``tikhonov_exact_digits``: the same with the exact kernel (``n_components=None``).
* ``tikhonov_linear_mnist``: ``IteratedTikhonovClassifier(kernel="linear")`` vs
  ``LogisticRegression()`` on the first 7,000 MNIST training rows (3,000 test rows).
* ``svm_mnist``: ``SVMClassifier()`` vs ``LinearSVC()`` on the same MNIST rows;
  ``svm_auto_mnist``: the same with ``solver="auto"`` (``dcd`` there).
* ``tikhonov_rbf_a9a``: ``IteratedTikhonovClassifier()`` (rbf, Nystroem ``"auto"``: 722
  centres) on a9a, against ``SVC()``'s fit; give ``--with-svc-a9a`` to time ``SVC()`` there
  (about a minute), else "theirs" is not run. With ``n_components=None`` the exact Gram
  matrix does not fit the default memory budget and the fit is refused at once.
"""
import argparse
import collections
import time
import warnings

import numpy as np

from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Perceptron
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC, LinearSVC

from marginkit.datasets import load_libsvm, load_mnist_idx
from marginkit.sklearn import IteratedTikhonovClassifier, PerceptronClassifier, SVMClassifier


def _a9a():
    X, y = load_libsvm("a9a")
    Xt, yt = load_libsvm("a9a.t", n_features=X.shape[1])
    return X, y, Xt, yt


def _digits():
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.2, random_state=0,
                                          stratify=y)
    return Xtr, ytr, Xte, yte


def _mnist(n_train=7000, n_test=3000):
    X, y = load_mnist_idx("mnist/train-images-idx3-ubyte.xz", "mnist/train-labels-idx1-ubyte.xz")
    Xt, yt = load_mnist_idx("mnist/t10k-images-idx3-ubyte.gz", "mnist/t10k-labels-idx1-ubyte.gz")
    return X[:n_train], y[:n_train], Xt[:n_test], yt[:n_test]


CASES = {
    "perceptron_a9a": (lambda: PerceptronClassifier(), lambda: Perceptron(), _a9a),
    "perceptron_isnkpvn_a9a": (lambda: PerceptronClassifier(solver="isnkpvn"),
                               lambda: Perceptron(), _a9a),
    "tikhonov_digits": (lambda: IteratedTikhonovClassifier(), lambda: SVC(), _digits),
    "tikhonov_exact_digits": (lambda: IteratedTikhonovClassifier(n_components=None),
                              lambda: SVC(), _digits),
    "tikhonov_linear_mnist": (lambda: IteratedTikhonovClassifier(kernel="linear"),
                              lambda: LogisticRegression(), _mnist),
    "svm_mnist": (lambda: SVMClassifier(), lambda: LinearSVC(), _mnist),
    "svm_auto_mnist": (lambda: SVMClassifier(solver="auto"), lambda: LinearSVC(), _mnist),
    "tikhonov_rbf_a9a": (lambda: IteratedTikhonovClassifier(), lambda: SVC(), _a9a),
}


def _ours(est, Xtr, ytr, Xte, yte):
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        try:
            est.fit(Xtr, ytr)
        except (ValueError, MemoryError) as exc:
            return time.perf_counter() - t, f"refused: {str(exc)[:70]}...", None
    elapsed = time.perf_counter() - t
    status = est.status_ if isinstance(est.status_, list) else [est.status_]
    counts = ", ".join(f"{k} x{v}" if v > 1 else k
                       for k, v in collections.Counter(status).items())
    if any(issubclass(w.category, ConvergenceWarning) for w in caught):
        counts += " (ConvergenceWarning)"
    return elapsed, counts, est.score(Xte, yte)


def _theirs(est, Xtr, ytr, Xte, yte):
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(Xtr, ytr)
    return time.perf_counter() - t, est.score(Xte, yte)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(CASES), help="cases to run")
    ap.add_argument("--with-svc-a9a", action="store_true",
                    help="also time SVC() on a9a in the tikhonov_rbf_a9a case")
    args = ap.parse_args(argv)
    names = args.only or list(CASES)
    print("| estimator | data | ours (s) | theirs (s) | ratio | our status | our acc | "
          "their acc |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        make_ours, make_theirs, load = CASES[name]
        Xtr, ytr, Xte, yte = load()
        ours, theirs = make_ours(), make_theirs()
        t_ours, status, acc = _ours(ours, Xtr, ytr, Xte, yte)
        if name == "tikhonov_rbf_a9a" and not args.with_svc_a9a:
            t_theirs, acc_theirs = None, None
        else:
            t_theirs, acc_theirs = _theirs(theirs, Xtr, ytr, Xte, yte)
        ratio = f"{t_ours / t_theirs:.2f}" if t_theirs else "-"
        fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        print(f"| {type(ours).__name__}({_args(ours)}) vs {type(theirs).__name__}() | "
              f"{name.split('_')[-1]} {Xtr.shape[0]}x{Xtr.shape[1]} | {t_ours:.2f} | "
              f"{fmt(t_theirs, '.2f')} | {ratio} | {status} | {fmt(acc, '.4f')} | "
              f"{fmt(acc_theirs, '.4f')} |", flush=True)


def _args(est):
    changed = {k: v for k, v in est.get_params(deep=False).items()
               if v != type(est)().get_params(deep=False)[k]}
    return ", ".join(f"{k}={v!r}" for k, v in changed.items())


if __name__ == "__main__":
    main()
