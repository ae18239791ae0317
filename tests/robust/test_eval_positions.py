"""Issue 15 item 9: ``nnue eval`` reads FEN, EPD and ``FEN | score | result`` lines (the FEN
part), checks every position as ``nnue pack`` does (the same validation), and refuses junk
with FILE:LINE and the reason."""
from __future__ import annotations

import pytest

from nnue.cli import main
from nnue.pipeline.positions import PositionError, parse_position
from tests.netfiles import make_model, write_weights

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"

ACCEPTED = [
    (START, START),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -", "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"),
    ("  " + START + "  ", START),
    (START + ' c9 "1-0";', START),
    ('rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - c9 "1/2-1/2";', START),
    ('rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - hmvc 3; fmvn 7; id "a b";',
     "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 3 7"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - bm e4; ce 20;", START),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - [0.5] 12", START),
    (START + " | 35 | 0.5", START),
    (START + " | -120 | 1.0", START),
]

REFUSED = [
    (START + " trailing junk", "trailing text"),
    (START + " 7", "trailing text"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - c9 1-0", "trailing text"),  # no ';'
    (START + " | 35", "FEN | score | result"),
    (START + " | x | 0.5", "score"),
    (START + " | 35 | 2", "result"),
    ("garbage", "FEN"),
    ("8/8/8 w - -", "bad FEN"),
    ("4k3/8/8/8/8/8/4Q3/4K3 w - - 0 1", "side not to move is in check"),
    ("4k3/8/8/8/8/8/8/8 w - - 0 1", "exactly one king"),
    ("P3k3/8/8/8/8/8/8/4K3 w - - 0 1", "pawn on first or last rank"),
    ("4k3/8/8/8/8/8/8/4K3 w K - 0 1", "castling rights"),
    ("4k3/8/8/8/8/8/8/4K3 x - - 0 1", "bad FEN"),
]


@pytest.mark.parametrize("line,fen", ACCEPTED)
def test_accepted_lines(line, fen):
    assert parse_position(line) == fen


@pytest.mark.parametrize("line,reason", REFUSED)
def test_refused_lines(line, reason):
    with pytest.raises(PositionError, match=reason):
        parse_position(line)


@pytest.fixture(scope="module")
def net(tmp_path_factory, sample_dataset):
    from nnue.trainer.export import export

    t = tmp_path_factory.mktemp("evalnet")
    export(write_weights(make_model("crelu"), t / "w.safetensors", sample_dataset), t / "net", max_positions=0)
    return t / "net" / "net.safetensors"


def test_eval_refuses_with_file_line_and_reason(net, tmp_path, capsys):
    f = tmp_path / "p.epd"
    f.write_text(f'{START} c9 "1-0";\n\n4k3/8/8/8/8/8/4Q3/4K3 w - - 0 1\n')
    assert main(["eval", str(net), "--fens", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{f}:3" in err[0] and "side not to move is in check" in err[0]


def test_eval_reads_all_three_shapes_alike(net, tmp_path, capsys):
    f = tmp_path / "p.txt"
    f.write_text(f'{START}\n{START} c9 "1-0";\n{START} | 35 | 0.5\n')
    assert main(["eval", str(net), "--fens", str(f)]) == 0
    out = capsys.readouterr().out.split()
    assert len(out) == 3 and len(set(out)) == 1


def test_eval_and_pack_refuse_the_same_positions(tmp_path):
    """The same validation: for mutated boards, eval's check refuses exactly what pack rejects."""
    import random

    import chess

    from nnue.pipeline.pack import pack

    rnd = random.Random(3)
    fens = []
    for _ in range(300):
        b = chess.Board()
        for _ in range(rnd.randint(0, 30)):
            moves = list(b.legal_moves)
            if not moves:
                break
            b.push(rnd.choice(moves))
        for _ in range(rnd.randint(0, 2)):  # drop or add pieces anywhere: many become illegal
            sq = rnd.randrange(64)
            if rnd.random() < 0.5:
                b.remove_piece_at(sq)
            else:
                b.set_piece_at(sq, chess.Piece(rnd.randint(1, 6), rnd.random() < 0.5))
        fens.append(b.fen())
    src = tmp_path / "m.txt"
    src.write_text("".join(f"{f} | 0 | 0.5\n" for f in fens))
    s = pack([src], tmp_path / "ds", progress=False)
    import json

    import pyarrow  # noqa: F401  (the rejects file names the lines)

    from nnue.pipeline import manifest as mf

    entry = next(iter(mf.load(tmp_path / "ds")["files"].values()))
    rejected_lines = {int(json.loads(x)["location"].split()[1])
                      for x in (tmp_path / "ds" / entry["rejects"]).read_text().splitlines()}
    refused = set()
    for i, f in enumerate(fens, 1):
        try:
            parse_position(f)
        except PositionError:
            refused.add(i)
    assert 20 < len(refused) < 280 and refused == rejected_lines and s["packed"] == len(fens) - len(refused)
