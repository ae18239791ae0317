"""Compile every Triton kernel of nnue.kernels for a GPU target ahead of time, without a GPU.

The interpreter (TRITON_INTERPRET=1) checks what the kernels compute, but it executes them as
numpy and accepts programs the real compiler rejects. This module runs the real pipeline — Triton
IR, LLVM, PTX, and ptxas to a cubin for sm_90 (Hopper: H100/H200) by default, ptxas being shipped
in the triton wheel — for every activation and dtype variant at the block sizes the host code
picks, and reads each cubin's registers and spill (stack/local) bytes with cuobjdump.

    python -m nnue.kernels.compile_check [--arch 90] [--all] [--json]

Exits non-zero if a kernel fails to compile or spills. It must run with TRITON_INTERPRET unset
(the interpreter replaces the kernels by Python objects the compiler can't take);
``tests/kernels/test_compile_check.py`` runs it in a subprocess.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import torch

TRITON_TYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16",
                torch.int32: "i32", torch.int64: "i64"}


def _resources(cubin: bytes) -> dict:
    """Registers, stack and local bytes of the one function in ``cubin`` (cuobjdump)."""
    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True,
                              check=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", text)
    if not m:
        raise RuntimeError(f"compile_check: no resource usage in cuobjdump output:\n{text}")
    return dict(zip(("registers", "stack_bytes", "shared_bytes", "local_bytes"), map(int, m.groups())))


def _signature(kernel, pointers: dict, constexprs: dict) -> dict:
    """Triton signature of ``kernel``: ``pointers`` gives the pointer args' types, constexprs are
    "constexpr", every other argument (a size) is "i32"."""
    return {n: "constexpr" if n in constexprs else pointers.get(n, "i32") for n in kernel.arg_names}


def variants(all_variants: bool = False):
    """(label, kernel, signature, constexprs, num_warps) for the kernels as the host launches them.

    Default: every activation in fp32, and bf16 for the perspective nets' activations; ``all``:
    every activation × dtype × save_acc."""
    from . import activations as act_mod
    from . import sparse_ft as ft

    fp_dtypes = [torch.float32, torch.bfloat16]
    for act in ft.ACTIVATIONS:
        ops = act_mod.triton_ops(act)
        for dtype in fp_dtypes:
            if dtype != torch.float32 and not all_variants and act not in ("crelu", "screlu", "pairwise_crelu"):
                continue
            HO = 1024 // 2 if ops.pairs else 1024      # the target case, H = 1024
            block_a, block_h = ft.block_sizes(32, HO)
            t = f"*{TRITON_TYPES[dtype]}"
            idx = {"stm_ptr": "*i32", "nstm_ptr": "*i32"}
            for save_acc in ((True, False) if all_variants else (True,)):
                kernel = ft._sparse_ft_pair_fwd_fused
                const = {"FWD": ops.fwd, "PAIRS": ops.pairs, "SAVE_ACC": save_acc, "BLOCK_A": block_a,
                         "BLOCK_H": block_h}
                ptrs = {"w_ptr": t, "b_ptr": t, "out_ptr": t, "acc_ptr": "*fp32"} | idx
                yield (f"sparse_ft fwd {act} {t[1:]} save_acc={save_acc}", kernel, _signature(kernel, ptrs, const),
                       const, ft.NUM_WARPS)
            kernel = ft._sparse_ft_pair_bwd_fused
            const = {"FWD": ops.fwd, "GRAD": ops.grad, "PAIRS": ops.pairs, "LINEAR": ops.linear, "ROWS": ft.BWD_ROWS,
                     "BLOCK_A": block_a, "BLOCK_H": ft.bwd_block_h(ops.pairs, block_h)}
            ptrs = {"gout_ptr": t, "acc_ptr": "*fp32", "gw_ptr": "*fp32", "gb_part_ptr": "*fp32"} | idx
            yield f"sparse_ft bwd {act} {t[1:]}", kernel, _signature(kernel, ptrs, const), const, ft.NUM_WARPS
    for dtype in (act_mod.DTYPES if all_variants else fp_dtypes):
        t = f"*{TRITON_TYPES[dtype]}"
        for name in act_mod.ELEMENTWISE:
            ops = act_mod.triton_ops(name)
            for way, kernel, const in (("fwd", act_mod._act_fwd_kernel, {"FWD": ops.fwd, "BLOCK": act_mod.BLOCK}),
                                       ("bwd", act_mod._act_bwd_kernel, {"GRAD": ops.grad, "BLOCK": act_mod.BLOCK})):
                ptrs = {n: t for n in kernel.arg_names if n.endswith("_ptr")}
                yield f"activation {way} {name} {t[1:]}", kernel, _signature(kernel, ptrs, const), const, 4
        for gate in act_mod.GATES:
            ops = act_mod.triton_ops(gate)
            for way, kernel, const in (
                    ("fwd", act_mod._swiglu_fwd_kernel, {"GATE": ops.fwd, "BLOCK": act_mod.BLOCK}),
                    ("bwd", act_mod._swiglu_bwd_kernel, {"GATE": ops.fwd, "GATE_GRAD": ops.grad, "BLOCK": act_mod.BLOCK})):
                ptrs = {n: t for n in kernel.arg_names if n.endswith("_ptr")}
                yield f"swiglu {way} {gate} {t[1:]}", kernel, _signature(kernel, ptrs, const), const, 4


def compile_all(arch: int = 90, all_variants: bool = False) -> list[dict]:
    """Compile every variant for ``cuda:<arch>``; one dict per kernel (label, seconds, resources).
    Raises RuntimeError under TRITON_INTERPRET=1; compiler errors propagate."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from . import activations
    if activations.INTERPRETED:
        raise RuntimeError("compile_check: unset TRITON_INTERPRET (the interpreter's kernels can't be compiled)")
    target = GPUTarget("cuda", arch, 32)
    rows = []
    for label, kernel, signature, constexprs, num_warps in variants(all_variants):
        t0 = time.perf_counter()
        compiled = triton.compile(ASTSource(kernel, signature, constexprs=constexprs), target=target,
                                  options={"num_warps": num_warps})
        rows.append({"kernel": label, "num_warps": num_warps, "seconds": round(time.perf_counter() - t0, 2),
                     **_resources(compiled.asm["cubin"])})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", type=int, default=90, help="compute capability ×10 (90: H100/H200)")
    p.add_argument("--all", action="store_true", help="every activation × dtype × save_acc")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rows = compile_all(a.arch, a.all)
    spilled = [r for r in rows if r["stack_bytes"] or r["local_bytes"]]
    if a.json:
        print(json.dumps({"arch": a.arch, "kernels": rows, "spilled": [r["kernel"] for r in spilled]}, indent=1))
    else:
        for r in rows:
            print(f"{r['kernel']:<45} {r['registers']:>4} regs  stack {r['stack_bytes']:>3}  local "
                  f"{r['local_bytes']:>3}  {r['seconds']:.1f}s")
    if spilled:
        print(f"compile_check: spills in {', '.join(r['kernel'] for r in spilled)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
