"""Net kind ``deep`` (trainer side): the float model (:class:`DeepNet`: feature transformer → L0
activation → per output bucket L1 → act → L2 → act → out, Stockfish-style layer stacks), its
quantisation, audit and the output bias calibrated on real positions; the integer side is
:mod:`nnue.inference.kinds.deep`.

Quantisation: l0 at QA; l1, l2, out weights at QB, bucket-major (B, N_out, N_in) (L2: 2·N2 rows
for a gated unit); their biases at QA·QB, plus QB/2 for l1 and l2 so that the floor shift by
log2(QB) rounds to nearest.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nnue.inference.kinds import deep as inference
from nnue.kernels import layer_stacks
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme

from ..model import FTArch, StackNet
from ..quantise import audit_stacks, calibrate_output_bias, l0_input_max, round_scaled
from .spec import TrainerKind

HIDDEN_ACTIVATIONS = acts.allowed("l1")


@dataclass(frozen=True)
class DeepArch(FTArch):
    """Architecture of a deep net (Stockfish-style layer stacks): the perspective feature
    transformer (num_inputs F, hidden H per perspective, L0 activation), then per output bucket
    L1 (l1_inputs → l1_outputs N1), L2 (N1 → l2_outputs N2, or 2·N2 rows for a gated unit) and
    out (N2 → 1), with ``hidden_activation`` after L1 and ``l2_activation`` after L2 (default:
    hidden_activation; :mod:`nnue.spec.activations` says which are allowed where).
    ``product_scale`` multiplies every product of two activation-scale values (QA / 2^l0_shift
    = 255/256), matching the integer net's shifts (:mod:`nnue.inference.kinds.deep`)."""

    l1_outputs: int = 16
    l2_outputs: int = 32
    hidden_activation: str = "crelu"
    product_scale: float = 255 / 256
    l2_activation: str | None = None

    kind = "deep"

    def __post_init__(self):
        super().__post_init__()  # the L0 checks
        acts.check(self.hidden_activation, "l1", "hidden activation", "model.deep.hidden_activation")
        acts.check(self.l2_act, "l2", "L2 activation", "model.deep.l2_activation")
        if min(self.l1_outputs, self.l2_outputs) < 1:
            raise ValueError("l1_outputs and l2_outputs must be positive")

    @property
    def l2_act(self) -> str:
        return self.l2_activation or self.hidden_activation

    @property
    def l2_rows(self) -> int:
        """L2's outputs per bucket: N2, or 2·N2 for a gated unit (gate rows, then linear rows)."""
        return self.l2_outputs * (2 if acts.get(self.l2_act).gated else 1)

    @classmethod
    def from_config(cls, num_inputs, hidden, activation, num_buckets, layers, product_scale,
                    scale=400.0) -> "DeepArch":
        return cls(num_inputs, hidden, activation, num_buckets, product_scale=product_scale, **dict(layers))

    def header_args(self) -> dict:
        return super().header_args() | {"l1_outputs": self.l1_outputs, "l2_outputs": self.l2_outputs,
                                        "hidden_activation": self.hidden_activation,
                                        "l2_activation": self.l2_act}



class DeepNet(StackNet):
    """Feature transformer → L0 activation → per output bucket: L1 → act → L2 → act → out.

    Each bucketed layer is one ``nn.Linear`` holding every bucket's rows (``l1.weight``
    (B·N1, L1), ``l2.weight`` (B·N2, N1), ``out.weight`` (B, N2)); a position uses the rows of
    its bucket (nnue-pytorch's LayerStacks). Activations live in [0, 1]; squared and pairwise
    products are multiplied by ``arch.product_scale`` so that the float net computes what the
    integer net computes (:mod:`nnue.inference.kinds.deep`). Forward: (B,) float eval / SCALE.
    """

    def _make_layers(self, arch: DeepArch) -> None:
        B, N1, N2 = arch.num_buckets, arch.l1_outputs, arch.l2_outputs
        self.l1 = nn.Linear(arch.l1_inputs, B * N1)
        self.l2 = nn.Linear(N1, B * arch.l2_rows)
        self.out = nn.Linear(N2, B)

    def forward_with_activations(self, stm: torch.Tensor, nstm: torch.Tensor,
                                 bucket: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """stm, nstm: (B, A) int32 −1-padded; bucket: (B,) int64 -> (eval / SCALE (B,), the L0
        activations x0 (B, L1): on the CPU with its rows in bucket order (:meth:`_stacks`), for
        order-free statistics)."""
        a = self.arch
        stm, nstm, perm, stack = self._stacks(stm, nstm, bucket)
        x0 = self._l0(stm, nstm)
        x1 = self._hidden_act(stack(self.l1, x0, a.l1_outputs), a.hidden_activation)
        x2 = self._hidden_act(stack(self.l2, x1, a.l2_rows), a.l2_act)
        return layer_stacks.unpermute(stack(self.out, x2, 1)[:, 0], perm), x0

    @torch.no_grad()
    def clip_weights(self, ft_limit: float, l1_limit: float, ft_weight: bool = True) -> None:
        """The feature transformer (:meth:`~nnue.trainer.model.FTNet.clip_ft`) and every dense
        layer's weights within ``l1_limit`` (int8 at QB: 127/64)."""
        self.clip_ft(ft_limit, ft_weight)
        self.l1.weight.clamp_(-l1_limit, l1_limit)
        self.l2.weight.clamp_(-l1_limit, l1_limit)
        self.out.weight.clamp_(-l1_limit, l1_limit)


def quantise(model: DeepNet, scheme: QuantScheme) -> dict[str, torch.Tensor]:
    """Float state -> int64 tensors named as :class:`~nnue.inference.kinds.deep.DeepIntegerNet`'s
    (module docstring)."""
    qa, qb = scheme.qa, scheme.qb
    a = model.arch
    B, N1, R2 = a.num_buckets, a.l1_outputs, a.l2_rows
    half = qb // 2
    r = round_scaled
    with torch.no_grad():
        return {
            "l0w": r(model.folded_ft_weight(), qa), "l0b": r(model.ft.bias, qa),
            "l1w": r(model.l1.weight, qb).view(B, N1, a.l1_inputs), "l1b": r(model.l1.bias, qa * qb).view(B, N1) + half,
            "l2w": r(model.l2.weight, qb).view(B, R2, N1), "l2b": r(model.l2.bias, qa * qb).view(B, R2) + half,
            "outw": r(model.out.weight, qb), "outb": r(model.out.bias, qa * qb),
        }


def audit(q, arch, scheme: QuantScheme, max_active: int, clip: bool = False):
    """The layer-stack audit (:func:`nnue.trainer.quantise.audit_stacks`): the dense layers' worst
    cases take each layer's largest input from the activation before it
    (:func:`nnue.spec.activations.hidden_max_abs`: u8 255, hardswish 2040, swiglu 16256, ...)."""
    inputs = {"l1": l0_input_max(arch.activation),
              "l2": acts.hidden_max_abs(arch.hidden_activation, scheme.qa, scheme.l0_shift),
              "out": acts.hidden_max_abs(arch.l2_act, scheme.qa, scheme.l0_shift)}
    return audit_stacks(q, arch, scheme, max_active, clip, inputs)


KIND = TrainerKind("deep", inference.KIND, DeepArch, DeepNet, quantise, audit, calibrate_output_bias,
                   layers_key="deep", compiled_ft=DeepNet.compiled_ft)
