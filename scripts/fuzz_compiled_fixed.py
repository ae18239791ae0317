"""Fuzz the compiled decoders of .bin, bulletformat, marlinformat and viriformat
(pipeline/compiled/fixed.py, viri.py) with mutated records.

``python scripts/fuzz_compiled_fixed.py [--records N] [--exact N] [--seed S] [--formats A,B] [--out-dir DIR]``

Per format: real records (the bundled sample as .bin, and the sample plus the Chess960 self-play
converted to bulletformat / marlinformat; viriformat: test-vf.bin's games) are repeated to at
least ``--records`` records, and about one record in three gets a random byte, a flipped bit or an
edge value in a field. The kernel runs over all of them in blocks; checked for every call: it
returns (a numba fault would kill the process), progress is made and stays in bounds, every
record is settled (kind 0) or handed back (kind 1), and every settled row's packed board passes
NumPy's bulk validator (tests/formats/fastcheck_oracle.py) with the same in-check flag and piece count, with
result, flags and best-move fields in range. Then the first ``--exact`` mutated records are
packed by the compiled path and by the python-chess reference path, which must give identical
tables, rejects and counts. Writes ``bench/results/fuzz_<fmt>.json`` per format.

Run it with ``NUMBA_BOUNDSCHECK=1 NUMBA_CACHE_DIR=$(mktemp -d)`` (as for the committed results):
numba then checks every array index and an out-of-bounds read raises IndexError instead of
reading past a buffer silently; the JSON records whether it was on.
"""
from __future__ import annotations

import argparse
import functools
import json
import random
import runpy
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
SIZE = {"bin": 40, "bulletformat": 32, "marlinformat": 32}
EXT = {"bin": "bin", "bulletformat": "bf", "marlinformat": "marlin", "viriformat": "vf"}


@functools.lru_cache(maxsize=1)
def _check_boards():
    """check_boards of tests/formats/fastcheck_oracle.py (run by path: tests are not installed)."""
    return runpy.run_path(str(REPO / "tests" / "formats" / "fastcheck_oracle.py"))["check_boards"]


def _sources(work: Path) -> dict[str, bytes]:
    import chess

    import importlib.util

    spec = importlib.util.spec_from_file_location("formats_testlib", REPO / "tests" / "formats" / "formats_testlib.py")
    lib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lib)
    encode_psv, plain_records = lib.encode_psv, lib.plain_records

    from nnue.pipeline.convert import convert
    from nnue.pipeline.pack import pack

    recs = plain_records()
    boards = [chess.Board(r["fen"]) for r in recs]
    out = {"bin": b"".join(encode_psv(b, b.parse_uci(r["move"]), r["score"], r["ply"], r["result"])
                           for b, r in zip(boards, recs))}
    pack([REPO / "data" / "sample" / "sf15-n5000-s1-sample.plain", REPO / "tests" / "data" / "selfplay" / "sf15-960-xfen-s2.plain.zst"],
         work / "ds", progress=False)
    for fmt in ("bulletformat", "marlinformat"):
        convert(work / "ds", fmt, work / f"real.{EXT[fmt]}")
        out[fmt] = (work / f"real.{EXT[fmt]}").read_bytes()
    out["viriformat"] = (SHARED / "public" / "test-vf.bin").read_bytes()
    return out


def _mutate_record(d: bytearray, base: int, size: int, rng: random.Random) -> None:
    k = rng.randrange(4)
    if k == 0:
        d[base + rng.randrange(size)] = rng.randrange(256)
    elif k == 1:
        i = base + rng.randrange(size)
        d[i] ^= 1 << rng.randrange(8)
    elif k == 2:
        d[base + rng.randrange(min(24, size - 1), size)] = rng.choice([0, 1, 2, 3, 0x40, 0x7F, 0x80, 0xC0, 0xFF])
    else:
        i = base + rng.randrange(min(24, size))
        d[i] ^= 1 << rng.randrange(8)


def _check_rows(b: dict, rows: int, totals: dict) -> None:
    check_boards = _check_boards()

    kind = b["kind"][:rows]
    assert set(np.unique(kind).tolist()) <= {0, 1}, "kind outside 0/1"
    ok = np.flatnonzero(kind == 0)
    if len(ok):
        chk = check_boards(b["board"][:rows][ok])
        assert (chk.reason == 0).all(), "a settled row fails the bulk validator"
        assert (chk.in_check == b["in_check"][:rows][ok]).all(), "in_check differs"
        assert (chk.piece_count == b["piece_count"][:rows][ok]).all(), "piece count differs"
        assert (np.abs(b["result"][:rows][ok].astype(int)) <= 1).all(), "result out of range"
        assert (b["flags"][:rows][ok] < 8).all(), "flags out of range"
        assert (b["best_move"][:rows][ok] >> 14 <= 3).all()
    totals["settled"] += len(ok)
    totals["handed_back"] += rows - len(ok)


def fuzz_fixed(fmt: str, base: bytes, n_records: int, rng: random.Random) -> tuple[bytes, dict]:
    from nnue.pipeline.compiled import fixed

    size = SIZE[fmt]
    reps = -(-n_records // (len(base) // size))
    d = bytearray(base * reps)
    n = len(d) // size
    picks = rng.sample(range(n), n // 3)
    for r in picks:
        _mutate_record(d, r * size, size, rng)
    totals = {"records": 0, "settled": 0, "handed_back": 0, "calls": 0, "mutated_records": len(picks)}
    state = np.array([-1, 0, 0, 0], np.int64)
    recs_all = np.frombuffer(bytes(d), np.uint8).reshape(-1, size)
    for lo in range(0, n, 65536):
        recs = recs_all[lo:lo + 65536].copy()
        b = fixed.buffers(len(recs))
        if fmt == "bulletformat":
            fixed.decode_bullet(recs, *(b[k] for k in fixed.OUT))
        else:
            kernel = fixed.decode_sfbin if fmt == "bin" else fixed.decode_marlin
            kernel(recs, state, *(b[k] for k in fixed.OUT), b["game"])
            assert (np.diff(b["game"]) >= 0).all() and (b["game"] >= -1).all(), "game ordinals go back"
        totals["calls"] += 1
        totals["records"] += len(recs)
        _check_rows(b, len(recs), totals)
    return bytes(d), totals


def _viri_games(data: bytes) -> list[tuple[int, int]]:
    out, pos = [], 0
    while pos < len(data):
        start, pos = pos, pos + 32
        while data[pos:pos + 4] != bytes(4):
            pos += 4
        pos += 4
        out.append((start, pos))
    return out


def fuzz_viri(base: bytes, n_records: int, rng: random.Random) -> tuple[bytes, dict]:
    """Mutated games (about one mutated 4-byte word, header or pair, a game); the kernel resumes,
    after each game or pair it hands back, at the next original game boundary. The pairs it skips
    so (those the reference reader would read) count as handed back."""
    from nnue.pipeline.compiled import viri

    games = _viri_games(base)
    pairs = sum((e - s - 36) // 4 for s, e in games)
    reps = -(-n_records // pairs)
    d = bytearray(base * reps)
    ends = np.array([e + k * len(base) for k in range(reps) for _, e in games])
    n = len(d) // 4
    picks = rng.sample(range(n), n // 120)
    for r in picks:
        _mutate_record(d, 4 * r, 4, rng)
    data = np.frombuffer(bytes(d), np.uint8)
    b = viri.buffers(1 << 16)
    bb, pc, st = np.zeros(16, np.uint64), np.full(64, -1, np.int8), np.zeros(4, np.int64)
    totals = {"records": 0, "settled": 0, "handed_back": 0, "handed_back_games": 0, "handed_back_rests": 0,
              "calls": 0, "mutated_pairs": len(picks), "original_pairs": pairs * reps}
    pos, game = 0, -1
    while pos < len(data):
        rows, new, game, status, pair, start, _ = viri.decode_games(data, pos, len(data), True, game, bb, pc, st,
                                                                   *(b[k] for k in viri.OUT))
        totals["calls"] += 1
        assert 0 <= rows <= len(b["kind"]) and pos <= new <= len(data), (rows, pos, new)
        assert status in (viri.END, viri.FULL, viri.GAME, viri.PAIR), status
        _check_rows(b, rows, totals)
        totals["records"] += rows
        if status in (viri.GAME, viri.PAIR):
            totals["handed_back_games" if status == viri.GAME else "handed_back_rests"] += 1
            at = new if status == viri.GAME else pair
            nxt = ends[np.searchsorted(ends, at, side="right")] if at < ends[-1] else len(data)
            skipped = max(0, (int(nxt) - at - (32 if status == viri.GAME else 0)) // 4 - 1)
            totals["handed_back"] += skipped
            totals["records"] += skipped
            pos = int(nxt)
            game += status == viri.GAME
        else:
            assert new > pos or status == viri.END
            pos = new
    return bytes(d), totals


def exact(fmt: str, data: bytes, work: Path) -> dict:
    """Pack ``data`` by both paths; identical tables, rejects, counts (or the same FormatError)."""
    import pyarrow.parquet as pq

    from nnue.pipeline.formats import FormatError, ReaderOptions
    from nnue.pipeline.pack import pack

    path = work / f"exact.{EXT[fmt]}"
    path.write_bytes(data)
    got = []
    for fast in (True, False):
        ds = work / f"exact-{fmt}-{fast}"
        try:
            s = pack([path], ds, fmt=fmt, options=ReaderOptions(fast=fast), progress=False)
        except FormatError as e:
            got.append(("error", str(e)))
            continue
        (part,) = ds.glob("part-*.parquet")
        (rej,) = ds.glob("rejects-*.jsonl")
        got.append((s["read"], s["packed"], s["rejected"], pq.read_table(part), rej.read_text()))
    a, b = got
    assert a[:3] == b[:3], (a[:3], b[:3])
    if a[0] != "error":
        assert a[3].equals(b[3]), "tables differ"
        assert a[4] == b[4], "rejects differ"
    return {"read": a[0], "packed": a[1], "rejected": sum(a[2].values())} if a[0] != "error" else {"error": a[1]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000, help="records per format (at least)")
    p.add_argument("--exact", type=int, default=20_000, help="mutated records packed by both paths per format")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--formats", default="bin,bulletformat,marlinformat,viriformat")
    p.add_argument("--out-dir", default=str(REPO / "bench" / "results"))
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sources = _sources(work)
        for fmt in a.formats.split(","):
            rng = random.Random(a.seed)
            t0 = time.perf_counter()
            if fmt == "viriformat":
                data, totals = fuzz_viri(sources[fmt], a.records, rng)
                games = _viri_games(sources[fmt])
                per = sum((e - s - 36) // 4 for s, e in games)
                # an intact first game, then whole copies of the mutated file's start
                cut = sources[fmt][:games[0][1]] + data[:len(sources[fmt]) * max(1, -(-a.exact // per))]
            else:
                data, totals = fuzz_fixed(fmt, sources[fmt], a.records, rng)
                cut = sources[fmt][:SIZE[fmt]] + data[:a.exact * SIZE[fmt]]  # an intact first record
            fuzz_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            same = exact(fmt, cut, work)
            import os

            report = {"fuzz": f"compiled {fmt} decoder", "seed": a.seed,
                      "numba_boundscheck": os.environ.get("NUMBA_BOUNDSCHECK") == "1", **totals, "fuzz_seconds": round(fuzz_s, 1),
                      "exact_vs_python_chess": {"records": same, "seconds": round(time.perf_counter() - t1, 1),
                                                "result": "identical tables, rejects and counts"},
                      "result": "no crash, no hang, every record settled or handed back, every settled row valid"}
            text = json.dumps(report, indent=1)
            print(text, flush=True)
            Path(a.out_dir, f"fuzz_{fmt}.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
