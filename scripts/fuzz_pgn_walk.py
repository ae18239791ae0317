"""Fuzz the PGN game walk that cuts PGN files into byte ranges
(``pipeline/compiled/ranges.py: pgn_game_starts``) against python-chess's ``chess.pgn.read_game``.

``python scripts/fuzz_pgn_walk.py [--noise N] [--files N] [--games N] [--seed S] [--out FILE]``

Three parts, each with its own count in the JSON:

- ``--noise`` files of structural noise: 1 to 40 lines drawn from PGN's structure (tags, blank and
  space-only lines with Unicode spaces, ``%``/``;`` lines, BOMs, comments opened and closed over
  lines, variations, a move that does not parse then ``)`` and a NAG of 5,000 digits so that
  ``read_game`` raises, NAGs of 639 and 640 digits, bytes that do not decode, bad FENs), ``\\n``/``\\r\\n``/``\\r`` line ends;
- ``--files`` files of 1 to 8 self-play games with the PGN fuzzer's edits
  (``scripts/fuzz_compiled_pgn.py``: bytes of PGN's alphabet, control and non-ASCII bytes,
  rewrites with CR/CRLF, BOMs, tabs, comments over lines);

  on both, the walk's game starts must be the offsets at which ``read_game`` starts each game,
  and where ``read_game`` raises, the raising game must be flagged (``suspect``);
- ``--games`` mutated games in large files, walked only (no oracle), for crashes and hangs.

Run it with ``NUMBA_BOUNDSCHECK=1 NUMBA_CACHE_DIR=$(mktemp -d)`` (as for the committed result) so
that an out-of-bounds read raises instead of reading past the buffer. Writes
``bench/results/fuzz_pgn_walk.json``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import random
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"

# lines of PGN's structure (see the module docstring)
TOKENS = [b'[Event "x"]', b'[FEN "bad fen"]', b'[FEN "8/8/8/8/8/8/8/K1k5 w - - 0 1"]', b'', b' ', b'\t',
          b'\xc2\xa0', b'\xe2\x80\x83', b'\xe3\x80\x80', b'\x0c', b'\x1d', b'\xef\xbb\xbf', b'\xef\xbb\xbf[Event "y"]',
          b'\xc2', b'\xe2\x80', b'\xa0', b' \x85', b'\xe9', b'%x', b';c', b'{', b'}', b'{a}', b'1. e4 e5', b'2. Nf3 {c} Nc6', b'(', b')',
          b'1. e4 (1. d4) e5', b'1. e4 Qxh8 ) e5 2. Nf3', b'*', b'1-0', b'[', b'[x', b'e4 ; { }', b'{ ; }', b'} {',
          b'1. e4 { open', b'close } e5', b'e4 ) {', b'e4 $' + b'7' * 5000 + b' e5', b'$' + b'1' * 639, b'$' + b'1' * 640]
ENDS = [b"\n", b"\n", b"\n", b"\r\n", b"\r"]


def _fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_compiled_pgn", REPO / "scripts" / "fuzz_compiled_pgn.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_game_starts(data: bytes) -> tuple[list[int], int | None]:
    """The oracle: the byte offset at which each read_game call that returns a game starts, reading
    ``data`` as the PGN reader does (``formats.pgn._Source``); and the offset of the call that
    raised, if one did (None)."""
    import chess.pgn

    from nnue.pipeline.formats.pgn import _Source

    logging.getLogger("chess.pgn").setLevel(logging.CRITICAL)
    src = _Source(None, data)
    out = []
    while True:
        p = src.pos
        try:
            game = chess.pgn.read_game(src)
        except Exception:  # noqa: BLE001 - as the PGN reader catches it (formats.pgn._one_game)
            return out, p
        if game is None:
            return out, None
        out.append(p)


def walk(data: bytes):
    """(game starts as a list, suspect flags) of the compiled walk."""
    import numpy as np

    from nnue.pipeline.compiled.ranges import pgn_game_starts

    starts, suspect = pgn_game_starts(np.frombuffer(data, np.uint8))
    return starts.tolist(), suspect


def agree(data: bytes) -> tuple[bool, bool]:
    """(the walk is read_game's splitting, read_game raised): up to a game that makes read_game
    raise, which must be flagged."""
    want, raised = read_game_starts(data)
    got, suspect = walk(data)
    if raised is None:
        return got == want, False
    k = len(want)
    return got[:k] == want and len(got) > k and got[k] == raised and bool(suspect[k]), True


def noise(rng: random.Random) -> bytes:
    lines = [b" ".join(rng.choice(TOKENS) for _ in range(rng.choice([1, 1, 1, 2, 3]))) + rng.choice(ENDS)
             for _ in range(rng.randint(1, 40))]
    data = b"".join(lines)
    return data.rstrip(b"\r\n") if rng.random() < 0.3 else data


def mutated(rng: random.Random, games: list, fz, count: int) -> bytes:
    """``count`` self-play games, each rewritten (30%) and edited (0 to 12 edits) by the PGN fuzzer."""
    parts = []
    for _ in range(count):
        g = rng.choice(games)[0]
        if rng.random() < 0.3:
            g = fz._rewrite(g, rng)
        b = bytearray(g.encode())
        fz._mutate(b, rng, rng.randint(0, 12), 100_000)
        parts.append(bytes(b))
    return b"".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--noise", type=int, default=200_000)
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--games", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "fuzz_pgn_walk.json"))
    a = ap.parse_args()
    fz = _fuzzer()
    games = fz._games(SHARED / "selfplay" / "sf15-n5000-s1.pgn") + fz._games(SHARED / "selfplay" / "sf15-960-xfen-s2.pgn")
    rng = random.Random(a.seed)
    report = {"fuzz": "PGN game walk (byte ranges)", "seed": a.seed,
              "numba_boundscheck": os.environ.get("NUMBA_BOUNDSCHECK") == "1"}
    t0 = time.perf_counter()
    for part, count, make in (("noise", a.noise, lambda: noise(rng)),
                              ("mutated_files", a.files, lambda: mutated(rng, games, fz, rng.randint(1, 8)))):
        raised = 0
        for i in range(count):
            data = make()
            ok, r = agree(data)
            if not ok:
                bad = Path(a.out).with_suffix(".failing.pgn")
                bad.write_bytes(data)
                raise SystemExit(f"{part} case {i}: the walk is not read_game's splitting; input in {bad}")
            raised += r
        report[part] = {"cases": count, "read_game_raised": raised}
        print(json.dumps({part: report[part]}), flush=True)
    walked = starts = 0
    while walked < a.games:
        data = mutated(rng, games, fz, 5000)
        walked += 5000
        starts += len(walk(data)[0])
    report["walked_only"] = {"games": walked, "game_starts": starts}
    report["seconds"] = round(time.perf_counter() - t0, 1)
    report["result"] = ("no crash, no hang; the walk's game starts are read_game's on every file, and every "
                        "game that made read_game raise was flagged")
    Path(a.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
