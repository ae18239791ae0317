"""Feature sets: one module each, collected here by plain imports (the registry).

A feature set turns a batch of packed boards, ``(B, 32) uint8`` marlinformat records, into
sparse input indices for both perspectives with torch tensor ops that run unchanged on CPU and
CUDA (no per-position Python). It has ``name``, ``num_inputs``, ``max_active``, a stable
``hash`` written into net headers, ``encode(boards) -> (stm_indices, nstm_indices)``, each
``(B, max_active) int32``, −1 = padding, indices in ascending order of the piece's square, its
factoriser map (``factors``) and its C reference code (``c``, :class:`.spec.CFeature`).

Names (``get_feature_set``; nets store the name and look it up again, so every name round-trips):

* ``chess768`` (:mod:`.chess768`), ``halfkp`` (:mod:`.halfkp`), ``halfkav2_hm``
  (:mod:`.halfka_v2_hm`);
* king-bucketed 768 (:mod:`.kb768`): presets ``kb768hm4``, ``kb768hm16``, or any map spelled
  out as ``kb768:<8 ranks of 8>`` / ``kb768hm:<8 ranks of 4>`` (mirrored), e.g.
  ``kb768hm:0011/2222/3333/3333/3333/3333/3333/3333``;
* Stockfish 19's threat inputs: ``full_threats`` (:mod:`.full_threats`), ``pp_3wide``
  (:mod:`.pp_3wide`) and their composition with HalfKAv2_hm, ``sfnnv16`` =
  ``full_threats+pp_3wide+halfkav2_hm`` (:mod:`.sfnnv16`; its ``parts`` say which rows have int8
  engine weights). These are not one feature per piece: their lists are not in square order
  (each module says its order), and they have a numba fast path, ``encode_numba``, which the
  training loop uses for CPU batches (:func:`nnue.pipeline.batch.to_sparse_batch`).

Adding a feature set: one new module defining a :class:`FeatureSet` (its index formula through
:class:`.lookup.TableEncoder`, its factoriser map, its C index), one line in :data:`_BUILTIN`, and
its tests (docs/extending.md); a test may add one at run time with :func:`register`. The C
reference's feature code is generated from the registry (:func:`c_header`). This package
imports only torch, so the inference package can use it.
"""
from __future__ import annotations

import functools

from nnue.spec.registry import registered

from . import chess768, full_threats, halfka_v2_hm, halfkp, kb768, pp_3wide, sfnnv16
from .buckets import OutputBuckets, parse_output_buckets  # noqa: F401  (re-exported)
from .spec import CFeature, FeatureSet  # noqa: F401  (re-exported)


#: the registry's fixed names (kb768's grammar, :func:`kb768.resolve`, adds any number of others)
_BUILTIN = (chess768.CHESS768, halfkp.HALFKP, halfka_v2_hm.HALFKAV2_HM,
            *(kb768.make(name) for name in kb768.PRESETS),
            full_threats.FULL_THREATS, pp_3wide.PP_3WIDE, sfnnv16.SFNNV16, sfnnv16.SFNNV16_LONG)
#: name grammars: name -> FeatureSet, or None for a name outside the grammar
_GRAMMARS = (kb768.resolve,)

_REGISTRY: dict[str, FeatureSet] = {fs.name: fs for fs in _BUILTIN}


def _fixed() -> dict[str, FeatureSet]:
    return _REGISTRY


def register(fs: FeatureSet):
    """Add ``fs`` to the registry for the duration of a ``with`` block (tests: the toy
    extensions). Raises ValueError if its name is taken."""
    return registered(_REGISTRY, fs, "feature set", changed=get_feature_set.cache_clear)


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
    for resolve in _GRAMMARS:
        try:
            fs = resolve(name)
        except ValueError as e:
            raise KeyError(str(e)) from None
        if fs is not None:
            return fs
    raise KeyError(f"unknown feature set {name!r}; known: {', '.join(sorted(fixed))}, "
                   f"or kb768:<map> / kb768hm:<map>")


def factor_map(name: str, num_inputs: int, partial: bool = False):
    """The factoriser's virtual feature of every real feature of feature set ``name``:
    (num_inputs,) int64 (the set's ``factors``; chess768 ``i // 64``, kb768 ``i % 768``, halfkp
    ``i % 641``, halfkav2_hm ``i % 704``, sfnnv16 HalfKAv2_hm^ on its HalfKAv2_hm rows). A set
    that factorises only some of its parts (sfnnv16) has −1 on the other rows; ``partial=True``
    returns such a map (for a kind that applies it to those rows only), else ValueError. Raises
    ValueError for an unknown set or one with no factoriser."""
    try:
        fs = get_feature_set(name)
    except KeyError as e:
        raise ValueError(str(e.args[0])) from None
    if fs.factors is None:
        raise ValueError(f"no factoriser defined for feature set {name!r}")
    out = fs.factors(num_inputs)
    if not partial and bool((out < 0).any()):
        rows = ", ".join(f"{p.name} {p.start}..{p.stop - 1}" for p in fs.parts if p.factorised)
        raise ValueError(f"feature set {name!r} factorises only part of its inputs ({rows}); its net kind "
                         f"applies the factoriser (e.g. model=sfnnv16), not a generic one")
    return out


def c_header() -> str:
    """The C reference's feature-set code, generated from the registry (``tests/c/nnue_eval.c``
    includes it as ``nnue_features.h``): the enum ``FS_…``, each set's support code,
    ``parse_features(name)`` (sets FS and NF), ``feature_index(c, t, s, k, p)``,
    ``MAX_ACTIVE_FEATURES`` and ``active_features(colour, type, sq, n, king, p, out)`` (a set's
    ``CFeature.active``, else one ``feature_index`` per piece). Raises ValueError for a
    registered set without C code."""
    sets = list(_REGISTRY.values())
    missing = [fs.name for fs in sets if fs.c is None]
    if missing:
        raise ValueError(f"feature sets without C reference code: {', '.join(missing)}")
    cs = list({fs.c.enum: fs.c for fs in sets}.values())
    names = {c.enum: [fs for fs in sets if fs.c.enum == c.enum] for c in cs}
    out = ["/* Generated by nnue.pipeline.features.c_header() from the feature-set specs: do not edit. */",
           "enum { " + ", ".join(c.enum for c in cs) + " };", ""]
    out += [c.support + "\n" for c in cs if c.support]
    out.append("static void parse_features(const char *name) {")
    for c in cs:
        body = c.parse or "".join(f'if (!strcmp(name, "{fs.name}")) {{ FS = {c.enum}; NF = {fs.num_inputs}L; return; }}\n'
                                  for fs in names[c.enum])
        out += [f"    {ln}" for ln in body.splitlines()]
    out += ['    die("unknown feature set");', "}", ""]
    out.append("/* index of a piece (colour c, type t, square s) for perspective p with own king on k; -1: none */")
    out.append("static long feature_index(int c, int t, int s, int k, int p) {")
    out.append("    switch (FS) {")
    for c in cs:
        out.append(f"    case {c.enum}: {{")
        out += [f"        {ln}" for ln in c.index.splitlines()]
        out.append("    }")
    out += ["    default: break;", "    }", '    die("internal error: unknown feature set");', "    return -1;", "}", ""]
    out.append(f"/* room for any set's active features of one perspective */\n#define MAX_ACTIVE_FEATURES "
               f"{max(fs.max_active for fs in sets)}\n")
    out.append("/* the active features of perspective p (n pieces: colour, type, square; king: the king square\n"
               " * per colour), written to out; their number, or -1 when more than the set's max_active */")
    out.append("static int active_features(const int colour[], const int type[], const int sq[], int n,\n"
               "                           const int king[2], int p, long *out) {")
    out.append("    switch (FS) {")
    for c in cs:
        if c.active:
            out.append(f"    case {c.enum}: {{")
            out += [f"        {ln}" for ln in c.active.splitlines()]
            out.append("    }")
    out += ["    default: break;", "    }", "    int m = 0;", "    for (int i = 0; i < n; i++) {",
            "        long f = feature_index(colour[i], type[i], sq[i], king[p], p);",
            "        if (f >= 0) out[m++] = f;", "    }", "    return m;", "}", ""]
    return "\n".join(out)
