"""Benchmark: packing throughput per format, positions per second on one core.

``nnue bench pack [--runs N] [--out FILE] [--formats A,B]`` prints one JSON object. For each
format it times (median of N runs) the reader alone (decode only) and the whole ``pack``
(decode, validation, packing, Parquet write), on inputs made from the bundled sample
(converted with ``nnue convert``) or read from ``../shared/data`` when present. Rates are given
per wall second and per CPU second of the process (``*_cpu_pos_per_s``: what one core does,
whatever else shares the machine). binpack is also packed by the python-chess reference path
(``ReaderOptions(fast=False)``) on its first chains, in the same run, for the old/new ratio, and
the compiled decoder's first-call time is measured in fresh processes, with numba's cache empty
(compile) and filled (load). The fixed-record binary formats (.bin, bulletformat, marlinformat,
viriformat) are timed on their compiled paths (pipeline/compiled/fixed.py, viri.py) and, in the
same run, on their python-chess reference paths (``fast=False``) over their first
``REFERENCE_SLICE`` records, for the old/new ratio; ``kernel_cpu_pos_per_s`` is the compiled
kernel alone (decode + validate + pack into NumPy buffers), the rest of the reader's time is
building the runs, the rest of the pack's the Arrow tables and the Parquet write. With
``--formats`` and ``--out FILE`` an existing FILE keeps the formats not run. Targets (issue 14): binpack ≥ 1M pos/s per core end to end; .bin,
viriformat, bulletformat, marlinformat ≥ 2M/s; text formats ≥ 300k/s, PGN ≥ 100k/s. The text
formats (.plain, bullet text, EPD: pipeline/compiled/text.py) are also packed by their
python-chess reference path (``fast=False``) on the same input in the same run, report the
compiled core's first-call time like the binary formats, and the share of records it handed back
(``handed_share``).
"""
from __future__ import annotations

import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from nnue.bench import emit, parser

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
TARGETS = {"text": 300_000, "binary": 2_000_000, "binpack": 1_000_000, "pgn": 100_000}
BINPACK_SLICE = 20_000  # positions of small.binpack packed by both paths for the same-run ratio
REFERENCE_SLICE = 5_000  # records of each fixed-record binary input packed by the reference path too
TILES = 50  # the .bin input: the bundled sample encoded, repeated; viriformat: test-vf.bin repeated 4x this


def _encode_psv(board, move, score: int, ply: int, result: int) -> bytes:
    """One 40-byte Stockfish PackedSfenValue (FORMATS.md), for the .bin benchmark input."""
    import struct

    import chess

    huff = {chess.PAWN: (0b0001, 4), chess.KNIGHT: (0b0011, 4), chess.BISHOP: (0b0101, 4),
            chess.ROOK: (0b0111, 4), chess.QUEEN: (0b1001, 4)}
    v = pos = 0

    def put(x, n):
        nonlocal v, pos
        v |= x << pos
        pos += n

    put(board.turn == chess.BLACK, 1)
    put(board.king(chess.WHITE), 6)
    put(board.king(chess.BLACK), 6)
    for rank in range(7, -1, -1):
        for file in range(8):
            p = board.piece_at(chess.square(file, rank))
            if p is None:
                put(0, 1)
            elif p.piece_type != chess.KING:
                put(*huff[p.piece_type])
                put(p.color == chess.BLACK, 1)
    for sq in (chess.H1, chess.A1, chess.H8, chess.A8):
        put(bool(board.castling_rights & chess.BB_SQUARES[sq]), 1)
    if board.has_legal_en_passant():
        put(1, 1)
        put(board.ep_square, 6)
    else:
        put(0, 1)
    put(board.halfmove_clock & 63, 6)
    put(board.fullmove_number & 255, 8)
    put(board.fullmove_number >> 8 & 255, 8)
    put(board.halfmove_clock >> 6 & 1, 1)
    to, flag, promo = move.to_square, 0, 0
    if move.promotion:
        flag, promo = 1, move.promotion - chess.KNIGHT
    elif board.is_castling(move):
        flag, to = 3, chess.square(7 if chess.square_file(to) > 4 else 0, chess.square_rank(to))
    elif board.is_en_passant(move):
        flag = 2
    return v.to_bytes(32, "little") + struct.pack("<hHHbB", score, to | move.from_square << 6 | promo << 12 | flag << 14,
                                                  ply, result, 0)


def _sfbin_input(sample: Path, out: Path) -> Path:
    """The bundled .plain sample as Stockfish .bin records, repeated TILES times."""
    import chess

    recs, cur = [], {}
    for line in sample.read_text().splitlines():
        if line.strip() == "e":
            b = chess.Board(cur["fen"])
            recs.append(_encode_psv(b, b.parse_uci(cur["move"]), int(cur["score"]), int(cur["ply"]),
                                    int(cur["result"])))
            cur = {}
        elif line.strip():
            k, _, v = line.strip().partition(" ")
            cur[k] = v
    out.write_bytes(b"".join(recs) * TILES)
    return out


def _inputs(work: Path) -> dict[str, tuple[str, Path, int | None]]:
    """format -> (kind, path, max records read by the reader-only timing)."""
    from nnue.pipeline.convert import convert
    from nnue.pipeline.pack import pack

    sample = REPO / "data" / "sample" / "sf15-n5000-s1-sample.plain"
    ds = work / "ds"
    pack([sample], ds, progress=False)
    out = {"plain": ("text", sample, None), "bin": ("binary", _sfbin_input(sample, work / "sample.bin"), None)}
    for fmt, ext, kind in (("bullet-text", "txt", "text"), ("bulletformat", "bf", "binary"),
                           ("marlinformat", "marlin", "binary")):
        p = work / f"sample.{ext}"
        convert(ds, fmt, p)
        out[fmt] = (kind, p, None)
    extra = {"pgn": ("pgn", SHARED / "selfplay" / "sf15-960-xfen-s2.pgn", None),
             "pgn (sf15-n5000-s1)": ("pgn", SHARED / "selfplay" / "sf15-n5000-s1.pgn", None),
             "epd": ("text", SHARED / "public" / "samplefen1000.epd", None),
             "viriformat": ("binary", SHARED / "public" / "test-vf.bin", None),
             "binpack": ("binpack", SHARED / "public" / "small.binpack", None)}
    out |= {k: v for k, v in extra.items() if v[1].exists()}
    for name in ("sf15-n5000-s1.plain", "sf15-n5000-s1.txt"):  # larger text inputs (43,919 positions)
        if (SHARED / "selfplay" / name).exists():
            fmt = "plain" if name.endswith(".plain") else "bullet-text"
            out[f"{fmt} ({name})"] = ("text", SHARED / "selfplay" / name, None)
    if "epd" in out:  # 50,000 lines, each its own position
        big_epd = work / "samplefen1000-x50.epd"
        big_epd.write_bytes(out["epd"][1].read_bytes() * 50)
        out["epd (samplefen1000.epd repeated)"] = ("text", big_epd, None)
    if "viriformat" in out:  # whole games repeated: a valid, larger viriformat file
        big_vf = work / "test-vf-x.vf"
        big_vf.write_bytes(out["viriformat"][1].read_bytes() * (4 * TILES))
        out["viriformat (test-vf.bin repeated)"] = ("binary", big_vf, None)
    if "binpack" in out:  # 434,921 positions as fixed records: large enough to time the bulk paths
        big = work / "binpack-ds"
        pack([out["binpack"][1]], big, progress=False)
        for fmt, ext in (("bulletformat", "bf"), ("marlinformat", "marlin")):
            p = work / f"small-binpack.{ext}"
            convert(big, fmt, p)
            out[f"{fmt} (small.binpack)"] = ("binary", p, None)
    return out


def _time_reader(fmt: str, path: Path, limit: int | None, fast: bool = True) -> tuple[int, float, float]:
    from nnue.pipeline.formats import PackedRows, ReaderOptions, get_format, open_binary, open_text

    spec = get_format(fmt)
    opts = ReaderOptions(pgn_pov="white", fast=fast)
    t, c = time.perf_counter(), time.process_time()
    n = 0
    with (open_binary if spec.binary else open_text)(path) as s:
        for item in spec.read(s, opts):
            n += len(item) if isinstance(item, PackedRows) else 1
            if limit and n >= limit:
                break
    return n, time.perf_counter() - t, time.process_time() - c


def _time_pack(fmt: str, path: Path, work: Path, run: int, fast: bool = True) -> tuple[int, float, float]:
    import shutil

    from nnue.pipeline.formats import ReaderOptions
    from nnue.pipeline.pack import pack

    out = work / f"bench-{fmt}-{run}-{fast}"
    t, c = time.perf_counter(), time.process_time()
    s = pack([path], out, fmt=fmt, options=ReaderOptions(pgn_pov="white", fast=fast), progress=False)
    dt, dc = time.perf_counter() - t, time.process_time() - c
    shutil.rmtree(out)
    return s["read"], dt, dc


def _rates(runs, prefix: str) -> dict:
    return {f"{prefix}_positions": runs[0][0],
            f"{prefix}_pos_per_s": round(statistics.median(n / t for n, t, _ in runs)),
            f"{prefix}_cpu_pos_per_s": round(statistics.median(n / max(c, 1e-9) for n, _, c in runs))}


_FIRST_CALL = """
import time, numpy as np
t = time.perf_counter()
from nnue.pipeline.compiled import binpack as cb
data = open({path!r}, "rb").read()[8:]
b = cb.buffers(cb.CAP)
cb.decode_chains(np.frombuffer(data, np.uint8), 0, len(data), *(b[k] for k in cb._FIELDS))
print(time.perf_counter() - t)
"""


_FIRST_CALL_FIXED = """
import time, numpy as np
t = time.perf_counter()
from nnue.pipeline.compiled import fixed, viri
b = fixed.buffers(1)
for kernel, size in ((fixed.decode_sfbin, 40), (fixed.decode_marlin, 32)):
    kernel(np.zeros((1, size), np.uint8), np.array([-1, 0, 0, 0], np.int64), *(b[k] for k in fixed.OUT), b["game"])
fixed.decode_bullet(np.zeros((1, 32), np.uint8), *(b[k] for k in fixed.OUT))
v = viri.buffers(4)
viri.decode_games(np.zeros(36, np.uint8), 0, 36, True, -1, np.zeros(16, np.uint64), np.full(64, -1, np.int8),
                  np.zeros(4, np.int64), *(v[k] for k in viri.OUT))
print(time.perf_counter() - t)
"""


_FIRST_CALL_PGN = """
import time
t = time.perf_counter()
from nnue.pipeline.formats import ReaderOptions, get_format, open_text
with open_text({path!r}) as s:
    next(iter(get_format("pgn").read(s, ReaderOptions())))
print(time.perf_counter() - t)
"""


_FIRST_CALL_TEXT = """
import io, time
t = time.perf_counter()
from nnue.pipeline.compiled import text as ct
from nnue.pipeline.formats import bullet_text, epd, plain
start = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
for fmt, m, line in (("plain", plain.Machine(), f"fen {{start}}\\nmove e2e4\\nscore 0\\nply 0\\nresult 0\\ne\\n"),
                     ("bullet-text", bullet_text.Machine(), f"{{start}} | 0 | 0.5\\n"),
                     ("epd", epd.Machine(), f"{{start}} c9 \\"1-0\\";\\n")):
    list(ct.read_text(io.TextIOWrapper(io.BytesIO(line.encode())), fmt, m))
print(time.perf_counter() - t)
"""


def _pgn_row(path: Path, work: Path, runs: int, first_call: dict) -> dict:
    """PGN extras: the compiled reader's first-call time (fresh processes, numba cache empty and
    filled), the positions it hands to python-chess, and the python-chess path (``fast=False``)
    packing the same file in the same run, for the old/new ratio."""
    from nnue.pipeline.formats import PackedRows, ReaderOptions, get_format, open_text

    if not first_call:
        with tempfile.TemporaryDirectory() as cold:
            first_call["compile (empty numba cache)"] = _first_call_s(path, cold, _FIRST_CALL_PGN)
        first_call["load (numba cache filled)"] = _first_call_s(path, None, _FIRST_CALL_PGN)
    n = handed = 0
    with open_text(path) as s:
        for item in get_format("pgn").read(s, ReaderOptions(pgn_pov="white")):
            k = len(item) if isinstance(item, PackedRows) else 1
            n += k
            handed += 0 if isinstance(item, PackedRows) else 1
    new = _rates([_time_pack("pgn", path, work, i) for i in range(runs)], "pack")
    old = _rates([_time_pack("pgn", path, work, i, fast=False) for i in range(runs)], "pack")
    return {"first_call_s": dict(first_call), "handed_to_python_chess": handed,
            "handed_share": round(handed / max(n, 1), 5),
            "same_run_whole_file": {"positions": new["pack_positions"], "compiled": new, "python_chess_reference": old,
                                    "ratio_cpu": round(new["pack_cpu_pos_per_s"] / old["pack_cpu_pos_per_s"], 1)}}


def _handed_text(fmt: str, path: Path) -> dict:
    """Records the compiled text core handed back to the reader's line machine / python-chess."""
    from nnue.pipeline.compiled import text as ct

    h = ct.HANDED.get(fmt, 0)
    n, _, _ = _time_reader(fmt, path, None)
    k = ct.HANDED.get(fmt, 0) - h
    return {"handed_to_python_chess": k, "handed_share": round(k / max(n, 1), 5)}


def _kernel_rates(fmt: str, path: Path, runs: int) -> dict:
    """CPU rate of the compiled kernel alone on the whole input (no Python per record), and the
    share of records it hands back to the reference path."""
    import numpy as np

    from nnue.pipeline.compiled import fixed, viri

    data = np.frombuffer(path.read_bytes(), np.uint8)
    out = []
    for _ in range(runs):
        c = time.process_time()
        if fmt == "viriformat":
            b = viri.buffers(1 << 16)
            bb, pc, st = np.zeros(16, np.uint64), np.full(64, -1, np.int8), np.zeros(4, np.int64)
            pos, game, n, handed = 0, -1, 0, 0
            while pos < len(data):
                rows, pos, game, status, *_ = viri.decode_games(data, pos, len(data), True, game, bb, pc, st,
                                                                *(b[k] for k in viri.OUT))
                n += rows
                handed += int(b["kind"][:rows].sum())
                if status not in (viri.END, viri.FULL):
                    break
        else:
            size = 40 if fmt == "bin" else 32
            recs = data[:len(data) - len(data) % size].reshape(-1, size).copy()
            b = fixed.buffers(len(recs))
            if fmt == "bulletformat":
                fixed.decode_bullet(recs, *(b[k] for k in fixed.OUT))
            else:
                kernel = fixed.decode_sfbin if fmt == "bin" else fixed.decode_marlin
                kernel(recs, np.array([-1, 0, 0, 0], np.int64), *(b[k] for k in fixed.OUT), b["game"])
            n, handed = len(recs), int(b["kind"].sum())
        out.append((n, time.process_time() - c, handed))
    return {"kernel_cpu_pos_per_s": round(statistics.median(n / max(c, 1e-9) for n, c, _ in out)),
            "handed_to_python_chess": out[0][2], "handed_share": round(out[0][2] / max(out[0][0], 1), 5)}


def _reference_slice(fmt: str, path: Path, work: Path) -> Path:
    """The first REFERENCE_SLICE records (viriformat: whole games) of a binary input."""
    data = path.read_bytes()
    if fmt == "viriformat":
        pos = n = 0
        while pos < len(data) and n < REFERENCE_SLICE:
            pos += 32
            while data[pos:pos + 4] != bytes(4):
                pos += 4
                n += 1
            pos += 4
        cut = data[:pos]
    else:
        cut = data[:REFERENCE_SLICE * (40 if fmt == "bin" else 32)]
    out = work / f"slice-{path.name}"
    out.write_bytes(cut)
    return out


def _first_call_s(path: Path, cache_dir: str | None, script: str = _FIRST_CALL) -> float:
    """Seconds from import to the first decoded block, in a fresh process (cache_dir: an empty
    numba cache folder, so everything compiles; None: numba's own, filled cache)."""
    import os
    import subprocess

    env = dict(os.environ)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    r = subprocess.run([sys.executable, "-c", script.format(path=str(path))], env=env, capture_output=True,
                       text=True, check=True)
    return round(float(r.stdout.strip().splitlines()[-1]), 2)


def _binpack_slice(path: Path, work: Path, positions: int) -> Path:
    """The first chains of the first block of a binpack, about ``positions`` positions."""
    import numpy as np

    from nnue.pipeline.compiled import binpack as cb

    data = path.read_bytes()
    body = data[8:8 + int.from_bytes(data[4:8], "little")]
    b = cb.buffers(cb.CAP)
    rows, _, _, _ = cb.decode_chains(np.frombuffer(body, np.uint8), 0, len(body), *(b[k] for k in cb._FIELDS))
    starts = np.unique(b["chain_pos"][:rows])
    row_of = np.searchsorted(b["chain_pos"][:rows], starts)
    end = int(starts[np.searchsorted(row_of, positions)]) if row_of[-1] > positions else len(body)
    out = work / "slice.binpack"
    out.write_bytes(b"BINP" + end.to_bytes(4, "little") + body[:end])
    return out


def main(argv=None) -> int:
    p = parser("nnue bench pack", __doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="timed runs per measurement (median reported)")
    p.add_argument("--out", default=None, help="also write the JSON to this file (with --formats, an existing "
                   "file keeps the formats not run)")
    p.add_argument("--formats", default=None, help="comma-separated formats to run, e.g. bin,viriformat "
                   "(default: all)")
    p.add_argument("--json", action="store_true", help="(accepted for symmetry; output is always JSON)")
    a = p.parse_args(argv)
    import torch

    import pyarrow as pa

    torch.set_num_threads(1)
    pa.set_cpu_count(1)  # one core: Parquet compression on this thread's budget too
    results = {}
    wanted = set(a.formats.split(",")) if a.formats else None
    first_fixed: dict = {}
    first_pgn: dict = {}
    first_text: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, (kind, path, limit) in _inputs(work).items():
            fmt = name.split(" ")[0]
            if wanted and fmt not in wanted:
                continue
            row = {"kind": kind, "input": path.name}
            if fmt == "binpack":
                with tempfile.TemporaryDirectory() as cold:
                    row["first_call_s"] = {"compile (empty numba cache)": _first_call_s(path, cold),
                                           "load (numba cache filled)": _first_call_s(path, None)}
                _time_reader(fmt, path, 100)  # load the compiled decoder before timing
            fixed = fmt in ("bin", "bulletformat", "marlinformat", "viriformat")
            if fixed and not first_fixed:
                with tempfile.TemporaryDirectory() as cold:
                    first_fixed["compile (empty numba cache)"] = _first_call_s(path, cold, _FIRST_CALL_FIXED)
                first_fixed["load (numba cache filled)"] = _first_call_s(path, None, _FIRST_CALL_FIXED)
            text = kind == "text"
            if text and not first_text:
                with tempfile.TemporaryDirectory() as cold:
                    first_text["compile (empty numba cache)"] = _first_call_s(path, cold, _FIRST_CALL_TEXT)
                first_text["load (numba cache filled)"] = _first_call_s(path, None, _FIRST_CALL_TEXT)
            if text:
                row["first_call_s"] = dict(first_text)
                _time_reader(fmt, path, 100)  # load the compiled kernels before timing
                row |= _handed_text(fmt, path)
            if fixed:
                row["first_call_s"] = dict(first_fixed)
                _time_reader(fmt, path, 100)  # load the compiled kernels before timing
                row |= _kernel_rates(fmt, path, a.runs)
            if fmt == "pgn":
                row |= _pgn_row(path, work, a.runs, first_pgn)
            row |= _rates([_time_reader(fmt, path, limit) for _ in range(a.runs)], "reader")
            row |= _rates([_time_pack(fmt, path, work, i) for i in range(a.runs)], "pack")
            if fixed:
                part = _reference_slice(fmt, path, work)
                new = _rates([_time_pack(fmt, part, work, i) for i in range(a.runs)], "pack")
                old = _rates([_time_pack(fmt, part, work, i, fast=False) for i in range(a.runs)], "pack")
                row["same_run_first_records"] = {
                    "positions": new["pack_positions"], "compiled": new, "python_chess_reference": old,
                    "ratio_cpu": round(new["pack_cpu_pos_per_s"] / old["pack_cpu_pos_per_s"], 1)}
            if text:  # the python-chess path (the readers' line machines), same input, same run
                old = _rates([_time_pack(fmt, path, work, i, fast=False) for i in range(a.runs)], "pack")
                row["same_run_python_chess_reference"] = old
                row["ratio_cpu"] = round(row["pack_cpu_pos_per_s"] / old["pack_cpu_pos_per_s"], 1)
            if fmt == "binpack":
                part = _binpack_slice(path, work, BINPACK_SLICE)
                new = _rates([_time_pack(fmt, part, work, i) for i in range(a.runs)], "pack")
                old = _rates([_time_pack(fmt, part, work, i, fast=False) for i in range(a.runs)], "pack")
                row["same_run_first_chains"] = {
                    "positions": new["pack_positions"], "compiled": new, "python_chess_reference": old,
                    "ratio_wall": round(new["pack_pos_per_s"] / old["pack_pos_per_s"], 1),
                    "ratio_cpu": round(new["pack_cpu_pos_per_s"] / old["pack_cpu_pos_per_s"], 1)}
            row["target_pos_per_s"] = TARGETS[kind]
            row["target_met_cpu"] = row["pack_cpu_pos_per_s"] >= TARGETS[kind]
            results[name] = row
    report = {
        "benchmark": "pack", "unit": "positions per second, one core (median of runs)", "runs": a.runs,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "python": platform.python_version(), "formats": results,
        "notes": ("binpack decodes in the compiled core (pipeline/compiled/binpack.py, numba): stem, "
                  "movetext, legality and validation, packed boards and columns written straight into "
                  "NumPy buffers; python-chess only for chains it hands back (none in small.binpack) and "
                  "rows whose status needs it (15 of 434,921 there). The rest of a binpack pack's time is "
                  "the Parquet write (zstd, ~0.4 us a row) and Arrow conversion. "
                  ".bin, bulletformat, marlinformat and viriformat decode and validate in the compiled core "
                  "(pipeline/compiled/fixed.py, viri.py): one numba pass a record (viriformat: a game, "
                  "moves played in Chess960 mode), packed boards and columns written straight into NumPy "
                  "buffers; python-chess reads only the records the core hands back (handed_share: in check "
                  "with an en-passant square, two checkers, irregular castling rights, every reject). Their "
                  "pack rate is bounded by the Arrow/Parquet write (zstd; compare kernel_cpu_pos_per_s, "
                  "reader_cpu_pos_per_s and pack_cpu_pos_per_s). "
                  ".plain, bullet text and EPD are tokenized, parsed (FEN, X-FEN/Shredder-FEN castling, UCI "
                  "moves) and validated in the compiled text core (pipeline/compiled/text.py, numba) over the "
                  "raw bytes, rows written straight into NumPy buffers; what it cannot settle exactly goes to "
                  "the readers' line machines and python-chess (handed_share: en-passant squares with the side "
                  "to move in check, unusual spellings, every reject); same_run_python_chess_reference is "
                  "fast=False on the same input in the same run. Their pack rate is bounded by the Arrow/"
                  "Parquet write and game-id hashing, not the parsing (compare reader_cpu_pos_per_s). PGN is read by a "
                  "compiled reader (pipeline/compiled/pgn.py, numba: tokenizer, tags, comments, SAN against "
                  "the compiled move rules, eval comments, validation) into NumPy buffers; python-chess starts "
                  "each game's board from its FEN tag (~50 us a game) and reads the games the kernel hands "
                  "back (handed_share: variations, null moves, errors, bad eval comments, '*' results, "
                  "non-ASCII bytes, positions that fixed.settle leaves to python-chess other than check by a "
                  "pawn just pushed two squares with a legal en-passant capture); its pack rate is bounded by "
                  "the Arrow/Parquet write."),
    }
    if a.formats and a.out and Path(a.out).exists():  # keep the formats not run this time
        import json

        old = json.loads(Path(a.out).read_text())
        report["formats"] = {k: v for k, v in old.get("formats", {}).items()
                             if k.split(" ")[0] not in wanted} | results
    return emit(report, a.out)


if __name__ == "__main__":
    sys.exit(main())
