"""Byte ranges of one large input (``nnue pack --workers N --range-mb``, :mod:`nnue.pipeline.ranges`).

A file split into byte ranges packs to the same rows (same order, same game ids) and the same
rejects (same locations and details) as the same file packed whole; one worker and N workers write
the same files byte for byte (the split depends on the file and the range size only); and N shards
of the ranges, merged, equal one pack. Every format that is split is checked on its samples, cut
into ranges of a few kB so that each file has several, plus files with rejects at the boundaries."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import chess
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import pack
from nnue.pipeline.ranges import plan, range_bytes
from nnue.pipeline.shard import merge_datasets, shard_units
from nnue.pipeline.parts import read_part

from tests.formats import formats_testlib as lib
from tests.samples import CUT, SAMPLE, public, public_if_present, selfplay, selfplay_zst


def rows(ds: Path) -> pa.Table:
    """Every row of a dataset, parts in order."""
    m = mf.load(ds)
    tables = [read_part(ds / name) for e in sorted(m["files"].values(), key=mf.entry_key)
              for name in mf.entry_parts(e)]
    return pa.concat_tables(tables).combine_chunks()


def rejects(ds: Path) -> list[dict]:
    m = mf.load(ds)
    out = []
    for e in sorted(m["files"].values(), key=mf.entry_key):
        for name in mf.entry_rejects(e):
            out += [json.loads(line) for line in (ds / name).read_text().splitlines()]
    return out


def files(ds: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(ds.iterdir()) if p.name.startswith(("part-", "rejects-"))}


# validated_by_python_chess is not compared between a whole and a ranged pack: how many records
# take the one-by-one path depends on where the compiled text core's runs start (it re-reads a
# run of fewer than 8 rows before a hand-back with the line machine), so it may differ with the
# range size; between 1 and N workers at one range size it is equal (the manifests are equal)
COUNTS = ("read", "packed", "rejected", "castling", "game_ids", "format", "sha256", "size", "path")


def check_identity(tmp_path: Path, inputs: list[Path], mb: float, fmt: str = "auto", min_ranges: int = 3,
                   options: ReaderOptions = ReaderOptions()) -> dict:
    """Pack whole, in ranges with 1 worker and with 2 workers; assert they agree. Returns the
    ranged entries."""
    whole, one, two = tmp_path / "whole", tmp_path / "one", tmp_path / "two"
    pack(inputs, whole, fmt=fmt, progress=False, options=options)
    pack(inputs, one, fmt=fmt, progress=False, range_mb=mb, options=options)
    pack(inputs, two, fmt=fmt, progress=False, range_mb=mb, workers=2, options=options)
    assert files(one) == files(two)
    assert mf.load(one) == mf.load(two)
    assert rows(whole).equals(rows(one))
    assert rejects(whole) == rejects(one)
    mw, mo = mf.load(whole), mf.load(one)
    for sha, e in mo["files"].items():
        assert {k: e.get(k) for k in COUNTS} == {k: mw["files"][sha].get(k) for k in COUNTS}
        assert sum(pq.ParquetFile(one / p).metadata.num_rows for p in mf.entry_parts(e)) == e["packed"]
    ranged = [e for e in mo["files"].values() if "parts" in e]
    assert ranged and max(len(e["parts"]) for e in ranged) >= min_ranges
    # a range starts with a new game: the game ids on either side of a boundary differ (with
    # the rows equal to the whole file's, that is: no game is cut)
    for e in ranged:
        if e["format"] in ("epd", "bulletformat"):  # no games: each position is its own
            continue
        ids = [read_part(one / p, columns=["game_id"]).column("game_id").to_pylist() for p in e["parts"]]
        ids = [g for g in ids if g]
        assert all(a[-1] != b[0] for a, b in zip(ids, ids[1:]))
    return mo


def mb_for(path: Path, ranges: int) -> float:
    return path.stat().st_size / ranges / (1 << 20)


# ------------------------------------------------------------------------ text formats
def test_plain_and_bullet_text_in_ranges(tmp_path):
    ins = [selfplay("sf15-960-xfen-s2.plain"), selfplay("sf15-960-xfen-s2.txt")]
    check_identity(tmp_path / "a", ins, mb_for(ins[1], 6), min_ranges=6)


def test_epd_in_ranges(tmp_path):
    epd = public("samplefen1000.epd")
    check_identity(tmp_path / "b", [epd, public("sample_ethereal_fen.epd")], mb_for(epd, 7))


def _junk_plain(src: Path, dst: Path, seed: int = 3) -> None:
    """A .plain file with bad records, unknown lines, CRLF records and empty lines scattered over it."""
    rng = random.Random(seed)
    blocks = src.read_text().split("e\n")[:-1]
    out = []
    for i, b in enumerate(blocks[:2500]):
        r = rng.random()
        if r < 0.02:
            b = b.replace("score ", "score x")          # number not an integer
        elif r < 0.04:
            b = b.replace("move ", "bogus ")            # unexpected line (detail names its line)
        elif r < 0.05:
            b = b.replace("ply ", "result 0\nply ")     # repeated key
        elif r < 0.06:
            b = b.replace("fen ", "fen 8/8/8/8 w - - 0 1\nfen ")  # record cut short by the next fen
        elif r < 0.07:
            b = b.replace("\n", "\r\n")
        elif r < 0.09:
            b = b.replace("fen ", "fen K7/8/8/8/8/8/8/k7 w - - 0 1 x\nmove a1a2\nscore 0\nply 0\nresult 0\n"
                          "e\nfen ")  # an extra record with a FEN python-chess does not accept
        out.append(b + ("e\n\n" if r > 0.97 else "e\n"))
    dst.write_text("".join(out))


def test_rejects_across_range_boundaries_are_the_same(tmp_path):
    src = selfplay("sf15-960-xfen-s2.plain")
    bad = tmp_path / "junk.plain"
    _junk_plain(src, bad)
    m = check_identity(tmp_path / "p", [bad], mb_for(bad, 9), min_ranges=6)
    (e,) = m["files"].values()
    assert sum(e["rejected"].values()) > 50
    # the reference path (no bulk runs) gives the same too, and counts every record it validated
    m2 = check_identity(tmp_path / "slow", [bad], mb_for(bad, 5), options=ReaderOptions(fast=False))
    (e2,) = m2["files"].values()
    assert e2["validated_by_python_chess"] > e["validated_by_python_chess"]
    # bullet text with bad lines
    lines = selfplay("sf15-960-xfen-s2.txt").read_text().splitlines(keepends=True)
    rng = random.Random(5)
    txt = tmp_path / "junk.txt"
    txt.write_text("".join(("not | a line\n" if rng.random() < 0.03 else "") + ln for ln in lines))
    m3 = check_identity(tmp_path / "t", [txt], mb_for(txt, 8), min_ranges=6)
    assert sum(next(iter(m3["files"].values()))["rejected"].values()) > 50


def test_text_boundaries_fall_where_the_reader_starts_a_game(tmp_path):
    """A nominal offset inside a game moves on to the next game's first record."""
    src = selfplay("sf15-960-xfen-s2.plain")
    rs = plan(src, "plain", range_bytes(mb_for(src, 10)))
    assert len(rs) >= 8
    data = src.read_bytes()
    for r in rs[1:]:
        assert data[r.start:r.start + 4] == b"fen "
        assert r.line == data[:r.start].count(b"\n")
        assert r.start >= r.index * range_bytes(mb_for(src, 10))
    # the record before each boundary and the one at it are of different games
    ds = tmp_path / "ds"
    pack([src], ds, progress=False, range_mb=mb_for(src, 10))
    (e,) = mf.load(ds)["files"].values()
    last = None
    for p in e["parts"]:
        g = read_part(ds / p, columns=["game_id", "ply"])
        if last is not None:
            assert g.column("game_id")[0].as_py() != last
        last = g.column("game_id")[-1].as_py()


def test_compressed_inputs_stay_one_range(tmp_path):
    """(PGN in ranges: tests/pipeline/test_pgn_ranges.py.)"""
    gz = tmp_path / "a.plain.gz"
    gz.write_bytes(gzip.compress(selfplay("sf15-960-xfen-s2.plain").read_bytes()))
    assert len(plan(gz, "plain", 1000)) == 1
    pgn = tmp_path / "b.pgn.zst"
    pgn.write_bytes(selfplay_zst(f"{CUT}.pgn").read_bytes())
    assert len(plan(pgn, "pgn", 1000)) == 1
    ds = tmp_path / "ds"
    pack([gz, pgn], ds, progress=False, range_mb=0.001, workers=2)
    assert all("part" in e and "parts" not in e for e in mf.load(ds)["files"].values())


# ------------------------------------------------------------------------ binary formats
def _chain_starts(block: bytes) -> list[int]:
    """Where each chain of a binpack block starts (the compiled decoder's chain positions; a chain
    it hands back is walked by the reference decoder)."""
    from nnue.pipeline.compiled import binpack as cb
    from nnue.pipeline.formats.binpack import read_chain

    b = cb.buffers(cb.CAP)
    data = np.frombuffer(block, np.uint8)
    pos, starts = 0, []
    while pos < len(block):
        rows, chains, new, status = cb.decode_chains(data, pos, len(block), *(b[k] for k in cb._FIELDS[:-3]),
                                                     b["chain"], b["chain_pos"], b["raw_score"])
        starts += sorted(set(b["chain_pos"][:rows].tolist()))
        pos = new
        if status == cb.FALLBACK:
            starts.append(pos)
            _, pos = read_chain(block, pos, 8, 0)
    return starts + [len(block)]


def _binpack_blocks(src: Path, dst: Path, per_block: int, chains: int | None = None) -> int:
    """Cut small.binpack's block(s) into blocks of ``per_block`` chains (the first ``chains``
    chains only, when given). Returns the number of blocks."""
    data = src.read_bytes()
    out, base = [], 0
    while base < len(data):
        size = int.from_bytes(data[base + 4:base + 8], "little")
        block = data[base + 8:base + 8 + size]
        ends = _chain_starts(block)[:None if chains is None else chains + 1]
        for a in range(0, len(ends) - 1, per_block):
            body = block[ends[a]:ends[min(a + per_block, len(ends) - 1)]]
            out.append(b"BINP" + len(body).to_bytes(4, "little") + body)
        base += 8 + size
    dst.write_bytes(b"".join(out))
    return len(out)


def test_binpack_in_ranges_of_blocks(tmp_path):
    src = public("small.binpack")
    blocks = tmp_path / "blocks.binpack"
    n = _binpack_blocks(src, blocks, 400)
    assert n >= 6
    # a corrupt chain in one block (rejects the rest of that block) and a cut last block (small:
    # a cut block is read by the reference path)
    data = bytearray(blocks.read_bytes())
    second = 8 + int.from_bytes(data[4:8], "little")
    data[second + 8 + 40:second + 8 + 44] = b"\xff\xff\xff\xff"
    tail = tmp_path / "tail.binpack"
    _binpack_blocks(src, tail, 2, chains=2)
    last = tail.read_bytes()
    last = last[:8 + int.from_bytes(last[4:8], "little")]
    cut = tmp_path / "cut.binpack"
    cut.write_bytes(bytes(data) + last[:-20])
    rs = plan(cut, "binpack", range_bytes(mb_for(cut, 6)))
    assert len(rs) >= 4 and all(cut.read_bytes()[r.start:r.start + 4] == b"BINP" for r in rs)
    check_identity(tmp_path / "b", [cut], mb_for(cut, 6), min_ranges=4)


def _marlin_from(ds_rows: pa.Table, dst: Path) -> None:
    col = ds_rows.column("board").combine_chunks()
    dst.write_bytes(np.frombuffer(col.buffers()[1], np.uint8, count=32 * len(col)).tobytes())


def test_bin_marlinformat_bulletformat_viriformat_in_ranges(tmp_path):
    recs = lib.plain_records(SAMPLE)  # lib: an independent .bin encoder
    psv = b"".join(lib.encode_psv(chess.Board(r["fen"]), chess.Move.from_uci(r["move"]), r["score"], r["ply"],
                                  r["result"]) for r in recs[:3000])
    sfbin = tmp_path / "a.bin"
    sfbin.write_bytes(psv + b"\x00" * 17)  # a truncated last record
    # marlinformat from a packed dataset's boards, with a few corrupt records
    ds = tmp_path / "src"
    pack([SAMPLE], ds, progress=False)
    marlin = tmp_path / "a.marlin"
    _marlin_from(rows(ds), marlin)
    data = bytearray(marlin.read_bytes())
    for k in range(7, len(data) // 32, 611):
        data[32 * k:32 * k + 8] = b"\xff" * 8  # 64 occupied squares: does not decode
    marlin.write_bytes(bytes(data))
    cases = [("bin", sfbin, "bin", 7, 1), ("marlin", marlin, "marlinformat", 7, 4)]
    # bulletformat and viriformat from the third-party samples, where they are present (the .bin and
    # marlinformat cases above are our own data and run in any clone)
    for bf in public_if_present("batch.bf"):
        cases.append(("bf", bf, "bulletformat", 5, 0))
    for vf_sample in public_if_present("test-vf.bin"):
        vf = tmp_path / "many.vf"
        games = vf_sample.read_bytes()
        many = bytearray(games * 12 + games[:50])  # a game cut short at the end
        many[5 * len(games) + 30] = 7  # a header's wdl byte out of range: its game's positions are rejects
        many[8 * len(games) + 32:8 * len(games) + 34] = (63 << 6).to_bytes(2, "little")  # a1h8: illegal
        vf.write_bytes(bytes(many))
        cases.append(("vf", vf, "viriformat", 9, 5))
    for name, path, fmt, k, bad in cases:
        m = check_identity(tmp_path / name, [path], mb_for(path, k), fmt=fmt, min_ranges=4)
        assert sum(next(iter(m["files"].values()))["rejected"].values()) >= bad


# ------------------------------------------------------------------------ shards and merge
@pytest.mark.parametrize("mb,n,workers", [(0.06, 3, 1), pytest.param(0.004, 4, 2, marks=pytest.mark.slow)])
def test_range_shards_merged_equal_one_pack(tmp_path, mb, n, workers):
    """Shards of byte ranges, merged, equal one pack; with 4 kB ranges most nominal ranges of the
    .plain input are empty (its games are longer), so some shards hold only empty ones of it."""
    ins = [selfplay("sf15-960-xfen-s2.plain"), selfplay("sf15-960-xfen-s2.txt"), selfplay("sf15-960-xfen-s2.pgn"),
           *public_if_present("batch.bf", "samplefen.epd")]
    if mb < 0.01:
        ins = ins[:1]
    one = tmp_path / "one"
    pack(ins, one, progress=False, range_mb=mb)
    deal = [shard_units(ins, k, n, range_bytes(mb)) for k in range(n)]
    # the shards partition the (file, range) units, and one file is spread over several shards
    units = [(f, i) for d in deal for f, v in d.items() for i in v]
    assert len(units) == len(set(units))
    assert sum(1 for d in deal if str(ins[0]) in d) >= 2
    shards = []
    for k in range(n):
        s = tmp_path / f"shard-{k}"
        pack([f for f in ins if str(f) in deal[k]], s, progress=False, range_mb=mb, units=deal[k], workers=workers)
        shards.append(s)
    assert any("shard_units" in e for e in mf.load(shards[0])["files"].values())
    out = tmp_path / "merged"
    merge_datasets(shards[:2], out)
    # a half-merged input is listed with the ranges it has so far
    assert any("shard_units" in e for e in mf.load(out)["files"].values())
    merge_datasets(shards, out)
    merge_datasets(shards, out)  # idempotent
    assert files(out) == files(one)
    assert mf.load(out)["files"] == mf.load(one)["files"]
    assert rows(out).equals(rows(one))


def test_range_mb_and_workers_on_the_command_line(tmp_path):
    import subprocess
    import sys

    src = selfplay("sf15-960-xfen-s2.txt")
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "pack", str(src), "-o", str(tmp_path / "ds"), "--json",
                        "--no-progress", "--range-mb", "0.05", "--workers", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["files"][0]["parts"] >= 5
    assert 0 <= out["validated_by_python_chess"] <= out["read"]
    assert out["validated_by_python_chess_share"] == pytest.approx(out["validated_by_python_chess"] / out["read"],
                                                                    abs=1e-6)
    bad = subprocess.run([sys.executable, "-m", "nnue.cli", "pack", str(src), "-o", str(tmp_path / "x"),
                          "--range-mb", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "positive" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("workers", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_a_shard_of_only_empty_ranges(tmp_path, workers):
    """A shard whose ranges of a file are all empty (no boundary in them) writes an entry with no
    parts, which the merge unites with the others into one pack's entry."""
    src = selfplay("sf15-960-xfen-s2.plain")
    mb = 0.004
    rs = plan(src, "plain", range_bytes(mb))
    full = set(range(rs[0].count))
    empty = sorted(full - {r.index for r in rs})
    assert empty
    one = tmp_path / "one"
    pack([src], one, progress=False, range_mb=mb)
    a, b = tmp_path / "a", tmp_path / "b"
    pack([src], a, progress=False, range_mb=mb, units={str(src): empty}, workers=workers)
    (e,) = mf.load(a)["files"].values()
    assert e["parts"] == [] and e["read"] == 0 and e["shard_units"] == empty
    pack([src], b, progress=False, range_mb=mb, units={str(src): sorted(full - set(empty))}, workers=workers)
    merge_datasets([a, b], tmp_path / "m")
    assert mf.load(tmp_path / "m")["files"] == mf.load(one)["files"]
    assert files(tmp_path / "m") == files(one)


def test_dedup_in_ranges_equals_dedup_whole(tmp_path):
    """--dedup packs the ranges one after another against one set of seen positions: the same
    rows and "duplicate position" rejects (their locations from bulk runs, rebased) as whole."""
    src = selfplay("sf15-960-xfen-s2.txt")
    twice = tmp_path / "twice.txt"
    twice.write_bytes(src.read_bytes() * 2)
    whole, ranged = tmp_path / "whole", tmp_path / "ranged"
    pack([twice], whole, progress=False, dedup=True)
    pack([twice], ranged, progress=False, dedup=True, range_mb=mb_for(twice, 6), workers=2)
    (e,) = mf.load(ranged)["files"].values()
    assert len(e["parts"]) >= 5 and e["rejected"].get("duplicate position", 0) >= e["packed"]
    assert rows(whole).equals(rows(ranged))
    assert rejects(whole) == rejects(ranged)


def test_interrupted_merge_of_range_shards_is_finished_by_a_rerun(tmp_path, monkeypatch):
    """The second shard's range parts are moved, then the merge dies before the manifest: the
    target lists the input with the first shard's ranges only, and a rerun completes it."""
    from nnue.pipeline import shard as shardmod

    src = selfplay("sf15-960-xfen-s2.txt")
    mb = mb_for(src, 6)
    one = tmp_path / "one"
    pack([src], one, progress=False, range_mb=mb)
    shards = []
    for k in range(2):
        s = tmp_path / f"s{k}"
        pack([src], s, progress=False, range_mb=mb, units=shard_units([src], k, 2, range_bytes(mb)))
        shards.append(s)
    real = mf.merge
    calls = {"n": 0}

    def crash_on_second(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    out = tmp_path / "merged"
    (first,) = mf.load(shards[0])["files"].values()
    monkeypatch.setattr(shardmod.mf, "merge", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        merge_datasets(shards, out)
    monkeypatch.setattr(shardmod.mf, "merge", real)
    (half,) = mf.load(out)["files"].values()
    assert half == first
    assert len(list(out.glob("part-*"))) > len(half["parts"])  # moved, not yet listed
    merge_datasets(shards, out)
    assert mf.load(out)["files"] == mf.load(one)["files"] and files(out) == files(one)


@pytest.mark.parametrize("fmt", ["plain", "bullet-text", "epd", "bin", "marlinformat", "bulletformat", "binpack",
                                 "viriformat", "pgn"])
def test_the_split_of_any_bytes_partitions_the_file(tmp_path, fmt):
    """Random bytes and mutated samples: planning never fails, and the ranges cover the file
    contiguously, each starting past its nominal offset."""
    rng = random.Random(fmt)
    srcs = {"plain": lambda: selfplay("sf15-960-xfen-s2.plain"), "bullet-text": lambda: selfplay("sf15-960-xfen-s2.txt"),
            "epd": lambda: public("samplefen1000.epd"), "binpack": lambda: public("small.binpack"),
            "viriformat": lambda: public("test-vf.bin"), "pgn": lambda: selfplay(f"{CUT}.pgn")}
    base = srcs[fmt]().read_bytes()[:200_000] if fmt in srcs else public("batch.bf").read_bytes()
    cases = [bytes(rng.randrange(256) for _ in range(20_000))]
    for _ in range(3):
        b = bytearray(base)
        for _ in range(200):
            b[rng.randrange(len(b))] = rng.randrange(256)
        cases.append(bytes(b))
    for k, data in enumerate(cases):
        p = tmp_path / f"{k}.dump"
        p.write_bytes(data)
        rb = max(64, len(data) // 9)
        rs = plan(p, fmt, rb)
        assert rs[0].start == 0 and rs[-1].end == len(data)
        assert all(a.end == b.start and b.start >= b.index * rb for a, b in zip(rs, rs[1:]))
        assert [r.index for r in rs] == sorted({r.index for r in rs})


def test_merge_refuses_shards_cut_into_different_ranges(tmp_path):
    src = selfplay("sf15-960-xfen-s2.txt")
    a, b = tmp_path / "a", tmp_path / "b"
    pack([src], a, progress=False, range_mb=0.05, units=shard_units([src], 0, 2, range_bytes(0.05)))
    pack([src], b, progress=False, range_mb=0.07, units=shard_units([src], 1, 2, range_bytes(0.07)))
    with pytest.raises(ValueError, match="same --range-mb"):
        merge_datasets([a, b], tmp_path / "m")
    # refused before anything moves: both shards keep their manifests and files, no target
    # dataset looks complete (a fresh-clone check found shard a moved in and b refused)
    assert (a / mf.MANIFEST).exists() and (b / mf.MANIFEST).exists()
    assert list(a.glob("part-*.parquet")) and list(b.glob("part-*.parquet"))
    assert not (tmp_path / "m" / mf.MANIFEST).exists()
    # the same shards in the other order, and after a first shard merged alone: still refused
    with pytest.raises(ValueError, match="same --range-mb"):
        merge_datasets([b, a], tmp_path / "m")
    merge_datasets([a], tmp_path / "m2")
    with pytest.raises(ValueError, match="same --range-mb"):
        merge_datasets([b], tmp_path / "m2")
    assert (b / mf.MANIFEST).exists()
