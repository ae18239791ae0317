"""The compiled text core (pipeline/compiled/text.py: .plain, bullet text, EPD) against the
python-chess reference path.

Every test packs the same bytes twice — ``ReaderOptions(fast=True)`` (compiled) and
``fast=False`` (the readers' line machines, python-chess validates) — and requires identical
Parquet tables (every column, every row, in order), identical rejects files (location, reason,
detail, raw), identical counts and manifest castling spellings, or the same FormatError from both
(scripts/fuzz_compiled_text.py's ``both``)."""
from __future__ import annotations

import importlib.util
import random

import chess
import pytest

from tests.samples import CUT, REPO, full_selfplay, public, selfplay

EXT = {"plain": "plain", "bullet-text": "txt", "epd": "epd"}
_spec = importlib.util.spec_from_file_location("fuzz_compiled_text", REPO / "scripts" / "fuzz_compiled_text.py")
fz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fz)

START = chess.STARTING_FEN


@pytest.fixture(scope="session", autouse=True)
def warm():
    """Compile (or load from numba's cache) the three kernels once per session."""
    import io

    from nnue.pipeline.compiled import text as ct
    from nnue.pipeline.formats import bullet_text, epd, plain

    for fmt, m, line in (("plain", plain.Machine(), f"fen {START}\nmove e2e4\nscore 0\nply 0\nresult 0\ne\n"),
                         ("bullet-text", bullet_text.Machine(), f"{START} | 0 | 0.5\n"),
                         ("epd", epd.Machine(), f"{START} c9 \"1-0\";\n")):
        list(ct.read_text(io.TextIOWrapper(io.BytesIO(line.encode())), fmt, m))
    return ct


def both(tmp_path, data: bytes | str, fmt: str, name: str = "x"):
    path = tmp_path / f"{name}.{EXT[fmt]}"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    work = tmp_path / f"work-{name}"
    work.mkdir()
    return fz.both(path, fmt, work)


def block(fen: str, move: str, score=0, ply=0, result=0) -> str:
    return f"fen {fen}\nmove {move}\nscore {score}\nply {ply}\nresult {result}\ne\n"


def handed(warm, fmt: str) -> int:
    return warm.HANDED.get(fmt, 0)


# ------------------------------------------------------------------ real files
# (format, where, name): "selfplay" is tests/data/selfplay, "public" the third-party samples (skipped
# without ../shared/data/public), "full" the full self-play sets (slow; skipped without them)
SAMPLES = [("plain", "selfplay", "sf15-960-xfen-s2.plain"), ("bullet-text", "selfplay", "sf15-960-xfen-s2.txt"),
           ("epd", "public", "samplefen.epd"), ("epd", "public", "samplefen1000.epd"),
           ("epd", "public", "sample_ethereal_fen.epd")]
LARGE = [("plain", "selfplay", f"{CUT}.plain"), ("bullet-text", "selfplay", f"{CUT}.txt"),
         ("plain", "full", "sf15-n5000-s1.plain"), ("bullet-text", "full", "sf15-n5000-s1.txt"),
         ("plain", "full", "sf15-n2000-s11.plain"), ("bullet-text", "full", "sf15-n2000-s11.txt"),
         ("plain", "full", "sf15-n1500-s21.plain.zst"), ("bullet-text", "full", "sf15-n1500-s21.txt.zst")]
WHERE = {"selfplay": selfplay, "public": public, "full": full_selfplay}


def _sample(tmp_path, warm, fmt, where, name):
    path = WHERE[where](name)
    h = handed(warm, fmt)
    s = fz.both(path, fmt, tmp_path)
    assert s["packed"] == s["read"]  # the samples are valid
    # what the core hands back is rare: en-passant squares with the side to move in check
    assert handed(warm, fmt) - h <= max(2, s["read"] // 5000)
    return s


@pytest.mark.parametrize("fmt,where,name", SAMPLES, ids=[n for _, _, n in SAMPLES])
def test_samples_identical(tmp_path, warm, fmt, where, name):
    _sample(tmp_path, warm, fmt, where, name)


@pytest.mark.slow
@pytest.mark.parametrize("fmt,where,name", LARGE, ids=[n for _, _, n in LARGE])
def test_large_samples_identical(tmp_path, warm, fmt, where, name):
    _sample(tmp_path, warm, fmt, where, name)


# ------------------------------------------------------------------ bytes and lines
def _plain_text(n=40) -> str:
    lines = selfplay("sf15-960-xfen-s2.plain").read_text().splitlines(True)
    return "".join(lines[:6 * n])


def _txt_text(n=40) -> str:
    return "".join(selfplay("sf15-960-xfen-s2.txt").read_text().splitlines(True)[:n])


def _epd_text(n=40) -> str:
    """``n`` EPD lines (four FEN fields, ``c9`` with the game's result from White's side) made from
    our own self-play, so that the EPD cases of the byte and line-end tests run in any clone; the
    third-party EPD samples are read as they are by test_samples_identical."""
    text = {"1": '"1-0"', "-1": '"0-1"', "0": '"1/2-1/2"'}
    lines, fen = [], None
    for line in selfplay(f"{CUT}.plain").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "fen":
            fen = value.split()
        elif key == "result":
            white = value if fen[1] == "w" else str(-int(value))
            lines.append(f"{' '.join(fen[:4])} c9 {text[white]};\n")
            if len(lines) == n:
                break
    return "".join(lines)


TEXT = {"plain": _plain_text, "bullet-text": _txt_text, "epd": _epd_text}


@pytest.mark.parametrize("fmt", list(EXT))
@pytest.mark.parametrize("variant", ["crlf", "cr", "mixed", "bom", "bom-crlf", "trailing-space", "tabs", "blank",
                                     "no-final-newline", "nbsp", "nul-late", "bad-utf8-late", "bom-late"])
def test_line_ends_and_bytes(tmp_path, fmt, variant):
    text = TEXT[fmt]()
    data = text.encode()
    if variant == "crlf":
        data = data.replace(b"\n", b"\r\n")
    elif variant == "cr":
        data = data.replace(b"\n", b"\r")
    elif variant == "mixed":
        parts = data.split(b"\n")
        data = b"".join(p + (b"\n", b"\r\n", b"\r")[i % 3] for i, p in enumerate(parts[:-1]))
    elif variant == "bom":
        data = b"\xef\xbb\xbf" + data
    elif variant == "bom-crlf":
        data = b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")
    elif variant == "trailing-space":
        data = data.replace(b"\n", b"  \n").replace(b"\n", b"\n ")
    elif variant == "tabs":
        data = data.replace(b" ", b"\t", 7).replace(b"\n", b"\t\n")
    elif variant == "blank":
        data = b"\n\n" + data.replace(b"\n", b"\n\n \n", 9)
    elif variant == "no-final-newline":
        data = data.rstrip(b"\n")
    elif variant == "nbsp":
        data = data.replace(b" ", b"\xc2\xa0", 3)
    else:  # after the 64 KiB pack reads to tell text from binary
        head = (text * (70_000 // len(text) + 1)).encode()
        bad = {"nul-late": b"\x00", "bad-utf8-late": b"\xff\xc3", "bom-late": b"\xef\xbb\xbf"}[variant]
        data = head + data.replace(b"/", b"/" + bad, 2).replace(b" ", bad + b" ", 1)
    both(tmp_path, data, fmt)


@pytest.mark.parametrize("fmt", list(EXT))
def test_tiny_chunks_and_buffers(tmp_path, monkeypatch, fmt):
    """Records, CRLF pairs and a BOM cut by every read boundary; output buffers of 3 rows."""
    from nnue.pipeline.compiled import text as ct

    monkeypatch.setattr(ct, "CHUNK", 5)
    monkeypatch.setattr(ct, "CAP", 3)
    data = b"\xef\xbb\xbf" + TEXT[fmt](15).encode().replace(b"\n", b"\r\n")
    both(tmp_path, data, fmt)


@pytest.mark.parametrize("fmt,first,refused", [
    ("plain", "score 3\n", False), ("plain", "hello\n", True), ("plain", "\t\nfenx a\n", True),
    ("bullet-text", "a | b\n", True), ("bullet-text", "8/8 w - - | 0 | x | y\n", True),
    ("bullet-text", "8/8 w - - | 0 | x\n", False), ("epd", "not an epd line\n", True),
    ("epd", "\t\n# comment\nx y z\n", True), ("epd", "8/8/8/8/8/8/8/8 w - - c9 \"1-0\";\n", False)])
def test_first_line_and_format_error(tmp_path, fmt, first, refused):
    """The same FormatError (or none) from both paths for the first line of a file."""
    assert ("format_error" in both(tmp_path, first + TEXT[fmt](3), fmt)) == refused


# ------------------------------------------------------------------ every reject reason
K960 = "bqnrkrnb/pppppppp/8/8/8/8/PPPPPPPP/BQNRKRNB w KQkq - 0 1"

PLAIN_RECORDS = [
    block(START, "e2e4"),
    block(START, "e2e5"),                                    # illegal move
    block(START, "0000"),                                    # null move
    block(START, "e2e4", score=40000),                       # score out of int16 range
    block(START, "e2e4", score=-32002),                      # mate-range, out of int16
    block(START, "e2e4", score=32002),                       # no score
    block(START, "e2e4", score=31990),                       # mate score
    block(START, "e2e4", ply=70000),                         # ply out of range
    block(START, "e2e4", ply=-1),
    block(START, "e2e4", result=2),                          # result out of range
    block(START, "e2e4").replace("score 0", "score 1.5"),    # number not an integer
    block(START, "e2e4").replace("score 0", "score +7"),
    block(START, "e2e4").replace("ply 0", "ply 0_0"),
    block(START, "e2e4").replace("move e2e4\n", ""),         # missing field
    block(START, "e2e4").replace("ply 0\n", "ply 0\nply 1\n"),   # repeated key
    block(START, "e2e4").replace("ply 0\n", "plyx 0\n"),     # unexpected line
    block(START, "e2e4").replace("e\n", ""),                 # not terminated (next fen)
    block("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQ1BNR w KQkq - 0 1", "e2e4"),   # no white king
    block("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNP w KQkq - 0 1", "e2e4"),   # pawn on back rank
    block("rnbqkbnr/ppppp1pp/8/7Q/8/8/PPPPPPPP/RNB1KBNR w KQkq - 0 1", "e2e4"),  # side not to move in check
    block("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBN1 w KQkq - 0 1", "e2e4"),   # castling right without rook
    block("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "e2e4").replace("KQkq", "KQkqz"),
    block("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/QQQQKQQQ w kq - 0 1", "e2e4"),     # too many pieces
    block("4k3/8/8/8/8/8/8/QQQQKQQQ b - - 0 1", "e8d7"),     # too many checkers
    block("4k3/8/3N1N2/8/8/8/8/4K3 b - - 0 1", "e8e7"),      # two knights: impossible check
    block("4k3/8/8/8/4R3/8/8/B3K3 b - - 0 1", "e8d8"),       # possible double check (discovered)
    block("8/8/8/8/k2Pp2Q/8/8/4K3 b - d3 0 1", "e4d3"),      # en passant with the king in check
    block("8/8/8/3k4/3Pp3/8/8/4K3 b - d3 0 1", "e4d3"),      # en passant out of check
    block("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1", "e5d6"),      # legal en passant capture
    block("4k3/8/8/3pP3/8/8/8/4K3 w - c6 0 1", "e5d6"),      # ep square without a capture: dropped, move illegal
    block("4k3/8/8/8/8/8/8/4K3 w - e9 0 1", "e1e2"),         # bad ep field
    block("4k3/8/8/8/8/8/8/4K3 x - - 0 1", "e1e2"),          # bad turn
    block("4k3/8/8/8/8/8/8/4K3 w - - -1 1", "e1e2"),         # negative counter
    block("4k3/8/8/8/8/8/8/4K3 w - - 0 0", "e1e2"),          # fullmove 0 (read as 1)
    block("4k3/8/8/8/8/8/8/4K3 w - - 300 70000", "e1e2"),    # counters clamped in the board
    block("4k3/8/8/8/8/8/8/4K3 w - -", "e1e2"),              # 4 fields
    block("4k3/8/8/8/8/8/8/4K3 w - - 5", "e1e2"),            # 5 fields
    block("4k3/8/8/8/8/8/8/4K3 w - - 0 1 x", "e1e2"),        # 7 fields
    block("4k3/8/8/8/8/8/8/4K3", "e1e2"),                    # 1 field
    block("4k3/8/8/8/8/8/8/44K3 w - - 0 1", "e1e2"),         # two digits in a row
    block("4k3/8/8/8/8/8/8/3K~4 w - - 0 1", "d1e1"),         # promoted marker
    block("4k3/8/8/8/8/8/8/4K3/8 w - - 0 1", "e1e2"),        # nine ranks
    block("4k3/7P/8/8/8/8/8/4K3 w - - 0 1", "h7h8q"),        # promotion
    block("4k1r1/7P/8/8/8/8/8/4K3 w - - 0 1", "h7g8n"),      # capture promotion
    block("4k3/7P/8/8/8/8/8/4K3 w - - 0 1", "h7h8"),         # promotion without a piece
    block("4k3/7P/8/8/8/8/8/4K3 w - - 0 1", "h7h8k"),        # king promotion
    block("4k3/7P/8/8/8/8/8/4K3 w - - 0 1", "h7h8Q"),        # upper-case promotion
    block("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "e1g1"),   # castling, two-square spelling
    block("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "e1h1"),   # castling, king takes rook
    block("r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1", "e8c8"),
    block("r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1", "e8a8"),
    block("r3k2r/8/8/8/8/8/8/R3K2R w Qkq - 0 1", "e1g1"),    # castling without the right
    block("r3k2r/8/8/8/8/8/5r2/R3K2R w KQkq - 0 1", "e1g1"),  # through check
    block("r3k2r/8/8/8/8/8/8/R3K1NR w KQkq - 0 1", "e1g1"),  # blocked
    block(K960, "e1f1"), block(K960, "b2b3"),
    block("bqnrkr1b/pppppppp/6n1/8/8/6N1/PPPPPPPP/BQNRKR1B w KQkq - 0 1", "e1f1"),  # 960 castling (X-FEN)
    block("bqnrkr1b/pppppppp/6n1/8/8/6N1/PPPPPPPP/BQNRKR1B w FDfd - 0 1", "e1f1"),  # Shredder-FEN
    block("bqnrkr1b/pppppppp/6n1/8/8/6N1/PPPPPPPP/BQNRKR1B w FDfd - 0 1", "e1g1"),  # 960: e1g1 is not castling
    block("1qnrkr1b/pppppppp/6n1/8/8/6N1/PPPPPPPP/BQNRKR1B w FDfd - 0 1", "e1d1"),
    block("bqnrkr1b/pppppppp/6n1/8/8/6N1/PPPPPPPP/BQNRKR1B w FDfdd - 0 1", "e1f1"),  # bad castling part
    block("bqnrkr1b/pppppppp/6n1/8/8/6N1/PPPPPPPP/BQNRKR1B w FDE - 0 1", "e1f1"),
    block("1r2k1r1/8/8/8/8/8/8/1R2K1R1 w GBgb - 0 1", "e1g1"),   # 960 king takes rook, g-side
    block("1r2k1r1/8/8/8/8/8/8/1R2K1R1 w KQkq - 0 1", "e1b1"),   # X-FEN: outermost rooks
    block("rk6/8/8/8/8/8/8/RK6 w Aa - 0 1", "b1a1"),             # king next to its rook
    block("rk6/8/8/8/8/8/8/RK6 w Aa - 0 1", "b1c1"),
    block("1k6/8/8/8/8/8/8/RK1R4 w AD - 0 1", "b1c1"),           # two rights on one side... both above/below
    block("rk5r/8/8/8/8/8/8/RK5R w HAha - 0 1", "b1h1"),
    block("4k3/8/8/8/8/8/8/4K3 w - - 0 1", "e1g1"),              # king two squares, no rook
    block("4k3/8/8/8/8/8/8/4K3 w - - 0 1", "e1e3"),
    block("4k3/8/8/8/8/8/8/4K3 w - - 0 1", "e1e1"),
    block("4k3/8/8/8/8/8/8/4K3 w - - 0 1", "e8e7"),              # the other side's piece
    block("4k3/8/8/8/8/8/8/4K3 w - - 0 1", "i1e2"),
    "fen " + START + "\nmove e2e4\nscore 0\nply 0\nresult 0\n",   # truncated at the end
]


@pytest.mark.parametrize("short", [0, 8])
def test_plain_reject_reasons_and_edge_records(tmp_path, monkeypatch, short):
    """short: runs shorter than this before a hand-back are re-read by the line machine (0: never)."""
    from nnue.pipeline.compiled import text as ct

    monkeypatch.setattr(ct, "SHORT", short)
    s = both(tmp_path, "".join(PLAIN_RECORDS), "plain")
    assert s["rejected"] >= 30 and s["packed"] >= 20


def test_plain_records_each_alone_and_in_games(tmp_path):
    """Every edge record alone (also game numbering after it), and shuffled into one file."""
    for i, rec in enumerate(PLAIN_RECORDS[:-1]):
        both(tmp_path, block(START, "e2e4", ply=3, result=1) + rec + block(START, "g1f3", ply=1, result=-1), "plain",
             name=f"r{i}")
    rng = random.Random(3)
    recs = PLAIN_RECORDS[:-1] * 3
    rng.shuffle(recs)
    both(tmp_path, "".join(recs), "plain", name="shuffled")


BULLET_LINES = [
    f"{START} | 0 | 0.5", f"{START} | 35 | 1.0", f"{START} | -35 | 0.0", f"{START} | 0 | 1", f"{START} | 0 | 1/2",
    f"{START} | 0 | 0", f"{START} | 0 | [1.0]", f"{START} | 0 | \"1-0\";", f"{START} | 0 | 2",  # result out of range
    f"{START} | 0.0 | 0.5", f"{START} | 1e2 | 0.5", f"{START} | nan | 0.5", f"{START} | inf | 0.5",
    f"{START} | 1.5 | 0.5", f"{START} | x | 0.5", f"{START} | +3 | 0.5", f"{START} | 99999999999 | 0.5",
    f"{START} | 32002 | 0.5", f"{START} | -32002 | 0.5", f"{START} | 31990 | 0.5", f"{START} | 40000 | 0.5",
    f"{START} | 0 | 0.5 | 1",                                         # malformed: 4 fields
    f"{START} 0 0.5",                                                  # malformed: 1 field
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq | 0 | 0.5",   # bad FEN: 3 fields
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 0 x | 0 | 0.5",  # fullmove not an integer
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 0 0 | 0 | 0.5",  # fullmove 0: ply -1
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 5 | 0 | 0.5",    # 5 fields: ply unknown
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - | 0 | 0.5",      # 4 fields
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBN1 w KQkq - 0 1 | 0 | 0.5",  # bad castling
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQ1BNR w kq - 0 1 | 0 | 0.5",    # no white king
    "4k3/8/3N1N2/8/8/8/8/4K3 b - - 0 1 | 0 | 0.5",                          # impossible check
    "8/8/8/8/k2Pp2Q/8/8/4K3 b - d3 0 1 | 0 | 0.5",                          # ep in check
    "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1 | 0 | 0.5",                          # legal ep
    "4k3/8/8/3pP3/8/8/8/4K3 w - c6 0 1 | 0 | 0.5",                          # ep dropped
    K960 + " | 10 | 0.5", "1r2k1r1/8/8/8/8/8/8/1R2K1R1 w GBgb - 0 1 | 0 | 1.0",
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 0 1 | 0 | 0.5",
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 2 | 0 | 0.5",  # ply follows: same game
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 0 2 | 0 | 0.5",
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 3 | 0 | 1.0",  # result changes: new game
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 99999999999 | 0 | 0.5",
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 99999999999 | 0 | 0.5",
]


@pytest.mark.parametrize("short", [0, 8])
def test_bullet_text_reject_reasons_and_edge_lines(tmp_path, monkeypatch, short):
    from nnue.pipeline.compiled import text as ct

    monkeypatch.setattr(ct, "SHORT", short)
    s = both(tmp_path, "\n".join(BULLET_LINES) + "\n", "bullet-text")
    assert s["rejected"] >= 15 and s["packed"] >= 15
    rng = random.Random(4)
    lines = BULLET_LINES * 3
    rng.shuffle(lines)
    both(tmp_path, "\n".join(lines) + "\n", "bullet-text", name="shuffled")


E4 = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -"
EPD_LINES = [
    f'{E4} c9 "1-0";', f'{E4} c9 "0-1";', f'{E4} c9 "1/2-1/2";', f'{E4} c9 "2-0";', f"{E4} c9 1-0;",
    f'{E4} hmvc 3; fmvn 20; c9 "1-0";', f'{E4} fmvn 1; c9 "1-0";', f'{E4} hmvc 0; c9 "1-0";',
    f'{E4} hmvc x; c9 "1-0";', f'{E4} hmvc 1234567890; c9 "1-0";', f'{E4} c9 "1-0"; c9 "0-1";',
    f'{E4} c9 "1-0" ;', f'{E4} c9  "1-0";', f'{E4} id "a;b"; c9 "1-0";', f'{E4} c9 "1-0";;', f"{E4} c9",
    f"{E4} 0 1 [1.0] 12", f"{E4} 0 1 [0.5]", f"{E4} 3 40 [0.0] -45", f"{E4} [1.0]", f"{E4} [1.0] 5 6",
    f"{E4} [1.0] -", f"{E4} [x] 5", f"{E4} [1.0] 99999999999", f"{E4} [1.0] 40000", f"{E4} [1.0]5",
    f"{E4} [1.0] c9 \"1-0\";", f"{E4} 0 1 c9 \"1-0\";", f"{E4} 0 0 [1.0]", f"{E4} 00 1 [1.0]",
    f"{E4}", "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP w KQkq - [1.0]",   # bad FEN: 7 ranks
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBN1 w KQkq - [1.0]",  # bad castling
    "4k3/8/3N1N2/8/8/8/8/4K3 b - - [0.5]", "8/8/8/8/k2Pp2Q/8/8/4K3 b - d3 [0.5]",
    "4k3/8/8/3pP3/8/8/8/4K3 w - d6 [0.5]", "4k3/8/8/8/8/8/8/4K3 x - - [0.5]",
    "bqnrkr1b/pppppppp/6n1/8/8/6N1/PPPPPPPP/BQNRKR1B w FDfd - 0 1 [1.0] 7",
    "# a comment", "", f"{E4} fmvn 0; c9 \"1-0\";",
]


def test_epd_reject_reasons_and_edge_lines(tmp_path):
    s = both(tmp_path, "\n".join(EPD_LINES) + "\n", "epd")
    assert s["rejected"] >= 10 and s["packed"] >= 10


# ------------------------------------------------------------------ mutations
@pytest.mark.parametrize("fmt", list(EXT))
@pytest.mark.parametrize("short", [0, 8])
def test_mutated_records(tmp_path, monkeypatch, fmt, short):
    """300 mutated records per format (scripts/fuzz_compiled_text.py runs 10^6)."""
    from nnue.pipeline.compiled import text as ct

    monkeypatch.setattr(ct, "SHORT", short)
    recs = fz._sources()[fmt]
    rng = random.Random(11)
    both(tmp_path, fz.make_file(recs, fmt, rng, 300, rng.randrange(len(recs))), fmt)


def test_every_move_of_real_positions(tmp_path):
    """Every legal move of real positions (castling in both spellings, en passant, promotions),
    pinned and other pieces' pseudo-legal moves, random square pairs and bad promotions, as .plain
    records: the compiled path settles or hands back exactly as python-chess decides."""
    rng = random.Random(1)
    fens = [line[4:].strip() for line in selfplay("sf15-960-xfen-s2.plain").read_text().splitlines()
            if line.startswith("fen ")][::60]
    fens += [line[4:].strip() for line in selfplay(f"{CUT}.plain").read_text().splitlines()
             if line.startswith("fen ")][::144]
    fens += ["r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
             "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1",
             "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8", "4k3/8/8/2pP4/8/8/8/4K3 w - c6 0 1"]
    out = []
    for fen in fens:
        f = fen.split()
        b = chess.Board(fen, chess960=f[2] not in ("-", "KQkq", "KQ", "kq", "Kkq", "Qkq", "KQk", "KQq", "K", "Q", "k",
                                                    "q", "Kk", "Kq", "Qk", "Qq"))
        cands = [m.uci() for m in b.legal_moves] + [m.uci() for m in b.pseudo_legal_moves if not b.is_legal(m)]
        cands += [b._from_chess960(False, m.from_square, m.to_square).uci() for m in b.legal_moves if b.is_castling(m)]
        cands += [chess.square_name(rng.randrange(64)) + chess.square_name(rng.randrange(64))
                  + rng.choice(["", "", "q", "n", "k", "Q"]) for _ in range(6)] + ["0000", "e2", "zz99"]
        out += [block(fen, u) for u in cands]
    s = both(tmp_path, "".join(out), "plain")
    assert s["packed"] > 500 and s["rejected"] > 300
