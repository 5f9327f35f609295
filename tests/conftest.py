import os

import numpy as np
import pytest

import marginkit as mk


@pytest.fixture(autouse=True)
def _reset_registry():
    """Every test starts and ends with only the built-in plug-ins registered."""
    mk.reset_registry()
    yield
    mk.reset_registry()


@pytest.fixture
def data_dir():
    folder = os.environ.get("MARGINKIT_DATA")
    if not folder or not os.path.isdir(folder):
        pytest.skip("MARGINKIT_DATA is not set")
    return folder


@pytest.fixture
def rng():
    return np.random.default_rng(0)
