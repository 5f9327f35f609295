"""The two-cluster generator of the SVM paper's data model (``datasets.make_clusters``)."""
import re
import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.datasets import SHAPES, make_clusters
from marginkit.datasets._clusters import BLOCK_ROWS


def test_shape_dtype_labels_and_reproducible():
    X, y = make_clusters(3000, 7, dtype=np.float32, random_state=3)
    assert X.shape == (3000, 7) and X.dtype == np.float32 and X.flags.c_contiguous
    assert set(np.unique(y)) == {-1.0, 1.0} and y.dtype == np.float64
    X2, y2 = make_clusters(3000, 7, dtype=np.float32, random_state=3)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    X64, _ = make_clusters(3000, 7, random_state=3)
    np.testing.assert_allclose(X, X64, rtol=1e-6)  # the same points, rounded once


def test_noise_free_clusters_are_separated_by_the_model_direction():
    # no noise, radius < separation: the hyperplane u^T (x - offset) = 0 separates, and
    # a separator certificate of the perceptron family verifies
    X, y = make_clusters(2000, 5, noise=0.0, radius=0.5, separation=1.0, offset=0.0,
                         random_state=0)
    res = mk.solve(X, y, solver="snkp")
    assert res.status == "separable"
    assert res.certificate.verify(X, y)


def test_noise_fraction_and_accuracy_of_a_certified_svm():
    X, y = make_clusters(20000, 10, noise=0.1, random_state=1)
    res = mk.solve(X, y, solver="dcd")
    assert res.status == "certified"
    acc = float(np.mean(res.predict(X) == y))
    # a noisy row has a random label and lies anywhere: about half of the 10% are misfit
    assert 0.9 < acc < 0.99


def test_sparse_shape_density_and_structure():
    X, y = make_clusters(5000, 2000, nnz_per_row=30, dtype=np.float32, random_state=2)
    assert sp.issparse(X) and X.format == "csr" and X.dtype == np.float32
    assert X.indices.dtype == np.int32 and X.indptr.dtype == np.int32
    assert abs(X.nnz / X.shape[0] - 30) < 1.0
    assert np.all(np.diff(X.indptr) >= 1)
    Y = X.copy()
    Y.sort_indices()
    np.testing.assert_array_equal(X.indices, Y.indices)  # sorted and distinct per row
    Y.sum_duplicates()
    assert Y.nnz == X.nnz
    res = mk.solve(X, y, solver="dcd")
    assert res.status == "certified" and np.mean(res.predict(X) == y) > 0.85


def test_like_presets():
    assert SHAPES["higgs"] == (10_500_000, 28, None)
    X, y = make_clusters(like="rcv1", n_samples=300, random_state=0)
    assert X.shape == (300, 47_236) and sp.issparse(X)
    X, y = make_clusters(like="susy", n_samples=100, random_state=0)
    assert X.shape == (100, 18) and isinstance(X, np.ndarray)


def test_memory_is_the_output_plus_one_block():
    # the temporaries are one block's: the overhead does not grow with n_samples
    def overhead(n):
        tracemalloc.start()
        X, _ = make_clusters(n, 16, dtype=np.float32, random_state=0)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return peak - X.nbytes - 8 * n  # minus X and y

    small, large = overhead(2 * BLOCK_ROWS), overhead(6 * BLOCK_ROWS)
    assert large < small + 2**20
    assert small < 8 * BLOCK_ROWS * 16 * 8  # a few float64 blocks


@pytest.mark.parametrize("kw, match", [
    ({"n_samples": 1}, "n_samples=1 must be an integer >= 2"),
    ({"noise": 1.5}, r"noise=1.5 must be a finite number >= 0.0 and <= 1.0"),
    ({"separation": 0.0}, "clusters would coincide"),
    ({"like": "mnist"}, "like='mnist' is not a known shape"),
    ({"n_features": 5, "nnz_per_row": 6}, "nnz_per_row=6 must be at most n_features=5"),
    ({"dtype": np.int64}, "must be numpy.float32 or numpy.float64"),
    ({"radius": float("nan")}, "radius=nan must be a finite number"),
])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        make_clusters(**kw)


def test_shapes_beyond_memory_are_refused_by_name():
    """Found by review: n_features=2**40 (CSR output) and a dense 10^12 x 10^6 X died in
    numpy's allocator (MemoryError from inside the generator)."""
    # beyond any address space (8 PiB), whatever the machine's overcommit policy
    with pytest.raises(ValueError, match="n_features=1125899906842624"):
        make_clusters(10, 2**50, nnz_per_row=2)
    with pytest.raises(ValueError, match="the dense X takes"):
        make_clusters(10**12, 10**6)
    # beyond numpy's largest array ("array is too big", a ValueError of its own)
    with pytest.raises(ValueError, match="n_features=2305843009213693952: the clusters'"):
        make_clusters(10, 2**61, nnz_per_row=2)


@pytest.mark.parametrize("kw, match", [
    ({"dtype": np.float32, "separation": 1e300},
     r"separation=1e\+300, radius=0.6, offset=1.0: the points reach beyond the largest "
     r"float32, 3.4e\+38 \(\|offset\| \+ separation \+ radius = 1e\+300\).* or "
     r"dtype=numpy.float64"),
    ({"offset": -1e308, "separation": 1e308}, r"offset=-1e\+308: the points reach beyond the "
                                              r"largest float64"),
    ({"radius": 1e308, "n_features": 1}, r"radius=1e\+308.*X would not be finite"),
    ({"dtype": np.float32, "separation": 1e300, "nnz_per_row": 2},
     r"separation=1e\+300.*beyond the largest float32"),
])
def test_points_beyond_the_dtypes_range_are_refused_by_name(kw, match):
    """Found by review: float32 with separation=1e300 gave rows of +-inf and offset=-1e308
    with separation=1e308 non-finite entries, with only numpy's RuntimeWarning."""
    kw = {"n_samples": 10, "n_features": 3, "random_state": 0, **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=match):
            make_clusters(**kw)
    # at the edge of the range: finite
    X, _ = make_clusters(10, 3, dtype=np.float32, separation=3e38, radius=0.0, offset=0.0,
                         random_state=0)
    assert np.isfinite(X).all()


def test_other_generators_refuse_impossible_shapes_by_name():
    """Found by review: make_xor, make_separable, make_duplicated_opposite, make_four_point
    and make_source_capacity gave numpy's raw MemoryError at sizes no machine holds, and
    make_source_capacity(r=1e308) blamed "kernel 'spline': order=inf"."""
    d = mk.datasets
    # beyond numpy's largest array: refused before any work; beyond a 57-bit address space
    # (2**55 float64 = 256 PiB): numpy's MemoryError, named
    for big in (2**62, 2**55):
        with pytest.raises(ValueError, match=rf"n_samples={big}, n_features=2: X \(float64\) "
                                             r"takes .* GiB, more than this machine can "
                                             r"allocate; ask for fewer samples or features"):
            d.make_xor(n_samples=big)
    for gen in (d.make_separable, d.make_duplicated_opposite):
        for big in (2**62, 2**55):
            with pytest.raises(ValueError, match=rf"n_samples=2, n_features={big}: X "
                                                 r"\(float64, with .*ask for fewer samples or "
                                                 r"features"):
                gen(n_samples=2, n_features=big)
    for big in (2**62, 2**55):
        with pytest.raises(ValueError, match=rf"d={big}: the dense X \(4 x d float64\) takes "
                                             r".*ask for a smaller d, or sparse=True"):
            d.make_four_point(d=big)
        with pytest.raises(ValueError, match=rf"n={big}: x \(float64, .*ask for fewer samples"):
            d.make_source_capacity(n=big, r=0.5, alpha=2.0)
    # a sparse X needs no dense 4 x d array, and is the one built from it at small d
    X, y = d.make_four_point(d=2**40, sparse=True)
    assert X.shape == (4, 2**40) and X.nnz == 8 and X.indices.dtype == np.int64
    Xs, _ = d.make_four_point(d=1100, sparse=True, dtype=np.float32)
    Xd, _ = d.make_four_point(d=1100, dtype=np.float32)
    assert Xs.dtype == np.float32 and Xs.indices.dtype == np.int32
    assert (Xs != sp.csr_matrix(Xd)).nnz == 0 and Xs.nnz == 8
    for r, alpha, fix in ((1e308, 2.0, r"choose r <= 499.2 for this alpha"),
                          (float("inf"), 2.0, r"choose r <= 499.2"),
                          (0.5, 1e308, r"choose a smaller alpha")):
        with pytest.raises(ValueError, match=rf"r={re.escape(repr(r))} with alpha="
                                             rf"{re.escape(repr(alpha))} gives the "
                                             r"target's order .* above the largest order of "
                                             rf"the spline kernel, 1000; {fix}"):
            d.make_source_capacity(n=10, r=r, alpha=alpha)
