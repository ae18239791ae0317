"""Issue 15 item 5: inputs that repeat another input's games (the same self-play kept as .plain,
.txt and .pgn) are detected and named in one warning line suggesting --dedup."""
from __future__ import annotations

import json


from nnue.cli import main
from tests.samples import SAMPLE, selfplay


def test_the_same_games_in_three_formats_warn(tmp_path, capsys):
    srcs = [selfplay(f"sf15-960-xfen-s2.{ext}") for ext in ("plain", "txt", "pgn")]
    assert main(["pack", *map(str, srcs), "-o", str(tmp_path / "ds"), "--json", "--no-progress",
                 "--pgn-pov", "white"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    pairs = {frozenset((r["path"], r["repeats"])) for r in out["repeated_inputs"]}
    assert pairs == {frozenset((str(a), str(b))) for a, b in ((srcs[0], srcs[1]), (srcs[0], srcs[2]), (srcs[1], srcs[2]))}
    warnings = [line for line in cap.err.splitlines() if "warning" in line]
    # issue 20 item 6: one line naming the three, counting the copies (it said "twice" three
    # times), and --dedup suggested once, with the number of repeated positions
    assert len(warnings) == 2, warnings
    assert all(str(p) in warnings[0] for p in srcs) and "3 times" in warnings[0] and "twice" not in warnings[0]
    assert "--dedup" in warnings[1] and "--dedup" not in warnings[0]
    rows = sum(f["packed"] for f in out["files"])
    assert out["repeated_positions"] == int(warnings[1].split("warning: ")[1].split()[0].replace(",", ""))
    assert rows - out["repeated_positions"] <= rows // 3 + 200  # about two of three copies repeat


def test_inspect_counts_distinct_games(tmp_path, capsys):
    """The same games packed from three inputs: inspect reports the distinct game ids (it counted
    each game once per input: 22,320 for 7,440 in the issue's example)."""
    srcs = [selfplay(f"sf15-960-xfen-s2.{ext}") for ext in ("plain", "txt", "pgn")]
    main(["pack", str(srcs[0]), "-o", str(tmp_path / "one"), "--no-progress"])
    main(["pack", *map(str, srcs), "-o", str(tmp_path / "three"), "--no-progress", "--pgn-pov", "white"])
    capsys.readouterr()
    main(["inspect", str(tmp_path / "one"), "--json"])
    one = json.loads(capsys.readouterr().out)
    main(["inspect", str(tmp_path / "three"), "--json"])
    three = json.loads(capsys.readouterr().out)
    assert three["positions"] == 3 * one["positions"]
    assert three["games"] == one["games"] and three["game_runs"] == 3 * one["game_runs"]
    main(["inspect", str(tmp_path / "three")])
    assert "more than once" in capsys.readouterr().out


def test_different_games_do_not_warn(tmp_path, capsys):
    other = selfplay("sf15-960-xfen-s2.plain")
    assert main(["pack", str(SAMPLE), str(other), "-o", str(tmp_path / "ds"), "--json", "--no-progress"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["repeated_inputs"] == [] and "warning" not in cap.err


def test_a_later_run_repeating_a_packed_input_warns(tmp_path, capsys):
    a = selfplay("sf15-960-xfen-s2.plain")
    b = selfplay("sf15-960-xfen-s2.txt")
    main(["pack", str(a), "-o", str(tmp_path / "ds"), "--no-progress"])
    capsys.readouterr()
    main(["pack", str(b), "-o", str(tmp_path / "ds"), "--no-progress"])
    err = capsys.readouterr().err
    assert f"{a} and {b} hold the same games" in err and "twice" in err
