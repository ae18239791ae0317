"""The chained dataset layout against the flat one, side by side in one run: bytes per position (and each column's share), pack speed, stream end to end.

``nnue bench chained [--runs N] [--out FILE]`` prints one JSON object. Inputs: Stockfish's
``small.binpack`` (434,921 positions) and our own ``.plain`` self-play ``sf15-n2000-s11.plain``
(224,965) from ``../shared/data``, and the self-play cut the repo ships (12,678). For each input
and layout (``nnue pack --layout chained|flat``, one worker):

* ``bytes_per_position``: the part files' bytes over the positions, and per physical column
  (Parquet's compressed column-chunk sizes; ``footer`` is the rest of the file);
* ``pack``: positions per CPU second of this process and per wall second, medians of ``--runs``
  packs, the two layouts alternating run by run;
* then, on the self-play file: the stream end to end (Parquet -> SparseBatch, HalfKAv2_hm, one
  thread), from ``bench_stream --layouts chained,flat`` (same process, alternating), and the
  in-place upgrade of the flat dataset (``nnue convert --to chained``) and the chained writers
  (``--to binpack``, ``--to viriformat``) in positions per second.

Targets (the chained layout): at most 2.4 bytes a position on small.binpack, 3.0 on the .plain
self-play; pack no slower than flat; the stream end to end no slower than flat.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from nnue.bench import emit, parser

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
INPUTS = {"small.binpack": SHARED / "public" / "small.binpack",
          "sf15-n2000-s11.plain": SHARED / "selfplay" / "sf15-n2000-s11.plain"}
SHIPPED = REPO / "tests" / "data" / "selfplay" / "sf15-n2000-s11-cut.plain.zst"  # our own, in the repo
TARGETS = {"small.binpack": 2.4, "sf15-n2000-s11.plain": 3.0}
LAYOUTS = ("chained", "flat")


def column_shares(ds: Path) -> dict:
    """Bytes per position of a dataset's parts, whole and per physical column."""
    import pyarrow.parquet as pq

    rows = size = 0
    cols: dict[str, int] = {}
    for p in sorted(ds.glob("part-*.parquet")):
        md = pq.ParquetFile(p).metadata
        rows += md.num_rows
        size += p.stat().st_size
        for rg in range(md.num_row_groups):
            for c in range(md.num_columns):
                cc = md.row_group(rg).column(c)
                cols[cc.path_in_schema] = cols.get(cc.path_in_schema, 0) + cc.total_compressed_size
    per = {k: round(v / rows, 4) for k, v in cols.items()}
    per["footer"] = round((size - sum(cols.values())) / rows, 4)
    return {"positions": rows, "bytes": size, "bytes_per_position": round(size / rows, 3),
            "share": {k: round(v / size, 4) for k, v in cols.items()}, "per_position": per}


def _timed_pack(src: Path, out: Path, layout: str) -> tuple[float, float, int]:
    from nnue.pipeline.pack import pack

    w, c = time.perf_counter(), time.process_time()
    s = pack([src], out, progress=False, layout=layout, workers=1)
    return time.perf_counter() - w, time.process_time() - c, s["packed"]


def main(argv=None) -> int:
    p = parser("nnue bench chained", __doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="timed packs per input and layout (median reported)")
    p.add_argument("--stream-repeats", type=int, default=5, help="timed stream passes per layout")
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    p.add_argument("--json", action="store_true", help="(accepted for symmetry; output is always JSON)")
    a = p.parse_args(argv)
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    inputs = {k: v for k, v in INPUTS.items() if v.exists()}
    inputs["sf15-n2000-s11-cut.plain.zst (shipped)"] = SHIPPED
    report = {"benchmark": "chained", "python": platform.python_version(), "machine": platform.machine(),
              "cores": os.cpu_count(), "load_avg_1m_at_start": round(os.getloadavg()[0], 2), "runs": a.runs,
              "missing_inputs": sorted(k for k, v in INPUTS.items() if not v.exists()), "inputs": {}}
    with tempfile.TemporaryDirectory(prefix="bench_chained_") as tmp:
        tmp = Path(tmp)
        for name, src in inputs.items():
            # warm-up (numba's cache, the page cache), then the layouts alternating run by run
            for layout in LAYOUTS:
                _timed_pack(src, tmp / f"warm-{name}-{layout}", layout)
            runs = {k: [] for k in LAYOUTS}
            for i in range(a.runs):
                for layout in LAYOUTS:
                    runs[layout].append(_timed_pack(src, tmp / f"{name}-{layout}-{i}", layout))
            entry = {}
            for layout in LAYOUTS:
                n = runs[layout][0][2]
                entry[layout] = {"bytes": column_shares(tmp / f"{name}-{layout}-0"),
                                 "pack_pos_per_cpu_s": round(n / statistics.median(r[1] for r in runs[layout])),
                                 "pack_pos_per_s": round(n / statistics.median(r[0] for r in runs[layout]))}
            c, f = entry["chained"], entry["flat"]
            entry["flat_over_chained_bytes"] = round(f["bytes"]["bytes"] / c["bytes"]["bytes"], 2)
            entry["pack_cpu_speed_chained_over_flat"] = round(c["pack_pos_per_cpu_s"] / f["pack_pos_per_cpu_s"], 3)
            if name in TARGETS:
                entry["target_bytes_per_position"] = TARGETS[name]
                entry["target_met"] = c["bytes"]["bytes_per_position"] <= TARGETS[name]
            report["inputs"][name] = entry
        plain = INPUTS["sf15-n2000-s11.plain"]
        if plain.exists():
            from nnue.bench import bench_stream

            out = tmp / "stream.json"
            with open(os.devnull, "w") as null:
                saved, sys.stdout = sys.stdout, null
                try:
                    bench_stream.main(["--plain", str(plain), "--feature-sets", "halfkav2_hm", "--layouts",
                                       "chained,flat", "--repeats", str(a.stream_repeats), "--out", str(out)])
                finally:
                    sys.stdout = saved
            s = json.loads(out.read_text())
            fs = s["feature_sets"]["halfkav2_hm"]
            report["stream"] = {"input": plain.name, "rows": s["dataset"]["rows"],
                                "positions_after_default_filters": s["dataset"]["positions_after_default_filters"],
                                "stream_only": s["stream_by_layout"],
                                "end_to_end_halfkav2_hm": fs["end_to_end_cpu_by_layout"],
                                "chained_vs_flat": s["chained_vs_flat"],
                                # the encoder + output buckets on the same boards, either layout's
                                # (the compiled path CPU batches take, and the torch one)
                                "encode_and_buckets_ns_per_pos": {
                                    "numba": round(1e9 / fs["encode_numba_cpu"]["pos_per_cpu_s"], 1),
                                    "torch": round(1e9 / fs["encode_cpu"]["pos_per_cpu_s"], 1)},
                                "load_avg_1m": [s["machine"]["load_avg_1m_at_start"], s["machine"]["load_avg_1m_at_end"]],
                                "profile_ns_per_row_read": _stream_profile(
                                    {k: tmp / f"{plain.name}-{k}-0" for k in LAYOUTS}, a.stream_repeats)}
            report["upgrade_and_writers"] = _upgrade_and_writers(plain, tmp)
    report["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    report["notes"] = NOTES
    return emit(report, a.out)


def _stream_profile(datasets: dict, repeats: int) -> dict:
    """Where the stream's time goes, per layout, in CPU nanoseconds per row read (medians of
    ``repeats`` passes, the layouts alternating): ``read`` (Parquet -> the row group's columns as
    NumPy, chained scores from their deltas), ``filters`` (the default filters' mask), ``boards``
    (the kept rows' packed boards: the chains decoded, or the board column taken), and the whole
    of the stream's per-row-group step (``read_unit``: the three and its bookkeeping)."""
    import numpy as np

    from nnue.pipeline.stream import PackedStream, filter_mask

    streams = {k: PackedStream([ds], 16384, 0, split="all") for k, ds in datasets.items()}
    times = {k: {"read": [], "filters": [], "boards": [], "read_unit": []} for k in streams}
    rows = sum(u.rows for u in streams["flat"].units)
    rng = np.random.default_rng(0)
    for _ in range(repeats + 1):  # the first pass warms up
        for k, st in streams.items():
            t = dict.fromkeys(times[k], 0.0)
            for u in st.units:
                c0 = time.process_time()
                g, score = st._read_columns(u, with_board=True)
                c1 = time.process_time()
                keep = filter_mask(g, st.filters, st.counts, rng, score, np.ones(len(score), bool))
                c2 = time.process_time()
                g.boards(keep if g.chained else np.flatnonzero(keep))
                c3 = time.process_time()
                st._read_unit(u, rng)
                t["read"] += c1 - c0
                t["filters"] += c2 - c1
                t["boards"] += c3 - c2
                t["read_unit"] += time.process_time() - c3
            for p, v in t.items():
                times[k][p].append(v)
    return {k: {p: round(statistics.median(v[1:]) / rows * 1e9, 1) for p, v in t.items()} for k, t in times.items()}


def _upgrade_and_writers(src: Path, tmp: Path) -> dict:
    """Positions per second of the in-place upgrade of a flat dataset and of the chained writers."""
    import shutil

    from nnue.pipeline.convert import convert
    from nnue.pipeline.upgrade import upgrade

    out = {}
    flat = tmp / f"{src.name}-flat-0"
    ds = tmp / "upgrade"
    shutil.copytree(flat, ds)
    w = time.perf_counter()
    r = upgrade(ds)
    out["upgrade_pos_per_s"] = round(r["positions"] / (time.perf_counter() - w))
    for fmt in ("binpack", "viriformat"):
        w = time.perf_counter()
        r = convert(ds, fmt, tmp / f"out.{fmt}")
        out[f"convert_to_{fmt}_pos_per_s"] = round(r["rows"] / (time.perf_counter() - w))
        out[f"{fmt}_bytes_per_position"] = round((tmp / f"out.{fmt}").stat().st_size / r["rows"], 3)
    return out


NOTES = [
    "One worker, one Arrow thread; pack and stream rates per CPU second of this process are the "
    "figures least disturbed by other load on the shared 2-core VM (the load average at the start "
    "is in load_avg_1m_at_start).",
    "Bytes: the chained layout stores a chain's board once (stem), then per position the move's "
    "index among the position's candidate moves (move, BYTE_STREAM_SPLIT) and the score as a "
    "zigzag delta from minus the score above (score_delta, BYTE_STREAM_SPLIT); ply and piece "
    "count only where they do not follow from the row above (ply_reset, piece_count_reset); "
    "flags, in_check, best_move_is_capture and result in one uint16 status column (schema 3, "
    "BYTE_STREAM_SPLIT; the stream reads one column for four); source dictionary-encoded; "
    "game_id plain (zstd finds its runs).",
    "Stream: the chained layout decodes every row of a row group up to the last row the split "
    "and filters keep in each chain (each position is played from the one above: the move's index "
    "is turned back into a move, the move checked and played, the packed board updated in place) "
    "and writes the boards of the rows kept; the flat layout reads a 32-byte board column. See "
    "chained_vs_flat for the ratios (the *_paired ones are the medians of each repeat's own ratio, "
    "its two runs back to back) and profile_ns_per_row_read for where the time goes.",
    "End to end, both layouts encode the same boards with the same compiled encoder "
    "(encode_and_buckets_ns_per_pos: HalfKAv2_hm's lists from its lookup table in numba, and the "
    "output buckets), so the two layouts differ end to end by what their streams differ; the "
    "encoder's share only sets how large that difference is as a ratio. Emitting the lists from "
    "the chained decoder itself was weighed and not built: it would save the encoder's king "
    "search and board read (about 10 ns of its cost), while the shuffle buffer would then hold "
    "256 bytes of lists a position instead of a 32-byte board (8x the memory and the copying), "
    "and the flat layout's boards would still need the encoder.",
]

if __name__ == "__main__":
    sys.exit(main())
