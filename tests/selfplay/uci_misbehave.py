"""A real UCI engine process that misbehaves on purpose, for the robustness tests.

    python uci_misbehave.py [--engine CMD] [--hang-at N | --exit-at N] [--once FILE] [--option NAME ...]
                            [--uciok-delay S] [--readyok-delay S]

Without ``--engine`` it plays a seeded random legal move (python-chess) and reports
``info depth 1 score cp 0``; with ``--engine CMD`` it passes every line to that engine (a real
Stockfish) and its answers back. At its N-th ``go`` (counted per process) it either hangs (reads
nothing more, answers nothing, sleeps until killed) or exits at once with status 3. ``--once
FILE``: misbehave only if FILE does not exist yet at that moment, creating it, so that only the
first process of a run that reaches its N-th ``go`` misbehaves and its restarted successors play
normally. Without ``--hang-at`` or ``--exit-at`` it plays every game. ``--option NAME`` (repeatable,
without ``--engine``): it also declares a string option NAME and accepts ``setoption``.
``--uciok-delay S`` / ``--readyok-delay S``: a slow engine, S seconds before each
``uciok`` / ``readyok`` (a big net, a WASM build). Without ``--engine`` it declares the options
``Threads``, ``Hash``, ``MultiPV``, ``Ponder`` and ``EvalFile`` (no ``UCI_Chess960``; it loads no
net) and accepts any ``setoption``.
"""
from __future__ import annotations

import argparse
import os
import random
import shlex
import subprocess
import sys
import threading
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--hang-at", type=int)
    g.add_argument("--exit-at", type=int)
    ap.add_argument("--once")
    ap.add_argument("--option", action="append", default=[])
    ap.add_argument("--uciok-delay", type=float, default=0.0)
    ap.add_argument("--readyok-delay", type=float, default=0.0)
    a = ap.parse_args()
    def armed() -> bool:
        if not a.once:
            return True
        try:
            os.close(os.open(a.once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False

    at = a.hang_at or a.exit_at
    child = None
    if a.engine:
        child = subprocess.Popen(shlex.split(a.engine), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 bufsize=1)

        def pump():
            for line in child.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()

        threading.Thread(target=pump, daemon=True).start()

    def say(text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    board = None
    rng = random.Random(0)
    gos = 0
    for line in sys.stdin:
        cmd = line.strip()
        if cmd.startswith("go"):
            gos += 1
            if at and gos == at and armed():
                if a.exit_at:
                    if child:
                        child.kill()
                    os._exit(3)
                while True:  # hung: no bestmove, ever
                    time.sleep(3600)
        if cmd == "uci" and a.uciok_delay:
            time.sleep(a.uciok_delay)
        if cmd == "isready" and a.readyok_delay:
            time.sleep(a.readyok_delay)
        if child:
            child.stdin.write(line)
            child.stdin.flush()
            if cmd == "quit":
                child.wait()
                return
            continue
        if cmd == "uci":
            extra = "".join(f"option name {o} type string default <empty>\n" for o in a.option if o != "EvalFile")
            say("id name misbehave\noption name Threads type spin default 1 min 1 max 512\n"
                "option name Hash type spin default 16 min 1 max 1024\n"
                "option name MultiPV type spin default 1 min 1 max 500\n"
                "option name Ponder type check default false\n"
                "option name EvalFile type string default <empty>\n" + extra + "uciok")
        elif cmd == "isready":
            say("readyok")
        elif cmd.startswith("position"):
            import chess

            parts = cmd.split()
            if parts[1] == "startpos":
                board, rest = chess.Board(), parts[2:]
            else:
                i = parts.index("moves") if "moves" in parts else len(parts)
                board, rest = chess.Board(" ".join(parts[2:i])), parts[i:]
            for u in rest[1:] if rest and rest[0] == "moves" else []:
                board.push_uci(u)
        elif cmd.startswith("go"):
            moves = sorted(m.uci() for m in board.legal_moves)
            say("info depth 1 score cp 0 nodes 1")
            say(f"bestmove {rng.choice(moves)}")
        elif cmd == "quit":
            return


if __name__ == "__main__":
    main()
