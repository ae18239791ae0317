"""nnue analyze: PNGs and the numbers behind them, checked against direct computations."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nnue.cli import main
from nnue.commands.analyze_run import _l0_nonzero
from nnue.inference import evaluate, load
from nnue.pipeline.stream import Filters, PackedStream
from tests.netfiles import make_deep_int_net, make_int_net

PNGS = ["eval_histogram.png", "eval_vs_score.png", "block_sparsity.png", "dead_neurons.png"]


def _quiet_boards(ds, n):
    b = next(iter(PackedStream([ds], n, 0, "all", 0.0, Filters(), drop_last=False)))
    return b["boards"], b["score"]


@pytest.mark.parametrize("act", ["screlu", "pairwise_crelu"])
def test_l0_nonzero_matches_a_plain_accumulator(sample_dataset, act):
    net = make_int_net("chess768", act, hidden=32, seed=2)
    boards, _ = _quiet_boards(sample_dataset, 300)
    got = _l0_nonzero(net, boards, chunk=97)
    stm, nstm = net.features.encode(boards)
    for i in range(0, 300, 7):
        halves = []
        for idx in (stm[i], nstm[i]):
            acc = net.l0b.long() + net.l0w[idx[idx >= 0].long()].long().sum(0)
            on = acc.clamp(0, 255) > 0
            if act == "pairwise_crelu":
                on = on[:16] & on[16:]
            halves.append(on)
        assert torch.equal(got[i], torch.cat(halves))


def test_analyze_writes_pngs_and_json(sample_dataset, tmp_path, capsys):
    net = make_int_net("chess768", "screlu", hidden=64, dead=0.25, seed=1)
    net.save(tmp_path / "net.safetensors")
    out = tmp_path / "analysis"
    assert main(["analyze", str(tmp_path / "net.safetensors"), "--dataset", str(sample_dataset),
                 "-o", str(out), "--limit", "2000"]) == 0
    assert "dead neurons" in capsys.readouterr().out
    for p in PNGS:
        assert (out / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = json.loads((out / "analysis.json").read_text())
    assert r["positions"] == 2000
    boards, score = _quiet_boards(sample_dataset, 2000)
    ev = evaluate(load(tmp_path / "net.safetensors"), boards).numpy()
    assert r["eval"]["mean_cp"] == pytest.approx(float(ev.mean()))
    per = r["eval"]["per_bucket"]
    bk = net.buckets.of(boards).numpy()
    assert {k: v["positions"] for k, v in per.items()} == {str(k): int((bk == k).sum()) for k in np.unique(bk)}
    # the binned means: recompute one bin
    centres, means = r["eval_vs_score"]["bin_centres_cp"], r["eval_vs_score"]["mean_eval_cp"]
    c = centres[len(centres) // 2]
    inbin = (score.numpy() >= c - 25) & (score.numpy() < c + 25)
    assert means[len(centres) // 2] == pytest.approx(float(ev[inbin].mean()))
    # 16 neurons have a bias of -8000: dead on every position
    d = r["dead_neurons"]
    dead_by_bias = (net.l0b == -8000).numpy()
    assert d["neurons"] == 64 and d["dead"] >= 16
    assert all(f == 0 for f, db in zip(d["active_share_per_neuron"], dead_by_bias) if db)
    on = _l0_nonzero(net, boards)
    blocks = (~on[:, :128].reshape(2000, 32, 4).any(-1)).double().mean(1)
    assert r["block_sparsity"]["mean"] == pytest.approx(float(blocks.mean()))


def test_analyze_deep_net_and_bad_input(sample_dataset, tmp_path, capsys):
    net = make_deep_int_net("chess768", "pairwise_crelu", hidden=32, output_buckets="SFPieceCount<8>")
    net.save(tmp_path / "deep.safetensors")
    assert main(["analyze", str(tmp_path / "deep.safetensors"), "--dataset", str(sample_dataset),
                 "-o", str(tmp_path / "a"), "--limit", "500", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["positions"] == 500 and r["architecture"]["kind"] == "deep"
    assert main(["analyze", str(tmp_path / "missing.safetensors"), "--dataset", str(sample_dataset),
                 "-o", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nnue analyze: error:") and err.count("\n") == 1
