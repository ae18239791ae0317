"""Positions of real games for the engine tests: the bundled sample's (data/sample, our own
Stockfish 15.1 self-play), not in check (:func:`nnue.bench.sample_fens`, which the benches use too)."""
from __future__ import annotations

from nnue.bench import SAMPLE, sample_fens  # noqa: F401
