"""Benchmarks, installed as ``nnue.bench``: each ``bench_<name>.py`` has ``main(argv) -> int`` and
prints one JSON object; ``nnue bench <name> [args]`` runs it. Results are kept in ``bench/results/``.

The real data the benches read by default (a source checkout's): :func:`shipped_selfplay` (our
own Stockfish 15.1 self-play cut into ``tests/data/selfplay``) and :func:`sample_fens` (the bundled
sample's positions). The tests read them through these too."""
from __future__ import annotations

import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the self-play cut of tests/data/selfplay (112 whole games, 12,678 positions)
CUT = "sf15-n2000-s11-cut"
#: the whole Chess960 set (40 games, 4,586 positions, X-FEN castling rights)
XFEN960 = "sf15-960-xfen-s2"
#: the bundled sample (38 games, 4,015 positions)
SAMPLE = REPO / "data" / "sample" / "sf15-n5000-s1-sample.plain"


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


def selfplay_zst(name: str) -> Path:
    """The compressed file of ``name`` (e.g. ``"sf15-960-xfen-s2.plain"``) in tests/data/selfplay;
    FileNotFoundError naming it when there is none."""
    folder = REPO / "tests" / "data" / "selfplay"
    p = folder / f"{name}.zst"
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such self-play file (tests/data/selfplay of a source checkout holds "
                                f"{sorted(q.name for q in folder.glob('*.zst'))})")
    return p


def shipped_selfplay(name: str) -> Path:
    """``tests/data/selfplay/<name>.zst`` decompressed, under its own name ``name``, into a cache
    folder of the system's temp directory keyed by the compressed file's SHA-256 (written once per
    machine, atomically: temp file + rename, so parallel processes share it safely).
    FileNotFoundError when the repository does not ship ``name``."""
    import hashlib
    import os
    import tempfile

    import zstandard

    src = selfplay_zst(name)
    raw = src.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"nnue-forge-tests-{os.getuid()}" / digest
    out = folder / name
    if not out.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        tmp.write_bytes(zstandard.ZstdDecompressor().decompress(raw, max_output_size=1 << 28))
        os.replace(tmp, out)
    return out


@functools.lru_cache(maxsize=None)
def _sample_fens() -> tuple[str, ...]:
    import chess

    fens = [line[4:].strip() for line in SAMPLE.read_text().splitlines() if line.startswith("fen ")]
    return tuple(dict.fromkeys(f for f in fens if not chess.Board(f).is_check()))


def sample_fens(n: int) -> list[str]:
    """The first ``n`` distinct positions (FEN strings) of the bundled sample that are not in
    check. ValueError when it holds fewer."""
    fens = _sample_fens()
    if len(fens) < n:
        raise ValueError(f"the sample holds {len(fens)} positions not in check, {n} asked")
    return list(fens[:n])
