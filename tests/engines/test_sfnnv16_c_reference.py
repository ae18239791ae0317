"""The sfnnv16 evaluator against the independent C reference (tests/c/sfnnv16_eval.c, built with
gcc: its own threat, pawn-pair and HalfKAv2_hm features from the board, its own LEB128 reader):
equal (psqt, positional) (torch.equal) on sample and Chess960 positions, for random small nets
whose accumulators wrap around int16 and whose layer sums hit every clamp, and for the official
Stockfish 19 net when scripts/ensure_sf19.sh has fetched it."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from nnue.inference.kinds import sfnnv16
from nnue.inference.api import boards_from_fens

from ..samples import selfplay
from .positions import sample_fens
from .sf19 import require_official_net

C_SOURCE = Path(__file__).resolve().parents[1] / "c" / "sfnnv16_eval.c"


def random_sfnnv16_net(hidden: int = 64, seed: int = 0, wide: bool = False) -> sfnnv16.SFNNv16IntegerNet:
    """A random integer sfnnv16 net of L1 ``hidden``; ``wide``: feature-transformer rows large
    enough that the int16 accumulator wraps and layer sums that reach every clamp."""
    g = torch.Generator().manual_seed(seed)

    def ri(lo, hi, *shape, dtype):
        return torch.randint(lo, hi, shape, generator=g).to(dtype)

    ft = 12000 if wide else 150
    arch = sfnnv16.make_sfnnv16_arch(hidden=hidden, description=f"random {seed}")
    return sfnnv16.SFNNv16IntegerNet(
        arch, sfnnv16.SCHEME, ri(-200, 400, hidden, dtype=torch.int16),
        ri(-128, 128, sfnnv16.INT8_INPUTS, hidden, dtype=torch.int8),
        ri(-5000, 5000, sfnnv16.INT8_INPUTS, 8, dtype=torch.int32),
        ri(-ft, ft, sfnnv16.PSQ_INPUTS, hidden, dtype=torch.int16),
        ri(-(2 ** 27), 2 ** 27, sfnnv16.PSQ_INPUTS, 8, dtype=torch.int32),
        ri(-40000, 40000, 8, 32, dtype=torch.int32), ri(-128, 128, 8, 32, hidden, dtype=torch.int8),
        ri(-40000, 40000, 8, 32, dtype=torch.int32), ri(-128, 128, 8, 32, 64, dtype=torch.int8),
        ri(-40000, 40000, 8, 1, dtype=torch.int32), ri(-128, 128, 8, 1, 128, dtype=torch.int8))


@pytest.fixture(scope="module")
def c_sfnnv16(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C reference cannot be built")
    exe = tmp_path_factory.mktemp("csf16") / "sfnnv16_eval"
    r = subprocess.run([gcc, "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(C_SOURCE)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def c_parts(exe, net_file, fens) -> torch.Tensor:
    """(N, 2) int64: the C reference's (psqt, positional) of each FEN."""
    r = subprocess.run([str(exe), str(net_file)], input="\n".join(fens) + "\n", capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return torch.tensor([int(x) for x in r.stdout.split()], dtype=torch.int64).view(-1, 2)


def our_parts(net, fens) -> torch.Tensor:
    boards = boards_from_fens(fens)
    stm, nstm = net.features.encode(boards)
    _, parts = sfnnv16.value_from_indices(net, stm, nstm, net.buckets.of(boards), True)
    return torch.stack([parts["psqt"], parts["positional"]], 1)


def unwrapped_sums(net, idx) -> torch.Tensor:
    """(N, L1) float64: bias + Σ rows of each position's features, not wrapped (exact below 2^53)."""
    w = torch.cat([torch.zeros(1, net.arch["hidden"], dtype=torch.float64), net.threat_weight.double(),
                   net.ft_weight.double()])
    return torch.nn.functional.embedding_bag(idx.long().clamp(min=-1) + 1, w, mode="sum") + net.ft_bias.double()


def _chess960_fens(n):
    out = []
    for line in selfplay("sf15-960-xfen-s2.plain").read_text().splitlines():
        if line.startswith("fen ") and len(out) < n:
            out.append(line[4:].strip())
    return out


@pytest.mark.parametrize("seed,hidden", [(0, 64), (1, 128)])
def test_random_nets_with_wrapping_accumulators(c_sfnnv16, tmp_path, seed, hidden):
    net = random_sfnnv16_net(hidden, seed, wide=True)
    p = tmp_path / "net.nnue"
    p.write_bytes(net.raw_bytes())
    fens = sample_fens(600) + _chess960_fens(200)
    boards = boards_from_fens(fens)
    stm, _ = net.features.encode(boards)
    assert int(unwrapped_sums(net, stm).abs().max()) > 32767  # the int16 wrap is exercised
    ours = our_parts(net, fens)
    assert torch.equal(ours, c_parts(c_sfnnv16, p, fens))
    assert len(set(ours[:, 1].tolist())) > 50  # not a constant net


def test_official_net(c_sfnnv16):
    p = require_official_net()
    net = sfnnv16.read_nnue(p)
    fens = sample_fens(500) + _chess960_fens(200)
    assert torch.equal(our_parts(net, fens), c_parts(c_sfnnv16, p, fens))


def test_breaking_a_wrap_is_caught(c_sfnnv16, tmp_path):
    """The comparison can fail: an evaluator that saturates instead of wrapping differs."""
    net = random_sfnnv16_net(64, 3, wide=True)
    p = tmp_path / "net.nnue"
    p.write_bytes(net.raw_bytes())
    fens = sample_fens(300)
    boards = boards_from_fens(fens)
    stm, nstm = net.features.encode(boards)
    a_s, p_s = sfnnv16.accumulate(net, stm)
    a_n, p_n = sfnnv16.accumulate(net, nstm)

    def saturated(idx):
        return unwrapped_sums(net, idx).clamp(-32768, 32767).float()
    _, parts = sfnnv16.net._value(net, saturated(stm), p_s, saturated(nstm), p_n, net.buckets.of(boards), True)
    wrong = torch.stack([parts["psqt"], parts["positional"]], 1)
    assert not torch.equal(wrong, c_parts(c_sfnnv16, p, fens))
