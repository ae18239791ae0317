"""Net kind ``sfnnv16``: Stockfish 19's network (Full_Threats + PP_3Wide + HalfKAv2_hm → 2×L1
pairwise → 8 layer stacks of 32 → 32 → 1 with squared and clipped activations and a skip).

The kind's modules: :mod:`.net` (the integer net :class:`SFNNv16IntegerNet`, the engine's exact
arithmetic and its eval trace), :mod:`.codec` (Stockfish 19's ``.nnue`` file, LEB128 blocks),
:mod:`.compiled` (its numba kernel, imported on first use). The float side is
:mod:`nnue.trainer.kinds.sfnnv16`. Neither the incremental accumulator nor the block-sparse L1
path handles it: threat features change with every move of any piece, so the one-position path
evaluates from scratch.
"""
from __future__ import annotations

import functools
from pathlib import Path

from nnue.pipeline.atomic import atomic_write_bytes

from ..sfnnv5 import codec as sfnnv5_codec
from ..spec import EngineFile, InferenceKind
from .codec import VERSION, file_hash
from .net import (FC0_OUTPUTS, FC1_INPUTS, FC1_OUTPUTS, FC2_INPUTS, INT8_INPUTS, LAYER_STACKS,  # noqa: F401
                  NUM_INPUTS, PP_INPUTS, PSQ_INPUTS, PSQT_BUCKETS, SCHEME, STOCKFISH_L1, THREAT_INPUTS,
                  SFNNv16IntegerNet, accumulate, evaluate, fen_facts, file_tensors, final_value, forward_int,
                  in_check, layer_stack, make_sfnnv16_arch, material_of_indices, psqt_value, read_nnue, to_cp,
                  to_cp_int, trace, transform, value_from_indices, values, win_rate_a, win_rate_a_tensor)

#: the file name of Stockfish 19's built-in net: the engine loads its embedded copy for that name
BUILTIN_NAME = "nn-1a298aa575a0.nnue"
ENGINE = "Stockfish 19"


def c_args(a: dict) -> list[str]:
    """The C reference's arguments for an sfnnv16 net (it reads the ``.nnue`` file itself)."""
    return ["--sfnnv16", str(a["hidden"])]


def summary(arch: dict) -> str:
    """The architecture in one line (``nnue export`` prints it)."""
    return (f"{arch['feature_set']} -> {arch['hidden']}x2 pairwise -> 8 layer stacks: 32 -> SqrCReLU|CReLU 64 -> "
            f"32 -> SqrCReLU|CReLU 64 + 64 -> 1, skip, 8 PSQT (Stockfish 19 SFNNv16) -> {arch['output_buckets']}")


def check_writable(net, path=None) -> None:
    """Refuse, in one line naming the field, a net Stockfish 19 cannot load: another kind, or L1
    other than 1,024 (the engine is built for one width); and an output file named like the
    built-in net (the engine would load its embedded copy instead). Raises ValueError."""
    a = net.arch
    if a.get("kind") != "sfnnv16":
        raise ValueError(f"net kind {a.get('kind')!r}: {ENGINE} loads only the sfnnv16 kind (Full_Threats + "
                         "PP_3Wide + HalfKAv2_hm -> 1024x2 pairwise -> 8 layer stacks 32/32/1; train with "
                         "model=sfnnv16)")
    if a["hidden"] != STOCKFISH_L1:
        raise ValueError(f"L1 (feature transformer width, model.hidden) is {a['hidden']}: {ENGINE} loads only "
                         f"{STOCKFISH_L1} (its hash would be 0x{file_hash(a['hidden']):08X}, the engine expects "
                         f"0x{file_hash(STOCKFISH_L1):08X})")
    if path is not None and Path(path).name == BUILTIN_NAME:
        raise ValueError(f"{path}: {ENGINE} never reads a file named {BUILTIN_NAME} (it uses its built-in net "
                         "instead); choose another name")


def write_stockfish19(net, path) -> dict:
    """``nnue export-net --to stockfish-19``: the ``.nnue`` file (refused in one line by
    :func:`check_writable` for a net Stockfish 19 cannot load), written atomically. Returns what
    ``--json`` prints."""
    path = Path(path)
    check_writable(net, path)
    data = net.raw_bytes()
    atomic_write_bytes(path, data)
    return {"target": "stockfish-19", "file": str(path), "bytes": len(data),
            "layout": "Stockfish 19 .nnue (SFNNv16): header, feature transformer (LEB128 blocks), 8 layer stacks",
            "hash": f"0x{file_hash(net.arch['hidden']):08X}", "description": net.arch.get("description", ""),
            "notes": [f"load it with: setoption name EvalFile value {path}"]}


#: what ``nnue export`` says about the ``net.nnue`` it wrote, and what ``nnue import-net``
#: records about a file: Stockfish 15.1's rules (:mod:`nnue.inference.kinds.sfnnv5.codec`) with
#: this engine's name
engine_notes = functools.partial(sfnnv5_codec.engine_notes, engine=ENGINE, engine_l1=STOCKFISH_L1)
import_facts = functools.partial(sfnnv5_codec.import_facts, engine_l1=STOCKFISH_L1)


def eval_trace(net: SFNNv16IntegerNet, fens: list[str], in_check: list[bool]) -> list[str]:
    """The kind's ``trace`` (``nnue eval --trace``): :func:`trace` of each position (Stockfish
    19's ``eval`` output); a position in check gets the engine's own line, ``Final evaluation:
    none (in check)``. Each text ends with a newline."""
    texts = iter(trace(net, [f for f, c in zip(fens, in_check) if not c]))
    return ["Final evaluation: none (in check)\n" if c else next(texts) for c in in_check]


KIND = InferenceKind("sfnnv16", SFNNv16IntegerNet, make_sfnnv16_arch, forward_int, evaluate, summary,
                     c_args=c_args, engine_file="net.nnue", engine_notes=engine_notes, trace=eval_trace,
                     trace_name="Stockfish 19's eval output", targets={"stockfish-19": write_stockfish19},
                     engine_reader=EngineFile("Stockfish 19 .nnue", ".nnue", VERSION, read_nnue, import_facts),
                     eval_in_check=False)  # Stockfish: "Final evaluation: none (in check)"
