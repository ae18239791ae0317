"""``nnue export-net``, the work: load a net and write it with the writer of the layout ``--to``
names (a kind's ``targets``, :func:`nnue.inference.kinds.target`), then print what was written.
The parser is :mod:`nnue.commands.export_net`."""
from __future__ import annotations

import json
from pathlib import Path

from nnue.inference import kinds, load_any


def run(args) -> int:
    """``nnue export-net NETDIR --to TARGET -o FILE``: an exported integer net in another
    program's layout (the writer checks the net, one line naming the field, before anything is
    written)."""
    write = kinds.target(args.to)  # ValueError naming every kind's layouts
    out = Path(args.output)
    if out.is_dir():
        raise ValueError(f"{out}: is a folder; -o names the file to write")
    net = load_any(args.net)
    try:  # a missing folder is made, as nnue convert -o does (after the net loaded: nothing made for a bad net)
        out.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(f"{out.parent}: not a folder (a path under a file): cannot write {out.name} there") \
            from None
    info = write(net, out) or {}
    if args.json:
        print(json.dumps(info, default=str))
        return 0
    size = f" ({info['bytes']:,} bytes)" if "bytes" in info else ""
    print(f"wrote {out}{size}: {args.to} layout" + (f": {info['layout']}" if "layout" in info else ""))
    if {"QA", "QB", "SCALE"} <= info.keys():
        print(f"  QA = {info['QA']}, QB = {info['QB']}, SCALE = {info['SCALE']}, HIDDEN_SIZE = {info['HIDDEN_SIZE']}, "
              f"{info['activation']}, inputs {info['inputs']}, output buckets {info['output_buckets']}")
    for note in info.get("notes", []):
        print(f"  note: {note}")
    return 0
