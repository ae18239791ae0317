"""The real Stockfish 15.1 for the engine parity tests: where it is, its built-in net, and its
``eval`` trace of many positions in one process."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CANDIDATES = ("/usr/games/stockfish", "stockfish")


def stockfish_path() -> str | None:
    """The Stockfish binary (``NNUE_STOCKFISH`` overrides), or None."""
    env = os.environ.get("NNUE_STOCKFISH")
    if env:
        return env
    for c in CANDIDATES:
        p = c if os.path.isabs(c) and os.access(c, os.X_OK) else shutil.which(c)
        if p:
            return p
    return None


def require_stockfish_15_1() -> str:
    """The path of Stockfish 15.1, or skip with the reason (scripts/ensure_stockfish.sh installs it)."""
    p = stockfish_path()
    if p is None:
        pytest.skip("Stockfish is not installed (scripts/ensure_stockfish.sh installs Debian's 15.1)")
    out = subprocess.run([p], input="uci\nquit\n", capture_output=True, text=True, timeout=30).stdout
    if "Stockfish 15.1" not in out:
        pytest.skip(f"{p} is not Stockfish 15.1 ({out.splitlines()[0] if out else 'no output'})")
    return p


def export_builtin(engine: str, path: Path) -> Path:
    """Write the engine's built-in net with ``export_net`` (47,001,499 bytes)."""
    subprocess.run([engine], input=f"export_net {path}\nquit\n", capture_output=True, text=True, timeout=60,
                   check=True)
    return path


def eval_traces(engine: str, fens: list[str], eval_file: str | None = None) -> tuple[list[str], str]:
    """The engine's ``eval`` output for each FEN (the text up to and including its "Final
    evaluation" line), and the engine's other output (the info strings of loading a net)."""
    cmds = ["uci"]
    if eval_file:
        cmds.append(f"setoption name EvalFile value {eval_file}")
    cmds.append("isready")
    for f in fens:
        cmds += [f"position fen {f}", "eval"]
    cmds.append("quit")
    out = subprocess.run([engine], input="\n".join(cmds) + "\n", capture_output=True, text=True,
                         timeout=600).stdout
    head, _, rest = out.partition("readyok\n")
    traces, cur, info = [], [], []
    for line in rest.splitlines(keepends=True):
        if line.startswith("info string"):  # the engine (re)loads its net lazily, between evals
            info.append(line)
            continue
        cur.append(line)
        if line.startswith("Final evaluation"):
            traces.append("".join(cur))
            cur = []
    return traces, head + "".join(info)


def nnue_part(trace: str) -> str:
    """The NNUE lines of an ``eval`` trace: from " NNUE derived piece values:" to the bucket
    table's last line, then the "NNUE evaluation" line (what nnue.inference.kinds.sfnnv5.trace prints)."""
    start = trace.index(" NNUE derived piece values:")
    end = trace.index("\nClassical evaluation")
    table = trace[start:end].rstrip("\n") + "\n\n"
    nn = next(line for line in trace.splitlines() if line.startswith("NNUE evaluation"))
    return table + nn + "\n"
