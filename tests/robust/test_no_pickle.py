"""Issue 15 item 7: a checkpoint is data, not code. A crafted ``.ckpt`` whose unpickling would
create a file is refused with one line naming it, and the file is not created."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
import torch

from nnue.trainer.checkpoint import UnsafeCheckpointError, load_ckpt


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):  # unpickling runs os.system / open: a visible side effect
        return (os.system, (f"touch {self.marker}",))


def _evil_ckpt(tmp_path, marker, wrap: bool):
    payload = {"state_dict": {"model.ft.weight": torch.zeros(2)}, "hyper_parameters": {"x": _Evil(marker)}}
    path = tmp_path / "evil.ckpt"
    if wrap:
        torch.save(payload, path)  # a torch zip file with the payload inside
    else:
        path.write_bytes(pickle.dumps(payload))  # a bare (legacy-format) pickle
    return path


@pytest.mark.parametrize("wrap", [True, False])
def test_crafted_checkpoint_runs_nothing(tmp_path, wrap):
    marker = tmp_path / "pwned"
    ck = _evil_ckpt(tmp_path, marker, wrap)
    with pytest.raises(UnsafeCheckpointError, match="evil.ckpt: refused to load"):
        load_ckpt(ck)
    assert not marker.exists()


def test_nnue_export_refuses_it_in_one_line(tmp_path):
    marker = tmp_path / "pwned"
    ck = _evil_ckpt(tmp_path, marker, True)
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "export", str(ck), "-o", str(tmp_path / "net")],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nnue export: error: ") and "evil.ckpt" in lines[0]
    assert "posix.system" in lines[0] or "os.system" in lines[0] or "system" in lines[0]
    assert not marker.exists() and not (tmp_path / "net").exists()


def test_plain_data_and_paths_load(tmp_path):
    from pathlib import Path

    obj = {"state_dict": {"a": torch.arange(3)}, "hyper_parameters": {"p": Path("/x/y"), "n": 3, "s": "t"},
           "epoch": 1}
    torch.save(obj, tmp_path / "ok.ckpt")
    got = load_ckpt(tmp_path / "ok.ckpt")
    assert torch.equal(got["state_dict"]["a"], obj["state_dict"]["a"]) and got["hyper_parameters"] == obj["hyper_parameters"]


def test_not_a_torch_file(tmp_path):
    (tmp_path / "junk.ckpt").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(UnsafeCheckpointError, match="junk.ckpt: "):
        load_ckpt(tmp_path / "junk.ckpt")
