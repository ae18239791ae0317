"""Net kind ``perspective`` (trainer side): :class:`~nnue.trainer.model.PerspectiveNet`, quantised
with L1's bias calibrated for its weights' rounding."""
from __future__ import annotations

from nnue.inference.kinds import perspective as inference

from ..model import Arch, PerspectiveNet
from ..quantise import audit_perspective, calibrate_l1_bias, quantise_perspective
from .spec import TrainerKind

KIND = TrainerKind("perspective", inference.KIND, Arch, PerspectiveNet, quantise_perspective, audit_perspective,
                   calibrate_l1_bias)
