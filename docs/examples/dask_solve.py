"""Solve on a dask array on a local cluster, then predict lazily.

Run it as a script: ``python dask_solve.py``. ``LocalCluster`` starts its workers as new
processes that import this file, so the cluster is created under the
``if __name__ == "__main__":`` guard (without it every worker would start a cluster).
"""
import dask.array as da
from distributed import Client, LocalCluster

import marginkit as mk


def main():
    X_csr, y = mk.datasets.load_libsvm("heart_scale")  # any CSR matrix and labels
    X = da.from_array(X_csr, chunks=(100, -1), asarray=False)  # or any dask loader
    with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster):
        # or Client("tcp://scheduler:8786") for an existing cluster
        res = mk.solve(X, y, solver="fista")  # same call as in memory
        print("status:", res.status, "verified:", res.certificate.verify(X_csr, y))
        pred = res.predict(X)  # lazy: one block per row chunk, computed on the workers
        print("prediction blocks:", pred.numblocks[0])
        print("training accuracy:", round(float((pred == y).mean().compute()), 3))


if __name__ == "__main__":
    main()
