"""SVM family with certified stopping: ``fista``, ``fista_svm``, ``dcd``, ``pegasos``."""
from ._core import *  # noqa: F401,F403
from ._core import (__all__, _CSR_PLACEHOLDER, _DENSE_PLACEHOLDER, _Blocked, _Data,  # noqa: F401
                    _FistaState, run_thresholds)
# the exact-kernel certificate type: registered for ``load_result``
from . import _kernel_certificate  # noqa: F401
