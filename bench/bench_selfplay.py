"""Benchmark: self-play speed of our MCTS on one core (``nnue bench selfplay``).

``nnue bench selfplay [--net NET] [--games G] [--nodes K] [--in-flight A,B,…] [--leaf-eval M,…]
[--profile] [--out FILE]`` plays G self-play games of NET (default: the demo net,
``demo-out/net/net.safetensors`` from ``bash scripts/demo.sh``) at K simulations per move, for
each in-flight count (games searched together) and each leaf-eval mode (``auto``: incremental
accumulators, evaluated in line; ``batch``: leaves of all in-flight games batched into one
:func:`nnue.inference.evaluate` call; ``batch-only``: the same with calls of up to
``SMALL_BATCH`` positions kept on the kind's batch evaluator too), one after the other in this process, in alternating order,
on one thread (``torch.set_num_threads(1)``), with the default search (mean backup, capture
priors) and the default adjudication. "evals" counts the leaves given a value (net evals plus
``cache_hits``, leaves whose position an earlier search of the game or this tree had evaluated);
``mean_leaf_batch`` the positions per net call of the batched mode. Every mode plays the same games (checked: the ``.plain``
text of all games must be equal, else the benchmark fails). Goal (issue 23): 20,000 simulations
per CPU second for the demo net; ``--profile`` adds cProfile's top entries of one more ``auto``
run (CPU seconds, the profiler's overhead included). Reports per setting: simulations/s ("nodes/s": root
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


def run(net_path: Path, games: int, nodes: int, in_flight: int, leaf_eval: str = "auto",
        texts: list | None = None, movegen: str = "compiled") -> dict:
    from nnue.inference import load
    from nnue.selfplay.mcts import BatchSearch, SearchConfig, Tree
    from nnue.selfplay.movegen import legal_moves
    from nnue.selfplay.play import Game, Player, make_opening, play_games

    legal_moves(__import__("chess").Board())  # numba's first call (loads the cache) outside the timing
    Tree.fast_movegen = movegen == "compiled"

    net = load(net_path)
    cfg = SearchConfig(nodes=nodes)
    made = [0]
    steady = {}

    def new_game():
        if made[0] >= games:
            if not steady:  # the queue ran dry: from here on fewer games are in flight
                st = search.stats
                steady.update(t=time.perf_counter() - t0, cpu=time.process_time() - c0, sims=st.simulations,
                              evals=st.evals, hits=st.cache_hits, batches=st.batches, positions=positions)
            return None
        rng = random.Random(made[0])
        made[0] += 1
        p = Player(net, cfg)
        g = Game(make_opening(rng, 8), p, p, rng=rng)
        g.rng_seed = made[0]
        return g

    from nnue.inference import api

    small = api.SMALL_BATCH
    if leaf_eval == "batch-only":  # no one-position path for small calls: the kind's batch evaluator
        api.SMALL_BATCH = 0
    search = BatchSearch("batch" if leaf_eval == "batch-only" else leaf_eval)
    positions = 0
    t0, c0 = time.perf_counter(), time.process_time()
    done = []
    try:
        for g in play_games(new_game, in_flight, search):
            positions += g.plain_text().count("\ne\n")
            done.append(g)
    finally:
        Tree.fast_movegen = True
        api.SMALL_BATCH = small
    # a game's positions are counted when it ends; the steady phase (every slot filled) is
    # measured up to the moment the queue ran dry
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    if texts is not None:
        texts.append([g.plain_text() for g in sorted(done, key=lambda g: g.rng_seed)])
    st = search.stats
    return {"leaf_eval": leaf_eval, "movegen": movegen, "in_flight": in_flight, "games": games, "nodes_per_move": nodes, "seconds": round(dt, 2),
            "nodes_per_s": round(st.simulations / dt, 1), "evals_per_s": round(st.evals / dt, 1),
            "mean_leaf_batch": round(st.mean_batch, 2), "cache_hits": st.cache_hits,
            "reused_leaf_share": round(st.cache_hits / st.evals, 3) if st.evals else None,
            "positions_written": positions,
            "positions_per_s": round(positions / dt, 2), "games_per_s": round(games / dt, 3),
            "share_in_net_calls": round(st.eval_seconds / dt, 3), "cpu_seconds": round(cpu, 2),
            "per_cpu_second": {"nodes": round(st.simulations / cpu, 1), "evals": round(st.evals / cpu, 1),
                               "positions": round(positions / cpu, 2)},
            "steady_phase": None if not steady or not steady["batches"] else {
                "seconds": round(steady["t"], 2), "mean_leaf_batch": round((steady["evals"] - steady["hits"]) / steady["batches"], 2),
                "nodes_per_s": round(steady["sims"] / steady["t"], 1),
                "nodes_per_cpu_second": round(steady["sims"] / steady["cpu"], 1),
                "evals_per_cpu_second": round(steady["evals"] / steady["cpu"], 1)}}


def profile(net_path: Path, games: int, nodes: int, in_flight: int, top: int = 15) -> dict:
    """cProfile of one ``auto`` run: the top entries by own time, and the share of the run's
    profiled time in python-chess's move generation, the tree walk and the net."""
    import cProfile
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    run(net_path, games, nodes, in_flight, "auto")
    pr.disable()
    st = pstats.Stats(pr)
    total = st.total_tt
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])
    def where(k):
        f, line, name = k
        return f"{f.split('site-packages/')[-1].split('/work/clones/')[-1]}:{line}({name})"
    cum = {where(k): v[3] for k, v in st.stats.items()}
    def share(pattern):
        return round(max((t for k, t in cum.items() if pattern in k), default=0.0) / total, 3)
    return {"profiled_seconds": round(total, 2),
            "top_own_time": [{"function": where(k), "calls": v[1], "own_s": round(v[2], 3), "cum_s": round(v[3], 3)}
                             for k, v in rows[:top]],
            "share_of_time": {"python-chess legal move generation": share("generate_legal_moves"),
                              "compiled legal move generation and priors": share("movegen.py"),
                              "incremental leaf evals (push/pop + eval)": share("_eval_incremental"),
                              "backup": share("_backup"), "select": share("(_select)"),
                              "priors": share("heuristic_priors")}}


def main(argv=None) -> int:
    ap = parser("nnue bench selfplay", __doc__.split("\n\n")[0])
    ap.add_argument("--net", default=str(DEMO_NET), help="the net that plays (net.safetensors)")
    ap.add_argument("--games", type=int, default=32, help="self-play games per in-flight setting")
    ap.add_argument("--nodes", type=int, default=64, help="MCTS simulations per move")
    ap.add_argument("--in-flight", default="8,32", help="comma-separated in-flight game counts")
    ap.add_argument("--leaf-eval", default="auto,batch",
                    help="comma-separated leaf-eval modes: auto, batch, batch-only (batch with no one-position "
                         "path for small calls: every leaf through the kind's batch evaluator) (default: auto,batch)")
    ap.add_argument("--movegen", default="compiled",
                    help="comma-separated move generators of the expansions: compiled (selfplay/movegen.py), "
                         "python (python-chess's legal_moves and the Python priors)")
    ap.add_argument("--profile", action="store_true", help="add a cProfile of one more auto run")
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

    modes = args.leaf_eval.split(",")
    if any(m not in ("auto", "batch", "batch-only") for m in modes):
        print(f"nnue bench selfplay: error: --leaf-eval {args.leaf_eval}: auto, batch and/or batch-only")
        return 2
    gens = args.movegen.split(",")
    if any(g not in ("compiled", "python") for g in gens):
        print(f"nnue bench selfplay: error: --movegen {args.movegen}: compiled and/or python")
        return 2
    report = {"bench": "selfplay", "load_average_1min_at_start": round(os.getloadavg()[0], 2), "net": str(net_path),
              "machine": platform.processor() or platform.machine(),
              "threads": 1, "search": "mean backup, capture priors, c_puct 1.5",
              "eval_call_cost": _eval_call_cost(load(net_path))}
    runs, texts = [], []
    for j, k in enumerate(args.in_flight.split(",")):
        settings = [(mode, gen) for mode in modes for gen in gens]
        for mode, gen in (settings if j % 2 == 0 else settings[::-1]):  # alternate which runs first
            runs.append(run(net_path, args.games, args.nodes, int(k), mode, texts, gen))
    if any(t != texts[0] for t in texts):
        print("nnue bench selfplay: error: the leaf-eval modes or move generators played different games")
        return 1
    report["runs"] = runs
    report["same_games_in_every_run"] = True
    best = max(r["per_cpu_second"]["nodes"] for r in runs if r["leaf_eval"] == modes[0] and r["movegen"] == gens[0])
    report["goal"] = {"nodes_per_cpu_second": 20000, f"best_{modes[0]}_{gens[0]}": best, "met": best >= 20000}
    if args.profile:
        report["profile"] = profile(net_path, args.games, args.nodes, int(args.in_flight.split(",")[0]))
    report["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
