"""Every feature set: registry and names, golden indices, symmetries, and the tensor encoder
against the python-chess reference (feature_reference.py) on real positions."""
from __future__ import annotations

import chess
import numpy as np
import pytest
import torch

from nnue.pipeline.board import boards_from_bytes, pack_fen, unpack_fen
from nnue.pipeline.features import get_feature_set, known_names
from nnue.pipeline.features.kb768 import PRESETS, format_map, parse_map
from nnue.pipeline.features.lookup import TableEncoder
from nnue.pipeline.parts import read_part
from tests.features.feature_reference import KB768_RANKS_FILES_NAME, REFERENCES
from tests.samples import selfplay

ALL = sorted(REFERENCES)
KING_SETS = [n for n in ALL if n != "chess768"]
FLIP_SETS = [n for n in ALL if n != "halfkp"]          # black's view flips ranks (s ^ 56)
MIRRORED = ["halfkav2_hm", "kb768hm4", "kb768hm16",      # own king on e–h mirrors the board
            "full_threats", "pp_3wide", "sfnnv16"]       # (threats: own king on a–d)

# Pinned: a hash change means nets written before it no longer load. Change only with the indexing.
HASHES = {
    "chess768": "6df40d0f9a980a90",
    "halfkp": "3ee847613c438255",
    "halfkav2_hm": "1597e3c37bb1c37b",
    "kb768hm4": "9630f603fa269bcc",
    "kb768hm16": "5954ebd95aef3a5c",
    "full_threats": "b98e2fd5e4aeeddf",
    "pp_3wide": "8e21aab98cf1a9f7",
    "sfnnv16": "ebc6d8f08b58a465",
}
SIZES = {"chess768": (768, 32), "halfkp": (41024, 30), "halfkav2_hm": (22528, 32),
         "kb768hm4": (3072, 32), "kb768hm16": (12288, 32), KB768_RANKS_FILES_NAME: (3072, 32),
         "full_threats": (59808, 128), "pp_3wide": (4560, 128), "sfnnv16": (86896, 288)}


def packed(*fens: str) -> torch.Tensor:
    return torch.tensor([list(pack_fen(f)) for f in fens], dtype=torch.uint8)


def lists(name: str, fen: str) -> tuple[list[int], list[int]]:
    stm, nstm = get_feature_set(name).encode(packed(fen))
    return [v for v in stm[0].tolist() if v >= 0], [v for v in nstm[0].tolist() if v >= 0]


# --- registry and names -------------------------------------------------------------------

def test_registry_sizes_hashes_and_round_trip():
    assert set(HASHES) <= set(known_names())
    for name in ALL:
        fs = get_feature_set(name)
        assert (fs.num_inputs, fs.max_active) == SIZES[name]
        assert get_feature_set(fs.name) == fs and fs.name == name  # the header's name finds it again
        if name in HASHES:
            assert fs.hash == HASHES[name]
    assert len({get_feature_set(n).hash for n in ALL}) == len(ALL)


def test_kb768_presets_equal_their_spelled_out_map():
    for preset, explicit in PRESETS.items():
        a, b = get_feature_set(preset), get_feature_set(explicit)
        assert a.hash == b.hash and a.num_inputs == b.num_inputs and a.name != b.name
        assert format_map(*parse_map(explicit)) == explicit
        x = packed(chess.STARTING_FEN, "6k1/p7/8/8/3Q4/8/8/2K5 b - - 0 1")
        assert all(torch.equal(u, v) for u, v in zip(a.encode(x), b.encode(x)))


@pytest.mark.parametrize("bad", [
    "kb768hm:0011/2222/3333/3333/3333/3333/3333",            # 7 ranks
    "kb768hm:00112/2222/3333/3333/3333/3333/3333/3333",      # 5 files in a mirrored rank
    "kb768:0011/2222/3333/3333/3333/3333/3333/3333",         # 4 files without mirroring
    "kb768hm:0022/2222/3333/3333/3333/3333/3333/3333",       # bucket 1 unused
    "kb768hm:00-1/2222/3333/3333/3333/3333/3333/3333",       # bad character
    "kb768x4", "HalfKP", "",
])
def test_bad_names_raise_key_error(bad):
    with pytest.raises(KeyError):
        get_feature_set(bad)


def test_explicit_map_grammar():
    text = "0123456789abcdefghijklmnopqrstuvwxyzABCDEF" + "F" * 22  # 42 buckets over 64 squares
    name = "kb768:" + "/".join(text[i:i + 8] for i in range(0, 64, 8))
    mirrored, buckets = parse_map(name)
    assert not mirrored and buckets[:12] == list(range(12)) and buckets[36:42] == list(range(36, 42))
    assert format_map(mirrored, buckets) == name
    fs = get_feature_set(name)
    assert fs.num_inputs == 42 * 768 and get_feature_set(fs.name) is fs
    with pytest.raises(ValueError):  # numbered 0..N-1, each used
        parse_map("kb768:" + "/".join(["01234567"] * 7 + ["89abcdeF"]))
    assert get_feature_set(KB768_RANKS_FILES_NAME).num_inputs == 4 * 768


# --- golden indices, computed by hand from the formulas -----------------------------------

# white: Kc1 Qd4; black: Kg8 pa7; black to move (stm = black). Pieces in square order:
# c1 (2) K, d4 (27) Q, a7 (48) p, g8 (62) k.
POS = "6k1/p7/8/8/3Q4/8/8/2K5 b - - 0 1"
GOLDEN = {
    # stm black: o(x) = x^63, king block 641·(62^63 = 1); nstm white: king block 641·2
    #   Q: 1 + (27^63=36) + 64·9 + 641 = 1254 | p: 1 + (48^63=15) + 0 + 641 = 657
    #   Q: 1 + 27 + 64·8 + 1282 = 1822       | p: 1 + 48 + 64·1 + 1282 = 1395
    "halfkp": ([1254, 657], [1822, 1395]),
    # stm black: king g8, file ≥ 4: o(x) = x^56, o(k) = 6 -> bucket 29 (base 20416)
    #   K 58+640 | Q (27^56=35)+576 | p (48^56=8)+0 | k 6+640
    # nstm white: king c1, file < 4: o(x) = x^7, o(k) = 5 -> bucket 30 (base 21120)
    #   K 5+640 | Q 28+512 | p 55+64 | k 57+640
    "halfkav2_hm": ([21114, 21027, 20424, 21062], [21765, 21660, 21239, 21817]),
    # stm black: relative king g1 (6) -> mirrored entry b1 = bucket 0; flip 7, so r(s)^7 = s^63:
    #   K 384+320+61 | Q 384+256+36 | p 0+0+15 | k 0+320+1
    # nstm white: king c1 -> entry c1 = bucket 1 (base 768), no flip
    "kb768hm4": ([384 + 320 + 61, 384 + 256 + 36, 0 + 0 + 15, 0 + 320 + 1],
                 [768 + 0 + 320 + 2, 768 + 0 + 256 + 27, 768 + 384 + 0 + 48, 768 + 384 + 320 + 62]),
    "chess768": ([384 + 320 + 58, 384 + 256 + 35, 0 + 0 + 8, 0 + 320 + 6],
                 [0 + 320 + 2, 0 + 256 + 27, 384 + 0 + 48, 384 + 320 + 62]),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_indices_both_perspectives(name):
    assert lists(name, POS) == GOLDEN[name]


def test_golden_kings_on_e_file():
    # Ke1 Rh1 / ke8, white to move: no mirroring for either side, both kings in bucket 31
    fen = "4k3/8/8/8/8/8/8/4K2R w - - 0 1"
    assert lists("halfkav2_hm", fen) == ([4 + 640 + 21824, 7 + 384 + 21824, 60 + 640 + 21824],
                                         [60 + 640 + 21824, 63 + 448 + 21824, 4 + 640 + 21824])
    # HalfKP: white king e1 -> block 4·641; black king e8 -> (60^63 = 3)·641; rook h1
    assert lists("halfkp", fen) == ([1 + 7 + 6 * 64 + 4 * 641], [1 + (7 ^ 63) + 7 * 64 + 3 * 641])


def test_halfkp_start_position_has_30_features_without_kings():
    stm, nstm = get_feature_set("halfkp").encode(packed(chess.STARTING_FEN))
    assert stm.shape == (1, 30) and (stm >= 0).all() and (nstm >= 0).all()
    assert stm[0, :2].tolist() == [1 + 0 + 64 * 6 + 641 * 4, 1 + 1 + 64 * 2 + 641 * 4]  # Ra1, Nb1


# --- symmetries ---------------------------------------------------------------------------

SYM_FENS = [
    "r1bq1rk1/pppp1ppp/2n2n2/2b1p3/2B1P3/3P1N2/PPP2PPP/RNBQ1RK1 w - - 4 6",
    "6k1/p7/8/8/3Q4/8/8/2K5 b - - 0 1",
    "8/2k5/3p4/p2P1p2/P2P1P2/8/5K2/8 w - - 0 40",
    "2kr3r/ppp2ppp/8/8/8/8/PPP2PPP/2KR3R b - - 0 20",
]


def _sorted_lists(name, board):
    stm, nstm = get_feature_set(name).encode(packed(board.fen()))
    return sorted(v for v in stm[0].tolist() if v >= 0), sorted(v for v in nstm[0].tolist() if v >= 0)


@pytest.mark.parametrize("name", FLIP_SETS)
def test_colour_flip_symmetry(name):
    """The colour-flipped twin (ranks flipped, colours and side to move swapped) looks the same
    to the side to move, and to the other side."""
    for fen in SYM_FENS:
        board = chess.Board(fen)
        assert _sorted_lists(name, board) == _sorted_lists(name, board.mirror()), fen


def test_halfkp_rotation_symmetry():
    """HalfKP rotates black's view by 180°: its twin is the colour-swapped, rotated board."""
    for fen in SYM_FENS:
        board = chess.Board(fen)
        twin = board.transform(chess.flip_horizontal).mirror()
        assert _sorted_lists("halfkp", board) == _sorted_lists("halfkp", twin), fen
        if fen != SYM_FENS[2]:  # the mirror twin differs once pieces are not left-right symmetric
            assert _sorted_lists("halfkp", board) != _sorted_lists("halfkp", board.mirror())


@pytest.mark.parametrize("name", MIRRORED)
def test_horizontal_mirror_symmetry(name):
    for fen in SYM_FENS:
        board = chess.Board(fen)
        assert _sorted_lists(name, board) == _sorted_lists(name, board.transform(chess.flip_horizontal)), fen


def test_unmirrored_sets_see_the_mirror():
    board = chess.Board(SYM_FENS[0])
    twin = board.transform(chess.flip_horizontal)
    for name in ("chess768", KB768_RANKS_FILES_NAME):
        assert _sorted_lists(name, board) != _sorted_lists(name, twin)


# --- against the reference on real positions ----------------------------------------------

def _dataset_boards(path, n, step=1, chess960=False):
    t = read_part(next(path.glob("part-*.parquet")), columns=["board"])
    boards = boards_from_bytes(t.column("board"))[:n:step].copy()
    return boards, [chess.Board(unpack_fen(b.tobytes()), chess960=chess960) for b in boards]


@pytest.fixture(scope="module")
def selfplay_boards(selfplay_dataset):
    return _dataset_boards(selfplay_dataset, 12000)


@pytest.fixture(scope="module")
def chess960_boards(tmp_path_factory):
    from nnue.pipeline.pack import pack

    out = tmp_path_factory.mktemp("ds960") / "dataset"
    pack([selfplay("sf15-960-xfen-s2.plain")], out, progress=False)
    return _dataset_boards(out, 3000, step=2, chess960=True)


def _check_against_reference(name, boards, parsed):
    fs, ref = get_feature_set(name), REFERENCES[name]
    stm, nstm = fs.encode(torch.from_numpy(boards))
    assert stm.shape == (boards.shape[0], fs.max_active) and stm.dtype == torch.int32
    assert int(stm.max()) < fs.num_inputs and int(nstm.max()) < fs.num_inputs
    stm_l, nstm_l = stm.tolist(), nstm.tolist()
    for i, board in enumerate(parsed):
        r_stm, r_nstm = ref(board)
        assert stm_l[i] == r_stm + [-1] * (fs.max_active - len(r_stm)), (name, board.fen())
        assert nstm_l[i] == r_nstm + [-1] * (fs.max_active - len(r_nstm)), (name, board.fen())


@pytest.mark.parametrize("name", ALL)
def test_matches_reference_on_real_positions(name, selfplay_boards):
    _check_against_reference(name, *selfplay_boards)


@pytest.mark.parametrize("name", ALL)
def test_matches_reference_chess960(name, chess960_boards):
    """Castling rooks (nibble 6) are rooks for every set."""
    _check_against_reference(name, *chess960_boards)


# --- contract details ---------------------------------------------------------------------

BIG = packed(*([chess.STARTING_FEN, POS] * 4100 + [chess.STARTING_FEN]))  # 8,201 rows: several CPU chunks, odd size


@pytest.mark.parametrize("name", ALL)
def test_empty_and_chunked_batches(name):
    from nnue.pipeline.features.lookup import CPU_CHUNK

    fs = get_feature_set(name)
    stm, nstm = fs.encode(torch.zeros((0, 32), dtype=torch.uint8))
    assert stm.shape == (0, fs.max_active) and nstm.dtype == torch.int32
    assert BIG.shape[0] > 2 * CPU_CHUNK
    stm, nstm = fs.encode(BIG)
    two_stm, two_nstm = fs.encode(BIG[:2])  # the start position, then POS
    assert stm.shape == (BIG.shape[0], fs.max_active) and stm.is_contiguous() and nstm.is_contiguous()
    assert (stm[0::2] == two_stm[0]).all() and (stm[1::2] == two_stm[1]).all()
    assert (nstm[0::2] == two_nstm[0]).all() and (nstm[1::2] == two_nstm[1]).all()


@pytest.mark.parametrize("path", ["encode", "encode_numba"])
@pytest.mark.parametrize("name", KING_SETS)
def test_king_sets_reject_boards_without_one_king_a_side(name, path):
    enc = getattr(get_feature_set(name), path)
    with pytest.raises(ValueError, match="board 1"):
        enc(packed(chess.STARTING_FEN, "8/8/8/8/8/8/8/K7 w - - 0 1"))
    bad = BIG.clone()
    bad[5000] = packed("8/8/8/8/8/8/8/K7 w - - 0 1")[0]
    with pytest.raises(ValueError, match="board 5000"):  # row numbers count across CPU chunks
        enc(bad)
    with pytest.raises(ValueError):
        enc(packed("k7/8/8/8/8/8/8/KK6 w - - 0 1"))
    with pytest.raises(ValueError):
        enc(torch.zeros((2, 31), dtype=torch.uint8))


@pytest.mark.parametrize("path", ["encode", "encode_numba"])
def test_chess768_needs_no_kings(path):
    stm, _ = getattr(get_feature_set("chess768"), path)(packed("8/8/8/8/8/8/8/K7 w - - 0 1"))
    assert stm[0, :2].tolist() == [320, -1]


def test_table_encoder_checks_its_formula():
    from nnue.pipeline.features.lookup import KING, TableEncoder

    def plain(g):
        return torch.where(g.colour == g.p, 0, 384) + 64 * g.ptype + (g.s ^ (56 * g.p))

    with pytest.raises(ValueError, match="num_inputs"):
        TableEncoder(plain, 700, 32, king_relative=False)
    with pytest.raises(ValueError, match="max_active"):
        TableEncoder(plain, 768, 30, king_relative=False)
    with pytest.raises(ValueError, match="kings"):  # leaving out anything but the kings
        TableEncoder(lambda g: torch.where(g.ptype == 0, -1, plain(g)), 768, 32)
    no_kings = TableEncoder(lambda g: torch.where(g.ptype == KING, -1, plain(g)), 768, 30)
    stm, _ = no_kings(packed(chess.STARTING_FEN))
    assert stm.shape == (1, 30) and 320 + 4 not in stm[0].tolist() and (stm >= 0).all()


def test_every_feature_set_carries_its_factoriser_and_c_index():
    """Each registered set's module carries its factoriser map (the virtual feature of every real
    one, written out here from the formulas) and its C code, which the generated header holds."""
    from nnue.pipeline import features

    header = features.c_header()

    def hk_hat(i):  # sfnnv16: HalfKAv2_hm^ on rows 64,368.., none before
        j = i - 64368
        b, plane, sq = j // 704, j % 704 // 64, j % 64
        own = 8 * (7 - b // 4) + 7 - b % 4  # the own king's oriented square in bucket b
        return torch.where(i < 64368, -1, torch.where(plane == 10, torch.where(sq == own, 640, 704) + sq, j % 704))

    expected = {"chess768": lambda i: i // 64, "halfkp": lambda i: i % 641, "halfkav2_hm": lambda i: i % 704,
                "sfnnv16": hk_hat, "full_threats+pp_3wide+halfkav2_hm": hk_hat}
    for name in known_names() + [PRESETS["kb768hm4"], "kb768:" + "/".join(["01234567"] * 8)]:
        fs = get_feature_set(name)
        i = torch.arange(fs.num_inputs)
        if name in ("full_threats", "pp_3wide"):  # nnue-pytorch factorises neither
            with pytest.raises(ValueError, match="no factoriser"):
                features.factor_map(name, fs.num_inputs)
        else:
            want = expected.get(name, lambda i: i % 768)(i)  # kb768…: the bucket-free piece square
            assert torch.equal(features.factor_map(name, fs.num_inputs, partial=True), want), name
        assert fs.c is not None and f"case {fs.c.enum}:" in header, name
        for line in fs.c.index.splitlines() + fs.c.active.splitlines():
            assert line in header, (name, line)
    with pytest.raises(ValueError, match="unknown feature set"):
        features.factor_map("nope", 10)


# --- the compiled CPU path (encode_numba) -------------------------------------------------

def _outcome(enc, boards):
    """(stm, nstm) of ``enc``, or what it raised (type and message)."""
    try:
        return enc(boards)
    except (ValueError, RuntimeError) as e:
        return f"{type(e).__name__}: {e}"


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return all(torch.equal(x, y) and x.dtype == y.dtype and x.shape == y.shape for x, y in zip(a, b))


@pytest.mark.parametrize("name", ALL)
def test_compiled_path_equals_torch(name, selfplay_boards, chess960_boards):
    """Every set has a compiled CPU path (a table set through :mod:`nnue.pipeline.compiled.lookup`):
    the same lists as the torch encoder, bit for bit, on real positions (Chess960's castling
    rooks too), odd and empty batches and batches of several CPU chunks."""
    fs = get_feature_set(name)
    assert fs.encode_numba is not None
    for boards in (torch.from_numpy(selfplay_boards[0]), torch.from_numpy(chess960_boards[0]), BIG):
        for part in (boards, boards[:1], boards[3:10], boards[:4097], boards[:0]):
            assert _same(fs.encode_numba(part), fs.encode(part)), (name, part.shape)
    assert _same(fs.encode_numba(BIG[1::2]), fs.encode(BIG[1::2]))  # a strided view


TABLE_SETS = [n for n in ALL if isinstance(get_feature_set(n).encode, TableEncoder)]


def _random_boards(rng, n: int, kings: bool, unused: float) -> torch.Tensor:
    """n packed boards of random pieces (2..32, nibbles past the piece count random too),
    one king a side when ``kings``, an unused code (7, 15) on a piece with probability ``unused``;
    random side to move and tail bytes."""
    out = rng.integers(0, 256, (n, 32), dtype=np.uint8)
    codes = np.array([0, 1, 2, 3, 4, 6, 8, 9, 10, 11, 12, 14])
    for r in range(n):
        k = int(rng.integers(2, 33))
        squares = rng.choice(64, k, replace=False)
        occ = sum(1 << int(s) for s in squares)
        out[r, :8] = np.frombuffer(occ.to_bytes(8, "little"), np.uint8)
        nib = list(rng.integers(0, 16, 32))
        nib[:k] = rng.choice(codes, k)
        if kings:
            a, b = rng.choice(k, 2, replace=False)
            nib[a], nib[b] = 5, 13
        if rng.random() < unused:
            nib[int(rng.integers(0, k))] = int(rng.choice([7, 15]))
        out[r, 8:24] = [nib[2 * i] | (nib[2 * i + 1] << 4) for i in range(16)]
    return torch.from_numpy(out)


@pytest.mark.parametrize("name", TABLE_SETS)
def test_compiled_table_path_on_random_boards(name):
    """Random boards, valid or not: the compiled table path gives the torch encoder's lists, or
    refuses the same first board with the same message (no king, two kings, an unused code);
    a board of more than 32 pieces goes through the torch path."""
    fs = get_feature_set(name)
    rng = np.random.default_rng(7)
    good = _random_boards(rng, 1001, kings=True, unused=0.0)
    assert _same(fs.encode_numba(good), fs.encode(good))
    for seed in range(20):
        mixed = _random_boards(np.random.default_rng(seed), 37, kings=seed % 2 == 0, unused=0.05)
        assert _same(_outcome(fs.encode_numba, mixed), _outcome(fs.encode, mixed)), (name, seed)
    crowded = good[:3].clone()
    crowded[1, :8] = 255  # 64 pieces: no packer writes it; the torch path decides (it raises)
    assert _same(_outcome(fs.encode_numba, crowded), _outcome(fs.encode, crowded))


def test_piece_count_on_cpu_equals_the_torch_popcount():
    """The CPU piece count (NumPy's popcount) equals the SWAR popcount in torch ops (the path of
    other devices) on random occupancies, empty and full boards included, and on a strided view."""
    from nnue.pipeline.features.board_tensor import _piece_count_swar, piece_count

    rng = np.random.default_rng(3)
    boards = torch.from_numpy(rng.integers(0, 256, (1001, 32), dtype=np.uint8))
    boards[0, :8], boards[1, :8] = 0, 255
    got = piece_count(boards)
    assert got.dtype == torch.int64 and torch.equal(got, _piece_count_swar(boards))
    assert got[:2].tolist() == [0, 64] and torch.equal(piece_count(boards[1::3]), _piece_count_swar(boards[1::3]))
    assert piece_count(boards[:0]).shape == (0,)
