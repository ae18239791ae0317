"""Float state -> integer tensors, what every kind's quantise, audit and calibrate pieces share:
rounding, the static range checks (:class:`Audit`: each tensor within its dtype, the int16
accumulator's worst case, the int32 worst case of bucketed dense layers) and the output-bias
calibration of layer-stack nets. Each kind's own pieces are in its module under
:mod:`nnue.trainer.kinds`; :mod:`nnue.trainer.export` drives them.
"""
from __future__ import annotations

import torch

from nnue.inference import api as inference_api
from nnue.inference.exact import INT32_MAX
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme

INT16_MAX = 32767
INT8_MAX = 127


class ExportError(ValueError):
    """The net cannot be exported exactly; the message names layer, neuron and value."""


def round_scaled(t: torch.Tensor, k: float) -> torch.Tensor:
    """``round(t·k)`` as int64 (float64 product, round half to even)."""
    return torch.round(t.double() * k).long()


def index_of(t: torch.Tensor, flat: int) -> str:
    """A flat index of ``t`` as its (i, j, …) index, e.g. ``[3, 17]``."""
    idx, rest = [], flat
    for d in reversed(t.shape):
        idx.append(rest % d)
        rest //= d
    return "[" + ", ".join(map(str, reversed(idx))) + "]"


def audit_accumulator(q: dict[str, torch.Tensor], weight: str, bias: str, max_active: int, clip: bool,
                      problems: list[str], clipped: dict[str, int], label: str) -> int:
    """The int16 accumulator's static worst case per neuron, ``|bias| + Σ of the max_active
    largest |w|`` over the rows of ``q[weight]`` (F, H) int64 and ``q[bias]`` (H,). A neuron
    beyond int16 adds a line to ``problems``; with ``clip`` its column is clamped to what fits
    (counted in ``clipped``), in place in ``q``. Returns the largest worst case left."""
    k = min(max_active, q[weight].shape[0])

    def worst_case():
        return q[bias].abs() + q[weight].abs().topk(k, dim=0).values.sum(0)
    worst = worst_case()
    bad = worst > INT16_MAX
    if bad.any():
        n = int(bad.nonzero()[0])
        problems.append(f"{label} accumulator: {int(bad.sum())} neuron(s) can exceed int16; neuron {n} "
                        f"worst case {int(worst[n])}")
        if clip:
            for n in bad.nonzero().flatten().tolist():
                lim = max((INT16_MAX - int(q[bias][n].abs())) // k, 0)
                col = q[weight][:, n]
                clipped[weight] = clipped.get(weight, 0) + int((col.abs() > lim).sum())
                q[weight][:, n] = col.clamp(-lim, lim)
            worst = worst_case()
    return int(worst.max())


class Audit:
    """The static range checks of quantised tensors ``q`` (a copy, repaired in place with
    ``clip``): each check adds a line naming tensor, index and value to ``problems`` (and, with
    ``clip``, clamps what does not fit and counts it in ``clipped``); :meth:`done` raises
    :class:`ExportError` with every line unless ``clip``."""

    def __init__(self, q: dict[str, torch.Tensor], clip: bool):
        self.q = {k: v.clone() for k, v in q.items()}
        self.clip = clip
        self.problems: list[str] = []
        self.clipped: dict[str, int] = {}

    def fit(self, name: str, lo: int, hi: int, why: str = "") -> None:
        """Every value of ``q[name]`` within lo..hi."""
        t = self.q[name]
        bad = (t < lo) | (t > hi)
        if bad.any():
            i = int(bad.flatten().nonzero()[0])
            self.problems.append(f"{name}: {int(bad.sum())} value(s) outside {lo}..{hi}{why}, first at "
                                 f"{index_of(t, i)} = {int(t.flatten()[i])}")
            if self.clip:
                self.clipped[name] = self.clipped.get(name, 0) + int(bad.sum())
                self.q[name] = t.clamp(lo, hi)

    def accumulator(self, weight: str, bias: str, max_active: int, label: str) -> int:
        """:func:`audit_accumulator` of ``q[weight]``, ``q[bias]``: the largest worst case left."""
        return audit_accumulator(self.q, weight, bias, max_active, self.clip, self.problems, self.clipped, label)

    def dense_sums(self, dense_inputs: dict[str, int], report: dict) -> None:
        """The worst case ``|b| + X·Σ|w|`` per neuron of each bucketed dense layer (``q[layer +
        "w"]`` (…, N, K), ``q[layer + "b"]`` (…, N)) against int32, X the layer's largest |input|
        (``dense_inputs``: layer -> X); with ``clip`` the bias gives way (|b| ≤ INT32_MAX −
        X·Σ|w|, clamped at 0). Adds each layer's ``{layer}_input_max_abs``,
        ``{layer}_sum_worst_case`` and ``{layer}_sum_worst_case_fits_int32`` to ``report``."""
        for layer, xmax in dense_inputs.items():
            w, b = self.q[layer + "w"], self.q[layer + "b"]
            report[f"{layer}_input_max_abs"] = xmax
            worst_sum = b.abs() + (w.abs() * xmax).sum(-1)
            bad = worst_sum > INT32_MAX
            if bad.any():
                i = int(bad.flatten().nonzero()[0])
                self.problems.append(f"{layer} sum: {int(bad.sum())} neuron(s) can exceed int32; neuron "
                                     f"{index_of(worst_sum, i)} worst case {int(worst_sum.flatten()[i])}")
                if self.clip:
                    room = (INT32_MAX - (w.abs() * xmax).sum(-1)).clamp(min=0)
                    self.q[layer + "b"] = torch.maximum(torch.minimum(b, room), -room)
                    self.clipped[layer + "b"] = self.clipped.get(layer + "b", 0) + int(bad.sum())
                    worst_sum = self.q[layer + "b"].abs() + (w.abs() * xmax).sum(-1)
            report[f"{layer}_sum_worst_case"] = int(worst_sum.max())
            report[f"{layer}_sum_worst_case_fits_int32"] = bool(worst_sum.max() <= INT32_MAX)

    def done(self, report: dict) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, report with ``clipped`` and ``problems``); raises ExportError listing the
        problems unless ``clip``."""
        report |= {"clipped": self.clipped, "problems": self.problems}
        if self.problems and not self.clip:
            raise ExportError("net would overflow its integer types (use --clip to clip instead):\n  "
                              + "\n  ".join(self.problems))
        return self.q, report


def audit_stacks(q, arch, scheme: QuantScheme, max_active: int, clip: bool,
                 dense_inputs: dict[str, int]) -> tuple[dict[str, torch.Tensor], dict]:
    """The audit of a layer-stack net (deep, tiny): l0w, l0b within int16; each dense layer of
    ``dense_inputs`` (layer -> its largest |input|) with int8 weights and int32 biases; the
    accumulator's worst case against int16 (:func:`audit_accumulator`) and each layer's worst-case
    sum against int32 (:meth:`Audit.dense_sums`). Returns (tensors, report); raises ExportError
    naming layer, index and value otherwise (unless ``clip``)."""
    a = Audit(q, clip)
    a.fit("l0w", -INT16_MAX, INT16_MAX, " (int16)")
    a.fit("l0b", -INT16_MAX, INT16_MAX, " (int16)")
    for layer in dense_inputs:
        a.fit(layer + "w", -INT8_MAX, INT8_MAX, " (int8)")
    for layer in dense_inputs:
        a.fit(layer + "b", -INT32_MAX, INT32_MAX, " (int32)")
    report = {"accumulator_worst_case": a.accumulator("l0w", "l0b", max_active, "l0"),
              "accumulator_limit": INT16_MAX}
    a.dense_sums(dense_inputs, report)
    return a.done(report)


def l0_input_max(activation: str) -> int:
    """The largest |x0| a layer-stack net's L1 takes after the L0 ``activation`` (u8: 255)."""
    return max(max(abs(v) for v in acts.get(activation).out_range["deep_l0"]), 255)


def calibrate_output_bias(model, q: dict, net, scheme: QuantScheme, stm: torch.Tensor, nstm: torch.Tensor,
                          bucket: torch.Tensor) -> tuple[dict, dict]:
    """The ``calibrate`` piece of layer-stack nets (deep, tiny): :func:`output_bias_correction`.
    Returns (tensors to replace, calibration report)."""
    outb, shift = output_bias_correction(model, net, scheme, stm, nstm, bucket)
    return {"outb": outb}, {"output_bias_shift_cp": shift}


def output_bias_correction(model, net, scheme: QuantScheme,
                           stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor) -> tuple[torch.Tensor, list]:
    """Layer-stack nets: remove the mean offset between the integer and the float net, per output bucket.

    The rounding of every layer, and the shifts between them, leave an error whose mean over
    real positions is not zero; it reaches the eval through the output layer. Measured on
    calibration positions: ``e_b = mean(out_int − y_float·QA·QB)`` over the positions of bucket
    b, in output units; the bias becomes ``outb[b] − round(e_b)`` (empirical bias correction,
    Nagel et al. 2019, section 4.2, applied to the last layer).

    stm, nstm: (N, A) int32 calibration positions; bucket: (N,) int64. Returns (outb (B,) int64,
    per-bucket correction in centipawns). Raises ExportError if the integer net overflows.
    """
    with torch.no_grad():
        y = model(stm, nstm, bucket).double() * scheme.qa * scheme.qb
    try:
        _, parts = inference_api.forward_int(net, stm, nstm, bucket, return_parts=True)
    except OverflowError as e:
        raise ExportError(f"integer eval overflows on a calibration position: {e}") from None
    err = parts["out"].double() - y
    outb = net.outb.to(torch.int64).clone()
    shift = []
    for b in range(outb.shape[0]):
        mask = bucket == b
        e = round(float(err[mask].mean())) if mask.any() else 0
        outb[b] -= e
        shift.append(-e * scheme.scale / (scheme.qa * scheme.qb))
    return outb, shift
