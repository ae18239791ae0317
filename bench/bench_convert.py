"""Benchmark: ``nnue convert`` throughput per target, compiled writers against python-chess writers.

``nnue bench convert [--runs N] [--reference-rows N] [--out FILE]`` packs the public
``small.binpack`` (434,921 positions; ``../shared/data/public``) into a temporary dataset and
times, for every target (plain, bullet-text, bulletformat, marlinformat), the compiled writers
(:mod:`nnue.pipeline.compiled.dump`, median of N runs over the whole dataset) and, in the same run,
the python-chess writers (``fast=False``) over a dataset of the first ``--reference-rows`` rows.
Rates are positions per wall second and per CPU second of this process (what one core does,
whatever else shares the machine). The first call's numba load time (cache filled) is reported per target, and the compile of
all kernels with an empty numba cache, in a fresh process.
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from nnue.bench import emit, parser

REPO = Path(__file__).resolve().parents[1]
SMALL = REPO.parent / "shared" / "data" / "public" / "small.binpack"


def _time(ds: Path, to: str, out: Path, fast: bool) -> tuple[int, float, float]:
    from nnue.pipeline.convert import convert

    w, c = time.perf_counter(), time.process_time()
    r = convert(ds, to, out, fast=fast)
    return r["rows"], time.perf_counter() - w, time.process_time() - c


def main(argv: list[str] | None = None) -> int:
    p = parser("nnue bench convert", __doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="timed runs of the compiled writers per target")
    p.add_argument("--reference-rows", type=int, default=20_000,
                   help="rows converted by the python-chess writers for the same-run ratio")
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    if not SMALL.exists():
        print(f"nnue bench convert: {SMALL} not found (the shared sample data)", file=sys.stderr)
        return 2
    import pyarrow.parquet as pq

    from nnue.pipeline.convert import TARGETS
    from nnue.pipeline.pack import pack

    report = {"benchmark": "convert", "unit": "positions per second", "machine": platform.machine(),
              "python": platform.python_version(), "load_avg": [round(x, 2) for x in os.getloadavg()],
              "input": SMALL.name, "targets": {}}
    with tempfile.TemporaryDirectory(prefix="nnue-convert-") as tmp:
        tmp = Path(tmp)
        pack([SMALL], tmp / "ds", progress=False)
        # the reference dataset: the first rows, re-packed from a marlinformat cut of the dataset
        from nnue.pipeline.convert import convert

        convert(tmp / "ds", "marlinformat", tmp / "all.marlin")
        (tmp / "cut.marlin").write_bytes((tmp / "all.marlin").read_bytes()[:32 * args.reference_rows])
        pack([tmp / "cut.marlin"], tmp / "ref", progress=False)
        for to in TARGETS:
            t0 = time.perf_counter()
            _time(tmp / "ref", to, tmp / "first", True)  # numba cache load (or compile)
            first = time.perf_counter() - t0
            runs = [_time(tmp / "ds", to, tmp / "out", True) for _ in range(args.runs)]
            n = runs[0][0]
            wall = statistics.median(r[1] for r in runs)
            cpu = statistics.median(r[2] for r in runs)
            rn, rw, rc = _time(tmp / "ref", to, tmp / "ref.out", False)
            report["targets"][to] = {
                "rows": n, "first_call_s": round(first, 2),
                "pos_per_s": round(n / wall), "cpu_pos_per_s": round(n / cpu),
                "python_chess": {"rows": rn, "pos_per_s": round(rn / rw), "cpu_pos_per_s": round(rn / rc)},
                "ratio_cpu": round((n / cpu) / (rn / rc), 1),
                "output_bytes": (tmp / "out").stat().st_size,
            }
        # the compile with numba's cache empty, in a fresh process (what a first run on a new machine pays)
        import subprocess

        code = ("import sys, time; from nnue.pipeline.convert import convert; t = time.perf_counter(); "
                "[convert(sys.argv[1], to, sys.argv[2] + to, fast=True) for to in sys.argv[3:]]; "
                "print(time.perf_counter() - t)")
        env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp / "numba-cache"))
        cold = subprocess.run([sys.executable, "-c", code, str(tmp / "ref"), str(tmp / "cold."), *TARGETS],
                              env=env, capture_output=True, text=True, check=True)
        report["compile_s_empty_cache_all_targets"] = round(float(cold.stdout.split()[-1]), 2)
        report["rows_in_dataset"] = pq.ParquetFile(next((tmp / "ds").glob("part-*.parquet"))).metadata.num_rows
    return emit(report, args.out)


if __name__ == "__main__":
    sys.exit(main())
