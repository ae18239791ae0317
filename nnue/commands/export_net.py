"""``nnue export-net``: the parser; the work is in :mod:`nnue.commands.export_net_run`, imported when
the command runs. The layouts ``--to`` names are the net kinds' (``targets`` of
:mod:`nnue.inference.kinds`): the work looks them up, so that a kind brings its own."""
from __future__ import annotations

from nnue.commands.common import path


def add_parser(sub) -> None:
    """Add ``nnue export-net`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("export-net", help="write an exported integer net in another program's layout",
                       description="Write NETDIR's integer net as FILE in the layout of --to: bullet "
                       "(its quantised.bin of a simple perspective net), stockfish-15.1 (the .nnue of an "
                       "sfnnv5 net with L1 1024) or stockfish-19 (the .nnue of an sfnnv16 net with L1 1024). A net the layout cannot hold is refused in one line naming "
                       "the field or dimension; nothing is written then.")
    s.add_argument("net", type=path, metavar="NETDIR", help="the NETDIR nnue export or import-net wrote, its "
                   "net.safetensors, or a .nnue")
    s.add_argument("--to", required=True, metavar="TARGET",
                   help="target layout, one of the net kinds' layouts: bullet (perspective nets), stockfish-15.1 "
                   "(sfnnv5 nets), stockfish-19 (sfnnv16 nets); another name is refused in one line listing them")
    s.add_argument("-o", "--output", required=True, metavar="FILE", type=path,
                   help="file to write (atomically: written under a temporary name, then renamed)")
    s.add_argument("--json", action="store_true", help="print one JSON object: size, layout, engine constants, notes (default: text lines)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import export_net_run  # the work and its heavy imports, only when the command runs

    return export_net_run.run(args)
