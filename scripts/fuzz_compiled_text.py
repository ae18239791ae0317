"""Fuzz the compiled text core (pipeline/compiled/text.py) for ``.plain``, bullet text and EPD.

``python scripts/fuzz_compiled_text.py [--records N] [--file-records N] [--seed S] [--formats A,B] [--out-dir DIR]``

Per format: real records (the self-play ``.plain`` / ``.txt`` files, Chess960 included; for EPD
the public EPD samples plus the self-play positions written in the zurichess, Ethereal and
opcode shapes) are cycled to ``--records`` records, and every record is mutated (1 to 3
mutations): a byte replaced, inserted or deleted (line ends, tabs, NUL, invalid UTF-8, a BOM,
the format's separators), a field replaced by an edge token (castling rights, en-passant squares,
counters, scores, results, UCI moves — castling spellings, promotions, null moves), a piece put
on or taken off the board with python-chess (checks, missing kings, back-rank pawns, castling
rights without rooks), the move replaced by a random legal or pseudo-legal move, lines dropped,
doubled or swapped, and whole files written with CRLF / CR line ends or a BOM. Files of
``--file-records`` records are packed by the compiled path and by the python-chess reference
path (``ReaderOptions(fast=False)``), which must give identical tables (every column, every
row), rejects files, counts and manifest castling spellings, or the same FormatError; a file
that takes longer than a time limit (a hang) fails the run, as does any exception. Writes
``bench/results/fuzz_<fmt>.json`` per format (``fuzz_bullet_text.json`` for bullet text).

Run it with ``NUMBA_BOUNDSCHECK=1 NUMBA_CACHE_DIR=$(mktemp -d)`` (as for the committed results):
numba then checks every array index and an out-of-bounds read raises IndexError instead of
reading past a buffer silently; the JSON records whether it was on.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
EXT = {"plain": "plain", "bullet-text": "txt", "epd": "epd"}

BYTES = [b" ", b"  ", b"\t", b"\r", b"\n", b"\r\n", b"\x00", b"\xff", b"\xc3", b"\xc2\xa0", b"\x85", b"\xef\xbb\xbf",
         b"\x0b", b"\x1c", b"-", b"+", b"0", b"1", b"9", b"/", b"|", b"[", b"]", b";", b'"', b"~", b"e", b"K", b"q",
         b"p", b"P", b".", b"_", b"#", b"\xe2\x82", b"\xd9\xa3"]
TOKENS = {
    "castling": ["KQkq", "-", "HAha", "Kk", "AHah", "KQkqK", "Q", "Bb", "KH", "k", "Kq", "GCgc", "kq", "KQ", "K-",
                 "", "KQkqq", "hH", "BGbg", "Ee"],
    "ep": ["e3", "e6", "a6", "h3", "-", "e4", "z9", "d6", "c3", "f6", "a1", "h8", "e", "--"],
    "counter": ["0", "1", "-1", "007", "1234567890", "99999", "+5", "-0", "300", "65536", "1.5", "x"],
    "result": ["1.0", "0.5", "0.0", "1", "0", "1/2", "[1.0]", "1-0", "0-1", "1/2-1/2", ".5", "2", "-1", "x", '"1-0"',
               "[0.5]", " 1 ", "1.00", "-0"],
    "score": ["32002", "-32002", "32767", "-32768", "31754", "-31754", "1e3", "12.5", "inf", "nan", "0", "-0",
              "99999999999", "+5", "007", "1_000", "-", "5.0"],
    "move": ["e1g1", "e1h1", "e8c8", "e1a1", "e8h8", "0000", "e7e8q", "e7e8k", "e7e8Q", "a7a8n", "e2e4", "a1a1",
             "b1a1", "g1h1", "e1c1", "e8g8", "h7h8r", "e2e4x", "e2", "", "e2e4 e7e5"],
}


def _selfplay_text(name: str) -> str:
    """A self-play file of the repo's test data (tests/data/selfplay/NAME.zst), decompressed."""
    import zstandard

    return zstandard.ZstdDecompressor().decompress((REPO / "tests" / "data" / "selfplay" / f"{name}.zst").read_bytes(),
                                                   max_output_size=1 << 28).decode()


def _sources() -> dict[str, list[str]]:
    """Real records per format, each record's text with its line end(s): our self-play of the
    repo's test data (the Chess960 set and the sf15-n2000-s11 cut; before issue 22 the fuzzer read
    sf15-n5000-s1 of ../shared/data), and the public EPD samples where ../shared/data/public holds them."""
    out: dict[str, list[str]] = {"plain": [], "bullet-text": [], "epd": []}
    for name in ("sf15-960-xfen-s2", "sf15-n2000-s11-cut"):
        lines = _selfplay_text(f"{name}.plain").splitlines(True)
        for i in range(0, len(lines) - 5, 6):
            out["plain"].append("".join(lines[i:i + 6]))
        out["bullet-text"] += _selfplay_text(f"{name}.txt").splitlines(True)
    for name in ("samplefen1000.epd", "sample_ethereal_fen.epd"):
        if (SHARED / "public" / name).exists():
            out["epd"] += (SHARED / "public" / name).read_text().splitlines(True)
    rng = random.Random(1)
    for line in out["bullet-text"][:20000]:
        fen, score, res = (p.strip() for p in line.split("|"))
        f = fen.split()
        tag = {"1.0": '"1-0"', "0.0": '"0-1"', "0.5": '"1/2-1/2"'}[res]
        shape = rng.randrange(4)
        if shape == 0:
            out["epd"].append(f"{' '.join(f[:4])} c9 {tag};\n")
        elif shape == 1:
            out["epd"].append(f"{fen} [{res}] {score}\n")
        elif shape == 2:
            out["epd"].append(f"{' '.join(f[:4])} hmvc {f[4]}; fmvn {f[5]}; c9 {tag};\n")
        else:
            out["epd"].append(f"{fen} c9 {tag};\n")
    return out


def _board_mutation(fen: str, rng: random.Random) -> str:
    import chess

    try:
        b = chess.Board(fen, chess960="KQkq" not in fen.split()[2] and fen.split()[2] != "-")
    except (ValueError, IndexError):
        return fen
    sq = rng.randrange(64)
    if rng.random() < 0.4:
        b.remove_piece_at(sq)
    else:
        b.set_piece_at(sq, chess.Piece(rng.randrange(1, 7), rng.random() < 0.5))
    f = fen.split()
    return " ".join([b.board_fen()] + f[1:])


def _random_move(fen: str, rng: random.Random) -> str:
    import chess

    try:
        f = fen.split()
        b = chess.Board(fen, chess960=f[2] not in ("-", "KQkq", "KQ", "kq", "K", "Q", "k", "q", "Kk", "Qq", "Kq", "Qk",
                                                    "KQk", "KQq", "Kkq", "Qkq"))
    except (ValueError, IndexError):
        return "e2e4"
    moves = list(b.legal_moves) if rng.random() < 0.6 else list(b.pseudo_legal_moves)
    if not moves:
        return "0000"
    m = rng.choice(moves)
    if b.is_castling(m) and rng.random() < 0.5:
        m = b._from_chess960(False, m.from_square, m.to_square)  # the king's two-square spelling
    return m.uci()


def _field(rec: str, fmt: str, rng: random.Random) -> str:
    """Replace one FEN field / value of a record by an edge token, or mutate its board or move."""
    lines = rec.split("\n")
    if fmt == "plain":
        i = rng.randrange(5)
        key = ("fen", "move", "score", "ply", "result")[i]
        if i >= len(lines) or not lines[i].startswith(key + " "):
            return rec
        val = lines[i][len(key) + 1:].rstrip("\r")
        if key == "fen":
            r = rng.random()
            if r < 0.35:
                val = _board_mutation(val, rng)
            else:
                f = val.split() or [""]
                j = rng.randrange(len(f))
                kind = ["castling", "castling", "ep", "counter", "counter"][min(max(j - 2, 0), 4)] if j >= 2 else None
                if kind:
                    f[j] = rng.choice(TOKENS[kind])
                else:
                    f.insert(rng.randrange(len(f) + 1), rng.choice(TOKENS["counter"]))
                val = " ".join(f)
        elif key == "move":
            val = _random_move(lines[0][4:], rng) if rng.random() < 0.6 else rng.choice(TOKENS["move"])
        else:
            val = rng.choice(TOKENS["score" if key == "score" else "counter" if key == "ply" else "result"])
        lines[i] = f"{key} {val}"
        return "\n".join(lines)
    line = lines[0]
    if fmt == "bullet-text":
        parts = line.split("|")
        if len(parts) != 3:
            return rec
        j = rng.randrange(3)
        if j == 0:
            if rng.random() < 0.4:
                parts[0] = _board_mutation(parts[0].strip(), rng) + " "
            else:
                f = parts[0].split() or [""]
                k = rng.randrange(len(f))
                f[k] = rng.choice(TOKENS[["castling", "castling", "castling", "ep", "counter", "counter"][min(k, 5)]])
                parts[0] = " ".join(f) + " "
        else:
            parts[j] = " " + rng.choice(TOKENS["score" if j == 1 else "result"]) + ("" if j == 2 else " ")
        return "|".join(parts) + "\n"
    f = line.split(" ")
    if rng.random() < 0.35:
        return " ".join([_board_mutation(" ".join(f[:4]), rng)] + f[4:]) + "\n"
    k = rng.randrange(len(f))
    pool = (["castling"] * 3 + ["ep"]) [k - 1] if 1 <= k <= 3 else rng.choice(["counter", "result", "score"])
    f[k] = rng.choice(TOKENS[pool] + ['c9', 'hmvc', 'fmvn', '"1-0";', '[1.0]', ';'])
    return " ".join(f) + "\n"


def mutate(rec: str, fmt: str, rng: random.Random) -> bytes:
    """One record's text with 1 to 3 mutations, as bytes."""
    soft = rng.random() < 0.4  # one field-level mutation: mostly valid records, exercising the checks
    for _ in range(1 if soft else rng.choice((1, 1, 2, 3))):
        r = 0.0 if soft else rng.random()
        if r < 0.45:
            rec = _field(rec, fmt, rng)
        elif r < 0.55 and fmt == "plain":
            lines = rec.split("\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            op = rng.randrange(3)
            if op == 0:
                del lines[i]
            elif op == 1:
                lines.insert(i, lines[j])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            rec = "\n".join(lines)
        else:
            data = rec.encode("utf-8", "surrogateescape")
            i = rng.randrange(len(data) + 1)
            op = rng.randrange(3)
            tok = rng.choice(BYTES) if rng.random() < 0.8 else bytes([rng.randrange(256)])
            if op == 0:
                data = data[:i] + tok + data[i + 1:]
            elif op == 1:
                data = data[:i] + tok + data[i:]
            else:
                data = data[:i] + data[i + rng.randrange(1, 4):]
            rec = data.decode("utf-8", "surrogateescape")
    return rec.encode("utf-8", "surrogateescape")


def make_file(recs: list[str], fmt: str, rng: random.Random, n: int, start: int) -> bytes:
    """A valid head, then n mutated records from recs (cycled from ``start``), with a whole-file variant now and then
    (CRLF or CR line ends, a leading BOM)."""
    # a valid head past the 64 KiB pack reads to tell text from binary (a NUL or U+FFFD there
    # refuses the whole file): the mutations after it reach the readers
    head, i = [], start
    while sum(map(len, head)) < 70_000:
        head.append(recs[i % len(recs)])
        i += 1
    good = "".join(head).encode()
    body = b"".join(mutate(recs[(start + i) % len(recs)], fmt, rng) for i in range(n))
    data = good + body
    r = rng.random()
    if r < 0.15:
        data = data.replace(b"\n", b"\r\n")
    elif r < 0.25:
        data = data.replace(b"\n", b"\r")
    if rng.random() < 0.15:
        data = b"\xef\xbb\xbf" + data
    return data


def both(path: Path, fmt: str, work: Path) -> dict:
    """Pack ``path`` with the compiled and the reference path; raise AssertionError on any
    difference. Returns the summary (or the shared FormatError text)."""
    import pyarrow.parquet as pq

    from nnue.pipeline import manifest as mf
    from nnue.pipeline.formats import FormatError, ReaderOptions
    from nnue.pipeline.pack import pack

    out = []
    for fast in (True, False):
        ds = work / f"ds-{fast}"
        shutil.rmtree(ds, ignore_errors=True)
        t = time.process_time()
        try:
            s = pack([path], ds, fmt=fmt, options=ReaderOptions(fast=fast), progress=False)
        except FormatError as e:
            out.append(("FormatError", str(e).replace(str(ds), "DS")))
            continue
        (part,) = ds.glob("part-*.parquet")
        (rej,) = ds.glob("rejects-*.jsonl")
        castling = [e.get("castling") for e in mf.load(ds)["files"].values()]
        out.append((s["read"], s["packed"], s["rejected"], castling, pq.read_table(part), rej.read_text(),
                    time.process_time() - t))
    a, b = out
    if a[0] == "FormatError" or b[0] == "FormatError":
        assert a == b, (a, b)
        return {"format_error": a[1]}
    assert a[:4] == b[:4], (a[:4], b[:4])
    if not a[4].equals(b[4]):
        for name in a[4].column_names:
            x, y = a[4].column(name).to_pylist(), b[4].column(name).to_pylist()
            if x != y:
                i = next((i for i in range(min(len(x), len(y))) if x[i] != y[i]), min(len(x), len(y)))
                raise AssertionError(f"column {name} row {i}: {x[i:i + 1]} vs {y[i:i + 1]}")
    if a[5] != b[5]:
        la, lb = a[5].splitlines(), b[5].splitlines()
        i = next((i for i in range(min(len(la), len(lb))) if la[i] != lb[i]), min(len(la), len(lb)))
        raise AssertionError(f"rejects differ at {i}: {la[i:i + 1]} vs {lb[i:i + 1]}")
    return {"read": a[0], "packed": a[1], "rejected": sum(a[2].values()), "fast_cpu_s": a[6], "slow_cpu_s": b[6]}


def fuzz(fmt: str, records: int, file_records: int, seed: int, work: Path, limit_s: float) -> dict:
    from nnue.pipeline.compiled import text as ct

    recs = _sources()[fmt]
    rng = random.Random(seed)
    totals = {"read": 0, "packed": 0, "rejected": 0, "files": 0, "format_errors": 0, "fast_cpu_s": 0.0,
              "slow_cpu_s": 0.0}
    h0 = ct.HANDED.get(fmt, 0)
    t0 = time.time()
    done = 0

    def hang(signum, frame):
        raise TimeoutError(f"a file took longer than {limit_s} s (hang?)")

    signal.signal(signal.SIGALRM, hang)
    while done < records:
        n = min(file_records, records - done)
        path = work / f"fuzz-{totals['files']}.{EXT[fmt]}"
        path.write_bytes(make_file(recs, fmt, rng, n, rng.randrange(len(recs))))
        signal.alarm(int(limit_s))
        try:
            r = both(path, fmt, work)
        except AssertionError as e:
            keep = work.parent / f"fuzz-fail-{fmt}.{EXT[fmt]}"
            shutil.copy(path, keep)
            raise AssertionError(f"{fmt}: compiled and python-chess paths differ on {keep}: {e}") from None
        finally:
            signal.alarm(0)
        totals["files"] += 1
        if "format_error" in r:
            totals["format_errors"] += 1
        else:
            for k in ("read", "packed", "rejected", "fast_cpu_s", "slow_cpu_s"):
                totals[k] += r[k]
        done += n
        print(f"{fmt}: {done}/{records} mutated records, {totals['read']} read, {totals['packed']} packed, "
              f"{time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    totals["fast_cpu_s"] = round(totals["fast_cpu_s"], 1)
    totals["slow_cpu_s"] = round(totals["slow_cpu_s"], 1)
    return {"fuzz": f"compiled text core ({fmt})", "seed": seed,
            "numba_boundscheck": os.environ.get("NUMBA_BOUNDSCHECK") == "1",
            "mutated_records": done, "source_records": len(recs), "file_records": file_records, **totals,
            "handed_to_python": ct.HANDED.get(fmt, 0) - h0,
            "fuzz_seconds": round(time.time() - t0, 1),
            "notes": "fast_cpu_s includes the kernels' numba compile in the first file (an empty cache, bounds "
                     "checks on); handed_to_python counts records read by the line machine (every reject, and "
                     "short runs before one)",
            "result": "no crash, no hang, every record packed or rejected; compiled == python-chess path "
                      "(tables, rejects, counts, castling spelling)"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--file-records", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--formats", default="plain,bullet-text,epd")
    ap.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--limit-s", type=float, default=1200)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in a.formats.split(","):
            work = Path(tmp) / fmt.replace("-", "_")
            work.mkdir()
            res = fuzz(fmt, a.records, a.file_records, a.seed, work, a.limit_s)
            out = a.out_dir / f"fuzz_{fmt.replace('-', '_')}.json"
            out.write_text(json.dumps(res, indent=1) + "\n")
            print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
