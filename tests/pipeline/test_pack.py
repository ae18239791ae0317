"""pack(): dumps -> Parquet dataset + manifest + rejects.

Cross-format equivalence on the Chess960 self-play set, accounting of every record read,
flags, idempotent and interrupted runs, compressed inputs, wrong formats, FEN round trips."""
from __future__ import annotations

import bz2
import dataclasses
import gzip
import json
import lzma
import random
import shutil
from pathlib import Path

import chess
import pyarrow.parquet as pq
import pytest
import zstandard

import nnue.pipeline.pack as packmod
from nnue.pipeline import manifest as mf
from nnue.pipeline.board import unpack, unpack_fen
from nnue.pipeline.formats import FORMATS, FormatError, ReaderOptions, get_format
from nnue.pipeline.pack import pack
from nnue.pipeline.schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE, SCHEMA
from nnue.pipeline.parts import read_part
from tests.samples import SAMPLE, XFEN960, selfplay

START = chess.STARTING_FEN


def run_pack(inputs, dataset, **kw):
    kw.setdefault("progress", False)
    return pack([Path(p) for p in inputs], dataset, **kw)


def table_of(dataset: Path, entry: dict):
    t = read_part(dataset / entry["part"])
    assert t.schema.remove_metadata().equals(SCHEMA.remove_metadata())
    return t


def rejects_of(dataset: Path, entry: dict) -> list[dict]:
    text = (dataset / entry["rejects"]).read_text()
    return [json.loads(line) for line in text.splitlines()]


def assert_accounted(summary: dict, dataset: Path):
    """read == packed + rejected in the summary, in each manifest entry and in the files."""
    assert summary["read"] == summary["packed"] + sum(summary["rejected"].values())
    m = mf.load(dataset)  # load() checks the invariant again
    for e in m["files"].values():
        assert e["read"] == e["packed"] + sum(e["rejected"].values())
        assert table_of(dataset, e).num_rows == e["packed"]
        rej = rejects_of(dataset, e)
        assert len(rej) == sum(e["rejected"].values())
        counts: dict[str, int] = {}
        for r in rej:
            counts[r["reason"]] = counts.get(r["reason"], 0) + 1
        assert counts == e["rejected"]
    return m


def plain_block(fen, move="e2e4", score=0, ply=0, result=0) -> str:
    return f"fen {fen}\nmove {move}\nscore {score}\nply {ply}\nresult {result}\ne\n"


def plain_records(path: Path) -> list[str]:
    """The six-line blocks of a .plain file, as text."""
    blocks, cur = [], []
    with open(path) as f:
        for line in f:
            cur.append(line)
            if line.strip() == "e":
                blocks.append("".join(cur))
                cur = []
    return blocks


def listing(dataset: Path) -> list[str]:
    """The dataset's files, less the writer lock (``.manifest.lock``: empty, never "finished")."""
    return sorted(p.name for p in dataset.iterdir() if p.name != mf.LOCK)


def assert_no_leftovers(dataset: Path):
    if not dataset.exists():  # a pack that failed before writing anything removes its new folder
        return
    names = listing(dataset)
    assert not [n for n in names if n.endswith(".tmp") or n.startswith(".")], names


# ===================================================================== cross-format equivalence
@pytest.fixture(scope="module")
def packed_960(tmp_path_factory):
    out = {}
    for ext, opts in ((".plain", ReaderOptions()), (".txt", ReaderOptions()),
                      (".pgn", ReaderOptions(pgn_pov="white"))):
        src = selfplay(XFEN960 + ext)
        ds = tmp_path_factory.mktemp("ds960") / ext[1:]
        summary = run_pack([src], ds, options=opts)
        m = assert_accounted(summary, ds)
        (entry,) = m["files"].values()
        out[ext[1:]] = dict(summary=summary, entry=entry, table=table_of(ds, entry).to_pydict())
    return out


def test_cross_format_counts(packed_960):
    for name, fmt in (("plain", "plain"), ("txt", "bullet-text"), ("pgn", "pgn")):
        s, e = packed_960[name]["summary"], packed_960[name]["entry"]
        assert s["read"] == s["packed"] + sum(s["rejected"].values())
        assert (e["read"], e["packed"], e["rejected"]) == (4586, 4586, {})
        assert e["format"] == fmt and e["score_unit"] == "cp"
        assert s["files"] == [e] and s["skipped"] == []


def test_cross_format_columns_equal(packed_960):
    p, t, g = (packed_960[k]["table"] for k in ("plain", "txt", "pgn"))
    n = len(p["board"])
    assert n == 4586
    for col in ("result", "ply", "piece_count", "in_check", "flags"):
        assert p[col] == t[col] == g[col], col
    mate = [bool(f & FLAG_SCORE_MATE) for f in p["flags"]]
    assert 10 < sum(mate) < n
    for i in range(n):
        # the position itself (bytes 0..27: placement, stm/ep, counters) always agrees
        assert p["board"][i][:28] == t["board"][i][:28] == g["board"][i][:28], i
        assert p["board"][i][30] == t["board"][i][30] == g["board"][i][30], i  # wdl
        if not mate[i]:
            assert p["score"][i] == t["score"][i] == g["score"][i], i
            assert p["board"][i] == t["board"][i] == g["board"][i], i  # eval field too
    assert p["best_move"] == g["best_move"]
    assert p["best_move_is_capture"] == g["best_move_is_capture"]
    assert None not in p["best_move"]
    assert t["best_move"] == [None] * n and t["best_move_is_capture"] == [None] * n
    # castling occurs, coded as king takes rook (flag 2)
    assert any(bm >> 14 == 2 for bm in p["best_move"])


def test_cross_format_game_partition(packed_960):
    def partition(ids):
        seen: dict[int, int] = {}
        return [seen.setdefault(i, len(seen)) for i in ids]

    parts = [partition(packed_960[k]["table"]["game_id"]) for k in ("plain", "txt", "pgn")]
    assert parts[0] == parts[1] == parts[2]
    assert max(parts[0]) + 1 == 40
    # game ids are content-derived (issue 15 item 5): the same game has the same id in every format
    ids = [packed_960[k]["table"]["game_id"] for k in ("plain", "txt", "pgn")]
    assert ids[0] == ids[1] == ids[2]
    for k in ("plain", "txt", "pgn"):
        assert set(packed_960[k]["table"]["source"]) == {packed_960[k]["entry"]["sha256"][:16]}


def test_960_castling_rights_in_dataset(packed_960):
    """X-FEN input comes back as the FEN python-chess writes for the Chess960 board."""
    fens = [line[4:].strip() for line in open(selfplay(XFEN960 + ".plain")) if line.startswith("fen ")]
    boards = packed_960["plain"]["table"]["board"]
    for fen, b in zip(fens, boards):
        assert unpack_fen(b) == chess.Board(fen, chess960=True).fen()


# ======================================================================= every record accounted
BAD_RECORDS = [
    # (block, expected reason or None for a good record)
    (plain_block(START, "e2e4", 20, 0, 0), None),
    (plain_block(START, "e2e5", 20, 0, 0), "illegal move"),
    (plain_block(START, "zz99", 20, 0, 0), "illegal move"),
    (plain_block("4k3/8/8/8/8/8/8/K3K3 w - - 0 1", "a1a2", 0, 0, 0),
     "a side does not have exactly one king"),
    (plain_block("P3k3/8/8/8/8/8/8/4K3 w - - 0 1", "e1e2", 0, 0, 0), "pawn on first or last rank"),
    (plain_block("4k3/8/8/8/8/8/8/4R1K1 w - - 0 1", "g1g2", 0, 0, 0),
     "side not to move is in check"),
    (plain_block("4k3/8/8/8/8/8/8/4K3 w K - 0 1", "e1e2", 0, 0, 0),
     "castling rights don't match kings and rooks"),
    (plain_block("not a fen at all", "e2e4", 0, 0, 0), "bad FEN"),
    (plain_block(START, "e2e4", "nan", 0, 0), "number not an integer"),
    (plain_block(START, "e2e4", 0, 0, 2), "result out of range"),
    (plain_block(START, "e2e4", 40000, 0, 0), "score out of int16 range"),
    (f"fen {START}\nscore 3\nply 0\nresult 0\ne\n", "missing field"),
    (plain_block("4k3/8/8/8/8/8/4P3/4K3 b - - 0 1", "e8d7", -15, 1, 0), None),
    (f"fen {START}\nmove e2e4\nscore 3\n", "truncated record"),  # last, no 'e'
]


def test_every_record_is_accounted_for(tmp_path):
    src = tmp_path / "bad.plain"
    text, expected, line = "", [], 1
    for block, reason in BAD_RECORDS:
        expected.append((f"line {line}", reason))
        text += block
        line += block.count("\n")
    src.write_text(text)
    ds = tmp_path / "ds"
    summary = run_pack([src], ds)
    m = assert_accounted(summary, ds)
    want_rejects = [(loc, r) for loc, r in expected if r is not None]
    assert summary["read"] == len(BAD_RECORDS)
    assert summary["packed"] == len(BAD_RECORDS) - len(want_rejects) == 2
    want_counts: dict[str, int] = {}
    for _, r in want_rejects:
        want_counts[r] = want_counts.get(r, 0) + 1
    assert summary["rejected"] == want_counts
    (entry,) = m["files"].values()
    assert entry["rejected"] == want_counts and entry["read"] == len(BAD_RECORDS)
    assert entry["path"] == str(src) and entry["size"] == src.stat().st_size
    assert entry["sha256"] == mf.sha256_file(src)
    rej = rejects_of(ds, entry)
    assert [(r["location"], r["reason"]) for r in rej] == want_rejects
    for r in rej:
        assert r["source"] == str(src)
        assert r["location"].startswith("line ")
        assert isinstance(r["detail"], str) and "raw" in r
    totals = mf.totals(m)
    assert totals == {"read": summary["read"], "packed": summary["packed"],
                      "rejected": summary["rejected"]}


def test_summary_sums_over_files(tmp_path):
    a, b = tmp_path / "a.plain", tmp_path / "b.plain"
    a.write_text(plain_block(START, score=1) + plain_block(START, "e2e5"))
    b.write_text(plain_block(START, score=2, result=3) + plain_block(START, "d2d4", score=3))
    ds = tmp_path / "ds"
    s = run_pack([a, b], ds)
    assert (s["read"], s["packed"]) == (4, 2)
    assert s["rejected"] == {"illegal move": 1, "result out of range": 1}
    m = assert_accounted(s, ds)
    assert len(m["files"]) == 2


# ======================================================================================== flags
FLAG_CASES = [
    # fen, move, score, result, expect dict
    ("4k3/8/8/8/8/8/4r3/4K3 w - - 0 1", "e1e2", 50, 0,
     dict(in_check=True, capture=True, flags=0, score=50)),
    (START, "e2e4", 32002, 0,
     dict(in_check=False, capture=False, flags=FLAG_SCORE_NONE, score=0,
          move=chess.E2 | chess.E4 << 6)),
    ("8/P7/8/8/8/8/8/k1K5 w - - 0 1", "a7a8q", 31990, 1,
     dict(in_check=False, capture=True, flags=FLAG_SCORE_MATE, score=31990,
          move=chess.A7 | chess.A8 << 6 | 3 << 12 | 3 << 14)),
    ("1n2k3/P7/8/8/8/8/8/4K3 w - - 0 1", "a7b8n", 300, 1,
     dict(capture=True, move=chess.A7 | chess.B8 << 6 | 0 << 12 | 3 << 14)),
    ("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", "e5d6", 10, 0,
     dict(capture=True, in_check=False, move=chess.E5 | chess.D6 << 6 | 1 << 14)),
    ("4k3/8/8/8/8/8/8/4K2R w K - 0 1", "e1g1", 10, 0,
     dict(capture=False, move=chess.E1 | chess.H1 << 6 | 2 << 14)),
    ("4k3/8/8/8/8/8/8/4K2R w K - 0 1", "e1h1", 10, 0,  # king-takes-rook spelling
     dict(capture=False, move=chess.E1 | chess.H1 << 6 | 2 << 14)),
    ("4k3/8/8/8/8/8/8/1RK5 w Q - 0 1", "c1b1", 10, 0,  # Chess960 only: king already on c1
     dict(capture=False, move=chess.C1 | chess.B1 << 6 | 2 << 14, castling=chess.BB_B1)),
    ("4k3/8/8/8/8/8/4P3/4K3 b - - 0 1", "e8d7", 100, 1,
     dict(capture=False, in_check=False, eval_white=-100, wdl=0, score=100)),
    ("4k3/8/8/8/8/8/4P3/4K3 b - - 0 1", "e8d7", -31990, -1,
     dict(flags=FLAG_SCORE_MATE, score=-31990, eval_white=31990, wdl=2)),
    ("4k3/8/8/8/8/8/3p4/4K3 w - - 0 1", "e1d2", 0, 0,
     dict(in_check=True, capture=True)),  # pawn check, king takes
    ("4k3/8/8/8/8/5n2/8/4K3 w - - 0 1", "e1e2", 0, 0,
     dict(in_check=True, capture=False)),  # knight check, king steps away
]


def test_flags_on_hand_made_positions(tmp_path):
    src = tmp_path / "flags.plain"
    src.write_text("".join(plain_block(f, mv, sc, 0, r) for f, mv, sc, r, _ in FLAG_CASES))
    ds = tmp_path / "ds"
    s = run_pack([src], ds)
    assert s["packed"] == s["read"] == len(FLAG_CASES), s["rejected"]
    (entry,) = mf.load(ds)["files"].values()
    t = table_of(ds, entry).to_pydict()
    for i, (fen, mv, sc, r, want) in enumerate(FLAG_CASES):
        d = unpack(t["board"][i])
        if "in_check" in want:
            assert t["in_check"][i] is want["in_check"], (i, fen)
        if "capture" in want:
            assert t["best_move_is_capture"][i] is want["capture"], (i, fen)
        if "flags" in want:
            assert t["flags"][i] == want["flags"], (i, fen)
        if "score" in want:
            assert t["score"][i] == want["score"], (i, fen)
        if "move" in want:
            assert t["best_move"][i] == want["move"], (i, fen, t["best_move"][i])
        if "castling" in want:
            assert d["castling_rooks"] == want["castling"]
        white = " w " in fen
        stm_score = t["score"][i]
        assert d["eval_white"] == want.get("eval_white", stm_score if white else -stm_score)
        assert d["wdl"] == want.get("wdl", (r if white else -r) + 1)
        assert t["result"][i] == r
        assert t["piece_count"][i] == chess.popcount(chess.Board(fen).occupied)
    # VALUE_NONE: the board's eval field is 0 too
    assert unpack(t["board"][1])["eval_white"] == 0


def test_ply_unknown_flag_from_bullet_without_counters(tmp_path):
    src = tmp_path / "nocounters.txt"
    src.write_text("4k3/8/8/8/8/8/4P3/4K3 w - - | 15 | 1.0\n"
                   "4k3/8/8/8/8/8/4P3/4K3 b - - 3 40 | 15 | 1.0\n")
    ds = tmp_path / "ds"
    s = run_pack([src], ds)
    assert s["packed"] == 2
    (entry,) = mf.load(ds)["files"].values()
    t = table_of(ds, entry).to_pydict()
    assert t["flags"] == [FLAG_PLY_UNKNOWN, 0]
    assert t["ply"] == [0, 79]
    assert t["score"] == [15, -15] and t["result"] == [1, -1]


# ============================================================================ idempotent re-pack
@pytest.fixture(scope="module")
def sample_blocks():
    return plain_records(SAMPLE)


def test_repack_is_idempotent_and_new_files_append(tmp_path, sample_blocks):
    a, b = tmp_path / "a.plain", tmp_path / "b.plain"
    a.write_text("".join(sample_blocks[:500]))
    b.write_text("".join(sample_blocks[500:800]))
    ds = tmp_path / "ds"
    s1 = run_pack([a], ds)
    assert (s1["read"], s1["packed"]) == (500, 500)
    manifest_bytes = (ds / mf.MANIFEST).read_bytes()
    files_before = {n: (ds / n).read_bytes() for n in listing(ds)}

    s2 = run_pack([a], ds)
    assert (s2["read"], s2["packed"], s2["rejected"], s2["files"]) == (0, 0, {}, [])
    assert s2["skipped"] == [str(a)]
    assert (ds / mf.MANIFEST).read_bytes() == manifest_bytes
    assert {n: (ds / n).read_bytes() for n in listing(ds)} == files_before

    # the same content under another name is the same input (keyed by sha256)
    a2 = tmp_path / "copy.plain"
    shutil.copy(a, a2)
    s3 = run_pack([a2], ds)
    assert s3["skipped"] == [str(a2)] and s3["read"] == 0
    assert (ds / mf.MANIFEST).read_bytes() == manifest_bytes

    s4 = run_pack([a, b], ds)
    assert s4["skipped"] == [str(a)]
    assert (s4["read"], s4["packed"]) == (300, 300)
    m = assert_accounted(s4, ds)
    assert len(m["files"]) == 2
    assert mf.totals(m)["packed"] == 800
    old = json.loads(manifest_bytes)
    for sha, entry in old["files"].items():
        assert m["files"][sha] == entry  # earlier entries untouched
    for n, data in files_before.items():
        if n != mf.MANIFEST:
            assert (ds / n).read_bytes() == data  # earlier part/rejects untouched
    assert_no_leftovers(ds)


def test_mixed_score_units_refused(tmp_path, sample_blocks):
    a = tmp_path / "a.plain"
    a.write_text("".join(sample_blocks[:5]))
    b = tmp_path / "b.plain"
    b.write_text("".join(sample_blocks[5:10]))
    ds = tmp_path / "ds"
    run_pack([a], ds)
    before = (ds / mf.MANIFEST).read_bytes()
    with pytest.raises(ValueError, match="cp"):
        run_pack([b], ds, score_unit="sf-internal")
    assert (ds / mf.MANIFEST).read_bytes() == before


# ============================================================================ compressed inputs
def _zstd(src: Path, dst: Path):
    dst.write_bytes(zstandard.ZstdCompressor(level=3).compress(src.read_bytes()))


def _stream_zstd(src: Path, dst: Path):
    # streamed frames carry no content size: the reader must cope with that too
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        zstandard.ZstdCompressor().copy_stream(fi, fo)


COMPRESSORS = {
    "gz": lambda s, d: d.write_bytes(gzip.compress(s.read_bytes())),
    "zst": _zstd,
    "zst-stream": _stream_zstd,
    "bz2": lambda s, d: d.write_bytes(bz2.compress(s.read_bytes())),
    "xz": lambda s, d: d.write_bytes(lzma.compress(s.read_bytes())),
}


@pytest.fixture(scope="module")
def small_plain(tmp_path_factory, sample_blocks):
    d = tmp_path_factory.mktemp("small")
    src = d / "small.plain"
    # a few good records, then a bad one, so rejects travel through decompression too
    src.write_text("".join(sample_blocks[:700]) + plain_block(START, "e2e5"))
    ds = d / "ds"
    s = run_pack([src], ds)
    (entry,) = mf.load(ds)["files"].values()
    return src, s, table_of(ds, entry).to_pydict()


@pytest.mark.parametrize("kind", list(COMPRESSORS))
def test_compressed_input_same_as_plain(tmp_path, small_plain, kind):
    src, s_plain, t_plain = small_plain
    suffix = kind.split("-")[0]
    comp = tmp_path / f"small.plain.{suffix}"
    COMPRESSORS[kind](src, comp)
    assert comp.stat().st_size < src.stat().st_size
    ds = tmp_path / "ds"
    s = run_pack([comp], ds)  # format detected through the compression suffix
    assert (s["read"], s["packed"], s["rejected"]) == (701, 700, {"illegal move": 1})
    assert (s["read"], s["packed"], s["rejected"]) == (
        s_plain["read"], s_plain["packed"], s_plain["rejected"])
    m = assert_accounted(s, ds)
    (entry,) = m["files"].values()
    assert entry["format"] == "plain" and entry["path"] == str(comp)
    assert entry["sha256"] == mf.sha256_file(comp)  # the file as stored
    t = table_of(ds, entry).to_pydict()
    for col in ("board", "score", "result", "ply", "piece_count", "in_check", "best_move",
                "best_move_is_capture", "flags"):
        assert t[col] == t_plain[col], col
    rej = rejects_of(ds, entry)
    assert rej[0]["location"] == "line 4201" and rej[0]["source"] == str(comp)


# ============================================================================= interrupted pack
class _Boom:
    def __init__(self, real, after):
        self.real, self.after, self.calls = real, after, 0

    def __call__(self, *a, **kw):
        self.calls += 1
        if self.calls > self.after:
            raise KeyboardInterrupt
        return self.real(*a, **kw)


def _interrupt_via_pack_board(monkeypatch):
    monkeypatch.setattr(packmod, "pack_board", _Boom(packmod.pack_board, 250))


def _interrupt_via_reader(monkeypatch):
    spec = get_format("plain")
    real = spec.read

    def read(stream, options):
        for n, item in enumerate(real(stream, options)):
            if n == 250:
                raise KeyboardInterrupt
            yield item

    monkeypatch.setitem(FORMATS, "plain", dataclasses.replace(spec, read=read))


def _interrupt_via_bulk(monkeypatch):
    """Stop inside the compiled text path (its third kernel call), with small output buffers."""
    from nnue.pipeline.compiled import text

    monkeypatch.setattr(text, "CAP", 64)
    monkeypatch.setitem(text.KERNELS, "plain", _Boom(text.KERNELS["plain"], 2))


@pytest.mark.parametrize("interrupt,fast", [(_interrupt_via_pack_board, False), (_interrupt_via_reader, False),
                                            (_interrupt_via_bulk, True)],
                         ids=["pack_board", "reader", "bulk"])
def test_interrupted_pack_leaves_nothing_half_done(tmp_path, monkeypatch, sample_blocks, interrupt, fast):
    a, b = tmp_path / "a.plain", tmp_path / "b.plain"
    a.write_text("".join(sample_blocks[:100]))
    # b holds a reject early on, so its rejects file has content when the run stops
    b.write_text(plain_block(START, "e2e5") + "".join(sample_blocks[100:600]))
    ds = tmp_path / "ds"
    run_pack([a], ds)
    manifest_bytes = (ds / mf.MANIFEST).read_bytes()
    before = listing(ds)
    assert len(before) == 3  # manifest, part-, rejects-

    monkeypatch.setattr(packmod, "ROW_GROUP", 64)  # row groups are flushed before the stop
    interrupt(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        run_pack([b], ds, options=ReaderOptions(fast=fast))
    assert listing(ds) == before
    assert (ds / mf.MANIFEST).read_bytes() == manifest_bytes
    assert_no_leftovers(ds)
    mf.load(ds)

    monkeypatch.undo()  # a later run picks up where it stopped
    s = run_pack([a, b], ds)
    assert s["skipped"] == [str(a)] and (s["read"], s["packed"]) == (501, 500)
    assert_accounted(s, ds)


def test_interrupt_between_files_keeps_finished_ones(tmp_path, monkeypatch, sample_blocks):
    a, b = tmp_path / "a.plain", tmp_path / "b.plain"
    a.write_text("".join(sample_blocks[:50]))
    b.write_text("".join(sample_blocks[50:120]))
    ds = tmp_path / "ds"
    monkeypatch.setattr(packmod, "pack_board", _Boom(packmod.pack_board, 60))
    with pytest.raises(KeyboardInterrupt):
        run_pack([a, b], ds, options=ReaderOptions(fast=False))  # one by one: pack_board per record
    m = mf.load(ds)
    assert [e["path"] for e in m["files"].values()] == [str(a)]
    assert len(listing(ds)) == 3
    assert_no_leftovers(ds)


def test_row_group_flushing_does_not_change_the_data(tmp_path, monkeypatch, small_plain):
    src, _, t_default = small_plain
    monkeypatch.setattr(packmod, "ROW_GROUP", 100)
    ds = tmp_path / "ds"
    run_pack([src], ds)
    (entry,) = mf.load(ds)["files"].values()
    assert pq.ParquetFile(ds / entry["part"]).metadata.num_row_groups == 7
    assert table_of(ds, entry).to_pydict() == t_default


# ================================================================================= wrong format
def _binary(path: Path, n: int = 20000) -> Path:
    path.write_bytes(random.Random(1234).randbytes(n))
    return path


def test_binary_as_plain_loses_nothing(tmp_path):
    src = _binary(tmp_path / "dump.bin")
    ds = tmp_path / "ds"
    try:
        s = run_pack([src], ds, fmt="plain")
    except FormatError as e:
        assert "dump.bin" in str(e)
        assert not list(ds.glob("part-*")) and not list(ds.glob("rejects-*"))
        assert_no_leftovers(ds)
        return
    assert s["packed"] == 0 and s["read"] == sum(s["rejected"].values()) > 0
    assert_accounted(s, ds)


def test_binary_as_plain_raises_format_error(tmp_path):
    src = _binary(tmp_path / "dump.bin")
    ds = tmp_path / "ds"
    with pytest.raises(FormatError, match="dump.bin"):
        run_pack([src], ds, fmt="plain")


@pytest.mark.parametrize("bad,what", [(b"\x00", "a NUL byte"), (b"\xff", "byte 0xff that is not UTF-8"),
                                      (b"\xe2\x80", "byte 0xe2 that is not UTF-8")])
def test_text_that_is_not_text_names_its_byte(tmp_path, sample_blocks, bad, what):
    """The byte offset is the file's (it once was the index of a character after CRLF translation,
    worded "(decompressed)" for any file); a compressed input names its decompressed stream."""
    import gzip

    head = "".join(sample_blocks[:5]).replace("\n", "\r\n").encode() + "é".encode()
    data = head + bad + b"\r\n" + "".join(sample_blocks[5:10]).encode()
    src = tmp_path / "d.plain"
    src.write_bytes(data)
    with pytest.raises(FormatError) as e:
        run_pack([src], tmp_path / "ds")
    assert f"d.plain: byte {len(head)}: {what}, not text" in str(e.value) and "decompressed" not in str(e.value)
    gz = tmp_path / "d.plain.gz"
    gz.write_bytes(gzip.compress(data))
    with pytest.raises(FormatError, match=f"byte {len(head)} of its decompressed stream: {what}"):
        run_pack([gz], tmp_path / "ds2")


def test_whitespace_only_file_packs_nothing_like_an_empty_one(tmp_path, sample_blocks):
    good = tmp_path / "good.plain"
    good.write_text("".join(sample_blocks[:20]))
    blank = tmp_path / "blank.plain"
    blank.write_text("\n   \n\n")
    ds = tmp_path / "ds"
    run_pack([good], ds)
    s = run_pack([blank], ds)
    assert (s["read"], s["packed"], s["rejected"]) == (0, 0, {})
    assert len(assert_accounted(s, ds)["files"]) == 2
    assert_no_leftovers(ds)


def test_garbage_text_gives_format_error_and_keeps_the_manifest(tmp_path, sample_blocks):
    good = tmp_path / "good.plain"
    good.write_text("".join(sample_blocks[:20]))
    junk = tmp_path / "junk.plain"
    junk.write_text("hello world\nthis is not a dump\n")
    ds = tmp_path / "ds"
    run_pack([good], ds)
    manifest_bytes = (ds / mf.MANIFEST).read_bytes()
    with pytest.raises(FormatError, match=r"junk\.plain: line 1"):
        run_pack([junk], ds)
    assert (ds / mf.MANIFEST).read_bytes() == manifest_bytes
    assert len(listing(ds)) == 3
    assert_no_leftovers(ds)


def test_empty_plain_file_packs_nothing(tmp_path):
    src = tmp_path / "empty.plain"
    src.write_bytes(b"")
    ds = tmp_path / "ds"
    s = run_pack([src], ds)
    assert (s["read"], s["packed"], s["rejected"]) == (0, 0, {})
    (entry,) = assert_accounted(s, ds)["files"].values()
    assert entry["read"] == 0


@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_empty_compressed_plain_file_packs_nothing(tmp_path, kind):
    raw = tmp_path / "empty.plain"
    raw.write_bytes(b"")
    src = tmp_path / f"empty.plain.{kind}"
    COMPRESSORS[kind](raw, src)
    s = run_pack([src], tmp_path / "ds")
    assert (s["read"], s["packed"], s["rejected"]) == (0, 0, {})


def test_bullet_text_read_as_plain_is_all_rejected(tmp_path):
    src = selfplay(XFEN960 + ".txt")
    lines = src.read_text().splitlines()[:300]
    txt = tmp_path / "dump.txt"
    txt.write_text("\n".join(lines) + "\n")
    ds = tmp_path / "ds"
    try:
        s = run_pack([txt], ds, fmt="plain")
    except FormatError as e:
        assert "dump.txt" in str(e)
        assert_no_leftovers(ds)
        return
    assert s["packed"] == 0
    assert s["read"] == sum(s["rejected"].values()) >= len(lines)
    m = assert_accounted(s, ds)
    (entry,) = m["files"].values()
    rej = rejects_of(ds, entry)
    assert rej[0]["location"] == "line 1" and rej[-1]["location"] == f"line {len(lines)}"


def test_unknown_format_name(tmp_path, sample_blocks):
    a = tmp_path / "a.plain"
    a.write_text(sample_blocks[0])
    with pytest.raises(FormatError, match="nope"):
        run_pack([a], tmp_path / "ds", fmt="nope")


def test_missing_input(tmp_path):
    with pytest.raises(FileNotFoundError):
        run_pack([tmp_path / "missing.plain"], tmp_path / "ds")


# =================================================================================== round trip
def test_round_trip_whole_sample(tmp_path):
    src = SAMPLE
    ds = tmp_path / "ds"
    s = run_pack([src], ds)
    assert s["read"] == s["packed"] == 4015 and s["rejected"] == {}
    (entry,) = assert_accounted(s, ds)["files"].values()
    t = table_of(ds, entry).to_pydict()
    fens = [line[4:].strip() for line in open(src) if line.startswith("fen ")]
    scores = [int(line[6:]) for line in open(src) if line.startswith("score ")]
    assert len(fens) == len(t["board"]) == 4015
    for i, (fen, packed) in enumerate(zip(fens, t["board"])):
        b = chess.Board(fen)
        assert unpack_fen(packed) == b.fen(), i
        assert t["in_check"][i] is b.is_check()
        assert t["piece_count"][i] == chess.popcount(b.occupied)
    assert t["score"] == scores  # no VALUE_NONE, no clipping in the sample
    # games: ply restarts at every game start
    starts = sum(1 for i in range(1, len(t["ply"])) if t["ply"][i] != t["ply"][i - 1] + 1) + 1
    assert len(set(t["game_id"])) == starts
