"""Binary dump readers on the public samples (golden values from ../shared/data/public/SOURCES.md)
and on files built here: Stockfish .binpack, Stockfish .bin, bulletformat, marlinformat,
viriformat; plus format detection.

The public samples are read in place (never copied into the repo). Where there is no public
sample (marlinformat, Stockfish .bin) the test builds one from the bundled .plain sample: the
packed board column for marlinformat, and an independent PackedSfenValue encoder
(formats_testlib.encode_psv, written from FORMATS.md) for .bin."""
from __future__ import annotations

import io
import struct
from collections import Counter
from pathlib import Path

import chess
import pytest

from nnue.pipeline.formats import (VALUE_NONE, FormatError, ReaderOptions, Record, Reject, detect_format,
                                   get_format)
from nnue.pipeline.pack import pack
from nnue.pipeline.schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_NONE
from nnue.pipeline.parts import read_part
from tests.formats.formats_testlib import (SAMPLE, check_finished, encode_psv, king_takes_rook_uci, plain_records,
                                           public, viri_games)


def read_items(fmt: str, data_or_path) -> list[Record | Reject]:
    """All items a reader yields for a file (Path) or for bytes, record by record (the bulk
    path of the fixed-record readers is checked against this one in test_fastcheck.py)."""
    spec = get_format(fmt)
    opts = ReaderOptions(fast=False)
    if isinstance(data_or_path, Path):
        with open(data_or_path, "rb") as f:
            return list(spec.read(f, opts))
    return list(spec.read(io.BytesIO(data_or_path), opts))


def run_pack(path: Path, dataset: Path, fmt: str = "auto") -> tuple[dict, list[dict], dict]:
    """pack() one file; returns (summary, rejects, part table as a dict of columns)."""
    summary = pack([path], dataset, fmt=fmt, progress=False)
    rejects = check_finished(summary, dataset, path)
    (entry,) = summary["files"]
    return summary, rejects, read_part(dataset / entry["part"]).to_pydict()


def placement(board_text: str) -> str:
    """'r.bq.rk./...' (dots for empty squares) -> FEN placement."""
    out = []
    for row in board_text.split("/"):
        s, n = "", 0
        for ch in row:
            if ch == ".":
                n += 1
            else:
                s += (str(n) if n else "") + ch
                n = 0
        out.append(s + (str(n) if n else ""))
    return "/".join(out)


# ======================================================================== format detection
@pytest.mark.parametrize("name,fmt", [
    ("small.binpack", "binpack"), ("ep1.binpack", "binpack"), ("batch.bf", "bulletformat"),
    ("test-vf.bin", "viriformat"), ("samplefen.epd", "epd"), ("samplefen1000.epd", "epd"),
    ("sample_ethereal_fen.epd", "epd"), ("sample_with_annotations.pgn", "pgn"),
])
def test_detect_format_on_public_samples(name, fmt):
    assert detect_format(public(name)) == fmt


def test_detect_format_binpack_by_magic_whatever_the_extension(tmp_path):
    p = tmp_path / "renamed.dat"
    p.write_bytes(public("ep1.binpack").read_bytes())
    assert detect_format(p) == "binpack"


# ======================================================================== independent stem decode
_STEM_PIECES = "PpNnBbRrQqKk"


def stem_by_hand(stem: bytes) -> dict:
    """A binpack chain stem decoded straight from FORMATS.md (no library code)."""
    occ = int.from_bytes(stem[:8], "big")
    board = chess.Board.empty()
    turn, castling, ep = chess.WHITE, 0, None
    for i, sq in enumerate(chess.scan_forward(occ)):
        code = stem[8 + i // 2] >> (4 * (i % 2)) & 15
        if code < 12:
            board.set_piece_at(sq, chess.Piece.from_symbol(_STEM_PIECES[code]))
        elif code == 12:
            white = chess.square_rank(sq) == 3
            board.set_piece_at(sq, chess.Piece(chess.PAWN, white))
            ep = sq - 8 if white else sq + 8
        elif code in (13, 14):
            board.set_piece_at(sq, chess.Piece(chess.ROOK, code == 13))
            castling |= chess.BB_SQUARES[sq]
        else:
            board.set_piece_at(sq, chess.Piece(chess.KING, chess.BLACK))
            turn = chess.BLACK
    board.turn, board.castling_rights, board.ep_square = turn, castling, ep
    move, score, ply_result, rule50 = struct.unpack(">HHHH", stem[24:32])
    zz = lambda v: -(v >> 1) - 1 if v & 1 else v >> 1  # noqa: E731
    uci = chess.square_name(move >> 8 & 63) + chess.square_name(move >> 2 & 63)
    if move >> 14 == 1:
        uci += "nbrq"[move & 3]
    return dict(board=board, move=uci, score=zz(score), ply=ply_result & 0x3FFF,
                result=zz(ply_result >> 14), rule50=rule50)


# ======================================================================== ep1.binpack
EP1 = [
    ("1q5b/1r5k/4p2p/1b2P1pN/3p4/6PP/1nP3B1/1Q2B1K1 w - - 0 35", "c2c4", -201, 68, 0),
    ("1q5b/1r5k/4p2p/1b2P1pN/2Pp4/6PP/1n4B1/1Q2B1K1 b - - 0 35", "d4d3", 254, 69, 0),
    ("1q5b/1r5k/4p2p/1b2P1pN/2P5/3p2PP/1n4B1/1Q2B1K1 w - - 0 36", "g2b7", -220, 70, 0),
]


def test_ep1_binpack_bytes_are_as_documented():
    data = public("ep1.binpack").read_bytes()
    assert len(data) == 46
    assert data[:4] == b"BINP" and int.from_bytes(data[4:8], "little") == 38
    assert data[8:16].hex() == "828290d208c04652"
    assert data[32:34].hex() == "0a68" and data[34:36].hex() == "0191" and data[36:38].hex() == "0044"
    assert data[40:42].hex() == "0002" and data[42:].hex() == "1d18f508"
    d = stem_by_hand(data[8:40])
    assert d["board"].fen() == EP1[0][0].replace(" 0 35", " 0 1")
    assert (d["move"], d["score"], d["ply"], d["result"], d["rule50"]) == ("c2c4", -201, 68, 0, 0)


def test_ep1_binpack_decodes_to_exactly_three_positions():
    items = read_items("binpack", public("ep1.binpack"))
    assert all(isinstance(r, Record) for r in items)
    assert [(r.fen, r.move, r.score, r.ply, r.result) for r in items] == EP1
    assert {r.game for r in items} == {0}
    assert items[0].location == "byte 8"
    assert not any(r.score_is_mate for r in items)


def test_ep1_binpack_packs_without_rejects(tmp_path):
    summary, rejects, t = run_pack(public("ep1.binpack"), tmp_path / "ds")
    assert (summary["read"], summary["packed"], rejects) == (3, 3, [])
    assert t["score"] == [-201, 254, -220] and t["ply"] == [68, 69, 70] and t["result"] == [0, 0, 0]
    assert len(set(t["game_id"])) == 1


# ======================================================================== small.binpack
@pytest.fixture(scope="module")
def small_binpack_stats():
    """small.binpack read once by the reader, streamed: counts plus the first few records."""
    path = public("small.binpack")
    stats = dict(n=0, results=Counter(), none=0, ep=0, promo=0, castling=0, min_ply=1 << 30, max_ply=-1,
                 rejects=[], chains=Counter(), first=[], games=set(), mate=0, bad_mate=0)
    castle_uci = {"e1h1", "e1a1", "e8h8", "e8a8"}
    with open(path, "rb") as f:
        for r in get_format("binpack").read(f, ReaderOptions(fast=False)):
            if isinstance(r, Reject):
                stats["rejects"].append(r)
                continue
            stats["n"] += 1
            stats["results"][r.result] += 1
            stats["none"] += r.score is None
            stats["ep"] += r.fen.split()[3] != "-"
            if r.move is not None:
                stats["promo"] += len(r.move) == 5
                if r.move in castle_uci and r.board.piece_type_at(chess.parse_square(r.move[:2])) == chess.KING:
                    stats["castling"] += 1
            stats["min_ply"] = min(stats["min_ply"], r.ply)
            stats["max_ply"] = max(stats["max_ply"], r.ply)
            stats["chains"][r.location.split(" ply")[0]] += 1
            stats["games"].add(r.game)
            if r.score_is_mate:
                stats["mate"] += 1
                stats["bad_mate"] += r.score is None or abs(r.score) < 31754
            if len(stats["first"]) < 8:
                stats["first"].append(r)
    return stats


def test_small_binpack_counts_and_first_entries(small_binpack_stats):
    s = small_binpack_stats
    assert s["rejects"] == []
    assert s["n"] == 434_921
    assert dict(s["results"]) == {-1: 133_642, 0: 167_663, 1: 133_616}
    assert s["none"] == 10_200  # VALUE_NONE 32002 -> score None
    assert s["ep"] == 523
    assert s["promo"] == 1_030
    assert s["castling"] > 0
    assert (s["min_ply"], s["max_ply"]) == (0, 415)
    assert s["bad_mate"] == 0
    # one game number per chain, in order
    assert len(s["games"]) == len(s["chains"]) and s["games"] == set(range(len(s["chains"])))
    first = s["first"]
    # The file's first chain (byte 8) is a 5-position tail of a game (ply 33..37); the entries that
    # SOURCES.md lists as "first entries" are those of the second chain, the first game from ply 0.
    assert s["chains"]["byte 8"] == 5 and [r.ply for r in first[:5]] == [33, 34, 35, 36, 37]
    assert first[0].fen == "2kr3q/1ppn4/p2p1b1n/P2P1pNB/7P/4RP2/1PP3P1/1KB4Q b - - 0 17"
    assert (first[0].move, first[0].score, first[0].result) == ("f5f4", -655, -1)
    assert [r.result for r in first[:5]] == [-1, 1, -1, 1, -1]
    g = first[5:8]
    assert [r.location for r in g] == ["byte 52", "byte 52 ply 1", "byte 52 ply 2"]
    assert [(r.fen, r.move, r.score, r.ply, r.result) for r in g] == [
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "g1f3", 73, 0, 0),
        ("rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1", "c7c6", -62, 1, 0),
        ("rnbqkbnr/pp1ppppp/2p5/8/8/5N2/PPPPPPPP/RNBQKB1R w KQkq - 0 2", "d2d4", 75, 2, 0),
    ]


def test_small_binpack_first_two_stems_by_hand():
    data = public("small.binpack").read_bytes()[:200]
    assert data[:4] == b"BINP" and int.from_bytes(data[4:8], "little") == 1_048_745 - 8
    a = stem_by_hand(data[8:40])
    assert a["board"].board_fen() == "2kr3q/1ppn4/p2p1b1n/P2P1pNB/7P/4RP2/1PP3P1/1KB4Q"
    assert (a["board"].turn, a["move"], a["score"], a["ply"], a["result"]) == (chess.BLACK, "f5f4", -655, 33, -1)
    assert int.from_bytes(data[40:42], "big") == 4
    b = stem_by_hand(data[52:84])
    assert b["board"].fen() == chess.STARTING_FEN
    assert (b["move"], b["score"], b["ply"], b["result"]) == ("g1f3", 73, 0, 0)


@pytest.mark.slow
def test_small_binpack_packs_completely(tmp_path):
    summary, rejects, t = run_pack(public("small.binpack"), tmp_path / "ds")
    assert summary["read"] == summary["packed"] + sum(summary["rejected"].values())
    assert summary["read"] == 434_921 and summary["packed"] == 434_921 and rejects == []
    assert Counter(t["result"]) == {-1: 133_642, 0: 167_663, 1: 133_616}
    assert sum(f & FLAG_SCORE_NONE != 0 for f in t["flags"]) == 10_200


# ======================================================================== batch.bf (bulletformat)
def test_bulletformat_batch_counts_and_first_record():
    path = public("batch.bf")
    raw = path.read_bytes()
    assert len(raw) == 16_273 * 32
    items = read_items("bulletformat", path)
    assert len(items) == 16_273 and all(isinstance(r, Record) for r in items)
    # result byte 0/1/2 (stm loss/draw/win) -> -1/0/+1
    assert Counter(r.result for r in items) == {-1: 5_188, 0: 6_005, 1: 5_080}
    assert Counter(raw[i + 26] for i in range(0, len(raw), 32)) == {0: 5_188, 1: 6_005, 2: 5_080}
    first = items[0]
    assert first.fen.split()[0] == placement("r.bq.rk./pp..bppp/..n..n../..pp..B./Q......./......P./PPPNPPBP/R...K.NR")
    assert first.fen.split()[1] == "w"  # the side to move plays white
    assert (first.score, first.result, first.ply, first.move, first.location) == (-343, -1, None, None, "byte 0")
    assert (raw[27], raw[28] ^ 56) == (chess.E1, chess.G8)
    assert [r.game for r in items[:5]] == [0, 1, 2, 3, 4]


def test_bulletformat_batch_packs_without_rejects(tmp_path):
    summary, rejects, t = run_pack(public("batch.bf"), tmp_path / "ds")
    assert (summary["read"], summary["packed"], rejects) == (16_273, 16_273, [])
    assert t["score"][0] == -343 and t["result"][0] == -1
    assert all(f & FLAG_PLY_UNKNOWN for f in t["flags"])


# ======================================================================== test-vf.bin (viriformat)
VF_GAME0 = "1brkrqbn/pp1p1ppp/1n2p3/1Q6/2p3PP/4P1N1/PPPP1P2/BRKBN1R1 b KQkq - 0 5"


def test_viriformat_sample_games_and_first_pairs():
    path = public("test-vf.bin")
    raw = path.read_bytes()
    games = viri_games(raw)
    assert len(games) == 9 and games[-1][1] == len(raw) == 4_696
    items = read_items("viriformat", path)
    assert len(items) == 1_093 and all(isinstance(r, Record) for r in items)
    assert sorted({r.game for r in items}) == list(range(9))
    g0 = [r for r in items if r.game == 0]
    assert len(g0) == 168 and (games[0][1] - games[0][0] - 36) // 4 == 168
    # header: eval 0, wdl 1 (draw)
    assert struct.unpack("<hB", raw[28:31]) == (0, 1)
    assert g0[0].fen == VF_GAME0 and g0[0].location == "byte 32"
    # pairs f7f6 72, d1e2 83, b8d6 53 are white POV; the records are side-to-move POV
    assert [(r.move, r.score) for r in g0[:3]] == [("f7f6", -72), ("d1e2", 83), ("b8d6", -53)]
    assert [r.ply for r in g0[:3]] == [9, 10, 11]
    assert {r.result for r in g0} == {0}
    # white-POV game result: every record agrees with its header's wdl
    for (start, _), game in zip(games, range(9)):
        white = raw[start + 30] - 1
        for r in (r for r in items if r.game == game):
            assert r.result == (white if r.fen.split()[1] == "w" else -white)


def test_viriformat_sample_packs_without_rejects_with_960_castling(tmp_path):
    path = public("test-vf.bin")
    items = read_items("viriformat", path)
    castles = [r for r in items if r.board.is_castling(chess.Move.from_uci(r.move))]
    assert len(castles) >= 4  # king-takes-rook castling in Chess960 starts
    summary, rejects, t = run_pack(path, tmp_path / "ds")
    assert (summary["read"], summary["packed"], rejects) == (1_093, 1_093, [])
    assert t["score"][:3] == [-72, 83, -53]
    # castling keeps its king-takes-rook move, flag 2 in the packed move
    assert sum(m >> 14 == 2 for m in t["best_move"]) == len(castles)
    assert len(set(t["game_id"])) == 9


# ======================================================================== marlinformat
@pytest.fixture(scope="module")
def marlin_round_trip(tmp_path_factory):
    """The bundled sample packed; its board column written as a .marlin file; that file packed."""
    tmp = tmp_path_factory.mktemp("marlin")
    s1 = pack([SAMPLE], tmp / "plain", progress=False)
    t1 = read_part(tmp / "plain" / s1["files"][0]["part"]).to_pydict()
    marlin = tmp / "sample.marlin"
    marlin.write_bytes(b"".join(t1["board"]))
    assert detect_format(marlin) == "marlinformat"
    s2 = pack([marlin], tmp / "marlin", fmt="marlinformat", progress=False)
    check_finished(s2, tmp / "marlin", marlin)
    t2 = read_part(tmp / "marlin" / s2["files"][0]["part"]).to_pydict()
    return marlin, t1, s2, t2


def test_marlinformat_round_trip_of_packed_boards(marlin_round_trip):
    marlin, t1, s2, t2 = marlin_round_trip
    assert s2["read"] == s2["packed"] == len(t1["board"]) == 4_015 and s2["rejected"] == {}
    assert t2["board"] == t1["board"]  # byte-identical
    for col in ("score", "result", "ply", "piece_count", "in_check", "flags"):
        assert t2[col] == t1[col], col
    assert set(t2["best_move"]) == {None}  # marlinformat carries no move
    # same games, same ids: game ids are derived from the positions, not from the file
    assert len(set(t2["game_id"])) == len(set(t1["game_id"])) == 38
    assert t2["game_id"] == t1["game_id"]


def test_marlinformat_reader_fields(marlin_round_trip):
    marlin, t1, _, _ = marlin_round_trip
    plain = plain_records()
    items = read_items("marlinformat", marlin.read_bytes()[:32 * 200])
    for r, p in zip(items, plain):
        assert chess.Board(r.fen).fen() == chess.Board(p["fen"]).fen()
        assert (r.score, r.result, r.ply, r.move) == (p["score"], p["result"], p["ply"], None)


def test_marlinformat_value_none_and_pov(tmp_path):
    """eval is white POV and wdl white's result: a black-to-move board flips both."""
    from nnue.pipeline.board import pack_fen

    recs = [pack_fen("4k3/8/8/8/8/8/8/4K2R b K - 3 40", eval_white=120, wdl=2),
            pack_fen("4k3/8/8/8/8/8/8/4K2R w K - 3 40", eval_white=VALUE_NONE, wdl=0)]
    a, b = read_items("marlinformat", b"".join(recs))
    assert (a.score, a.result, a.ply) == (-120, -1, 79)
    assert (b.score, b.result, b.ply) == (None, -1, 78)
    assert a.fen == "4k3/8/8/8/8/8/8/4K2R b K - 3 40"


# ======================================================================== Stockfish .bin
@pytest.fixture(scope="module")
def sfbin_sample(tmp_path_factory):
    """The bundled sample encoded as Stockfish .bin by the test-side encoder."""
    recs = plain_records()
    boards = [chess.Board(r["fen"]) for r in recs]
    moves = [b.parse_uci(r["move"]) for b, r in zip(boards, recs)]
    data = b"".join(encode_psv(b, m, r["score"], r["ply"], r["result"]) for b, m, r in zip(boards, moves, recs))
    path = tmp_path_factory.mktemp("sfbin") / "sample.bin"
    path.write_bytes(data)
    return path, recs, boards, moves


def test_sfbin_sample_exercises_the_corner_cases(sfbin_sample):
    _, recs, boards, moves = sfbin_sample
    assert len(recs) == 4_015
    assert sum(b.has_legal_en_passant() for b in boards) >= 5
    assert sum(bool(b.castling_rights) for b in boards) >= 100
    assert sum(b.turn == chess.BLACK for b in boards) >= 1_000
    assert sum(m.promotion is not None for m in moves) >= 5
    assert sum(b.is_castling(m) for b, m in zip(boards, moves)) >= 5
    assert sum(b.is_en_passant(m) for b, m in zip(boards, moves)) >= 1
    assert sum(b.halfmove_clock >= 64 for b in boards) >= 1  # rule50 bit 6


def test_sfbin_reader_decodes_encoded_sample(sfbin_sample):
    path, recs, boards, moves = sfbin_sample
    items = read_items("bin", path)
    assert len(items) == len(recs) and all(isinstance(r, Record) for r in items)
    for i, (r, p, b, m) in enumerate(zip(items, recs, boards, moves)):
        assert r.location == f"byte {40 * i}"
        assert r.fen == b.fen(), i
        assert chess.Board(r.fen).fen() == chess.Board(p["fen"]).fen(), i
        assert r.move == king_takes_rook_uci(b, m), i
        assert chess.Board(r.fen).parse_uci(r.move) == m, i
        assert (r.score, r.ply, r.result) == (p["score"], p["ply"], p["result"]), i
    # game boundaries from ply and the flipping result: the sample's 38 games
    assert len({r.game for r in items}) == 38


def test_sfbin_packs_like_the_plain_sample(sfbin_sample, sample_dataset, tmp_path):
    path, recs, _, _ = sfbin_sample
    assert detect_format(path) == "bin"
    summary, rejects, t = run_pack(path, tmp_path / "ds")
    assert summary["files"][0]["format"] == "bin"
    assert (summary["read"], summary["packed"], rejects) == (4_015, 4_015, [])
    from nnue.pipeline import manifest as mf

    (entry,) = mf.load(sample_dataset)["files"].values()
    ref = read_part(sample_dataset / entry["part"]).to_pydict()
    for col in ("board", "score", "result", "ply", "best_move", "best_move_is_capture", "flags"):
        assert t[col] == ref[col], col


def test_sfbin_value_none_mate_and_illegal_ep_square(tmp_path):
    """score 32002 -> no score; an en-passant square with no legal capture is written but dropped
    (normalised) by pack, never rejected."""
    b = chess.Board()
    b.push_uci("e2e4")  # ep square e3, no black pawn can take
    data = (encode_psv(b, chess.Move.from_uci("e7e5"), VALUE_NONE, 1, 0, ep=True)
            + encode_psv(b, chess.Move.from_uci("d7d5"), -31990, 1, -1, ep=False))
    a, c = read_items("bin", data)
    assert a.fen.split()[3] == "e3" and c.fen.split()[3] == "-"
    assert (a.score, a.score_is_mate, c.score, c.score_is_mate) == (None, False, -31990, True)
    path = tmp_path / "two.bin"
    path.write_bytes(data)
    _, rejects, t = run_pack(path, tmp_path / "ds", fmt="bin")
    assert rejects == [] and t["board"][0][:24] == t["board"][1][:24]
    assert t["flags"][0] & FLAG_SCORE_NONE and t["score"][0] == 0


def test_sfbin_detection_needs_a_multiple_of_40(tmp_path, sfbin_sample):
    path = sfbin_sample[0]
    data = path.read_bytes()[:40 * 30]
    whole, cut = tmp_path / "whole.bin", tmp_path / "cut.bin"
    whole.write_bytes(data)
    cut.write_bytes(data[:-1])
    assert detect_format(whole) == "bin"
    assert detect_format(cut) == "viriformat"
    big = tmp_path / "big.bin"
    big.write_bytes(path.read_bytes())  # above the 4096-byte head: size read in full
    assert detect_format(big) == "bin"


def test_unknown_format_name_raises():
    with pytest.raises(FormatError, match="unknown format"):
        get_format("no-such-format")


# ======================================================================== compressed inputs
def test_compressed_binary_inputs_pack_like_the_plain_files(tmp_path, sfbin_sample):
    import gzip
    import lzma

    import zstandard

    cases = [
        ("ep1.binpack.gz", gzip.compress(public("ep1.binpack").read_bytes()), "binpack", 3),
        ("batch.bf.zst", zstandard.ZstdCompressor().compress(public("batch.bf").read_bytes()[:32 * 50]),
         "bulletformat", 50),
        # above the 4096-byte head: .bin vs viriformat is decided on the decompressed size
        ("sample.bin.xz", lzma.compress(sfbin_sample[0].read_bytes()[:40 * 200]), "bin", 200),
    ]
    for name, data, fmt, n in cases:
        path = tmp_path / name
        path.write_bytes(data)
        assert detect_format(path) == fmt, name
        summary, rejects, _ = run_pack(path, tmp_path / f"ds-{name}")
        assert (summary["packed"], rejects) == (n, []), name
