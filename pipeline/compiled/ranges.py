"""Compiled walks that find where a range of a file may start (:mod:`nnue.pipeline.ranges`):
viriformat games, and the games of a PGN file as python-chess reads them."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _walk(words, nbytes, out):
    n = 0
    pos = 0  # in 4-byte words; a viriformat game is 8 words of header, pairs, then one zero word
    nw = words.shape[0]
    while pos * 4 < nbytes:
        if n == out.shape[0]:
            return n, pos
        out[n] = pos * 4
        n += 1
        pos += 8
        while pos < nw and words[pos] != 0:
            pos += 1
        pos += 1
    return n, -1


def viri_game_starts(words: np.ndarray, nbytes: int) -> np.ndarray:
    """Byte offsets of every game's header in a viriformat file, in order, as the reader walks it:
    32 header bytes, then 4-byte (move, eval) pairs up to one of 4 zero bytes. words: the file as
    (nbytes // 4,) little-endian uint32 (a memory map); the last game may be cut short.
    Returns (games,) int64."""
    chunks = []
    start = 0
    while True:
        out = np.empty(1 << 20, np.int64)
        n, resume = _walk(words[start // 4:], nbytes - start, out)
        chunks.append(out[:n] + start)
        if resume < 0:
            break
        start += resume * 4
    return np.concatenate(chunks)


# ---------------------------------------------------------------------------- PGN
NAG_DIGITS = 640  # the fewest digits int() may be limited to (sys.set_int_max_str_digits)


@njit(cache=True, inline="always")
def _after_eol(data, t, n):
    """The start of the line after the line end at ``t`` (``\n``, ``\r\n`` or a lone ``\r``,
    as universal newlines end lines; ``t == n``: the file's end)."""
    if t >= n:
        return n
    if data[t] == 13 and t + 1 < n and data[t + 1] == 10:
        return t + 2
    return t + 1


@njit(cache=True, inline="always")
def _next_line(data, i, n):
    """The start of the line after the one that byte ``i`` is in (n: none)."""
    while i < n and data[i] != 10 and data[i] != 13:
        i += 1
    return _after_eol(data, i, n)


@njit(cache=True)
def _blank(data, a, n):
    """Is the line from ``a`` blank, as ``str.isspace()`` of it decoded as a PGN is decoded (UTF-8,
    a byte that does not decode read as Latin-1: ``formats.LATIN1_ERRORS``; its line end included,
    so an empty line is blank)? Space is ASCII tab, VT, FF, FS, GS, RS, US and space, the UTF-8
    encodings of U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000,
    and a lone byte 0x85 or 0xA0 (Latin-1's NEL and no-break space; every other byte that does not
    decode is a Latin-1 letter or sign, not space).
    Returns the offset of its line end (n at the file's end) when blank, else -1 - the offset of
    its first byte that is not space."""
    i = a
    while i < n:
        c = data[i]
        if c == 10 or c == 13:
            return i
        if c == 32 or c == 9 or c == 11 or c == 12 or 28 <= c <= 31:
            i += 1
        elif c == 0xC2 and i + 1 < n and (data[i + 1] == 0x85 or data[i + 1] == 0xA0):
            i += 2
        elif c == 0x85 or c == 0xA0:  # a continuation byte with no lead: Latin-1 NEL / no-break space
            i += 1
        elif 0xE1 <= c <= 0xE3 and i + 2 < n:
            b1, b2 = data[i + 1], data[i + 2]
            if c == 0xE1:
                ok = b1 == 0x9A and b2 == 0x80
            elif c == 0xE2:
                ok = (b1 == 0x80 and (0x80 <= b2 <= 0x8A or b2 == 0xA8 or b2 == 0xA9 or b2 == 0xAF)) or \
                     (b1 == 0x81 and b2 == 0x9F)
            else:
                ok = b1 == 0x80 and b2 == 0x80
            if not ok:
                return -1 - i
            i += 3
        else:
            return -1 - i
    return n


@njit(cache=True)
def _pgn_walk(data, n, out, suspect):
    """Fill ``out`` with where each ``read_game`` call that finds a game starts, and ``suspect``
    with whether its movetext has a ``)`` or a NAG of ``NAG_DIGITS`` digits or more outside
    comments (see :func:`pgn_game_starts`). Returns
    (count, resume): resume is -1 at the end of the file, else the offset of the call that did not
    fit ``out``. One pass over the bytes: each is looked at once (twice in a blank line)."""
    k = 0
    pos = 0
    while True:
        call = pos
        a = pos
        while a + 3 <= n and data[a] == 0xEF and data[a + 1] == 0xBB and data[a + 2] == 0xBF:
            a += 3  # readline().lstrip("\ufeff") on the call's first line
        if a >= n:
            return k, -1  # nothing, or "" after the strip: no game
        # leading blank and %/; lines
        while True:
            c = data[a]
            if c == 37 or c == 59:
                pos = _next_line(data, a, n)
            else:
                t = _blank(data, a, n)
                if t < 0:
                    break
                pos = _after_eol(data, t, n)
            if pos >= n:
                return k, -1
            a = pos
        if k == out.shape[0]:
            return k, call
        out[k] = call
        suspect[k] = False
        k += 1
        # tag section: %/; lines skipped, at most one blank line in a row, then the first line
        # that does not start with "["
        empties = 0
        while True:
            c = data[a]
            if c == 37 or c == 59:
                nxt = _next_line(data, a, n)
            elif c == 91:
                empties = 0
                nxt = _next_line(data, a, n)
            else:
                if empties >= 1:
                    break
                t = _blank(data, a, n)
                if t < 0:
                    break
                empties += 1
                nxt = _after_eol(data, t, n)
            if nxt >= n:
                return k, -1  # the game ends at the end of the file
            a = nxt
        # movetext: to a blank line at a fresh line; {...} comments to the first "}" (over lines),
        # ";" to the line's end
        fresh = True
        while True:
            j = a
            if fresh:
                c = data[a]
                if c == 37 or c == 59:
                    a = _next_line(data, a, n)
                    if a >= n:
                        return k, -1
                    continue
                t = _blank(data, a, n)
                if t >= 0:
                    pos = _after_eol(data, t, n)
                    break
                j = -1 - t  # the bytes before are spaces
            fresh = True
            while j < n:
                c = data[j]
                if c == 10 or c == 13 or c == 123 or c == 59:
                    break
                if c == 41:
                    suspect[k - 1] = True
                elif c == 36:  # "$": a NAG, whose digits python-chess reads with int()
                    d = j + 1
                    while d < n and 48 <= data[d] <= 57:
                        d += 1
                    if d - j - 1 >= NAG_DIGITS:
                        suspect[k - 1] = True
                    j = d
                    continue
                j += 1
            if j < n and data[j] == 123:
                j += 1
                while j < n and data[j] != 125:
                    j += 1
                if j + 1 >= n:
                    return k, -1  # unterminated, or "}" the file's last byte: the game ends there
                a = j + 1  # the rest of that line, not a fresh line
                fresh = False
                continue
            a = _next_line(data, j, n)
            if a >= n:
                return k, -1


def pgn_game_starts(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte offsets at which python-chess's ``chess.pgn.read_game`` starts each game of a PGN file,
    reading it as :mod:`nnue.pipeline.formats.pgn` does (UTF-8, Latin-1 where that fails, universal
    newlines): the first at 0, each next one just past the line that ended the game before (the
    blank line after its movetext). Only the line structure is followed (leading blank and
    ``%``/``;`` lines, tag lines with at most one blank line between them, movetext to a blank line
    at a fresh line, ``{...}`` comments over several lines, ``;`` comments), which is the same
    whether python-chess plays the game's moves or skips them (a bad ``FEN``), so a reader started
    at any of these offsets is in the state of one that read the file from the start.

    What makes python-chess leave this structure is an exception inside ``read_game``: it then
    goes on from the next line, mid-game. python-chess 1.11 raises an ``IndexError`` when a ``)``
    closes a variation after a move that does not parse, and a ``ValueError`` for a NAG (``$N``)
    of more digits than ``int()`` reads (``sys.get_int_max_str_digits()``, 4300 by default, 640 at
    least). Each game whose movetext has a ``)`` or a NAG of ``NAG_DIGITS`` digits or more outside
    comments is therefore flagged as ``suspect``, for the caller to read with python-chess.

    data: the file's bytes as a (size,) uint8 array (a memory map). Returns (starts, suspect):
    (games,) int64 offsets and (games,) bool flags.
    """
    n = data.shape[0]
    chunks, flags = [], []
    start = 0
    while True:
        out = np.empty(1 << 18, np.int64)
        suspect = np.zeros(1 << 18, np.bool_)
        k, resume = _pgn_walk(data[start:], n - start, out, suspect)
        chunks.append(out[:k] + start)
        flags.append(suspect[:k])
        if resume < 0:
            break
        start += resume
    return np.concatenate(chunks), np.concatenate(flags)
