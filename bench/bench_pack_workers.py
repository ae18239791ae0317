"""Benchmark: ``nnue pack --workers N`` on one large file, split into byte ranges (issue 14).

``nnue bench pack_workers [--runs N] [--workers 1,2] [--copies C] [--out FILE]`` prints one JSON
object. Inputs, built in a temporary folder: ``small.binpack`` (``../shared/data/public``) copied C
times into one file (its blocks are the range boundaries), the largest ``.plain`` of
``../shared/data/selfplay`` copied ``--plain-copies`` times, and its largest ``.pgn`` copied
``--pgn-copies`` times. Each is packed with every worker count side by side in one run
(alternating, so that load changes hit both alike), ``--runs`` times, into a fresh dataset each
time; the report gives the medians (wall seconds), positions per second and the speedup of each
worker count over one worker, and checks that every worker count wrote the same files byte for
byte. The split is the same for every worker count (``--range-mb``, default: the file's size over
8, so that two workers have ranges to share).

The load average of the machine (``os.getloadavg``) before and after is recorded: on a machine
that other jobs share, the speedup is a lower bound (target, issue 14: ≥ 1.6× for 2 workers on 2
idle cores). The CPU seconds of each run (this process and its workers, ``getrusage``) are
recorded too: equal CPU for N workers and one says the split adds no work, and ``cores_used``
(CPU over wall seconds) says how much of the machine the run got. ``plan_s`` is the serial
boundary search of the parent (``ranges.plan``: for PGN the walk over the whole file), timed
alone once with a warm numba cache."""
from __future__ import annotations

import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from nnue.bench import emit, parser

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


def _files(ds: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(ds.iterdir()) if p.name.startswith(("part-", "rejects-"))}


def _bench_one(path: Path, fmt: str, workers: list[int], runs: int, range_mb: float, tmp: Path) -> dict:
    from nnue.pipeline import manifest as mf
    from nnue.pipeline.pack import pack
    from nnue.pipeline.ranges import plan, range_bytes

    import resource

    def cpu() -> float:
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    times: dict[int, list[float]] = {w: [] for w in workers}
    cpus: dict[int, list[float]] = {w: [] for w in workers}
    outputs: dict[int, dict] = {}
    read = 0
    for r in range(runs):
        for w in workers:
            ds = tmp / f"ds-{w}-{r}"
            c0, t0 = cpu(), time.perf_counter()
            s = pack([path], ds, fmt=fmt, progress=False, workers=w, range_mb=range_mb)
            times[w].append(time.perf_counter() - t0)
            cpus[w].append(cpu() - c0)  # this process and its (joined) workers
            read = s["read"]
            if r == 0:
                outputs[w] = _files(ds)
                manifest = mf.load(ds)["files"]
            shutil.rmtree(ds)
    med = {w: statistics.median(t) for w, t in times.items()}
    t0 = time.perf_counter()
    n_ranges = len(plan(path, fmt, range_bytes(range_mb)))
    plan_s = time.perf_counter() - t0
    return {
        "input": path.name, "format": fmt, "bytes": path.stat().st_size, "positions": read,
        "range_mb": round(range_mb, 3), "ranges": n_ranges, "plan_s": round(plan_s, 3),
        "parts": sum(len(mf.entry_parts(e)) for e in manifest.values()),
        "runs": runs,
        "median_s": {str(w): round(m, 3) for w, m in med.items()},
        "all_s": {str(w): [round(x, 3) for x in t] for w, t in times.items()},
        "pos_per_s": {str(w): round(read / m) for w, m in med.items()},
        "speedup_vs_1": {str(w): round(med[workers[0]] / m, 3) for w, m in med.items()},
        "efficiency": {str(w): round(med[workers[0]] / m / (w / workers[0]), 3) for w, m in med.items()},
        # CPU seconds of the parent and its workers: the work itself, whatever the load; equal
        # CPU with N workers means no work is added by the split (the wall-clock speedup is then
        # what the free cores allow)
        "median_cpu_s": {str(w): round(statistics.median(c), 3) for w, c in cpus.items()},
        "cpu_vs_1": {str(w): round(statistics.median(c) / statistics.median(cpus[workers[0]]), 3)
                     for w, c in cpus.items()},
        # the speedup N free cores would give if the ranges kept every worker busy to the end
        # (N over the CPU ratio): an upper bound, not a measurement
        "speedup_bound_idle": {str(w): round(w / workers[0] / (statistics.median(c) / statistics.median(cpus[workers[0]])), 3)
                               for w, c in cpus.items()},
        # cores this run got: CPU seconds over wall seconds
        "cores_used": {str(w): round(statistics.median(c) / med[w], 2) for w, c in cpus.items()},
        "identical_output": all(outputs[w] == outputs[workers[0]] for w in workers),
    }


def main(argv: list[str] | None = None) -> int:
    p = parser("nnue bench pack_workers", __doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="timed runs per worker count (median)")
    p.add_argument("--workers", default="1,2", help="worker counts, comma-separated, the first is the baseline")
    p.add_argument("--copies", type=int, default=8, help="copies of small.binpack in the binpack input")
    p.add_argument("--plain-copies", type=int, default=8,
                   help="copies of the largest self-play .plain in the plain input (a second of work per copy)")
    p.add_argument("--pgn-copies", type=int, default=8, help="copies of the largest self-play .pgn in the pgn input")
    p.add_argument("--inputs", default="binpack,plain,pgn", help="which inputs: binpack, plain, pgn (comma-separated)")
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    args = p.parse_args(argv)
    workers = [int(x) for x in args.workers.split(",")]
    load_before = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_pack_workers.") as d:
        tmp = Path(d)
        kinds = args.inputs.split(",")
        # (input kind, source file, copies): the copies one after another are still a valid file
        # of the format (binpack blocks, .plain records, PGN games)
        sources = [("binpack", SHARED / "public" / "small.binpack", args.copies),
                   ("plain", max((SHARED / "selfplay").glob("*.plain"), key=lambda q: q.stat().st_size),
                    args.plain_copies),
                   ("pgn", max((SHARED / "selfplay").glob("*.pgn"), key=lambda q: q.stat().st_size), args.pgn_copies)]
        for fmt, src, copies in sources:
            if fmt not in kinds:
                continue
            big = tmp / f"{src.stem}-x{copies}{src.suffix}"
            data = src.read_bytes()
            with open(big, "wb") as f:
                for _ in range(copies):
                    f.write(data)
            results.append(_bench_one(big, fmt, workers, args.runs, big.stat().st_size / 8 / (1 << 20), tmp))
    report = {
        "benchmark": "pack_workers", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)),
                    "python": platform.python_version(), "platform": platform.platform()},
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "target": "--workers 2 >= 1.6x one worker on one large file, 2 idle cores (issue 14)",
        "note": "wall-clock medians measured side by side in one run; a machine whose load average is "
                "above its core count shares the cores with other jobs, so the speedup is a lower bound",
        "results": results,
    }
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
