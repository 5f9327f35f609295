"""Loaders: LIBSVM files (plain/gz/xz, both readers), MNIST IDX, bundled heart_scale."""
import gzip
import hashlib
import lzma
import struct

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.datasets import _libsvm

TEXT = b"""# a comment line
+1 1:0.5 3:-1.25 # trailing comment
-1 2:2 4:1e-3
+1 qid:3 1:1

-1 4:-0.5
"""
DENSE = np.array([[0.5, 0, -1.25, 0], [0, 2, 0, 1e-3], [1, 0, 0, 0], [0, 0, 0, -0.5]])


@pytest.fixture(params=["sklearn", "fallback"])
def reader(request, monkeypatch):
    """Run each test with scikit-learn's reader and with the pure-Python one."""
    if request.param == "sklearn":
        pytest.importorskip("sklearn")
    else:
        import builtins

        real_import = builtins.__import__

        def no_sklearn(name, *args, **kwargs):
            if name == "sklearn" or name.startswith("sklearn."):
                raise ImportError("scikit-learn hidden for this test")
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", no_sklearn)
    return request.param


def _write(tmp_path, name, data, compress=None):
    path = tmp_path / name
    if compress == "gz":
        data = gzip.compress(data)
    elif compress == "xz":
        data = lzma.compress(data)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("compress,suffix", [(None, ""), ("gz", ".gz"), ("xz", ".xz")])
def test_formats_give_the_same_matrix(tmp_path, reader, compress, suffix):
    path = _write(tmp_path, "toy" + suffix, TEXT, compress)
    X, y = mk.datasets.load_libsvm(path)
    assert sp.isspmatrix_csr(X) and X.dtype == np.float64 and X.has_canonical_format
    np.testing.assert_array_equal(X.toarray(), DENSE)
    np.testing.assert_array_equal(y, [1, -1, 1, -1])


def test_labels_as_given_and_n_features(tmp_path, reader):
    path = _write(tmp_path, "lab", b"2 1:1\n4 2:1\n4 1:3\n")
    X, y = mk.datasets.load_libsvm(path, n_features=5)
    assert X.shape == (3, 5)
    np.testing.assert_array_equal(y, [2, 4, 4])
    with pytest.raises(ValueError, match="n_features"):
        mk.datasets.load_libsvm(_write(tmp_path, "big", b"1 7:1\n"), n_features=5)


def test_lookup_in_data_folder(tmp_path, monkeypatch, reader):
    _write(tmp_path, "mydata.xz", TEXT, "xz")
    monkeypatch.setenv("MARGINKIT_DATA", str(tmp_path))
    for name in ("mydata", "mydata.xz"):
        X, _ = mk.datasets.load_libsvm(name)
        assert X.shape == (4, 4)
    monkeypatch.delenv("MARGINKIT_DATA")
    with pytest.raises(FileNotFoundError, match="MARGINKIT_DATA"):
        mk.datasets.load_libsvm("mydata")


@pytest.mark.parametrize("content,match", [
    (b"+1 1:0.5\n-1 0:1\n", "line 2: feature index 0"),
    (b"+1 1:0.5\n-1 -3:1\n", "line 2: feature index -3"),
    (b"+1 1:0.5\n\n-1 2:abc\n", "line 3: bad value 'abc'"),
    (b"+1 x:1\n", "line 1: bad feature index 'x'"),
    (b"one 1:1\n", "line 1: bad label 'one'"),
    (b"+1 1:0.5\n-1 1:1 2:", "line 2: truncated or malformed entry '2:'"),
    (b"+1 1:0.5 3\n", "line 1: truncated or malformed entry '3'"),
    (b"1:0.5 2:1\n", "line 1: missing label"),
    (b"+1 3:1 2:1\n", "line 1: feature indices must be strictly increasing"),
    # Python's int() and float() read "1_0" as 10; LIBSVM's strtol/strtod do not
    (b"1_0 1:1\n", "line 1: bad label '1_0'"),
    (b"+1 1_0:1\n", "line 1: bad feature index '1_0'"),
    (b"+1 2:1_000\n", "line 1: bad value '1_000'"),
    # a query id is an integer (found by review: qid:abc was skipped silently)
    (b"+1 qid:3 1:1\n-1 qid:abc 1:1\n", "line 2: bad query id 'qid:abc'"),
    (b"+1 qid: 1:1\n", "line 1: bad query id 'qid:'"),
    (b"+1 qid:1.5 1:1\n", "line 1: bad query id 'qid:1.5'"),
])
def test_malformed_input_names_the_line(tmp_path, reader, content, match):
    path = _write(tmp_path, "bad.txt", content)
    with pytest.raises(ValueError, match=match):
        mk.datasets.load_libsvm(path)


def test_wrong_or_broken_compression(tmp_path, reader):
    with pytest.raises(ValueError, match=r"ends in '\.xz' but the file is not compressed"):
        mk.datasets.load_libsvm(_write(tmp_path, "plain.xz", TEXT))
    with pytest.raises(ValueError, match=r"ends in '\.gz' but the file is xz-compressed"):
        mk.datasets.load_libsvm(_write(tmp_path, "wrong.gz", TEXT, "xz"))
    cut = lzma.compress(TEXT * 50)[:-40]
    with pytest.raises(ValueError, match="corrupt or truncated"):
        mk.datasets.load_libsvm(_write(tmp_path, "cut.xz", cut))
    with pytest.raises(ValueError, match="line 1: not a text file"):
        mk.datasets.load_libsvm(_write(tmp_path, "bin", b"\xff\xfe\x00\x01 1:1\n"))


def test_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="n_features"):
        mk.datasets.load_libsvm("heart_scale", n_features=2.5)
    with pytest.raises(ValueError, match="n_features=0"):
        mk.datasets.load_libsvm("heart_scale", n_features=0)
    with pytest.raises(TypeError, match="name_or_path"):
        mk.datasets.load_libsvm(3)
    with pytest.raises(ValueError, match="no samples"):
        mk.datasets.load_libsvm(_write(tmp_path, "empty", b"# nothing\n"))


def test_heart_scale_is_libsvm_copy(reader):
    raw = (_libsvm._BUNDLED / "heart_scale").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == \
        "5defa0a4c4c5bdaf3f55ae3828310252e8565c13ee37ce279e0b86d82e7f4ce9"
    X, y = mk.datasets.load_heart_scale()
    assert X.shape == (270, 13) and X.nnz == 3378
    assert (y == 1).sum() == 120 and (y == -1).sum() == 150
    assert X.min() >= -1 and X.max() <= 1


def test_both_readers_agree_on_benchmark_files(data_dir):
    pytest.importorskip("sklearn")
    for name in ("a9a.t", "breast-cancer_scale", "svmguide1"):
        X1, y1 = mk.datasets.load_libsvm(name)
        X2, y2 = _libsvm._load_fallback(_libsvm.find_data_file(name), None)
        assert (X1 != X2).nnz == 0 and X1.shape == X2.shape
        np.testing.assert_array_equal(y1, y2)
    X, y = mk.datasets.load_libsvm("a9a.t", n_features=123)
    assert X.shape == (16281, 123) and set(np.unique(y)) == {-1.0, 1.0}


# ----------------------------------------------------------------------------- MNIST
def _idx(tmp_path, name, arr, code=0x08, compress=True):
    header = bytes([0, 0, code, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    data = header + arr.astype(np.uint8).tobytes()
    return _write(tmp_path, name, data, "gz" if compress else None)


def test_mnist_idx_roundtrip(tmp_path):
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(5, 3, 4))
    labs = np.array([3, 1, 4, 1, 5])
    ip = _idx(tmp_path, "img.gz", imgs)
    lp = _idx(tmp_path, "lab", labs, compress=False)
    X, y = mk.datasets.load_mnist_idx(ip, lp)
    assert X.shape == (5, 12) and X.dtype == np.float64
    np.testing.assert_allclose(X, imgs.reshape(5, 12) / 255.0)
    np.testing.assert_array_equal(y, labs)
    X32, _ = mk.datasets.load_mnist_idx(ip, lp, scale=False, dtype=np.float32)
    assert X32.dtype == np.float32 and X32.max() == imgs.max()


def test_mnist_idx_errors(tmp_path):
    imgs = np.zeros((5, 2, 2))
    ip = _idx(tmp_path, "img.gz", imgs)
    with pytest.raises(ValueError, match="4 labels"):
        mk.datasets.load_mnist_idx(ip, _idx(tmp_path, "lab4", np.arange(4)))
    with pytest.raises(ValueError, match="not an IDX file"):
        mk.datasets.load_mnist_idx(_write(tmp_path, "txt", TEXT), ip)
    full = gzip.decompress(ip.read_bytes())
    with pytest.raises(ValueError, match="truncated IDX data"):
        mk.datasets.load_mnist_idx(_write(tmp_path, "cut", full[:-3]), ip)
    with pytest.raises(ValueError, match="labels file"):
        mk.datasets.load_mnist_idx(ip, ip)
    # found by review: float labels were cast silently (0.5 -> 0, NaN -> -2^63), and an
    # images file without pixels gave numpy's reshape error
    header = bytes([0, 0, 0x0E, 1]) + struct.pack(">I", 5)
    floats = _write(tmp_path, "labf", header + struct.pack(">5d", 0, 1, 0.5, 2, np.nan), None)
    with pytest.raises(ValueError, match="label 2 is 0.5, not an integer"):
        mk.datasets.load_mnist_idx(ip, floats)
    huge = _write(tmp_path, "labh", header + struct.pack(">5d", 0, 1, 1e19, 2, 3), None)
    with pytest.raises(ValueError, match="label 2 is 1e\\+19, not an integer"):
        mk.datasets.load_mnist_idx(ip, huge)
    # found by review: a header of 70 dimensions gave numpy's "maximum supported
    # dimension" without the file's name; 0 dimensions, a scalar
    for nd in (0, 9, 70):
        deep = _write(tmp_path, f"deep{nd}", bytes([0, 0, 0x08, nd]) + struct.pack(
            f">{nd}I", *([1] * nd)) + b"\0", None)
        with pytest.raises(ValueError, match=f"deep{nd}: an IDX header of {nd} dimensions"):
            mk.datasets.load_mnist_idx(deep, ip)
    with pytest.raises(ValueError, match="holds no pixels"):
        mk.datasets.load_mnist_idx(_idx(tmp_path, "img0", np.zeros((0, 0))),
                                   _idx(tmp_path, "lab0", np.zeros(0)))
    # found by review: non-finite pixels of a float images file loaded silently, and a
    # pixel beyond float32's range became inf with dtype=np.float32
    lab3 = _idx(tmp_path, "lab3", np.array([0, 1, 0]))
    head = bytes([0, 0, 0x0E, 3]) + struct.pack(">3I", 3, 1, 2)
    for name, pixels in (("nan", [np.nan, 1, 2, 2, 3, 4]), ("inf", [1, 1, 2, -np.inf, 3, 4])):
        img = _write(tmp_path, "img" + name, head + np.array(pixels, ">f8").tobytes(), None)
        with pytest.raises(ValueError, match=r"pixel \d is .*must be finite"):
            mk.datasets.load_mnist_idx(img, lab3)
    big = _write(tmp_path, "imgbig", head + np.array([1e300, 1, 2, 2, 3, 4], ">f8").tobytes(),
                 None)
    with pytest.raises(ValueError, match="overflows float32; load with dtype=np.float64"):
        mk.datasets.load_mnist_idx(big, lab3, dtype=np.float32, scale=False)
    X, _ = mk.datasets.load_mnist_idx(big, lab3, scale=False)
    assert X[0, 0] == 1e300


def test_mnist_t10k(data_dir):
    X, y = mk.datasets.load_mnist_idx("mnist/t10k-images-idx3-ubyte.gz",
                                      "mnist/t10k-labels-idx1-ubyte.gz")
    assert X.shape == (10000, 784) and 0 <= X.min() and X.max() == 1.0
    np.testing.assert_array_equal(np.bincount(y), [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])


def test_loaded_matrices_have_32_bit_indices_when_they_fit(tmp_path):
    """As scipy chooses, and as scikit-learn's sparse SVMs require."""
    path = tmp_path / "small.svm"
    path.write_text("+1 1:0.5 3:1\n-1 2:2\n")
    X, y = mk.datasets.load_libsvm(str(path))
    assert X.indices.dtype == np.int32 and X.indptr.dtype == np.int32
    assert X.toarray().tolist() == [[0.5, 0.0, 1.0], [0.0, 2.0, 0.0]]
    svm = pytest.importorskip("sklearn.svm")
    assert svm.LinearSVC().fit(X, y).predict(X).tolist() == [1.0, -1.0]


# ------------------------------------------------------------- the compiled LIBSVM parser
_TRICKY = (b"+1 1:0.5 3:-2e-3 qid:7 10:1E2 # comment 11:9\r\n"
           b"\n   \t\n# a comment line\n"
           b"-1 2:.25  4:-0 # trailing\n"
           b"0 \n"
           b"2 1:1e-400 5:123456789.125")  # last line without a newline, an underflow


def _same(A, B):
    assert A.shape == B.shape and A.dtype == B.dtype
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)


def test_compiled_reader_equals_pure_python_reader(tmp_path, monkeypatch):
    path = tmp_path / "tricky.txt"
    path.write_bytes(_TRICKY)
    X, y = mk.datasets.load_libsvm(path)
    X2, y2 = _libsvm._load_fallback(path, None)
    _same(X, X2)
    np.testing.assert_array_equal(y, y2)
    assert X.shape == (4, 10) and X.nnz == 7 and y.tolist() == [1.0, -1.0, 0.0, 2.0]
    # the compiled reader read it: the pure-Python one is not needed
    monkeypatch.setattr(_libsvm, "_load_fallback", None)
    _same(mk.datasets.load_libsvm(path)[0], X2)


def test_compiled_reader_lines_across_blocks(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    lines = []
    for i in range(300):
        cols = np.sort(rng.choice(50, size=rng.integers(0, 12), replace=False)) + 1
        lines.append(f"{i % 3 - 1} " + " ".join(f"{c}:{rng.normal():.17g}" for c in cols))
    path = tmp_path / "blocks.txt"
    path.write_text("\n".join(lines) + "\n")
    ref = _libsvm._load_fallback(path, 60)
    monkeypatch.setattr(_libsvm, "_PARSE_BLOCK", 37)  # lines cut at every place
    X, y = mk.datasets.load_libsvm(path, n_features=60)
    _same(X, ref[0])
    np.testing.assert_array_equal(y, ref[1])


@pytest.mark.parametrize("text", [b"1 1_0:1\n", b"1 +5:1\n", b"1 1:1_5\n"])
def test_spellings_only_python_reads_give_the_same_result(tmp_path, text):
    path = tmp_path / "odd.txt"
    path.write_bytes(text)
    assert _libsvm._load_compiled(path, None, False) is None  # handed over
    if b"_" in text:  # LIBSVM's strtol/strtod stop at "_": both readers refuse it
        with pytest.raises(ValueError, match="line 1: bad"):
            _libsvm._load_fallback(path, None)
        with pytest.raises(ValueError, match="line 1: bad"):
            mk.datasets.load_libsvm(path)
        return
    X, y = mk.datasets.load_libsvm(path)
    _same(X, _libsvm._load_fallback(path, None)[0])


def test_float32_output(data_dir):
    X64, y64 = mk.datasets.load_libsvm("a9a.t")
    X32, y32 = mk.datasets.load_libsvm("a9a.t", dtype=np.float32)
    assert X32.dtype == np.float32 and y32.dtype == np.float64
    np.testing.assert_array_equal(X32.indices, X64.indices)
    np.testing.assert_array_equal(X32.data, X64.data.astype(np.float32))
    with pytest.raises(ValueError, match="dtype='int8' must be numpy.float64 or numpy.float32"):
        mk.datasets.load_libsvm("a9a.t", dtype="int8")


def test_float32_overflow_is_refused(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"1 1:2\n-1 1:1 3:1e39\n")
    X, _ = mk.datasets.load_libsvm(path)  # float64 holds it
    assert X.data.max() == 1e39
    with pytest.raises(ValueError, match=r"feature 3 in sample 1 \(0-based\) overflows float32"):
        mk.datasets.load_libsvm(path, dtype=np.float32)


def test_load_libsvm_refuses_n_features_beyond_int64(tmp_path):
    """Found by review: n_features=2**70 raised OverflowError inside the compiled parser."""
    path = tmp_path / "t.txt"
    path.write_text("1 1:2\n-1 2:1\n")
    with pytest.raises(ValueError, match="n_features=.* is beyond"):
        mk.datasets.load_libsvm(path, n_features=2**70)
