"""The quantisation scheme of integer nets, shared by the trainer (QAT, export) and inference.

Torch-free (dataclasses only): every layer of nnue-forge may import it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class QuantScheme:
    """Quantisation of an integer net: scales, dtypes, rounding and shifts of every layer.

    Perspective nets (bullet's conventions): qa: scale of L0 weights/biases and of the clipped
    activation (v ≤ qa). qb: scale of L1 weights. scale: eval scale to centipawns (eval_cp =
    y · scale). Biases of L1 are at qa·qb. All stored tensors are ``weight_dtype`` (int16),
    rounded to nearest (``torch.round``, half to even); sums are ``sum_dtype`` (int32).
    ft_clip / l1_clip: float weight limits the trainer clamps to, chosen so that every
    quantised weight fits int16 and, for screlu/pairwise, ``v · l1w`` fits int16 at v = qa
    (|l1w| ≤ 127 -> |w| ≤ 127 / qb = 1.984).

    Deep nets (:mod:`nnue.inference.kinds.deep`, Stockfish layer-stack style) add: ``l0_shift``, the
    right shift that brings a product of two L0 activations (≤ qa²) back to u8 (qa = 255,
    shift 8: ≤ 254); dense layers hold ``dense_weight_dtype`` (int8) weights at scale qb and
    ``dense_bias_dtype`` (int32) biases at qa·qb, and hidden dense layers shift their int32
    sums right by :attr:`dense_shift` = log2(qb) back to activation scale qa.
    """

    qa: int = 255
    qb: int = 64
    scale: int = 400
    ft_clip: float = 1.98
    l1_clip: float = 1.98
    rounding: str = "nearest-even"
    weight_dtype: str = "int16"
    sum_dtype: str = "int32"
    l0_shift: int = 8
    dense_weight_dtype: str = "int8"
    dense_bias_dtype: str = "int32"

    @property
    def dense_shift(self) -> int:
        """Deep nets: the right shift after each hidden dense layer, log2(qb). Raises
        ValueError when qb is not a power of two."""
        if self.qb <= 0 or self.qb & (self.qb - 1):
            raise ValueError(f"deep nets need qb to be a power of two, got {self.qb}")
        return self.qb.bit_length() - 1

    def to_dict(self) -> dict:
        return asdict(self)

    #: field -> type a decoded header must hold (bool is refused where int is asked)
    FIELD_TYPES = {"qa": int, "qb": int, "scale": int, "ft_clip": (int, float), "l1_clip": (int, float),
                   "rounding": str, "weight_dtype": str, "sum_dtype": str, "l0_shift": int,
                   "dense_weight_dtype": str, "dense_bias_dtype": str}
