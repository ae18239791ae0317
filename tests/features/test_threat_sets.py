"""Stockfish 19's threat inputs (full_threats, pp_3wide, sfnnv16): sizes, parts and engine hashes,
indices computed by hand, the compiled encoder against the torch one, the C reference, and the
golden fixture made with nnue-pytorch's C++ loader (tests/data/features, checked in every clone),
with the coverage of every attacker/attacked pair counted and asserted on it. The generic checks
(python-chess reference on real and Chess960 positions, symmetries, chunking, king errors) are in
test_feature_sets.py; the live loader in test_threats_nnue_pytorch.py."""
from __future__ import annotations

import shutil
import subprocess

import chess
import numpy as np
import pytest
import torch

from nnue.pipeline.batch import to_sparse_batch
from nnue.pipeline.board import pack_fen
from nnue.pipeline.features import factor_map, full_threats, get_feature_set, parse_output_buckets, pp_3wide, sfnnv16
from nnue.pipeline.features.varlist import assemble
from tests.features import npt_loader
from tests.features.feature_reference import REFERENCES, THREAT_TARGETS

SETS = ("full_threats", "pp_3wide", "sfnnv16")


def packed(*fens: str) -> torch.Tensor:
    return torch.tensor([list(pack_fen(f)) for f in fens], dtype=torch.uint8)


def lists(name: str, fen: str, numba: bool = False) -> tuple[list[int], list[int]]:
    fs = get_feature_set(name)
    stm, nstm = (fs.encode_numba if numba else fs.encode)(packed(fen))
    return [v for v in stm[0].tolist() if v >= 0], [v for v in nstm[0].tolist() if v >= 0]


@pytest.fixture(scope="module")
def fixture_positions():
    """The fixture's 17,264 positions (the shipped self-play, Chess960 included) as FENs and
    packed boards, with the loader's digests and part counts."""
    fens = npt_loader.fixture_fens()
    boards = torch.from_numpy(np.frombuffer(b"".join(pack_fen(f) for f in fens), dtype=np.uint8).reshape(-1, 32).copy())
    return fens, boards, npt_loader.read_fixture()


def white_black(fens, stm, nstm):
    """Our stm/nstm lists -> per position (white, black) index arrays."""
    out = []
    for i, f in enumerate(fens):
        s, n = stm[i][stm[i] >= 0].numpy(), nstm[i][nstm[i] >= 0].numpy()
        out.append((n, s) if f.split()[1] == "b" else (s, n))
    return out


# --- sizes, parts, hashes -----------------------------------------------------------------

def test_sizes_parts_and_names():
    fs = get_feature_set("sfnnv16")
    assert (fs.num_inputs, fs.max_active) == (59808 + 4560 + 22528, 128 + 128 + 32) == (86896, 288)
    assert [(p.name, p.start, p.size, p.max_active, p.weight_dtype, p.factorised) for p in fs.parts] == [
        ("full_threats", 0, 59808, 128, "int8", False), ("pp_3wide", 59808, 4560, 128, "int8", False),
        ("halfkav2_hm", 64368, 22528, 32, "int16", True)]
    assert sfnnv16.INT8_ROWS == range(0, 64368) and sfnnv16.INT16_ROWS == range(64368, 86896)
    long = get_feature_set("full_threats+pp_3wide+halfkav2_hm")
    assert long.hash == fs.hash and long.name != fs.name and get_feature_set(long.name) is long
    assert get_feature_set("full_threats").num_inputs == 59808 and get_feature_set("pp_3wide").num_inputs == 4560
    assert len({get_feature_set(n).hash for n in (*SETS, "halfkav2_hm")}) == 4
    # per attacker (own + enemy): the attack squares of each piece type over the board, x the target slots
    tab = full_threats.formula()
    assert tab["n"][:5] == [84, 336, 560, 896, 1456] and tab["n"][5:] == tab["n"][:5]
    assert [2 * 2 * full_threats.SLOTS[t] * tab["n"][t] for t in range(5)] == [672, 6720, 8960, 14336, 29120]


def test_engine_hashes():
    """Stockfish's FT hash is the rotate-xor of the parts' hashes, xor 2·L1 (0xCB685313 at 1,024);
    the whole file's hash adds the layer stacks' 0x63337116 (SF19's nn-1a298aa575a0: 0xA85B2205)."""
    hashes = [p.engine_hash for p in sfnnv16.PARTS]
    assert hashes == [0x2E6B9D04, 0x86F2B1DD, 0x7F234CB8]
    assert (full_threats.ENGINE_HASH, pp_3wide.ENGINE_HASH) == (0x2E6B9D04, 0x86F2B1DD)
    h = 0
    for c in hashes:  # written out again: h = rotl32(h, 1) ^ c
        h = (((h << 1) & 0xFFFFFFFF) | (h >> 31)) ^ c
    assert sfnnv16.combine_hash(hashes) == h
    assert sfnnv16.engine_ft_hash(1024) == h ^ 2048 == 0xCB685313
    assert sfnnv16.engine_ft_hash(1024) ^ 0x63337116 == 0xA85B2205
    assert sfnnv16.engine_ft_hash(256) != sfnnv16.engine_ft_hash(1024)


# --- golden indices, by hand from the formula ------------------------------------------------
# Knight attack counts per square, rank 1 first: 2 3 4 4 4 4 3 2 | 3 4 6 6 6 6 4 3 | 4 6 8 8 8 8 6 4 (ranks
# 3-6 alike) ..., so FROM[knight][s] = 26 (rank 1) + 38 (rank 2) + 52 a rank after. BASE: own P 0,
# own N 336, ..., enemy P 29904, enemy N 30240 (= 336 + 3360 + 4480 + 7168 + 14560 + 336).
GOLDEN = {
    # Ne3 attacks rd5 (white to move). White (king e1 -> x = 7): own knight from d3 (19) onto
    # e5 (36), enemy rook slot 5 + 3: 336 + 8·336 + FROM[19] (26 + 38 + 4 + 6 + 8 = 82) + 7 of
    # d3's knight squares below e5 (c1 e1 b2 f2 b4 f4 c5) = 3113. Black (king e8 -> x = 63):
    # enemy knight from d6 (43) onto e4 (28), own rook slot 3: 30240 + 3·336 + (220 + 4 + 6 + 8)
    # + 1 (c4) = 31487.
    ("full_threats", "4k3/8/8/3r4/8/4N3/8/4K3 w - - 0 1"): ([3113], [31487]),
    # Nd4 and nf5 attack each other: the same type counts once, where from^x > to^x. White (x = 7):
    # Nd4 from e4 (28) onto c5 (34) is left out; nf5 from c5 (34) onto e4 (28) stays: 30240 +
    # 1·336 + (168 + 4 + 6) + 3 (b3 d3 a4) = 30757. Black (x = 63): Nd4 from e5 (36) onto c4
    # (26) stays: 30240 + 336 + (168 + 4 + 6 + 8 + 8) + 2 (d3 f3) = 30772.
    ("full_threats", "4k3/8/8/5n2/3N4/8/8/4K3 w - - 0 1"): ([30757], [30772]),
    # Pd2 Pe3 / pe4 (white to move): pairs (d2,e3) (d2,e4) (e3,e4). White (x = 7): ids d2 -> 12-8
    # = 4, e3 -> 19-8 = 11, pe4 -> 48+27-8 = 67: 11·10/2+4 = 59, 67·66/2+4 = 2215, 2211+11 = 2222.
    # Black (x = 63): d2 -> 48+52-8 = 92, e3 -> 48+43-8 = 83, pe4 -> 35-8 = 27: 92·91/2+83 =
    # 4269, 4186+27 = 4213, 83·82/2+27 = 3430. No threats (pawns attack only knights and rooks).
    ("pp_3wide", "4k3/8/8/8/4p3/4P3/3P4/4K3 w - - 0 1"): ([59, 2215, 2222], [4269, 4213, 3430]),
    ("full_threats", "4k3/8/8/8/4p3/4P3/3P4/4K3 w - - 0 1"): ([], []),
    # the same pawns with black to move: stm is black
    ("pp_3wide", "4k3/8/8/8/4p3/4P3/3P4/4K3 b - - 0 1"): ([4269, 4213, 3430], [59, 2215, 2222]),
    # Pd4 attacks ne5 but not bc5 (pawns attack knights and rooks only); bc5 attacks Pd4.
    # White (king h1 -> x = 7): own pawn from e4 (28) onto d5 (35), enemy knight: (1·2 + 0)·84
    # + FROM[pawn][28] (rank 2: 14, rank 3: 14, a4-d4: 1+2+2+2) + 0 = 168 + 35 = 203; enemy
    # bishop (base 29904 + 336 + 3360 = 33600) from f5 (37) onto e4 (28), own pawn slot 0:
    # FROM[bishop][37] (56 + 68 + 76 + 80 + 7+9+11+13+13 = 333) + 4 (b1 c2 d3 h3) = 33937.
    ("full_threats", "4k3/8/8/2b1n3/3P4/8/8/7K w - - 0 1"): ([203, 33937], None),
}


@pytest.mark.parametrize("key", sorted(GOLDEN, key=str))
def test_golden_by_hand(key):
    name, fen = key
    want_stm, want_nstm = GOLDEN[key]
    for numba in (False, True):
        stm, nstm = lists(name, fen, numba)
        assert stm == want_stm, (name, fen, numba)
        if want_nstm is not None:
            assert nstm == want_nstm, (name, fen, numba)
    board = chess.Board(fen)
    assert list(REFERENCES[name](board)[0]) == want_stm


def test_sfnnv16_list_is_the_parts_shifted():
    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
    parts = [lists(n, fen) for n in ("full_threats", "pp_3wide", "halfkav2_hm")]
    for q in (0, 1):
        want = parts[0][q] + [59808 + i for i in parts[1][q]] + [64368 + i for i in parts[2][q]]
        assert lists("sfnnv16", fen)[q] == want == lists("sfnnv16", fen, True)[q]


def test_en_passant_and_castling_rights_do_not_matter():
    """An en-passant capture is no threat (the square is empty); castling rights (and the
    Chess960 castling-rook code) change nothing."""
    base = "4k3/8/8/3pP3/8/8/8/R3K2R w {} {} 0 1"
    a = lists("sfnnv16", base.format("-", "-"))
    assert a == lists("sfnnv16", base.format("-", "d6")) == lists("sfnnv16", base.format("KQ", "d6"))
    assert a == lists("sfnnv16", base.format("KQ", "-"), numba=True)


# --- the compiled path, the C reference, the fixture ----------------------------------------

@pytest.mark.parametrize("name", SETS)
def test_numba_equals_torch_on_shipped_positions(name, fixture_positions):
    _, boards, _ = fixture_positions
    fs = get_feature_set(name)
    stm, nstm = fs.encode(boards)
    stm2, nstm2 = fs.encode_numba(boards)
    assert torch.equal(stm, stm2) and torch.equal(nstm, nstm2)
    e_stm, e_nstm = fs.encode_numba(boards[:0])
    assert e_stm.shape == (0, fs.max_active) and e_stm.dtype == torch.int32


def _pair_coverage(pairs) -> dict:
    """(white, black) lists -> {(perspective, attacker, attacked): count} over the threat part,
    attacker/attacked as (own?, piece type) of that perspective, decoded from the index ranges."""
    tab = full_threats.formula()
    seen: dict = {}
    bounds = [tab["base"][a] for a in range(10)] + [59808]
    for wb in pairs:
        for persp, lst in enumerate(wb):
            for v in lst[lst < 59808]:
                a = int(np.searchsorted(bounds, v, side="right")) - 1
                slot = (int(v) - tab["base"][a]) // tab["n"][a]
                per = full_threats.SLOTS[a % 5]
                target = (slot // per, THREAT_TARGETS[a % 5 + 1][slot % per])
                key = (persp, (a // 5, a % 5 + 1), target)
                seen[key] = seen.get(key, 0) + 1
    return seen


def test_fixture_matches_ours_and_covers_every_pair(fixture_positions):
    """Our torch and compiled encoders against the lists of nnue-pytorch's loader, by digest, on
    17,268 positions; they exercise every attacker/attacked pair (80 kinds: own or enemy attacker
    of each type, own or enemy target of each of its types) from both perspectives: the games
    all but two (a bishop attacking a bishop of its own colour, which needs an under-promotion),
    which the four constructed positions at the end add. Chess960 castling-rook codes included."""
    fens, boards, fix = fixture_positions
    assert fix["meta"]["positions"] == len(fens) >= 10_000 and fix["meta"]["nnue_pytorch_commit"] == "9f72946"
    games = len(fens) - len(npt_loader.FIXTURE_EXTRA)
    fs = get_feature_set("sfnnv16")
    for enc in (fs.encode, fs.encode_numba):
        ours = white_black(fens, *enc(boards))
        dig, cnt = npt_loader.summarise(ours)
        bad = np.nonzero((dig != fix["digest"]).any(1))[0]
        assert bad.size == 0, f"{bad.size} positions differ from nnue-pytorch's, first {fens[bad[0]]}"
        assert np.array_equal(cnt, fix["counts"])
    in_games = _pair_coverage(ours[:games])
    seen = _pair_coverage(ours)
    kinds = {(own, pt, target) for own in (0, 1) for pt in THREAT_TARGETS for target in
             [(c, t) for c in (0, 1) for t in THREAT_TARGETS[pt]]}
    assert len(kinds) == 80
    for persp in (0, 1):
        missing = sorted(k for k in kinds if (persp, k[:2], k[2]) not in seen)
        assert not missing, f"perspective {persp}: no position with {missing}"
        same_colour_bishops = {(own, 3, (own, 3)) for own in (0, 1)}
        assert sorted(k for k in kinds if (persp, k[:2], k[2]) not in in_games) == sorted(same_colour_bishops)
    counts = fix["counts"].astype(int)
    assert counts[:, :, 1].max() > 0 and counts[:, :, 0].max() <= 128 and counts.sum(2).max() <= 288
    c960 = boards[games - 4586:games, 8:24]
    assert int(((c960 & 7) == 6).sum() + ((c960 >> 4 & 7) == 6).sum()) > 1000  # castling rooks (nibble 6)


@pytest.fixture(scope="module")
def c_eval(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not available")
    from tests.cref import compile_c_eval

    return compile_c_eval(tmp_path_factory.mktemp("cthreats"))


def run_c_lists(exe, name: str, fens: list[str]) -> list:
    out = subprocess.run([str(exe), "--list-features", name], input="".join(f + "\n" for f in fens),
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == len(fens)
    res = []
    for line in out:
        if line == "overflow":
            res.append(None)
            continue
        s, _, n = line.partition("|")
        res.append((np.array(s.split(), dtype=np.int64), np.array(n.split(), dtype=np.int64)))
    return res


def test_c_reference_matches_the_fixture(c_eval, fixture_positions):
    """The C reference (written from Stockfish's sources) gives nnue-pytorch's lists on all
    17,264 positions, and each part alone equals our encoder on every 8th."""
    fens, boards, fix = fixture_positions
    c = run_c_lists(c_eval, "sfnnv16", fens)
    wb = [(n, s) if f.split()[1] == "b" else (s, n) for f, (s, n) in zip(fens, c)]
    dig, cnt = npt_loader.summarise(wb)
    assert np.array_equal(dig, fix["digest"]) and np.array_equal(cnt, fix["counts"])
    few = slice(None, None, 8)
    for name in ("full_threats", "pp_3wide"):
        stm, nstm = get_feature_set(name).encode(boards[few])
        for i, (cs, cn) in enumerate(run_c_lists(c_eval, name, fens[few])):
            assert sorted(cs.tolist()) == sorted(stm[i][stm[i] >= 0].tolist()), (name, fens[few][i])
            assert sorted(cn.tolist()) == sorted(nstm[i][nstm[i] >= 0].tolist()), (name, fens[few][i])


# --- refusals ------------------------------------------------------------------------------

#: 137 threats for one side (a hill-climbed board, not a chess position): over Full_Threats' 128,
#: within sfnnv16's 288
MANY_THREATS = "2R4k/1Q1qnQ2/qnQnq1R1/nqNQnQ2/qNqnqn2/1QnQnq2/2R1q3/K7 w - - 0 1"
#: 30 pawns on five files: 219 pairs, over PP_3Wide's 128 (not a chess position either)
MANY_PAIRS = "4k3/1PPPPP2/1ppppp2/1PPPPP2/1ppppp2/1PPPPP2/1ppppp2/4K3 w - - 0 1"


def test_too_many_active_features_are_refused(c_eval):
    start = chess.STARTING_FEN
    for name, fen in (("full_threats", MANY_THREATS), ("pp_3wide", MANY_PAIRS)):
        fs = get_feature_set(name)
        for enc in (fs.encode, fs.encode_numba):
            with pytest.raises(ValueError, match="board 1: more than 128 active"):
                enc(packed(start, fen))
        assert run_c_lists(c_eval, name, [start, fen])[1] is None
    fs = get_feature_set("sfnnv16")
    stm, nstm = fs.encode(packed(MANY_THREATS))
    assert max(int((stm[0] >= 0).sum()), int((nstm[0] >= 0).sum())) == 137 + 32  # and no pawns
    assert torch.equal(stm, fs.encode_numba(packed(MANY_THREATS))[0])
    c = run_c_lists(c_eval, "sfnnv16", [MANY_THREATS])[0]
    assert sorted(c[0].tolist()) == sorted(stm[0][stm[0] >= 0].tolist())
    # the layout refuses any row over its width (sfnnv16's 288 cannot be reached with 32 pieces)
    rows = torch.tensor([0, 0, 0, 3])
    with pytest.raises(ValueError, match="board 0: more than 2 active"):
        assemble([(rows, torch.arange(4))], 2, 2, "x")
    out = assemble([(rows[:2], torch.tensor([5, 6])), (rows[2:], torch.tensor([7, 8]))], 2, 3, "x")
    assert out.tolist() == [[[5, 6, 7], [-1, -1, -1]], [[-1, -1, -1], [8, -1, -1]]]


@pytest.mark.parametrize("name", SETS)
def test_bad_boards_are_refused_by_both_paths(name):
    fs = get_feature_set(name)
    for enc in (fs.encode, fs.encode_numba):
        with pytest.raises(ValueError, match="board 1"):
            enc(packed(chess.STARTING_FEN, "8/8/8/8/8/8/8/K7 w - - 0 1"))
        with pytest.raises(ValueError):
            enc(torch.zeros((2, 31), dtype=torch.uint8))
    bad = packed(chess.STARTING_FEN, chess.STARTING_FEN)
    bad[1, 8] = (bad[1, 8] & 0xF0) | 7  # an unused piece code
    with pytest.raises(ValueError, match="board 1"):
        fs.encode_numba(bad)
    with pytest.raises(ValueError, match="board 1"):
        fs.encode(bad)


# --- factoriser and the training path --------------------------------------------------------

def _npt_halfka_virtual(board: chess.Board, persp: bool) -> list[int]:
    """nnue-pytorch's HalfKAv2_hm^ virtual row of each piece: its 12-plane training index mod 768
    (model/modules/features/halfka_v2_hm.py: own king plane 10, the other king plane 11)."""
    ksq = board.king(persp)
    x = (7 if chess.square_file(ksq) < 4 else 0) ^ (0 if persp else 56)
    return sorted(((p.piece_type - 1) * 2 + (p.color != persp)) * 64 + (sq ^ x)
                  for sq, p in board.piece_map().items())


def test_halfka_factoriser_is_nnue_pytorchs(fixture_positions):
    fens, boards, _ = fixture_positions
    f = sfnnv16.factors(86896)
    assert f.shape == (86896,) and bool((f[:64368] == -1).all())
    v = f[64368:]
    assert int(v.min()) == 0 and int(v.max()) == 767 and len(torch.unique(v)) == 704 + 32
    assert torch.equal(factor_map("sfnnv16", 86896, partial=True), f)
    with pytest.raises(ValueError, match="factorises only part"):
        factor_map("sfnnv16", 86896)
    with pytest.raises(ValueError):
        sfnnv16.factors(22528)
    stm, nstm = get_feature_set("sfnnv16").encode(boards[::40])
    for i, fen in enumerate(fens[::40]):
        board = chess.Board(fen)
        for lst, persp in ((stm[i], board.turn), (nstm[i], not board.turn)):
            ours = sorted(f[lst[lst >= 64368].long()].tolist())
            assert ours == _npt_halfka_virtual(board, persp), fen


def test_training_batches_use_the_compiled_path(fixture_positions):
    _, boards, _ = fixture_positions
    fs = get_feature_set("sfnnv16")
    compiled, calls = fs.encode_numba, []

    def spy(b):
        calls.append(b.shape[0])
        return compiled(b)

    object.__setattr__(fs, "encode_numba", spy)  # a frozen dataclass: restored below
    try:
        batch = {"boards": boards[:300], "score": torch.zeros(300), "result": torch.zeros(300)}
        sb = to_sparse_batch(batch, fs, parse_output_buckets("SFPieceCount<8>"))
    finally:
        object.__setattr__(fs, "encode_numba", compiled)
    assert calls == [300]
    stm, nstm = fs.encode(boards[:300])
    assert torch.equal(sb.stm_indices, stm) and torch.equal(sb.nstm_indices, nstm)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", SETS)
def test_cuda_equals_cpu(name, fixture_positions):
    _, boards, _ = fixture_positions
    fs = get_feature_set(name)
    stm, nstm = fs.encode(boards)
    g_stm, g_nstm = fs.encode(boards.cuda())
    assert torch.equal(g_stm.cpu(), stm) and torch.equal(g_nstm.cpu(), nstm)
