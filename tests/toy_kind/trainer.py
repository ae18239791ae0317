"""Net kind ``toy``, trainer side (``trainer/kinds/toy.py`` in a real kind): the float arch and
model, quantise, audit, calibrate and the ``model.toy`` config group it reads, in a
:class:`~nnue.trainer.kinds.spec.TrainerKind`. tiny's pieces under the name "toy" (see
:mod:`tests.toy_kind.inference`). Registered with ``nnue.trainer.kinds.register(KIND)`` (a real
kind: one line in ``trainer/kinds/__init__.py``, and a ``conf/model/toy.yaml``)."""
from __future__ import annotations

from dataclasses import dataclass

from nnue.trainer.kinds import tiny
from nnue.trainer.kinds.spec import TrainerKind
from nnue.trainer.quantise import calibrate_output_bias

from . import inference


@dataclass(frozen=True)
class ToyArch(tiny.TinyArch):
    """tiny's architecture, kind "toy": the kind export looks the model up by."""

    kind = "toy"


KIND = TrainerKind("toy", inference.KIND, ToyArch, tiny.TinyNet, tiny.quantise, tiny.audit, calibrate_output_bias,
                   layers_key="toy")
