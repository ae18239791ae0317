"""Integer evals are identical under every ATen CPU capability (default, AVX2, AVX-512), and for
deep nets under oneDNN ISA limits (AVX2, AVX-512 without VNNI)."""
from __future__ import annotations

import subprocess
import sys

import torch
import pytest

from nnue.trainer.export import export
from tests.netfiles import make_deep_model, make_model, write_weights

SCRIPT = """
import sys, torch
from nnue.inference import evaluate, load
from nnue.trainer.export import validation_boards
net = load(sys.argv[1])
boards, _ = validation_boards({"path": sys.argv[2], "val_fraction": 1.0}, 4000)
print(torch.backends.cpu.get_cpu_capability())
print(",".join(map(str, evaluate(net, boards).tolist())))
"""


@pytest.mark.parametrize("kind,act", [("perspective", "screlu"), ("perspective", "crelu"),
                                      ("perspective", "pairwise_crelu"), ("deep", "pairwise_crelu"),
                                      ("deep", "screlu"), ("deep", "hardswish/swiglu"),
                                      ("deep", "swish/swiglu_swish")])
def test_evals_identical_across_cpu_capabilities(kind, act, tmp_path, sample_dataset):
    if "/" in act:  # the hidden activations of nnue.spec.activations after L1 / L2
        h1, h2 = act.split("/")
        model = make_deep_model("pairwise_crelu", 64, hidden_activation=h1, l2_activation=h2, dense_scale=1.5,
                                bias_scale=3.0)
    else:
        model = (make_model(act, hidden=64) if kind == "perspective"
                 else make_deep_model(act, 64, hidden_activation="screlu" if act == "screlu" else "crelu",
                                      dense_scale=1.5))  # int8 weights up to ±96: beyond the one-digit range
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset)
    export(ck, tmp_path / "net")
    best = torch.backends.cpu.get_cpu_capability()
    caps = ["default", "avx2"] + (["avx512"] if best.lower().startswith("avx512") else [])
    outputs = {}
    runs = [("ATEN_CPU_CAPABILITY", cap) for cap in caps]
    if kind == "deep":  # the int8 products run in oneDNN: also without VNNI, where u8×s8 pairs saturate
        runs += [("ONEDNN_MAX_CPU_ISA", isa) for isa in ("AVX2", "AVX512_CORE")]
    for var, cap in runs:
        env = {var: cap, "PATH": "/usr/bin:/bin"}
        r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "net" / "net.safetensors"),
                            str(sample_dataset)], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        reported, evals = r.stdout.split()
        outputs[cap] = evals
        if var == "ATEN_CPU_CAPABILITY" and cap == "default":
            assert reported == "DEFAULT"
    assert len(set(outputs.values())) == 1, {k: v[:80] for k, v in outputs.items()}
    assert len(outputs["default"].split(",")) > 2000
