"""Engine net files by version (:func:`nnue.inference.kinds.read_engine_file`): ``nnue import-net``
and ``nnue eval`` take a Stockfish 15.1 or Stockfish 19 ``.nnue`` and pick the kind from the
version field; another version is refused naming the ones this build reads; a damaged file is
named as damaged. Kinds plug in through their record's ``engine_reader``."""
from __future__ import annotations

import dataclasses
import json
import struct
import subprocess
import sys

import pytest

from nnue.inference import NetFormatError, kinds
from nnue.inference.kinds.sfnnv5.codec import nnue_bytes as sf15_bytes
from nnue.inference.kinds.sfnnv16 import codec as sfnnue19

from ..engines.test_sfnnv5 import random_int_net
from .test_sfnnue19 import random_tensors


def nnue(*args):
    return subprocess.run([sys.executable, "-m", "nnue.cli", *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("nets")
    (d / "sf15.nnue").write_bytes(sf15_bytes(random_int_net(64)))
    (d / "sf19.nnue").write_bytes(sfnnue19.nnue_bytes(random_tensors(64, seed=5)))
    return d


@pytest.mark.parametrize("name,fmt,kind", [("sf15.nnue", "Stockfish 15.1 .nnue", "sfnnv5"),
                                           ("sf19.nnue", "Stockfish 19 .nnue", "sfnnv16")])
def test_each_version_imports_as_its_kind(files, tmp_path, name, fmt, kind):
    r = nnue("import-net", files / name, "-o", tmp_path / "imp", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["format"] == fmt and info["kind"] == kind, info
    assert info["l1"] == 64 and info["stockfish_loadable"] is False
    assert (tmp_path / "imp" / "net.nnue").read_bytes() == (files / name).read_bytes()
    assert json.loads((tmp_path / "imp" / "import.json").read_text()) == info
    assert kinds.read_engine_file(files / name).kind == kind


def test_a_damaged_stockfish_19_file_is_named_as_such(files, tmp_path):
    bad = tmp_path / "bad.nnue"
    bad.write_bytes((files / "sf19.nnue").read_bytes()[:50_000])
    for cmd in (["import-net", bad, "-o", tmp_path / "imp"], ["eval", bad, "--fen", "8/8/8/8/8/8/8/K6k w - - 0 1"]):
        r = nnue(*cmd)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "truncated at byte 50,000 while reading the threat weights" in r.stderr, r.stderr
    assert not (tmp_path / "imp").exists()


def test_another_version_names_the_ones_we_read(files, tmp_path):
    for head, want in ((struct.pack("<I", 0x5D69D7B8), "byte 0: version 0x5D69D7B8 is not one this build reads "
                        "(0x7AF32F20 (Stockfish 15.1 .nnue, kind sfnnv5), 0x6A448AFA (Stockfish 19 .nnue, kind "
                        "sfnnv16))"), (b"\x01\x02", "truncated")):
        p = tmp_path / "other.nnue"
        p.write_bytes(head + (files / "sf19.nnue").read_bytes()[4:] if len(head) == 4 else head)
        r = nnue("import-net", p, "-o", tmp_path / "imp")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert want in r.stderr, r.stderr
    assert not (tmp_path / "imp").exists()


_READ = []


def toy_reader(path, data):
    """A stand-in for the sfnnv16 kind's reader: what it was handed."""
    _READ.append(sfnnue19.parse_nnue(path, data)["l1"])
    return "a net"


def test_the_kinds_engine_reader_reads_the_file(files, monkeypatch):
    entry = kinds.get("sfnnv16")
    hooked = dataclasses.replace(entry, engine_reader=dataclasses.replace(entry.engine_reader, read=toy_reader))
    monkeypatch.setitem(kinds.KINDS, "sfnnv16", hooked)
    assert kinds.read_engine_file(files / "sf19.nnue") == "a net" and _READ == [64]
    assert kinds.read_engine_file(files / "sf15.nnue").kind == "sfnnv5"
    monkeypatch.delitem(kinds.KINDS, "sfnnv16")  # a build without the kind: its files are another version
    with pytest.raises(NetFormatError, match="version 0x6A448AFA is not Stockfish 15.1's"):
        kinds.read_engine_file(files / "sf19.nnue")
