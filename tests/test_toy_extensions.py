"""The extension points hold: a toy dump format (tests/formats/test_toy_format.py), a toy activation,
a toy feature set and a toy net kind (its two modules: :mod:`tests.toy_kind.inference`,
:mod:`tests.toy_kind.trainer`), defined in test code only and registered at run time: the bundled
sample, written in the toy format, is packed by ``nnue pack``; the toy net kind with the toy
activation and feature set trains a few steps on that dataset through the trainer's own entry
point (``LitNNUE`` from the composed config: ``model.kind=toy`` and its ``model.toy`` group, nothing
else), exports from the Lightning checkpoint, and evaluates exactly — integer inference
``torch.equal`` to the C reference, whose activation and feature code is generated from the
registries with the toys in them — on ≥ 10,000 real positions.

Nothing outside the test code names the toys: the trainer, export, inference, the Triton kernels
and the C reference find them through the registries (``nnue.spec.activations.register``,
``nnue.pipeline.features.register``, ``nnue.trainer.kinds.register``,
``nnue.inference.kinds.register``). docs/extending.md is the guide these toys follow.
"""
from __future__ import annotations

import contextlib
import csv
from pathlib import Path

import pytest
import torch

from nnue import inference
from nnue.inference import kinds as inference_kinds
from nnue.inference.kinds import tiny as tiny_evaluator
from nnue.pipeline import features
from nnue.pipeline.features.lookup import Grid, TableEncoder
from nnue.pipeline.features.spec import CFeature, FeatureSet
from nnue.spec import activations as acts
from nnue.spec.activations.base import Activation, same
from nnue.trainer import kinds as trainer_kinds
from nnue.trainer.export import export
from nnue import cli
from nnue.pipeline import formats
from nnue.pipeline import manifest as mf
from tests.cref import compile_c_eval, run_c
from tests.formats.test_toy_format import TOY as TOY_FORMAT, _positions
from tests.test_kind_rules import compose_train
from tests.toy_kind import inference as toy_inference, trainer as toy_trainer

QA, SHIFT = 255, 8

# ---------------------------------------------------------------- a toy activation: clamped leaky ReLU
# float: x on [0, 1], x/8 on [−1, 0) (clamped at both ends); integer (scale QA):
# c = clamp(y, −QA, QA), x = c for c ≥ 0, floor(c / 8) for c < 0 (−32..255).


def _leaky_float(x):
    return torch.where(x < 0, x.clamp(-1, 0) / 8, x.clamp(0, 1))


def _leaky_int(y, qa, shift):
    c = y.clamp(-qa, qa)
    return torch.where(c < 0, torch.div(c, 8, rounding_mode="floor"), c)


def _leaky_fwd(x):
    return tl.where(x < 0.0, tl.maximum(x, -1.0) / 8.0, tl.minimum(x, 1.0))  # noqa: F821


def _leaky_grad(x):
    # torch's autograd of _leaky_float: clamp's inclusive bounds, where() picks the branch
    return tl.where(x < 0.0, tl.where(x >= -1.0, 0.125, 0.0), tl.where(x <= 1.0, 1.0, 0.0))  # noqa: F821


TOY_ACT = Activation(
    name="toy_leaky", allowed=frozenset({"l1"}), width_rule="same width", width=same, float_ref=_leaky_float,
    integer={"hidden": "c = clamp(y, −QA, QA); x = c if c ≥ 0 else floor(c / 8)"},
    out_range={"hidden": (-32, 255)}, u8=False, hidden=_leaky_int,
    triton_fwd=_leaky_fwd, triton_grad=_leaky_grad,
    c_hidden="int64_t cl = y < -QA ? -QA : y > QA ? QA : y;\nreturn cl < 0 ? floor_div(cl, 8) : cl;",
)

# ---------------------------------------------------------------- a toy feature set: Chess768 × 2 king buckets
# bucket 1 when the own king has left its first two (relative) ranks; r(x) = x ^ (56 p):
# index = 768·b + (c == p ? 0 : 384) + 64·t + r(s).


def _toy_index(g: Grid) -> torch.Tensor:
    rel = 56 * g.p
    b = ((g.k ^ rel) // 8 >= 2).long()
    return 768 * b + torch.where(g.colour == g.p, 0, 384) + 64 * g.ptype + (g.s ^ rel)


TOY_FS = FeatureSet(
    name="toy_kb2", num_inputs=1536, max_active=32,
    spec="768*(rank(r(k))>=2)+(c==p?0:384)+64*t+r(s); r(x)=x^(56*p)",
    encode=TableEncoder(_toy_index, 1536, 32), factors=lambda n: torch.arange(n) % 768,
    c=CFeature("FS_TOY_KB2", "int r = p == 0 ? 0 : 56;\n"
                             "int b = ((k ^ r) / 8) >= 2;\n"
                             "return 768L * b + (c == p ? 0 : 384) + 64 * t + (s ^ r);"),
)

# ---------------------------------------------------------------- a toy net kind: its two modules
# tests/toy_kind/inference.py and tests/toy_kind/trainer.py (tiny's pieces under the name "toy")
TOY_INFERENCE = toy_inference.KIND
TOY_KIND = toy_trainer.KIND


@contextlib.contextmanager
def toys():
    with acts.register(TOY_ACT), features.register(TOY_FS), inference_kinds.register(TOY_INFERENCE), \
            trainer_kinds.register(TOY_KIND):
        yield


# ---------------------------------------------------------------- the pieces


def test_registries_take_the_toys_and_give_them_back():
    before = (dict(acts.ACTIVATIONS), features.known_names(), dict(trainer_kinds.KINDS), dict(inference_kinds.KINDS))
    with toys():
        assert acts.check("toy_leaky", "l1") is TOY_ACT and "toy_leaky" in acts.allowed("l2")
        assert "toy_leaky" not in acts.allowed("l0")
        assert features.get_feature_set("toy_kb2") is TOY_FS
        assert "ACT_TOY_LEAKY" in acts.c_header() and "FS_TOY_KB2" in features.c_header()
        with pytest.raises(ValueError, match="already registered"):
            with acts.register(TOY_ACT):
                pass
    after = (dict(acts.ACTIVATIONS), features.known_names(), dict(trainer_kinds.KINDS), dict(inference_kinds.KINDS))
    assert after == before
    with pytest.raises(KeyError, match="unknown feature set 'toy_kb2'"):
        features.get_feature_set("toy_kb2")


def test_toy_activation_rules():
    y = torch.arange(-2 * QA, 2 * QA + 1, dtype=torch.int64)
    with toys():
        got = acts.int_hidden("toy_leaky", y, QA, SHIFT)
        want = [max(-QA, min(QA, v)) if v >= 0 else max(-QA, v) // 8 for v in y.tolist()]
        assert got.tolist() == want
        assert (int(got.min()), int(got.max())) == TOY_ACT.out_range["hidden"]
        assert acts.hidden_max_abs("toy_leaky", QA, SHIFT) == 255
        # the integer rule is the float rule on the integer grid, floored
        ref = torch.floor(acts.float_hidden("toy_leaky", y.double() / QA, 1.0) * QA + 1e-9)
        assert torch.equal(ref.long(), got)
        assert acts.approximation("toy_leaky") is None


def test_toy_activation_triton_equals_reference():
    """The toy's Triton forward and gradient (the spec's functions, bound by the kernels) against
    the torch reference, on CPU under the Triton interpreter; fp32, exact kinks included."""
    from nnue.kernels import activations as triton_acts
    from nnue.kernels import reference

    if not triton_acts.INTERPRETED:
        pytest.skip("needs TRITON_INTERPRET=1 (scripts/test.sh sets it)")
    x = torch.cat([torch.linspace(-2, 2, 1021), torch.tensor([-1.0, 0.0, 1.0])]).requires_grad_(True)
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
    with toys():
        y = triton_acts.activate("toy_leaky", x)
        y_ref = reference.activate("toy_leaky", x)
        (gx,) = torch.autograd.grad(y, x, g)
        (gx_ref,) = torch.autograd.grad(y_ref, x, g)
    torch.testing.assert_close(y, y_ref, rtol=0, atol=1e-7)  # fp32: the same ops in either order
    torch.testing.assert_close(gx, gx_ref, rtol=0, atol=1e-7)


def test_toy_feature_set_is_the_matching_kb768_map(boards):
    """The toy set's lookup encoding equals kb768's on the same map (an independent formula),
    and its factoriser maps each feature to its bucket-free piece square."""
    same_map = features.get_feature_set("kb768:" + "/".join(["0" * 8] * 2 + ["1" * 8] * 6))
    with toys():
        fs = features.get_feature_set("toy_kb2")
        for a, b in zip(fs.encode(boards[:4096]), same_map.encode(boards[:4096])):
            assert torch.equal(a, b)
        fac = features.factor_map("toy_kb2", fs.num_inputs)
        assert torch.equal(fac, features.factor_map(same_map.name, fs.num_inputs))


# ---------------------------------------------------------------- train, export, evaluate exactly


def _train_config(dataset, out):
    """The composed ``nnue train`` config of the toy kind: ``model.kind=toy`` and its own group
    ``model.toy`` (a real kind: ``model=toy``, its conf/model/toy.yaml), the toy feature set and
    activation; 4 epochs of 20 steps of 512 positions."""
    return compose_train([
        f"data.path={dataset}", f"paths.output_dir={out}", "features.name=toy_kb2", "model.kind=toy",
        "model.hidden=32", "model.activation=screlu", "model.factoriser=true", "model.backend=torch",
        "+model.toy.l1_outputs=16", "+model.toy.hidden_activation=toy_leaky", "data.batch_size=512",
        "data.val_fraction=0.5", "data.val_batch_size=4096", "data.positions_per_epoch=10240",
        "trainer.max_epochs=4", "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false",
        "optimizer.lr=0.002"])


def _train_losses(out) -> list[float]:
    """The logged training losses of a run, in step order (its CSV logger)."""
    rows = []
    for f in sorted(Path(out, "csv").rglob("metrics.csv")):
        rows += [(int(r["step"]), float(r["train_loss"])) for r in csv.DictReader(f.open()) if r.get("train_loss")]
    return [v for _, v in sorted(rows)]


@pytest.fixture
def toy_format_dataset(tmp_path):
    """The bundled sample written as toy-format lines (``FEN;score;result``) and packed by ``nnue
    pack`` with the toy format registered: every one of its 4,015 positions."""
    src = tmp_path / "sample.toy"
    lines = _positions(10 ** 6)
    src.write_text("\n".join(lines) + "\n")
    formats.register(TOY_FORMAT)
    try:
        assert cli.main(["pack", str(src), "-o", str(tmp_path / "toy-dataset"), "--workers", "1", "--no-progress"]) == 0
    finally:
        formats.unregister("toy")
    (entry,) = mf.load(tmp_path / "toy-dataset")["files"].values()
    assert entry["format"] == "toy" and entry["packed"] == len(lines) >= 4000
    return tmp_path / "toy-dataset"


def test_toy_kind_trains_exports_and_equals_the_generated_c(toy_format_dataset, fens, boards, tmp_path):
    from nnue.trainer.checkpoint import load_ckpt
    from nnue.trainer.train import run

    with toys():
        metrics = run(_train_config(toy_format_dataset, tmp_path / "run"))  # LitNNUE builds the toy from the config
        losses = _train_losses(tmp_path / "run")
        assert metrics["global_step"] == 80 and len(losses) >= 40
        assert sum(losses[-10:]) < sum(losses[:10]), losses  # it learns
        ck = tmp_path / "run" / "checkpoints" / "last.ckpt"
        hp = load_ckpt(ck)["hyper_parameters"]  # the net's settings, flat, as the config has them
        assert hp["kind"] == "toy" and hp["toy"] == {"l1_outputs": 16, "hidden_activation": "toy_leaky"}
        r = export(ck, tmp_path / "net")
        assert r["architecture"]["kind"] == "toy" and r["architecture"]["hidden_activation"] == "toy_leaky"
        assert r["cross_check"]["positions"] > 500 and "activation_approximation" not in r

        net = inference.load(tmp_path / "net" / "net.safetensors")
        assert isinstance(net, toy_inference.ToyIntegerNet) and net.features is TOY_FS
        ours = inference.evaluate(net, boards)
        exe = compile_c_eval(tmp_path / "cbuild")  # headers generated with the toys registered
        theirs = run_c(exe, tmp_path / "net" / "net.bin", inference_kinds.c_args(net.arch), fens)
    assert len(fens) >= 10_000
    assert torch.equal(ours, torch.tensor(theirs, dtype=ours.dtype))
    assert len(set(theirs)) > 100  # a net that distinguishes positions, not a constant
    # the toy activation's negative branch is exercised on real positions
    stm, nstm = TOY_FS.encode(boards[:2048])
    with toys():
        _, parts = tiny_evaluator.forward_int(net, stm, nstm, net.buckets.of(boards[:2048]), return_parts=True)
    assert bool((torch.div(parts["s1"], 64, rounding_mode="floor") < 0).any())
