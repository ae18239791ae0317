"""Packed board codec: marlinformat ``PackedBoard`` (32 bytes) to and from FEN and python-chess.

Layout (little-endian; see ``../shared/FORMATS.md`` and marlinformat's spec):

=========  ======  ============================================================
bytes      type    meaning
=========  ======  ============================================================
0..7       u64     occupancy, bit s set when square s (a1 = 0 .. h8 = 63) holds a piece
8..23      u8[16]  4-bit piece codes, low nibble first, one per occupied square in
                   ascending square order. Bit 3 = black; 0..5 = P N B R Q K;
                   6 = a rook that still carries a castling right (Chess960 too)
24         u8      bit 7 = black to move; low 7 bits = en-passant square or 64
25         u8      halfmove clock (rule-50 counter)
26..27     u16     fullmove number
28..29     i16     eval, white POV (our datasets keep it 0 and hold the score in a column)
30         u8      wdl: 0 black win, 1 draw, 2 white win
31         u8      extra (unused, 0)
=========  ======  ============================================================

Two entry points pack a position:

* :func:`pack_board` from a validated :class:`chess.Board` (the packer's path).
* :func:`pack_fen` from a FEN string with no legality checks (inference and tools that only
  need the placement; torch/numpy-free apart from the standard library).

:func:`unpack_fen` goes back to the exact FEN (X-FEN for standard castling, Shredder-FEN letters
for Chess960 rooks that X-FEN cannot name).
"""
from __future__ import annotations

import struct

import numpy as np

PACKED_SIZE = 32
NO_EP = 64
CASTLING_ROOK = 6

# piece letters indexed by code: 0..5 white P N B R Q K, 8..13 black
_LETTERS = "PNBRQK"
_STRUCT = struct.Struct("<Q16sBBHhBB")


def _square_name(sq: int) -> str:
    return "abcdefgh"[sq & 7] + str((sq >> 3) + 1)


def _parse_square(name: str) -> int:
    if len(name) != 2 or name[0] not in "abcdefgh" or name[1] not in "12345678":
        raise ValueError(f"bad square {name!r}")
    return (ord(name[0]) - 97) + 8 * (ord(name[1]) - 49)


def pack_position(
    pieces: dict[int, int],
    black_to_move: bool,
    castling_rooks: int = 0,
    ep_square: int | None = None,
    halfmove: int = 0,
    fullmove: int = 1,
    eval_white: int = 0,
    wdl: int = 1,
) -> bytes:
    """Pack one position into 32 marlinformat bytes.

    pieces: square (0..63) -> code (0..5 white P N B R Q K, 8..13 black).
    castling_rooks: u64 mask of rook squares that still carry a castling right.
    ep_square: 0..63 or None. halfmove 0..255, fullmove 0..65535 (clamped), eval_white int16,
    wdl 0/1/2. Raises ValueError on more than 32 pieces or out-of-range fields.
    """
    if len(pieces) > 32:
        raise ValueError(f"{len(pieces)} pieces: at most 32 fit a packed board")
    occ = 0
    nibbles = bytearray(16)
    for i, sq in enumerate(sorted(pieces)):
        code = pieces[sq]
        occ |= 1 << sq
        if castling_rooks >> sq & 1:
            if code & 7 != 3:
                raise ValueError(f"castling right on {_square_name(sq)}, which holds no rook")
            code = (code & 8) | CASTLING_ROOK
        nibbles[i >> 1] |= code << (4 * (i & 1))
    if ep_square is not None and not 0 <= ep_square < 64:
        raise ValueError(f"en-passant square {ep_square} not in 0..63")
    if wdl not in (0, 1, 2):
        raise ValueError(f"wdl {wdl} not in 0/1/2")
    stm_ep = (0x80 if black_to_move else 0) | (NO_EP if ep_square is None else ep_square)
    if not -32768 <= eval_white <= 32767:
        raise ValueError(f"eval {eval_white} does not fit int16")
    return _STRUCT.pack(
        occ, bytes(nibbles), stm_ep, min(max(halfmove, 0), 255), min(max(fullmove, 0), 65535),
        eval_white, wdl, 0,
    )


def pack_board(board, eval_white: int = 0, wdl: int = 1) -> bytes:
    """Pack a :class:`chess.Board` (standard or Chess960).

    The en-passant square is written only when an en-passant capture is legal; castling rights
    are taken from ``board.clean_castling_rights()`` (rook squares), so Chess960 is exact.
    """
    pieces = {}
    for colour_mask, black in ((board.occupied_co[True], 0), (board.occupied_co[False], 8)):
        m = colour_mask
        while m:
            sq = (m & -m).bit_length() - 1
            m &= m - 1
            pieces[sq] = board.piece_type_at(sq) - 1 + black
    ep = board.ep_square if board.has_legal_en_passant() else None
    return pack_position(
        pieces, not board.turn, board.clean_castling_rights(), ep,
        board.halfmove_clock, board.fullmove_number, eval_white, wdl,
    )


def pack_fen(fen: str, eval_white: int = 0, wdl: int = 1) -> bytes:
    """Pack a FEN (4 to 6 fields; X-FEN or Shredder-FEN castling) without legality checks.

    Missing counters default to ``0 1``. Raises ValueError naming the bad field.
    """
    fields = fen.split()
    if len(fields) < 2:
        raise ValueError(f"FEN needs at least placement and side to move: {fen!r}")
    placement, turn = fields[0], fields[1]
    castling = fields[2] if len(fields) > 2 else "-"
    ep = fields[3] if len(fields) > 3 else "-"
    rows = placement.split("/")
    if len(rows) != 8:
        raise ValueError(f"FEN placement needs 8 ranks: {placement!r}")
    pieces: dict[int, int] = {}
    for r, row in enumerate(rows):
        rank, file = 7 - r, 0
        for ch in row:
            if ch in "12345678":
                file += int(ch)
            else:
                idx = _LETTERS.find(ch.upper())
                if idx < 0 or file > 7:
                    raise ValueError(f"bad FEN placement {placement!r}")
                pieces[8 * rank + file] = idx + (0 if ch.isupper() else 8)
                file += 1
        if file != 8:
            raise ValueError(f"FEN rank {8 - r} has {file} files: {placement!r}")
    if turn not in ("w", "b"):
        raise ValueError(f"bad side to move {turn!r}")
    rooks = 0
    if castling != "-":
        for ch in castling:
            white = ch.isupper()
            home = 0 if white else 56
            rook_code = 3 if white else 11
            king = next((s for s, c in pieces.items() if c == (5 if white else 13)), None)
            files = [home + f for f in range(8) if pieces.get(home + f) == rook_code]
            low = ch.lower()
            if low == "k":
                cand = [s for s in files if king is not None and s > king]
                sq = max(cand) if cand else None
            elif low == "q":
                cand = [s for s in files if king is not None and s < king]
                sq = min(cand) if cand else None
            elif "a" <= low <= "h":
                sq = home + ord(low) - 97
                sq = sq if pieces.get(sq) == rook_code else None
            else:
                raise ValueError(f"bad castling field {castling!r}")
            if sq is None:
                raise ValueError(f"castling right {ch!r} has no rook: {fen!r}")
            rooks |= 1 << sq
    ep_sq = None if ep == "-" else _parse_square(ep)
    half = int(fields[4]) if len(fields) > 4 else 0
    full = int(fields[5]) if len(fields) > 5 else 1
    return pack_position(pieces, turn == "b", rooks, ep_sq, half, full, eval_white, wdl)


def unpack(packed: bytes) -> dict:
    """Decode 32 bytes into a dict: pieces {sq: code}, castling_rooks mask, black_to_move,
    ep_square (None or 0..63), halfmove, fullmove, eval_white, wdl.
    Raises ValueError on a malformed record (wrong size, bad piece code, bad ep square)."""
    if len(packed) != PACKED_SIZE:
        raise ValueError(f"packed board must be 32 bytes, got {len(packed)}")
    occ, nib, stm_ep, half, full, ev, wdl, _extra = _STRUCT.unpack(packed)
    if occ.bit_count() > 32:
        raise ValueError(f"occupancy has {occ.bit_count()} squares set; at most 32 fit a packed board")
    pieces: dict[int, int] = {}
    rooks = 0
    i = 0
    m = occ
    while m:
        sq = (m & -m).bit_length() - 1
        m &= m - 1
        code = (nib[i >> 1] >> (4 * (i & 1))) & 15
        i += 1
        kind = code & 7
        if kind == CASTLING_ROOK:
            if sq >> 3 != (7 if code & 8 else 0):
                raise ValueError(f"castling rook code on {_square_name(sq)}, off its back rank")
            rooks |= 1 << sq
            code = (code & 8) | 3
        elif kind > 5:
            raise ValueError(f"bad piece code {code} on {_square_name(sq)}")
        pieces[sq] = code
    ep = stm_ep & 0x7F
    if ep > NO_EP:
        raise ValueError(f"bad en-passant byte {stm_ep:#x}")
    return dict(
        pieces=pieces, castling_rooks=rooks, black_to_move=bool(stm_ep & 0x80),
        ep_square=None if ep == NO_EP else ep, halfmove=half, fullmove=full,
        eval_white=ev, wdl=wdl,
    )


def placement_fen(letters: dict[int, str]) -> str:
    """FEN placement field from {square (a1 = 0): piece letter (PNBRQK white, pnbrqk black)}."""
    rows = []
    for rank in range(7, -1, -1):
        row, empty = "", 0
        for file in range(8):
            p = letters.get(8 * rank + file)
            if p is None:
                empty += 1
            else:
                row += (str(empty) if empty else "") + p
                empty = 0
        rows.append(row + (str(empty) if empty else ""))
    return "/".join(rows)


def unpack_fen(packed: bytes) -> str:
    """Decode 32 bytes back to a FEN string.

    Castling is written X-FEN style (``KQkq``) when the rook is the outermost one on its side of
    the king, else as the rook's file letter (Shredder-FEN), which python-chess also reads.
    """
    d = unpack(packed)
    pieces = d["pieces"]
    placement = placement_fen({sq: _LETTERS[c & 7] if c < 8 else _LETTERS[c & 7].lower()
                               for sq, c in pieces.items()})
    castle = ""
    for white in (True, False):
        home = 0 if white else 56
        king = next((s for s, c in pieces.items() if c == (5 if white else 13)), None)
        rook_code = 3 if white else 11
        rights = [home + f for f in range(8) if d["castling_rooks"] >> (home + f) & 1]
        out = []
        for sq in sorted(rights, reverse=True):  # king side first, as FEN orders K before Q
            outer_k = king is not None and sq > king and not any(
                pieces.get(s) == rook_code for s in range(sq + 1, home + 8))
            outer_q = king is not None and sq < king and not any(
                pieces.get(s) == rook_code for s in range(home, sq))
            ch = "k" if outer_k else "q" if outer_q else "abcdefgh"[sq & 7]
            out.append(ch.upper() if white else ch)
        castle += "".join(out)
    ep = "-" if d["ep_square"] is None else _square_name(d["ep_square"])
    turn = "b" if d["black_to_move"] else "w"
    return f"{placement} {turn} {castle or '-'} {ep} {d['halfmove']} {d['fullmove']}"


def boards_from_bytes(column) -> np.ndarray:
    """View a sequence of 32-byte values (pyarrow fixed_size_binary(32) array, or bytes) as
    a (N, 32) uint8 array without a per-row Python loop where the input allows it."""
    try:
        import pyarrow as pa  # optional: only the dataset path has pyarrow arrays
        if isinstance(column, (pa.Array, pa.ChunkedArray)):
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            buf = column.buffers()[1]
            arr = np.frombuffer(buf, dtype=np.uint8, count=len(column) * PACKED_SIZE,
                                offset=column.offset * PACKED_SIZE)
            return arr.reshape(-1, PACKED_SIZE)
    except ImportError:
        pass
    data = b"".join(column) if not isinstance(column, (bytes, bytearray)) else bytes(column)
    return np.frombuffer(data, dtype=np.uint8).reshape(-1, PACKED_SIZE)
