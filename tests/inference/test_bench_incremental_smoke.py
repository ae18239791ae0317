"""`nnue bench incremental --kind sfnnv5` runs end to end at a toy size (timings meaningless):
every replayed position is checked against the batch path, and the JSON has the sfnnv5 fields."""
from __future__ import annotations

import json

from nnue.bench import bench_incremental


def test_bench_incremental_sfnnv5_smoke(tmp_path):
    out = tmp_path / "inc.json"
    assert bench_incremental.main(["--kind", "sfnnv5", "--hidden", "32", "--runs", "1", "--games", "2",
                                   "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["kind"] == "sfnnv5" and "-> 32 + 8 PSQT" in r["net"] and "sparse_l1" not in r
    assert r["exact_checks"] == 2 * r["moves"] > 100  # a warm-up pass and one timed pass
    assert r["incremental_us_per_move"] > 0 and r["eval_us"]["incremental_evaluate"] > 0
    assert "king" in r["by_kind_us"]
    one = r["one_position_from_scratch"]
    assert one["checked_equal"] and one["one_position_us_cpu"] > 0 and one["batch_4096_ms_cpu"] > 0


def test_bench_incremental_net_needs_sfnnv5(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        bench_incremental.main(["--net", str(tmp_path / "x.nnue"), "--games", "1", "--runs", "1"])
    assert e.value.code == 2 and "--kind sfnnv5" in capsys.readouterr().err
