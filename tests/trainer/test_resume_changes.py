"""Issue 20 item 9: a resume that changes data.batch_size, accumulate_grad_batches or (mid-epoch)
the data is refused in one line with the reason (it trained both new epochs at the lr floor, or
skipped batches of another shuffle, with exit status 0); re-running a finished run trains
nothing and keeps its metrics.json (it was rewritten without val_loss and val_spearman)."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.trainer.test_train_runs import SPE, cli, overrides, train

from tests.samples import SAMPLE


def test_batch_size_change_is_refused(sample_dataset, tmp_path):
    train(sample_dataset, tmp_path, **{"trainer.max_epochs": 2})
    with pytest.raises(ValueError, match=r"data\.batch_size 256 → 512.*\+init_weights="):
        train(sample_dataset, tmp_path, **{"trainer.max_epochs": 4, "data.batch_size": 512,
                                           "ckpt_path": tmp_path / "checkpoints" / "last.ckpt"})
    # the finished run's metrics survive the refused resume
    assert json.loads((tmp_path / "metrics.json").read_text())["global_step"] == 2 * SPE


def test_accumulate_change_is_refused_in_one_line(sample_dataset, tmp_path):
    train(sample_dataset, tmp_path, **{"trainer.max_epochs": 1})
    r = cli("train", *overrides(sample_dataset, tmp_path, **{"trainer.max_epochs": 2,
                                                            "+trainer.accumulate_grad_batches": 2,
                                                            "ckpt_path": tmp_path / "checkpoints" / "last.ckpt"}))
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and err[-1].startswith("nnue train: error:"), r.stderr
    assert "trainer.accumulate_grad_batches 1 → 2" in err[-1]


def test_data_changed_mid_epoch_is_refused(sample_dataset, tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(sample_dataset, ds)
    out = tmp_path / "out"
    m = train(ds, out, **{"trainer.max_epochs": 2, "+trainer.max_steps": SPE + 3})  # stops 3 batches into epoch 2
    assert m["global_step"] == SPE + 3
    extra = tmp_path / "more.plain"
    extra.write_text("".join(SAMPLE.read_text().splitlines(keepends=True)[:600]))
    assert cli("pack", extra, "-o", ds, "--no-progress").returncode == 0
    with pytest.raises(ValueError, match=r"3 batches into epoch 2.*1 part file\(s\) new"):
        train(ds, out, **{"trainer.max_epochs": 2, "ckpt_path": out / "checkpoints" / "last.ckpt"})
    # with the data unchanged the resume is not refused (exactness: test_train_runs' interrupt tests)
    (ds / "manifest.json").write_text((sample_dataset / "manifest.json").read_text())
    train(ds, out, **{"trainer.max_epochs": 2, "ckpt_path": out / "checkpoints" / "last.ckpt"})


def test_rerunning_a_finished_run_keeps_its_metrics(sample_dataset, tmp_path, capsys):
    first = train(sample_dataset, tmp_path, **{"trainer.max_epochs": 2})
    before = (tmp_path / "metrics.json").read_text()
    assert "val_loss" in json.loads(before)
    again = train(sample_dataset, tmp_path, **{"trainer.max_epochs": 2,
                                               "ckpt_path": tmp_path / "checkpoints" / "last.ckpt"})
    assert (tmp_path / "metrics.json").read_text() == before
    assert again["val_loss"] == first["val_loss"] and again["global_step"] == 2 * SPE
    assert "nothing to train" in capsys.readouterr().err
