"""Data loaders (LIBSVM files, MNIST IDX) and synthetic generators."""
from ._clusters import SHAPES, make_clusters  # noqa: E402,F401
from ._libsvm import find_data_file, load_heart_scale, load_libsvm  # noqa: E402,F401
from ._mnist import load_mnist_idx  # noqa: E402,F401
from ._source_capacity import make_source_capacity, source_capacity_excess_risk  # noqa: E402,F401
from ._synthetic import make_duplicated_opposite, make_separable, make_xor  # noqa: E402,F401
from ._svm_data import make_four_point  # noqa: E402,F401
