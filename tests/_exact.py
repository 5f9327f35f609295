"""Exact rational linear algebra for the tests' references (``fractions.Fraction``): the
solutions the certificates are checked against, computed without floating point."""


def solve_exact(A, b):
    """x with A x = b, for a nonsingular square A (a list of rows) and b, whose entries
    are Fractions or ints: Gauss-Jordan elimination, exact."""
    q = len(A)
    M = [list(row) + [bi] for row, bi in zip(A, b)]
    for c in range(q):
        piv = next(i for i in range(c, q) if M[i][c] != 0)
        M[c], M[piv] = M[piv], M[c]
        for i in range(q):
            if i != c and M[i][c] != 0:
                f = M[i][c] / M[c][c]
                M[i] = [a - f * e for a, e in zip(M[i], M[c])]
    return [M[j][q] / M[j][j] for j in range(q)]
