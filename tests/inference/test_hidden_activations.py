"""The hidden-layer activations of nnue.spec.activations (Hard-Swish, Swish, the gated units after
L2) in deep integer nets: the integer rules against an independent pure-Python reading of the
formulas, the C reference (tests/c/nnue_eval.c) against nnue.inference on ≥ 10,000 real
positions per activation with pre-activations below −3, inside (−3, 3) and above 3, the spec's C
snippets and swish knots present in the generated C header, export of trained float nets (float-vs-int
mean signed error within ±1 cp, the swish approximation reported apart), and the refusals."""
from __future__ import annotations

import json
import math
import re

import pytest
import torch
from safetensors.torch import save_file

from nnue.inference import NetFormatError, evaluate, load
from nnue.inference.kinds.deep import forward_int, make_deep_arch
from nnue.inference.net import META_KEY
from nnue.spec import activations as acts
from nnue.trainer.export import export
from nnue.trainer.kinds.deep import DeepArch
from tests.cref import C_SOURCE, c_args_for_arch, run_c
from tests.netfiles import make_deep_int_net, make_deep_model, write_weights

QA, SHIFT = 255, 8
C8 = 8 * QA


# ---------------------------------------------------------------- integer rules, exhaustively

def _floor_div(a: int, d: int) -> int:
    return a // d  # Python's // floors


def py_hardswish(y: int) -> int:
    yc = max(-C8, min(C8, y))
    g = max(0, min(6 * QA, yc + 3 * QA))
    return _floor_div(yc * g, 6 * QA)


def py_swish_knots() -> list[int]:
    out = []
    for k in range(81):
        x = -8 + k / 5
        v = QA * x / (1 + math.exp(-x))
        out.append(int(math.copysign(math.floor(abs(v) + 0.5), v)))
    return out


KNOTS = py_swish_knots()


def py_swish(y: int) -> int:
    u = max(-C8, min(C8, y)) + C8
    i = min(u // 51, 79)
    r = u - 51 * i
    return KNOTS[i] + _floor_div((KNOTS[i + 1] - KNOTS[i]) * r + 25, 51)


def test_integer_rules_equal_the_formulas_on_every_input():
    ys = list(range(-3 * C8, 3 * C8 + 1))
    y = torch.tensor(ys, dtype=torch.int64)
    assert acts.int_hidden("hardswish", y, QA, SHIFT).tolist() == [py_hardswish(v) for v in ys]
    assert acts.int_hidden("swish", y, QA, SHIFT).tolist() == [py_swish(v) for v in ys]
    assert acts.int_hidden("crelu", y, QA, SHIFT).tolist() == [max(0, min(QA, v)) for v in ys]
    assert acts.int_hidden("screlu", y, QA, SHIFT).tolist() == [max(0, min(QA, v)) ** 2 >> 8 for v in ys]
    g = torch.tensor(ys[::7], dtype=torch.int64)
    b = torch.tensor(ys[::7][::-1], dtype=torch.int64)
    for name, gate in (("swiglu", py_hardswish), ("swiglu_swish", py_swish)):
        got = acts.int_hidden(name, torch.stack([g, b], 1).view(-1, 2), QA, SHIFT).view(-1).tolist()
        want = [_floor_div(gate(p) * max(-C8, min(C8, q)), 256) for p, q in zip(g.tolist(), b.tolist())]
        assert got == want, name
    # output ranges stated in the spec, and every product fits int32
    for name in ("crelu", "screlu", "hardswish", "swish"):
        out = acts.int_hidden(name, y, QA, SHIFT)
        assert (int(out.min()), int(out.max())) == acts.get(name).out_range["hidden"], name
    assert acts.hidden_max_abs("swiglu", QA, SHIFT) == acts.get("swiglu").out_range["hidden"][1] == 16256
    assert C8 * 6 * QA < 2**31 and C8 * C8 < 2**31


def test_swish_approximation_error_is_small_and_unbiased():
    e = acts.swish_error(QA)
    assert e["inputs"] == 2 * C8 + 1 and e["knots"] == 81
    assert e["max_abs"] < 2 / QA  # under two integer steps anywhere on [−8, 8]
    assert abs(e["mean_signed"]) < 0.1 / QA


def test_float_references_match_the_definitions():
    x = torch.linspace(-12, 12, 4801, dtype=torch.float64)
    xc = x.clamp(-8, 8)
    torch.testing.assert_close(acts.float_hidden("hardswish", x, 1.0), xc * (xc / 6 + 0.5).clamp(0, 1))
    torch.testing.assert_close(acts.float_hidden("swish", x, 1.0), xc * torch.sigmoid(xc))
    # Hard-Swish(x) = x·clamp(x/6 + 1/2, 0, 1) is torch's hardswish on [−8, 8]
    torch.testing.assert_close(acts.get("hardswish").float_ref(x), torch.nn.functional.hardswish(x))
    # the integer rules approximate the float ones to within a step of 1/QA (hardswish: floor)
    y = torch.arange(-C8, C8 + 1, dtype=torch.int64)
    hs = acts.int_hidden("hardswish", y, QA, SHIFT).double() / QA
    ref = acts.float_hidden("hardswish", y.double() / QA, 1.0)
    assert float((ref - hs).min()) >= -1e-9 and float((ref - hs).max()) < 1 / QA


# ---------------------------------------------------------------- the generated C holds the spec

def test_generated_c_holds_every_spec_snippet_and_the_swish_knots():
    src = acts.c_header()
    assert "#include \"nnue_acts.h\"" in C_SOURCE.read_text()
    for a in acts.ACTIVATIONS.values():
        if not a.allowed:  # kernel ops have no C code
            assert a.c_enum not in src, a.name
            continue
        assert f'!strcmp(s, "{a.name}")) return {a.c_enum};' in src, a.name
        for snippet in (a.c_hidden, a.c_l0_product, a.c_l0_deep, a.c_gated, a.c_support):
            for line in snippet.splitlines():
                assert line.strip() in src, (a.name, line)
    m = re.search(r"SWISH_T\[81\] = \{([^}]*)\}", src)
    assert m and [int(v) for v in m.group(1).replace("\n", " ").split(",")] == acts.swish_table(QA) == KNOTS


# ---------------------------------------------------------------- C == Python on real positions

REGIMES = [  # (after L1, after L2)
    ("hardswish", "hardswish"),
    ("swish", "swish"),
    ("hardswish", "swiglu"),
    ("swish", "swiglu_swish"),
    ("crelu", "screlu"),       # PlentyChess's pair
    ("screlu", "hardswish"),
]


def _y_regimes(s: torch.Tensor) -> tuple[float, float, float]:
    """Fractions of y = s >> 6 below −3, inside (−3, 3), above 3 (activation scale)."""
    y = torch.div(s, 64, rounding_mode="floor")
    return (float((y <= -3 * QA).float().mean()), float(((y > -3 * QA) & (y < 3 * QA)).float().mean()),
            float((y >= 3 * QA).float().mean()))


@pytest.mark.parametrize("h1,h2", REGIMES, ids=[f"{a}-{b}" for a, b in REGIMES])
def test_new_hidden_activations_equal_c(h1, h2, c_eval, fens, boards, tmp_path):
    wide = h1 not in ("crelu", "screlu")
    net = make_deep_int_net("chess768", "pairwise_crelu", 64, "MaterialCount<8>", 16, 16, h1, seed=11,
                            spread=6 if wide else 1.5, l2_activation=h2, center=0 if wide else 128)
    net.write_bin(tmp_path / "net.bin")
    theirs = run_c(c_eval, tmp_path / "net.bin", c_args_for_arch(net.arch), fens)
    ours = evaluate(net, boards).tolist()
    assert len(ours) == len(theirs) == len(fens) >= 10_000
    bad = [(f, o, t) for f, o, t in zip(fens, ours, theirs) if o != t]
    assert not bad, f"{len(bad)} of {len(fens)} differ, first (fen, python, C): {bad[:3]}"
    assert min(ours) < 0 < max(ours) and len(set(ours)) > len(ours) // 10
    stm, nstm = net.features.encode(boards)
    ev, parts = forward_int(net, stm, nstm, net.buckets.of(boards), return_parts=True)
    assert ev.tolist() == ours
    if wide:  # a large share of the pre-activations in every piece of the piecewise rules
        for name in ("s1", "s2"):
            assert min(_y_regimes(parts[name])) > 0.15, (name, _y_regimes(parts[name]))


# ---------------------------------------------------------------- trained float nets export exactly

@pytest.mark.parametrize("h1,h2", [("hardswish", "swiglu"), ("swish", "swiglu_swish"), ("hardswish", "hardswish")])
def test_float_nets_export_and_match_c(h1, h2, c_eval, fens, boards, sample_dataset, tmp_path):
    model = make_deep_model("pairwise_crelu", 64, hidden_activation=h1, l2_activation=h2, dense_scale=0.6,
                            bias_scale=3.0, seed=4)
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset, val_fraction=1.0)
    r = export(ck, tmp_path / "net")
    c = r["cross_check"]
    print(h1, h2, {k: c[k] for k in ("positions", "mean_abs_diff_cp", "max_abs_diff_cp", "mean_signed_diff_cp")})
    assert c["positions"] > 1000
    assert abs(c["mean_signed_diff_cp"]) <= 1.0, c
    assert [layer["activation"] for layer in r["layers"][1:3]] == [h1, h2]
    approx = [n for n in (h1, h2) if n in ("swish", "swiglu_swish")]
    assert sorted(r.get("activation_approximation", {})) == sorted(approx)
    for n in approx:
        assert r["activation_approximation"][n]["max_abs"] < 2 / QA
    assert r["audit"]["out_input_max_abs"] == acts.hidden_max_abs(h2, QA, SHIFT)
    net = load(tmp_path / "net" / "net.safetensors", expect={"l2_activation": h2, "hidden": 64})
    theirs = run_c(c_eval, tmp_path / "net" / "net.bin", c_args_for_arch(net.arch), fens)
    assert evaluate(net, boards).tolist() == theirs


# ---------------------------------------------------------------- refusals

def test_activation_where_it_is_not_allowed_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"'swiglu' is not allowed after L1 \(swiglu is allowed after L2 only\)"):
        DeepArch(768, 32, "pairwise_crelu", 8, hidden_activation="swiglu")
    with pytest.raises(ValueError, match="not allowed after L0"):
        DeepArch(768, 32, "hardswish", 8)
    with pytest.raises(ValueError, match="after L1"):
        make_deep_arch("chess768", 32, "crelu", "MaterialCount<8>", 16, 16, "swiglu_swish")
    arch = make_deep_arch("chess768", 32, "crelu", "MaterialCount<8>", 16, 16, "hardswish", "swiglu")
    assert arch["l2_activation"] == "swiglu"


def test_config_time_error_for_swiglu_after_l1(sample_dataset):
    from nnue.trainer.checks import check_train_args

    msg = check_train_args([f"data.path={sample_dataset}", "model=deep", "model.deep.hidden_activation=swiglu"])
    assert msg and "\n" not in msg and "'swiglu' is not allowed after L1" in msg
    assert check_train_args([f"data.path={sample_dataset}", "model=viridithas"]) is None


def test_unknown_activation_in_a_header_is_refused_naming_it(tmp_path):
    net = make_deep_int_net("chess768", "crelu", 16, "MaterialCount<8>", 8, 8, "hardswish", l2_activation="swiglu")
    tensors = {k: v.contiguous() for k, v in net.tensors().items()}
    for field_, value in (("l2_activation", "mish"), ("hidden_activation", "gelu"), ("l2_activation", "swiglu2")):
        header = net.header()
        header["architecture"] = dict(header["architecture"], **{field_: value})
        bad = tmp_path / f"{field_}-{value}.safetensors"
        save_file(tensors, str(bad), {META_KEY: json.dumps(header, sort_keys=True)})
        with pytest.raises(NetFormatError, match=rf"architecture\.{field_}' names activation '{value}', which this "
                                                 "build does not know"):
            load(bad)
    # swiglu after L1 (known, but not there)
    header = net.header()
    header["architecture"] = dict(header["architecture"], hidden_activation="swiglu")
    save_file(tensors, str(tmp_path / "misplaced.safetensors"), {META_KEY: json.dumps(header, sort_keys=True)})
    with pytest.raises(NetFormatError, match="not allowed after L1"):
        load(tmp_path / "misplaced.safetensors")


def test_incremental_and_block_sparse_paths_agree(boards):
    """IncrementalAccumulator and the block-sparse L1 give forward_int's evals with the new
    activations too (they finish through nnue.inference.kinds.deep.forward_after_l1)."""
    from nnue.inference.incremental import IncrementalAccumulator
    from nnue.inference.sparse_l1 import evaluate_sparse

    net = make_deep_int_net("chess768", "pairwise_crelu", 32, "MaterialCount<8>", 8, 8, "hardswish", seed=2,
                            spread=6, l2_activation="swiglu", center=0)
    b = boards[:600]
    want = evaluate(net, b)
    for method in ("gather", "compact"):
        assert torch.equal(evaluate_sparse(net, b, method=method), want), method
    for i in range(0, 600, 60):
        assert IncrementalAccumulator(net, b[i]).evaluate() == int(want[i])
