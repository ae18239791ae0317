"""``nnue pack-shards KEY=VALUE...``: pack on a cluster through a Hydra launcher (conf/pack_shards.yaml).

The inputs are dealt into ``shards`` = N shards of whole files (:func:`nnue.pipeline.shard.shard_files`,
the deal of ``nnue pack --shard K/N``). One Hydra multirun runs one job per shard (``shard=range(0,N)``)
through the launcher chosen with ``hydra/launcher=`` (``submitit_slurm``: one SLURM job array), each
job packing its shard into ``WORK/shard-K-of-N`` with :func:`nnue.pipeline.pack.pack`. When every
job has finished, this process merges the shard datasets into ``output``
(:func:`nnue.pipeline.shard.merge_datasets`: moved, not copied; atomic and idempotent). A rerun
packs nothing twice (each shard dataset skips the files it already holds) and finishes a merge
that was interrupted. A job that failed is named with its error, and nothing is merged.
"""
from __future__ import annotations

USAGE = ("usage: nnue pack-shards 'inputs=[DUMPS...]' output=DATASET [shards=N] [hydra/launcher=NAME] "
         "[KEY=VALUE ...]   (keys: conf/pack_shards.yaml)")


def add_parser(sub) -> None:
    """Add ``nnue pack-shards`` to the ``nnue`` sub-command parsers ``sub`` (its arguments are Hydra
    overrides: :func:`run_argv` reads them)."""
    s = sub.add_parser("pack-shards", help="pack N shards of the inputs as the N jobs of a Hydra launcher (SLURM: "
                       "a job array), then merge them (conf/pack_shards.yaml overrides)", add_help=False)
    s.set_defaults(run_argv=run_argv)


def help_text() -> str:
    """``nnue pack-shards --help``: this module's docstring, the usage line after its first paragraph."""
    return __doc__.split("\n\n")[0] + "\n\n" + USAGE + "\n\n" + __doc__.split("\n\n", 1)[1]


def run_argv(argv: list[str]) -> int:
    """``nnue pack-shards KEY=VALUE...``: the help, or :func:`nnue.commands.pack_shards_run.main`."""
    if argv and argv[0] in ("-h", "--help"):
        print(help_text())
        return 0
    from nnue.commands import pack_shards_run  # Hydra, pyarrow: only when the command runs

    return pack_shards_run.main(argv)
