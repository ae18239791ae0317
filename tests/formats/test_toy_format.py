"""A dump format added at run time, in test code only: one spec, one ``register`` line (issue 22).

The toy format is one position a line, ``FEN;score;result``: score in centipawns and result
-1/0/1, both side-to-move POV, 32002 (VALUE_NONE) for no score; each line is a game of its own.
It has a reader, a sniff, a range finder (any line) and a writer, and nothing else in the code
base names it: ``nnue pack`` finds it by its extension, splits it into byte ranges, quarantines
its malformed line, and ``nnue convert --to toy`` writes it back.
"""
from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path

import chess
import pytest

from nnue import cli
from nnue.pipeline import formats
from nnue.pipeline import manifest as mf
from nnue.pipeline.formats import FormatError, FormatSpec, ReaderOptions, Record, Reject
from nnue.pipeline.formats._boundaries import text_finder
from nnue.pipeline.formats._write import board_of
from nnue.pipeline.ranges import plan, range_bytes
from tests.samples import SAMPLE

NONE = formats.VALUE_NONE


def toy_read(stream, options: ReaderOptions):
    """One Record or Reject per non-empty line; FormatError when the first one is not toy."""
    first = True
    for n, line in enumerate(stream, 1):
        text = line.strip()
        if not text:
            continue
        fields = text.split(";")
        ok = len(fields) == 3 and fields[0].count("/") == 7 and re.fullmatch(r"-?\d+", fields[1] or "x") \
            and fields[2] in ("-1", "0", "1")
        if not ok:
            if first:
                raise FormatError(f"line {n}: not a toy line (FEN;score;result)")
            yield Reject(f"line {n}", "malformed record", "want FEN;score;result", text)
            continue
        first = False
        score = int(fields[1])
        yield Record(fen=fields[0], score=None if abs(score) == NONE else score, result=int(fields[2]),
                     ply=None, move=None, location=f"line {n}", game=n)


def toy_sniff(head: str) -> bool:
    line = head.lstrip().split("\n", 1)[0]
    return line.count(";") == 2 and line.split(";")[0].count("/") == 7


def toy_write(r: dict) -> bytes:
    score = NONE if r["score_none"] else r["score"]
    return f"{board_of(r['board']).fen()};{score};{r['result']}\n".encode()


TOY = FormatSpec("toy", toy_read, toy_sniff, score_pov="side to move", result_pov="side to move",
                 doc="test-only FEN;score;result lines", extensions=(".toy",),
                 find_ranges=text_finder(toy_read, after_e=False), write=toy_write)


@pytest.fixture
def toy():
    formats.register(TOY)
    yield TOY
    formats.unregister("toy")
    assert "toy" not in formats.names() and ".toy" not in formats.EXTENSIONS


def _positions(n: int) -> list[str]:
    """``n`` toy lines from the bundled sample (.plain: fen/score/result are stm POV already),
    FENs as python-chess writes them (what convert writes back)."""
    out = []
    for block in [b for b in SAMPLE.read_text().split("e\n") if b.strip()][:n]:
        kv = dict(line.split(" ", 1) for line in block.strip().splitlines())
        out.append(f"{chess.Board(kv['fen']).fen()};{kv['score']};{kv['result']}")
    return out


def _nnue(*argv) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue()


def test_registry_derives_every_table(toy):
    assert "toy" in formats.names() and "toy" in formats.writer_names()
    assert formats.EXTENSIONS[".toy"] == ("toy",) and formats.format_from_extension("a.toy.zst") == "toy"
    assert formats.text_errors("toy") == "replace"
    p = cli.build_parser()
    sub = next(a for a in p._actions if a.dest == "cmd").choices
    assert "toy" in next(a for a in sub["pack"]._actions if a.dest == "format").choices
    assert "toy" in next(a for a in sub["convert"]._actions if a.dest == "to").choices


def test_pack_ranges_and_convert_round_trip(toy, tmp_path):
    lines = _positions(300)
    bad_line = 120  # 1-based line number of the malformed line
    text = lines[:bad_line - 1] + ["this;is not;a position"] + lines[bad_line - 1:]
    src = tmp_path / "games.toy"
    src.write_text("\n".join(text) + "\n")
    assert formats.detect_format(src) == "toy"

    # one process, no splitting
    rc, out = _nnue("pack", src, "-o", tmp_path / "one", "--workers", 1, "--json", "--no-progress")
    assert rc == 0
    one = json.loads(out)
    assert one["read"] == len(text) == one["packed"] + sum(one["rejected"].values())
    assert one["rejected"] == {"malformed record": 1} and one["packed"] == len(lines)
    entry = next(iter(mf.load(tmp_path / "one")["files"].values()))
    assert entry["format"] == "toy"
    rejects = [json.loads(r) for r in (tmp_path / "one" / entry["rejects"]).read_text().splitlines()]
    assert [r["location"] for r in rejects] == [f"line {bad_line}"] and rejects[0]["reason"] == "malformed record"

    # byte ranges: every boundary starts a line, and a ranged pack writes the same rows
    rbytes = src.stat().st_size // 5
    rs = plan(src, "toy", rbytes)
    assert len(rs) >= 4
    data = src.read_bytes()
    assert all(data[r.start - 1:r.start] == b"\n" for r in rs[1:])
    assert [r.end for r in rs[:-1]] == [r.start for r in rs[1:]] and rs[-1].end == len(data)
    assert all(r.line == data[:r.start].count(b"\n") for r in rs)
    rc, out = _nnue("pack", src, "-o", tmp_path / "ranged", "--workers", 1, "--json", "--no-progress",
                    "--range-mb", rbytes / (1 << 20))
    assert rc == 0
    ranged = json.loads(out)
    assert (ranged["read"], ranged["packed"], ranged["rejected"]) == (one["read"], one["packed"], one["rejected"])
    entry_r = next(iter(mf.load(tmp_path / "ranged")["files"].values()))
    assert len(entry_r["parts"]) == len(rs)
    rej_r = [json.loads(r) for name in entry_r["rejects_parts"]
             for r in (tmp_path / "ranged" / name).read_text().splitlines()]
    assert [r["location"] for r in rej_r] == [f"line {bad_line}"]  # rebased to the file's line

    # convert writes the toy format back: the good lines, exactly, in order (both paths)
    for ds in ("one", "ranged"):
        dst = tmp_path / f"back-{ds}.toy"
        rc, out = _nnue("convert", tmp_path / ds, "--to", "toy", "-o", dst, "--json", "--no-progress")
        assert rc == 0 and json.loads(out)["rows"] == len(lines)
        assert dst.read_text().splitlines() == lines


def test_unknown_format_and_bad_spec(toy):
    with pytest.raises(FormatError, match="toy"):
        formats.get_format("nope")  # the message lists the known formats, the toy among them
    with pytest.raises(ValueError):
        formats.register(FormatSpec("auto", toy_read, toy_sniff, "", "", ""))
    with pytest.raises(SystemExit) as e:  # epd has no writer: not a --to choice
        _nnue("convert", "x", "--to", "epd", "-o", "y")
    assert e.value.code == 2


def test_reader_rejects_and_wrong_format(toy):
    items = list(toy_read(io.StringIO(_positions(1)[0] + "\n\nbad\n"), ReaderOptions()))
    assert isinstance(items[0], Record) and items[0].location == "line 1"
    assert isinstance(items[1], Reject) and items[1].location == "line 3"
    with pytest.raises(FormatError):
        list(toy_read(io.StringIO("fen x\n"), ReaderOptions()))
    assert not Path(SAMPLE).suffix == ".toy" and formats.format_from_extension(SAMPLE) == "plain"
