"""Data loaders (LIBSVM files, MNIST IDX) and synthetic generators."""
from ._libsvm import find_data_file, load_heart_scale, load_libsvm  # noqa: E402,F401
from ._mnist import load_mnist_idx  # noqa: E402,F401
