"""Evaluation entry points for every net kind: packed boards, FENs, python-chess boards and
streamed datasets. Each dispatches to the kind's exact evaluator through the net-kind registry
(:mod:`nnue.inference.kinds`)."""
from __future__ import annotations

import numpy as np
import torch

from . import kinds, residual
from .incremental import evaluate_one


def evaluator(net):
    """The exact evaluator of ``net``'s kind: its :class:`~nnue.inference.kinds.spec.InferenceKind`
    (``forward_int``, ``evaluate``, ``evaluate_small``, ...)."""
    return kinds.of(net)


def forward_int(net, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor, return_parts: bool = False):
    """Exact integer eval from feature indices, for any net kind: stm, nstm (N, A) int32
    −1-padded, bucket (N,) int64 -> (N,) int64 centipawns, stm POV (with return_parts, also the
    kind's dict of integer sums for the overflow audit). Raises OverflowError."""
    return evaluator(net).forward_int(net, stm, nstm, bucket, return_parts)


#: at most this many positions go through the small-call paths of :func:`evaluate_net`: one
#: position costs ~10 us there (perspective nets, compiled) or ~25-40 us (evaluate_one), against
#: the batch path's fixed cost a call (~45 us compiled, ~0.5 ms torch) plus ~0.4-1 us a position
#: (chess768 -> 256, one core; ``nnue bench infer``, ``single_position``)
SMALL_BATCH = 8


def evaluate_net(net, boards: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """The net's own integer evals, any kind, without a residual net's base: (N, 32) uint8 ->
    (N,) int64 centipawns, stm POV (the kind's ``evaluate``, e.g.
    :func:`nnue.inference.kinds.perspective.evaluate`). Up to :data:`SMALL_BATCH` CPU positions go
    to the kind's ``evaluate_small`` where it has one and it runs (perspective nets: the compiled
    kernel, :func:`nnue.inference.kinds.perspective.evaluate_small`), else, for a kind with
    incremental support, one by one from scratch (:func:`nnue.inference.incremental.evaluate_one`);
    same integers, no batch overhead. The rest, and any board those paths decline, take the
    kind's batch evaluator."""
    small = 0 < boards.shape[0] <= SMALL_BATCH and boards.device.type == "cpu" and boards.dtype == torch.uint8 \
        and boards.dim() == 2 and boards.shape[1] == 32
    ev = kinds.of(net)
    if small and ev.evaluate_small is not None:
        vals = ev.evaluate_small(net, boards)
        if vals is not None:
            return torch.from_numpy(np.array(vals, dtype=np.int64))
    if small and ev.incremental:
        out = []
        for row in boards.contiguous().numpy():
            v = evaluate_one(net, row)
            if v is None:
                break
            out.append(v)
        else:
            return torch.from_numpy(np.array(out, dtype=np.int64))
    return ev.evaluate(net, boards, chunk)


def evaluate(net, boards: torch.Tensor, chunk: int = 1024, base: torch.Tensor | None = None) -> torch.Tensor:
    """Integer evals of packed boards, any net kind: (N, 32) uint8 -> (N,) int64 centipawns,
    stm POV. A residual net (:mod:`nnue.inference.residual`) returns ``base + α·net`` by the
    integer rule there: ``base`` (N,) integer centipawns, stm POV, or None to compute a
    ``material`` base; raises :class:`~nnue.inference.residual.BaseMissingError` when a
    Stockfish base is not given. ``base`` is ignored for a plain net."""
    ev = evaluate_net(net, boards, chunk)
    r = residual.of(net)
    if r is None:
        return ev
    return residual.combine(ev, residual.base_for(net, boards, base), r["alpha_num"], r["alpha_shift"])


def boards_from_fens(fens: list[str], labels: list[str] | None = None) -> torch.Tensor:
    """FENs -> (N, 32) uint8 packed boards. Checks syntax and that each side has one king (no
    further legality checks). Raises ValueError naming a bad FEN by its label (``labels``, e.g.
    "file:line"), else by its 1-based position."""
    from nnue.pipeline.board import pack_fen

    rows = []
    for i, fen in enumerate(fens, 1):
        where = labels[i - 1] if labels is not None else i
        try:
            packed = pack_fen(fen)
            placement = fen.split()[0]
            if placement.count("K") != 1 or placement.count("k") != 1:
                raise ValueError("each side needs exactly one king")
            rows.append(packed)
        except ValueError as e:
            raise ValueError(f"FEN {where} ({fen!r}): {e}") from None
    if not rows:
        return torch.zeros((0, 32), dtype=torch.uint8)
    return torch.from_numpy(np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(-1, 32).copy())


def evaluate_fens(net, fens: list[str], labels: list[str] | None = None, base=None) -> list[int]:
    """Integer evals (centipawns, side-to-move POV) of FENs (``labels``: how errors name them,
    see :func:`boards_from_fens`; ``base``: a residual net's base, see :func:`evaluate`)."""
    return evaluate(net, boards_from_fens(fens, labels), base=base).tolist()


def evaluate_boards(net, boards) -> list[int]:
    """Integer evals (centipawns, side-to-move POV) of python-chess boards (any objects with a
    ``fen()`` method; python-chess itself is not imported). Raises ValueError naming the
    1-based position of a board that cannot be packed."""
    return evaluate_fens(net, [b.fen() for b in boards])


def evaluate_dataset(net, batches, chunk: int = 65536):
    """Integer evals of a packed dataset, streamed: ``batches`` yields (N, 32) uint8 packed
    boards (e.g. the ``boards`` of :class:`nnue.pipeline.stream.PackedStream` batches, or
    row groups of the Parquet ``board`` column); yields (N,) int64 centipawn tensors, stm POV,
    one per input batch, in order. Memory stays bounded by one batch."""
    for boards in batches:
        yield evaluate(net, boards, chunk)
