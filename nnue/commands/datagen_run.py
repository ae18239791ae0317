"""``nnue datagen``, the work: self-play data from any UCI engine, as .plain dumps
(:func:`nnue.selfplay.datagen.datagen`). The parser is :mod:`nnue.commands.datagen`."""
from __future__ import annotations

import json

from nnue.selfplay.datagen import datagen
from nnue.selfplay.play import parse_adjudication


def run(args) -> int:
    """``nnue datagen``: a UCI engine's self-play games as .plain dumps; prints run.json's summary."""
    out = datagen(args.engine, args.output, games=args.games, nodes=args.nodes, threads=args.threads,
                  random_plies=args.random_plies, chess960=args.chess960,
                  adjudication=parse_adjudication(args.adjudicate), games_per_file=args.games_per_file,
                  seed=args.seed, progress=not args.no_progress, move_timeout=args.move_timeout or None,
                  start_timeout=args.start_timeout)
    print(json.dumps(out))
    return 0
