"""Chess768: one input per (perspective-relative colour, piece type, square), 768 in all.

For perspective p, a piece of colour c and type t (P N B R Q K = 0..5) on square s (a1 = 0 ..
h8 = 63) has index ``(c == p ? 0 : 384) + 64·t + (p == white ? s : s ^ 56)`` (bullet's
``Chess768``; the black perspective flips ranks). At most 32 active per perspective.
Factoriser: ``i // 64``. Encoded through the shared lookup table (:mod:`.lookup`); the board needs no kings.
"""
from __future__ import annotations

import torch

from .lookup import Grid, TableEncoder
from .spec import CFeature, FeatureSet

NUM_INPUTS = 768
MAX_ACTIVE = 32


def index(g: Grid) -> torch.Tensor:
    """The formula above over a :class:`~.lookup.Grid` (p: perspective colour)."""
    return torch.where(g.colour == g.p, 0, 384) + 64 * g.ptype + (g.s ^ (56 * g.p))


encode = TableEncoder(index, NUM_INPUTS, MAX_ACTIVE, king_relative=False)

CHESS768 = FeatureSet(
    name="chess768", num_inputs=NUM_INPUTS, max_active=MAX_ACTIVE,
    spec="(c==p?0:384)+64*t+(p==white?s:s^56); stm first", encode=encode,
    # factoriser: the (perspective-relative colour, piece type) group, i // 64: 12 virtual features
    # that count material, shared by every square, so that a small data set teaches the net piece
    # values before piece-square detail
    factors=lambda n: torch.arange(n) // 64,
    c=CFeature("FS_CHESS768", "return (c == p ? 0 : 384) + 64 * t + (p == 0 ? s : s ^ 56);"),
)
