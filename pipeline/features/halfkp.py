"""HalfKP: (own king square, piece) pairs of the non-king pieces, Stockfish 12's first NNUE input.

Formula (nnue-pytorch ``halfkp.py``; Stockfish 12 ``half_kp.h``, where PS_END = 641): for
perspective p with own king on square k, a non-king piece of colour c and type t (P N B R Q =
0..4) on square s has index

    1 + o(s) + 64·(2·t + (c ≠ p)) + 641·o(k),   o(x) = x ^ (63·p)

o rotates the board by 180° for black (Stockfish 12 rotates, later nets flip). Index 0 of each
king block is unused (the old "BONA_PIECE_ZERO"). 64 · 641 = 41,024 inputs; kings are not
features, so at most 30 are active. Factoriser: ``i % 641``.
"""
from __future__ import annotations

import torch

from .lookup import KING, Grid, TableEncoder
from .spec import CFeature, FeatureSet

PLANES = 10 * 64 + 1       # PS_END
NUM_INPUTS = 64 * PLANES   # 41,024
MAX_ACTIVE = 30


def index(g: Grid) -> torch.Tensor:
    o = 63 * g.p
    p_idx = 2 * g.ptype + (g.colour != g.p).long()
    idx = 1 + (g.s ^ o) + 64 * p_idx + PLANES * (g.k ^ o)
    return torch.where(g.ptype == KING, -1, idx)


HALFKP = FeatureSet(
    name="halfkp", num_inputs=NUM_INPUTS, max_active=MAX_ACTIVE,
    spec="1+o(s)+64*(2*t+(c!=p))+641*o(k); o(x)=x^(63*p); t: P N B R Q=0..4, kings not features; "
         "k: own king; stm first; ascending absolute square",
    encode=TableEncoder(index, NUM_INPUTS, MAX_ACTIVE),
    factors=lambda n: torch.arange(n) % PLANES,  # factoriser: the piece-square feature without the king square
    c=CFeature("FS_HALFKP", "if (t == 5) return -1;\n"
                            "int rot = p == 0 ? 0 : 63;\n"
                            "return 1 + (s ^ rot) + 64 * (2 * t + (c != p)) + 641L * (k ^ rot);"),
)
