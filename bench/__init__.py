"""Benchmarks, installed as ``nnue.bench``: each ``bench_<name>.py`` has ``main(argv) -> int`` and
prints one JSON object; ``nnue bench <name> [args]`` runs it. Results are kept in ``bench/results/``."""
