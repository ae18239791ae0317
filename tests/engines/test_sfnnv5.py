"""The sfnnv5 kind without an engine: Stockfish 15.1's hashes, the .nnue codec (round trip, and
every kind of damaged file refused in one line naming the field and byte offset), the float
graph against the integer one, and the HalfKAv2_hm features of piece lists."""
from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

from nnue.inference import NetFormatError
from nnue.inference.api import boards_from_fens
from nnue.inference.kinds import sfnnv5
from nnue.inference.kinds.sfnnv5.codec import file_hash, file_size, ft_hash, network_hash, nnue_bytes, stack_bytes
from nnue.inference.kinds.sfnnv5 import read_nnue
from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.trainer.kinds.sfnnv5 import SFNNv5Arch, SFNNv5Net, dequantise, quantise
from nnue.trainer.model import factor_map

from .positions import sample_fens


def test_hashes_are_stockfish_15_1s():
    assert (ft_hash(1024), network_hash(1024), file_hash(1024)) == (0x7F2344B8, 0x63336A4A, 0x1C102EF2)
    assert file_size(1024, 75) == 47_001_499  # the built-in net with its 75-byte description


def random_int_net(l1: int = 64, seed: int = 0, description: str = "test net",
                   padding: bool = False) -> sfnnv5.SFNNv5IntegerNet:
    """An sfnnv5 integer net with random weights in ranges that exercise every clamp; fc_1's
    two padding input columns zero (as every trainer writes them), or random with ``padding``."""
    g = torch.Generator().manual_seed(seed)
    arch = sfnnv5.make_sfnnv5_arch(hidden=l1, description=description)
    specs = sfnnv5.SFNNv5IntegerNet.tensor_specs(arch)
    lims = {"ft_bias": (-20, 60), "ft_weight": (-30, 40), "psqt": (-3000, 3000), "fc0_bias": (-9000, 9000),
            "fc0_weight": (-128, 128), "fc1_bias": (-9000, 9000), "fc1_weight": (-128, 128),
            "fc2_bias": (-9000, 9000), "fc2_weight": (-128, 128)}
    t = {k: torch.randint(*lims[k], shape, generator=g).to(dt) for k, (dt, shape) in specs.items()}
    if not padding:
        t["fc1_weight"][:, :, sfnnv5.FC1_INPUTS:] = 0
    return sfnnv5.SFNNv5IntegerNet(arch, sfnnv5.SCHEME, *t.values())


def test_small_net_round_trips_through_nnue_bytes(tmp_path):
    net = random_int_net(64, description="é round trip", padding=True)  # padding kept byte for byte
    data = nnue_bytes(net)
    assert len(data) == file_size(64, len("é round trip".encode()))
    p = tmp_path / "small.nnue"
    p.write_bytes(data)
    back = read_nnue(p)
    assert back.arch["description"] == "é round trip" and back.arch["hidden"] == 64
    for k, v in net.tensors().items():
        assert torch.equal(v, getattr(back, k)), k
    assert nnue_bytes(back) == data


def _damaged(data: bytes):
    """(name, bytes, what the error must say) for each kind of damage."""
    n = struct.unpack("<I", data[8:12])[0]
    ft_at = 12 + n
    stack0 = file_size(64, n) - 8 * stack_bytes(64)
    yield "truncated in the header", data[:6], r"truncated at byte 6 while reading the header hash"
    yield "truncated in the FT weights", data[:ft_at + 4 + 128 + 1000], r"truncated at byte [\d,]+ while reading the feature transformer weights"
    yield "truncated in the last stack", data[:-5], r"truncated at byte [\d,]+ while reading layer stack 7's fc2_weight"
    yield "extra bytes", data + b"\0\0\0", r"3 extra bytes after the end of the net at offset [\d,]+"
    yield "other version", struct.pack("<I", 0x6A448AFA) + data[4:], r"byte 0: version 0x6A448AFA is not Stockfish 15.1's 0x7AF32F20"
    yield "other header hash", data[:4] + struct.pack("<I", 0x12345678) + data[8:], r"byte 4: header hash 0x12345678 does not match"
    yield "other FT hash", data[:ft_at] + struct.pack("<I", 0x11111111) + data[ft_at + 4:], rf"byte {ft_at}: feature transformer hash 0x11111111 is not HalfKAv2_hm's"
    yield "other stack hash", data[:stack0] + struct.pack("<I", 0xDEADBEEF) + data[stack0 + 4:], r"byte [\d,]+: layer stack 0's hash 0xDEADBEEF"
    yield "description not UTF-8", data[:12] + b"\xff" + data[13:], r"byte 12: the description is not UTF-8"


def test_damaged_nnue_files_are_refused_in_one_line(tmp_path):
    data = nnue_bytes(random_int_net(64))
    for name, bad, msg in _damaged(data):
        p = tmp_path / "bad.nnue"
        p.write_bytes(bad)
        with pytest.raises(NetFormatError, match=msg):
            read_nnue(p)
        if name not in ("truncated in the FT weights", "other version"):
            continue  # the CLI path is the same for every damage: two of them through it
        out = tmp_path / f"imp-{name.replace(' ', '-')}"
        r = subprocess.run([sys.executable, "-m", "nnue.cli", "import-net", str(p), "-o", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 2, (name, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("nnue import-net: error: "), (name, r.stderr)
        assert not out.exists(), name  # checked before anything is written


def test_export_net_refuses_what_stockfish_cannot_load(tmp_path):
    p = tmp_path / "small.nnue"
    p.write_bytes(nnue_bytes(random_int_net(64)))
    for target, out, msg in [("stockfish-15.1", "x.nnue", "L1 (feature transformer width, model.hidden) is 64: "
                                                          "Stockfish 15.1 loads only 1024"),
                             ("bullet", "x.bin", "sfnnv5")]:
        r = subprocess.run([sys.executable, "-m", "nnue.cli", "export-net", str(p), "--to", target, "-o",
                            str(tmp_path / out)], capture_output=True, text=True)
        assert r.returncode == 2 and msg in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert not (tmp_path / out).exists()


def test_halfka_indices_of_piece_lists_equal_the_feature_set():
    fens = sample_fens(300)
    boards = boards_from_fens(fens)
    stm, nstm = get_feature_set("halfkav2_hm").encode(boards)
    sq = np.stack([sfnnv5.squares_from_fen(f)[0] for f in fens])
    white = np.array([sfnnv5.squares_from_fen(f)[1] for f in fens])
    s2, n2 = sfnnv5.halfka_indices(sq, white)
    for a, b in ((stm, s2), (nstm, n2)):
        assert [sorted(r[r >= 0].tolist()) for r in a] == [sorted(r[r >= 0].tolist()) for r in torch.from_numpy(b)]


@pytest.mark.parametrize("factoriser", [False, True])
def test_float_graph_mirrors_the_integer_net(factoriser):
    """The float model and its quantised integer net agree on real positions (tolerance: mean
    |Δ| ≤ 3 cp, the rounding of ~40 int8/int16 weights per path), and dequantise(quantise(·))
    gives back the same integers."""
    torch.manual_seed(1)
    fs = get_feature_set("halfkav2_hm")
    arch = SFNNv5Arch(fs.num_inputs, 64)
    model = SFNNv5Net(arch, "torch", factor_map("halfkav2_hm", fs.num_inputs) if factoriser else None)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        model.clip_weights(0, 0)
    q = quantise(model, None)
    specs = sfnnv5.SFNNv5IntegerNet.tensor_specs(sfnnv5.make_sfnnv5_arch(hidden=64))
    net = sfnnv5.SFNNv5IntegerNet(sfnnv5.make_sfnnv5_arch(hidden=64), sfnnv5.SCHEME,
                                  *(q[k].to(dt) for k, (dt, _) in specs.items()))
    boards = boards_from_fens(sample_fens(500))
    stm, nstm = fs.encode(boards)
    bucket = net.buckets.of(boards)
    with torch.no_grad():
        y = model(stm, nstm, bucket).double() * arch.scale
    cp = sfnnv5.forward_int(net, stm, nstm, bucket).double()
    d = (cp - y).abs()
    assert float(d.mean()) <= 3.0 and float(y.std()) > 20, (float(d.mean()), float(y.std()))
    back = SFNNv5Net(arch, "torch")
    back.load_state_dict(dequantise(net))
    q2 = quantise(back, None)
    for k in specs:
        assert torch.equal(q2[k], q[k]), k


def test_trace_shape_and_evaluation_line():
    net = random_int_net(64)
    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
    text = sfnnv5.trace(net, [fen])[0]
    lines = text.splitlines()
    assert lines[0] == " NNUE derived piece values:" and len(lines[1]) == 65
    assert sum("<-- this bucket is used" in line for line in lines) == 1
    v = int(sfnnv5.values(net, boards_from_fens([fen]))[0])
    assert lines[-1] == f"NNUE evaluation        {v / 361:+.2f} (white side)"


def test_imported_checkpoint_warm_starts_a_factorised_model(tmp_path):
    """nnue import-net's checkpoint.safetensors loads into model=sfnnv5 with its default
    factoriser (init_weights): the factorisers start at zero and the net is the imported one."""
    from nnue.trainer.registry import load_weights

    net = random_int_net(64)
    (tmp_path / "small.nnue").write_bytes(nnue_bytes(net))
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "import-net", str(tmp_path / "small.nnue"), "-o",
                        str(tmp_path / "imp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    fs = get_feature_set("halfkav2_hm")
    model = SFNNv5Net(SFNNv5Arch(fs.num_inputs, 64), "torch", factor_map("halfkav2_hm", fs.num_inputs))
    load_weights(model, tmp_path / "imp" / "checkpoint.safetensors")
    q = quantise(model, None)
    for k, v in net.tensors().items():
        assert torch.equal(q[k], v.to(torch.int64)), k


def test_numba_feature_transformer_matches_the_reference():
    """model.backend=numba (the compiled CPU feature transformer, factoriser unfolded): the same
    forward (torch.equal) and the same gradients (float32 sums in another order: |Δ| ≤ 1e-6)."""
    fs = get_feature_set("halfkav2_hm")
    torch.manual_seed(0)
    fmap = factor_map("halfkav2_hm", fs.num_inputs)
    ref, fast = (SFNNv5Net(SFNNv5Arch(fs.num_inputs, 64), b, fmap) for b in ("torch", "numba"))
    with torch.no_grad():
        ref.ft.factor.normal_(0, 0.1)
    fast.load_state_dict(ref.state_dict())
    boards = boards_from_fens(sample_fens(77))
    stm, nstm = fs.encode(boards)
    bucket = parse_output_buckets("SFPieceCount<8>").of(boards)
    ya, yb = ref(stm, nstm, bucket), fast(stm, nstm, bucket)
    assert torch.equal(ya, yb)
    ya.sum().backward()
    yb.sum().backward()
    for (name, p), q in zip(ref.named_parameters(), fast.parameters()):
        g = q.grad.to_dense() if q.grad.is_sparse else q.grad
        assert float((p.grad - g).abs().max()) <= 1e-6, name
