"""Dask backend vs in-memory ``mk.solve``: time per iteration and overhead ratio.

a9a replicated ``--replicate`` times (10 -> 325,610 rows, 123 features, CSR) is solved in
memory and as a row-chunked ``dask.array`` on a ``LocalCluster`` (``--workers`` worker
processes, one thread each, loopback only). For each solver the time per iteration is
measured as the difference of two runs with ``max_iter`` = n1 and n2 iterations (so the
set-up: persisting X, the scaling statistics, the power iteration for L, is excluded and
reported separately), and the two runs' coefficients are compared.

Usage::

    MARGINKIT_DATA=/path/to/data python benchmarks/dask_scaling.py \
        [--replicate 10] [--workers 2] [--chunks 8] [--solvers fista,snkp,isnkpvn,pegasos]

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


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _per_iteration(run, n1, n2):
    """(seconds per iteration, set-up seconds, result of the longer run)."""
    r1, t1 = _timed(lambda: run(n1))
    r2, t2 = _timed(lambda: run(n2))
    k1, k2 = r1.n_iter, r2.n_iter
    per = (t2 - t1) / max(k2 - k1, 1)
    return per, max(t1 - per * k1, 0.0), r2


CASES = {
    # name: (solve keywords, n1, n2, iteration keyword)
    "fista": ({"solver": "fista"}, 10, 40, "max_iter"),
    "snkp": ({"solver": "snkp"}, 10, 40, "max_iter"),
    "isnkpvn": ({"solver": "isnkpvn"}, 10, 40, "max_iter"),
    "pegasos": ({"solver": "pegasos"}, 1, 3, "epochs"),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicate", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=8, help="row chunks of the dask array")
    ap.add_argument("--solvers", default="fista,snkp,isnkpvn,pegasos")
    ap.add_argument("--json", default=None, help="write the numbers to this file")
    args = ap.parse_args(argv)

    import dask.array as da
    from distributed import Client, LocalCluster

    import marginkit as mk

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
        print(f"{'solver':9s} {'mem s/it':>10s} {'dask s/it':>10s} {'ratio':>7s} "
              f"{'mem setup':>10s} {'dask setup':>10s} {'max |dcoef|':>12s}")
        for name in args.solvers.split(","):
            kw, n1, n2, key = CASES[name]

            def run_mem(k, kw=kw, key=key):
                extra = {key: k}
                if key == "epochs":
                    extra["random_state"] = 0
                return mk.solve(X, y, stop=None if key == "epochs" else ("max_iter", {"n": k}),
                                **kw, **({} if key == "max_iter" else extra))

            def run_dask(k, kw=kw, key=key):
                extra = {key: k}
                if key == "epochs":
                    extra["random_state"] = 0
                return mk.solve(Xd, y, stop=None if key == "epochs" else ("max_iter", {"n": k}),
                                **kw, **({} if key == "max_iter" else extra))

            pm, sm, rm = _per_iteration(run_mem, n1, n2)
            pd, sd, rd = _per_iteration(run_dask, n1, n2)
            # pegasos visits the samples in another order on dask (chunk-wise epochs)
            diff = float(np.abs(rm.coef_ - rd.coef_).max())
            print(f"{name:9s} {pm:10.4f} {pd:10.4f} {pd / pm:7.2f} {sm:10.3f} {sd:10.3f} "
                  f"{diff:12.3g}")
            out["cases"][name] = {"mem_s_per_iter": pm, "dask_s_per_iter": pd,
                                  "ratio": pd / pm, "mem_setup_s": sm, "dask_setup_s": sd,
                                  "max_abs_coef_diff": diff, "n_iter": int(rd.n_iter)}
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


if __name__ == "__main__":
    main()
