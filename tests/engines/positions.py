"""Positions of real games for the engine tests: the bundled sample's (data/sample, our own
Stockfish 15.1 self-play), not in check."""
from __future__ import annotations

import functools
from pathlib import Path

import chess

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample" / "sf15-n5000-s1-sample.plain"


@functools.lru_cache(maxsize=None)
def _all() -> tuple[str, ...]:
    fens = [line[4:].strip() for line in SAMPLE.read_text().splitlines() if line.startswith("fen ")]
    return tuple(dict.fromkeys(f for f in fens if not chess.Board(f).is_check()))


def sample_fens(n: int) -> list[str]:
    """The first ``n`` distinct positions of the sample that are not in check."""
    fens = _all()
    assert len(fens) >= n, f"the sample holds {len(fens)} positions not in check, {n} asked"
    return list(fens[:n])
