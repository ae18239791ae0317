"""nnue-forge: the ``nnue`` namespace of the pipeline, trainer, kernels, inference and self-play."""
from nnue import numba_cache as _numba_cache

_numba_cache.choose()  # before numba is imported: a read-only install runs (nnue/numba_cache.py)
