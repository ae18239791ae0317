"""The dataset's Parquet schemas (flat rows and move chains), their versions, and the meaning of the ``flags`` bits.

Logical columns (what every reader sees, :mod:`nnue.pipeline.parts`; the flat layout stores
them as they are) (DESIGN.md "Dataset columns"):

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

FLAT_VERSION = 1
CHAINED_V2 = 2  # move chains, in_check / best_move_is_capture / flags stored as they are
CHAINED_VERSION = 3  # move chains, those three and result in one ``status`` column (nnue.pipeline.parts)
CHAINED_VERSIONS = (CHAINED_V2, CHAINED_VERSION)
# what `nnue pack` writes into a new dataset, and the manifests this build writes and reads
SCHEMA_VERSION = CHAINED_VERSION
READABLE_VERSIONS = (FLAT_VERSION, CHAINED_V2, CHAINED_VERSION)
SCHEMA_KEY = "nnue_forge_schema_version"
ANNOTATION_COLUMNS = ("base_eval", "teacher_eval")

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
], metadata={SCHEMA_KEY: str(FLAT_VERSION)})

# The chained layout (schemas 2 and 3): what each physical column holds and how the logical
# columns come back is in nnue.pipeline.parts; the move index in nnue.pipeline.compiled.chain.
CHAINED_SCHEMA_V2 = pa.schema([
    ("stem", pa.binary(32)),
    ("move", pa.uint16()),
    ("move_raw", pa.uint16()),
    ("score_delta", pa.uint32()),
    ("result", pa.int8()),
    ("ply_reset", pa.uint16()),
    ("piece_count_reset", pa.uint8()),
    ("in_check", pa.bool_()),
    ("best_move_is_capture", pa.bool_()),
    ("game_id", pa.uint64()),
    ("source", pa.dictionary(pa.int32(), pa.string())),
    ("flags", pa.uint8()),
], metadata={SCHEMA_KEY: str(CHAINED_V2)})
CHAINED_SCHEMA = pa.schema([
    ("stem", pa.binary(32)),
    ("move", pa.uint16()),
    ("move_raw", pa.uint16()),
    pa.field("score_delta", pa.uint32(), nullable=False),  # every row has one
    ("ply_reset", pa.uint16()),
    ("piece_count_reset", pa.uint8()),
    pa.field("status", pa.uint16(), nullable=False),
    ("game_id", pa.uint64()),
    ("source", pa.dictionary(pa.int32(), pa.string())),
], metadata={SCHEMA_KEY: str(CHAINED_VERSION)})
# status bits: flags (FLAG_*, bits 0-3), in_check and its null, best_move_is_capture and its null,
# result + 1 (bits 8-9) and its null
STATUS_FLAGS, STATUS_CHECK, STATUS_CHECK_NULL, STATUS_CAPTURE, STATUS_CAPTURE_NULL = 0x0F, 0x10, 0x20, 0x40, 0x80
STATUS_RESULT_SHIFT, STATUS_RESULT_NULL = 8, 0x400
# columns written without min/max statistics (opaque bytes, never filtered on)
STATS_OFF = ("stem", "board")
