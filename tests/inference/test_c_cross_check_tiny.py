"""Hard gate for tiny nets (L0 → L1 → out, nnue/inference/kinds/tiny.py) and residual nets (eval = base
+ α·net, nnue/inference/residual.py): the independent C evaluator (tests/c/nnue_eval.c,
``--tiny`` and ``--residual``) equals nnue.inference exactly (torch.equal) on ≥ 10,000 real
self-play positions, in this process and under every CPU capability and oneDNN ISA limit the
capability tests use (tests/inference/test_cpu_capability.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from nnue.inference import evaluate, load, residual
from nnue.inference.api import evaluate_net
from nnue.inference.kinds.tiny import TinyIntegerNet, forward_int, make_tiny_arch
from nnue.spec.quant import QuantScheme
from nnue.pipeline.features import get_feature_set
from tests.cref import c_args_for_arch, run_c
from tests.netfiles import make_deep_int_net, make_int_net

QB = 64


def make_tiny_int_net(fs_name: str, act: str, hidden: int, n1: int, hact: str, output_buckets: str,
                      seed: int = 0) -> TinyIntegerNet:
    """A random tiny integer net whose L1 pre-activations y = s1 >> 6 fall below 0, inside the
    activation's range and above it on real positions; int8 weights over their full range."""
    arch = make_tiny_arch(fs_name, hidden, act, output_buckets, n1, hact)
    fs = get_feature_set(fs_name)
    B, L1 = arch["num_buckets"], arch["l1_inputs"]
    g = torch.Generator().manual_seed(seed)
    l0w = torch.randint(-150, 151, (fs.num_inputs, hidden), generator=g).to(torch.int16)
    l0b = torch.randint(-100, 251, (hidden,), generator=g).to(torch.int16)
    l1w = torch.randint(-127, 128, (B, n1, L1), generator=g).to(torch.int8)
    l1b = torch.randint(-20000, 40001, (B, n1), generator=g).to(torch.int32)
    outw = torch.randint(-127, 128, (B, n1), generator=g).to(torch.int8)
    outb = torch.randint(-100000, 100001, (B,), generator=g).to(torch.int32)
    return TinyIntegerNet(arch, QuantScheme(), l0w, l0b, l1w, l1b, outw, outb)


def _c_equal(c_eval, net, fens, boards, tmp_path, base=None) -> torch.Tensor:
    """C == nnue.inference on every position, exactly; returns the evals. base: a given base
    (written as 'FEN | BASE' for the C side)."""
    net.write_bin(tmp_path / "net.bin")
    lines = fens if base is None else [f"{f} | {int(b)}" for f, b in zip(fens, base.tolist())]
    theirs = torch.tensor(run_c(c_eval, tmp_path / "net.bin", c_args_for_arch(net.arch), lines))
    ours = evaluate(net, boards, base=base)
    assert len(fens) >= 10_000 and ours.shape == theirs.shape
    bad = (ours != theirs).nonzero().flatten()
    assert torch.equal(ours, theirs), f"{len(bad)} differ, first {fens[int(bad[0])]}: {int(ours[bad[0]])} vs {int(theirs[bad[0]])}"
    return ours


TINY_CASES = [
    ("chess768", "crelu", 16, 32, "crelu", "MaterialCount<1>"),   # the preset: 32 -> 32 -> 1
    ("kb768hm4", "screlu", 32, 16, "hardswish", "SFPieceCount<8>"),
    ("chess768", "pairwise_crelu", 32, 8, "swish", "MaterialCount<8>"),
    ("halfkav2_hm", "crelu", 16, 16, "screlu", "MaterialCount<4>"),
]


@pytest.mark.parametrize("fs_name,act,hidden,n1,hact,spec", TINY_CASES)
def test_tiny_net_equals_c_reference(fs_name, act, hidden, n1, hact, spec, c_eval, fens, boards, tmp_path):
    net = make_tiny_int_net(fs_name, act, hidden, n1, hact, spec, seed=hidden + n1)
    ours = _c_equal(c_eval, net, fens, boards, tmp_path)
    assert len(set(ours.tolist())) > 1000
    stm, nstm = net.features.encode(boards)
    ev, parts = forward_int(net, stm, nstm, net.buckets.of(boards), return_parts=True)
    assert torch.equal(ev, ours)
    y = torch.div(parts["s1"], QB, rounding_mode="floor")
    for share in ((y < 0).float().mean(), ((y >= 0) & (y <= 255)).float().mean(), (y > 255).float().mean()):
        assert share > 0.05  # every regime of the hidden activation on a large share


def test_tiny_net_file_round_trip(tmp_path, boards):
    net = make_tiny_int_net("chess768", "crelu", 16, 32, "crelu", "MaterialCount<1>")
    net.save(tmp_path / "net.safetensors")
    back = load(tmp_path / "net.safetensors", expect={"kind": "tiny", "l1_outputs": 32})
    assert isinstance(back, TinyIntegerNet) and torch.equal(evaluate(back, boards), evaluate(net, boards))
    assert len(back.raw_bytes()) % 64 == 0


@pytest.mark.parametrize("kind,base,alpha", [("tiny", "material", 0.5), ("perspective", "material", 0.75),
                                             ("deep", "stockfish-classical", 1.0), ("tiny", "stockfish-classical", 0.5)])
def test_residual_net_equals_c_reference(kind, base, alpha, c_eval, fens, boards, tmp_path):
    net = (make_tiny_int_net("chess768", "crelu", 16, 32, "crelu", "MaterialCount<1>", seed=7) if kind == "tiny"
           else make_int_net("chess768", "screlu", 32, seed=3) if kind == "perspective"
           else make_deep_int_net("chess768", "crelu", 16, "MaterialCount<8>", 8, 8, "crelu"))
    raw = evaluate_net(net, boards)
    net.arch["residual"] = residual.header(base, alpha)
    given = None
    if base != "material":  # a stand-in for Stockfish's classical eval, both signs, odd values
        given = torch.randint(-2500, 2501, (len(fens),), generator=torch.Generator().manual_seed(5))
    ours = _c_equal(c_eval, net, fens, boards, tmp_path, given)
    b = residual.material_base(boards) if given is None else given
    num = int(alpha * 256)
    assert torch.equal(ours, b + torch.div(raw * num + 128, 256, rounding_mode="floor"))
    if alpha != 1:
        assert (raw % 2 != 0).any()  # the rounding of α·net is exercised


SCRIPT = """
import sys, torch
from nnue.inference import evaluate, load
from nnue.inference.api import boards_from_fens
net = load(sys.argv[1])
fens = open(sys.argv[2]).read().split("\\n")[:-1]
print(torch.backends.cpu.get_cpu_capability())
print(",".join(map(str, evaluate(net, boards_from_fens(fens)).tolist())))
"""


@pytest.mark.slow  # ~40 s: five interpreters
def test_tiny_residual_net_equals_c_under_every_cpu_capability(c_eval, fens, tmp_path):
    """The preset's shape, residual on material: C == nnue.inference under ATen's default /
    AVX2 / AVX-512 kernels and oneDNN limited to AVX2 and AVX-512 without VNNI (the int8
    products' saturating u8×s8 path)."""
    net = make_tiny_int_net("chess768", "crelu", 16, 32, "crelu", "MaterialCount<1>", seed=11)
    net.arch["residual"] = residual.header("material", 0.5)
    net.save(tmp_path / "net.safetensors")
    net.write_bin(tmp_path / "net.bin")
    theirs = ",".join(map(str, run_c(c_eval, tmp_path / "net.bin", c_args_for_arch(net.arch), fens)))
    (tmp_path / "fens.txt").write_text("".join(f + "\n" for f in fens))
    best = torch.backends.cpu.get_cpu_capability()
    runs = [("ATEN_CPU_CAPABILITY", c) for c in ["default", "avx2"] + (["avx512"] if best.lower().startswith("avx512") else [])]
    runs += [("ONEDNN_MAX_CPU_ISA", isa) for isa in ("AVX2", "AVX512_CORE")]
    for var, cap in runs:
        r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "net.safetensors"), str(tmp_path / "fens.txt")],
                           capture_output=True, text=True, env={var: cap, "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr
        reported, evals = r.stdout.split()
        if var == "ATEN_CPU_CAPABILITY" and cap == "default":
            assert reported == "DEFAULT"
        assert evals == theirs, (var, cap)


@pytest.mark.parametrize("method", ["gather", "compact"])
def test_block_sparse_path_equals_evaluate_for_tiny_and_residual_nets(method, boards):
    from nnue.inference import evaluate_sparse

    net = make_tiny_int_net("kb768hm4", "screlu", 32, 16, "hardswish", "SFPieceCount<8>", seed=3)
    assert torch.equal(evaluate_sparse(net, boards, method=method), evaluate(net, boards))
    net.arch["residual"] = residual.header("material", 0.5)
    assert torch.equal(evaluate_sparse(net, boards, method=method), evaluate(net, boards))
