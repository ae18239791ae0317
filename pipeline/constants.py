"""The score and flag constants every layer shares: one copy, no imports (a leaf module that the
format readers, the compiled decoders, the packer, the schema and self-play import).

Scores are Stockfish's (``types.h``): ``VALUE_NONE`` 32002 marks a position with no score (the
``.plain`` format's ``score 32002``, a binpack or marlinformat eval of 32002); ``VALUE_MATE``
32000 is a mate at the root, ``MATE - n`` a mate in ``n`` plies; ``MATE_BOUND`` =
``VALUE_MATE - MAX_PLY`` (32000 − 246 = 31754) is Stockfish's ``VALUE_MATE_IN_MAX_PLY``: a score of
magnitude ``>= MATE_BOUND`` is a mate score, not a regression target. All three are centipawn-unit
int16 values, side-to-move point of view where a format says so (``../shared/FORMATS.md``).

The ``flags`` column's bits (:mod:`nnue.pipeline.schema`): ``FLAG_SCORE_NONE`` no score (the
score column then holds 0), ``FLAG_SCORE_MATE`` a mate score, ``FLAG_PLY_UNKNOWN`` the source had
no ply or move counters (the ply column then holds 0).
"""
from __future__ import annotations

VALUE_NONE = 32002
MATE = 32000
MAX_PLY = 246
MATE_BOUND = MATE - MAX_PLY  # 31754

FLAG_SCORE_NONE = 1
FLAG_SCORE_MATE = 2
FLAG_PLY_UNKNOWN = 4
