"""``nnue convert``, the work: write a dataset back out as a dump for other trainers
(:func:`nnue.pipeline.convert.convert`). The parser is :mod:`nnue.commands.convert`."""
from __future__ import annotations

import json
from pathlib import Path

from nnue.pipeline.convert import convert


def run(args) -> int:
    """``nnue convert``: every position of the dataset, written in ``--to``'s format; ``--to
    chained``: the dataset upgraded to the chained layout in place (:mod:`nnue.pipeline.upgrade`)."""
    if args.to == "chained":
        return _upgrade(args)
    if args.output is None:
        raise ValueError(f"--to {args.to} writes a file: give -o OUTPUT")
    if Path(args.output).is_dir():
        raise ValueError(f"{args.output}: is a folder; -o names the output file")
    r = convert(args.dataset, args.to, args.output, progress=not args.no_progress)
    if args.json:
        print(json.dumps(r))
        return 0
    chains = f" in {r['chains']:,} chains" if "chains" in r else ""
    print(f"wrote {r['rows']:,} positions{chains} to {r['path']} ({r['format']})")
    for why, k in {**r.get("not_written", {}), **r.get("notes", {})}.items():
        verb = "not written" if why in r.get("not_written", {}) else "note"
        print(f"  {k:,} position(s) {verb}: {why}")
    return 0


def _upgrade(args) -> int:
    from nnue.pipeline.upgrade import upgrade

    if args.output is not None:
        raise ValueError("--to chained upgrades DATASET in place; it takes no -o")
    bar = None
    if not args.no_progress:
        import sys

        from tqdm import tqdm

        from nnue.pipeline import manifest as mf

        total = mf.totals(mf.load(args.dataset))["packed"]
        bar = tqdm(total=total, unit=" pos", unit_scale=True, file=sys.stderr, desc="upgrade", disable=None)
    try:
        r = upgrade(args.dataset, progress=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(json.dumps(r))
    elif not r["parts_upgraded"]:
        print(f"{r['dataset']}: chained already ({r['parts']} part(s), {r['positions']:,} positions)")
    else:
        print(f"upgraded {r['parts_upgraded']} part(s) of {r['dataset']} to the chained layout: {r['positions']:,} "
              f"positions, {r['bytes_before']:,} -> {r['bytes_after']:,} bytes "
              f"({r['bytes_per_position_before']} -> {r['bytes_per_position_after']} a position)")
    return 0
