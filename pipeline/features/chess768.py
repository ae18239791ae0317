"""Chess768: one input per (perspective-relative colour, piece type, square), 768 in all.

For perspective p, a piece of colour c and type t (P N B R Q K = 0..5) on square s (a1 = 0 ..
h8 = 63) has index ``(c == p ? 0 : 384) + 64·t + (p == white ? s : s ^ 56)`` (bullet's
``Chess768``; the black perspective flips ranks). At most 32 active per perspective.
"""
from __future__ import annotations

import torch

from . import FeatureSet
from .board_tensor import black_to_move, compact, decode_squares

NUM_INPUTS = 768
MAX_ACTIVE = 32


def encode(boards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """boards: (B, 32) uint8 -> (stm_indices, nstm_indices), each (B, 32) int32, −1 = padding."""
    occupied, code, rank = decode_squares(boards)
    sq = torch.arange(64, device=boards.device).expand_as(code)
    colour = code >> 3
    piece = 64 * (code & 7)
    black = black_to_move(boards).long().unsqueeze(1)
    out = []
    for persp in (black, 1 - black):  # stm first, then nstm
        rel_sq = torch.where(persp == 1, sq ^ 56, sq)
        idx = torch.where(colour == persp, 0, 384) + piece + rel_sq
        out.append(compact(idx, occupied, rank, MAX_ACTIVE))
    return out[0], out[1]


CHESS768 = FeatureSet(
    name="chess768", num_inputs=NUM_INPUTS, max_active=MAX_ACTIVE,
    spec="(c==p?0:384)+64*t+(p==white?s:s^56); stm first", encode=encode,
)
