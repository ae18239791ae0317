"""Slow reference encoders on python-chess, one per feature set: the oracle of the tensor encoders.

Written from the published formulas (nnue-pytorch ``halfkp.py`` / ``halfka_v2_hm.py``, bullet's
``ChessBucketsMirrored``), piece by piece, without the lookup tables of
``nnue.pipeline.features``. Each returns ``(stm, nstm)`` index lists in ascending order of the
piece's absolute square (a1 = 0 .. h8 = 63), the order the tensor encoders use.
"""
from __future__ import annotations

import chess

# nnue-pytorch halfka_v2_hm.py, indexed by the oriented king square
HALFKA_KING_BUCKETS = [
    -1, -1, -1, -1, 31, 30, 29, 28,
    -1, -1, -1, -1, 27, 26, 25, 24,
    -1, -1, -1, -1, 23, 22, 21, 20,
    -1, -1, -1, -1, 19, 18, 17, 16,
    -1, -1, -1, -1, 15, 14, 13, 12,
    -1, -1, -1, -1, 11, 10, 9, 8,
    -1, -1, -1, -1, 7, 6, 5, 4,
    -1, -1, -1, -1, 3, 2, 1, 0,
]


def _pieces(board: chess.Board):
    return [(sq, board.piece_at(sq)) for sq in sorted(board.piece_map())]


def _perspectives(board: chess.Board):
    return (board.turn, not board.turn)


def chess768(board: chess.Board) -> tuple[list[int], list[int]]:
    out = []
    for persp in _perspectives(board):
        rel = 0 if persp == chess.WHITE else 56
        out.append([(0 if pc.color == persp else 384) + 64 * (pc.piece_type - 1) + (sq ^ rel)
                    for sq, pc in _pieces(board)])
    return out[0], out[1]


def halfkp(board: chess.Board) -> tuple[list[int], list[int]]:
    out = []
    for persp in _perspectives(board):
        def orient(sq: int) -> int:  # 180° rotation for black
            return sq if persp == chess.WHITE else 63 - sq
        ksq = orient(board.king(persp))
        lst = []
        for sq, pc in _pieces(board):
            if pc.piece_type == chess.KING:
                continue
            p_idx = (pc.piece_type - 1) * 2 + (pc.color != persp)
            lst.append(1 + orient(sq) + p_idx * 64 + ksq * 641)
        out.append(lst)
    return out[0], out[1]


def halfkav2_hm(board: chess.Board) -> tuple[list[int], list[int]]:
    out = []
    for persp in _perspectives(board):
        ksq = board.king(persp)

        def orient(sq: int) -> int:
            return (7 * (ksq % 8 < 4)) ^ (56 * (persp == chess.BLACK)) ^ sq
        lst = []
        for sq, pc in _pieces(board):
            p_idx = (pc.piece_type - 1) * 2 + (pc.color != persp)
            if p_idx == 11:
                p_idx -= 1
            lst.append(orient(sq) + p_idx * 64 + HALFKA_KING_BUCKETS[orient(ksq)] * 704)
        out.append(lst)
    return out[0], out[1]


def kb768(board: chess.Board, buckets: list[int], mirrored: bool) -> tuple[list[int], list[int]]:
    """buckets: 32 entries (files a–d, rank 1 first) if mirrored, else 64, of the king square
    seen from the perspective (rank 1 = own back rank)."""
    out = []
    for persp in _perspectives(board):
        rel = 0 if persp == chess.WHITE else 56
        ksq = board.king(persp) ^ rel
        if mirrored:  # bullet's expansion of a 32-entry map, and its flip
            bucket = buckets[(ksq // 8) * 4 + [0, 1, 2, 3, 3, 2, 1, 0][ksq % 8]]
            flip = 7 if ksq % 8 > 3 else 0
        else:
            bucket, flip = buckets[ksq], 0
        out.append([768 * bucket + (0 if pc.color == persp else 384) + 64 * (pc.piece_type - 1)
                    + (sq ^ rel ^ flip) for sq, pc in _pieces(board)])
    return out[0], out[1]


KB768HM4 = [0, 0, 1, 1] + [2] * 4 + [3] * 24
KB768HM16 = [0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9, 10, 10, 11, 11,
             12, 12, 13, 13, 12, 12, 13, 13, 14, 14, 15, 15, 14, 14, 15, 15]
# a non-mirrored 64-entry map used by the tests: bucket = own-side half of the board x wing
KB768_RANKS_FILES = [(0 if r < 4 else 2) + (0 if f < 4 else 1) for r in range(8) for f in range(8)]
KB768_RANKS_FILES_NAME = "kb768:" + "/".join(["00001111"] * 4 + ["22223333"] * 4)

#: feature-set name -> reference encoder
REFERENCES = {
    "chess768": chess768,
    "halfkp": halfkp,
    "halfkav2_hm": halfkav2_hm,
    "kb768hm4": lambda b: kb768(b, KB768HM4, True),
    "kb768hm16": lambda b: kb768(b, KB768HM16, True),
    KB768_RANKS_FILES_NAME: lambda b: kb768(b, KB768_RANKS_FILES, False),
}
