"""bullet's raw net layout (``quantised.bin``) for our perspective nets: the ``bullet`` target of
``nnue export-net`` (the perspective kind's ``targets``).

Source: jw1912/bullet at commit cebc78a0 (2026-06-22): ``docs/4-saved-networks.md``,
``crates/trainer/src/model/weights.rs`` (``SavedFormat``, ``to_quantised_buffer``),
``examples/simple.rs`` and ``examples/progression/{1_simple,2_output_buckets,3_input_buckets}.rs``
(docs/integer-nets.md, "bullet's layout", gives every fact with its line of source).

The file bullet writes for its simple perspective net ``(inputs -> H)x2 -> B`` with the save
format of its examples (``l0w``, ``l0b`` at QA; ``l1w`` at QB, transposed when B > 1; ``l1b``
at QA·QB; all ``i16``, rounded), little-endian, no header::

    l0w int16[F][H]     bullet's H x F weight matrix, column-major: feature f's H weights contiguous
    l0b int16[H]
    l1w int16[B][2H]    bullet's B x 2H matrix, ``.transpose()``d: bucket b's 2H weights contiguous,
                        the stm accumulator's H first (with B = 1 the transpose changes nothing)
    l1b int16[B]
    "bulletbullet..."   the ASCII bytes of "bullet", repeated, up to a multiple of 64 bytes
                        (none when the tensors end on one)

These are the tensors of :class:`~nnue.inference.kinds.perspective.IntegerNet` in their order and row-major
shapes; ``net.bin`` differs from this file only in its padding bytes (zeros there).

The engine side (bullet's ``examples/simple.rs`` inference, integer, C/Rust semantics, division
truncating toward zero): ``acc = l0b + Σ l0w[f]`` (i16); ``v = clamp(acc, 0, QA)``; crelu:
``out = l1b[b] + Σ v·l1w[b]``; screlu: ``out = (Σ v²·l1w[b]) / QA + l1b[b]``; both perspectives,
stm first; ``eval = out·SCALE / (QA·QB)`` (i32), centipawns, side to move's POV. That is the
integer rule of :mod:`nnue.inference.kinds.perspective` for crelu and screlu, so a bullet-style engine
computes what ``nnue eval`` prints (tested with ``tests/c/bullet_eval.c``).

Standalone like the rest of :mod:`nnue.inference`: torch, the feature-set registry, atomic writes.
"""
from __future__ import annotations

from pathlib import Path

import torch

from nnue.pipeline.atomic import atomic_write_bytes

from ...net import NetFormatError

#: what bullet pads ``quantised.bin`` with (``to_quantised_buffer(.., pad = true)``), cycled
PAD_BYTES = b"bullet"
#: the activations bullet's example inference computes (``examples/simple.rs``: screlu since
#: #454, crelu before it)
ACTIVATIONS = ("crelu", "screlu")
INT32_MAX = 2**31 - 1


def padding(n: int) -> bytes:
    """The bytes bullet appends to ``n`` bytes of tensors: "bullet" cycled up to the next
    multiple of 64 (nothing when ``n`` is one)."""
    k = -n % 64
    return (PAD_BYTES * (k // len(PAD_BYTES) + 1))[:k]


def input_type(feature_set: str) -> str | None:
    """bullet's input type for our feature set name (None when bullet has none): ``Chess768``,
    ``ChessBuckets::new([64 entries])`` or ``ChessBucketsMirrored::new([32 entries])`` with our
    map (rank 1 first; the mirrored map for files a–d, the layout bullet's ``new`` takes)."""
    from nnue.pipeline.features import get_feature_set, kb768

    fs = get_feature_set(feature_set)
    if fs.name == "chess768":
        return "Chess768"
    if fs.family != kb768.FAMILY:
        return None
    mirrored, buckets = kb768.parse_map(kb768.PRESETS.get(fs.name, fs.name))
    return f"ChessBuckets{'Mirrored' if mirrored else ''}::new([{', '.join(map(str, buckets))}])"


def check(net) -> str | None:
    """Why bullet's simple-net layout cannot hold ``net``, in one line naming the field; None
    when it can. Held: kind ``perspective``, chess768 or king-bucketed (kb768*) inputs, crelu or
    screlu, L1 = 2H, int16 tensors of the shapes the feature set and buckets give (l0w with one
    row per input: a factoriser folded in), no residual base."""
    from nnue.pipeline.features import get_feature_set

    arch = net.arch
    kind = getattr(net, "kind", arch.get("kind", "perspective"))
    if kind != "perspective":
        return (f"architecture.kind is {kind!r}: bullet's layout holds simple perspective nets only "
                f"(inputs -> H x 2 -> output buckets); a {kind} net has layers after L1")
    if arch.get("residual"):
        return (f"architecture.residual is set (eval = {arch['residual'].get('base')} base + α·net): "
                f"bullet's layout has no base; an engine would miss it")
    act = arch.get("activation")
    if act not in ACTIVATIONS:
        return (f"architecture.activation is {act!r}: bullet's simple inference computes "
                f"{' or '.join(ACTIVATIONS)} only")
    name = arch.get("feature_set")
    if input_type(name) is None:
        return (f"architecture.feature_set is {name!r}: bullet's inputs are Chess768, ChessBuckets and "
                f"ChessBucketsMirrored (our chess768 and kb768 sets)")
    fs = get_feature_set(name)
    h, nb = arch["hidden"], arch["num_buckets"]
    if arch.get("l1_inputs") != 2 * h:
        return f"architecture.l1_inputs is {arch.get('l1_inputs')}, expected 2·hidden = {2 * h}"
    if net.scheme.weight_dtype != "int16":
        return f"quantisation.weight_dtype is {net.scheme.weight_dtype!r}: bullet's simple net is i16"
    rows = net.l0w.shape[0] if net.l0w.dim() == 2 else None
    if rows is not None and rows > fs.num_inputs:
        return (f"tensor l0w has {rows} rows, {name} has {fs.num_inputs} inputs: a factoriser not folded "
                f"(nnue export folds it into each king bucket, as bullet's SavedFormat::transform does)")
    want = {"l0w": (fs.num_inputs, h), "l0b": (h,), "l1w": (nb, 2 * h), "l1b": (nb,)}
    for k, shape in want.items():
        t = getattr(net, k)
        if t.dtype != torch.int16 or tuple(t.shape) != shape:
            return f"tensor {k} is {str(t.dtype).removeprefix('torch.')} {tuple(t.shape)}, expected int16 {shape}"
    return None


def layout_bytes(net) -> bytes:
    """The bytes of bullet's ``quantised.bin`` for ``net`` (module docstring). Raises
    NetFormatError (one line naming the field) for a net the layout cannot hold."""
    why = check(net)
    if why:
        raise NetFormatError(f"--to bullet: {why}")
    raw = b"".join(t.contiguous().numpy().astype("<i2").tobytes() for t in (net.l0w, net.l0b, net.l1w, net.l1b))
    return raw + padding(len(raw))


def scale_product_bound(net) -> int:
    """The largest |L1 output · SCALE| any position could reach: per bucket b,
    ``(QA·Σ|l1w[b]| + |l1b[b]|)·SCALE`` (v ≤ QA for crelu, v²/QA ≤ QA for screlu). bullet's
    ``output *= SCALE`` is an i32 product; below 2^31 no position can overflow it (our inference
    computes it in int64; the two agree wherever bullet's does not overflow)."""
    s = net.scheme
    worst = s.qa * net.l1w.to(torch.int64).abs().sum(1) + net.l1b.to(torch.int64).abs()
    return int(worst.max()) * s.scale


def write_bullet(net, path: str | Path) -> dict:
    """Write ``net`` in bullet's ``quantised.bin`` layout to ``path``, atomically (nothing is
    written for a net the layout cannot hold: NetFormatError naming the field).

    Returns what an engine needs besides the bytes: ``bytes``, ``layout``, the constants
    (``QA``, ``QB``, ``SCALE``, ``HIDDEN_SIZE``, ``OUTPUT_BUCKETS``), the ``activation``, bullet's
    ``inputs`` type, the ``output_buckets`` function, ``scale_product_int32_proven`` (see
    :func:`scale_product_bound`) and ``notes``."""
    data = layout_bytes(net)
    atomic_write_bytes(Path(path), data)
    a, s = net.arch, net.scheme
    h, nb = a["hidden"], a["num_buckets"]
    notes = []
    if (2 * h) % 64:
        notes.append(f"HIDDEN_SIZE {h} is not a multiple of 32: bullet's example Accumulator (align(64)) "
                     f"pads each row, so read the file as flat i16 arrays rather than transmute it")
    if not a["output_buckets"].startswith("MaterialCount") and nb > 1:
        notes.append(f"output buckets {a['output_buckets']} ((pieces - 1) / 4) are not bullet's MaterialCount: "
                     f"the engine must compute them so")
    bound = scale_product_bound(net)
    if bound > INT32_MAX:
        notes.append(f"|L1 output · SCALE| is not proven to fit i32 for every position (bound {bound:,}); "
                     f"real positions stay far below it")
    return {
        "target": "bullet", "file": str(path), "bytes": len(data),
        "layout": (f"l0w i16[{a['num_inputs']}][{h}] | l0b i16[{h}] | l1w i16[{nb}][{2 * h}] | l1b i16[{nb}] | "
                   f"\"bullet\" padding to a multiple of 64 B"),
        "QA": s.qa, "QB": s.qb, "SCALE": s.scale, "HIDDEN_SIZE": h, "OUTPUT_BUCKETS": nb,
        "activation": a["activation"], "inputs": input_type(a["feature_set"]),
        "output_buckets": a["output_buckets"], "scale_product_int32_proven": bound <= INT32_MAX,
        "notes": notes,
    }
