"""Fuzz the compiled PGN reader (pipeline/compiled/pgn.py) with mutated games, against the
python-chess reader.

``python scripts/fuzz_compiled_pgn.py [--positions N] [--seed S] [--per-file N] [--out FILE]``

The self-play games (standard and Chess960, ../shared/data/selfplay) are repeated until the files
hold at least ``--positions`` positions. About one game in three gets 1 to 6 random edits (a byte
replaced, inserted or deleted, drawn from PGN's own characters: braces, brackets, parentheses,
``;``/``%``, NAG and move marks, digits, files, piece letters, quotes, CR/LF, and now and then a
non-ASCII or control byte); one game in twenty is rewritten whole (CRLF or CR line ends, comments
broken over lines, a BOM, tabs, ``[%eval]`` comments in place of the cutechess ones). Each file of
``--per-file`` positions is packed by the compiled path (``ReaderOptions(fast=True)``) and by the
python-chess path (``fast=False``); they must give identical tables (every column of every row),
rejects files, counts and per-record locations (tests/formats/pgn_testlib.py: ``both``). A numba
fault would kill the process; a hang would never finish (the JSON records the time).

Run it with ``NUMBA_BOUNDSCHECK=1 NUMBA_CACHE_DIR=$(mktemp -d)`` (as for the committed result):
numba then checks every array index, and an out-of-bounds read raises IndexError instead of
reading past a buffer silently; the JSON records whether it was on. Writes
``bench/results/fuzz_pgn.json``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
ALPHABET = b" \n\r\t{}()[];%$!?+-#=x.0123456789abcdefghNBRQKOPZ@M/\"*"
ODD = [b"\x0b", b"\x0c", b"\x1c", b"\x7f"]
# non-ASCII (valid and invalid UTF-8) and NUL: only past the first 64 KiB, which pack checks for text
BAD = [b"\xc2\xa0", b"\xc3\xa9", b"\xef\xbb\xbf", b"\xc2\x85", b"\x00", b"\x80", b"\xff", b"\xc3"]


def _lib():
    spec = importlib.util.spec_from_file_location("pgn_testlib", REPO / "tests" / "formats" / "pgn_testlib.py")
    lib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lib)
    return lib


def _games(path: Path) -> list[tuple[str, int]]:
    """(game text ending with its blank line, positions) of a PGN file."""
    text = path.read_text()
    parts = re.split(r"\n\n(?=\[Event )", text)
    out = []
    for g in parts:
        g = g.rstrip("\n") + "\n\n"
        out.append((g, len(re.findall(r"\{", g))))
    return out


def _mutate(b: bytearray, rng: random.Random, k: int, offset: int) -> None:
    for _ in range(k):
        i = rng.randrange(len(b) + 1)
        op = rng.random()
        if rng.random() < 0.05:
            c = rng.choice(ODD + (BAD if offset > 70_000 else []))
        else:
            c = bytes([rng.choice(ALPHABET)])
        if op < 0.4 and i < len(b):
            b[i:i + 1] = c
        elif op < 0.7:
            b[i:i] = c
        elif i < len(b):
            del b[i:i + rng.randint(1, 8)]


def _rewrite(g: str, rng: random.Random) -> str:
    k = rng.randrange(5)
    if k == 0:
        return g.replace("\n", rng.choice(["\r\n", "\r"]))
    if k == 1:
        return g.replace(" 0.0", "\n 0.0", rng.randint(1, 5))
    if k == 2:
        return "\ufeff" + g
    if k == 3:
        return g.replace(" ", "\t", rng.randint(1, 50))
    return re.sub(r"\{ ([+-]?)(\d+\.\d+)/\d+ [^}]*\}", lambda m: f"{{ [%eval {m.group(1)}{m.group(2)},12] }}", g)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--positions", type=int, default=1_000_000)
    ap.add_argument("--per-file", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "fuzz_pgn.json"))
    a = ap.parse_args()
    rng = random.Random(a.seed)
    lib = _lib()
    games = _games(SHARED / "selfplay" / "sf15-n5000-s1.pgn") + _games(SHARED / "selfplay" / "sf15-960-xfen-s2.pgn")
    totals = {"positions_read": 0, "packed": 0, "rejected": {}, "handed_to_python_chess": 0, "files": 0,
              "games": 0, "mutated_games": 0, "rewritten_games": 0}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        while totals["positions_read"] < a.positions:
            chunks, n = [games[0][0].encode()], games[0][1]  # an intact first game: the file is PGN
            size = len(chunks[0])
            while n < a.per_file:
                g, k = rng.choice(games)
                totals["games"] += 1
                if rng.random() < 0.05:
                    g = _rewrite(g, rng)
                    totals["rewritten_games"] += 1
                b = bytearray(g.encode())
                if rng.random() < 0.33:
                    _mutate(b, rng, rng.randint(1, 6), size)
                    totals["mutated_games"] += 1
                chunks.append(bytes(b))
                size += len(b)
                n += k
            d = work / f"f{totals['files']}"
            d.mkdir()
            s = lib.both(d, b"".join(chunks), name="fuzz", pov=rng.choice(["mover", "white"]))
            totals["files"] += 1
            if s is None:
                print("both paths refuse the file alike:", lib.both.last_error[:300], flush=True)
                totals["refused_files"] = totals.get("refused_files", 0) + 1
            if s is not None:
                totals["positions_read"] += s["read"]
                totals["packed"] += s["packed"]
                totals["handed_to_python_chess"] += s["handed"]
                for r, c in s["rejected"].items():
                    totals["rejected"][r] = totals["rejected"].get(r, 0) + c
            print(json.dumps({k: totals[k] for k in ("files", "positions_read", "handed_to_python_chess")}),
                  flush=True)
            import shutil

            shutil.rmtree(d)
    report = {
        "fuzz": "compiled PGN reader", "seed": a.seed,
        "numba_boundscheck": os.environ.get("NUMBA_BOUNDSCHECK") == "1",
        **totals,
        "handed_share": round(totals["handed_to_python_chess"] / max(totals["positions_read"], 1), 4),
        "seconds": round(time.perf_counter() - t0, 1),
        "result": ("no crash, no hang; every position packed or rejected; compiled and python-chess paths "
                   "give identical tables, rejects files, counts and locations on every file"),
    }
    Path(a.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
