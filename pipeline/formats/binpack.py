"""Stockfish ``.binpack`` reader, in our own Python (python-chess plays the moves).

Layout (FORMATS.md): blocks of ``"BINP"`` + u32 LE size, holding chains. A chain is a 32-byte
big-endian stem (occupancy u64; 16 bytes of nibbles, low nibble first: 0–11 = white pawn, black
pawn, white knight, … black king, 12 = pawn with a legal en-passant square behind it, 13/14 =
white/black rook with its castling right, 15 = black king with black to move; move u16 with type
in bits 14–15 (0 normal, 1 promotion, 2 castling as king to rook, 3 en passant), from 8–13,
to 2–7, promotion 0–1; score u16 zigzag; ``ply | zigzag(result) << 14``; rule50 u16), then a u16
BE count of further plies and a movetext bit stream read most significant bit first. Each ply:
the moving piece's index among the mover's pieces in ``bitlen(count − 1)`` bits, the destination's
index among that piece's pseudo-legal destinations (pawns: captures, the en-passant square when
an en-passant capture is legal, pushes; a promotion counts four times, N B R Q; kings: attacked
squares not holding an own piece, then one entry per castling right held, queen side first), and
the score as ``zigzag(score + previous score)`` in 5-bit groups (4 data bits, low group first,
high bit = more). Each ply adds 1 to ply and negates the result. Score arithmetic wraps to int16.

A chain that cannot be decoded becomes one reject naming its byte offset; decoding goes on with
the next block.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterator

import chess
import numpy as np

from ..records import MATE_BOUND, VALUE_NONE, FormatError, FormatSpec, ReaderOptions, Record, Reject, read_exact
from ._binary import BitReaderMSB, zigzag_decode
from ._boundaries import starts_finder
from ._write import ChainWriter

MAX_BLOCK = 100 * 1024 * 1024
_STEM_TAIL = struct.Struct(">HHHH")
_PIECES = [chess.Piece(t, c) for t in chess.PIECE_TYPES for c in (chess.WHITE, chess.BLACK)]


def _bitlen(n: int) -> int:
    """Bits needed to store values 0..n−1 (0 when n ≤ 1)."""
    return (n - 1).bit_length() if n > 1 else 0


def _nth_bit(mask: int, n: int) -> int:
    for i, sq in enumerate(chess.scan_forward(mask)):
        if i == n:
            return sq
    raise ValueError(f"index {n} beyond the {chess.popcount(mask)} candidate squares")


def _int16(v: int) -> int:
    return (v + 0x8000) % 0x10000 - 0x8000


def decode_stem(stem: bytes) -> tuple[chess.Board, chess.Move | None, int, int, int]:
    """32-byte stem -> (board, move, score, ply, result stm POV). Raises ValueError."""
    occ = int.from_bytes(stem[:8], "big")
    if chess.popcount(occ) > 32:
        raise ValueError("more than 32 occupied squares")
    board = chess.Board.empty()
    castling = 0
    ep = None
    turn = chess.WHITE
    for i, sq in enumerate(chess.scan_forward(occ)):
        code = stem[8 + (i >> 1)] >> (4 * (i & 1)) & 15
        if code < 12:
            board.set_piece_at(sq, _PIECES[code])
        elif code == 12:
            white = chess.square_rank(sq) == 3
            if chess.square_rank(sq) not in (3, 4):
                raise ValueError(f"en-passant pawn code on {chess.square_name(sq)}")
            board.set_piece_at(sq, chess.Piece(chess.PAWN, white))
            ep = sq - 8 if white else sq + 8
        elif code in (13, 14):
            white = code == 13
            board.set_piece_at(sq, chess.Piece(chess.ROOK, white))
            castling |= chess.BB_SQUARES[sq]
        else:
            board.set_piece_at(sq, chess.Piece(chess.KING, chess.BLACK))
            turn = chess.BLACK
    board.turn = turn
    board.castling_rights = castling
    board.ep_square = ep
    packed_move, score, ply_result, rule50 = _STEM_TAIL.unpack(stem[24:32])
    ply = ply_result & 0x3FFF
    result = zigzag_decode(ply_result >> 14)
    # a result field of 3 decodes to -2: passed on, and pack rejects it as "result out of range"
    board.halfmove_clock = rule50
    board.fullmove_number = ply // 2 + 1
    move = _stem_move(packed_move)
    return board, move, _int16(zigzag_decode(score)), ply, result


def _stem_move(m: int) -> chess.Move | None:
    if m == 0:
        return None
    kind, frm, to = m >> 14, (m >> 8) & 63, (m >> 2) & 63
    promo = (m & 3) + chess.KNIGHT if kind == 1 else None
    return chess.Move(frm, to, promotion=promo)  # castling stays king-to-rook: python-chess reads it


def decode_ply(board: chess.Board, bits: BitReaderMSB) -> chess.Move:
    """Read one movetext move for the side to move of ``board``."""
    us = board.turn
    ours = board.occupied_co[us]
    frm = _nth_bit(ours, bits.read(_bitlen(chess.popcount(ours))))
    kind = board.piece_type_at(frm)
    if kind == chess.PAWN:
        targets = board.occupied_co[not us]
        if board.ep_square is not None and board.has_legal_en_passant():
            targets |= chess.BB_SQUARES[board.ep_square]
        dest = chess.BB_PAWN_ATTACKS[us][frm] & targets
        step = 8 if us == chess.WHITE else -8
        fwd = frm + step
        if 0 <= fwd < 64 and not board.occupied & chess.BB_SQUARES[fwd]:
            dest |= chess.BB_SQUARES[fwd]
            if chess.square_rank(frm) == (1 if us == chess.WHITE else 6):
                fwd2 = fwd + step
                if not board.occupied & chess.BB_SQUARES[fwd2]:
                    dest |= chess.BB_SQUARES[fwd2]
        n = chess.popcount(dest)
        if chess.square_rank(frm) == (6 if us == chess.WHITE else 1):
            idx = bits.read(_bitlen(4 * n))
            return chess.Move(frm, _nth_bit(dest, idx // 4), promotion=chess.KNIGHT + idx % 4)
        return chess.Move(frm, _nth_bit(dest, bits.read(_bitlen(n))))
    if kind == chess.KING:
        dest = chess.BB_KING_ATTACKS[frm] & ~ours
        n = chess.popcount(dest)
        back = chess.BB_RANK_1 if us == chess.WHITE else chess.BB_RANK_8
        rights = board.castling_rights & back
        idx = bits.read(_bitlen(n + chess.popcount(rights)))
        if idx < n:
            return chess.Move(frm, _nth_bit(dest, idx))
        long_rook = chess.A1 if us == chess.WHITE else chess.A8
        short_rook = chess.H1 if us == chess.WHITE else chess.H8
        rook = long_rook if idx == n and rights & chess.BB_SQUARES[long_rook] else short_rook
        return chess.Move(frm, rook)
    dest = board.attacks_mask(frm) & ~ours
    return chess.Move(frm, _nth_bit(dest, bits.read(_bitlen(chess.popcount(dest)))))


def _records(board, move, score, ply, result, loc, game) -> Record:
    none = score == VALUE_NONE
    return Record(fen=board.fen(), score=None if none else score, result=result, ply=ply,
                  move=None if move is None else move.uci(), location=loc, game=game,
                  score_is_mate=not none and abs(score) >= MATE_BOUND, board=board.copy(stack=False))


def read_chain(block: bytes, pos: int, base: int, game: int) -> tuple[list[Record], int]:
    """Decode the chain at ``block[pos:]``; returns (records, position after the chain).
    Raises ValueError (with no records kept) when the chain is corrupt."""
    if pos + 34 > len(block):
        raise ValueError("chain stem cut short")
    board, move, score, ply, result = decode_stem(block[pos:pos + 32])
    count = int.from_bytes(block[pos + 32:pos + 34], "big")
    out = [_records(board, move, score, ply, result, f"byte {base + pos}", game)]
    bits = BitReaderMSB(block, pos + 34)
    last = -score
    for _ in range(count):
        if move is None or not board.is_legal(move):
            raise ValueError(f"move {move} of ply {ply} is not legal, so the movetext cannot go on")
        board.push(move)
        move = decode_ply(board, bits)
        s = _int16(last + zigzag_decode(bits.read_vle16(4)))
        last = -s
        ply += 1
        result = -result
        out.append(_records(board, move, s, ply, result, f"byte {base + pos} ply {ply}", game))
    return out, bits.bytes_used()


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject]:
    offset, game = 0, -1
    while True:
        header = read_exact(stream, 8)
        if not header:
            return
        if len(header) < 8 or header[:4] != b"BINP":
            if offset == 0:
                raise FormatError(f"byte 0: no 'BINP' block header, found {header[:4]!r}")
            yield Reject(f"byte {offset}", "malformed record", f"expected a 'BINP' block header, "
                         f"found {header[:4]!r}; the rest of the file is unreadable", header.hex())
            return
        size = int.from_bytes(header[4:], "little")
        if size > MAX_BLOCK:
            yield Reject(f"byte {offset}", "malformed record", f"block size {size} above 100 MiB; "
                         "the rest of the file is unreadable", header.hex())
            return
        block = read_exact(stream, size)
        base = offset + 8
        offset = base + len(block)
        cut = len(block) < size  # an interrupted copy: keep the whole chains before the cut
        if options.fast:  # compiled chain decoder (pipeline/compiled/binpack.py), same items
            game = yield from _compiled().read_block(block, base, game, read_chain,
                                                     cut_from=size if cut else None)
            if cut:
                return
            continue
        pos = 0
        while pos < len(block):
            game += 1
            try:
                recs, pos = read_chain(block, pos, base, game)
            except (ValueError, IndexError, AssertionError) as e:
                if cut:
                    yield Reject(f"byte {base + pos}", "truncated record", f"block of {size} bytes cut at "
                                 f"{len(block)}: the chain here is incomplete ({e})", "")
                    return
                yield Reject(f"byte {base + pos}", "corrupt chain",
                             f"{e}; the rest of this block is skipped", "")
                break
            yield from recs
        if cut:  # cut at a chain boundary: what is missing is one reject at the cut
            yield Reject(f"byte {base + len(block)}", "truncated record",
                         f"block of {size} bytes cut at {len(block)}", "")
            return


def sniff(head: bytes) -> bool:
    return head.startswith(b"BINP")


def _compiled():
    """The numba chain decoder (:mod:`nnue.pipeline.compiled.binpack`), imported when first used: importing
    it loads numba (0.3 CPU s), which the CLI's parser, importing this registry, must not."""
    from ..compiled import binpack

    return binpack


def find_ranges(path: Path, size: int):
    """Range boundaries: the ``BINP`` block headers (chains never cross blocks; every chain is a
    game), found by a walk over the headers from the start of the file."""
    blocks = []
    with open(path, "rb") as f:
        pos = 0
        while pos + 8 <= size:
            f.seek(pos)
            h = f.read(8)
            n = int.from_bytes(h[4:], "little")
            if h[:4] != b"BINP" or n > MAX_BLOCK or pos + 8 + n > size:
                break
            blocks.append(pos)
            pos += 8 + n
    return starts_finder(np.array(blocks, np.int64))


BLOCK = 1 << 20  # a block is closed once it holds this many bytes (Stockfish's suggestedChunkSize)


class BinpackWriter(ChainWriter):
    """``nnue convert --to binpack``: chains as Stockfish's writer makes them (a row continues the
    row before when its result is negated, its ply one more and its position the one after that
    row's move; :mod:`nnue.pipeline.compiled.chainout`), in ``BINP`` blocks closed at 1 MiB.
    Rows with castling rights binpack cannot hold (Chess960) are not written (counted); plies
    above 16,383 are written modulo 2^14 (counted in ``notes``)."""

    NOT_WRITTEN = "castling rights binpack cannot hold (Chess960)"

    def __init__(self):
        super().__init__()
        self.block = bytearray()

    def links(self, c):
        from ..compiled import chainout

        n = len(c["best"])
        cont, kind = np.zeros(n, np.bool_), np.zeros(n, np.uint8)
        chainout.binpack_links(c["boards"], c["best"], c["result"], c["ply"], cont, kind)
        return cont, kind

    def chains(self, c, cont, kind, lo, hi) -> bytes:
        from ..compiled import chainout

        high = int(np.count_nonzero((c["ply"][lo:hi] > 0x3FFF) & (kind[lo:hi] == 0)))
        if high:
            self.notes["ply above 16383, written modulo 2^14"] = self.notes.get(
                "ply above 16383, written modulo 2^14", 0) + high
        score = np.where(c["none"], VALUE_NONE, c["score"]).astype(np.int64)
        out = np.zeros(34 * (hi - lo) + 8 * (hi - lo) + 64, np.uint8)
        ends = np.zeros(hi - lo, np.int64)
        k = chainout.binpack_chains(c["boards"], c["best"], score, c["result"], c["ply"], cont, kind, lo, hi, out,
                                    ends)
        self.chain_count += k
        pieces, start = [], 0
        for e in ends[:k].tolist():  # a chain never crosses a block
            if len(self.block) >= BLOCK:
                pieces.append(self._close())
            self.block += out[start:e].tobytes()
            start = e
        return b"".join(pieces)

    def finish(self) -> bytes:
        tail = super().finish()
        return tail + (self._close() if self.block else b"")

    def _close(self) -> bytes:
        out = b"BINP" + len(self.block).to_bytes(4, "little") + bytes(self.block)
        self.block = bytearray()
        return out


SPEC = FormatSpec("binpack", read, sniff, score_pov="side to move", result_pov="side to move",
                  doc="Stockfish .binpack", binary=True, extensions=(".binpack",), find_ranges=find_ranges,
                  compiled=_compiled, write_stream=BinpackWriter,
                  score_unit="sf-internal")
