"""Cross-check the independent C reference evaluator (tests/c/nnue_eval.c) against py_eval."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.cref import NUM_FEATURES, compile_c_eval, py_eval, run_c_eval, write_net_bin
from tests.samples import CUT, selfplay

N_POSITIONS = 300


@pytest.fixture(scope="module")
def c_eval(tmp_path_factory) -> Path:
    """Path to the compiled nnue_eval executable (skips the module's tests without gcc)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not available")
    return compile_c_eval(tmp_path_factory.mktemp("cbuild"))


@pytest.fixture(scope="module")
def fens() -> list[str]:
    """300 FENs: every 40th line of the self-play cut's bullet text ('FEN | score | result' lines)."""
    with selfplay(f"{CUT}.txt").open() as fh:
        lines = [line for i, line in enumerate(fh) if i % 40 == 0]
    out = [line.split("|")[0].strip() for line in lines if line.strip()][:N_POSITIONS]
    assert len(out) == N_POSITIONS
    return out


def random_net(seed: int, hidden: int, buckets: int, activation: str):
    """Random int16 net (l0w [768, H], l0b [H], l1w [B, L1IN], l1b [B]) whose accumulators fit int16.

    With at most 32 active features, |acc| <= 767 + 32 * 1000 = 32767.
    """
    rng = np.random.default_rng(seed)
    l1in = hidden if activation == "pairwise_crelu" else 2 * hidden
    l0w = rng.integers(-1000, 1001, size=(NUM_FEATURES, hidden)).astype(np.int16)
    l0b = rng.integers(-767, 768, size=hidden).astype(np.int16)
    l1w = rng.integers(-127, 128, size=(buckets, l1in)).astype(np.int16)
    l1b = rng.integers(-20000, 20001, size=buckets).astype(np.int16)
    return l0w, l0b, l1w, l1b


CASES = [
    ("crelu", 7, 1),
    ("crelu", 16, 8),
    ("screlu", 7, 8),
    ("screlu", 16, 1),
    ("pairwise_crelu", 8, 8),
    ("pairwise_crelu", 16, 1),
]


@pytest.mark.parametrize("activation,hidden,buckets", CASES)
def test_c_matches_python(c_eval, fens, tmp_path, activation, hidden, buckets):
    net = random_net(1234 + hidden + 31 * buckets, hidden, buckets, activation)
    net_bin = tmp_path / "net.bin"
    write_net_bin(net_bin, *net)
    assert net_bin.stat().st_size % 64 == 0

    c_out = run_c_eval(c_eval, net_bin, hidden, buckets, activation, fens)
    py_out = [py_eval(*net, activation, fen) for fen in fens]

    mismatches = [(f, c, p) for f, c, p in zip(fens, c_out, py_out) if c != p]
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"
    assert any(v > 0 for v in c_out) and any(v < 0 for v in c_out)


def test_blank_lines_and_extra_fields_ignored(c_eval, fens, tmp_path):
    net = random_net(7, 8, 8, "crelu")
    net_bin = tmp_path / "net.bin"
    write_net_bin(net_bin, *net)
    proc = subprocess.run(
        [str(c_eval), str(net_bin), "8", "8", "crelu"],
        input=f"\n{fens[0]}\n\n{fens[1].split()[0]} {fens[1].split()[1]}\n",
        capture_output=True, text=True, check=True,
    )
    assert [int(x) for x in proc.stdout.split()] == [py_eval(*net, "crelu", f) for f in fens[:2]]


@pytest.mark.parametrize("delta", [-64, -2, 2, 64])
def test_wrong_size_net_rejected(c_eval, fens, tmp_path, delta):
    net = random_net(5, 16, 8, "screlu")
    net_bin = tmp_path / "net.bin"
    write_net_bin(net_bin, *net)
    data = net_bin.read_bytes()
    net_bin.write_bytes(data[:delta] if delta < 0 else data + b"\0" * delta)
    proc = subprocess.run(
        [str(c_eval), str(net_bin), "16", "8", "screlu"],
        input=fens[0] + "\n", capture_output=True, text=True,
    )
    assert proc.returncode != 0
    assert "expected" in proc.stderr
    assert proc.stdout == ""


def test_wrong_shape_arguments_rejected(c_eval, tmp_path):
    """A correctly written net read with the wrong H (a different expected size) is rejected."""
    net = random_net(6, 16, 1, "crelu")
    net_bin = tmp_path / "net.bin"
    write_net_bin(net_bin, *net)
    proc = subprocess.run([str(c_eval), str(net_bin), "32", "1", "crelu"],
                          input="", capture_output=True, text=True)
    assert proc.returncode != 0 and proc.stderr
