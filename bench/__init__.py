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
