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
from .varlist import EMPTY, ListEncoder, row_entries, square_xor

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
    order (372 pairs); ``pawn`` (13,) uint8: piece id -> 1 white pawn, 2 black pawn, 0 other;
    ``index`` (4·pairs·9) int32: the feature of (orientation o, pair, 3·pawn(lo) + pawn(hi)),
    −1 unless both are pawns."""
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
            for pa in range(3):
                for pb in range(3):
                    index.append(-1 if not (pa and pb) else
                                 pair_index(pawn_id((pa - 1) ^ p, a ^ x), pawn_id((pb - 1) ^ p, b ^ x)))
    pawn = torch.zeros(EMPTY + 1, dtype=torch.uint8)
    pawn[0], pawn[6] = 1, 2
    return {"lo": torch.tensor(lo), "hi": torch.tensor(hi), "pawn": pawn,
            "key": torch.arange(len(lo), dtype=torch.int32) * 9,
            "index": torch.tensor(index, dtype=torch.int32)}


_DEVICE_TABLES: dict[torch.device, dict[str, torch.Tensor]] = {}


def pair_entries(ids: torch.Tensor, orient: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The pawn pairs of a batch as flat entries for :func:`.varlist.assemble`: ids (B, 64)
    from :func:`.varlist.piece_ids`, orient (2, B) from :func:`.varlist.orientation` ->
    (rows ``q·B + board``, indices), (M,) int64 each, in list order."""
    t = _DEVICE_TABLES.get(ids.device)
    if t is None:
        t = _DEVICE_TABLES[ids.device] = {k: v.to(ids.device) for k, v in _pair_tables().items()}
    n = ids.shape[0]
    pawns = t["pawn"][ids.long()]                                     # (B, 64) 0 / 1 / 2
    a = torch.gather(pawns, 1, t["lo"].expand(n, -1))
    b = torch.gather(pawns, 1, t["hi"].expand(n, -1))
    board, pair = row_entries((a != 0) & (b != 0))
    key = t["key"][pair] + 3 * a[board, pair].to(torch.int32) + b[board, pair]
    npairs9 = t["lo"].shape[0] * 9
    rows = torch.cat((board, board + n))
    values = torch.cat([t["index"].index_select(0, orient[q, board] * npairs9 + key) for q in (0, 1)])
    return rows, values


SPEC = ("PP_3Wide (Stockfish pp_3wide.cpp, hash 0x86F2B1DD): x=56p^(file(k)>=4?7:0); "
        "id=48*(c!=p)+(s^x)-8 for pawns on ranks 2-7; pairs with |file difference|<=1, any ranks; "
        "index=hi*(hi-1)/2+lo; stm first; order (lower square, higher square); at most 128")

# The C reference's PP_3Wide, written from Stockfish's pp_3wide.cpp.
C = CFeature(
    enum="FS_PP_3WIDE",
    index='die("pp_3wide: features are not one per piece (active_features)");\nreturn -1;',
    support="""\
/* PP_3Wide (Stockfish 19 pp_3wide.cpp): every unordered pair of pawns on ranks 2-7 whose files
 * differ by at most one; at most room of them for perspective p (-1: more) */
static int pawn_pair_features(const int colour[], const int type[], const int sq[], int n, const int king[2],
                              int p, long *out, int room) {
    int x = (p ? 56 : 0) ^ (king[p] % 8 >= 4 ? 7 : 0), m = 0;
    for (int i = 0; i < n; i++) {
        if (type[i] != 0 || sq[i] < 8 || sq[i] >= 56) continue;
        for (int j = i + 1; j < n; j++) {
            if (type[j] != 0 || sq[j] < 8 || sq[j] >= 56) continue;
            int df = sq[i] % 8 - sq[j] % 8;
            if (df < -1 || df > 1) continue;
            long a = 48 * (colour[i] ^ p) + (sq[i] ^ x) - 8, b = 48 * (colour[j] ^ p) + (sq[j] ^ x) - 8;
            long hi = a > b ? a : b, lo = a > b ? b : a;
            if (m >= room) return -1;
            out[m++] = hi * (hi - 1) / 2 + lo;
        }
    }
    return m;
}""",
    active="return pawn_pair_features(colour, type, sq, n, king, p, out, 128);",
)

PP_3WIDE = FeatureSet(
    name="pp_3wide", num_inputs=NUM_INPUTS, max_active=MAX_ACTIVE, spec=SPEC,
    encode=ListEncoder(lambda boards, ids, occ, orient: [pair_entries(ids, orient)], MAX_ACTIVE, CPU_CHUNK,
                       "PP_3Wide"),
    encode_numba=functools.partial(compiled_encode, width=MAX_ACTIVE, parts=(False, True, False)), c=C,
    parts=(FeaturePart("pp_3wide", 0, NUM_INPUTS, MAX_ACTIVE, "int8", ENGINE_HASH),),
)
