"""Compiled move chains: encode a run of packed boards as chain starts and move indices, and decode them back.

The chained dataset layout (:mod:`nnue.pipeline.parts`) stores a position that follows the row
before it by that row's move as nothing but the move's index (below) and its own score and
result; the first row of a chain stores its whole 32-byte packed board. Both directions carry the
same board state (:mod:`.chesscore`: ``bb``, ``pc``, ``st``), so what the decoder rebuilds is what
the encoder compared:

* a chain start loads its state from its packed board (marlinformat layout,
  :mod:`nnue.pipeline.board`): pieces and castling rooks, side to move, the en-passant square
  (which a packed board holds only when an en-passant capture is legal), halfmove clock,
  fullmove number;
* a row that continues plays the row before's move on that state (:func:`_play`: what
  :func:`.chesscore.push` does, Chess960's king-takes-rook castling too, with the packed board kept
  as four 64-bit words and updated move by move), keeps the en-passant square only when a capture
  onto it is legal (:func:`.chesscore.legal_ep`, as the packer does), and takes the board's eval
  (white POV) and wdl from its own score and result (stm POV), as the packer writes every board
  (:func:`.chesscore.write_board`; counters clamped to u8/u16 there).

The encoder (:func:`encode`) makes a row a continuation only when that rebuilt board equals the
row's packed board in all 32 bytes and the move's index gives back the row before's packed move
exactly; otherwise it is a chain start; :func:`decode` rebuilds the rows with the same functions. Nothing is lost whatever the rows are (shuffled dumps, EPD: every row a start).

**Move index** of a move in a position: the mover's pieces are taken by type (king, pawns,
knights, bishops, rooks, queens: :data:`ORDER`) and within a type in ascending square order, each
with its destinations in ascending square order (a pawn's pushes, captures and the
en-passant square when a capture onto it is legal, four entries each, N B R Q, on its promotion
rank; a king's attacked squares without its own pieces, plus the squares of its own rooks that
carry a castling right, which is how castling is stored; any other piece's attacks without its
own pieces); the index is the move's place in that list. Like binpack's movetext (a piece index
then a destination index) it needs no legality test, only each piece's attacks; unlike it the
index is one number per row in a byte-aligned column that zstd compresses (``uint16``; a few
hundred entries at most). A packed move whose index gives back a different packed move (or none)
is kept whole instead (``raw``). :func:`move_index` / :func:`index_move` define the list (the
reference); the hot paths use :func:`_move_index_fast` / :func:`_index_fast`, which count the
pawns' entries for all pawns at once (tested equal).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .bits import BMI2, lsb, pdep, pext, popcount
from .chesscore import CASTLE, KING, KING_ATT, KNIGHT_ATT, OCC, PAWN, PAWN_ATT, RANK_MASK, ROOK, SQ, U64, _safe_after, \
    legal_ep, move_code, move_code_of, piece_attacks, push
from .fixed import _marlin, castle960_legal

RANK_MASK_EP = np.array([0x000000FF00000000, 0x00000000FF000000], np.uint64)  # the rank a side's en-passant capturer stands on

NO_MOVE = -1
# the order of piece types in the move list: the king, pawns and knights first (their entries are
# counted without sliding attacks, and they make more than half the moves of real games), then
# the sliders; bench/results/chained_cpu.json has what it saves in the stream's decoder
ORDER = np.array([5, 0, 1, 2, 3, 4], np.int64)
BAD_STEM, NO_MOVE_ABOVE, BAD_FIELDS, BAD_INDEX, ILLEGAL = 1, 2, 3, 4, 5  # why decode stops (WHY below)


@njit(cache=True)
def load(boards, r, bb, pc, st):
    """State of packed board ``boards[r]`` into bb/pc/st (st: side to move, en-passant square or
    −1, halfmove clock, fullmove number). False for a board that does not decode."""
    if not _marlin(boards, r, bb, pc):
        return False
    st[0] = boards[r, 24] >> 7
    ep = np.int64(boards[r, 24] & 0x7F)
    st[1] = -1 if ep == 64 else ep
    st[2] = boards[r, 25]
    st[3] = np.int64(boards[r, 26]) | (np.int64(boards[r, 27]) << 8)
    return True


@njit(cache=True, inline="always")
def _bit(sq):
    """The bitboard of square sq: a shift (no table load, no negative-index check)."""
    return U64(1) << U64(sq)


@njit(cache=True, inline="always")
def _pawn_dests(us, ep, frm, own, enemy):
    """(destination mask, entries per destination) of a pawn of side ``us`` on ``frm``."""
    occ = own | enemy
    targets = enemy
    if ep >= 0:
        targets |= _bit(ep)
    dest = PAWN_ATT[U64(us), U64(frm)] & targets
    if us == 0:
        fwd = frm + 8
        if fwd < 64 and not occ & _bit(fwd):
            dest |= _bit(fwd)
            if (frm >> 3) == 1 and not occ & _bit(fwd + 8):
                dest |= _bit(fwd + 8)
        return dest, 4 if (frm >> 3) == 6 else 1
    fwd = frm - 8
    if fwd >= 0 and not occ & _bit(fwd):
        dest |= _bit(fwd)
        if (frm >> 3) == 6 and not occ & _bit(fwd - 8):
            dest |= _bit(fwd - 8)
    return dest, 4 if (frm >> 3) == 1 else 1


@njit(cache=True, inline="always")
def _piece_dests(bb, us, t, frm, own, occ):
    """Destination mask of a knight, bishop, rook, queen or king (with its castling rooks)."""
    if t == KING:
        return (KING_ATT[frm] & ~own) | (bb[CASTLE] & own & RANK_MASK[us])
    return piece_attacks(t, frm, occ) & ~own


@njit(cache=True, inline="always")
def _count(bb, pc, us, ep, t, s, own, enemy):
    """Entries of the piece of type t on s in the list: destinations, four each for a pawn on
    its promotion rank."""
    if t == PAWN:
        d, k = _pawn_dests(us, ep, s, own, enemy)
        return popcount(d) * k
    return popcount(_piece_dests(bb, us, t, s, own, own | enemy))


@njit(cache=True)
def move_index(bb, pc, us, ep, frm, to, promo):
    """Index of the move frm→to (promo 0, or 1..4 = N B R Q) in the list of the module
    docstring (pieces by type in the order of ORDER, then by square), or −1 when it is not in it."""
    if frm < 0 or frm > 63 or to < 0 or to > 63 or pc[frm] < 0 or (pc[frm] >> 3) != us:
        return NO_MOVE
    own = bb[OCC + us]
    enemy = bb[OCC + 1 - us]
    mt = pc[frm] & 7
    base = 0
    for t in ORDER:
        m = bb[8 * us + t]
        if t == mt:
            m &= SQ[frm] - U64(1)
        while m:
            s = lsb(m)
            m &= m - U64(1)
            base += _count(bb, pc, us, ep, t, s, own, enemy)
        if t == mt:
            break
    if mt == PAWN:
        d, k = _pawn_dests(us, ep, frm, own, enemy)
    else:
        d, k = _piece_dests(bb, us, mt, frm, own, own | enemy), 1
    if not d & SQ[to]:
        return NO_MOVE
    if (k == 4) != (promo != 0):
        return NO_MOVE
    before = popcount(d & (SQ[to] - U64(1)))
    return base + before * k + (promo - 1 if k == 4 else 0)


@njit(cache=True, inline="always")
def _pick(s, d, k, idx):
    """(True, from, to, promo) of entry ``idx`` of the piece on s with destinations d, k entries
    a destination (4: a pawn's promotions N B R Q)."""
    for _ in range(idx // k):
        d &= d - U64(1)
    return True, s, lsb(d), (idx % k + 1 if k == 4 else 0)


@njit(cache=True)
def index_move(bb, pc, us, ep, idx):
    """(ok, from, to, promo) of the move at ``idx`` of the list; ok False when there is none."""
    own = bb[OCC + us]
    enemy = bb[OCC + 1 - us]
    for t in ORDER:
        m = bb[8 * us + t]
        while m:
            s = lsb(m)
            m &= m - U64(1)
            if t == PAWN:
                d, k = _pawn_dests(us, ep, s, own, enemy)
            else:
                d, k = _piece_dests(bb, us, t, s, own, own | enemy), 1
            n = popcount(d) * k
            if idx < n:
                return _pick(s, d, k, idx)
            idx -= n
    return False, 0, 0, 0


@njit(cache=True, inline="always")
def _unpack_move(best):
    """(from, to, promo) of a packed move (viriformat layout: promo 1..4 when flag 3)."""
    return best & 63, (best >> 6) & 63, ((best >> 12) & 3) + 1 if (best >> 14) == 3 else 0


@njit(cache=True)
def _advance(bb, pc, st, frm, to, promo):
    """Play a move and keep the en-passant square only when a capture onto it is legal."""
    push(bb, pc, st, frm, to, promo)
    if st[1] >= 0:
        st[1] = legal_ep(bb, pc, st[0], st[1])


WHY = {BAD_STEM: "the chain's first board does not decode",
       NO_MOVE_ABOVE: "the row continues a chain, but the row above has no move (or one kept whole)",
       BAD_FIELDS: "its score or result does not fit a packed board",
       BAD_INDEX: "its move index is no move of its position",
       ILLEGAL: "its move is illegal in its position (it leaves its own king in check, castles through or out of check or across a piece, or takes a king)"}


@njit(cache=True)
def undelta_scores(start, delta, o_score):
    """Scores from ``score_delta`` (n,) uint32: zigzag of the score at a chain start, of the score
    plus the score above after. Writes o_score (n,) int16; returns −1 or the first row whose score
    falls outside int16."""
    prev = 0
    for r in range(start.shape[0]):
        z = np.int64(delta[r])
        d = (z >> 1) ^ -(z & 1)
        s = d if start[r] else d - prev
        if s < -32768 or s > 32767:
            return r
        o_score[r] = s
        prev = s
    return -1


@njit(cache=True)
def fill_ply(keep, values):
    """Plies from ``ply_reset``: the value where kept (a chain start or a ply that does not follow),
    else the ply above plus one. (n,) bool, (n,) uint16 -> (n,) uint16."""
    n = keep.shape[0]
    out = np.empty(n, np.uint16)
    prev = 0
    for r in range(n):
        prev = np.int64(values[r]) if keep[r] else prev + 1
        out[r] = prev
    return out


@njit(cache=True)
def fill_piece_count(keep, values, capture):
    """Piece counts from ``piece_count_reset``: the value where kept, else the count above less
    one when the move above captured. (n,) bool, (n,) uint8, (n,) bool -> (n,) uint8."""
    n = keep.shape[0]
    out = np.empty(n, np.uint8)
    prev = 0
    for r in range(n):
        if keep[r]:
            prev = np.int64(values[r])
        elif r and capture[r - 1]:
            prev -= 1
        out[r] = prev
    return out


# ============================================================================ the stream's decoder
# decoding (bench/results/chained_cpu.json): the packed board is kept as four words (occupancy,
# the two words of nibbles, the tail) and updated by each move (a nibble removed or inserted where
# its square ranks among the occupied ones, without branches) instead of being rebuilt; the side
# to move, en-passant square and counters are scalars; sliding attacks are looked up
# (kindergarten bitboards: one multiplication and one small table a line); the pawns' share of
# the move list is counted for all pawns at once, the first two pieces of a kind without a loop,
# and a piece's n-th destination is selected without a loop. Arrays are indexed with uint64
# (numba adds a negative-index wraparound to every signed index: 12 % of the decoder's time) and
# squares are shifts, not SQ lookups. The encoder steps with the same functions.
FILE_A = U64(0x0101010101010101)
FILE_B = U64(0x0202020202020202)
FILE_H = U64(0x8080808080808080)
DIAG_C2H7 = U64(0x0080402010080400)
RANK_3 = U64(0x0000000000FF0000)
RANK_6 = U64(0x0000FF0000000000)
RANK_1 = U64(0x00000000000000FF)
RANK_8 = U64(0xFF00000000000000)
M8, M16, M32 = U64(0xFF), U64(0xFFFF), U64(0xFFFFFFFF)
F4 = U64(4)


def _line_tables():
    """Kindergarten tables. FILL[f, o]: the attacks along a rank of a slider on file f, o the
    occupancy of files b..g, copied to all eight ranks (masked by a rank, diagonal or
    anti-diagonal, the attacks along it). AFILE[r, o]: the attacks along the a-file of a slider on
    rank r, o the occupancy of ranks 2..7 as the multiplication by DIAG_C2H7 gathers it (a2 the
    top bit); row 8 (no piece) empty. DIAG, ANTI, RANKM: the line masks through each square; entry
    64 (no piece: ``lsb`` of an empty set) empty, as KN's."""
    fill = np.zeros((8, 64), np.uint64)
    afile = np.zeros((9, 64), np.uint64)
    for f in range(8):
        for o in range(64):
            occ, a = o << 1, 0
            for d in (1, -1):
                x = f + d
                while 0 <= x < 8:
                    a |= 1 << x
                    if occ >> x & 1:
                        break
                    x += d
            fill[f, o] = a * 0x0101010101010101
            occ = sum(1 << (8 * (6 - i)) for i in range(6) if o >> i & 1)
            m = 0
            for d in (1, -1):
                x = f + d
                while 0 <= x < 8:
                    m |= 1 << (8 * x)
                    if occ >> (8 * x) & 1:
                        break
                    x += d
            afile[f, o] = m
    diag, anti, rank = (np.zeros(65, np.uint64) for _ in range(3))
    for s in range(64):
        for x in range(64):
            if (x & 7) - (x >> 3) == (s & 7) - (s >> 3):
                diag[s] |= np.uint64(1 << x)
            if (x & 7) + (x >> 3) == (s & 7) + (s >> 3):
                anti[s] |= np.uint64(1 << x)
            if x >> 3 == s >> 3:
                rank[s] |= np.uint64(1 << x)
    return fill, afile, diag, anti, rank


FILL, AFILE, DIAG, ANTI, RANKM = _line_tables()
KN = np.zeros(65, np.uint64)
KN[:64] = KNIGHT_ATT
# SEL8[b, j]: the j-th set bit of the byte b
SEL8 = np.zeros((256, 8), np.int64)
for _b in range(256):
    for _j, _x in enumerate(i for i in range(8) if _b >> i & 1):
        SEL8[_b, _j] = _x
# LOWN[i]: the 4i lowest bits (i = 0..16)
LOWN = np.array([(1 << (4 * i)) - 1 for i in range(16)] + [(1 << 64) - 1], np.uint64)


@njit(cache=True, inline="always")
def _line(sq, occ, mask):
    return FILL[U64(sq & 7), U64(((occ & mask) * FILE_B) >> U64(58))] & mask


@njit(cache=True, inline="always")
def _file(sq, occ):
    f = sq & 7
    return AFILE[U64(sq >> 3), U64((((occ >> U64(f)) & FILE_A) * DIAG_C2H7) >> U64(58))] << U64(f)


@njit(cache=True, inline="always")
def bishop_att_kg(sq, occ):
    """:func:`.chesscore.bishop_att` by table (sq 64: none)."""
    return _line(sq, occ, DIAG[U64(sq)]) | _line(sq, occ, ANTI[U64(sq)])


@njit(cache=True, inline="always")
def rook_att_kg(sq, occ):
    """:func:`.chesscore.rook_att` by table (sq 64: none)."""
    return _line(sq, occ, RANKM[U64(sq)]) | _file(sq, occ)


@njit(cache=True, inline="always")
def _dests(t, s, occ, free):
    """Destinations of the knight, bishop, rook or queen (t 1..4) on s (64: none) among ``free``."""
    if t == 1:
        return KN[U64(s)] & free
    if t == 2:
        return bishop_att_kg(s, occ) & free
    if t == 3:
        return rook_att_kg(s, occ) & free
    return (rook_att_kg(s, occ) | bishop_att_kg(s, occ)) & free


@njit(cache=True, inline="always")
def _nth_bmi2(d, i):
    """:func:`_nth` in two instructions (pdep, tzcnt): where :data:`.bits.BMI2`."""
    return lsb(pdep(U64(1) << U64(i), d))


@njit(cache=True, inline="always")
def _nth_portable(d, i):
    """The square of the i-th (from 0) set bit of d (i < popcount(d)), found without a loop."""
    c = popcount(d & M32)
    up = i >= c
    i = i - c if up else i
    base = 32 if up else 0
    d = d >> U64(32) if up else d
    c = popcount(d & M16)
    up = i >= c
    i = i - c if up else i
    base += 16 if up else 0
    d = d >> U64(16) if up else d
    c = popcount(d & M8)
    up = i >= c
    i = i - c if up else i
    base += 8 if up else 0
    d = d >> U64(8) if up else d
    return base + SEL8[U64(d & M8), U64(i)]


_nth = _nth_bmi2 if BMI2 else _nth_portable  # the i-th set bit of d


@njit(cache=True, inline="always")
def _nib_del(lo, hi, i):
    """The 128-bit nibble string (lo, hi) without nibble i (the ones above move down)."""
    ml = LOWN[U64(min(i, 16))]
    mh = LOWN[U64(max(i - 16, 0))]
    return (lo & ml) | (((lo >> F4) | (hi << U64(60))) & ~ml), (hi & mh) | ((hi >> F4) & ~mh)


@njit(cache=True, inline="always")
def _nib_ins(lo, hi, i, code):
    """The 128-bit nibble string (lo, hi) with ``code`` inserted as nibble i (the ones from i up
    move up; the top nibble falls off, there being at most 32)."""
    c = U64(code)
    low = i < 16
    il = min(i, 16)
    ih = max(i - 16, 0)
    ml = LOWN[U64(il)]
    mh = LOWN[U64(ih)]
    lo2 = (lo & ml) | ((lo << F4) & ~ml)
    sl = U64(4 * (il & 15))
    lo2 = (lo2 & ~(U64(15) << sl)) | (c << sl) if low else lo
    carry = lo >> U64(60) if low else U64(0)
    hi2 = (hi & mh) | (((hi << F4) | carry) & ~mh)
    sh = U64(4 * (ih & 15))
    hi2 = hi2 if low else (hi2 & ~(U64(15) << sh)) | (c << sh)
    return lo2, hi2


@njit(cache=True, inline="always")
def _rank(occ, sq):
    return popcount(occ & (_bit(sq) - U64(1)))


@njit(cache=True, inline="always")
def _code_at(lo, hi, i):
    """The piece code (colour·8 + type, a castling rook as a rook) of nibble i of (lo, hi)."""
    nib = np.int64(((lo >> U64(4 * i)) if i < 16 else (hi >> U64(4 * (i - 16)))) & U64(15))
    t = nib & 7
    return (nib & 8) | (ROOK if t == 6 else t)


@njit(cache=True, inline="always")
def _take_sq(bb, occ, lo, hi, sq):
    """Remove the piece on sq from the state and the nibbles; returns (occ, lo, hi, its code).
    The code is read from the nibbles: the step keeps no square-indexed array (``pc``), one
    array fewer handed to inlined code (see :func:`_index_words`) and no stores to it."""
    i = _rank(occ, sq)
    code = _code_at(lo, hi, i)
    lo, hi = _nib_del(lo, hi, i)
    occ &= ~_bit(sq)
    bb[U64(code)] &= ~_bit(sq)
    bb[U64(OCC + (code >> 3))] &= ~_bit(sq)
    return occ, lo, hi, code


@njit(cache=True, inline="always")
def _put_sq(bb, occ, lo, hi, sq, code):
    lo, hi = _nib_ins(lo, hi, _rank(occ, sq), code)
    occ |= _bit(sq)
    bb[U64(code)] |= _bit(sq)
    bb[U64(OCC + (code >> 3))] |= _bit(sq)
    return occ, lo, hi


@njit(cache=True, inline="always")
def _code_on(occ, lo, hi, sq):
    """The piece code on sq (:func:`_code_at`), −1 for an empty square."""
    return _code_at(lo, hi, _rank(occ, sq)) if occ & _bit(sq) else -1


@njit(cache=True)
def legal_ep_words(bb, us, ep):
    """:func:`.chesscore.legal_ep` (python-chess ``has_legal_en_passant()``: −1, or ep when a
    legal en-passant capture onto it exists for side ``us``) from the bitboards alone."""
    if ep <= 0:
        return -1
    occ = bb[U64(OCC)] | bb[U64(OCC + 1)]
    if occ & _bit(ep):
        return -1
    cand = PAWN_ATT[U64(1 - us), U64(ep)] & bb[U64(8 * us)] & RANK_MASK_EP[U64(us)]
    ksq = lsb(bb[U64(8 * us + KING)])
    capsq = ep - 8 if us == 0 else ep + 8
    while cand:
        frm = lsb(cand)
        cand &= cand - U64(1)
        if _safe_after(bb, us, ksq, frm, ep, capsq):
            return ep
    return -1


@njit(cache=True, inline="always")
def _mover_safe(bb, them, occ):
    """After a move (``them`` the side to move now, occ every piece): the side that moved has not
    left its king in check. The move list holds every piece's attacks (pseudo-legal moves), so
    this is what makes a decoded move a legal one (castling's path is checked before it is
    played, :func:`_step`)."""
    k = bb[U64(8 * (1 - them) + KING)]
    ksq = lsb(k)
    b = 8 * them
    a = (KNIGHT_ATT[U64(ksq & 63)] & bb[U64(b + 1)]) | (KING_ATT[U64(ksq & 63)] & bb[U64(b + 5)]) | (PAWN_ATT[U64(1 - them), U64(ksq & 63)] & bb[U64(b)])
    a |= rook_att_kg(ksq, occ) & (bb[U64(b + 3)] | bb[U64(b + 4)])
    a |= bishop_att_kg(ksq, occ) & (bb[U64(b + 2)] | bb[U64(b + 4)])
    return a == 0 and k != 0


@njit(cache=True, inline="always")
def _step(bb, us, ep_old, half, full, occ, lo, hi, frm, to, promo):
    """Play side ``us``'s move frm→to (promo 0, or 1..4 = N B R Q) as :func:`.chesscore.push`
    does (then the en-passant square kept only when a capture onto it is legal, as
    :func:`_advance`), keeping the nibbles in step; returns (legal, occ, lo, hi, ep, halfmove,
    fullmove); the side to move is then ``1 - us``. Not legal (and the state then half played):
    a castling whose king is not on its back rank or that python-chess refuses (a square between
    king and rook, or on their way, taken; the king in check, passing through or landing on an
    attacked square: :func:`.fixed.castle960_legal`, Chess960's rules, standard castling
    included), a move that takes a king, a move that leaves the mover's king in check."""
    ep = -1
    half += 1
    full += us
    kcap = False  # a king taken (a flag, not an early return: that measured 8 % slower)
    t = _code_at(lo, hi, _rank(occ, frm)) & 7
    own = bb[U64(OCC + us)]
    if t == PAWN or (bb[U64(OCC + 1 - us)] & _bit(to)):
        half = 0
    before = bb[U64(CASTLE)]
    cr = before & ~_bit(to) & ~_bit(frm)
    if t == KING:
        cr &= ~RANK_MASK[U64(us)]
    if t == KING and own & _bit(to):
        if (frm >> 3) != 7 * us or not castle960_legal(bb, us, frm, to):
            return False, occ, lo, hi, ep, half, full
        bb[U64(CASTLE)] = cr
        home = 56 * us
        occ, lo, hi, _c = _take_sq(bb, occ, lo, hi, frm)
        occ, lo, hi, _c = _take_sq(bb, occ, lo, hi, to)
        if to < frm:
            occ, lo, hi = _put_sq(bb, occ, lo, hi, home + 2, 8 * us + KING)
            occ, lo, hi = _put_sq(bb, occ, lo, hi, home + 3, 8 * us + ROOK)
        else:
            occ, lo, hi = _put_sq(bb, occ, lo, hi, home + 6, 8 * us + KING)
            occ, lo, hi = _put_sq(bb, occ, lo, hi, home + 5, 8 * us + ROOK)
    else:
        bb[U64(CASTLE)] = cr
        occ, lo, hi, _c = _take_sq(bb, occ, lo, hi, frm)
        if occ & _bit(to):
            occ, lo, hi, captured = _take_sq(bb, occ, lo, hi, to)
            kcap = (captured & 7) == KING
        elif t == PAWN and to == ep_old and (frm & 7) != (to & 7):
            occ, lo, hi, _c = _take_sq(bb, occ, lo, hi, ep_old + (-8 if us == 0 else 8))
        if t == PAWN and (to - frm == 16 or frm - to == 16):
            ep = (frm + to) >> 1
        if promo != 0:
            t = promo
        occ, lo, hi = _put_sq(bb, occ, lo, hi, to, 8 * us + t)
    # rooks still standing that lost their right: code 6 -> 3 (not the moved piece, nor one now on a square that lost one)
    lost = before & ~cr & occ & ~(_bit(to) | _bit(frm))
    while lost:
        s = lsb(lost)
        lost &= lost - U64(1)
        i = _rank(occ, s)
        if i < 16:
            lo ^= U64(5) << U64(4 * i)
        else:
            hi ^= U64(5) << U64(4 * (i - 16))
    if ep >= 0:
        ep = legal_ep_words(bb, 1 - us, ep)
    return _mover_safe(bb, 1 - us, occ) and not kcap, occ, lo, hi, ep, half, full


@njit(cache=True, inline="always")
def _pawn_total(us, ep, pawns, own, enemy):
    """Entries of the pawns ``pawns`` of side us in the list, counted for all of them at once."""
    empty = ~(own | enemy)
    targets = enemy
    if ep >= 0:
        targets |= _bit(ep)
    if us == 0:
        p1 = (pawns << U64(8)) & empty
        p2 = ((p1 & RANK_3) << U64(8)) & empty
        cw = ((pawns & ~FILE_A) << U64(7)) & targets
        ce = ((pawns & ~FILE_H) << U64(9)) & targets
        last = RANK_8
    else:
        p1 = (pawns >> U64(8)) & empty
        p2 = ((p1 & RANK_6) >> U64(8)) & empty
        cw = ((pawns & ~FILE_A) >> U64(9)) & targets
        ce = ((pawns & ~FILE_H) >> U64(7)) & targets
        last = RANK_1
    return popcount(p1) + popcount(p2) + popcount(cw) + popcount(ce) + \
        3 * (popcount(p1 & last) + popcount(cw & last) + popcount(ce & last))


PROMO_FROM = np.array([0x00FF000000000000, 0x000000000000FF00], np.uint64)  # the rank a side's pawns promote from
# a pawn's destinations in ascending order, as offsets from its square: white west capture, push,
# east capture, double push; black double push, west capture, push, east capture
PAWN_STEP = np.array([[7, 8, 9, 16], [-16, -9, -8, -7]], np.int64)


@njit(cache=True, inline="always")
def _pawn_pick_bmi2(us, ep, pawns, own, enemy, idx):
    """The move at ``idx`` among the pawns' entries (none on its promotion rank), without a loop:
    each kind of pawn move as the set of pawns that have it (in destination order: PAWN_STEP),
    those four sets gathered over the pawns (pext) and spread to four bits a pawn (pdep), so that
    the idx-th set bit names the pawn (bit // 4, in square order) and the kind (bit % 4)."""
    empty = ~(own | enemy)
    targets = enemy | ((U64(1) << U64(ep & 63)) if ep >= 0 else U64(0))
    if us == 0:
        p1 = (pawns << U64(8)) & empty
        p2 = ((p1 & RANK_3) << U64(8)) & empty
        k0 = (((pawns & ~FILE_A) << U64(7)) & targets) >> U64(7)
        k1 = p1 >> U64(8)
        k2 = (((pawns & ~FILE_H) << U64(9)) & targets) >> U64(9)
        k3 = p2 >> U64(16)
    else:
        p1 = (pawns >> U64(8)) & empty
        p2 = ((p1 & RANK_6) >> U64(8)) & empty
        k0 = p2 << U64(16)
        k1 = (((pawns & ~FILE_A) >> U64(9)) & targets) << U64(9)
        k2 = p1 << U64(8)
        k3 = (((pawns & ~FILE_H) >> U64(7)) & targets) << U64(7)
    w = pdep(pext(k0, pawns), U64(0x11111111)) | pdep(pext(k1, pawns), U64(0x22222222)) | \
        pdep(pext(k2, pawns), U64(0x44444444)) | pdep(pext(k3, pawns), U64(0x88888888))
    b = lsb(pdep(U64(1) << U64(idx), w))
    s = lsb(pdep(U64(1) << U64(b >> 2), pawns))
    return True, s, s + PAWN_STEP[U64(us), U64(b & 3)], 0


@njit(cache=True, inline="always")
def _pawn_pick_none(us, ep, pawns, own, enemy, idx):
    """Never called (:data:`.bits.BMI2` false: the loop of :func:`_index_words` picks)."""
    return False, 0, 0, 0


_pawn_pick = _pawn_pick_bmi2 if BMI2 else _pawn_pick_none


@njit(cache=True, inline="always")
def _index_fast(bb, pc, us, ep, idx):
    """:func:`index_move`, with the pawns' entries counted for all pawns at once, the first two
    pieces of each other kind taken without a loop (a third one, from a promotion, by the loop
    after them) and the destination selected without a loop (:func:`_index_words`)."""
    b = 8 * us
    return _index_words(bb[U64(b + KING)], bb[U64(b + PAWN)], bb[U64(b + 1)], bb[U64(b + 2)], bb[U64(b + 3)],
                        bb[U64(b + 4)], bb[U64(OCC + us)], bb[U64(OCC + 1 - us)], bb[U64(CASTLE)], us, ep, idx)


@njit(cache=True, inline="always")
def _index_words(king, pawns, knights, bishops, rooks, queens, own, enemy, castle, us, ep, idx):
    """:func:`_index_fast` on the words it reads: the mover's king, pawns, knights, bishops,
    rooks and queens, both sides' occupancy, the castling rooks. No array is passed: numba
    counts the references of an array handed to an inlined function, and where its branches
    return early the count's atomic calls stay in the loop (they were an eighth of the
    decoder's time)."""
    occ = own | enemy
    free = ~own
    ksq = lsb(king) & 63
    kd = (KING_ATT[U64(ksq)] & free) | (castle & own & RANK_MASK[U64(us)])
    nk = popcount(kd)
    if idx < nk:
        return True, ksq, _nth(kd, idx), 0
    idx -= nk
    n = _pawn_total(us, ep, pawns, own, enemy)
    if idx < n:
        if BMI2 and not pawns & PROMO_FROM[U64(us)]:
            return _pawn_pick(us, ep, pawns, own, enemy, idx)
        m = pawns
        while m:
            s = lsb(m)
            m &= m - U64(1)
            d, k = _pawn_dests(us, ep, s, own, enemy)
            c = popcount(d) * k
            if idx < c:
                if k == 4:
                    return True, s, _nth(d, idx >> 2), (idx & 3) + 1
                return True, s, _nth(d, idx), 0
            idx -= c
        return False, 0, 0, 0
    idx -= n
    for t in range(1, 5):
        m = knights if t == 1 else bishops if t == 2 else rooks if t == 3 else queens
        s1 = lsb(m)
        m &= m - U64(1)
        s2 = lsb(m)
        m &= m - U64(1)
        d1 = _dests(t, s1, occ, free)
        d2 = _dests(t, s2, occ, free)
        c1 = popcount(d1)
        c2 = popcount(d2)
        if idx < c1 + c2:
            first = idx < c1
            return True, s1 if first else s2, _nth(d1 if first else d2, idx if first else idx - c1), 0
        idx -= c1 + c2
        while m:
            s = lsb(m)
            m &= m - U64(1)
            d = _dests(t, s, occ, free)
            c = popcount(d)
            if idx < c:
                return True, s, _nth(d, idx), 0
            idx -= c
    return False, 0, 0, 0


@njit(cache=True, inline="always")
def _move_index_fast(bb, pc, us, ep, frm, to, promo):
    """:func:`move_index`, counted as :func:`_index_fast` decodes (the pawns at once)."""
    if frm < 0 or frm > 63:
        return NO_MOVE
    return _move_index_code(bb, np.int64(pc[U64(frm)]), us, ep, frm, to, promo)


@njit(cache=True, inline="always")
def _move_index_code(bb, code, us, ep, frm, to, promo):
    """:func:`_move_index_fast` given the code of the piece on frm (−1: none), which the
    encoder reads from the nibbles (:func:`_code_on`)."""
    if frm < 0 or frm > 63 or to < 0 or to > 63 or code < 0 or (code >> 3) != us:
        return NO_MOVE
    own = bb[U64(OCC + us)]
    enemy = bb[U64(OCC + 1 - us)]
    occ = own | enemy
    free = ~own
    mt = code & 7
    k = 1
    if mt == KING:
        base = 0
        d = (KING_ATT[U64(frm)] & free) | (bb[U64(CASTLE)] & own & RANK_MASK[U64(us)])
    else:
        base = popcount((KING_ATT[lsb(bb[U64(8 * us + KING)]) & 63] & free) | (bb[U64(CASTLE)] & own & RANK_MASK[U64(us)]))
        pawns = bb[U64(8 * us + PAWN)]
        if mt == PAWN:
            base += _pawn_total(us, ep, pawns & (_bit(frm) - U64(1)), own, enemy)
            d, k = _pawn_dests(us, ep, frm, own, enemy)
        else:
            base += _pawn_total(us, ep, pawns, own, enemy)
            for t in range(1, mt + 1):
                m = bb[U64(8 * us + t)]
                if t == mt:
                    m &= _bit(frm) - U64(1)
                while m:
                    s = lsb(m)
                    m &= m - U64(1)
                    base += popcount(_dests(t, s, occ, free))
            d = _dests(mt, frm, occ, free)
    if not d & _bit(to):
        return NO_MOVE
    if (k == 4) != (promo != 0):
        return NO_MOVE
    return base + popcount(d & (_bit(to) - U64(1))) * k + (promo - 1 if k == 4 else 0)


@njit(cache=True, inline="always")
def _tail(us, ep, half, full, sc, wdl):
    """The packed board's last word: stm/ep, halfmove clock, fullmove number, eval, wdl (as
    :func:`.chesscore.write_board` writes them)."""
    tail = U64((128 if us == 1 else 0) | (64 if ep < 0 else ep))
    tail |= U64(min(max(half, 0), 255)) << U64(8)
    tail |= U64(min(max(full, 0), 65535)) << U64(16)
    tail |= U64(sc & 0xFFFF) << U64(32)
    tail |= U64(wdl) << U64(48)
    return tail


@njit(cache=True, inline="always")
def _kings(bb):
    """Each side has a king (the move list and the check test need one)."""
    return bb[U64(KING)] != 0 and bb[U64(8 + KING)] != 0


@njit(cache=True)
def encode(boards, best, has_best, score, result, ply, pcount, capture, group, o_start, o_move, o_has_move,
           o_raw, o_delta, o_ply_keep, o_pc_keep):
    """Chain a run of flat rows into the chained layout's columns (:mod:`nnue.pipeline.parts`).
    boards (n, 32) uint8 packed boards (C-contiguous); best (n,) uint16 packed moves where
    has_best; score (n,) int16, result (n,) int8 stm POV (score 0 where there is none, as the
    board's eval holds it); ply (n,) uint16, pcount (n,) uint8, capture (n,) bool (null as
    False); group: a row whose position in the run is a multiple of it starts a chain (row groups
    hold whole chains). Writes o_start (a chain starts here: its board is stored), o_move /
    o_has_move (the move's index), o_raw (the move is kept whole: ``move_raw``), o_delta (uint32
    zigzag of the score at a start, of score + score above after), o_ply_keep / o_pc_keep (the
    ply / piece count does not follow from the row above). Returns the number of chain starts.
    The position after a move is made by the stream's own step (:func:`_step`, the board kept as
    words, the move's legality checked) and compared with the row's board word by word, so what
    is chained is what the decoders rebuild."""
    n = boards.shape[0]
    words = boards.view(np.uint64)
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(4, np.int64)
    ok = False  # the state holds row r - 1's position, whose move may be indexed
    us = 0
    ep = -1
    half = 0
    full = 0
    starts = 0
    pf = 0
    pt = 0
    pp = 0
    occ = U64(0)
    lo = U64(0)
    hi = U64(0)
    have = False  # row r - 1's move, found in the list
    for r in range(n):
        cont = False
        if ok and have and r % group != 0:
            legal, occ, lo, hi, ep, half, full = _step(bb, us, ep, half, full, occ, lo, hi, pf, pt, pp)
            us = 1 - us
            sc = np.int64(score[r]) if us == 0 else -np.int64(score[r])
            wdl = (np.int64(result[r]) if us == 0 else -np.int64(result[r])) + 1
            if legal and -32768 <= sc <= 32767 and 0 <= wdl <= 2 and occ == words[r, 0] and lo == words[r, 1] \
                    and hi == words[r, 2]:
                cont = words[r, 3] == _tail(us, ep, half, full, sc, wdl)
        if not cont:
            starts += 1
            ok = load(boards, r, bb, pc, st) and _kings(bb)
            us, ep, half, full = st[0], st[1], st[2], st[3]
            occ = words[r, 0]
            lo = words[r, 1]
            hi = words[r, 2]
        o_start[r] = not cont
        s = np.int64(score[r])
        d = s if not cont else s + np.int64(score[r - 1])
        o_delta[r] = 2 * d if d >= 0 else -2 * d - 1
        o_ply_keep[r] = not cont or np.int64(ply[r]) != np.int64(ply[r - 1]) + 1
        o_pc_keep[r] = not cont or np.int64(pcount[r]) != np.int64(pcount[r - 1]) - (1 if capture[r - 1] else 0)
        o_move[r] = 0
        o_has_move[r] = False
        o_raw[r] = False
        have = False
        if has_best[r]:
            o_raw[r] = True
            b = np.int64(best[r])
            if ok:
                f, t, p = _unpack_move(b)
                mover = _code_on(occ, lo, hi, f) if 0 <= f < 64 else -1  # the state keeps no pc (_take_sq)
                idx = _move_index_code(bb, mover, us, ep, f, t, p)
                if idx >= 0:
                    code, _cap = move_code_of(bb, mover & 7, us, ep, f, t, p)
                    if code == b:
                        o_move[r] = idx
                        o_has_move[r] = True
                        o_raw[r] = False
                        have = True
                        pf, pt, pp = f, t, p
    return starts


@njit(cache=True)
def decode(start, stems, index, has, raw, has_raw, score, result, keep, o_board, o_best):
    """Rebuild the packed boards (and moves) of one row group of chained rows. start (n,) bool:
    the row's board is ``stems[r]`` (stems (n, 32) uint8, the ``stem`` column's values, whatever
    they hold where it is null); index (n,) uint16 the move's index where ``has``; raw (n,)
    uint16 a packed move kept whole where ``has_raw``; score (n,) int16, result (n,) int8 stm POV.
    Writes the boards of the rows where ``keep`` ((n,) bool; zero-length: every row), in order, to
    ``o_board`` ((m, 4) uint64: an (m, 32) uint8 array viewed as words; the other rows are still
    played: the stream's split and filters dropped them); o_best: (n,) int64 packed moves (−1:
    none), or a zero-length array for none (the stream: moves kept whole never continue a chain).
    Returns (−1, 0), or (the first row that does not decode, why: :data:`WHY` index; for
    :data:`ILLEGAL` the row whose move it is); the rows after it are not written. With ``keep``
    (and no o_best), the rows of a chain after its last kept row are not played (nor checked)."""
    n = start.shape[0]
    best = o_best.shape[0] > 0
    every = keep.shape[0] == 0
    # more[r]: a row after r in r's chain is wanted (its move must be decoded and played)
    more = np.ones(n if every or best else 0, np.bool_)
    if not (every or best):
        more = np.empty(n, np.bool_)
        acc = False
        for r in range(n - 1, -1, -1):
            more[r] = acc
            acc = (acc | keep[r]) & (not start[r])  # no branch: a branch here cost 2 ns a row
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(4, np.int64)
    w = 0
    have = False
    kings = False
    us = 0
    ep = -1
    half = 0
    full = 0
    pf = 0
    pt = 0
    pp = 0
    occ = U64(0)
    lo = U64(0)
    hi = U64(0)
    tail = U64(0)
    skip = False  # the rest of the chain is not wanted
    for r in range(n):
        if start[r]:
            if not load(stems, r, bb, pc, st):
                return r, BAD_STEM
            kings = _kings(bb)
            us, ep, half, full = st[0], st[1], st[2], st[3]
            occ = U64(0)
            lo = U64(0)
            hi = U64(0)
            tail = U64(0)
            for i in range(8):
                occ |= U64(stems[r, i]) << U64(8 * i)
                lo |= U64(stems[r, 8 + i]) << U64(8 * i)
                hi |= U64(stems[r, 16 + i]) << U64(8 * i)
                tail |= U64(stems[r, 24 + i]) << U64(8 * i)
            if every or keep[r]:
                o_board[w, 0] = occ
                o_board[w, 1] = lo
                o_board[w, 2] = hi
                o_board[w, 3] = tail
                w += 1
        else:
            if not have:
                if skip:
                    continue  # the rest of this chain is not wanted
                return r, NO_MOVE_ABOVE
            legal, occ, lo, hi, ep, half, full = _step(bb, us, ep, half, full, occ, lo, hi, pf, pt, pp)
            if not legal:
                return r - 1, ILLEGAL
            us = 1 - us
            sc = np.int64(score[r]) if us == 0 else -np.int64(score[r])
            wdl = (np.int64(result[r]) if us == 0 else -np.int64(result[r])) + 1
            if sc < -32768 or sc > 32767 or wdl < 0 or wdl > 2:
                return r, BAD_FIELDS
            if every or keep[r]:
                o_board[w, 0] = occ
                o_board[w, 1] = lo
                o_board[w, 2] = hi
                o_board[w, 3] = _tail(us, ep, half, full, sc, wdl)
                w += 1
        have = False
        if best:
            o_best[r] = np.int64(raw[r]) if has_raw[r] else -1
        skip = not more[r]
        if has[r] and not skip:
            ok = False
            if kings:
                b = 8 * us  # the words, not the arrays (:func:`_index_words`)
                ok, pf, pt, pp = _index_words(bb[U64(b + KING)], bb[U64(b + PAWN)], bb[U64(b + 1)], bb[U64(b + 2)],
                                              bb[U64(b + 3)], bb[U64(b + 4)], bb[U64(OCC + us)],
                                              bb[U64(OCC + 1 - us)], bb[U64(CASTLE)], us, ep, np.int64(index[r]))
            if not ok:
                return r, BAD_INDEX
            if best:
                code, _cap = move_code_of(bb, _code_on(occ, lo, hi, pf) & 7, us, ep, pf, pt, pp)
                o_best[r] = code
            have = True
    return -1, 0
