"""The compiled sfnnv5 kernel (inference/kinds/sfnnv5/compiled.py, ``values``) against the torch path of
inference/kinds/sfnnv5/net.py (torch.equal, bit for bit): the sample games' positions and our self-play cut
(every piece count, so every layer stack), random boards, odd batch sizes, both sides to move,
L1 of 32, 1,024 and 1,056, a net whose feature-transformer sums leave int16 and whose PSQT,
fc_0, fc_1, fc_2 and final sums cross int32 (checked to happen, so the wraps are exercised),
the backend argument and the fallback, bad boards named by row, weights changed in place, and
Stockfish 15.1's own net (``export_net``; skipped without the engine)."""
from __future__ import annotations

import dataclasses
import random

import pytest
import torch

pytest.importorskip("numba")

from nnue.inference import compiled as core  # noqa: E402
from nnue.inference.kinds import sfnnv5  # noqa: E402
from nnue.inference.kinds.sfnnv5 import compiled  # noqa: E402
from nnue.inference.api import boards_from_fens  # noqa: E402
from tests.engines.stockfish import export_builtin, require_stockfish_15_1  # noqa: E402
from tests.engines.test_sfnnv5 import random_int_net  # noqa: E402
from tests.inference.test_incremental_sfnnv5 import wrapping_net  # noqa: E402
from tests.samples import SAMPLE, selfplay  # noqa: E402

I32 = 1 << 31


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _fens(path) -> list[str]:
    return [line[4:].strip() for line in open(path) if line.startswith("fen ")]


@pytest.fixture(scope="module")
def sample_boards():
    """The bundled sample's 4,015 positions and every 4th of the self-play cut (which holds every
    piece count 3..32): every layer stack, both sides to move."""
    return torch.cat([boards_from_fens(_fens(SAMPLE)), boards_from_fens(_fens(selfplay("sf15-n2000-s11-cut.plain"))[::4])])


def random_fens(n: int, seed: int) -> list[str]:
    """Random placements: one king a side, 0..30 other pieces anywhere else (pawns on any rank:
    the features do not care), either side to move."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        sq = [""] * 64
        k = rng.sample(range(64), 2 + rng.randint(0, 30))
        sq[k[0]], sq[k[1]] = "K", "k"
        for s in k[2:]:
            sq[s] = rng.choice("PNBRQpnbrq")
        ranks = []
        for r in range(7, -1, -1):
            row, gap = "", 0
            for f in range(8):
                c = sq[8 * r + f]
                if c:
                    row += (str(gap) if gap else "") + c
                    gap = 0
                else:
                    gap += 1
            ranks.append(row + (str(gap) if gap else ""))
        out.append("/".join(ranks) + (" w" if rng.random() < 0.5 else " b") + " - - 0 1")
    return out


@pytest.fixture(scope="module")
def random_boards():
    return boards_from_fens(random_fens(1500, seed=7))


def torch_values(net, boards):
    return sfnnv5.values(net, boards, backend="torch")


def check_equal(net, boards):
    """The compiled values, evals and layer stacks equal the torch path's (torch.equal)."""
    want = torch_values(net, boards)
    got, bucket = compiled.values(net, boards)
    if not torch.equal(got, want):
        i = int((got != want).nonzero()[0])
        raise AssertionError(f"board {i}: compiled {int(got[i])} != torch {int(want[i])}")
    assert torch.equal(bucket, net.buckets.of(boards))
    assert torch.equal(sfnnv5.evaluate(net, boards, backend="compiled"), sfnnv5.to_cp(want))
    return want, bucket


def crossings(net, boards) -> dict[str, int]:
    """How many positions have a sum outside its engine type before the wrap (the torch steps
    without the wraps, exact in float64/int64): the raw feature-transformer sums (int16), the
    PSQT sums and their difference, fc_0, fc_1, fc_2, the skip product, ``psqt + positional``
    (int32)."""
    stm, nstm = net.features.encode(boards)
    bucket = net.buckets.of(boards)
    w = torch.cat([torch.zeros(1, net.ft_weight.shape[1], dtype=torch.float64), net.ft_weight.double()])
    p = torch.cat([torch.zeros(1, 8, dtype=torch.float64), net.psqt.double()])
    out: dict[str, int] = {}
    outside = lambda t, lim: (t < -lim) | (t >= lim)  # noqa: E731
    raw, ps = [], []
    for idx in (stm, nstm):
        i = idx.long().clamp(min=-1) + 1
        raw.append(torch.nn.functional.embedding_bag(i, w, mode="sum") + net.ft_bias.double())
        ps.append(torch.nn.functional.embedding_bag(i, p, mode="sum").to(torch.int64).gather(1, bucket[:, None])[:, 0])
    out["ft"] = int((outside(raw[0], 1 << 15) | outside(raw[1], 1 << 15)).any(1).sum())
    out["psqt"] = int((outside(ps[0], I32) | outside(ps[1], I32)).sum())
    a_s, _ = sfnnv5.accumulate(net, stm)
    a_n, _ = sfnnv5.accumulate(net, nstm)
    x0 = sfnnv5.transform(a_s, a_n).double()
    s0 = torch.einsum("nk,nmk->nm", x0, net.fc0_weight.double()[bucket]).to(torch.int64) + net.fc0_bias.long()[bucket]
    out["fc0"] = int(outside(s0, I32).any(1).sum())
    s0 = sfnnv5.net._wrap(s0, 32)
    h = s0[:, :15]
    x1 = torch.cat([torch.clamp((h * h) >> 19, max=127), (h >> 6).clamp(0, 127), torch.zeros_like(h[:, :2])], 1)
    s1 = torch.einsum("nk,nmk->nm", x1.double(), net.fc1_weight.double()[bucket]).to(torch.int64) + net.fc1_bias.long()[bucket]
    out["fc1"] = int(outside(s1, I32).any(1).sum())
    x2 = (sfnnv5.net._wrap(s1, 32) >> 6).clamp(0, 127)
    s2 = (x2 * net.fc2_weight.long()[bucket, 0]).sum(1) + net.fc2_bias.long()[bucket, 0]
    out["fc2"] = int(outside(s2, I32).sum())
    out["skip"] = int(outside(s0[:, 15] * sfnnv5.net.SKIP_NUM, I32).sum())
    _, parts = sfnnv5.value_from_indices(net, stm, nstm, bucket, return_parts=True)
    out["psqt_diff"] = int(outside(ps[0] - ps[1], I32).sum())
    out["final"] = int(outside(parts["psqt"] + parts["positional"], I32).sum())
    return out


# -- equality on real and random positions --------------------------------------------------------

@pytest.mark.parametrize("l1", [32, 1024, 1056])
def test_sample_positions_equal_torch_path(l1, sample_boards):
    net = random_int_net(l1, seed=l1)
    want, bucket = check_equal(net, sample_boards)
    assert set(bucket.tolist()) == set(range(8)), "every layer stack"
    btm = sample_boards[:, 24] >> 7
    assert 0 < int(btm.sum()) < len(sample_boards), "both sides to move"
    assert len(set(want.tolist())) > len(want) // 10, "evals that vary (not a constant net)"


@pytest.mark.parametrize("l1", [32, 1056])
def test_random_boards_and_odd_batch_sizes(l1, random_boards):
    net = random_int_net(l1, seed=11)
    want, bucket = check_equal(net, random_boards)
    assert set(bucket.tolist()) == set(range(8))
    for n in (1, 3, 7, 33, 257):
        assert torch.equal(sfnnv5.values(net, random_boards[:n], backend="compiled"), want[:n])
    assert torch.equal(sfnnv5.values(net, random_boards[1::3], backend="compiled"), want[1::3])  # strided
    assert sfnnv5.values(net, random_boards[:0], backend="compiled").shape == (0,)


@pytest.mark.parametrize("l1", [32, 1024, 1056])
def test_wrapping_net_equals_torch_path(l1, sample_boards, random_boards):
    """Every wrap the engine does happens here, in many positions, and the compiled path still
    equals the torch path bit for bit."""
    net = wrapping_net(l1, seed=l1 + 1)
    # fc_2's bias at the int32 edge on the side its weights push towards (wrapping_net's random
    # ±(2^31 − up to 2^19) rarely lets 32 inputs ≤ 127 cross it)
    up = net.fc2_weight.long().sum(2)[:, 0] > 0
    net.fc2_bias = torch.where(up, I32 - 1 - 100, -I32 + 100).to(torch.int32)[:, None]
    boards = torch.cat([sample_boards[::3], random_boards])
    check_equal(net, boards)
    c = crossings(net, boards[:600])
    for k in ("ft", "psqt", "psqt_diff", "fc0", "fc1", "fc2", "skip", "final"):
        assert c[k] > 0, f"no position crosses at {k}: {c}"


# -- the API: backends, fallback, errors, cache --------------------------------------------------

def test_default_backend_is_compiled_and_torch_selectable(sample_boards, monkeypatch):
    net = random_int_net(64, seed=4)
    boards = sample_boards[:300]
    want = torch_values(net, boards)
    calls = []
    real = compiled.values
    monkeypatch.setattr(compiled, "values", lambda *a: calls.append(1) or real(*a))
    assert torch.equal(sfnnv5.values(net, boards), want) and calls == [1]
    assert torch.equal(sfnnv5.evaluate(net, boards), sfnnv5.to_cp(want)) and calls == [1, 1]
    assert torch.equal(sfnnv5.evaluate(net, boards, backend="torch"), sfnnv5.to_cp(want)) and calls == [1, 1]
    with pytest.raises(ValueError, match="backend"):
        sfnnv5.evaluate(net, boards, backend="fast")


def test_fallback_where_the_kernel_does_not_apply(sample_boards):
    net = random_int_net(64, seed=5)
    boards = sample_boards[:200]
    want = torch_values(net, boards)
    odd = dataclasses.replace(net, fc0_weight=net.fc0_weight.to(torch.int16))  # not the engine's dtype
    assert compiled.applicable(net) and not compiled.applicable(odd)
    assert compiled.values(odd, boards) is None
    assert torch.equal(sfnnv5.values(odd, boards), want)  # "auto": the torch path
    with pytest.raises(RuntimeError, match="does not apply"):
        sfnnv5.values(odd, boards, backend="compiled")


def test_bad_boards_named_by_row(sample_boards):
    net = random_int_net(32, seed=6)
    bad = sample_boards[:40].clone()
    bad[17, 8:24] = 0  # every piece a white pawn: no kings
    with pytest.raises(ValueError, match="board 17: a king-relative feature set needs exactly one king"):
        sfnnv5.values(net, bad, backend="compiled")
    with pytest.raises(ValueError, match="exactly one king"):
        sfnnv5.values(net, bad, backend="torch")
    full = sample_boards[:10].clone()
    full[4, :8] = 255
    with pytest.raises(ValueError, match="board 4: more than 32 occupied squares"):
        sfnnv5.values(net, full, backend="compiled")
    with pytest.raises(ValueError, match="boards must be"):
        sfnnv5.values(net, sample_boards[:3, :16], backend="compiled")


def test_weights_changed_in_place_are_seen(sample_boards):
    net = random_int_net(64, seed=8)
    boards = sample_boards[:200]
    before = sfnnv5.values(net, boards, backend="compiled")
    for name in ("ft_weight", "psqt", "fc0_weight", "fc1_bias", "fc2_weight"):
        getattr(net, name).mul_(-1)
        got = sfnnv5.values(net, boards, backend="compiled")
        assert torch.equal(got, torch_values(net, boards)), name
    assert not torch.equal(got, before)


# -- Stockfish 15.1's own net ---------------------------------------------------------------------

def test_stockfish_15_1_builtin_net(tmp_path_factory, sample_boards, random_boards):
    engine = require_stockfish_15_1()
    net = sfnnv5.read_nnue(export_builtin(engine, tmp_path_factory.mktemp("sf") / "builtin.nnue"))
    assert net.arch["hidden"] == 1024
    _, bucket = check_equal(net, torch.cat([sample_boards, random_boards]))
    assert set(bucket.tolist()) == set(range(8))


def test_small_batches_through_the_api(sample_boards, monkeypatch):
    """Calls of at most SMALL_BATCH positions take sfnnv5.evaluate_small (the compiled kernel),
    with the batch path's integers; without numba's path (DEFAULT_BACKEND "torch") the API
    evaluates one by one from scratch and gets the same."""
    from nnue.inference import api, backends

    net = random_int_net(64, seed=9)
    boards = sample_boards[:40]
    want = sfnnv5.evaluate(net, boards, backend="torch")
    assert sfnnv5.evaluate_small(net, boards[:5]) == want[:5].tolist()
    for n in (1, 3, api.SMALL_BATCH):
        assert torch.equal(api.evaluate(net, boards[7:7 + n]), want[7:7 + n])
    monkeypatch.setattr(backends, "DEFAULT_BACKEND", "torch")
    assert sfnnv5.evaluate_small(net, boards[:5]) is None
    assert torch.equal(api.evaluate(net, boards[:3]), want[:3])


def test_rows_off_a_cache_line_are_copied_aligned(sample_boards):
    """A net whose feature-transformer rows start off a 64-byte boundary (as read from a .nnue
    file's bytes) gets an aligned copy for the kernel, with the same values."""
    net = random_int_net(64, seed=10)
    boards = sample_boards[:300]
    want = torch_values(net, boards)
    raw = bytearray(net.ft_weight.numel() * 2 + 2)
    odd = torch.frombuffer(raw, dtype=torch.int16, offset=2, count=net.ft_weight.numel()).view(net.ft_weight.shape)
    odd.copy_(net.ft_weight)
    net.ft_weight = odd
    assert odd.data_ptr() % 64 != 0
    a = core.aligned64(odd.numpy())
    assert a.ctypes.data % 64 == 0 and (a == odd.numpy()).all()
    assert torch.equal(sfnnv5.values(net, boards, backend="compiled"), want)
