"""Point-of-view check of a packed PGN file: do its evals agree in sign with its game results?

A PGN's engine-runner comments (``{+0.35/12}``) are read from the mover's point of view unless
``--pgn-pov white`` says otherwise (FORMATS.md; lichess ``[%eval]`` is white's by that site's
convention and read so whatever the option). When a file's comments are really from the other
point of view, every position with black to move gets the wrong sign, and nothing in one comment
says so. The results of decisive games do: in a correctly read file, a position's eval (side to
move's POV) mostly has the sign of the game's result for the side to move. :func:`counts` tallies
that for the positions with black to move (the only ones the option changes), and
:func:`warning` words one line when they disagree far more often than they agree.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from .parts import read_part

from .schema import FLAG_SCORE_NONE

MIN_CP = 50        # |eval| in centipawns below which a position says nothing about the result
MIN_POSITIONS = 20  # disagreeing positions needed before a warning (a few games prove nothing)
RATIO = 3           # "far more often": disagreements at least this many times the agreements


def counts(dataset: Path, parts: list[str]) -> dict:
    """{"agree", "disagree"}: positions with black to move in decisive games, with a score of at
    least MIN_CP centipawns in magnitude (mates included), whose score (side-to-move POV) has the
    sign of the game's result for the side to move, or the opposite sign."""
    agree = disagree = 0
    for name in parts:
        t = read_part(Path(dataset) / name, ["board", "score", "result", "flags"])
        if not t.num_rows:
            continue
        boards = t.column("board").combine_chunks()
        # the board column is fixed-size binary of 32 bytes: byte 24 bit 7 is "black to move"
        raw = np.frombuffer(boards.buffers()[1], np.uint8)[boards.offset * 32:(boards.offset + len(boards)) * 32]
        black = (raw.reshape(-1, 32)[:, 24] >> 7).astype(bool)
        score = t.column("score").to_numpy().astype(np.int64)
        result = t.column("result").to_numpy().astype(np.int64)
        flags = t.column("flags").to_numpy()
        use = black & (result != 0) & ((flags & FLAG_SCORE_NONE) == 0) & (np.abs(score) >= MIN_CP)
        same = np.sign(score[use]) == np.sign(result[use])
        agree += int(same.sum())
        disagree += int((~same).sum())
    return {"agree": agree, "disagree": disagree}


def warning(entry: dict, pgn_pov: str) -> str | None:
    """One line when a packed PGN file's ``pov_check`` counts disagree far more often than they
    agree (the other ``--pgn-pov`` is named), else None."""
    c = entry.get("pov_check")
    if not c or c["disagree"] < MIN_POSITIONS or c["disagree"] < RATIO * c["agree"]:
        return None
    other = "white" if pgn_pov == "mover" else "mover"
    read = "the mover's" if pgn_pov == "mover" else "white's"
    return (f"{entry['path']}: its evals were read from {read} point of view, but with black to move they "
            f"disagree in sign with the results of its decisive games {c['disagree']} times and agree "
            f"{c['agree']} times (|eval| >= {MIN_CP} cp): were they written from the other point of view? "
            f"Then pack it again with --pgn-pov {other} into a new dataset")
