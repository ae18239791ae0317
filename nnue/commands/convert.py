"""``nnue convert``: the parser; the work is in :mod:`nnue.commands.convert_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import RegistryChoices, add_registry_option, path, writer_names


def add_parser(sub) -> None:
    """Add ``nnue convert`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("convert", help="write a dataset back out as a dump for other trainers, or upgrade it",
                       description="Write every position of a dataset in another trainer's format; or, with "
                       "--to chained, upgrade a flat dataset (packed before move chains), or a chained one of "
                       "schema 2, to the chained layout of schema 3 in place.")
    s.add_argument("dataset", type=path, help="dataset folder written by nnue pack")
    add_registry_option(s, "--to", required=True, choices=RegistryChoices(writer_names, first=("chained",)),
                        help="output format (required): plain (Stockfish .plain), bullet-text (FEN | score | "
                        "result), bulletformat or marlinformat (32-byte records), binpack (Stockfish .binpack: "
                        "games as move chains), viriformat (bullet's games: a board, then move and eval "
                        "pairs); or chained: rewrite DATASET's flat (or schema-2 chained) parts as move chains "
                        "of schema 3, in place (atomic per part, every row checked; no -o)")
    s.add_argument("-o", "--output", type=path, default=None,
                   help="output file (written atomically; required except with --to chained, which "
                   "upgrades DATASET in place; no default)")
    s.add_argument("--json", action="store_true", help="print one JSON object (default: one line of text)")
    s.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr (default: a bar when stderr is a terminal)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import convert_run  # the work and its heavy imports, only when the command runs

    return convert_run.run(args)
