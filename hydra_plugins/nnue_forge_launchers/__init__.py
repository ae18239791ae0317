"""nnue-forge's submitit launchers, where Hydra looks for launchers (the ``hydra_plugins``
namespace): hydra-submitit-launcher's SlurmLauncher and LocalLauncher with
:class:`nnue.trainer.launchers.QuietSubmitit` mixed in (threads = ``cpus_per_task``, one console
line per job state change, no leftover files)."""
from hydra_plugins.hydra_submitit_launcher import submitit_launcher as _sl

from nnue.trainer.launchers import QuietSubmitit, install_watcher


class SlurmLauncher(QuietSubmitit, _sl.SlurmLauncher):
    """``hydra/launcher=submitit_slurm``: the sweep as one SLURM job array."""

    def __init__(self, **params) -> None:
        super().__init__(**params)
        install_watcher()


class LocalLauncher(QuietSubmitit, _sl.LocalLauncher):
    """``hydra/launcher=submitit_local``: submitit's local processes."""
