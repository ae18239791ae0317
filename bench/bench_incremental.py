"""Benchmark: incremental accumulator updates against full refreshes, and block-sparse against dense L1.

``nnue bench incremental [--kind perspective|sfnnv5] [--hidden H] [--net FILE] [--runs N]
[--batch N] [--out FILE]`` prints one JSON object. Net (``--kind perspective``, the default):
chess768 → H×2 SCReLU → MaterialCount<8> (default H = 256), random int16 weights of an exported
net's magnitudes, on one thread. ``--kind sfnnv5``: Stockfish 15.1's architecture
(HalfKAv2_hm → H = 1,024 by default, FT + 8 PSQT columns, 8 layer stacks), random weights of
the built-in net's magnitudes, or the ``.nnue`` file given by ``--net`` (e.g. the engine's own,
written by its ``export_net``); no sparse-L1 part (the kind has none).

* Incremental: every move of the 38 games of the bundled sample (``data/sample``), replayed with
  :class:`nnue.inference.incremental.IncrementalAccumulator`; per move the time of ``push`` +
  ``pop`` (µs, median over moves and runs), also split by kind of move, against a full refresh
  of both accumulators for the position (the same numpy code summing every active row, and the
  batch path of ``forward_int`` on one position: encode + ``embedding_bag``), and the eval of one
  position (incremental ``evaluate`` against ``forward_int`` on one position).
* Sparse L1: the sample positions (batch ``--batch``), ``forward_int`` against
  :func:`nnue.inference.sparse_l1.forward_sparse` (both methods) from the same feature indices,
  evals/s and the measured block sparsity (blocks of 4), for the random net and for the same net
  with half and with 90 % of its neurons dead. Outputs are checked identical.

Target (issue 6): ≤ 5 µs per incremental move.
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from nnue.bench import emit, parser

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample" / "sf15-n5000-s1-sample.plain"


def make_net(hidden: int, seed: int = 0, dead: float = 0.0):
    """chess768 → hidden×2 SCReLU → MaterialCount<8>, random int16 weights with an exported net's
    magnitudes: FT weights ±77 (±0.3 at QA = 255), FT biases −64..192, L1 weights ±64 (±1.0 at
    QB = 64), bucket biases ±2000. dead: fraction of neurons with a bias of −8000 (never fire)."""
    from nnue.inference.kinds.perspective import IntegerNet
    from nnue.spec.quant import QuantScheme
    from nnue.pipeline.features import get_feature_set

    fs = get_feature_set("chess768")
    g = torch.Generator().manual_seed(seed)
    l0w = torch.randint(-77, 78, (fs.num_inputs, hidden), generator=g).to(torch.int16)
    l0b = torch.randint(-64, 193, (hidden,), generator=g).to(torch.int16)
    l0b[torch.randperm(hidden, generator=g)[: int(dead * hidden)]] = -8000
    l1w = torch.randint(-64, 65, (8, 2 * hidden), generator=g).to(torch.int16)
    l1b = torch.randint(-2000, 2001, (8,), generator=g).to(torch.int16)
    arch = {"feature_set": fs.name, "feature_hash": fs.hash, "num_inputs": fs.num_inputs,
            "hidden": hidden, "activation": "screlu", "output_buckets": "MaterialCount<8>",
            "num_buckets": 8, "l1_inputs": 2 * hidden}
    return IntegerNet(arch, QuantScheme(), l0w, l0b, l1w, l1b)


def make_sfnnv5_net(hidden: int = 1024, seed: int = 0):
    """Stockfish 15.1's architecture (HalfKAv2_hm → hidden, 8 PSQT columns, 8 layer stacks) with
    uniform random weights over the 1st-99th percentile ranges of Stockfish 15.1's built-in net
    (read from its ``export_net`` file: FT weights −147..111, FT biases −159..344, PSQT ±44,500,
    fc_0 weights ±25 and biases ±6,000, fc_1 weights ±60 and biases ±7,000, fc_2 weights ±127
    and biases −470..3,260); fc_1's padding columns zero."""
    from nnue.inference.kinds import sfnnv5

    g = torch.Generator().manual_seed(seed)
    arch = sfnnv5.make_sfnnv5_arch(hidden=hidden, description="bench net")
    lims = {"ft_bias": (-159, 345), "ft_weight": (-147, 112), "psqt": (-44500, 44501),
            "fc0_bias": (-6000, 6001), "fc0_weight": (-25, 26), "fc1_bias": (-7000, 7001),
            "fc1_weight": (-60, 61), "fc2_bias": (-470, 3261), "fc2_weight": (-127, 128)}
    t = {k: torch.randint(*lims[k], shape, generator=g).to(dt)
         for k, (dt, shape) in sfnnv5.SFNNv5IntegerNet.tensor_specs(arch).items()}
    t["fc1_weight"][:, :, sfnnv5.FC1_INPUTS:] = 0
    return sfnnv5.SFNNv5IntegerNet(arch, sfnnv5.SCHEME, *t.values())


def sample_games() -> list[tuple[str, list[str], list[str]]]:
    """The sample's games: (start FEN, UCI moves, kind of each move)."""
    import chess

    recs, fen = [], None
    for line in open(SAMPLE):
        if line.startswith("fen "):
            fen = line[4:].strip()
        elif line.startswith("move "):
            recs.append((fen, line[5:].strip()))
    games, prev_after = [], None
    for fen, mv in recs:
        b = chess.Board(fen)
        if not (games and prev_after == b.fen().split()[:4]):
            games.append((fen, [], []))
        m = chess.Move.from_uci(mv)
        kind = ("castle" if b.is_castling(m) else "en_passant" if b.is_en_passant(m)
                else "promotion" if m.promotion else "king" if b.piece_type_at(m.from_square) == chess.KING
                else "capture" if b.is_capture(m) else "quiet")
        games[-1][1].append(mv)
        games[-1][2].append(kind)
        b.push(m)
        prev_after = b.fen().split()[:4]
    return games


def _median_us(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1e6, 3)


def bench_incremental(net, games, runs: int) -> dict:
    from nnue.inference.incremental import IncrementalAccumulator
    from nnue.inference.exact import accumulators
    from nnue.inference.kinds.perspective import forward_int

    fs, buckets = net.features, net.buckets
    pc = time.perf_counter
    sf = net.kind == "sfnnv5"
    if sf:
        from nnue.inference.kinds import sfnnv5
        forward_int = sfnnv5.forward_int  # noqa: F811

    best: dict[str, float] = {}

    def replay(measure, passes: int, name: str | None = None) -> list:
        """Replay every sample game ``passes`` times (plus a warm-up pass); ``measure(inc, mv,
        kind)`` is called before each move is played for good and returns its timing. With a
        name, the lowest of the passes' medians is kept in ``best`` (the machine is shared:
        a pass that ran undisturbed is the better estimate)."""
        out = []
        for run in range(passes + 1):
            this = []
            for fen, moves, kinds in games:
                inc = IncrementalAccumulator.from_fen(net, fen)
                for mv, kind in zip(moves, kinds):
                    this.append(measure(inc, mv, kind))
                    inc.push(mv)
            if run:
                out += this
                if name:
                    med = statistics.median(t if isinstance(t, float) else t[2] - t[0] for t in this)
                    best[name] = min(best.get(name, med), med)
        return out

    by_kind: dict[str, list[float]] = {}

    def push_pop(inc, mv, kind):
        t0 = pc()
        inc.push(mv)
        t1 = pc()
        inc.pop()
        t2 = pc()
        by_kind.setdefault(kind, []).append(t2 - t0)
        return t0, t1, t2

    triples = replay(push_pop, runs, "push_pop")
    both = [c - a for a, b, c in triples]
    push_t = [b - a for a, b, c in triples]
    pop_t = [c - b for a, b, c in triples]

    def push_eval_pop(inc, mv, kind):
        t0 = pc()
        inc.push(mv)
        inc.evaluate()
        inc.pop()
        return pc() - t0

    pep = replay(push_eval_pop, runs, "push_evaluate_pop")

    def evaluate(inc, mv, kind):
        t0 = pc()
        inc.evaluate()
        return pc() - t0

    ev = replay(evaluate, runs, "evaluate")

    def refresh_numpy(inc, mv, kind):
        t0 = pc()
        inc.full_refresh()
        return pc() - t0

    ref_np_t = replay(refresh_numpy, runs, "refresh_numpy")

    checked = [0]

    def batch_one(inc, mv, kind):
        """forward_int's path on one position: encode + embedding_bag, then the full eval; and
        the exactness check of the incremental state against it."""
        board = torch.frombuffer(bytearray(inc.packed()), dtype=torch.uint8).view(1, 32)
        t0 = pc()
        stm, nstm = fs.encode(board)
        if sf:  # FT (wrapped to int16) and PSQT sums, as the incremental rows split them
            a = [sfnnv5.accumulate(net, idx) for idx in (stm, nstm)]
        else:
            a = torch.stack((accumulators(net, stm)[0], accumulators(net, nstm)[0]))
        t1 = pc()
        ref = forward_int(net, stm, nstm, buckets.of(board))
        t2 = pc()
        if sf:
            for (a_ref, p_ref), row in zip(a, inc.accumulators()):
                a_inc, p_inc = sfnnv5.split_accumulator(net, row.view(1, -1))
                assert torch.equal(a_inc, a_ref.to(torch.int64)) and torch.equal(p_inc, p_ref)
            assert inc.evaluate() == int(ref[0])
        else:
            assert torch.equal(a, inc.accumulators()) and inc.evaluate() == int(ref[0])
        checked[0] += 1
        return t1 - t0, t2 - t1

    torch_t = replay(batch_one, 1)
    inc_us = _median_us(both)
    ref_np = _median_us(ref_np_t)
    return {
        "games": len(games), "moves": sum(len(g[1]) for g in games), "runs": runs,
        "incremental_us_per_move": inc_us,
        "best_pass_median_us": {k: round(v * 1e6, 3) for k, v in best.items()},
        "push_us": _median_us(push_t), "pop_us": _median_us(pop_t),
        "incremental_mean_us": round(statistics.fmean(both) * 1e6, 3),
        "incremental_p90_us": round(sorted(both)[int(0.9 * len(both))] * 1e6, 3),
        "by_kind_us": {k: {"moves": len(v) // (runs + 1), "median_us": _median_us(v)}
                       for k, v in sorted(by_kind.items())},
        "full_refresh_us_per_move": {"numpy_table": ref_np,
                                     "torch_encode_embedding_bag": _median_us([t[0] for t in torch_t])},
        "incremental_speedup_vs_numpy_refresh": round(ref_np / inc_us, 2),
        "eval_us": {"incremental_evaluate": _median_us(ev),
                    "forward_int_one_position": _median_us([t[1] for t in torch_t])},
        "push_evaluate_pop_us": _median_us(pep),
        "exact_checks": checked[0],
    }


def _dense_l1(net, x: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
    """forward_int's L1 on given L1 inputs: every bucket as a float64 matrix product, then a gather."""
    w = net.l1w.double()
    return (x.reshape(x.shape[0], -1).double() @ w.T).gather(1, bucket.view(-1, 1)).squeeze(1).to(torch.int64)


def bench_sparse(net, boards: torch.Tensor, runs: int, label: str) -> dict:
    from nnue.inference.exact import accumulators_f32 as _accumulators_f32
    from nnue.inference.kinds.perspective import forward_int
    from nnue.inference.kinds.perspective import activations
    from nnue.inference.sparse_l1 import block_stats, forward_sparse
    from nnue.inference.sparse_sums import l1_sum

    stm, nstm = net.features.encode(boards)
    bucket = net.buckets.of(boards)
    n = boards.shape[0]

    def time_it(fn) -> float:
        fn()
        ts = []
        for _ in range(runs):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    ref = forward_int(net, stm, nstm, bucket)
    out = {"net": label}
    identical = True
    for method in ("gather", "compact"):
        ev, st = forward_sparse(net, stm, nstm, bucket, method=method, return_stats=True)
        identical &= torch.equal(ev, ref)
    x = activations(net, torch.stack([_accumulators_f32(net, stm), _accumulators_f32(net, nstm)], 1))
    out.update(block=st["block"], block_sparsity=round(st["sparsity"], 4),
               element_sparsity=round(block_stats(x, 1)["sparsity"], 4),
               dead_block_fraction=round(st["dead_fraction"], 4), identical_to_forward_int=identical)
    t_dense = time_it(lambda: forward_int(net, stm, nstm, bucket))
    t_gather = time_it(lambda: forward_sparse(net, stm, nstm, bucket, method="gather"))
    t_compact = time_it(lambda: forward_sparse(net, stm, nstm, bucket, method="compact"))
    out["evals_per_s"] = {"dense_forward_int": round(n / t_dense), "sparse_gather": round(n / t_gather),
                          "sparse_compact": round(n / t_compact)}
    assert torch.equal(l1_sum(net, x, bucket), _dense_l1(net, x, bucket))
    out["l1_only_ms"] = {"dense": round(time_it(lambda: _dense_l1(net, x, bucket)) * 1e3, 3),
                         "sparse_gather": round(time_it(lambda: l1_sum(net, x, bucket)) * 1e3, 3),
                         "sparse_compact": round(time_it(lambda: l1_sum(net, x, bucket, method="compact")) * 1e3, 3)}
    return out


def notes_sfnnv5(inc: dict) -> str:
    k = inc["by_kind_us"]
    kinds = ", ".join(f"{name} {v['median_us']}" for name, v in k.items())
    return (
        f"sfnnv5 incremental push+pop {inc['incremental_us_per_move']} us median per move (mean "
        f"{inc['incremental_mean_us']}, p90 {inc['incremental_p90_us']}); by kind (us): {kinds}. The rows are "
        f"L1 + 8 int32 columns (FT then PSQT): a quiet move takes 4 rows of ~4 KiB and adds them into "
        f"the (2, L1 + 8) accumulator; every own king move refreshes that perspective (HalfKAv2_hm: "
        f"a new king square is a new table slice), hence the king and castling medians. A full refresh "
        f"of both perspectives costs {inc['full_refresh_us_per_move']['numpy_table']} us in the same numpy "
        f"code and {inc['full_refresh_us_per_move']['torch_encode_embedding_bag']} us through the batch path's "
        f"encode + embedding_bag on one position. evaluate() costs {inc['eval_us']['incremental_evaluate']} us "
        f"(NumPy: int16 wrap, clamp, pairwise product, fc_0 as a float32 matrix-vector product, fc_1 and "
        f"fc_2 in float64, the wraps and truncating divisions in Python ints) against "
        f"{inc['eval_us']['forward_int_one_position']} us for the batch path's forward_int on one "
        "position (torch's per-op cost). Exact: every replayed position's accumulators and eval are "
        "checked against the batch path (exact_checks). Timings on a shared 2-core machine vary by "
        "20-50 % between runs (best_pass_median_us: the quietest pass)."
    )


def notes(inc: dict, sparse: list[dict]) -> str:
    k = inc["by_kind_us"]
    kinds = ", ".join(f"{name} {v['median_us']}" for name, v in k.items())
    met = "met" if inc["incremental_us_per_move"] <= 5.0 else "not met"
    sp = "; ".join(f"{s['net']}: block sparsity {s['block_sparsity']}, L1 alone dense "
                   f"{s['l1_only_ms']['dense']} ms, gather {s['l1_only_ms']['sparse_gather']} ms, compact "
                   f"{s['l1_only_ms']['sparse_compact']} ms" for s in sparse)
    return (
        f"Incremental push+pop {inc['incremental_us_per_move']} us median per move (target 5 us: {met} "
        f"on the median; mean {inc['incremental_mean_us']}, p90 {inc['incremental_p90_us']}); by kind (us): "
        f"{kinds}. Where the time goes: a push of a quiet move or capture takes the inlined path: "
        "4 or 6 lookups in the feature set's own index table, one numpy take of the rows into a "
        "reused buffer, one add and one or two subtracts on the (2, H) int32 accumulator (about "
        "1.5-2 us: numpy's fixed cost of ~0.5 us a call, nearly independent of H = 256), and "
        "2-3 us of Python for move decoding, the board, castling/ep/counters and the undo record. "
        "Castling, en passant, promotions and king moves that need a refresh go through the "
        "general path (more Python, a take per layer or a refresh of one perspective). pop only "
        "restores the board: the previous accumulators are still on the stack. A full refresh of "
        f"both perspectives costs {inc['full_refresh_us_per_move']['numpy_table']} us in the same numpy code "
        "(a 64-square scan and two takes of ~30 rows) and "
        f"{inc['full_refresh_us_per_move']['torch_encode_embedding_bag']} us through the batch path "
        "(encode + embedding_bag on one position: torch's per-op overhead). The eval of one "
        f"position from the accumulators costs {inc['eval_us']['incremental_evaluate']} us (int16 range "
        "check, clamp, square, an int64 dot with the bucket's weights, the truncating divisions). "
        "Compiled code would remove the per-call overheads that dominate every number here. "
        f"Sparse L1 (batch, one thread): {sp}. Both sparse methods are exact; the dense float64 "
        "matrix product (BLAS) stays hard to beat on CPU: the per-position gather pays for its "
        "index work (nonzero, two gathers, index_add) unless most blocks are zero, and 'compact' "
        "only drops blocks that are zero in every position (dead neurons). Random nets have low "
        "block sparsity (neurons fire independently, so a block of 4 is all zero with p ~ p0^4); "
        "a trained net's sparsity should be measured on that net. Timings on a shared 2-core "
        "machine vary by 20-50 % between runs (best_pass_median_us: the quietest pass)."
    )


def main(argv=None) -> int:
    p = parser("nnue bench incremental", __doc__.split("\n\n")[0])
    p.add_argument("--kind", choices=("perspective", "sfnnv5"), default="perspective",
                   help="net kind: perspective (chess768 -> H x2 SCReLU) or sfnnv5 (Stockfish 15.1's; "
                        "default: perspective)")
    p.add_argument("--hidden", type=int, default=None,
                   help="hidden size (L1) of the random net (default: 256 perspective, 1024 sfnnv5)")
    p.add_argument("--net", default=None,
                   help="sfnnv5 only: a Stockfish 15.1 .nnue file to time instead of the random net (default: none)")
    p.add_argument("--runs", type=int, default=7, help="passes over the sample games / timed repeats")
    p.add_argument("--batch", type=int, default=4096, help="positions in the sparse-L1 batch")
    p.add_argument("--games", type=int, default=None, help="use only the first N sample games (default: all)")
    p.add_argument("--out", default=None, help="also write the JSON to this file (default: stdout only)")
    p.add_argument("--json", action="store_true", help="(accepted; output is always JSON)")
    a = p.parse_args(argv)
    torch.set_num_threads(1)

    from nnue.inference.api import boards_from_fens

    games = sample_games()[: a.games]
    if a.kind == "sfnnv5":
        return emit(report_sfnnv5(a, games), a.out)
    if a.net:
        p.error("--net: only with --kind sfnnv5")
    a.hidden = a.hidden or 256
    net = make_net(a.hidden)
    inc = bench_incremental(net, games, a.runs)
    fens = [line[4:].strip() for line in open(SAMPLE) if line.startswith("fen ")]
    boards = boards_from_fens(fens)
    boards = boards.repeat(-(-a.batch // len(boards)), 1)[: a.batch]
    sparse = [bench_sparse(net, boards, a.runs, "random"),
              bench_sparse(make_net(a.hidden, dead=0.5), boards, a.runs, "random, half the neurons dead"),
              bench_sparse(make_net(a.hidden, dead=0.9), boards, a.runs, "random, 90 % of the neurons dead")]
    report = {
        "benchmark": "incremental",
        "net": f"chess768 -> {a.hidden}x2 screlu -> MaterialCount<8> (random int16, exported magnitudes)",
        "threads": torch.get_num_threads(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "machine": platform.machine(), "python": platform.python_version(), "numpy": np.__version__,
        "torch": torch.__version__,
        **inc,
        "sparse_l1": {"batch": a.batch, "nets": sparse},
        "targets": {"incremental_us_per_move": 5.0},
        "target_met": inc["incremental_us_per_move"] <= 5.0,
        "notes": notes(inc, sparse),
    }
    return emit(report, a.out)


def bench_one_position(net, games, runs: int) -> dict:
    """``nnue.inference.evaluate`` on one and on 8 positions (the one-position path,
    :func:`nnue.inference.incremental.evaluate_one`) against the kind's batch evaluator on the
    same positions and on a 4,096-position call: median CPU seconds (``time.process_time``) per
    call, positions from the sample games; the results are checked equal."""
    import chess

    from nnue.inference import api
    from nnue.pipeline.board import pack_board

    packed = []
    for fen, moves, _ in games:
        b = chess.Board(fen)
        for mv in moves:
            b.push_uci(mv)
            packed.append(pack_board(b))
    boards = torch.frombuffer(bytearray(b"".join(packed)), dtype=torch.uint8).view(-1, 32)
    big = boards.repeat(-(-4096 // len(boards)), 1)[:4096].contiguous()
    batch = api.evaluator(net).evaluate
    ref = batch(net, big)
    n1 = min(256, len(boards))
    assert torch.equal(torch.cat([api.evaluate(net, boards[i:i + 1]) for i in range(n1)]), ref[:n1])
    assert torch.equal(api.evaluate(net, boards[:8]), ref[:8])

    def cpu(fn, reps: int) -> float:
        ts = []
        for _ in range(reps):
            t = time.process_time()
            fn()
            ts.append(time.process_time() - t)
        return statistics.median(ts)

    k = 64
    one = cpu(lambda: [api.evaluate(net, boards[i:i + 1]) for i in range(k)], runs) / k
    one_batch = cpu(lambda: [batch(net, boards[i:i + 1]) for i in range(k)], runs) / k
    eight = cpu(lambda: [api.evaluate(net, boards[i:i + 8]) for i in range(0, 8 * k, 8)], runs) / k
    eight_batch = cpu(lambda: [batch(net, boards[i:i + 8]) for i in range(0, 8 * k, 8)], runs) / k
    full = cpu(lambda: batch(net, big), runs)
    return {"one_position_us_cpu": round(one * 1e6, 1), "batch_evaluator_one_position_us_cpu": round(one_batch * 1e6, 1),
            "eight_positions_ms_cpu": round(eight * 1e3, 3),
            "batch_evaluator_eight_positions_ms_cpu": round(eight_batch * 1e3, 3),
            "batch_4096_ms_cpu": round(full * 1e3, 2),
            "one_position_over_4096_call": round(one / full, 5), "checked_equal": True}


def report_sfnnv5(a, games) -> dict:
    """The JSON of ``--kind sfnnv5``: the incremental part only (no sparse L1 for this kind)."""
    if a.net:
        from nnue.inference.kinds.sfnnv5 import read_nnue

        net, label = read_nnue(a.net), f"{Path(a.net).name} (Stockfish 15.1 .nnue)"
    else:
        net = make_sfnnv5_net(a.hidden or 1024)
        label = "random, the built-in net's magnitudes"
    inc = bench_incremental(net, games, a.runs)
    one = bench_one_position(net, games, a.runs)
    h = net.arch["hidden"]
    return {
        "benchmark": "incremental", "kind": "sfnnv5",
        "net": f"sfnnv5: HalfKAv2_hm -> {h} + 8 PSQT, pairwise, 8 layer stacks ({label})",
        "threads": torch.get_num_threads(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "machine": platform.machine(), "python": platform.python_version(), "numpy": np.__version__,
        "torch": torch.__version__, "load_average": [round(x, 2) for x in os.getloadavg()],
        **inc,
        "one_position_from_scratch": one,
        "notes": notes_sfnnv5(inc) + (
            f" One position from scratch through nnue.inference.evaluate (sfnnv5.evaluate_small: the compiled "
            f"kernel of inference/kinds/sfnnv5/compiled.py, as the batch evaluator's default on CPU; without numba "
            f"incremental.evaluate_one): {one['one_position_us_cpu']} us of CPU against "
            f"{one['batch_evaluator_one_position_us_cpu']} us for the batch evaluator on one position and "
            f"{one['batch_4096_ms_cpu']} ms for a 4,096-position call ({100 * one['one_position_over_4096_call']:.2f} %); "
            f"8 positions {one['eight_positions_ms_cpu']} ms against {one['batch_evaluator_eight_positions_ms_cpu']} ms."),
    }


if __name__ == "__main__":
    sys.exit(main())
