"""``nnue pack``: the parser; the work is in :mod:`nnue.commands.pack_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import (RegistryChoices, RegistryHelpFormatter, add_registry_option, format_names, path,
                                  positive_float, workers)


def add_parser(sub) -> None:
    """Add ``nnue pack`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("pack", help="pack dumps into a Parquet dataset",
                       description="Pack self-play dumps into a Parquet dataset (manifest, rejects). "
                       "Files already in the dataset (same sha256) are skipped. Dump extensions: "
                       "{extensions} (and .gz/.zst/.xz/.bz2 of them).", formatter_class=RegistryHelpFormatter)
    s.add_argument("inputs", nargs="*", type=path,
                   help="dump files or folders (.gz/.zst/.xz/.bz2 read transparently)")
    s.add_argument("--watch", action="append", metavar="DIR", help="keep DATASET up to date with the dumps "
                   "written into DIR (repeatable): pack each complete new dump, until SIGTERM or Ctrl-C (default: none, pack the INPUTs once)")
    s.add_argument("--interval", type=float, default=2.0, metavar="S", help="with --watch: seconds between scans (default 2)")
    s.add_argument("--settle", type=float, default=5.0, metavar="S", help="with --watch: a dump without a rename "
                   "or a NAME.done marker is complete when its size and mtime are unchanged this long (default 5)")
    s.add_argument("--once", action="store_true", help="with --watch: pack what is complete now and exit (default off: keep watching)")
    s.add_argument("-o", "--output", required=True, type=path, help="dataset folder (created or appended to)")
    add_registry_option(s, "--format", default="auto", choices=RegistryChoices(format_names, first=("auto",)),
                        help="input format of every input (default: auto, from magic bytes, extension and "
                        "first lines, file by file)")
    s.add_argument("--score-unit", default="auto", choices=["auto", "cp", "sf-internal"],
                   help="unit of the input scores: auto (default: each format's documented unit, printed: "
                   "Stockfish internal units for .bin and .binpack, UCI centipawns for the others), cp "
                   "(UCI centipawns) or sf-internal (Stockfish's own generator; cp = 100·score/208 at stream time)")
    s.add_argument("--pgn-pov", default="mover", choices=["mover", "white"],
                   help="POV of PGN eval comments: mover (default; cutechess, fastchess) or white")
    s.add_argument("--workers", type=workers, default=None, metavar="N",
                   help="processes packing in parallel: every byte range of every input is one task, and a "
                        "large uncompressed file is split into ranges of --range-mb at record or game "
                        "boundaries, so one file uses every worker; the output does not depend on N "
                        "(default: all cores this process may use, os.sched_getaffinity)")
    s.add_argument("--range-mb", type=positive_float, default=None, metavar="MB",
                   help="split uncompressed inputs larger than this into byte ranges of about this many "
                        "MiB (fractions allowed), each packed to a part file of its own; the split "
                        "depends only on the file and this size (default 64; PGN and compressed inputs "
                        "are never split)")
    s.add_argument("--dedup", action="store_true", help="reject positions already in the dataset or "
                   "earlier in this run, counted as 'duplicate position' (files then run one at a time; "
                   "default off)")
    s.add_argument("--layout", choices=["chained", "flat"], default=None,
                   help="part layout of a NEW dataset: chained (move chains: a board per chain, then move "
                        "indices and scores, about 2.3 bytes a position) or flat (a 32-byte board per row, "
                        "about 15 bytes a position, what nnue-forge wrote before); an existing dataset's "
                        "new parts take its own layout (default: chained for a new dataset)")
    s.add_argument("--json", action="store_true",
                   help="print one JSON object: read, packed, rejected, files (default: text)")
    s.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr (default: a bar when stderr is a terminal)")
    s.add_argument("--shard", metavar="K/N", default=None,
                   help="pack only shard K of N (0 <= K < N) of the inputs' byte ranges (see --range-mb), "
                        "dealt by size, into a shard dataset for 'nnue merge' (default: all inputs)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import pack_run  # the work and its heavy imports, only when the command runs

    return pack_run.run(args)
