"""Net kind ``tiny`` (trainer side): the float model (:class:`TinyNet`: feature transformer → L0
activation → per output bucket L1 → hidden activation → out, the 5 MiB MLP), its quantisation,
audit and the output bias calibrated on real positions; the integer side is
:mod:`nnue.inference.kinds.tiny`.

Quantisation (:mod:`nnue.inference.kinds.tiny`): l0 at QA; l1 and out weights at QB (l1
bucket-major (B, N1, L1)); biases at QA·QB, plus QB/2 for l1.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nnue.inference.kinds import tiny as inference
from nnue.kernels import layer_stacks
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme

from ..model import FTArch, StackNet
from ..quantise import audit_stacks, calibrate_output_bias, l0_input_max, round_scaled
from .spec import TrainerKind


@dataclass(frozen=True)
class TinyArch(FTArch):
    """Architecture of a tiny net (the seed's 5 MiB residual MLP): the perspective feature
    transformer on a compact input (num_inputs F, e.g. chess768; hidden H per perspective, L0
    activation), then per output bucket one hidden layer L1 (l1_inputs → l1_outputs N1,
    ``hidden_activation``) and out (N1 → 1): e.g. 2·16 = 32 → 32 → 1 with CReLU. Integer rule:
    :mod:`nnue.inference.kinds.tiny` (int16 L0, int8/int32 dense layers, as the deep nets' first and
    last layers). ``product_scale``: as :class:`~nnue.trainer.kinds.deep.DeepArch`."""

    l1_outputs: int = 32
    hidden_activation: str = "crelu"
    product_scale: float = 255 / 256

    kind = "tiny"

    def __post_init__(self):
        super().__post_init__()
        acts.check(self.hidden_activation, "l1", "hidden activation", "model.tiny.hidden_activation")
        if self.l1_outputs < 1:
            raise ValueError("model.tiny.l1_outputs must be positive")

    @classmethod
    def from_config(cls, num_inputs, hidden, activation, num_buckets, layers, product_scale,
                    scale=400.0) -> "TinyArch":
        """``layers``: the ``model.tiny`` group ({"l1_outputs", "hidden_activation"})."""
        return cls(num_inputs, hidden, activation, num_buckets, product_scale=product_scale, **dict(layers))

    def header_args(self) -> dict:
        return super().header_args() | {"l1_outputs": self.l1_outputs, "hidden_activation": self.hidden_activation}



class TinyNet(StackNet):
    """Feature transformer → L0 activation → per output bucket: L1 → hidden activation → out
    (:class:`TinyArch`). ``l1.weight`` (B·N1, L1), ``out.weight`` (B, N1); QAT as the deep
    nets'. Forward: (B,) float eval / SCALE."""

    def _make_layers(self, arch: TinyArch) -> None:
        B, N1 = arch.num_buckets, arch.l1_outputs
        self.l1 = nn.Linear(arch.l1_inputs, B * N1)
        self.out = nn.Linear(N1, B)

    def forward_with_activations(self, stm, nstm, bucket):
        """(eval / SCALE (B,), the L0 activations x0 (B, L1), as the deep nets give them)."""
        a = self.arch
        stm, nstm, perm, stack = self._stacks(stm, nstm, bucket)
        x0 = self._l0(stm, nstm)
        x1 = self._hidden_act(stack(self.l1, x0, a.l1_outputs), a.hidden_activation)
        return layer_stacks.unpermute(stack(self.out, x1, 1)[:, 0], perm), x0

    @torch.no_grad()
    def clip_weights(self, ft_limit: float, l1_limit: float, ft_weight: bool = True) -> None:
        """The feature transformer (:meth:`~nnue.trainer.model.FTNet.clip_ft`) and both dense
        layers' weights within ``l1_limit``."""
        self.clip_ft(ft_limit, ft_weight)
        self.l1.weight.clamp_(-l1_limit, l1_limit)
        self.out.weight.clamp_(-l1_limit, l1_limit)


def quantise(model: TinyNet, scheme: QuantScheme) -> dict[str, torch.Tensor]:
    """Float state -> int64 tensors named as :class:`~nnue.inference.kinds.tiny.TinyIntegerNet`'s
    (module docstring)."""
    qa, qb = scheme.qa, scheme.qb
    a = model.arch
    B, N1 = a.num_buckets, a.l1_outputs
    r = round_scaled
    with torch.no_grad():
        return {"l0w": r(model.folded_ft_weight(), qa), "l0b": r(model.ft.bias, qa),
                "l1w": r(model.l1.weight, qb).view(B, N1, a.l1_inputs),
                "l1b": r(model.l1.bias, qa * qb).view(B, N1) + qb // 2,
                "outw": r(model.out.weight, qb), "outb": r(model.out.bias, qa * qb)}


def audit(q, arch, scheme: QuantScheme, max_active: int, clip: bool = False):
    """The layer-stack audit (:func:`nnue.trainer.quantise.audit_stacks`) of its two dense
    layers: l1 takes the u8 L0 activations, out the activation after L1."""
    inputs = {"l1": l0_input_max(arch.activation),
              "out": acts.hidden_max_abs(arch.hidden_activation, scheme.qa, scheme.l0_shift)}
    return audit_stacks(q, arch, scheme, max_active, clip, inputs)


KIND = TrainerKind("tiny", inference.KIND, TinyArch, TinyNet, quantise, audit, calibrate_output_bias,
                   layers_key="tiny", compiled_ft=TinyNet.compiled_ft)
