"""Quality of two nets on Stockfish-scored positions (a step of bench/loop_selfplay.sh).

``python -m bench.loop_quality OLD NEW PLAIN [--records N]``: the first N records (default 5,000)
of a Stockfish ``.plain`` dump that neither net was trained on; each net's integer evals (cp,
side to move, :func:`nnue.selfplay.mcts.evaluate_packed`) against the dump's scores: Spearman ρ,
and the mean |eval − score| over positions with |score| ≤ 1,000 cp. Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json

import chess
import numpy as np
from scipy.stats import spearmanr

from nnue.inference import load
from nnue.pipeline.board import pack_board
from nnue.selfplay.mcts import evaluate_packed


def read_plain(path: str, limit: int) -> tuple[list[bytes], np.ndarray]:
    boards, scores, rec = [], [], {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line == "e":
                if "fen" in rec and "score" in rec:
                    boards.append(pack_board(chess.Board(rec["fen"])))
                    scores.append(int(rec["score"]))
                rec = {}
                if len(boards) >= limit:
                    break
            elif " " in line:
                k, v = line.split(" ", 1)
                rec[k] = v
    return boards, np.asarray(scores, dtype=np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("plain")
    ap.add_argument("--records", type=int, default=5000)
    a = ap.parse_args()
    boards, score = read_plain(a.plain, a.records)
    out = {"positions": len(boards), "source": a.plain}
    quiet = np.abs(score) <= 1000
    for name, path in (("old", a.old), ("new", a.new)):
        net = load(path)
        ev = np.concatenate([np.asarray(evaluate_packed(net, boards[i:i + 4096]), dtype=np.float64)
                             for i in range(0, len(boards), 4096)])
        out[name] = {"net": path, "spearman": round(float(spearmanr(ev, score).statistic), 4),
                     "mean_abs_cp_quiet": round(float(np.mean(np.abs(ev[quiet] - score[quiet]))), 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
