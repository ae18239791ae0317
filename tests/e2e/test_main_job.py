"""End to end through the `nnue` command: pack -> train -> export -> eval, on the bundled sample."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.samples import SAMPLE

NNUE = [sys.executable, "-m", "nnue.cli"]


def run(*args, check=True):
    r = subprocess.run([*NNUE, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"nnue {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def test_pack_train_export_eval(tmp_path):
    ds, out, net = tmp_path / "ds", tmp_path / "run", tmp_path / "net"
    packed = json.loads(run("pack", SAMPLE.parent, "-o", ds, "--json", "--no-progress").stdout)
    assert packed["read"] == packed["packed"] + sum(packed["rejected"].values()) == 4015
    assert any(p.endswith("README.md") for p in packed["ignored"])
    # packing again is idempotent
    again = json.loads(run("pack", SAMPLE.parent, "-o", ds, "--json", "--no-progress").stdout)
    assert again["read"] == 0 and len(again["skipped_already_packed"]) == 1

    insp = json.loads(run("inspect", ds, "--json", "--fens", "3").stdout)
    assert insp["positions"] == 4015 and insp["games"] == 38 and len(insp["fens"]) == 3

    run("train", "experiment=demo", f"data.path={ds}", f"paths.output_dir={out}", "trainer.max_epochs=3",
        "trainer.enable_progress_bar=false", "model.hidden=32")
    assert (out / "checkpoints" / "last.ckpt").exists()
    assert (out / "checkpoints" / "weights-last.safetensors").exists()
    assert list((out / "csv").rglob("metrics.csv")) and list((out / "tensorboard").rglob("events.*"))
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs"] == 3 and metrics["val_loss"] > 0

    exp = json.loads(run("export", out / "checkpoints" / "last.ckpt", "-o", net, "--json").stdout)
    assert (net / "net.safetensors").exists() and (net / "net.bin").exists() and (net / "export.json").exists()
    assert exp["cross_check"]["positions"] > 100
    assert exp["provenance"]["dataset_manifest_sha256"]

    # the weights-only checkpoint exports to the same integers
    run("export", out / "checkpoints" / "weights-last.safetensors", "-o", tmp_path / "net2")
    assert (tmp_path / "net2" / "net.bin").read_bytes() == (net / "net.bin").read_bytes()

    fens = ["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNB1KBNR w KQkq - 0 1"]
    (tmp_path / "fens.txt").write_text("\n".join(fens) + "\n\n")
    lines = run("eval", net / "net.safetensors", "--fens", tmp_path / "fens.txt").stdout.split()
    assert len(lines) == 2 and all(v.lstrip("-").isdigit() for v in lines)
    one = run("eval", net / "net.safetensors", "--fen", fens[1]).stdout.split()
    assert one == [lines[1]]

    # the independent C evaluator reproduces `nnue eval` on the trained net, on 1,000 sample positions
    import shutil

    if shutil.which("gcc"):
        from tests.cref import compile_c_eval, run_c_eval

        sample_fens = [ln[4:].strip() for ln in SAMPLE.read_text().splitlines() if ln.startswith("fen ")][::4][:1000]
        (tmp_path / "sample_fens.txt").write_text("\n".join(sample_fens) + "\n")
        ours = [int(v) for v in run("eval", net / "net.safetensors", "--fens", tmp_path / "sample_fens.txt").stdout.split()]
        exe = compile_c_eval(tmp_path / "cbuild")
        assert run_c_eval(exe, net / "net.bin", 32, 8, "screlu", sample_fens) == ours
        assert len(ours) == 1000 and min(ours) < 0 < max(ours)

    rep = subprocess.run([sys.executable, "-m", "nnue.trainer.report", "--run", out, "--net", net, "--json"],
                         capture_output=True, text=True, check=True)
    r = json.loads(rep.stdout)
    assert r["validation_positions"] > 100 and -1 <= r["spearman_net"] <= 1


@pytest.mark.parametrize("args,needle", [
    (["pack", "/nonexistent.plain", "-o", "{tmp}/x"], "no such file"),
    (["inspect", "{tmp}"], "manifest.json"),
    (["eval", "{tmp}/missing.safetensors", "--fen", "8/8/8/8/8/8/8/K6k w - - 0 1"], "missing.safetensors"),
    (["export", "{tmp}/missing.ckpt", "-o", "{tmp}/n"], "no such checkpoint"),
])
def test_bad_input_gives_one_line_error(args, needle, tmp_path):
    r = run(*[a.format(tmp=tmp_path) for a in args], check=False)
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"nnue {args[0]}: error:") and needle in err[0], r.stderr


def test_eval_rejects_bad_fen(tmp_path):
    from tests.netfiles import make_model, write_weights  # noqa: F401  (tests/inference helpers)
    ck = write_weights(make_model("crelu"), tmp_path / "w.safetensors")
    run("export", ck, "-o", tmp_path / "net")
    r = run("eval", tmp_path / "net" / "net.safetensors", "--fen", "not a fen", check=False)
    assert r.returncode == 2 and "FEN" in r.stderr


@pytest.mark.parametrize("cmd", ["pack", "inspect", "export", "eval"])
def test_help(cmd):
    r = run(cmd, "--help")
    assert "usage: nnue " + cmd in r.stdout


def test_train_help_is_hydras():
    r = run("train", "--help")
    assert "experiment" in r.stdout and "Powered by Hydra" in r.stdout
