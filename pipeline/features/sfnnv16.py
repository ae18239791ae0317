"""The SFNNv16 input set: Full_Threats + PP_3Wide + HalfKAv2_hm, Stockfish 19's (and nnue-pytorch's default) feature transformer input.

Indices, per perspective, in the order of the ``.nnue`` file's feature-transformer blocks:

=========================  ================  ==========  ===========  ==========  ============
part                       rows              max active  engine type  hash        factoriser
=========================  ================  ==========  ===========  ==========  ============
Full_Threats               0 .. 59,807       128         int8         0x2E6B9D04  none
PP_3Wide                   59,808 .. 64,367  128         int8         0x86F2B1DD  none
HalfKAv2_hm                64,368 .. 86,895  32          int16        0x7F234CB8  768 rows
=========================  ================  ==========  ===========  ==========  ============

(:data:`PARTS`; :data:`INT8_ROWS` and :data:`INT16_ROWS` are the two weight types' ranges, what
the trainer clamps to the int8 grid and the exporter writes as raw int8 blocks.) Each part's
formula is in its module (:mod:`.full_threats`, :mod:`.pp_3wide`, :mod:`.halfka_v2_hm`); the
HalfKAv2_hm part is the 22,528-row engine indexing (both kings on plane 10).

List: the threats, then the pawn pairs, then the HalfKAv2_hm pieces, each part in its own order
(threats by attacker then attacked square, pairs by lower then higher square, pieces by square),
then −1, in :data:`MAX_ACTIVE` = 128 + 128 + 32 = 288 slots (nnue-pytorch's composed bound).
Only the total is bounded: a board whose lists need more than 288 is refused (ValueError naming
it); a real game comes nowhere near (in our 273,470 self-play positions: at most 45 threats and
40 pawn pairs for one perspective).

**Factoriser** (nnue-pytorch's ``HalfKAv2_hm^``): threats and pawn pairs have none; each
HalfKAv2_hm row gets one of 768 virtual rows, the piece-square feature of nnue-pytorch's
12-plane training indexing: ``plane·64 + square`` for planes 0–9, 640 + square for the own king
and 704 + square for the other king. nnue-pytorch trains 24,576 rows (own and other king on
planes 10 and 11) and merges them into the engine's 22,528 on export; in each king bucket the
own king stands on one square, which the other king never occupies, so the merged rows with this
map train exactly the same weights. :meth:`FeatureSet.factors` gives −1 for the rows without a
virtual row.

**Engine hashes**: Stockfish's feature-transformer hash is
``combine_hash(0x2E6B9D04, 0x86F2B1DD, 0x7F234CB8) ^ (2·L1)``, ``h = rotl(h, 1) ^ c`` per part
(:func:`engine_ft_hash`; 0xCB685313 at L1 1,024).
"""
from __future__ import annotations

import functools

import torch

from . import full_threats, halfka_v2_hm, pp_3wide
from .full_threats import compiled_encode
from .spec import CFeature, FeaturePart, FeatureSet
from .varlist import ListEncoder, row_entries

NAME = "sfnnv16"
#: the same set, spelled out (nnue-pytorch: Full_Threats+PP_3Wide+HalfKAv2_hm^)
LONG_NAME = "full_threats+pp_3wide+halfkav2_hm"
PARTS = (
    FeaturePart("full_threats", 0, full_threats.NUM_INPUTS, full_threats.MAX_ACTIVE, "int8",
                full_threats.ENGINE_HASH),
    FeaturePart("pp_3wide", full_threats.NUM_INPUTS, pp_3wide.NUM_INPUTS, pp_3wide.MAX_ACTIVE, "int8",
                pp_3wide.ENGINE_HASH),
    FeaturePart("halfkav2_hm", full_threats.NUM_INPUTS + pp_3wide.NUM_INPUTS, halfka_v2_hm.NUM_INPUTS,
                halfka_v2_hm.MAX_ACTIVE, "int16", 0x7F234CB8, factorised=True),
)
NUM_INPUTS = PARTS[-1].stop                       # 86,896
MAX_ACTIVE = sum(p.max_active for p in PARTS)     # 288
PP_BASE, PSQ_BASE = PARTS[1].start, PARTS[2].start
#: rows whose engine weights are int8 (threats and pawn pairs) and int16 (HalfKAv2_hm)
INT8_ROWS = range(0, PSQ_BASE)
INT16_ROWS = range(PSQ_BASE, NUM_INPUTS)
#: virtual rows of the HalfKAv2_hm^ factoriser
NUM_VIRTUAL = 768
CPU_CHUNK = 512


def combine_hash(hashes) -> int:
    """Stockfish's ``combine_hash``: ``h = rotl32(h, 1) ^ c`` over the parts' hashes, from 0."""
    h = 0
    for c in hashes:
        h = ((h << 1) | (h >> 31)) & 0xFFFFFFFF
        h ^= c
    return h


def engine_ft_hash(l1: int) -> int:
    """The feature-transformer hash of a Stockfish 19 net with ``l1`` accumulator outputs."""
    return combine_hash(p.engine_hash for p in PARTS) ^ (2 * l1)


def halfka_factors() -> torch.Tensor:
    """(22,528,) int64: the HalfKAv2_hm^ virtual row (0..767) of each HalfKAv2_hm row."""
    j = torch.arange(halfka_v2_hm.NUM_INPUTS)
    bucket, r = j // halfka_v2_hm.PLANES, j % halfka_v2_hm.PLANES
    plane, sq = r // 64, r % 64
    own_sq = torch.full((32,), -1)
    for s, b in enumerate(halfka_v2_hm.KING_BUCKETS):
        if b >= 0:
            own_sq[b] = s
    king = torch.where(sq == own_sq[bucket], 640 + sq, 704 + sq)
    return torch.where(plane == 10, king, r)


def factors(n: int) -> torch.Tensor:
    """(NUM_INPUTS,) int64: −1 for the threat and pawn-pair rows, the HalfKAv2_hm^ virtual row
    for the others. Raises ValueError for another n."""
    if n != NUM_INPUTS:
        raise ValueError(f"{NAME} has {NUM_INPUTS} inputs, not {n}")
    out = torch.full((NUM_INPUTS,), -1, dtype=torch.int64)
    out[PSQ_BASE:] = halfka_factors()
    return out


def entries(boards: torch.Tensor, ids: torch.Tensor, occ: torch.Tensor, orient: torch.Tensor) -> list:
    """The three parts' flat entries (:class:`.varlist.ListEncoder`), shifted to their ranges."""
    n = boards.shape[0]
    rows, values = full_threats.threat_entries(ids, occ, orient)
    pp_rows, pp_values = pp_3wide.pair_entries(ids, orient)
    psq = torch.stack(halfka_v2_hm.HALFKAV2_HM.encode(boards)).view(2 * n, halfka_v2_hm.MAX_ACTIVE)
    psq_rows, col = row_entries(psq >= 0)
    return [(rows, values), (pp_rows, pp_values + PP_BASE), (psq_rows, psq[psq_rows, col].long() + PSQ_BASE)]


SPEC = ("SFNNv16 inputs: Full_Threats [0,59808) + PP_3Wide [59808,64368) + HalfKAv2_hm [64368,86896) "
        "(each as in its own spec); lists: threats, pawn pairs, pieces, at most 288 in all; "
        "factoriser HalfKAv2_hm^: 768 virtual rows (planes 0-9, own king 640+s, other king 704+s), "
        "none for threats and pawn pairs")
_C = CFeature(
    "FS_SFNNV16",
    support="""\
/* HalfKAv2_hm's index (Stockfish half_ka_v2_hm.h): o(x) = x ^ 56p ^ (file(k) < 4 ? 7 : 0),
 * both kings on plane 10, KB(o(k)) = 4 (7 - rank) + (7 - file) */
static long halfka_index(int c, int t, int s, int k, int p) {
    int o = (p ? 56 : 0) ^ (k % 8 < 4 ? 7 : 0), ok = k ^ o;
    int plane = t == 5 ? 10 : 2 * t + (c != p);
    return (s ^ o) + 64 * plane + 704L * (4 * (7 - ok / 8) + (7 - ok % 8));
}""",
    index='die("sfnnv16: features are not one per piece (active_features)");\nreturn -1;',
    active="""\
int m = threat_features(colour, type, sq, n, king, p, out, 288);
if (m < 0) return -1;
int q = pawn_pair_features(colour, type, sq, n, king, p, out + m, 288 - m);
if (q < 0) return -1;
for (int i = 0; i < q; i++) out[m + i] += 59808L;
m += q;
for (int i = 0; i < n; i++) {
    if (m >= 288) return -1;
    out[m++] = 64368L + halfka_index(colour[i], type[i], sq[i], king[p], p);
}
return m;""",
)


def _make(name: str) -> FeatureSet:
    return FeatureSet(name=name, num_inputs=NUM_INPUTS, max_active=MAX_ACTIVE, spec=SPEC,
                      encode=ListEncoder(entries, MAX_ACTIVE, CPU_CHUNK, NAME), family=LONG_NAME + "^",
                      factors=factors, c=_C, parts=PARTS,
                      encode_numba=functools.partial(compiled_encode, width=MAX_ACTIVE, parts=(True, True, True)))


SFNNV16 = _make(NAME)
SFNNV16_LONG = _make(LONG_NAME)
