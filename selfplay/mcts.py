"""PUCT Monte-Carlo tree search over python-chess boards, with leaves evaluated in batches by
an integer net (:mod:`nnue.inference`) across many trees (one per concurrent game).

* **Values** are from the side to move's POV, in [−1, 1]. A leaf's value is
  ``v = 2σ(eval/SCALE) − 1 = tanh(eval / (2·SCALE))``, eval the net's integer centipawns (side
  to move), SCALE the net's ``QuantScheme.scale`` (400) unless configured.
  :func:`value_to_cp` maps a value back: ``cp = SCALE·ln((1 + v)/(1 − v))``, clamped to
  ±:data:`CP_LIMIT`.
* **Terminal nodes** get exact values and are never evaluated by the net: −1 when the side to
  move is mated; 0 for stalemate, insufficient material (python-chess's
  ``is_insufficient_material``), the fifty-move rule (halfmove clock ≥ 100 with a legal move)
  and repetition. In the tree, a position that already occurred since the last irreversible
  move (in the game or on the search path) counts as a draw (twofold, the usual engine rule);
  the game itself ends at threefold repetition.
* **Selection** (PUCT): child i maximises ``Q_i + c_puct · P_i · √N / (1 + n_i)``, Q_i the
  child's value negated to the parent's POV; an unvisited child takes the parent's value minus
  ``fpu`` (first-play urgency reduction).
* **Priors** (``priors=``): ``"uniform"`` (1/moves); ``"captures"`` (default): weight 1 for
  every move, + 1 + victim/2 for a capture (victim P 1, N B 3, R 5, Q 9; en passant a pawn),
  + 2 for a promotion; ``"checks"``: as ``captures``, + 1.5 for a move that gives check (python-
  chess's ``gives_check``). Normalised to sum 1. Optional Dirichlet noise at the root (``noise``,
  ``noise_alpha``), off by default.
* **Moves**: an expansion's legal moves, and its "captures" or "checks" priors, come from
  :func:`nnue.selfplay.movegen.legal_moves` (compiled; python-chess's ``board.legal_moves`` in
  python-chess's order, the priors bit for bit), or with ``Tree.fast_movegen = False`` from
  python-chess and :func:`heuristic_priors`: the same search either way.
* **Backup**: after each leaf, every node on the path is recomputed from its visited children
  by the configured :mod:`~nnue.selfplay.backup` operator (mean, max, power_mean).
* **Leaf evals**: a tree whose net has incremental support (every kind, ``sfnnv5`` included; a
  residual net only on the ``material`` base) keeps one
  :class:`~nnue.inference.IncrementalAccumulator` from its root and evaluates each leaf in line:
  the accumulator is brought from the previous leaf's path to this one by popping to the common
  prefix of moves and pushing the rest (a child's accumulators are its parent's plus the move's
  feature deltas, never a refresh, except where a king move changes the king's table slice:
  every own king move for HalfKAv2_hm, hence for ``sfnnv5``), then
  :meth:`~nnue.inference.IncrementalAccumulator.evaluate`. Memory is one accumulator pair per
  ply of the deepest path. The evals are the integers :func:`nnue.inference.evaluate` gives for
  the leaf's packed board (tests/selfplay/test_incremental_search.py checks every one), so the
  search, its games and its dumps are the same either way.
* **Batching** (the other nets, or ``BatchSearch(leaf_eval="batch")``): :class:`BatchSearch`
  steps many trees one simulation at a time; each round gathers at most one leaf per tree and
  evaluates each net's leaves in one :func:`nnue.inference.evaluate` call, so the leaf-batch
  size is the number of trees that need an eval in that round. A simulation that ends in a
  terminal node costs no eval, and the tree runs its next simulation in the same round.
"""
from __future__ import annotations

import bisect
import math
import random
import time
from dataclasses import dataclass

import chess
import numpy as np
import torch

from nnue.inference import IncrementalAccumulator, evaluate, kinds, residual
from nnue.pipeline.board import pack_board

from .backup import Backup, MeanBackup, make_backup
from .movegen import legal_moves

#: python-chess's record of a position's state (what ``Board.pop`` restores): a tree keeps one per
#: expanded node and sets the board to a leaf's parent in one step instead of pushing the whole
#: path (``Tree.step``). A private class of python-chess (1.10, 1.11); without it, the path is pushed.
_BoardState = getattr(chess, "_BoardState", None)

#: |cp| written for a value of ±1 that is not a proven mate (below the mate-score bound 31754)
CP_LIMIT = 10000
_VICTIM = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}
PRIORS = ("uniform", "captures", "checks")


def eval_to_value(cp, scale: float = 400.0):
    """Centipawns (stm POV) -> value in [−1, 1]: tanh(cp / (2·scale)) = 2σ(cp/scale) − 1."""
    return np.tanh(np.asarray(cp, dtype=np.float64) / (2.0 * scale))


def value_to_cp(v: float, scale: float = 400.0) -> int:
    """Value in [−1, 1] -> centipawns: scale·ln((1+v)/(1−v)), rounded, clamped to ±CP_LIMIT."""
    v = max(-1.0, min(1.0, float(v)))
    if abs(v) >= 1.0:
        return CP_LIMIT if v > 0 else -CP_LIMIT
    cp = scale * math.log((1.0 + v) / (1.0 - v))
    return int(max(-CP_LIMIT, min(CP_LIMIT, round(cp))))


def position_key(b: chess.Board) -> tuple:
    """What makes two positions the same for repetition (FIDE Laws 9.2.3): pieces, side to move,
    castling rights, and the en-passant square only when an en-passant capture is legal (a
    square no pawn can use does not make a position new). The key python-chess's
    ``is_repetition`` compares (``Board._transposition_key``)."""
    return (b.pawns, b.knights, b.bishops, b.rooks, b.queens, b.kings, b.occupied_co[chess.WHITE],
            b.turn, b.clean_castling_rights(), b.ep_square if b.ep_square is not None and b.has_legal_en_passant()
            else None)


@dataclass
class SearchConfig:
    """Search settings. nodes: simulations per move (root visits). c_puct: exploration constant.
    fpu: first-play-urgency reduction. priors: "captures" | "checks" | "uniform". backup: "mean" | "max" |
    "power_mean" with p = p_base + p_per_visit·visits or a fixed p_fixed. scale: eval SCALE (None:
    the net's). noise/noise_alpha: Dirichlet noise fraction and concentration at the root (0 =
    off). sample_rate: probability of keeping each evaluated non-root node as a training position
    (seed 003: 1/8192; 0 = off). contempt: a draw inside the tree (repetition, fifty-move rule,
    stalemate, insufficient material) is worth −contempt to the root's side to move and
    +contempt to the other, in value units (0 = off: draws are 0; matches use 0.1 so that a side
    that thinks itself better does not take a repetition the net cannot tell from a win)."""

    nodes: int = 64
    c_puct: float = 1.5
    fpu: float = 0.2
    priors: str = "captures"
    backup: str = "mean"
    p_base: float = 1.0
    p_per_visit: float = 0.01
    p_fixed: float | None = None
    scale: float | None = None
    noise: float = 0.0
    noise_alpha: float = 0.3
    sample_rate: float = 0.0
    contempt: float = 0.0

    def __post_init__(self):
        if self.nodes < 1:
            raise ValueError(f"nodes={self.nodes}: at least 1")
        if self.priors not in PRIORS:
            raise ValueError(f"priors={self.priors!r}: one of {', '.join(PRIORS)}")
        if not 0.0 <= self.sample_rate <= 1.0:
            raise ValueError(f"sample rate {self.sample_rate}: a probability in [0, 1]")
        if not 0.0 <= self.contempt < 1.0:
            raise ValueError(f"contempt {self.contempt}: a value in [0, 1)")
        make_backup(self.backup, self.p_base, self.p_per_visit, self.p_fixed)  # validates


class Node:
    """One position of the tree. q: value (this node's stm POV); n: visits; moves/priors/children
    set at expansion; terminal: exact value fixed; sample: (fen, ply) when chosen for
    --sample-search; key: its :func:`position_key` (set at expansion); state: python-chess's
    board state at the node (set at expansion, see :meth:`Tree.step`); visited: indices of the
    children made so far, ascending, and kids: those children in the same order; order: child
    indices by prior, highest first (ties by index), and next_new: the first entry of ``order``
    without a child (for :meth:`Tree._select`)."""

    __slots__ = ("moves", "priors", "children", "n", "q", "terminal", "sample", "key", "state", "visited",
                 "order", "next_new", "kids")

    def __init__(self):
        self.moves = None
        self.priors = None
        self.children = None
        self.n = 0
        self.q = 0.0
        self.terminal = False
        self.sample = None
        self.key = None
        self.state = None
        self.visited = None
        self.kids = None
        self.order = None
        self.next_new = 0


def heuristic_priors(board: chess.Board, moves: list[chess.Move], checks: bool = False) -> list[float]:
    """The "captures" priors of the module docstring (captures and promotions first), and with
    ``checks`` the "checks" priors (checks too). A capture is python-chess's ``is_capture``
    (an enemy piece on the to-square, or en passant), tested on the bitboards directly."""
    w = []
    them = board.occupied_co[not board.turn]
    ep = board.ep_square
    for m in moves:
        x = 1.0
        to = m.to_square
        if them >> to & 1:
            x += 1.0 + 0.5 * _VICTIM[board.piece_type_at(to)]
        elif to == ep and board.is_en_passant(m):
            x += 1.0 + 0.5 * 1
        if m.promotion:
            x += 2.0
        if checks and board.gives_check(m):
            x += 1.5
        w.append(x)
    s = sum(w)
    return [x / s for x in w]


def terminal_value(board: chess.Board, moves: list[chess.Move], seen) -> float | None:
    """The exact value of a position for its side to move, or None when it is not terminal.
    ``seen``: a container of :func:`position_key` values that make this position a repetition."""
    if not moves:
        return -1.0 if board.is_check() else 0.0
    if board.halfmove_clock >= 100 or board.is_insufficient_material():
        return 0.0
    if seen and position_key(board) in seen:
        return 0.0
    return None


class Tree:
    """One search from ``board`` (a python-chess board with the game's move stack; it is pushed
    and popped during the search and left as it was). ``history``: position keys of the game
    since its last irreversible move, excluding the root (for repetitions). ``cache``: a dict
    from :func:`position_key` to (legal moves, priors before root noise, net eval) of positions
    that earlier searches with the same net and priors expanded (their :attr:`expanded`): a
    leaf found there takes them instead of generating its moves and calling the net. The key
    holds everything the legal moves depend on (pieces, side to move, castling rights, a legal
    en-passant square), and the eval depends on the pieces and side to move only, so the search
    is the same with or without it; whether the leaf is terminal (repetition, fifty-move rule)
    is still decided from the path."""

    #: look leaves up in :attr:`expanded` (transpositions in this tree) and ``cache`` (False:
    #: generate and evaluate every leaf; the same search, slower: tests compare the two)
    reuse = True
    #: generate an expansion's legal moves (and "captures"/"checks" priors) with the compiled generator
    #: :func:`nnue.selfplay.movegen.legal_moves` (False: python-chess's ``board.legal_moves`` and
    #: :func:`heuristic_priors`; the same moves in the same order and the same priors, slower:
    #: tests compare the two). Used for ``chess.Board`` itself (not subclasses: variants) from a
    #: root that python-chess calls valid (``Board.is_valid``).
    fast_movegen = True

    def __init__(self, board: chess.Board, cfg: SearchConfig, backup: Backup, scale: float,
                 history=(), rng: random.Random | None = None, cache: dict | None = None):
        self.board = board
        self.root_turn = board.turn
        self.cfg = cfg
        self.backup = backup
        self.scale = scale
        self.root = Node()
        self.history = list(history)
        self.rng = rng or random.Random(0)
        self.samples: list[Node] = []
        self.pending = None  # (path, moves, priors) of the leaf waiting for its eval
        self.evals = 0  # leaves given a value: net evals + cache hits
        self.cache_hits = 0
        # position key -> (legal moves, priors before noise, net eval) of every leaf expanded
        # here; ``cache``: the same from earlier searches of this net and priors (see make_tree)
        self.expanded: dict = {}
        self.cache = cache
        self.acc: IncrementalAccumulator | None = None  # set by use_incremental
        self.snapshots = _BoardState is not None
        if self.snapshots:
            self.root.state = _BoardState(board)
        self._acc_moves: list[chess.Move] = []  # the moves pushed on self.acc, root first
        self.eval_seconds = 0.0  # inside in-line (incremental) evals
        # the compiled generator equals python-chess's on valid positions and those reached from
        # one by legal moves (an invalid root, e.g. without a king, takes python-chess's)
        self.movegen = self.fast_movegen and type(board) is chess.Board and board.is_valid()

    def use_incremental(self, net) -> None:
        """Evaluate this tree's leaves in line with an incremental accumulator of ``net`` from
        the root (see the module docstring); raises ValueError for a net without incremental
        support (:func:`incremental_ok`)."""
        if not incremental_ok(net):
            raise ValueError(f"the incremental accumulator does not evaluate this {net.kind} net")
        self.acc = IncrementalAccumulator(net, pack_board(self.board))
        self._acc_moves = []

    def _eval_incremental(self, moves: list[chess.Move]) -> int:
        """The leaf's integer eval (cp, its stm POV) from the accumulator, moved from the last
        leaf's path to ``moves`` (the path from the root): pop to the common prefix, push the
        rest. Moves are compared by identity: each node's move list is built once, so equal
        objects at every depth mean the same nodes."""
        acc, done = self.acc, self._acc_moves
        k, n = 0, min(len(done), len(moves))
        while k < n and done[k] is moves[k]:
            k += 1
        for _ in range(len(done) - k):
            acc.pop()
        del done[k:]
        for m in moves[k:]:
            acc.push(m)
            done.append(m)
        return acc.evaluate()

    @property
    def done(self) -> bool:
        return self.root.n >= self.cfg.nodes or (self.root.terminal and self.root.n > 0)

    # -------------------------------------------------------------------------- simulation
    def _select_scan(self, node: Node) -> int:
        """The child maximising the PUCT score, every child scored (the first one by index
        among equal scores): the definition that :meth:`_select` follows."""
        c = self.cfg.c_puct * math.sqrt(max(node.n, 1))
        fpu_q = node.q - self.cfg.fpu
        best, best_i = -math.inf, 0
        children, priors = node.children, node.priors
        for i, p in enumerate(priors):
            ch = children[i]
            if ch is None or ch.n == 0:
                s = fpu_q + c * p
            else:
                s = -ch.q + c * p / (1 + ch.n)
            if s > best:
                best, best_i = s, i
        return best_i

    def _select(self, node: Node) -> int:
        """:meth:`_select_scan`'s pick, scoring only the visited children.

        Unvisited children score ``fpu_q + c·P``, so the best of them is the one of highest
        prior (lowest index among equal priors): ``node.order`` lists the children by prior,
        and only the visited children (``node.visited``) are scored one by one. Distinct
        priors of one node differ by at least 0.5/Σw ≥ 2.7e-4 ("captures"/"checks"/"uniform";
        Σw < 1,900 for 218 moves), so with c_puct ≥ 0.01 (c = c_puct·√N) their scores stay
        apart by far more than a rounding error (values are at most a few units: ulp < 1e-14):
        the same pick as scoring every child (tests/selfplay/test_incremental_search.py). The
        root with Dirichlet noise (priors arbitrarily close) and c_puct < 0.01 take the scan."""
        if node.order is None:
            if node is self.root and self.cfg.noise > 0 or self.cfg.c_puct < 0.01:
                return self._select_scan(node)
            priors = node.priors
            node.order = sorted(range(len(priors)), key=priors.__getitem__, reverse=True)  # stable
            node.visited = []
            node.kids = []
        c = self.cfg.c_puct * math.sqrt(max(node.n, 1))
        fpu_q = node.q - self.cfg.fpu
        children, priors = node.children, node.priors
        order, k = node.order, node.next_new
        while k < len(order) and children[order[k]] is not None:
            k += 1
        node.next_new = k
        if k < len(order):
            best_i = order[k]
            best = fpu_q + c * priors[best_i]
        else:
            best, best_i = -math.inf, len(order)
        for i, ch in zip(node.visited, node.kids):
            p = priors[i]
            s = fpu_q + c * p if ch.n == 0 else -ch.q + c * p / (1 + ch.n)
            if s > best or (s == best and i < best_i):
                best, best_i = s, i
        return best_i

    def step(self):
        """Run simulations until one reaches a leaf that needs a net eval (returns its packed
        board, 32 bytes) or the search is done (returns None)."""
        snapshots = self.snapshots
        while not self.done:
            board, node, path = self.board, self.root, [self.root]
            line = []  # the moves from the root
            pushed = 0
            parent = None
            while node.moves is not None and not node.terminal:
                i = self._select(node)
                child = node.children[i]
                if child is None:
                    child = node.children[i] = Node()
                    if node.visited is not None:
                        j = bisect.bisect_left(node.visited, i)
                        node.visited.insert(j, i)
                        node.kids.insert(j, child)
                move = node.moves[i]
                if not snapshots:
                    board.push(move)
                    pushed += 1
                line.append(move)
                parent, node = node, child
                path.append(node)
            if snapshots and parent is not None and not node.terminal:
                # the board at the leaf: its parent's saved state, then the last move
                parent.state.restore(board)
                board.push(line[-1])
                pushed = 1
            try:
                if node.terminal:
                    self._backup(path)
                    continue
                key = position_key(board)
                hit = None
                if self.reuse:
                    hit = self.expanded.get(key)
                    if hit is None and self.cache is not None:
                        hit = self.cache.get(key)
                fast_priors = None
                if hit is not None:
                    moves = hit[0]
                elif self.movegen:
                    moves, fast_priors = legal_moves(board, None if self.cfg.priors == "uniform" else self.cfg.priors)
                else:
                    moves = list(board.legal_moves)
                seen = None
                window = board.halfmove_clock
                if line and window >= 4:  # a repetition needs 4 reversible plies at least
                    # positions since the last irreversible move: the game's, then the path's
                    seen = set((self.history + [p.key for p in path[:-1]])[-window:])
                tv = terminal_value(board, moves, seen)
                if tv == 0.0 and self.cfg.contempt:  # a draw: worth -contempt to the root's side
                    tv = -self.cfg.contempt if board.turn == self.root_turn else self.cfg.contempt
                if tv is not None:
                    node.terminal, node.q, node.moves = True, tv, []
                    self._backup(path)
                    continue
                node.key = key
                if snapshots:
                    node.state = _BoardState(board)
                if hit is not None:
                    priors = hit[1]
                elif fast_priors is not None:
                    priors = fast_priors
                elif self.cfg.priors == "uniform":
                    priors = [1.0 / len(moves)] * len(moves)
                else:
                    priors = heuristic_priors(board, moves, self.cfg.priors == "checks")
                base_priors = priors
                if node is self.root and self.cfg.noise > 0:
                    eta = np.random.default_rng(self.rng.getrandbits(32)).dirichlet(
                        [self.cfg.noise_alpha] * len(moves))
                    priors = [(1 - self.cfg.noise) * p + self.cfg.noise * float(e) for p, e in zip(priors, eta)]
                if node is not self.root and self.cfg.sample_rate > 0 and self.rng.random() < self.cfg.sample_rate:
                    node.sample = (board.fen(), board.ply(), board.turn)
                    self.samples.append(node)
                self.pending = (path, moves, priors, key, base_priors)
                if hit is not None:
                    self.cache_hits += 1
                    self.finish(hit[2])
                    continue
                if self.acc is not None:
                    t0 = time.perf_counter()
                    cp = self._eval_incremental(line)
                    self.eval_seconds += time.perf_counter() - t0
                    self.finish(cp)
                    continue
                return pack_board(board)
            finally:
                for _ in range(pushed):
                    board.pop()
                if snapshots and pushed:
                    self.root.state.restore(board)
        return None

    def finish(self, cp: int) -> None:
        """Give the pending leaf its net eval (centipawns, the leaf's stm POV) and back it up."""
        path, moves, priors, key, base_priors = self.pending
        self.pending = None
        self.expanded[key] = (moves, base_priors, cp)
        leaf = path[-1]
        leaf.moves, leaf.priors, leaf.children = moves, priors, [None] * len(moves)
        leaf.q = float(eval_to_value(cp, self.scale))
        self.evals += 1
        self._backup(path, evaluated=True)

    def _backup(self, path: list[Node], evaluated: bool = False) -> None:
        leaf = path[-1]
        leaf.n += 1
        value = self.backup.value
        mean = type(self.backup) is MeanBackup
        for node in reversed(path[:-1]):
            node.n += 1
            children = node.children
            # the visited children in index order (all of them, when _select scored every one)
            chs = [ch for ch in (children if node.visited is None else node.kids) if ch is not None and ch.n > 0]
            if mean:  # MeanBackup.value written out: the same products, summed in the same order
                node.q = max(-1.0, min(1.0, sum([-ch.q * ch.n for ch in chs]) / sum([ch.n for ch in chs])))
            else:
                node.q = value([-ch.q for ch in chs], [ch.n for ch in chs], node.n)

    # ------------------------------------------------------------------------------ result
    def best_index(self) -> int:
        """The most visited root move (ties: higher value, then higher prior)."""
        r = self.root
        best, key = 0, None
        for i, ch in enumerate(r.children or []):
            k = (ch.n, -ch.q, r.priors[i]) if ch is not None else (0, -2.0, r.priors[i])
            if key is None or k > key:
                best, key = i, k
        return best

    def best_move(self) -> chess.Move:
        return self.root.moves[self.best_index()]

    def value(self) -> float:
        """The root's value, its stm POV."""
        return self.root.q

    def sampled_positions(self) -> list[tuple[str, str, int, int, bool]]:
        """--sample-search: (fen, move uci, score cp stm POV, ply, white to move) of the sampled
        non-root nodes, scored by their own subtree values; the move is the node's most visited
        child, or its highest-prior move when it has none. Nodes that became terminal are left
        out."""
        out = []
        for node in self.samples:
            if node.terminal or not node.moves:
                continue
            fen, ply, turn = node.sample
            best, key = 0, None
            for i, ch in enumerate(node.children):
                k = (ch.n if ch is not None else 0, node.priors[i])
                if key is None or k > key:
                    best, key = i, k
            b = chess.Board(fen, chess960=self.board.chess960)
            out.append((fen, b.uci(node.moves[best]), value_to_cp(node.q, self.scale), ply, turn))
        return out


def check_searchable(net, path) -> None:
    """Raise ValueError (one line, naming ``path``) when our search cannot evaluate ``net``: a
    residual net on a Stockfish base needs Stockfish's static eval at every node, which
    :func:`nnue.inference.evaluate` does not compute (the ``material`` base it does; plain,
    deep and tiny nets need nothing)."""
    from nnue.inference import residual

    r = residual.of(net)
    if r is not None and r["base"] != "material":
        raise ValueError(f"{path}: a residual net on the {r['base']} base (eval = {r['base']} + {r['alpha']:g}·net): "
                         f"our search evaluates every node with nnue.inference, which computes the material base "
                         f"only; play it in an engine that computes its base")


def incremental_ok(net) -> bool:
    """Whether a tree can evaluate ``net``'s leaves with an incremental accumulator: a kind with
    incremental support, and for a residual net the ``material`` base (which the accumulator's
    eval computes from the position, as :func:`nnue.inference.evaluate` does)."""
    if not kinds.of(net).incremental:
        return False
    r = residual.of(net)
    return r is None or r["base"] == "material"


def evaluate_packed(net, packed: list[bytes]) -> list[int]:
    """Integer evals (cp, stm POV) of packed boards in one :func:`nnue.inference.evaluate` call."""
    if not packed:
        return []
    arr = np.frombuffer(b"".join(packed), dtype=np.uint8).reshape(-1, 32)
    return evaluate(net, torch.from_numpy(arr.copy())).tolist()


@dataclass
class BatchStats:
    """Counters of a :class:`BatchSearch`: rounds, leaves given a value (``evals``: net evals
    plus ``cache_hits``, positions an earlier search had evaluated), net calls (batches),
    simulations (root visits) and seconds spent inside the net calls."""

    rounds: int = 0
    evals: int = 0
    cache_hits: int = 0
    batches: int = 0
    simulations: int = 0
    eval_seconds: float = 0.0

    @property
    def mean_batch(self) -> float:
        """Positions per net call (leaves evaluated in line or reused are in no call)."""
        return (self.evals - self.cache_hits) / self.batches if self.batches else 0.0


LEAF_EVALS = ("auto", "incremental", "batch")


class BatchSearch:
    """Runs many :class:`Tree` searches together: ``run(trees_with_nets)`` steps every tree one
    simulation per round and evaluates each net's leaves in one batch, until all are done.

    leaf_eval: ``"auto"`` (default) evaluates the leaves of each tree whose net allows it
    (:func:`incremental_ok`) in line with an incremental accumulator and batches the rest;
    ``"incremental"`` requires it (ValueError for a net without); ``"batch"`` batches every
    leaf (the path before incremental search; the results are the same)."""

    def __init__(self, leaf_eval: str = "auto"):
        if leaf_eval not in LEAF_EVALS:
            raise ValueError(f"leaf_eval {leaf_eval!r}: one of {', '.join(LEAF_EVALS)}")
        self.leaf_eval = leaf_eval
        self.stats = BatchStats()

    def run(self, jobs: list[tuple[Tree, object]]) -> None:
        active = list(jobs)
        before = sum(t.root.n for t, _ in jobs)
        if self.leaf_eval != "batch":
            for tree, net in jobs:
                if tree.acc is None and (self.leaf_eval == "incremental" or incremental_ok(net)):
                    tree.use_incremental(net)
        counts_before = [(tree, tree.evals, tree.cache_hits, tree.eval_seconds) for tree, _ in jobs]
        while active:
            groups: dict[int, tuple[object, list[Tree], list[bytes]]] = {}
            still = []
            for tree, net in active:
                packed = tree.step()
                if packed is None:
                    continue
                g = groups.setdefault(id(net), (net, [], []))
                g[1].append(tree)
                g[2].append(packed)
                still.append((tree, net))
            for net, trees, packed in groups.values():
                t0 = time.perf_counter()
                cps = evaluate_packed(net, packed)
                self.stats.eval_seconds += time.perf_counter() - t0
                for tree, cp in zip(trees, cps):
                    tree.finish(int(cp))
                self.stats.batches += 1
            self.stats.rounds += 1
            active = still
        for tree, evals, hits, seconds in counts_before:
            self.stats.evals += tree.evals - evals
            self.stats.cache_hits += tree.cache_hits - hits
            self.stats.eval_seconds += tree.eval_seconds - seconds
        self.stats.simulations += sum(t.root.n for t, _ in jobs) - before


def make_tree(board: chess.Board, cfg: SearchConfig, net, history=(), rng=None, cache: dict | None = None) -> Tree:
    """A :class:`Tree` for ``board`` searched with ``net`` (scale from the net unless cfg.scale).
    cache: the :attr:`Tree.expanded` of earlier searches with the same net and ``cfg.priors``
    (see :class:`Tree`)."""
    scale = float(cfg.scale if cfg.scale is not None else net.scheme.scale)
    return Tree(board, cfg, make_backup(cfg.backup, cfg.p_base, cfg.p_per_visit, cfg.p_fixed), scale, history, rng,
                cache)
