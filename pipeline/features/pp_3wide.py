"""PP_3Wide: one feature per pair of pawns on the same or adjacent files, Stockfish 19's pawn-pair input.

Formula (Stockfish ``src/nnue/features/pp_3wide.cpp``, ``make_index``, ``append_active_indices``;
nnue-pytorch ``training_data_loader.cpp``, ``PP_3Wide``; ``model/modules/features/pp_3wide.py``).
For perspective p (0 white, 1 black) with own king on square k, orient squares by
``x = 56·p ^ (7 if file(k) ≥ 4 else 0)`` as Full_Threats does (own king on files a–d). A pawn of
colour c on square s (ranks 2–7) has the id

    id(c, s) = 48·(c ≠ p) + (s ^ x) − 8          0..95 (own pawns first)

and an unordered pair of pawns (either colours) whose files differ by at most one, on any ranks,
is the feature ``hi·(hi − 1)/2 + lo`` with hi > lo the two ids: 96·95/2 = 4,560 inputs (most are
never active: pairs further apart than one file have indices too). Sixteen pawns make at most
120 pairs, under nnue-pytorch's bound of 128 (``MAX_ACTIVE``); a board with more than 128 pawn
pairs (not a chess position) is refused, ValueError naming it. A pawn on rank 1 or 8 (no legal
position) is in no pair. No factoriser. Engine weights int8; Stockfish's hash 0x86F2B1DD.

List order: by the lower absolute square of the pair, then the higher, then −1.
"""
from __future__ import annotations

import functools

import torch

from .full_threats import compiled_encode
from .spec import CFeature, FeaturePart, FeatureSet
from .varlist import chunked, compact, orientation, piece_ids, square_xor

NUM_INPUTS = 96 * 95 // 2   # 4,560
MAX_ACTIVE = 128
ENGINE_HASH = 0x86F2B1DD
# rows of the CPU work a chunk (372 candidate pairs a board)
CPU_CHUNK = 2048


def pawn_id(colour_rel: int, sq_oriented: int) -> int:
    """id of a pawn of relative colour (0 own) on an oriented square of ranks 2–7."""
    return 48 * colour_rel + sq_oriented - 8


def pair_index(id_a: int, id_b: int) -> int:
    hi, lo = max(id_a, id_b), min(id_a, id_b)
    return hi * (hi - 1) // 2 + lo


@functools.lru_cache(maxsize=1)
def _pair_tables() -> dict[str, torch.Tensor]:
    """The candidate square pairs (lo < hi, both on ranks 2–7, files at most one apart), in list
    order (372 pairs), and ``index`` (4·pairs·4) int32: the feature of (orientation o, pair,
    colour of lo's pawn, colour of hi's pawn)."""
    lo, hi = [], []
    for a in range(8, 56):
        for b in range(a + 1, 56):
            if abs(a % 8 - b % 8) <= 1:
                lo.append(a)
                hi.append(b)
    index = []
    for o in range(4):
        p, x = o >> 1, square_xor(o)
        for a, b in zip(lo, hi):
            for ca in (0, 1):
                for cb in (0, 1):
                    index.append(pair_index(pawn_id(ca ^ p, a ^ x), pawn_id(cb ^ p, b ^ x)))
    return {"lo": torch.tensor(lo), "hi": torch.tensor(hi),
            "index": torch.tensor(index, dtype=torch.int32)}


_DEVICE_TABLES: dict[torch.device, dict[str, torch.Tensor]] = {}


def pair_lists(ids: torch.Tensor, orient: torch.Tensor, width: int, first_row: int = 0) -> torch.Tensor:
    """The pawn-pair lists of a batch: ids (B, 64) from :func:`.varlist.piece_ids`, orient
    (2, B) from :func:`.varlist.orientation` -> (2, B, width) int32, stm then nstm, in list
    order, −1 padded. ValueError (CPU) when a board has more than ``width``."""
    t = _DEVICE_TABLES.get(ids.device)
    if t is None:
        t = _DEVICE_TABLES[ids.device] = {k: v.to(ids.device) for k, v in _pair_tables().items()}
    n, npairs = ids.shape[0], t["lo"].shape[0]
    a = ids.index_select(1, t["lo"])
    b = ids.index_select(1, t["hi"])
    pawns = ((a % 6) == 0) & ((b % 6) == 0) & (a < 12) & (b < 12)                  # (B, pairs)
    key = torch.arange(npairs, device=ids.device) * 4 + (a // 6).clamp(max=1) * 2 + (b // 6).clamp(max=1)
    full = orient.view(2, n, 1) * (npairs * 4) + key
    idx = t["index"].index_select(0, full.view(-1)).view(2, n, npairs)
    return compact(pawns.expand(2, n, npairs), idx, width, "PP_3Wide", first_row)


class PairEncoder:
    """``encode(boards) -> (stm, nstm)``, (B, MAX_ACTIVE) int32 each, for PP_3Wide (torch, any
    device)."""

    max_active = MAX_ACTIVE

    def __call__(self, boards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return chunked(boards, MAX_ACTIVE, CPU_CHUNK, self._encode)

    @staticmethod
    def _encode(boards: torch.Tensor, first_row: int) -> torch.Tensor:
        orient = orientation(boards, first_row)
        ids, _ = piece_ids(boards)
        return pair_lists(ids, orient, MAX_ACTIVE, first_row)


def encode_numba(boards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """PP_3Wide through the compiled encoder (:mod:`nnue.pipeline.compiled.threats`): the
    result of :class:`PairEncoder`, CPU boards only."""
    return compiled_encode(boards, MAX_ACTIVE, (False, True, False))


SPEC = ("PP_3Wide (Stockfish pp_3wide.cpp, hash 0x86F2B1DD): x=56p^(file(k)>=4?7:0); "
        "id=48*(c!=p)+(s^x)-8 for pawns on ranks 2-7; pairs with |file difference|<=1, any ranks; "
        "index=hi*(hi-1)/2+lo; stm first; order (lower square, higher square); at most 128")

PP_3WIDE = FeatureSet(
    name="pp_3wide", num_inputs=NUM_INPUTS, max_active=MAX_ACTIVE, spec=SPEC,
    encode=PairEncoder(), encode_numba=encode_numba,
    parts=(FeaturePart("pp_3wide", 0, NUM_INPUTS, MAX_ACTIVE, "int8", ENGINE_HASH),),
)
