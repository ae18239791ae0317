"""Float state -> integer tensors for the perspective, deep and tiny kinds: rounding, range audit
and bias calibration (the ``quantise``, ``audit`` and ``calibrate`` pieces their kind modules
in :mod:`nnue.trainer.kinds` name; :mod:`nnue.trainer.export` drives them).
"""
from __future__ import annotations

import torch

from nnue.inference import api as inference_api
from nnue.inference.exact import INT32_MAX
from nnue.kernels import sparse_ft_pair
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme

from .model import DeepNet, PerspectiveNet

INT16_MAX = 32767
INT8_MAX = 127


class ExportError(ValueError):
    """The net cannot be exported exactly; the message names layer, neuron and value."""


def _r(t: torch.Tensor, k: int) -> torch.Tensor:
    return torch.round(t.double() * k).long()


def quantise_perspective(model: PerspectiveNet, scheme: QuantScheme) -> dict[str, torch.Tensor]:
    """:func:`quantise` of a perspective net: l0 at QA, l1 weights at QB, l1 bias at QA·QB."""
    qa, qb = scheme.qa, scheme.qb
    with torch.no_grad():
        return {"l0w": _r(model.folded_ft_weight(), qa), "l0b": _r(model.ft.bias, qa),
                "l1w": _r(model.l1.weight, qb), "l1b": _r(model.l1.bias, qa * qb)}


def quantise_deep(model: DeepNet, scheme: QuantScheme) -> dict[str, torch.Tensor]:
    """:func:`quantise` of a deep net: l0 at QA; dense weights at QB, bucket-major (B, N_out,
    N_in) (L2: 2·N2 rows for a gated unit); biases at QA·QB, plus QB/2 for l1 and l2."""
    qa, qb = scheme.qa, scheme.qb
    a = model.arch
    B, N1, R2 = a.num_buckets, a.l1_outputs, a.l2_rows
    half = qb // 2
    with torch.no_grad():
        return {
            "l0w": _r(model.folded_ft_weight(), qa), "l0b": _r(model.ft.bias, qa),
            "l1w": _r(model.l1.weight, qb).view(B, N1, a.l1_inputs), "l1b": _r(model.l1.bias, qa * qb).view(B, N1) + half,
            "l2w": _r(model.l2.weight, qb).view(B, R2, N1), "l2b": _r(model.l2.bias, qa * qb).view(B, R2) + half,
            "outw": _r(model.out.weight, qb), "outb": _r(model.out.bias, qa * qb),
        }


def quantise_tiny(model, scheme: QuantScheme) -> dict[str, torch.Tensor]:
    """:func:`quantise` of a tiny net (:mod:`nnue.inference.tiny`): l0 at QA; l1 and out
    weights at QB (l1 bucket-major (B, N1, L1)); biases at QA·QB, plus QB/2 for l1."""
    qa, qb = scheme.qa, scheme.qb
    a = model.arch
    B, N1 = a.num_buckets, a.l1_outputs
    with torch.no_grad():
        return {"l0w": _r(model.folded_ft_weight(), qa), "l0b": _r(model.ft.bias, qa),
                "l1w": _r(model.l1.weight, qb).view(B, N1, a.l1_inputs),
                "l1b": _r(model.l1.bias, qa * qb).view(B, N1) + qb // 2,
                "outw": _r(model.out.weight, qb), "outb": _r(model.out.bias, qa * qb)}


def _where(t: torch.Tensor, flat: int) -> str:
    """A flat index of ``t`` as its (i, j, …) index."""
    idx, rest = [], flat
    for d in reversed(t.shape):
        idx.append(rest % d)
        rest //= d
    return "[" + ", ".join(map(str, reversed(idx))) + "]"


def audit_perspective(q, arch, scheme: QuantScheme, max_active: int, clip: bool = False):
    """:func:`audit` of a perspective net (:func:`_audit`)."""
    return _audit(q, arch, scheme, max_active, clip, None)


def audit_deep(q, arch, scheme: QuantScheme, max_active: int, clip: bool = False):
    """:func:`audit` of a deep net: the dense layers' worst cases take each layer's largest
    input from the activation before it (:func:`nnue.spec.activations.hidden_max_abs`: u8 255,
    hardswish 2040, swiglu 16256, ...)."""
    x0 = max(abs(v) for v in acts.get(arch.activation).out_range["deep_l0"])
    inputs = {"l1": max(x0, 255), "l2": acts.hidden_max_abs(arch.hidden_activation, scheme.qa, scheme.l0_shift),
              "out": acts.hidden_max_abs(arch.l2_act, scheme.qa, scheme.l0_shift)}
    return _audit(q, arch, scheme, max_active, clip, inputs)


def audit_tiny(q, arch, scheme: QuantScheme, max_active: int, clip: bool = False):
    """:func:`audit` of a tiny net: as :func:`audit_deep` for its two dense layers (l1 takes
    the u8 L0 activations, out the activation after L1)."""
    x0 = max(abs(v) for v in acts.get(arch.activation).out_range["deep_l0"])
    inputs = {"l1": max(x0, 255), "out": acts.hidden_max_abs(arch.hidden_activation, scheme.qa, scheme.l0_shift)}
    return _audit(q, arch, scheme, max_active, clip, inputs)


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


def _audit(q: dict[str, torch.Tensor], arch, scheme: QuantScheme, max_active: int,
           clip: bool, dense_inputs: dict | None) -> tuple[dict[str, torch.Tensor], dict]:
    """Check (or, with clip, repair) the static ranges of quantised tensors.

    arch: :class:`~.model.Arch` or :class:`~.model.DeepArch`. Checks: every tensor fits its
    dtype (int16; deep dense weights int8, their biases int32); per L0 neuron, ``|l0b| + Σ of
    the max_active largest |l0w|`` fits int16; perspective screlu/pairwise: ``|l1w|·QA`` fits
    int16; the worst-case sum of every later neuron (|bias| + Σ |w|·max input) against int32.
    Returns (tensors, report). Raises ExportError naming layer, index and value otherwise.
    """
    q = {k: v.clone() for k, v in q.items()}
    problems: list[str] = []
    clipped: dict[str, int] = {}
    deep = dense_inputs is not None

    def fit(name: str, lo: int, hi: int, why: str = ""):
        t = q[name]
        bad = (t < lo) | (t > hi)
        if bad.any():
            i = int(bad.flatten().nonzero()[0])
            problems.append(f"{name}: {int(bad.sum())} value(s) outside {lo}..{hi}{why}, first at "
                            f"{_where(t, i)} = {int(t.flatten()[i])}")
            if clip:
                clipped[name] = clipped.get(name, 0) + int(bad.sum())
                q[name] = t.clamp(lo, hi)

    fit("l0w", -INT16_MAX, INT16_MAX, " (int16)")
    fit("l0b", -INT16_MAX, INT16_MAX, " (int16)")
    if deep:  # the dense layers of dense_inputs (deep: l1, l2, out; tiny: l1, out)
        for layer in dense_inputs:
            fit(layer + "w", -INT8_MAX, INT8_MAX, " (int8)")
        for layer in dense_inputs:
            fit(layer + "b", -INT32_MAX, INT32_MAX, " (int32)")
    else:
        fit("l1w", -INT16_MAX, INT16_MAX, " (int16)")
        fit("l1b", -INT16_MAX, INT16_MAX, " (int16)")
    worst = audit_accumulator(q, "l0w", "l0b", max_active, clip, problems, clipped, "l0")
    report = {"accumulator_worst_case": worst, "accumulator_limit": INT16_MAX}
    if deep:
        # worst case |b| + X·Σ|w| per neuron, X the layer's largest |input| (dense_inputs)
        for layer in dense_inputs:
            w, b = q[layer + "w"], q[layer + "b"]
            xmax = dense_inputs[layer]
            report[f"{layer}_input_max_abs"] = xmax
            worst_sum = b.abs() + (w.abs() * xmax).sum(-1)
            bad = worst_sum > INT32_MAX
            if bad.any():
                i = int(bad.flatten().nonzero()[0])
                problems.append(f"{layer} sum: {int(bad.sum())} neuron(s) can exceed int32; neuron "
                                f"{_where(worst_sum, i)} worst case {int(worst_sum.flatten()[i])}")
                if clip:  # the bias gives way: |b| ≤ INT32_MAX − X·Σ|w| (clamped at 0)
                    room = (INT32_MAX - (w.abs() * xmax).sum(-1)).clamp(min=0)
                    q[layer + "b"] = torch.maximum(torch.minimum(b, room), -room)
                    clipped[layer + "b"] = clipped.get(layer + "b", 0) + int(bad.sum())
                    worst_sum = q[layer + "b"].abs() + (w.abs() * xmax).sum(-1)
            report[f"{layer}_sum_worst_case"] = int(worst_sum.max())
            report[f"{layer}_sum_worst_case_fits_int32"] = bool(worst_sum.max() <= INT32_MAX)
    else:
        squared = acts.divides_by_qa(arch.activation)
        if squared:
            lim = INT16_MAX // scheme.qa
            fit("l1w", -lim, lim, f" (v·w must fit int16 at v = QA = {scheme.qa})")
        vmax = scheme.qa * scheme.qa if squared else scheme.qa
        l1_worst = (q["l1w"].abs() * vmax).sum(1)
        report |= {"l1_sum_worst_case": int(l1_worst.max()),
                   "l1_sum_worst_case_fits_int32": bool(l1_worst.max() <= INT32_MAX)}
    report |= {"clipped": clipped, "problems": problems}
    if problems and not clip:
        raise ExportError("net would overflow its integer types (use --clip to clip instead):\n  "
                          + "\n  ".join(problems))
    return q, report


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


def calibrate_l1_bias(model: PerspectiveNet, q: dict, net, scheme: QuantScheme, stm: torch.Tensor,
                      nstm: torch.Tensor, bucket: torch.Tensor) -> tuple[dict, dict]:
    """The ``calibrate`` piece of perspective nets (:mod:`nnue.trainer.kinds`): :func:`correct_l1_bias`,
    skipped for a QAT net (trained on its rounded weights: no rounding error to correct).
    Returns (tensors to replace, calibration report)."""
    if model.qat is not None:
        return {}, {"bias_correction": False, "skipped": "qat: the net was trained on its quantised weights"}
    l1b, shift = correct_l1_bias(model, q, scheme, stm, nstm, bucket)
    return {"l1b": l1b}, {"l1_bias_shift_cp": shift}


def calibrate_output_bias(model, q: dict, net, scheme: QuantScheme, stm: torch.Tensor, nstm: torch.Tensor,
                          bucket: torch.Tensor) -> tuple[dict, dict]:
    """The ``calibrate`` piece of deep and tiny nets: :func:`output_bias_correction`. Returns
    (tensors to replace, calibration report)."""
    outb, shift = output_bias_correction(model, net, scheme, stm, nstm, bucket)
    return {"outb": outb}, {"output_bias_shift_cp": shift}


def output_bias_correction(model: DeepNet, net, scheme: QuantScheme,
                           stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor) -> tuple[torch.Tensor, list]:
    """Deep and tiny nets: remove the mean offset between the integer and the float net, per output bucket.

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
