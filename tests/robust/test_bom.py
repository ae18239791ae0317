"""Issue 15 item 1: every text reader and every command reading FENs strips one leading UTF-8
BOM (files from Windows editors and some GUIs), and CRLF line ends keep working."""
from __future__ import annotations

import gzip

import pytest

from nnue.pipeline.pack import pack

BOM = "\ufeff"
FEN = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
FEN2 = "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2"

TEXTS = {
    "plain": ("a.plain", f"fen {FEN}\nmove e7e5\nscore 10\nply 1\nresult 0\ne\n"
                         f"fen {FEN2}\nmove g1f3\nscore 20\nply 2\nresult 0\ne\n"),
    "bullet-text": ("a.txt", f"{FEN} | -10 | 0.5\n{FEN2} | 20 | 0.5\n"),
    "epd": ("a.epd", f'{FEN} c9 "1/2-1/2";\n{FEN2} c9 "1/2-1/2";\n'),
    "pgn": ("a.pgn", '[Event "x"]\n[Result "1/2-1/2"]\n\n1. e4 {+0.30/10 0.1s} e5 {-0.20/10 0.1s} 1/2-1/2\n'),
}


def _pack(tmp_path, name, text, *, bom, crlf=False, gz=False, fast=True):
    from nnue.pipeline.formats import ReaderOptions

    if crlf:
        text = text.replace("\n", "\r\n")
    data = ((BOM if bom else "") + text).encode()
    src = tmp_path / (name + (".gz" if gz else ""))
    src.write_bytes(gzip.compress(data) if gz else data)
    out = tmp_path / f"ds-{bom}-{crlf}-{gz}-{fast}"
    return pack([src], out, progress=False, options=ReaderOptions(fast=fast))


@pytest.mark.parametrize("fmt", sorted(TEXTS))
@pytest.mark.parametrize("crlf", [False, True])
@pytest.mark.parametrize("fast", [True, False])
def test_a_leading_bom_is_stripped(tmp_path, fmt, crlf, fast):
    name, text = TEXTS[fmt]
    ref = _pack(tmp_path, name, text, bom=False, fast=fast)
    assert ref["rejected"] == {} and ref["packed"] == 2
    got = _pack(tmp_path, name, text, bom=True, crlf=crlf, fast=fast)
    assert (got["read"], got["packed"], got["rejected"]) == (ref["read"], ref["packed"], ref["rejected"])
    assert got["files"][0]["format"] == fmt  # auto-detection sees past the BOM too


def test_bom_in_a_compressed_text_file(tmp_path):
    name, text = TEXTS["plain"]
    got = _pack(tmp_path, name, text, bom=True, gz=True)
    assert got["packed"] == 2 and got["rejected"] == {}


def test_only_one_bom_is_stripped(tmp_path):
    # a second BOM is content: the first record is then not a FEN the reader accepts
    name, text = TEXTS["bullet-text"]
    got = _pack(tmp_path, name, BOM + text, bom=True)
    assert got["packed"] == 1 and sum(got["rejected"].values()) == 1


def test_format_detection_by_content_sees_past_the_bom(tmp_path):
    from nnue.pipeline.formats import detect_format

    src = tmp_path / "noext"
    src.write_bytes((BOM + TEXTS["plain"][1]).encode())
    assert detect_format(src) == "plain"


@pytest.mark.parametrize("crlf", [False, True])
def test_eval_fens_file_with_bom(tmp_path, crlf, capsys):
    from nnue.commands.eval_run import _read_fens

    nl = "\r\n" if crlf else "\n"
    f = tmp_path / "fens.txt"
    f.write_bytes((BOM + FEN + nl + FEN2 + nl).encode())
    fens, labels = _read_fens(str(f))
    assert fens == [FEN, FEN2] and labels == [f"{f}:1", f"{f}:2"]


def test_eval_fens_stdin_with_bom(monkeypatch):
    import io

    from nnue.commands.eval_run import _read_fens

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO((BOM + FEN + "\n").encode()), encoding="utf-8"))
    fens, _ = _read_fens("-")
    assert fens == [FEN]
