"""Closing the loop at small scale (issue 13 part 4): bench/loop_selfplay.sh, the documented
command sequence, run for real: self-play of an old net -> pack -> train warm-started from its
weights -> export -> match new vs old with the SPRT result printed. Tiny settings (a hidden-8
net, 4 games at 4 nodes, one short epoch); the real numbers come from the same script at 200
games (docs/selfplay.md "Closing the loop", bench/results/loop_selfplay.json). About 30 s on an
idle 2-core machine, 80 s under load: marked slow."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import chess.pgn
import pytest
import torch
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[2]
TINY = "model.hidden=8 data.positions_per_epoch=2048 data.batch_size=256 ~logger.tensorboard"


def _env():
    e = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}", OMP_NUM_THREADS="1")
    e.pop("NNUE_DEBUG", None)
    return e


def _nnue(*args, cwd=REPO):
    r = subprocess.run([sys.executable, "-m", "nnue.cli", *map(str, args)], capture_output=True, text=True,
                       env=_env(), cwd=cwd)
    assert r.returncode == 0, (args, r.stderr[-3000:])
    return r


@pytest.fixture(scope="module")
def old_net(tmp_path_factory):
    """The "current" net: a tiny one trained on the bundled sample, and its float weights."""
    d = tmp_path_factory.mktemp("old")
    _nnue("pack", REPO / "data" / "sample", "-o", d / "ds", "--no-progress")
    _nnue("train", "experiment=demo", f"data.path={d / 'ds'}", f"paths.output_dir={d / 'run'}", "trainer.max_epochs=1",
          "trainer.enable_progress_bar=false", *TINY.split())
    ckpt = d / "run" / "checkpoints" / "weights-last.safetensors"
    _nnue("export", ckpt, "-o", d / "net")
    return d / "net" / "net.safetensors", ckpt


@pytest.mark.slow
def test_loop_script_end_to_end(old_net, tmp_path):
    net0, ckpt0 = old_net
    w = tmp_path / "loop"
    env = dict(_env(), GAMES="4", NODES="4", MATCH_GAMES="4", EPOCHS="1", THREADS="1", NET0=str(net0),
               CKPT0=str(ckpt0), TRAIN=TINY, QUALITY=str(REPO / "data" / "sample" / "sf15-n5000-s1-sample.plain"),
               QUALITY_RECORDS="300")
    r = subprocess.run(["bash", str(REPO / "bench" / "loop_selfplay.sh"), str(w)], capture_output=True, text=True,
                       env=env, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    # 1. self-play: 4 games of the old net, packed with zero rejects (2.)
    sp = json.loads((w / "selfplay.json").read_text())
    pk = json.loads((w / "pack.json").read_text())
    assert sp["games"] == 4 and sp["positions"] == pk["read"] == pk["packed"] > 0 and not pk["rejected"]
    run_cfg = json.loads((w / "selfplay" / "run.json").read_text())
    assert run_cfg["net_sha256"] == hashlib.sha256(net0.read_bytes()).hexdigest() and run_cfg["search"]["nodes"] == 4
    # 3. the training was warm-started from the old weights and trained on the self-play dataset
    cfg = (w / "run" / "config.yaml").read_text()
    assert f"init_weights: {ckpt0.resolve()}" in cfg and str(w / "dataset") in cfg
    new_w = load_file(str(w / "run" / "checkpoints" / "weights-last.safetensors"))
    old_w = load_file(str(ckpt0))
    assert new_w.keys() == old_w.keys() and any(not torch.equal(new_w[k], old_w[k]) for k in new_w)
    # 4. exported, 5. the match new (A) vs old (B), with the SPRT result printed in seed 000's layout
    m = json.loads((w / "match" / "match.json").read_text())
    assert m["players"]["A"]["net"] == str(w / "net" / "net.safetensors") and m["players"]["B"]["net"] == str(net0)
    assert m["games"] == 2 * sum(m["penta"]) <= 4 and m["settings"]["nodes"] == 4
    with open(w / "match" / "match.pgn") as f:
        assert len([g for g in iter(lambda: chess.pgn.read_game(f), None)]) == m["games"]
    printed = (w / "match.txt").read_text().splitlines()
    assert [ln.split(":")[0] for ln in printed[:4]] == ["LLR", "ELO", "GAMES", "PENTA"]
    assert printed[:4] == m["lines"][:4]
    # the summary docs/selfplay.md quotes
    s = json.loads((w / "loop.json").read_text())
    assert s["match"]["verdict"] == m["verdict"] and s["match"]["penta"] == m["penta"]
    assert s["selfplay"]["games"] == 4 and s["pack"]["packed"] == pk["packed"] and s["train"]["epochs"] == 1
    assert set(s["wall_s"]) == {"selfplay", "pack", "train", "export", "match", "total"}
    q = s["quality_vs_stockfish"]
    assert q["positions"] == 300 and q["new"]["net"] == str(w / "net" / "net.safetensors")
    assert all(-1 <= q[k]["spearman"] <= 1 and q[k]["mean_abs_cp_quiet"] >= 0 for k in ("old", "new"))
