"""``nnue eval``, the work: evaluate positions (a FEN, a file of positions, a packed dataset) with an integer
net and print one eval a line, Stockfish's eval trace, or a one-line summary. The parser is
:mod:`nnue.commands.evaluate`.

``--fen`` / ``--fens`` stay light: they import the inference package and the position parser only.
pyarrow (the dataset stream), the Stockfish annotator (a residual net's engine base) and the
trainer's metrics are imported where they are used (``--dataset``, a residual net on a Stockfish
base); ``tests/cli/test_light_eval.py`` checks it in a fresh interpreter."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from nnue.inference import evaluate, evaluate_fens, kinds, load_any, residual
from nnue.inference.api import boards_from_fens
from nnue.pipeline.positions import PositionError, parse_position


def _read_fens(path: str) -> tuple[list[str], list[str]]:
    """Positions of a file ('-' = stdin), one a line: a FEN, an EPD line or 'FEN | score |
    result' (:func:`nnue.pipeline.positions.parse_position`; blank lines and '#' comments
    skipped). Returns (FENs, their "FILE:LINE" labels). Raises ValueError naming FILE:LINE and
    the reason for a line that is not a position pack would accept, or is not UTF-8."""
    name = "<stdin>" if path == "-" else path
    if path != "-" and not Path(path).is_file():
        raise ValueError(f"{path}: {'is a folder' if Path(path).is_dir() else 'no such file'}; --fens reads "
                         f"a text file of positions")
    src = sys.stdin if path == "-" else open(path, encoding="utf-8-sig")  # -sig: one BOM dropped
    fens, labels = [], []
    with src:
        n = 0
        try:
            for n, line in enumerate(src, 1):
                if n == 1:
                    line = line.removeprefix("\ufeff")
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                try:
                    fens.append(parse_position(line))
                except PositionError as e:
                    raise ValueError(f"{name}:{n}: {e}") from None
                labels.append(f"{name}:{n}")
        except UnicodeDecodeError as e:
            raise ValueError(f"{name}:{n + 1}: not UTF-8 text ({e.reason}); --fens reads one position a line") from None
    return fens, labels


def run(args) -> int:
    """``nnue eval``: one eval per position (--fen, --fens, --dataset), or --trace, or --summary."""
    if not args.dataset and (args.limit is not None or args.summary):
        raise ValueError("--limit and --summary go with --dataset")
    net_path = Path(args.net)
    net = load_any(net_path)  # net.safetensors, NETDIR, or an engine's own file (a Stockfish .nnue)
    tracer = kinds.of(net).trace
    if args.trace and (args.dataset or tracer is None):
        raise ValueError(f"--trace prints an engine's eval trace: it goes with a net of a kind that has one "
                         f"({', '.join(kinds.with_trace())}) and --fen / --fens"
                         + (f"; {net_path} is a {net.kind} net" if tracer is None else ""))
    if args.dataset:
        from nnue.pipeline import manifest as mf

        mf.load(args.dataset)  # one line naming a path that is no dataset
        return _eval_dataset(net, args)
    if args.fen is not None:
        if not args.fen.strip():
            raise ValueError("--fen: empty FEN")
        try:
            fens, labels = [parse_position(args.fen)], ["--fen"]
        except PositionError as e:
            raise ValueError(f"--fen: {e}") from None
    else:
        fens, labels = _read_fens(args.fens)
    boards = boards_from_fens(fens, labels)
    if args.trace:
        return _print_traces(net, fens)
    base = _residual_base(net, boards, engine=args.engine, name=str(net_path))
    try:
        evals = _evaluate_rows(net, boards, base)
    except OverflowError as e:  # name the first position that overflows (one at a time: rare path)
        for fen, label in zip(fens, labels):
            try:
                evaluate_fens(net, [fen], [label], base=[0])
            except OverflowError as one:
                raise OverflowError(f"{label} ({fen}): {one}") from None
        raise e
    if not kinds.of(net).eval_in_check:  # as the engine: no eval in check (Stockfish prints none)
        import chess

        evals = [None if chess.Board(f).is_check() else v for f, v in zip(fens, evals)]
    for v in evals:
        print("none" if v is None else v)
    return 0


def _print_traces(net, fens: list[str]) -> int:
    """``--trace``: the kind's eval trace of each position (sfnnv5: Stockfish 15.1's NNUE eval
    trace; in check the engine's own "Final evaluation: none (in check)" line), one blank line
    between positions."""
    import chess

    checked = [chess.Board(f).is_check() for f in fens]
    for i, text in enumerate(kinds.of(net).trace(net, fens, checked)):
        if i:
            print()
        print(text, end="")
    return 0


def _residual_base(net, boards, column=None, engine=None, name="the net"):
    """:func:`nnue.pipeline.annotate.residual_base`, whose module (the Stockfish annotator) is
    imported only for a residual net on a Stockfish base: None for every other net."""
    r = residual.of(net)
    if r is None or r["base"] == "material":
        return None
    from nnue.pipeline.annotate import residual_base

    return residual_base(net, boards, column, engine, name)


def _evaluate_rows(net, boards, base) -> list:
    """Evals of packed boards (ints), with a residual net's given base (``base``: float array,
    NaN = none, or None): a position without a base gets None ("none" in the output)."""
    if base is None:
        return evaluate(net, boards).tolist()
    ok = np.isfinite(base)
    out: list = [None] * len(base)
    idx = np.nonzero(ok)[0]
    if len(idx):
        vals = evaluate(net, boards[torch.from_numpy(idx)], base=torch.from_numpy(base[idx]).to(torch.int64))
        for i, v in zip(idx.tolist(), vals.tolist()):
            out[i] = v
    return out


def _eval_dataset(net, args) -> int:
    """Every row of a packed dataset in file order (no filters, no split): one eval per line, or
    with --summary one JSON object (positions, evals/s of the evaluation alone, mean eval,
    Spearman ρ of the evals with the score column, rows without a score counting as 0)."""
    from nnue.pipeline.annotate import dataset_holds_base, residual_fields
    from nnue.pipeline.board import unpack_fen
    from nnue.pipeline.stream import Filters, PackedStream
    from nnue.trainer.metrics import spearman

    no_filters = Filters(skip_in_check=False, skip_capture=False, skip_score_none=False, skip_mate=False)
    ds = PackedStream([args.dataset], 65536, 0, "all", 0.0, no_filters, drop_last=False, strict=True)
    limit = args.limit if args.limit is not None else None
    # a residual net on a Stockfish base: the dataset's base_eval column if it holds that base
    r = residual.of(net)
    use_column = r is not None and r["base"] != "material" and dataset_holds_base([args.dataset], r["base"],
                                                                                  ds.extra_columns)
    evals, scores, n, spent, no_base = [], [], 0, 0.0, 0
    for b in ds:
        boards, score = b["boards"], b["score"]
        column = b.get("base_eval") if use_column else None
        if limit is not None:
            boards, score = boards[: limit - n], score[: limit - n]
            column = None if column is None else column[: limit - n]
        base = _residual_base(net, boards, None if column is None else column.double().numpy(), args.engine,
                             str(args.net))
        t = time.perf_counter()
        try:
            ev = evaluate(net, boards) if base is None else _evaluate_rows(net, boards, base)
        except OverflowError as e:  # name the first row that overflows (one at a time: rare path)
            for i in range(len(boards)):
                try:
                    evaluate(net, boards[i:i + 1], base=torch.zeros(1, dtype=torch.int64))
                except OverflowError as one:
                    raise OverflowError(f"{args.dataset}: row {n + i + 1} in file order "
                                        f"({unpack_fen(boards[i].numpy().tobytes())}): {one}") from None
            raise e
        spent += time.perf_counter() - t
        if base is not None:  # rows without a base (in check: Stockfish prints none): "none"
            keep = np.isfinite(base)
            no_base += int((~keep).sum())
            if args.summary:
                ev, score = torch.tensor([v for v in ev if v is not None], dtype=torch.int64), score[torch.from_numpy(keep)]
        n += len(boards)
        if args.summary:
            evals.append(ev.numpy())
            scores.append(score.numpy())
        else:
            rows = ev.tolist() if torch.is_tensor(ev) else ev
            sys.stdout.write("".join(f"{'none' if v is None else v}\n" for v in rows))
        if limit is not None and n >= limit:
            break
    if args.summary:
        ev = np.concatenate(evals) if evals else np.zeros(0, np.int64)
        sc = np.concatenate(scores) if scores else np.zeros(0, np.float32)
        extra = residual_fields(r, use_column, no_base)
        print(json.dumps(extra | {"positions": int(n), "evals_per_s": round(n / spent) if spent else None,
                          "mean_eval_cp": float(ev.mean()) if len(ev) else None,
                          "spearman_with_score": spearman(ev, sc) if len(ev) > 1 else None,
                          "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                          "architecture": net.arch}, default=float))
    return 0
