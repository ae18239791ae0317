"""``nnue convert``: the parser; the work is in :mod:`nnue.commands.convert_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import RegistryChoices, add_registry_option, path, writer_names


def add_parser(sub) -> None:
    """Add ``nnue convert`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("convert", help="write a dataset back out as a dump for other trainers",
                       description="Write every position of a dataset in another trainer's format.")
    s.add_argument("dataset", type=path, help="dataset folder written by nnue pack")
    add_registry_option(s, "--to", required=True, choices=RegistryChoices(writer_names),
                        help="output format (required): plain (Stockfish .plain), bullet-text (FEN | score | "
                        "result), bulletformat or marlinformat (32-byte records)")
    s.add_argument("-o", "--output", required=True, type=path, help="output file (written atomically)")
    s.add_argument("--json", action="store_true", help="print one JSON object (default: one line of text)")
    s.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr (default: a bar when stderr is a terminal)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import convert_run  # the work and its heavy imports, only when the command runs

    return convert_run.run(args)
