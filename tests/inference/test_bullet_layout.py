"""bullet's quantised.bin layout (``nnue export-net NETDIR --to bullet``, nnue/inference/kinds/perspective/bullet.py).

Two independent checks of the writer:

* the bytes equal what bullet's documented SavedFormat chain gives for the same integer weights
  (an emulation written here from bullet's docs: column-major matrices, ``transpose_impl``'s
  index formula, "bullet" padding), for 1 and several output buckets;
* ``tests/c/bullet_eval.c``, written from bullet's example inference (examples/simple.rs),
  reads the file and evaluates real positions given as feature index lists: its evals equal
  our integer inference (``nnue.inference.api``) exactly, for crelu and screlu, 1 and several
  output buckets, chess768 and king-bucketed sets, random nets and an exported one.
"""
from __future__ import annotations

import dataclasses
import io
import json
import shutil
import subprocess
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.samples import SAMPLE
from tests.cref import piece_count, real_fens
from tests.netfiles import make_deep_int_net, make_int_net_spec, make_model, write_weights

from nnue.cli import main as cli_main
from nnue.inference import api
from nnue.inference.kinds.perspective.bullet import check, input_type, layout_bytes, write_bullet
from nnue.inference import load
from nnue.inference.kinds.perspective import IntegerNet
from nnue.inference.net import NetFormatError
from nnue.inference.api import boards_from_fens

C_SOURCE = Path(__file__).resolve().parents[1] / "c" / "bullet_eval.c"
#: non-mirrored king-bucket map (bullet's ChessBuckets), left/right asymmetric
KB768_EXPLICIT = "kb768:01234567/89abcdef/ghhiijjk/llllmmmm/nnnnoooo/nnnnoooo/pppppppp/pppppppp"


@pytest.fixture(scope="module")
def bullet_c(tmp_path_factory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed")
    exe = tmp_path_factory.mktemp("bullet_c") / "bullet_eval"
    r = subprocess.run([gcc, "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(C_SOURCE)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.fixture(scope="module")
def sample_fens() -> list[str]:
    """A few hundred real positions of the repo's sample dump, every piece count it holds."""
    fens = real_fens(SAMPLE, 300, per_piece_count=3)
    assert len(fens) >= 300 and len({piece_count(f) for f in fens}) >= 25
    return fens


def run_bullet_c(exe: Path, path: Path, net, boards: torch.Tensor) -> list[int]:
    """bullet_eval.c on ``boards``, fed the feature indices of ``net``'s feature set and the
    output buckets (the engine's side of the work); one eval per board."""
    stm, nstm = net.features.encode(boards)
    bucket = net.buckets.of(boards)
    lines = []
    for s, n, b in zip(stm.tolist(), nstm.tolist(), bucket.tolist()):
        s, n = [i for i in s if i >= 0], [i for i in n if i >= 0]
        lines.append(" ".join(map(str, [b, len(s), *s, len(n), *n])))
    a = net.arch
    r = subprocess.run([str(exe), str(path), str(a["num_inputs"]), str(a["hidden"]), str(a["num_buckets"]),
                        a["activation"], str(net.scheme.qa), str(net.scheme.qb), str(net.scheme.scale)],
                       input="\n".join(lines) + "\n", capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    assert len(words) == boards.shape[0] and "overflow" not in words
    return [int(w) for w in words]


# -- bullet's SavedFormat chain, emulated from its documentation ------------------------------
def column_major(m: np.ndarray) -> np.ndarray:
    """docs/4-saved-networks.md: an MxN matrix is written column-major ([[1,2,3],[4,5,6]] ->
    1 4 2 5 3 6)."""
    return m.flatten(order="F")


def transpose_impl(rows: int, cols: int, w: np.ndarray) -> np.ndarray:
    """weights.rs SavedFormat::transpose_impl: new[cols·i + j] = w[rows·j + i]."""
    new = np.empty_like(w)
    for i in range(rows):
        for j in range(cols):
            new[cols * i + j] = w[rows * j + i]
    return new


def bullet_bytes(net: IntegerNet, transpose_l1w: bool) -> bytes:
    """What bullet's examples write for these integer weights: affine ``l0`` (H x F weights, H
    bias), affine ``l1`` (B x 2H weights, B bias), each i16, l1w ``.transpose()``d as in
    examples/progression/2_output_buckets.rs (or not, as in examples/simple.rs), then
    to_quantised_buffer's padding: "bullet" cycled to a multiple of 64 bytes."""
    l0w = net.l0w.numpy().T  # bullet's l0w: output_size x input_size
    l1w = net.l1w.numpy()    # bullet's l1w: B x 2H
    b, k = l1w.shape
    l1w_flat = column_major(l1w)
    if transpose_l1w:
        l1w_flat = transpose_impl(b, k, l1w_flat)
    parts = [column_major(l0w), net.l0b.numpy(), l1w_flat, net.l1b.numpy()]
    buf = b"".join(p.astype("<i2").tobytes() for p in parts)
    pad = b""
    while (len(buf) + len(pad)) % 64:
        pad += b"bullet"[len(pad) % 6:len(pad) % 6 + 1]
    return buf + pad


def test_the_emulation_reads_the_docs():
    assert column_major(np.array([[1, 2, 3], [4, 5, 6]])).tolist() == [1, 4, 2, 5, 3, 6]
    # a column-major 2x3 matrix transposed is written row-major
    assert transpose_impl(2, 3, np.array([1, 4, 2, 5, 3, 6])).tolist() == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("fs_name,act,hidden,spec", [
    ("chess768", "screlu", 32, "MaterialCount<1>"),
    ("chess768", "crelu", 24, "MaterialCount<8>"),  # 37,696 bytes: no padding
    ("kb768hm4", "screlu", 16, "MaterialCount<5>"),
])
def test_bytes_are_bullets_saved_format(fs_name, act, hidden, spec, tmp_path):
    net = make_int_net_spec(fs_name, act, hidden, spec, seed=hidden)
    info = write_bullet(net, tmp_path / "quantised.bin")
    data = (tmp_path / "quantised.bin").read_bytes()
    assert data == bullet_bytes(net, transpose_l1w=True) == layout_bytes(net)
    assert len(data) % 64 == 0 and info["bytes"] == len(data)
    raw = 2 * (net.l0w.numel() + net.l0b.numel() + net.l1w.numel() + net.l1b.numel())
    assert len(data) - raw == -raw % 64 and data[raw:] == (b"bullet" * 11)[:len(data) - raw]
    if net.arch["num_buckets"] == 1:  # simple.rs saves l1w without .transpose(): the same bytes
        assert data == bullet_bytes(net, transpose_l1w=False)
    else:
        assert data != bullet_bytes(net, transpose_l1w=False)
    # net.bin holds the same tensors; only its padding (zeros) differs
    assert net.raw_bytes()[:raw] == data[:raw] and len(net.raw_bytes()) == len(data)


CASES = [
    ("chess768", "crelu", 32, "MaterialCount<1>"),
    ("chess768", "screlu", 64, "MaterialCount<8>"),
    ("chess768", "screlu", 24, "MaterialCount<1>"),
    ("kb768hm4", "screlu", 32, "MaterialCount<1>"),
    ("kb768hm16", "crelu", 48, "MaterialCount<8>"),
    (KB768_EXPLICIT, "screlu", 32, "MaterialCount<5>"),
]


@pytest.mark.parametrize("fs_name,act,hidden,spec", CASES, ids=[f"{c[0][:8]}-{c[1]}-{c[2]}-{c[3]}" for c in CASES])
def test_bullet_inference_equals_ours(fs_name, act, hidden, spec, bullet_c, sample_fens, tmp_path):
    net = make_int_net_spec(fs_name, act, hidden, spec, seed=3 * hidden + len(fs_name))
    boards = boards_from_fens(sample_fens)
    path = tmp_path / "quantised.bin"
    write_bullet(net, path)
    theirs = run_bullet_c(bullet_c, path, net, boards)
    ours = api.evaluate(net, boards).tolist()
    bad = [(f, o, t) for f, o, t in zip(sample_fens, ours, theirs) if o != t]
    assert not bad, f"{len(bad)} of {len(ours)} differ, first (fen, ours, bullet): {bad[:3]}"
    assert min(ours) < 0 < max(ours) and len(set(ours)) > len(ours) // 10
    assert set(net.buckets.of(boards).tolist()) == set(range(net.arch["num_buckets"]))


def test_exported_net_through_the_cli(bullet_c, sample_fens, sample_dataset, tmp_path, capsys):
    """nnue export -> nnue export-net --to bullet -> bullet_eval.c == nnue eval."""
    model = make_model("screlu", hidden=32, buckets=8, seed=5, ft_scale=0.25, l1_scale=1.9)
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset)
    assert cli_main(["export", str(ck), "-o", str(tmp_path / "net")]) == 0
    out = tmp_path / "net.quantised.bin"
    capsys.readouterr()
    assert cli_main(["export-net", str(tmp_path / "net"), "--to", "bullet", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "QA = 255, QB = 64, SCALE = 400" in printed and "Chess768" in printed
    fens_file = tmp_path / "fens.txt"
    fens_file.write_text("\n".join(sample_fens) + "\n")
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli_main(["eval", str(tmp_path / "net"), "--fens", str(fens_file)]) == 0
    ours = [int(v) for v in buf.getvalue().split()]
    net = load(tmp_path / "net" / "net.safetensors")
    assert ours == run_bullet_c(bullet_c, out, net, boards_from_fens(sample_fens))
    assert min(ours) < 0 < max(ours)


def test_input_types():
    assert input_type("chess768") == "Chess768"
    assert input_type("kb768hm4") == ("ChessBucketsMirrored::new([0, 0, 1, 1, 2, 2, 2, 2"
                                      + ", 3" * 24 + "])")
    assert input_type(KB768_EXPLICIT).startswith("ChessBuckets::new([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10")
    assert input_type("halfkp") is None


def _tiny():
    from nnue.inference.kinds.tiny import TinyIntegerNet, make_tiny_arch
    from nnue.spec.quant import QuantScheme

    arch = make_tiny_arch("chess768", 16, "screlu", "MaterialCount<1>", 8, "crelu")
    z = torch.zeros
    return TinyIntegerNet(arch, QuantScheme(), z((768, 16), dtype=torch.int16), z(16, dtype=torch.int16),
                          z((1, 8, 32), dtype=torch.int8), z((1, 8), dtype=torch.int32),
                          z((1, 8), dtype=torch.int8), z(1, dtype=torch.int32))


def _refusals():
    base = make_int_net_spec("kb768hm4", "screlu", 16, "MaterialCount<8>")
    unfolded = dataclasses.replace(base, l0w=torch.zeros((768 * 5, 16), dtype=torch.int16))
    residual = dataclasses.replace(base, arch=dict(base.arch, residual={"base": "material", "alpha_num": 128,
                                                                         "alpha_shift": 8}))
    return {
        "deep": (make_deep_int_net("chess768"), "architecture.kind is 'deep'"),
        "tiny": (_tiny(), "architecture.kind is 'tiny'"),
        "pairwise": (make_int_net_spec("chess768", "pairwise_crelu", 32),
                     "architecture.activation is 'pairwise_crelu'"),
        "halfkp": (make_int_net_spec("halfkp", "screlu", 16), "architecture.feature_set is 'halfkp'"),
        "factoriser": (unfolded, "a factoriser not folded"),
        "residual": (residual, "architecture.residual"),
        "int8 l1w": (dataclasses.replace(base, l1w=base.l1w.to(torch.int8)), "tensor l1w is int8"),
    }


@pytest.mark.parametrize("case", list(_refusals()))
def test_refused_in_one_line(case, tmp_path):
    net, words = _refusals()[case]
    why = check(net)
    assert why and words in why and "\n" not in why
    with pytest.raises(NetFormatError, match="--to bullet: "):
        write_bullet(net, tmp_path / "q.bin")
    assert not list(tmp_path.iterdir())  # nothing written


def test_cli_refusals(tmp_path, capsys):
    deep = make_deep_int_net("chess768")
    (tmp_path / "deep").mkdir()
    deep.save(tmp_path / "deep" / "net.safetensors")
    (tmp_path / "empty").mkdir()
    good = make_int_net_spec("chess768", "crelu", 8, "MaterialCount<1>")
    good.save(tmp_path / "good.safetensors")
    for argv, words in [
        (["export-net", str(tmp_path / "deep"), "--to", "bullet", "-o", str(tmp_path / "d.bin")],
         "architecture.kind is 'deep'"),
        (["export-net", str(tmp_path / "good.safetensors"), "--to", "nothing", "-o", str(tmp_path / "d.bin")],
         "--to nothing: no such layout; one of bullet (perspective nets)"),
        (["export-net", str(tmp_path / "empty"), "--to", "bullet", "-o", str(tmp_path / "d.bin")],
         "a folder without net.safetensors"),
        (["export-net", str(tmp_path / "good.safetensors"), "--to", "bullet", "-o", str(tmp_path / "empty")],
         "is a folder"),
    ]:
        capsys.readouterr()
        try:
            rc = cli_main(argv)
        except SystemExit as e:  # argparse's own errors
            rc = e.code
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        assert words in err and len(err.strip().splitlines()) == 1, err
        assert err.startswith("nnue export-net: error: ") and "Traceback" not in err, err
    assert not (tmp_path / "d.bin").exists()
    assert cli_main(["export-net", str(tmp_path / "good.safetensors"), "--to", "bullet", "-o",
                     str(tmp_path / "g.bin"), "--json"]) == 0
    assert (tmp_path / "g.bin").stat().st_size % 64 == 0
    assert json.loads(capsys.readouterr().out)["inputs"] == "Chess768"


def test_help_names_the_targets(capsys):
    with pytest.raises(SystemExit) as e:
        cli_main(["export-net", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--to TARGET" in out and "bullet" in out and "stockfish-15.1" in out and "default: text" in out


# -- bullet's input types and output buckets, emulated from its source -------------------------
def bullet_board(fen: str):
    """bulletformat's ChessBoard::from_raw (src/chess.rs): bitboards [white, black, P, N, B, R, Q,
    K]; for black to move each is byte-swapped (ranks flipped) and the colours swapped; pieces
    are (colour << 3 | type) in ascending square order; ksq and opp_ksq ^ 56."""
    import chess

    b = chess.Board(fen)
    bbs = [int(b.occupied_co[chess.WHITE]), int(b.occupied_co[chess.BLACK])]
    bbs += [int(b.pieces_mask(pt, chess.WHITE) | b.pieces_mask(pt, chess.BLACK)) for pt in range(1, 7)]
    if b.turn == chess.BLACK:
        bbs = [int.from_bytes(x.to_bytes(8, "little"), "big") for x in bbs]
        bbs[0], bbs[1] = bbs[1], bbs[0]
    occ = bbs[0] | bbs[1]
    pieces = [((1 << 3 if bbs[1] >> sq & 1 else 0) | next(i for i in range(6) if bbs[2 + i] >> sq & 1), sq)
              for sq in range(64) if occ >> sq & 1]
    lsb = lambda x: (x & -x).bit_length() - 1  # noqa: E731
    return pieces, lsb(bbs[0] & bbs[7]), lsb(bbs[1] & bbs[7]) ^ 56, bin(occ).count("1")


def bullet_features(fen: str, feature_set: str) -> tuple[list[int], list[int]]:
    """Chess768 / ChessBuckets / ChessBucketsMirrored ``map_features`` (crates/bullet_lib/src/
    game/inputs/chess768.rs, chess_buckets.rs) with our map as the constructor's argument."""
    from nnue.pipeline.features import kb768

    pieces, ksq, opp_ksq, _ = bullet_board(fen)
    base = [([0, 384][p >> 3] + 64 * (p & 7) + sq, [384, 0][p >> 3] + 64 * (p & 7) + (sq ^ 56)) for p, sq in pieces]
    if feature_set == "chess768":
        return sorted(s for s, _ in base), sorted(n for _, n in base)
    mirrored, m = kb768.parse_map(kb768.PRESETS.get(feature_set, feature_set))
    if mirrored:  # ChessBucketsMirrored::new
        m = [m[(i // 8) * 4 + [0, 1, 2, 3, 3, 2, 1, 0][i % 8]] for i in range(64)]
    flip = (lambda k: 7 if mirrored and k % 8 > 3 else 0)
    return (sorted(768 * m[ksq] + (s ^ flip(ksq)) for s, _ in base),
            sorted(768 * m[opp_ksq] + (n ^ flip(opp_ksq)) for _, n in base))


@pytest.mark.parametrize("fs_name", ["chess768", "kb768hm4", "kb768hm16", KB768_EXPLICIT])
def test_feature_indices_and_buckets_are_bullets(fs_name, sample_fens):
    """Our feature sets index as bullet's input types, and MaterialCount buckets as bullet's,
    so an engine built on bullet's inputs computes what the tests above feed bullet_eval.c."""
    from nnue.pipeline.features import get_feature_set, parse_output_buckets

    fens = sample_fens[::3]
    boards = boards_from_fens(fens)
    stm, nstm = get_feature_set(fs_name).encode(boards)
    for fen, s, n in zip(fens, stm.tolist(), nstm.tolist()):
        assert (sorted(i for i in s if i >= 0), sorted(i for i in n if i >= 0)) == bullet_features(fen, fs_name), fen
    for count in (1, 5, 8):
        ours = parse_output_buckets(f"MaterialCount<{count}>").of(boards).tolist()
        theirs = [(bullet_board(f)[3] - 2) // -(-32 // count) for f in fens]
        assert ours == theirs
