"""Fuzzing the dump readers through pack(): random bytes, every truncation of a small valid file,
byte mutations, empty files, text given to binary readers and binary given to the EPD reader.

Every run must end in one of two ways:

* ``FormatError`` whose message names the file, with no part, rejects or temporary file left in
  the dataset folder;
* a finished pack where ``read == packed + sum(rejected)`` (summary, manifest, part file, rejects
  file) and every reject names the file and a byte or line location.

Any other exception fails the test, and an alarm fails a test that hangs. Inputs are kept small
(tens to hundreds of bytes) so the whole module runs in seconds."""
from __future__ import annotations

import random
import shutil
import signal
import struct

import chess
import pytest

from nnue.pipeline.board import pack_fen
from nnue.pipeline.formats import FormatError
from nnue.pipeline.pack import pack
from tests.formats.formats_testlib import (binpack_slice, check_finished, encode_psv, leftovers, plain_records, public,
                                           viri_games)

TIME_LIMIT_S = 60
# the compiled decoders are compiled (or loaded from numba's cache) before any time limit starts
pytestmark = pytest.mark.usefixtures("warm_compiled")
BINARY = ("binpack", "bin", "bulletformat", "marlinformat", "viriformat")
ALL = BINARY + ("epd",)
EXT = {"binpack": ".binpack", "bin": ".bin", "bulletformat": ".bf", "marlinformat": ".marlin",
       "viriformat": ".vf", "epd": ".epd"}


@pytest.fixture(autouse=True)
def time_limit():
    """Fail (rather than hang) a test that runs past TIME_LIMIT_S."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"test ran past {TIME_LIMIT_S} s: a reader hangs?")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TIME_LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def run(tmp_path, fmt: str, data: bytes, name: str):
    """Pack ``data`` as ``fmt``; returns "format error" or (summary, rejects), after checking the
    run ended in one of the two allowed ways. The dataset folder is removed afterwards."""
    path = tmp_path / f"{name}{EXT[fmt]}"
    path.write_bytes(data)
    ds = tmp_path / f"{name}.ds"
    try:
        try:
            summary = pack([path], ds, fmt=fmt, progress=False)
        except FormatError as e:
            assert str(path) in str(e), f"FormatError does not name the file: {e}"
            assert leftovers(ds) == [], leftovers(ds)
            return "format error"
        rejects = check_finished(summary, ds, path)
        return summary, rejects
    finally:
        path.unlink()
        shutil.rmtree(ds, ignore_errors=True)


# ============================================================================ small valid files
def _valid_bin_marlin() -> dict[str, bytes]:
    recs = plain_records()[40:43]  # three consecutive positions of one game of the bundled sample
    boards = [chess.Board(r["fen"]) for r in recs]
    sfbin = b"".join(encode_psv(b, b.parse_uci(r["move"]), r["score"], r["ply"], r["result"])
                     for b, r in zip(boards, recs))
    marlin = b"".join(pack_fen(b.fen(), eval_white=r["score"] * (1 if b.turn else -1),
                               wdl=(r["result"] if b.turn else -r["result"]) + 1) for b, r in zip(boards, recs))
    # bulletformat through our writer (stm POV score and result, as a dataset row holds them)
    from nnue.pipeline.formats import bulletformat

    bf = b"".join(bulletformat.write({"board": pack_fen(r["fen"]), "score": r["score"], "score_none": False,
                                      "result": r["result"]}) for r in recs)
    return {"bin": sfbin, "marlinformat": marlin, "bulletformat": bf}


def _valid_viri() -> bytes:
    vf = public("test-vf.bin").read_bytes()
    viri = b""
    for start, _ in viri_games(vf)[:2]:  # two games, each cut to its first 4 moves
        viri += vf[start:start + 32 + 16] + b"\0\0\0\0"
    return viri


def _valid_epd() -> bytes:
    epd = public("sample_ethereal_fen.epd").read_bytes().splitlines(keepends=True)
    zuri = public("samplefen.epd").read_bytes().splitlines(keepends=True)
    return b"".join(epd[:2] + zuri[:1])


_VALID = {"bin": lambda: _valid_bin_marlin()["bin"], "marlinformat": lambda: _valid_bin_marlin()["marlinformat"],
          "binpack": lambda: public("ep1.binpack").read_bytes(), "bulletformat": lambda: _valid_bin_marlin()["bulletformat"],
          "viriformat": _valid_viri, "epd": _valid_epd}


class _Valid(dict):
    """Built on first use per format: those cut from the third-party samples skip the test that
    asks for them when ../shared/data/public is absent; bin, marlinformat and bulletformat are built
    from the bundled sample."""

    def __missing__(self, fmt: str) -> bytes:
        self[fmt] = _VALID[fmt]()
        return self[fmt]


@pytest.fixture(scope="module")
def valid() -> dict[str, bytes]:
    """One small valid file per format (all records pack without a reject)."""
    return _Valid()


@pytest.mark.parametrize("fmt", ALL)
def test_small_valid_files_pack_completely(tmp_path, valid, fmt):
    summary, rejects = run(tmp_path, fmt, valid[fmt], "valid")
    assert rejects == [] and summary["packed"] == {"binpack": 3, "bin": 3, "bulletformat": 3,
                                                   "marlinformat": 3, "viriformat": 8, "epd": 3}[fmt]


# ============================================================================ truncation
FIXED = {"bin": 40, "bulletformat": 32, "marlinformat": 32}


@pytest.mark.parametrize("fmt", ALL)
def test_truncation_at_every_byte(tmp_path, valid, fmt):
    data = valid[fmt]
    _, full_rejects = run(tmp_path, fmt, data, "full")
    assert full_rejects == []
    for n in range(len(data)):
        out = run(tmp_path, fmt, data[:n], f"cut{n}")
        if n == 0:
            assert out != "format error" and out[0]["read"] == 0, "an empty file is an empty pack"
            continue
        if fmt in FIXED:  # whole records pack, a trailing partial record is one reject
            size = FIXED[fmt]
            if n < size:  # not even one record decodes: not a dataset (issue 15 item 4)
                assert out == "format error", n
                continue
            summary, rejects = out
            assert summary["packed"] == n // size
            if n % size:
                assert [(r["reason"], r["location"]) for r in rejects] == [("truncated record", f"byte {n - n % size}")]
            else:
                assert rejects == []
        elif fmt == "viriformat":
            if n < 36:  # the first game's header and first pair do not decode
                assert out == "format error", n
                continue
            summary, rejects = out
            ends = [0, 52, 104]
            pairs = sum(max(0, min(n, s + 48) - (s + 32)) // 4 for s in (0, 52))
            assert summary["packed"] == pairs, n
            assert [r["reason"] for r in rejects] == ([] if n in ends else ["truncated record"]), n
        elif fmt == "binpack":
            # ep1.binpack is one chain: cut anywhere, its first chain does not decode
            assert out == "format error", n


# ============================================================================ random bytes
@pytest.mark.parametrize("fmt", ALL)
@pytest.mark.parametrize("seed", range(6))
def test_random_bytes(tmp_path, fmt, seed):
    rng = random.Random(1000 * seed + ALL.index(fmt))
    for size in (1, 7, 31, 32, 40, 41, 97, 400):
        data = rng.randbytes(size)
        out = run(tmp_path, fmt, data, f"rnd{size}")
        if fmt == "epd":
            assert out == "format error"  # binary is never taken for text


@pytest.mark.parametrize("seed", range(6))
def test_random_binpack_blocks(tmp_path, seed):
    """A well-formed block header around random chains: one 'corrupt chain' reject at most."""
    rng = random.Random(seed)
    for size in (1, 33, 34, 60, 300):
        body = rng.randbytes(size)
        out = run(tmp_path, "binpack", b"BINP" + struct.pack("<I", size) + body, f"blk{size}")
        if out != "format error":  # a first chain that does not decode is a FormatError (item 4)
            summary, rejects = out
            assert len(rejects) <= 1 and summary["packed"] >= 1
    # an empty block holds no record: an empty pack or a FormatError, both allowed
    run(tmp_path, "binpack", b"BINP\0\0\0\0", "blk0")


@pytest.mark.parametrize("fmt", ALL)
def test_byte_mutations(tmp_path, valid, fmt):
    data = valid[fmt]
    if fmt == "binpack":
        data = binpack_slice(public("small.binpack").read_bytes(), 6)
        assert run(tmp_path, fmt, data, "unmutated")[1] == []
    lo = 8 if fmt == "binpack" else 0  # keep the block header: chains are what is fuzzed
    for seed in range(30):
        rng = random.Random(seed)
        d = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(lo, len(d))
            d[i] = rng.randrange(256) if rng.random() < 0.5 else d[i] ^ (1 << rng.randrange(8))
        run(tmp_path, fmt, bytes(d), f"mut{seed}")


# ============================================================================ empty and wrong kinds
@pytest.mark.parametrize("fmt", ALL)
def test_empty_file(tmp_path, fmt):
    summary, rejects = run(tmp_path, fmt, b"", "empty")
    assert (summary["read"], rejects) == (0, [])


@pytest.mark.parametrize("fmt", BINARY)
def test_text_given_to_binary_reader(tmp_path, fmt):
    text = public("sample_ethereal_fen.epd").read_bytes()[:1000]
    out = run(tmp_path, fmt, text, "text")
    assert out == "format error"  # text is never taken for a binary format (issue 15 item 4)


@pytest.mark.parametrize("name", ["ep1.binpack", "batch.bf", "test-vf.bin", "small.binpack"])
def test_binary_given_to_epd_reader(tmp_path, name):
    data = public(name).read_bytes()[:2000]
    assert run(tmp_path, "epd", data, "bin") == "format error"


def test_epd_with_binary_tail_rejects_the_tail(tmp_path):
    good = public("samplefen.epd").read_bytes().splitlines(keepends=True)[:2]
    summary, rejects = run(tmp_path, "epd", b"".join(good) + b"garbage \x7f line\nnot/a/fen c9;\n", "tail")
    assert summary["packed"] == 2 and [r["location"] for r in rejects] == ["line 3", "line 4"]


@pytest.mark.parametrize("fmt", BINARY)
def test_other_binary_formats_given_to_binary_reader(tmp_path, valid, fmt):
    for other in BINARY:
        if other != fmt:
            run(tmp_path, fmt, valid[other], f"as-{other}")


# ============================================================================ bugs found
def test_binpack_result_field_out_of_range_is_a_reject(tmp_path):
    good = public("ep1.binpack").read_bytes()
    data = bytearray(good)
    data[8 + 28] |= 0xC0  # ply/result u16 BE: result zigzag 3 -> -2
    # followed by the good block: a file in which no record packs is a FormatError (issue 15 item 4)
    summary, rejects = run(tmp_path, "binpack", bytes(data) + good, "result3")
    assert summary["read"] == 6 and summary["packed"] == 3 and len(rejects) >= 1
    assert summary["rejected"].get("result out of range") == 3
