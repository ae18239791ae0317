"""nnue annotate: material and Stockfish static-eval columns, atomic per part, read back by the stream."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import chess
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from nnue.cli import main
from nnue.pipeline import annotate as an
from nnue.pipeline import manifest as mf
from nnue.pipeline.board import pack_fen
from nnue.pipeline.stream import Filters, PackedStream
from nnue.pipeline.parts import read_part
from tests.samples import SAMPLE, public, selfplay


ENGINE = shutil.which("stockfish") or "/usr/games/stockfish"
needs_sf = pytest.mark.skipif(not Path(ENGINE).exists(),
                              reason="Stockfish not installed (bash scripts/ensure_stockfish.sh installs it)")
NO_FILTERS = Filters(skip_in_check=False, skip_capture=False, skip_score_none=False, skip_mate=False)


@pytest.fixture(scope="module")
def two_parts(tmp_path_factory) -> Path:
    """The bundled sample and the Chess960 self-play (X-FEN castling): two parts."""
    from nnue.pipeline.pack import pack

    out = tmp_path_factory.mktemp("annotate") / "dataset"
    pack([SAMPLE, selfplay("sf15-960-xfen-s2.plain")], out, progress=False)
    return out


def _copy(ds: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "ds"
    shutil.copytree(ds, dst)
    return dst


def _column(ds: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values as float with NaN for null, in_check) over every part in manifest order."""
    m = mf.load(ds)
    vals, checks = [], []
    for e in sorted(m["files"].values(), key=lambda e: e["part"]):
        t = read_part(ds / e["part"], columns=[name, "in_check"])
        vals.append(t.column(name).cast("float64").to_numpy(zero_copy_only=False))
        checks.append(t.column("in_check").to_numpy(zero_copy_only=False))
    return np.concatenate(vals), np.concatenate(checks).astype(bool)


def test_material_eval_matches_python_chess(fens):
    values = {chess.PAWN: 100, chess.KNIGHT: 300, chess.BISHOP: 300, chess.ROOK: 500, chess.QUEEN: 900,
              chess.KING: 0}
    fens = fens[:500]
    boards = np.frombuffer(b"".join(pack_fen(f) for f in fens), np.uint8).reshape(-1, 32)
    got = an.material_eval(boards)
    assert got.dtype == np.int16
    for f, g in zip(fens, got):
        b = chess.Board(f)
        white = sum(values[p.piece_type] * (1 if p.color else -1) for p in b.piece_map().values())
        assert g == (white if b.turn else -white), f


def test_material_annotation_and_stream(two_parts, tmp_path):
    ds = _copy(two_parts, tmp_path)
    before = PackedStream([ds], 512, 0, "all", 0.0, NO_FILTERS, drop_last=False)
    assert before.extra_columns == []
    r = an.annotate(ds, base="material", progress=False)
    assert len(r["parts_annotated"]) == 2 and r["columns"]["base_eval"]["nulls"] == 0
    rec = mf.load(ds)["annotations"]["base_eval"]
    assert rec["source"] == "material" and rec["version"] == an.MATERIAL_VERSION and rec["complete"]
    # the stream carries the column, row-aligned through the shuffle
    s = PackedStream([ds], 700, 5000, "all", 0.0, NO_FILTERS, drop_last=False, seed=3)
    assert s.extra_columns == ["base_eval"]
    n = 0
    for b in s:
        assert b["base_eval"].dtype == torch.float32
        assert torch.equal(b["base_eval"], torch.from_numpy(an.material_eval(b["boards"].numpy())).float())
        n += len(b["boards"])
    assert n == mf.totals(mf.load(ds))["packed"]
    # the other readers are unaffected
    assert main(["inspect", str(ds), "--json"]) == 0
    assert sorted(mf.load(ds)["annotations"]["base_eval"]["parts"]) == sorted(p.name for p in ds.glob("part-*"))
    # a file packed later: no column until annotate runs again, which does only that part
    from nnue.pipeline.pack import pack

    pack([public("samplefen.epd")], ds, progress=False)
    assert PackedStream([ds], 512, 0, "all", 0.0, NO_FILTERS).extra_columns == []
    r = an.annotate(ds, base="material", progress=False)
    assert len(r["parts_annotated"]) == 1 and len(r["parts_skipped"]) == 2
    assert PackedStream([ds], 512, 0, "all", 0.0, NO_FILTERS).extra_columns == ["base_eval"]


def test_interrupted_run_leaves_readable_dataset_and_rerun_completes(two_parts, tmp_path, monkeypatch):
    ds = _copy(two_parts, tmp_path)
    real, calls = an.material_eval, []

    def dies_on_second_part(boards):
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(boards)

    monkeypatch.setattr(an, "material_eval", dies_on_second_part)
    with pytest.raises(KeyboardInterrupt):
        an.annotate(ds, base="material", progress=False)
    monkeypatch.setattr(an, "material_eval", real)
    assert not list(ds.glob(".*tmp")), "a temporary file was left behind"
    m = mf.load(ds)
    assert m["annotations"]["base_eval"]["complete"] is False
    parts = sorted(ds.glob("part-*.parquet"))
    assert sum("base_eval" in pq.ParquetFile(p).schema_arrow.names for p in parts) == 1
    # readable: the stream reads every row (no column carried: not every part has it)
    s = PackedStream([ds], 4096, 0, "all", 0.0, NO_FILTERS, drop_last=False)
    assert s.extra_columns == [] and sum(len(b["boards"]) for b in s) == mf.totals(m)["packed"]
    r = an.annotate(ds, base="material", progress=False)
    assert len(r["parts_annotated"]) == 1 and len(r["parts_skipped"]) == 1
    assert mf.load(ds)["annotations"]["base_eval"]["complete"] is True
    assert PackedStream([ds], 4096, 0, "all", 0.0, NO_FILTERS).extra_columns == ["base_eval"]


@needs_sf
def test_stockfish_columns_units_pov_and_in_check(two_parts, tmp_path):
    ds = _copy(two_parts, tmp_path)
    assert main(["annotate", str(ds), "--base", "material", "--no-progress"]) == 0
    r = an.annotate(ds, base="stockfish-classical", teacher="stockfish-nnue", engine=ENGINE, jobs=2,
                    batch=1000, progress=False)
    assert r["columns"]["base_eval"]["source"] == "stockfish-classical"  # replaced the material base
    assert "Stockfish" in r["columns"]["base_eval"]["version"]
    m = mf.load(ds)["annotations"]
    assert m["base_eval"]["complete"] and m["teacher_eval"]["source"] == "stockfish-nnue"
    for col in ("base_eval", "teacher_eval"):
        v, in_check = _column(ds, col)
        # null exactly where the side to move is in check (Stockfish prints no static eval there)
        assert np.array_equal(np.isnan(v), in_check)
        assert m[col]["nulls"] == int(in_check.sum()) > 0
    # POV and units: both track the side-to-move search score of the self-play
    from scipy.stats import spearmanr

    score = np.concatenate([read_part(ds / e["part"], columns=["score"]).column("score").to_numpy()
                            for e in sorted(mf.load(ds)["files"].values(), key=lambda e: e["part"])])
    for col, floor in (("base_eval", 0.8), ("teacher_eval", 0.85)):
        v, in_check = _column(ds, col)
        ok = ~in_check & (np.abs(score) < 3000)
        assert spearmanr(v[ok], score[ok]).correlation > floor, col
    # a rerun does nothing
    again = an.annotate(ds, base="stockfish-classical", teacher="stockfish-nnue", engine=ENGINE, progress=False)
    assert again["parts_annotated"] == [] and len(again["parts_skipped"]) == 2


@needs_sf
def test_stockfish_scale_and_colour_symmetry():
    """Queen odds is about +7 pawns for the side with the queen (cp = 100·pawns, as UCI
    centipawns in 15.1, not internal units: that would be about +12), and a position and its
    colour-flipped mirror give the same side-to-move eval."""
    pool = an.EnginePool(ENGINE, 1, ("classical", "nnue"))
    try:
        fens = ["rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
                "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNB1KBNR b KQkq - 0 1",
                "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4",
                "rnbqk2r/pppp1ppp/5n2/2b1p3/4P3/2N2N2/PPPP1PPP/R1BQKB1R b KQkq - 4 4"]
        boards = np.frombuffer(b"".join(pack_fen(f) for f in fens), np.uint8).reshape(-1, 32)
        got = pool.evaluate(boards)
        black = (boards[:, 24] >> 7).astype(bool)
        cp, null = an.stm_cp(got["classical"], black)
        nn, _ = an.stm_cp(got["nnue"], black)
        assert not null.any()
        assert 600 <= cp[0] <= 900 and cp[0] == cp[1]
        assert cp[2] == cp[3] and abs(int(nn[2]) - int(nn[3])) <= 5
    finally:
        pool.close()


def _fake_engine(tmp_path: Path, name: str, body: str) -> str:
    p = tmp_path / name
    p.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    p.chmod(0o755)
    return str(p)


NNUE_ONLY = """
for line in sys.stdin:
    c = line.strip()
    if c == "uci": print("id name NoClassical 16"); print("uciok", flush=True)
    elif c == "isready": print("readyok", flush=True)
    elif c == "eval": print("NNUE evaluation        +0.10 (white side)"); print("Final evaluation       +0.10 (white side)", flush=True)
    elif c == "quit": break
"""


@pytest.mark.parametrize("engine,expect", [
    ("missing", "no such executable"),
    ("nnue-only", "prints no 'Classical evaluation' line"),
    ("exits", "exited during the UCI handshake"),
])
def test_engine_problems_are_one_line(two_parts, tmp_path, capsys, engine, expect):
    ds = _copy(two_parts, tmp_path)
    if engine == "missing":
        path = str(tmp_path / "no-such-stockfish")
    else:
        path = _fake_engine(tmp_path, engine, NNUE_ONLY if engine == "nnue-only" else "sys.exit(0)")
    digest = mf.digest(ds)
    rc = main(["annotate", str(ds), "--base", "stockfish-classical", "--engine", path, "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("nnue annotate: error:") and expect in err and "\n" not in err
    assert mf.digest(ds) == digest  # nothing touched


def test_cli_needs_base_or_teacher(two_parts, capsys):
    assert main(["annotate", str(two_parts)]) == 2
    assert "give --base and/or --teacher" in capsys.readouterr().err


def test_cli_json(two_parts, tmp_path, capsys):
    ds = _copy(two_parts, tmp_path)
    assert main(["annotate", str(ds), "--base", "material", "--json", "--no-progress"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["columns"]["base_eval"]["rows"] == mf.totals(mf.load(ds))["packed"]
    out = subprocess.run([sys.executable, "-m", "nnue.cli", "inspect", str(ds)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
