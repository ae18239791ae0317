"""The ``nnue`` command: ``main``, its error policy and the assembly of its parser.

Each sub-command is one module of :mod:`nnue.commands` (its parser, light) plus the module that does its
work (imported only when the command runs), so ``nnue --version`` and every ``nnue CMD --help`` answer
without importing torch, Lightning, pyarrow or numba (``tests/cli/test_thin_cli.py``;
``nnue bench cli`` times them).

Error policy: every sub-command has ``--help`` and exits with status 2 and a one-line reason on bad input
(``nnue <cmd>: error: ...``). No traceback reaches a user: an unexpected exception (a bug) is one line
too, with status 1; ``NNUE_DEBUG=1`` in the environment shows the traceback instead. Ctrl-C: one line,
status 130.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from nnue.commands import COMMANDS
from nnue.commands.common import EXIT_BAD_INPUT, OneLineParser

#: the exceptions that mean bad input (status 2, one line). Every error class of the project subclasses
#: ValueError (FormatError, ManifestError, NetFormatError, ExportError, SweepReportError, RegistryError,
#: RetrainError, EngineError, PositionError; tests/cli/test_thin_cli.py checks each), so none of their
#: modules, torch among their imports, is needed to catch them.
KNOWN_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, IsADirectoryError, OverflowError,
                                                 KeyError)


def version_text() -> str:
    """``nnue-forge VERSION (git COMMIT)``: the installed package version and, when the package
    runs from a git checkout, the commit it was built from (``+dirty`` with local changes)."""
    import subprocess
    from importlib import metadata

    try:
        version = metadata.version("nnue-forge")
    except metadata.PackageNotFoundError:
        version = "unknown"
    here = Path(__file__).resolve().parent
    commit = None
    try:  # one git process (bench_cli: each costs 20-40 ms on a loaded 2-core machine): the commit, "+dirty"
        # with changes to tracked files; --exclude='*' ignores tags, so the answer is always the hash
        r = subprocess.run(["git", "-C", str(here), "describe", "--always", "--abbrev=12", "--dirty=+dirty",
                            "--exclude=*"], capture_output=True, text=True, timeout=5)
        if r.returncode == 0 and r.stdout.strip():
            commit = r.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return f"nnue-forge {version} (git {commit or 'commit unknown'})"


class _VersionAction(argparse.Action):
    """``--version``: :func:`version_text`, computed only when asked for (it runs git)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The ``nnue`` parser: one sub-parser per module of :data:`nnue.commands.COMMANDS`, in that order."""
    p = OneLineParser(prog="nnue", description="nnue-forge: pack self-play dumps, train "
                      "NNUE nets, export integer nets, evaluate them.")
    p.add_argument("--version", action=_VersionAction, help="print the package version and git commit, and exit")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=OneLineParser)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``nnue ARGS``; returns the exit status. Bad input: one line, status 2; a bug: one
    line, status 1 (``NNUE_DEBUG=1``: the traceback instead); Ctrl-C: one line, status 130."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv[0] if argv and not argv[0].startswith("-") else "nnue"
    # SQLAlchemy is pinned below 2 for optuna 2.10's storage (pyproject.toml): its one-time
    # "not compatible with SQLAlchemy 2.0" notice says nothing a user can act on
    os.environ.setdefault("SQLALCHEMY_SILENCE_UBER_WARNING", "1")
    # OpenMP threads that sleep between parallel regions instead of spinning (read by libgomp when
    # torch loads it, so before any command imports torch). torch's ops and numba's kernels share
    # the cores: spinning threads took them from each other, 4x slower CPU training at load 1.5
    # (docs/training.md, "Fast CPU training"). A user's own OMP_WAIT_POLICY is kept.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    debug = os.environ.get("NNUE_DEBUG", "") not in ("", "0")
    try:
        return _main(argv)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print(f"nnue {cmd}: interrupted (finished files are complete; an unfinished one was "
              f"never renamed into place)", file=sys.stderr)
        return 130
    except SystemExit:
        raise
    except KNOWN_ERRORS as e:
        if debug:
            raise
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"nnue {cmd}: error: {_one_line(msg)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:  # a path that cannot be read or written: name it, no traceback
        if debug:
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"nnue {cmd}: error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # a bug: still one line for the user
        if debug:
            raise
        print(f"nnue {cmd}: internal error: {type(e).__name__}: {_one_line(str(e))} (a bug; run with "
              f"NNUE_DEBUG=1 for the traceback and report it)", file=sys.stderr)
        return 1


def _one_line(msg: str) -> str:
    return " ".join(str(msg).split())


def _main(argv: list[str]) -> int:
    parser = build_parser()
    if argv and not argv[0].startswith("-"):
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices.get(argv[0])
        run_argv = sub.get_default("run_argv") if sub is not None else None
        if run_argv is not None:  # train, retrain, pack-shards, bench: they parse their own arguments
            return run_argv(argv[1:])
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
