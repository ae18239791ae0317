"""The dataset's Parquet schema, its version, and the meaning of the ``flags`` bits.

Columns (DESIGN.md "Dataset columns"):

* ``board``: fixed_size_binary(32), marlinformat PackedBoard (:mod:`nnue.pipeline.board`);
  its eval field holds the score (white POV, 0 when there is none) and its wdl the result.
* ``score``: int16, side-to-move POV, in the dataset's score unit (manifest ``score_unit``).
* ``result``: int8, −1/0/+1, side-to-move POV.
* ``ply``: uint16 game ply (0 = white's first move); see FLAG_PLY_UNKNOWN.
* ``piece_count``: uint8, kings included. ``in_check``: bool, side to move in check.
* ``best_move``: uint16 nullable, packed like viriformat (from bits 0–5, to 6–11, promotion
  N/B/R/Q = 0–3 in 12–13, flag 14–15: 1 en passant, 2 castling as king takes rook, 3 promotion).
* ``best_move_is_capture``: bool nullable, true for captures and promotions.
* ``game_id``: uint64, hash of the game's first 16 positions (``pack.GameIds``): the same game
  has the same id whatever file or format it came from; manifest entry ``game_ids``.
* ``source``: string, the first 16 hex digits of the source file's sha256 (manifest key).
* ``flags``: uint8 bit set, FLAG_* below.

Optional columns, added by ``nnue annotate`` (:mod:`nnue.pipeline.annotate`; not in SCHEMA, so
the schema version does not change): ``base_eval`` and ``teacher_eval``, int16 nullable,
centipawns, side-to-move POV (null: Stockfish printed no static eval, side to move in check).
"""
from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

# the flags bits (one copy: nnue.pipeline.constants): no score (VALUE_NONE, book move, no comment;
# score column 0), a mate score (not a regression target), no ply or move counters (ply column 0)
from .constants import FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE  # noqa: F401

SCHEMA = pa.schema([
    ("board", pa.binary(32)),
    ("score", pa.int16()),
    ("result", pa.int8()),
    ("ply", pa.uint16()),
    ("piece_count", pa.uint8()),
    ("in_check", pa.bool_()),
    ("best_move", pa.uint16()),
    ("best_move_is_capture", pa.bool_()),
    ("game_id", pa.uint64()),
    ("source", pa.dictionary(pa.int32(), pa.string())),
    ("flags", pa.uint8()),
], metadata={"nnue_forge_schema_version": str(SCHEMA_VERSION)})
