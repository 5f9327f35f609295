"""SVM family with certified stopping: ``fista``, ``fista_svm``, ``dcd``, ``pegasos``.

From "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
arXiv:2512.03947 (cited by its arXiv number in the modules).

Perturbed H-SVM dual (paper section 2.2)::

    maximize g(r) = -1/2 ||H~^T r||^2 + e^T r - mu/2 ||r||^2   over 0 <= r <= gamma,

row i of H~ being y_i (z_i, 1), z_i the (implicitly) centered and scaled feature vector,
and w~(r) = H~^T r = (w, t) the classifier. ``fista_svm`` solves the classical SVM (the
intercept is not regularized): H has rows y_i z_i and the dual gains y^T r = 0.
Defaults (paper section 2.4): gamma = 64/n (``C``), mu = n/128 (so mu gamma = 1/2).

Certified points (paper section 2.3): for any feasible r with ||r - r*|| <= eps, a point
with level - r_i > eps, level = min(gamma, 1/mu) (``certify_level``), has signed margin
> 1 - mu level >= 0 under both w(r) and w(r*) (the paper's gamma when mu gamma < 1, its
assumption; 1/mu otherwise, where 1 - mu gamma < 0 would not mean correct). The
bound eps is kappa ||y_k - r_{k+1}|| for FISTA and ||p(r)||/mu (projected gradient p)
for coordinate descent (section 4), each plus a bound on its own rounding error (summed
in a scaled form so that it cannot underflow); parameters or data whose scale makes the
bound meaningless are refused (``check_scales``). The derivations are written out in
``docs/svm.md``.

The modules, one responsibility each (a module imports only those above it):

==========================  ===========================================================
``_rounding``               constants of the linear solvers' rounding bounds
``_data``                   scaling statistics, the row-block data wrappers, the feature map
``_lipschitz``              upper bounds of ||Z~||_2^2 (Gram matrix + LAPACK, or Lanczos)
``_rules``                  stopping rules ``certified_points`` and ``liblinear``
``_base``                   parameters C, mu, scale; the certified solvers' base class
``_thresholds``             boxes, levels, scale checks, a claim's thresholds from a run
``_certificate``            ``CertifiedPointsCertificate`` and its referee
``_kernel_certificate``     the exact-kernel certificate and its referee
``_kernel``                 ``fista``, ``fista_svm`` and ``dcd`` on an exact kernel
``_fista``                  ``fista``, ``fista_svm``
``_dcd``                    ``dcd``
``_pegasos``                ``pegasos``
==========================  ===========================================================

The Cython cores are ``marginkit.solvers.svm._fast`` and ``_kernel_fast``.

References
----------
.. [1] "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
   arXiv:2512.03947 (2025).
"""
from ._certificate import CertifiedPointsCertificate
from ._data import _Blocked, _Data, scaling_statistics
from ._dcd import DCD
from ._fista import Fista, FistaSVM, _FistaState
from ._kernel_certificate import KernelCertifiedPointsCertificate
from ._lipschitz import lipschitz_bound
from ._pegasos import Pegasos
from ._rules import CertifiedPoints, Liblinear
from ._thresholds import certify_level, run_thresholds

__all__ = ["Fista", "FistaSVM", "DCD", "Pegasos", "CertifiedPoints", "Liblinear",
           "CertifiedPointsCertificate", "KernelCertifiedPointsCertificate",
           "scaling_statistics", "lipschitz_bound", "run_thresholds", "certify_level"]
