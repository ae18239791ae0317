"""Deep integer nets (L0 → L1 → L2 → out layer stacks): exact inference against a plain int64
reference, files, overflow audit, export of a float DeepNet, float vs integer agreement."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nnue.inference import NetFormatError, evaluate, load
from nnue.inference.kinds.deep import DeepIntegerNet, forward_int, make_deep_arch
from nnue.inference.api import boards_from_fens
from nnue.spec.quant import QuantScheme
from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.trainer.export import ExportError, audit, export, quantise
from tests.netfiles import make_deep_model, write_weights
from tests.samples import SAMPLE

L0_ACTS = ["crelu", "screlu", "pairwise_crelu"]
HIDDEN_ACTS = ["crelu", "screlu"]


def sample_boards(n: int) -> torch.Tensor:
    fens = [line[4:].strip() for line in open(SAMPLE) if line.startswith("fen ")]
    step = max(1, len(fens) // n)
    return boards_from_fens(fens[::step][:n])


def random_deep_net(fs_name="chess768", act="pairwise_crelu", hact="crelu", hidden=24, n1=7, n2=5,
                    buckets="MaterialCount<8>", seed=0, w8=(-128, 127), bias=200_000) -> DeepIntegerNet:
    arch = make_deep_arch(fs_name, hidden, act, buckets, n1, n2, hact)
    g = torch.Generator().manual_seed(seed)
    F, B, L1 = arch["num_inputs"], arch["num_buckets"], arch["l1_inputs"]

    def i8(*shape):
        return torch.randint(w8[0], w8[1] + 1, shape, generator=g).to(torch.int8)

    def i32(*shape):
        return torch.randint(-bias, bias + 1, shape, generator=g).to(torch.int32)

    return DeepIntegerNet(arch, QuantScheme(), torch.randint(-150, 151, (F, hidden), generator=g).to(torch.int16),
                          torch.randint(-100, 250, (hidden,), generator=g).to(torch.int16),
                          i8(B, n1, L1), i32(B, n1), i8(B, n2, n1), i32(B, n2), i8(B, n2), i32(B))


def reference_eval(net: DeepIntegerNet, boards: torch.Tensor) -> list[int]:
    """The module docstring's formula, one position at a time, in Python ints (no matmul)."""
    s, a = net.scheme, net.arch
    fs, bk = get_feature_set(a["feature_set"]), parse_output_buckets(a["output_buckets"])
    stm, nstm = fs.encode(boards)
    buckets = bk.of(boards).tolist()
    l0w, l0b = net.l0w.long(), net.l0b.long()
    H = a["hidden"]

    def floor_shift(x, k):
        return x // (1 << k)  # Python floor division: the arithmetic shift

    def act(y, kind):
        v = min(max(y, 0), s.qa)
        return floor_shift(v * v, s.l0_shift) if kind == "screlu" else v

    out = []
    for i, b in enumerate(buckets):
        x0 = []
        for idx in (stm[i], nstm[i]):
            acc = (l0b + l0w[idx[idx >= 0].long()].sum(0)).tolist()
            v = [min(max(x, 0), s.qa) for x in acc]
            if a["activation"] == "pairwise_crelu":
                x0 += [floor_shift(v[j] * v[j + H // 2], s.l0_shift) for j in range(H // 2)]
            elif a["activation"] == "screlu":
                x0 += [floor_shift(x * x, s.l0_shift) for x in v]
            else:
                x0 += v
        x = x0
        for w, bias in ((net.l1w[b], net.l1b[b]), (net.l2w[b], net.l2b[b])):
            sums = [int(bias[n]) + sum(int(w[n][j]) * x[j] for j in range(len(x))) for n in range(w.shape[0])]
            x = [act(floor_shift(y, 6), a["hidden_activation"]) for y in sums]
        o = int(net.outb[b]) + sum(int(net.outw[b][j]) * x[j] for j in range(len(x)))
        q = abs(o * s.scale) // (s.qa * s.qb)
        out.append(q if o >= 0 else -q)
    return out


@pytest.mark.parametrize("act", L0_ACTS)
@pytest.mark.parametrize("hact", HIDDEN_ACTS)
def test_forward_equals_python_reference(act, hact):
    net = random_deep_net(act=act, hact=hact, hidden=24 if act == "pairwise_crelu" else 13, seed=len(act + hact))
    boards = sample_boards(150)
    ours = evaluate(net, boards).tolist()
    assert ours == reference_eval(net, boards)
    assert min(ours) < 0 < max(ours)


def test_forward_equals_reference_other_feature_sets_and_buckets():
    for fs_name, buckets in (("halfkav2_hm", "SFPieceCount<8>"), ("kb768hm4", "MaterialCount<4>"), ("halfkp", "MaterialCount<1>")):
        net = random_deep_net(fs_name, "screlu", "screlu", hidden=9, n1=4, n2=3, buckets=buckets, seed=3)
        boards = sample_boards(60)
        assert evaluate(net, boards).tolist() == reference_eval(net, boards), fs_name


def test_hidden_layers_hit_every_regime_and_batches_agree():
    net = random_deep_net(seed=11)
    boards = sample_boards(500)
    fs, bk = net.features, net.buckets
    stm, nstm = fs.encode(boards)
    ev, parts = forward_int(net, stm, nstm, bk.of(boards), return_parts=True)
    y1 = parts["s1"] >> 6
    assert (y1 < 0).any() and ((y1 > 0) & (y1 < 255)).any() and (y1 > 255).any()
    # chunking and odd batch sizes change nothing; the empty batch is fine
    assert torch.equal(evaluate(net, boards, chunk=37), ev)
    assert torch.equal(evaluate(net, boards[:1]), ev[:1])
    assert evaluate(net, boards[:0]).shape == (0,)


def test_sums_beyond_int32_raise():
    net = random_deep_net(seed=5)
    net.l1b.fill_(2**31 - 10)
    with pytest.raises(OverflowError, match="L1 sum.*int32"):
        evaluate(net, sample_boards(20))


def test_file_round_trip_raw_layout_and_header_checks(tmp_path):
    net = random_deep_net(seed=2)
    net.save(tmp_path / "a.safetensors")
    back = load(tmp_path / "a.safetensors")
    assert isinstance(back, DeepIntegerNet) and back.arch == net.arch
    for k, t in net.tensors().items():
        assert torch.equal(getattr(back, k), t) and getattr(back, k).dtype == t.dtype, k
    back.save(tmp_path / "b.safetensors")
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    # raw layout, field by field
    raw = net.raw_bytes()
    a = net.arch
    F, H, B, L1, N1, N2 = (a[k] for k in ("num_inputs", "hidden", "num_buckets", "l1_inputs", "l1_outputs", "l2_outputs"))
    off = 0

    def take(dtype, count):
        nonlocal off
        arr = np.frombuffer(raw, dtype=dtype, count=count, offset=off)
        off += arr.nbytes
        return arr

    assert np.array_equal(take("<i2", F * H), net.l0w.flatten().numpy())
    assert np.array_equal(take("<i2", H), net.l0b.numpy())
    assert np.array_equal(take("i1", B * N1 * L1), net.l1w.flatten().numpy())
    assert np.array_equal(take("<i4", B * N1), net.l1b.flatten().numpy())
    assert np.array_equal(take("i1", B * N2 * N1), net.l2w.flatten().numpy())
    assert np.array_equal(take("<i4", B * N2), net.l2b.flatten().numpy())
    assert np.array_equal(take("i1", B * N2), net.outw.flatten().numpy())
    assert np.array_equal(take("<i4", B), net.outb.numpy())
    assert len(raw) % 64 == 0 and raw[off:] == bytes(len(raw) - off)
    # a tensor with the wrong dtype is refused, naming it
    bad = random_deep_net(seed=2)
    bad.l1w = bad.l1w.to(torch.int16)
    bad.save(tmp_path / "bad.safetensors")
    with pytest.raises(NetFormatError, match="l1w.*int8"):
        load(tmp_path / "bad.safetensors")
    with pytest.raises(NetFormatError, match="feature_set"):
        load(tmp_path / "a.safetensors", expect={"feature_set": "halfkp"})


@pytest.mark.parametrize("act,hact", [("pairwise_crelu", "crelu"), ("screlu", "screlu"), ("crelu", "crelu")])
def test_export_float_deep_net(act, hact, tmp_path, sample_dataset):
    model = make_deep_model(act, hidden=32, hidden_activation=hact, seed=7)
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset, val_fraction=1.0)
    r = export(ck, tmp_path / "net", max_positions=4000)
    net = load(tmp_path / "net" / "net.safetensors")
    assert isinstance(net, DeepIntegerNet) and net.arch["hidden_activation"] == hact
    meta = json.loads((tmp_path / "net" / "export.json").read_text())
    assert [x["layer"] for x in meta["layers"]] == ["l0", "l1", "l2", "out"]
    assert meta["bin_layout"].startswith("l0w int16[F][H]") and "l1w int8[B][N1][L1]" in meta["bin_layout"]
    assert (tmp_path / "net" / "net.bin").read_bytes() == net.raw_bytes()
    # weights are the rounded float weights; hidden biases carry the rounding half
    q = quantise(model, QuantScheme())
    assert torch.equal(net.l1w, q["l1w"].to(torch.int8)) and torch.equal(net.l2b, q["l2b"].to(torch.int32))
    assert torch.equal(q["l1b"], torch.round(model.l1.bias.double() * 255 * 64).long().view(8, 16) + 32)
    cross = r["cross_check"]
    assert cross["positions"] > 1000
    # float and integer agree: no systematic bias, small spread (the evals spread over hundreds of cp)
    assert abs(cross["mean_signed_diff_cp"]) < 1.0, cross
    assert cross["mean_abs_diff_cp"] < 8.0, cross
    assert cross["spearman_int_vs_score"] == pytest.approx(cross["spearman_float_vs_score"], abs=0.02)


def test_audit_refuses_int8_overflow_and_clip_repairs(tmp_path, sample_dataset):
    model = make_deep_model(seed=1)
    with torch.no_grad():
        model.out.weight[3, 5] = 2.5  # 160 at QB = 64: beyond int8
    q = quantise(model, QuantScheme())
    with pytest.raises(ExportError, match=r"outw.*int8.*\[3, 5\] = 160"):
        audit(q, model.arch, QuantScheme(), 32)
    fixed, report = audit(q, model.arch, QuantScheme(), 32, clip=True)
    assert report["clipped"] == {"outw": 1} and int(fixed["outw"][3, 5]) == 127
    # the export refuses it too, and writes nothing
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset)
    with pytest.raises(ExportError, match="outw"):
        export(ck, tmp_path / "net")
    assert not (tmp_path / "net" / "net.safetensors").exists()
    assert export(ck, tmp_path / "net", clip=True)["audit"]["clipped"] == {"outw": 1}


def test_float_deep_net_matches_integer_formula_closely():
    """Without calibration, the float net's activations (with the 255/256 product scale) track
    the integer net's layer by layer: the evals agree within a few centipawns."""
    model = make_deep_model("screlu", hidden=16, hidden_activation="screlu", seed=4, dense_scale=0.3)
    q = quantise(model, QuantScheme())
    arch = make_deep_arch("chess768", 16, "screlu", "MaterialCount<8>", 16, 32, "screlu")
    specs = DeepIntegerNet.tensor_specs(arch)
    net = DeepIntegerNet(arch, QuantScheme(), *(q[k].to(dt) for k, (dt, _) in specs.items()))
    boards = sample_boards(400)
    fs, bk = net.features, net.buckets
    stm, nstm = fs.encode(boards)
    with torch.no_grad():
        f = model(stm, nstm, bk.of(boards)).double() * 400
    d = evaluate(net, boards).double() - f
    assert f.std() > 50 and d.abs().mean() < 3.0 and d.abs().max() < 25, (float(d.abs().mean()), float(d.abs().max()))


@pytest.mark.parametrize("fs_name", ["chess768", "kb768hm4", "halfkav2_hm"])
def test_incremental_accumulator_evaluates_deep_nets(fs_name):
    """Push and pop through a random game: after every step the incremental eval of a deep net
    equals the batch eval of the same position (king-bucket refreshes included)."""
    import chess

    from nnue.inference.incremental import IncrementalAccumulator
    from nnue.pipeline.board import pack_board

    net = random_deep_net(fs_name, "screlu", "crelu", hidden=16, seed=9, w8=(-30, 30), bias=20_000)
    # a random legal game from the sample's first position (captures, king moves, refreshes)
    board = chess.Board(next(line[4:].strip() for line in open(SAMPLE) if line.startswith("fen ")))
    inc = IncrementalAccumulator(net, pack_board(board))
    packed, evals = [pack_board(board)], [inc.evaluate()]
    rng = np.random.default_rng(0)
    for _ in range(60):
        legal = list(board.legal_moves)
        if not legal:
            break
        m = legal[rng.integers(len(legal))]
        board.push(m)
        inc.push(m.uci())
        packed.append(pack_board(board))
        evals.append(inc.evaluate())
    while board.move_stack:
        board.pop()
        inc.pop()
        packed.append(pack_board(board))
        evals.append(inc.evaluate())
    boards = torch.frombuffer(bytearray(b"".join(packed)), dtype=torch.uint8).view(-1, 32)
    assert evals == evaluate(net, boards).tolist()
    assert len(set(evals)) > 10


def test_cli_export_and_eval_of_a_deep_net(tmp_path, sample_dataset, capsys):
    from nnue.cli import main as cli_main

    ck = write_weights(make_deep_model("screlu", hidden=16, seed=2), tmp_path / "w.safetensors", sample_dataset)
    assert cli_main(["export", str(ck), "-o", str(tmp_path / "net")]) == 0
    out = capsys.readouterr().out
    assert "chess768 -> 16x2 screlu -> 16 crelu -> 32 crelu -> 1 -> MaterialCount<8>" in out
    assert "float vs int on" in out
    fen = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
    assert cli_main(["eval", str(tmp_path / "net" / "net.safetensors"), "--fen", fen]) == 0
    net = load(tmp_path / "net" / "net.safetensors")
    assert int(capsys.readouterr().out.split()[-1]) == evaluate(net, boards_from_fens([fen])).item()


@pytest.mark.parametrize("method", ["gather", "compact"])
@pytest.mark.parametrize("act", L0_ACTS)
def test_block_sparse_l1_equals_dense(method, act):
    """The block-sparse L1 path gives the dense deep evals exactly, with many dead neurons (the
    blocks it skips) and with none; odd halves exercise the padded last block."""
    from nnue.inference.sparse_l1 import evaluate_sparse

    boards = sample_boards(300)
    for dead in (0.0, 0.7):
        net = random_deep_net(act=act, hidden=26 if act == "pairwise_crelu" else 13, seed=21)
        g = torch.Generator().manual_seed(1)
        net.l0b[torch.randperm(net.l0b.shape[0], generator=g)[: int(dead * net.l0b.shape[0])]] = -8000
        ev, stats = evaluate_sparse(net, boards, chunk=128, method=method, return_stats=True)
        assert torch.equal(ev, evaluate(net, boards))
        if dead:
            assert stats["sparsity"] > 0.4


def test_dense_int_paths_agree():
    """dense_int: the per-bucket products of a sorted step (bucket_range), the all-bucket
    product and a plain int64 reference agree, for weights needing one and two digits."""
    from nnue.inference.dense import dense_int, dense_plan

    g = torch.Generator().manual_seed(3)
    for lim in (64, 128):
        w = torch.randint(-lim, min(lim, 127) + 1, (5, 9, 37), generator=g).to(torch.int8)
        b = torch.randint(-10**6, 10**6, (5, 9), generator=g).to(torch.int32)
        x = torch.randint(0, 256, (301, 37), generator=g).to(torch.int32)
        x[:7] = 255
        x[7:14] = 0
        plan = dense_plan(w)
        for lo, hi in ((2, 2), (3, 4), (0, 4)):
            bucket = torch.randint(lo, hi + 1, (301,), generator=g)
            ref = b.long()[bucket] + torch.einsum("nk,nmk->nm", x.long(), w.long()[bucket])
            assert torch.equal(dense_int(x, w, b, bucket, "t", plan), ref)
            assert torch.equal(dense_int(x, w, b, bucket, "t", plan, bucket_range=(lo, hi)), ref)


@pytest.mark.parametrize("n1,n2", [(1, 5), (7, 1), (1, 1)])
def test_single_neuron_layers(n1, n2):
    """N1 = 1 or N2 = 1: one-column weight matrices (a layout torch._int_mm misreads when it is
    a strided view) still give the reference evals."""
    net = random_deep_net(act="screlu", hact="crelu", hidden=13, n1=n1, n2=n2, seed=n1 * 10 + n2)
    boards = sample_boards(120)
    assert evaluate(net, boards).tolist() == reference_eval(net, boards)
