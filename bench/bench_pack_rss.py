"""Benchmark: peak memory of ``nnue pack`` on a large binpack, against the same pack of a smaller one.

``nnue bench pack_rss [--positions N] [--small-copies K] [--out FILE]`` builds a binpack of about
N positions by concatenating copies of ``../shared/data/public/small.binpack`` (434,921 positions
in 1 MiB: a binpack is a sequence of independent ``BINP`` blocks, so concatenated copies are a
valid binpack; FORMATS.md), packs it with ``nnue pack --workers 1 --json`` in a child process,
and reads the child's peak resident set size (``getrusage(RUSAGE_CHILDREN).ru_maxrss``, KiB on
Linux). The same is done for a file of ``--small-copies`` copies, in the same run, so the JSON
shows whether memory grows with the file: packing is bounded by row groups (``ROW_GROUP`` rows
are buffered before each write) and the reader's block, not by the file size.

Output (one JSON object): for each file, positions read and packed, input bytes, wall seconds,
peak RSS in MiB; and ``rss_ratio_large_over_small``. Source of the positions: the public
``small.binpack`` (Stockfish training data, GPL; read, never copied into the repository).
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nnue.bench import emit, parser

REPO = Path(__file__).resolve().parents[1]
SMALL = REPO.parent / "shared" / "data" / "public" / "small.binpack"
SMALL_POSITIONS = 434_921


def _child_peak_rss(cmd: list[str]) -> tuple[dict, float, float]:
    """Run ``cmd`` in a fresh process (through a tiny Python wrapper, so that getrusage covers
    exactly that child); returns (its JSON stdout, wall seconds, peak RSS in MiB)."""
    wrapper = ("import resource, subprocess, sys, json\n"
               "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "if r.returncode: sys.stderr.write(r.stderr); sys.exit(r.returncode)\n"
               "print(json.dumps({'out': r.stdout, "
               "'maxrss_kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n")
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    got = json.loads(r.stdout)
    return json.loads(got["out"]), wall, got["maxrss_kib"] / 1024


def _pack(copies: int, work: Path) -> dict:
    src = work / f"x{copies}.binpack"
    blob = SMALL.read_bytes()
    with open(src, "wb") as f:
        for _ in range(copies):
            f.write(blob)
    ds = work / f"ds{copies}"
    nnue = Path(sys.executable).with_name("nnue")
    summary, wall, rss = _child_peak_rss([str(nnue), "pack", str(src), "-o", str(ds), "--workers", "1",
                                          "--json", "--no-progress"])
    return {"copies": copies, "input_bytes": src.stat().st_size, "read": summary["read"],
            "packed": summary["packed"], "wall_s": round(wall, 2), "peak_rss_mib": round(rss, 1),
            "parquet_bytes": sum(p.stat().st_size for p in ds.glob("part-*.parquet"))}


def main(argv: list[str] | None = None) -> int:
    p = parser("nnue bench pack_rss", __doc__.splitlines()[0])
    p.add_argument("--positions", type=int, default=10_000_000,
                   help="positions in the large binpack (rounded up to whole copies of small.binpack)")
    p.add_argument("--small-copies", type=int, default=2, help="copies of small.binpack in the small file")
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    if not SMALL.exists():
        print(f"nnue bench pack_rss: {SMALL} not found (the shared sample data)", file=sys.stderr)
        return 2
    large = -(-args.positions // SMALL_POSITIONS)
    with tempfile.TemporaryDirectory(prefix="nnue-rss-") as tmp:
        small_run = _pack(args.small_copies, Path(tmp))
        large_run = _pack(large, Path(tmp))
    report = {"benchmark": "pack_rss", "machine": platform.machine(), "python": platform.python_version(),
              "cpus": len(os.sched_getaffinity(0)), "load_avg": [round(x, 2) for x in os.getloadavg()],
              "small": small_run, "large": large_run,
              "rss_ratio_large_over_small": round(large_run["peak_rss_mib"] / small_run["peak_rss_mib"], 3)}
    return emit(report, args.out)


if __name__ == "__main__":
    sys.exit(main())
