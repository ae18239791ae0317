"""Run folders: every training job owns one folder, a finished run is never overwritten by accident.

Rules (``nnue train``, single runs and ``-m`` sweeps alike):

- A single run without ``paths.output_dir`` gets a fresh folder ``runs/<YYYY-mm-dd_HH-MM-SS>_<4 hex>``,
  created with ``os.mkdir`` (which fails if it exists), so two runs started in the same second,
  even in parallel processes, never share one (resolver ``nnue.unique_dir``).
- In a sweep every job's folder is ``hydra.sweep.dir/<job number>`` (Hydra's job output dir), and
  that is its ``paths.output_dir``; a sweep folder is made unique the same way.
- An explicit ``paths.output_dir`` that already holds a run (a finished one: ``metrics.json``; or an
  interrupted one: ``checkpoints/last.ckpt``) is refused (:class:`RunFolderError`), unless
  ``ckpt_path`` points into that folder (a resume) or ``+overwrite=true`` is given. Either way the
  old ``metrics.json`` is removed before training starts (by ``train.run``, once the resume is
  checked: a resume of a finished run trains nothing and keeps it), so an interrupted resume never
  looks finished with the old run's metrics; ``+overwrite=true`` also removes the old checkpoints and logs.
- Relative paths in ``data.path`` and ``ckpt_path`` resolve against the directory ``nnue`` was run
  from (Hydra's ``runtime.cwd``), also with ``hydra.job.chdir=true``.
- Under DDP only rank 0 changes the folder; Hydra's ``.hydra/`` files and log file are written by
  rank 0 only (resolvers ``nnue.rank0`` and ``nnue.rank0_log`` in ``conf/hydra/default.yaml``).

The resolvers are registered when this module is imported (``nnue.trainer.train`` imports it).
"""
from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
import warnings
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)

FINISHED_MARKER = "metrics.json"  # written last by nnue.trainer.train.run
INTERRUPTED_MARKER = Path("checkpoints") / "last.ckpt"
# what +overwrite=true removes from an old run folder (Hydra's .hydra/ is rewritten by Hydra itself)
RUN_ARTEFACTS = ("checkpoints", "csv", "tensorboard", "metrics.json", "config.yaml", "export", "error.txt",
                 "export_error.txt")


class RunFolderError(ValueError):
    """A run folder that must not be trained into (message: one line, names the folder)."""


# --------------------------------------------------------------------------------- resolvers
def env_rank() -> int:
    """Global rank of this process from the environment, before any process group exists:
    ``RANK`` (torchrun), ``LOCAL_RANK``, then ``SLURM_PROCID`` when SLURM runs several tasks;
    0 otherwise (the order Lightning's ``rank_zero_only`` uses)."""
    for key in ("RANK", "LOCAL_RANK"):
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    if os.environ.get("SLURM_PROCID", "").isdigit() and int(os.environ.get("SLURM_NTASKS", "1") or 1) > 1:
        return int(os.environ["SLURM_PROCID"])
    return 0


def apply_threads() -> tuple[int, str]:
    """Set this job's torch threads (and ``OMP_NUM_THREADS``, for the processes it starts) from
    the CPUs it was given: ``NNUE_THREADS`` (the submitit launchers export ``cpus_per_task``),
    else ``SLURM_CPUS_PER_TASK`` (any SLURM job), else ``OMP_NUM_THREADS`` (joblib gives each
    worker CPUs ÷ ``n_jobs``). Without any, torch keeps its default (one thread per core).
    Returns (threads, where the number came from)."""
    import torch

    for var in ("NNUE_THREADS", "SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS"):
        v = os.environ.get(var, "").strip()
        if v.isdigit() and int(v) > 0:
            n = int(v)
            if torch.get_num_threads() != n:
                torch.set_num_threads(n)
            os.environ["OMP_NUM_THREADS"] = str(n)
            return n, var
    return torch.get_num_threads(), "torch's default"


def unique_dir(base: str = "runs", stamp: str | None = None) -> str:
    """Create and return ``base/<timestamp>_<4 hex>``, a folder no other run has: ``os.mkdir``
    fails when the name exists, and then another suffix is drawn."""
    stamp = stamp or time.strftime("%Y-%m-%d_%H-%M-%S")
    Path(base).mkdir(parents=True, exist_ok=True)
    for _ in range(1000):
        p = Path(base) / f"{stamp}_{secrets.token_hex(2)}"
        try:
            p.mkdir()
            return str(p)
        except FileExistsError:
            continue
    raise RunFolderError(f"{base}: no free run folder name for {stamp}")


def run_dir(output_dir, base: str = "runs") -> str:
    """Hydra's ``hydra.run.dir``: the explicit ``paths.output_dir``, else a new unique folder."""
    return str(output_dir) if output_dir not in (None, "", "None", "null") else unique_dir(base)


def _rank0(value):
    return value if env_rank() == 0 else None


def _rank0_log(path):
    return str(path) if env_rank() == 0 else os.devnull


def perspective_activations() -> str:
    """The L0 activations (:func:`nnue.spec.activations.allowed` "l0"), comma-separated (a Hydra
    sweep value)."""
    from nnue.spec import activations as acts

    return ",".join(acts.allowed("l0"))


def register_resolvers() -> None:
    """OmegaConf resolvers used by ``conf/``: cached, so a sweep's jobs agree on the names
    (Hydra copies the resolver cache into every job's config)."""
    OmegaConf.register_new_resolver("nnue.unique_dir", unique_dir, use_cache=True, replace=True)
    OmegaConf.register_new_resolver("nnue.run_dir", run_dir, use_cache=True, replace=True)
    OmegaConf.register_new_resolver("nnue.rank0", _rank0, replace=True)
    OmegaConf.register_new_resolver("nnue.rank0_log", _rank0_log, replace=True)
    OmegaConf.register_new_resolver("nnue.activations", perspective_activations, replace=True)


register_resolvers()
# conf/hydra/launcher/*.yaml take the plugins' names on purpose (our defaults and comments, the
# plugins' schemas still validate them); Hydra warns about that matching on every composition.
warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/\w+' is validated against ConfigStore schema")


# ------------------------------------------------------------------------------ folder checks
def _inside(path: str | os.PathLike, folder: Path) -> bool:
    try:
        Path(path).resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def check_run_folder(output_dir: str | os.PathLike, ckpt_path=None, overwrite: bool = False) -> str | None:
    """Why ``output_dir`` must not be trained into, or None when it may. A folder holding a
    finished run (``metrics.json``) or an interrupted one (``checkpoints/last.ckpt``) is refused
    unless ``ckpt_path`` lies inside it (resume) or ``overwrite``."""
    out = Path(output_dir)
    if overwrite or not out.is_dir():
        return None
    if ckpt_path is not None and _inside(ckpt_path, out):
        return None
    what = ("a finished run (metrics.json)" if (out / FINISHED_MARKER).exists() else
            "an interrupted run (checkpoints/last.ckpt)" if (out / INTERRUPTED_MARKER).exists() else None)
    if what is None:
        return None
    return (f"paths.output_dir={out} already holds {what}; resume it with "
            f"ckpt_path={out / INTERRUPTED_MARKER}, add +overwrite=true to replace it, "
            f"or leave paths.output_dir out for a new folder")


def _absolute(p, cwd: Path):
    return p if p is None or os.path.isabs(str(p)) else str((cwd / str(p)).resolve())


def _hydra_runtime():
    """(mode, runtime.output_dir, runtime.cwd) while a Hydra job runs, else None."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return None
        h = HydraConfig.get()
        return str(h.mode), h.runtime.output_dir, h.runtime.cwd
    except Exception:  # compose API without a run, or an older Hydra
        return None


def prepare(cfg: DictConfig) -> Path:
    """Make ``cfg`` concrete for one job and get its folder ready (call at the start of a run).

    Sets ``paths.output_dir`` to the job's absolute folder (Hydra's job output dir when Hydra
    runs the job; the explicit value, or a new unique folder, otherwise), makes ``data.path`` and
    ``ckpt_path`` absolute against the directory ``nnue`` was started from, refuses a folder that
    holds a run (:func:`check_run_folder`, :class:`RunFolderError`), and on rank 0 removes what
    a resume or ``+overwrite=true`` replaces. Returns the folder (created)."""
    rt = _hydra_runtime()
    cwd = Path(rt[2]) if rt else Path.cwd()
    given = cfg.paths.get("output_dir")
    with open_dict(cfg):
        if rt is not None and (given in (None, "") or "MULTIRUN" in rt[0]):
            out = Path(rt[1])  # the sweep job's folder, or the single run's hydra.run.dir
        elif given in (None, ""):
            out = Path(unique_dir(str(cwd / "runs")))
        else:
            out = Path(_absolute(given, cwd))
        cfg.paths.output_dir = str(out)
        d = cfg.data.path
        cfg.data.path = _absolute(d, cwd) if isinstance(d, str) else [_absolute(p, cwd) for p in d]
        cfg.ckpt_path = _absolute(cfg.get("ckpt_path"), cwd)
    overwrite = bool(cfg.get("overwrite", False))
    why = check_run_folder(out, cfg.ckpt_path, overwrite)
    if why:
        raise RunFolderError(why)
    rank = env_rank()
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        if overwrite:
            for name in RUN_ARTEFACTS:
                p = out / name
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    log.info("run folder %s (rank %d)", out, rank)
    return out
