"""Teacher labels from Stockfish 19's official net: ``nnue annotate --teacher nn-1a298aa575a0.nnue``
(our batched integer inference, no engine) writes ``teacher_eval`` equal to the real engine's
``eval`` (its ``NNUE evaluation … (white side)`` ×100, side to move's point of view) on positions
of real games not in check, Chess960 included. Skips with the reason without the engine or the
official net (scripts/ensure_sf19.sh)."""
from __future__ import annotations

import numpy as np

from nnue.bench.bench_sf19_teacher import engine_cp
from nnue.pipeline import annotate as an
from nnue.pipeline import manifest as mf
from nnue.pipeline.board import unpack_fen
from nnue.pipeline.pack import pack
from nnue.pipeline.parts import read_part

from ..samples import CUT, XFEN960, selfplay
from .sf19 import eval_traces, require_official_net, require_sf19


def _every(path, step: int) -> str:
    """Every ``step``-th record of a plain file, as plain text."""
    records = path.read_text().split("\ne\n")
    return "".join(r.strip("\n") + "\ne\n" for r in records[::step] if r.strip())


def test_teacher_eval_equals_stockfish_19(tmp_path):
    engine = require_sf19()
    net = require_official_net()
    plain = tmp_path / "excerpt.plain"
    plain.write_text(_every(selfplay(f"{CUT}.plain"), 40) + _every(selfplay(f"{XFEN960}.plain"), 30))
    ds = tmp_path / "ds"
    pack([plain], ds, progress=False)
    r = an.annotate(ds, teacher=str(net), progress=False)
    rec = r["columns"]["teacher_eval"]
    assert rec["source"] == f"net:{net.name}" and rec["kind"] == "sfnnv16" and rec["nulls"] == 0
    rows = []
    for e in mf.load(ds)["files"].values():
        for part in mf.entry_parts(e):
            t = read_part(ds / part, columns=["board", "in_check", "teacher_eval"])
            rows += zip(t.column("board").to_pylist(), t.column("in_check").to_pylist(),
                        t.column("teacher_eval").to_pylist())
    fens = [unpack_fen(b) for b, check, _ in rows if not check]
    ours = np.array([v for _, check, v in rows if not check])
    assert len(fens) >= 300 and sum(" w " not in f for f in fens) > 100
    traces, load = eval_traces(engine, fens, eval_file=net)
    assert load is not None and str(net) in load
    theirs = np.array([engine_cp(t, f.split()[1] == "w") for t, f in zip(traces, fens)])
    bad = np.flatnonzero(ours != theirs)
    assert not len(bad), (f"{len(bad)} of {len(fens)} differ; first {fens[bad[0]]}: teacher_eval {ours[bad[0]]}, "
                          f"Stockfish 19 {theirs[bad[0]]}")
    # the labels span the eval range, not a constant
    assert np.abs(ours).max() > 300 and len(set(ours.tolist())) > 100
