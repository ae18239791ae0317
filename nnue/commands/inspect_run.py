"""``nnue inspect``, the work: a dataset's counts and distributions in one streaming pass, and its first
positions back out as FEN. The parser is :mod:`nnue.commands.inspect`."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from nnue.pipeline import manifest as mf
from nnue.pipeline.board import unpack_fen
from nnue.pipeline.parts import LAYOUT_NAMES, layout, open_part, read_group
from nnue.pipeline.schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE


def _hist_stats(counts, offset: int) -> dict:
    """min, percentiles (nearest rank, 'inverted CDF') and mean of the values whose histogram is
    ``counts`` (value = index + offset). Exact, whatever the number of rows."""
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


def run(args) -> int:
    """Dataset statistics in one streaming pass (memory bounded by one row group: histograms of
    the int16/uint16 columns give exact percentiles)."""
    ds = Path(args.dataset)
    m = mf.load(ds)
    cols = ["score", "result", "ply", "piece_count", "in_check", "best_move_is_capture", "game_id", "flags"]
    parts = [ds / name for f in sorted(m["files"].values(), key=mf.entry_key) if f["packed"]
             for name in mf.entry_parts(f)]
    score_h = np.zeros(65536, np.int64)
    ply_h = np.zeros(65536, np.int64)
    pc_h = np.zeros(256, np.int64)  # uint8: a flat part holds what it was written with
    res_h = np.zeros(3, np.int64)
    n = games = none = mate = ply_unknown = in_check = capture = 0
    ids = []  # each row group's distinct game ids: a game packed from several inputs has one id
    fens = []
    layouts: dict[str, int] = {}
    part_bytes = 0
    for p in parts:
        pf = open_part(p)
        name = LAYOUT_NAMES[layout(pf)]
        layouts[name] = layouts.get(name, 0) + 1
        part_bytes += p.stat().st_size
        last_game = None  # games are contiguous runs of one game id within a part file
        for rg in range(pf.metadata.num_row_groups):
            # a chained part's boards are decoded whole: inspect checks every chain (parts.ChainError)
            t = read_group(pf, rg, cols + (["board", "best_move"] if len(fens) < args.fens or name == "chained" else []))
            a = {c: t.column(c).to_numpy(zero_copy_only=False) for c in cols}
            flags = a["flags"].astype(np.int64)
            scored = (flags & (FLAG_SCORE_NONE | FLAG_SCORE_MATE)) == 0
            score_h += np.bincount(a["score"][scored].astype(np.int64) + 32768, minlength=65536)
            known = (flags & FLAG_PLY_UNKNOWN) == 0
            ply_h += np.bincount(a["ply"][known].astype(np.int64), minlength=65536)
            pc_h += np.bincount(a["piece_count"].astype(np.int64), minlength=256)
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
        # part layouts ({"chained": parts, "flat": parts}) and the parts' bytes per position
        "layouts": layouts, "bytes_per_position": round(part_bytes / n, 3) if n else None,
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
    if n:
        print(f"  parts: " + ", ".join(f"{v} {k}" for k, v in sorted(layouts.items()))
              + f"; {report['bytes_per_position']} bytes a position")
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
