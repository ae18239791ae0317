"""nnue inspect: streaming statistics equal the ones computed from the whole table."""
from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import numpy as np

from nnue.cli import main
from nnue.pipeline.schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE
from nnue.pipeline.parts import read_part
from tests.samples import CUT, CUT_GAMES, CUT_POSITIONS, selfplay


def _inspect(ds, *extra):
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["inspect", str(ds), "--json", *extra]) == 0
    return json.loads(buf.getvalue())


def test_inspect_matches_whole_table_statistics(selfplay_dataset):
    r = _inspect(selfplay_dataset, "--fens", "2")
    t = read_part(next(selfplay_dataset.glob("part-*.parquet")))
    flags = t["flags"].to_numpy().astype(np.int64)
    scored = (flags & (FLAG_SCORE_NONE | FLAG_SCORE_MATE)) == 0
    score = t["score"].to_numpy()[scored]
    assert r["positions"] == t.num_rows == CUT_POSITIONS and r["games"] == CUT_GAMES
    for name, q in (("min", 0), ("p1", 1), ("p25", 25), ("median", 50), ("p75", 75), ("p99", 99), ("max", 100)):
        assert r["score"][name] == float(np.percentile(score, q, method="inverted_cdf")), name
    assert abs(r["score"]["mean"] - float(score.mean())) < 1e-9
    ply = t["ply"].to_numpy()[(flags & FLAG_PLY_UNKNOWN) == 0]
    assert r["ply"]["median"] == float(np.percentile(ply, 50, method="inverted_cdf"))
    vals, counts = np.unique(t["result"].to_numpy(), return_counts=True)
    assert r["result"] == {str(int(v)): int(c) for v, c in zip(vals, counts)}
    assert sum(r["piece_count"].values()) == t.num_rows
    assert r["score_mate"] == int(((flags & FLAG_SCORE_MATE) != 0).sum())
    assert r["in_check"] == int(np.asarray(t["in_check"]).sum())
    with selfplay(f"{CUT}.plain").open() as f:
        first = f.readline()[4:].strip()  # "fen <FEN>": the dataset's first row
    assert len(r["fens"]) == 2 and r["fens"][0]["fen"] == first
