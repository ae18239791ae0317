"""viriformat reader: games of a marlinformat header, (move u16, eval i16) pairs, 4 zero bytes.

The header's wdl is the game's final result (white POV: 0 black win, 1 draw, 2 white win) and its
eval is usually 0. Each pair's eval (white POV) scores the position *before* its move. Moves pack
from (0–5), to (6–11), promotion N/B/R/Q (12–13) and a flag (14–15: 1 en passant, 2 castling as
king takes rook, 3 promotion). Chess960 games are common (FORMATS.md), so boards are played in
python-chess's Chess960 mode, which also plays standard chess.
"""
from __future__ import annotations

import struct
from typing import Iterator

import chess

from ..board import unpack, unpack_fen
from . import MATE_BOUND, VALUE_NONE, FormatSpec, ReaderOptions, Record, Reject, read_exact

HEADER = 32
_PAIR = struct.Struct("<Hh")


def decode_move(board: chess.Board, m: int) -> chess.Move:
    frm, to, promo, flag = m & 63, (m >> 6) & 63, (m >> 12) & 3, m >> 14
    return chess.Move(frm, to, promotion=promo + chess.KNIGHT if flag == 3 else None)


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject]:
    offset, game = 0, -1
    while True:
        header = read_exact(stream, HEADER)
        if not header:
            return
        game += 1
        start = offset
        if len(header) < HEADER:
            yield Reject(f"byte {start}", "truncated record", "game header cut short", header.hex())
            return
        offset += HEADER
        try:
            d = unpack(header)
            board = chess.Board(unpack_fen(header), chess960=True)
        except ValueError as e:
            board, bad = None, str(e)
        else:
            bad = None if d["wdl"] <= 2 else f"wdl byte {d['wdl']}"
        white_result = d["wdl"] - 1 if bad is None else 0
        while True:
            pair = read_exact(stream, 4)
            loc = f"byte {offset}"
            if len(pair) < 4:
                yield Reject(loc, "truncated record", "game cut short before its 4 zero bytes", pair.hex())
                return
            offset += 4
            move_bits, ev = _PAIR.unpack(pair)
            if move_bits == 0 and ev == 0:
                break
            if board is None or bad is not None:
                yield Reject(loc, "malformed record", f"game at byte {start}: {bad}", pair.hex())
                continue
            white = board.turn == chess.WHITE
            sign = 1 if white else -1
            move = decode_move(board, move_bits)
            none = abs(ev) == VALUE_NONE
            yield Record(fen=board.fen(), score=None if none else ev * sign, result=white_result * sign,
                         ply=board.ply(), move=move.uci(), location=loc, game=game,
                         score_is_mate=not none and abs(ev) >= MATE_BOUND, board=board.copy(stack=False))
            if not board.is_legal(move):
                board, bad = None, f"illegal move {move.uci()} at byte {offset - 4}; rest of game unusable"
                continue
            board.push(move)


def sniff(head: bytes) -> bool:
    return False  # chosen by extension (.vf, or .bin that is not Stockfish .bin) or --format


SPEC = FormatSpec("viriformat", read, sniff, score_pov="white", result_pov="white (header wdl)",
                  doc="viriformat games (marlinformat header + move/eval pairs)", binary=True)
