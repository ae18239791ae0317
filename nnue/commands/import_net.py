"""``nnue import-net``: the parser; the work is in :mod:`nnue.commands.import_net_run`, imported when the
command runs."""
from __future__ import annotations


def add_parser(sub) -> None:
    """Add ``nnue import-net`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("import-net", help="read a Stockfish .nnue into an integer net and a float checkpoint",
                       description="Read FILE.nnue (its version field picks the format: Stockfish 15.1, SFNNv5, "
                       "or Stockfish 19, SFNNv16; version, hashes, sizes, every block and the end of the file "
                       "checked) and write NETDIR/net.safetensors, NETDIR/net.nnue (byte-identical), "
                       "NETDIR/checkpoint.safetensors (dequantised float weights: init_weights= to fine-tune) and "
                       "NETDIR/import.json. Stockfish 15.1 writes its built-in net with the UCI command "
                       "'export_net FILE'; scripts/ensure_sf19.sh fetches Stockfish 19's official net.")
    s.add_argument("file", metavar="FILE.nnue", help="an engine's network file that a net kind reads (a Stockfish "
                   "15.1 .nnue: kind sfnnv5; a Stockfish 19 .nnue: kind sfnnv16)")
    s.add_argument("-o", "--output", required=True, metavar="NETDIR", help="output folder (created)")
    s.add_argument("--json", action="store_true", help="print import.json as one line (default: text)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import import_net_run  # the work and its heavy imports, only when the command runs

    return import_net_run.run(args)
