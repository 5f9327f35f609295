"""Dask backend vs in-memory ``mk.solve``: time per iteration and overhead ratio.

a9a replicated ``--replicate`` times (10 -> 325,610 rows, 123 features, CSR) is solved in
memory and as a row-chunked ``dask.array`` on a ``LocalCluster`` (``--workers`` worker
processes, one thread each, loopback only). For each solver the time per iteration is
the median interval between iteration boundaries (a ``callback`` records them), so the
set-up (persisting X, building the chunk workers, the scaling statistics, the power
iteration for L) is excluded and reported separately as the time to the first
iteration; the coefficients of the two runs are compared.

Usage::

    MARGINKIT_DATA=/path/to/data python benchmarks/dask_scaling.py \
        [--replicate 10] [--workers 2] [--chunks 8] [--solvers fista,fista_svm,snkp,isnkpvn,nkp,iterated_tikhonov,pegasos]

Prints one table row per solver and a JSON line with all numbers (``--json PATH`` to save).
"""
import argparse
import json
import time

import numpy as np
import scipy.sparse as sp


def _data(replicate):
    import marginkit as mk

    X, y = mk.datasets.load_libsvm("a9a")
    X = sp.vstack([X] * replicate, format="csr")
    y = np.tile(y, replicate)
    return X, y


class _Clock:
    """A ``callback`` recording the time at each iteration boundary."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.ticks = []

    def __call__(self, state):
        self.ticks.append(time.perf_counter())
        return False

    def summary(self):
        """(median seconds per iteration, seconds before the first iteration)."""
        t = np.asarray(self.ticks)
        per = float(np.median(np.diff(t))) if t.size > 1 else float("nan")
        return per, float(t[0] - self.t0) if t.size else float("nan")


def _run(X, y, kw, n):
    clock = _Clock()
    res = mk_solve(X, y, callback=clock, **kw(n))
    per, setup = clock.summary()
    return per, setup, res


def mk_solve(*args, **kwargs):
    import marginkit as mk

    return mk.solve(*args, **kwargs)


CASES = {
    # name: keywords of solve for n iterations (epochs for pegasos), n
    "fista": (lambda n: {"solver": "fista", "stop": ("max_iter", {"n": n})}, 40),
    "fista_svm": (lambda n: {"solver": "fista_svm", "stop": ("max_iter", {"n": n})}, 20),
    "snkp": (lambda n: {"solver": "snkp", "stop": ("max_iter", {"n": n})}, 40),
    # the paper's iterations on both sides (the exact finish runs in memory only)
    "isnkpvn": (lambda n: {"solver": "isnkpvn", "finish": False, "stop": ("max_iter", {"n": n})},
                40),
    "nkp": (lambda n: {"solver": "nkp", "stop": ("max_iter", {"n": n})}, 40),
    "iterated_tikhonov": (lambda n: {"solver": "iterated_tikhonov", "max_iter": n}, 10),
    "pegasos": (lambda n: {"solver": "pegasos", "epochs": n, "random_state": 0}, 3),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicate", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=8, help="row chunks of the dask array")
    ap.add_argument("--solvers", default="fista,fista_svm,snkp,isnkpvn,nkp,iterated_tikhonov,pegasos")
    ap.add_argument("--json", default=None, help="write the numbers to this file")
    args = ap.parse_args(argv)

    import dask.array as da
    from distributed import Client, LocalCluster

    X, y = _data(args.replicate)
    n = X.shape[0]
    rows = -(-n // args.chunks)
    print(f"a9a x{args.replicate}: n={n}, d={X.shape[1]}, nnz={X.nnz}; {args.chunks} chunks of "
          f"<= {rows} rows; LocalCluster({args.workers} processes x 1 thread)")
    out = {"n": n, "d": X.shape[1], "nnz": int(X.nnz), "chunks": args.chunks,
           "workers": args.workers, "cases": {}}
    with LocalCluster(n_workers=args.workers, processes=True, threads_per_worker=1,
                      host="127.0.0.1", dashboard_address=None) as cluster, Client(cluster):
        Xd = da.from_array(X, chunks=(rows, -1), asarray=False)
        Xd = Xd.persist()  # the chunks live on the workers before the timed runs
        print(f"{'solver':17s} {'mem s/it':>10s} {'dask s/it':>10s} {'ratio':>7s} "
              f"{'mem setup':>10s} {'dask setup':>10s} {'max |dcoef|':>12s}")
        for name in args.solvers.split(","):
            kw, n_it = CASES[name]
            pm, sm, rm = _run(X, y, kw, n_it)
            pd, sd, rd = _run(Xd, y, kw, n_it)
            # pegasos visits the samples in another order on dask (chunk-wise epochs)
            diff = float(np.abs(rm.coef_ - rd.coef_).max())
            print(f"{name:17s} {pm:10.4f} {pd:10.4f} {pd / pm:7.2f} {sm:10.3f} {sd:10.3f} "
                  f"{diff:12.3g}", flush=True)
            out["cases"][name] = {"mem_s_per_iter": pm, "dask_s_per_iter": pd,
                                  "ratio": pd / pm, "mem_setup_s": sm, "dask_setup_s": sd,
                                  "max_abs_coef_diff": diff, "n_iter": int(rd.n_iter),
                                  "same_n_iter": bool(rd.n_iter == rm.n_iter)}
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


if __name__ == "__main__":
    main()
