"""Chess768 tensor encoder against a python-chess reference, and output buckets."""
from __future__ import annotations

import chess
import pytest
import torch

from nnue.pipeline.board import boards_from_bytes, pack_fen, unpack_fen
from nnue.pipeline.features import OutputBuckets, get_feature_set, parse_output_buckets
from nnue.pipeline.features.board_tensor import piece_count
from nnue.pipeline.parts import read_part
from tests.samples import selfplay

FS = get_feature_set("chess768")


def reference_chess768(board: chess.Board) -> tuple[list[int], list[int]]:
    """Slow reference: index lists (ascending square order) for stm and nstm perspectives."""
    out = []
    for persp in (board.turn, not board.turn):
        idx = []
        for sq in sorted(board.piece_map()):
            pc = board.piece_at(sq)
            rel = sq if persp == chess.WHITE else sq ^ 56
            idx.append((0 if pc.color == persp else 384) + 64 * (pc.piece_type - 1) + rel)
        out.append(idx)
    return out[0], out[1]


def _boards(path, n):
    t = read_part(path, columns=["board"])
    return boards_from_bytes(t.column("board"))[:n]


def test_golden_start_position():
    b = torch.tensor([list(pack_fen(chess.STARTING_FEN))], dtype=torch.uint8)
    stm, nstm = FS.encode(b)
    # white to move: white rook a1 is own piece type 3 on square 0 -> 192; black rook a8 (sq 56) is 384+192+56
    assert stm[0, 0].item() == 192 and 384 + 192 + 56 in stm[0].tolist()
    # black perspective: white rook a1 is an enemy rook on a8 after the flip -> 384 + 192 + 56
    assert nstm[0, 0].item() == 384 + 192 + 56
    assert (stm[0] >= 0).sum() == 32 and (nstm[0] >= 0).sum() == 32


def test_padding_and_dtype():
    b = torch.tensor([list(pack_fen("8/8/8/8/8/8/8/K6k w - - 0 1"))], dtype=torch.uint8)
    stm, nstm = FS.encode(b)
    assert stm.dtype == torch.int32 and stm.shape == (1, 32)
    assert stm[0, :2].tolist() == [5 * 64 + 0, 384 + 5 * 64 + 7]
    assert (stm[0, 2:] == -1).all() and (nstm[0, 2:] == -1).all()


def test_colour_flip_symmetry():
    board = chess.Board("r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4")
    flipped = board.mirror()  # colours swapped, board flipped, side to move swapped
    a = FS.encode(torch.tensor([list(pack_fen(board.fen()))], dtype=torch.uint8))
    b = FS.encode(torch.tensor([list(pack_fen(flipped.fen()))], dtype=torch.uint8))
    for x, y in zip(a, b):
        assert sorted(x[0].tolist()) == sorted(y[0].tolist())


def test_matches_reference_on_real_positions(selfplay_dataset):
    boards = _boards(next(selfplay_dataset.glob("part-*.parquet")), 12000)
    stm, nstm = FS.encode(torch.from_numpy(boards.copy()))
    for i in range(boards.shape[0]):
        ref_stm, ref_nstm = reference_chess768(chess.Board(unpack_fen(boards[i].tobytes())))
        got_stm = [v for v in stm[i].tolist() if v >= 0]
        got_nstm = [v for v in nstm[i].tolist() if v >= 0]
        assert got_stm == ref_stm and got_nstm == ref_nstm, unpack_fen(boards[i].tobytes())
        assert (stm[i, len(ref_stm):] == -1).all()


def test_matches_reference_chess960(tmp_path):
    from nnue.pipeline.pack import pack

    pack([selfplay("sf15-960-xfen-s2.plain")], tmp_path / "ds", progress=False)
    boards = _boards(next((tmp_path / "ds").glob("part-*.parquet")), 5000)
    stm, nstm = FS.encode(torch.from_numpy(boards.copy()))
    for i in range(0, boards.shape[0], 3):
        fen = unpack_fen(boards[i].tobytes())
        ref = reference_chess768(chess.Board(fen, chess960=True))
        assert [v for v in stm[i].tolist() if v >= 0] == ref[0]
        assert [v for v in nstm[i].tolist() if v >= 0] == ref[1]


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
def test_material_count_buckets_every_piece_count(n):
    ob = OutputBuckets("MaterialCount", n)
    pieces = torch.arange(2, 33)
    got = ob.of_piece_count(pieces).tolist()
    div = -(-32 // n)
    assert got == [min((p - 2) // div, n - 1) for p in range(2, 33)]
    assert max(got) <= n - 1 and min(got) == 0


def test_stockfish_buckets_differ_from_bullet_at_documented_counts():
    sf, mc = OutputBuckets("SFPieceCount", 8), OutputBuckets("MaterialCount", 8)
    pieces = torch.arange(2, 33)
    s, m = sf.of_piece_count(pieces), mc.of_piece_count(pieces)
    assert s.tolist() == [(p - 1) // 4 for p in range(2, 33)]
    differ = sorted(int(p) for p, a, b in zip(pieces, s, m) if a != b)
    assert differ == list(range(5, 33, 4))  # FORMATS.md: they disagree at 5, 9, 13, ...


def test_buckets_from_boards_use_popcount():
    fens = ["8/8/8/8/8/8/8/K6k w - - 0 1", chess.STARTING_FEN]
    b = torch.tensor([list(pack_fen(f)) for f in fens], dtype=torch.uint8)
    assert piece_count(b).tolist() == [2, 32]
    assert parse_output_buckets("MaterialCount<8>").of(b).tolist() == [0, 7]
    with pytest.raises(ValueError):
        parse_output_buckets("Material8")
    with pytest.raises(ValueError):
        OutputBuckets("Nope", 8)


def test_encode_rejects_bad_input():
    with pytest.raises(ValueError):
        FS.encode(torch.zeros((3, 31), dtype=torch.uint8))
    with pytest.raises(ValueError):
        FS.encode(torch.zeros((3, 32), dtype=torch.int32))
