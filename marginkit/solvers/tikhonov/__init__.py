"""Iterated Tikhonov, the proximal point algorithm on the empirical risk (Beugnot et al. 2021)."""
from ._core import (IteratedTikhonov, NewtonDecrement, NewtonDecrementCertificate, NystroemMap,
                    _link_bounds, decrement_schedule, iterated_tikhonov_filter, run_targets,
                    spectral_filter_path)

__all__ = ["IteratedTikhonov", "NewtonDecrement", "NewtonDecrementCertificate",
           "NystroemMap", "decrement_schedule", "iterated_tikhonov_filter",
           "spectral_filter_path"]
