"""viriformat reader: games of a marlinformat header, (move u16, eval i16) pairs, 4 zero bytes.

The header's wdl is the game's final result (white POV: 0 black win, 1 draw, 2 white win) and its
eval is usually 0. Each pair's eval (white POV) scores the position *before* its move. Moves pack
from (0–5), to (6–11), promotion N/B/R/Q (12–13) and a flag (14–15: 1 en passant, 2 castling as
king takes rook, 3 promotion). Chess960 games are common (FORMATS.md), so boards are played in
python-chess's Chess960 mode, which also plays standard chess.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterator

import chess
import numpy as np

from ..board import unpack, unpack_fen
from ..records import MATE_BOUND, VALUE_NONE, FormatSpec, PackedRows, ReaderOptions, Record, Reject, read_exact
from ._boundaries import starts_finder
from ._write import ChainWriter
from ..chessrules import decode_move

HEADER = 32
_PAIR = struct.Struct("<Hh")


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """Records in file order. With ``options.fast`` (the default) the compiled core
    (:mod:`nnue.pipeline.compiled.viri`) plays and validates whole games and yields runs of
    positions as PackedRows; the games (or rests of games) it does not settle are read by
    :func:`read_game` / :func:`read_pairs`, as on the reference path (``fast=False``)."""
    if options.fast:
        yield from _read_compiled(stream)
        return
    offset, game = 0, -1
    while True:
        game += 1
        offset = yield from read_game(stream, offset, game)
        if offset is None:
            return


def read_game(stream, offset: int, game: int):
    """Yield the items of the game whose header is at byte ``offset``; return the byte after its
    4 zero bytes, or None at the end of the file (also after a game cut short)."""
    header = read_exact(stream, HEADER)
    if not header:
        return None
    start = offset
    if len(header) < HEADER:
        yield Reject(f"byte {start}", "truncated record", "game header cut short", header.hex())
        return None
    offset += HEADER
    try:
        d = unpack(header)
        board = chess.Board(unpack_fen(header), chess960=True)
    except ValueError as e:
        board, bad = None, str(e)
    else:
        bad = None if d["wdl"] <= 2 else f"wdl byte {d['wdl']}"
    white_result = d["wdl"] - 1 if bad is None else 0
    return (yield from read_pairs(stream, offset, start, game, board, bad, white_result))


def read_pairs(stream, offset: int, start: int, game: int, board, bad, white_result: int):
    """Yield the items of a game's (move, eval) pairs from byte ``offset`` on, playing them on
    ``board`` (None, with ``bad`` saying why, when the game is unusable); return the byte after
    the game's 4 zero bytes, or None when the file ends first."""
    while True:
        pair = read_exact(stream, 4)
        loc = f"byte {offset}"
        if len(pair) < 4:
            yield Reject(loc, "truncated record", "game cut short before its 4 zero bytes", pair.hex())
            return None
        offset += 4
        move_bits, ev = _PAIR.unpack(pair)
        if move_bits == 0 and ev == 0:
            return offset
        if board is None or bad is not None:
            yield Reject(loc, "malformed record", f"game at byte {start}: {bad}", pair.hex())
            continue
        white = board.turn == chess.WHITE
        sign = 1 if white else -1
        move = decode_move(move_bits)
        none = abs(ev) == VALUE_NONE
        yield Record(fen=board.fen(), score=None if none else ev * sign, result=white_result * sign,
                     ply=board.ply(), move=move.uci(), location=loc, game=game,
                     score_is_mate=not none and abs(ev) >= MATE_BOUND, board=board.copy(stack=False))
        if not board.is_legal(move):
            board, bad = None, f"illegal move {move.uci()} at byte {offset - 4}; rest of game unusable"
            continue
        board.push(move)


CHUNK = 1 << 22


class _Locations:
    """Lazy "byte N" locations of a run of rows (no string per row until asked)."""

    def __init__(self, offsets):
        self.offsets = offsets

    def __len__(self):
        return len(self.offsets)

    def __getitem__(self, i):
        return f"byte {int(self.offsets[i])}"


class _View:
    """A read-only stream over ``buf[pos:]`` (no copy of the buffer)."""

    def __init__(self, buf, pos: int):
        self.buf, self.pos = buf, pos

    def read(self, n: int) -> bytes:
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += len(out)
        return out


def _compiled():
    """The numba game decoder (:mod:`nnue.pipeline.compiled.viri`), imported when first used: importing
    it loads numba (0.3 CPU s), which the CLI's parser, importing this registry, must not."""
    from ..compiled import viri

    return viri


def _read_compiled(stream):
    viri = _compiled()
    b = viri.buffers(1 << 16)
    bb, pc, st = np.zeros(16, np.uint64), np.full(64, -1, np.int8), np.zeros(4, np.int64)
    scratch = np.zeros((1, 32), np.uint8)
    buf, base, game, eof = bytearray(), 0, -1, False
    while True:
        if not eof:
            chunk = read_exact(stream, CHUNK)
            eof = len(chunk) < CHUNK
            buf += chunk
        if not buf:
            return
        data = np.frombuffer(buf, np.uint8)
        pos = 0
        while True:
            rows, new, game, status, pair, start, white_result = viri.decode_games(
                data, pos, len(data), eof, game, bb, pc, st, *(b[k] for k in viri.OUT))
            if rows:
                yield from _items(b, rows, base)
            pos = new
            if status == viri.END or status == viri.NEED:
                break
            if status == viri.GAME:
                game += 1
                end = yield from read_game(_View(buf, pos), base + pos, game)
                if end is None:
                    return
                pos = end - base
            elif status == viri.PAIR:
                viri.pack_state(bb, pc, st, scratch)
                board = viri.board_from_state(scratch[0].tobytes(), int(st[2]), int(st[3]))
                end = yield from read_pairs(_View(buf, pair), base + pair, base + start, game, board,
                                            None, int(white_result))
                pos = end - base
        del data
        del buf[:pos]
        base += pos
        if eof and not buf:
            return


def _items(b: dict, rows: int, base: int):
    """PackedRows runs and Records (kind 1) of the first ``rows`` rows of the buffers, in order."""
    viri = _compiled()
    special = np.flatnonzero(b["kind"][:rows]).tolist()
    lo = 0
    for i in special + [rows]:
        if i > lo:
            sl = slice(lo, i)
            loc = b["loc"][sl] + base
            yield PackedRows(board=b["board"][sl].copy(), score=b["score"][sl].copy(), result=b["result"][sl].copy(),
                             ply=b["ply"][sl].copy(), piece_count=b["piece_count"][sl].copy(),
                             in_check=b["in_check"][sl].copy(), game=b["game"][sl].copy(), flags=b["flags"][sl].copy(),
                             first=f"byte {int(loc[0])}", locations=_Locations(loc),
                             best_move=b["best_move"][sl].copy(), best_move_is_capture=b["capture"][sl].copy(),
                             has_move=b["has_move"][sl].copy())
        if i == rows:
            break
        board = viri.board_from_state(b["state"][i].tobytes(), int(b["half"][i]), int(b["full"][i]))
        ev = int(b["raw_ev"][i])
        sign = 1 if board.turn == chess.WHITE else -1
        none = abs(ev) == VALUE_NONE
        move = decode_move(int(b["raw_move"][i]))
        yield Record(fen=board.fen(), score=None if none else ev * sign, result=int(b["result"][i]),
                     ply=board.ply(), move=move.uci(), location=f"byte {int(b['loc'][i]) + base}",
                     game=int(b["game"][i]), score_is_mate=not none and abs(ev) >= MATE_BOUND, board=board)
        lo = i + 1


def sniff(head: bytes) -> bool:
    return False  # chosen by extension (.vf, or .bin that is not Stockfish .bin) or --format


def find_ranges(path: Path, size: int):
    """Range boundaries: the games' headers, found by a compiled walk over the games (header,
    pairs up to the 4 zero bytes) from the start of the file
    (:func:`nnue.pipeline.compiled.ranges.viri_game_starts`, imported here: it loads numba)."""
    from ..compiled.ranges import viri_game_starts

    if size < 4:
        return starts_finder(np.zeros(0, np.int64))
    words = np.memmap(path, dtype="<u4", mode="r", shape=(size // 4,))
    return starts_finder(viri_game_starts(words, size))


class ViriWriter(ChainWriter):
    """``nnue convert --to viriformat``: games as viriformat stores them (a header, then one
    (move, eval white POV) pair per position, then 4 zero bytes; a row continues the row before
    when its result is negated and its board is that row's after its move,
    :mod:`nnue.pipeline.compiled.chainout`). Rows without a move are not written (counted)."""

    NOT_WRITTEN = "no move (a viriformat position is a move and its eval)"

    def links(self, c):
        from ..compiled import chainout

        n = len(c["best"])
        cont, kind = np.zeros(n, np.bool_), np.zeros(n, np.uint8)
        chainout.viri_links(c["boards"], c["best"], c["result"], cont, kind)
        return cont, kind

    def chains(self, c, cont, kind, lo, hi) -> bytes:
        from ..compiled import chainout

        out = np.zeros(40 * (hi - lo) + 64, np.uint8)
        ends = np.zeros(hi - lo, np.int64)
        k = chainout.viri_games(c["boards"], c["best"], c["score"], c["none"], c["result"], cont, kind, lo, hi,
                                out, ends)
        self.chain_count += k
        return out[:int(ends[k - 1]) if k else 0].tobytes()


# .bin is Stockfish .bin when its size and first record say so, else viriformat (detect_format)
SPEC = FormatSpec("viriformat", read, sniff, score_pov="white", result_pov="white (header wdl)",
                  doc="viriformat games (marlinformat header + move/eval pairs)", binary=True,
                  extensions=(".vf", ".viri", ".bin"), find_ranges=find_ranges,
                  detail_offsets=r"(?<=at )(byte) (\d+)", compiled=_compiled, write_stream=ViriWriter)
