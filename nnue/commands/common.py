"""What every ``nnue`` command's parser shares: the one-line parser, the argument types, the exit status
of bad input.

Light by contract: standard library only, so that building the parser (``nnue --help``, ``--version``,
every ``nnue CMD --help``) imports neither torch nor Lightning, pyarrow, numba or Hydra
(``tests/cli/test_thin_cli.py``).
"""
from __future__ import annotations

import argparse
import math

from nnue.commands import format_table

#: exit status of bad input (a usage error, a file that is not what it should be): one line on stderr
EXIT_BAD_INPUT = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line: ``nnue <cmd>: error: ...`` (status 2)."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def non_negative(text: str) -> int:
    """An integer ≥ 0 (``--limit``, ``--positions`` ...); argparse.ArgumentTypeError otherwise."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    return v


def positive_float(text: str) -> float:
    """A finite number > 0 (``--range-mb``); argparse.ArgumentTypeError otherwise."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text}: give a positive number")
    return v


def workers(text: str) -> int:
    """A process count in 1..1024 (``--workers``); argparse.ArgumentTypeError otherwise."""
    v = non_negative(text)
    if not 1 <= v <= 1024:
        raise argparse.ArgumentTypeError(f"{v}: give 1 to 1024 processes")
    return v


def path(text: str) -> str:
    """A path argument: not empty (an empty path would mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    return text


def module_docstring(module: str) -> str:
    """The docstring of ``module`` (a dotted name), read from its source without importing it: the help
    of the commands that parse their own arguments (``retrain``) is a heavy module's docstring.
    Importing the module would import torch; parsing its source takes a few milliseconds."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"{module}: no such module")
    with open(spec.origin, encoding="utf-8") as f:
        return ast.get_docstring(ast.parse(f.read(), spec.origin), clean=False) or ""


class RegistryChoices:
    """The choices of an option that a registry holds (``nnue pack --format``, ``nnue convert --to``),
    read from it only when argparse checks a value or lists the choices (that command's ``--help`` or a
    usage error).

    ``names``: a function returning the registry's names (:mod:`nnue.commands.format_table`: the
    format registry's names without importing it, which loads numpy and python-chess).
    """

    def __init__(self, names, first: tuple[str, ...] = ()):
        self._names, self._first = names, tuple(first)

    def _all(self) -> list[str]:
        return [*self._first, *self._names()]

    def __iter__(self):
        return iter(self._all())

    def __contains__(self, value) -> bool:
        return value in self._all()

    def __len__(self) -> int:
        return len(self._all())


def add_registry_option(parser, *flags, choices: RegistryChoices, **kw):
    """``parser.add_argument(*flags, choices=choices, **kw)`` without reading the registry now.

    argparse formats an option's metavar when the option is added, and without a metavar that lists
    the choices; so the option is added with a metavar, which is then cleared: the usage and the help
    list the choices as for a plain list (reading the registry then). Returns the argparse action."""
    action = parser.add_argument(*flags, choices=choices, metavar="CHOICE", **kw)
    action.metavar = None
    return action


def format_names() -> list[str]:
    """The dump formats ``nnue pack --format`` reads: the format registry's names
    (:func:`nnue.commands.format_table.table`)."""
    return format_table.table()["names"]


def writer_names() -> list[str]:
    """The dump formats ``nnue convert --to`` writes: the format registry's writers."""
    return format_table.table()["writers"]


class RegistryHelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, with ``{extensions}`` in a description replaced by the dump-file
    extensions of the format registry when the help is formatted (not when the parser is built)."""

    def _format_text(self, text: str) -> str:
        if "{extensions}" in text:
            text = text.replace("{extensions}", ", ".join(format_table.table()["extensions"]))
        return super()._format_text(text)


def add_base_engine_option(parser) -> None:
    """``--engine PATH``: the Stockfish 15.1 binary that computes a residual net's base (``nnue analyze``,
    ``nnue report``)."""
    parser.add_argument("--engine", metavar="PATH", default=None,
                        help="residual nets on a Stockfish base: the Stockfish 15.1 binary that computes it when the "
                             "dataset's base_eval column does not hold it (default: stockfish on PATH, else "
                             "/usr/games/stockfish); positions without a base (in check) are left out")
