"""nnue's Optuna sweeper (``hydra.sweeper._target_`` in ``conf/hparams_search/*.yaml``):
hydra-optuna-sweeper's, with a stored study checked and kept straight
(:mod:`nnue.trainer.optuna_study`):

- before any trial is asked, a stored study that differs from the sweep (direction, metric,
  search space) is refused (:class:`StudyConflict`, one line);
- a resumed study's sampler is seeded with ``seed + the trials already in the study``, so a
  resume does not ask for the first run's parameters again (the same seed replays them);
- the metric, the search space and each trial's job folder are recorded in the study;
- an interrupted sweep (Ctrl-C, SIGTERM, a failure) marks the trials it asked and did not
  finish as failed, so none is left RUNNING.
"""
from __future__ import annotations

import functools
import logging

from hydra_plugins.hydra_optuna_sweeper import optuna_sweeper as _plugin
from hydra_plugins.hydra_optuna_sweeper._impl import OptunaSweeperImpl

log = logging.getLogger(__name__)


class StudyConflict(ValueError):
    """The stored study differs from the sweep (one line: :func:`nnue.trainer.optuna_study.conflict_line`)."""


class _Impl(OptunaSweeperImpl):
    def sweep(self, arguments):
        import optuna
        from hydra.utils import instantiate
        from omegaconf import OmegaConf

        from nnue.trainer import optuna_study as st

        if self.storage is None:  # an in-memory study: nothing stored to check or keep
            return super().sweep(arguments)
        params = OmegaConf.to_container(self.params, resolve=True) if self.params is not None else {}
        space = st.search_space(params, arguments)
        directions = self._get_directions()
        metric = str(self.config.get("optimized_metric", "val_loss"))
        study = st.load(str(self.storage), str(self.study_name)) if self.study_name else None
        if study is not None:
            what = st.conflict(study, directions, metric, space)
            if what is not None:
                raise StudyConflict(st.conflict_line(str(self.storage), str(self.study_name), what, len(study.trials)))
        first = len(study.trials) if study is not None else 0
        scfg = self.config.hydra.sweeper.get("sampler")
        seed = scfg.get("seed") if scfg is not None else None
        if first and seed is not None and not isinstance(self.sampler, functools.partial):
            self.sampler = instantiate(scfg, seed=int(seed) + first)
            log.info("resuming study %s (%d trials): sampler seed %d + %d", self.study_name, first, seed, first)
        study = optuna.create_study(study_name=self.study_name, storage=self.storage, sampler=self.sampler,
                                    directions=directions, load_if_exists=True)
        st.record(study, metric, space)
        from nnue.trainer.callbacks import SweepInterrupted

        try:
            return super().sweep(arguments)
        except SweepInterrupted as e:
            failed = st.fail_running(study, first)
            done = sum(t.state.name == "COMPLETE" for t in study.get_trials(deepcopy=False))
            e.notes.append(f"the study {self.study_name!r} in {self.storage} keeps its {done} finished trial(s)"
                           + (f" (trial {', '.join(map(str, failed))} marked failed)" if failed else "")
                           + ": run the sweep again (without hydra.sweep.dir, or with a new one) to continue the study")
            raise
        finally:  # a finished, failed or interrupted sweep: no trial of it left RUNNING
            failed = st.fail_running(study, first)
            if failed:
                log.warning("marked trial(s) %s of study %s failed: the sweep stopped before they finished",
                            ", ".join(map(str, failed)), self.study_name)
            st.record_jobs(study, first, self.config.hydra.sweep.dir)


class OptunaSweeper(_plugin.OptunaSweeper):
    """hydra-optuna-sweeper's OptunaSweeper with :class:`_Impl` (module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sweeper.__class__ = _Impl  # same state, the checked sweep
