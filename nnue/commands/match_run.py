"""``nnue match``, the work: a paired match with SPRT between two of our nets or two UCI engines
(:mod:`nnue.selfplay.match`). The parser is :mod:`nnue.commands.match`."""
from __future__ import annotations

import json
import sys

from nnue.commands.search_args import search_config
from nnue.selfplay.engines import parse_engine_option
from nnue.selfplay.match import MATCH_NODES, MatchInterrupted, engine_match, net_match
from nnue.selfplay.play import MATCH_ADJUDICATION, parse_adjudication


def _engines(events) -> tuple[list[str], list[dict]]:
    """The ``--engine`` commands in order and each one's ``--engine-option`` settings."""
    cmds, opts = [], []
    for kind, value in events or []:
        if kind == "engine":
            cmds.append(value)
            opts.append({})
        elif not cmds:
            raise ValueError(f"--engine-option {value!r}: give it after the --engine it is for")
        else:
            k, v = parse_engine_option(value)
            opts[-1][k] = v
    return cmds, opts


def run(args) -> int:
    """``nnue match``: two nets in our search or two UCI engines, paired games, SPRT; Ctrl-C: status 130."""
    nets = args.net or []
    engines, engine_opts = _engines(args.engine_events)
    if len(nets) + len(engines) != 2 or (nets and engines):
        raise ValueError("give two --net or two --engine")
    adj = parse_adjudication(args.adjudicate, MATCH_ADJUDICATION)
    common = dict(games=args.games, elo0=args.elo0, elo1=args.elo1, alpha=args.alpha, beta=args.beta,
                  concurrency=args.concurrency, openings=args.openings, book=args.book,
                  random_plies=args.random_plies, seed=args.seed, chess960=args.chess960,
                  adjudication=adj, sprt_stop=not args.no_sprt_stop, live=not args.quiet)
    try:
        if nets:
            if args.movetime is not None:
                raise ValueError("--movetime is for --engine matches; our search runs --nodes per move")
            r = net_match(nets[0], nets[1], args.output, nodes=args.nodes or MATCH_NODES, search=search_config(args),
                          in_flight=args.in_flight, **common)
        else:
            r = engine_match(engines[0], engines[1], args.output, nodes=args.nodes, movetime=args.movetime,
                             move_timeout=args.move_timeout or None,
                             start_timeout=args.start_timeout, options_a=engine_opts[0], options_b=engine_opts[1],
                             **common)
    except MatchInterrupted as e:
        print(f"nnue match: {e.message}", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps({k: v for k, v in r.items() if k not in ("lines", "game_log")}))
    else:
        print("\n".join(r["lines"]))
        print(f"PGN: {r['pgn']}\nJSON: {r['json']}")
    return 0
