"""Optuna studies kept between sweeps (``hydra.sweeper.storage=sqlite:///FILE``): what a stored
study must agree with before a sweep resumes it, and what nnue's Optuna sweeper
(``hydra_plugins.nnue_forge_launchers.optuna_sweeper``) records in it.

A study is a set of comparable trials: one metric (``optimized_metric``), one direction, one
search space. hydra-optuna-sweeper resumes a stored study by name whatever changed: another
direction ended in Optuna's traceback, a parameter whose choices or kind changed failed after
the trial was asked (left RUNNING in the study forever), and another metric or range mixed
values that do not compare. :func:`conflict` names the first difference, so that ``nnue train``
refuses it in one line before anything runs (:func:`nnue.trainer.sweep.check_multirun`) and the
sweeper refuses it before asking for a trial; a new ``hydra.sweeper.study_name`` starts a new
study in the same file.

What the sweeper records (study user attributes): the metric and the search space
(:data:`METRIC_ATTR`, :data:`SPACE_ATTR`) when it creates a study, and each trial's job folder
(:data:`JOBS_ATTR`, ``{trial number: folder}``), so that ``nnue sweep report`` names the folder of
a best trial that ran in another sweep. A study made before this was recorded is compared on its
direction and on the distributions of its trials only, and keeps no record (its metric and its
first space are not known).
"""
from __future__ import annotations

import json
from pathlib import Path

METRIC_ATTR = "nnue_forge.optimized_metric"
SPACE_ATTR = "nnue_forge.search_space"
JOBS_ATTR = "nnue_forge.job_dirs"


def search_space(params: dict | None, arguments: list[str] = ()) -> dict:
    """The sweep's Optuna distributions, as hydra-optuna-sweeper builds them: ``hydra.sweeper.params``
    (``{key: override value}``) then the command line's sweep overrides; fixed values are not
    searched. Returns {parameter: optuna distribution}."""
    from hydra_plugins.hydra_optuna_sweeper._impl import create_params_from_overrides

    conf = [f"{k}={v}" for k, v in (params or {}).items()] + list(arguments)
    dists, fixed = create_params_from_overrides(conf)
    return {k: d for k, d in dists.items() if k not in fixed}


def space_json(space: dict) -> str:
    """A search space as JSON (sorted; each distribution in Optuna's own JSON)."""
    from optuna.distributions import distribution_to_json

    return json.dumps({k: json.loads(distribution_to_json(d)) for k, d in sorted(space.items())}, sort_keys=True)


def _describe(d) -> str:
    name = type(d).__name__.replace("Distribution", "")
    if hasattr(d, "choices"):
        return f"{name}{tuple(d.choices)}"
    step = getattr(d, "step", None) or getattr(d, "q", None)
    return f"{name}({d.low}..{d.high}{', step ' + str(step) if step else ''})"


def load(storage: str, name: str):
    """The stored study ``name`` in ``storage``, or None when there is none."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if not any(s.study_name == name for s in optuna.study.get_all_study_summaries(storage)):
        return None
    return optuna.load_study(study_name=name, storage=storage)


def conflict(study, directions: list[str], metric: str, space: dict) -> str | None:
    """The first way a sweep (``directions``, ``metric``, ``space``: :func:`search_space`)
    differs from the stored ``study``, as words, or None when it can resume it."""
    from optuna.distributions import check_distribution_compatibility, json_to_distribution

    was = [d.name.lower() for d in study.directions]
    now = [str(d).lower() for d in directions]
    if was != now:
        return f"direction {'/'.join(was)} there, {'/'.join(now)} now"
    attrs = study.user_attrs
    old_metric = attrs.get(METRIC_ATTR)
    if old_metric is not None and old_metric != metric:
        return f"optimized_metric {old_metric} there, {metric} now"
    if SPACE_ATTR in attrs:
        old = {k: json_to_distribution(json.dumps(v)) for k, v in json.loads(attrs[SPACE_ATTR]).items()}
        for k in sorted(set(old) | set(space)):
            if k not in space:
                return f"parameter {k} searched there ({_describe(old[k])}), not now"
            if k not in old:
                return f"parameter {k} searched now ({_describe(space[k])}), not there"
            if old[k] != space[k]:
                return f"parameter {k} is {_describe(old[k])} there, {_describe(space[k])} now"
        return None
    for t in study.trials:  # a study made without the record: what Optuna itself would refuse
        for k, d in t.distributions.items():
            if k in space:
                try:
                    check_distribution_compatibility(d, space[k])
                except ValueError:
                    return f"parameter {k} is {_describe(d)} in trial {t.number}, {_describe(space[k])} now"
    return None


def conflict_line(storage: str, name: str, what: str, trials: int) -> str:
    """The one-line refusal of a sweep that conflicts with its stored study."""
    return (f"hydra.sweeper.storage={storage}: the stored study {name!r} ({trials} trial(s)) differs from this "
            f"sweep: {what}; its trials would not compare: resume it with its settings, or start a new study in "
            f"the same file with another hydra.sweeper.study_name")


def check_stored(storage: str | None, name: str | None, directions, metric: str, params: dict | None,
                 arguments: list[str] = ()) -> str | None:
    """:func:`conflict_line` for a sweep whose stored study it conflicts with, else None (no storage,
    no such study yet, or nothing changed)."""
    if not storage or not name:
        return None
    study = load(str(storage), str(name))
    if study is None:
        return None
    dirs = list(directions) if isinstance(directions, (list, tuple)) else [directions]
    what = conflict(study, dirs, metric, search_space(params, arguments))
    return None if what is None else conflict_line(str(storage), str(name), what, len(study.trials))


def record(study, metric: str, space: dict) -> None:
    """Record the metric and the search space on a new study (no trials yet); a study that has
    trials keeps what it has (none, when an older version made it)."""
    if not study.trials:
        study.set_user_attr(METRIC_ATTR, metric)
        study.set_user_attr(SPACE_ATTR, space_json(space))


def fail_running(study, first: int) -> list[int]:
    """Mark the trials numbered ``first`` and after that are still RUNNING as FAIL (an interrupted
    sweep's asked trials: no process will ever finish them). Returns their numbers."""
    from optuna.trial import TrialState

    done = []
    for t in study.get_trials(deepcopy=False):
        if t.number >= first and t.state == TrialState.RUNNING:
            st = study._storage
            if hasattr(st, "set_trial_state_values"):  # optuna ≥ 3
                st.set_trial_state_values(t._trial_id, state=TrialState.FAIL)
            else:
                st.set_trial_state(t._trial_id, TrialState.FAIL)
            done.append(t.number)
    return done


def trial_folders(study) -> dict[int, str]:
    """{trial number: job folder} recorded by nnue's sweeper (empty for a study it did not run)."""
    return {int(k): v for k, v in (study.user_attrs.get(JOBS_ATTR) or {}).items()}


def record_jobs(study, first: int, sweep_dir: str | Path) -> None:
    """Record each trial's job folder (:data:`JOBS_ATTR`): this sweep's trials (numbered from
    ``first``, in the order they were asked) are its jobs 0, 1, ... (launched in that order); a
    pair is recorded only when the job's overrides hold the trial's parameters."""
    import yaml

    jobs = trial_folders(study)
    trials = sorted((t for t in study.get_trials(deepcopy=False) if t.number >= first), key=lambda t: t.number)
    for i, t in enumerate(trials):
        job = Path(sweep_dir) / str(i)
        try:
            over = dict(o.split("=", 1) for o in yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text()))
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        if all(str(v) == over.get(k) or _close(v, over.get(k)) for k, v in t.params.items()):
            jobs[t.number] = str(job.resolve())
    study.set_user_attr(JOBS_ATTR, {str(k): v for k, v in sorted(jobs.items())})


def _close(a, b) -> bool:
    try:
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(a)))
    except (TypeError, ValueError):
        return False
