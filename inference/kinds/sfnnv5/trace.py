"""Stockfish 15.1's NNUE eval trace of an sfnnv5 net (``nnue eval --trace``): the derived piece
values board, the table of the 8 buckets and the ``NNUE evaluation`` line, character for character
as the engine's ``eval`` command prints them, computed from piece lists (Stockfish
``half_ka_v2_hm.cpp``'s features, :func:`halfka_indices`) with the kind's exact arithmetic
(:mod:`nnue.inference.kinds.sfnnv5.net`).
"""
from __future__ import annotations

import numpy as np
import torch

from nnue.pipeline.features.halfka_v2_hm import KING_BUCKETS, PLANES

from .codec import LAYER_STACKS
from .net import (NORMALIZE_TO_PAWN, OUTPUT_SCALE, SFNNv5IntegerNet, accumulate, layer_stack, psqt_value, tdiv_int,
                  transform, value_from_indices)


def halfka_indices(board: np.ndarray, stm_white: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HalfKAv2_hm features of positions given as square arrays (Stockfish ``half_ka_v2_hm.cpp``).

    board: (N, 64) int8, a1 = 0, 0 = empty, 1..6 white P N B R Q K, 9..14 black (the piece codes
    of Stockfish: type + 8·colour); stm_white: (N,) bool. Returns (stm, nstm) (N, 32) int32
    indices, −1 padded (the same features as the ``halfkav2_hm`` feature set on packed boards;
    tests/inference/test_sfnnv5.py checks it). Raises ValueError when a side has no king or
    more than 32 pieces stand on a board.
    """
    board = np.asarray(board, dtype=np.int16)
    kb = np.asarray(KING_BUCKETS, dtype=np.int64)
    occupied = board > 0
    if (occupied.sum(1) > 32).any():
        raise ValueError("more than 32 pieces on a board")
    out = []
    sq = np.arange(64)
    for persp_is_stm in (True, False):
        persp_white = stm_white if persp_is_stm else ~stm_white
        king_code = np.where(persp_white, 6, 14)
        has_king = board == king_code[:, None]
        if not has_king.any(1).all():
            raise ValueError("a side has no king")
        ksq = has_king.argmax(1)
        orient = np.where(ksq % 8 < 4, 7, 0) ^ np.where(persp_white, 0, 56)
        ptype = (board & 7) - 1                                   # 0..5
        own = (board >> 3) == np.where(persp_white, 0, 1)[:, None]
        p_idx = np.where(ptype == 5, 10, 2 * ptype + (~own))
        idx = (sq[None, :] ^ orient[:, None]) + 64 * p_idx + PLANES * kb[ksq ^ orient][:, None]
        idx = np.where(occupied, idx, -1)
        # pack the active ones to the front (ascending square), 32 wide
        order = np.argsort(~occupied, axis=1, kind="stable")
        out.append(np.take_along_axis(idx, order, 1)[:, :32].astype(np.int32))
    return out[0], out[1]


_PIECE_CODES = {c: i + 1 for i, c in enumerate("PNBRQK")} | {c: i + 9 for i, c in enumerate("pnbrqk")}
_PIECE_CHARS = " PNBRQK  pnbrqk"  # Stockfish's PieceToChar, indexed by piece code


def squares_from_fen(fen: str) -> tuple[np.ndarray, bool]:
    """A FEN's piece placement and side to move: ((64,) int8 piece codes, a1 = 0, as
    :func:`halfka_indices` takes them; white to move). Raises ValueError on a malformed placement."""
    fields = fen.split()
    if len(fields) < 2 or fields[1] not in ("w", "b"):
        raise ValueError(f"FEN {fen!r}: expected a placement and a side to move")
    sq = np.zeros(64, dtype=np.int8)
    ranks = fields[0].split("/")
    if len(ranks) != 8:
        raise ValueError(f"FEN {fen!r}: {len(ranks)} ranks")
    for r, row in enumerate(ranks):
        f = 0
        for ch in row:
            if ch.isdigit():
                f += int(ch)
            elif ch in _PIECE_CODES and f < 8:
                sq[(7 - r) * 8 + f] = _PIECE_CODES[ch]
                f += 1
            else:
                raise ValueError(f"FEN {fen!r}: bad placement character {ch!r}")
        if f != 8:
            raise ValueError(f"FEN {fen!r}: rank {8 - r} has {f} files")
    return sq, fields[1] == "w"


def values_of_squares(net: SFNNv5IntegerNet, board: np.ndarray, stm_white: np.ndarray,
                      all_buckets: bool = False, chunk: int = 4096):
    """Internal values of positions given as (N, 64) piece codes and (N,) side to move (see
    :func:`halfka_indices`): (N,) int64, stm POV. With all_buckets, instead (psqt, positional),
    each (N, 8) int64: what every layer stack and PSQT column gives (the trace's bucket table)."""
    out = []
    for s in range(0, board.shape[0], chunk):
        b, w = board[s:s + chunk], stm_white[s:s + chunk]
        stm, nstm = (torch.from_numpy(t) for t in halfka_indices(b, w))
        pieces = torch.from_numpy((b > 0).sum(1).astype(np.int64))
        if not all_buckets:
            out.append(value_from_indices(net, stm, nstm, torch.div(pieces - 1, 4, rounding_mode="floor")))
            continue
        a_s, p_s = accumulate(net, stm)
        a_n, p_n = accumulate(net, nstm)
        x0 = transform(a_s, a_n)
        ps, pos = [], []
        for k in range(LAYER_STACKS):
            bk = torch.full((b.shape[0],), k, dtype=torch.int64)
            ps.append(psqt_value(p_s, p_n, bk))
            pos.append(layer_stack(net, x0, bk))
        out.append((torch.stack(ps, 1), torch.stack(pos, 1)))
    if not all_buckets:
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.int64)
    return torch.cat([o[0] for o in out]), torch.cat([o[1] for o in out])


def _compact(v: int) -> str:
    """Stockfish's ``format_cp_compact``: 5 characters."""
    sign = "-" if v < 0 else "+" if v > 0 else " "
    cp = abs(int(100 * v / NORMALIZE_TO_PAWN))  # C division truncates toward zero
    if cp >= 10000:
        return f"{sign}{cp // 10000}{cp % 10000 // 1000}{cp % 1000 // 100} "
    if cp >= 1000:
        return f"{sign}{cp // 1000}{cp % 1000 // 100}.{cp % 100 // 10}"
    return f"{sign}{cp // 100}.{cp % 100 // 10}{cp % 10}"


def _aligned(v: int) -> str:
    """Stockfish's ``format_cp_aligned_dot``: sign and ``%6.2f`` of |v| / 361."""
    sign = "-" if v < 0 else "+" if v > 0 else " "
    return sign + "%6.2f" % (abs(v) / NORMALIZE_TO_PAWN)


def _empty_grid() -> list[list[str]]:
    """The trace's board drawing with no piece and no value: 25 rows of 65 characters."""
    grid = [[" "] * 65 for _ in range(25)]
    for x in range(0, 64, 8):
        for y in range(0, 24, 3):
            for k in range(1, 8):
                grid[y][x + k] = grid[y + 3][x + k] = "-"
            for k in (1, 2):
                grid[y + k][x] = grid[y + k][x + 8] = "|"
            grid[y][x] = grid[y][x + 8] = grid[y + 3][x + 8] = grid[y + 3][x] = "+"
    return grid


_EMPTY_GRID = _empty_grid()


def trace(net: SFNNv5IntegerNet, fens: list[str]) -> list[str]:
    """Stockfish 15.1's NNUE part of the ``eval`` command's output for each FEN, character for
    character: the derived piece values board (each non-king piece's value is the eval with it
    minus the eval without it, white's point of view), the table of the 8 buckets (Material
    (PSQT), Positional (Layers), Total, stm POV), and the ``NNUE evaluation`` line (pawns,
    white's point of view). Each text ends with a newline. The engine prints nothing of this
    for a position in check (``Final evaluation: none (in check)``): the caller decides.
    Raises ValueError on a malformed FEN."""
    boards, stms, owners = [], [], []  # every position and every one-piece-removed variant
    parsed = [squares_from_fen(f) for f in fens]
    for i, (sq, w) in enumerate(parsed):
        boards.append(sq)
        stms.append(w)
        owners.append((i, -1))
        for s in range(64):
            if sq[s] and sq[s] & 7 != 6:
                b = sq.copy()
                b[s] = 0
                boards.append(b)
                stms.append(w)
                owners.append((i, s))
    if not boards:
        return []
    v = values_of_squares(net, np.stack(boards), np.array(stms, dtype=bool)).tolist()
    psqt, positional = values_of_squares(net, np.stack([p[0] for p in parsed]),
                                         np.array([p[1] for p in parsed], dtype=bool), all_buckets=True)
    base: dict[int, int] = {}
    removed: dict[tuple[int, int], int] = {}
    for (i, s), val in zip(owners, v):
        white_pov = val if parsed[i][1] else -val
        if s < 0:
            base[i] = white_pov
        else:
            removed[(i, s)] = white_pov
    out = []
    for i, (sq, white) in enumerate(parsed):
        grid = [row[:] for row in _EMPTY_GRID]
        for s in np.flatnonzero(sq).tolist():
            x, y = (s % 8) * 8, (7 - s // 8) * 3
            grid[y + 1][x + 4] = _PIECE_CHARS[sq[s]]
            if (i, s) in removed:
                grid[y + 2][x + 2:x + 7] = list(_compact(base[i] - removed[(i, s)]))
        lines = [" NNUE derived piece values:"] + ["".join(row) for row in grid] + [""]
        lines.append(f" NNUE network contributions ({'White' if white else 'Black'} to move)")
        lines += ["+------------+------------+------------+------------+",
                  "|   Bucket   |  Material  | Positional |   Total    |",
                  "|            |   (PSQT)   |  (Layers)  |            |",
                  "+------------+------------+------------+------------+"]
        used = (int((sq > 0).sum()) - 1) // 4
        for k in range(LAYER_STACKS):
            p = tdiv_int(int(psqt[i, k]), OUTPUT_SCALE)
            q = tdiv_int(int(positional[i, k]), OUTPUT_SCALE)
            line = f"|  {k}         |  {_aligned(p)}   |  {_aligned(q)}   |  {_aligned(p + q)}   |"
            lines.append(line + (" <-- this bucket is used" if k == used else ""))
        lines.append("+------------+------------+------------+------------+")
        lines.append("")
        lines.append(f"NNUE evaluation        {base[i] / NORMALIZE_TO_PAWN:+.2f} (white side)")
        out.append("\n".join(lines) + "\n")
    return out


def eval_trace(net: SFNNv5IntegerNet, fens: list[str], in_check: list[bool]) -> list[str]:
    """The kind's ``trace`` (``nnue eval --trace``): :func:`trace` of each position, and for a
    position in check the engine's own line, ``Final evaluation: none (in check)`` (the engine
    prints nothing of the NNUE trace then). Each text ends with a newline."""
    texts = iter(trace(net, [f for f, c in zip(fens, in_check) if not c]))
    return ["Final evaluation: none (in check)\n" if c else next(texts) for c in in_check]

