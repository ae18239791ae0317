"""Slow reference encoders on python-chess, one per feature set: the oracle of the tensor encoders.

Written from the published formulas (nnue-pytorch ``halfkp.py`` / ``halfka_v2_hm.py``, bullet's
``ChessBucketsMirrored``, Stockfish 19's ``full_threats.cpp`` and ``pp_3wide.cpp``), piece by piece, without the lookup tables of
``nnue.pipeline.features``. Each returns ``(stm, nstm)`` index lists in ascending order of the
piece's absolute square (a1 = 0 .. h8 = 63), the order the tensor encoders use (threats: by
attacker square, then attacked square; pawn pairs: by lower square, then higher).
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

# --- Stockfish 19's threat inputs (SFNNv16), from Stockfish full_threats.cpp / pp_3wide.cpp and
# nnue-pytorch training_data_loader.cpp, on python-chess's attack sets ---------------------------

# attacked piece types (python-chess 1..6) of each attacker type, in slot order
THREAT_TARGETS = {chess.PAWN: (chess.KNIGHT, chess.ROOK),
                  chess.KNIGHT: (chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN),
                  chess.BISHOP: (chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK),
                  chess.ROOK: (chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK),
                  chess.QUEEN: (chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN)}
_ATTACKERS = [(own, pt) for own in (True, False) for pt in THREAT_TARGETS]  # own P..Q, then enemy P..Q


def _empty_board_attacks(piece_type: int, toward_rank_8: bool, sq: int) -> int:
    """Attack bitboard of a piece on an empty board (pawns only from ranks 2-7)."""
    if piece_type == chess.PAWN:
        if chess.square_rank(sq) in (0, 7):
            return 0
        return chess.BB_PAWN_ATTACKS[chess.WHITE if toward_rank_8 else chess.BLACK][sq]
    if piece_type == chess.KNIGHT:
        return chess.BB_KNIGHT_ATTACKS[sq]
    diag = chess.BB_DIAG_ATTACKS[sq][0]
    straight = chess.BB_RANK_ATTACKS[sq][0] | chess.BB_FILE_ATTACKS[sq][0]
    return {chess.BISHOP: diag, chess.ROOK: straight, chess.QUEEN: diag | straight}[piece_type]


def _threat_offsets():
    """Per relative attacker (own P..Q, enemy P..Q): (base, attack squares in all, offset of
    each from-square), Stockfish's init_threat_offsets."""
    out, total = {}, 0
    for own, pt in _ATTACKERS:
        per_from, count = [], 0
        for sq in range(64):
            per_from.append(count)
            count += chess.popcount(_empty_board_attacks(pt, own, sq))
        out[own, pt] = (total, count, per_from)
        total += 2 * len(THREAT_TARGETS[pt]) * count
    assert total == 59808
    return out


_OFFSETS = _threat_offsets()


def _orientation(board: chess.Board, persp: bool) -> int:
    """Full_Threats' and PP_3Wide's square transform: ranks flipped for black, files flipped when
    the own king is on files e-h (the opposite of HalfKAv2_hm's mirror)."""
    ksq = board.king(persp)
    return (56 if persp == chess.BLACK else 0) ^ (7 if chess.square_file(ksq) >= 4 else 0)


def full_threats(board: chess.Board) -> tuple[list[int], list[int]]:
    out = []
    for persp in _perspectives(board):
        x = _orientation(board, persp)
        lst = []
        for frm, attacker in _pieces(board):
            pt = attacker.piece_type
            if pt == chess.KING or (pt == chess.PAWN and chess.square_rank(frm) in (0, 7)):
                continue
            own = attacker.color == persp
            base, count, per_from = _OFFSETS[own, pt]
            for to in sorted(board.attacks(frm)):
                target = board.piece_at(to)
                if target is None or target.piece_type not in THREAT_TARGETS[pt]:
                    continue
                fo, too = frm ^ x, to ^ x
                if target.piece_type == pt and fo < too:
                    continue  # a pair of the same type counts once
                slot = (target.color != persp) * len(THREAT_TARGETS[pt]) + THREAT_TARGETS[pt].index(target.piece_type)
                below = chess.popcount(_empty_board_attacks(pt, own, fo) & ((1 << too) - 1))
                lst.append(base + slot * count + per_from[fo] + below)
        out.append(lst)
    return out[0], out[1]


def pp_3wide(board: chess.Board) -> tuple[list[int], list[int]]:
    out = []
    pawns = [(sq, pc.color) for sq, pc in _pieces(board)
             if pc.piece_type == chess.PAWN and chess.square_rank(sq) not in (0, 7)]
    for persp in _perspectives(board):
        x = _orientation(board, persp)
        lst = []
        for i, (a, ca) in enumerate(pawns):
            for b, cb in pawns[i + 1:]:
                if abs(chess.square_file(a) - chess.square_file(b)) > 1:
                    continue
                ida = 48 * (ca != persp) + (a ^ x) - 8
                idb = 48 * (cb != persp) + (b ^ x) - 8
                hi, lo = max(ida, idb), min(ida, idb)
                lst.append(hi * (hi - 1) // 2 + lo)
        out.append(lst)
    return out[0], out[1]


def sfnnv16(board: chess.Board) -> tuple[list[int], list[int]]:
    """Full_Threats, then PP_3Wide from 59,808, then HalfKAv2_hm from 64,368."""
    parts = (full_threats(board), pp_3wide(board), halfkav2_hm(board))
    return tuple([*parts[0][q], *(59808 + i for i in parts[1][q]), *(64368 + i for i in parts[2][q])]
                 for q in (0, 1))


#: feature-set name -> reference encoder
REFERENCES = {
    "chess768": chess768,
    "halfkp": halfkp,
    "halfkav2_hm": halfkav2_hm,
    "kb768hm4": lambda b: kb768(b, KB768HM4, True),
    "kb768hm16": lambda b: kb768(b, KB768HM16, True),
    KB768_RANKS_FILES_NAME: lambda b: kb768(b, KB768_RANKS_FILES, False),
    "full_threats": full_threats,
    "pp_3wide": pp_3wide,
    "sfnnv16": sfnnv16,
}
