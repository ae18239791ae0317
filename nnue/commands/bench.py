"""``nnue bench NAME [ARGS]``: run ``nnue.bench.bench_NAME.main(ARGS)``, which prints one JSON object. The
benchmark names are the ``bench_*.py`` files of :mod:`nnue.bench` (listed, not imported), so the parser
and ``nnue bench --help`` stay light; a benchmark is imported only when it runs."""
from __future__ import annotations

import importlib
import pkgutil
import sys

import nnue.bench
from nnue.commands.common import EXIT_BAD_INPUT


def add_parser(sub) -> None:
    """Add ``nnue bench`` to the ``nnue`` sub-command parsers ``sub`` (a benchmark parses its own options)."""
    sub.add_parser("bench", help="run a benchmark that prints JSON ('nnue bench --help' lists them)",
                   add_help=False).set_defaults(run_argv=run_argv)


def bench_names() -> list[str]:
    """The benchmarks ``nnue bench`` runs: NAME of every ``bench/bench_NAME.py``, sorted."""
    return sorted(m.name.removeprefix("bench_") for m in pkgutil.iter_modules(nnue.bench.__path__)
                  if m.name.startswith("bench_"))


def run_argv(argv: list[str]) -> int:
    """``nnue bench NAME [ARGS]``: run ``nnue.bench.bench_NAME.main(ARGS)`` (prints JSON)."""
    names = bench_names()
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: nnue bench NAME [ARGS...]   (NAME --help for a benchmark's own options)\n\n"
              "Run a benchmark; it prints one JSON object. Benchmarks: " + ", ".join(names))
        return 0
    if argv[0] not in names:
        print(f"nnue bench: error: unknown benchmark {argv[0]!r}; known: {', '.join(names)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    rc = importlib.import_module(f"nnue.bench.bench_{argv[0]}").main(argv[1:])
    # some benchmarks' main() returns its report (a dict) for the tests: that is success
    return rc if isinstance(rc, int) else 0
