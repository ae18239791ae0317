"""``nnue merge``: the parser; the work is in :mod:`nnue.commands.merge_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import path


def add_parser(sub) -> None:
    """Add ``nnue merge`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("merge", help="merge shard datasets (nnue pack --shard) into one dataset",
                       description="Move the part files of each SHARD into DATASET and union the manifests "
                       "under DATASET's writer lock; atomic and idempotent: a rerun after a crash finishes "
                       "the merge, and a shard already merged is skipped.")
    s.add_argument("shards", nargs="+", type=path, metavar="SHARD", help="shard dataset folders (nnue pack --shard)")
    s.add_argument("-o", "--output", required=True, type=path, metavar="DATASET",
                   help="dataset folder (created, or appended to)")
    s.add_argument("--json", action="store_true", help="print one JSON object (default: one line of text)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import merge_run  # the work and its heavy imports, only when the command runs

    return merge_run.run(args)
