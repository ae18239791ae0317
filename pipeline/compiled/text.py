"""Compiled text core for ``.plain``, bullet text and labelled EPD (issue 14).

The kernels walk the raw bytes of a text dump (the buffer under the reader's ``io.TextIOWrapper``)
line by line: they split lines as the wrapper does (``\\n``, ``\\r\\n`` and a lone ``\\r``), drop
one leading UTF-8 byte-order mark (the driver), skip blank lines, strip spaces, tokenize the
record the way the format's reader does, parse the FEN (4 to 6 fields; castling rights read as
python-chess reads them, so X-FEN and Shredder-FEN too), the UCI move of ``.plain``, number games
as the reader does, and validate the position and move with :func:`.fixed.settle` (python-chess's
``Board.status()``, the packer's en-passant normalisation and retrograde double-check rule, move
legality). Settled records are written straight into NumPy buffers (``PackedRows``).

A kernel *stops* at a record it cannot settle exactly, before changing any state; the driver then
hands that record's lines to the reader's own line machine (``Machine.feed``, the one-by-one
path), which yields a Record (validated by python-chess in :mod:`nnue.pipeline.pack`) or a Reject,
and the kernel resumes after it. It stops at: a line with a byte outside printable ASCII (tabs,
other whitespace, UTF-8, invalid UTF-8: python's decoding and ``str.strip`` decide), any syntax
beyond the plain spellings (a sign or more than 9 digits in a number, a result token not in the
table, an EPD opcode form beyond ``key value;``, more than one space between EPD fields after the
FEN, a ``.plain`` record whose keys are not in file order, ...), every record the reader rejects,
every FEN python-chess might read differently (fewer than 4 or more than 6 fields, ``~``), castling
rights that are neither standard nor Chess960-clean, king moves that python-chess might read as
castling other than the two spellings settled here (standard ``e1g1`` / ``e1h1``, Chess960 king
takes rook; their spelling is counted per run in ``PackedRows.castling`` for the manifest), and
every position or move :func:`.fixed.settle` hands back. So a reader's output packs to the same
rows and rejects with and without this core (tested; ``HANDED`` counts the hand-backs).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..records import UTF8_BOM, PackedRows
from .bits import lsb, msb
from .chesscore import CASTLE, KING, OCC, SQ, U64, standard_rights
from .fixed import MATE_BOUND, VALUE_NONE, _clear, _put, clean_rights, settle

CAP = 1 << 15          # rows per output buffer
SHORT = 8              # a run of fewer rows before a hand-back goes to the line machine too (a run costs the
                       # packer ~0.5 ms, python-chess ~0.1 ms a record: files where most records are rejected)
CHUNK = 1 << 22        # bytes read at a time
NEED, STOP, FULL = 0, 1, 2  # kernel return codes: more input needed (or end), hand a record back, buffer full
MAXF = 16              # most whitespace-separated fields the kernels look at
RANK1, RANK8 = U64(0xFF), U64(0xFF00000000000000)

_PIECE = np.full(128, -1, np.int8)
for _i, _c in enumerate("PNBRQK"):
    _PIECE[ord(_c)] = _i
    _PIECE[ord(_c.lower())] = 8 + _i


# ------------------------------------------------------------------ tokens
@njit(cache=True)
def line_bounds(buf, pos, n, final):
    """(end, next) of the line starting at ``pos`` < n: ``end`` excludes the line end (``\\n``,
    ``\\r\\n`` or ``\\r``, as ``io.TextIOWrapper(newline=None)`` splits), ``next`` is where the
    next line starts; (−1, −1) when the line is not complete in ``buf[:n]`` and more may follow."""
    i = pos
    while i < n:
        c = buf[i]
        if c == 10:
            return i, i + 1
        if c == 13:
            if i + 1 < n:
                return i, (i + 2 if buf[i + 1] == 10 else i + 1)
            if final:
                return i, i + 1
            return -1, -1
        i += 1
    if final:
        return n, n
    return -1, -1


@njit(cache=True)
def _strip(buf, s, e):
    """(s, e, clean): the line without leading and trailing spaces; clean: every byte is
    printable ASCII (0x20..0x7E), so python's decoding and ``str.strip`` agree with this."""
    for i in range(s, e):
        c = buf[i]
        if c < 32 or c > 126:
            return s, e, False
    while s < e and buf[s] == 32:
        s += 1
    while e > s and buf[e - 1] == 32:
        e -= 1
    return s, e, True


@njit(cache=True)
def _split(buf, s, e, fs, fe):
    """Space-separated fields of buf[s:e] into fs/fe (at most MAXF); returns their count, or
    MAXF + 1 when there are more."""
    nf = 0
    i = s
    while i < e:
        while i < e and buf[i] == 32:
            i += 1
        if i >= e:
            break
        if nf == MAXF:
            return MAXF + 1
        fs[nf] = i
        while i < e and buf[i] != 32:
            i += 1
        fe[nf] = i
        nf += 1
    return nf


@njit(cache=True)
def _int(buf, s, e, signed):
    """(ok, value) of an optional '-' (when signed) and 1 to 9 ASCII digits, nothing else."""
    neg = False
    if signed and s < e and buf[s] == 45:
        neg = True
        s += 1
    if e - s < 1 or e - s > 9:
        return False, 0
    v = 0
    for i in range(s, e):
        c = buf[i]
        if c < 48 or c > 57:
            return False, 0
        v = 10 * v + (c - 48)
    return True, -v if neg else v


@njit(cache=True)
def _is(buf, s, e, lit):
    if e - s != len(lit):
        return False
    for i in range(len(lit)):
        if buf[s + i] != lit[i]:
            return False
    return True


_R1 = np.frombuffer(b"1", np.uint8)
_R10 = np.frombuffer(b"1.0", np.uint8)
_R1_0 = np.frombuffer(b"1-0", np.uint8)
_RH = np.frombuffer(b"0.5", np.uint8)
_RH2 = np.frombuffer(b"1/2", np.uint8)
_RH3 = np.frombuffer(b"1/2-1/2", np.uint8)
_RH4 = np.frombuffer(b".5", np.uint8)
_R0 = np.frombuffer(b"0", np.uint8)
_R00 = np.frombuffer(b"0.0", np.uint8)
_R0_1 = np.frombuffer(b"0-1", np.uint8)


@njit(cache=True)
def _result(buf, s, e):
    """:func:`nnue.pipeline.formats.parse_result_token` on printable ASCII: 2·(white result)
    (2, 1, 0), or −1 when not a result."""
    while s < e and buf[s] == 32:
        s += 1
    while e > s and buf[e - 1] == 32:
        e -= 1
    while s < e and (buf[s] == 34 or buf[s] == 59):
        s += 1
    while e > s and (buf[e - 1] == 34 or buf[e - 1] == 59):
        e -= 1
    while s < e and (buf[s] == 91 or buf[s] == 93):
        s += 1
    while e > s and (buf[e - 1] == 91 or buf[e - 1] == 93):
        e -= 1
    while s < e and buf[s] == 32:
        s += 1
    while e > s and buf[e - 1] == 32:
        e -= 1
    if _is(buf, s, e, _R1) or _is(buf, s, e, _R10) or _is(buf, s, e, _R1_0):
        return 2
    if _is(buf, s, e, _RH) or _is(buf, s, e, _RH2) or _is(buf, s, e, _RH3) or _is(buf, s, e, _RH4):
        return 1
    if _is(buf, s, e, _R0) or _is(buf, s, e, _R00) or _is(buf, s, e, _R0_1):
        return 0
    return -1


# ------------------------------------------------------------------ FEN
@njit(cache=True)
def _fen(buf, fs, fe, bb, pc, st):
    """Parse FEN fields 0..3 (placement, turn, castling, en passant) as python-chess's
    ``Board.set_fen`` does, into bb/pc (castling rights, rook squares, in bb[CASTLE]) and
    st[0] = side to move, st[1] = ep_square (−1 none). False where python-chess raises or might
    read it differently (then python-chess decides)."""
    _clear(bb, pc)
    rank = 7
    file = 0
    prev_digit = False
    for i in range(fs[0], fe[0]):
        c = buf[i]
        if c == 47:  # '/'
            if file != 8 or rank == 0:
                return False
            rank -= 1
            file = 0
            prev_digit = False
        elif 49 <= c <= 56:
            if prev_digit:
                return False
            file += c - 48
            if file > 8:
                return False
            prev_digit = True
        else:
            code = _PIECE[c] if c < 128 else -1
            if code < 0 or file >= 8:
                return False
            _put(bb, pc, 8 * rank + file, code)
            file += 1
            prev_digit = False
    if rank != 0 or file != 8:
        return False
    # turn
    if fe[1] - fs[1] != 1:
        return False
    t = buf[fs[1]]
    if t == 119:
        st[0] = 0
    elif t == 98:
        st[0] = 1
    else:
        return False
    # castling: "-" or [KQA-H]{0,2}[kqa-h]{0,2}, each flag read as python-chess's _set_castling_fen
    rights = U64(0)
    s, e = fs[2], fe[2]
    if not (e - s == 1 and buf[s] == 45):
        i = s
        k = 0
        while i < e and k < 2 and (buf[i] == 75 or buf[i] == 81 or 65 <= buf[i] <= 72):
            i += 1
            k += 1
        k = 0
        while i < e and k < 2 and (buf[i] == 107 or buf[i] == 113 or 97 <= buf[i] <= 104):
            i += 1
            k += 1
        if i != e:
            return False
        for j in range(s, e):
            f = buf[j]
            c = 0 if f < 97 else 1
            f = f | 32
            back = RANK1 if c == 0 else RANK8
            rooks = bb[8 * c + 3] & back
            kings = bb[8 * c + KING]
            king = msb(kings) if kings else -100
            if f == 113:  # q: the leftmost rook
                lo = lsb(rooks) if rooks else -1
                if kings and lo < king:
                    rights |= rooks & (~rooks + U64(1))
                else:
                    rights |= SQ[56 * c]
            elif f == 107:  # k: the rightmost rook
                hi = msb(rooks) if rooks else -1
                if kings and king < hi:
                    rights |= SQ[hi]
                else:
                    rights |= SQ[56 * c + 7]
            else:
                rights |= SQ[56 * c + (f - 97)]
    bb[CASTLE] = rights
    # en passant
    s, e = fs[3], fe[3]
    if e - s == 1 and buf[s] == 45:
        st[1] = -1
    elif e - s == 2 and 97 <= buf[s] <= 104 and 49 <= buf[s + 1] <= 56:
        st[1] = (buf[s] - 97) + 8 * (buf[s + 1] - 49)
    else:
        return False
    return True


@njit(cache=True)
def _rights_mode(bb):
    """0: standard castling rights python-chess keeps; 1: not standard, but clean Chess960 rights
    (python-chess then reads the board as Chess960); 2: neither (python-chess decides)."""
    rights = bb[CASTLE]
    if not rights & ~standard_rights(bb):
        return 0
    rooks = (bb[3] & RANK1) | (bb[8 + 3] & RANK8)
    if rights & ~rooks:
        return 2
    return 1 if clean_rights(bb) else 2


@njit(cache=True)
def _move(buf, s, e, bb, pc, us, mode):
    """(ok, from, to, promo, spelling) of a UCI move as python-chess's ``parse_uci`` reads it on
    this board: 4 or 5 bytes, squares a1..h8, promotion n/b/r/q. A castling move comes back as
    king takes rook, spelling 1 when written as the king's two-square step (standard chess,
    ``e1g1``: python-chess's ``_to_chess960``), 2 when written king takes rook; 0 otherwise.
    Not ok for other king moves onto an own piece or more than one file away (python-chess
    decides)."""
    L = e - s
    if L != 4 and L != 5:
        return False, 0, 0, 0, 0
    for k in (0, 2):
        if not (97 <= buf[s + k] <= 104 and 49 <= buf[s + k + 1] <= 56):
            return False, 0, 0, 0, 0
    frm = (buf[s] - 97) + 8 * (buf[s + 1] - 49)
    to = (buf[s + 2] - 97) + 8 * (buf[s + 3] - 49)
    if frm == to:
        return False, 0, 0, 0, 0
    promo = 0
    if L == 5:
        c = buf[s + 4]
        if c == 110:
            promo = 1
        elif c == 98:
            promo = 2
        elif c == 114:
            promo = 3
        elif c == 113:
            promo = 4
        else:
            return False, 0, 0, 0, 0
    p = pc[frm]
    if p >= 0 and (p & 7) == KING:
        home = 56 * us
        if bb[OCC + us] & SQ[to]:  # onto an own piece: castling if it is a rook of the back rank
            if promo == 0 and pc[to] == 8 * us + 3 and (to >> 3) == (frm >> 3) == (home >> 3):
                return True, frm, to, 0, 2
            return False, 0, 0, 0, 0
        if abs((frm & 7) - (to & 7)) > 1:
            if (mode == 0 and promo == 0 and frm == home + 4 and p == 8 * us + KING and pc[to] < 0
                    and (to == home + 6 or to == home + 2)):
                return True, frm, home + 7 if to == home + 6 else home, 0, 1
            return False, 0, 0, 0, 0
    return True, frm, to, promo, 0


@njit(cache=True)
def _board(buf, fs, fe, nf, bb, pc, st):
    """FEN fields 0..nf−1 (4 to 6) into the board: (ok, half, full, mode) with python-chess's
    counters (full = max(fullmove, 1)) and :func:`_rights_mode`."""
    if nf < 4 or nf > 6 or not _fen(buf, fs, fe, bb, pc, st):
        return False, 0, 0, 2
    half = 0
    full = 1
    if nf >= 5:
        ok, half = _int(buf, fs[4], fe[4], False)
        if not ok:
            return False, 0, 0, 2
    if nf == 6:
        ok, full = _int(buf, fs[5], fe[5], False)
        if not ok:
            return False, 0, 0, 2
    mode = _rights_mode(bb)
    return mode != 2, half, max(full, 1), mode


# ------------------------------------------------------------------ kernels
_FEN = np.frombuffer(b"fen ", np.uint8)
_MOVE = np.frombuffer(b"move ", np.uint8)
_SCORE = np.frombuffer(b"score ", np.uint8)
_PLY = np.frombuffer(b"ply ", np.uint8)
_RESULT = np.frombuffer(b"result ", np.uint8)


@njit(cache=True)
def _key(buf, s, e, k):
    """Start of the value when line buf[s:e] is key k (0..4) followed by a space, else −1."""
    lit = _FEN if k == 0 else _MOVE if k == 1 else _SCORE if k == 2 else _PLY if k == 3 else _RESULT
    if e - s < len(lit) or not _is(buf, s, s + len(lit), lit):
        return -1
    return s + len(lit)


@njit(cache=True)
def scan_plain(buf, pos, n, final, lineno, state, row, cap, o_board, o_score, o_result, o_ply, o_pcount,
               o_check, o_best, o_cap, o_has, o_flags, o_game, o_line, o_spell, o_pos):
    """``.plain`` records from buf[pos:n] (the reader between records) into rows row.. of the
    outputs. state: int64[5] as ``plain.Machine.state``. Returns (code, pos, lineno, row): NEED
    (pos: the first byte not consumed: an incomplete record, or n), STOP (pos, lineno: the first
    line of a record to hand back), FULL."""
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(2, np.int64)
    fs = np.zeros(MAXF, np.int64)
    fe = np.zeros(MAXF, np.int64)
    vs = np.zeros(5, np.int64)
    ve = np.zeros(5, np.int64)
    while True:
        # blank lines between records
        while pos < n:
            end, nxt = line_bounds(buf, pos, n, final)
            if end < 0:
                return NEED, pos, lineno, row
            s, e, clean = _strip(buf, pos, end)
            if not clean or s < e:
                break
            pos = nxt
            lineno += 1
        if pos >= n:
            return NEED, pos, lineno, row
        if row >= cap:
            return FULL, pos, lineno, row
        p = pos
        ln = lineno
        start = 0
        k = 0
        while True:
            if p >= n:
                if final:
                    return STOP, pos, lineno, row
                return NEED, pos, lineno, row
            end, nxt = line_bounds(buf, p, n, final)
            if end < 0:
                return NEED, pos, lineno, row
            s, e, clean = _strip(buf, p, end)
            if not clean:
                return STOP, pos, lineno, row
            p = nxt
            ln += 1
            if s == e:
                continue
            if k == 5:
                if e - s == 1 and buf[s] == 101:
                    break
                return STOP, pos, lineno, row
            v = _key(buf, s, e, k)
            if v < 0:
                return STOP, pos, lineno, row
            while v < e and buf[v] == 32:
                v += 1
            vs[k] = v
            ve[k] = e
            if k == 0:
                start = ln - 1
            k += 1
        ok1, score = _int(buf, vs[2], ve[2], True)
        ok2, ply = _int(buf, vs[3], ve[3], True)
        ok3, result = _int(buf, vs[4], ve[4], True)
        if not (ok1 and ok2 and ok3) or result < -1 or result > 1:
            return STOP, pos, lineno, row
        nf = _split(buf, vs[0], ve[0], fs, fe)
        ok, half, full, mode = _board(buf, fs, fe, nf, bb, pc, st)
        if not ok:
            return STOP, pos, lineno, row
        us = st[0]
        okm, frm, to, promo, spell = _move(buf, vs[1], ve[1], bb, pc, us, mode)
        if not okm:
            return STOP, pos, lineno, row
        none = score == VALUE_NONE
        mate = not none and abs(score) >= MATE_BOUND
        if settle(row, bb, pc, us, st[1], half, full, 0 if none else score, none, mate, result, ply, True,
                  frm, to, promo, True, mode == 1, mode == 1, o_board, o_score, o_result, o_ply, o_pcount, o_check,
                  o_best, o_cap, o_has, o_flags) != 0:
            return STOP, pos, lineno, row
        if not (state[1] and ply == state[2] + 1 and result == -state[3]):
            state[0] += 1
        state[1] = 1
        state[2] = ply
        state[3] = result
        state[4] = 1
        o_game[row] = state[0]
        o_line[row] = start
        o_spell[row] = spell
        o_pos[row] = pos
        row += 1
        pos = p
        lineno = ln


@njit(cache=True)
def scan_bullet(buf, pos, n, final, lineno, state, row, cap, o_board, o_score, o_result, o_ply, o_pcount,
                o_check, o_best, o_cap, o_has, o_flags, o_game, o_line, o_spell, o_pos):
    """bullet text lines ``FEN | score | result``; state: int64[5] as ``bullet_text.Machine.state``;
    returns as :func:`scan_plain` (STOP: the line at pos)."""
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(2, np.int64)
    fs = np.zeros(MAXF, np.int64)
    fe = np.zeros(MAXF, np.int64)
    while pos < n:
        end, nxt = line_bounds(buf, pos, n, final)
        if end < 0:
            return NEED, pos, lineno, row
        s, e, clean = _strip(buf, pos, end)
        if not clean:
            return STOP, pos, lineno, row
        if s == e:
            pos = nxt
            lineno += 1
            continue
        if row >= cap:
            return FULL, pos, lineno, row
        b1 = -1
        b2 = -1
        bars = 0
        for i in range(s, e):
            if buf[i] == 124:
                bars += 1
                if bars == 1:
                    b1 = i
                elif bars == 2:
                    b2 = i
        if bars != 2:
            return STOP, pos, lineno, row
        nf = _split(buf, s, b1, fs, fe)
        ok, half, full, mode = _board(buf, fs, fe, nf, bb, pc, st)
        if not ok:
            return STOP, pos, lineno, row
        us = st[0]
        ss, se, _ = _strip(buf, b1 + 1, b2)
        ok, score_w = _int(buf, ss, se, True)
        if not ok:
            return STOP, pos, lineno, row
        wr = _result(buf, b2 + 1, e)
        if wr < 0:
            return STOP, pos, lineno, row
        known = nf >= 6
        ply = 0
        if known:
            ok, fm = _int(buf, fs[5], fe[5], False)  # the reader's int(fields[5]), before max(…, 1)
            ply = 2 * (max(fm, 1) - 1) + us  # fullmove 0 reads as 1, as python-chess reads it
        sign = -1 if us else 1
        result = (wr - 1) * sign
        none = abs(score_w) == VALUE_NONE
        mate = not none and abs(score_w) >= MATE_BOUND
        if settle(row, bb, pc, us, st[1], half, full, 0 if none else score_w * sign, none, mate, result,
                  ply, known, 0, 0, 0, False, mode == 1, False, o_board, o_score, o_result, o_ply, o_pcount,
                  o_check, o_best, o_cap, o_has, o_flags) != 0:
            return STOP, pos, lineno, row
        if not (known and state[1] and ply == state[2] + 1 and wr == state[3]):
            state[0] += 1
        state[1] = 1 if known else 0
        state[2] = ply
        state[3] = wr
        state[4] = 1
        o_game[row] = state[0]
        o_line[row] = lineno
        o_pos[row] = pos
        row += 1
        pos = nxt
        lineno += 1
    return NEED, pos, lineno, row


_FMVN = np.frombuffer(b"fmvn", np.uint8)
_C9 = np.frombuffer(b"c9", np.uint8)
_HMVC = np.frombuffer(b"hmvc", np.uint8)


@njit(cache=True)
def _word(c):
    return (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122) or c == 95


@njit(cache=True)
def scan_epd(buf, pos, n, final, lineno, state, row, cap, o_board, o_score, o_result, o_ply, o_pcount,
             o_check, o_best, o_cap, o_has, o_flags, o_game, o_line, o_spell, o_pos):
    """Labelled EPD lines (zurichess ``c9 "1-0";``, Ethereal ``[1.0] eval``, ``hmvc``/``fmvn``
    opcodes); state: int64[1] (a line seen); returns as :func:`scan_bullet`."""
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(2, np.int64)
    fs = np.zeros(MAXF, np.int64)
    fe = np.zeros(MAXF, np.int64)
    while pos < n:
        end, nxt = line_bounds(buf, pos, n, final)
        if end < 0:
            return NEED, pos, lineno, row
        s, e, clean = _strip(buf, pos, end)
        if not clean:
            return STOP, pos, lineno, row
        if s == e or buf[s] == 35:
            pos = nxt
            lineno += 1
            continue
        if row >= cap:
            return FULL, pos, lineno, row
        nf = _split(buf, s, e, fs, fe)
        if nf < 4 or nf > MAXF:
            return STOP, pos, lineno, row
        slashes = 0
        for i in range(fs[0], fe[0]):
            slashes += buf[i] == 47
        if slashes != 7:
            return STOP, pos, lineno, row
        # rest = " ".join(fields[r0:]): must be the raw bytes (single spaces) from field r0 on
        r0 = 4
        if nf > 4 and buf[fs[4]] == 91:
            pass
        elif nf >= 6:
            d = True
            for j in (4, 5):
                for i in range(fs[j], fe[j]):
                    if buf[i] < 48 or buf[i] > 57:
                        d = False
            if d:
                r0 = 6
        rs = fs[r0] if r0 < nf else e
        for j in range(r0, nf - 1):
            if fs[j + 1] != fe[j] + 1:
                return STOP, pos, lineno, row
        # counters as strings: (start, end) spans; the defaults "0" and "1" as (-1, 0) / (-1, 1)
        hs, he, hv = -1, 0, 0
        ms, me, mv = -1, 1, 1
        if r0 == 6:
            hs, he = fs[4], fe[4]
            ms, me = fs[5], fe[5]
        wr = -1
        score = 0
        has_score = False
        fmvn = False
        for i in range(rs, e - 3):
            if _is(buf, i, i + 4, _FMVN):
                fmvn = True
        if rs < e and buf[rs] == 91:  # \[([^\]]*)\]\s*(-?\d+)?\s*$
            j = rs + 1
            while j < e and buf[j] != 93:
                j += 1
            if j >= e:
                return STOP, pos, lineno, row
            wr = _result(buf, rs + 1, j)
            j += 1
            while j < e and buf[j] == 32:
                j += 1
            if j < e:
                ok, score = _int(buf, j, e, True)
                if not ok:
                    return STOP, pos, lineno, row
                has_score = True
        else:  # opcodes: (\w+) SP ("[^"]*"|[^;"\s]*);  separated by one space
            j = rs
            while j < e:
                ks = j
                while j < e and _word(buf[j]):
                    j += 1
                if j == ks or j >= e or buf[j] != 32:
                    return STOP, pos, lineno, row
                ke = j
                j += 1
                if j < e and buf[j] == 34:
                    qs = j + 1
                    j = qs
                    while j < e and buf[j] != 34:
                        j += 1
                    if j >= e:
                        return STOP, pos, lineno, row
                    qe = j
                    j += 1
                else:
                    qs = j
                    while j < e and buf[j] != 59 and buf[j] != 32 and buf[j] != 34:
                        j += 1
                    qe = j
                if j >= e or buf[j] != 59:
                    return STOP, pos, lineno, row
                j += 1
                if j < e:
                    if buf[j] != 32:
                        return STOP, pos, lineno, row
                    j += 1
                    if j >= e:
                        return STOP, pos, lineno, row
                if _is(buf, ks, ke, _C9):
                    wr = _result(buf, qs, qe)
                elif _is(buf, ks, ke, _HMVC):
                    hs, he = qs, qe
                elif _is(buf, ks, ke, _FMVN):
                    ms, me = qs, qe
        if wr < 0:
            return STOP, pos, lineno, row
        if hs >= 0:
            ok, hv = _int(buf, hs, he, False)
            if not ok:
                return STOP, pos, lineno, row
        if ms >= 0:
            ok, mv = _int(buf, ms, me, False)
            if not ok:
                return STOP, pos, lineno, row
        h0 = hs < 0 or (he - hs == 1 and buf[hs] == 48)
        m1 = ms < 0 or (me - ms == 1 and buf[ms] == 49)
        known = not (h0 and m1) or fmvn
        if not _fen(buf, fs, fe, bb, pc, st):
            return STOP, pos, lineno, row
        mode = _rights_mode(bb)
        if mode == 2:
            return STOP, pos, lineno, row
        us = st[0]
        result = (wr - 1) * (-1 if us else 1)
        ply = 2 * (max(mv, 1) - 1) + us if known else 0
        if settle(row, bb, pc, us, st[1], hv, max(mv, 1), score, not has_score, False, result, ply, known,
                  0, 0, 0, False, mode == 1, False, o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best,
                  o_cap, o_has, o_flags) != 0:
            return STOP, pos, lineno, row
        state[0] = 1
        o_game[row] = lineno
        o_line[row] = lineno
        o_pos[row] = pos
        row += 1
        pos = nxt
        lineno += 1
    return NEED, pos, lineno, row


KERNELS = {"plain": scan_plain, "bullet-text": scan_bullet, "epd": scan_epd}


# ------------------------------------------------------------------ Python driver
class Lines:
    """Lazy "line N" locations of a run of rows (no string per row until asked)."""

    def __init__(self, lines):
        self.lines = lines

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, i):
        return f"line {int(self.lines[i])}"


def _spellings(spell) -> tuple | None:
    """(king's two-square step, king takes rook): castling moves of a run by how they were written."""
    if not spell.any():
        return None
    c = np.bincount(spell, minlength=3)
    return int(c[1]), int(c[2])


def _buffers(cap: int) -> dict:
    return dict(board=np.zeros((cap, 32), np.uint8), score=np.zeros(cap, np.int16), result=np.zeros(cap, np.int8),
                ply=np.zeros(cap, np.uint16), piece_count=np.zeros(cap, np.uint8), in_check=np.zeros(cap, np.bool_),
                best_move=np.zeros(cap, np.uint16), capture=np.zeros(cap, np.bool_), has_move=np.zeros(cap, np.bool_),
                flags=np.zeros(cap, np.uint8), game=np.zeros(cap, np.int64), line=np.zeros(cap, np.int64),
                spell=np.zeros(cap, np.uint8), pos=np.zeros(cap, np.int64))


_OUT = ("board", "score", "result", "ply", "piece_count", "in_check", "best_move", "capture", "has_move", "flags",
        "game", "line", "spell", "pos")

# records handed back to the reader's line machine since the process started, per format (bench, fuzz)
HANDED: dict[str, int] = {}
_LIMIT = 1 << 62  # python ints beyond int64 are kept on the Python side (never equal a kernel's ply + 1)


def _to_state(machine) -> np.ndarray:
    return np.array([v if -_LIMIT < v < _LIMIT else -_LIMIT for v in machine.state()], np.int64)


def read_text(stream, fmt: str, machine, cap: int | None = None, chunk: int | None = None):
    """Items (PackedRows, Record, Reject) of a text dump in file order, through the compiled
    kernel of ``fmt`` ("plain", "bullet-text", "epd") and, for what it hands back, ``machine``
    (the reader's line machine: ``feed(lineno, line)``, ``finish()``, ``idle``, ``state()``,
    ``set_state(st)``). ``stream``: the reader's text stream; its ``.buffer`` is read as bytes.
    Raises what the machine raises (FormatError) and what the stream raises."""
    kernel = KERNELS[fmt]
    cap = cap or CAP
    chunk = chunk or CHUNK
    moves = fmt == "plain"
    raw = stream.buffer
    data = b""
    first = True
    final = False
    lineno = 1
    b = _buffers(cap)
    row0 = row = 0
    handed = 0

    def rows(lo, hi):
        sl = slice(lo, hi)
        return PackedRows(board=b["board"][sl], score=b["score"][sl], result=b["result"][sl], ply=b["ply"][sl],
                          piece_count=b["piece_count"][sl], in_check=b["in_check"][sl], game=b["game"][sl],
                          flags=b["flags"][sl], first=f"line {int(b['line'][lo])}", locations=Lines(b["line"][sl]),
                          best_move=b["best_move"][sl] if moves else None,
                          best_move_is_capture=b["capture"][sl] if moves else None,
                          has_move=b["has_move"][sl] if moves else None,
                          castling=_spellings(b["spell"][sl]) if moves else None)

    try:
        while not final:
            more = raw.read(chunk)
            final = not more
            data += more
            if first:
                if len(data) < 3 and not final:
                    continue
                if data.startswith(UTF8_BOM):
                    data = data[3:]
                first = False
            buf = np.frombuffer(data, np.uint8)
            n = len(data)
            pos = 0
            while True:
                if machine.idle:
                    state = _to_state(machine)
                    before = state.copy()
                    code, pos, lineno, row = kernel(buf, pos, n, final, lineno, state, row, cap,
                                                    *(b[k] for k in _OUT))
                    stop_at = -1
                    if code == STOP and 0 < row - row0 < SHORT:  # rewind: the machine reads the short run too
                        stop_at, pos, lineno = pos, int(b["pos"][row0]), int(b["line"][row0])
                        handed += row - row0
                        row = row0
                    else:
                        if row > row0:
                            yield rows(row0, row)
                            row0 = row
                        if not np.array_equal(state, before):
                            machine.set_state(state)
                    if code == FULL:
                        b = _buffers(cap)
                        row0 = row = 0
                        continue
                    if code == NEED:
                        break
                    handed += 1
                    while pos < stop_at:  # whole records the kernel had read: the machine is idle after them
                        end, nxt = line_bounds(buf, pos, n, final)
                        yield from machine.feed(lineno, data[pos:end].decode("utf-8", errors="replace"))
                        pos = nxt
                        lineno += 1
                # the machine takes lines: at least one, then until it is between records again
                took = False
                while pos < n and (not took or not machine.idle):
                    end, nxt = line_bounds(buf, pos, n, final)
                    if end < 0:
                        break
                    yield from machine.feed(lineno, data[pos:end].decode("utf-8", errors="replace"))
                    pos = nxt
                    lineno += 1
                    took = True
                if not took:
                    break
            data = data[pos:]
        yield from machine.finish()
    finally:
        HANDED[fmt] = HANDED.get(fmt, 0) + handed
