"""``nnue pack``, the work: pack dump files into a Parquet dataset and print what was packed, rejected,
skipped and repeated (:func:`nnue.pipeline.pack.pack`; ``--watch``: :func:`nnue.pipeline.watch.cli_watch`;
``--shard K/N``: :mod:`nnue.pipeline.shard`). The parser is :mod:`nnue.commands.pack`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from nnue.pipeline import manifest as mf
from nnue.pipeline.dupes import extra_copies, groups, repeated_inputs
from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import UNIT_WORDS, default_workers, expand_inputs, pack, resolve_score_unit
from nnue.pipeline.povcheck import warning as pov_warning
from nnue.pipeline.ranges import DEFAULT_RANGE_MB, range_bytes
from nnue.pipeline.shard import parse_shard, shard_units
from nnue.pipeline.watch import cli_watch


def run(args) -> int:
    """``nnue pack``: pack the inputs (or keep a dataset up to date with --watch); prints the counts.
    Bad input raises ValueError / FileNotFoundError / FormatError (one line, status 2)."""
    if args.watch and args.shard:
        raise ValueError("--shard packs a fixed set of inputs; it cannot be combined with --watch")
    if args.dedup and args.shard:
        # each shard would drop only the repeats it sees itself: the merge would keep the others
        raise ValueError("--dedup cannot be combined with --shard: it needs every position packed before it, "
                         "which one shard does not see; pack the shards without --dedup, or pack with --dedup in one process (--workers for speed)")
    if args.watch:
        return cli_watch(args)
    if not args.inputs:
        raise ValueError("give INPUT files or folders, or --watch DIR")
    out_path = Path(args.output)
    if out_path.exists() and not out_path.is_dir():
        raise ValueError(f"{out_path}: exists and is not a folder; -o names the dataset folder")
    files, _ignored = expand_inputs(args.inputs)
    if not files:
        raise ValueError(f"no dump files in {', '.join(args.inputs)} (extensions: see 'nnue pack --help')")
    inputs = args.inputs
    units = None
    rbytes = range_bytes(DEFAULT_RANGE_MB if args.range_mb is None else args.range_mb)
    score_unit = args.score_unit
    if args.shard:
        k, n = parse_shard(args.shard)
        # one unit for every shard, from all the inputs (a shard sees only its own)
        score_unit, _ = resolve_score_unit(args.score_unit, files, args.format, None)
        units = shard_units(files, k, n, rbytes, args.format)
        inputs = [f for f in files if str(f) in units]
        if not inputs:
            out_path.mkdir(parents=True, exist_ok=True)
            # an empty shard is still a dataset
            mf.merge(out_path, [], score_unit=score_unit,
                     version={"flat": 1, "chained": 2}.get(args.layout))
            print(f"shard {k}/{n}: no input files ({len(files)} file(s) over {n} shards); {out_path} is empty")
            return 0
    summary = pack(inputs, args.output, fmt=args.format, score_unit=score_unit,
                   options=ReaderOptions(pgn_pov=args.pgn_pov), progress=not args.no_progress,
                   workers=args.workers if args.workers is not None else default_workers(), dedup=args.dedup,
                   range_mb=args.range_mb, units=units, layout=args.layout)
    out = {"read": summary["read"], "packed": summary["packed"], "rejected": summary["rejected"],
           # records python-chess validated one by one (the compiled core settled the others)
           "validated_by_python_chess": summary["validated_by_python_chess"],
           "validated_by_python_chess_share": round(summary["validated_by_python_chess"] / summary["read"], 6)
           if summary["read"] else 0.0,
           "files": [{k: f.get(k) for k in ("path", "format", "read", "packed", "rejected",
                                            "validated_by_python_chess")}
                     | {k: f[k] for k in ("pov_check", "latin1_bytes", "appended", "packed_to") if k in f}
                     | {"parts": len(mf.entry_parts(f))}
                     | ({"one_range_because": f["one_range_because"]} if "one_range_because" in f else {})
                     for f in summary["files"]],
           "skipped_already_packed": summary["skipped"], "ignored": summary["ignored"],
           "score_unit": summary["score_unit"], "score_unit_from": summary["score_unit_from"],
           "dataset": str(args.output)}
    for w in summary.get("warnings", []):  # inputs packed before whose earlier bytes changed, ...
        print(f"nnue pack: warning: {w}", file=sys.stderr)

    for f in summary["files"]:
        if pov_warning(f, f.get("pgn_pov", args.pgn_pov)):
            print(f"nnue pack: warning: {pov_warning(f, f.get('pgn_pov', args.pgn_pov))}", file=sys.stderr)
        if f.get("latin1_bytes"):
            print(f"nnue pack: note: {f['path']}: {f['latin1_bytes']:,} byte(s) that are not UTF-8 read as Latin-1 "
                  f"(ISO 8859-1, PGN's own character set)", file=sys.stderr)
        if "one_range_because" in f:
            print(f"nnue pack: warning: {f['path']} is packed as one byte range, on one core: "
                  f"{f['one_range_because']}", file=sys.stderr)
    if summary["files"]:
        out["repeated_inputs"] = repeated_inputs(args.output, summary["files"])
        # one line per group of inputs that hold the same games, counting the copies; then one
        # --dedup suggestion with the number of repeated positions (issue 20 item 6)
        extra = 0
        for g in groups(out["repeated_inputs"]):
            names = ", ".join(g[:-1]) + " and " + g[-1]
            times = "twice" if len(g) == 2 else f"{len(g)} times"
            print(f"nnue pack: warning: {names} hold the same games in the same order: each of those games "
                  f"is now in the dataset {times}", file=sys.stderr)
            extra += extra_copies(args.output, g)
        if out["repeated_inputs"]:
            out["repeated_positions"] = extra
            print(f"nnue pack: warning: {extra:,} positions of those inputs repeat another of their positions; "
                  f"pack only one of each group, or pack with --dedup (keeps one copy of each position)",
                  file=sys.stderr)
    if args.json:
        print(json.dumps(out))
    else:
        rej = sum(summary["rejected"].values())
        print(f"packed {out['packed']:,} of {out['read']:,} positions into {args.output} "
              f"({rej:,} rejected, {len(summary['skipped'])} file(s) already packed)")
        print(f"  scores in {UNIT_WORDS[summary['score_unit']]}: {summary['score_unit_from']}"
              + ("; --score-unit cp if they are centipawns" if summary["score_unit"] == "sf-internal"
                 and summary["score_unit_from"] != "--score-unit" else ""))
        for reason, n in summary["rejected"].items():
            print(f"  rejected {n:>9,}  {reason}")
        for path in summary["ignored"]:
            print(f"  ignored (no dump extension): {path}")
    return 0
