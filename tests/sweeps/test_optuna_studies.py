"""Stored Optuna studies that change, and interrupted sweeps (nnue's Optuna sweeper,
``nnue.trainer.optuna_study``).

Before: resuming a stored study with another direction ended in Optuna's traceback (status 1);
with a parameter whose choices changed it failed after asking a trial, which stayed RUNNING in
the study forever; another metric mixed values silently; Ctrl-C printed Hydra's 40-line
traceback and exited 1, hinting at ``ckpt_path`` (which a trial does not take); a resumed
study asked for the first run's parameters again (the sampler's seed is fixed); and the report
on a sweep's folder put a best trial that ran in a later sweep in "an earlier run".
"""
from __future__ import annotations

import json
import signal
import subprocess

import optuna
import pytest

from nnue.trainer import optuna_study as st
from nnue.trainer.checks import check_train_args
from tests.sweeps.sweep_util import NNUE, TINY, nnue

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = {"optimizer.lr": "tag(log, interval(0.0003, 0.01))", "model.hidden": "choice(16, 32, 64)"}


def _common(ds, storage, name="s"):
    return ["hparams_search=lr_hidden", *TINY, f"data.path={ds}", "hydra.sweeper.n_jobs=1",
            f"hydra.sweeper.storage={storage}", f"hydra.sweeper.study_name={name}"]


def _stored(storage, name="s", direction="minimize", record=True, trials=2):
    """A study as nnue's sweeper leaves it: the lr_hidden space, ``trials`` finished trials."""
    study = optuna.create_study(study_name=name, storage=storage, direction=direction)
    space = st.search_space(SPACE)
    if record:
        st.record(study, "val_loss", space)
    for i in range(trials):
        study.add_trial(optuna.trial.create_trial(params={"optimizer.lr": 0.001 * (i + 1), "model.hidden": 32},
                                                  distributions=space, value=0.05 + i / 100))
    return study


@pytest.mark.parametrize("record", [True, False], ids=["recorded", "older-study"])
@pytest.mark.parametrize("extra,needle", [
    (["hydra.sweeper.direction=maximize"], "direction minimize there, maximize now"),
    (["optimized_metric=val_spearman"], "optimized_metric val_loss there, val_spearman now"),
    (["-m", "model.hidden=choice(8,16)"], "parameter model.hidden is Categorical(16, 32, 64)"),
    (["-m", "optimizer.lr=tag(log,interval(0.001,0.1))"], "parameter optimizer.lr is LogUniform(0.0003..0.01) there"),
])
def test_a_changed_study_is_refused_before_any_trial(sample_dataset, tmp_path, extra, needle, record):
    if not record and needle.startswith(("optimized_metric", "parameter optimizer.lr")):
        pytest.skip("an older study recorded no metric or space: what Optuna itself refuses is checked")
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    _stored(storage, record=record)
    args = [*_common(sample_dataset, storage), "hydra.sweeper.n_trials=1", f"hydra.sweep.dir={tmp_path / 'sw'}", *extra]
    err = check_train_args(args)
    if not record and needle.startswith("parameter model.hidden"):
        needle = "parameter model.hidden is Categorical(16, 32, 64) in trial 0, Categorical(8, 16) now"
    assert err and "\n" not in err and needle in err, err
    assert "the stored study 's' (2 trial(s)) differs" in err and "another hydra.sweeper.study_name" in err
    if record and "direction" in needle:  # the command: one line, status 2 (seconds: once is enough)
        r = subprocess.run([*NNUE, "train", *args], capture_output=True, text=True)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr
    study = optuna.load_study(study_name="s", storage=storage)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]  # nothing asked, nothing RUNNING
    assert not (tmp_path / "sw").exists()
    # the same sweep under another study name is a new study in the same file
    assert check_train_args([*_common(sample_dataset, storage, "s2"), "hydra.sweeper.n_trials=1", *extra]) is None


def test_the_sweeper_itself_refuses_a_changed_study(tmp_path):
    """The check before any trial, in the sweeper too (a sweep started without ``nnue train``'s
    checks, e.g. through another tool): no trial asked."""
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    study = _stored(storage)
    what = st.conflict(study, ["minimize"], "val_loss", st.search_space({**SPACE, "model.hidden": "choice(8, 16)"}))
    assert what == "parameter model.hidden is Categorical(16, 32, 64) there, Categorical(8, 16) now"
    assert st.conflict(study, ["minimize"], "val_loss", st.search_space(SPACE)) is None


def test_report_names_the_sweep_that_holds_the_best_trial(tmp_path):
    """The report on the first sweep's folder said the best was in "an earlier run" when it was
    in a later one: the folder nnue's sweeper recorded is named."""
    from nnue.trainer.sweep_report import optuna_line, optuna_summary

    storage = f"sqlite:///{tmp_path / 'o.db'}"
    study = _stored(storage, trials=3)  # trial 0 is best (0.05)
    later = tmp_path / "later" / "0"
    study.set_user_attr(st.JOBS_ATTR, {"0": str(later)})
    (tmp_path / "first").mkdir()
    o = optuna_summary(tmp_path / "first", [], {"optuna": True, "storage": storage, "study_name": "s"})
    assert o["best_job"] is None and o["elsewhere"] == str(later) and o["best_value"] == pytest.approx(0.05)
    line = optuna_line(o)
    assert f"in another sweep of the study: {later}" in line and "earlier" not in line


def test_ctrl_c_in_a_sweep_is_one_line_and_leaves_no_trial_running(sample_dataset, tmp_path):
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    slow = [a for a in TINY if not a.startswith("trainer.max_epochs")] + ["trainer.max_epochs=50"]
    args = [*_common(sample_dataset, storage), "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={tmp_path / 'sw'}"]
    args = [a for a in args if a not in TINY] + slow
    p = subprocess.Popen([*NNUE, "train", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = ""
    for line in p.stdout:  # the event: the first job's first epoch has ended
        seen += line
        if "epoch 1/50" in line:
            break
    else:
        raise AssertionError(seen)
    p.send_signal(signal.SIGINT)
    rest = p.communicate(timeout=300)[0]
    assert p.returncode == 130, rest
    mine = [x for x in rest.splitlines() if x.startswith("nnue train:")]
    assert "Traceback" not in rest and len(mine) == 1, rest
    assert mine[0].startswith(f"nnue train: sweep interrupted by SIGINT in job {tmp_path / 'sw' / '0'}")
    assert "keeps its 0 finished trial(s) (trial 0 marked failed)" in mine[0] and "ckpt_path" not in mine[0]
    study = optuna.load_study(study_name="s", storage=storage)
    assert [t.state.name for t in study.trials] == ["FAIL"]


def test_a_resumed_study_asks_for_new_parameters(sample_dataset, tmp_path):
    """The first run's sampler seed replayed its parameters in the second run; the sweeper seeds a
    resumed study past its trials. Each trial's folder is recorded in the study."""
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    for k, n in ((1, 2), (2, 2)):
        nnue("train", *_common(sample_dataset, storage), f"hydra.sweeper.n_trials={n}",
             f"hydra.sweep.dir={tmp_path / f'sw{k}'}")
    study = optuna.load_study(study_name="s", storage=storage)
    params = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(params) == 4 and len(set(params)) == 4, params
    assert all(t.state.name == "COMPLETE" for t in study.trials)
    assert st.trial_folders(study) == {0: str(tmp_path / "sw1" / "0"), 1: str(tmp_path / "sw1" / "1"),
                                       2: str(tmp_path / "sw2" / "0"), 3: str(tmp_path / "sw2" / "1")}
    assert study.user_attrs[st.METRIC_ATTR] == "val_loss"
    assert json.loads(study.user_attrs[st.SPACE_ATTR]).keys() == {"optimizer.lr", "model.hidden"}
