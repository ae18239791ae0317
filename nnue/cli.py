"""The ``nnue`` command: pack, inspect, convert, train, export, eval, bench.

Every sub-command has ``--help`` and exits with status 2 and a one-line reason on bad input
(``nnue <cmd>: error: ...``). No traceback reaches a user: an unexpected exception (a bug) is
one line too, with status 1; ``NNUE_DEBUG=1`` in the environment shows the traceback instead.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2


def _known_errors() -> tuple[type[BaseException], ...]:
    from nnue.inference.net import NetFormatError
    from nnue.pipeline.formats import FormatError
    from nnue.pipeline.manifest import ManifestError

    from nnue.trainer.sweep_report import SweepReportError

    errs: list[type[BaseException]] = [FormatError, ManifestError, NetFormatError, SweepReportError, FileNotFoundError,
                                       OverflowError, KeyError, ValueError, IsADirectoryError]
    try:
        from nnue.trainer.export import ExportError
        errs.append(ExportError)
    except ImportError:
        pass
    return tuple(errs)


# ---------------------------------------------------------------------------------------- pack
def cmd_pack(args) -> int:
    if args.watch and args.shard:
        raise ValueError("--shard packs a fixed set of inputs; it cannot be combined with --watch")
    if args.dedup and args.shard:
        # each shard would drop only the repeats it sees itself: the merge would keep the others
        raise ValueError("--dedup cannot be combined with --shard: it needs every position packed before it, "
                         "which one shard does not see; pack the shards without --dedup, or pack with --dedup in one process (--workers for speed)")
    if args.watch:
        from nnue.pipeline.watch import cli_watch
        return cli_watch(args)
    if not args.inputs:
        raise ValueError("give INPUT files or folders, or --watch DIR")
    from nnue.pipeline.formats import ReaderOptions
    from nnue.pipeline.manifest import entry_parts as mf_entry_parts
    from nnue.pipeline.pack import default_workers, expand_inputs, pack

    out_path = Path(args.output)
    if out_path.exists() and not out_path.is_dir():
        raise ValueError(f"{out_path}: exists and is not a folder; -o names the dataset folder")
    files, _ignored = expand_inputs(args.inputs)
    if not files:
        raise ValueError(f"no dump files in {', '.join(args.inputs)} (extensions: see 'nnue pack --help')")
    inputs = args.inputs
    units = None
    from nnue.pipeline.ranges import DEFAULT_RANGE_MB, range_bytes

    rbytes = range_bytes(DEFAULT_RANGE_MB if args.range_mb is None else args.range_mb)
    if args.shard:
        from nnue.pipeline.shard import parse_shard, shard_units

        k, n = parse_shard(args.shard)
        units = shard_units(files, k, n, rbytes, args.format)
        inputs = [f for f in files if str(f) in units]
        if not inputs:
            out_path.mkdir(parents=True, exist_ok=True)
            from nnue.pipeline import manifest as mf

            mf.merge(out_path, [], score_unit=args.score_unit)  # an empty shard is still a dataset
            print(f"shard {k}/{n}: no input files ({len(files)} file(s) over {n} shards); {out_path} is empty")
            return 0
    summary = pack(inputs, args.output, fmt=args.format, score_unit=args.score_unit,
                   options=ReaderOptions(pgn_pov=args.pgn_pov), progress=not args.no_progress,
                   workers=args.workers if args.workers is not None else default_workers(), dedup=args.dedup,
                   range_mb=args.range_mb, units=units)
    out = {"read": summary["read"], "packed": summary["packed"], "rejected": summary["rejected"],
           # records python-chess validated one by one (the compiled core settled the others)
           "validated_by_python_chess": summary["validated_by_python_chess"],
           "validated_by_python_chess_share": round(summary["validated_by_python_chess"] / summary["read"], 6)
           if summary["read"] else 0.0,
           "files": [{k: f.get(k) for k in ("path", "format", "read", "packed", "rejected",
                                            "validated_by_python_chess")}
                     | {k: f[k] for k in ("pov_check", "latin1_bytes", "appended", "packed_to") if k in f}
                     | {"parts": len(mf_entry_parts(f))}
                     | ({"one_range_because": f["one_range_because"]} if "one_range_because" in f else {})
                     for f in summary["files"]],
           "skipped_already_packed": summary["skipped"], "ignored": summary["ignored"],
           "dataset": str(args.output)}
    from nnue.pipeline.povcheck import warning as pov_warning

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
        from nnue.pipeline.dupes import repeated_inputs

        from nnue.pipeline.dupes import extra_copies, groups

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
        for reason, n in summary["rejected"].items():
            print(f"  rejected {n:>9,}  {reason}")
        for path in summary["ignored"]:
            print(f"  ignored (no dump extension): {path}")
    return 0


def cmd_merge(args) -> int:
    from nnue.pipeline.shard import merge_datasets

    r = merge_datasets(args.shards, args.output)
    if args.json:
        print(json.dumps(r))
    else:
        done = sum(1 for s in r["shards"] if s["status"] == "already merged")
        print(f"merged {r['files']} file(s), {r['positions']:,} positions from {len(r['shards']) - done} shard(s) "
              f"into {args.output} ({done} already merged); it holds {r['dataset_files']} file(s), "
              f"{r['totals']['packed']:,} positions")
    return 0


# ------------------------------------------------------------------------------------- inspect
def _hist_stats(counts, offset: int) -> dict:
    """min, percentiles (nearest rank, 'inverted CDF') and mean of the values whose histogram is
    ``counts`` (value = index + offset). Exact, whatever the number of rows."""
    import numpy as np

    total = int(counts.sum())
    if total == 0:
        return {}
    values = np.arange(len(counts)) + offset
    cdf = np.cumsum(counts)
    out = {}
    for name, q in (("min", 0), ("p1", 1), ("p25", 25), ("median", 50), ("p75", 75), ("p99", 99)):
        out[name] = float(values[np.searchsorted(cdf, max(1, int(np.ceil(q / 100 * total))))])
    out["max"] = float(values[np.nonzero(counts)[0][-1]])
    out["mean"] = float((counts * values).sum() / total)
    return out


def cmd_inspect(args) -> int:
    """Dataset statistics in one streaming pass (memory bounded by one row group: histograms of
    the int16/uint16 columns give exact percentiles)."""
    import numpy as np
    import pyarrow.parquet as pq

    from nnue.pipeline import manifest as mf
    from nnue.pipeline.board import unpack_fen
    from nnue.pipeline.schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE

    ds = Path(args.dataset)
    m = mf.load(ds)
    cols = ["score", "result", "ply", "piece_count", "in_check", "best_move_is_capture", "game_id", "flags"]
    parts = [ds / name for f in sorted(m["files"].values(), key=mf.entry_key) if f["packed"]
             for name in mf.entry_parts(f)]
    score_h = np.zeros(65536, np.int64)
    ply_h = np.zeros(65536, np.int64)
    pc_h = np.zeros(65, np.int64)
    res_h = np.zeros(3, np.int64)
    n = games = none = mate = ply_unknown = in_check = capture = 0
    ids = []  # each row group's distinct game ids: a game packed from several inputs has one id
    fens = []
    for p in parts:
        pf = pq.ParquetFile(p)
        last_game = None  # games are contiguous runs of one game id within a part file
        for rg in range(pf.metadata.num_row_groups):
            t = pf.read_row_group(rg, columns=cols + (["board"] if len(fens) < args.fens else []))
            a = {c: t.column(c).to_numpy(zero_copy_only=False) for c in cols}
            flags = a["flags"].astype(np.int64)
            scored = (flags & (FLAG_SCORE_NONE | FLAG_SCORE_MATE)) == 0
            score_h += np.bincount(a["score"][scored].astype(np.int64) + 32768, minlength=65536)
            known = (flags & FLAG_PLY_UNKNOWN) == 0
            ply_h += np.bincount(a["ply"][known].astype(np.int64), minlength=65536)
            pc_h += np.bincount(a["piece_count"].astype(np.int64), minlength=65)
            res_h += np.bincount(a["result"].astype(np.int64) + 1, minlength=3)
            gid = a["game_id"]
            games += int((gid[1:] != gid[:-1]).sum()) + int(len(gid) > 0 and gid[0] != last_game)
            last_game = gid[-1] if len(gid) else last_game
            ids.append(np.unique(gid))
            n += len(gid)
            none += int(((flags & FLAG_SCORE_NONE) != 0).sum())
            mate += int(((flags & FLAG_SCORE_MATE) != 0).sum())
            ply_unknown += int((~known).sum())
            in_check += int(np.asarray(a["in_check"], bool).sum())
            capture += int(np.nan_to_num(a["best_move_is_capture"].astype(float)).sum())
            if len(fens) < args.fens:
                need = args.fens - len(fens)
                boards = t.column("board").slice(0, need).to_pylist()
                sc, rs = t.column("score").to_pylist(), t.column("result").to_pylist()
                fl = t.column("flags").to_pylist()
                fens += [(unpack_fen(b), None if fl[i] & FLAG_SCORE_NONE else sc[i], rs[i])
                         for i, b in enumerate(boards)]
    totals = mf.totals(m)
    distinct = len(np.unique(np.concatenate(ids))) if ids else 0
    report = {
        "dataset": str(ds), "schema_version": m["schema_version"], "score_unit": m["score_unit"],
        # games: distinct game ids (issue 20); game_runs: runs of one game id in the parts, which
        # count a game once per input that holds it
        "files": len(m["files"]), "positions": n, "games": distinct, "game_runs": games, "read": totals["read"],
        "packed": totals["packed"], "rejected": totals["rejected"],
        "score": _hist_stats(score_h, -32768), "score_none": none, "score_mate": mate,
        "result": {str(v - 1): int(c) for v, c in enumerate(res_h) if c},
        "ply": _hist_stats(ply_h, 0), "ply_unknown": ply_unknown,
        "piece_count": {str(v): int(c) for v, c in enumerate(pc_h) if c},
        "in_check": in_check, "best_move_is_capture": capture,
        "fens": [{"fen": f, "score": s, "result": r} for f, s, r in fens],
    }
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{ds}: {report['positions']:,} positions in {report['games']:,} games from "
          f"{report['files']} file(s); score unit {report['score_unit']}")
    if report["game_runs"] > report["games"]:
        print(f"  {report['game_runs'] - report['games']:,} game(s) are in the dataset more than once "
              f"({report['game_runs']:,} runs of positions of {report['games']:,} distinct game ids); "
              f"'nnue pack --dedup' keeps one copy of each position")
    rej = f" {report['rejected']}" if report["rejected"] else ""
    print(f"  read {report['read']:,}, packed {report['packed']:,}, rejected "
          f"{sum(report['rejected'].values()):,}{rej}")
    s = report["score"]
    if s:
        print(f"  score (stm POV, excluding {report['score_none']:,} none and {report['score_mate']:,} "
              f"mate): min {s['min']:.0f}  p1 {s['p1']:.0f}  median {s['median']:.0f}  "
              f"p99 {s['p99']:.0f}  max {s['max']:.0f}  mean {s['mean']:.1f}")
    print("  result (stm POV): " + "  ".join(f"{k}: {v:,}" for k, v in report["result"].items()))
    if report["ply"]:
        p = report["ply"]
        print(f"  ply: min {p['min']:.0f}  median {p['median']:.0f}  max {p['max']:.0f}"
              f"  (unknown: {report['ply_unknown']:,})")
    print("  piece count: " + "  ".join(f"{k}:{v}" for k, v in report["piece_count"].items()))
    print(f"  in check: {report['in_check']:,}   best move is a capture/promotion: "
          f"{report['best_move_is_capture']:,}")
    for f in report["fens"]:
        score = "none" if f["score"] is None else f["score"]
        print(f"{f['fen']} | score {score} | result {f['result']}")
    return 0


# ------------------------------------------------------------------------------------- convert
def cmd_convert(args) -> int:
    from nnue.pipeline.convert import convert

    if Path(args.output).is_dir():
        raise ValueError(f"{args.output}: is a folder; -o names the output file")
    r = convert(args.dataset, args.to, args.output, progress=not args.no_progress)
    print(json.dumps(r) if args.json else f"wrote {r['rows']:,} positions to {r['path']} ({r['format']})")
    return 0


# ------------------------------------------------------------------------------------ annotate
def cmd_annotate(args) -> int:
    from nnue.pipeline.annotate import annotate

    r = annotate(args.dataset, args.base, args.teacher, args.engine, args.jobs, args.batch,
                 progress=not args.no_progress)
    if args.json:
        print(json.dumps(r))
        return 0
    for c, rec in r["columns"].items():
        print(f"{c}: {rec['source']} ({rec['version']}), {rec['rows']:,} rows, {rec['nulls']:,} null (in check)")
    print(f"  {len(r['parts_annotated'])} part(s) annotated, {len(r['parts_skipped'])} already done")
    return 0


def cmd_analyze(args) -> int:
    from nnue.cmd_analyze import analyze

    r = analyze(args.net, args.dataset, args.output, args.limit, engine=args.engine)
    if args.json:
        print(json.dumps({k: v for k, v in r.items() if k != "dead_neurons"} | {
            "dead_neurons": {k: v for k, v in r["dead_neurons"].items() if k != "active_share_per_neuron"}}))
        return 0
    bs, d = r["block_sparsity"], r["dead_neurons"]
    print(f"wrote {', '.join(r['files'])} to {args.output} ({r['positions']:,} quiet positions)")
    slope = r["eval_vs_score"]["slope"]
    print(f"  eval vs score slope {slope:.3f}" if slope is not None else "  eval vs score slope n/a", end="")
    print(f", mean L0 block sparsity {bs['mean']:.3f}, dead neurons {d['dead']} of {d['neurons']}")
    return 0


# -------------------------------------------------------------------------------------- export
def cmd_export(args) -> int:
    from nnue.trainer.export import export

    r = export(args.checkpoint, args.output, clip=args.clip, data_path=args.data,
               max_positions=args.positions, bias_correction=not args.no_bias_correction,
               alpha=args.alpha, base=args.base, max_bytes=args.max_bytes)
    if args.json:
        print(json.dumps(r, default=float))
        return 0
    c, a = r["cross_check"], r["audit"]
    print(f"wrote {r['net']}, {r['bin']} and {Path(r['net']).parent / 'export.json'}")
    arch = r["architecture"]
    layers = (" -> 8 layer stacks: 16 -> SqrCReLU|CReLU 30 -> 32 -> 1, skip, 8 PSQT (Stockfish 15.1 SFNNv5)"
              if arch.get("kind") == "sfnnv5" else
              f" -> {arch['l1_outputs']} {arch['hidden_activation']} -> {arch['l2_outputs']} "
              f"{arch.get('l2_activation') or arch['hidden_activation']} -> 1" if "l2_outputs" in arch else
              f" -> {arch['l1_outputs']} {arch['hidden_activation']} -> 1" if "l1_outputs" in arch else "")
    print(f"  {arch['feature_set']} -> {arch['hidden']}x2 {arch.get('activation', 'pairwise')}{layers} -> "
          f"{arch['output_buckets']}")
    if r.get("residual"):
        print(f"  residual net: eval = {r['residual']['base']} + {r['residual']['alpha']:g}·net")
    if arch.get("kind") == "sfnnv5":
        if arch["hidden"] == 1024:
            print(f"  Stockfish 15.1: setoption name EvalFile value {Path(r['bin']).resolve()}")
        else:
            print(f"  note: net.nnue has L1 {arch['hidden']}: Stockfish 15.1 loads only 1024 (nnue eval and "
                  "nnue import-net read it)", file=sys.stderr)
    print(f"  {r['bytes']['net.safetensors']:,} bytes" + (f" (model.max_bytes {r['bytes']['max_bytes']:,})"
                                                         if r["bytes"]["max_bytes"] else ""))
    print(f"  audit: accumulator worst case {a['accumulator_worst_case']} (limit {a['accumulator_limit']}), "
          f"clipped {a['clipped'] or 'nothing'}")
    if not c["positions"] and args.positions == 0:
        print("  note: --positions 0: no bias correction and no float-vs-int cross-check", file=sys.stderr)
    elif not c["positions"]:
        print("  warning: no validation positions found, so no bias correction and no float-vs-int "
              "cross-check; pass --data DATASET", file=sys.stderr)
    elif r["calibration"].get("skipped"):
        print(f"  bias correction skipped: {r['calibration']['skipped']}")
    elif not r["calibration"]["bias_correction"] and not args.no_bias_correction:
        print("  warning: too few validation positions for the bias correction", file=sys.stderr)
    if c["positions"]:
        print(f"  float vs int on {c['positions']:,} validation positions: mean |Δ| "
              f"{c['mean_abs_diff_cp']:.2f} cp, max |Δ| {c['max_abs_diff_cp']:.1f} cp, mean Δ "
              f"{c['mean_signed_diff_cp']:+.2f} cp")
    return 0


def cmd_export_net(args) -> int:
    """``nnue export-net NETDIR --to TARGET -o FILE``: an exported integer net in another
    program's layout (the writers of :data:`nnue.cmd_engine.TARGETS`)."""
    from nnue.cmd_engine import TARGETS, load_any

    out = Path(args.output)
    if out.is_dir():
        raise ValueError(f"{out}: is a folder; -o names the file to write")
    info = TARGETS[args.to](load_any(args.net), out) or {}
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


# ---------------------------------------------------------------------------------------- eval
def _read_fens(path: str) -> tuple[list[str], list[str]]:
    """Positions of a file ('-' = stdin), one a line: a FEN, an EPD line or 'FEN | score |
    result' (:func:`nnue.pipeline.positions.parse_position`; blank lines and '#' comments
    skipped). Returns (FENs, their "FILE:LINE" labels). Raises ValueError naming FILE:LINE and
    the reason for a line that is not a position pack would accept, or is not UTF-8."""
    from nnue.pipeline.positions import PositionError, parse_position

    name = "<stdin>" if path == "-" else path
    if path != "-" and not Path(path).is_file():
        raise ValueError(f"{path}: {'is a folder' if Path(path).is_dir() else 'no such file'}; --fens reads "
                         f"a text file of positions")
    src = sys.stdin if path == "-" else open(path, encoding="utf-8-sig")  # -sig: one BOM dropped
    fens, labels = [], []
    with src:
        n = 0
        try:
            for n, line in enumerate(src, 1):
                if n == 1:
                    line = line.removeprefix("\ufeff")
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                try:
                    fens.append(parse_position(line))
                except PositionError as e:
                    raise ValueError(f"{name}:{n}: {e}") from None
                labels.append(f"{name}:{n}")
        except UnicodeDecodeError as e:
            raise ValueError(f"{name}:{n + 1}: not UTF-8 text ({e.reason}); --fens reads one position a line") from None
    return fens, labels


def cmd_eval(args) -> int:
    from nnue.cmd_engine import load_any
    from nnue.inference import evaluate_fens

    if not args.dataset and (args.limit is not None or args.summary):
        raise ValueError("--limit and --summary go with --dataset")
    net_path = Path(args.net)
    net = load_any(net_path)  # net.safetensors, NETDIR, or a Stockfish .nnue
    if args.trace and (args.dataset or net.kind != "sfnnv5"):
        raise ValueError("--trace prints Stockfish 15.1's eval trace: it goes with an sfnnv5 net (or a .nnue) "
                         "and --fen / --fens" + (f"; {net_path} is a {net.kind} net" if net.kind != "sfnnv5" else ""))
    if args.dataset:
        from nnue.pipeline import manifest as mf

        mf.load(args.dataset)  # one line naming a path that is no dataset
        return _eval_dataset(net, args)
    if args.fen is not None:
        from nnue.pipeline.positions import PositionError, parse_position

        if not args.fen.strip():
            raise ValueError("--fen: empty FEN")
        try:
            fens, labels = [parse_position(args.fen)], ["--fen"]
        except PositionError as e:
            raise ValueError(f"--fen: {e}") from None
    else:
        fens, labels = _read_fens(args.fens)
    from nnue.inference.api import boards_from_fens

    from nnue.pipeline.annotate import residual_base

    boards = boards_from_fens(fens, labels)
    if args.trace:
        return _print_traces(net, fens)
    base = residual_base(net, boards, engine=args.engine, name=str(net_path))
    try:
        evals = _evaluate_rows(net, boards, base)
    except OverflowError as e:  # name the first position that overflows (one at a time: rare path)
        for fen, label in zip(fens, labels):
            try:
                evaluate_fens(net, [fen], [label], base=[0])
            except OverflowError as one:
                raise OverflowError(f"{label} ({fen}): {one}") from None
        raise e
    for v in evals:
        print("none" if v is None else v)
    return 0


def _print_traces(net, fens: list[str]) -> int:
    """``--trace``: Stockfish 15.1's NNUE eval trace of each position (in check: the engine's
    own "Final evaluation: none (in check)" line), one blank line between positions."""
    import chess

    from nnue.inference.sfnnv5 import trace

    checked = [chess.Board(f).is_check() for f in fens]
    texts = iter(trace(net, [f for f, c in zip(fens, checked) if not c]))
    for i, c in enumerate(checked):
        if i:
            print()
        print("Final evaluation: none (in check)" if c else next(texts), end="\n" if c else "")
    return 0


def _evaluate_rows(net, boards, base) -> list:
    """Evals of packed boards (ints), with a residual net's given base (``base``: float array,
    NaN = none, or None): a position without a base gets None ("none" in the output)."""
    from nnue.inference import evaluate

    if base is None:
        return evaluate(net, boards).tolist()
    import numpy as np
    import torch

    ok = np.isfinite(base)
    out: list = [None] * len(base)
    idx = np.nonzero(ok)[0]
    if len(idx):
        vals = evaluate(net, boards[torch.from_numpy(idx)], base=torch.from_numpy(base[idx]).to(torch.int64))
        for i, v in zip(idx.tolist(), vals.tolist()):
            out[i] = v
    return out


def _eval_dataset(net, args) -> int:
    """Every row of a packed dataset in file order (no filters, no split): one eval per line, or
    with --summary one JSON object (positions, evals/s of the evaluation alone, mean eval,
    Spearman ρ of the evals with the score column, rows without a score counting as 0)."""
    import time

    import numpy as np
    import torch

    from nnue.inference import evaluate
    from nnue.pipeline.stream import Filters, PackedStream
    from nnue.trainer.metrics import spearman

    from nnue.inference import residual
    from nnue.pipeline.annotate import dataset_holds_base, residual_base, residual_fields

    no_filters = Filters(skip_in_check=False, skip_capture=False, skip_score_none=False, skip_mate=False)
    ds = PackedStream([args.dataset], 65536, 0, "all", 0.0, no_filters, drop_last=False)
    limit = args.limit if args.limit is not None else None
    # a residual net on a Stockfish base: the dataset's base_eval column if it holds that base
    r = residual.of(net)
    use_column = r is not None and r["base"] != "material" and dataset_holds_base([args.dataset], r["base"],
                                                                                  ds.extra_columns)
    evals, scores, n, spent, no_base = [], [], 0, 0.0, 0
    for b in ds:
        boards, score = b["boards"], b["score"]
        column = b.get("base_eval") if use_column else None
        if limit is not None:
            boards, score = boards[: limit - n], score[: limit - n]
            column = None if column is None else column[: limit - n]
        base = residual_base(net, boards, None if column is None else column.double().numpy(), args.engine,
                             str(args.net))
        t = time.perf_counter()
        try:
            ev = evaluate(net, boards) if base is None else _evaluate_rows(net, boards, base)
        except OverflowError as e:  # name the first row that overflows (one at a time: rare path)
            from nnue.pipeline.board import unpack_fen

            for i in range(len(boards)):
                try:
                    evaluate(net, boards[i:i + 1], base=torch.zeros(1, dtype=torch.int64))
                except OverflowError as one:
                    raise OverflowError(f"{args.dataset}: row {n + i + 1} in file order "
                                        f"({unpack_fen(boards[i].numpy().tobytes())}): {one}") from None
            raise e
        spent += time.perf_counter() - t
        if base is not None:  # rows without a base (in check: Stockfish prints none): "none"
            keep = np.isfinite(base)
            no_base += int((~keep).sum())
            if args.summary:
                ev, score = torch.tensor([v for v in ev if v is not None], dtype=torch.int64), score[torch.from_numpy(keep)]
        n += len(boards)
        if args.summary:
            evals.append(ev.numpy())
            scores.append(score.numpy())
        else:
            rows = ev.tolist() if torch.is_tensor(ev) else ev
            sys.stdout.write("".join(f"{'none' if v is None else v}\n" for v in rows))
        if limit is not None and n >= limit:
            break
    if args.summary:
        ev = np.concatenate(evals) if evals else np.zeros(0, np.int64)
        sc = np.concatenate(scores) if scores else np.zeros(0, np.float32)
        extra = residual_fields(r, use_column, no_base)
        print(json.dumps(extra | {"positions": int(n), "evals_per_s": round(n / spent) if spent else None,
                          "mean_eval_cp": float(ev.mean()) if len(ev) else None,
                          "spearman_with_score": spearman(ev, sc) if len(ev) > 1 else None,
                          "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                          "architecture": net.arch}, default=float))
    return 0


# ------------------------------------------------------------------------------------ plumbing
def _non_negative(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    return v


def _positive_float(text: str) -> float:
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text}: give a positive number")
    return v


def _workers(text: str) -> int:
    v = _non_negative(text)
    if not 1 <= v <= 1024:
        raise argparse.ArgumentTypeError(f"{v}: give 1 to 1024 processes")
    return v


def _path(text: str) -> str:
    """A path argument: not empty (an empty path would mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    return text


def version_text() -> str:
    """``nnue-forge VERSION (git COMMIT)``: the installed package version and, when the package
    runs from a git checkout, the commit it was built from (``+dirty`` with local changes)."""
    import subprocess
    from importlib import metadata

    try:
        version = metadata.version("nnue-forge")
    except metadata.PackageNotFoundError:
        version = "unknown"
    here = Path(__file__).resolve().parent
    commit = None
    try:
        r = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"],
                           capture_output=True, text=True, timeout=5)
        if r.returncode == 0 and r.stdout.strip():
            commit = r.stdout.strip()
            d = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
            if d.returncode == 0 and d.stdout.strip():
                commit += "+dirty"
    except (OSError, subprocess.SubprocessError):
        pass
    return f"nnue-forge {version} (git {commit or 'commit unknown'})"



class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line: ``nnue <cmd>: error: ...`` (status 2)."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _export_targets() -> dict:
    """``nnue export-net --to`` targets (:data:`nnue.cmd_engine.TARGETS`)."""
    from nnue.cmd_engine import TARGETS

    return TARGETS


def _parser() -> argparse.ArgumentParser:
    from nnue.pipeline.formats import EXTENSIONS

    p = _OneLineParser(prog="nnue", description="nnue-forge: pack self-play dumps, train "
                                "NNUE nets, export integer nets, evaluate them.")
    p.add_argument("--version", action="version", version=version_text(),
                   help="print the package version and git commit, and exit")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=_OneLineParser)

    s = sub.add_parser("pack", help="pack dumps into a Parquet dataset",
                       description="Pack self-play dumps into a Parquet dataset (manifest, rejects). "
                       "Files already in the dataset (same sha256) are skipped. Dump extensions: "
                       + ", ".join(sorted(EXTENSIONS)) + " (and .gz/.zst/.xz/.bz2 of them).")
    s.add_argument("inputs", nargs="*", type=_path,
                   help="dump files or folders (.gz/.zst/.xz/.bz2 read transparently)")
    s.add_argument("--watch", action="append", metavar="DIR", help="keep DATASET up to date with the dumps "
                   "written into DIR (repeatable): pack each complete new dump, until SIGTERM or Ctrl-C (default: none, pack the INPUTs once)")
    s.add_argument("--interval", type=float, default=2.0, metavar="S", help="with --watch: seconds between scans (default 2)")
    s.add_argument("--settle", type=float, default=5.0, metavar="S", help="with --watch: a dump without a rename "
                   "or a NAME.done marker is complete when its size and mtime are unchanged this long (default 5)")
    s.add_argument("--once", action="store_true", help="with --watch: pack what is complete now and exit (default off: keep watching)")
    s.add_argument("-o", "--output", required=True, type=_path, help="dataset folder (created or appended to)")
    s.add_argument("--format", default="auto",
                   choices=["auto", "plain", "bullet-text", "pgn", "epd", "binpack", "bin", "bulletformat",
                            "marlinformat", "viriformat"],
                   help="input format of every input (default: auto, from magic bytes, extension and "
                        "first lines, file by file)")
    s.add_argument("--score-unit", default="cp", choices=["cp", "sf-internal"],
                   help="unit of the input scores: UCI centipawns (default) or Stockfish internal "
                   "units (data from Stockfish's own generator; cp = 100·score/208 at stream time)")
    s.add_argument("--pgn-pov", default="mover", choices=["mover", "white"],
                   help="POV of PGN eval comments: mover (default; cutechess, fastchess) or white")
    s.add_argument("--workers", type=_workers, default=None, metavar="N",
                   help="processes packing in parallel: every byte range of every input is one task, and a "
                        "large uncompressed file is split into ranges of --range-mb at record or game "
                        "boundaries, so one file uses every worker; the output does not depend on N "
                        "(default: all cores this process may use, os.sched_getaffinity)")
    s.add_argument("--range-mb", type=_positive_float, default=None, metavar="MB",
                   help="split uncompressed inputs larger than this into byte ranges of about this many "
                        "MiB (fractions allowed), each packed to a part file of its own; the split "
                        "depends only on the file and this size (default 64; PGN and compressed inputs "
                        "are never split)")
    s.add_argument("--dedup", action="store_true", help="reject positions already in the dataset or "
                   "earlier in this run, counted as 'duplicate position' (files then run one at a time; "
                   "default off)")
    s.add_argument("--json", action="store_true",
                   help="print one JSON object: read, packed, rejected, files (default: text)")
    s.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr (default: a bar when stderr is a terminal)")
    s.add_argument("--shard", metavar="K/N", default=None,
                   help="pack only shard K of N (0 <= K < N) of the inputs' byte ranges (see --range-mb), "
                        "dealt by size, into a shard dataset for 'nnue merge' (default: all inputs)")
    s.set_defaults(func=cmd_pack)

    s = sub.add_parser("merge", help="merge shard datasets (nnue pack --shard) into one dataset",
                       description="Move the part files of each SHARD into DATASET and union the manifests "
                       "under DATASET's writer lock; atomic and idempotent: a rerun after a crash finishes "
                       "the merge, and a shard already merged is skipped.")
    s.add_argument("shards", nargs="+", type=_path, metavar="SHARD", help="shard dataset folders (nnue pack --shard)")
    s.add_argument("-o", "--output", required=True, type=_path, metavar="DATASET",
                   help="dataset folder (created, or appended to)")
    s.add_argument("--json", action="store_true", help="print one JSON object (default: one line of text)")
    s.set_defaults(func=cmd_merge)

    s = sub.add_parser("inspect", help="dataset counts and distributions, FENs back out")
    s.add_argument("dataset", type=_path, help="dataset folder written by nnue pack")
    s.add_argument("--fens", type=_non_negative, default=0, metavar="N",
                   help="print the first N positions as FEN (default 0)")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of text (default: text)")
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("convert", help="write a dataset back out as a dump for other trainers",
                       description="Write every position of a dataset in another trainer's format.")
    s.add_argument("dataset", type=_path, help="dataset folder written by nnue pack")
    s.add_argument("--to", required=True, choices=["plain", "bullet-text", "bulletformat", "marlinformat"],
                   help="output format (required): plain (Stockfish .plain), bullet-text (FEN | score | "
                        "result), bulletformat or marlinformat (32-byte records)")
    s.add_argument("-o", "--output", required=True, type=_path, help="output file (written atomically)")
    s.add_argument("--json", action="store_true", help="print one JSON object (default: one line of text)")
    s.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr (default: a bar when stderr is a terminal)")
    s.set_defaults(func=cmd_convert)

    s = sub.add_parser("annotate", help="add base_eval / teacher_eval columns (material, Stockfish static evals)",
                       description="Add int16 columns (centipawns, side-to-move POV) to every part of a "
                       "dataset, atomically: base_eval (--base) and teacher_eval (--teacher). Positions in "
                       "check get a null from Stockfish. A rerun skips the parts already done.")
    s.add_argument("dataset")
    s.add_argument("--base", choices=["material", "stockfish-classical"],
                   help="material: P N B R Q = 100 300 300 500 900; stockfish-classical: Stockfish 15.1's classical eval")
    s.add_argument("--teacher", metavar="TEACHER",
                   help="stockfish-nnue (Stockfish's NNUE static eval over UCI), or the path of a net (NETDIR, "
                        "net.safetensors, or a Stockfish 15.1 .nnue: evaluated in batches by our integer inference, "
                        "no engine needed) as teacher_eval")
    s.add_argument("--engine", metavar="PATH", help="Stockfish 15.1 binary (default: stockfish on PATH, "
                   "else /usr/games/stockfish)")
    s.add_argument("--jobs", type=int, default=1, metavar="N", help="engine processes in parallel")
    s.add_argument("--batch", type=int, default=4096, metavar="N", help="positions per engine batch")
    s.add_argument("--json", action="store_true")
    s.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    s.set_defaults(func=cmd_annotate)

    s = sub.add_parser("analyze", help="PNG histograms of what a net does on a dataset",
                       description="Write eval histograms per output bucket, eval vs score, L0 block "
                       "sparsity and dead neurons (PNGs + analysis.json) for an integer net on a dataset's "
                       "quiet positions.")
    s.add_argument("net", help="net.safetensors")
    s.add_argument("--dataset", required=True, metavar="DIR", help="a packed dataset (nnue pack)")
    s.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for the PNGs and analysis.json")
    s.add_argument("--limit", type=_non_negative, default=100_000, metavar="N", help="positions read (default 100,000)")
    s.add_argument("--engine", metavar="PATH", default=None,
                   help="residual nets on a Stockfish base: the Stockfish 15.1 binary that computes it when the "
                        "dataset's base_eval column does not hold it (default: stockfish on PATH, else "
                        "/usr/games/stockfish); positions without a base (in check) are left out")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_analyze)

    sub.add_parser("pack-shards", help="pack N shards of the inputs as the N jobs of a Hydra launcher (SLURM: a "
                   "job array), then merge them (conf/pack_shards.yaml overrides)", add_help=False)
    sub.add_parser("retrain", help="one gated retrain cycle over a registry (conf/retrain.yaml overrides)",
                   add_help=False)
    from nnue.trainer.registry import add_parser as add_registry_parser
    add_registry_parser(sub)
    sub.add_parser("train", help="train a net (Hydra overrides; 'nnue train --help' for Hydra's help)",
                   add_help=False)
    sub.add_parser("bench", help="run a benchmark that prints JSON ('nnue bench --help' lists them)",
                   add_help=False)

    s = sub.add_parser("export", help="quantise a checkpoint into an integer net",
                       description="Write NETDIR/net.safetensors, NETDIR/net.bin and NETDIR/export.json.")
    s.add_argument("checkpoint", type=_path, help="OUT/checkpoints/last.ckpt or a weights-*.safetensors file")
    s.add_argument("-o", "--output", required=True, metavar="NETDIR", type=_path,
                   help="output folder (created; its files are written atomically)")
    s.add_argument("--clip", action="store_true",
                   help="clip values that would overflow, and report them (default: refuse such a net)")
    s.add_argument("--data", default=None, type=_path, help="dataset for the float-vs-int cross-check "
                   "(default: the checkpoint's training data)")
    s.add_argument("--positions", type=_non_negative, default=20000, metavar="N",
                   help="validation positions read: half calibrate the L1 bias correction, half "
                        "cross-check (default 20000; 0: neither)")
    s.add_argument("--no-bias-correction", action="store_true",
                   help="round L1's bias as is, without folding in the mean rounding error of L1's "
                        "weights (default: corrected)")
    s.add_argument("--alpha", type=float, default=None, help="residual nets: α of eval = base + α·net, "
                   "a multiple of 1/256 (default: the run's model.alpha, 0.5)")
    s.add_argument("--base", choices=["material", "stockfish-classical"], default=None,
                   help="residual nets: the base (default: the training data's base_eval annotation)")
    s.add_argument("--max-bytes", type=_non_negative, default=None, metavar="N",
                   help="refuse a net.safetensors over N bytes (default: the run's model.max_bytes; none)")
    s.add_argument("--json", action="store_true", help="print one JSON object (default: text)")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("export-net", help="write an exported integer net in another program's layout",
                       description="Write NETDIR's integer net as FILE in the layout of --to: bullet "
                       "(its quantised.bin of a simple perspective net) or stockfish-15.1 (the .nnue of an "
                       "sfnnv5 net with L1 1024). A net the layout cannot hold is refused in one line naming "
                       "the field or dimension; nothing is written then.")
    s.add_argument("net", type=_path, metavar="NETDIR", help="the NETDIR nnue export or import-net wrote, its "
                   "net.safetensors, or a .nnue")
    s.add_argument("--to", required=True, choices=list(_export_targets()), help="target layout")
    s.add_argument("-o", "--output", required=True, metavar="FILE", type=_path,
                   help="file to write (atomically: written under a temporary name, then renamed)")
    s.add_argument("--json", action="store_true", help="print one JSON object: size, layout, engine constants, notes (default: text lines)")
    s.set_defaults(func=cmd_export_net)

    s = sub.add_parser("report", help="a training run's metrics, and an exported net's quality on held-out games",
                       description="Final metrics of a run (OUT/metrics.json); with --net, the integer net's "
                       "Spearman with the dataset's scores on held-out games beside a material count.")
    s.add_argument("run", metavar="RUN", help="training output folder (paths.output_dir)")
    s.add_argument("--net", default=None, help="export folder (holds net.safetensors, export.json)")
    s.add_argument("--data", default=None, help="dataset to report on (default: the training data)")
    s.add_argument("--force", action="store_true", help="report a net exported from another run's checkpoint")
    s.add_argument("--engine", metavar="PATH", default=None,
                   help="residual nets on a Stockfish base: the Stockfish 15.1 binary that computes it when the "
                        "dataset's base_eval column does not hold it (default: stockfish on PATH, else "
                        "/usr/games/stockfish); positions without a base (in check) are left out")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=lambda a: __import__("nnue.trainer.report", fromlist=["cmd_report"]).cmd_report(a))

    s = sub.add_parser("eval", help="evaluate positions with an integer net",
                       description="Print one integer per position: the eval in centipawns, side-to-move POV. "
                       "Positions are checked as nnue pack checks them; a bad one stops with FILE:LINE.")
    s.add_argument("net", type=_path, help="net.safetensors, the NETDIR nnue export wrote it into, or a "
                   "Stockfish 15.1 .nnue (evals in UCI centipawns, as the engine's NNUE evaluation)")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--fens", metavar="FILE", type=_path,
                   help="one position a line ('-' = stdin): a FEN, an EPD line (opcodes after the four "
                        "FEN fields) or 'FEN | score | result' (the FEN part)")
    g.add_argument("--fen", help="a single FEN")
    g.add_argument("--dataset", metavar="DIR", type=_path,
                   help="a packed dataset (nnue pack): every row, in file order")
    s.add_argument("--limit", type=_non_negative, metavar="N",
                   help="with --dataset: the first N rows only (default: all)")
    s.add_argument("--trace", action="store_true",
                   help="sfnnv5 nets (Stockfish 15.1): print the engine's NNUE eval trace of each position, "
                        "character for character (piece values, the bucket table, 'NNUE evaluation'); default off")
    s.add_argument("--summary", action="store_true",
                   help="with --dataset: one JSON line (positions, evals/s, mean, Spearman with the score) "
                        "instead of the evals (default off)")
    s.add_argument("--engine", metavar="PATH", default=None,
                   help="residual nets on a Stockfish base: the Stockfish 15.1 binary that computes it "
                        "(default: stockfish on PATH, else /usr/games/stockfish; with --dataset, the "
                        "dataset's base_eval column when it holds that base). Positions without a base "
                        "(in check) print 'none'")
    s.set_defaults(func=cmd_eval)

    from nnue.cmd_engine import add_parsers as add_engine_parsers  # import-net, export-net
    add_engine_parsers(sub)
    from nnue.selfplay.cli import add_parsers as add_selfplay_parsers  # sprt, selfplay, match, datagen
    add_selfplay_parsers(sub)
    s = sub.add_parser("sweep", help="sweep tools: 'nnue sweep report SWEEP_DIR'")  # nnue/trainer/sweep_report.py
    r = s.add_subparsers(dest="sweep_cmd", required=True, metavar="SUBCOMMAND", parser_class=_OneLineParser)
    r = r.add_parser("report", help="one row per job, best first: overrides, val metrics, export audit, evals/s",
                     description="Write SWEEP_DIR's job table, best job first and marked, as Markdown, CSV, JSON "
                                 "and PNG (sweep_report.*); for an Optuna sweep also the best trial's folder and "
                                 "Optuna's own plots (sweep_optuna_*.png).")
    r.add_argument("sweep_dir", help="a sweep folder (hydra.sweep.dir): one sub-folder per job")
    r.add_argument("-o", "--output", metavar="DIR", help="where to write sweep_report.{md,csv,json,png} (default: SWEEP_DIR)")
    r.add_argument("--json", action="store_true", help="print the report (metric, best job, rows) as JSON instead of the table")
    r.add_argument("--metric", help="rank on this metrics.json key (default: the sweep's optimized_metric, else val_loss)")
    r.add_argument("--direction", choices=["minimize", "maximize"],
                   help="default: the Optuna sweeper's direction, else maximize for a Spearman and minimize otherwise")
    r.set_defaults(func=lambda a: __import__("nnue.trainer.sweep_report", fromlist=["main"]).main(a))
    return p


def bench_names() -> list[str]:
    import pkgutil

    import nnue.bench

    return sorted(m.name.removeprefix("bench_") for m in pkgutil.iter_modules(nnue.bench.__path__)
                  if m.name.startswith("bench_"))


def run_bench(argv: list[str]) -> int:
    """``nnue bench NAME [ARGS]``: run ``nnue.bench.bench_NAME.main(ARGS)`` (prints JSON)."""
    import importlib

    names = bench_names()
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: nnue bench NAME [ARGS...]   (NAME --help for a benchmark's own options)\n\n"
              "Run a benchmark; it prints one JSON object. Benchmarks: " + ", ".join(names))
        return 0
    if argv[0] not in names:
        print(f"nnue bench: error: unknown benchmark {argv[0]!r}; known: {', '.join(names)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    rc = importlib.import_module(f"nnue.bench.bench_{argv[0]}").main(argv[1:])
    # some benchmarks' main() returns its report (a dict) for the tests: that is success
    return rc if isinstance(rc, int) else 0


def main(argv: list[str] | None = None) -> int:
    """Run ``nnue ARGS``; returns the exit status. Bad input: one line, status 2; a bug: one
    line, status 1 (``NNUE_DEBUG=1``: the traceback instead); Ctrl-C: one line, status 130."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv[0] if argv and not argv[0].startswith("-") else "nnue"
    # SQLAlchemy is pinned below 2 for optuna 2.10's storage (pyproject.toml): its one-time
    # "not compatible with SQLAlchemy 2.0" notice says nothing a user can act on
    os.environ.setdefault("SQLALCHEMY_SILENCE_UBER_WARNING", "1")
    debug = os.environ.get("NNUE_DEBUG", "") not in ("", "0")
    try:
        return _main(argv)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print(f"nnue {cmd}: interrupted (finished files are complete; an unfinished one was "
              f"never renamed into place)", file=sys.stderr)
        return 130
    except SystemExit:
        raise
    except _known_errors() as e:
        if debug:
            raise
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"nnue {cmd}: error: {_one_line(msg)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:  # a path that cannot be read or written: name it, no traceback
        if debug:
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"nnue {cmd}: error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # a bug: still one line for the user
        if debug:
            raise
        print(f"nnue {cmd}: internal error: {type(e).__name__}: {_one_line(str(e))} (a bug; run with "
              f"NNUE_DEBUG=1 for the traceback and report it)", file=sys.stderr)
        return 1


def _one_line(msg: str) -> str:
    return " ".join(str(msg).split())


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "bench":
        return run_bench(argv[1:])
    if argv and argv[0] == "retrain":
        from nnue.trainer.retrain import main as retrain_main
        return retrain_main(argv[1:])
    if argv and argv[0] == "pack-shards":
        from nnue.cmd_pack_shards import main as pack_shards_main
        return pack_shards_main(argv[1:])
    if argv and argv[0] == "train":
        from nnue.trainer.checks import check_train_args

        err = check_train_args(argv[1:])
        if err:
            print(f"nnue train: error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        import importlib.util

        import __main__
        import nnue.ddp_child
        from nnue.trainer.train import main as train_main

        # what Lightning's DDP launcher re-runs for ranks 1..N-1 on one machine: "python -m
        # <__main__'s module>" or "python <argv[0]>" with argv[1:] (issue 20 item 10: it started
        # "python <cwd>/nnue train", or "python -m nnue.cli OVERRIDES" without "train"): both name
        # nnue.ddp_child, which runs this same Hydra entry point
        sys.argv = [nnue.ddp_child.__file__, *argv[1:]]
        __main__.__spec__ = importlib.util.find_spec("nnue.ddp_child")
        train_main()
        return 0
    args = _parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
