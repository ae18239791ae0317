"""Shared fixtures: small packed datasets and the C cross-check's positions, built once per
session from the data in the repo (tests/samples.py says where each file is)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.samples import CUT, REPO, SAMPLE, selfplay


@pytest.fixture(scope="session")
def sample_dataset(tmp_path_factory) -> Path:
    """The bundled sample packed once: 4,015 positions, 38 games."""
    from nnue.pipeline.pack import pack

    out = tmp_path_factory.mktemp("sample") / "dataset"
    pack([SAMPLE], out, progress=False)
    return out


@pytest.fixture(scope="session")
def selfplay_dataset(tmp_path_factory) -> Path:
    """The self-play cut (tests/data/selfplay/sf15-n2000-s11-cut.plain: 12,678 positions, 112
    games; tests/samples.py) packed once."""
    from nnue.pipeline.pack import pack

    out = tmp_path_factory.mktemp("selfplay") / "dataset"
    pack([selfplay(f"{CUT}.plain")], out, progress=False)
    return out


# -- the C cross-checks (tests/inference/test_c_cross_check*.py) ------------------------------
CROSS_CHECK_FENS = f"{CUT}.plain"
N_CROSS_CHECK = 10_000


@pytest.fixture(scope="session")
def c_eval(tmp_path_factory):
    """tests/c/nnue_eval.c compiled with gcc (skips without gcc)."""
    import shutil

    from tests.cref import compile_c_eval

    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    return compile_c_eval(tmp_path_factory.mktemp("cbuild"))


@pytest.fixture(scope="session")
def fens():
    """≥ 10,000 real positions of the self-play cut (tests/data/selfplay), every piece count
    (3..32) at least 8 times, plus hand-made extremes (bare kings, …)."""
    from tests.cref import EXTRA_FENS, piece_count, real_fens

    real = real_fens(selfplay(CROSS_CHECK_FENS), N_CROSS_CHECK)
    assert len(real) >= N_CROSS_CHECK
    assert {piece_count(f) for f in real} == set(range(3, 33))
    return real + EXTRA_FENS


@pytest.fixture(scope="session")
def boards(fens):
    """``fens`` packed once (what evaluate_fens packs on each call)."""
    from nnue.inference.api import boards_from_fens

    return boards_from_fens(fens)


@pytest.fixture(scope="session")
def warm_compiled(tmp_path_factory):
    """Compile (or load from numba's cache) the compiled decoders once per session, before any
    test's own time limit starts (test_fuzz.py fails a test that runs past 60 s)."""
    import numpy as np
    import pyarrow as pa

    from nnue.pipeline.compiled import binpack as cb

    b = cb.buffers(cb.CAP)
    cb.decode_chains(np.zeros(40, np.uint8), 0, 40, *(b[k] for k in cb._FIELDS))
    from nnue.pipeline.compiled import fixed

    for kernel, size in ((fixed.decode_sfbin, 40), (fixed.decode_marlin, 32)):
        fb = fixed.buffers(1)
        kernel(np.zeros((1, size), np.uint8), np.array([-1, 0, 0, 0], np.int64), *(fb[k] for k in fixed.OUT),
               fb["game"])
    fb = fixed.buffers(1)
    fixed.decode_bullet(np.zeros((1, 32), np.uint8), *(fb[k] for k in fixed.OUT))
    from nnue.pipeline.compiled import viri
    from nnue.pipeline import parts
    from nnue.pipeline.board import pack_fen
    from nnue.pipeline.pack import _table

    # the chained layout's encoder and decoders (every pack writes chains; readers decode them),
    # through a real part so that the compiled signatures are the ones pack and the readers use
    start = pack_fen("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1")
    t = parts.encode(_table({"board": pa.array([start, start], pa.binary(32)), "score": pa.array([0, 0], pa.int16()),
                             "result": pa.array([0, 0], pa.int8()), "ply": pa.array([1, 1], pa.uint16()),
                             "piece_count": pa.array([32, 32], pa.uint8()), "in_check": pa.array([False, False]),
                             "best_move": pa.array([52 | 44 << 6, None], pa.uint16()),
                             "best_move_is_capture": pa.array([False, None]),
                             "game_id": pa.array([0, 0], pa.uint64()), "flags": pa.array([0, 0], pa.uint8())}, 2, "0"), 2)
    part = tmp_path_factory.mktemp("warm") / "part-0.parquet"
    with parts.writer(part, t.schema) as w:
        w.write_table(t)
    assert parts.read_part(part).num_rows == 2
    assert len(parts.Group(parts.open_part(part), 0, ["score"], with_board=True).boards(np.array([1]))) == 1

    vb = viri.buffers(4)
    viri.decode_games(np.zeros(36, np.uint8), 0, 36, True, -1, np.zeros(16, np.uint64), np.full(64, -1, np.int8),
                      np.zeros(4, np.int64), *(vb[k] for k in viri.OUT))


@pytest.fixture(scope="session")
def slurm():
    """A real one-node SLURM (scripts/slurm_up.sh), or a skip with the reason it cannot start."""
    import subprocess

    try:
        r = subprocess.run(["bash", str(REPO / "scripts" / "slurm_up.sh")], capture_output=True, text=True,
                           timeout=900)
    except subprocess.TimeoutExpired:
        pytest.skip("SLURM did not start within 15 minutes (scripts/slurm_up.sh)")
    if r.returncode != 0:
        pytest.skip(f"SLURM cannot start here: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    return True
