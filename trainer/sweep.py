"""Checks of ``nnue train -m`` before Hydra launches anything: the sweep's overrides parse, its
jobs compose, its launcher can start, and its folder holds no finished jobs.

``check_multirun(args, check_one)`` returns one line of error text or None. It imports neither
Lightning nor torch, so a bad sweep is refused in about a second.
"""
from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

MULTIRUN_FLAGS = ("-m", "--multirun")
_in_sweep_check = False  # set while check_multirun checks its jobs: they are single runs
MAX_JOB_CHECKS = 48  # compositions checked per sweep (each value of each swept key at least once)


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text.split(" See https://hydra.cc")[0]


def _values(o) -> list[str]:
    """Override values to check: every value of a choice/range sweep; an interval's start
    (Optuna samples it, a basic sweep cannot enumerate it)."""
    if not o.is_sweep_override():
        return [o.get_value_element_as_str()]
    if o.is_discrete_sweep():
        return list(o.sweep_string_iterator())
    start = getattr(o.value(), "start", None)
    if start is None:
        return []
    return [str(int(start)) if float(start).is_integer() else repr(float(start))]


def job_samples(overrides: list[str], config_params: dict[str, str] | None = None,
                limit: int = MAX_JOB_CHECKS) -> list[list[str]]:
    """Representative jobs of a sweep, as override lists: the first value of every swept key,
    then each further value of each swept key with the others at their first value (so every
    value composes at least once without running the whole cross product). ``config_params``:
    ``hydra.sweeper.params`` of the config (overridden by a command-line override of the same key).
    Raises ``OverrideParseException`` (hydra) for an override that does not parse."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    parsed = parser.parse_overrides(overrides)
    given = {o.get_key_element().lstrip("+~") for o in parsed}
    extra = [f"{k}={v}" for k, v in (config_params or {}).items() if str(k).lstrip("+~") not in given]
    parsed = parser.parse_overrides(extra) + parsed
    keys, values = [], []
    for o in parsed:
        if o.is_delete():
            keys.append(o.get_key_element())
            values.append([None])
            continue
        vs = _values(o)
        if vs:
            keys.append(o.get_key_element())
            values.append(vs)
    def job(choice: dict[int, int]) -> list[str]:
        return [k if v is None else f"{k}={v}" for i, (k, vs) in enumerate(zip(keys, values))
                for v in [vs[choice.get(i, 0)]]]
    jobs = [job({})]
    for i, vs in enumerate(values):
        for j in range(1, len(vs)):
            if len(jobs) >= limit:
                return jobs
            jobs.append(job({i: j}))
    return jobs


def _hydra_cfg(overrides: list[str]):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
            return compose("train", overrides=overrides, return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()


def check_launcher(hcfg) -> str | None:
    """Whether the configured launcher can start here (one line, or None)."""
    from omegaconf import OmegaConf

    target = str(OmegaConf.select(hcfg, "hydra.launcher._target_", default=""))
    mod = target.rsplit(".", 1)[0]
    if mod.startswith("hydra_plugins."):
        import importlib

        try:
            importlib.import_module(mod)
        except ImportError as e:
            return f"hydra/launcher: {target} cannot be imported ({e}); pip install its Hydra plugin"
    if target.endswith("SlurmLauncher"):
        if shutil.which("sbatch") is None:
            return ("hydra/launcher=submitit_slurm: sbatch not found, so no SLURM job can be submitted; "
                    "start a local one-node SLURM with 'bash scripts/slurm_up.sh', or use "
                    "hydra/launcher=joblib")
        try:
            r = subprocess.run(["sinfo", "-h", "-o", "%P %a"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"hydra/launcher=submitit_slurm: sinfo failed ({e}); is slurmctld running?"
        if r.returncode != 0:
            return (f"hydra/launcher=submitit_slurm: SLURM does not answer ({_short(Exception(r.stderr or r.stdout))}); "
                    "start it with 'bash scripts/slurm_up.sh' or check slurmctld")
        partitions = {ln.split()[0].rstrip("*") for ln in r.stdout.splitlines() if ln.strip()}
        part = OmegaConf.select(hcfg, "hydra.launcher.partition", default=None)
        if part is not None and str(part) not in partitions:
            return (f"hydra.launcher.partition={part}: no such SLURM partition "
                    f"(sinfo lists {', '.join(sorted(partitions)) or 'none'})")
        if not partitions:
            return "hydra/launcher=submitit_slurm: SLURM has no partition (sinfo lists none)"
    return None


def check_storage(hcfg) -> str | None:
    """An Optuna sweep's SQLite storage (``hydra.sweeper.storage=sqlite:///FILE``): its folder must
    exist and an existing file must be an SQLite database (one line, or None)."""
    from omegaconf import OmegaConf

    url = OmegaConf.select(hcfg, "hydra.sweeper.storage", default=None)
    if not isinstance(url, str) or not url.startswith("sqlite:///"):
        return None
    path = Path(url[len("sqlite:///"):])
    if not path.parent.is_dir():
        return f"hydra.sweeper.storage={url}: folder {path.parent} does not exist (create it first)"
    if path.exists():
        with open(path, "rb") as f:
            head = f.read(16)
            if head and head != b"SQLite format 3\x00":  # an empty file is a new database to SQLite
                return f"hydra.sweeper.storage={url}: {path} is not an SQLite database"
    return None


def check_study(hcfg, args: list[str]) -> str | None:
    """An Optuna sweep into a stored study that already exists: the study must agree with the
    sweep (direction, ``optimized_metric``, search space; :mod:`nnue.trainer.optuna_study`), or
    one line says what differs. ``args``: the command line's overrides (its sweep overrides join
    the search space, as the sweeper adds them)."""
    from omegaconf import OmegaConf

    sw = OmegaConf.select(hcfg, "hydra.sweeper", default=None)
    if sw is None or "optuna" not in str(sw.get("_target_", "")).lower() or not sw.get("storage"):
        return None
    if check_storage(hcfg):
        return None  # worded by check_storage
    from . import optuna_study

    params = OmegaConf.to_container(sw.params, resolve=True) if sw.get("params") is not None else {}
    task = [a for a in args if not a.lstrip("+~").startswith(("hydra.", "hydra/"))]
    direction = OmegaConf.to_container(sw.direction) if OmegaConf.is_list(sw.direction) else sw.direction
    metric = str(OmegaConf.select(hcfg, "optimized_metric", default=None) or "val_loss")
    try:
        return optuna_study.check_stored(sw.storage, sw.get("study_name"), direction, metric, params, task)
    except Exception as e:  # an unreadable storage: Optuna's own error, worded
        return f"hydra.sweeper.storage={sw.storage}: cannot read its studies ({_short(e)})"


def finished_jobs(sweep_dir: str | Path) -> list[Path]:
    """Job folders under a sweep folder that hold a run (finished or interrupted)."""
    d = Path(sweep_dir)
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_dir() and ((p / "metrics.json").exists()
                                                           or (p / "checkpoints" / "last.ckpt").exists()))


def is_multirun(args: list[str]) -> bool:
    """Whether ``nnue train ARGS`` runs as a sweep: ``-m``, or a config that sets
    ``hydra.mode: MULTIRUN`` (``hparams_search=...``, ``experiment=activation_ablation``)."""
    if any(a in MULTIRUN_FLAGS for a in args):
        return True
    if _in_sweep_check or any(a.startswith("-") for a in args):
        return False
    from omegaconf import OmegaConf

    from . import runs  # noqa: F401  (registers the nnue.* resolvers the config uses)

    try:  # a sweep override (model.hidden=choice(8,16)) does not compose: the config's mode decides
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(args)
        plain = [a for a, o in zip(args, parsed) if not o.is_sweep_override()]
        return "MULTIRUN" in str(OmegaConf.select(_hydra_cfg(plain), "hydra.mode", default=""))
    except Exception:
        return False  # the single-run check words the error


def check_multirun(args: list[str], check_one: Callable[[list[str]], str | None]) -> str | None:
    global _in_sweep_check
    before, _in_sweep_check = _in_sweep_check, True
    try:
        return _check_multirun(args, check_one)
    finally:
        _in_sweep_check = before


def _check_multirun(args: list[str], check_one: Callable[[list[str]], str | None]) -> str | None:
    """Check ``nnue train -m ARGS``: overrides parse; representative jobs (:func:`job_samples`)
    pass ``check_one`` (the single-run check); ``paths.output_dir`` is not set (each job's folder
    is ``hydra.sweep.dir/<job number>``); an explicit ``hydra.sweep.dir`` holds no finished job
    unless ``+overwrite=true``; the launcher can start (:func:`check_launcher`)."""
    from hydra.errors import OverrideParseException
    from omegaconf import OmegaConf

    from . import runs  # noqa: F401  (registers the nnue.* resolvers the config uses)

    rest = [a for a in args if a not in MULTIRUN_FLAGS]
    if any(a.startswith("-") for a in rest):
        return None  # other Hydra flags (--cfg, --info, ...): Hydra handles them
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(rest)
    except OverrideParseException as e:
        return f"a sweep override does not parse: {_short(e)}"
    keys = {o.get_key_element().lstrip("+~"): o for o in parsed}
    if "paths.output_dir" in keys:
        return ("paths.output_dir is per job in a sweep (-m): each job writes to hydra.sweep.dir/<job number>; "
                "give hydra.sweep.dir=DIR instead")
    plain = [a for a, o in zip(rest, parsed) if not o.is_sweep_override()]
    try:
        hcfg = _hydra_cfg(plain)
        params = OmegaConf.select(hcfg, "hydra.sweeper.params", default=None)
        params = {str(k): str(v) for k, v in (OmegaConf.to_container(params, resolve=True) or {}).items()} \
            if params is not None else {}
    except Exception as e:  # composition errors: let the per-job check word them
        err = check_one(plain)
        return err or _short(e)
    try:
        jobs = job_samples(rest, params)
    except OverrideParseException as e:
        return f"a sweep override does not parse: {_short(e)}"
    for job in jobs:
        err = check_one(job)
        if err:
            return err if len(jobs) == 1 else f"{err} (in the sweep's job {' '.join(job)})"
    err = check_launcher(hcfg) or check_storage(hcfg) or check_study(hcfg, rest)
    if err:
        return err
    if "hydra.sweep.dir" in keys and not OmegaConf.select(hcfg, "overwrite", default=False):
        done = finished_jobs(keys["hydra.sweep.dir"].get_value_element_as_str())
        if done:
            return (f"hydra.sweep.dir={keys['hydra.sweep.dir'].get_value_element_as_str()} already holds "
                    f"{len(done)} job folder(s) with a run ({done[0].name}, ...); pick a new folder, leave "
                    "hydra.sweep.dir out for a fresh one, or add +overwrite=true")
    return None
