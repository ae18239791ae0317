"""Specifications every layer of nnue-forge shares (trainer, kernels, inference, pipeline):
:mod:`~nnue.spec.activations` (one module per activation, and their registry), :mod:`~nnue.spec.quant`
(:class:`QuantScheme`); the net kinds are :mod:`nnue.inference.kinds` and
:mod:`nnue.trainer.kinds`. Imports torch at most; nothing here imports another part of nnue-forge."""
from .quant import QuantScheme  # noqa: F401
