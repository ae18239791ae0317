"""Net kind ``perspective`` (trainer side): the float model (:class:`PerspectiveNet`: feature
transformer → activation → one output per output bucket, bullet-style), its quantisation, audit
and the L1 bias calibration; the integer side is :mod:`nnue.inference.kinds.perspective`.

Forward: ``acc_p = bias + Σ W[f]`` for each perspective p (shared weights), ``h = [act(acc_stm),
act(acc_nstm)]``, ``y = L1_b(h)`` for the output bucket b of each position. ``y`` is the eval in
units of SCALE: ``eval_cp = y · SCALE``. State-dict layout (kept identical for every kernel
backend): ``ft.weight (F, H)``, ``ft.bias (H,)``, ``l1.weight (B_out, L1_in)``, ``l1.bias (B_out,)``.

Quantisation (the visible chain of bullet's saved format): ``l0w = round(W·QA)``, ``l0b =
round(b0·QA)``, ``l1w = round(W1·QB)``, ``l1b = round(b1·QA·QB)``, all int16; the L1 bias is then
corrected for the mean rounding error of L1's weights on real positions (:func:`calibrate`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nnue.inference.exact import INT32_MAX
from nnue.inference.kinds import perspective as inference
from nnue.kernels import sparse_ft_pair
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme

from ..model import FTArch, FTNet
from ..quantise import INT16_MAX, Audit, round_scaled
from .spec import TrainerKind

PERSPECTIVE_ACTIVATIONS = acts.allowed("l0")


@dataclass(frozen=True)
class Arch(FTArch):
    """Architecture of a perspective net. num_inputs: feature count F; hidden: H per
    perspective; activation: crelu|screlu|pairwise_crelu; num_buckets: output buckets."""

    kind = "perspective"


class PerspectiveNet(FTNet):
    """The perspective net (module docstring): the feature transformer of :class:`FTNet` and one
    dense output per bucket, ``l1``. See :class:`FTNet` for the factoriser and QAT."""

    def _make_layers(self, arch: Arch) -> None:
        """The layers after the feature transformer: one output per bucket."""
        self.l1 = nn.Linear(arch.l1_inputs, arch.num_buckets)

    def forward_with_activations(self, stm: torch.Tensor, nstm: torch.Tensor,
                                 bucket: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(eval / SCALE (B,), the L0 activations (B, L1) in [0, 1], stm half first): the
        activations for the L1 activation penalty and the sparsity metrics."""
        h = self._ft(stm, nstm)
        return self._dense(self.l1, h).gather(1, bucket.view(-1, 1)).squeeze(1), h

    @torch.no_grad()
    def clip_weights(self, ft_limit: float, l1_limit: float, ft_weight: bool = True) -> None:
        """Clamp weights in place so that they stay quantisable (limits from the QuantScheme):
        the feature transformer (:meth:`FTNet.clip_ft`; ft_weight=False leaves ``ft.weight`` to
        the row-sparse optimiser) and L1's weights within ``l1_limit``."""
        self.clip_ft(ft_limit, ft_weight)
        self.l1.weight.clamp_(-l1_limit, l1_limit)


def quantise(model: PerspectiveNet, scheme: QuantScheme) -> dict[str, torch.Tensor]:
    """Float state -> int64 tensors named as :class:`~nnue.inference.kinds.perspective.IntegerNet`'s:
    l0 at QA (the factoriser folded in), l1 weights at QB, l1 bias at QA·QB."""
    qa, qb = scheme.qa, scheme.qb
    with torch.no_grad():
        return {"l0w": round_scaled(model.folded_ft_weight(), qa), "l0b": round_scaled(model.ft.bias, qa),
                "l1w": round_scaled(model.l1.weight, qb), "l1b": round_scaled(model.l1.bias, qa * qb)}


def audit(q, arch, scheme: QuantScheme, max_active: int, clip: bool = False):
    """Check (or, with clip, repair) the static ranges of the quantised tensors: every tensor
    within int16; per L0 neuron, ``|l0b| + Σ of the max_active largest |l0w|`` within int16;
    screlu/pairwise: ``|l1w|·QA`` within int16; the L1 sum's worst case against int32 (reported).
    Returns (tensors, report). Raises ExportError naming layer, index and value otherwise."""
    a = Audit(q, clip)
    for name in ("l0w", "l0b", "l1w", "l1b"):
        a.fit(name, -INT16_MAX, INT16_MAX, " (int16)")
    report = {"accumulator_worst_case": a.accumulator("l0w", "l0b", max_active, "l0"),
              "accumulator_limit": INT16_MAX}
    squared = acts.divides_by_qa(arch.activation)
    if squared:
        lim = INT16_MAX // scheme.qa
        a.fit("l1w", -lim, lim, f" (v·w must fit int16 at v = QA = {scheme.qa})")
    vmax = scheme.qa * scheme.qa if squared else scheme.qa
    l1_worst = (a.q["l1w"].abs() * vmax).sum(1)
    report |= {"l1_sum_worst_case": int(l1_worst.max()),
               "l1_sum_worst_case_fits_int32": bool(l1_worst.max() <= INT32_MAX)}
    return a.done(report)


def correct_l1_bias(model: PerspectiveNet, q: dict[str, torch.Tensor], scheme: QuantScheme,
                    stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor) -> tuple[torch.Tensor, list]:
    """Fold the mean error of rounding L1's weights into L1's bias, per output bucket.

    Rounding ``W1·QB`` leaves an error ``ΔW = W1 − l1w/QB`` whose effect on the output,
    ``ΔW·h``, has a non-zero mean over real activations h (measured: −2.0 cp on the demo net
    trained on all self-play data). Adding ``mean(h)·ΔW`` of each bucket to its bias before
    rounding removes that offset (bias correction, Nagel et al. 2019, "Data-Free Quantization
    Through Weight Equalization and Bias Correction", section 4.2).

    stm, nstm: (N, A) int32 calibration positions; bucket: (N,) int64. Returns (l1b (B,) int64,
    per-bucket correction in centipawns).
    """
    with torch.no_grad():
        h = sparse_ft_pair(model.folded_ft_weight(), model.ft.bias, stm, nstm, model.arch.activation,
                           "torch").double()
        dw = model.l1.weight.double() - q["l1w"].double() / scheme.qb
        bias = model.l1.bias.double().clone()
        shift = []
        for b in range(bias.shape[0]):
            mask = bucket == b
            err = float((h[mask].mean(0) * dw[b]).sum()) if mask.any() else 0.0
            bias[b] += err
            shift.append(err * scheme.scale)
    return torch.round(bias * scheme.qa * scheme.qb).long(), shift


def calibrate(model: PerspectiveNet, q: dict, net, scheme: QuantScheme, stm: torch.Tensor,
              nstm: torch.Tensor, bucket: torch.Tensor) -> tuple[dict, dict]:
    """The kind's ``calibrate`` piece: :func:`correct_l1_bias`,
    skipped for a QAT net (trained on its rounded weights: no rounding error to correct).
    Returns (tensors to replace, calibration report)."""
    if model.qat is not None:
        return {}, {"bias_correction": False, "skipped": "qat: the net was trained on its quantised weights"}
    l1b, shift = correct_l1_bias(model, q, scheme, stm, nstm, bucket)
    return {"l1b": l1b}, {"l1_bias_shift_cp": shift}


KIND = TrainerKind("perspective", inference.KIND, Arch, PerspectiveNet, quantise, audit, calibrate,
                   compiled_ft=PerspectiveNet.compiled_ft)
