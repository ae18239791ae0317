"""Benchmark: teacher labels from Stockfish 19's net, ``nnue annotate --teacher`` (our batched
integer inference) against the real engine's ``eval``, on the same positions, in one run.

``nnue bench sf19_teacher [--net FILE.nnue] [--out FILE]``: our self-play shipped in
``tests/data/selfplay`` (the n2000 cut and the Chess960 set, 17,264 positions of 152 games) is
packed into a temporary dataset; ``nnue annotate DATASET --teacher NET`` (a subprocess, as a user
runs it) writes ``teacher_eval``; then Stockfish 19 (``scripts/sf19-uci``, the same net through
``setoption name EvalFile``, one process) answers ``eval`` for every position not in check, and
its ``NNUE evaluation … (white side)`` (pawns, two decimals: ``0.01·UCIEngine::to_cp``) ×100,
turned to the side to move's point of view, is compared with ``teacher_eval``. Reports the
agreement (positions compared, equal, max |Δ| cp) and the speed of each path: positions per wall
second (annotate: as the command reports it, the net read excluded, and of the whole command;
the engine: after its start-up, timed alone on one position, and of the whole call) and per CPU
second of the processes; and our evaluator alone in this process (``nnue.inference.evaluate``
on the same boards, median of ``--runs``: the part of annotate that is inference), with the load
average. Needs the engine and the official net
(``scripts/ensure_sf19.sh``).
"""
from __future__ import annotations

import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nnue.bench import emit, parser

WHITE_SIDE = re.compile(r"^NNUE evaluation\s+([+-]?\d+\.\d\d) \(white side\)$", re.M)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def engine_cp(trace: str, white_to_move: bool) -> int:
    """The engine's ``NNUE evaluation … (white side)`` of an ``eval`` trace as side-to-move
    centipawns (the printed pawns ×100; they are ``0.01·to_cp`` with two decimals, so exact)."""
    m = WHITE_SIDE.search(trace)
    assert m, trace
    cp = round(float(m.group(1)) * 100)
    return cp if white_to_move else -cp


def main(argv: list[str] | None = None) -> int:
    p = parser("nnue bench sf19_teacher", __doc__.splitlines()[0])
    p.add_argument("--net", default=None, help="a Stockfish 19 .nnue (default: the official net in the cache)")
    p.add_argument("--runs", type=int, default=3, help="timed runs of our inference in this process")
    p.add_argument("--out", default=None, help="also write the JSON report here")
    args = p.parse_args(argv)

    import numpy as np
    import torch

    from nnue.inference import evaluate
    from nnue.pipeline.annotate import teacher_net

    from nnue.pipeline import manifest as mf
    from nnue.pipeline.board import unpack_fen
    from nnue.pipeline.pack import pack
    from nnue.pipeline.parts import read_part
    from nnue.selfplay import sf19

    from nnue.bench import CUT, XFEN960
    from nnue.bench import shipped_selfplay as selfplay
    from nnue.selfplay.sf19 import FRONT_END, eval_traces

    net = Path(args.net or sf19.official_net_path()).resolve()
    if not net.is_file():
        print(f"nnue bench sf19_teacher: no net {net} (scripts/ensure_sf19.sh fetches the official one)",
              file=sys.stderr)
        return 2
    files = [selfplay(f"{CUT}.plain"), selfplay(f"{XFEN960}.plain")]
    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "ds"
        pack(files, ds, progress=False)
        cpu0, w = _children_cpu(), time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "nnue.cli", "annotate", str(ds), "--teacher", str(net), "--json",
                            "--no-progress"], capture_output=True, text=True, check=True)
        ann_wall, ann_cpu = time.perf_counter() - w, _children_cpu() - cpu0
        ann = json.loads(r.stdout.strip().splitlines()[-1])
        rows = []
        for e in sorted(mf.load(ds)["files"].values(), key=mf.entry_key):
            for part in mf.entry_parts(e):
                t = read_part(ds / part, columns=["board", "in_check", "teacher_eval"])
                rows += zip(t.column("board").to_pylist(), t.column("in_check").to_pylist(),
                            t.column("teacher_eval").to_pylist())
    fens = [unpack_fen(b) for b, check, _ in rows if not check]
    ours = np.array([v for _, check, v in rows if not check], dtype=np.int64)
    # our inference alone, in this process: the evaluator annotate calls, on the same boards
    # (median of --runs after a warm-up call), wall and CPU seconds (all threads)
    tnet, _ = teacher_net(str(net))
    boards = torch.from_numpy(np.frombuffer(b"".join(b for b, _, _ in rows), np.uint8).reshape(-1, 32).copy())
    evaluate(tnet, boards[:256])
    walls, cpus = [], []
    for _ in range(args.runs):
        w, c = time.perf_counter(), time.process_time()
        again = evaluate(tnet, boards).numpy()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    same_as_column = bool((np.clip(again, -32767, 32767) == np.array([v for _, _, v in rows])).all())
    del tnet
    # the engine: its start-up alone (one position), then every position in one process
    cpu0, w = _children_cpu(), time.perf_counter()
    eval_traces(str(FRONT_END), fens[:1], eval_file=net)
    start_s, start_cpu = time.perf_counter() - w, _children_cpu() - cpu0
    cpu0, w = _children_cpu(), time.perf_counter()
    traces, load = eval_traces(str(FRONT_END), fens, eval_file=net)
    eng_wall, eng_cpu = time.perf_counter() - w, _children_cpu() - cpu0
    theirs = np.array([engine_cp(t, f.split()[1] == "w") for t, f in zip(traces, fens)], dtype=np.int64)
    diff = np.abs(ours - theirs)
    n_all, n = len(rows), len(fens)
    ours_rate = ann["positions_per_s"]
    eng_rate = n / max(eng_wall - start_s, 1e-9)
    first = int(np.argmax(diff)) if diff.any() else None
    report = {
        "benchmark": "sf19_teacher", "net": net.name, "engine_load_line": load,
        "positions": {"packed": n_all, "not_in_check_compared": n,
                      "source": f"tests/data/selfplay {CUT} + {XFEN960} (our Stockfish 15.1 self-play)"},
        "agreement": {"equal": int((diff == 0).sum()), "max_abs_diff_cp": int(diff.max()),
                      "within_1cp": int((diff <= 1).sum()),
                      "first_largest": None if first is None else {"fen": fens[first], "teacher_eval": int(ours[first]),
                                                                   "stockfish_19_cp": int(theirs[first])}},
        "ours": {"command": "nnue annotate DATASET --teacher NET", "positions": n_all,
                 "positions_per_s": ours_rate, "annotate_seconds": ann["seconds"],
                 "command_wall_s": round(ann_wall, 2), "command_positions_per_s": round(n_all / ann_wall),
                 "command_cpu_s": round(ann_cpu, 2), "command_positions_per_cpu_s": round(n_all / ann_cpu)},
        "ours_inference": {"call": "nnue.inference.evaluate(net, boards) (what annotate calls), in this process",
                           "positions": n_all, "runs": args.runs, "threads": torch.get_num_threads(),
                           "positions_per_s": round(n_all / statistics.median(walls)),
                           "positions_per_cpu_s": round(n_all / statistics.median(cpus)),
                           "equals_teacher_eval_column": same_as_column},
        "engine": {"command": "scripts/sf19-uci: setoption name EvalFile, then position fen + eval per position",
                   "positions": n, "start_seconds": round(start_s, 2), "start_cpu_s": round(start_cpu, 2),
                   "wall_s": round(eng_wall, 2), "positions_per_s": round(eng_rate),
                   "positions_per_s_with_start": round(n / eng_wall), "cpu_s": round(eng_cpu, 2),
                   "positions_per_cpu_s": round(n / max(eng_cpu - start_cpu, 1e-9)),
                   "positions_per_cpu_s_with_start": round(n / eng_cpu)},
        "ratio_annotate_over_engine": round(ours_rate / eng_rate, 1),
        "ratio_inference_over_engine_cpu_s": round((n_all / statistics.median(cpus))
                                                   / (n / max(eng_cpu - start_cpu, 1e-9)), 1),
        "ratio_whole_commands": round((n_all / ann_wall) / (n / eng_wall), 1),
        "load_average": os.getloadavg(), "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
    }
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
