"""Benchmark: batch evaluation speed of the integer net vs the float net, one core.

``nnue bench infer [--batch N] [--runs N] [--hidden H] [--out FILE]`` prints one JSON object:
evals/s per core of ``nnue.inference.evaluate``'s integer path (feature encoding included) and of
the float torch model on the same positions and net (768×2 → H SCReLU, 8 output buckets), with
medians of several runs and their ratio. Targets (issue 6): ≥ 1M evals/s per core in batch, ≥ 3×
the float path, ≤ 5 µs per incremental move (measured by ``nnue bench incremental``).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from nnue.bench import emit

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nnue bench infer", description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--out", default=None)
    p.add_argument("--json", action="store_true", help="(accepted; output is always JSON)")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    from nnue.inference import evaluate, load
    from nnue.pipeline.batch import to_sparse_batch
    from nnue.pipeline.pack import pack
    from nnue.trainer.export import export, validation_boards
    from nnue.trainer.model import Arch, PerspectiveNet

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pack([REPO / "data" / "sample"], tmp / "ds", progress=False)
        model = PerspectiveNet(Arch(768, a.hidden, "screlu", 8), backend="torch").eval()
        with torch.no_grad():
            model.ft.weight.uniform_(-0.3, 0.3)
            model.l1.weight.uniform_(-1, 1)
        from safetensors.torch import save_file

        hp = {"hidden": a.hidden, "activation": "screlu", "features": "chess768",
              "output_buckets": "MaterialCount<8>", "quant": None}
        save_file(model.state_dict(), str(tmp / "w.safetensors"),
                  {"hparams": json.dumps(hp), "data": json.dumps({"path": str(tmp / "ds"), "val_fraction": 1.0})})
        export(tmp / "w.safetensors", tmp / "net", clip=True)
        net = load(tmp / "net" / "net.safetensors")
        boards, _ = validation_boards({"path": str(tmp / "ds"), "val_fraction": 1.0,
                                       "filters": {"skip_in_check": False, "skip_capture": False,
                                                   "skip_mate": False}}, 10**6)
    reps = -(-a.batch // len(boards))
    boards = boards.repeat(reps, 1)[: a.batch]

    def time_it(fn) -> list[float]:
        fn()
        out = []
        for _ in range(a.runs):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
        return out

    def float_path():
        b = to_sparse_batch({"boards": boards, "score": torch.zeros(len(boards)),
                             "result": torch.zeros(len(boards))}, net.features, net.buckets)
        with torch.no_grad():
            return model(b.stm_indices, b.nstm_indices, b.bucket)

    t_int = time_it(lambda: evaluate(net, boards))
    t_float = time_it(float_path)
    ips = a.batch / statistics.median(t_int)
    fps = a.batch / statistics.median(t_float)
    report = {
        "benchmark": "infer", "net": f"chess768 -> {a.hidden}x2 screlu -> MaterialCount<8>",
        "batch": a.batch, "runs": a.runs, "threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
        "int_evals_per_s": round(ips), "float_evals_per_s": round(fps), "int_over_float": round(ips / fps, 3),
        "int_median_s": statistics.median(t_int), "float_median_s": statistics.median(t_float),
        "incremental_us_per_move": None,
        "targets": {"int_evals_per_s": 1_000_000, "int_over_float": 3.0, "incremental_us_per_move": 5.0},
        "notes": ("Both paths include feature encoding from packed boards. The integer path runs the "
                  "feature transformer as an exact float32 embedding_bag and L1 as an exact float64 "
                  "matrix product, then int64 divisions. Incremental updates: nnue bench incremental."),
    }
    return emit(report, a.out)


if __name__ == "__main__":
    sys.exit(main())
