"""Feature sets: one module each, plus this registry.

A feature set turns a batch of packed boards, ``(B, 32) uint8`` marlinformat records, into
sparse input indices for both perspectives with torch tensor ops that run unchanged on CPU and
CUDA (no per-position Python). It has ``name``, ``num_inputs``, ``max_active``, a stable
``hash`` written into net headers, and ``encode(boards) -> (stm_indices, nstm_indices)``, each
``(B, max_active) int32``, −1 = padding.

Adding a feature set: one new module defining a :class:`FeatureSet`, one line in ``_REGISTRY``.
This package imports only torch, so the inference package can use it.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

import torch

from .buckets import OutputBuckets, parse_output_buckets  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class FeatureSet:
    """name: registry key. num_inputs: rows of the feature transformer. max_active: most
    indices one perspective can have. spec: a canonical text of the indexing formula, hashed
    into ``hash`` so that a net trained on one indexing cannot load under another.
    encode: ``(B, 32) uint8 -> ((B, max_active) int32, (B, max_active) int32)``."""

    name: str
    num_inputs: int
    max_active: int
    spec: str
    encode: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]

    @property
    def hash(self) -> str:
        return hashlib.sha256(f"{self.name}:{self.num_inputs}:{self.spec}".encode()).hexdigest()[:16]


def _registry() -> dict[str, FeatureSet]:
    from . import chess768

    return {fs.name: fs for fs in (chess768.CHESS768,)}


def get_feature_set(name: str) -> FeatureSet:
    """Look up a feature set by name. Raises KeyError listing the known names."""
    reg = _registry()
    if name not in reg:
        raise KeyError(f"unknown feature set {name!r}; known: {', '.join(sorted(reg))}")
    return reg[name]
