"""Benchmarks, installed as ``nnue.bench``: each ``bench_<name>.py`` has ``main(argv) -> int`` and
prints one JSON object; ``nnue bench <name> [args]`` runs it. Results are kept in ``bench/results/``."""


def emit(report: dict, out: str | None = None) -> int:
    """Print a benchmark's JSON report (and write it to ``out`` when given); returns 0."""
    import json
    from pathlib import Path

    text = json.dumps(report, indent=1)
    print(text)
    if out:
        Path(out).write_text(text + "\n")
    return 0


def parser(prog: str, description: str):
    """An ``argparse.ArgumentParser`` for ``nnue bench <name>`` whose ``--help`` gives every
    option's default after its help text (``(default: X)``), unless the help already names the
    default or there is none (None, a flag)."""
    import argparse

    class Formatter(argparse.HelpFormatter):
        def _get_help_string(self, action):
            text = action.help or ""
            if (action.default in (None, False, argparse.SUPPRESS) or "default" in text
                    or not action.option_strings):
                return text
            return f"{text} (default: %(default)s)"

    return argparse.ArgumentParser(prog=prog, description=description, formatter_class=Formatter)
