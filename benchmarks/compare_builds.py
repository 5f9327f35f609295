"""Side-by-side solve times of two builds of marginkit on the shared benchmark data.

    MARGINKIT_DATA=<data folder> python benchmarks/compare_builds.py OLD_TREE NEW_TREE \
        [--reps 2] [--only fista,dcd] [--threads 1]

OLD_TREE and NEW_TREE are source trees with their extensions built in place (``python
setup.py build_ext --inplace``; a ``git worktree`` of the commit to compare against). Each
build runs the same cases in its own process (``--worker``), the two alternating ``--reps``
times so that drift of a shared machine hits both; each case is timed in-process (the
minimum of 3 solves; data read once, LIBSVM files with scikit-learn's svmlight reader and
the MNIST digit pairs with ``mk.datasets.load_mnist_idx``, so loaders do not count). Printed: per case the median times, the median ratio new/old with its range,
and both builds' statuses and iteration counts.
"""
import argparse
import json
import lzma
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def _load(name, n_features=None):
    from sklearn.datasets import load_svmlight_file

    with lzma.open(os.path.join(os.environ["MARGINKIT_DATA"], name)) as f:
        X, y = load_svmlight_file(f, n_features=n_features)
    return X.tocsr(), y


def _mnist_pairs(pairs=((3, 5), (1, 9), (2, 7))):
    """The training images of each digit pair of arXiv:2512.03947, section 5.2 (pixels / 255,
    dense; the first digit is the +1 class)."""
    from marginkit.datasets import load_mnist_idx

    X, lab = load_mnist_idx("mnist/train-images-idx3-ubyte.xz",
                            "mnist/train-labels-idx1-ubyte.xz")
    out = {}
    for a, b in pairs:
        rows = np.flatnonzero((lab == a) | (lab == b))
        out[(a, b)] = (np.ascontiguousarray(X[rows]), np.where(lab[rows] == a, 1.0, -1.0))
    return out


def _cases():
    a9a = _load("a9a.xz", 123)
    mushrooms = _load("mushrooms.xz")
    madelon = _load("madelon.xz")
    Xm = madelon[0].toarray()
    Xm = (Xm - Xm.mean(0)) / (Xm.std(0) + 1e-12)
    heart = _load("heart_scale.xz")
    return [
        ("a9a fista", a9a, dict(solver="fista")),
        ("a9a dcd", a9a, dict(solver="dcd", random_state=0)),
        ("a9a snkp (300 it.)", a9a, dict(solver="snkp", max_iter=300)),
        ("a9a isnkpvn", a9a, dict(solver="isnkpvn", max_iter=300)),
        ("a9a iterated_tikhonov t=3", a9a, dict(solver="iterated_tikhonov",
                                                solver_params={"t": 3})),
        ("a9a fista_svm", a9a, dict(solver="fista_svm")),
        ("a9a pegasos (20 ep.)", a9a, dict(solver="pegasos", epochs=20, random_state=0)),
        ("mushrooms fista", mushrooms, dict(solver="fista")),
        ("mushrooms fista_svm", mushrooms, dict(solver="fista_svm")),
        ("mushrooms snkp", mushrooms, dict(solver="snkp")),
        ("mushrooms perceptron", mushrooms, dict(solver="perceptron")),
        ("madelon fista", (Xm, madelon[1]), dict(solver="fista")),
        ("madelon dcd", (Xm, madelon[1]), dict(solver="dcd", random_state=0)),
        ("heart_scale rbf snkpvn", heart, dict(solver="snkpvn", kernel="rbf", max_iter=2000)),
        ("mushrooms dcd", mushrooms, dict(solver="dcd", random_state=0)),
        ("mushrooms pegasos (20 ep.)", mushrooms, dict(solver="pegasos", epochs=20,
                                                       random_state=0)),
        ("madelon pegasos (20 ep.)", (Xm, madelon[1]), dict(solver="pegasos", epochs=20,
                                                            random_state=0)),
    ] + [(f"mnist {a}/{b} {name}", data, kw)
         for (a, b), data in _mnist_pairs().items()
         for name, kw in (("fista", dict(solver="fista")),
                          ("dcd", dict(solver="dcd", random_state=0)),
                          ("pegasos (20 ep.)", dict(solver="pegasos", epochs=20,
                                                    random_state=0)))]


def worker(only=()):
    import marginkit as mk

    out = {}
    for name, (X, y), kw in _cases():
        if only and not any(o in name for o in only):
            continue
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            res = mk.solve(X, y, **kw)
            times.append(time.perf_counter() - t0)
        out[name] = [min(times), res.status, int(res.n_iter)]
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--only", default="",
                    help="comma-separated substrings: run only the cases whose name has one")
    ap.add_argument("--threads", type=int, default=None,
                    help="OMP_NUM_THREADS / OPENBLAS_NUM_THREADS of both builds")
    args = ap.parse_args()
    if "MARGINKIT_DATA" not in os.environ:
        raise SystemExit("set MARGINKIT_DATA to the benchmark data folder")
    trees = {"old": os.path.abspath(args.old), "new": os.path.abspath(args.new)}
    runs = {k: [] for k in trees}
    for _ in range(args.reps):
        for key, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=tree)
            if args.threads is not None:
                env.update(OMP_NUM_THREADS=str(args.threads),
                           OPENBLAS_NUM_THREADS=str(args.threads))
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker",
                                   args.only],
                                  cwd=tree, env=env, capture_output=True, text=True)
            lines = [s for s in proc.stdout.splitlines() if s.startswith("{")]
            if proc.returncode or not lines:
                raise SystemExit(f"{key} build failed:\n{proc.stderr[-2000:]}")
            runs[key].append(json.loads(lines[-1]))
    print(f"{'case':28s} {'old (s)':>9s} {'new (s)':>9s}  new/old median [min, max]  "
          "status old/new  iterations old/new")
    for name in runs["old"][0]:
        old = [r[name][0] for r in runs["old"]]
        new = [r[name][0] for r in runs["new"]]
        ratios = [b / a for a, b in zip(old, new)]
        o, n = runs["old"][0][name], runs["new"][0][name]
        print(f"{name:28s} {statistics.median(old):9.3f} {statistics.median(new):9.3f}  "
              f"{statistics.median(ratios):5.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"
              f"{'':10s}{o[1]}/{n[1]}  {o[2]}/{n[2]}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(tuple(o for o in sys.argv[2].split(",") if o))
    else:
        main()
