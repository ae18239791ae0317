"""Full_Threats: one feature per attack of a pawn, knight, bishop, rook or queen on a non-king piece, Stockfish 19's threat input.

Formula (Stockfish ``src/nnue/features/full_threats.cpp``: ``init_threat_offsets``,
``make_index``, ``append_active_indices``; nnue-pytorch ``data_loader/cpp/training_data_loader.cpp``:
``threatfeaturecalc``, ``FullThreats::threat_index``, ``fill_features_sparse``). For perspective p
(0 white, 1 black) with own king on square k:

    x       = 56·p ^ (7 if file(k) ≥ 4 else 0)      orient: squares s -> s ^ x
    colours   relative to p (0: p's own piece, 1: the other side's)
    attacker  a = 5·colour + type, type P N B R Q = 0..4 (kings never attack here)
    index   = BASE[a] + (colour(attacked)·SLOTS[type] + SLOT[type][attacked type])·N[a]
              + FROM[a][from ^ x] + #{ s ∈ E(a, from ^ x) : s < to ^ x }

E(a, f) is the attack set of attacker a from square f on an empty board (an own pawn attacks
towards rank 8 in oriented squares, an enemy pawn towards rank 1); N[a] = Σ_f |E(a, f)| over
the squares a piece can stand on (pawns: ranks 2–7); FROM[a][f] = Σ_{f' < f} |E(a, f')|;
BASE[a] = Σ_{a' < a} 2·SLOTS[type a']·N[a']. Note that the mirror is the opposite of
HalfKAv2_hm's: here the own king ends on files a–d.

Which attacks count (the attack sets of the real board, sliders blocked by any piece):

===========  ============================  =====  ======
attacker     attacked (either colour)      SLOTS  N[a]
===========  ============================  =====  ======
pawn         knight 0, rook 1                  2      84
knight       P 0, N 1, B 2, R 3, Q 4           5     336
bishop       P 0, N 1, B 2, R 3                4     560
rook         P 0, N 1, B 2, R 3                4     896
queen        P 0, N 1, B 2, R 3, Q 4           5   1,456
===========  ============================  =====  ======

Kings are never attacked (nor attackers); pawn–pawn pairs are PP_3Wide's. Two pieces of the same
type attacking each other count once: the pair with ``from ^ x < to ^ x`` is left out (in
oriented squares, so which of the two counts depends on the perspective). En passant is not a
threat (the target square is empty); castling rights and Chess960 play no part. Per side
672 + 6,720 + 8,960 + 14,336 + 29,120 = 59,808 inputs, in the order own P N B R Q, enemy P N B
R Q. nnue-pytorch bounds the list at 128 (``MAX_ACTIVE_FEATURES``), Stockfish keeps threats and
pawn pairs in one list of 256; a board with more than :data:`MAX_ACTIVE` threats is refused here
(ValueError naming it; no game position comes near). A pawn on rank 1 or 8 (no legal position)
attacks nothing. No factoriser. Engine weights int8; Stockfish's hash 0x2E6B9D04.

List order: by the attacker's absolute square, then the attacked piece's, then −1.
"""
from __future__ import annotations

import functools

import torch

from .board_tensor import check_boards
from .halfka_v2_hm import HALFKAV2_HM
from .spec import CFeature, FeaturePart, FeatureSet
from .varlist import EMPTY, NUM_IDS, ListEncoder, row_entries, square_xor

NUM_INPUTS = 59_808
MAX_ACTIVE = 128
ENGINE_HASH = 0x2E6B9D04
PAWN, KNIGHT, BISHOP, ROOK, QUEEN, KING = range(6)
#: SLOT[attacker type][attacked type]: the attacked piece's slot, −1 = not a threat
SLOT = (
    (-1, 0, -1, 1, -1, -1),
    (0, 1, 2, 3, 4, -1),
    (0, 1, 2, 3, -1, -1),
    (0, 1, 2, 3, -1, -1),
    (0, 1, 2, 3, 4, -1),
)
SLOTS = tuple(sum(v >= 0 for v in row) for row in SLOT)       # per colour: 2 5 4 4 5
# rows of the CPU work: 1,792 candidate pairs a board make larger chunks fall out of cache
CPU_CHUNK = 512

_KNIGHT = ((1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2))
_DIAG = ((1, 1), (1, -1), (-1, 1), (-1, -1))
_ORTH = ((1, 0), (-1, 0), (0, 1), (0, -1))


def _on(f: int, r: int) -> bool:
    return 0 <= f < 8 and 0 <= r < 8


def empty_attacks(ptype: int, colour: int, sq: int) -> list[int]:
    """Squares attacked by a piece of ``ptype`` and ``colour`` (0: moving towards rank 8) on
    ``sq`` of an empty board, ascending. Pawns on rank 1 or 8 attack nothing here."""
    f, r = sq % 8, sq // 8
    if ptype == PAWN:
        if r in (0, 7):
            return []
        dr = 1 if colour == 0 else -1
        return sorted(8 * (r + dr) + f + df for df in (-1, 1) if _on(f + df, r + dr))
    if ptype == KNIGHT:
        return sorted(8 * (r + dr) + f + df for df, dr in _KNIGHT if _on(f + df, r + dr))
    dirs = {BISHOP: _DIAG, ROOK: _ORTH, QUEEN: _DIAG + _ORTH}[ptype]
    out = []
    for df, dr in dirs:
        ff, rr = f + df, r + dr
        while _on(ff, rr):
            out.append(8 * rr + ff)
            ff, rr = ff + df, rr + dr
    return sorted(out)


@functools.lru_cache(maxsize=1)
def formula() -> dict:
    """The index formula's tables (plain lists): ``attacks[a][f]`` (E(a, f)), ``n[a]``,
    ``from_offset[a][f]``, ``base[a]``, for the relative attackers a = 5·colour + type."""
    attacks = [[empty_attacks(a % 5, a // 5, f) for f in range(64)] for a in range(10)]
    n = [sum(len(x) for x in attacks[a]) for a in range(10)]
    from_offset = [[sum(len(x) for x in attacks[a][:f]) for f in range(64)] for a in range(10)]
    base, total = [], 0
    for a in range(10):
        base.append(total)
        total += 2 * SLOTS[a % 5] * n[a]
    assert total == NUM_INPUTS, total
    return {"attacks": attacks, "n": n, "from_offset": from_offset, "base": base}


def threat_index(a: int, fo: int, target: int, to: int) -> int:
    """The index of relative attacker ``a`` (5·colour + type) on oriented square ``fo`` attacking
    relative piece ``target`` (5·colour + type) on oriented square ``to``, or −1 when that pair
    is not a feature (the target type, a king, or the same-type pair counted the other way)."""
    t, tt = a % 5, target % 5
    if target >= 10 or SLOT[t][tt] < 0 or (t == tt and fo < to):
        return -1
    tab = formula()
    e = tab["attacks"][a][fo]
    if to not in e:
        raise ValueError(f"attacker {a} on {fo} does not attack {to}")
    return (tab["base"][a] + (target // 5 * SLOTS[t] + SLOT[t][tt]) * tab["n"][a] + tab["from_offset"][a][fo]
            + sum(s < to for s in e))


@functools.lru_cache(maxsize=1)
def numba_tables() -> tuple[torch.Tensor, torch.Tensor]:
    """The decomposed formula for the compiled encoder: ``part`` (10, 64, 64) int32,
    ``BASE[a] + FROM[a][f] + #{s ∈ E(a, f): s < t}``, and ``slot`` (10, 10) int32, the attacked
    piece's term ``(colour·SLOTS + SLOT)·N[a]`` (−1: not a target of a)."""
    tab = formula()
    part = [[[0] * 64 for _ in range(64)] for _ in range(10)]
    slot = [[-1] * 10 for _ in range(10)]
    for a in range(10):
        for f in range(64):
            e, row, below = set(tab["attacks"][a][f]), part[a][f], 0
            for t in range(64):
                row[t] = tab["base"][a] + tab["from_offset"][a][f] + below
                below += t in e
        for target in range(10):
            s = SLOT[a % 5][target % 5]
            if s >= 0:
                slot[a][target] = (target // 5 * SLOTS[a % 5] + s) * tab["n"][a]
    return torch.tensor(part, dtype=torch.int32), torch.tensor(slot, dtype=torch.int32)


@functools.lru_cache(maxsize=1)
def _pair_tables() -> dict[str, torch.Tensor]:
    """CPU tables of the torch encoder. The candidate pairs (from, to): every square a queen or
    a knight on ``from`` reaches on an empty board, ordered by (from, to): 1,792 pairs.
    ``between``: the squares strictly between (a slider's path), as an int64 bitboard.
    ``valid`` (pairs·13·13) bool: absolute piece id A on ``from`` attacks id B on ``to`` when
    the path is clear and B is one of A's targets. ``index`` (4·pairs·13·13) int32: the feature
    of (orientation o, pair, A, B), −1 when none."""
    pfrom, pto, between, kind = [], [], [], []
    for f in range(64):
        knight = set(empty_attacks(KNIGHT, 0, f))
        for t in sorted(knight | set(empty_attacks(QUEEN, 0, f))):
            pfrom.append(f)
            pto.append(t)
            df, dr = t % 8 - f % 8, t // 8 - f // 8
            if t in knight:
                kind.append(KNIGHT)
                between.append(0)
                continue
            kind.append(BISHOP if df and dr else ROOK)
            sf, sr = (df > 0) - (df < 0), (dr > 0) - (dr < 0)
            m, ff, rr = 0, f % 8 + sf, f // 8 + sr
            while 8 * rr + ff != t:
                m |= 1 << (8 * rr + ff)
                ff, rr = ff + sf, rr + sr
            between.append(m - (1 << 64) if m >= 1 << 63 else m)
    npairs = len(pfrom)
    # geometry: can a piece of id A on `from` attack `to` along this pair (path aside)?
    geo = torch.zeros((npairs, NUM_IDS), dtype=torch.bool)
    for i, (f, t, k) in enumerate(zip(pfrom, pto, kind)):
        for pid in range(12):
            c, ptype = divmod(pid, 6)
            if ptype == PAWN:
                ok = t in empty_attacks(PAWN, c, f)
            elif ptype == QUEEN:
                ok = k != KNIGHT
            else:
                ok = k == ptype
            geo[i, pid] = ok
    ids = torch.arange(NUM_IDS)
    a_t, b_t = ids % 6, ids % 6
    target_ok = torch.tensor([[a < 5 and b < 5 and SLOT[a][b] >= 0 for b in range(6)] for a in range(6)])
    pair_ok = target_ok[a_t.clamp(max=5)][:, b_t.clamp(max=5)]
    pair_ok &= (ids < EMPTY).view(-1, 1) & (ids < EMPTY).view(1, -1)                # (13, 13)
    valid = geo.view(npairs, NUM_IDS, 1) & pair_ok.view(1, NUM_IDS, NUM_IDS)

    # the index of every valid (o, pair, A, B), from the formula's tables
    part, slot = numba_tables()
    o = torch.arange(4).view(4, 1, 1, 1)
    p, x = o >> 1, square_xor(o)
    f_o = torch.tensor(pfrom).view(1, -1, 1, 1) ^ x
    t_o = torch.tensor(pto).view(1, -1, 1, 1) ^ x
    a_id, b_id = ids.view(1, 1, -1, 1), ids.view(1, 1, 1, -1)
    a_rel = (5 * ((a_id // 6) ^ p) + a_id % 6).clamp(max=9)
    b_rel = (5 * ((b_id // 6) ^ p) + b_id % 6).clamp(max=9)
    same_type = (a_id % 6) == (b_id % 6)
    idx = part[a_rel, f_o, t_o] + slot[a_rel, b_rel]
    keep = valid.unsqueeze(0) & ~(same_type & (f_o < t_o))
    index = torch.where(keep, idx, -1).to(torch.int32)
    if int(index.max()) >= NUM_INPUTS or bool((keep & (idx < 0)).any()):
        raise AssertionError("threat table out of range")
    return {"from": torch.tensor(pfrom), "to": torch.tensor(pto),
            "key": torch.arange(npairs, dtype=torch.int32) * NUM_IDS * NUM_IDS,
            "between": torch.tensor(between, dtype=torch.int64), "valid": valid.reshape(-1),
            "index": index.reshape(-1)}


_DEVICE_TABLES: dict[torch.device, dict[str, torch.Tensor]] = {}


def _tables(device: torch.device) -> dict[str, torch.Tensor]:
    t = _DEVICE_TABLES.get(device)
    if t is None:
        t = _DEVICE_TABLES[device] = {k: v.to(device) for k, v in _pair_tables().items()}
    return t


def threat_entries(ids: torch.Tensor, occ: torch.Tensor, orient: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The threats of a batch as flat entries for :func:`.varlist.assemble`: ids (B, 64) and
    occ (B,) from :func:`.varlist.piece_ids`, orient (2, B) from :func:`.varlist.orientation`
    -> (rows ``q·B + board``, indices), (M,) int64 each, in list order."""
    t = _tables(ids.device)
    n = ids.shape[0]
    # (gather with an expanded index and logical_not: 3-5x faster on CPU than index_select
    # along dim 1 and `== 0`, measured on torch 2.13)
    a = torch.gather(ids, 1, t["from"].expand(n, -1)).to(torch.int32)
    key = torch.gather(ids, 1, t["to"].expand(n, -1)).to(torch.int32).add_(t["key"]).add_(a.mul_(NUM_IDS))
    ok = t["valid"].index_select(0, key.view(-1)).view(key.shape)
    ok &= (occ.view(-1, 1) & t["between"]).logical_not()              # the slider's path is clear
    board, pair = row_entries(ok)                     # both members of mutual same-type pairs
    k = key[board, pair]
    rows, values = [], []
    for q in (0, 1):
        idx = t["index"].index_select(0, orient[q, board] * (t["from"].shape[0] * NUM_IDS * NUM_IDS) + k)
        keep = idx >= 0
        rows.append(board[keep] + q * n)
        values.append(idx[keep])
    return torch.cat(rows), torch.cat(values)


def compiled_encode(boards: torch.Tensor, width: int, parts: tuple[bool, bool, bool]) -> tuple[torch.Tensor, torch.Tensor]:
    """The compiled encoder (:func:`nnue.pipeline.compiled.threats.encode_set`, which loads
    numba) of the parts ``(threats, pawn pairs, HalfKAv2_hm)`` that are on, with this package's
    tables: (B, 32) uint8 CPU boards -> (stm, nstm), each (B, width) int32, the result of the
    torch encoder of the same parts (each set's ``encode_numba``)."""
    from nnue.pipeline.compiled import threats

    check_boards(boards)
    part, slot = numba_tables()
    return threats.encode_set(boards, width, parts, part.numpy(), slot.numpy(),
                              HALFKAV2_HM.encode.table_cpu.numpy())


SPEC = ("Full_Threats (Stockfish full_threats.cpp, hash 0x2E6B9D04): x=56p^(file(k)>=4?7:0); "
        "attacker a=5*rel_colour+type (P N B R Q); attacked non-king; pawn->N,R; N,Q->P,N,B,R,Q; "
        "B,R->P,N,B,R; same type counted once (from^x > to^x); "
        "index=BASE[a]+(rel_colour(attacked)*SLOTS+SLOT)*N[a]+FROM[a][from^x]+#(E(a,from^x)<to^x); "
        "E: empty-board attacks, pawns on ranks 2-7; stm first; order (from, to); at most 128")

# The C reference's Full_Threats, written from Stockfish's full_threats.cpp: attacks walked square
# by square on the board, the offsets counted on an empty board at first use.
C = CFeature(
    enum="FS_FULL_THREATS",
    index='die("full_threats: features are not one per piece (active_features)");\nreturn -1;',
    support="""\
/* Full_Threats (Stockfish 19 full_threats.cpp). Relative attacker a = 5 * colour + type (colour
 * 0: the perspective's own, type P N B R Q = 0..4); THR_N[a]: its attack squares over all
 * from-squares on an empty board (pawns: ranks 2-7), THR_FROM[a][s]: those of the squares below
 * s, THR_BASE[a]: the rows of the attackers before a (2 * targets per colour * THR_N). */
static long THR_BASE[10], THR_N[10], THR_FROM[10][64];
static int THR_READY;
static const int THR_SLOTS[5] = {2, 5, 4, 4, 5};

/* squares attacked by type t (0..4) of colour c (0 moves towards rank 8) from s, ascending, into
 * out; occ: occupied squares (NULL: an empty board), sliders stop at the first one */
static int thr_attacks(int t, int c, int s, const int *occ, int *out) {
    static const int knight[8][2] = {{1, 2}, {2, 1}, {2, -1}, {1, -2}, {-1, -2}, {-2, -1}, {-2, 1}, {-1, 2}};
    static const int dirs[8][2] = {{1, 1}, {1, -1}, {-1, 1}, {-1, -1}, {1, 0}, {-1, 0}, {0, 1}, {0, -1}};
    int f = s % 8, r = s / 8, mark[64] = {0}, m = 0;
    if (t == 0) {
        int dr = c == 0 ? 1 : -1;
        if (r == 0 || r == 7) return 0;
        for (int df = -1; df <= 1; df += 2)
            if (f + df >= 0 && f + df < 8) mark[8 * (r + dr) + f + df] = 1;
    } else if (t == 1) {
        for (int i = 0; i < 8; i++) {
            int ff = f + knight[i][0], rr = r + knight[i][1];
            if (ff >= 0 && ff < 8 && rr >= 0 && rr < 8) mark[8 * rr + ff] = 1;
        }
    } else {
        int d0 = t == 3 ? 4 : 0, d1 = t == 2 ? 4 : 8;
        for (int d = d0; d < d1; d++) {
            int ff = f + dirs[d][0], rr = r + dirs[d][1];
            while (ff >= 0 && ff < 8 && rr >= 0 && rr < 8) {
                mark[8 * rr + ff] = 1;
                if (occ && occ[8 * rr + ff]) break;
                ff += dirs[d][0];
                rr += dirs[d][1];
            }
        }
    }
    for (int x = 0; x < 64; x++)
        if (mark[x]) out[m++] = x;
    return m;
}

static void thr_init(void) {
    long total = 0;
    int e[64];
    for (int a = 0; a < 10; a++) {
        long cum = 0;
        THR_BASE[a] = total;
        for (int s = 0; s < 64; s++) {
            THR_FROM[a][s] = cum;
            cum += thr_attacks(a % 5, a / 5, s, NULL, e);
        }
        THR_N[a] = cum;
        total += 2L * THR_SLOTS[a % 5] * cum;
    }
    if (total != 59808) die("internal error: Full_Threats has 59808 inputs");
    THR_READY = 1;
}

/* slot of an attacked type tt for attacker type t, -1: not a threat (kings never are) */
static int thr_slot(int t, int tt) {
    if (tt == 5) return -1;
    if (t == 0) return tt == 1 ? 0 : tt == 3 ? 1 : -1;
    if (t == 2 || t == 3) return tt <= 3 ? tt : -1;
    return tt;
}

/* the Full_Threats of perspective p, at most room of them (-1: more) */
static int threat_features(const int colour[], const int type[], const int sq[], int n, const int king[2],
                           int p, long *out, int room) {
    int at[64], occ[64] = {0}, e[64], eo[64], m = 0;
    if (!THR_READY) thr_init();
    for (int x = 0; x < 64; x++) at[x] = -1;
    for (int i = 0; i < n; i++) {
        at[sq[i]] = i;
        occ[sq[i]] = 1;
    }
    int x = (p ? 56 : 0) ^ (king[p] % 8 >= 4 ? 7 : 0);
    for (int i = 0; i < n; i++) {
        int t = type[i];
        if (t == 5) continue;
        int ne = thr_attacks(t, colour[i], sq[i], occ, e);
        int a = 5 * (colour[i] ^ p) + t, fo = sq[i] ^ x;
        for (int q = 0; q < ne; q++) {
            int j = at[e[q]];
            if (j < 0) continue;
            int slot = thr_slot(t, type[j]), to = e[q] ^ x;
            if (slot < 0 || (type[j] == t && fo < to)) continue;
            int no = thr_attacks(t, a / 5, fo, NULL, eo), below = 0;
            for (int y = 0; y < no; y++) below += eo[y] < to;
            if (m >= room) return -1;
            out[m++] = THR_BASE[a] + ((colour[j] ^ p) * THR_SLOTS[t] + slot) * THR_N[a] + THR_FROM[a][fo] + below;
        }
    }
    return m;
}""",
    active="return threat_features(colour, type, sq, n, king, p, out, 128);",
)

FULL_THREATS = FeatureSet(
    name="full_threats", num_inputs=NUM_INPUTS, max_active=MAX_ACTIVE, spec=SPEC,
    encode=ListEncoder(lambda boards, ids, occ, orient: [threat_entries(ids, occ, orient)], MAX_ACTIVE, CPU_CHUNK,
                       "Full_Threats"),
    encode_numba=functools.partial(compiled_encode, width=MAX_ACTIVE, parts=(True, False, False)), c=C,
    parts=(FeaturePart("full_threats", 0, NUM_INPUTS, MAX_ACTIVE, "int8", ENGINE_HASH),),
)
