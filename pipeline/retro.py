"""Could the last move have produced this position's checks? Retrograde analysis of double checks.

python-chess's ``Board.status()`` refuses three or more checkers, two checkers on one line
through the king, and checks an en-passant double push cannot explain. Other double checks no
move can produce still pass it (two knights, a knight and a pawn, a rook and a rook on the king's
file and rank, ...). :func:`double_check_possible` decides them by the rules: it generates every
*un-move* of the side that just moved — each of its pieces taken back from its square to every
square it could have come from (pawn pushes and double pushes, captures with a piece of the side
to move put back, en passant, promotions undone) — and asks whether one of the positions before
gives a legal position: the side that is now to move must not have been in check then, since its
opponent was to move. A double check is possible iff some un-move passes. Castling un-moves are
not generated: a position the mover could have castled into (its king on the c- or g-file of its
back rank with a rook beside it on the d- or f-file) is accepted. Tested against an independent
forward enumeration with python-chess's move generator (tests/robust/test_impossible_checks.py).
"""
from __future__ import annotations

import chess

_BLOCKER = chess.KNIGHT  # a piece of the side to move put back by an un-capture (it attacks nothing of its own)


def _unmove_ok(board: chess.Board, piece: chess.Piece, t: int, f: int, as_type: int,
               capture: bool, ep_victim: int | None = None) -> bool:
    """Does the position before ``piece`` (a ``as_type`` then) moved f -> t leave the side now to
    move out of check? (Its opponent was to move then, so its king could not have been attacked.)"""
    them, us = piece.color, not piece.color
    before = board.copy(stack=False)
    before.remove_piece_at(t)
    before.set_piece_at(f, chess.Piece(as_type, them))
    if capture:
        before.set_piece_at(t, chess.Piece(_BLOCKER, us))
    if ep_victim is not None:
        before.set_piece_at(ep_victim, chess.Piece(chess.PAWN, us))
    king = before.king(us)
    return king is not None and not before.attackers_mask(them, king)


def double_check_possible(board: chess.Board) -> bool:
    """Can the side not to move have given this position's check by its last move? (Call it for
    positions with two checkers that pass python-chess's status checks.)"""
    them = not board.turn
    forward = 8 if them == chess.WHITE else -8
    last_rank = 7 if them == chess.WHITE else 0
    back = 0 if them == chess.WHITE else 7
    k = board.king(them)
    if k is not None and chess.square_rank(k) == back:  # it may have castled: accepted (docstring)
        for ksq, rsq in ((chess.G1, chess.F1), (chess.C1, chess.D1)):
            ksq, rsq = ksq ^ (56 * back // 7), rsq ^ (56 * back // 7)
            if k == ksq and board.piece_at(rsq) == chess.Piece(chess.ROOK, them):
                return True
    empty = ~board.occupied
    for t in chess.scan_forward(board.occupied_co[them]):
        piece = board.piece_at(t)
        pt = piece.piece_type
        cands: list[tuple[int, int, bool, int | None]] = []  # (from, type before, capture, ep victim)
        if pt == chess.PAWN or (chess.square_rank(t) == last_rank and pt != chess.KING):
            was = chess.PAWN
            if chess.square_rank(t) in (0, 7) and pt == chess.PAWN:
                continue  # a pawn on a back rank: refused elsewhere
            if pt != chess.PAWN and chess.square_rank(t) != last_rank:
                continue
            f = t - forward
            if 0 <= f < 64 and empty & chess.BB_SQUARES[f]:
                cands.append((f, was, False, None))
                f2 = f - forward
                start_rank = 1 if them == chess.WHITE else 6
                if 0 <= f2 < 64 and chess.square_rank(f2) == start_rank and empty & chess.BB_SQUARES[f2] \
                        and pt == chess.PAWN:
                    cands.append((f2, was, False, None))
            for df in (-1, 1):
                fc = t - forward + df
                if 0 <= fc < 64 and abs(chess.square_file(fc) - chess.square_file(t)) == 1 \
                        and empty & chess.BB_SQUARES[fc]:
                    cands.append((fc, was, True, None))
                    ep_rank = 5 if them == chess.WHITE else 2
                    victim = t - forward
                    if pt == chess.PAWN and chess.square_rank(t) == ep_rank and empty & chess.BB_SQUARES[victim]:
                        cands.append((fc, was, False, victim))
        if pt != chess.PAWN:  # the piece itself moved (a promoted piece may also have moved since)
            if pt in (chess.KNIGHT, chess.KING):
                froms = (chess.BB_KNIGHT_ATTACKS if pt == chess.KNIGHT else chess.BB_KING_ATTACKS)[t] & empty
            else:
                froms = 0
                occ = board.occupied & ~chess.BB_SQUARES[t]
                if pt in (chess.BISHOP, chess.QUEEN):
                    froms |= chess.BB_DIAG_ATTACKS[t][chess.BB_DIAG_MASKS[t] & occ]
                if pt in (chess.ROOK, chess.QUEEN):
                    froms |= (chess.BB_RANK_ATTACKS[t][chess.BB_RANK_MASKS[t] & occ]
                              | chess.BB_FILE_ATTACKS[t][chess.BB_FILE_MASKS[t] & occ])
                froms &= empty
            for f in chess.scan_forward(froms):
                cands.append((f, pt, False, None))
                cands.append((f, pt, True, None))
        for f, was, capture, victim in cands:
            if _unmove_ok(board, piece, t, f, was, capture, victim):
                return True
    return False
