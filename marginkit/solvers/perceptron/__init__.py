"""The perceptron / von Neumann family (Ramdas & Pena 2014)."""
from ._core import (ISNKPVN, NKP, NVN, SNKP, SNKPVN, NormalizedPerceptron, Perceptron,
                    SmoothedIteration, VertexIteration, _IteratedState, _PerceptronFamily,
                    gram_norm_bound)

__all__ = ["Perceptron", "NormalizedPerceptron", "NKP", "SNKP", "NVN", "SNKPVN", "ISNKPVN"]
