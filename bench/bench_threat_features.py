"""Encoding throughput of Stockfish 19's threat inputs (full_threats, pp_3wide, sfnnv16), torch against numba, on one core.

Per feature set, in positions per second, the median of ``--repeats`` passes over the positions
in batches of ``--batch-size`` with ``torch.set_num_threads(1)`` (numba's encoder is
single-threaded): ``torch_cpu`` (``FeatureSet.encode``, the path that also runs on CUDA),
``numba_cpu`` (``FeatureSet.encode_numba``, what a CPU training batch uses), ``torch_cuda`` where
a GPU is present. Each rate is given per second of wall time (``pos_per_s``) and per second of this
process's CPU time (``pos_per_cpu_s``, the figure other load on a shared machine disturbs least);
``numba_over_torch`` is the ratio of the two CPU-time rates, measured in the same process.
``halfkav2_hm`` (a table lookup, 32 features) is timed alongside for scale.

Data: the "fen" lines of ``../shared/data/selfplay/sf15-n2000-s11.plain`` (real self-play), the
first ``--positions`` of them, or ``--plain FILE``; the repository's cut of it when that is absent.
Prints one JSON object (``--out FILE`` also writes it).
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PLAIN = ROOT.parent / "shared" / "data" / "selfplay" / "sf15-n2000-s11.plain"


def _parser():
    from nnue.bench import parser

    p = parser("nnue bench threat_features", __doc__.split("\n\n")[0])
    p.add_argument("--plain", default=str(DEFAULT_PLAIN), help="a .plain dump whose 'fen' lines are encoded")
    p.add_argument("--positions", type=int, default=100_000, help="positions read from it (first ones)")
    p.add_argument("--feature-sets", default="full_threats,pp_3wide,sfnnv16,halfkav2_hm", help="comma-separated")
    p.add_argument("--batch-size", type=int, default=16384, help="positions per encode call")
    p.add_argument("--repeats", type=int, default=5, help="timed passes (median reported)")
    p.add_argument("--out", help="also write the JSON to this file")
    return p


def _timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def _rates(n: int, runs) -> dict:
    wall = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    return {"pos_per_s": round(n / wall), "pos_per_cpu_s": round(n / cpu) if cpu > 0 else None,
            "runs_wall_s": [round(r[0], 4) for r in runs]}


def _fens(path: Path, n: int) -> list[str]:
    out = []
    with path.open() as fh:
        for line in fh:
            if line.startswith("fen "):
                out.append(line[4:].strip())
                if len(out) >= n:
                    break
    return out


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import numpy as np
    import torch

    from nnue.bench import emit
    from nnue.pipeline.board import pack_fen
    from nnue.pipeline.features import get_feature_set

    torch.set_num_threads(1)
    plain = Path(args.plain)
    if not plain.exists():
        from nnue.bench import CUT, shipped_selfplay  # the shipped cut of the same self-play

        plain = shipped_selfplay(f"{CUT}.plain")
    fens = _fens(plain, args.positions)
    boards = torch.from_numpy(np.frombuffer(b"".join(pack_fen(f) for f in fens), dtype=np.uint8)
                              .reshape(-1, 32).copy())
    batches = list(boards.split(args.batch_size))
    n = boards.shape[0]
    report = {"bench": "threat_features", "torch": torch.__version__, "python": platform.python_version(),
              "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                          "load_avg_1m_at_start": round(os.getloadavg()[0], 2)},
              "threads": {"torch": torch.get_num_threads(), "numba": 1},
              "data": {"path": str(args.plain if Path(args.plain).exists() else plain), "positions": n},
              "batch_size": args.batch_size, "repeats": args.repeats, "feature_sets": {}}
    for name in args.feature_sets.split(","):
        fs = get_feature_set(name)
        entry = {"num_inputs": fs.num_inputs, "max_active": fs.max_active}
        paths = {"torch_cpu": fs.encode}
        if fs.encode_numba is not None:
            paths["numba_cpu"] = fs.encode_numba
        for label, enc in paths.items():
            enc(batches[0][:64])  # tables built, numba compiled

            def run(enc=enc):
                for b in batches:
                    enc(b)

            entry[label] = _rates(n, [_timed(run) for _ in range(args.repeats)])
        if "numba_cpu" in entry:
            entry["numba_over_torch"] = round(entry["numba_cpu"]["pos_per_cpu_s"] / entry["torch_cpu"]["pos_per_cpu_s"], 1)
        if torch.cuda.is_available():
            gpu = [b.cuda() for b in batches]

            def run_gpu():
                for b in gpu:
                    fs.encode(b)
                torch.cuda.synchronize()

            run_gpu()
            entry["torch_cuda"] = _rates(n, [_timed(run_gpu) for _ in range(args.repeats)])
        report["feature_sets"][name] = entry
        print(f"{name}: " + ", ".join(f"{k} {v['pos_per_cpu_s']:,}/cpu-s" for k, v in entry.items()
                                      if isinstance(v, dict)), file=sys.stderr)
    report["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    report["notes"] = NOTES
    return emit(report, args.out)


NOTES = [
    "One core: torch.set_num_threads(1); the numba encoder is serial. The development machine is a "
    "shared 2-core VM under load from other jobs (load average in the JSON): compare the rates of one "
    "run with each other (numba_over_torch), not across runs.",
    "numba: one pass per board, attacks from bitboards (chesscore's slider tables), indices from the "
    "formula's decomposed tables (part[a][from][to] + slot[a][target]), both perspectives.",
    "torch: every (from, to) pair a queen or knight reaches on an empty board (1,792) is a candidate: "
    "two gathers of the piece ids, a table of which (attacker, target) pairs count on that line, the "
    "slider's path against the occupancy, nonzero, then one index lookup per perspective on the ~30-60 "
    "survivors. Its cost is the (B, 1,792) passes; on a GPU they are cheap.",
]

if __name__ == "__main__":
    sys.exit(main())
