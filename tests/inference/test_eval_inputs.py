"""Batch evaluation from every input kind: FENs, python-chess boards, a packed dataset (CLI)."""
from __future__ import annotations

import json

import chess
import numpy as np
import pytest
import torch

from nnue.cli import main as cli_main
from nnue.inference import evaluate, evaluate_fens
from nnue.inference.api import evaluate_boards, evaluate_dataset
from nnue.pipeline import manifest as mf
from nnue.pipeline.board import boards_from_bytes
from nnue.pipeline.parts import read_part
from tests.netfiles import make_int_net
from tests.samples import SAMPLE


@pytest.fixture(scope="module")
def net_file(tmp_path_factory):
    net = make_int_net("kb768hm4", "screlu", hidden=32, seed=4)
    path = tmp_path_factory.mktemp("net") / "net.safetensors"
    net.save(path)
    return net, path


def _dataset_boards(ds) -> torch.Tensor:
    m = mf.load(ds)
    parts = [ds / f["part"] for f in sorted(m["files"].values(), key=lambda e: e["part"]) if f["packed"]]
    cols = [boards_from_bytes(read_part(p, columns=["board"]).column("board")) for p in parts]
    return torch.from_numpy(np.concatenate(cols).copy())


def test_python_chess_boards_and_fens_agree(net_file):
    net, _ = net_file
    fens = [line[4:].strip() for line in open(SAMPLE) if line.startswith("fen ")][::40]
    boards = [chess.Board(f) for f in fens]
    assert evaluate_boards(net, boards) == evaluate_fens(net, fens)
    assert len(set(evaluate_fens(net, fens))) > 20


def test_cli_eval_dataset_every_row_in_file_order(net_file, sample_dataset, capsys):
    net, path = net_file
    boards = _dataset_boards(sample_dataset)
    assert boards.shape[0] == 4015
    expected = evaluate(net, boards).tolist()
    assert cli_main(["eval", str(path), "--dataset", str(sample_dataset)]) == 0
    assert [int(v) for v in capsys.readouterr().out.split()] == expected
    assert cli_main(["eval", str(path), "--dataset", str(sample_dataset), "--limit", "7"]) == 0
    assert [int(v) for v in capsys.readouterr().out.split()] == expected[:7]
    assert cli_main(["eval", str(path), "--dataset", str(sample_dataset), "--summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["positions"] == 4015 and summary["mean_eval_cp"] == pytest.approx(np.mean(expected))
    assert summary["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    # the streamed helper yields the same values batch by batch
    streamed = torch.cat(list(evaluate_dataset(net, [boards[:1000], boards[1000:]])))
    assert streamed.tolist() == expected


def test_cli_eval_options_need_a_dataset(net_file, capsys):
    _, path = net_file
    assert cli_main(["eval", str(path), "--fen", "8/8/8/8/8/8/8/K6k w - - 0 1", "--summary"]) == 2
    assert "--dataset" in capsys.readouterr().err
