"""Swish (SiLU): x·σ(x) (Ramachandran et al. 2017), after a deep net's hidden layers, its input
clamped to ±CLAMP. Its integer rule is a piecewise-linear approximation through 81 knots, so
this spec carries an approximation report (:func:`error`)."""
from __future__ import annotations

import math

import torch

from .base import CLAMP, Activation, same

#: piecewise-linear knots every QA / STEP_DIV of the input (0.2), over [−C, C]
STEP_DIV = 5


def table(qa: int = 255) -> list[int]:
    """The knots of the integer swish: T[k] = round(qa·swish(−CLAMP + k/STEP_DIV)) for
    k = 0..2·CLAMP·STEP_DIV (81 values), rounding half away from zero. Pure Python
    (``math.exp``); the C reference holds the same values as a literal (tested)."""
    n = 2 * CLAMP * STEP_DIV
    out = []
    for k in range(n + 1):
        x = -CLAMP + k / STEP_DIV
        v = qa * x / (1.0 + math.exp(-x))
        out.append(int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1))
    return out


def hidden(y: torch.Tensor, qa: int, shift: int = 8) -> torch.Tensor:
    """The integer swish of y int64 (scale QA) -> int64, same shape. Raises ValueError unless
    QA is divisible by STEP_DIV."""
    if qa % STEP_DIV:
        raise ValueError(f"integer swish needs QA divisible by {STEP_DIV}, got {qa}")
    d, c = qa // STEP_DIV, CLAMP * qa
    t = torch.tensor(table(qa), dtype=torch.int64)
    u = y.clamp(-c, c) + c
    i = torch.div(u, d, rounding_mode="floor").clamp(max=t.numel() - 2)
    r = u - d * i
    lo, hi = t[i], t[i + 1]
    return lo + torch.div((hi - lo) * r + d // 2, d, rounding_mode="floor")


def error(qa: int = 255) -> dict:
    """How far the integer swish is from swish on its whole input range (every integer ŷ in
    [−8·QA, 8·QA]), in activation units (1.0 = QA): max and mean |int/QA − swish(ŷ/QA)|, and the
    mean signed error."""
    y = torch.arange(-CLAMP * qa, CLAMP * qa + 1, dtype=torch.int64)
    got = hidden(y, qa).double() / qa
    x = y.double() / qa
    d = got - x * torch.sigmoid(x)
    return {"max_abs": float(d.abs().max()), "mean_abs": float(d.abs().mean()), "mean_signed": float(d.mean()),
            "inputs": int(y.numel()), "knots": len(table(qa))}


def _fwd(x):
    return x * tl.sigmoid(x)  # noqa: F821  (tl: bound by nnue.kernels.activations)


def _grad(x):
    # σ + x·σ·(1 − σ)
    sg = tl.sigmoid(x)  # noqa: F821
    return sg + x * sg * (1.0 - sg)


# The C reference's knots, written out (not generated from table(): a test compares them).
C_SUPPORT = """\
/* swish knots: round(255 * x * sigmoid(x)) at x = -8 + k / 5, k = 0..80 */
static const int SWISH_T[81] = {
    -1, -1, -1, -1, -1, -2, -2, -2, -3, -3, -4, -4,
    -5, -6, -7, -9, -10, -12, -14, -16, -18, -21, -24, -28,
    -32, -36, -41, -46, -51, -56, -61, -65, -69, -71, -71, -69,
    -63, -54, -41, -23, 0, 28, 61, 99, 141, 186, 235, 286,
    339, 394, 449, 505, 561, 617, 673, 729, 784, 839, 894, 948,
    1002, 1055, 1108, 1161, 1214, 1266, 1319, 1371, 1423, 1475, 1526, 1578,
    1629, 1681, 1732, 1783, 1835, 1886, 1937, 1988, 2039
};

static int64_t swish_pwl(int64_t yc) {
    int64_t d = QA / 5, u = yc + CLAMPV, i = u / d;  /* u >= 0 */
    if (i > 79) i = 79;
    int64_t r = u - d * i;
    return SWISH_T[i] + floor_div((SWISH_T[i + 1] - SWISH_T[i]) * r + d / 2, d);
}"""

SPEC = Activation(
    name="swish", allowed=frozenset({"l1"}), width_rule="same width", width=same,
    float_ref=lambda x: x * torch.sigmoid(x),
    integer={"hidden": "ŷ = clamp(y, −8·QA, 8·QA); piecewise linear through the knots "
                       "T[k] = round(QA·swish(−8 + k/5)), k = 0..80 (SWISH_TABLE): with d = QA/5 = 51, "
                       "i = min((ŷ + 8·QA) // d, 79), r = ŷ + 8·QA − d·i, x = T[i] + ((T[i+1] − T[i])·r + d // 2) // d "
                       "(rounded). An approximation of swish (export.json reports its error)"},
    out_range={"hidden": (-71, 2039)}, u8=False, clamp_input=True,
    hidden=hidden, approximation=error,
    triton_fwd=_fwd, triton_grad=_grad,
    c_support=C_SUPPORT, c_hidden="return swish_pwl(yc);",
)
