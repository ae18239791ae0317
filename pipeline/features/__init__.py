"""Feature sets: one module each, plus this registry.

A feature set turns a batch of packed boards, ``(B, 32) uint8`` marlinformat records, into
sparse input indices for both perspectives with torch tensor ops that run unchanged on CPU and
CUDA (no per-position Python). It has ``name``, ``num_inputs``, ``max_active``, a stable
``hash`` written into net headers, and ``encode(boards) -> (stm_indices, nstm_indices)``, each
``(B, max_active) int32``, −1 = padding, indices in ascending order of the piece's square.

Names (``get_feature_set``; nets store the name and look it up again, so every name round-trips):

* ``chess768`` (:mod:`.chess768`), ``halfkp`` (:mod:`.halfkp`), ``halfkav2_hm``
  (:mod:`.halfka_v2_hm`);
* king-bucketed 768 (:mod:`.kb768`): presets ``kb768hm4``, ``kb768hm16``, or any map spelled
  out as ``kb768:<8 ranks of 8>`` / ``kb768hm:<8 ranks of 4>`` (mirrored), e.g.
  ``kb768hm:0011/2222/3333/3333/3333/3333/3333/3333``.

Adding a feature set: one new module defining a :class:`FeatureSet` (its index formula through
:class:`.lookup.TableEncoder`), one line in ``_fixed``. This package imports only torch, so the
inference package can use it.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Callable

import torch

from .buckets import OutputBuckets, parse_output_buckets  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class FeatureSet:
    """name: registry key. num_inputs: rows of the feature transformer. max_active: most
    indices one perspective can have. spec: a canonical text of the indexing formula (and its
    tables), hashed into ``hash`` so that a net trained on one indexing cannot load under
    another. encode: ``(B, 32) uint8 -> ((B, max_active) int32, (B, max_active) int32)``.
    family: hashed instead of the name when set, so that several names for one indexing (a
    preset and its spelled-out map) hash alike."""

    name: str
    num_inputs: int
    max_active: int
    spec: str
    encode: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
    family: str = ""

    @property
    def hash(self) -> str:
        key = self.family or self.name
        return hashlib.sha256(f"{key}:{self.num_inputs}:{self.spec}".encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _fixed() -> dict[str, FeatureSet]:
    from . import chess768, halfka_v2_hm, halfkp, kb768

    sets = [chess768.CHESS768, halfkp.HALFKP, halfka_v2_hm.HALFKAV2_HM]
    sets += [kb768.make(name) for name in kb768.PRESETS]
    return {fs.name: fs for fs in sets}


def known_names() -> list[str]:
    """The fixed names (the kb768 grammar adds any number of others)."""
    return sorted(_fixed())


@functools.lru_cache(maxsize=None)
def get_feature_set(name: str) -> FeatureSet:
    """Look up a feature set by name (see the module docstring for the names). Raises KeyError
    listing the known names, or explaining a malformed ``kb768…:`` map."""
    fixed = _fixed()
    if name in fixed:
        return fixed[name]
    if isinstance(name, str) and name.startswith("kb768") and ":" in name:
        from . import kb768

        try:
            return kb768.make(name)
        except ValueError as e:
            raise KeyError(str(e)) from None
    raise KeyError(f"unknown feature set {name!r}; known: {', '.join(sorted(fixed))}, "
                   f"or kb768:<map> / kb768hm:<map>")
