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
    #: the body of ``int active_features(const int colour[], const int type[], const int sq[],
    #: int n, const int king[2], int p, long *out)`` for a set whose features are not one per
    #: piece (threats, pawn pairs): the n pieces of the position (as ``feature_index`` sees them,
    #: ``king`` the king square per colour), perspective p; it writes the active indices to out
    #: (room for the set's max_active) and returns their number, or −1 when more would be active.
    #: Empty: one ``feature_index`` per piece. Such a set's ``index`` may just ``die``.
    active: str = ""


@dataclass(frozen=True)
class FeaturePart:
    """One consecutive index range of a composed feature set (Stockfish 19's SFNNv16 input:
    Full_Threats, then PP_3Wide, then HalfKAv2_hm).

    name: the part's own feature-set name. start, size: its rows are ``start .. start+size−1``
    of the composed set. max_active: its bound per perspective. weight_dtype: the engine's
    feature-transformer weight type for these rows, ``"int8"`` or ``"int16"`` (the trainer
    clamps and quantises them accordingly). engine_hash: the engine's hash of this part
    (Stockfish's ``HashValue``), 0 when there is none. factorised: the set's ``factors`` gives
    these rows a virtual feature."""

    name: str
    start: int
    size: int
    max_active: int
    weight_dtype: str
    engine_hash: int = 0
    factorised: bool = False

    @property
    def stop(self) -> int:
        return self.start + self.size


@dataclass(frozen=True)
class FeatureSet:
    """name: registry key. num_inputs: rows of the feature transformer. max_active: most
    indices one perspective can have. spec: a canonical text of the indexing formula (and its
    tables), hashed into ``hash`` so that a net trained on one indexing cannot load under
    another. encode: ``(B, 32) uint8 -> ((B, max_active) int32, (B, max_active) int32)``.
    family: hashed instead of the name when set, so that several names for one indexing (a
    preset and its spelled-out map) hash alike.
    factors: the factoriser map, ``num_inputs -> (num_inputs,) int64``, the virtual feature the
    trainer's factoriser adds to each real one (None: no factoriser); −1 for a row that has
    none, in a set whose parts are not all factorised (:func:`~nnue.pipeline.features.factor_map`
    refuses such a map unless asked for it). c: its C reference code.
    encode_numba: the same function as ``encode`` for CPU boards, compiled with numba (imported
    on first call, so that the inference package, which may not load numba, can use ``encode``);
    None: ``encode`` is the only path; a set whose ``encode`` is a :class:`.lookup.TableEncoder`
    gets that encoder's ``encode_numba``. parts: the consecutive index ranges of a set made of
    several (:class:`FeaturePart`; empty for a set of one part), in index order."""

    name: str
    num_inputs: int
    max_active: int
    spec: str
    encode: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
    family: str = ""
    factors: Callable[[int], torch.Tensor] | None = None
    c: CFeature | None = None
    encode_numba: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None
    parts: tuple[FeaturePart, ...] = ()

    def __post_init__(self):
        # a set encoded through a lookup table (:class:`.lookup.TableEncoder`) has its compiled path
        if self.encode_numba is None and hasattr(self.encode, "encode_numba"):
            object.__setattr__(self, "encode_numba", self.encode.encode_numba)

    @property
    def hash(self) -> str:
        key = self.family or self.name
        return hashlib.sha256(f"{key}:{self.num_inputs}:{self.spec}".encode()).hexdigest()[:16]
