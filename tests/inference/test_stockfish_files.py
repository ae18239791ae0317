"""``.nnue`` files by version: ``nnue import-net`` and ``nnue eval`` pick the codec from the version
field (Stockfish 15.1 imports as before; a Stockfish 19 file is parsed and checked, then "not yet"
until a net kind reads it; another version is named with the ones we read), and the hook a kind
fills in is what reads the file."""
from __future__ import annotations

import dataclasses
import json
import struct
import subprocess
import sys

import pytest

from nnue.inference import NetFormatError, stockfish_files
from nnue.inference import sfnnue19
from nnue.inference.sfnnue import nnue_bytes as sf15_bytes

from ..engines.test_sfnnv5 import random_int_net
from .test_sfnnue19 import random_tensors


def nnue(*args):
    return subprocess.run([sys.executable, "-m", "nnue.cli", *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("nets")
    (d / "sf15.nnue").write_bytes(sf15_bytes(random_int_net(64)))
    (d / "sf19.nnue").write_bytes(sfnnue19.nnue_bytes(random_tensors(32, seed=5)))
    return d


def test_a_stockfish_15_1_file_imports_through_the_dispatch(files, tmp_path):
    r = nnue("import-net", files / "sf15.nnue", "-o", tmp_path / "imp", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["format"] == "Stockfish 15.1 (SFNNv5, version 0x7AF32F20)" and info["kind"] == "sfnnv5"
    assert info["l1"] == 64 and info["stockfish_loadable"] is False
    assert (tmp_path / "imp" / "net.nnue").read_bytes() == (files / "sf15.nnue").read_bytes()
    assert json.loads((tmp_path / "imp" / "import.json").read_text()) == info


def test_a_stockfish_19_file_is_checked_then_not_yet(files, tmp_path):
    for cmd in (["import-net", files / "sf19.nnue", "-o", tmp_path / "imp"],
                ["eval", files / "sf19.nnue", "--fen", "8/8/8/8/8/8/8/K6k w - - 0 1"]):
        r = nnue(*cmd)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "a Stockfish 19 (SFNNv16, version 0x6A448AFA) net (L1 32; version, hashes, sizes and every block " \
               "checked): nnue-forge cannot evaluate or import it yet" in r.stderr, r.stderr
    assert not (tmp_path / "imp").exists()
    # a damaged one is named as damaged, not "not yet"
    bad = tmp_path / "bad.nnue"
    bad.write_bytes((files / "sf19.nnue").read_bytes()[:50_000])
    r = nnue("import-net", bad, "-o", tmp_path / "imp")
    assert r.returncode == 2 and "truncated at byte 50,000 while reading the threat weights" in r.stderr, r.stderr
    assert not (tmp_path / "imp").exists()


def test_another_version_names_the_ones_we_read(files, tmp_path):
    for head, version in ((struct.pack("<I", 0x5D69D7B8), "0x5D69D7B8"), (b"\x01\x02", None)):
        p = tmp_path / "other.nnue"
        p.write_bytes(head + (files / "sf19.nnue").read_bytes()[4:] if version else head)
        r = nnue("import-net", p, "-o", tmp_path / "imp")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        if version:
            assert f"byte 0: version {version} is not a .nnue version nnue-forge reads (Stockfish 15.1 (SFNNv5, " \
                   "version 0x7AF32F20), Stockfish 19 (SFNNv16, version 0x6A448AFA))" in r.stderr, r.stderr
        else:
            assert "2 bytes: too short for a .nnue file" in r.stderr, r.stderr
    assert not (tmp_path / "imp").exists()


_READ = []


def toy_reader(path, data):
    """A stand-in for the sfnnv16 kind's reader: what it was handed."""
    _READ.append(sfnnue19.parse_nnue(path, data)["l1"])
    return "a net"


def test_the_kind_hook_reads_the_file(files, monkeypatch):
    entry = stockfish_files.FORMATS[sfnnue19.VERSION]
    with pytest.raises(NetFormatError, match="cannot evaluate or import it yet"):
        stockfish_files.read_nnue(files / "sf19.nnue")
    hooked = dataclasses.replace(entry, reader=f"{__name__}:toy_reader")
    monkeypatch.setitem(stockfish_files.FORMATS, sfnnue19.VERSION, hooked)
    assert stockfish_files.read_nnue(files / "sf19.nnue") == "a net" and _READ == [32]
    assert stockfish_files.read_nnue(files / "sf15.nnue").kind == "sfnnv5"
