"""The WDL-blended sigmoid loss: formula, λ blending, finiteness at the extremes."""
from __future__ import annotations

import torch

from nnue.trainer.loss import wdl_loss


def test_formula_and_lambda():
    y = torch.tensor([0.0, 1.0, -2.0])
    score = torch.tensor([0.0, 400.0, -800.0])
    result = torch.tensor([0.5, 1.0, 0.0])
    # prediction equals the score target exactly -> loss is the result part only
    assert wdl_loss(y, score, result, wdl_lambda=0.0).item() == 0.0
    lam = 0.3
    t = lam * result + (1 - lam) * torch.sigmoid(score / 400)
    want = ((torch.sigmoid(y) - t) ** 2).mean()
    torch.testing.assert_close(wdl_loss(y, score, result, wdl_lambda=lam), want)
    want25 = ((torch.sigmoid(y) - t).abs() ** 2.5).mean()
    torch.testing.assert_close(wdl_loss(y, score, result, wdl_lambda=lam, power=2.5), want25)


def test_finite_for_all_int16_scores_and_extreme_outputs():
    score = torch.tensor([-32767.0, -32000.0, 0.0, 32000.0, 32767.0])
    result = torch.tensor([0.0, 0.0, 0.5, 1.0, 1.0])
    y = torch.tensor([-1e6, 1e6, 0.0, -1e6, 1e6], requires_grad=True)
    loss = wdl_loss(y, score, result)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(y.grad).all()
