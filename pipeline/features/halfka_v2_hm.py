"""HalfKAv2_hm: (king bucket, piece) pairs with horizontal mirroring, Stockfish's input since 2021.

Formula (nnue-pytorch ``halfka_v2_hm.py``; Stockfish ``half_ka_v2_hm.h``): for perspective p
with own king on square k, a piece of colour c and type t (P N B R Q K = 0..5) on square s has

    o(x)   = x ^ (56·p) ^ (7 if file(k) < 4 else 0)
    p_idx  = 2·t + (c ≠ p), except that both kings share plane 10 (p_idx 11 -> 10)
    index  = o(s) + 64·p_idx + 704·KING_BUCKETS[o(k)]

o flips ranks for black and mirrors the board so the own king stands on files e–h;
KING_BUCKETS (below, a1 first) numbers those 32 squares. 11 planes · 64 squares · 32 buckets
= 22,528 inputs; every piece, kings included, is a feature: at most 32 active. Factoriser: ``i % 704``.
"""
from __future__ import annotations

import torch

from .lookup import KING, Grid, TableEncoder
from .spec import CFeature, FeatureSet

# nnue-pytorch's KingBuckets, indexed by the oriented king square (a1 = 0); −1 = unreachable
# (the orientation puts the own king on files e–h). Stockfish's table B(28)…B(0) is the same
# list read through its OrientTBL.
KING_BUCKETS = [
    -1, -1, -1, -1, 31, 30, 29, 28,
    -1, -1, -1, -1, 27, 26, 25, 24,
    -1, -1, -1, -1, 23, 22, 21, 20,
    -1, -1, -1, -1, 19, 18, 17, 16,
    -1, -1, -1, -1, 15, 14, 13, 12,
    -1, -1, -1, -1, 11, 10, 9, 8,
    -1, -1, -1, -1, 7, 6, 5, 4,
    -1, -1, -1, -1, 3, 2, 1, 0,
]
PLANES = 11 * 64           # PS_NB
NUM_INPUTS = 32 * PLANES   # 22,528
MAX_ACTIVE = 32


def index(g: Grid) -> torch.Tensor:
    orient = torch.where(g.k % 8 < 4, 7, 0) ^ (56 * g.p)
    p_idx = 2 * g.ptype + (g.colour != g.p).long()
    p_idx = torch.where(g.ptype == KING, 10, p_idx)
    bucket = torch.tensor(KING_BUCKETS)[g.k ^ orient]
    return (g.s ^ orient) + 64 * p_idx + PLANES * bucket


HALFKAV2_HM = FeatureSet(
    name="halfkav2_hm", num_inputs=NUM_INPUTS, max_active=MAX_ACTIVE,
    spec="o(s)+64*(2*t+(c!=p), kings 10)+704*KB[o(k)]; o(x)=x^(56*p)^(file(k)<4?7:0); "
         "KB=" + ",".join(map(str, KING_BUCKETS)) + "; k: own king; stm first; ascending absolute square",
    encode=TableEncoder(index, NUM_INPUTS, MAX_ACTIVE),
    # factoriser: the piece-square feature without the king bucket (nnue-pytorch's virtual "A" features)
    factors=lambda n: torch.arange(n) % PLANES,
    # KB(x) for the oriented king (files e-h) = 4 (7 - rank(x)) + (7 - file(x))
    c=CFeature("FS_HALFKAV2_HM", "int o = (p == 0 ? 0 : 56) ^ (k % 8 < 4 ? 7 : 0);\n"
                                 "int ok = k ^ o;\n"
                                 "int kb = 4 * (7 - ok / 8) + (7 - ok % 8);\n"
                                 "int plane = t == 5 ? 10 : 2 * t + (c != p);\n"
                                 "return (s ^ o) + 64 * plane + 704L * kb;"),
)
