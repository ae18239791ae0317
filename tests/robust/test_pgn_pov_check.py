"""Issue 20 item 2: after a PGN file is packed, the sign of its evals is compared with the
results of its decisive games; a file whose evals were written from white's point of view but
read as the mover's (or the other way round) gets one warning line naming the other --pgn-pov."""
from __future__ import annotations

import json
import random
import subprocess
import sys

import chess
import chess.pgn
import pytest

NNUE = [sys.executable, "-m", "nnue.cli"]


def _games(n: int, white_pov: bool, seed: int = 3) -> str:
    """n decisive games of 16 random plies; every comment is the eval of the position before the
    move, ±1.50 for the side that goes on to win, written from white's POV or the mover's."""
    rnd = random.Random(seed)
    out = []
    for g in range(n):
        white_wins = g % 2 == 0
        board, game = chess.Board(), chess.pgn.Game()
        game.headers["Result"] = "1-0" if white_wins else "0-1"
        node = game
        for _ in range(16):
            move = rnd.choice(list(board.legal_moves))
            white_cp = 150 if white_wins else -150
            cp = white_cp if white_pov or board.turn == chess.WHITE else -white_cp
            node = node.add_variation(move, comment=f"{cp / 100:+.2f}/12 0.1s")
            board.push(move)
        out.append(str(game))
    return "\n\n".join(out) + "\n"


def _pack(tmp_path, text: str, pov: str = "mover") -> tuple[dict, str | None]:
    """(the file's manifest entry, its warning line or None), packed in this process."""
    from nnue.pipeline.formats import ReaderOptions
    from nnue.pipeline.pack import pack
    from nnue.pipeline.povcheck import warning

    src = tmp_path / "games.pgn"
    src.write_text(text)
    ds = tmp_path / f"ds{len(list(tmp_path.iterdir()))}"
    (entry,) = pack([src], ds, options=ReaderOptions(pgn_pov=pov), progress=False)["files"]
    return entry, warning(entry, entry["pgn_pov"])


@pytest.mark.parametrize("written_white", [True, False])
def test_pov_mismatch_warns_and_names_the_option(tmp_path, written_white):
    text = _games(12, white_pov=written_white)
    wrong = "mover" if written_white else "white"
    right = "white" if written_white else "mover"
    entry, line = _pack(tmp_path, text, wrong)
    assert entry["pov_check"] == {"agree": 0, "disagree": 12 * 8}
    assert line is not None and f"--pgn-pov {right}" in line and "games.pgn" in line, line
    entry, line = _pack(tmp_path, text, right)
    assert line is None and entry["pov_check"] == {"agree": 12 * 8, "disagree": 0}


def test_cli_warns_in_one_line(tmp_path):
    src = tmp_path / "games.pgn"
    src.write_text(_games(12, white_pov=True))
    p = subprocess.run([*NNUE, "pack", str(src), "-o", str(tmp_path / "ds"), "--json", "--no-progress"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = [x for x in p.stderr.splitlines() if "point of view" in x]
    assert len(lines) == 1 and lines[0].startswith("nnue pack: warning: ") and "--pgn-pov white" in lines[0]
    assert json.loads(p.stdout)["files"][0]["pov_check"]["disagree"] == 96


def test_no_warning_from_few_or_drawn_games(tmp_path):
    assert _pack(tmp_path, _games(2, white_pov=True))[1] is None  # 16 disagreeing positions: too few
    drawn = _games(12, white_pov=True).replace("1-0", "1/2-1/2").replace("0-1", "1/2-1/2")
    entry, line = _pack(tmp_path, drawn)
    assert line is None and entry["pov_check"] == {"agree": 0, "disagree": 0}


def test_lichess_evals_are_white_pov_whatever_the_option(tmp_path):
    """lichess [%eval] is white's point of view by that site's convention: read so with either
    --pgn-pov, and it agrees with the results (no warning)."""
    import re

    text = re.sub(r"\{ ([+-]\d\.\d\d)/12 0\.1s \}", lambda m: "{ [%eval " + m.group(1) + "] }",
                  _games(12, white_pov=True))
    assert "[%eval" in text and "/12" not in text
    for pov in ("mover", "white"):
        entry, line = _pack(tmp_path, text, pov)
        assert line is None and entry["pov_check"]["disagree"] == 0 and entry["pov_check"]["agree"] > 0
