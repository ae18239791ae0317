"""``nnue report --net`` and ``nnue analyze`` of a residual net on a Stockfish base: the base comes
from the dataset's base_eval column when it holds that base, else from Stockfish 15.1 itself;
positions without one (in check) are left out. Both used to stop with the missing-base error.

A tiny residual net is trained for one epoch on the sample annotated with
``--base stockfish-classical`` and exported (its header names that base)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from nnue.cli import main as cli_main
from nnue.inference import evaluate, load, residual
from nnue.pipeline.annotate import annotate
from nnue.trainer.export import export, validation_rows
from nnue.trainer.metrics import spearman
from nnue.trainer.report import report
from nnue.trainer.train import run


@pytest.fixture(scope="module")
def sf_run(sample_dataset, tmp_path_factory):
    """(annotated dataset, run folder, export folder) of a residual run on the Stockfish base."""
    tmp = tmp_path_factory.mktemp("sfbase")
    ds = tmp / "ds"
    shutil.copytree(sample_dataset, ds)
    annotate(ds, base="stockfish-classical", progress=False)
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            "model=tiny", f"data.path={ds}", f"paths.output_dir={tmp / 'run'}", "data.val_fraction=0.2",
            "trainer.enable_progress_bar=false", "trainer.max_epochs=1", "data.positions_per_epoch=4096",
            "data.batch_size=256", "model.loss.target=residual"])
    run(cfg)
    export(tmp / "run" / "checkpoints" / "last.ckpt", tmp / "net")
    return ds, tmp / "run", tmp / "net"


def _whole_evals(net, rows):
    """base + α·net of the rows that have a base, from the base_eval column (independently of the
    report's path): (evals, their scores)."""
    keep = torch.isfinite(rows["base_eval"])
    ev = evaluate(net, rows["boards"][keep], base=rows["base_eval"][keep].long())
    return ev, rows["score"][keep]


def test_report_of_a_stockfish_base_net_reads_the_column_or_the_engine(sf_run, sample_dataset, capsys):
    ds, run_dir, net_dir = sf_run
    net = load(net_dir / "net.safetensors")
    assert residual.of(net)["base"] == "stockfish-classical"
    r = report(run_dir, net_dir)
    assert r["base_from"] == "dataset base_eval column" and r["residual"]["base"] == "stockfish-classical"
    data = {"path": str(ds), "val_fraction": 0.2}
    rows = validation_rows(data, 200_000, extra=("base_eval",))
    ev, sc = _whole_evals(net, rows)
    assert r["validation_positions"] == len(ev) and r["positions_without_base"] == len(rows["score"]) - len(ev)
    assert r["spearman_net"] == pytest.approx(spearman(ev.numpy(), sc.numpy()), abs=1e-12)
    # the net alone is not the net: the base is in the eval
    assert r["spearman_net"] != pytest.approx(spearman(evaluate(net, rows["boards"], base=torch.zeros(
        len(rows["score"]))).numpy(), rows["score"].numpy()), abs=1e-6)
    # the same games without the column: Stockfish computes the base, and the numbers are the same
    from_engine = report(run_dir, net_dir, data=str(sample_dataset))
    assert from_engine["base_from"] == "engine"
    assert {k: from_engine[k] for k in ("validation_positions", "positions_without_base", "spearman_net",
                                        "spearman_material")} == \
           {k: r[k] for k in ("validation_positions", "positions_without_base", "spearman_net", "spearman_material")}
    assert cli_main(["report", str(run_dir), "--net", str(net_dir)]) == 0
    assert "residual net" in capsys.readouterr().out
    assert cli_main(["report", str(run_dir), "--net", str(net_dir), "--data", str(sample_dataset),
                     "--engine", "/nonexistent/stockfish"]) == 2
    err = capsys.readouterr().err
    assert "residual net" in err and "/nonexistent/stockfish" in err and "Traceback" not in err


def test_analyze_of_a_stockfish_base_net(sf_run, sample_dataset, tmp_path, capsys):
    from nnue.pipeline.stream import Filters, PackedStream

    ds, _, net_dir = sf_run
    net_path = net_dir / "net.safetensors"
    net = load(net_path)
    assert cli_main(["analyze", str(net_path), "--dataset", str(ds), "-o", str(tmp_path / "a"), "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert a["base_from"] == "dataset base_eval column" and a["residual"]["base"] == "stockfish-classical"
    b = next(iter(PackedStream([ds], 1_000_000, 0, "all", 0.0, Filters(), drop_last=False)))
    ev, sc = _whole_evals(net, b)
    assert a["positions"] == len(ev) and a["positions_without_base"] == len(b["score"]) - len(ev)
    assert a["eval"]["mean_cp"] == pytest.approx(float(ev.double().mean()), rel=1e-9)
    assert a["eval"]["spearman_with_score"] == pytest.approx(spearman(ev.numpy(), sc.numpy()), abs=1e-12)
    assert (tmp_path / "a" / "eval_histogram.png").stat().st_size > 0
    # from the engine on the plain sample: the same evals
    e = cli_main(["analyze", str(net_path), "--dataset", str(sample_dataset), "-o", str(tmp_path / "b"), "--json",
                  "--limit", "500"])
    assert e == 0
    small = json.loads(capsys.readouterr().out)
    first = np.asarray(ev[: small["positions"]])
    assert small["base_from"] == "engine" and small["eval"]["mean_cp"] == pytest.approx(float(first.mean()), rel=1e-9)
