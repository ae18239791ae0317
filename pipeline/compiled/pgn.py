"""Compiled PGN reader: python-chess's ``chess.pgn.read_game`` and the reader of
:mod:`nnue.pipeline.formats.pgn` (eval comments, results, locations) over a byte buffer, with the
rules of :mod:`.chesscore` / :mod:`.fixed`, straight into dataset columns.

:func:`scan` walks the games of ``data[pos:end]`` line by line as ``read_game`` reads them from a
text stream with universal newlines (``\\n``, ``\\r\\n`` and ``\\r`` end a line): leading blank and
``%``/``;`` lines, tag pairs (``TAG_REGEX``; the last ``Result``/``FEN``/``Variant`` counts), at most
one blank line between tags, movetext until a blank line at a fresh line or the end of the file,
``{...}`` comments (also over several lines, the one space after ``{`` and before ``}`` dropped, the
comments of one move joined by a space), ``;`` comments, NAGs, ``!?`` marks, move numbers and
results (a movetext result sets a ``*``/missing ``Result`` tag), the tokens of python-chess's
``MOVETEXT_REGEX`` matched in its order. SAN is parsed as ``Board.parse_san`` does (piece letter,
file/rank disambiguation, captures, ``=Q``/``Q`` promotions, ``O-O``/``O-O-O``/``0-0``; Chess960
castling is king takes rook) against the legal moves of :func:`.chesscore.is_legal`.

Each position before a mainline move becomes a row (validated by :func:`.fixed.settle`, scored
from its comment and the previous one's ``[%eval]``). The kernel returns a status:

* ``END``: no game left in the buffer (``final``: the end of the file);
* ``NEED``: the next game does not end inside the buffer (the caller reads more);
* ``FULL``: the next game does not fit the row buffers;
* ``BOARD``: the next game's tags are read (spans in ``info``); the caller builds its start board
  with python-chess (``FEN``, ``Variant``) and calls again with ``have`` set;
* ``HAND``: the next game (from ``pos``, line ``line``) is one this kernel does not settle exactly:
  a byte outside printable ASCII/tab/CR/LF, a variation, a null move or drop, a move that is
  illegal, ambiguous or fully specified without a piece letter, a comment that looks like an eval
  but does not parse or reads differently in two runners' dialects (``formats.pgn.parse_engine_eval``), an unknown result, a number too long for exact arithmetic, a position
  :func:`.fixed.settle` does not settle (except check by a pawn just pushed two squares with a legal
  en-passant capture, :func:`_settle_check_ep`), a score out of int16 range, an unterminated comment,
  a NAG of ``NAG_DIGITS`` digits or more (python-chess reads it with ``int()``, which refuses more
  than ``sys.get_int_max_str_digits()`` digits: then ``read_game`` raises).
  The caller reads that whole game with python-chess.

Rows of a game are written only when the whole game is settled. Every read of ``data`` is
bounds-checked against ``end``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..constants import MATE
from .bits import lsb, popcount
from .chesscore import (CASTLE, KING, OCC, PAWN, SQ, U64, _castle_legal, attackers, is_legal, move_code,
                        piece_status, push, standard_rights, write_board)
from .fixed import buffers as fixed_buffers
from .fixed import F_MATE, F_NONE, castle960_legal, is_legal960, settle, settle_ep
from .ranges import NAG_DIGITS

END, NEED, FULL, BOARD, HAND = range(5)
SCRATCH = 1 << 16  # longest node comment this kernel parses (longer: the game is handed back)
# info slots (int64): status, pos, line, rows, game, then the tag spans of a BOARD status
I_STATUS, I_POS, I_LINE, I_ROWS, I_GAME, I_FEN_A, I_FEN_B, I_VAR_A, I_VAR_B = range(9)


def buffers(cap: int) -> dict:
    return fixed_buffers(cap) | dict(line=np.zeros(cap, np.int64))


OUT = ("board", "score", "result", "ply", "piece_count", "in_check", "best_move", "capture", "has_move", "flags",
       "kind", "game", "line")


@njit(cache=True, inline="always")
def _weird(c):
    return c >= 127 or (c < 32 and c != 9 and c != 10 and c != 13)


@njit(cache=True)
def _line(data, p, end, final):
    """(e, nxt, flag) for the line starting at p < end: e its content end, nxt the next line's
    start; flag 0 ok, 1 the buffer ends before the line is known to end, 2 a weird byte."""
    i = p
    while i < end:
        c = data[i]
        if c == 10:
            return i, i + 1, 0
        if c == 13:
            if i + 1 < end:
                return i, i + 2 if data[i + 1] == 10 else i + 1, 0
            return i, i + 1, 0 if final else 1
        if _weird(c):
            return i, i, 2
        i += 1
    return end, end, 0 if final else 1


@njit(cache=True, inline="always")
def _blank(data, p, e):
    for i in range(p, e):
        c = data[i]
        if c != 32 and c != 9:
            return False
    return True


@njit(cache=True, inline="always")
def _ws(c):
    return c == 32 or c == 9 or c == 10


@njit(cache=True, inline="always")
def _digit(c):
    return 48 <= c <= 57


@njit(cache=True, inline="always")
def _file(c):
    return 97 <= c <= 104


@njit(cache=True, inline="always")
def _rank(c):
    return 49 <= c <= 56


@njit(cache=True)
def _piece_letter(c):
    """[NBKRQ] -> piece type 1..5 (N B K R Q mapped to our 1 2 5 3 4), else -1."""
    if c == 78:
        return 1
    if c == 66:
        return 2
    if c == 82:
        return 3
    if c == 81:
        return 4
    if c == 75:
        return 5
    return -1


@njit(cache=True)
def _promo_letter(c):
    """[nbrqkNBRQK] -> python-chess piece type 2..6 (n b r q k), else 0."""
    if c >= 97:
        c -= 32
    if c == 78:
        return 2
    if c == 66:
        return 3
    if c == 82:
        return 4
    if c == 81:
        return 5
    if c == 75:
        return 6
    return 0


@njit(cache=True)
def _tag(data, p, e, spans):
    """Match TAG_REGEX on line [p, e) (starting with '['); record Result/FEN/Variant value spans in
    spans[0..5] (a, b pairs)."""
    i = p + 1
    if i >= e:
        return
    c = data[i]
    if not (_digit(c) or 65 <= c <= 90 or 97 <= c <= 122):
        return
    n0 = i
    while i < e:
        c = data[i]
        if _digit(c) or 65 <= c <= 90 or 97 <= c <= 122 or c == 95 or c == 43 or c == 35 or c == 61 or c == 58 \
                or c == 45:  # [A-Za-z0-9_+#=:-]
            i += 1
        else:
            break
    n1 = i
    if i >= e or not (data[i] == 32 or data[i] == 9):
        return
    while i < e and (data[i] == 32 or data[i] == 9):
        i += 1
    if i >= e or data[i] != 34:
        return
    v0 = i + 1
    k = e - 1  # the rightmost '"]' at or after v0, with only whitespace after it
    while k > v0 and (data[k] == 32 or data[k] == 9):
        k -= 1
    if k <= v0 or data[k] != 93 or data[k - 1] != 34:
        return
    v1 = k - 1
    if v1 < v0:
        return
    ln = n1 - n0
    slot = -1
    if ln == 6 and data[n0] == 82 and data[n0 + 1] == 101 and data[n0 + 2] == 115 and data[n0 + 3] == 117 \
            and data[n0 + 4] == 108 and data[n0 + 5] == 116:
        slot = 0
    elif ln == 3 and data[n0] == 70 and data[n0 + 1] == 69 and data[n0 + 2] == 78:
        slot = 1
    elif ln == 7 and data[n0] == 86 and data[n0 + 1] == 97 and data[n0 + 2] == 114 and data[n0 + 3] == 105 \
            and data[n0 + 4] == 97 and data[n0 + 5] == 110 and data[n0 + 6] == 116:
        slot = 2
    if slot >= 0:
        spans[2 * slot] = v0
        spans[2 * slot + 1] = v1


@njit(cache=True)
def _result_code(data, a, b):
    """0 '*', 1 '1-0', 2 '0-1', 3 '1/2-1/2', 4 anything else."""
    n = b - a
    if n == 1 and data[a] == 42:
        return 0
    if n == 3 and data[a + 1] == 45:
        if data[a] == 49 and data[a + 2] == 48:
            return 1
        if data[a] == 48 and data[a + 2] == 49:
            return 2
    if n == 7 and data[a] == 49 and data[a + 1] == 47 and data[a + 2] == 50 and data[a + 3] == 45 \
            and data[a + 4] == 49 and data[a + 5] == 47 and data[a + 6] == 50:
        return 3
    return 4


@njit(cache=True)
def _decimal(t, i, n, allow_frac_digits):
    """Parse digits[.digits] at t[i:]: (end, value as float (exact for <= 15 digits), integer part,
    digit count, ok). ok False: no digit at i."""
    j = i
    v = 0
    nd = 0
    while j < n and _digit(t[j]):
        if nd < 18:
            v = v * 10 + (t[j] - 48)
        nd += 1
        j += 1
    if nd == 0:
        return i, 0.0, 0, 0, False
    ip = v
    k = 0
    if allow_frac_digits and j + 1 < n and t[j] == 46 and _digit(t[j + 1]):
        j += 1
        while j < n and _digit(t[j]):
            if nd < 18:
                v = v * 10 + (t[j] - 48)
            nd += 1
            k += 1
            j += 1
    x = np.float64(v)
    if k:
        x = x / (10.0 ** k)
    return j, x, ip, nd, True


@njit(cache=True)
def _cutechess(t, n, white, pov_white, dialect):
    """(matched, score stm POV, mate, bad, exact, dialect) of a node comment t[:n]: an engine
    runner's eval in the dialects of ``formats.pgn.parse_engine_eval`` (cutechess/fastchess pawns and
    ``±M`` plies, c-chess-cli centipawns and ``M`` moves; ``dialect``: the bits 1 pawns, 2 centipawns
    of the game's earlier comments). An ambiguous comment is not exact (python-chess's reader rejects it)."""
    i = 0
    while i < n and _ws(t[i]):
        i += 1
    # _CUTECHESS_LIKE
    like = False
    if i < n:
        c = t[i]
        c1 = t[i + 1] if i + 1 < n else 0
        c2 = t[i + 2] if i + 2 < n else 0
        if (c == 43 or c == 45) and c1 == 77 and (_digit(c2) or c2 == 47):
            like = True
        elif c == 77 and (_digit(c1) or c1 == 47):
            like = True
        elif (c == 43 or c == 45) and _digit(c1):
            like = True
        else:
            j = i + 1 if (c == 43 or c == 45) else i
            while j < n and _digit(t[j]):
                j += 1
            if j + 1 < n and t[j] == 46 and _digit(t[j + 1]):
                like = True
    # _ENGINE
    j = i
    neg = False
    plus = False
    if j < n and (t[j] == 43 or t[j] == 45):
        neg = t[j] == 45
        plus = t[j] == 43
        j += 1
    mate = False
    if j < n and t[j] == 77:
        mate = True
        j += 1
    whole = 0
    while j + whole < n and _digit(t[j + whole]):
        whole += 1
    j2, x, ip, nd, ok = _decimal(t, j, n, True)
    matched = ok and j2 + 1 < n and t[j2] == 47 and _digit(t[j2 + 1])
    if not matched:
        return False, 0, False, like, True, dialect
    # the time after "/depth": seconds (cutechess, fastchess: dialect 1) or milliseconds (c-chess-cli: 2)
    own = 0
    k = j2 + 1
    while k < n and _digit(t[k]):
        k += 1
    if k < n and _ws(t[k]):
        while k < n and _ws(t[k]):
            k += 1
        k0 = k
        while k < n and _digit(t[k]):
            k += 1
        if k > k0:
            if k + 1 < n and t[k] == 46 and _digit(t[k + 1]):
                k += 1
                while k < n and _digit(t[k]):
                    k += 1
            if k + 1 < n and t[k] == 109 and t[k + 1] == 115:
                own = 2
            elif k < n and t[k] == 115:
                own = 1
    if nd > 15:
        return True, 0, False, False, False, dialect
    frac = nd > whole
    if mate and frac:
        return True, 0, False, True, True, dialect
    if mate:
        if plus:
            plies = ip
            dialect = dialect | 1
        elif not neg:
            plies = 2 * ip - 1 if ip > 0 else 0
            dialect = dialect | 2
        elif (own if own else dialect) == 1:
            plies = ip
        elif (own if own else dialect) == 2:
            plies = 2 * ip
        else:
            return True, 0, False, False, False, dialect  # ambiguous
        score = MATE - plies if not neg else -(MATE - plies)
    elif frac:
        score = np.int64(np.rint(x * 100.0))
        if neg:
            score = -score
        dialect = dialect | 1
    elif plus:
        return True, 0, False, False, False, dialect  # ambiguous
    else:
        score = np.int64(ip)
        if neg:
            score = -score
        dialect = dialect | 2
    if pov_white and not white:
        score = -score
    return True, score, mate, False, True, dialect | own


@njit(cache=True)
def _lichess(t, n, white):
    """(matched, score stm POV, mate, bad, exact) of the first [%eval ...] of t[:n] (python-chess's
    grammar) for the position after the move (``white``: its side to move is white)."""
    has = False
    for s in range(n - 4):
        if t[s] == 37 and t[s + 1] == 101 and t[s + 2] == 118 and t[s + 3] == 97 and t[s + 4] == 108:
            has = True
            break
    if not has:
        return False, 0, False, False, True
    for s in range(n - 6):
        if not (t[s] == 91 and t[s + 1] == 37 and t[s + 2] == 101 and t[s + 3] == 118 and t[s + 4] == 97
                and t[s + 5] == 108 and _ws(t[s + 6])):
            continue
        j = s + 7
        if j < n and t[j] == 35:  # '#' [+-]? digits
            j += 1
            neg = False
            if j < n and (t[j] == 43 or t[j] == 45):
                neg = t[j] == 45
                j += 1
            d0 = j
            v = 0
            while j < n and _digit(t[j]):
                if j - d0 < 18:
                    v = v * 10 + (t[j] - 48)
                j += 1
            nd = j - d0
            if nd == 0 or not _tail(t, j, n):
                continue
            if nd > 9:
                return True, 0, False, False, False
            num = -v if neg else v
            if num == 0:
                return True, -MATE, True, False, True
            white_mates = num > 0
            plies = 2 * v - 1 if white_mates == white else 2 * v
            wp = MATE - plies if white_mates else -(MATE - plies)
            return True, wp if white else -wp, True, False, True
        neg = False
        if j < n and (t[j] == 43 or t[j] == 45):
            neg = t[j] == 45
            j += 1
        d0 = j
        while j < n and _digit(t[j]):
            j += 1
        L = j - d0
        f = 0
        dot = j < n and t[j] == 46
        if dot:
            k = j + 1
            while k < n and _digit(t[k]):
                k += 1
            f = k - j - 1
        ok = False
        endn = j
        if dot and L <= 10 and 1 <= f <= 2 and _tail(t, j + 1 + f, n):
            ok = True
            endn = j + 1 + f
        elif 1 <= L <= 10:
            if dot and _tail(t, j + 1, n):
                ok = True
                endn = j + 1
            elif _tail(t, j, n):
                ok = True
                endn = j
        if not ok:
            continue
        v = 0
        k = 0
        for q in range(d0, endn):
            if t[q] == 46:
                k = endn - q - 1
            else:
                v = v * 10 + (t[q] - 48)
        x = np.float64(v)
        if k:
            x = x / (10.0 ** k)
        wp = np.int64(np.rint(x * 100.0))
        if neg:
            wp = -wp
        return True, wp if white else -wp, False, False, True
    return False, 0, False, True, True  # '%eval' that does not parse


@njit(cache=True, inline="always")
def _tail(t, j, n):
    """(?:,\\d+)?\\] at t[j:]."""
    if j < n and t[j] == 93:
        return True
    if j < n and t[j] == 44:
        k = j + 1
        while k < n and _digit(t[k]):
            k += 1
        return k > j + 1 and k < n and t[k] == 93
    return False


@njit(cache=True)
def _san(data, i, e):
    """MOVETEXT_REGEX's first alternative at data[i:e]: (length or 0, piece 0..5 (-1 none), file,
    rank (-1 none), target square, python-chess promotion type or 0)."""
    for P in range(2):
        j0 = i
        piece = -1
        if P == 0:
            if j0 < e and _piece_letter(data[j0]) >= 0:
                piece = _piece_letter(data[j0])
                j0 += 1
            else:
                continue
        for F in range(2):
            j1 = j0
            fl = -1
            if F == 0:
                if j1 < e and _file(data[j1]):
                    fl = data[j1] - 97
                    j1 += 1
                else:
                    continue
            for R in range(2):
                j2 = j1
                rk = -1
                if R == 0:
                    if j2 < e and _rank(data[j2]):
                        rk = data[j2] - 49
                        j2 += 1
                    else:
                        continue
                for S in range(2):
                    j3 = j2
                    if S == 0:
                        if j3 < e and (data[j3] == 45 or data[j3] == 120):
                            j3 += 1
                        else:
                            continue
                    if j3 + 1 < e and _file(data[j3]) and _rank(data[j3 + 1]):
                        to = (data[j3] - 97) + 8 * (data[j3 + 1] - 49)
                        j4 = j3 + 2
                        promo = 0
                        if j4 + 1 < e and data[j4] == 61 and _promo_letter(data[j4 + 1]):
                            promo = _promo_letter(data[j4 + 1])
                            j4 += 2
                        elif j4 < e and _promo_letter(data[j4]):
                            promo = _promo_letter(data[j4])
                            j4 += 1
                        return j4 - i, piece, fl, rk, to, promo
    return 0, -1, -1, -1, -1, 0


@njit(cache=True)
def _match(bb, pc, us, ep, piece, fl, rk, to, promo):
    """parse_san's move search: (status, frm, promo code 0..4); status 0 one legal move, else the
    game is handed back (none, several, or find_move's path)."""
    own = bb[OCC + us]
    if own & SQ[to]:
        return 1, 0, 0
    if promo == 6:  # king promotion: never legal
        return 1, 0, 0
    pcode = promo - 1 if promo else 0
    if piece >= 0:
        t = piece
    elif fl >= 0 and rk >= 0:
        return 1, 0, 0
    else:
        t = 0
        if fl < 0:
            fl = to & 7
    cand = bb[8 * us + t]
    found = -1
    while cand:
        frm = lsb(cand)
        cand &= cand - U64(1)
        if fl >= 0 and (frm & 7) != fl:
            continue
        if rk >= 0 and (frm >> 3) != rk:
            continue
        if is_legal(bb, pc, us, ep, frm, to, pcode):
            if found >= 0:
                return 1, 0, 0
            found = frm
    if found < 0:
        return 1, 0, 0
    return 0, found, pcode


@njit(cache=True)
def _castle(bb, pc, us, c960, kingside):
    """(ok, king square, rook square) of O-O / O-O-O (generate_castling_moves' first match)."""
    back = U64(0xFF) << U64(56 * us)
    kings = bb[8 * us + KING] & back
    if popcount(kings) != 1:
        return False, 0, 0
    k = lsb(kings)
    rights = bb[6] & back & bb[8 * us + 3]
    r = 63
    while r >= 0:  # scan_reversed
        if (rights >> U64(r)) & U64(1):
            if (r > k) == kingside:
                if c960:
                    if castle960_legal(bb, us, k, r):
                        return True, k, r
                elif k == 56 * us + 4 and (r == 56 * us + 7 or r == 56 * us):
                    if _castle_legal(bb, us, r):
                        return True, k, r
        r -= 1
    return False, 0, 0


@njit(cache=True)
def scan(data, pos, end, final, line, game, have, bb0, pc0, st0, c960, pov_white, info, t_cur, row0,
         o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags, o_kind, o_game,
         o_line):
    """Walk games from byte ``pos`` (``line`` lines read before it, ``game`` the last game ordinal).
    have: bb0/pc0/st0/c960 hold the start board of the game at ``pos`` (from a BOARD status).
    Writes status, position, line count, rows and game ordinal into ``info`` (see the module)."""
    cap = o_score.shape[0]
    rows = row0
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(4, np.int64)
    spans = np.zeros(6, np.int64)
    while True:
        info[I_POS] = pos
        info[I_LINE] = line
        info[I_ROWS] = rows
        info[I_GAME] = game
        p = pos
        ln = line
        # ---- leading blank and comment lines
        while True:
            if p >= end:
                info[I_STATUS] = END if final else NEED
                return
            e, nx, fl = _line(data, p, end, final)
            if fl == 1:
                info[I_STATUS] = NEED
                return
            if fl == 2:
                info[I_STATUS] = HAND
                return
            if _blank(data, p, e) or data[p] == 37 or data[p] == 59:
                p = nx
                ln += 1
                continue
            break
        # ---- tags
        for k in range(6):
            spans[k] = -1
        consec = 0
        found = False
        mt = -1  # start of the first movetext line (already read), or -1 at the end of the file
        while p < end:
            e, nx, fl = _line(data, p, end, final)
            if fl == 1:
                info[I_STATUS] = NEED
                return
            if fl == 2:
                info[I_STATUS] = HAND
                return
            c = data[p]
            if c == 37 or c == 59:
                p = nx
                ln += 1
                continue
            if consec < 1 and _blank(data, p, e):
                consec += 1
                p = nx
                ln += 1
                continue
            found = True
            if c != 91:
                mt = p
                break
            consec = 0
            _tag(data, p, e, spans)
            p = nx
            ln += 1
        if not final and mt < 0:
            info[I_STATUS] = NEED
            return
        if not found:
            info[I_STATUS] = END
            return
        res = 0 if spans[0] < 0 else _result_code(data, spans[0], spans[1])
        if not have:
            info[I_STATUS] = BOARD
            info[I_FEN_A] = spans[2]
            info[I_FEN_B] = spans[3]
            info[I_VAR_A] = spans[4]
            info[I_VAR_B] = spans[5]
            return
        have = False
        for k in range(16):
            bb[k] = bb0[k]
        for k in range(64):
            pc[k] = pc0[k]
        for k in range(4):
            st[k] = st0[k]
        gfirst = rows
        status = 0  # 0 playing, 1 game done, 2 hand back, 3 need more
        pending = -1  # row of the position before the last move, waiting for its comments
        pfrm = 0
        pto = 0
        ppro = 0
        n_cur = 0
        a_has = False  # the previous move's [%eval]: this position's score
        a_score = 0
        a_mate = False
        a_bad = False
        dialect = 0  # engine-runner dialects of this game's comments so far (1 pawns, 2 centipawns)
        # ---- movetext: the line at mt was read (counted) by the tag loop
        p = mt if mt >= 0 else end
        fresh = True
        while status == 0:
            if p >= end:
                if not final:
                    status = 3
                else:
                    status = 1
                break
            e, nx, fl = _line(data, p, end, final)
            if fl == 1:
                status = 3
                break
            if fl == 2:
                status = 2
                break
            ln += 1
            if fresh:
                if data[p] == 37 or data[p] == 59:
                    p = nx
                    continue
                if _blank(data, p, e):
                    p = nx
                    status = 1
                    break
            fresh = True
            i = p
            nextp = nx
            while i < e and status == 0:
                c = data[i]
                if c == 123:  # '{' comment
                    cs = i + 2 if i + 1 < e and data[i + 1] == 32 else i + 1
                    # the node's comment text goes to t_cur (joined with ' ')
                    sep = pending >= 0 and n_cur > 0
                    base = n_cur
                    if sep:
                        t_cur[n_cur] = 32
                        n_cur += 1
                    lp = cs  # start of the current piece within its line
                    le = e
                    lnx = nextp
                    closed = -1
                    while True:
                        k = lp
                        while k < le and data[k] != 125:
                            k += 1
                        if k < le:
                            closed = k
                            stop = k - 1 if k > lp and data[k - 1] == 32 else k
                            if pending >= 0:
                                if n_cur + (stop - lp) >= SCRATCH - 2:
                                    status = 2
                                    break
                                for q in range(lp, stop):
                                    t_cur[n_cur] = data[q]
                                    n_cur += 1
                            break
                        # no '}' on this line: the piece and a newline, then the next line
                        if pending >= 0:
                            if n_cur + (le - lp) >= SCRATCH - 2:
                                status = 2
                                break
                            for q in range(lp, le):
                                t_cur[n_cur] = data[q]
                                n_cur += 1
                            if lnx > le:  # terminated
                                t_cur[n_cur] = 10
                                n_cur += 1
                        if lnx >= end:
                            status = 2 if final else 3  # unterminated comment / more data needed
                            break
                        lp = lnx
                        le, lnx2, fl2 = _line(data, lp, end, final)
                        if fl2 == 1:
                            status = 3
                            break
                        if fl2 == 2:
                            status = 2
                            break
                        lnx = lnx2
                        ln += 1
                    if status != 0:
                        break
                    if pending >= 0:
                        if n_cur == base + (1 if sep else 0):  # an empty comment adds nothing
                            n_cur = base
                    # continue with the rest of the closing line (not a fresh line)
                    e = le
                    nextp = lnx
                    i = closed + 1
                    continue
                if c == 59:  # ';' rest of the line
                    break
                if c == 40 or c == 41:  # variations: handed back
                    status = 2
                    break
                if c == 36:  # NAG
                    k = i + 1
                    while k < e and _digit(data[k]):
                        k += 1
                    if k - i - 1 >= NAG_DIGITS:  # python-chess's int() may refuse it: handed back
                        status = 2
                        break
                    i = k if k > i + 1 else i + 1
                    continue
                if c == 42:  # '*'
                    i += 1
                    continue
                if c == 48 or c == 49:
                    if i + 3 < e and data[i] == 48 and data[i + 1] == 48 and data[i + 2] == 48 and data[i + 3] == 48:
                        status = 2  # null move
                        break
                    castle = 0
                    if c == 48 and i + 2 < e and data[i + 1] == 45 and data[i + 2] == 48:
                        castle = 1
                        ce = i + 3
                        if i + 4 < e and data[i + 3] == 45 and data[i + 4] == 48:
                            castle = 2
                            ce = i + 5
                    if castle == 0:
                        r = -1
                        if i + 2 < e and data[i + 1] == 45 and ((c == 49 and data[i + 2] == 48) or
                                                                 (c == 48 and data[i + 2] == 49)):
                            r = 1 if c == 49 else 2
                            ce = i + 3
                        elif c == 49 and i + 6 < e and data[i + 1] == 47 and data[i + 2] == 50 and data[i + 3] == 45 \
                                and data[i + 4] == 49 and data[i + 5] == 47 and data[i + 6] == 50:
                            r = 3
                            ce = i + 7
                        if r > 0:
                            if res == 0:
                                res = r
                            i = ce
                        else:
                            i += 1
                        continue
                elif c == 79:  # 'O'
                    castle = 0
                    if i + 2 < e and data[i + 1] == 45 and data[i + 2] == 79:
                        castle = 1
                        ce = i + 3
                        if i + 4 < e and data[i + 3] == 45 and data[i + 4] == 79:
                            castle = 2
                            ce = i + 5
                    if castle == 0:
                        i += 1
                        continue
                else:
                    castle = 0
                n = 0
                if castle == 0:
                    if c == 45 and i + 1 < e and data[i + 1] == 45:
                        status = 2
                        break
                    if c == 90 and i + 1 < e and data[i + 1] == 48:
                        status = 2
                        break
                    if c == 64 or (c == 80 and i + 1 < e and data[i + 1] == 64):
                        status = 2  # drops, @@@@
                        break
                    n, piece, fl_, rk, to, promo = _san(data, i, e)
                    if n == 0:
                        if _piece_letter(c) >= 0 and i + 1 < e and data[i + 1] == 64:
                            status = 2
                            break
                        i += 1
                        continue
                # ---- a move: finish the pending node, play its move, parse this one
                if pending >= 0:
                    ok, dialect = _finish(pending, t_cur, n_cur, st[0] == 0, pov_white, o_board, o_score,
                                          o_flags, a_has, a_score, a_mate, a_bad, dialect)
                    if ok < 0:
                        status = 2
                        break
                    a_has, a_score, a_mate, a_bad = _after(t_cur, n_cur, st[0] != 0)
                    if a_has < 0:
                        status = 2
                        break
                    push(bb, pc, st, pfrm, pto, ppro)
                if piece_status(bb) != 0:
                    status = 2
                    break
                us = st[0]
                if castle:
                    okc, frm, to = _castle(bb, pc, us, c960, castle == 1)
                    if not okc:
                        status = 2
                        break
                    pcode = 0
                    i = ce
                else:
                    bad, frm, pcode = _match(bb, pc, us, st[1], piece, fl_, rk, to, promo)
                    if bad:
                        status = 2
                        break
                    i += n
                if rows >= cap:
                    status = 4
                    break
                ply = 2 * (st[3] - 1) + us
                kind = settle(rows, bb, pc, us, st[1], st[2], st[3], 0, True, False, 0, ply, True, frm, to, pcode,
                              True, c960, c960, o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap,
                              o_has, o_flags)
                if kind:
                    kind = _settle_check_ep(rows, bb, pc, us, st[1], st[2], st[3], ply, frm, to, pcode, c960, o_board,
                                            o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags)
                if kind:
                    status = 2
                    break
                o_game[rows] = game + 1
                o_line[rows] = line + 1
                o_kind[rows] = 0
                pending = rows
                rows += 1
                pfrm = frm
                pto = to
                ppro = pcode
                n_cur = 0
            if status != 0:
                break
            p = nextp
        if status == 1:  # the game is done: its last node, then the result
            if pending >= 0:
                ok, dialect = _finish(pending, t_cur, n_cur, st[0] == 0, pov_white, o_board, o_score, o_flags,
                                      a_has, a_score, a_mate, a_bad, dialect)
                if ok < 0:
                    status = 2
            if (res == 0 or res == 4) and rows > gfirst:
                status = 2  # python-chess writes the rejects
        if status == 1:
            wr = 1 if res == 1 else (-1 if res == 2 else 0)
            for r in range(gfirst, rows):
                black = o_board[r, 24] >> 7
                o_result[r] = -wr if black else wr
                o_board[r, 30] = wr + 1
            game += 1
            pos = p
            line = ln
            continue
        rows = gfirst
        info[I_ROWS] = rows
        if status == 2:
            info[I_STATUS] = HAND
        elif status == 3:
            info[I_STATUS] = NEED
        else:
            info[I_STATUS] = FULL if rows > 0 else HAND
        return


@njit(cache=True)
def _after(t, n, white_next):
    """(has, score, mate, bad) of a node's [%eval] for the next position; has -1: not exact."""
    m, s, mate, bad, exact = _lichess(t, n, white_next)
    if not exact:
        return -1, 0, False, False
    return (1 if m else 0), s, mate, bad


@njit(cache=True)
def _finish(r, t, n, white, pov_white, o_board, o_score, o_flags, a_has, a_score, a_mate, a_bad, dialect):
    """Score row r from its node comment t[:n] (cutechess) or the previous node's [%eval]; 0 done,
    -1 the game goes to python-chess (a bad eval comment, a score out of range, inexact); and the
    game's engine-runner dialects with this comment's."""
    m, s, mate, bad, exact, dialect = _cutechess(t, n, white, pov_white, dialect)
    if not exact:
        return -1, dialect
    if not m:
        if a_has > 0:
            s = a_score
            mate = a_mate
            none = False
        else:
            s = 0
            mate = False
            none = True
        bad = bad or a_bad
    else:
        none = False
    if bad:
        return -1, dialect
    if s < -32767 or s > 32767:
        return -1, dialect
    o_score[r] = s
    o_flags[r] = (F_NONE if none else 0) | (F_MATE if mate else 0)
    ew = s if white else -s
    e16 = ew & 0xFFFF
    o_board[r, 28] = e16 & 255
    o_board[r, 29] = e16 >> 8
    return 0, dialect


@njit(cache=True)
def _settle_check_ep(r, bb, pc, us, ep_raw, half, full, ply, frm, to, pcode, c960, o_board, o_score, o_result, o_ply,
                     o_pcount, o_check, o_best, o_cap, o_has, o_flags):
    """Row r for the one position :func:`.fixed.settle` leaves to python-chess that a game's
    mainline meets often: in check from a pawn that has just pushed two squares, with a legal
    en-passant capture (python-chess's ``status()``: valid, the checker being the pushed pawn on
    the en-passant square's ``_valid_ep_square``). 0 written, 1 not this case (hand back)."""
    if piece_status(bb):
        return 1
    ok, ep = settle_ep(bb, pc, us, ep_raw)
    if not ok or ep < 0:
        return 1
    them = 1 - us
    occ = bb[OCC] | bb[OCC + 1]
    if attackers(bb, us, lsb(bb[8 * them + KING]), occ, U64(0)):
        return 1
    if not c960:  # position_status's castling rights check (standard chess)
        if bb[CASTLE] & ~standard_rights(bb):
            return 1
    checkers = attackers(bb, them, lsb(bb[8 * us + KING]), occ, U64(0))
    if popcount(checkers) != 1:
        return 1
    pushed_to = ep - 8 if us == 0 else ep + 8
    pushed_from = ep + 8 if us == 0 else ep - 8
    if (ep >> 3) != (5 if us == 0 else 2) or pc[pushed_to] != 8 * them + PAWN:
        return 1
    if occ & (SQ[ep] | SQ[pushed_from]) or lsb(checkers) != pushed_to:
        return 1
    if ply < 0 or ply > 65535:
        return 1
    if not (is_legal960(bb, pc, us, ep, frm, to, pcode) if c960 else is_legal(bb, pc, us, ep, frm, to, pcode)):
        return 1
    write_board(o_board, r, bb, pc, us, ep, half, full, 0, 1)
    o_pcount[r] = popcount(occ)
    o_check[r] = True
    o_score[r] = 0
    o_result[r] = 0
    o_ply[r] = ply
    o_flags[r] = F_NONE
    o_has[r] = True
    o_best[r], o_cap[r] = move_code(bb, pc, us, ep, frm, to, pcode)
    return 0
