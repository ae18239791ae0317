"""``nnue sprt``, the work: the GSPRT verdict of pentanomial counts (:func:`nnue.selfplay.sprt.sprt`). The parser is :mod:`nnue.commands.sprt`."""
from __future__ import annotations

import json

from nnue.selfplay.sprt import check_penta, sprt


def _penta(text: str) -> list[int]:
    return [int(v) for v in check_penta(text.replace(" ", "").split(","))]


def run(args) -> int:
    """``nnue sprt``: the LLR, Elo and verdict of pentanomial counts, as text or JSON."""
    wdl = tuple(int(v) for v in args.wdl.split(",")) if args.wdl else None
    if wdl is not None and len(wdl) != 3:
        raise ValueError(f"--wdl {args.wdl!r}: three counts W,D,L")
    r = sprt(_penta(args.penta), args.elo0, args.elo1, args.alpha, args.beta, args.model, wdl)
    print(json.dumps(r.to_dict()) if args.json else "\n".join(r.lines()))
    return 0
