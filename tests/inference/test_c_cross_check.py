"""Hard gate: the independent C evaluator (tests/c/nnue_eval.c) equals `nnue eval` exactly."""
from __future__ import annotations

import io
import shutil
from contextlib import redirect_stdout

import pytest
from cref import compile_c_eval, run_c_eval
from netfiles import make_model, write_weights

from nnue.cli import main as cli_main
from nnue.trainer.export import export


def _sample_fens(path, n):
    fens = []
    for line in open(path):
        if line.startswith("fen "):
            fens.append(line[4:].strip())
    step = max(1, len(fens) // n)
    return fens[::step][:n]


@pytest.fixture(scope="module")
def c_eval(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    return compile_c_eval(tmp_path_factory.mktemp("cbuild"))


@pytest.mark.parametrize("act,hidden", [("crelu", 33), ("screlu", 64), ("pairwise_crelu", 48)])
def test_c_reference_equals_nnue_eval(act, hidden, c_eval, tmp_path, sample_dataset):
    from conftest import SAMPLE

    model = make_model(act, hidden=hidden, seed=hidden, ft_scale=0.25, l1_scale=1.9)
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset)
    export(ck, tmp_path / "net")
    fens = _sample_fens(SAMPLE, 1200)
    (tmp_path / "fens.txt").write_text("\n".join(fens) + "\n")
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli_main(["eval", str(tmp_path / "net" / "net.safetensors"), "--fens", str(tmp_path / "fens.txt")]) == 0
    ours = [int(v) for v in buf.getvalue().split()]
    theirs = run_c_eval(c_eval, tmp_path / "net" / "net.bin", hidden, 8, act, fens)
    assert len(ours) == len(fens) >= 1000
    assert ours == theirs
    assert min(ours) < 0 < max(ours)
