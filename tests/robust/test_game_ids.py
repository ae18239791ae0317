"""Issue 15 item 5: game ids are derived from the game's positions, so the same game packed from
``.plain``, bullet text and ``.pgn`` gets one id and lands on one side of the train/validation
split; different games get different ids."""
from __future__ import annotations

from pathlib import Path

import chess
import numpy as np
import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline.pack import GAME_ID_POSITIONS, GameIds, pack
from nnue.pipeline.stream import split_mask
from nnue.pipeline.parts import read_part
from tests.samples import SAMPLE, selfplay

KEY = 25  # position key bytes of a packed board


def tables(ds) -> dict:
    """{input file name: its part table as a dict of columns}."""
    return {Path(e["path"]).name: read_part(ds / e["part"]).to_pydict() for e in mf.load(ds)["files"].values()}


@pytest.fixture(scope="module")
def three_formats(tmp_path_factory):
    """The Chess960 self-play set (40 games) as .plain, .txt and .pgn, packed into one dataset."""
    srcs = [selfplay(f"sf15-960-xfen-s2.{ext}") for ext in ("plain", "txt", "pgn")]
    ds = tmp_path_factory.mktemp("gid") / "ds"
    pack(srcs, ds, progress=False)
    return ds, tables(ds)


def test_same_games_in_three_formats_share_ids(three_formats):
    _, t = three_formats
    p, x, g = t["sf15-960-xfen-s2.plain"], t["sf15-960-xfen-s2.txt"], t["sf15-960-xfen-s2.pgn"]
    assert len(p["game_id"]) == len(x["game_id"]) == len(g["game_id"]) == 4586
    assert p["game_id"] == x["game_id"] == g["game_id"]
    assert len(set(p["game_id"])) == 40  # 40 games, 40 ids: none collide


def test_every_copy_of_a_position_is_on_one_side_of_the_split(three_formats):
    """In the dataset holding all three copies, no position is both trained on and validated on."""
    _, t = three_formats
    for frac in (0.1, 0.3, 0.5):
        sides: dict[bytes, set] = {}
        n_val = 0
        for cols in t.values():
            val = split_mask(np.array(cols["game_id"], np.uint64), "val", frac)
            n_val += int(val.sum())
            for b, v in zip(cols["board"], val):
                sides.setdefault(b[:KEY], set()).add(bool(v))
        assert 0 < n_val < 3 * 4586
        assert all(len(s) == 1 for s in sides.values()), frac


def _plain_game(moves: list[str], score: int = 0, offset_counters: int = 0, result: int = 0) -> str:
    """A .plain game from the start position playing ``moves`` (UCI); every record carries the
    next move, so the last move is only played, not recorded."""
    b = chess.Board()
    out = []
    for i, m in enumerate(moves):
        fen = b.fen()
        if offset_counters:  # other halfmove/fullmove counters: the same positions
            parts = fen.split()
            parts[4], parts[5] = str(int(parts[4]) + offset_counters), str(int(parts[5]) + offset_counters)
            fen = " ".join(parts)
        stm_result = result if b.turn == chess.WHITE else -result
        out.append(f"fen {fen}\nmove {m}\nscore {score + i}\nply {i}\nresult {stm_result}\ne\n")
        b.push_uci(m)
    return "".join(out)


LINE = ["g1f3", "g8f6", "b1c3", "b8c6", "f3g1", "f6g8", "c3b1", "c6b8"] * 3  # 24 plies, knights dance


def _ids(tmp_path, name: str, text: str) -> list[int]:
    f = tmp_path / f"{name}.plain"
    f.write_text(text)
    ds = tmp_path / f"ds-{name}"
    s = pack([f], ds, progress=False)
    assert s["rejected"] == {}, s
    return read_part(ds / s["files"][0]["part"]).column("game_id").to_pylist()


def test_id_ignores_scores_counters_and_result(tmp_path):
    a = _ids(tmp_path, "a", _plain_game(LINE[:20]))
    b = _ids(tmp_path, "b", _plain_game(LINE[:20], score=500, offset_counters=7, result=1))
    assert len(set(a)) == 1 and a == b


def test_games_differing_within_the_hashed_prefix_differ(tmp_path):
    """Two games equal in their first 15 positions and different in the 16th (inside the first
    GAME_ID_POSITIONS positions) get different ids; so does a game of fewer positions. Games
    whose first 16 positions agree share an id (documented: the split keeps them together)."""
    assert GAME_ID_POSITIONS == 16
    base = _ids(tmp_path, "base", _plain_game(LINE[:20]))
    other = LINE[:14] + ["e2e4", "c6b8", "g1f3", "g8f6", "d2d4"]  # position 15 (the 16th) differs
    diff = _ids(tmp_path, "diff", _plain_game(other))
    short = _ids(tmp_path, "short", _plain_game(LINE[:10]))
    assert len({base[0], diff[0], short[0]}) == 3
    later = LINE[:16] + ["e2e4", "e7e5", "d2d4"]  # differs from position 17 on
    assert _ids(tmp_path, "later", _plain_game(later))[0] == base[0]


def test_many_games_in_one_file_do_not_collide(tmp_path):
    """The bundled sample (38 games): one id per game, ids change exactly at game starts."""
    ds = tmp_path / "ds"
    s = pack([SAMPLE], ds, progress=False)
    t = read_part(ds / s["files"][0]["part"]).to_pydict()
    starts = [0] + [i for i in range(1, len(t["ply"])) if t["ply"][i] != t["ply"][i - 1] + 1]
    ids = t["game_id"]
    assert len(set(ids)) == len(starts) == 38
    assert [i for i in range(1, len(ids)) if ids[i] != ids[i - 1]] == starts[1:]


def test_dedup_does_not_change_ids(tmp_path):
    """Positions dropped by --dedup still count for their game's id: packing the bullet-text copy
    with --dedup into a dataset that already holds the first positions of its second game gives
    that game's other positions the id they have without --dedup."""
    plain = selfplay("sf15-960-xfen-s2.plain")
    txt = selfplay("sf15-960-xfen-s2.txt")
    alone = tmp_path / "alone"
    pack([txt], alone, progress=False)
    full = next(iter(tables(alone).values()))
    second = full["game_id"].index(next(g for g in full["game_id"] if g != full["game_id"][0]))
    # the first game and five positions of the second, as .plain (six lines per record)
    cut = tmp_path / "head.plain"
    cut.write_text("".join(plain.read_text().splitlines(keepends=True)[:6 * (second + 5)]))
    ds = tmp_path / "ds"
    pack([cut], ds, progress=False)
    s = pack([txt], ds, progress=False, dedup=True)
    assert set(s["rejected"]) == {"duplicate position"} and s["rejected"]["duplicate position"] >= second + 5
    got = read_part(ds / s["files"][0]["part"]).to_pydict()
    # the rows kept are a subsequence of the rows packed alone, each with its id there
    j = second + 5
    for b, gid in zip(got["board"], got["game_id"]):
        while full["board"][j] != b:
            j += 1
        assert gid == full["game_id"][j]
        j += 1
    assert got["game_id"][0] == full["game_id"][second]  # the cut game keeps its id


def test_games_without_boundaries_hash_each_position(tmp_path):
    """EPD (each line its own game): the id is the position's; the same position in two files has
    one id, different positions differ."""
    fens = [chess.STARTING_FEN, "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
            "r1bqkbnr/pppppppp/2n5/8/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 1 2"]
    a, b = tmp_path / "a.epd", tmp_path / "b.epd"
    a.write_text("".join(" ".join(f.split()[:4]) + ' c9 "1/2-1/2";\n' for f in fens))
    b.write_text("".join(" ".join(f.split()[:4]) + ' c9 "1-0";\n' for f in reversed(fens)))
    ids = []
    for f in (a, b):
        s = pack([f], tmp_path / f"ds-{f.stem}", progress=False)
        ids.append(read_part(tmp_path / f"ds-{f.stem}" / s["files"][0]["part"]).column("game_id").to_pylist())
    assert len(set(ids[0])) == 3 and ids[1] == ids[0][::-1]


@pytest.mark.parametrize("seed,p_new", [(0, 0.15), (1, 0.15), (2, 0.02), (3, 0.02), (4, 1.0)])
def test_fed_in_any_runs_gives_the_same_ids(seed, p_new):
    """GameIds fed row by row, in random run lengths or all at once gives the same ids (the
    one-by-one, bulk and compiled paths feed it differently)."""
    rng = np.random.default_rng(seed)
    n = 400
    ordinals = np.cumsum(rng.random(n) < p_new).astype(np.int64)  # games of about 1/p_new rows
    boards = rng.integers(0, 256, (n, 32), dtype=np.uint8)

    def run(cuts):
        g = GameIds()
        for lo, hi in zip(cuts, cuts[1:]):
            g.feed(ordinals[lo:hi], boards[lo:hi])
        g.finish()
        return g.lookup(ordinals)

    whole = run([0, n])
    assert np.array_equal(run(list(range(n + 1))), whole)
    cuts = sorted({0, n, *rng.integers(0, n, 30).tolist()})
    assert np.array_equal(run(cuts), whole)
    assert len(set(whole.tolist())) == len(set(ordinals.tolist()))  # random games never collide
    # bytes 25..31 (counters, eval, wdl) do not matter
    noisy = boards.copy()
    noisy[:, KEY:] = rng.integers(0, 256, (n, 32 - KEY), dtype=np.uint8)
    g = GameIds()
    g.feed(ordinals, noisy)
    g.finish()
    assert np.array_equal(g.lookup(ordinals), whole)
