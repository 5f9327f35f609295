"""Deciding linear separability: ``isnkpvn`` against an LP solver.

The question "is there (w, b) with y_i (w . x_i + b) > 0 for all i?" is the LP
feasibility problem

    find v in R^(d+1)  with  -y_i [x_i, 1] . v <= -1  (i = 1..n),

solved with ``scipy.optimize.linprog(c=0, A_ub, b_ub, bounds=(None, None),
method="highs")`` (status 0: a separator; status 2: infeasible). ``isnkpvn``
(Ramdas & Peña 2014, sec. 6) works on the same rows ``[x_i, 1]`` with the linear kernel and
decides either way with a certificate: a separator (G alpha > 0) or a point p of the
simplex with ||p||_G <= eps (Gordan's theorem).

Instances (n >= 10^4 in the ``full`` profile): ``separable`` (normalized margin >=
0.01), ``noisy`` (5% flipped labels) and ``overlap`` (a single flipped label: barely
infeasible, the hardest case for the certificate).
"""
import time

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

import marginkit as mk

from . import common

KINDS = ["separable", "noisy", "overlap"]
SIZES = [10_000, 100_000] if common.FULL else [2_000]
D = 20

_cache = {}


def instance(kind, n, d=D):
    """Dense rows ``[x_i, 1]`` and labels of one instance (seeded, cached)."""
    key = (kind, n, d)
    if key not in _cache:
        if kind == "separable":
            X, y = common.separable(n, d, margin=0.01, seed=3)
        elif kind == "noisy":
            X, y = common.noisy(n, d, flip=0.05, seed=4)
        elif kind == "overlap":
            X, y = common.separable(n, d, margin=0.0, seed=5)
            y = y.copy()
            # flip the positive point nearest the positive class mean: it lies deep inside
            # the convex hull of the other positives, so one flipped label breaks separability
            pos = np.flatnonzero(y > 0)
            centre = X[pos].mean(axis=0)
            y[pos[int(np.argmin(((X[pos] - centre) ** 2).sum(axis=1)))]] = -1.0
        else:
            raise ValueError(kind)
        _cache[key] = (np.ascontiguousarray(np.hstack([X, np.ones((n, 1))])), y)
    return _cache[key]


def linprog_feasibility(Xa, y):
    """(status, v) of the LP feasibility formulation; status "separable"/"infeasible"."""
    A = sp.csr_matrix(-(y[:, None] * Xa))
    res = linprog(np.zeros(Xa.shape[1]), A_ub=A, b_ub=-np.ones(Xa.shape[0]),
                  bounds=(None, None), method="highs")
    if res.status == 0:
        return "separable", res.x
    if res.status == 2:
        return "infeasible", None
    return f"linprog status {res.status}: {res.message}", None


def isnkpvn_decide(Xa, y, eps=1e-6):
    return mk.solve(Xa, y, solver="isnkpvn", eps=eps, max_iter=10**7,
                    time_limit=common.size(30.0, 600.0))


class FeasibilityHighs:
    """Time for HiGHS to decide the LP feasibility formulation."""

    version = "feasibility-1"
    params = (KINDS, SIZES)
    param_names = ["kind", "n"]
    timeout = 1200
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self, kind, n):
        self.Xa, self.y = instance(kind, n)

    def time_linprog_highs(self, kind, n):
        linprog_feasibility(self.Xa, self.y)


class FeasibilityIsnkpvn:
    """Time for ``isnkpvn`` to decide (separator or infeasibility certificate), and the
    speed-up over HiGHS measured in the same process on the same rows."""

    version = "feasibility-1"
    params = (KINDS, SIZES)
    param_names = ["kind", "n"]
    timeout = 1200
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self, kind, n):
        common.require_solver("isnkpvn")
        self.Xa, self.y = instance(kind, n)

    def time_isnkpvn(self, kind, n):
        isnkpvn_decide(self.Xa, self.y)

    def track_isnkpvn_decided(self, kind, n):
        """1 when isnkpvn decided (certificate verified from the data) and agrees with HiGHS."""
        res = isnkpvn_decide(self.Xa, self.y)
        lp_status, _ = linprog_feasibility(self.Xa, self.y)
        ok = res.status == lp_status and res.certificate is not None \
            and res.certificate.verify(self.Xa, self.y)
        return float(ok)

    track_isnkpvn_decided.unit = "bool"

    def track_speedup_vs_highs(self, kind, n):
        """(HiGHS time) / (isnkpvn time), best of 3 each; > 1 means isnkpvn is faster."""
        t_lp = _best_of(3, lambda: linprog_feasibility(self.Xa, self.y))
        t_mk = _best_of(3, lambda: isnkpvn_decide(self.Xa, self.y))
        return t_lp / t_mk

    track_speedup_vs_highs.unit = "ratio"


def _best_of(k, fn):
    best = np.inf
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _report(sizes, kinds, repeat=3):
    """Markdown table: wall and CPU seconds (best of ``repeat``) of HiGHS and isnkpvn."""

    def best(fn):
        walls, cpus, out = [], [], None
        for _ in range(repeat):
            c, t = time.process_time(), time.perf_counter()
            out = fn()
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        return min(walls), min(cpus), out

    print("| n | instance | HiGHS | HiGHS wall / CPU (s) | isnkpvn | iterations | "
          "isnkpvn wall / CPU (s) | certificate verified | speed-up wall / CPU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for kind in kinds:
            Xa, y = instance(kind, n)
            wl, cl, (st, _) = best(lambda: linprog_feasibility(Xa, y))
            wm, cm, res = best(lambda: isnkpvn_decide(Xa, y))
            ok = res.certificate is not None and bool(res.certificate.verify(Xa, y))
            print(f"| {n} | {kind} | {st} | {wl:.3g} / {cl:.3g} | {res.status} | {res.n_iter} | "
                  f"{wm:.3g} / {cm:.3g} | {ok} | {wl / wm:.2f} / {cl / cm:.2f} |", flush=True)


if __name__ == "__main__":
    # cd asv_bench && MARGINKIT_BENCH_PROFILE=full python -m benchmarks.feasibility [n,n] [kinds]
    import sys

    _sizes = [int(a) for a in sys.argv[1].split(",")] if len(sys.argv) > 1 else SIZES
    _kinds = sys.argv[2].split(",") if len(sys.argv) > 2 else KINDS
    _report(_sizes, _kinds, repeat=3 if max(_sizes) <= 10_000 else 1)
