"""Net kind ``tiny`` (trainer side): :class:`~nnue.trainer.model.TinyNet`, its output bias
calibrated on real positions."""
from __future__ import annotations

from nnue.inference.kinds import tiny as inference

from ..model import TinyArch, TinyNet
from ..quantise import audit_tiny, calibrate_output_bias, quantise_tiny
from .spec import TrainerKind

KIND = TrainerKind("tiny", inference.KIND, TinyArch, TinyNet, quantise_tiny, audit_tiny, calibrate_output_bias,
                   layers_key="tiny")
