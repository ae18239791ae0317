"""Games between searches: openings, game end and adjudication, many games batched together,
and the Stockfish ``.plain`` records they produce.

Game end (checked after every move): checkmate; stalemate, insufficient material, the
fifty-move rule (halfmove clock 100) and threefold repetition are draws. Adjudication
(:class:`Adjudication`, the rules our shared Stockfish self-play used, ../shared/data/README.md):
a win after ``win_plies`` consecutive plies whose search score has |cp| ≥ ``win_cp`` with the
same sign (white POV), a draw after ``draw_plies`` consecutive plies with |cp| ≤ ``draw_cp`` once
the game is past ply ``draw_min_ply``, and a draw at ply ``max_ply``. The result is then written
as if the game had ended there.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import chess

from nnue.pipeline.chessrules import RecordError, check_board, read_board

from .mcts import BatchSearch, SearchConfig, make_tree, position_key, value_to_cp

#: how many searches' leaves a new tree may reuse (per net and priors): 2, this side's previous
#: search and the opponent's (self-play, demo net, 64 nodes: 47 % of the leaves found there; 4
#: searches: 50 %, and no faster)
REUSE_SEARCHES = 2


@dataclass(frozen=True)
class Adjudication:
    """See the module docstring; a rule with 0 plies (or max_ply 0) is off."""

    win_cp: int = 2500
    win_plies: int = 8
    draw_cp: int = 8
    draw_plies: int = 12
    draw_min_ply: int = 80
    max_ply: int = 400

    def to_dict(self) -> dict:
        return dict(self.__dict__)


#: the adjudication of matches (``nnue match``, the retrain gate): a win once both searches
#: agree for 6 plies that one side is ahead by 1,000 cp or more, a draw after 8 plies within
#: ±10 cp past ply 40, a draw at ply 300. Tuned on nets of the demo recipe in our search
#: (docs/selfplay.md, "Matches that measure something"): with self-play's rules (2,500 cp, which our
#: searches' scores rarely reach) most games ran on until a repetition.
MATCH_ADJUDICATION = Adjudication(win_cp=1000, win_plies=6, draw_cp=10, draw_plies=8, draw_min_ply=40, max_ply=300)


def parse_adjudication(spec: str | None, default: Adjudication | None = None) -> Adjudication:
    """``win=CP/PLIES,draw=CP/PLIES/MINPLY,maxply=N`` (any subset; the rest from ``default``,
    self-play's rules when None), or ``none`` (no adjudication, no ply limit). ValueError
    naming the bad part."""
    default = default or Adjudication()
    if spec is None or spec == "":
        return default
    if spec.strip().lower() == "none":
        return Adjudication(0, 0, 0, 0, 0, 0)
    kw = {}
    for part in spec.split(","):
        key, _, val = part.strip().partition("=")
        try:
            nums = [int(x) for x in val.split("/")]
            if any(x < 0 for x in nums):
                raise ValueError
            if key == "win" and len(nums) == 2:
                kw.update(win_cp=nums[0], win_plies=nums[1])
            elif key == "draw" and len(nums) == 3:
                kw.update(draw_cp=nums[0], draw_plies=nums[1], draw_min_ply=nums[2])
            elif key == "maxply" and len(nums) == 1:
                kw.update(max_ply=nums[0])
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"--adjudicate {part!r}: expected win=CP/PLIES, draw=CP/PLIES/MINPLY, maxply=N "
                             f"(non-negative integers) or none") from None
    return Adjudication(**{**default.to_dict(), **kw})


# ------------------------------------------------------------------------------------ openings
def read_openings(path: str | Path, chess960: bool = False) -> list[str]:
    """FENs (or EPDs: the first four fields, counters ``0 1``), one a line; blank lines and
    lines starting with ``#`` skipped. Raises ValueError naming the line of an illegal or
    unparsable position, FileNotFoundError for a missing file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such opening file")
    out = []
    for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.split(";")[0].split()
        fen = " ".join(fields[:6]) if len(fields) >= 6 and fields[4].isdigit() and fields[5].isdigit() \
            else " ".join(fields[:4] + ["0", "1"])
        try:
            b = read_board(fen, chess960=chess960)
        except ValueError as e:
            raise ValueError(f"{path}: line {i}: bad FEN {text!r}: {e}") from None
        try:
            check_board(b)  # as nnue pack checks its records
        except RecordError as e:
            raise ValueError(f"{path}: line {i}: illegal position {text!r}: {e.reason}") from None
        if b.is_game_over():
            raise ValueError(f"{path}: line {i}: the game is already over in {text!r}")
        out.append(b.fen())
    if not out:
        raise ValueError(f"{path}: no positions")
    return out


def make_opening(rng: random.Random, random_plies: int = 8, chess960: bool = False,
                 start_fen: str | None = None) -> chess.Board:
    """A start position: ``start_fen`` (or the standard start, or a random Chess960 start), then
    ``random_plies`` uniformly random legal moves; drawn again (up to 100 times) when the game
    ends inside them. The board's move stack holds the random plies."""
    for _ in range(100):
        if start_fen is not None:
            b = chess.Board(start_fen, chess960=chess960 or chess.Board(start_fen).has_chess960_castling_rights())
        elif chess960:
            b = chess.Board.from_chess960_pos(rng.randrange(960))
        else:
            b = chess.Board()
        ok = True
        for _ in range(random_plies):
            moves = list(b.legal_moves)
            if not moves:
                ok = False
                break
            b.push(rng.choice(moves))
        if ok and not b.is_game_over() and b.halfmove_clock < 100:
            return b
    raise ValueError(f"could not make an opening with {random_plies} random plies that does not end the game")


# ---------------------------------------------------------------------------------------- games
@dataclass
class Player:
    """A side in a game: an integer net searched with ``cfg``; ``name`` for PGN headers."""

    net: object
    cfg: SearchConfig
    name: str = "net"


@dataclass
class Game:
    """One game in progress. records: (fen, move uci, score cp stm POV, ply, white to move) of
    every searched position; samples: --sample-search positions, the same tuples; result: white
    POV 1/0/−1 once over; reason: how it ended."""

    board: chess.Board
    white: Player
    black: Player
    adjudication: Adjudication = field(default_factory=Adjudication)
    tag: object = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    records: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    result: int | None = None
    reason: str = ""
    start_fen: str = ""
    opening_moves: list = field(default_factory=list)
    _history: list = field(default_factory=list)  # position keys since the last irreversible move
    _win_run: int = 0
    _win_sign: int = 0
    _draw_run: int = 0
    tree: object = None
    _expanded: dict = field(default_factory=dict)  # (id(net), priors) -> the last searches' Tree.expanded

    def __post_init__(self):
        # the start position is the board without its opening plies
        b = self.board.copy()
        self.opening_moves = list(b.move_stack)
        while b.move_stack:
            b.pop()
        self.start_fen = b.fen()
        self._history = [position_key(self.board)]
        self._check_end()

    @property
    def over(self) -> bool:
        return self.result is not None

    def player(self) -> Player:
        return self.white if self.board.turn == chess.WHITE else self.black

    def new_tree(self):
        p = self.player()
        # leaves expanded by the last two searches with this net and priors (in self-play: this
        # side's previous search and the opponent's), as the new tree's cache (mcts.Tree)
        recent = self._expanded.get((id(p.net), p.cfg.priors), ())
        cache = {k: v for d in recent for k, v in d.items()} if recent else None
        self.tree = make_tree(self.board, p.cfg, p.net, history=self._history[:-1],
                              rng=random.Random(self.rng.getrandbits(64)), cache=cache)
        return self.tree, p.net

    def play_searched(self) -> None:
        """Play the finished tree's best move; record the position, its score and samples."""
        t, self.tree = self.tree, None
        p = self.player()
        recent = self._expanded.setdefault((id(p.net), p.cfg.priors), [])
        recent.append(t.expanded)
        del recent[:-REUSE_SEARCHES]  # memory: the leaves of a few searches per net
        move = t.best_move()
        cp = value_to_cp(t.value(), t.scale)
        b = self.board
        self.records.append((b.fen(), b.uci(move), cp, b.ply(), b.turn == chess.WHITE))
        self.samples.extend(t.sampled_positions())
        white_cp = cp if b.turn == chess.WHITE else -cp
        self.push(move, white_cp)

    def push(self, move: chess.Move, white_cp: int | None = None) -> None:
        b = self.board
        irreversible = b.is_zeroing(move) or b.is_castling(move)
        b.push(move)
        self._history = [position_key(b)] if irreversible else self._history + [position_key(b)]
        if self._check_end():
            return
        a = self.adjudication
        if white_cp is not None:
            if a.win_plies and abs(white_cp) >= a.win_cp:
                sign = 1 if white_cp > 0 else -1
                self._win_run = self._win_run + 1 if sign == self._win_sign else 1
                self._win_sign = sign
            else:
                self._win_run, self._win_sign = 0, 0
            self._draw_run = self._draw_run + 1 if (a.draw_plies and abs(white_cp) <= a.draw_cp
                                                    and b.ply() > a.draw_min_ply) else 0
            if a.win_plies and self._win_run >= a.win_plies:
                self.result, self.reason = self._win_sign, "adjudicated win"
                return
            if a.draw_plies and self._draw_run >= a.draw_plies:
                self.result, self.reason = 0, "adjudicated draw"
                return
        if a.max_ply and b.ply() >= a.max_ply:
            self.result, self.reason = 0, "ply limit"

    def _check_end(self) -> bool:
        b = self.board
        if not any(b.generate_legal_moves()):
            if b.is_check():
                self.result, self.reason = (-1 if b.turn == chess.WHITE else 1), "checkmate"
            else:
                self.result, self.reason = 0, "stalemate"
        elif b.is_insufficient_material():
            self.result, self.reason = 0, "insufficient material"
        elif b.halfmove_clock >= 100:
            self.result, self.reason = 0, "fifty-move rule"
        elif self._history.count(self._history[-1]) >= 3:
            self.result, self.reason = 0, "threefold repetition"
        return self.result is not None

    def result_str(self) -> str:
        return {1: "1-0", 0: "1/2-1/2", -1: "0-1", None: "*"}[self.result]

    def plain_text(self, with_samples: bool = True) -> str:
        """The game's ``.plain`` records (fen/move/score/ply/result/e), result from each side to
        move's POV; the search positions in game order, then the sampled ones."""
        rows = list(self.records) + (list(self.samples) if with_samples else [])
        out = []
        for fen, uci, cp, ply, white in rows:
            res = self.result if white else -self.result
            out.append(f"fen {fen}\nmove {uci}\nscore {cp}\nply {ply}\nresult {res}\ne\n")
        return "".join(out)

    def pgn(self, headers: dict | None = None) -> str:
        """The game as PGN: the mainline, each searched move with its score as cutechess writes it
        (``{+0.35/64}``: pawns, the mover's POV, then the nodes), random opening plies as ``{book}``."""
        import chess.pgn

        g = chess.pgn.Game()
        start = chess.Board(self.start_fen, chess960=self.board.chess960)
        if self.start_fen != chess.STARTING_FEN or self.board.chess960:
            g.setup(start)
        g.headers["White"], g.headers["Black"] = self.white.name, self.black.name
        g.headers["Result"] = self.result_str()
        if self.reason:
            g.headers["Termination"] = self.reason
        for k, v in (headers or {}).items():
            g.headers[k] = str(v)
        node = g
        searched = {r[3]: r for r in self.records}
        for m in self.board.move_stack:
            ply = node.board().ply()
            node = node.add_variation(m)
            if ply in searched:
                node.comment = f"{searched[ply][2] / 100:+.2f}/{self.white.cfg.nodes}"
            else:
                node.comment = "book"
        return str(g) + "\n\n"


def play_games(new_game, concurrency: int, stats: BatchSearch | None = None):
    """Play games with up to ``concurrency`` in flight, all their searches batched together.
    ``new_game()`` returns the next :class:`Game` or None when there are no more. Yields each
    game once it is over, in the order they end."""
    search = stats or BatchSearch()
    active: list[Game] = []
    exhausted = False
    while True:
        while not exhausted and len(active) < concurrency:
            g = new_game()
            if g is None:
                exhausted = True
            elif g.over:
                yield g
            else:
                active.append(g)
        if not active:
            return
        search.run([g.new_tree() for g in active])
        still = []
        for g in active:
            g.play_searched()
            if g.over:
                yield g
            else:
                still.append(g)
        active = still
