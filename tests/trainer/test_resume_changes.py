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


def test_resume_mid_epoch_while_data_streams_in(sample_dataset, tmp_path):
    """A run interrupted mid-epoch while ``pack --watch`` keeps adding parts was refused ("the
    data changed"), so a streaming user lost up to an epoch at each interrupt. Now the interrupted
    epoch is replayed on the parts it had (the checkpoint lists them in order) and the new part
    joins at the next epoch: the final weights equal those of a run never interrupted that saw
    the part arrive at the same epoch boundary."""
    import torch

    from nnue.pipeline.pack import pack
    from nnue.trainer.callbacks import TrainingInterrupted

    extra = tmp_path / "more.plain"
    extra.write_text("".join(SAMPLE.read_text().splitlines(keepends=True)[:600]))
    # the defaults: on CPU the fast path (numba FT + RowSparseAdamW, whose lazy decays the
    # interrupt's checkpoint must not apply early)
    kw = {"trainer.max_epochs": 3}
    ref_ds, ds = tmp_path / "ref_ds", tmp_path / "ds"
    shutil.copytree(sample_dataset, ref_ds)
    shutil.copytree(sample_dataset, ds)
    # the reference: the part is packed at the end of epoch 2, and joins at epoch 3
    train(ref_ds, tmp_path / "ref", **kw, **{"+callbacks.pack._target_": "tests.trainer.ddp_signal.PackAt",
                                             "+callbacks.pack.input": extra, "+callbacks.pack.dataset": ref_ds})
    # interrupted 3 batches into epoch 2 (SIGINT at the end of a step, an event of the loop), the
    # part packed meanwhile, then resumed
    out, log = tmp_path / "out", tmp_path / "parts.jsonl"
    with pytest.raises(TrainingInterrupted):
        train(ds, out, **kw, **{"+callbacks.sig._target_": "tests.trainer.ddp_signal.SignalAt",
                                "+callbacks.sig.step": SPE + 2, "+callbacks.sig.signum": 2})
    assert pack([extra], ds, progress=False)["packed"] > 0
    m = train(ds, out, **kw, **{"ckpt_path": out / "checkpoints" / "last.ckpt", "data.parts_log": log})
    assert m["global_step"] == 3 * SPE
    lines = [json.loads(x) for x in log.read_text().splitlines() if json.loads(x)["split"] == "train"]
    new = {p.name for p in ds.glob("part-*.parquet")} - {p.name for p in sample_dataset.glob("part-*.parquet")}
    assert len(new) == 1
    assert [(x["epoch"], bool(new & set(x["known_parts"]))) for x in lines] == [(2, False), (3, True)]
    a = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "ref" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_part_of_the_epoch_gone_is_still_refused(sample_dataset, tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(sample_dataset, ds)
    extra = tmp_path / "more.plain"
    extra.write_text("".join(SAMPLE.read_text().splitlines(keepends=True)[:600]))
    cli("pack", extra, "-o", ds, "--no-progress")
    out = tmp_path / "out"
    from nnue.trainer.callbacks import TrainingInterrupted

    with pytest.raises(TrainingInterrupted):
        train(ds, out, **{"trainer.max_epochs": 2, "+callbacks.sig._target_": "tests.trainer.ddp_signal.SignalAt",
                          "+callbacks.sig.step": SPE + 2, "+callbacks.sig.signum": 2})
    (ds / "manifest.json").write_text((sample_dataset / "manifest.json").read_text())  # the extra part gone
    with pytest.raises(ValueError, match=r"into epoch 2.*1 gone\): a part file the epoch read is gone"):
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
