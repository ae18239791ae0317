"""The self-play sub-commands of ``nnue``: sprt, selfplay, match, datagen (registered by
:func:`add_parsers`; bad input raises ValueError/FileNotFoundError, which ``nnue`` turns into
one line with status 2)."""
from __future__ import annotations

import json


def _penta(text: str) -> list[int]:
    from .sprt import check_penta

    return [int(v) for v in check_penta(text.replace(" ", "").split(","))]


def cmd_sprt(args) -> int:
    from .sprt import sprt

    wdl = tuple(int(v) for v in args.wdl.split(",")) if args.wdl else None
    if wdl is not None and len(wdl) != 3:
        raise ValueError(f"--wdl {args.wdl!r}: three counts W,D,L")
    r = sprt(_penta(args.penta), args.elo0, args.elo1, args.alpha, args.beta, args.model, wdl)
    print(json.dumps(r.to_dict()) if args.json else "\n".join(r.lines()))
    return 0


def add_parsers(sub) -> None:
    """Add sprt, selfplay, match and datagen to the ``nnue`` sub-parsers ``sub``."""
    s = sub.add_parser("sprt", help="SPRT result (LLR, Elo ± CI) from pentanomial counts",
                       description="Compute the GSPRT LLR, logistic Elo with its 95%% interval and the verdict "
                       "from pentanomial pair counts (normalized-Elo bounds, as fishtest/OpenBench/fastchess; "
                       "see nnue.selfplay.sprt).")
    s.add_argument("--penta", required=True, metavar="LL,LD,DD,WD,WW",
                   help="pair counts, LL (both games lost) first")
    s.add_argument("--elo0", type=float, default=0.0)
    s.add_argument("--elo1", type=float, default=5.0)
    s.add_argument("--alpha", type=float, default=0.05)
    s.add_argument("--beta", type=float, default=0.05)
    s.add_argument("--model", default="normalized", choices=["normalized", "logistic"],
                   help="what the Elo bounds mean: normalized Elo (default) or logistic Elo")
    s.add_argument("--wdl", metavar="W,D,L", help="game counts, printed beside GAMES when given")
    s.add_argument("--json", action="store_true", help="one JSON object: llr, elo, elo_ci95, verdict, …")
    s.set_defaults(func=cmd_sprt)
