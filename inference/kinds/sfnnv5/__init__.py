"""Net kind ``sfnnv5``: Stockfish 15.1's network (HalfKAv2_hm → 2×L1 pairwise → 8 layer stacks).

The kind's modules: :mod:`.net` (the integer net :class:`SFNNv5IntegerNet`, the engine's exact
arithmetic), :mod:`.codec` (Stockfish 15.1's ``.nnue`` file), :mod:`.trace` (the engine's NNUE
eval trace), :mod:`.compiled` (its numba kernel, imported on first use). The float side is
:mod:`nnue.trainer.kinds.sfnnv5`. The incremental accumulator and the one-position path handle
it (its FT + PSQT rows and its one-position eval: ``accumulator_table``,
``evaluate_accumulator``); the block-sparse L1 path does not (its L1 is the layer stacks' fc_0,
evaluated densely).
"""
from __future__ import annotations

from ..spec import EngineFile, InferenceKind
from .codec import VERSION, engine_notes, import_facts, write_stockfish
from .net import (FC0_OUTPUTS, FC1_INPUTS, FC1_OUTPUTS, FC1_PADDED, LAYER_STACKS, NORMALIZE_TO_PAWN,  # noqa: F401
                  PSQT_BUCKETS, SCHEME, SFNNv5IntegerNet, accumulate, accumulator_layers, accumulator_table,
                  evaluate, evaluate_accumulator, evaluate_small, forward_from_accumulators, forward_int,
                  layer_stack, make_sfnnv5_arch, psqt_value, read_nnue, split_accumulator, to_cp, transform,
                  value_from_indices, values)
from .trace import eval_trace, halfka_indices, squares_from_fen, trace, values_of_squares  # noqa: F401


def c_args(a: dict) -> list[str]:
    """The C reference's arguments for an sfnnv5 net (it reads the ``.nnue`` file itself)."""
    return ["--sfnnv5", str(a["hidden"])]


def summary(arch: dict) -> str:
    """The architecture in one line."""
    return (f"{arch['feature_set']} -> {arch['hidden']}x2 pairwise -> 8 layer stacks: 16 -> SqrCReLU|CReLU 30 -> "
            f"32 -> 1, skip, 8 PSQT (Stockfish 15.1 SFNNv5) -> {arch['output_buckets']}")


KIND = InferenceKind("sfnnv5", SFNNv5IntegerNet, make_sfnnv5_arch, forward_int, evaluate, summary,
                     evaluate_small=evaluate_small, forward_from_accumulators=forward_from_accumulators,
                     accumulator_table=accumulator_table, evaluate_accumulator=evaluate_accumulator,
                     accumulator_layers=accumulator_layers, c_args=c_args, engine_file="net.nnue",
                     engine_notes=engine_notes, trace=eval_trace, trace_name="Stockfish 15.1's NNUE eval trace",
                     targets={"stockfish-15.1": write_stockfish},
                     engine_reader=EngineFile("Stockfish 15.1 .nnue", ".nnue", VERSION, read_nnue, import_facts),
                     eval_in_check=False)  # Stockfish: "Final evaluation: none (in check)"
