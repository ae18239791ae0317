"""What inference needs of a net kind: one :class:`InferenceKind` object per kind.

A leaf module (dataclasses only), so that the kind modules, the registry
(:mod:`nnue.inference.kinds`) and the trainer's kinds can all import it without a cycle.
Everything code outside the kinds would otherwise branch on by the kind's name is a field here:
the evaluator's pieces, the incremental and block-sparse paths, the one-line summary ``nnue
export`` prints, the engine file it writes and the notes on it, the eval trace of ``nnue eval
--trace``, the ``nnue export-net`` layouts and the engine's own net file that ``nnue eval``,
``nnue import-net`` and ``nnue annotate --teacher`` read.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class EngineFile:
    """An engine's own net file that a kind reads (Stockfish's ``.nnue``): ``nnue eval``,
    ``nnue import-net`` and ``nnue annotate --teacher`` take it where they take a
    ``net.safetensors``.

    * ``name``: what the file is, for messages ("Stockfish 15.1 .nnue");
    * ``suffix``: its file suffix (".nnue");
    * ``version``: the little-endian u32 at byte 0 that tells this kind's files from another
      kind's with the same suffix (:func:`nnue.inference.kinds.read_engine_file` dispatches on it);
    * ``read(path, data)``: the integer net of the file (``data``: its bytes, or None to read
      ``path``); raises :class:`~nnue.inference.net.NetFormatError` naming the file, the field and
      its byte offset. The net's ``raw_bytes()`` writes the file back, byte for byte;
    * ``facts(net)``: what ``nnue import-net`` records about the file in ``import.json`` besides
      the kind and the architecture (its description, the engine's hash, whether the engine
      loads it), a JSON object.
    """

    name: str
    suffix: str
    version: int
    read: Callable
    facts: Callable[..., dict] | None = None


@dataclass(frozen=True)
class InferenceKind:
    """The inference side of one net kind.

    * ``name``: the header's ``architecture.kind`` (and the trainer's ``model.kind``);
    * ``integer``: the integer net class (:class:`nnue.inference.net.NetFile` subclass) with
      ``ARCH_FIELDS``, ``tensor_specs(arch)``, ``raw_bytes()`` (the engine file's bytes) and
      the file writers;
    * ``arch_builder``: ``(feature_set=, output_buckets=, **header_args) -> architecture dict``;
    * ``forward_int(net, stm, nstm, bucket, return_parts=False)``: exact integer evals from
      feature indices, (N,) int64 centipawns, stm POV (with ``return_parts``, also the kind's
      dict of integer sums for the export's overflow report);
    * ``evaluate(net, boards, chunk=1024)``: exact integer evals of (N, 32) uint8 packed boards;
    * ``summary(arch)``: the architecture in one line (``nnue export`` prints it), e.g.
      ``chess768 -> 256x2 screlu -> MaterialCount<8>``;
    * ``evaluate_small(net, boards)``: a few CPU boards as Python ints without the batch
      machinery, None when it declines (the API then takes another path); optional;
    * ``forward_from_accumulators(net, acc_stm, acc_nstm, bucket, return_parts=False)``: the
      layers after the feature transformer; optional;
    * ``accumulator_table(net)``: the incremental accumulator's rows, ``(w (F, W) int32,
      b (W,) int32)`` NumPy arrays made once per net; ``evaluate_accumulator(net, acc, stm,
      bucket, layers=None)``: one position's eval (centipawns, stm POV) from its (2, W) int32
      accumulators, white's first; ``accumulator_layers(net)``: what ``evaluate_accumulator``
      takes as ``layers``, kept by the caller (optional). A kind with both of the first two is
      evaluated by :class:`nnue.inference.IncrementalAccumulator` and
      :func:`nnue.inference.incremental.evaluate_one` (:attr:`incremental`);
    * ``sparse_forward(net, accs, bucket, block, method)``: the block-sparse L1 path
      (:mod:`nnue.inference.sparse_l1`) from the two perspectives' float32 accumulators:
      ``(evals (N,) int64, L1 inputs (N, 2, L))``; None when the kind has none;
    * ``c_args``: the C reference's arguments (after NET.bin) for an ``architecture`` dict, or
      None when the C reference has no such kind;
    * ``engine_file``: the engine file ``nnue export`` writes beside ``net.safetensors``
      (``net.raw_bytes()``; "net.bin": the raw layout, sfnnv5 "net.nnue");
    * ``engine_notes(arch, path)``: lines ``nnue export`` prints about that file, as
      ``(text, to_stderr)`` pairs (how an engine loads it, or why none does); optional;
    * ``trace(net, fens, in_check)``: an engine's eval trace of each FEN (``nnue eval --trace``;
      ``in_check``: each position's check status, which the caller knows from python-chess),
      each text ending with a newline; ``trace_name`` says what it is; None: no trace;
    * ``targets``: the ``nnue export-net --to`` layouts of the kind's nets, name -> writer
      ``(net, path) -> dict`` (checks the net, writes atomically, returns what ``--json``
      prints);
    * ``engine_reader``: the engine's own net file the kind reads (:class:`EngineFile`), or None;
    * ``eval_in_check``: whether the kind's engine gives a position in check an eval (default
      True); Stockfish does not ("Final evaluation: none (in check)"), and ``nnue eval`` then
      prints ``none`` for such a position, as the engine does.
    """

    name: str
    integer: type
    arch_builder: Callable[..., dict]
    forward_int: Callable
    evaluate: Callable
    summary: Callable[[dict], str]
    evaluate_small: Callable | None = None
    forward_from_accumulators: Callable | None = None
    accumulator_table: Callable | None = None
    evaluate_accumulator: Callable | None = None
    accumulator_layers: Callable | None = None
    sparse_forward: Callable | None = None
    c_args: Callable[[dict], list[str]] | None = None
    engine_file: str = "net.bin"
    engine_notes: Callable[[dict, Path], list[tuple[str, bool]]] | None = None
    trace: Callable | None = None
    trace_name: str = ""
    targets: dict[str, Callable] = field(default_factory=dict)
    engine_reader: EngineFile | None = None
    eval_in_check: bool = True

    @property
    def incremental(self) -> bool:
        """Whether :class:`nnue.inference.IncrementalAccumulator` and the one-position path
        :func:`nnue.inference.incremental.evaluate_one` handle the kind."""
        return self.accumulator_table is not None and self.evaluate_accumulator is not None
