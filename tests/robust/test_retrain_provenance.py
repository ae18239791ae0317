"""Issue 10: a retrain's export.json and net provenance name the registry version's final path
(versions/NNNN), not the temporary work/NNNN folder the cycle exported into."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from nnue.inference import load
from nnue.trainer.export import export
from tests.netfiles import make_model, write_weights


def test_export_names_the_folder_it_is_renamed_to(tmp_path, sample_dataset):
    work = tmp_path / "reg" / "work" / "0001"
    work.mkdir(parents=True)
    ck = write_weights(make_model("crelu", hidden=16), work / "checkpoint.safetensors", sample_dataset)
    final = (tmp_path / "reg" / "versions" / "0001").resolve()
    r = export(ck, work, max_positions=200, final_dir=final)
    assert r["net"] == str(final / "net.safetensors") and r["bin"] == str(final / "net.bin")
    assert r["provenance"]["checkpoint"] == str(final / "checkpoint.safetensors")
    final.parent.mkdir(parents=True)
    os.replace(work, final)
    on_disk = json.loads((final / "export.json").read_text())
    assert on_disk["provenance"] == r["provenance"] and Path(on_disk["net"]).exists()
    assert load(final / "net.safetensors").provenance["checkpoint"] == str(final / "checkpoint.safetensors")
    assert str(work) not in json.dumps(on_disk)
    # without final_dir (nnue export), the paths are the ones given
    plain = export(ck if ck.exists() else final / "checkpoint.safetensors", tmp_path / "net", max_positions=200)
    assert plain["net"] == str(tmp_path / "net" / "net.safetensors")


def test_a_retrain_cycle_names_versions_not_work(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "service_testlib", Path(__file__).resolve().parents[1] / "service" / "service_testlib.py")
    lib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lib)
    NNUE, cut_dumps, env = lib.NNUE, lib.cut_dumps, lib.env

    dumps = tmp_path / "dumps"
    cut_dumps(dumps, 2, records=700, bad_every=0)
    reg = tmp_path / "reg"
    tiny = ("experiment=demo trainer.max_epochs=1 data.positions_per_epoch=2048 data.batch_size=256 "
            "model.hidden=8 trainer.enable_progress_bar=false data.val_fraction=0.2 ~logger.tensorboard")
    r = subprocess.run([*NNUE, "retrain", f"registry={reg}", f"watch=[{dumps}]", "pack.settle=0",
                        "export.positions=1000", "gate.fraction=0.2", "train.skip_if_no_new_data=false",
                        f'train.overrides="{tiny}"'], capture_output=True, text=True, env=env(), timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    v = (reg / "versions" / "0001").resolve()
    exp = json.loads((v / "export.json").read_text())
    assert exp["net"] == str(v / "net.safetensors") and exp["provenance"]["checkpoint"] == str(v / "checkpoint.safetensors")
    assert load(v / "net.safetensors").provenance["checkpoint"] == str(v / "checkpoint.safetensors")
    assert str(reg / "work") not in (v / "export.json").read_text()
