"""The real Stockfish 19 (its WebAssembly build through our front end scripts/sf19-uci, and its
official net; scripts/ensure_sf19.sh installs both, these tests skip with the reason without
them), and our Stockfish 19 codec against them:

* the official net parses and is written back byte-identical (98,511,183 bytes);
* the engine's eval of the position in SF19.md with it: +71 internal units, bucket 7, and its
  load line;
* a net our codec wrote (the official one with every output bias raised) is the one the engine
  evaluates;
* nets the engine cannot load: Stockfish's own ERROR lines with the reason, status 1; through
  ``nnue match``: one line, status 2, shortened to the reason;
* no engine installed, no Node.js: one line saying how to install them, status 2;
* ``nnue match --engine`` drives it like any UCI engine at a fixed node count;
* nets written by nnue-pytorch's own serializer (scripts/npa_sf19_net.sh; skipped without one)
  are read and written back byte-identical (any L1), and the engine loads those of L1 1,024.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nnue.inference.kinds.sfnnv16 import codec as sfnnue19

from ..inference.test_sfnnue19 import random_tensors
from .positions import sample_fens
from .sf19 import (FRONT_END, eval_traces, internal_value, nnue_part, require_npa_nets, require_official_net,
                   require_sf19, run_uci, used_bucket)

SF19_FEN = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
LOAD = "info string NNUE evaluation using {} (109MiB, (86896, 1024, 32, 32, 1))"


@pytest.fixture(scope="module")
def official() -> Path:
    return require_official_net()


@pytest.fixture(scope="module")
def engine() -> str:
    return require_sf19()


@pytest.fixture(scope="module")
def raised(official, tmp_path_factory) -> Path:
    """The official net with every layer stack's output bias raised by 3,000, written by our codec."""
    t = sfnnue19.parse_nnue(official)
    t["fc2_bias"] += 3000
    p = tmp_path_factory.mktemp("sf19") / "raised.nnue"
    p.write_bytes(sfnnue19.nnue_bytes(t, description="official, output biases raised"))
    return p


def test_the_official_net_round_trips_byte_for_byte(official):
    data = official.read_bytes()
    t = sfnnue19.parse_nnue(official, data)
    assert len(data) == 98_511_183 and t["l1"] == 1024 and t["header_hash"] == 0xA85B2205
    assert t["description"] == "Network trained with the https://github.com/official-stockfish/nnue-pytorch trainer."
    assert t["threat_weight"].shape == (59_808, 1024) and t["fc0_weight"].shape == (8, 32, 1024)
    assert sfnnue19.nnue_bytes(t) == data


def test_the_engine_evaluates_sf19_mds_position(engine, official):
    traces, load = eval_traces(engine, [SF19_FEN, "rnbqkbnr/ppppp1pp/8/5p1Q/4P3/8/PPPP1PPP/RNB1KBNR b KQkq - 1 2"])
    assert load == LOAD.format("nn-1a298aa575a0.nnue")
    assert internal_value(traces[0]) == 71 and used_bucket(traces[0]) == 7
    part = nnue_part(traces[0])
    assert part.startswith("NNUE network contributions (Normalized, White to move)\n+------------+")
    assert part.endswith("+------------+------------+------------+------------+\n\n"
                         "NNUE evaluation          +71 (side to move, internal units)\n"
                         "NNUE evaluation        +0.25 (white side)\n")
    assert "|  7         |  -  0.18   |  +  0.43   |  +  0.25   | <-- this bucket is used" in part
    assert traces[1] == "Final evaluation: none (in check)\n"  # in check: no evaluation


def test_the_engine_evaluates_the_net_our_codec_writes(engine, raised):
    traces, load = eval_traces(engine, [SF19_FEN], eval_file=raised)
    assert load == LOAD.format(raised)
    # the positional part is (fwdOut · 600·16 / (128·64·2)) / 16: +3000 on fc_2's output is about +109
    assert 71 + 100 <= internal_value(traces[0]) <= 71 + 115, traces[0]


def test_a_net_the_engine_cannot_load_ends_it_with_its_own_lines(engine, official, tmp_path):
    small = tmp_path / "l1-256.nnue"
    small.write_bytes(sfnnue19.nnue_bytes(random_tensors(256, seed=2)))
    trunc = tmp_path / "truncated.nnue"
    with open(official, "rb") as f:
        trunc.write_bytes(f.read(20_000))
    ft_at = 12 + int.from_bytes(small.read_bytes()[8:12], "little")
    cases = [(small, f"byte {ft_at}: feature transformer hash 0x{sfnnue19.ft_hash(256):08X} is not 0xCB685313: L1 256, "
                     "this engine is built for L1 1024"),
             (trunc, "truncated at byte 20,000 while reading the threat weights (at offset 1,644, 61,243,392 bytes "
                     "needed)"),
             (tmp_path / "missing.nnue", "cannot read it (ENOENT)")]
    for net, reason in cases:
        r = run_uci(engine, ["uci", f"setoption name EvalFile value {net}", "isready", f"position fen {SF19_FEN}",
                             "eval"], timeout=120)
        errors = [x for x in r.stdout.splitlines() if x.startswith("info string ERROR: ")]
        assert r.returncode == 1, r.stdout[-2000:]
        assert errors[0] == "info string ERROR: Network evaluation parameters compatible with the engine must be available."
        assert errors[1] == f"info string ERROR: The network file {net} was not loaded successfully."
        assert errors[2] == f"info string ERROR: {net}: {reason}", errors
        assert errors[-1] == "info string ERROR: The engine will be terminated now."
        assert "NNUE evaluation" not in r.stdout


def test_nnue_match_drives_it_with_a_net_a_side(engine, raised, tmp_path):
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "match", "--engine", engine, "--engine", engine,
                        "--engine-option", f"EvalFile={raised}", "--nodes", "200", "--games", "2",
                        "--adjudicate", "maxply=40", "-o", str(tmp_path / "m"), "--json", "--quiet"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["games"] == 2 and m["crashes"] == 0 and m["timeouts"] == 0
    a, b = m["players"]["A"], m["players"]["B"]
    assert a["id"] == b["id"] == "Stockfish 19"
    assert LOAD.format("nn-1a298aa575a0.nnue")[12:] in a["info"] and LOAD.format(raised)[12:] in b["info"]
    assert b["options"]["EvalFile"] == str(raised)
    pgn = (tmp_path / "m" / "match.pgn").read_text()
    assert pgn.count("[Result ") == 2 and "/200 }" in pgn  # scores at 200 nodes a move


def test_nnue_match_refuses_a_net_the_engine_rejects_in_one_line(engine, tmp_path):
    bad = tmp_path / "bad.nnue"
    bad.write_bytes(sfnnue19.nnue_bytes(random_tensors(64, seed=4)))  # our reader reads it (any L1 of 64s)
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "match", "--engine", engine, "--engine-option",
                        f"EvalFile={bad}", "--engine", engine, "--nodes", "50", "-o", str(tmp_path / "m")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "refused its settings" in r.stderr and "exited (status 1)" in r.stderr
    assert f"'info string ERROR: {bad}: byte " in r.stderr and "L1 64, this engine is built for L1 1024" in r.stderr
    assert f"{bad} is a Stockfish 19 .nnue (our reader reads it whole)" in r.stderr
    assert "will be terminated now" not in r.stderr  # shortened to the reason
    assert not (tmp_path / "m").exists()


def test_without_the_engine_one_line_says_how_to_install_it(tmp_path):
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed")
    r = subprocess.run([str(FRONT_END)], input="uci\n", capture_output=True, text=True, timeout=60,
                       env={**os.environ, "NNUE_SF19_CACHE": str(tmp_path / "empty")})
    assert r.returncode == 2 and r.stdout == "", r
    assert r.stderr.count("\n") == 1 and "is not installed in" in r.stderr and "ensure_sf19.sh" in r.stderr, r.stderr


def test_without_node_one_line_says_how_to_install_it(tmp_path):
    bin_ = tmp_path / "bin"  # a PATH with the shell tools the wrapper uses and no node
    bin_.mkdir()
    for tool in ("bash", "dirname", "readlink"):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed")
        (bin_ / tool).symlink_to(found)
    r = subprocess.run([str(bin_ / "bash"), str(FRONT_END)], input="uci\n", capture_output=True, text=True,
                       timeout=60, env={"PATH": str(bin_), "HOME": str(tmp_path)})
    assert r.returncode == 2 and r.stdout == "", r
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("sf19-uci: Node.js not found on PATH: install it"), r.stderr


def test_nets_nnue_pytorch_serialised_round_trip_and_load(engine):
    loaded = 0
    for p in require_npa_nets():
        data = p.read_bytes()
        t = sfnnue19.parse_nnue(p, data)
        assert t["description"].startswith("Network trained with the"), p
        assert sfnnue19.nnue_bytes(t) == data, p  # its hashes for its L1, its LEB128 blocks: byte for byte
        if t["l1"] != 1024:
            continue  # the engine is built for L1 1,024
        traces, load = eval_traces(engine, sample_fens(30), eval_file=p)
        assert load == LOAD.format(p)
        assert len({internal_value(x) for x in traces}) > 5, p  # its own values (a net not read gives 0s)
        loaded += 1
    if not loaded:
        pytest.skip("no nnue-pytorch net of L1 1,024 to load in the engine")
