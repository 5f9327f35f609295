"""Dask backend (``marginkit._dask``): the same iterations as the in-memory solvers.

A ``dask.distributed.LocalCluster`` (2 worker processes, 1 thread each, loopback only)
is started once for the module. Each solver supported on dask arrays is compared with
the in-memory ``mk.solve`` on the same data: same status, same number of iterations,
same stopping decision, and iterates equal to 1e-10 (only the order of floating-point
summation differs).
"""
import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("dask.distributed")

from marginkit import _dask  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       host="127.0.0.1", dashboard_address=None)
    cl = distributed.Client(cluster)
    yield cl
    cl.close()
    cluster.close()


def _synthetic(n=600, d=12, seed=0, separable=True, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    y = np.where(X @ w + 0.3 > 0, 1, -1)
    if not separable:
        flip = rng.random(n) < 0.1
        y[flip] *= -1
    if sparse:
        X[rng.random((n, d)) < 0.6] = 0.0
        X[np.arange(n), rng.integers(0, d, n)] = 1.0  # no empty rows
        X = sp.csr_matrix(X)
    return X, y


def _as_dask(X, rows):
    return da.from_array(X, chunks=(rows, -1), asarray=not sp.issparse(X))


# --------------------------------------------------------------------------- infrastructure
def _k_xty(chunk, w):
    return np.asarray(chunk.X.T @ (chunk.y * (chunk.X @ w))).ravel()


@pytest.mark.parametrize("sparse", [False, True])
def test_pool_map_reduce_matches_numpy(client, sparse):
    X, y = _synthetic(sparse=sparse)
    Xd = da.from_array(X, chunks=(170, 5), asarray=not sparse)  # column chunks are merged
    pool, classes = _dask.make_pool(Xd, da.from_array(y, chunks=100))
    try:
        assert pool.client is client
        assert pool.n_chunks == 4 and pool.sparse == sparse
        np.testing.assert_array_equal(classes, [-1, 1])
        w = np.linspace(-1, 1, X.shape[1])
        got = np.sum(pool.map(_k_xty, w), axis=0)
        want = X.T @ (y * (X @ w))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    finally:
        pool.close()


def test_unsupported_solver_is_a_clear_error(client):
    @mk.register("solver", "dask_less")
    class DaskLess(mk.plugins.Solver):
        pass

    X, y = _synthetic(n=50)
    with pytest.raises(ValueError, match="not supported on dask arrays"):
        mk.solve(_as_dask(X, 20), y, solver="dask_less")


def test_y_length_and_classes_are_checked(client):
    X, y = _synthetic(n=50)
    Xd = _as_dask(X, 20)
    with pytest.raises(ValueError, match="one label per row"):
        _dask.make_pool(Xd, da.from_array(y[:-1], chunks=20))
    with pytest.raises(ValueError, match="single class"):
        _dask.make_pool(Xd, da.from_array(np.ones(50), chunks=20))
    with pytest.raises(ValueError, match="3 classes"):
        _dask.make_pool(Xd, da.from_array(np.arange(50) % 3, chunks=20))
