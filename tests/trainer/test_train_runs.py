"""Training runs users can trust (issue 12): schedules per step, exact resume, checkpoints at every
end, compose-time errors, interrupts, progress lines, plots, schedule-free AdamW, early stopping.

Small runs on the bundled sample (4,015 positions): hidden 16, 256 positions a step.
"""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from nnue.trainer.schedule import Ramp, Schedule, total_steps
from nnue.trainer.train import run

NNUE = [sys.executable, "-m", "nnue.cli"]
SPE = 8  # steps per epoch: positions_per_epoch 2048 / batch 256


def overrides(ds, out, **kw) -> list[str]:
    base = {"experiment": "demo", "data.path": ds, "paths.output_dir": out, "model.hidden": 16,
            "data.positions_per_epoch": 2048, "data.val_fraction": 0.2, "data.val_batch_size": 4096,
            "trainer.max_epochs": 2, "trainer.log_every_n_steps": 1, "trainer.enable_progress_bar": False}
    base.update(kw)
    return [f"{k}={'null' if v is None else v}" for k, v in base.items()]


def cfg_of(ds, out, **kw):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        return compose("train", overrides=overrides(ds, out, **kw))


def train(ds, out, **kw) -> dict:
    return run(cfg_of(ds, out, **kw))


def ckpt(out) -> dict:
    return torch.load(Path(out) / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)


def lrs(out) -> list[tuple[int, float]]:
    """(step, lr) of every CSV row with an lr, all versions (a resumed run adds one), by step."""
    rows = []
    for f in sorted(Path(out, "csv").rglob("metrics.csv")):
        rows += [(int(r["step"]), float(r["lr"])) for r in csv.DictReader(f.open()) if r.get("lr")]
    return sorted(set(rows))


def cli(*args, **kw):
    return subprocess.run([*NNUE, *map(str, args)], capture_output=True, text=True, **kw)


# -------------------------------------------------------------------------- schedules (unit tests)
def test_lr_schedules_warmup_floor_and_shapes():
    c = Schedule("cosine", base=1e-3, final=1e-5, total=100, warmup_steps=10)
    assert c(0) == pytest.approx(1e-4) and c(9) == pytest.approx(1e-3)
    assert c(10) == pytest.approx(1e-3) and c(100) == pytest.approx(1e-5) and c(1000) == pytest.approx(1e-5)
    assert all(c(s) >= c(s + 1) for s in range(10, 120))
    lin = Schedule("linear", base=1.0, final=0.0, total=10)
    assert lin(5) == pytest.approx(0.5)
    st = Schedule("step", base=1.0, final=0.05, total=100, gamma=0.5, step_steps=10)
    assert [st(s) for s in (0, 9, 10, 25, 99)] == pytest.approx([1, 1, 0.5, 0.25, 0.05])
    assert Schedule("constant", base=0.3, total=5, warmup_steps=2)(4) == 0.3
    wr = Schedule("cosine_restarts", base=1.0, final=0.0, total=100, period_steps=10)
    assert wr(0) == 1.0 and wr(10) == 1.0 and wr(5) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="scheduler.kind"):
        Schedule("bogus")


@pytest.mark.parametrize("kind", ["cosine", "linear"])
@pytest.mark.parametrize("new_total", [60, 200, 400])
def test_rebuilt_schedule_continues_and_never_rises(kind, new_total):
    old = Schedule(kind, base=2e-4, final=1e-5, total=100, warmup_steps=5)
    at = 50
    new = old.rebuilt(at, new_total)
    assert new(at) == pytest.approx(old(at))
    assert all(new(s) >= new(s + 1) - 1e-15 for s in range(at, new_total + 5))
    assert new(new_total) == pytest.approx(1e-5)
    # a second rebuild keeps going from the value in force
    again = new.rebuilt(55, new_total + 50)
    assert again(55) == pytest.approx(new(55)) and again(new_total + 50) == pytest.approx(1e-5)


def test_lambda_ramp():
    r = Ramp(0.0, 1.0, "cosine", total=100)
    assert r(0) == 0.0 and r(50) == pytest.approx(0.5) and r(100) == pytest.approx(1.0)
    assert Ramp(0.2, 0.6, "linear", total=10)(5) == pytest.approx(0.4)
    assert Ramp(0.2, 0.6, "linear", total=10).rebuilt(5, 20)(5) == pytest.approx(0.4)


def test_total_steps_from_how_the_run_stops():
    assert total_steps({"max_epochs": -1, "max_steps": 160}, 64) == 160
    assert total_steps({"max_epochs": 3}, 64) == 192
    assert total_steps({"max_epochs": 3, "max_steps": 100}, 64) == 100
    assert total_steps({"max_epochs": 2, "limit_train_batches": 10}, 64) == 20
    assert total_steps({"max_epochs": 2, "accumulate_grad_batches": 4}, 64) == 32
    with pytest.raises(ValueError, match="no finite stop"):
        total_steps({"max_epochs": -1, "max_steps": -1}, 64)


# -------------------------------------------------------------------------- runs
def test_max_steps_run_has_one_decay_over_its_steps(sample_dataset, tmp_path):
    """Issue: max_epochs=-1 +max_steps=160 swung between 0.002 and 1e-05 every epoch."""
    m = train(sample_dataset, tmp_path, **{"trainer.max_epochs": -1, "+trainer.max_steps": 40})
    assert m["global_step"] == 40 and m["total_steps"] == 40
    lr = [v for _, v in lrs(tmp_path)]
    assert len(lr) >= 39 and all(a >= b for a, b in zip(lr, lr[1:])), lr
    assert lr[0] == pytest.approx(0.002, rel=0.01) and lr[-1] < 2e-4


def test_resume_with_more_epochs_never_raises_lr(sample_dataset, tmp_path):
    """Issue: resuming with more epochs made the lr rise again (1e-05 -> 2e-04)."""
    train(sample_dataset, tmp_path, **{"trainer.max_epochs": 2})
    before = lrs(tmp_path)
    m = train(sample_dataset, tmp_path, **{"trainer.max_epochs": 4,
                                           "ckpt_path": tmp_path / "checkpoints" / "last.ckpt"})
    assert m["global_step"] == 4 * SPE and m["total_steps"] == 4 * SPE
    after = [v for s, v in lrs(tmp_path) if s >= 2 * SPE]
    assert after and after[0] <= before[-1][1] * 1.000001
    assert all(a >= b for a, b in zip(after, after[1:]))
    st = ckpt(tmp_path)["nnue_forge"]["schedule"]
    assert st["total"] == 4 * SPE and st["seg_start"] == 2 * SPE


def _weights(out) -> dict:
    return {k: v for k, v in ckpt(out)["state_dict"].items()}


@pytest.mark.parametrize("epoch_len", [2048, pytest.param(None, marks=pytest.mark.slow)],
                         ids=["fixed-length", "one-pass"])
def test_exact_resume_4_epochs_vs_2_plus_2(sample_dataset, tmp_path, epoch_len):
    kw = {"scheduler": "constant", "data.positions_per_epoch": epoch_len, "data.shuffle_buffer": 1024}
    a, b = tmp_path / "a", tmp_path / "b"
    ma = train(sample_dataset, a, **kw, **{"trainer.max_epochs": 4})
    train(sample_dataset, b, **kw, **{"trainer.max_epochs": 2})
    mb = train(sample_dataset, b, **kw, **{"trainer.max_epochs": 4, "ckpt_path": b / "checkpoints" / "last.ckpt"})
    assert ma["global_step"] == mb["global_step"] > 0
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_checkpoint_every_epoch_whatever_the_validation_cadence(sample_dataset, tmp_path):
    """Issue: check_val_every_n_epoch=2 left last.ckpt at epoch 1; limit_val_batches=0 wrote no weights."""
    from safetensors import safe_open

    for name, extra in (("every2", {"+trainer.check_val_every_n_epoch": 2}),
                        ("noval", {"+trainer.limit_val_batches": 0})):
        out = tmp_path / name
        m = train(sample_dataset, out, **{"trainer.max_epochs": 3, "checkpoints.weights_every_n_epochs": 1}, **extra)
        ck = ckpt(out)
        assert m["global_step"] == ck["global_step"] == 3 * SPE, name
        assert json.loads((out / "metrics.json").read_text())["global_step"] == 3 * SPE
        with safe_open(str(out / "checkpoints" / "weights-last.safetensors"), "pt") as f:
            assert json.loads(f.metadata()["progress"])["global_step"] == 3 * SPE
        assert (out / "checkpoints" / "weights-epoch0003.safetensors").exists()  # epochs count from 1
    assert [p.name for p in (tmp_path / "every2" / "checkpoints").glob("best-epoch*.ckpt")] == ["best-epoch0002.ckpt"]


def test_plots_written(sample_dataset, tmp_path):
    train(sample_dataset, tmp_path)
    for name in ("loss.png", "quality.png", "schedule.png"):
        data = (tmp_path / "plots" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, name
    assert not list((tmp_path / "plots").glob("*.tmp*"))


@pytest.mark.slow
def test_early_stopping(sample_dataset, tmp_path):
    m = train(sample_dataset, tmp_path, **{"trainer.max_epochs": 10, "scheduler": "constant",
                                           "optimizer.lr": 1e-9, "early_stopping.patience": 2,
                                           "early_stopping.min_delta": 0.001})
    assert m["epochs"] == 3 and m["early_stopped"] and ckpt(tmp_path)["global_step"] == 3 * SPE


class ModeProbe:
    """A callback (built by Hydra from the config) recording schedule-free's train_mode."""
    seen: list = []

    def __new__(cls):
        import pytorch_lightning as pl

        class Probe(pl.Callback):
            def on_train_batch_start(self, trainer, lit, batch, i):
                ModeProbe.seen.append(("train", trainer.optimizers[0].param_groups[0]["train_mode"]))

            def on_validation_batch_start(self, trainer, lit, batch, i, dl=0):
                ModeProbe.seen.append(("val", trainer.optimizers[0].param_groups[0]["train_mode"]))

        return Probe()


def test_schedulefree_eval_mode_for_validation_and_checkpoints(sample_dataset, tmp_path):
    ModeProbe.seen.clear()
    train(sample_dataset, tmp_path, **{"optimizer": "schedulefree", "scheduler": "constant",
                                       "optimizer.lr": 0.002, "+callbacks.probe._target_": "tests.trainer.test_train_runs.ModeProbe"})
    assert {m for k, m in ModeProbe.seen if k == "train"} == {True}
    assert {m for k, m in ModeProbe.seen if k == "val"} == {False}
    ck = ckpt(tmp_path)
    x, y = ck["state_dict"], ck["nnue_forge"]["train_state_dict"]
    opt = ck["optimizer_states"][0]
    beta1 = opt["param_groups"][0]["betas"][0]
    order = opt["param_groups"][0]["params"]
    names = [k for k in y if k.startswith("model.") and y[k].dtype.is_floating_point]
    assert len(names) == len(order)
    for name, pid in zip(names, order):
        z = opt["state"][pid]["z"]
        assert torch.allclose(x[name], torch.lerp(y[name], z, 1 - 1 / beta1), atol=1e-7)  # float32 lerp
    assert any(not torch.equal(x[n], y[n]) for n in names)
    # export reads the averaged (eval) weights
    from nnue.trainer.export import load_checkpoint

    model, *_ = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    sd = model.state_dict()
    assert all(torch.equal(sd[n.removeprefix("model.")], x[n]) for n in names)


def test_compiled_checkpoint_keys_load_both_ways(sample_dataset, tmp_path):
    """torch.compile saves model._orig_mod.*: such a checkpoint resumes and exports in the plain
    model, and a plain one loads into a compiled model."""
    from nnue.trainer.export import load_checkpoint

    train(sample_dataset, tmp_path, **{"trainer.max_epochs": 1})
    ck = ckpt(tmp_path)
    comp = dict(ck, state_dict={k.replace("model.", "model._orig_mod.", 1): v for k, v in ck["state_dict"].items()})
    path = tmp_path / "compiled.ckpt"
    torch.save(comp, path)
    plain_model, *_ = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    comp_model, *_ = load_checkpoint(path)
    assert all(torch.equal(a, b) for a, b in zip(plain_model.state_dict().values(), comp_model.state_dict().values()))
    m = train(sample_dataset, tmp_path / "r", **{"trainer.max_epochs": 2, "ckpt_path": path})
    assert m["global_step"] == 2 * SPE
    # plain checkpoint -> compiled LightningModule
    from hydra.utils import instantiate

    lit = instantiate(cfg_of(sample_dataset, tmp_path).model, optimizer=None)
    lit.model = torch.compile(lit.model)
    c2 = dict(ck)
    lit.on_load_checkpoint(c2)
    assert all("_orig_mod." in k for k in c2["state_dict"] if k.startswith("model."))
    lit.load_state_dict(c2["state_dict"])


# -------------------------------------------------------------------------- the command line
@pytest.mark.parametrize("arg,needle", [
    ("trainer.max_epochs=abc", "trainer.max_epochs='abc'"),
    ("data.batch_size=-5", "data.batch_size=-5"),
    ("optimizer.lr=fast", "optimizer.lr='fast'"),
    ("+trainer.max_epoch=1", "did you mean trainer.max_epochs"),
    ("trainer.max_epochs=-1", "no finite stop"),
    ("scheduler.warmup_steps=-3", "scheduler.warmup_steps"),
    ("wdl_lambda.end=1.5", "wdl_lambda.end"),
    pytest.param("trainer=gpu", "no CUDA GPU", marks=pytest.mark.skipif(torch.cuda.is_available(), reason="has CUDA")),
])
def test_bad_values_are_refused_at_compose_time(sample_dataset, tmp_path, arg, needle):
    from nnue.trainer.checks import check_train_args

    out = tmp_path / "out"
    err = check_train_args(["experiment=demo", f"data.path={sample_dataset}", f"paths.output_dir={out}", arg])
    assert err and "\n" not in err and needle in err, err
    assert not out.exists()


@pytest.mark.parametrize("arg", ["trainer.max_epochs=abc", "+trainer.max_epoch=1"])
def test_bad_value_one_line_status_2_nothing_written(sample_dataset, tmp_path, arg):
    out = tmp_path / "out"
    r = cli("train", "experiment=demo", f"data.path={sample_dataset}", f"paths.output_dir={out}", arg)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and err[0].startswith("nnue train: error:"), r.stderr
    assert not out.exists() and not r.stdout.strip()


def test_empty_dataset_is_an_error(tmp_path):
    (tmp_path / "empty.plain").write_text("")
    ds = tmp_path / "ds"
    assert cli("pack", tmp_path / "empty.plain", "-o", ds, "--no-progress").returncode == 0
    r = cli("train", "experiment=demo", f"data.path={ds}", f"paths.output_dir={tmp_path / 'out'}")
    assert r.returncode == 2 and "0 positions" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("epoch_len", ["2048", "null"])
def test_training_set_emptied_by_filters_is_an_error(sample_dataset, tmp_path, epoch_len):
    r = cli("train", *overrides(sample_dataset, tmp_path / "out", **{"data.filters.random_skip": 1.0,
                                                                    "data.positions_per_epoch": epoch_len}))
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1, r.stderr
    assert "read" in err[0] and "random_skip" in err[0], err[0]
    assert not (tmp_path / "out" / "checkpoints" / "last.ckpt").exists()


def test_progress_lines_without_a_terminal_and_no_noise(sample_dataset, tmp_path):
    r = cli("train", *overrides(sample_dataset, tmp_path / "out", **{"trainer.enable_progress_bar": True}))
    assert r.returncode == 0, r.stderr
    text = r.stdout + r.stderr
    lines = [ln for ln in text.splitlines() if "epoch " in ln and " step " in ln]
    assert len(lines) == 2 and "step 16/16" in lines[-1], text
    for field in ("train_loss", "val_loss", "val_spearman", "lr ", "λ ", "pos/s", "ETA"):
        assert field in lines[-1]
    assert "\r" not in text and "litlogger" not in text and "GPU available" not in text
    assert "\r" not in (tmp_path / "out" / "train.log").read_text()


@pytest.mark.slow
def test_progress_bar_on_a_terminal(sample_dataset, tmp_path):
    import pty

    master, slave = pty.openpty()
    p = subprocess.Popen([*NNUE, "train", *overrides(sample_dataset, tmp_path / "out",
                                                     **{"trainer.enable_progress_bar": True})],
                         stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert p.wait() == 0
    text = b"".join(chunks).decode(errors="replace")
    assert "16/16" in text and "pos/s" in text and "\r" in text


def _wait_for(proc, needle: str, timeout: float = 120) -> str:
    seen = ""
    t = time.time()
    while time.time() - t < timeout:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        if needle in line:
            return seen
    raise AssertionError(f"never saw {needle!r}:\n{seen}")


@pytest.mark.parametrize("sig,status", [pytest.param(signal.SIGINT, 130, marks=pytest.mark.slow),
                                        (signal.SIGTERM, 143)])
def test_interrupt_saves_last_ckpt_and_resumes_exactly(sample_dataset, tmp_path, sig, status):
    """A real signal to a child `nnue train`: one line, status 130/143, last.ckpt at the
    interrupted step; resuming it ends with the same weights as a run never interrupted."""
    kw = {"trainer.max_epochs": 4, "data.positions_per_epoch": 8192, "scheduler.warmup_steps": 5,
          "wdl_lambda.end": 0.5}
    out = tmp_path / "int"
    p = subprocess.Popen([*NNUE, "train", *overrides(sample_dataset, out, **kw)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    _wait_for(p, "epoch 1/4")
    time.sleep(0.7)
    p.send_signal(sig)
    rest = p.communicate(timeout=120)[0]
    assert p.returncode == status, rest
    msg = [ln for ln in rest.splitlines() if ln.startswith("nnue train:")]
    assert len(msg) == 1 and "interrupted by" in msg[0] and "Traceback" not in rest, rest
    step = ckpt(out)["global_step"]
    assert f"step {step:,}" in msg[0] and 0 < step < 4 * 32
    r = cli("train", *overrides(sample_dataset, out, **kw, ckpt_path=out / "checkpoints" / "last.ckpt"))
    assert r.returncode == 0, r.stderr
    ref = tmp_path / "ref"
    assert cli("train", *overrides(sample_dataset, ref, **kw)).returncode == 0
    wa, wb = _weights(out), _weights(ref)
    assert ckpt(out)["global_step"] == ckpt(ref)["global_step"] == 4 * 32
    assert all(torch.equal(wa[k], wb[k]) for k in wb)


def test_report_refuses_a_net_of_another_run(sample_dataset, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    train(sample_dataset, a, **{"trainer.max_epochs": 1})
    train(sample_dataset, b, **{"trainer.max_epochs": 1})
    net = tmp_path / "netb"
    assert cli("export", b / "checkpoints" / "last.ckpt", "-o", net).returncode == 0
    r = cli("report", a, "--net", net)
    assert r.returncode == 2 and "another run" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = cli("report", a, "--net", net, "--force", "--json")
    assert r.returncode == 0, r.stderr
    ok = cli("report", b, "--net", net, "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["validation_positions"] > 100
    alone = cli("report", b)
    assert alone.returncode == 0 and "validation loss" in alone.stdout
