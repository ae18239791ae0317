"""``nnue export`` of an sfnnv16 checkpoint (the float weights ``nnue import-net`` writes, as a
fine-tune starts from): status 0 and its text summary, the float-vs-int gap line included. Its
summary once failed with KeyError 'hidden_activation' after the files were written."""
from __future__ import annotations

import dataclasses
import re

from nnue.cli import main

from ..samples import SAMPLE
from .test_sfnnv16_c_reference import random_sfnnv16_net


def test_export_of_an_sfnnv16_checkpoint_prints_its_summary(tmp_path, capsys):
    net = random_sfnnv16_net(64, seed=3)
    # int8 values within ±127, as the exporter writes them (random_sfnnv16_net draws -128 too)
    net = dataclasses.replace(net, **{k: getattr(net, k).clamp(-127, 127)
                                      for k in ("threat_weight", "fc0_weight", "fc1_weight", "fc2_weight")})
    (tmp_path / "r.nnue").write_bytes(net.raw_bytes())
    assert main(["import-net", str(tmp_path / "r.nnue"), "-o", str(tmp_path / "imp")]) == 0
    hint = next(l for l in capsys.readouterr().out.splitlines() if "fine-tune:" in l)
    assert "init_weights=" in hint and "docs/engines.md" in hint, hint  # where the fine-tune's settings are
    assert main(["pack", str(SAMPLE), "-o", str(tmp_path / "ds"), "--no-progress"]) == 0
    capsys.readouterr()
    rc = main(["export", str(tmp_path / "imp" / "checkpoint.safetensors"), "--data", str(tmp_path / "ds"),
               "-o", str(tmp_path / "exp"), "--positions", "400"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "8 layer stacks: 32 -> SqrCReLU|CReLU 64 -> 32 -> SqrCReLU|CReLU 64 + 64 -> 1" in out
    assert "(Stockfish 19 SFNNv16)" in out
    gap = re.search(r"float vs int on (\d+) validation positions: mean \|Δ\| ([\d.]+) cp", out)
    assert gap and int(gap.group(1)) > 0 and float(gap.group(2)) < 5, out
    assert "Stockfish 19 loads only 1024" in err
    assert (tmp_path / "exp" / "net.nnue").read_bytes()[:4] == net.raw_bytes()[:4]  # version 0x6A448AFA


def test_export_says_why_an_accumulator_bound_over_int16_is_not_an_overflow(tmp_path, capsys):
    """The accumulator's static worst case is reported, not enforced, for this kind (the engine's
    int16 adds wrap; the official net's bound is 65,850): the audit line says so instead of printing
    a worst case over its limit next to 'clipped nothing' with no word of explanation."""
    net = random_sfnnv16_net(64, seed=5, wide=True)
    net = dataclasses.replace(net, **{k: getattr(net, k).clamp(-127, 127)
                                      for k in ("threat_weight", "fc0_weight", "fc1_weight", "fc2_weight")})
    (tmp_path / "w.nnue").write_bytes(net.raw_bytes())
    assert main(["import-net", str(tmp_path / "w.nnue"), "-o", str(tmp_path / "imp")]) == 0
    capsys.readouterr()
    rc = main(["export", str(tmp_path / "imp" / "checkpoint.safetensors"), "-o", str(tmp_path / "exp"),
               "--positions", "0"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    line = next(l for l in out.splitlines() if "audit: accumulator worst case" in l)
    worst, limit = map(int, re.search(r"worst case (\d+) \(limit (\d+)", line).groups())
    assert worst > limit == 32767, line
    assert "not enforced" in line and "wrap" in line, line
