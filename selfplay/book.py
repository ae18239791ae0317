"""The opening book matches use by default: short, balanced lines from the start position,
shipped with the project (``selfplay/books/balanced.txt``), and the program that made it.

File format (one opening a line; ``#`` lines are comments): the moves from the start position in
UCI, then ``;`` and Stockfish 15.1's score of the final position, white's POV, UCI centipawns,
e.g. ``e2e4 c7c5 g1f3 d7d6 d2d4 c5d4 f3d4 g8f6 ; cp +31``.

How the lines were made (:func:`make_book`): from the start position, each ply picks at random
among the moves a MultiPV search (``multipv`` lines, depth ``pick_depth``) scores within
``window`` cp of its best move; after ``plies`` plies the position is searched to ``depth`` and
kept when |score| ≤ ``max_cp`` and its position (pieces, side to move, castling, en passant)
is not already in the book. So every line is one a strong engine would play, and none gives
either side more than ``max_cp`` centipawns at the end: games from it are decided by the players,
not by the opening.
"""
from __future__ import annotations

import argparse
import random
import sys
from importlib import resources
from pathlib import Path

import chess

#: the book shipped with the project
BOOK = "balanced.txt"


def book_path(name: str = BOOK) -> Path:
    """The path of a book shipped in ``nnue.selfplay/books``."""
    return Path(str(resources.files("nnue.selfplay").joinpath("books", name)))


def read_book(path: str | Path | None = None) -> list[tuple[list[str], int]]:
    """[(UCI moves from the start position, Stockfish cp of the final position (white POV))];
    ``path`` None: the shipped book. ValueError naming the line of an illegal move or a bad
    score; FileNotFoundError for a missing file."""
    path = Path(path) if path is not None else book_path()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such opening book")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        moves_text, _, score = text.partition(";")
        b = chess.Board()
        moves = moves_text.split()
        try:
            for u in moves:
                b.push_uci(u)
            key, val = score.split()
            if key != "cp":
                raise ValueError(f"score {score.strip()!r}: expected 'cp N'")
            cp = int(val)
        except ValueError as e:
            raise ValueError(f"{path}: line {i}: {e}") from None
        if b.is_game_over():
            raise ValueError(f"{path}: line {i}: the game is over after {text!r}")
        out.append((moves, cp))
    if not out:
        raise ValueError(f"{path}: no openings")
    return out


def make_book(engine: str, n: int = 300, plies: int = 8, seed: int = 1, multipv: int = 4, pick_depth: int = 8,
              window: int = 40, depth: int = 14, max_cp: int = 35, tries: int = 20_000,
              progress: bool = True) -> list[tuple[list[str], int]]:
    """Generate ``n`` balanced openings with the UCI engine ``engine`` (see the module
    docstring; Threads=1, Hash=16). Raises RuntimeError when ``tries`` lines give fewer."""
    import chess.engine

    from .mcts import position_key

    rng = random.Random(seed)
    seen, out = set(), []
    with chess.engine.SimpleEngine.popen_uci(engine) as eng:
        eng.configure({"Threads": 1, "Hash": 16})
        for t in range(tries):
            if len(out) >= n:
                break
            b = chess.Board()
            for _ in range(plies):
                infos = eng.analyse(b, chess.engine.Limit(depth=pick_depth), multipv=multipv)
                scored = [(i["pv"][0], i["score"].relative.score(mate_score=100_000)) for i in infos if i.get("pv")]
                best = max(s for _, s in scored)
                b.push(rng.choice([m for m, s in scored if s >= best - window]))
                if b.is_game_over():
                    break
            if b.is_game_over() or position_key(b) in seen:
                continue
            cp = eng.analyse(b, chess.engine.Limit(depth=depth))["score"].white().score(mate_score=100_000)
            if abs(cp) > max_cp:
                continue
            seen.add(position_key(b))
            out.append(([m.uci() for m in b.move_stack], cp))
            if progress:
                print(f"\r{len(out)}/{n} openings kept of {t + 1} lines", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    if len(out) < n:
        raise RuntimeError(f"only {len(out)} balanced openings in {tries} lines")
    return out


def recheck(engine: str, book: list[tuple[list[str], int]], depth: int = 12, max_cp: int = 40,
            ) -> tuple[list[tuple[list[str], int]], int]:
    """Score every line's final position again, each from a cleared hash (``ucinewgame``:
    reproducible with Threads=1, Hash=16), to ``depth``; keep the lines with |score| ≤
    ``max_cp`` with that score. Returns (kept lines, number dropped)."""
    import chess.engine

    kept = []
    with chess.engine.SimpleEngine.popen_uci(engine) as eng:
        eng.configure({"Threads": 1, "Hash": 16})
        for moves, _ in book:
            b = chess.Board()
            for u in moves:
                b.push_uci(u)
            info = eng.analyse(b, chess.engine.Limit(depth=depth), game=object())
            cp = info["score"].white().score(mate_score=100_000)
            if abs(cp) <= max_cp:
                kept.append((moves, cp))
    return kept, len(book) - len(kept)


def write_book(book: list[tuple[list[str], int]], path: str | Path, header: str) -> None:
    from nnue.pipeline.atomic import atomic_write_bytes

    lines = [f"# {h}" for h in header.splitlines()]
    lines += [f"{' '.join(m)} ; cp {cp:+d}" for m, cp in book]
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nnue.selfplay.book",
                                 description="Generate a balanced opening book with a UCI engine (see the module "
                                 "docstring).", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--engine", default="/usr/games/stockfish", help="UCI engine")
    ap.add_argument("-o", "--output", required=True, help="book file to write")
    ap.add_argument("-n", type=int, default=300, help="openings")
    ap.add_argument("--plies", type=int, default=8, help="plies per line")
    ap.add_argument("--seed", type=int, default=1, help="random seed")
    ap.add_argument("--depth", type=int, default=14, help="depth of the final balance check")
    ap.add_argument("--pick-depth", type=int, default=8, help="depth of the MultiPV search that picks each move")
    ap.add_argument("--max-cp", type=int, default=35, help="keep a line when |final score| is at most this")
    ap.add_argument("--window", type=int, default=40, help="candidate moves: within this many cp of the best")
    ap.add_argument("--recheck", metavar="BOOK", help="instead: score BOOK's lines again from a cleared hash to "
                    "--depth, keep those within --max-cp, write them to -o")
    a = ap.parse_args(argv)
    if a.recheck:
        old_header = [ln[2:] for ln in Path(a.recheck).read_text().splitlines() if ln.startswith("# ")]
        book, dropped = recheck(a.engine, read_book(a.recheck), a.depth, a.max_cp)
        header = old_header + [f"Rechecked: python -m nnue.selfplay.book --recheck BOOK --depth {a.depth} --max-cp "
                               f"{a.max_cp}: each final position scored from a cleared hash (ucinewgame, Threads=1, "
                               f"Hash=16) to depth {a.depth}; {dropped} lines beyond {a.max_cp} cp dropped, "
                               f"{len(book)} kept with these scores."]
        write_book(book, a.output, "\n".join(header))
        return 0
    book = make_book(a.engine, a.n, a.plies, a.seed, pick_depth=a.pick_depth, depth=a.depth, max_cp=a.max_cp,
                     window=a.window)
    header = (f"nnue-forge balanced opening book: {len(book)} lines of {a.plies} plies from the start position.\n"
              f"Made by: python -m nnue.selfplay.book --engine {Path(a.engine).name} -n {a.n} --plies {a.plies} "
              f"--seed {a.seed} --pick-depth {a.pick_depth} --depth {a.depth} --max-cp {a.max_cp} --window {a.window}\n"
              f"Each ply: a random move among the engine's 4 MultiPV lines at depth {a.pick_depth} "
              f"within {a.window} cp "
              f"of the "
              f"best; kept when |score| <= {a.max_cp} cp at depth {a.depth} (white POV, the number after 'cp').")
    write_book(book, a.output, header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
