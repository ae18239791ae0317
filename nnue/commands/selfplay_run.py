"""``nnue selfplay``, the work: self-play games of a net in our MCTS, written as .plain dumps
(:func:`nnue.selfplay.generate.selfplay`). The parser is :mod:`nnue.commands.selfplay`."""
from __future__ import annotations

import json

from nnue.commands.search_args import search_config
from nnue.selfplay.generate import selfplay, summary_lines
from nnue.selfplay.play import parse_adjudication


def _rate(text: str) -> float:
    """'1/8192', '0.001' -> a probability."""
    try:
        if "/" in text:
            a, b = text.split("/")
            v = float(a) / float(b)
        else:
            v = float(text)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"--sample-search {text!r}: a probability such as 1/8192 or 0.0001") from None
    if not 0 <= v <= 1:
        raise ValueError(f"--sample-search {text!r}: a probability in [0, 1]")
    return v


def run(args) -> int:
    """``nnue selfplay``: play the games (:func:`nnue.selfplay.generate.selfplay`); prints the summary."""
    if args.openings and args.random_plies is not None:
        raise ValueError("--openings and --random-plies exclude each other (openings are played as given)")
    out = selfplay(args.net, args.output, games=args.games, nodes=args.nodes, threads=args.threads,
                   openings=args.openings, random_plies=0 if args.openings else (8 if args.random_plies is None
                                                                                 else args.random_plies),
                   chess960=args.chess960, adjudication=parse_adjudication(args.adjudicate),
                   sample_rate=_rate(args.sample_search) if args.sample_search else 0.0,
                   games_per_file=args.games_per_file, in_flight=args.in_flight, seed=args.seed,
                   search=search_config(args), progress=not args.no_progress)
    if args.json:
        print(json.dumps(out))
    else:
        print("\n".join(summary_lines(out)))
    return 0
