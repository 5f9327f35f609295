"""A data set larger than one Dask worker's memory limit, solved on the workers and in memory.

The SVM paper's two-cluster model (``mk.datasets.make_clusters``' dense rows) is generated
on the workers of a ``LocalCluster`` (``--workers`` processes, one thread each, every
worker's ``memory_limit`` below the size of X), one row chunk per task: the client never
holds X. ``mk.solve`` runs there, and then on the same rows gathered into this process
(what a machine that fits the data would do). Reported: the size of X against the
workers' limit, the peak resident memory of each worker, time per iteration (median
interval between iteration boundaries, from a ``callback``), set-up time, iterations,
status, whether the certificate verifies, and the largest coefficient difference between
the two runs.

Usage::

    python benchmarks/dask_beyond_memory.py [--n 10000000] [--d 28] [--workers 2]
        [--chunks 8] [--solver fista] [--dtype float64] [--json PATH]

(with marginkit importable: ``pip install -e .``, or ``PYTHONPATH=.`` from the repository
root). ``--memory-limit`` defaults to 0.9 x the size of X per worker (at least 1 GiB:
a worker's own start-up takes a few hundred MiB). Spilling and pausing are off (the chunk
workers hold their chunks for the run, so neither could free memory); the limit itself is
enforced (a worker beyond 95% of it is restarted and the run fails).
"""
import argparse
import json
import time

import numpy as np

# the iteration clock of the scaling benchmark beside this script
from dask_scaling import _Clock

SEED = 12345


def _u(d):
    rng = np.random.default_rng([SEED, 0])
    u = rng.standard_normal(d)
    return u / np.linalg.norm(u)


def _chunk(i, m, d, dtype):
    """Rows of chunk ``i`` (its own random stream; the direction u is shared)."""
    from marginkit.datasets._clusters import _dense_block

    rng = np.random.default_rng([SEED, 1, i])
    y = np.empty(m)
    X = _dense_block(rng, m, _u(d), 1.0, 0.6, 0.08, 1.0, y).astype(dtype, copy=False)
    return X, y


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--d", type=int, default=28)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--solver", default="fista")
    ap.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    ap.add_argument("--memory-limit", type=float, default=None,
                    help="bytes per worker (default 0.9 x the size of X)")
    ap.add_argument("--skip-memory-run", action="store_true",
                    help="do not gather X into this process for the in-memory comparison")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    import marginkit as mk

    dtype = np.dtype(args.dtype)
    n, d = args.n, args.d
    size = n * d * dtype.itemsize
    limit = int(args.memory_limit or 0.9 * size)
    if limit < 2**30:
        ap.error(f"a worker needs more than {limit / 2**20:.0f} MiB (its own start-up takes "
                 "a few hundred): take n x d large enough for X to exceed 1.2 GiB, or pass "
                 "--memory-limit")
    rows = -(-n // args.chunks)
    bounds = [(lo, min(n, lo + rows)) for lo in range(0, n, rows)]
    out = {"n": n, "d": d, "dtype": args.dtype, "bytes_X": size, "workers": args.workers,
           "memory_limit_per_worker": limit, "chunks": len(bounds), "solver": args.solver}
    print(f"X: {n} x {d} {args.dtype} = {size / 2**30:.2f} GiB in {len(bounds)} chunks; "
          f"LocalCluster({args.workers} processes x 1 thread, memory_limit "
          f"{limit / 2**30:.2f} GiB each)", flush=True)
    # the chunks are held by the chunk workers for the whole run, so spilling them to disk
    # frees nothing, and a worker paused at 80% of its limit would stall the run: only
    # the limit itself (the nanny ends a worker beyond 95% of it) stays in force
    with dask.config.set({"distributed.worker.memory.target": False,
                          "distributed.worker.memory.spill": False,
                          "distributed.worker.memory.pause": False}), \
            LocalCluster(n_workers=args.workers, processes=True, threads_per_worker=1,
                         memory_limit=limit, host="127.0.0.1",
                         dashboard_address=None) as cluster, Client(cluster) as client:
        parts = [dask.delayed(_chunk, nout=2)(i, hi - lo, d, dtype)
                 for i, (lo, hi) in enumerate(bounds)]
        X = da.concatenate([da.from_delayed(p[0], shape=(hi - lo, d), dtype=dtype)
                            for p, (lo, hi) in zip(parts, bounds)])
        y = da.concatenate([da.from_delayed(p[1], shape=(hi - lo,), dtype=np.float64)
                            for p, (lo, hi) in zip(parts, bounds)])
        clock = _Clock()
        t0 = time.perf_counter()
        res = mk.solve(X, y, solver=args.solver, callback=clock)
        total = time.perf_counter() - t0
        per, setup = clock.summary()
        peak = client.run(_rss)
        t1 = time.perf_counter()
        ok = bool(res.certificate.verify(X, y)) if res.certificate is not None else None
        verify_s = time.perf_counter() - t1
        out["dask"] = {"status": res.status, "n_iter": int(res.n_iter), "s_per_iter": per,
                       "setup_s": setup, "total_s": total, "verified": ok,
                       "verify_s": verify_s,
                       "worker_rss_bytes": sorted(int(v) for v in peak.values())}
        print(f"dask:      {res.status}, {res.n_iter} iterations, {per:.3f} s/iter, set-up "
              f"{setup:.1f} s, total {total:.1f} s; certificate verifies: {ok} "
              f"({verify_s:.1f} s); worker RSS "
              f"{[round(v / 2**30, 2) for v in sorted(peak.values())]} GiB", flush=True)
    if not args.skip_memory_run:
        # the same rows, generated here chunk by chunk (gathering them through the cluster
        # would need one worker to hold all of X, beyond its limit)
        parts = [_chunk(i, hi - lo, d, dtype) for i, (lo, hi) in enumerate(bounds)]
        Xm = np.concatenate([p[0] for p in parts])
        ym = np.concatenate([p[1] for p in parts])
        del parts
        clock = _Clock()
        t0 = time.perf_counter()
        mem = mk.solve(Xm, ym, solver=args.solver, callback=clock)
        total = time.perf_counter() - t0
        per_m, setup_m = clock.summary()
        diff = float(np.abs(mem.coef_ - res.coef_).max())
        out["memory"] = {"status": mem.status, "n_iter": int(mem.n_iter), "s_per_iter": per_m,
                         "setup_s": setup_m, "total_s": total}
        out["max_abs_coef_diff"] = diff
        out["per_iter_ratio"] = per / per_m
        print(f"in memory: {mem.status}, {mem.n_iter} iterations, {per_m:.3f} s/iter, set-up "
              f"{setup_m:.1f} s, total {total:.1f} s", flush=True)
        print(f"dask / in memory per iteration: {per / per_m:.2f}; same iterations: "
              f"{mem.n_iter == res.n_iter}; max |coef difference| {diff:.3g}")
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


if __name__ == "__main__":
    main()
