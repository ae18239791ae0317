"""``nnue export-net``: the parser and the registry of targets (:data:`TARGETS`); the work is in
:mod:`nnue.commands.export_net_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import path


def _write_stockfish(net, path) -> dict:
    """``--to stockfish-15.1``: the ``.nnue`` file (refused in one line, naming the dimension or
    field, for a net Stockfish 15.1 cannot load)."""
    from pathlib import Path

    from nnue.inference.sfnnue import check_writable, file_hash, nnue_bytes  # torch: only when a net is written
    from nnue.pipeline.atomic import atomic_write_bytes

    path = Path(path)
    check_writable(net, path)
    data = nnue_bytes(net)
    atomic_write_bytes(path, data)
    return {"target": "stockfish-15.1", "file": str(path), "bytes": len(data),
            "layout": "Stockfish 15.1 .nnue (SFNNv5): header, feature transformer, 8 layer stacks",
            "hash": f"0x{file_hash(net.arch['hidden']):08X}", "description": net.arch.get("description", ""),
            "notes": [f"load it with: setoption name EvalFile value {path}"]}


def _write_bullet(net, path) -> dict:
    """``--to bullet``: bullet's ``quantised.bin`` (:func:`nnue.inference.bullet.write_bullet`)."""
    from nnue.inference.bullet import write_bullet  # torch: imported only when a net is written

    return write_bullet(net, path)


#: ``nnue export-net --to`` targets: name -> writer ``(net, path) -> dict``. A writer checks the
#: net first (one line naming the field, before anything is written), writes atomically, and
#: returns what ``--json`` prints (its ``notes`` as lines). The names are the parser's choices, so
#: each writer imports its machinery when it is called, not when the parser is built.
TARGETS = {"bullet": _write_bullet, "stockfish-15.1": _write_stockfish}


def add_parser(sub) -> None:
    """Add ``nnue export-net`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("export-net", help="write an exported integer net in another program's layout",
                       description="Write NETDIR's integer net as FILE in the layout of --to: bullet "
                       "(its quantised.bin of a simple perspective net) or stockfish-15.1 (the .nnue of an "
                       "sfnnv5 net with L1 1024). A net the layout cannot hold is refused in one line naming "
                       "the field or dimension; nothing is written then.")
    s.add_argument("net", type=path, metavar="NETDIR", help="the NETDIR nnue export or import-net wrote, its "
                   "net.safetensors, or a .nnue")
    s.add_argument("--to", required=True, choices=list(TARGETS), help="target layout")
    s.add_argument("-o", "--output", required=True, metavar="FILE", type=path,
                   help="file to write (atomically: written under a temporary name, then renamed)")
    s.add_argument("--json", action="store_true", help="print one JSON object: size, layout, engine constants, notes (default: text lines)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import export_net_run  # the work and its heavy imports, only when the command runs

    return export_net_run.run(args, TARGETS)
