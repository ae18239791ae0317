"""Net kind ``deep`` (trainer side): :class:`~nnue.trainer.model.DeepNet` (layer stacks), its
output bias calibrated on real positions."""
from __future__ import annotations

from nnue.inference.kinds import deep as inference

from ..model import DeepArch, DeepNet
from ..quantise import audit_deep, calibrate_output_bias, quantise_deep
from .spec import TrainerKind

KIND = TrainerKind("deep", inference.KIND, DeepArch, DeepNet, quantise_deep, audit_deep, calibrate_output_bias,
                   layers_key="deep")
