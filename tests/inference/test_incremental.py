"""Incremental accumulator: after every push and every pop, the accumulators equal a full refresh
(torch.equal) and the eval equals forward_int, on real games, random games and targeted moves."""
from __future__ import annotations

import random

import chess
import numpy as np
import pytest
import torch

from nnue.inference.incremental import IncrementalAccumulator, parse_move
from nnue.inference.kinds.perspective import forward_int
from nnue.pipeline.board import pack_board
from nnue.pipeline.features.kb768 import PRESETS, expand_map, parse_map
from tests.netfiles import make_int_net
from tests.samples import SAMPLE

SETS = ["chess768", "kb768hm4", "halfkp", "halfkav2_hm"]


@pytest.fixture(scope="module")
def nets():
    return {name: make_int_net(name, act, seed=i)
            for i, (name, act) in enumerate(zip(SETS, ["screlu", "crelu", "pairwise_crelu", "screlu"]))}


class Recorder:
    """Collects (incremental accumulators, incremental eval, python-chess packed board) after every
    push and pop, and checks them all against one batched full evaluation."""

    def __init__(self, net):
        self.net, self.accs, self.evals, self.packed, self.where = net, [], [], [], []

    def record(self, inc: IncrementalAccumulator, board: chess.Board, where: str):
        packed = pack_board(board)
        # the incremental board itself: occupancy, piece codes and castling rooks as python-chess
        assert inc.packed()[:24] == packed[:24], f"{where}: board differs from python-chess ({board.fen()})"
        assert inc.stm == (0 if board.turn else 1)
        assert inc.kings == [board.king(chess.WHITE), board.king(chess.BLACK)]
        assert inc.count == len(board.piece_map())
        self.accs.append(inc.accumulators())
        self.evals.append(inc.evaluate())
        self.packed.append(packed)
        self.where.append(f"{where}: {board.fen()}")

    def check(self):
        boards = torch.frombuffer(bytearray(b"".join(self.packed)), dtype=torch.uint8).view(-1, 32)
        stm, nstm = self.net.features.encode(boards)
        ev, parts = forward_int(self.net, stm, nstm, self.net.buckets.of(boards), return_parts=True)
        full = parts["acc"]
        for i, acc in enumerate(self.accs):
            assert torch.equal(acc, full[i]), f"accumulators differ after {self.where[i]}"
        assert self.evals == ev.tolist(), next(self.where[i] for i in range(len(ev)) if self.evals[i] != ev[i])
        n = len(self.accs)
        self.accs, self.evals, self.packed, self.where = [], [], [], []
        return n


def play(net, board: chess.Board, moves, rec: Recorder, mode="auto", as_uci=True) -> IncrementalAccumulator:
    """Push every move (python-chess and incremental side by side), then pop back to the start,
    recording after each step; the incremental own full refresh must agree as well."""
    inc = IncrementalAccumulator(net, pack_board(board), mode=mode)
    rec.record(inc, board, "start")
    for m in moves:
        uci = board.uci(m)
        board.push(m)
        inc.push(uci if as_uci else m)
        rec.record(inc, board, f"push {uci}")
    assert np.array_equal(inc.full_refresh(), inc.accumulators_by_colour())
    while board.move_stack:
        m = board.pop()
        inc.pop()
        rec.record(inc, board, f"pop {m.uci()}")
    assert inc.ply == 0
    return inc


def sample_games(limit=None):
    recs, fen = [], None
    for line in open(SAMPLE):
        if line.startswith("fen "):
            fen = line[4:].strip()
        elif line.startswith("move "):
            recs.append((fen, line[5:].strip()))
    games, prev_after = [], None
    for fen, mv in recs:
        b = chess.Board(fen)
        if games and prev_after == b.fen().split()[:4]:
            games[-1][1].append(mv)
        else:
            games.append((fen, [mv]))
        b.push_uci(mv)
        prev_after = b.fen().split()[:4]
    return games[:limit]


@pytest.mark.parametrize("fs_name", SETS)
def test_sample_games_every_push_and_pop(fs_name, nets):
    net = nets[fs_name]
    rec = Recorder(net)
    checked = refreshes = 0
    kinds = {"castle": 0, "ep": 0, "promo": 0, "capture": 0}
    for fen, moves in sample_games():
        board = chess.Board(fen)
        ms = []
        for u in moves:
            m = chess.Move.from_uci(u)
            kinds["castle"] += board.is_castling(m)
            kinds["ep"] += board.is_en_passant(m)
            kinds["promo"] += m.promotion is not None
            kinds["capture"] += board.is_capture(m)
            ms.append(m)
            board.push(m)
        board = chess.Board(fen)
        inc = play(net, board, ms, rec)
        refreshes += sum(inc.refreshes)
        checked += rec.check()
    assert checked > 8000
    assert kinds["castle"] > 20 and kinds["ep"] >= 3 and kinds["promo"] > 10 and kinds["capture"] > 500
    if fs_name == "chess768":
        assert refreshes == 0
    else:
        assert refreshes > 0


@pytest.mark.parametrize("fs_name", ["chess768", "kb768hm4", "halfkp"])
def test_random_games_table_and_encode_modes(fs_name, nets):
    """Random legal games (fixed seed): both ways of finding the changed features agree with a
    full refresh after every push and pop."""
    net = nets[fs_name]
    rnd = random.Random(7)
    rec = Recorder(net)
    for game in range(4):
        board = chess.Board()
        moves = []
        for _ in range(160):
            legal = list(board.legal_moves)
            if not legal:
                break
            # prefer captures and promotions now and then, so games reach endgames
            special = [m for m in legal if board.is_capture(m) or m.promotion]
            m = rnd.choice(special if special and rnd.random() < 0.3 else legal)
            moves.append(m)
            board.push(m)
        start = chess.Board()
        a = play(net, start.copy(), moves, rec, mode="table", as_uci=game % 2 == 0)
        b = play(net, start.copy(), moves, rec, mode="encode")
        assert a.pushes == b.pushes == len(moves)
        # the table mode refreshes on a change of king class, the encode mode when the diff is
        # longer than the new list (a cost rule): both exact, not always the same moves
        if fs_name != "chess768":
            assert min(a.refreshes) > 0 and min(b.refreshes) > 0
        else:
            assert a.refreshes == [0, 0]
        rec.check()


TARGETED = {
    # both castlings available, white and black to move
    "castle_w": "r3k2r/pppq1ppp/2n1bn2/2bpp3/2BPP3/2N1BN2/PPPQ1PPP/R3K2R w KQkq - 0 1",
    "castle_b": "r3k2r/pppq1ppp/2n1bn2/2bpp3/2BPP3/2N1BN2/PPPQ1PPP/R3K2R b KQkq - 0 1",
    # en passant for white (exf6) and for black (exd3)
    "ep_w": "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",
    "ep_b": "rnbqkbnr/pppp1ppp/8/8/2PPp3/8/PP2PPPP/RNBQKBNR b KQkq d3 0 3",
    # promotions, with and without capture, to every piece, both colours
    "promo_w": "r1b1k2r/1P4P1/8/8/8/8/1p4p1/R1B1K2R w KQkq - 0 1",
    "promo_b": "r1b1k2r/1P4P1/8/8/8/8/1p4p1/R1B1K2R b KQkq - 0 1",
    # kings next to the mirror line (d/e files) and bucket borders of kb768hm4
    "kings_d1_e8": "4k3/8/8/8/8/8/3P4/3K4 w - - 0 1",
    "kings_e1_d8": "3k4/8/8/8/8/8/8/4K3 b - - 0 1",
    "kings_b1_c8": "2k5/8/8/8/8/8/8/1K6 w - - 0 1",
    "kings_c2_f7": "8/5k2/8/8/8/8/2K5/8 w - - 0 1",
    "kings_rank2": "8/8/8/8/8/8/3K4/6k1 w - - 0 1",
    # middlegame with many captures
    "captures": "r1bqk2r/ppp2ppp/2np1n2/1Bb1p3/3PP3/2P2N2/PP3PPP/RNBQK2R w KQkq - 0 6",
}


def _kb_key(name: str, colour: bool, sq: int):
    """(bucket, mirrored) of a king square for a kb768hm map, from the formula in docs/features.md."""
    mirrored, buckets = parse_map(PRESETS.get(name, name))
    rel = sq if colour == chess.WHITE else sq ^ 56
    return expand_map(mirrored, buckets)[rel], mirrored and (sq & 7) >= 4


def expected_refresh(fs_name: str, board: chess.Board, m: chess.Move) -> bool:
    """Whether the mover's perspective must be refreshed (the formula's view, per feature set)."""
    if board.piece_type_at(m.from_square) != chess.KING:
        return False
    to = m.to_square
    if board.is_castling(m):
        to = chess.square(6 if board.is_kingside_castling(m) else 2, chess.square_rank(m.from_square))
    if to == m.from_square:
        return False
    if fs_name == "chess768":
        return False
    if fs_name in ("halfkp", "halfkav2_hm"):
        return True
    return _kb_key(fs_name, board.turn, m.from_square) != _kb_key(fs_name, board.turn, to)


def walk_every_legal_move(net, fs_name: str, pos: str, rec) -> int:
    """Every legal move of ``TARGETED[pos]`` pushed and popped on an IncrementalAccumulator of
    ``net`` (feature set ``fs_name``), two plies deep for the castling, promotion and en passant
    positions; ``rec.record(inc, board, label)`` after every push and pop. Asserts that only the
    mover's perspective is refreshed, exactly where :func:`expected_refresh` says, and that every
    pop restores the accumulators. Returns the number of refreshes."""
    board = chess.Board(TARGETED[pos])
    inc = IncrementalAccumulator(net, pack_board(board))
    rec.record(inc, board, "start")
    before = inc.accumulators_by_colour()
    refreshed = 0
    for m in list(board.legal_moves):
        uci = board.uci(m)
        r0 = list(inc.refreshes)
        want = expected_refresh(fs_name, board, m)
        mover = 0 if board.turn else 1
        board.push(m)
        inc.push(uci)
        rec.record(inc, board, f"push {uci}")
        got = inc.refreshes[mover] - r0[mover]
        assert got == int(want), f"{uci}: refresh {got}, expected {want}"
        assert inc.refreshes[1 - mover] == r0[1 - mover]
        refreshed += got
        board.pop()
        inc.pop()
        rec.record(inc, board, f"pop {uci}")
        assert np.array_equal(inc.accumulators_by_colour(), before)
        # two plies deep: every reply too, for the special positions
        if pos.startswith(("castle", "promo", "ep")):
            board.push(m)
            inc.push(uci)
            for r in list(board.legal_moves)[::3]:
                board.push(r)
                inc.push(r)
                rec.record(inc, board, f"push {uci} {r.uci()}")
                board.pop()
                inc.pop()
            board.pop()
            inc.pop()
    return refreshed


@pytest.mark.parametrize("fs_name", SETS)
@pytest.mark.parametrize("pos", sorted(TARGETED))
def test_every_legal_move_of_targeted_positions(fs_name, pos, nets):
    rec = Recorder(nets[fs_name])
    refreshed = walk_every_legal_move(nets[fs_name], fs_name, pos, rec)
    assert rec.check() > 2
    if pos.startswith("kings") and fs_name != "chess768":
        assert refreshed > 0


def test_targeted_positions_cover_the_special_moves():
    seen = set()
    for fen in TARGETED.values():
        b = chess.Board(fen)
        for m in b.legal_moves:
            if b.is_kingside_castling(m):
                seen.add(("O-O", b.turn))
            if b.is_queenside_castling(m):
                seen.add(("O-O-O", b.turn))
            if b.is_en_passant(m):
                seen.add(("ep", b.turn))
            if m.promotion and b.is_capture(m):
                seen.add(("xq" if m.promotion == chess.QUEEN else "x=minor", b.turn))
            if m.promotion and not b.is_capture(m):
                seen.add(("=", b.turn))
    for colour in (chess.WHITE, chess.BLACK):
        for kind in ("O-O", "O-O-O", "ep", "xq", "x=minor", "="):
            assert (kind, colour) in seen, (kind, colour)


CHESS960 = {
    # king d1/d8, rooks b and g: O-O lands the king on the rook's square, O-O-O the rook on
    # the king's square
    "kd_rb_rg": "1r1k2r1/pppppppp/8/8/8/8/PPPPPPPP/1R1K2R1 w GBgb - 0 1",
    # king already on g1 / g8: kingside castling moves only the rook
    "kg_rh": "r5kr/pppppppp/8/8/8/8/PPPPPPPP/R5KR w HAha - 0 1",
    # king b1, rook a1 and c1 ... queenside: king to c1 where a rook stands
    "kb_ra_rh": "rk5r/pppppppp/8/8/8/8/PPPPPPPP/RK5R b HAha - 0 1",
}


@pytest.mark.parametrize("fs_name", ["chess768", "kb768hm4", "halfkp"])
@pytest.mark.parametrize("pos", sorted(CHESS960))
def test_chess960_castling_king_takes_rook(fs_name, pos, nets):
    net = nets[fs_name]
    board = chess.Board(CHESS960[pos], chess960=True)
    rec = Recorder(net)
    inc = IncrementalAccumulator(net, pack_board(board))
    castles = [m for m in board.legal_moves if board.is_castling(m)]
    assert castles
    for m in castles:
        uci = board.uci(m)  # king takes rook
        assert board.piece_type_at(m.to_square) == chess.ROOK
        board.push(m)
        inc.push(uci)
        rec.record(inc, board, f"push {uci}")
        for r in list(board.legal_moves)[:5]:
            board.push(r)
            inc.push(board.peek())
            rec.record(inc, board, f"push {uci} {r.uci()}")
            board.pop()
            inc.pop()
        board.pop()
        inc.pop()
        rec.record(inc, board, f"pop {uci}")
    rec.check()


def test_standard_castling_notations_agree(nets):
    net = nets["kb768hm4"]
    fen = TARGETED["castle_w"]
    for two_file, takes_rook in (("e1g1", "e1h1"), ("e1c1", "e1a1")):
        a = IncrementalAccumulator.from_fen(net, fen)
        b = IncrementalAccumulator.from_fen(net, fen)
        a.push(two_file)
        b.push(takes_rook)
        assert a.packed() == b.packed()
        assert torch.equal(a.accumulators(), b.accumulators()) and a.evaluate() == b.evaluate()


def test_move_formats():
    assert parse_move("e7e8q") == parse_move((52, 60, chess.QUEEN)) == parse_move((52, 60, "q"))
    assert parse_move(chess.Move.from_uci("e7e8n")) == (52, 60, 1)
    assert parse_move("0000") == parse_move(chess.Move.null()) == (-1, -1, None)
    assert parse_move((12, 28)) == parse_move("e2e4") == (12, 28, None)
    for bad in ("e2e2", "e2e9", "e7e8k", "e2", (1, 64), (3, 4, 6)):
        with pytest.raises(ValueError):
            parse_move(bad)


def test_bad_moves_change_nothing(nets):
    net = nets["halfkp"]
    inc = IncrementalAccumulator.from_fen(net, TARGETED["promo_w"])
    snap = (inc.packed(), inc.accumulators(), inc.evaluate())
    for bad in ("e4e5",    # no piece
                "b2b1q",   # black's pawn, white to move
                "a1c1",    # onto an own piece
                "b7b8",    # promotion without a piece
                "h1h2q",   # a rook does not promote
                "e1e8",    # captures a king
                "g7h8x"[:4] + "k"):  # bad promotion letter
        with pytest.raises(ValueError):
            inc.push(bad)
        assert (inc.packed(), inc.evaluate()) == snap[::2] and torch.equal(inc.accumulators(), snap[1])
    with pytest.raises(IndexError):
        inc.pop()
    with pytest.raises(ValueError, match="king"):
        IncrementalAccumulator.from_fen(net, "8/8/8/8/8/8/8/4K3 w - - 0 1")  # no black king


def test_null_move_flips_side_to_move(nets):
    net = nets["kb768hm4"]
    board = chess.Board(TARGETED["captures"])
    rec = Recorder(net)
    inc = IncrementalAccumulator(net, pack_board(board))
    board.push(chess.Move.null())
    inc.push("0000")
    rec.record(inc, board, "null")
    board.push_uci("e8g8")
    inc.push("e8g8")
    rec.record(inc, board, "O-O after null")
    assert rec.check() == 2


def test_evaluate_raises_where_forward_int_does():
    net = make_int_net("chess768", "screlu", hidden=16, seed=3)
    net.l1w = torch.full_like(net.l1w, 32767)
    net.l0b = torch.full_like(net.l0b, 255)
    board = chess.Board()
    inc = IncrementalAccumulator(net, pack_board(board))
    t = torch.frombuffer(bytearray(pack_board(board)), dtype=torch.uint8).view(1, 32)
    stm, nstm = net.features.encode(t)
    with pytest.raises(OverflowError, match="int32"):
        forward_int(net, stm, nstm, net.buckets.of(t))
    with pytest.raises(OverflowError, match="int32"):
        inc.evaluate()


# --------------------------------------------------------------------------------------------
# one position from scratch (evaluate_one) and the small-batch path of api.evaluate

def _sample_boards(limit: int = 1500) -> torch.Tensor:
    """Packed boards of the sample games: castling rooks, en-passant squares, promotions."""
    packed = []
    for fen, moves in sample_games():
        board = chess.Board(fen)
        packed.append(pack_board(board))
        for u in moves:
            board.push_uci(u)
            packed.append(pack_board(board))
        if len(packed) >= limit:
            break
    return torch.frombuffer(bytearray(b"".join(packed)), dtype=torch.uint8).view(-1, 32)


@pytest.mark.parametrize("which", SETS + ["deep", "tiny"])
def test_evaluate_one_equals_forward_int(which, nets):
    from nnue.inference import api
    from nnue.inference.incremental import evaluate_one
    from tests.inference.test_c_cross_check_tiny import make_tiny_int_net
    from tests.netfiles import make_deep_int_net

    net = (make_deep_int_net("halfkp", "screlu", seed=9) if which == "deep" else
           make_tiny_int_net("kb768hm4", "crelu", 16, 32, "crelu", "MaterialCount<8>", seed=9) if which == "tiny"
           else nets[which])
    boards = _sample_boards()
    assert (boards[:, 8:24] & 0x0F == 6).any()  # castling rooks in the low nibbles
    stm, nstm = net.features.encode(boards)
    ref = forward_int(net, stm, nstm, net.buckets.of(boards)) if which in SETS else \
        api.forward_int(net, stm, nstm, net.buckets.of(boards))
    one = torch.tensor([evaluate_one(net, b) for b in boards], dtype=torch.int64)
    assert torch.equal(one, ref)
    # api.evaluate takes the one-position path for small batches: same integers
    for n in (1, 2, api.SMALL_BATCH):
        assert torch.equal(api.evaluate(net, boards[:n]), ref[:n])
        assert torch.equal(api.evaluate(net, boards[n:2 * n]), ref[n:2 * n])


def test_evaluate_one_declines_boards_for_the_batch_path(nets):
    from nnue.inference import api
    from nnue.inference.incremental import evaluate_one

    net = nets["halfkav2_hm"]
    no_black_king = pack_board(chess.Board("8/8/8/8/8/8/8/K7 w - - 0 1"))
    assert evaluate_one(net, no_black_king) is None
    bad = bytearray(pack_board(chess.Board()))
    bad[8] = (bad[8] & 0xF0) | 7  # an unused piece code
    assert evaluate_one(net, bytes(bad)) is None and evaluate_one(nets["chess768"], bytes(bad)) is None
    assert evaluate_one(net, b"\0" * 31) is None
    with pytest.raises(ValueError):  # the batch path's own error, as before
        api.evaluate(net, torch.frombuffer(bytearray(no_black_king), dtype=torch.uint8).view(1, 32))


def test_evaluate_one_raises_where_forward_int_does():
    from nnue.inference import api
    from nnue.inference.incremental import evaluate_one

    net = make_int_net("chess768", "screlu", hidden=16, seed=3)
    net.l1w = torch.full_like(net.l1w, 32767)
    net.l0b = torch.full_like(net.l0b, 255)
    packed = pack_board(chess.Board())
    with pytest.raises(OverflowError, match="int32"):
        evaluate_one(net, packed)
    with pytest.raises(OverflowError, match="int32"):
        api.evaluate(net, torch.frombuffer(bytearray(packed), dtype=torch.uint8).view(1, 32))
