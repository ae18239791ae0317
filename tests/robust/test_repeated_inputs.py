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
    assert len(warnings) == 3 and all("--dedup" in w for w in warnings)


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
    assert f"{b} repeats the games of {a}" in err
