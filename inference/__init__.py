"""CPU inference of integer nets with torch integer ops (no Lightning, Hydra or pyarrow).

Entry points: :func:`load`, :func:`evaluate` (packed boards), :func:`evaluate_fens`.
"""
from .net import (IntegerNet, NetFormatError, QuantScheme, boards_from_fens, evaluate,  # noqa: F401
                  evaluate_fens, forward_int, load)
