"""Benchmark: batch evaluation speed of the integer net vs the float net, one core.

``nnue bench infer [--batch N] [--runs N] [--hidden H] [--net NETDIR] [--out FILE]`` prints one JSON object:
evals/s per core of ``nnue.inference.evaluate``'s integer path (feature encoding included) and of
the float torch model on the same positions and net (768×2 → H SCReLU, 8 output buckets), with
medians of several runs and their ratio. Targets (issue 6): ≥ 1M evals/s per core in batch, ≥ 3×
the float path, ≤ 5 µs per incremental move (measured by ``nnue bench incremental``); issue 23:
one position in ≤ 1 % of the time of a ``--batch`` call (``single_position``: ``evaluate`` on one
position at a time, cycling through the batch's positions, timed in the same alternating rounds).

Both paths run with one thread (``torch.set_num_threads(1)``), in alternating rounds (``--block``
timed runs of the integer path after one untimed run, then the same for the float path, and
again), so that a change in the machine's load during the run hits both alike while each path
is timed in its steady state, as a batch evaluator runs (timing single runs alternately charges
the integer path ~10 % for the float path's cache and page-fault traffic). The report gives each
path's median, quartiles and extremes of wall time, its median CPU time and minor page faults
per run, and the ratio of the medians. The integer evals are checked against ``forward_int``
first.

Page faults: the float path allocates ~24 MB of temporaries per 4,096 positions; with glibc's
default malloc settings the freed memory often goes back to the kernel and the next run faults
it in again (a few µs per 4 KiB page on a VM), so the float path's time is bimodal and depends on
the process's allocation history. ``allocator_neutral`` repeats the measurement in a child
process with ``GLIBC_TUNABLES`` that keep freed memory (trim and mmap thresholds of 1 GiB), which
takes page faults out of both paths (``--no-neutral`` skips it).
"""
from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from nnue.bench import emit, parser

REPO = Path(__file__).resolve().parents[1]


def _spread(ts: list[float]) -> dict:
    q = statistics.quantiles(ts, n=4) if len(ts) > 1 else [ts[0]] * 3
    return {"median_s": statistics.median(ts), "q1_s": q[0], "q3_s": q[2], "min_s": min(ts), "max_s": max(ts)}


def main(argv=None) -> int:
    p = parser("nnue bench infer", __doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=4096, help="positions per evaluation call")
    p.add_argument("--runs", type=int, default=21, help="timed runs per path")
    p.add_argument("--block", type=int, default=3, help="timed runs per path and round")
    p.add_argument("--hidden", type=int, default=256, help="hidden size of the random net")
    p.add_argument("--arch", choices=("perspective", "deep"), default="perspective",
                   help="perspective: 768x2 -> H SCReLU -> 8 buckets (issue 6's targets); deep: "
                        "768x2 -> H pairwise CReLU -> 16 -> 32 -> 1 CReLU layer stacks, 8 buckets")
    p.add_argument("--net", default=None, metavar="NETDIR",
                   help="benchmark your own exported net (NETDIR or NETDIR/net.safetensors) on the bundled "
                        "sample's positions: the integer path only, since an exported net has no float model "
                        "(default: a random net of --arch and --hidden)")
    p.add_argument("--out", default=None, help="also write the JSON to this file (default: stdout only)")
    p.add_argument("--json", action="store_true", help="(accepted; output is always JSON)")
    p.add_argument("--no-neutral", action="store_true", help="skip the allocator-neutral child run")
    a = p.parse_args(argv)
    for k in ("batch", "runs", "block", "hidden"):
        if getattr(a, k) < 1:
            p.error(f"--{k} must be at least 1")
    if a.arch == "deep" and a.hidden % 2:
        p.error("--arch deep uses pairwise CReLU: --hidden must be even")
    torch.set_num_threads(1)
    torch.manual_seed(0)

    from nnue.inference import evaluate, forward_int, load
    from nnue.inference.exact import STEP as _STEP
    from nnue.inference.perspective import l1_plan as _l1_plan
    from nnue.pipeline.batch import to_sparse_batch
    from nnue.pipeline.pack import pack
    from nnue.trainer.export import export, validation_boards
    from nnue.trainer.model import Arch, DeepArch, DeepNet, PerspectiveNet

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pack([REPO / "data" / "sample"], tmp / "ds", progress=False)
        deep = a.arch == "deep"
        act = "pairwise_crelu" if deep else "screlu"
        hp = {"hidden": a.hidden, "activation": act, "features": "chess768",
              "output_buckets": "MaterialCount<8>", "quant": None}
        if deep:
            hp |= {"kind": "deep", "deep": {"l1_outputs": 16, "l2_outputs": 32, "hidden_activation": "crelu"}}
            model = DeepNet(DeepArch(768, a.hidden, act, 8, 16, 32, "crelu"), backend="torch").eval()
        else:
            model = PerspectiveNet(Arch(768, a.hidden, act, 8), backend="torch").eval()
        with torch.no_grad():
            model.ft.weight.uniform_(-0.3, 0.3)
            model.l1.weight.uniform_(-1, 1)
        from safetensors.torch import save_file

        save_file(model.state_dict(), str(tmp / "w.safetensors"),
                  {"hparams": json.dumps(hp), "data": json.dumps({"path": str(tmp / "ds"), "val_fraction": 1.0})})
        export(tmp / "w.safetensors", tmp / "net", clip=True)
        net = load(tmp / "net" / "net.safetensors")
        if a.net:  # the user's own net: the integer path alone
            user = Path(a.net)
            net, model = load(user / "net.safetensors" if user.is_dir() else user), None
        boards, _ = validation_boards({"path": str(tmp / "ds"), "val_fraction": 1.0,
                                       "filters": {"skip_in_check": False, "skip_capture": False,
                                                   "skip_mate": False}}, 10**6)
    reps = -(-a.batch // len(boards))
    boards = boards.repeat(reps, 1)[: a.batch]

    def float_path():
        b = to_sparse_batch({"boards": boards, "score": torch.zeros(len(boards)),
                             "result": torch.zeros(len(boards))}, net.features, net.buckets)
        with torch.no_grad():
            return model(b.stm_indices, b.nstm_indices, b.bucket)

    def int_path():
        return evaluate(net, boards)

    singles = [boards[i:i + 1].clone() for i in range(min(len(boards), 256))]
    ONE_CALLS = 64  # single-position calls per timed run

    def one_path(_state=[0]):
        j = _state[0]
        for k in range(ONE_CALLS):
            evaluate(net, singles[(j + k) % len(singles)])
        _state[0] = (j + ONE_CALLS) % len(singles)

    stm, nstm = net.features.encode(boards)
    if net.kind == "deep":
        from nnue.inference.deep import forward_int as forward_deep
        assert torch.equal(int_path(), forward_deep(net, stm, nstm, net.buckets.of(boards)))
    else:
        assert torch.equal(int_path(), forward_int(net, stm, nstm, net.buckets.of(boards)))
    one = torch.cat([evaluate(net, b) for b in singles])
    assert torch.equal(one, int_path()[:len(singles)])  # the one-position path is exact too
    paths = {"int": int_path, "float": float_path} if model is not None else {"int": int_path}
    paths["one"] = one_path
    wall = {k: [] for k in paths}
    cpu = {k: [] for k in paths}
    faults = {k: [] for k in paths}
    for f in paths.values():  # warm-up: caches, the int8 self-check, allocator
        f()
        f()
    while len(wall["int"]) < a.runs:
        for k, f in paths.items():
            f()  # untimed: the first run after the other path
            for _ in range(min(a.block, a.runs - len(wall[k]))):
                flt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                c, t = time.process_time(), time.perf_counter()
                f()
                wall[k].append(time.perf_counter() - t)
                cpu[k].append(time.process_time() - c)
                faults[k].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - flt)
    one_wall, one_cpu = statistics.median(wall["one"]) / ONE_CALLS, statistics.median(cpu["one"]) / ONE_CALLS
    single = {"us_per_call": round(one_wall * 1e6, 2), "cpu_us_per_call": round(one_cpu * 1e6, 2),
              "batch_call_ms": round(statistics.median(wall["int"]) * 1e3, 3),
              "batch_call_cpu_ms": round(statistics.median(cpu["int"]) * 1e3, 3),
              "over_batch_call": round(one_wall / statistics.median(wall["int"]), 5),
              "over_batch_call_cpu": round(one_cpu / statistics.median(cpu["int"]), 5), "goal": 0.01,
              "path": "nnue.inference.incremental.evaluate_one (api.evaluate for <= SMALL_BATCH positions)"}
    if model is None:
        return emit({"benchmark": "infer", "net": str(a.net), "architecture": net.arch, "batch": a.batch,
                     "runs": a.runs, "threads": torch.get_num_threads(),
                     "cpu_capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
                     "int_evals_per_s": round(a.batch / statistics.median(wall["int"])),
                     "int_median_s": statistics.median(wall["int"]), "int_wall": _spread(wall["int"]),
                     "single_position": single,
                     "notes": "--net: the integer path of the given net only (feature encoding included), "
                              "on the bundled sample's positions, one thread"}, a.out)
    t_int, t_float = statistics.median(wall["int"]), statistics.median(wall["float"])
    ips, fps = a.batch / t_int, a.batch / t_float
    plan = _l1_plan(net) if net.kind == "perspective" else {"mode": "int8 digits (inference/deep.py)"}
    label = (f"chess768 -> {a.hidden}x2 pairwise_crelu -> 16 crelu -> 32 crelu -> 1, MaterialCount<8>"
             if net.kind == "deep" else f"chess768 -> {a.hidden}x2 screlu -> MaterialCount<8>")
    report = {
        "benchmark": "infer", "arch": net.kind, "net": label,
        "batch": a.batch, "runs": a.runs, "block": a.block, "threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
        "int_evals_per_s": round(ips), "float_evals_per_s": round(fps), "int_over_float": round(ips / fps, 3),
        "single_position": single,
        "int_median_s": t_int, "float_median_s": t_float,
        "int_wall": _spread(wall["int"]), "float_wall": _spread(wall["float"]),
        "int_cpu_median_s": statistics.median(cpu["int"]),
        "float_cpu_median_s": statistics.median(cpu["float"]),
        "int_page_faults_median": statistics.median(faults["int"]),
        "float_page_faults_median": statistics.median(faults["float"]),
        "int_l1_path": plan["mode"] + (" (one-column products)" if plan.get("gemv") else ""),
        "int_step": _STEP,
        "incremental_us_per_move": None,
        "targets": {"int_evals_per_s": 1_000_000, "int_over_float": 3.0, "incremental_us_per_move": 5.0},
        "notes": ("Both paths include feature encoding from packed boards; one thread; alternating "
                  "rounds of --block timed runs per path. The integer path (inference/net.py) sorts "
                  "the positions by piece count, runs the feature transformer as an exact float32 "
                  "embedding_bag per step of positions (bags as wide as the step's largest piece "
                  "count), and L1 as exact int8 torch._int_mm products on byte digits of the "
                  "activations (only the columns of the step's buckets), then int64 checks and "
                  "divisions. Incremental updates: nnue bench incremental."
                  if net.kind == "perspective" else
                  "Deep net (--arch deep): the same sorted steps and feature transformer, then "
                  "inference/deep.py's layers: u8 activations, int8 torch._int_mm per weight digit "
                  "(|d| <= 64), only the buckets of each step; int64 checks and shifts. The float path "
                  "is trainer.model.DeepNet's forward."),
    }
    if not a.no_neutral:
        report["allocator_neutral"] = _neutral_run(a)
    return emit(report, a.out)


def _neutral_run(a) -> dict:
    """The same measurement in a child process whose glibc malloc keeps freed memory."""
    env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.trim_threshold=1073741824:"
                                          "glibc.malloc.mmap_threshold=1073741824")
    args = ["--batch", str(a.batch), "--runs", str(a.runs), "--block", str(a.block), "--hidden",
            str(a.hidden), "--arch", a.arch, "--no-neutral"]
    r = subprocess.run([sys.executable, "-c", "import sys; from nnue.bench.bench_infer import main; "
                        "sys.exit(main(sys.argv[1:]))", *args], env=env, capture_output=True, text=True)
    if r.returncode:
        return {"error": r.stderr.strip().splitlines()[-1:] or ["failed"]}
    child = json.loads(r.stdout)
    keys = ("int_evals_per_s", "float_evals_per_s", "int_over_float", "int_page_faults_median",
            "float_page_faults_median", "single_position")
    return {"glibc_tunables": env["GLIBC_TUNABLES"], **{k: child[k] for k in keys}}


if __name__ == "__main__":
    sys.exit(main())
