"""bulletformat reader: 32-byte ``ChessBoard`` records (bullet's training format).

The board is stored from the side to move's view (flipped when black is to move), with nibble
bit 3 marking the opponent's pieces; score int16 and result (0 loss, 1 draw, 2 win) are side-to-
move POV; side to move, castling rights, en passant and the move counters are not stored
(FORMATS.md). So each record is read as the position *seen by the side to move*: the side to move
plays white, which is exact for colour-symmetric feature sets and for the score and result, but
the true colours are lost. Ply is unknown; each record counts as its own game (no game structure).
"""
from __future__ import annotations

import struct
from typing import Iterator

from ..board import NO_EP, unpack_fen
from . import MATE_BOUND, VALUE_NONE, FormatSpec, PackedRows, ReaderOptions, Record, Reject
from ._binary import emit_runs, fixed_blocks, fixed_records

SIZE = 32
_TAIL = struct.Struct("<hBBB3s")


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """Records in file order; with ``options.fast`` (the default), runs of records validated in
    bulk come as PackedRows (:mod:`nnue.pipeline.fastcheck`), the rest one by one."""
    if not options.fast:
        yield from _read_slow(stream, options)
        return
    for item in fixed_blocks(stream, SIZE):
        if isinstance(item, Reject):
            yield item
        else:
            yield from _fast_block(*item)


def _fast_block(offset: int, recs):
    import numpy as np

    from ..fastcheck import R, REASONS, _lsb_rev, clear_unused_nibbles
    from ..compiled.boards import check_boards  # numba twin of fastcheck.check_boards
    from ..schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE

    n = len(recs)
    score = recs[:, 24:26].copy().view("<i2").ravel().astype(np.int64)
    result_byte = recs[:, 26].astype(np.int64)
    ksq, opp_ksq = recs[:, 27].astype(np.int64), recs[:, 28].astype(np.int64)
    none = np.abs(score) == VALUE_NONE
    board = np.zeros((n, 32), dtype=np.uint8)
    board[:, :24] = recs[:, :24]
    board[:, 24] = NO_EP
    board[:, 26] = 1  # fullmove 1, little-endian u16
    board[:, 28:30] = np.where(none, 0, score).astype("<i2").view(np.uint8).reshape(n, 2)
    board[:, 30] = np.minimum(result_byte, 255)
    chk = check_boards(board)
    sel = np.nonzero(chk.reason != R["malformed record"])[0]
    if len(sel):
        sub = board[sel]
        clear_unused_nibbles(sub)
        board[sel] = sub
    # piece types above 5 (incl. 6, which marlinformat reads as a castling rook) are malformed here
    bits = np.unpackbits(recs[:, :8], axis=1, bitorder="little").astype(bool)
    nib = recs[:, 8:24]
    nibbles = np.stack([nib & 15, nib >> 4], axis=2).reshape(n, 32)
    slot = np.arange(32) < np.minimum(bits.sum(1), 32)[:, None]
    bad_type = ((nibbles & 7) > 5) & slot
    result_bad = result_byte > 2
    malformed = ~result_bad & (bad_type.any(1) | (chk.reason == R["malformed record"]))
    code_at = np.where(bits, np.take_along_axis(nibbles, np.clip(np.cumsum(bits, 1) - 1, 0, 31), 1), 255)
    own_k = np.packbits((code_at & 15) == 5, axis=1, bitorder="little").view("<u8").ravel()
    opp_k = np.packbits((code_at & 15) == 13, axis=1, bitorder="little").view("<u8").ravel()
    own_sq = np.where(own_k != 0, 63 - _lsb_rev(own_k), -1)
    opp_sq = np.where(opp_k != 0, 63 - _lsb_rev(opp_k), -1)
    kings_bad = ~result_bad & ~malformed & ((own_sq != ksq) | (opp_sq != (opp_ksq ^ 56)))
    readable = ~result_bad & ~malformed & ~kings_bad
    status = readable & (chk.reason != 0)
    score_bad = readable & ~status & (score < -32767)
    slow = readable & ~status & ~score_bad & chk.slow
    ok = readable & ~status & ~score_bad & ~slow
    rejects = [(i, "result out of range", f"result byte {result_byte[i]}") for i in np.nonzero(result_bad)[0]]
    rejects += [(i, "malformed record", "piece type above 5 (K) or bad occupancy") for i in np.nonzero(malformed)[0]]
    rejects += [(i, "king square mismatch", f"board kings ({own_sq[i]}, {opp_sq[i]}), fields "
                 f"({ksq[i]}, {opp_ksq[i]} ^ 56)") for i in np.nonzero(kings_bad)[0]]
    rejects += [(i, REASONS[chk.reason[i]], "") for i in np.nonzero(status)[0]]
    rejects += [(i, "score out of int16 range", str(score[i])) for i in np.nonzero(score_bad)[0]]
    game = offset // SIZE + np.arange(n, dtype=np.int64)
    flags = ((none * FLAG_SCORE_NONE) | ((~none & (np.abs(score) >= MATE_BOUND)) * FLAG_SCORE_MATE)
             | FLAG_PLY_UNKNOWN).astype(np.uint8)

    def rows(lo, hi):
        return PackedRows(board=board[lo:hi], score=np.where(none, 0, score)[lo:hi].astype(np.int16),
                          result=(result_byte[lo:hi] - 1).astype(np.int8), ply=np.zeros(hi - lo, np.uint16),
                          piece_count=chk.piece_count[lo:hi], in_check=chk.in_check[lo:hi], game=game[lo:hi],
                          flags=flags[lo:hi], first=f"byte {offset + lo * SIZE}")

    def record(i):
        fen = unpack_fen(board[i].tobytes()).rsplit(" ", 2)[0] + " 0 1"
        yield Record(fen=fen, score=None if none[i] else int(score[i]), result=int(result_byte[i]) - 1, ply=None,
                     move=None, location=f"byte {offset + i * SIZE}", game=int(game[i]),
                     score_is_mate=bool(not none[i] and abs(score[i]) >= MATE_BOUND))

    yield from emit_runs(offset, SIZE, ok, slow, rejects, rows, record)


def _read_slow(stream, options: ReaderOptions) -> Iterator[Record | Reject]:
    for n, item in enumerate(fixed_records(stream, SIZE)):
        if isinstance(item, Reject):
            yield item
            continue
        offset, rec = item
        loc = f"byte {offset}"
        score, result, ksq, opp_ksq, _ = _TAIL.unpack(rec[24:])
        if result > 2:
            yield Reject(loc, "result out of range", f"result byte {result}", rec.hex())
            continue
        nibbles = [b >> s & 15 for b in rec[8:24] for s in (0, 4)][:bin(int.from_bytes(rec[:8], "little")).count("1")]
        if any(c & 7 > 5 for c in nibbles):
            yield Reject(loc, "malformed record", "piece type above 5 (K)", rec.hex())
            continue
        # bytes 0..23 are a marlinformat board with white (the side to move) to move
        board = rec[:24] + bytes([NO_EP, 0, 1, 0, 0, 0, 1, 0])
        try:
            fen = unpack_fen(board).rsplit(" ", 2)[0] + " 0 1"
        except ValueError as e:
            yield Reject(loc, "malformed record", str(e), rec.hex())
            continue
        kings = _king_squares(rec)
        if kings != (ksq, opp_ksq ^ 56):
            yield Reject(loc, "king square mismatch", f"board kings {kings}, fields ({ksq}, {opp_ksq} ^ 56)",
                         rec.hex())
            continue
        none = abs(score) == VALUE_NONE
        yield Record(fen=fen, score=None if none else score, result=result - 1, ply=None, move=None,
                     location=loc, game=n, score_is_mate=not none and abs(score) >= MATE_BOUND)


def _king_squares(rec: bytes) -> tuple[int | None, int | None]:
    """(own king square, opponent king square) from the board part of a record."""
    occ = int.from_bytes(rec[:8], "little")
    own = opp = None
    i = 0
    while occ:
        sq = (occ & -occ).bit_length() - 1
        occ &= occ - 1
        code = rec[8 + (i >> 1)] >> (4 * (i & 1)) & 15
        i += 1
        if code & 7 == 5:
            if code & 8:
                opp = sq
            else:
                own = sq
    return own, opp


def sniff(head: bytes) -> bool:
    return False  # no magic: chosen by extension (.bf) or --format


SPEC = FormatSpec("bulletformat", read, sniff, score_pov="side to move (board seen from it)",
                  result_pov="side to move (0/1/2)", doc="bulletformat ChessBoard, 32-byte records",
                  binary=True, record_size=SIZE)
