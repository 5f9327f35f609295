"""Iterated Tikhonov, a.k.a. the proximal point algorithm on the empirical risk.

From G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
Self-Concordant Losses via Iterative Regularization", NeurIPS 2021 (Beugnot et al. 2021).

Definition 1 (Eq. 4): theta^0 = 0 and, for k < t,

    theta^{k+1} = argmin_theta  L_hat(theta) + lam/2 ||theta - theta^k||^2,
    L_hat(theta) = 1/n sum_i loss(y_i, theta(x_i)),

for the logistic loss (labels +-1) or the squared loss (regression). With sample
weights w (``solve(..., sample_weight=w)``) the empirical risk is the weighted
L_hat(theta) = 1/n sum_i w_i loss(y_i, theta(x_i)), normalized by the number of rows n
as the unweighted one (scikit-learn's LogisticRegression minimizes sum_i w_i loss_i
+ ||theta||^2 / (2 C), the same problem for C = 1 / (n lam)). t = 1 is plain
Tikhonov (kernel ridge / regularized logistic regression); t proximal steps give the
spectral filter g_lam^t(s) = (1 - (lam/(s + lam))^t) / s of Eq. 8 for the squared loss
and qualification t (Theorem 1).

Each subproblem is solved by a damped Newton method stopped on the Newton decrement
nu = ||grad||_{H^{-1}} (Eq. 19) with the schedule of Proposition 1: subproblem k is
solved to nu <= eps 1.4^{k - t} / t, which guarantees nu <= eps on the exact final
subproblem (Proposition 7 with c = 1/2). The ``newton_decrement`` stopping rule owns
the schedule; one ``state.step()`` is one Newton iteration (a subproblem that meets
its target hands over to the next one at the start of the following step).

Representations
---------------
* primal: kernels with an explicit ``feature_map`` (``linear``: Phi = X itself, dense or
  CSR, never densified; approximations such as Nystroem: an (n, m) array). Newton
  systems are (d, d) (Cholesky through LAPACK) or solved by preconditioned conjugate
  gradients for large dense feature maps (``newton_solver="cg"``): memory O(n m).
* Gram: any other kernel through the representer theorem, theta = sum_i beta_i Phi(x_i),
  beta in R^n (Eq. 6); the Newton system is reduced to the symmetric positive definite
  (n, n) matrix D^{1/2} K D^{1/2} / n + lam I. Memory O(n^2): use ``n_components``
  (Nystroem, section 3.2) for large n.

The squared loss also has the closed form of the spectral filter (appendix E.2),
``method="spectral_filter"``.

Blocks
------
The solver is written once over ``problem.executor`` (``marginkit._executors``): the
state (``_TikhonovState``: proximal steps, guarded Newton, schedule, chain certificate)
does the O(p) work and calls block kernels (``_k_tikhonov`` on each block's
``_BlockRows``) for every pass over the rows, adding their partial sums in block order.
In memory there is one block holding all rows (the ``_fast`` passes on the
whole data); on a dask array the blocks are the chunks held by the workers, so the same
iterations run there (linear kernel: ``blocked_limits`` says what cannot be split by
rows).

Modules
-------
``_schedule``         the decrement schedule of Proposition 1, ``newton_decrement`` rule
``_losses``           the logistic and squared losses (solver, numpy and referee forms)
``_representation``   feature maps, Nystroem and exact kernels (``ExactKernelMap``)
``_rows``             the block kernels: the data passes over the rows of Phi
``_newton``           the guarded damped Newton method on one subproblem
``_precond``          preconditioned conjugate gradients (``newton_solver="cg"``)
``_filter``           the spectral filter, closed form of the squared loss
``_state``            the proximal point driver (``t``, ``t="auto"``)
``_decrement_bound``  the referee's proven bound on a Newton decrement
``_certificate``      ``NewtonDecrementCertificate`` and ``run_targets``
``_solver``           the ``iterated_tikhonov`` solver

References
----------
G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with Self-Concordant
Losses via Iterative Regularization", Advances in Neural Information Processing Systems 34
(NeurIPS 2021).
"""
from ...kernels.approximation import NystroemMap
from ._certificate import NewtonDecrementCertificate, run_targets
from ._decrement_bound import _link_bounds
from ._filter import iterated_tikhonov_filter, spectral_filter_path
from ._representation import ExactKernelMap, blocked_limits, check_gram_budget, gram_matrix
from ._schedule import (DEFAULT_TOL, KAPPA, NewtonDecrement, decrement_schedule, default_tol,
                        rule_schedule)
from ._solver import IteratedTikhonov

__all__ = ["IteratedTikhonov", "NewtonDecrement", "NewtonDecrementCertificate",
           "NystroemMap", "decrement_schedule", "iterated_tikhonov_filter",
           "spectral_filter_path"]
