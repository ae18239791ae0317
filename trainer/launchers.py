"""The launchers of ``hydra/launcher=submitit_slurm`` and ``submitit_local`` (classes in
``hydra_plugins.nnue_forge_launchers``, where Hydra wants them): hydra-submitit-launcher's, with
threads that follow the request, a quiet console and nothing left behind.

- **Threads.** Every job trains with ``cpus_per_task`` torch threads: the launcher exports
  ``NNUE_THREADS=<cpus_per_task>`` to the jobs (sbatch passes the submitting environment on, and
  submitit's local processes inherit it), and the job sets ``torch.set_num_threads`` and
  ``OMP_NUM_THREADS`` from it (:func:`nnue.trainer.runs.apply_threads`, which also reads
  ``SLURM_CPUS_PER_TASK`` and, under joblib, the ``OMP_NUM_THREADS`` that joblib gives its
  workers: CPUs ÷ ``n_jobs``).
- **Console.** submitit asks ``sacct`` for job states; on a cluster without accounting storage
  (the one-node SLURM of ``scripts/slurm_up.sh``) every call prints an error and a warning. Here
  job states come from ``scontrol show job`` (stderr captured), and the console gets one line per
  job state change (``job 2 (SLURM 17_2): PENDING -> RUNNING``) and a summary at the end.
- **Files.** submitit leaves a symlink ``.submitit/.submission_file_<uuid>.sh`` to the sbatch
  script it keeps in ``.submitit/<array job id>/``; it is removed once the jobs are submitted.
"""
from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, filter_overrides
from hydra_plugins.hydra_submitit_launcher import submitit_launcher as _sl  # BaseQueueConf
from omegaconf import OmegaConf

log = logging.getLogger("nnue.launcher")

THREADS_ENV = "NNUE_THREADS"
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE", "DONE", "FINISHED", "INTERRUPTED")


ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING")
SETTLE_S = 60.0  # after a task's result file appears, how long to wait for SLURM to report it ended


def _task_ids(spec: str) -> list[str]:
    """ArrayTaskId of ``scontrol show job``: ``3``, or pending tasks as ``0-3%16`` / ``1,3``."""
    out = []
    for part in spec.split("%")[0].split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            if a.isdigit() and b.isdigit():
                out += [str(i) for i in range(int(a), int(b) + 1)]
        elif part.isdigit():
            out.append(part)
    return out


def scontrol_states(job_ids: Sequence[str]) -> dict[str, str]:
    """{job id (``<array id>_<task>`` for array tasks): JobState} from ``scontrol show job -o``,
    stderr captured (finished jobs stay listed for slurmctld's MinJobAge). Empty on any failure."""
    states: dict[str, str] = {}
    for jid in sorted({j.split("_")[0] for j in job_ids}):
        try:
            r = subprocess.run(["scontrol", "show", "job", "-o", jid], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in r.stdout.splitlines():
            f = dict(x.split("=", 1) for x in line.split() if "=" in x)
            state = f.get("JobState")
            if not state:
                continue
            if f.get("ArrayJobId") and f.get("ArrayTaskId"):
                for t in _task_ids(f["ArrayTaskId"]):
                    states[f"{f['ArrayJobId']}_{t}"] = state
            if f.get("JobId"):
                states.setdefault(f["JobId"], state)
    return states


try:
    from submitit.slurm.slurm import SlurmInfoWatcher as _Watcher
    from submitit.slurm.slurm import SlurmJob as _SlurmJob

    class QuietSlurmWatcher(_Watcher):
        """submitit's job-state watcher, asking ``scontrol show job`` instead of ``sacct`` (which
        needs accounting storage and prints an error per call without it)."""

        def update(self) -> None:
            todo = self._registered - self._finished
            if not todo:
                return
            self._num_calls += 1
            for jid, state in scontrol_states(sorted(todo)).items():
                self._info_dict[jid] = {"State": state, "JobID": jid}
            self._last_status_check = time.time()
            for jid in todo:
                if self.is_done(jid, mode="cache"):
                    self._finished.add(jid)
except ImportError:  # submitit missing: check_launcher says so before anything runs
    QuietSlurmWatcher = None  # type: ignore[assignment,misc]


class QuietSubmitit:
    """What both launchers (``hydra_plugins.nnue_forge_launchers``) add to hydra-submitit-launcher's
    ``launch``: mixed in before its SlurmLauncher / LocalLauncher."""

    _EXECUTOR: str

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import submitit

        assert self.config is not None
        for name in ("submitit",):  # state polling is ours; its warnings would repeat every poll
            logging.getLogger(name).setLevel(logging.ERROR)
        params = dict(self.params)
        init = {"folder": params["submitit_folder"]}
        if "max_num_timeout" in params:
            init[f"{self._EXECUTOR}_max_num_timeout"] = params["max_num_timeout"]
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init)
        base = set(OmegaConf.structured(_sl.BaseQueueConf).keys())
        executor.update_parameters(**{k if k in base else f"{self._EXECUTOR}_{k}": v for k, v in params.items()
                                      if k not in ("submitit_folder", "max_num_timeout")})
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        job_params = []
        for i, overrides in enumerate(job_overrides):
            idx = initial_job_idx + i
            log.info("job %d: %s", idx, " ".join(filter_overrides(overrides)))
            job_params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
        cpus = params.get("cpus_per_task")
        old = os.environ.get(THREADS_ENV)
        if cpus:  # the jobs inherit the submitting environment (sbatch --export=ALL, local Popen)
            os.environ[THREADS_ENV] = str(int(cpus))
        try:
            jobs = executor.map_array(self, *zip(*job_params))
        finally:
            if cpus:
                os.environ.pop(THREADS_ENV, None) if old is None else os.environ.__setitem__(THREADS_ENV, old)
        folder = Path(str(params["submitit_folder"]))
        for p in _id_independent(folder).glob(".submission_file_*.sh"):
            if p.is_symlink():  # submitit's pointer to <array id>/<array id>_submission.sh
                p.unlink()
        where = {"slurm": "SLURM", "local": "local"}[self._EXECUTOR]
        log.info("%d job(s) submitted (%s %s); submitit's files: %s", len(jobs), where,
                 jobs[0].job_id.split("_")[0] if jobs else "-", _id_independent(folder))
        self._follow(jobs, initial_job_idx, where)
        return [j.results()[0] for j in jobs]

    def _state(self, job) -> str:
        if self._EXECUTOR == "slurm":
            s = job.watcher.get_state(job.job_id, mode="cache")
        else:
            s = job.state
        s = str(s).split()[0].upper() if s else "UNKNOWN"
        if s == "UNKNOWN" and job.paths.result_pickle.exists():
            s = "DONE"  # left scontrol's memory: the result file says it ended
        return s

    def _follow(self, jobs, first_idx: int, where: str) -> None:
        """One line per job state change until every job has ended, then a summary."""
        t0, last, result_at = time.monotonic(), {}, {}
        delay = 0.5
        while True:
            if self._EXECUTOR == "slurm" and jobs:
                jobs[0].watcher.update()
            ended = 0
            for i, j in enumerate(jobs):
                s = self._state(j)
                if s != last.get(j.job_id):
                    log.info("job %d (%s %s): %s%s (%.0f s)", first_idx + i, where, j.job_id,
                             f"{last[j.job_id]} -> " if j.job_id in last else "", s, time.monotonic() - t0)
                    last[j.job_id] = s
                if s in FINAL:
                    ended += 1
                elif j.paths.result_pickle.exists():  # written just before the task exits: wait for
                    seen = result_at.setdefault(j.job_id, time.monotonic())  # SLURM to end it, a while
                    if s not in ACTIVE or time.monotonic() - seen > SETTLE_S:
                        ended += 1
            if ended == len(jobs):
                break
            time.sleep(delay)
            delay = min(delay * 1.5, 10.0)
        counts: dict[str, int] = {}
        for s in last.values():
            counts[s] = counts.get(s, 0) + 1
        log.info("%d job(s) ended in %.0f s: %s", len(jobs), time.monotonic() - t0,
                 ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))


def _id_independent(folder: Path) -> Path:
    parts = []
    for p in folder.parts:
        if re.search(r"%[jtAa]", p):
            break
        parts.append(p)
    return Path(*parts)


def install_watcher() -> None:
    """Make submitit's SLURM jobs ask ``scontrol`` for their state (:class:`QuietSlurmWatcher`)."""
    if QuietSlurmWatcher is not None and not isinstance(_SlurmJob.watcher, QuietSlurmWatcher):
        _SlurmJob.watcher = QuietSlurmWatcher(delay_s=600)


def register() -> None:
    """Register the launchers with Hydra (``hydra_plugins.nnue_forge_launchers``). A regular
    install is found by Hydra's scan of ``hydra_plugins``; an editable one (``pip install -e``) is
    not, so the sweep callback (:class:`nnue.trainer.jobs.JobEnd`) registers them before Hydra
    instantiates the launcher."""
    from hydra.core.plugins import Plugins

    from hydra_plugins.nnue_forge_launchers import LocalLauncher, SlurmLauncher

    for c in (SlurmLauncher, LocalLauncher):
        Plugins.instance().register(c)
