"""Specifications every layer of nnue-forge shares (trainer, kernels, inference, pipeline):
:mod:`~nnue.spec.activations` (one entry per activation), :mod:`~nnue.spec.quant`
(:class:`QuantScheme`) and :mod:`~nnue.spec.kinds` (the net-kind registry). Imports torch at
most; nothing here imports another part of nnue-forge."""
from .quant import QuantScheme  # noqa: F401
