"""Data loaders (LIBSVM files, MNIST IDX) and synthetic generators."""
