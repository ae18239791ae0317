"""Cut the self-play files the tests read from ../shared/data/selfplay into tests/data/selfplay/.

Our own Stockfish 15.1 self-play (see ../shared/data/README.md), whole games only, zstd-compressed:

- ``sf15-960-xfen-s2.{plain,txt,pgn}``: the whole Chess960 set (40 games, 4,586 positions).
- ``sf15-n2000-s11-cut.{plain,txt,pgn}``: every 18th game of ``sf15-n2000-s11`` (2,000 games), plus
  the first games (in file order) that bring each piece count 3..32 to at least 8 positions, so
  the C cross-checks reach every output bucket. The three files hold the same games in the same
  order, as in the source set.

Deterministic: running it again writes the same bytes. Usage: python scripts/cut_test_data.py
"""
from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import zstandard

REPO = Path(__file__).resolve().parents[1]
SRC = REPO.parent / "shared" / "data" / "selfplay"
OUT = REPO / "tests" / "data" / "selfplay"
EVERY = 18
PER_PIECE_COUNT = 8


def _write(path: Path, data: bytes) -> None:
    """zstd level 19, written atomically (temp + rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(zstandard.ZstdCompressor(level=19).compress(data))
    os.replace(tmp, path)


def _pgn_games(text: str) -> list[str]:
    """The games of a PGN file, each from its [Event tag to just before the next one."""
    starts = [m.start() for m in re.finditer(r"^\[Event ", text, re.M)]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


def _plain_positions(text: str) -> list[str]:
    """The position blocks of a .plain file (fen .. e), in order."""
    blocks = text.split("\ne\n")
    assert blocks[-1] == "", "a .plain file ends with an 'e' line"
    return [b + "\ne\n" for b in blocks[:-1]]


def _pieces(fen: str) -> int:
    return sum(c.isalpha() for c in fen.split()[0])


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for ext in ("plain", "txt", "pgn"):
        _write(OUT / f"sf15-960-xfen-s2.{ext}.zst", (SRC / f"sf15-960-xfen-s2.{ext}").read_bytes())

    name = "sf15-n2000-s11"
    games = _pgn_games((SRC / f"{name}.pgn").read_text())
    plain = _plain_positions((SRC / f"{name}.plain").read_text())
    txt = (SRC / f"{name}.txt").read_text().splitlines(keepends=True)
    assert len(plain) == len(txt)
    # positions per game: the lines of each game are consecutive; a game ends where the next
    # position is not the previous one's successor (its FEN differs from the .plain move applied),
    # found here from the PGN's move count (one position per move).
    import chess.pgn
    import io

    sizes = [sum(1 for _ in chess.pgn.read_game(io.StringIO(g)).mainline_moves()) for g in games]
    assert sum(sizes) == len(plain), (sum(sizes), len(plain))
    bounds, start = [], 0
    for s in sizes:
        bounds.append((start, start + s))
        start += s
    counts: dict[int, int] = {}
    chosen = set(range(0, len(games), EVERY))
    for g in sorted(chosen):
        for i in range(*bounds[g]):
            k = _pieces(plain[i].split("\n", 1)[0][4:])
            counts[k] = counts.get(k, 0) + 1
    for g in range(len(games)):
        if all(counts.get(k, 0) >= PER_PIECE_COUNT for k in range(3, 33)):
            break
        if g in chosen:
            continue
        ks = [_pieces(plain[i].split("\n", 1)[0][4:]) for i in range(*bounds[g])]
        if any(counts.get(k, 0) < PER_PIECE_COUNT for k in ks):
            chosen.add(g)
            for k in ks:
                counts[k] = counts.get(k, 0) + 1
    assert all(counts.get(k, 0) >= PER_PIECE_COUNT for k in range(3, 33)), counts
    order = sorted(chosen)
    n = sum(sizes[g] for g in order)
    _write(OUT / f"{name}-cut.pgn.zst", "".join(games[g] for g in order).encode())
    _write(OUT / f"{name}-cut.plain.zst", "".join(plain[i] for g in order for i in range(*bounds[g])).encode())
    _write(OUT / f"{name}-cut.txt.zst", "".join(txt[i] for g in order for i in range(*bounds[g])).encode())
    print(f"{name}-cut: {len(order)} games, {n} positions; piece counts {min(counts)}..{max(counts)}")


if __name__ == "__main__":
    main()
