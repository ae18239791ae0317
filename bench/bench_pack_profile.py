"""Benchmark: where one core's time goes when ``nnue pack`` packs a binary format.

``nnue bench pack_profile [--runs N] [--formats A,B] [--out FILE]`` packs, in this process and on
one core, large inputs made from the public ``small.binpack`` (434,921 positions: the binpack
itself, and the dataset written back as bulletformat and marlinformat with ``nnue convert``) and
the public viriformat sample repeated, and splits the CPU time of each pack (median of N runs) into:

* ``reader``: the format's reader alone, iterated over the whole file (decode, validate, the
  NumPy buffers of ``PackedRows``), timed in its own run;
* ``parquet_write``: ``pyarrow.parquet.ParquetWriter.write_table`` (encoding and zstd), timed
  inside the pack by wrapping the method;
* ``game_ids``: :class:`nnue.pipeline.pack.GameIds` (``feed`` and ``lookup``), timed the same way;
* ``rest``: the pack's remaining time (Arrow arrays and tables, row-group assembly, rejects,
  manifest, fsync).

Each part is reported in ns a position, with the positions/s that the total gives; this is the
profile the issue's targets are explained with. No subprocess, so numba's cache is loaded by a
warm-up pack first. Source data: ``../shared/data/public`` (GPL/MIT; read, never copied).
"""
from __future__ import annotations

import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from nnue.bench import emit, parser

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO.parent / "shared" / "data" / "public"


class _Timer:
    """Wrap ``obj.name`` so that the CPU time spent in it accumulates in ``self.t``."""

    def __init__(self, obj, name: str):
        self.obj, self.name, self.orig, self.t = obj, name, getattr(obj, name), 0.0

        def wrapped(*a, **k):
            c = time.process_time()
            try:
                return self.orig(*a, **k)
            finally:
                self.t += time.process_time() - c

        setattr(obj, name, wrapped)

    def restore(self):
        setattr(self.obj, self.name, self.orig)


def _reader_cpu(fmt: str, path: Path) -> float:
    from nnue.pipeline.formats import ReaderOptions, get_format, open_binary

    spec = get_format(fmt)
    c = time.process_time()
    with open_binary(path) as f:
        for _ in spec.read(f, ReaderOptions()):
            pass
    return time.process_time() - c


def _pack_cpu(fmt: str, path: Path, work: Path) -> tuple[int, float, float, float]:
    import pyarrow.parquet as pq

    from nnue.pipeline import pack as packmod

    timers = [_Timer(pq.ParquetWriter, "write_table"), _Timer(packmod.GameIds, "feed"),
              _Timer(packmod.GameIds, "lookup")]
    ds = work / "ds"
    shutil.rmtree(ds, ignore_errors=True)
    try:
        c = time.process_time()
        s = packmod.pack([path], ds, fmt=fmt, progress=False, workers=1)
        total = time.process_time() - c
    finally:
        for t in timers:
            t.restore()
    return s["read"], total, timers[0].t, timers[1].t + timers[2].t


def _inputs(work: Path) -> dict[str, Path]:
    from nnue.pipeline.convert import convert
    from nnue.pipeline.pack import pack

    out = {"binpack": PUBLIC / "small.binpack"}
    pack([out["binpack"]], work / "src", progress=False)
    for fmt, ext in (("bulletformat", "bf"), ("marlinformat", "marlin")):
        convert(work / "src", fmt, work / f"small.{ext}")
        out[fmt] = work / f"small.{ext}"
    vf = work / "test-vf-x200.vf"
    vf.write_bytes((PUBLIC / "test-vf.bin").read_bytes() * 200)
    out["viriformat"] = vf
    return out


def main(argv: list[str] | None = None) -> int:
    p = parser("nnue bench pack_profile", __doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="timed packs per format (median reported)")
    p.add_argument("--formats", default="binpack,bulletformat,marlinformat,viriformat",
                   help="comma-separated formats")
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    if not (PUBLIC / "small.binpack").exists():
        print(f"nnue bench pack_profile: {PUBLIC} not found (the shared sample data)", file=sys.stderr)
        return 2
    report = {"benchmark": "pack_profile", "unit": "ns a position (CPU time of this process, one core)",
              "machine": platform.machine(), "python": platform.python_version(),
              "load_avg_start": [round(x, 2) for x in os.getloadavg()], "formats": {}}
    with tempfile.TemporaryDirectory(prefix="nnue-profile-") as tmp:
        work = Path(tmp)
        inputs = _inputs(work)
        for fmt in args.formats.split(","):
            path = inputs[fmt]
            _pack_cpu(fmt, path, work)  # warm-up: numba cache load, file cache
            packs = [_pack_cpu(fmt, path, work) for _ in range(args.runs)]
            readers = [_reader_cpu(fmt, path) for _ in range(args.runs)]
            n = packs[0][0]
            total = statistics.median(x[1] for x in packs)
            write = statistics.median(x[2] for x in packs)
            gids = statistics.median(x[3] for x in packs)
            reader = statistics.median(readers)
            ns = lambda s: round(s / n * 1e9, 1)  # noqa: E731
            report["formats"][fmt] = {
                "positions": n, "input_bytes": path.stat().st_size,
                "pack_cpu_pos_per_s": round(n / total), "reader_cpu_pos_per_s": round(n / reader),
                "ns_per_position": {"total": ns(total), "reader": ns(reader), "parquet_write": ns(write),
                                    "game_ids": ns(gids), "rest": ns(total - reader - write - gids)},
            }
    report["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    return emit(report, args.out)


if __name__ == "__main__":
    sys.exit(main())
