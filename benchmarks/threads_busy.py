"""fista / fista_svm on the default OpenMP threads vs one thread, quiet and beside busy
processes, for two builds side by side.

    MARGINKIT_DATA=<data folder> python benchmarks/threads_busy.py OLD_TREE NEW_TREE \
        [--reps 3] [--busy 2] [--only a9a,higgs1e6] [--solvers fista,fista_svm] \
        [--conditions quiet,busy] [--wait-policy passive]

OLD_TREE and NEW_TREE are source trees with their extensions built in place. For each
condition (``quiet``: nothing started; ``busy``: ``--busy`` processes spinning in a
Python loop, started by this script and stopped by it when the condition ends) and each
case, each build runs in its own process (``--worker``), the two builds alternating;
inside a worker every repetition solves the case once on the default threads and once
under ``threadpoolctl.threadpool_limits(1)``, interleaved (``--reps`` repetitions, more
on small cases until each mode has run ``--min-time`` seconds). Printed per case and build:
the median wall times (default, one thread), the median ratio default / one thread with
its range over repetitions and the ratio of the summed times, the iterations, whether the
two solves returned the same coefficients bit for bit (else their largest relative
difference), the thread choices the default run recorded (``Result.extra["threads"]`` and
``extra["blas_threads"]``, when the build records them) and the 1-minute load average
before and after the case (``os.getloadavg``).

Cases: every shared data set with at least 5,000 rows (a9a, a9a.t, mushrooms, the MNIST
test and training images as "digit 0 or not"), and a dense 10^6 x 28 set of the HIGGS
shape (``make_clusters(like="higgs", n_samples=10**6)``).

BLAS cases (the BLAS threads the run loop chooses, ``Result.extra["blas_threads"]``; each
case runs its own solver configurations, ``--solvers`` is ignored): ``digits`` (the first
1,437 of scikit-learn's digits, "3 or not") with iterated Tikhonov on an rbf Nystroem map
of 100 and of 400 components and on the exact rbf kernel; ``mnist7000`` (the first 7,000
MNIST training images, "0 or not") with linear iterated Tikhonov; ``a9a3000`` (the first
3,000 rows of a9a) with kernel fista and dcd on the exact rbf kernel. Their results are
compared to the largest relative difference of the coefficients (BLAS rounding), not
bit for bit.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CASES = ("a9a", "a9a.t", "mushrooms", "mnist.t10k", "mnist.train", "higgs1e6")

_TIK = dict(solver="iterated_tikhonov", random_state=0)
#: case -> (label, solve keywords) of its BLAS-heavy runs
BLAS_CASES = {
    "digits": (("tikhonov_nys100", dict(_TIK, kernel="rbf", n_components=100)),
               ("tikhonov_nys400", dict(_TIK, kernel="rbf", n_components=400)),
               ("tikhonov_rbf", dict(_TIK, kernel="rbf"))),
    "mnist7000": (("tikhonov_linear", dict(_TIK)),),
    "a9a3000": (("fista_rbf", dict(solver="fista", kernel="rbf", random_state=0)),
                ("dcd_rbf", dict(solver="dcd", kernel="rbf", random_state=0))),
}


def _data(name):
    import numpy as np

    import marginkit as mk

    if name == "a9a":
        return mk.datasets.load_libsvm("a9a.xz", n_features=123)
    if name == "a9a.t":
        return mk.datasets.load_libsvm("a9a.t.xz", n_features=123)
    if name == "mushrooms":
        return mk.datasets.load_libsvm("mushrooms.xz")
    if name in ("mnist.t10k", "mnist.train"):
        part = "t10k" if name == "mnist.t10k" else "train"
        ext = "gz" if part == "t10k" else "xz"
        X, y = mk.datasets.load_mnist_idx(f"mnist/{part}-images-idx3-ubyte.{ext}",
                                          f"mnist/{part}-labels-idx1-ubyte.{ext}")
        return X, np.where(y == 0, 1.0, -1.0)
    if name == "higgs1e6":
        return mk.datasets.make_clusters(like="higgs", n_samples=10**6, random_state=0)
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return X[:1437] / 16.0, np.where(y[:1437] == 3, 1.0, -1.0)
    if name == "mnist7000":
        X, y = _data("mnist.train")
        return X[:7000], y[:7000]
    if name == "a9a3000":
        X, y = _data("a9a")
        return X[:3000], y[:3000]
    raise SystemExit(f"unknown case {name!r}; use one of "
                     f"{', '.join(CASES + tuple(BLAS_CASES))}")


def _difference(a, b):
    """The largest difference of the two results' coefficients relative to their size
    (0.0: bit for bit the same)."""
    import numpy as np

    worst = 0.0
    for name in ("coef_", "dual_coef_", "intercept_"):
        u, v = getattr(a, name, None), getattr(b, name, None)
        if u is None or v is None:
            continue
        u, v = np.asarray(u, dtype=float), np.asarray(v, dtype=float)
        scale = max(float(np.max(np.abs(u), initial=0.0)), 1e-300)
        worst = max(worst, float(np.max(np.abs(u - v), initial=0.0)) / scale)
    return worst


def worker(case, solvers, reps, min_time):
    from threadpoolctl import threadpool_limits

    import marginkit as mk

    X, y = _data(case)
    out = {}
    runs = BLAS_CASES.get(case) or tuple((s, dict(solver=s)) for s in solvers)
    for solver, kwargs in runs:
        times = {"default": [], "one": []}
        res = {}
        rep = 0
        if case in BLAS_CASES:
            # one solve untimed, on one thread: the first solve of a process pays for
            # first-call work (imports, caches), a large part of a sub-second solve
            with threadpool_limits(1):
                mk.solve(X, y, **kwargs)
        # at least ``reps`` repetitions, more on small cases: until each mode has run for
        # ``min_time`` seconds (at most 25 repetitions)
        while rep < reps or (rep < 25 and sum(times["one"]) < min_time):
            rep += 1
            for mode in ("default", "one"):
                limit = threadpool_limits(1) if mode == "one" else None
                try:
                    t = time.perf_counter()
                    res[mode] = mk.solve(X, y, **kwargs)
                    times[mode].append(time.perf_counter() - t)
                finally:
                    if limit is not None:
                        limit.restore_original_limits()
        extra = res["default"].extra
        out[solver] = dict(default=times["default"], one=times["one"],
                           n_iter=int(res["default"].n_iter),
                           difference=_difference(res["default"], res["one"]),
                           status=res["default"].status,
                           threads=extra.get("threads"), choice=extra.get("thread_choice"),
                           blas=extra.get("blas_threads"), blas_choice=extra.get("blas_choice"))
    print(json.dumps(out))


def _run(tree, case, solvers, reps, min_time, wait_policy=None):
    env = dict(os.environ, PYTHONPATH=tree)
    if wait_policy:
        env["OMP_WAIT_POLICY"] = wait_policy
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", case,
           "--solvers", ",".join(solvers), "--reps", str(reps), "--min-time", str(min_time)]
    proc = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"worker failed ({tree}, {case}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _busy(count):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def _stop(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", nargs="?")
    ap.add_argument("new", nargs="?")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=4.0,
                    help="repeat small cases until each mode ran this many seconds")
    ap.add_argument("--busy", type=int, default=2, help="busy processes of the busy condition")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--solvers", default="fista,fista_svm")
    ap.add_argument("--conditions", default="quiet,busy")
    ap.add_argument("--wait-policy", default=None,
                    help="OMP_WAIT_POLICY of both builds' processes (libgomp reads it at "
                         "start-up only): what passive waiting would give")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    solvers = args.solvers.split(",")
    if args.worker:
        return worker(args.worker, solvers, args.reps, args.min_time)
    if not (args.old and args.new):
        ap.error("give OLD_TREE and NEW_TREE")
    cases = [c for c in args.only.split(",") if c] or list(CASES + tuple(BLAS_CASES))
    builds = {"old": os.path.abspath(args.old), "new": os.path.abspath(args.new)}
    print(f"old = {builds['old']}, new = {builds['new']}, reps = {args.reps}, "
          f"{os.cpu_count()} cores, OMP_WAIT_POLICY={args.wait_policy or 'unset'}", flush=True)
    for cond in args.conditions.split(","):
        procs = _busy(args.busy) if cond == "busy" else []
        try:
            time.sleep(1.0 if procs else 0.0)
            for i, case in enumerate(cases):
                load0 = os.getloadavg()[0]
                order = ("old", "new") if i % 2 == 0 else ("new", "old")
                got = {b: _run(builds[b], case, solvers, args.reps, args.min_time,
                               args.wait_policy)
                       for b in order}
                load1 = os.getloadavg()[0]
                for solver in got["old"]:
                    for b in ("old", "new"):
                        q = got[b][solver]
                        ratios = [d / o for d, o in zip(q["default"], q["one"])]
                        choice = "" if q["threads"] is None else \
                            f", chose {q['threads']} thread(s) {q['choice']}"
                        if q["blas"] is not None:
                            choice += f", BLAS {q['blas']} thread(s) {q['blas_choice']}"
                        same = "bitwise same" if q["difference"] == 0.0 else \
                            f"largest relative difference {q['difference']:.1e}"
                        print(f"[{cond}] {case} {solver} {b}: default "
                              f"{statistics.median(q['default']):.3f} s, one thread "
                              f"{statistics.median(q['one']):.3f} s, default/one "
                              f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, "
                              f"{max(ratios):.2f}] x{len(ratios)} (of the sums "
                              f"{sum(q['default']) / sum(q['one']):.2f}); {q['n_iter']} it. "
                              f"{q['status']}, "
                              f"{same}{choice}; load "
                              f"{load0:.1f} -> {load1:.1f}", flush=True)
        finally:
            _stop(procs)


if __name__ == "__main__":
    main()
