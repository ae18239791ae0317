"""Parity with the real Stockfish 15.1 (Debian's binary; scripts/ensure_stockfish.sh installs it,
these tests skip with the reason without it):

* its built-in net, written with ``export_net``, imported and exported again is byte-identical
  (47,001,499 bytes), through the integer net and through the dequantised float checkpoint;
* our evaluator's trace of that net equals the engine's ``eval`` trace, every NNUE line, on 2,000
  positions of real games not in check; ``nnue eval`` prints UCI centipawns of the same value;
* a net trained by nnue-forge (L1 1,024, a short CPU run) is exported, loaded by Stockfish
  (``NNUE evaluation using … enabled``) and identical again.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from nnue.inference import load_any
from nnue.inference.kinds import sfnnv5
from nnue.inference.api import boards_from_fens
from nnue.inference.kinds.sfnnv5 import read_nnue

from .positions import sample_fens
from .stockfish import eval_traces, export_builtin, nnue_part, require_stockfish_15_1


@pytest.fixture(scope="module")
def engine():
    return require_stockfish_15_1()


@pytest.fixture(scope="module")
def builtin(engine, tmp_path_factory):
    p = export_builtin(engine, tmp_path_factory.mktemp("sf") / "builtin.nnue")
    assert p.stat().st_size == 47_001_499
    return p


def nnue(*args):
    return subprocess.run([sys.executable, "-m", "nnue.cli", *map(str, args)], capture_output=True, text=True)


def test_builtin_net_round_trips_byte_for_byte(builtin, tmp_path):
    r = nnue("import-net", builtin, "-o", tmp_path / "imp")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "imp" / "net.nnue").read_bytes() == builtin.read_bytes()
    r = nnue("export-net", tmp_path / "imp", "--to", "stockfish-15.1", "-o", tmp_path / "again.nnue")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "again.nnue").read_bytes() == builtin.read_bytes()
    # through the float checkpoint: dequantised, then quantised again by nnue export
    r = nnue("export", tmp_path / "imp" / "checkpoint.safetensors", "-o", tmp_path / "exp", "--positions", "0")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "exp" / "net.nnue").read_bytes() == builtin.read_bytes()


def test_trace_equals_the_engines_on_2000_positions(engine, builtin):
    fens = sample_fens(2000)
    theirs, _ = eval_traces(engine, fens)
    assert len(theirs) == len(fens)
    net = read_nnue(builtin)
    ours = sfnnv5.trace(net, fens)
    bad = [i for i, (a, b) in enumerate(zip(theirs, ours)) if nnue_part(a) != b]
    assert not bad, f"{len(bad)} of {len(fens)} differ; first {fens[bad[0]]}:\n{nnue_part(theirs[bad[0]])}\n{ours[bad[0]]}"
    # the evaluator's UCI centipawns are the trace's value, side to move's point of view
    v = sfnnv5.values(net, boards_from_fens(fens[:50]))
    cp = sfnnv5.evaluate(net, boards_from_fens(fens[:50]))
    assert cp.tolist() == [int(x * 100 / 361) for x in v.tolist()]


def test_nnue_eval_trace_cli_prints_the_engines_lines(engine, builtin, tmp_path):
    fens = sample_fens(3) + ["rnbqkbnr/ppppp1pp/8/5p1Q/4P3/8/PPPP1PPP/RNB1KBNR b KQkq - 1 2"]  # last: in check
    (tmp_path / "p.txt").write_text("\n".join(fens) + "\n")
    r = nnue("eval", builtin, "--fens", tmp_path / "p.txt", "--trace")
    assert r.returncode == 0, r.stderr
    theirs, _ = eval_traces(engine, fens)
    want = "\n".join(nnue_part(t) for t in theirs[:3]) + "\nFinal evaluation: none (in check)\n"
    assert theirs[3].strip() == "Final evaluation: none (in check)"
    assert r.stdout == want


def test_trained_net_loads_in_stockfish_and_matches(engine, sample_dataset, tmp_path):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from nnue.trainer.checks import check_train_args
    from nnue.trainer.export import export
    from nnue.trainer.train import run

    overrides = ["model=sfnnv5", "features=halfkav2_hm", f"data.path={sample_dataset}",
                 f"paths.output_dir={tmp_path / 'run'}", "data.batch_size=256", "data.positions_per_epoch=5120",
                 "trainer.max_epochs=1", "model.factoriser=false", "trainer.enable_progress_bar=false"]
    assert check_train_args(overrides) is None
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    metrics = run(cfg)
    assert metrics["global_step"] == 20, metrics
    r = export(tmp_path / "run" / "checkpoints" / "weights-last.safetensors", tmp_path / "net")
    assert r["architecture"]["kind"] == "sfnnv5" and r["architecture"]["hidden"] == 1024
    nnue_file = tmp_path / "net" / "net.nnue"
    fens = sample_fens(300)
    theirs, head = eval_traces(engine, fens, eval_file=str(nnue_file))
    assert f"info string NNUE evaluation using {nnue_file} enabled" in head, head
    net = load_any(tmp_path / "net")
    ours = sfnnv5.trace(net, fens)
    bad = [i for i, (a, b) in enumerate(zip(theirs, ours)) if nnue_part(a) != b]
    assert not bad, f"{len(bad)} differ; first {fens[bad[0]]}"
    assert read_nnue(nnue_file).arch["description"] == "Network trained with nnue-forge (sfnnv5)."
