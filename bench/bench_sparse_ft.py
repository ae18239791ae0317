"""Benchmark of the fused feature transformer against the torch (EmbeddingBag) reference; prints JSON.

For each backend and activation: forward, backward and forward+backward time (median of --reps
runs after --warmup), positions/s, and GB/s from counted bytes (:func:`counted_bytes`: the bytes the
op must move, the same count for every backend). On CUDA it also measures the device's copy
bandwidth and reports the bandwidth floor (counted bytes ÷ copy bandwidth) and the fraction of it
each backend reaches, with the issue-5 targets (fused fwd+bwd ≥ 3× the reference, ≥ 60 % of the
floor). ``--sweep`` times the fused op's block sizes on CUDA.

Default case: on CUDA the issue's target, batch 16384, F = 45056 (HalfKAv2_hm-sized, random
indices), H = 1024, 32 active features per perspective; on CPU a scaled-down case (batch 1024,
H = 256) on the torch path only — the Triton interpreter is a correctness tool, not a speed one —
and the JSON says so.

    python bench/bench_sparse_ft.py [--device cpu|cuda] [--out FILE] [--sweep] [...]
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time

import torch

from nnue.kernels import reference
from nnue.bench import emit, parser

TARGET = dict(batch=16384, features=45056, hidden=1024, active=32)
CPU_CASE = dict(batch=1024, features=45056, hidden=256, active=32)
SPEED_TARGETS = {"fused_fwd_bwd_speedup_vs_reference": 3.0, "fraction_of_bandwidth_floor": 0.60}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


# ---- shared with bench_activations.py --------------------------------------------------------------

def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(fn, device: torch.device, reps: int, warmup: int) -> dict:
    """Median / min / max seconds of ``fn()`` over ``reps`` runs after ``warmup`` runs (CUDA events on
    GPU, perf_counter on CPU)."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "reps": reps}


def copy_bandwidth(device: torch.device, nbytes: int, reps: int = 10) -> float:
    """Measured device copy bandwidth in bytes/s: ``dst.copy_(src)`` moves 2·nbytes (read + write)."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    t = measure(lambda: dst.copy_(src), device, reps=reps, warmup=3)["median_s"]
    return 2 * src.numel() * 4 / t


def environment(device: torch.device) -> dict:
    env = {"device": device.type, "torch": torch.__version__, "python": platform.python_version(),
           "machine": platform.machine(), "cpu_threads": torch.get_num_threads(),
           # other work on a shared machine shows here: CPU timings are only as quiet as this
           "load_average_1_5_15min": [round(x, 2) for x in os.getloadavg()]}
    if device.type == "cuda":
        import triton
        env |= {"gpu": torch.cuda.get_device_name(device), "triton": triton.__version__,
                "cuda": torch.version.cuda}
    return env


def cpu_note(case: str, is_target: bool, backends: list[str]) -> str:
    """What a CPU run's numbers mean, for the JSON."""
    size = "the target case" if is_target else "scaled down from the target case"
    how = ("torch reference only; the Triton kernels run on CPU only under the interpreter, which checks "
           "correctness, not speed." if "triton" not in backends else
           "the Triton timings are the interpreter's (TRITON_INTERPRET=1): a smoke test of this script, "
           "not a speed measurement.")
    return f"CPU run at {case} ({size}): {how} Target-case GPU numbers: bench/gpu_kernels.sh."


def pick_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        sys.exit("bench: --device cuda but no CUDA device")
    return torch.device(name)


# ---- this benchmark --------------------------------------------------------------------------------

def counted_bytes(B: int, F: int, H: int, A: int, valid: int, activation: str, w_bytes: int, i_bytes: int) -> dict:
    """Bytes the op must move (the bandwidth floor's numerator), per pass.

    forward: both perspectives' indices (2·B·A·i), the gathered weight rows (valid·H·w, every row
    read as often as it occurs: the gather sees no cache reuse at these sizes), the bias, the output
    (B·2·H'·w), and the fp32 accumulators the backward needs (B·2·H·4; not for ``none``).
    backward: indices again, grad_out, the saved accumulators, the fp32 weight gradient's zero fill
    (F·H·4), the scatter-add (one 4-byte update per gathered element), the bias gradient, and for
    bf16 the cast of the weight gradient (F·H·(4 + 2)).
    valid: the number of non-padding indices over the batch and both perspectives.
    """
    HO = H // 2 if activation == "pairwise_crelu" else H
    acc = 0 if activation == "none" else B * 2 * H * 4
    fwd = 2 * B * A * i_bytes + valid * H * w_bytes + H * w_bytes + B * 2 * HO * w_bytes + acc
    bwd = (2 * B * A * i_bytes + B * 2 * HO * w_bytes + acc + F * H * 4 + valid * H * 4 + H * w_bytes
           + (F * H * (4 + 2) if w_bytes == 2 else 0))
    return {"fwd": fwd, "bwd": bwd, "fwd_bwd": fwd + bwd}


def make_case(B: int, F: int, H: int, A: int, dtype, device, seed: int = 0):
    """Random weights (FT scale) and indices: every slot valid, as for a 32-piece position."""
    gen = torch.Generator().manual_seed(seed)
    w = (torch.randn(F, H, generator=gen) * 0.1).to(dtype).to(device).requires_grad_(True)
    b = (torch.randn(H, generator=gen) * 0.1).to(dtype).to(device).requires_grad_(True)
    stm = torch.randint(0, F, (B, A), generator=gen, dtype=torch.int32).to(device)
    nstm = torch.randint(0, F, (B, A), generator=gen, dtype=torch.int32).to(device)
    return w, b, stm, nstm


def op_for(backend: str, block_h=None):
    if backend == "torch":
        return reference.sparse_ft_pair
    from nnue.kernels import sparse_ft
    return lambda w, b, s, n, act: sparse_ft.sparse_ft_pair(w, b, s, n, act, block_h=block_h)


def time_backend(op, w, b, stm, nstm, activation: str, device, reps: int, warmup: int) -> dict:
    """fwd (training forward: grad enabled, so the fused op saves its accumulators), fwd+bwd, and
    bwd = fwd+bwd − fwd."""
    grad_out = torch.randn_like(op(w, b, stm, nstm, activation))

    def fwd():
        return op(w, b, stm, nstm, activation)

    def fwd_bwd():
        torch.autograd.grad(op(w, b, stm, nstm, activation), (w, b), grad_out)

    f = measure(fwd, device, reps, warmup)
    fb = measure(fwd_bwd, device, reps, warmup)
    return {"fwd": f, "fwd_bwd": fb, "bwd": {"median_s": max(fb["median_s"] - f["median_s"], 0.0)}}


def summarise(times: dict, nbytes: dict, B: int, copy_bw: float | None) -> dict:
    out = {}
    for k in ("fwd", "bwd", "fwd_bwd"):
        t = times[k]["median_s"]
        row = {"time_ms": t * 1e3, "positions_per_s": B / t if t else None,
               "GB_per_s": nbytes[k] / t / 1e9 if t else None}
        if "min_s" in times[k]:  # a shared machine's bursts of other work show as median >> min
            row["min_time_ms"] = times[k]["min_s"] * 1e3
        if copy_bw:
            row["fraction_of_bandwidth_floor"] = (nbytes[k] / copy_bw) / t if t else None
        out[k] = row
    out["reps"] = times["fwd"]["reps"]
    return out


def run_case(B, F, H, A, activation, dtype_name, device, backends, reps, warmup, copy_bw) -> dict:
    dtype = DTYPES[dtype_name]
    w, b, stm, nstm = make_case(B, F, H, A, dtype, device)
    nbytes = counted_bytes(B, F, H, A, 2 * B * A, activation, w.element_size(), stm.element_size())
    res = {"activation": activation, "dtype": dtype_name, "counted_bytes": nbytes}
    if copy_bw:
        res["bandwidth_floor_ms"] = {k: v / copy_bw * 1e3 for k, v in nbytes.items()}
    for backend in backends:
        res[backend] = summarise(time_backend(op_for(backend), w, b, stm, nstm, activation, device, reps, warmup),
                                 nbytes, B, copy_bw)
    if "triton" in backends:
        speed = {k: res["torch"][k]["time_ms"] / res["triton"][k]["time_ms"] for k in ("fwd", "bwd", "fwd_bwd")
                 if res["triton"][k]["time_ms"]}
        res["speedup_triton_vs_torch"] = speed
        res["targets_met"] = {
            "fused_fwd_bwd_speedup_vs_reference": speed.get("fwd_bwd", 0) >= SPEED_TARGETS[
                "fused_fwd_bwd_speedup_vs_reference"],
            "fraction_of_bandwidth_floor": (res["triton"]["fwd_bwd"].get("fraction_of_bandwidth_floor") or 0)
            >= SPEED_TARGETS["fraction_of_bandwidth_floor"],
        }
    del w, b, stm, nstm
    return res


def sweep(B, F, H, A, activation, device, reps, warmup) -> list[dict]:
    """Fused fwd+bwd time (fp32) over the host's tunables: column block × warps at 16 backward rows
    per program, then backward rows per program at the default block and warps. Fastest first."""
    from nnue.kernels import sparse_ft
    w, b, stm, nstm = make_case(B, F, H, A, torch.float32, device)
    defaults = (sparse_ft.NUM_WARPS, sparse_ft.BWD_ROWS)
    configs = [(bh, nw, 16) for bh in (64, 128, 256) for nw in (4, 8)] + [(None, defaults[0], r) for r in (4, 64)]
    rows = []
    try:
        for block_h, warps, bwd_rows in configs:
            sparse_ft.NUM_WARPS, sparse_ft.BWD_ROWS = warps, bwd_rows
            t = time_backend(op_for("triton", block_h), w, b, stm, nstm, activation, device, reps, warmup)
            rows.append({"block_h": block_h or "default", "num_warps": warps, "bwd_rows": bwd_rows,
                         "fwd_ms": t["fwd"]["median_s"] * 1e3, "fwd_bwd_ms": t["fwd_bwd"]["median_s"] * 1e3})
    finally:
        sparse_ft.NUM_WARPS, sparse_ft.BWD_ROWS = defaults
    return sorted(rows, key=lambda r: r["fwd_bwd_ms"])


def main(argv=None) -> dict:
    p = parser("nnue bench sparse_ft", __doc__.splitlines()[0])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto: CUDA when present")
    p.add_argument("--batch", type=int, help="positions per batch (default: 16384 on CUDA, 1024 on CPU)")
    p.add_argument("--features", type=int, help="feature-transformer inputs (default: 45056)")
    p.add_argument("--hidden", type=int, help="accumulator size per perspective (default: 1024 on CUDA, 256 on CPU)")
    p.add_argument("--active", type=int, help="active features per position and perspective (default: 32)")
    p.add_argument("--activations", default="crelu,screlu,pairwise_crelu", help="comma-separated perspective activations")
    p.add_argument("--dtypes", default="fp32", help="comma-separated: fp32,bf16")
    p.add_argument("--reps", type=int, help="timed repetitions per case (default: 20 on CUDA, 5 on CPU)")
    p.add_argument("--warmup", type=int, default=3, help="untimed repetitions before timing")
    p.add_argument("--backends", help="comma-separated torch,triton (default: both on CUDA, torch on CPU; "
                                      "triton on CPU needs TRITON_INTERPRET=1 and is for smoke tests only)")
    p.add_argument("--sweep", action="store_true",
                   help="time the fused op's block sizes (screlu and pairwise_crelu, fp32)")
    p.add_argument("--copy-mib", type=int, help="copy-bandwidth probe size (default 1024 on CUDA, 256 on CPU)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's); 1 is steadier when shared")
    p.add_argument("--out", help="also write the JSON here (default: stdout only)")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)

    device = pick_device(a.device)
    on_gpu = device.type == "cuda"
    case = dict(TARGET if on_gpu else CPU_CASE)
    for k in case:
        if getattr(a, k) is not None:
            case[k] = getattr(a, k)
    reps = a.reps or (20 if on_gpu else 5)
    backends = a.backends.split(",") if a.backends else (["torch", "triton"] if on_gpu else ["torch"])
    copy_bw = copy_bandwidth(device, (a.copy_mib or (1024 if on_gpu else 256)) << 20)

    result = {
        "benchmark": "sparse_ft_pair (both perspectives: gather-sum + activation; fwd, bwd)",
        "environment": environment(device),
        "case": case | {"indices": "uniform random, every slot valid (no padding)",
                        "is_target_case": case == TARGET},
        "backends": backends,
        "copy_bandwidth_GB_per_s": copy_bw / 1e9,
        "bytes_model": " ".join(counted_bytes.__doc__.split()),
        "speed_targets": SPEED_TARGETS,
        "results": [],
    }
    if not on_gpu:
        result["note"] = cpu_note(f"batch {case['batch']}, F {case['features']}, H {case['hidden']}, "
                                  f"{case['active']} active", case == TARGET, backends)
    for dtype_name in a.dtypes.split(","):
        for activation in a.activations.split(","):
            result["results"].append(run_case(case["batch"], case["features"], case["hidden"], case["active"],
                                              activation, dtype_name, device, backends, reps, a.warmup, copy_bw))
    if a.sweep and "triton" in backends:
        result["sweep_fp32"] = {act: sweep(case["batch"], case["features"], case["hidden"], case["active"], act,
                                           device, max(1, reps // 2), min(2, a.warmup))
                               for act in ("screlu", "pairwise_crelu")}
    emit(result, a.out)
    return result


if __name__ == "__main__":
    main()
