"""Incremental accumulator for sfnnv5 (Stockfish 15.1's net): after every push and every pop the
int32 FT + PSQT rows, wrapped as the engine wraps (int16, int32), equal the batch path's
accumulators (torch.equal), and the eval equals the batch forward, on the sample games, random
games and every legal move of targeted positions; also with weights that make the int16
accumulators and int32 PSQT sums wrap. ``evaluate_one`` and ``nnue.inference.evaluate``'s
small-batch path give the batch path's integers."""
from __future__ import annotations

import dataclasses

import random

import chess
import numpy as np
import pytest
import torch

from nnue.inference import api, kinds
from nnue.inference.kinds import sfnnv5
from nnue.inference.incremental import IncrementalAccumulator, evaluate_one
from nnue.pipeline.board import pack_board
from tests.engines.test_sfnnv5 import random_int_net
from tests.inference.test_incremental import CHESS960, TARGETED, _sample_boards, play, sample_games, walk_every_legal_move
from tests.inference.test_incremental import Recorder as BaseRecorder


def wrapping_net(l1: int = 64, seed: int = 5) -> sfnnv5.SFNNv5IntegerNet:
    """A random sfnnv5 net whose sums leave their types: FT weights and bias near ±2^15 (the
    int16 accumulators wrap), PSQT weights near ±2^31 (the int32 PSQT sums wrap), and layer
    biases near ±2^31 (fc_0, fc_1 and fc_2 sums and the final sums wrap)."""
    net = random_int_net(l1, seed)
    g = torch.Generator().manual_seed(seed)

    def big(t, lo, hi):
        return torch.randint(lo, hi, t.shape, generator=g).to(t.dtype)

    net.ft_weight = big(net.ft_weight, -32768, 32768)
    net.ft_bias = big(net.ft_bias, -32768, 32768)
    net.psqt = big(net.psqt, -(1 << 31), 1 << 31)
    for name in ("fc0_bias", "fc1_bias", "fc2_bias"):  # ±(2^31 − up to 2^19): many sums cross the edge
        b = getattr(net, name)
        sign = big(b, 0, 2).to(torch.int64) * 2 - 1
        setattr(net, name, (sign * ((1 << 31) - 1 - big(b, 0, 1 << 19).to(torch.int64))).to(torch.int32))
    return net


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: the batch checks are many small products, which a second thread only
    slows down on a shared machine (measured at load 2.5: this module in 61 s with two threads,
    10 s with one); restored after the module."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def nets():
    return {"random": random_int_net(64, seed=2), "wrapping": wrapping_net(64, seed=5)}


NETS = ["random", "wrapping"]


def _boards(packed: list[bytes]) -> torch.Tensor:
    return torch.frombuffer(bytearray(b"".join(packed)), dtype=torch.uint8).view(-1, 32)


class Recorder(BaseRecorder):
    """test_incremental's Recorder (after every push and pop: the incremental board against
    python-chess, the accumulators, the eval), checked against the sfnnv5 batch path in one call."""

    def __init__(self, net):
        super().__init__(net)
        self.wrapped_ft = 0  # accumulator rows whose int32 FT sums leave int16 (wrapped at eval)

    def check(self) -> int:
        net = self.net
        boards = _boards(self.packed)
        stm, nstm = net.features.encode(boards)
        bucket = net.buckets.of(boards)
        ref = sfnnv5.forward_int(net, stm, nstm, bucket)
        L1 = net.arch["hidden"]
        acc = torch.stack(self.accs)  # (N, 2, L1 + 8) int32, stm first
        assert acc.dtype == torch.int32 and acc.shape[1:] == (2, L1 + 8)
        for p, idx in ((0, stm), (1, nstm)):
            a_ref, ps_ref = sfnnv5.accumulate(net, idx)
            a, ps = sfnnv5.split_accumulator(net, acc[:, p])
            bad = (a != a_ref.to(torch.int64)).any(1) | (ps != ps_ref).any(1)
            assert not bad.any(), f"perspective {p}: accumulators differ after {self.where[int(bad.nonzero()[0])]}"
            raw = acc[:, p, :L1].to(torch.int64)  # the FT columns: the sum before the int16 wrap
            self.wrapped_ft += int(((raw < -32768) | (raw > 32767)).any(1).sum())
        evals = torch.tensor(self.evals, dtype=torch.int64)
        if not torch.equal(evals, ref):
            i = int((evals != ref).nonzero()[0])
            raise AssertionError(f"eval {self.evals[i]} != batch {int(ref[i])} after {self.where[i]}")
        # the torch path from the same accumulators, all positions in one call
        assert torch.equal(sfnnv5.forward_from_accumulators(net, acc[:, 0], acc[:, 1], bucket), ref)
        # and the batch evaluator from packed boards (feature encoding included)
        assert torch.equal(sfnnv5.evaluate(net, boards), ref)
        n = len(self.accs)
        self.accs, self.evals, self.packed, self.where = [], [], [], []
        return n


def test_kind_spec_flags():
    k = kinds.get("sfnnv5")
    assert k.incremental and k.sparse_forward is None
    assert k.forward_from_accumulators is sfnnv5.forward_from_accumulators
    assert k.accumulator_table is sfnnv5.accumulator_table and k.accumulator_layers is sfnnv5.accumulator_layers
    assert all(kinds.get(n).incremental and kinds.get(n).sparse_forward is not None
               for n in ("perspective", "deep", "tiny"))


def test_block_sparse_l1_still_refuses_sfnnv5(nets):
    from nnue.inference.sparse_l1 import evaluate_sparse

    boards = _boards([pack_board(chess.Board())])
    with pytest.raises(ValueError, match="block-sparse"):
        evaluate_sparse(nets["random"], boards)


def test_accumulator_table_layout(nets):
    net = nets["random"]
    w, b = sfnnv5.accumulator_table(net)
    L1 = net.arch["hidden"]
    assert w.dtype == b.dtype == np.int32 and w.shape == (net.arch["num_inputs"], L1 + 8) and b.shape == (L1 + 8,)
    assert np.array_equal(w[:, :L1], net.ft_weight.numpy()) and np.array_equal(w[:, L1:], net.psqt.numpy())
    assert np.array_equal(b[:L1], net.ft_bias.numpy()) and not b[L1:].any()
    assert sfnnv5.accumulator_table(net)[0] is w  # made once
    net.ft_bias.add_(1)  # changed in place: made again
    try:
        assert np.array_equal(sfnnv5.accumulator_table(net)[1][:L1], net.ft_bias.numpy())
    finally:
        net.ft_bias.sub_(1)


@pytest.mark.parametrize("which", NETS)
def test_sample_games_every_push_and_pop(which, nets):
    net = nets[which]
    rec = Recorder(net)
    checked = refreshes = 0
    special = {"castle": 0, "ep": 0, "promo": 0, "king": 0}
    for fen, moves in sample_games():
        board = chess.Board(fen)
        ms = []
        for u in moves:
            m = chess.Move.from_uci(u)
            special["castle"] += board.is_castling(m)
            special["ep"] += board.is_en_passant(m)
            special["promo"] += m.promotion is not None
            special["king"] += board.piece_type_at(m.from_square) == chess.KING
            ms.append(m)
            board.push(m)
        inc = play(net, chess.Board(fen), ms, rec)
        refreshes += sum(inc.refreshes)
        checked += rec.check()
    assert checked > 8000
    assert special["castle"] > 20 and special["ep"] >= 3 and special["promo"] > 10
    # HalfKAv2_hm: every own king move (castling included) refreshes that perspective
    assert refreshes == special["king"]
    if which == "wrapping":
        assert rec.wrapped_ft > 1000  # the int16 wrap is exercised, not only the easy range


def test_wrapping_net_wraps_every_sum(nets):
    """The wrapping net's batch path really wraps: int16 accumulators, int32 PSQT sums and the
    int32 layer sums (else the tests above would not test the wrap)."""
    net = nets["wrapping"]
    boards = _boards([pack_board(chess.Board(f)) for f, _ in sample_games(40)])
    stm, nstm = net.features.encode(boards)
    idx = stm.long()
    exact = net.ft_weight.long()[idx.clamp(min=0)].mul((idx >= 0).unsqueeze(-1)).sum(1) + net.ft_bias.long()
    assert ((exact < -32768) | (exact > 32767)).any()
    ps = net.psqt.long()[idx.clamp(min=0)].mul((idx >= 0).unsqueeze(-1)).sum(1)
    assert ((ps < -(1 << 31)) | (ps >= 1 << 31)).any()
    # and the one-position path takes its wrap branches for this net, not for the plain one
    assert all(st[2] and st[5] for st in sfnnv5.accumulator_layers(net))
    assert not any(st[2] or st[5] for st in sfnnv5.accumulator_layers(nets["random"]))
    a, p = sfnnv5.accumulate(net, stm)
    assert torch.equal(a.long(), (exact + 32768) % 65536 - 32768)
    assert torch.equal(p, (ps + (1 << 31)) % (1 << 32) - (1 << 31))
    # fc_0's sums of the batch path leave int32 before its wrap (fc_1, fc_2 alike by construction)
    x0 = sfnnv5.transform(a, sfnnv5.accumulate(net, nstm)[0])
    b = net.buckets.of(boards)
    s0 = torch.einsum("nk,nok->no", x0.double(), net.fc0_weight.double()[b]).long() + net.fc0_bias.long()[b]
    assert ((s0 < -(1 << 31)) | (s0 >= 1 << 31)).any()


@pytest.mark.parametrize("which", NETS)
def test_random_games_table_and_encode_modes(which, nets):
    net = nets[which]
    rnd = random.Random(11)
    rec = Recorder(net)
    for game in range(4):
        board = chess.Board()
        moves = []
        for _ in range(160):
            legal = list(board.legal_moves)
            if not legal:
                break
            special = [m for m in legal if board.is_capture(m) or m.promotion]
            m = rnd.choice(special if special and rnd.random() < 0.3 else legal)
            moves.append(m)
            board.push(m)
        a = play(net, chess.Board(), moves, rec, mode="table", as_uci=game % 2 == 0)
        b = play(net, chess.Board(), moves, rec, mode="encode")
        assert a.pushes == b.pushes == len(moves)
        assert min(a.refreshes) > 0 and min(b.refreshes) > 0
        rec.check()


@pytest.mark.parametrize("which", NETS)
@pytest.mark.parametrize("pos", sorted(TARGETED))
def test_every_legal_move_of_targeted_positions(pos, which, nets):
    """Castling both sides for both colours, en passant, promotions with and without capture,
    king moves: every legal move and back, two plies deep for the special positions; the mover's
    perspective is refreshed exactly on its own king moves."""
    net = nets[which]
    rec = Recorder(net)
    walk_every_legal_move(net, "halfkav2_hm", pos, rec)
    assert rec.check() > 2


@pytest.mark.parametrize("pos", sorted(CHESS960))
def test_chess960_castling_king_takes_rook(pos, nets):
    net = nets["random"]
    board = chess.Board(CHESS960[pos], chess960=True)
    rec = Recorder(net)
    inc = IncrementalAccumulator(net, pack_board(board))
    castles = [m for m in board.legal_moves if board.is_castling(m)]
    assert castles
    for m in castles:
        uci = board.uci(m)
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


@pytest.mark.parametrize("which", NETS)
def test_evaluate_one_and_small_batches_equal_the_batch_path(which, nets, monkeypatch):
    net = nets[which]
    boards = _sample_boards()
    ref = sfnnv5.evaluate(net, boards)
    one = torch.tensor([evaluate_one(net, b) for b in boards], dtype=torch.int64)
    assert torch.equal(one, ref)
    # api.evaluate takes the one-position path for small batches (the batch evaluator is not
    # called: it is replaced by one that fails) and the batch path above SMALL_BATCH
    calls = []
    batch = sfnnv5.evaluate
    kind = kinds.get("sfnnv5")
    monkeypatch.setitem(kinds.KINDS, "sfnnv5", dataclasses.replace(
        kind, evaluate=lambda *a, **k: calls.append(1) or batch(*a, **k)))
    for n in (1, 2, api.SMALL_BATCH):
        for s in (0, n, 700):
            assert torch.equal(api.evaluate(net, boards[s:s + n]), ref[s:s + n])
    assert not calls
    assert torch.equal(api.evaluate(net, boards[:api.SMALL_BATCH + 1]), ref[:api.SMALL_BATCH + 1])
    assert calls == [1]


def test_evaluate_one_declines_what_the_batch_path_must_judge(nets):
    net = nets["random"]
    no_black_king = pack_board(chess.Board("8/8/8/8/8/8/8/K7 w - - 0 1"))
    assert evaluate_one(net, no_black_king) is None
    with pytest.raises(ValueError):
        api.evaluate(net, _boards([no_black_king]))
    with pytest.raises(ValueError, match="king"):
        IncrementalAccumulator(net, no_black_king)


@pytest.mark.parametrize("l1", [32, 1024, 1056])
def test_other_l1_sizes(l1):
    """The smallest L1, Stockfish 15.1's (fc_0 of the one-position path in float32, at its
    bound) and the next one, 1,056, where that product runs in float64."""
    net = random_int_net(l1, seed=l1)
    rec = Recorder(net)
    board = chess.Board()
    rnd = random.Random(l1)
    moves = []
    for _ in range(60):
        m = rnd.choice(list(board.legal_moves))
        moves.append(m)
        board.push(m)
    play(net, chess.Board(), moves, rec)
    assert rec.check() == 121
    assert sfnnv5.accumulator_layers(net)[0][0].dtype == (np.float64 if l1 > 1031 else np.float32)


def test_stockfish_builtin_net(tmp_path):
    """The real Stockfish 15.1 net (L1 1,024, written by the engine's ``export_net``): incremental
    evals over two sample games equal the batch path (which tests/engines checks against the
    engine's own trace)."""
    from tests.engines.stockfish import export_builtin, require_stockfish_15_1

    engine = require_stockfish_15_1()
    net = sfnnv5.read_nnue(export_builtin(engine, tmp_path / "builtin.nnue"))
    rec = Recorder(net)
    for fen, moves in sample_games(2):
        play(net, chess.Board(fen), [chess.Move.from_uci(u) for u in moves], rec)
    assert rec.check() > 100
