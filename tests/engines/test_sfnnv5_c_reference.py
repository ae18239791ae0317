"""The sfnnv5 evaluator against the independent C reference (tests/c/sfnnv5_eval.c, built with
gcc): equal values (torch.equal) on sample positions, for random small nets whose accumulators
wrap around int16 and whose layer sums hit every clamp, and for Stockfish 15.1's own net when
the engine is installed."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from nnue.inference.kinds import sfnnv5
from nnue.inference.api import boards_from_fens
from nnue.inference.kinds.sfnnv5.codec import nnue_bytes

from .positions import sample_fens
from .stockfish import export_builtin, stockfish_path
from .test_sfnnv5 import random_int_net

C_SOURCE = Path(__file__).resolve().parents[1] / "c" / "sfnnv5_eval.c"


@pytest.fixture(scope="module")
def c_sfnnv5(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: the C reference cannot be built")
    exe = tmp_path_factory.mktemp("csf") / "sfnnv5_eval"
    r = subprocess.run([gcc, "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(C_SOURCE)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def c_values(exe, net_file, fens) -> torch.Tensor:
    r = subprocess.run([str(exe), str(net_file)], input="\n".join(fens) + "\n", capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return torch.tensor([int(x) for x in r.stdout.split()], dtype=torch.int64)


@pytest.mark.parametrize("seed", [0, 1])
def test_random_nets_with_wrapping_accumulators(c_sfnnv5, tmp_path, seed):
    net = random_int_net(64, seed=seed)
    with torch.no_grad():  # some rows large enough that a bias + 32 of them leave int16
        g = torch.Generator().manual_seed(seed)
        rows = torch.randint(0, net.ft_weight.shape[0], (4000,), generator=g)
        net.ft_weight[rows] = torch.randint(-12000, 12000, (4000, 64), generator=g).to(torch.int16)
        net.psqt[rows] = torch.randint(-(2**28), 2**28, (4000, 8), generator=g).to(torch.int32)
    p = tmp_path / "net.nnue"
    p.write_bytes(nnue_bytes(net))
    fens = sample_fens(1500)
    boards = boards_from_fens(fens)
    stm, _ = net.features.encode(boards)
    raw = sum(net.ft_weight[i.clamp(min=0).long()].to(torch.int64) * (i >= 0).view(-1, 32, 1) for i in [stm])
    unwrapped = raw.sum(1) + net.ft_bias.to(torch.int64)
    assert int(unwrapped.abs().max()) > 32767  # the int16 wrap is exercised
    assert torch.equal(sfnnv5.values(net, boards), c_values(c_sfnnv5, p, fens))


def test_stockfish_builtin_net(c_sfnnv5, tmp_path):
    engine = stockfish_path()
    if engine is None:
        pytest.skip("Stockfish 15.1 is not installed (scripts/ensure_stockfish.sh); its built-in net is the input")
    p = export_builtin(engine, tmp_path / "builtin.nnue")
    from nnue.inference.kinds.sfnnv5 import read_nnue

    fens = sample_fens(1000)
    assert torch.equal(sfnnv5.values(read_nnue(p), boards_from_fens(fens)), c_values(c_sfnnv5, p, fens))
