"""Where the tests' sample files are: the bundled sample, our own self-play cut into the repo, and
the third-party samples of ../shared/data/public (the only ones a test may skip without).

- ``SAMPLE``: ``data/sample/sf15-n5000-s1-sample.plain``, 38 games, 4,015 positions.
- :func:`selfplay`: a file of ``tests/data/selfplay/`` (our own Stockfish 15.1 self-play, whole
  games, stored zstd-compressed; ``scripts/cut_test_data.py`` cut them from
  ../shared/data/selfplay), handed back decompressed under its own name:

  ========================== ===== ========= ===================================================
  name (.plain, .txt, .pgn)  games positions what
  ========================== ===== ========= ===================================================
  ``sf15-960-xfen-s2``       40    4,586     the whole Chess960 set (X-FEN castling rights)
  ``sf15-n2000-s11-cut``     112   12,678    every 18th game of sf15-n2000-s11, plus the games
                                             that bring every piece count 3..32 to 8 positions
  ========================== ===== ========= ===================================================

- :func:`public`: a file of ../shared/data/public (GPL/AGPL/MIT samples of other projects that we
  may not copy into the repo); the calling test skips, naming the missing file, without it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import nnue.bench as _bench

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SAMPLE = REPO / "data" / "sample" / "sf15-n5000-s1-sample.plain"
PUBLIC = REPO.parent / "shared" / "data" / "public"

#: the self-play cut of tests/data/selfplay (sf15-n2000-s11-cut.*): games and positions
CUT = _bench.CUT
CUT_GAMES = 112
CUT_POSITIONS = 12_678
#: the whole Chess960 set (sf15-960-xfen-s2.*)
XFEN960 = _bench.XFEN960
XFEN960_POSITIONS = 4586


def selfplay_zst(name: str) -> Path:
    """The compressed file of ``name`` in tests/data/selfplay (:func:`nnue.bench.selfplay_zst`)."""
    from nnue.bench import selfplay_zst as zst

    return zst(name)


def selfplay(name: str) -> Path:
    """``tests/data/selfplay/<name>.zst`` decompressed, under its own name, into a per-machine
    cache (:func:`nnue.bench.shipped_selfplay`, which the benches use too)."""
    from nnue.bench import shipped_selfplay

    return shipped_selfplay(name)


def public(name: str) -> Path:
    """``../shared/data/public/<name>``; skips the calling test, naming the file, when it is not
    there (third-party samples: read in place, never copied into the repo)."""
    p = PUBLIC / name
    if not p.exists():
        pytest.skip(f"third-party sample {p} not present (../shared/data/public is not shipped with the repo)")
    return p


def public_if_present(*names: str) -> list[Path]:
    """The files of ``names`` in ../shared/data/public that are there: for a test whose own-data
    part runs in any clone and which adds the third-party samples where they are present."""
    return [PUBLIC / n for n in names if (PUBLIC / n).exists()]


#: the full self-play sets (66 MB, not shipped): only slow tests that measure them read them
FULL_SELFPLAY = REPO.parent / "shared" / "data" / "selfplay"


def full_selfplay(name: str) -> Path:
    """``../shared/data/selfplay/<name>``, a full self-play set; skips the calling (slow) test,
    naming the file, when it is not there. Each such test has a twin on tests/data/selfplay."""
    p = FULL_SELFPLAY / name
    if not p.exists():
        pytest.skip(f"full self-play set {p} not present (66 MB, not shipped; the repo's cut of it is tested)")
    return p
