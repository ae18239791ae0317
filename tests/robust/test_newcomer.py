"""A newcomer's first hour, in a fresh clone: what the README and the docs point to works there, or
says what it needs.

- the bench scripts the docs point to (``bench/quality_selfplay.sh``, ``teacher_quality.sh``,
  ``engine_strength.sh``) stopped with "``../shared/data/selfplay/*.plain``: no such file": they
  now run on the repo's ``data/demo`` when the full self-play is not beside the clone, say so,
  and refuse to overwrite the tracked results with other data;
- the docs cited files a clone does not have and the project's internal history;
- ``nnue train`` with no arguments took seconds to say that ``data.path`` is required;
- the run line called the batch size the epoch's positions; an sfnnv5 run reported
  ``val_l0_density: 0.0``; a 100-step sfnnv5 run wrote 1.6 GB of checkpoints; the first
  ``scripts/demo.sh`` was silent for minutes; 213 Hydra deprecation warnings in a test run.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _clone(tmp_path: Path) -> Path:
    """A clone's bench/ and data/demo with nothing beside it (no ../shared)."""
    c = tmp_path / "clone"
    (c / "bench").mkdir(parents=True)
    shutil.copy(REPO / "bench" / "selfplay_data.sh", c / "bench")
    (c / "data").mkdir()
    (c / "data" / "demo").symlink_to(REPO / "data" / "demo")
    return c


def _source(clone: Path, **env) -> subprocess.CompletedProcess:
    import os

    e = {k: v for k, v in os.environ.items() if k not in ("SELFPLAY", "SAVE")} | env
    return subprocess.run(["bash", "-c", 'set -euo pipefail; source bench/selfplay_data.sh; echo "$SP ${#SP_FILES[@]}"'],
                          cwd=clone, capture_output=True, text=True, env=e)


@pytest.mark.parametrize("script", ["quality_selfplay.sh", "teacher_quality.sh", "engine_strength.sh",
                                    "residual_selfplay.sh", "sf19_finetune.sh"])
def test_bench_scripts_take_their_data_from_the_helper(script):
    text = (REPO / "bench" / script).read_text()
    assert "source bench/selfplay_data.sh" in text and '"${SP_FILES[@]' in text
    assert "SP=../shared" not in text and "$SP\"/*.plain" not in text


def test_without_the_shared_selfplay_the_demo_data_is_used_and_said(tmp_path):
    clone = _clone(tmp_path)
    r = _source(clone)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["data/demo", "2"]
    assert "not beside this clone" in r.stderr and "data/demo" in r.stderr
    r = _source(clone, SAVE="1")
    assert r.returncode == 2 and "SAVE=1 replaces the tracked results" in r.stderr
    (tmp_path / "empty").mkdir()
    r = _source(clone, SELFPLAY=str(tmp_path / "empty"))
    assert r.returncode == 2 and "no .plain or .plain.zst dumps in" in r.stderr
    r = _source(clone, SELFPLAY=str(REPO / "tests" / "data" / "selfplay"))
    assert r.returncode == 0 and r.stdout.split()[1] == "2", r.stderr


def around(page: Path, n: int) -> str:
    """Lines ``n - 1`` to ``n + 1`` of ``page`` (a sentence that says a file is not in a clone wraps)."""
    lines = page.read_text().splitlines()
    return " ".join(lines[max(0, n - 2):n + 1])


def test_docs_cite_no_shared_files_as_if_there_and_no_internal_history():
    """Every page of the site: no issue numbers, no commit hashes, and ``../shared/…`` only where
    the text says it is not in a clone (the changelog is history by design)."""
    bad = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        if page.name in ("CHANGELOG.md", "cli.md", "benchmarks.md"):
            continue
        for n, line in enumerate(page.read_text().splitlines(), 1):
            if re.search(r"\bissue \d+|\(issue|\bissues? \d+", line, re.I):
                bad.append(f"{page.name}:{n}: issue: {line.strip()[:100]}")
            if re.search(r"`[0-9a-f]{7,12}`", line) and "sha256" not in line and "github.com" not in line:
                bad.append(f"{page.name}:{n}: commit: {line.strip()[:100]}")
            if "../shared/" in line and not re.search(r"skip|not in the repo|may not copy|not beside|not shipped",
                                                       around(page, n)):
                bad.append(f"{page.name}:{n}: ../shared cited as if it were in a clone: {line.strip()[:100]}")
    assert not bad, "\n".join(bad[:40])


def test_train_without_arguments_says_data_path_at_once():
    """``nnue train`` with no data.path: the one line comes before Hydra and torch are loaded."""
    code = ("import sys, nnue.cli; rc = nnue.cli.main(['train']); "
            "print('torch' in sys.modules, 'hydra' in sys.modules, file=sys.stderr); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and lines[0].startswith("nnue train: error: data.path is required"), r.stderr
    assert lines[-1] == "False False", r.stderr


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_sfnnv5_reports_its_real_activation_density(backend):
    """An sfnnv5 run reported ``val_l0_density: 0.0``: its activations were a column of zeros.
    They are the feature transformer's pairwise products now, and the eval is unchanged."""
    import torch

    from nnue.pipeline.batch import to_sparse_batch
    from nnue.pipeline.features import get_feature_set, parse_output_buckets
    from nnue.pipeline.stream import PackedStream
    from nnue.trainer.kinds.sfnnv5 import SFNNv5Arch, SFNNv5Net
    from tests.samples import SAMPLE

    fs = get_feature_set("halfkav2_hm")
    torch.manual_seed(0)
    net = SFNNv5Net(SFNNv5Arch(fs.num_inputs, 64), backend)
    with torch.no_grad():
        net.ft.weight.uniform_(-0.05, 0.1)
        net.ft.bias.uniform_(0.0, 0.5)
    from nnue.pipeline.pack import pack
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        pack([SAMPLE], Path(d) / "ds", progress=False)
        raw = next(iter(PackedStream([Path(d) / "ds"], 256, 0, "all", 0.0)))
    b = to_sparse_batch(raw, fs, parse_output_buckets("SFPieceCount<8>"))
    y, h = net.forward_with_activations(b.stm_indices, b.nstm_indices, b.bucket)
    assert h.shape == (256, 64) and 0.05 < float((h > 0).float().mean()) < 1.0
    assert torch.equal(y, net(b.stm_indices, b.nstm_indices, b.bucket))


def test_a_run_keeps_what_a_user_needs_by_default(sample_dataset, tmp_path, caplog):
    """A 100-step sfnnv5 run wrote 1.6 GB: a 93 MB weights file every epoch and two 277 MB
    checkpoints. By default now: last.ckpt (resume), weights-last.safetensors (export) and a
    best checkpoint of weights only (export reads it); ``checkpoints.weights_every_n_epochs=N``
    keeps a weights file every N epochs."""
    import torch

    from nnue.trainer.export import load_checkpoint
    from tests.trainer.test_train_runs import train

    import logging

    out = tmp_path / "out"
    caplog.set_level(logging.INFO, logger="nnue.trainer")
    train(sample_dataset, out, **{"trainer.max_epochs": 3})
    # the run line called the batch size the epoch's positions ("8 steps per epoch of 256 positions")
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("run: "))
    assert re.match(r"run: 24 steps of 256 positions, (exactly|about) 8 batches per epoch", line), line
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names[0].startswith("best-epoch") and names[1:] == ["last.ckpt", "weights-last.safetensors"], names
    best = next((out / "checkpoints").glob("best-epoch*.ckpt"))
    ck = torch.load(best, map_location="cpu", weights_only=True)
    assert "optimizer_states" not in ck and "state_dict" in ck
    assert "optimizer_states" in torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    load_checkpoint(best)  # export reads it
    out2 = tmp_path / "every2"
    train(sample_dataset, out2, **{"trainer.max_epochs": 3, "checkpoints.weights_every_n_epochs": 2})
    assert sorted(p.name for p in (out2 / "checkpoints").glob("weights-epoch*")) == ["weights-epoch0002.safetensors"]


def test_setup_and_demo_say_what_they_are_doing(tmp_path):
    """The first ``bash scripts/demo.sh`` printed one line and then nothing for about five minutes
    (the install, then the first pack while numba compiled). setup.sh now prints its steps (and
    pip its download bars on a terminal); demo.sh says once that its first run compiles. Checked
    with a stand-in for Python, so that nothing is installed."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", tmp_path / "scripts")
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    stub = tmp_path / "pystub"
    stub.write_text("#!/bin/sh\nif [ \"$1\" = -m ] && [ \"$2\" = venv ]; then mkdir -p \"$3/bin\"; "
                    f"cp {stub} \"$3/bin/python\"; cp {stub} \"$3/bin/nnue\"; fi\nexit 0\n")
    stub.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(stub), "VENV": str(tmp_path / "venv")}
    r = subprocess.run(["bash", "scripts/setup.sh"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    steps = [x for x in r.stderr.splitlines() if x.startswith("setup [")]
    assert [x.split("] ", 1)[1].split()[0] for x in steps] == ["1/3", "2/3", "3/3", "done"], r.stderr
    assert "3-6 minutes" in steps[0]
    again = subprocess.run(["bash", "scripts/setup.sh"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert again.returncode == 0 and again.stderr == ""  # installed: silent
    demo = (REPO / "scripts" / "demo.sh").read_text()
    assert "first run: numba compiles" in demo and 'touch "$first"' in demo


def test_code_blocks_and_the_home_diagram_fit_a_laptop_window():
    """At 1,280 px the docs' code blocks and the home page's diagram were cut off (a scrollbar on
    a 61rem column). The site's stylesheet widens the page and wraps long code lines; the diagram
    is drawn on two lines."""
    import yaml

    site = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    css = (REPO / "docs" / site["extra_css"][0]).read_text()
    assert "white-space: pre-wrap" in css and ".md-grid { max-width: 100%; }" in css
    text = (REPO / "docs" / "index.md").read_text()
    diagram = text.split("```text\n", 1)[1].split("```", 1)[0]
    assert max(len(x) for x in diagram.splitlines()) <= 80 and "nnue eval" in diagram


def test_composing_the_config_warns_nothing():
    """Every composition of the training config warned that ``hydra/launcher/basic`` "is validated
    against ConfigStore schema with the same name" (a Hydra 1.1 deprecation), 213 times in a test
    run: Hydra's own basic launcher config is used now, not a file of the same name."""
    import warnings

    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
            cfg = compose("train", overrides=["experiment=demo", "data.path=x"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    assert cfg.hydra.launcher._target_.endswith("BasicLauncher")
    assert not [str(w.message) for w in seen if "ConfigStore schema" in str(w.message)]
