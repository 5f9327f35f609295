"""An ill-conditioned Nystroem problem and the exact rbf map in extended precision, for
the tests of the referees' bounds on an approximation's rows: 8 points on a line whose
Nystroem map of 7 centres (``random_state=196``) has |K_CC^{-1/2}| ~ 5e4."""
import numpy as np

X = np.array([-5.785810332073745, 0.30916440540321305, -0.16110734287144327,
              0.06821348370442785, -0.3891348141092512, 0.3104629683301154,
              0.07706536299234616, 0.38471175558517695]).reshape(-1, 1)
Y = np.array([1, -1, -1, 1, -1, 1, -1, -1])
GAMMA = 1.805733285190211


def rbf_ld(A, C, g):
    """exp(-g ||a - c||^2) in long double for the rows of A and C."""
    LD = np.longdouble
    A, C = np.asarray(A, dtype=np.float64).astype(LD), np.asarray(C, dtype=np.float64).astype(LD)
    return np.exp(-LD(g) * ((A[:, None, :] - C[None, :, :]) ** 2).sum(-1))
