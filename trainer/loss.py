"""WDL-blended sigmoid loss.

``loss = mean(|σ(y) − t|^power)`` with ``t = λ·result + (1 − λ)·σ(score / SCALE)``, where y is
the net's output (eval / SCALE), score is in centipawns (stm POV) and result in {0, 0.5, 1}
(stm POV); power = 2 is the MSE of the issue, nnue-pytorch uses 2.5. σ saturates, so the loss is
finite for any |score| ≤ 32767 and any y.
"""
from __future__ import annotations

import torch


def wdl_loss(y: torch.Tensor, score_cp: torch.Tensor, result: torch.Tensor, scale: float = 400.0,
             wdl_lambda: float = 0.1, power: float = 2.0) -> torch.Tensor:
    """y, score_cp, result: (B,) float32 -> scalar float32."""
    target = wdl_lambda * result + (1.0 - wdl_lambda) * torch.sigmoid(score_cp / scale)
    return (torch.sigmoid(y) - target).abs().pow(power).mean()
