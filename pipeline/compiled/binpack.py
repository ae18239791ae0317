"""Compiled binpack chain decoder: python-chess's semantics of
:mod:`nnue.pipeline.formats.binpack`, straight into dataset columns.

:func:`decode_chains` decodes the chains of one block from a byte position on, writing for each
position its packed board and columns into caller-owned NumPy buffers (no Python object per
position). It stops

* at the end of the block (status ``END``);
* before a chain that would not fit the buffers (``FULL``; call again from the returned
  position);
* before a chain it does not settle exactly (``FALLBACK``): a stem python-chess would reject or
  that this core does not model (Chess960 castling rights, too many checkers, a bad piece or
  en-passant code), a move that is not legal (the reference reader then rejects the chain, or
  the record as an illegal move), or a movetext error (overrun, an index beyond the candidates,
  a score longer than 16 bits). The caller decodes that one chain with the reference reader
  (``read_chain``) and calls again after it.

Each row gets ``kind``: 0 = settled (packed as is), 1 = to be validated by python-chess as a
Record (in check with a legal en-passant capture, or two checkers on a line with the king,
whose status python-chess's 'impossible check' rules decide, and two checkers no last move can
give, which the packer's retrograde rule rejects; a score, result or ply the packer
rejects). Every read of ``data`` is bounds-checked against ``end``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..board import unpack_fen
from ..records import PackedRows, Record, Reject
from ..constants import MATE_BOUND, VALUE_NONE
from .bits import msb, popcount, lsb
from .fixed import double_check_possible
from .chesscore import (CASTLE, KING, OCC, PAWN, PAWN_ATT, KING_ATT, SQ, U64, is_legal, legal_ep,
                        move_code, piece_attacks, position_status, check_status, push, write_board, RANK_MASK, attackers)

END, FULL, FALLBACK = 0, 1, 2
MAX_CHAIN = 65536  # 1 stem + at most 65535 plies (u16 count)


def buffers(cap: int) -> dict:
    """Output buffers for :func:`decode_chains` of ``cap`` rows (cap > MAX_CHAIN)."""
    return dict(board=np.zeros((cap, 32), np.uint8), score=np.zeros(cap, np.int16),
                result=np.zeros(cap, np.int8), ply=np.zeros(cap, np.int32),
                piece_count=np.zeros(cap, np.uint8), in_check=np.zeros(cap, np.bool_),
                best_move=np.zeros(cap, np.uint16), capture=np.zeros(cap, np.bool_),
                has_move=np.zeros(cap, np.bool_), flags=np.zeros(cap, np.uint8), kind=np.zeros(cap, np.uint8),
                half=np.zeros(cap, np.int32), full=np.zeros(cap, np.int32), chain=np.zeros(cap, np.int32),
                chain_pos=np.zeros(cap, np.int64), raw_score=np.zeros(cap, np.int16))


@njit(cache=True, inline="always")
def _bitlen(n):
    return msb(U64(n - 1)) + 1 if n > 1 else 0


@njit(cache=True)
def _read(data, end, bp, n):
    """(value, new bit position) of n ≤ 9 bits MSB first at bit bp; value −1 on overrun."""
    if n == 0:
        return 0, bp
    byte = bp >> 3
    if (bp + n + 7) >> 3 > end:
        return -1, bp
    w = np.int64(data[byte]) << 8
    if byte + 1 < end:
        w |= np.int64(data[byte + 1])
    v = (w >> (16 - (bp & 7) - n)) & ((1 << n) - 1)
    return v, bp + n


@njit(cache=True)
def _nth(mask, n):
    """Square of the n-th set bit of mask, or −1 when there are not that many."""
    if n >= popcount(mask):
        return -1
    for _ in range(n):
        mask &= mask - U64(1)
    return lsb(mask)


@njit(cache=True)
def _zigzag(v):
    return -((v >> 1) + 1) if v & 1 else v >> 1


@njit(cache=True)
def _int16(v):
    return ((v + 0x8000) & 0xFFFF) - 0x8000


@njit(cache=True)
def _stem(data, p, bb, pc, st):
    """Decode the 32-byte stem at data[p:]: board into bb/pc/st; returns (ok, packed move)."""
    for i in range(16):
        bb[i] = 0
    for i in range(64):
        pc[i] = -1
    occ = U64(0)
    for i in range(8):
        occ = (occ << U64(8)) | U64(data[p + i])
    if popcount(occ) > 32:
        return False, 0
    us = 0
    ep = -1
    m = occ
    i = 0
    while m:
        sq = lsb(m)
        m &= m - U64(1)
        code = (data[p + 8 + (i >> 1)] >> (4 * (i & 1))) & 15
        i += 1
        if code < 12:
            c = 8 * (code & 1) + (code >> 1)
        elif code == 12:
            rank = sq >> 3
            if rank != 3 and rank != 4:
                return False, 0
            c = 0 if rank == 3 else 8
            ep = sq - 8 if rank == 3 else sq + 8
        elif code == 13 or code == 14:
            c = 3 if code == 13 else 11
            bb[CASTLE] |= SQ[sq]
        else:
            c = 8 + KING
            us = 1
        pc[sq] = c
        bb[c] |= SQ[sq]
        bb[OCC + (c >> 3)] |= SQ[sq]
    move = (np.int64(data[p + 24]) << 8) | data[p + 25]
    st[0] = us
    st[1] = ep
    return True, move


@njit(cache=True)
def _decode_ply(data, end, bp, bb, pc, st):
    """Read one movetext move (reference: formats.binpack.decode_ply). Returns
    (ok, from, to, promo, new bit position)."""
    us = st[0]
    ours = bb[OCC + us]
    occ = bb[OCC] | bb[OCC + 1]
    idx, bp = _read(data, end, bp, _bitlen(popcount(ours)))
    if idx < 0:
        return False, 0, 0, 0, bp
    frm = _nth(ours, idx)
    if frm < 0:
        return False, 0, 0, 0, bp
    t = pc[frm] & 7
    if t == PAWN:
        targets = bb[OCC + 1 - us]
        ep = st[1]
        if ep >= 0 and legal_ep(bb, pc, us, ep) >= 0:
            targets |= SQ[ep]
        dest = PAWN_ATT[us, frm] & targets
        step = 8 if us == 0 else -8
        fwd = frm + step
        if 0 <= fwd < 64 and not occ & SQ[fwd]:
            dest |= SQ[fwd]
            if (frm >> 3) == (1 if us == 0 else 6):
                fwd2 = fwd + step
                if not occ & SQ[fwd2]:
                    dest |= SQ[fwd2]
        n = popcount(dest)
        if (frm >> 3) == (6 if us == 0 else 1):
            idx, bp = _read(data, end, bp, _bitlen(4 * n))
            if idx < 0:
                return False, 0, 0, 0, bp
            to = _nth(dest, idx // 4)
            return to >= 0, frm, to, 1 + idx % 4, bp
        idx, bp = _read(data, end, bp, _bitlen(n))
        if idx < 0:
            return False, 0, 0, 0, bp
        to = _nth(dest, idx)
        return to >= 0, frm, to, 0, bp
    if t == KING:
        dest = KING_ATT[frm] & ~ours
        n = popcount(dest)
        rights = bb[CASTLE] & RANK_MASK[us]
        idx, bp = _read(data, end, bp, _bitlen(n + popcount(rights)))
        if idx < 0:
            return False, 0, 0, 0, bp
        if idx < n:
            return True, frm, _nth(dest, idx), 0, bp
        long_rook = 56 * us
        rook = long_rook if idx == n and rights & SQ[long_rook] else long_rook + 7
        return True, frm, rook, 0, bp
    dest = piece_attacks(t, frm, occ) & ~ours
    idx, bp = _read(data, end, bp, _bitlen(popcount(dest)))
    if idx < 0:
        return False, 0, 0, 0, bp
    to = _nth(dest, idx)
    return to >= 0, frm, to, 0, bp


@njit(cache=True)
def _vle(data, end, bp):
    """binpack variable-length u16 (reference: BitReaderMSB.read_vle16); value −1 on error."""
    v = 0
    shift = 0
    while True:
        g, bp = _read(data, end, bp, 5)
        if g < 0:
            return -1, bp
        v |= (g & 15) << shift
        if not g >> 4:
            return v & 0xFFFF, bp
        shift += 4
        if shift > 16:
            return -1, bp


@njit(cache=True)
def _emit(o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags, o_kind,
          o_half, o_full, o_raw, r, bb, pc, st, s, result, ply, frm, to, promo, has, stem):
    """Write one row; returns False when the position is one this core does not settle."""
    us = st[0]
    ep = legal_ep(bb, pc, us, st[1]) if st[1] >= 0 else -1
    occ = bb[OCC] | bb[OCC + 1]
    checkers = attackers(bb, 1 - us, lsb(bb[8 * us + KING]), occ, U64(0))
    status = position_status(bb, us, ep) if stem else check_status(bb, us, ep, checkers)
    if status == 2:
        return False
    none = s == VALUE_NONE
    sc = 0 if none else s
    wdl = (result if us == 0 else -result) + 1
    write_board(o_board, r, bb, pc, us, ep, st[2], st[3], sc if us == 0 else -sc, wdl & 255)
    o_pcount[r] = popcount(occ)
    o_check[r] = checkers != 0
    o_score[r] = sc
    o_raw[r] = s
    o_result[r] = result
    o_ply[r] = ply
    o_half[r] = st[2]
    o_full[r] = st[3]
    o_flags[r] = (1 if none else 0) | (2 if (not none and abs(s) >= MATE_BOUND) else 0)
    # two checkers no last move can give: the packer's retrograde rule rejects it (python-chess)
    slow = status == 1 or (popcount(checkers) == 2 and not double_check_possible(bb, pc, us))
    bad = s == -32768 or result < -1 or result > 1 or ply > 65535
    o_kind[r] = 1 if (slow or bad) else 0
    o_has[r] = has
    if has:
        o_best[r], o_cap[r] = move_code(bb, pc, us, st[1], frm, to, promo)
    else:
        o_best[r] = 0
        o_cap[r] = False
    return True


@njit(cache=True)
def decode_chains(data, pos, end, o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap,
                  o_has, o_flags, o_kind, o_half, o_full, o_chain, o_cpos, o_raw):
    """Decode the chains of ``data[:end]`` (one block) from byte ``pos``. Returns (rows written,
    chains decoded, byte position reached, status END / FULL / FALLBACK)."""
    cap = o_score.shape[0]
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(4, np.int64)
    rows = 0
    chains = 0
    while pos < end:
        if pos + 34 > end:
            return rows, chains, pos, FALLBACK
        count = (np.int64(data[pos + 32]) << 8) | data[pos + 33]
        if rows + count + 1 > cap:
            return rows, chains, pos, FULL
        ok, m = _stem(data, pos, bb, pc, st)
        if not ok or position_status(bb, st[0], -1) == 2:
            return rows, chains, pos, FALLBACK
        score_u = (np.int64(data[pos + 26]) << 8) | data[pos + 27]
        pr = (np.int64(data[pos + 28]) << 8) | data[pos + 29]
        st[2] = (np.int64(data[pos + 30]) << 8) | data[pos + 31]
        ply = pr & 0x3FFF
        result = _zigzag(pr >> 14)
        st[3] = ply // 2 + 1
        s = _int16(_zigzag(score_u))
        has = m != 0
        kind = m >> 14
        frm = (m >> 8) & 63
        to = (m >> 2) & 63
        promo = (m & 3) + 1 if kind == 1 else 0
        if has and not is_legal(bb, pc, st[0], st[1], frm, to, promo):
            return rows, chains, pos, FALLBACK
        if not has and count > 0:
            return rows, chains, pos, FALLBACK
        r0 = rows
        if not _emit(o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags,
                     o_kind, o_half, o_full, o_raw, rows, bb, pc, st, s, result, ply, frm, to, promo, has, True):
            return r0, chains, pos, FALLBACK
        rows += 1
        bp = 8 * (pos + 34)
        last = -s
        failed = False
        for _ in range(count):
            push(bb, pc, st, frm, to, promo)
            ok, frm, to, promo, bp = _decode_ply(data, end, bp, bb, pc, st)
            if not ok:
                failed = True
                break
            v, bp = _vle(data, end, bp)
            if v < 0:
                failed = True
                break
            s = _int16(last + _zigzag(v))
            last = -s
            ply += 1
            result = -result
            if not is_legal(bb, pc, st[0], st[1], frm, to, promo):
                failed = True
                break
            if not _emit(o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags,
                         o_kind, o_half, o_full, o_raw, rows, bb, pc, st, s, result, ply, frm, to, promo, True, False):
                failed = True
                break
            rows += 1
        if failed:
            return r0, chains, pos, FALLBACK
        for i in range(r0, rows):
            o_chain[i] = chains
            o_cpos[i] = pos
        chains += 1
        pos = (bp + 7) >> 3
    return rows, chains, pos, END


# ============================================================================ Python driver
CAP = 1 << 17
_FIELDS = ("board", "score", "result", "ply", "piece_count", "in_check", "best_move", "capture", "has_move",
           "flags", "kind", "half", "full", "chain", "chain_pos", "raw_score")


class _Locations:
    """Lazy "byte N" / "byte N ply P" locations of a run of rows (no string per row until asked)."""

    def __init__(self, base: int, chain_pos, ply, stem):
        self.base, self.chain_pos, self.ply, self.stem = base, chain_pos, ply, stem

    def __len__(self):
        return len(self.ply)

    def __getitem__(self, i):
        loc = f"byte {self.base + int(self.chain_pos[i])}"
        return loc if self.stem[i] else f"{loc} ply {int(self.ply[i])}"


def _uci(best: int) -> str:
    frm, to, flag = best & 63, (best >> 6) & 63, best >> 14
    name = "abcdefgh"
    s = f"{name[frm & 7]}{(frm >> 3) + 1}{name[to & 7]}{(to >> 3) + 1}"
    return s + "nbrq"[(best >> 12) & 3] if flag == 3 else s


def _items(b: dict, rows: int, base: int, game: int):
    """PackedRows runs and Records (kind 1) of the first ``rows`` rows of the buffers, in order."""
    chain = b["chain"][:rows]
    stem = np.ones(rows, dtype=bool)
    stem[1:] = chain[1:] != chain[:-1]
    special = np.nonzero(b["kind"][:rows])[0].tolist()
    start = 0
    for i in special + [rows]:
        if i > start:
            sl = slice(start, i)
            cols = {k: b[k][sl].copy() for k in _FIELDS}
            yield PackedRows(board=cols["board"], score=cols["score"], result=cols["result"],
                             ply=cols["ply"].astype(np.uint16), piece_count=cols["piece_count"],
                             in_check=cols["in_check"], game=game + 1 + cols["chain"].astype(np.int64),
                             flags=cols["flags"], first=f"byte {base + int(cols['chain_pos'][0])}",
                             locations=_Locations(base, cols["chain_pos"], cols["ply"], stem[sl].copy()),
                             best_move=cols["best_move"], best_move_is_capture=cols["capture"],
                             has_move=cols["has_move"])
        if i == rows:
            break
        s = int(b["raw_score"][i])
        none = s == VALUE_NONE
        fen = unpack_fen(b["board"][i].tobytes()).rsplit(" ", 2)[0] + f" {int(b['half'][i])} {int(b['full'][i])}"
        yield Record(fen=fen, score=None if none else s, result=int(b["result"][i]), ply=int(b["ply"][i]),
                     move=_uci(int(b["best_move"][i])) if b["has_move"][i] else None,
                     location=_Locations(base, b["chain_pos"], b["ply"], stem)[i], game=game + 1 + int(chain[i]),
                     score_is_mate=not none and abs(s) >= MATE_BOUND)
        start = i + 1


def read_block(block: bytes, base: int, game: int, read_chain, stats: dict | None = None,
               cut_from: int | None = None):
    """Items (PackedRows, Record, Reject) of one binpack block, in record order, exactly as the
    reference reader's chain loop would give them after validation; returns the last game
    ordinal used. read_chain: the reference reader's chain decoder
    (:func:`nnue.pipeline.formats.binpack.read_chain`), for the chains this core hands back (passed
    in, so that this module does not import the formats). base: the block's byte offset in the file; game: the last ordinal before it.
    stats: optional counters ``{"compiled": rows, "fallback_chains": n, "records": rows}``.
    cut_from: the block's declared size when the file ends inside it (``block`` is shorter): the
    whole chains before the cut are decoded as usual, the chain the cut falls in is one
    "truncated record" reject and nothing after it is read, as the reference reader does."""
    b = buffers(CAP)
    data = np.frombuffer(block, dtype=np.uint8)
    end = len(block)
    pos = 0
    while pos < end:
        rows, chains, pos, status = decode_chains(data, pos, end, *(b[k] for k in _FIELDS[:-3]), b["chain"],
                                                  b["chain_pos"], b["raw_score"])
        if rows:
            if stats is not None:
                stats["compiled"] = stats.get("compiled", 0) + rows
                stats["records"] = stats.get("records", 0) + int(np.count_nonzero(b["kind"][:rows]))
            yield from _items(b, rows, base, game)
        game += chains
        if status == FALLBACK:
            game += 1
            if stats is not None:
                stats["fallback_chains"] = stats.get("fallback_chains", 0) + 1
            try:
                recs, pos = read_chain(block, pos, base, game)
            except (ValueError, IndexError, AssertionError) as e:
                if cut_from is not None:
                    yield Reject(f"byte {base + pos}", "truncated record", f"block of {cut_from} bytes cut at "
                                 f"{len(block)}: the chain here is incomplete ({e})", "")
                    return game
                yield Reject(f"byte {base + pos}", "corrupt chain", f"{e}; the rest of this block is skipped", "")
                return game
            yield from recs
    if cut_from is not None:  # cut at a chain boundary: what is missing is one reject at the cut
        yield Reject(f"byte {base + len(block)}", "truncated record", f"block of {cut_from} bytes cut at {len(block)}", "")
    return game
