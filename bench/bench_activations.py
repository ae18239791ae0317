"""Benchmark of the fused elementwise activations against the torch reference; prints JSON.

For each net activation of the registry (:mod:`nnue.spec.activations`: the elementwise ones,
crelu, screlu, hardswish, swish, and the gated units, swiglu with its hardswish gate and
swiglu_swish with its swish gate) and backend: forward and forward+backward time (median of
--reps runs), elements/s, and GB/s from counted bytes (forward reads x and writes y; backward
reads x and grad_y and writes grad_x; a gated unit reads and writes one tensor more each way), against the device's copy bandwidth. Default size: on CUDA the feature
transformer's output at the target case, (16384, 2048); on CPU (1024, 512) on the torch path only,
and the JSON says so.

    python bench/bench_activations.py [--device cpu|cuda] [--shape 16384,2048] [--out FILE]
"""
from __future__ import annotations


import torch
from nnue.bench.bench_sparse_ft import DTYPES, copy_bandwidth, cpu_note, environment, measure, pick_device

from nnue.kernels import reference
from nnue.bench import emit, parser
from nnue.spec import activations as spec


def names() -> tuple[str, ...]:
    """The registry's net activations with a kernel: elementwise ones, then the gated units."""
    return tuple(n for n, a in spec.ACTIVATIONS.items() if a.allowed and (a.elementwise or a.gated))


NAMES = names()
GPU_SHAPE, CPU_SHAPE = (16384, 2048), (1024, 512)


def ops(backend: str, name: str):
    gate = spec.get(name).gate
    if backend == "torch":
        return (lambda a, b: reference.swiglu(a, b, gate)) if gate else (lambda x: reference.activate(name, x))
    from nnue.kernels import activations
    return (lambda a, b: activations.swiglu(a, b, gate)) if gate else (lambda x: activations.activate(name, x))


def counted_bytes(n: int, elem: int, name: str) -> dict:
    """fwd: inputs read + output written; bwd: inputs and grad_out read + input grads written."""
    k = 2 if spec.get(name).gated else 1
    fwd, bwd = (k + 1) * n * elem, (2 * k + 1) * n * elem
    return {"fwd": fwd, "bwd": bwd, "fwd_bwd": fwd + bwd}


def run(name: str, shape, dtype_name: str, device, backends, reps: int, warmup: int, copy_bw: float) -> dict:
    gen = torch.Generator().manual_seed(0)
    dtype = DTYPES[dtype_name]
    inputs = [(torch.randn(shape, generator=gen) * 2).to(dtype).to(device).requires_grad_(True)
              for _ in range(2 if spec.get(name).gated else 1)]
    n = inputs[0].numel()
    nbytes = counted_bytes(n, inputs[0].element_size(), name)
    grad_out = torch.randn(shape, generator=gen).to(dtype).to(device)
    res = {"activation": name, **({"gate": spec.get(name).gate} if spec.get(name).gated else {}), "dtype": dtype_name, "counted_bytes": nbytes,
           "bandwidth_floor_ms": {k: v / copy_bw * 1e3 for k, v in nbytes.items()}}
    for backend in backends:
        op = ops(backend, name)
        f = measure(lambda: op(*inputs), device, reps, warmup)
        fb = measure(lambda: torch.autograd.grad(op(*inputs), inputs, grad_out), device, reps, warmup)
        res[backend] = {
            k: {"time_ms": m["median_s"] * 1e3, "min_time_ms": m["min_s"] * 1e3,
                "elements_per_s": n / m["median_s"], "GB_per_s": nbytes[k] / m["median_s"] / 1e9,
                "fraction_of_bandwidth_floor": nbytes[k] / copy_bw / m["median_s"]}
            for k, m in (("fwd", f), ("fwd_bwd", fb))}
    if "triton" in backends:
        res["speedup_triton_vs_torch"] = {k: res["torch"][k]["time_ms"] / res["triton"][k]["time_ms"]
                                          for k in ("fwd", "fwd_bwd")}
    return res


def main(argv=None) -> dict:
    p = parser("nnue bench activations", __doc__.splitlines()[0])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto: CUDA when present")
    p.add_argument("--shape", help="rows,columns of the activation input, e.g. 16384,2048 (default: 16384,2048 on CUDA, 1024,512 on CPU)")
    p.add_argument("--names", default=",".join(NAMES), help="comma-separated activations to time")
    p.add_argument("--dtypes", default="fp32,bf16", help="comma-separated: fp32,bf16")
    p.add_argument("--backends", help="comma-separated torch,triton (default: both on CUDA, torch on CPU)")
    p.add_argument("--copy-mib", type=int, help="copy-bandwidth probe size (default 1024 on CUDA, 256 on CPU)")
    p.add_argument("--reps", type=int, help="timed repetitions per case (default: 50 on CUDA, 7 on CPU)")
    p.add_argument("--warmup", type=int, default=3, help="untimed repetitions before timing")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's); 1 is steadier when shared")
    p.add_argument("--out", help="also write the JSON here (default: stdout only)")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)

    device = pick_device(a.device)
    on_gpu = device.type == "cuda"
    shape = tuple(int(s) for s in a.shape.split(",")) if a.shape else (GPU_SHAPE if on_gpu else CPU_SHAPE)
    reps = a.reps or (50 if on_gpu else 7)
    backends = a.backends.split(",") if a.backends else (["torch", "triton"] if on_gpu else ["torch"])
    copy_bw = copy_bandwidth(device, (a.copy_mib or (1024 if on_gpu else 256)) << 20)
    result = {"benchmark": "elementwise activations (fwd, fwd+bwd)", "environment": environment(device),
              "shape": list(shape), "is_target_case": shape == GPU_SHAPE, "backends": backends,
              "copy_bandwidth_GB_per_s": copy_bw / 1e9, "bytes_model": " ".join(counted_bytes.__doc__.split()),
              "results": [run(name, shape, dt, device, backends, reps, a.warmup, copy_bw)
                          for dt in a.dtypes.split(",") for name in a.names.split(",")]}
    if not on_gpu:
        result["note"] = cpu_note(f"shape {shape}", shape == GPU_SHAPE, backends)
    emit(result, a.out)
    return result


if __name__ == "__main__":
    main()
