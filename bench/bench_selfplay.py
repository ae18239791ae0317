"""Benchmark: self-play speed of our MCTS on one core (``nnue bench selfplay``).

``nnue bench selfplay [--net NET] [--games G] [--nodes K] [--in-flight A,B,…] [--out FILE]``
plays G self-play games of NET (default: the demo net, ``demo-out/net/net.safetensors`` from
``bash scripts/demo.sh``) at K simulations per move, for each in-flight count (games whose leaves
are batched into one :func:`nnue.inference.evaluate` call), one after the other in this process,
on one thread (``torch.set_num_threads(1)``), with the default search (mean backup, capture
priors) and the default adjudication. Reports per setting: simulations/s ("nodes/s": root
visits, terminal revisits included), net evals/s, mean leaf-batch size, positions written/s
(the ``.plain`` records, as ``nnue selfplay`` writes them), games/s and the share of time inside
the net calls; ``steady_phase``: the same up to the moment no new game could be started (after
that the last, longest games run with fewer in flight and the leaf batches shrink); the same rates per CPU second of this process (``time.process_time``), which is
what one core gives on a shared machine; plus the cost of one ``evaluate`` call by batch size, which is what makes
batching across games pay.
"""
from __future__ import annotations

import platform
import random
import statistics
import time
from pathlib import Path

import torch

from nnue.bench import emit, parser

REPO = Path(__file__).resolve().parents[1]
DEMO_NET = REPO / "demo-out" / "net" / "net.safetensors"


def _eval_call_cost(net, sizes=(1, 8, 64, 256)) -> dict:
    import chess

    from nnue.pipeline.board import pack_board
    from nnue.selfplay.mcts import evaluate_packed

    rng = random.Random(0)
    boards = []
    b = chess.Board()
    while len(boards) < max(sizes):
        moves = list(b.legal_moves)
        if not moves or b.ply() > 60:
            b = chess.Board()
            continue
        b.push(rng.choice(moves))
        boards.append(pack_board(b))
    out = {}
    for n in sizes:
        evaluate_packed(net, boards[:n])
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            evaluate_packed(net, boards[:n])
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        out[str(n)] = {"ms_per_call": round(med * 1e3, 3), "evals_per_s": round(n / med)}
    return out


def run(net_path: Path, games: int, nodes: int, in_flight: int) -> dict:
    from nnue.inference import load
    from nnue.selfplay.mcts import BatchSearch, SearchConfig
    from nnue.selfplay.play import Game, Player, make_opening, play_games

    net = load(net_path)
    cfg = SearchConfig(nodes=nodes)
    made = [0]
    steady = {}

    def new_game():
        if made[0] >= games:
            if not steady:  # the queue ran dry: from here on fewer games are in flight
                st = search.stats
                steady.update(t=time.perf_counter() - t0, cpu=time.process_time() - c0, sims=st.simulations,
                              evals=st.evals, batches=st.batches, positions=positions)
            return None
        rng = random.Random(made[0])
        made[0] += 1
        p = Player(net, cfg)
        return Game(make_opening(rng, 8), p, p, rng=rng)

    search = BatchSearch()
    positions = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for g in play_games(new_game, in_flight, search):
        positions += g.plain_text().count("\ne\n")
    # a game's positions are counted when it ends; the steady phase (every slot filled) is
    # measured up to the moment the queue ran dry
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    st = search.stats
    return {"in_flight": in_flight, "games": games, "nodes_per_move": nodes, "seconds": round(dt, 2),
            "nodes_per_s": round(st.simulations / dt, 1), "evals_per_s": round(st.evals / dt, 1),
            "mean_leaf_batch": round(st.mean_batch, 2), "positions_written": positions,
            "positions_per_s": round(positions / dt, 2), "games_per_s": round(games / dt, 3),
            "share_in_net_calls": round(st.eval_seconds / dt, 3), "cpu_seconds": round(cpu, 2),
            "per_cpu_second": {"nodes": round(st.simulations / cpu, 1), "evals": round(st.evals / cpu, 1),
                               "positions": round(positions / cpu, 2)},
            "steady_phase": None if not steady or not steady["batches"] else {
                "seconds": round(steady["t"], 2), "mean_leaf_batch": round(steady["evals"] / steady["batches"], 2),
                "nodes_per_s": round(steady["sims"] / steady["t"], 1),
                "nodes_per_cpu_second": round(steady["sims"] / steady["cpu"], 1),
                "evals_per_cpu_second": round(steady["evals"] / steady["cpu"], 1)}}


def main(argv=None) -> int:
    ap = parser("nnue bench selfplay", __doc__.split("\n\n")[0])
    ap.add_argument("--net", default=str(DEMO_NET), help="the net that plays (net.safetensors)")
    ap.add_argument("--games", type=int, default=32, help="self-play games per in-flight setting")
    ap.add_argument("--nodes", type=int, default=64, help="MCTS simulations per move")
    ap.add_argument("--in-flight", default="8,32", help="comma-separated in-flight game counts")
    ap.add_argument("--out", default=None, help="also write the JSON to this file (default: stdout only)")
    args = ap.parse_args(argv)
    net_path = Path(args.net)
    if not net_path.exists():
        print(f"nnue bench selfplay: error: {net_path}: no such net (make the demo net with "
              f"'bash scripts/demo.sh', or give --net)")
        return 2
    torch.set_num_threads(1)
    from nnue.inference import load

    import os

    report = {"bench": "selfplay", "load_average_1min_at_start": round(os.getloadavg()[0], 2), "net": str(net_path), "machine": platform.processor() or platform.machine(),
              "threads": 1, "search": "mean backup, capture priors, c_puct 1.5",
              "eval_call_cost": _eval_call_cost(load(net_path)),
              "runs": [run(net_path, args.games, args.nodes, int(k)) for k in args.in_flight.split(",")]}
    report["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
