"""Linear algebra shared by the solvers: the normalized signed Gram operator and row norms."""
