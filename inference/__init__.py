"""CPU inference of integer nets with exact integer results (no Lightning, Hydra or pyarrow).

Entry points: :func:`load`, :func:`load_any` (also an engine's own net file, e.g. a Stockfish
``.nnue``), :func:`evaluate` (packed boards), :func:`evaluate_fens`; :class:`IncrementalAccumulator`
(push/pop moves on one position); :func:`evaluate_sparse` (the block-sparse L1 path, identical
results). Kinds (:mod:`nnue.inference.kinds`): perspective, deep, tiny, sfnnv5 (Stockfish 15.1);
any of them may be a residual net (eval = base + α·net, :mod:`nnue.inference.residual`).
"""
from nnue.spec.quant import QuantScheme  # noqa: F401

from .incremental import IncrementalAccumulator  # noqa: F401
from .api import boards_from_fens, evaluate, evaluate_fens, forward_int  # noqa: F401
from .net import NetFormatError  # noqa: F401
from .kinds.perspective import IntegerNet  # noqa: F401  (the perspective kind's integer net)
from .loader import load, load_any  # noqa: F401
from .sparse_l1 import evaluate_sparse, forward_sparse  # noqa: F401
