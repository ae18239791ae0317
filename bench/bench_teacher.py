"""Benchmark: teacher labels from Stockfish 15.1's net, our batched integer inference against the
engine over UCI, on the same positions, in one run.

``nnue bench teacher [--positions N] [--net FILE.nnue] [--runs R] [--out FILE]``: the engine's
built-in net (``export_net``, or ``--net``) is read with :func:`nnue.inference.kinds.sfnnv5.read_nnue`;
N positions of the bundled sample (cycled) are evaluated by :func:`nnue.inference.evaluate`
(median of R runs, after one warm-up call) and by the engine's ``eval`` command over UCI (the
path of ``nnue annotate --teacher stockfish-nnue``: :class:`nnue.pipeline.annotate.EnginePool`,
one process). Reports positions per wall second and per CPU second of this process, the ratio,
the load average, and how the two agree (max |Δ| cp on positions not in check: the UCI path
rounds the printed pawns, ours truncates as ``UCI::value`` does, so at most 1).
"""
from __future__ import annotations

import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from nnue.bench import emit, parser

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample" / "sf15-n5000-s1-sample.plain"


def main(argv: list[str] | None = None) -> int:
    p = parser("nnue bench teacher", __doc__.splitlines()[0])
    p.add_argument("--positions", type=int, default=20_000, help="positions evaluated by each path")
    p.add_argument("--net", default=None, help="a Stockfish 15.1 .nnue (default: the engine's built-in net)")
    p.add_argument("--engine", default=None, help="Stockfish 15.1 binary (default: stockfish on PATH, else "
                   "/usr/games/stockfish)")
    p.add_argument("--runs", type=int, default=3, help="timed runs of our path")
    p.add_argument("--out", default=None, help="also write the JSON report here")
    args = p.parse_args(argv)

    import numpy as np
    import torch

    from nnue.inference import evaluate
    from nnue.inference.api import boards_from_fens
    from nnue.inference.kinds.sfnnv5 import read_nnue
    from nnue.pipeline.annotate import EnginePool, find_engine, stm_cp

    engine = find_engine(args.engine)
    with tempfile.TemporaryDirectory() as tmp:
        net_path = Path(args.net) if args.net else Path(tmp) / "builtin.nnue"
        if not args.net:
            import subprocess
            subprocess.run([engine], input=f"export_net {net_path}\nquit\n", capture_output=True, text=True,
                           timeout=120, check=True)
        net = read_nnue(net_path)
    fens = [line[4:].strip() for line in SAMPLE.read_text().splitlines() if line.startswith("fen ")]
    fens = (fens * (args.positions // len(fens) + 1))[:args.positions]
    boards = boards_from_fens(fens)
    evaluate(net, boards[:256])  # warm-up: the float copies of the weights are made once per net
    walls, cpus = [], []
    for _ in range(args.runs):
        w, c = time.perf_counter(), time.process_time()
        ours = evaluate(net, boards)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    pool = EnginePool(engine, 1, ("nnue",))
    try:
        w = time.perf_counter()
        raw = pool.evaluate(boards.numpy())
        uci_wall = time.perf_counter() - w
    finally:
        pool.close()
    black = (boards.numpy()[:, 24] >> 7).astype(bool)
    theirs, null = stm_cp(raw["nnue"], black)
    ok = ~null
    diff = np.abs(ours.numpy()[ok].astype(np.int64) - theirs[ok].astype(np.int64))
    n = len(fens)
    ours_rate = n / statistics.median(walls)
    report = {
        "benchmark": "teacher", "positions": n, "net": net.arch["description"],
        "ours": {"positions_per_s": round(ours_rate), "positions_per_cpu_s": round(n / statistics.median(cpus)),
                 "runs": args.runs, "threads": torch.get_num_threads()},
        "uci": {"positions_per_s": round(n / uci_wall), "engine": pool.version, "processes": 1},
        "ratio_ours_over_uci": round(ours_rate / (n / uci_wall), 2),
        "agreement": {"positions_compared": int(ok.sum()), "max_abs_diff_cp": int(diff.max()) if len(diff) else None,
                      "mean_abs_diff_cp": float(diff.mean()) if len(diff) else None},
        "load_average": os.getloadavg(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
