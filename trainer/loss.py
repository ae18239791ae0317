"""Training losses: the WDL-blended sigmoid loss, and the residual loss (``model.loss.target``).

``loss = mean(|σ(y) − t|^power)`` with ``t = λ·result + (1 − λ)·σ(score / SCALE)``, where y is
the net's output (eval / SCALE), score is in centipawns (stm POV) and result in {0, 0.5, 1}
(stm POV); power = 2 is the MSE of the issue, nnue-pytorch uses 2.5. σ saturates, so the loss is
finite for any |score| ≤ 32767 and any y.

``model.loss.teacher`` says which centipawns play the part of ``score``, for both targets:
``score`` (the search score of the dump), ``teacher_eval`` (the column ``nnue annotate
--teacher`` wrote: an engine's or a net's static eval, e.g. Stockfish's own net imported with
``nnue import-net``) or ``blend``: ``(1 − w)·score + w·teacher_eval`` with ``w =
model.loss.teacher_weight``. Rows whose teacher value is null (in check, Stockfish teacher)
are left out of the mean. A setting that would change nothing is refused
(:func:`check_loss_config`).
"""
from __future__ import annotations

import torch


def wdl_loss(y: torch.Tensor, score_cp: torch.Tensor, result: torch.Tensor, scale: float = 400.0,
             wdl_lambda: float = 0.1, power: float = 2.0) -> torch.Tensor:
    """y, score_cp, result: (B,) float32 -> scalar float32. Rows whose score is NaN (a null
    teacher value) are left out of the mean (0 with a gradient when none is left)."""
    valid = torch.isfinite(score_cp)
    target = wdl_lambda * result + (1.0 - wdl_lambda) * torch.sigmoid(torch.nan_to_num(score_cp) / scale)
    per_row = (torch.sigmoid(y) - target).abs().pow(power)
    if bool(valid.all()):
        return per_row.mean()
    return (per_row * valid).sum() / valid.sum().clamp(min=1)


def target_cp(batch, teacher: str = "score", teacher_weight: float = 0.5) -> torch.Tensor:
    """The centipawns the loss fits (module docstring): (B,) float32, NaN where the teacher has
    no value. Raises ValueError when the teacher_eval column is needed and missing."""
    if teacher == "score":
        return batch.score
    if batch.teacher_eval is None:
        raise ValueError(f"model.loss.teacher={teacher} needs a teacher_eval column: run 'nnue annotate DATASET "
                         "--teacher stockfish-nnue' (or --teacher NETDIR for a net of ours)")
    if teacher == "teacher_eval":
        return batch.teacher_eval
    return (1.0 - teacher_weight) * batch.score + teacher_weight * batch.teacher_eval


# ------------------------------------------------------------------------- residual targets
TARGETS = ("wdl", "residual")
RESIDUAL_SPACES = ("sigma", "cp")
RESIDUAL_TEACHERS = ("score", "teacher_eval", "blend")
TEACHERS = RESIDUAL_TEACHERS
#: defaults of model.loss
DEFAULTS = dict(wdl_lambda=0.1, power=2.0, target="wdl", residual_space="sigma", teacher="score", teacher_weight=0.5)


def check_loss_config(cfg: dict) -> dict:
    """The loss settings (``model.loss``) with defaults, checked. Keys: ``wdl_lambda`` (0.1),
    ``power`` (2.0), ``target`` ("wdl" | "residual"), ``residual_space`` ("sigma" | "cp"),
    ``teacher`` ("score" | "teacher_eval" | "blend"), ``teacher_weight`` (0.5, blend only).
    Raises ValueError naming the bad key, also for a setting that would have no effect
    (``residual_space=cp`` with ``target=wdl``, a ``teacher_weight`` other than 0.5 without
    ``teacher=blend``, ``teacher=blend`` with a weight of 0 or 1)."""
    out = dict(DEFAULTS) | dict(cfg or {})
    unknown = set(out) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"model.loss.{sorted(unknown)[0]}: unknown key (known: {', '.join(DEFAULTS)})")
    for key, allowed in (("target", TARGETS), ("residual_space", RESIDUAL_SPACES), ("teacher", RESIDUAL_TEACHERS)):
        if out[key] not in allowed:
            raise ValueError(f"model.loss.{key}={out[key]}: one of {', '.join(allowed)}")
    if not 0.0 <= float(out["wdl_lambda"]) <= 1.0 or not float(out["power"]) > 0:
        raise ValueError(f"model.loss: wdl_lambda={out['wdl_lambda']} must be in [0, 1] and power={out['power']} > 0")
    try:
        w = float(out["teacher_weight"])
    except (TypeError, ValueError):
        w = -1.0
    if isinstance(out["teacher_weight"], bool) or not 0.0 <= w <= 1.0:
        raise ValueError(f"model.loss.teacher_weight={out['teacher_weight']}: a number in [0, 1] (the teacher's "
                         "share of the blended target)")
    if out["teacher"] != "blend" and w != DEFAULTS["teacher_weight"]:
        raise ValueError(f"model.loss.teacher_weight={out['teacher_weight']} has no effect with "
                         f"model.loss.teacher={out['teacher']}: set model.loss.teacher=blend, or leave the weight out")
    if out["teacher"] == "blend" and w in (0.0, 1.0):
        raise ValueError(f"model.loss.teacher_weight={w:g} with teacher=blend is "
                         f"model.loss.teacher={'score' if w == 0 else 'teacher_eval'}: say that instead")
    if out["target"] == "wdl" and out["residual_space"] != DEFAULTS["residual_space"]:
        raise ValueError(f"model.loss.residual_space={out['residual_space']} has no effect with model.loss.target=wdl "
                         "(it is the residual loss's space): set model.loss.target=residual, or leave it out")
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
                  teacher: str = "score", wdl_lambda: float = 0.1, power: float = 2.0,
                  teacher_weight: float = 0.5) -> torch.Tensor:
    """The loss ``model.loss`` selects, on a :class:`~nnue.pipeline.batch.SparseBatch`:
    :func:`wdl_loss` (target "wdl") or :func:`residual_loss` against ``batch.base_eval``, on the
    centipawns of ``teacher`` (:func:`target_cp`). Raises ValueError when a column is missing."""
    cp = target_cp(batch, teacher, teacher_weight)
    if target == "wdl":
        return wdl_loss(y, cp, batch.result, scale, wdl_lambda, power)
    if batch.base_eval is None:
        raise ValueError("model.loss.target=residual needs a base_eval column: run 'nnue annotate DATASET --base ...'")
    return residual_loss(y, batch.base_eval, cp, batch.result, scale, residual_space, wdl_lambda, power)
