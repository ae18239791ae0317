"""``nnue convert``, the work: write a dataset back out as a dump for other trainers
(:func:`nnue.pipeline.convert.convert`). The parser is :mod:`nnue.commands.convert`."""
from __future__ import annotations

import json
from pathlib import Path

from nnue.pipeline.convert import convert


def run(args) -> int:
    """``nnue convert``: every position of the dataset, written in ``--to``'s format."""
    if Path(args.output).is_dir():
        raise ValueError(f"{args.output}: is a folder; -o names the output file")
    r = convert(args.dataset, args.to, args.output, progress=not args.no_progress)
    print(json.dumps(r) if args.json else f"wrote {r['rows']:,} positions to {r['path']} ({r['format']})")
    return 0
