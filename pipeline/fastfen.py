"""FENs to packed boards in bulk, with NumPy: the fast half of packing text dumps.

:func:`pack_fens` packs a batch of FENs at once and says which it packed. It takes only FENs in
the plain shape self-play writes — standard chess, eight ranks of eight squares with no two
digits in a row, castling a subset of ``KQkq`` in that order with king and rook on their home
squares, no en-passant square, counters within range — and leaves every other FEN (X-FEN and
Shredder-FEN castling, en-passant squares, odd spellings, anything malformed) to the caller's
python-chess path, which decides what they mean and why they are rejected. For the FENs it takes,
the bytes equal :func:`nnue.pipeline.board.pack_fen` (tested on every self-play sample); legality
is then checked in bulk by :func:`nnue.pipeline.fastcheck.check_boards`, as for the binary
formats.
"""
from __future__ import annotations

import numpy as np

from .board import NO_EP

_WIDTH = np.full(256, -1000, dtype=np.int64)  # squares a placement character covers
_CODE = np.full(256, 255, dtype=np.int64)      # its piece code (white 0..5, black 8..13)
for _i, _ch in enumerate("PNBRQK"):
    _WIDTH[ord(_ch)] = _WIDTH[ord(_ch.lower())] = 1
    _CODE[ord(_ch)], _CODE[ord(_ch.lower())] = _i, _i + 8
for _d in range(1, 9):
    _WIDTH[ord(str(_d))] = _d
_WIDTH[ord("/")] = 0
_IS_DIGIT = np.zeros(256, dtype=bool)
_IS_DIGIT[[ord(str(d)) for d in range(1, 9)]] = True

# castling field -> (squares the kings must stand on, rook squares that carry the rights)
_CASTLING: dict[str, tuple[list[tuple[int, int]], int]] = {}
for _mask in range(16):
    _text = "".join(c for b, c in enumerate("KQkq") if _mask >> b & 1) or "-"
    _need, _rooks = [], 0
    for _b, (_king, _rook) in enumerate(((4, 7), (4, 0), (60, 63), (60, 56))):
        if _mask >> _b & 1:
            _colour = 0 if _b < 2 else 8
            _need += [(_king, 5 + _colour), (_rook, 3 + _colour)]
            _rooks |= 1 << _rook
    _CASTLING[_text] = (_need, _rooks)


def _small_int(text: str) -> bool:
    """ASCII digits only (``str.isdigit`` also takes '²' and other digits ``int`` refuses), at
    most 9 of them: safe for ``int`` and for int64."""
    return text.isascii() and text.isdigit() and len(text) <= 9


def pack_fens(fens: list[str], eval_white: np.ndarray | None = None,
              wdl: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pack FENs in bulk: ``(boards (n, 32) uint8, packed (n,) bool)``.

    Where ``packed[i]``, ``boards[i]`` is ``pack_fen(fens[i], eval_white[i], wdl[i])``
    (eval_white: (n,) int16-range ints, default 0; wdl: (n,) 0/1/2, default 1); other rows are
    zeros and are the caller's to handle (module docstring: which FENs this takes). Never raises
    on a bad FEN."""
    n = len(fens)
    boards = np.zeros((n, 32), dtype=np.uint8)
    ok = np.zeros(n, dtype=bool)
    if n == 0:
        return boards, ok
    placements: list[str] = []
    black = np.zeros(n, dtype=bool)
    half = np.zeros(n, dtype=np.int64)
    full = np.ones(n, dtype=np.int64)
    castle_mask = np.zeros(n, dtype=np.uint64)
    needs: list[tuple[int, list]] = []
    for i, fen in enumerate(fens):
        f = fen.split()
        placements.append(f[0] if f else "")
        if not 4 <= len(f) <= 6 or f[1] not in ("w", "b") or f[3] != "-" or f[2] not in _CASTLING:
            continue
        if len(f) > 4:
            if not _small_int(f[4]) or (len(f) > 5 and not _small_int(f[5])):
                continue
            half[i] = int(f[4])
            if len(f) > 5:
                full[i] = int(f[5])
        need, rooks = _CASTLING[f[2]]
        if need:
            needs.append((i, need))
            castle_mask[i] = rooks
        black[i] = f[1] == "b"
        ok[i] = True
    ok &= (half <= 255) & (full >= 1) & (full <= 65535)
    # placement: one pass over all characters of all FENs
    lens = np.fromiter((len(p) for p in placements), dtype=np.int64, count=n)
    c = np.frombuffer("".join(placements).encode("latin-1", "replace"), dtype=np.uint8)
    if len(c) != lens.sum():  # a non-latin character somewhere: leave those rows alone
        enc = [p.encode("latin-1", "replace") for p in placements]
        lens = np.fromiter((len(e) for e in enc), dtype=np.int64, count=n)
        c = np.frombuffer(b"".join(enc), dtype=np.uint8)
    row = np.repeat(np.arange(n), lens)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    width = _WIDTH[c]
    bad = np.zeros(n, dtype=bool)
    np.logical_or.at(bad, row[width < 0], True)
    digit = _IS_DIGIT[c]
    same_row = np.concatenate(([False], row[1:] == row[:-1]))
    np.logical_or.at(bad, row[digit & np.concatenate(([False], digit[:-1])) & same_row], True)
    width = np.maximum(width, 0)
    cs = np.cumsum(width)
    base = np.concatenate(([0], cs))[starts]  # squares before each row's first character
    pos = cs - width - base[row]              # FEN-order square of each character (a8 = 0)
    total = np.zeros(n, dtype=np.int64)
    np.add.at(total, row, width)
    slash = c == ord("/")
    slash_count = np.bincount(row[slash], minlength=n)
    slash_ord = np.cumsum(slash) - np.concatenate(([0], np.cumsum(slash)))[starts][row]  # 1-based
    np.logical_or.at(bad, row[slash & (pos != 8 * slash_ord)], True)
    bad |= (total != 64) | (slash_count != 7) | (lens == 0)
    piece = _CODE[c] != 255
    pr, psq_fen, pcode = row[piece], pos[piece], _CODE[c][piece]
    psq = (7 - psq_fen // 8) * 8 + psq_fen % 8
    count = np.bincount(pr, minlength=n)
    bad |= count > 32
    # castling: king and rook on their home squares, and one king of each colour (with two,
    # pack_fen would look for the rook beside whichever king it meets first)
    if needs:
        at = np.full((n, 64), -1, dtype=np.int64)
        at[pr, psq] = pcode
        kings = np.bincount(pr[pcode == 5], minlength=n), np.bincount(pr[pcode == 13], minlength=n)
        for i, need in needs:
            if kings[0][i] != 1 or kings[1][i] != 1 or any(at[i, sq] != code for sq, code in need):
                bad[i] = True
    ok &= ~bad
    # pieces of the rows kept, in ascending square order, two nibbles a byte
    keep = ok[pr]
    pr, psq, pcode = pr[keep], psq[keep], pcode[keep]
    order = np.lexsort((psq, pr))
    pr, psq, pcode = pr[order], psq[order], pcode[order]
    first = np.concatenate(([0], np.cumsum(np.bincount(pr, minlength=n))[:-1]))
    slot = np.arange(len(pr)) - first[pr]
    castling_rook = (castle_mask[pr] >> psq.astype(np.uint64)) & np.uint64(1)
    pcode = np.where(castling_rook.astype(bool), (pcode & 8) | 6, pcode)
    occ = np.zeros(n, dtype=np.uint64)
    np.bitwise_or.at(occ, pr, np.left_shift(np.uint64(1), psq.astype(np.uint64)))
    nib = np.zeros(n * 16, dtype=np.uint8)
    np.bitwise_or.at(nib, pr * 16 + slot // 2, (pcode << (4 * (slot % 2))).astype(np.uint8))
    boards[:, :8] = occ.view(np.uint8).reshape(n, 8)
    boards[:, 8:24] = nib.reshape(n, 16)
    boards[:, 24] = np.where(black, 0x80, 0) | NO_EP
    boards[:, 25] = np.clip(half, 0, 255)
    boards[:, 26:28] = np.clip(full, 0, 65535).astype("<u2").view(np.uint8).reshape(n, 2)
    ev = np.zeros(n, dtype=np.int64) if eval_white is None else np.asarray(eval_white, dtype=np.int64)
    boards[:, 28:30] = ev.astype("<i2").view(np.uint8).reshape(n, 2)
    boards[:, 30] = 1 if wdl is None else np.asarray(wdl, dtype=np.uint8)
    boards[~ok] = 0
    return boards, ok
