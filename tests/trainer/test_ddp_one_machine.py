"""Issue 20 item 10: ``nnue train trainer=ddp trainer.devices=N`` on one machine. Lightning's DDP
launcher re-runs ``sys.argv[0]`` as a script for ranks 1..N-1; it ran ``python "<cwd>/nnue train"``
(rank 1 failed, rank 0 was killed: status 137, no error line). The children now start
``nnue/ddp_child.py``, the same Hydra entry point."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.samples import SAMPLE


def test_train_names_a_script_lightning_can_rerun(monkeypatch, sample_dataset, tmp_path):
    import nnue.cli
    import nnue.trainer.train

    seen = {}
    monkeypatch.setattr(nnue.trainer.train, "main", lambda: seen.setdefault("argv", list(sys.argv)))
    args = ["train", "experiment=demo", f"data.path={sample_dataset}", f"paths.output_dir={tmp_path / 'o'}"]
    assert nnue.cli._main(args) == 0
    script = Path(seen["argv"][0])
    assert script.is_file() and script.suffix == ".py" and seen["argv"][1:] == args[1:]
    # what Lightning runs for rank 1: python <abspath(argv[0])> <overrides> (the script only starts main)
    r = subprocess.run([sys.executable, str(script.resolve()), "--help"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.slow
def test_ddp_two_processes_on_one_machine(tmp_path):
    lines = SAMPLE.read_text().splitlines(keepends=True)
    half = 6 * (len(lines) // 12)
    (tmp_path / "a.plain").write_text("".join(lines[:half]))
    (tmp_path / "b.plain").write_text("".join(lines[half:]))
    nnue = [sys.executable, "-m", "nnue.cli"]
    ds = tmp_path / "ds"  # two parts: a row group for each rank
    assert subprocess.run([*nnue, "pack", tmp_path / "a.plain", tmp_path / "b.plain", "-o", ds, "--no-progress"],
                          capture_output=True).returncode == 0
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    r = subprocess.run([*nnue, "train", "experiment=demo", f"data.path={ds}", f"paths.output_dir={out}",
                        "model.hidden=16", "data.positions_per_epoch=2048", "data.val_batch_size=32",
                        "trainer.max_epochs=1", "trainer.enable_progress_bar=false", "trainer=ddp",
                        "trainer.devices=2"], capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "error" not in r.stderr.lower(), r.stderr[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["global_step"] == 2048 // (256 * 2) and m["val_loss"] > 0
