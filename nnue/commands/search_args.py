"""The options that ``nnue selfplay``, ``match``, ``datagen`` and ``sprt`` share: MCTS search settings,
SPRT bounds, ``--engine`` / ``--engine-option`` in order. Light (standard library only): part of the parser."""
from __future__ import annotations

import argparse


class InOrder(argparse.Action):
    """Append (option name, value) to one list, so that ``--engine-option`` is tied to the
    ``--engine`` before it."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest, None) or [])
        items.append((self.const, values))
        setattr(namespace, self.dest, items)


def search_args(s, contempt: float = 0.0, fpu: float = 0.2) -> None:
    """Add the MCTS options (backup, priors, c_puct, FPU, contempt) to the parser ``s``, with these defaults."""
    s.add_argument("--backup", default="mean", choices=["mean", "max", "power_mean"],
                   help="MCTS backup operator (power_mean: seed 002, p = 1 + n/100 unless --power-p) "
                   "(default %(default)s)")
    s.add_argument("--power-p", type=float, default=None, metavar="P",
                   help="fixed power-mean exponent (default: none, p = 1 + n/100)")
    s.add_argument("--priors", default="captures", choices=["uniform", "captures", "checks"],
                   help="move priors: uniform, captures and promotions first, or also checks (default %(default)s)")
    s.add_argument("--cpuct", type=float, default=1.5, help="PUCT exploration constant (default %(default)s)")
    s.add_argument("--fpu", type=float, default=fpu, metavar="F",
                   help="first-play urgency reduction: an unvisited move starts at its parent's value minus F "
                   "(default %(default)s)")
    s.add_argument("--contempt", type=float, default=contempt, metavar="C",
                   help="a draw inside the search is worth -C to the side to move at the root, +C to the other "
                   "(value units, v = 2*sigmoid(cp/SCALE) - 1) (default %(default)s)")


def search_config(args) -> dict:
    """The search settings of parsed arguments, as :func:`nnue.selfplay.generate.selfplay` takes them."""
    return {"backup": args.backup, "p_fixed": args.power_p, "priors": args.priors, "c_puct": args.cpuct,
            "contempt": args.contempt, "fpu": args.fpu}


def sprt_args(s) -> None:
    """Add the SPRT bounds and error rates (normalized Elo) to the parser ``s``."""
    s.add_argument("--elo0", type=float, default=0.0, help="SPRT H0 bound, normalized Elo (default %(default)s)")
    s.add_argument("--elo1", type=float, default=5.0, help="SPRT H1 bound, normalized Elo (default %(default)s)")
    s.add_argument("--alpha", type=float, default=0.05, help="SPRT false-positive rate (default %(default)s)")
    s.add_argument("--beta", type=float, default=0.05, help="SPRT false-negative rate (default %(default)s)")
