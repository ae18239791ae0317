"""Incremental accumulator: both perspectives' feature-transformer sums for one position, kept up
to date move by move, as an engine keeps them.

Standalone like the rest of :mod:`nnue.inference` (torch, numpy, safetensors; the board codec
and feature sets of :mod:`nnue.pipeline`; no python-chess). The position is a 64-square array
of piece codes (marlinformat's: 0..5 white P N B R Q K, 8..13 black), decoded from a 32-byte
packed board or a FEN. Moves use python-chess's conventions:

* a UCI string (``"e2e4"``, ``"e7e8q"``, ``"0000"`` for a null move), a tuple
  ``(from, to[, promotion])`` of squares a1 = 0 .. h8 = 63 with promotion ``None``, a
  python-chess piece type (2 knight .. 5 queen) or a letter, or any object with
  ``from_square``, ``to_square`` and ``promotion`` (a ``chess.Move``);
* castling as the king's two-file move (``e1g1``, ``e1c1``; the rook is the one holding the
  castling right on that side, else the outermost one) or as king-takes-own-rook (Chess960,
  ``e1h1``); the king ends on the g or c file, the rook on f or d, as in Chess960;
* en passant: a pawn moving diagonally to an empty square captures the pawn behind it;
* promotion: the pawn on the from-square becomes the promoted piece on the to-square.

Moves are applied without a legality check beyond the piece codes (a piece of the side to move
on the from-square, no capture of an own piece or a king, promotions exactly on the last rank).

**Which features change.** A move changes at most four squares. Two ways to turn that into
feature indices, both exact for every feature set:

* ``mode="table"`` (the default for every set built on :class:`~nnue.pipeline.features.lookup.
  TableEncoder`, i.e. all of them): the feature set's own lookup table gives the index of
  (perspective, own king square, square, piece code) directly, so the changed features are the
  table entries of the changed squares before and after. A perspective is *refreshed* (summed
  from scratch) when its own king moves between king squares whose table slices differ: a
  different king bucket or across the mirror line for ``kb768hm…``, every king move for HalfKP
  and HalfKAv2_hm, never for chess768. The classes of king squares are derived from the table
  itself (squares with identical slices), so there is no per-set code.
* ``mode="encode"``: the generic definition. Every push packs the new placement into a one-row
  batch, runs the feature set's ``encode`` and diffs the index lists with the previous ones as
  multisets; a perspective whose diff is longer than its new list is refreshed instead.
  Slow (a batch encode per move), but it needs nothing from the feature set beyond ``encode``:
  the reference the table mode is tested against.

Accumulators are int32 numpy arrays, white's perspective in row 0 and black's in row 1, kept on
a stack: :meth:`push` writes the next entry from the previous one plus and minus feature-
transformer rows (or a refresh), :meth:`pop` steps back. The rows and the eval are the kind's
(:attr:`~nnue.inference.kinds.spec.InferenceKind.accumulator_table`, ``evaluate_accumulator``):
perspective, deep and tiny nets accumulate their feature transformer's ``l0w`` rows and evaluate
as their ``forward_int`` does (same formula, same truncating divisions, same ``OverflowError``
when an accumulator leaves int16 or a sum leaves int32); ``sfnnv5`` (Stockfish 15.1) accumulates
one int32 row of L1 + 8 columns per perspective, the feature transformer's sum then the 8 PSQT
sums, and its eval wraps them to int16 and int32 as the engine's additions wrap (nothing raises;
see :mod:`nnue.inference.kinds.sfnnv5`). The rows, the table lookups, the refresh rule and the
move code are the same for every kind.
"""
from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import torch

from nnue.pipeline.board import pack_fen, pack_position, unpack
from nnue.pipeline.features import FeatureSet
from nnue.pipeline.features.board_tensor import NUM_KEYS
from nnue.pipeline.features.lookup import TableEncoder

from . import kinds, residual
from .net import NetFile

EMPTY = -1
PAWN, KNIGHT, BISHOP, ROOK, QUEEN, KING = range(6)
_PROMO_LETTERS = {"n": KNIGHT, "b": BISHOP, "r": ROOK, "q": QUEEN}
_FILES = "abcdefgh"


# ---------------------------------------------------------------------------------------------
# moves

def _square(name: str) -> int:
    if len(name) != 2 or name[0] not in _FILES or name[1] not in "12345678":
        raise ValueError(f"bad square {name!r}")
    return _FILES.index(name[0]) + 8 * (int(name[1]) - 1)


_UCI_CACHE: dict[str, tuple[int, int, int | None]] = {}  # push's cache of parsed UCI strings


@functools.lru_cache(maxsize=8192)
def _parse_uci(uci: str) -> tuple[int, int, int | None]:
    if uci == "0000":
        return -1, -1, None
    if len(uci) not in (4, 5):
        raise ValueError(f"bad UCI move {uci!r}")
    promo = None
    if len(uci) == 5:
        if uci[4] not in _PROMO_LETTERS:
            raise ValueError(f"bad promotion piece in {uci!r}")
        promo = _PROMO_LETTERS[uci[4]]
    fr, to = _square(uci[:2]), _square(uci[2:4])
    if fr == to:
        raise ValueError(f"bad UCI move {uci!r}: from and to squares are the same")
    return fr, to, promo


def _promo_type(p) -> int | None:
    if p is None:
        return None
    if isinstance(p, str):
        if p.lower() not in _PROMO_LETTERS:
            raise ValueError(f"bad promotion piece {p!r}")
        return _PROMO_LETTERS[p.lower()]
    p = int(p)
    if not 2 <= p <= 5:  # python-chess piece types: 2 knight, 3 bishop, 4 rook, 5 queen
        raise ValueError(f"bad promotion piece type {p} (python-chess: 2 knight .. 5 queen)")
    return p - 1


def parse_move(move) -> tuple[int, int, int | None]:
    """A move -> ``(from, to, promotion)``: squares a1 = 0 .. h8 = 63 and our piece type
    (1 knight .. 4 queen) or None; ``(-1, -1, None)`` for a null move. Accepts UCI strings,
    ``(from, to[, promotion])`` tuples and objects with ``from_square``/``to_square``/
    ``promotion`` (python-chess piece types for promotions). Raises ValueError."""
    if isinstance(move, str):
        return _parse_uci(move)
    if hasattr(move, "from_square"):
        fr, to, promo = move.from_square, move.to_square, getattr(move, "promotion", None)
        if fr == to == 0 and not promo:  # chess.Move.null()
            return -1, -1, None
    else:
        if len(move) not in (2, 3):
            raise ValueError(f"bad move {move!r}: expected (from, to[, promotion])")
        fr, to = move[0], move[1]
        promo = move[2] if len(move) == 3 else None
    fr, to = int(fr), int(to)
    if not (0 <= fr < 64 and 0 <= to < 64) or fr == to:
        raise ValueError(f"bad move {move!r}: squares must be two different ones in 0..63")
    return fr, to, _promo_type(promo)


# ---------------------------------------------------------------------------------------------
# per-feature-set tables (table mode)

class _Tables:
    """The feature set's lookup table as a flat Python list, plus king-square classes.

    ``tab[(p·K + k)·1040 + 16·s + code]``: the feature of a piece with marlinformat code
    ``code`` on square s, for perspective colour p with own king on k (K = 64, or 1 when the
    set does not read the king square); −1 = not a feature (HalfKP's kings). ``king_class[p][k]``:
    equal for two king squares exactly when their table slices are identical, i.e. when a king
    move between them leaves every other piece's feature unchanged."""

    def __init__(self, enc: TableEncoder):
        K = 64 if enc.king_relative else 1
        table = enc.table_cpu.view(2, K, NUM_KEYS)
        self.K = K
        self.tab: list[int] = enc.table_cpu.tolist()
        self.tab_np: np.ndarray = enc.table_cpu.numpy().astype(np.int64).reshape(2, K, NUM_KEYS)
        self.king_relative = enc.king_relative
        self.drops_kings = enc.drops_kings
        self.king_class: list[list[int]] = []
        for p in range(2):
            _, inverse = torch.unique(table[p], dim=0, return_inverse=True)
            cls = inverse.tolist()
            self.king_class.append(cls * 64 if K == 1 else cls)


@functools.lru_cache(maxsize=None)
def _tables_for(fs: FeatureSet) -> _Tables:
    return _Tables(fs.encode)


def _net_cache(net: NetFile) -> dict:
    """The kind's rows (``accumulator_table``: int32 NumPy, cached by the kind) and the layers its
    ``evaluate_accumulator`` takes, with the output bucket of each piece count; made again when
    the kind's rows or layers are rebuilt (a tensor replaced or changed in place)."""
    kind = kinds.of(net)
    w, b = kind.accumulator_table(net)
    layers = kind.accumulator_layers(net) if kind.accumulator_layers is not None else None
    cache = net.__dict__.get("_incremental_cache")
    if cache is None or cache["w"] is not w or cache["b"] is not b or cache["layers"] is not layers \
            or cache["output_buckets"] != net.arch["output_buckets"]:
        cache = {"w": w, "b": b, "layers": layers, "hidden": w.shape[1], "eval": kind.evaluate_accumulator,
                 "output_buckets": net.arch["output_buckets"],
                 "buckets": net.buckets.of_piece_count(torch.arange(33)).tolist()}
        net.__dict__["_incremental_cache"] = cache
    return cache


# ---------------------------------------------------------------------------------------------

class IncrementalAccumulator:
    """The accumulators of one position of ``net``, updated by :meth:`push` / :meth:`pop`.

    board: a 32-byte packed board (``bytes``, a (32,) or (1, 32) uint8 array or tensor); see
    :meth:`from_fen`. mode: ``"table"``, ``"encode"`` or ``"auto"`` (table when the feature set
    has a lookup table). Raises ValueError on a board the feature set cannot encode (a
    king-relative set needs one king a side).

    ``pushes`` counts moves pushed, ``refreshes`` the refreshes of each perspective (white,
    black) among them.
    """

    def __init__(self, net: NetFile, board, mode: str = "auto"):
        if not kinds.of(net).incremental:
            raise ValueError(f"the incremental accumulator does not evaluate {net.kind} nets; "
                             "use nnue.inference.evaluate")
        self.net = net
        self.fs = fs = net.features
        if mode == "auto":
            mode = "table" if isinstance(fs.encode, TableEncoder) else "encode"
        if mode not in ("table", "encode"):
            raise ValueError(f"mode {mode!r}: expected 'table', 'encode' or 'auto'")
        if mode == "table" and not isinstance(fs.encode, TableEncoder):
            raise ValueError(f"feature set {fs.name!r} has no lookup table: use mode='encode'")
        self.mode = mode
        self._table = mode == "table"
        self._c = _net_cache(net)
        self._w, self._b = self._c["w"], self._c["b"]
        self._t = _tables_for(fs) if mode == "table" else None
        d = unpack(_as_bytes(board))
        self.board: list[int] = [EMPTY] * 64
        for sq, code in d["pieces"].items():
            self.board[sq] = code
        self.stm = 1 if d["black_to_move"] else 0
        self.castling = d["castling_rooks"]
        self.ep = d["ep_square"]
        self.halfmove, self.fullmove = d["halfmove"], d["fullmove"]
        self.count = len(d["pieces"])
        self.kings = [self._find_king(0), self._find_king(1)]
        if (mode == "table" and self._t.king_relative) and None in self.kings:
            raise ValueError("a king-relative feature set needs exactly one king of each colour")
        self._undo: list[tuple] = []
        self._accs = [np.empty((2, self._c["hidden"]), dtype=np.int32)]
        self._lists: list[tuple[list[int], list[int]]] = []
        self.pushes = 0
        self.refreshes = [0, 0]  # per perspective (white, black)
        self._take_bufs = {}
        for n in range(1, 5):
            buf = np.empty((n, 2, self._c["hidden"]), dtype=np.int32)
            self._take_bufs[n] = (buf.reshape(2 * n, -1), [buf[j] for j in range(n)])
        if mode == "encode":
            self._lists.append(self._encode_lists())
        for p in (0, 1):
            self._refresh_into(self._accs[0], p)

    @classmethod
    def from_fen(cls, net: NetFile, fen: str, mode: str = "auto") -> "IncrementalAccumulator":
        return cls(net, pack_fen(fen), mode)

    # -- position -----------------------------------------------------------------------------

    def _find_king(self, colour: int) -> int | None:
        code = colour * 8 + KING
        sqs = [s for s in range(64) if self.board[s] == code]
        if len(sqs) > 1:
            raise ValueError(f"{'white' if colour == 0 else 'black'} has {len(sqs)} kings")
        return sqs[0] if sqs else None

    @property
    def ply(self) -> int:
        """Moves pushed and not popped."""
        return len(self._undo)

    def packed(self) -> bytes:
        """The current position as 32 packed bytes (castling rooks, ep square and counters as
        tracked here: the ep square is set after every double pawn push)."""
        pieces = {s: c for s, c in enumerate(self.board) if c >= 0}
        return pack_position(pieces, self.stm == 1, self.castling, self.ep, self.halfmove,
                             min(self.fullmove, 65535))

    def bucket(self) -> int:
        """The output bucket of the current position."""
        return self._c["buckets"][self.count]

    # -- accumulators ------------------------------------------------------------------------

    def accumulators(self) -> torch.Tensor:
        """(2, H) int32: the side to move's accumulator first, as ``forward_int`` orders them
        (sfnnv5: H = L1 + 8, the FT sums before their int16 wrap, then the PSQT sums; see
        :func:`nnue.inference.kinds.sfnnv5.split_accumulator`)."""
        a = self._accs[len(self._undo)]
        return torch.from_numpy((a if self.stm == 0 else a[::-1]).copy())

    def accumulators_by_colour(self) -> np.ndarray:
        """(2, H) int32 copy: white's perspective, then black's."""
        return self._accs[len(self._undo)].copy()

    def full_refresh(self) -> np.ndarray:
        """(2, H) int32 accumulators summed from scratch for the current position (white's
        perspective first); the current entry is left alone."""
        out = np.empty_like(self._accs[0])
        lists = self._encode_lists() if self.mode == "encode" else None
        for p in (0, 1):
            self._refresh_into(out, p, lists)
        return out

    def _features(self, p: int) -> list[int]:
        """Table mode: every active feature of perspective p (colour) in the current position."""
        t = self._t
        base = (p * t.K + (self.kings[p] if t.king_relative else 0)) * NUM_KEYS
        tab = t.tab
        out = [tab[base + 16 * s + c] for s, c in enumerate(self.board) if c >= 0]
        return [i for i in out if i >= 0] if t.drops_kings else out

    def _encode_lists(self) -> tuple[list[int], list[int]]:
        """Encode mode: (white's, black's) index lists from the feature set's encoder."""
        pieces = {s: c for s, c in enumerate(self.board) if c >= 0}
        raw = pack_position(pieces, False)  # white to move: stm list = white's perspective
        t = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(1, 32)
        w, b = self.fs.encode(t)
        return [i for i in w[0].tolist() if i >= 0], [i for i in b[0].tolist() if i >= 0]

    def _refresh_into(self, out: np.ndarray, p: int, lists=None) -> None:
        if self.mode == "table":
            idx = self._features(p)
        else:
            idx = (lists or self._lists[-1])[p]
        out[p] = self._b
        if idx:
            out[p] += self._w.take(idx, axis=0).sum(axis=0, dtype=np.int32)

    # -- moves ----------------------------------------------------------------------------------

    def push(self, move) -> None:
        """Make a move (see the module docstring for the formats); updates both accumulators.
        Raises ValueError (and changes nothing) on a move the position cannot make."""
        parsed = _UCI_CACHE.get(move) if type(move) is str else None
        if parsed is None:
            parsed = parse_move(move)
            if type(move) is str and len(_UCI_CACHE) < 16384:
                _UCI_CACHE[move] = parsed
        fr, to, promo = parsed
        stm = self.stm
        if self._table and promo is None and fr >= 0:
            board = self.board
            piece, target = board[fr], board[to]
            # the common case, inlined: a piece of the side to move, no promotion, no en passant,
            # no castling, capturing nothing or an enemy piece other than the king, and no refresh
            if (piece >= 0 and piece >> 3 == stm
                    and (target < 0 or (target >> 3 != stm and target & 7 != KING))
                    and (piece & 7 != KING or self._simple_king_move(fr, to, stm))
                    and (piece & 7 != PAWN or (0 < to >> 3 < 7 and (target >= 0 or not (fr ^ to) & 7)))):
                self._push_simple(fr, to, piece, target)
                return
        undo = (stm, self.castling, self.ep, self.halfmove, self.fullmove, self.count,
                self.kings[0], self.kings[1])
        try:
            changes, king_from = self._apply(fr, to, promo)
        except ValueError:
            (self.stm, self.castling, self.ep, self.halfmove, self.fullmove, self.count,
             self.kings[0], self.kings[1]) = undo
            raise
        if stm == 1:
            self.fullmove += 1
        self.stm = stm ^ 1
        self._undo.append((undo, changes))
        self.pushes += 1
        ply = len(self._undo)
        if len(self._accs) <= ply:
            self._accs.append(np.empty_like(self._accs[0]))
        old, new_acc = self._accs[ply - 1], self._accs[ply]
        if self.mode == "table":
            self._update_table(old, new_acc, changes, stm, king_from)
        else:
            self._update_encode(old, new_acc)

    def _simple_king_move(self, fr: int, to: int, stm: int) -> bool:
        """A king step that :meth:`_push_simple` can take: not castling, the king is a feature,
        and no refresh (the king stays in its class of king squares)."""
        t = self._t
        return (abs((to & 7) - (fr & 7)) < 2 and not t.drops_kings
                and t.king_class[stm][fr] == t.king_class[stm][to])

    def _push_simple(self, fr: int, to: int, piece: int, target: int) -> None:
        """:meth:`push` of a move without promotion, en passant, castling or refresh (checked by
        the caller): the same updates as the general path (:meth:`_apply`,
        :meth:`_update_table`), written out for the two or three feature rows it changes per
        perspective."""
        stm = self.stm
        self._undo.append(((stm, self.castling, self.ep, self.halfmove, self.fullmove, self.count,
                            self.kings[0], self.kings[1]), [(fr, piece, EMPTY), (to, target, piece)]))
        board = self.board
        board[fr] = EMPTY
        board[to] = piece
        if piece & 7 == PAWN:
            self.halfmove = 0
            self.ep = (fr + to) >> 1 if abs(to - fr) == 16 else None
        else:
            self.halfmove = 0 if target >= 0 else self.halfmove + 1
            self.ep = None
        if piece & 7 == KING:
            self.kings[stm] = to
            self.castling &= ~(0xFF << (56 * stm))
        if self.castling:
            self.castling &= ~((1 << fr) | (1 << to))
        if stm:
            self.fullmove += 1
        self.stm = stm ^ 1
        self.pushes += 1
        accs = self._accs
        ply = len(self._undo)
        if len(accs) <= ply:
            accs.append(np.empty_like(accs[0]))
        old, new = accs[ply - 1], accs[ply]
        t = self._t
        tab = t.tab
        if t.king_relative:
            bw, bb = self.kings[0] * NUM_KEYS, (64 + self.kings[1]) * NUM_KEYS
        else:
            bw, bb = 0, NUM_KEYS
        kt, kf = 16 * to + piece, 16 * fr + piece
        if target < 0:
            flat, r = self._take_bufs[2]
            self._w.take([tab[bw + kt], tab[bb + kt], tab[bw + kf], tab[bb + kf]], axis=0, out=flat)
            np.add(old, r[0], out=new)
            np.subtract(new, r[1], out=new)
        else:
            self.count -= 1
            kc = 16 * to + target
            flat, r = self._take_bufs[3]
            self._w.take([tab[bw + kt], tab[bb + kt], tab[bw + kf], tab[bb + kf], tab[bw + kc], tab[bb + kc]],
                         axis=0, out=flat)
            np.add(old, r[0], out=new)
            np.subtract(new, r[1], out=new)
            np.subtract(new, r[2], out=new)

    def _apply(self, fr: int, to: int, promo: int | None) -> tuple[list[tuple[int, int, int]], int]:
        """Play the move on the board: returns the changed squares as (square, before, after)
        and the king's from-square when the side to move's king moved (or castled), else −1."""
        board = self.board
        stm = self.stm
        if fr < 0:  # null move
            self.ep = None
            return [], -1
        piece = board[fr]
        if piece < 0:
            raise ValueError(f"no piece on {_name(fr)}")
        if piece >> 3 != stm:
            raise ValueError(f"the piece on {_name(fr)} is not the side to move's")
        ptype = piece & 7
        target = board[to]
        king_from = -1
        if ptype == KING and (target == piece - KING + ROOK
                              or (((fr ^ to) & 56) == 0 and abs((to & 7) - (fr & 7)) >= 2)):
            if promo is not None:
                raise ValueError("a castling move cannot promote")
            changes = self._castling_changes(fr, to, piece, target)
            king_from = fr
            self.castling &= ~(0xFF << (56 * stm))
            self.halfmove += 1
            self.ep = None
        else:
            if target >= 0 and (target >> 3 == stm or target & 7 == KING):
                raise ValueError(f"{_name(fr)}{_name(to)} captures "
                                 f"{'an own piece' if target >> 3 == stm else 'a king'}")
            last = (to >> 3) == (7 if stm == 0 else 0)
            new = piece
            if promo is not None:
                if ptype != PAWN or not last:
                    raise ValueError(f"promotion {_name(fr)}{_name(to)} needs a pawn reaching the last rank")
                new = (piece & 8) | promo
            elif ptype == PAWN and last:
                raise ValueError(f"pawn move {_name(fr)}{_name(to)} to the last rank needs a promotion piece")
            changes = [(fr, piece, EMPTY), (to, target, new)]
            self.ep = None
            if ptype == PAWN:
                self.halfmove = 0
                if (fr ^ to) & 7 and target < 0:  # en passant
                    cap = to - 8 if stm == 0 else to + 8
                    if board[cap] != (piece ^ 8):
                        raise ValueError(f"{_name(fr)}{_name(to)}: no pawn to take en passant on {_name(cap)}")
                    changes.append((cap, board[cap], EMPTY))
                elif abs(to - fr) == 16:
                    self.ep = (fr + to) >> 1
            else:
                self.halfmove = 0 if target >= 0 else self.halfmove + 1
            if ptype == KING:
                king_from = fr
                self.castling &= ~(0xFF << (56 * stm))
            self.castling &= ~((1 << fr) | (1 << to))
            if target >= 0 or len(changes) == 3:
                self.count -= 1
        for sq, _before, after in changes:
            board[sq] = after
        if king_from >= 0:
            self.kings[stm] = next((sq for sq, _b, a in changes if a == piece), fr)
        return changes, king_from

    def _castling_changes(self, fr: int, to: int, king: int, target: int) -> list[tuple[int, int, int]]:
        board = self.board
        rook = king - KING + ROOK
        rank = fr & 56
        kingside = (to & 7) > (fr & 7)
        if target == rook:  # king takes own rook (Chess960 notation)
            rook_sq = to
        else:  # the king's two-file move: the rook with the castling right on that side
            side = range(fr + 1, rank + 8) if kingside else range(fr - 1, rank - 1, -1)
            rooks = [s for s in side if board[s] == rook]
            with_right = [s for s in rooks if self.castling >> s & 1]
            if not rooks:
                raise ValueError(f"castling {_name(fr)}{_name(to)}: no rook on that side")
            rook_sq = with_right[0] if with_right else rooks[-1]
        after = {fr: EMPTY, rook_sq: EMPTY}
        after[rank + (6 if kingside else 2)] = king
        after[rank + (5 if kingside else 3)] = rook
        changes = []
        for sq, a in after.items():
            b = board[sq]
            if b >= 0 and sq not in (fr, rook_sq):
                raise ValueError(f"castling {_name(fr)}{_name(to)}: {_name(sq)} is occupied")
            if b != a:
                changes.append((sq, b, a))
        return changes

    def _update_table(self, old: np.ndarray, new: np.ndarray, changes, mover: int, king_from: int) -> None:
        t = self._t
        tab = t.tab
        if t.king_relative:
            kw, kb = self.kings
            bases = (kw * NUM_KEYS, (64 + kb) * NUM_KEYS)
        else:
            bases = (0, NUM_KEYS)
        refresh = king_from >= 0 and t.king_class[mover][king_from] != t.king_class[mover][self.kings[mover]]
        if not refresh and not t.drops_kings:
            # both perspectives by delta, the same number of rows each: one take of the rows in
            # layers of (white's, black's), then one add or subtract per layer
            bw, bb = bases
            adds: list[int] = []
            subs: list[int] = []
            for sq, before, after in changes:
                if after >= 0:
                    k = 16 * sq + after
                    adds += (tab[bw + k], tab[bb + k])
                if before >= 0:
                    k = 16 * sq + before
                    subs += (tab[bw + k], tab[bb + k])
            na = len(adds) >> 1
            layers = na + (len(subs) >> 1)
            if not layers:
                np.copyto(new, old)
                return
            if layers <= 4:  # into a buffer with its layer views made once (saves ~0.5 us)
                flat, r = self._take_bufs[layers]
                self._w.take(adds + subs, axis=0, out=flat)
            else:
                r = self._w.take(adds + subs, axis=0).reshape(layers, 2, -1)
            if na:
                np.add(old, r[0], out=new)
            else:
                np.subtract(old, r[0], out=new)
            for j in range(1, layers):
                if j < na:
                    np.add(new, r[j], out=new)
                else:
                    np.subtract(new, r[j], out=new)
            return
        for p in (0, 1):
            if refresh and p == mover:
                self._refresh_into(new, p)
                self.refreshes[p] += 1
                continue
            base = bases[p]
            adds = [tab[base + 16 * sq + a] for sq, _b, a in changes if a >= 0]
            subs = [tab[base + 16 * sq + b] for sq, b, _a in changes if b >= 0]
            row = new[p]
            np.copyto(row, old[p])
            # a −1 is a piece that is not a feature (HalfKP's kings)
            adds = [i for i in adds if i >= 0]
            subs = [i for i in subs if i >= 0]
            if adds:
                row += self._w.take(adds, axis=0).sum(axis=0, dtype=np.int32)
            if subs:
                row -= self._w.take(subs, axis=0).sum(axis=0, dtype=np.int32)

    def _update_encode(self, old: np.ndarray, new: np.ndarray) -> None:
        prev = self._lists[-1]
        cur = self._encode_lists()
        self._lists.append(cur)
        for p in (0, 1):
            before, after = Counter(prev[p]), Counter(cur[p])
            adds = list((after - before).elements())
            subs = list((before - after).elements())
            if len(adds) + len(subs) > len(cur[p]):
                self._refresh_into(new, p)
                self.refreshes[p] += 1
                continue
            row = new[p]
            np.copyto(row, old[p])
            if adds:
                row += self._w.take(adds, axis=0).sum(axis=0, dtype=np.int32)
            if subs:
                row -= self._w.take(subs, axis=0).sum(axis=0, dtype=np.int32)

    def pop(self) -> None:
        """Take back the last move (the previous accumulators are still on the stack).
        Raises IndexError when nothing was pushed."""
        if not self._undo:
            raise IndexError("pop from an empty move stack")
        state, changes = self._undo.pop()
        for sq, before, _after in reversed(changes):
            self.board[sq] = before
        (self.stm, self.castling, self.ep, self.halfmove, self.fullmove, self.count,
         self.kings[0], self.kings[1]) = state
        if self.mode == "encode":
            self._lists.pop()

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(self, base: int | None = None) -> int:
        """The integer eval of the current position (centipawns, side to move's POV): the value
        ``nnue.inference.evaluate`` gives for the full position. Raises OverflowError where it
        does (an accumulator outside int16, an L1 sum or output outside int32; never for
        ``sfnnv5``, whose sums wrap as the engine's do). A residual net
        (:mod:`nnue.inference.residual`) adds its base: ``base`` (centipawns, stm POV), else the
        material base computed from the position; a Stockfish base without ``base`` raises
        BaseMissingError."""
        n = self.evaluate_net()
        r = residual.of(self.net)
        if r is None:
            return n
        boards = torch.frombuffer(bytearray(self.packed()), dtype=torch.uint8).view(1, 32)
        b = residual.base_for(self.net, boards, None if base is None else torch.tensor([int(base)]))
        return int(residual.combine(torch.tensor([n]), b, r["alpha_num"], r["alpha_shift"])[0])

    def evaluate_net(self) -> int:
        """The net's own integer eval (without a residual net's base), as
        :func:`nnue.inference.api.evaluate_net` gives it for the full position."""
        return _eval_accumulators(self.net, self._c, self._accs[len(self._undo)], self.stm, self.count)


def _eval_accumulators(net: NetFile, c: dict, acc: np.ndarray, stm: int, count: int) -> int:
    """The integer eval (centipawns, stm POV, no residual base) from the (2, H) int32
    accumulators of one position (white's perspective in row 0), ``count`` pieces on the board
    and ``stm`` 0 white / 1 black: the kind's ``evaluate_accumulator``. Raises OverflowError
    where the kind's ``forward_int`` does."""
    return c["eval"](net, acc, stm, c["buckets"][count], c["layers"])


# ---------------------------------------------------------------------------------------------
# one position from scratch

def _nibble_table() -> np.ndarray:
    """(256, 2) int64: a packed byte's two piece codes (low nibble first), a castling rook (6)
    as a rook (3) of its colour and the unused code 7 as 255."""
    lo, hi = np.arange(256) & 15, np.arange(256) >> 4
    out = np.stack((lo, hi), axis=1)
    out = np.where(out & 7 == 6, out - 3, out)
    return np.where(out & 7 == 7, 255, out).astype(np.int64)


_NIBBLES = _nibble_table()

def evaluate_one(net: NetFile, board) -> int | None:
    """The net's own integer eval of one packed board (centipawns, side to move's POV, without
    a residual net's base), computed from scratch on the CPU with no batch machinery: decode the
    32 bytes, look both perspectives' features up in the feature set's table, sum their
    feature-transformer rows (numpy int32), then :func:`_eval_accumulators`. Equal to
    ``nnue.inference.api.evaluate_net(net, board.view(1, 32))[0]`` (tested with ``torch.equal``
    in tests/inference/test_incremental.py and, for sfnnv5, test_incremental_sfnnv5.py).

    board: 32 bytes (``bytes``, a (32,) uint8 numpy array or tensor). Returns None where this path
    does not apply and the caller should use the batch path: a kind without incremental
    support, a feature set without a lookup table, or a board that the batch encoder must judge
    (a piece code 7, more than 32 pieces, a king-relative set without one king a side).
    Raises OverflowError where ``forward_int`` does. Cost: ~25 us for chess768 → 256 on one
    core (``nnue bench infer``, ``single_position``); ~65 us for sfnnv5 at L1 1,024 (Stockfish
    15.1's own net; ~95 us through ``nnue.inference.evaluate``, ``nnue bench incremental --kind
    sfnnv5``)."""
    kind = kinds.of(net)
    fs = net.features
    if not kind.incremental or not isinstance(fs.encode, TableEncoder):
        return None
    if type(board) is np.ndarray and board.dtype == np.uint8 and board.shape == (32,):
        a = board
    else:
        raw = board if type(board) is bytes else _as_bytes(board)
        if len(raw) != 32:
            return None
        a = np.frombuffer(raw, dtype=np.uint8)
    sqs = np.flatnonzero(np.unpackbits(a[:8], bitorder="little"))  # occupied squares, ascending
    n = len(sqs)
    if n > 32:
        return None
    codes = _NIBBLES[a[8:24]].reshape(-1)[:n]  # piece codes, castling rooks as rooks, 7 -> 255
    if n and codes.max() > 15:
        return None
    c = _net_cache(net)
    t = _tables_for(fs)
    keys = sqs * 16 + codes
    if t.king_relative:
        kw, kb = sqs[codes == KING], sqs[codes == 8 + KING]
        if len(kw) != 1 or len(kb) != 1:
            return None
        idx = t.tab_np[(0, 1), (kw[0], kb[0])][:, keys]  # (2, n): white's, black's features
    else:
        idx = t.tab_np[:, 0, keys]
    acc = np.empty((2, c["hidden"]), dtype=np.int32)
    w = c["w"]
    if t.drops_kings:
        for p in (0, 1):
            own = idx[p][idx[p] >= 0]
            acc[p] = c["b"]
            if len(own):
                acc[p] += w.take(own, axis=0).sum(axis=0, dtype=np.int32)
    elif n:
        np.add(w.take(idx.reshape(-1), axis=0).reshape(2, n, -1).sum(axis=1, dtype=np.int32), c["b"], out=acc)
    else:
        acc[:] = c["b"]
    stm_ep = int(a[24])
    return _eval_accumulators(net, c, acc, 1 if stm_ep & 0x80 else 0, n)


def _as_bytes(board) -> bytes:
    if isinstance(board, (bytes, bytearray, memoryview)):
        raw = bytes(board)
    elif isinstance(board, torch.Tensor):
        raw = board.detach().cpu().to(torch.uint8).contiguous().numpy().tobytes()
    else:
        raw = np.asarray(board, dtype=np.uint8).tobytes()
    if len(raw) != 32:
        raise ValueError(f"a packed board is 32 bytes, got {len(raw)}")
    return raw


def _name(sq: int) -> str:
    return _FILES[sq & 7] + str((sq >> 3) + 1)
