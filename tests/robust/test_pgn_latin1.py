"""Issue 20 item 4: PGN's own standard allows ISO 8859-1 text. A PGN with Latin-1 bytes in its
tags or comments is read (those bytes decoded as Latin-1 and counted in the manifest), never
refused whole as "not text"; binary data named .pgn is still refused. Both readers agree
(tests/formats/test_compiled_pgn.py::test_latin1_bytes)."""
from __future__ import annotations

import random
import subprocess
import sys

import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline.formats import FormatError
from nnue.pipeline.pack import pack

GAME = ('[Event "Open de Montr\xe9al"]\n[White "Jos\xe9 Ca\xf1ete"]\n[Black "M\xfcller"]\n[Result "1-0"]\n\n'
        '1. e4 {+0.30/10 0.1s} e5 {-0.20/9 0.1s} 2. Nf3 {tr\xe8s bien} Nc6 3. Bb5 a6 1-0\n\n')


def test_latin1_tags_and_comments_are_read_and_counted(tmp_path):
    data = GAME.encode("latin-1") * 3 + GAME.encode("utf-8")  # the last game in UTF-8: both in one file
    src = tmp_path / "latin1.pgn"
    src.write_bytes(data)
    s = pack([src], tmp_path / "ds", fmt="pgn", progress=False)
    assert s["read"] == 24 and s["packed"] == 24 and s["rejected"] == {}
    (entry,) = mf.load(tmp_path / "ds")["files"].values()
    assert entry["latin1_bytes"] == 3 * 5  # é, é ñ, ü, è: the bytes that are not UTF-8, 5 a game


def test_latin1_in_the_first_line_is_not_refused(tmp_path):
    src = tmp_path / "first.pgn"
    src.write_bytes(GAME.encode("latin-1"))
    p = subprocess.run([sys.executable, "-m", "nnue.cli", "pack", str(src), "-o", str(tmp_path / "ds"),
                        "--no-progress"], capture_output=True, text=True)
    assert p.returncode == 0 and "packed 6 of 6" in p.stdout, p.stderr


@pytest.mark.parametrize("seed", [0, 1])
def test_binary_garbage_is_still_refused(tmp_path, seed):
    rnd = random.Random(seed)
    src = tmp_path / "garbage.pgn"
    src.write_bytes(b"[Event " + bytes(rnd.randrange(256) for _ in range(4000)))
    with pytest.raises(FormatError, match="not text"):
        pack([src], tmp_path / "ds", fmt="pgn", progress=False)
    assert not (tmp_path / "ds").exists()


def test_control_bytes_without_nul_are_refused(tmp_path):
    src = tmp_path / "ctl.pgn"
    src.write_bytes(GAME.encode("latin-1") + b"\x01\x02\x1b" + GAME.encode("latin-1"))
    with pytest.raises(FormatError, match=r"byte \d+: control byte 0x01"):
        pack([src], tmp_path / "ds", fmt="pgn", progress=False)
