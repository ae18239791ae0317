"""The :class:`FeatureSet` spec record (and :class:`CFeature`, its C reference code): a leaf
module, so that each feature-set module and the registry (:mod:`nnue.pipeline.features`) import
it plainly. Torch only."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class CFeature:
    """A feature set's code in the C reference (``tests/c/nnue_eval.c`` includes the header that
    :func:`nnue.pipeline.features.c_header` generates from these).

    enum: the constant of the C feature-set enum (``FS_…``). index: the body of
    ``long feature_index(int c, int t, int s, int k, int p)`` for this set (colour c 0 white,
    type t P N B R Q K = 0..5, square s a1 = 0, own king square k, perspective p), ending in
    ``return …;`` (−1: not a feature), written from the published formula, not from the Python.
    parse: statements of ``void parse_features(const char *name)`` that recognise this set's
    names and then set ``FS`` and ``NF`` (number of inputs) and ``return``; empty: the default
    ``strcmp`` of each fixed name. support: file-scope C (tables, state, helpers)."""

    enum: str
    index: str
    parse: str = ""
    support: str = ""


@dataclass(frozen=True)
class FeatureSet:
    """name: registry key. num_inputs: rows of the feature transformer. max_active: most
    indices one perspective can have. spec: a canonical text of the indexing formula (and its
    tables), hashed into ``hash`` so that a net trained on one indexing cannot load under
    another. encode: ``(B, 32) uint8 -> ((B, max_active) int32, (B, max_active) int32)``.
    family: hashed instead of the name when set, so that several names for one indexing (a
    preset and its spelled-out map) hash alike.
    factors: the factoriser map, ``num_inputs -> (num_inputs,) int64``, the virtual feature the
    trainer's factoriser adds to each real one (None: no factoriser). c: its C reference code."""

    name: str
    num_inputs: int
    max_active: int
    spec: str
    encode: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
    family: str = ""
    factors: Callable[[int], torch.Tensor] | None = None
    c: CFeature | None = None

    @property
    def hash(self) -> str:
        key = self.family or self.name
        return hashlib.sha256(f"{key}:{self.num_inputs}:{self.spec}".encode()).hexdigest()[:16]
