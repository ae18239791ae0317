"""Issue 20 item 3: a dump a match runner appends to (cutechess and fastchess append each finished
game to one PGN) is packed again only from where the last pack stopped: the new whole games or
records, never the earlier ones twice; the manifest records the byte offset; game ids are those
a pack of the whole file gives; a file whose earlier bytes changed is a new file, with a warning."""
from __future__ import annotations

import pytest

from tests.samples import SAMPLE
from nnue.pipeline import manifest as mf
from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import pack
from nnue.pipeline.parts import read_part


def _games(n: int, start: int = 0) -> str:
    import random

    import chess
    import chess.pgn

    out = []
    for g in range(start, start + n):
        rnd = random.Random(g)
        board, game = chess.Board(), chess.pgn.Game()
        game.headers["Result"] = "1/2-1/2"
        node = game
        for _ in range(10):
            move = rnd.choice(list(board.legal_moves))
            node = node.add_variation(move, comment=f"{rnd.randint(-90, 90) / 100:+.2f}/10 0.1s")
            board.push(move)
        out.append(str(game) + "\n\n")
    return "".join(out)


def _rows(ds) -> list[tuple]:
    m = mf.load(ds)
    rows = []
    for e in sorted(m["files"].values(), key=mf.entry_key):
        for name in mf.entry_parts(e):
            t = read_part(ds / name)
            rows += list(zip(t.column("board").to_pylist(), t.column("game_id").to_pylist(),
                             t.column("score").to_pylist()))
    return rows


def _plain(k: int) -> str:
    """The bundled sample's first 2k games (cut where a game starts: a runner appends whole games)."""
    lines = SAMPLE.read_text().splitlines(keepends=True)
    plies = [int(x.split()[1]) for x in lines if x.startswith("ply ")]
    starts = [i for i in range(len(plies)) if i == 0 or plies[i] != plies[i - 1] + 1]
    return "".join(lines[:6 * starts[2 * k]])


@pytest.mark.parametrize("fmt,make", [("pgn", lambda k: _games(3 * k)), ("plain", _plain)])
def test_grown_file_packs_only_its_new_records(tmp_path, fmt, make):
    src = tmp_path / f"match.{fmt}"
    src.write_text(make(1))
    ds, whole = tmp_path / "ds", tmp_path / "whole"
    first = pack([src], ds, progress=False)
    src.write_text(make(2))  # the runner appended to the same file
    second = pack([src], ds, progress=False)
    src.write_text(make(3))
    third = pack([src], ds, progress=False)
    pack([src], whole, progress=False)  # the final file packed at once
    m = mf.load(ds)
    (entry,) = m["files"].values()  # one entry: the grown file's (the earlier versions replaced)
    assert entry["packed_to"] == src.stat().st_size and len(entry["appended"]) == 2
    assert first["read"] + second["read"] + third["read"] == entry["read"] == mf.load(whole)["files"][
        mf.sha256_file(src)]["read"]
    assert 0 < second["read"] < first["read"] + second["read"]  # only the new games / records
    assert not first.get("warnings") and not second.get("warnings") and not third.get("warnings")
    assert _rows(ds) == _rows(whole)  # the same rows, game ids and scores as one pack of the whole file


def test_an_append_inside_a_game_warns(tmp_path):
    """.plain records appended to a game of the earlier bytes: packed from the recorded offset
    (nothing twice), as a game of their own, with a warning."""
    src = tmp_path / "d.plain"
    lines = SAMPLE.read_text().splitlines(keepends=True)
    src.write_text("".join(lines[:63]))  # 10 records and a half: the pack stopped inside a game
    first = pack([src], tmp_path / "ds", progress=False)
    src.write_text("".join(lines[:600]))
    s = pack([src], tmp_path / "ds", progress=False)
    assert first["read"] + s["read"] == 100 + 1  # the cut record: a reject before, whole now... counted once each
    assert any("continue a game" in w for w in s["warnings"]), s["warnings"]


def test_changed_earlier_bytes_are_a_new_file_with_a_warning(tmp_path, capsys):
    from nnue.cli import main

    src = tmp_path / "m.pgn"
    src.write_text(_games(3))
    assert main(["pack", str(src), "-o", str(tmp_path / "ds"), "--no-progress"]) == 0
    src.write_text(_games(4, start=1))  # its first game edited away: not an append
    capsys.readouterr()
    assert main(["pack", str(src), "-o", str(tmp_path / "ds"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "differ from those packed" in err and "packed whole as a new file" in err
    assert len(mf.load(tmp_path / "ds")["files"]) == 2


def test_watch_packs_the_new_games_of_a_growing_file(tmp_path):
    from nnue.pipeline.watch import Watcher

    d = tmp_path / "dumps"
    d.mkdir()
    src = d / "match.pgn"
    src.write_text(_games(3))
    w = Watcher([d], tmp_path / "ds", settle=0.0, interval=0.01, options=ReaderOptions(), log=lambda line: None)
    w.pass_once()
    w.pass_once()
    with open(src, "a") as f:
        f.write(_games(2, start=3))
    w.pass_once()
    w.pass_once()
    (entry,) = mf.load(tmp_path / "ds")["files"].values()
    assert entry["read"] == 5 * 10 and w.summary.read == 50  # 50 positions, none read twice
