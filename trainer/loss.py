"""Training losses: the WDL-blended sigmoid loss, and the residual loss (``model.loss.target``).

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


# ------------------------------------------------------------------------- residual targets
TARGETS = ("wdl", "residual")
RESIDUAL_SPACES = ("sigma", "cp")
RESIDUAL_TEACHERS = ("score", "teacher_eval")


def check_loss_config(cfg: dict) -> dict:
    """The loss settings (``model.loss``) with defaults, checked. Keys: ``wdl_lambda`` (0.1),
    ``power`` (2.0), ``target`` ("wdl" | "residual"), ``residual_space`` ("sigma" | "cp"),
    ``teacher`` ("score" | "teacher_eval"). Raises ValueError naming the bad key."""
    out = dict(wdl_lambda=0.1, power=2.0, target="wdl", residual_space="sigma", teacher="score") | dict(cfg or {})
    unknown = set(out) - {"wdl_lambda", "power", "target", "residual_space", "teacher"}
    if unknown:
        raise ValueError(f"model.loss.{sorted(unknown)[0]}: unknown key (known: wdl_lambda, power, target, "
                         "residual_space, teacher)")
    for key, allowed in (("target", TARGETS), ("residual_space", RESIDUAL_SPACES), ("teacher", RESIDUAL_TEACHERS)):
        if out[key] not in allowed:
            raise ValueError(f"model.loss.{key}={out[key]}: one of {', '.join(allowed)}")
    if not 0.0 <= float(out["wdl_lambda"]) <= 1.0 or not float(out["power"]) > 0:
        raise ValueError(f"model.loss: wdl_lambda={out['wdl_lambda']} must be in [0, 1] and power={out['power']} > 0")
    if out["target"] == "residual" and out["residual_space"] == "cp" and float(out["wdl_lambda"]) != 0.0:
        raise ValueError(f"model.loss.wdl_lambda={out['wdl_lambda']}: the centipawn residual has no game-result "
                         "term; set model.loss.wdl_lambda=0, or model.loss.residual_space=sigma for the WDL blend")
    return out


def residual_loss(y: torch.Tensor, base_cp: torch.Tensor, teacher_cp: torch.Tensor, result: torch.Tensor,
                  scale: float = 400.0, space: str = "sigma", wdl_lambda: float = 0.0,
                  power: float = 2.0) -> torch.Tensor:
    """Loss of a residual net, whose eval is added to a base: ``eval = base + SCALE·y``.

    y: (B,) float32 net output (residual / SCALE); base_cp, teacher_cp: (B,) float32
    centipawns, stm POV, NaN = none (those rows are left out of the mean); result: (B,) in
    {0, 0.5, 1}, stm POV. Returns a scalar float32 (0 with a gradient when no row has both).

    * ``space="cp"``: ``mean(|(SCALE·y − (teacher − base)) / SCALE|^power)``, the MSE (power 2)
      on the residual target ``teacher − base`` in units of SCALE centipawns;
    * ``space="sigma"``: ``mean(|σ(y + base/SCALE) − t|^power)`` with the WDL blend
      ``t = λ·result + (1 − λ)·σ(teacher/SCALE)``: the usual WDL loss of the sum base + net,
      which only the residual part is trained to move.
    """
    valid = torch.isfinite(base_cp) & torch.isfinite(teacher_cp)
    base, teacher = torch.nan_to_num(base_cp), torch.nan_to_num(teacher_cp)
    if space == "cp":
        err = (y * scale - (teacher - base)) / scale
    elif space == "sigma":
        target = wdl_lambda * result + (1.0 - wdl_lambda) * torch.sigmoid(teacher / scale)
        err = torch.sigmoid(y + base / scale) - target
    else:
        raise ValueError(f"residual space {space!r}: one of {', '.join(RESIDUAL_SPACES)}")
    per_row = err.abs().pow(power) * valid
    return per_row.sum() / valid.sum().clamp(min=1)


def training_loss(y: torch.Tensor, batch, scale: float, target: str = "wdl", residual_space: str = "sigma",
                  teacher: str = "score", wdl_lambda: float = 0.1, power: float = 2.0) -> torch.Tensor:
    """The loss ``model.loss`` selects, on a :class:`~nnue.pipeline.batch.SparseBatch`:
    :func:`wdl_loss` (target "wdl") or :func:`residual_loss` against ``batch.base_eval`` and
    the score column or ``batch.teacher_eval``. Raises ValueError when a column is missing."""
    if target == "wdl":
        return wdl_loss(y, batch.score, batch.result, scale, wdl_lambda, power)
    if batch.base_eval is None:
        raise ValueError("model.loss.target=residual needs a base_eval column: run 'nnue annotate DATASET --base ...'")
    teacher_cp = batch.score if teacher == "score" else batch.teacher_eval
    if teacher_cp is None:
        raise ValueError("model.loss.teacher=teacher_eval needs a teacher_eval column: run "
                         "'nnue annotate DATASET --teacher stockfish-nnue'")
    return residual_loss(y, batch.base_eval, teacher_cp, batch.result, scale, residual_space, wdl_lambda, power)
