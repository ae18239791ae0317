"""The inference package imports neither Lightning, Hydra nor pyarrow."""
from __future__ import annotations

import subprocess
import sys


def test_inference_imports_no_training_stack(tmp_path):
    code = (
        "import sys, nnue.inference as inf\n"
        "b = inf.boards_from_fens(['rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1'])\n"
        "bad = [m for m in ('pytorch_lightning', 'lightning', 'hydra', 'omegaconf', 'pyarrow') if m in sys.modules]\n"
        "print(b.shape, bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "torch.Size([1, 32])" in r.stdout
