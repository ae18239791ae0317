"""Net kind ``sfnnv5`` (trainer side): Stockfish 15.1's network as a float model, its
quantisation, audit, and the dequantisation of an imported ``.nnue``.

The float graph mirrors the integer one of :mod:`nnue.inference.kinds.sfnnv5` (as nnue-pytorch's
``model.py`` at c0c7b51 did, the trainer that made SFNNv5 nets), activations at scale 1.0 ≙ 127:

* feature transformer (F, L1 + 8): L1 accumulator columns and 8 PSQT columns, one weight matrix
  and bias; with the factoriser, 704 virtual HalfKA rows (``i % 704``) folded in at export;
* per perspective ``clamp(a, 0, 1)·clamp(b, 0, 1)·127/128`` for the two L1/2 halves, stm first;
* per layer stack b = (pieces − 1) / 4: ``l1`` (L1 → 16) plus a shared factoriser ``l1_fact``
  (L1 → 16, zero at the start, added to every stack at export); its first 15 outputs go through
  ``clamp(x²·127/128, 0, 1)`` and ``clamp(x, 0, 1)`` (30 values), ``l2`` (30 → 32),
  ``clamp(·, 0, 1)``, ``out`` (32 → 1), plus the 16th ``l1`` output (the skip);
* ``y = out + (psqt_stm[b] − psqt_nstm[b]) / 2``: the engine's internal value is 600·y, UCI
  centipawns 600·y·100/361; ``forward`` returns centipawns / SCALE as every kind does.

Quantisation (``shared/SF15.md``): FT weights and bias ×127 → int16; PSQT ×9,600 → int32; l1 and
l2 weights ×64 → int8 (kept within ±127/64 by :meth:`SFNNv5Net.clip_weights`), their biases
×8,128 → int32; ``out`` weights ×9,600/127 → int8 (within ±127²/9,600), bias ×9,600 → int32;
round half to even.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from nnue.inference import api as inference_api
from nnue.inference.kinds import sfnnv5 as inference
from nnue.inference.kinds.sfnnv5 import (FC0_OUTPUTS, FC1_INPUTS, FC1_OUTPUTS, FC1_PADDED, LAYER_STACKS, NORMALIZE_TO_PAWN,
                                   PSQT_BUCKETS, SFNNv5IntegerNet)
from nnue import kernels
from nnue.kernels import layer_stacks, sparse_ft_pair

from ..model import FeatureTransformer, fake_quant
from ..quantise import INT8_MAX, INT16_MAX, ExportError, audit_accumulator
from .spec import TrainerKind

INT32_MAX = (1 << 31) - 1
#: float 1.0 of the net's output is 600 internal units (nnue-pytorch's nnue2score)
NNUE2SCORE = 600
FT_SCALE = 127
PSQT_SCALE = NNUE2SCORE * 16          # 9,600
HIDDEN_W, HIDDEN_B = 64, 64 * 127     # 64, 8,128
OUT_W, OUT_B = PSQT_SCALE / 127, PSQT_SCALE
HIDDEN_LIMIT = 127 / 64
OUT_LIMIT = 127 * 127 / PSQT_SCALE
#: material of each piece type for the PSQT columns' start (Stockfish 15.1's endgame values,
#: internal units): the net starts as a material count
PIECE_VALUES = (206, 854, 915, 1380, 2682)
#: the description nnue-forge writes into the .nnue header (model.sfnnv5.description)
DESCRIPTION = "Network trained with nnue-forge (sfnnv5)."


@dataclass(frozen=True)
class SFNNv5Arch:
    """Stockfish 15.1's architecture at feature-transformer width ``hidden`` (L1; 1,024 is what
    the engine loads, smaller sizes are for tests). ``scale``: the SCALE that forward's output
    is in units of (eval_cp = forward · scale)."""

    num_inputs: int
    hidden: int
    num_buckets: int = LAYER_STACKS
    scale: float = 400.0
    activation: str = "pairwise_crelu"
    description: str = DESCRIPTION

    kind = "sfnnv5"

    def __post_init__(self):
        if self.hidden < 32 or self.hidden % 32:
            raise ValueError(f"model.hidden={self.hidden}: sfnnv5's L1 must be a positive multiple of 32 "
                             "(Stockfish 15.1 loads 1024)")
        if self.num_buckets != LAYER_STACKS:
            raise ValueError(f"sfnnv5 has {LAYER_STACKS} layer stacks (model.output_buckets=SFPieceCount<8>)")
        if self.activation != "pairwise_crelu":
            raise ValueError(f"model.activation={self.activation}: sfnnv5's feature transformer output is the "
                             "pairwise product (pairwise_crelu)")

    @property
    def l1_inputs(self) -> int:
        return self.hidden

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_config(cls, num_inputs, hidden, activation, num_buckets, layers, product_scale, scale=400.0):
        """``layers``: the ``model.sfnnv5`` group, {"description": the engine file's description}."""
        desc = (layers or {}).get("description", DESCRIPTION)
        if not isinstance(desc, str):
            raise ValueError(f"model.sfnnv5.description={desc!r}: a string")
        return cls(num_inputs, hidden, num_buckets, float(scale), activation, desc)

    def header_args(self) -> dict:
        return {"hidden": self.hidden, "description": self.description}


def psqt_init(num_inputs: int) -> torch.Tensor:
    """(F, 8) float PSQT columns that count material: +value/600 for the perspective's own
    pieces, −value/600 for the other side's (HalfKAv2_hm planes 2t and 2t + 1), 0 for kings."""
    plane = (torch.arange(num_inputs) % 704) // 64
    vals = torch.zeros(11)
    for t, v in enumerate(PIECE_VALUES):
        vals[2 * t], vals[2 * t + 1] = v / NNUE2SCORE, -v / NNUE2SCORE
    return vals[plane].view(-1, 1).expand(num_inputs, PSQT_BUCKETS).clone()


class SFNNv5Net(nn.Module):
    """The float SFNNv5 (see the module docstring). State dict: ``ft.weight`` (F, L1 + 8),
    ``ft.bias`` (L1 + 8,), [``ft.factor`` (704, L1 + 8)], ``l1`` (8·16, L1), ``l1_fact``
    (16, L1), ``l2`` (8·32, 30), ``out`` (8, 32). forward: stm, nstm (B, A) int32 −1 padded,
    bucket (B,) int64 -> (B,) float eval / SCALE."""

    qat = None
    #: its factorisers (the virtual HalfKA rows and l1's shared stack): zero when warm-started from
    #: a file without them (nnue import-net's checkpoint)
    FACTORISERS = ("ft.factor", "l1_fact.")
    #: the trainer sets it with optimizer.sparse_ft=true: on the numba backend the feature
    #: transformer's gradient then holds only the rows a batch touched (RowSparseAdamW)
    sparse_grad = False

    @staticmethod
    def compiled_ft(activation: str, qat: bool) -> bool:
        """Whether the numba backend computes the feature transformer compiled (not under QAT:
        :meth:`_accumulators`, :meth:`_ft_outputs`); the kind record's ``compiled_ft``."""
        return not qat

    def __init__(self, arch: SFNNv5Arch, backend: str = "auto", factors: torch.Tensor | None = None):
        super().__init__()
        self.arch, self.backend = arch, backend
        H, S = arch.hidden, arch.num_buckets
        self.ft = FeatureTransformer(arch.num_inputs, H + PSQT_BUCKETS)
        with torch.no_grad():
            self.ft.weight[:, H:] = psqt_init(arch.num_inputs)
            self.ft.bias[H:] = 0.0  # cancels in (stm − nstm) / 2
        self.l1 = nn.Linear(H, S * FC0_OUTPUTS)
        self.l1_fact = nn.Linear(H, FC0_OUTPUTS)
        self.l2 = nn.Linear(FC1_INPUTS, S * FC1_OUTPUTS)
        self.out = nn.Linear(FC1_OUTPUTS, S)
        with torch.no_grad():  # every stack starts alike (nnue-pytorch's LayerStacks init)
            for layer, n in ((self.l1, FC0_OUTPUTS), (self.l2, FC1_OUTPUTS), (self.out, 1)):
                w = layer.weight.view(S, n, -1)
                w[:] = w[0:1].clone()
                layer.bias.view(S, n)[:] = layer.bias.view(S, n)[0:1].clone()
            self.out.bias.zero_()
            self.l1_fact.weight.zero_()
            self.l1_fact.bias.zero_()
        if factors is not None:
            if factors.shape != (arch.num_inputs,):
                raise ValueError(f"factor map must be ({arch.num_inputs},), got {tuple(factors.shape)}")
            self.register_buffer("factor_map", factors.long(), persistent=False)
            self.ft.factor = nn.Parameter(torch.zeros(int(factors.max()) + 1, H + PSQT_BUCKETS))
        else:
            self.factor_map = None

    def enable_qat(self, scheme) -> None:
        """Train on the export's integer grids (weights and biases; straight-through)."""
        self.qat = scheme

    def folded_ft_weight(self) -> torch.Tensor:
        if self.factor_map is None:
            return self.ft.weight
        return self.ft.weight + self.ft.factor[self.factor_map]

    def _q(self, t: torch.Tensor, scale: float) -> torch.Tensor:
        return t if self.qat is None else fake_quant(t, scale)

    def _stack(self, layer: nn.Linear, x: torch.Tensor, bucket: torch.Tensor, n: int, ws: float, bs: float,
               extra: nn.Linear | None = None, offsets: list[int] | None = None) -> torch.Tensor:
        """A layer-stack layer: (B, K) -> (B, n), each position through its bucket's rows; with
        ``offsets`` the rows of x are in bucket order and only each bucket's own rows are
        computed (:mod:`nnue.kernels.layer_stacks`), else every bucket's, then a gather."""
        w, b = layer.weight, layer.bias
        if extra is not None:  # the shared factoriser of l1, added to every stack
            w = (w.view(-1, n, w.shape[1]) + extra.weight).view(-1, w.shape[1])
            b = (b.view(-1, n) + extra.bias).view(-1)
        if offsets is not None:
            return layer_stacks.stack_linear(x, self._q(w, ws), self._q(b, bs), offsets, n)
        y = torch.nn.functional.linear(x, self._q(w, ws), self._q(b, bs))
        return y.view(x.shape[0], -1, n).gather(1, bucket.view(-1, 1, 1).expand(-1, 1, n)).squeeze(1)

    def _accumulators(self, stm: torch.Tensor, nstm: torch.Tensor) -> torch.Tensor:
        """The raw accumulators of both perspectives, (B, 2·(L1 + 8)), stm first. On the numba
        backend (:mod:`nnue.kernels.sparse_ft_numba`, not under QAT: its per-row fake
        quantisation has one scale, this net two) the factoriser goes to the kernel unfolded and
        the gradient can be row-sparse; else :func:`nnue.kernels.sparse_ft_pair` on the folded
        weight (under QAT: L1 columns on the grid of 1/127, PSQT columns of 1/9600)."""
        if self.qat is None and kernels.resolve_backend(self.backend, self.ft.weight.device) == "numba":
            from nnue.kernels import sparse_ft_numba

            fac = self.ft.factor if self.factor_map is not None else None
            return sparse_ft_numba.sparse_ft_pair(self.ft.weight, self.ft.bias, stm, nstm, "none", fac,
                                                  self.factor_map, self.sparse_grad, None)
        H = self.arch.hidden
        w, b = self.folded_ft_weight(), self.ft.bias
        if self.qat is not None:
            w = torch.cat([fake_quant(w[:, :H], FT_SCALE), fake_quant(w[:, H:], PSQT_SCALE)], 1)
            b = torch.cat([fake_quant(b[:H], FT_SCALE), b[H:]])
        return sparse_ft_pair(w, b, stm, nstm, "none", "torch" if self.backend == "numba" else self.backend)

    def _ft_outputs(self, stm: torch.Tensor, nstm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the pairwise products ``clamp(a)·clamp(b)`` of both perspectives' L1/2 halves times
        127/128 (B, L1), stm first: what the layer stacks read, before QAT's floor; the PSQT
        columns of both accumulators (B, 16), stm's 8 then nstm's). On the numba backend without
        QAT one fused kernel pass (:func:`nnue.kernels.sparse_ft_numba.sparse_ft_pair_passthrough`
        with ``out_scale``: the same fp32 values bit for bit as the products times 127/128 in
        torch, without the (B, 2·(L1 + 8)) accumulators, their elementwise passes and the
        scale's pass and its backward's); else from :meth:`_accumulators`."""
        H = self.arch.hidden
        if self.qat is None and kernels.resolve_backend(self.backend, self.ft.weight.device) == "numba":
            from nnue.kernels import sparse_ft_numba

            fac = self.ft.factor if self.factor_map is not None else None
            return sparse_ft_numba.sparse_ft_pair_passthrough(self.ft.weight, self.ft.bias, stm, nstm,
                                                              "pairwise_crelu", PSQT_BUCKETS, fac, self.factor_map,
                                                              self.sparse_grad, out_scale=127 / 128)
        acc = self._accumulators(stm, nstm)
        W = H + PSQT_BUCKETS
        halves = []
        for a in (acc[:, :H], acc[:, W:W + H]):
            c = a.clamp(0.0, 1.0)
            halves.append(c[:, :H // 2] * c[:, H // 2:])
        return torch.cat(halves, 1) * (127 / 128), torch.cat([acc[:, H:W], acc[:, W + H:]], 1)

    def forward_value(self, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                      with_ft: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B,) float ``y``: the engine's internal value / 600. On the CPU the positions go
        through the net in bucket order (:mod:`nnue.kernels.layer_stacks`: each through its own
        stack's rows only), and ``y`` comes back in batch order."""
        perm = offsets = None
        if layer_stacks.use_for(self.ft.weight):
            perm, offsets = layer_stacks.bucket_order(bucket, self.arch.num_buckets)
            if perm is not None:
                stm, nstm, bucket = stm.index_select(0, perm), nstm.index_select(0, perm), bucket.index_select(0, perm)
        ft_out, psqt_acc = self._ft_outputs(stm, nstm)
        x0 = ft_out
        if self.qat is not None:
            x0 = fake_quant(x0, 127, "floor")
        s0 = self._stack(self.l1, x0, bucket, FC0_OUTPUTS, HIDDEN_W, HIDDEN_B, self.l1_fact, offsets)
        h, skip = s0[:, :FC0_OUTPUTS - 1], s0[:, FC0_OUTPUTS - 1]
        x1 = torch.cat([torch.pow(h, 2.0) * (127 / 128), h], 1).clamp(0.0, 1.0)
        x2 = self._stack(self.l2, x1, bucket, FC1_OUTPUTS, HIDDEN_W, HIDDEN_B, None, offsets).clamp(0.0, 1.0)
        o = self._stack(self.out, x2, bucket, 1, OUT_W, OUT_B, None, offsets)[:, 0]
        bk = bucket.view(-1, 1)
        psqt = (psqt_acc.gather(1, bk) - psqt_acc.gather(1, bk + PSQT_BUCKETS))[:, 0] / 2
        v = layer_stacks.unpermute(o + skip + psqt, perm)
        return (v, ft_out) if with_ft else v

    def forward(self, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        return self.forward_value(stm, nstm, bucket) * (NNUE2SCORE * 100 / NORMALIZE_TO_PAWN) / self.arch.scale

    def forward_with_activations(self, stm, nstm, bucket):
        """(eval / SCALE, (B, L1) the FT's transformed output: both perspectives' pairwise products
        times 127/128, stm first, what the layer stacks read (before QAT's floor)) for the
        trainer's activation metrics (density, block sparsity, the L1 penalty).
        Its rows are in the order the layer stacks ran them (bucket order on the CPU path, not
        unpermuted: a (B, L1) copy a step for statistics that do not depend on the order). It
        returned zeros, so an sfnnv5 run reported ``val_l0_density: 0.0``."""
        v, ft_out = self.forward_value(stm, nstm, bucket, with_ft=True)
        return v * (NNUE2SCORE * 100 / NORMALIZE_TO_PAWN) / self.arch.scale, ft_out

    @torch.no_grad()
    def clip_weights(self, ft_limit: float, l1_limit: float, ft_weight: bool = True) -> None:
        """Keep the dense layers on the int8 range: l1 + l1_fact and l2 within ±127/64, out
        within ±127²/9600 (the feature transformer's int16 range is audited at export)."""
        lim = HIDDEN_LIMIT
        self.l1_fact.weight.clamp_(-lim, lim)
        f = self.l1_fact.weight.repeat(self.arch.num_buckets, 1)
        torch.clamp(self.l1.weight, -lim - f, lim - f, out=self.l1.weight)
        self.l2.weight.clamp_(-lim, lim)
        self.out.weight.clamp_(-OUT_LIMIT, OUT_LIMIT)


def _r(t: torch.Tensor, k: float) -> torch.Tensor:
    return torch.round(t.double() * k).long()


def quantise(model: SFNNv5Net, scheme) -> dict[str, torch.Tensor]:
    """Float state -> int64 tensors named as :class:`SFNNv5IntegerNet`'s (factorisers folded,
    fc_1's inputs padded from 30 to 32 with zero weights)."""
    H, S = model.arch.hidden, model.arch.num_buckets
    with torch.no_grad():
        w, b = model.folded_ft_weight(), model.ft.bias
        fc0_w = model.l1.weight.view(S, FC0_OUTPUTS, H) + model.l1_fact.weight
        fc0_b = model.l1.bias.view(S, FC0_OUTPUTS) + model.l1_fact.bias
        fc1_w = torch.zeros(S, FC1_OUTPUTS, FC1_PADDED, dtype=torch.int64)
        fc1_w[:, :, :FC1_INPUTS] = _r(model.l2.weight.view(S, FC1_OUTPUTS, FC1_INPUTS), HIDDEN_W)
        return {"ft_bias": _r(b[:H], FT_SCALE), "ft_weight": _r(w[:, :H], FT_SCALE), "psqt": _r(w[:, H:], PSQT_SCALE),
                "fc0_bias": _r(fc0_b, HIDDEN_B), "fc0_weight": _r(fc0_w, HIDDEN_W),
                "fc1_bias": _r(model.l2.bias.view(S, FC1_OUTPUTS), HIDDEN_B), "fc1_weight": fc1_w,
                "fc2_bias": _r(model.out.bias.view(S, 1), OUT_B), "fc2_weight": _r(model.out.weight.view(S, 1, -1), OUT_W)}


def audit(q: dict[str, torch.Tensor], arch, scheme, max_active: int, clip: bool = False):
    """Every tensor within its dtype (int8 weights within ±127), and the accumulator's worst
    case ``|bias| + Σ of the 32 largest |w|`` per neuron within int16 (the engine's int16 adds
    would wrap). Returns (tensors, report); raises ExportError naming tensor, index and value,
    unless ``clip`` (then clamps and reports the count)."""
    q = {k: v.clone() for k, v in q.items()}
    limits = {"ft_bias": INT16_MAX, "ft_weight": INT16_MAX, "psqt": INT32_MAX, "fc0_bias": INT32_MAX,
              "fc0_weight": INT8_MAX, "fc1_bias": INT32_MAX, "fc1_weight": INT8_MAX, "fc2_bias": INT32_MAX,
              "fc2_weight": INT8_MAX}
    problems, clipped = [], {}
    for name, lim in limits.items():
        bad = q[name].abs() > lim
        if bad.any():
            i = int(bad.flatten().nonzero()[0])
            problems.append(f"{name}: {int(bad.sum())} value(s) outside ±{lim}, first {int(q[name].flatten()[i])}")
            if clip:
                clipped[name] = int(bad.sum())
                q[name] = q[name].clamp(-lim, lim)
    worst = audit_accumulator(q, "ft_weight", "ft_bias", max_active, clip, problems, clipped, "ft")
    if problems and not clip:
        raise ExportError("net would overflow its integer types (use --clip to clip instead):\n  " + "\n  ".join(problems))
    return q, {"accumulator_worst_case": worst, "accumulator_limit": INT16_MAX,
               "clipped": clipped, "problems": problems}


def calibrate(model, q, net, scheme, stm, nstm, bucket) -> tuple[dict, dict]:
    """No calibration: the integer net must be the function Stockfish computes, and the float
    graph already mirrors it (127/128 factors, clamps). Reports the mean integer − float
    offset on the calibration positions instead."""
    with torch.no_grad():
        y = model(stm, nstm, bucket).double() * model.arch.scale
    cp = inference_api.forward_int(net, stm, nstm, bucket).double()
    return {}, {"bias_correction": False,
                "skipped": "sfnnv5: the integer net is Stockfish's own arithmetic; nothing to calibrate",
                "mean_int_minus_float_cp": float((cp - y).mean()) if len(y) else 0.0}


def dequantise(net: SFNNv5IntegerNet) -> dict[str, torch.Tensor]:
    """The float state dict of :class:`SFNNv5Net` (no factorisers: the weights are already
    folded; ``l1_fact`` zero) whose :func:`quantise` gives back ``net``'s tensors (up to float32
    rounding of PSQT weights beyond 2^24 / 9600). fc_1's padding columns are dropped."""
    H = net.arch["hidden"]
    S = LAYER_STACKS
    f = torch.float32
    ft_w = torch.cat([net.ft_weight.to(f) / FT_SCALE, (net.psqt.double() / PSQT_SCALE).to(f)], 1)
    ft_b = torch.cat([net.ft_bias.to(f) / FT_SCALE, torch.zeros(PSQT_BUCKETS)])
    return {"ft.weight": ft_w, "ft.bias": ft_b,
            "l1.weight": (net.fc0_weight.to(f) / HIDDEN_W).reshape(S * FC0_OUTPUTS, H),
            "l1.bias": (net.fc0_bias.double() / HIDDEN_B).to(f).reshape(-1),
            "l1_fact.weight": torch.zeros(FC0_OUTPUTS, H), "l1_fact.bias": torch.zeros(FC0_OUTPUTS),
            "l2.weight": (net.fc1_weight[:, :, :FC1_INPUTS].to(f) / HIDDEN_W).reshape(S * FC1_OUTPUTS, FC1_INPUTS),
            "l2.bias": (net.fc1_bias.double() / HIDDEN_B).to(f).reshape(-1),
            "out.weight": (net.fc2_weight.double() / OUT_W).to(f).reshape(S, FC1_OUTPUTS),
            "out.bias": (net.fc2_bias.double() / OUT_B).to(f).reshape(-1)}


def import_checkpoint(net: SFNNv5IntegerNet) -> tuple[dict[str, torch.Tensor], dict]:
    """``nnue import-net``'s float checkpoint of a Stockfish 15.1 net: (:func:`dequantise`, the
    hparams of ``model=sfnnv5`` at the net's L1, without the factoriser, its description kept)."""
    hparams = {"features": KIND.features, "output_buckets": KIND.output_buckets, "hidden": net.arch["hidden"],
               "activation": "pairwise_crelu", "kind": KIND.name, "factoriser": False, "qat": False,
               "quant": net.scheme.to_dict(), KIND.layers_key: {"description": net.arch["description"]}}
    return dequantise(net), hparams


KIND = TrainerKind("sfnnv5", inference.KIND, SFNNv5Arch, SFNNv5Net, quantise, audit, calibrate,
                   layers_key="sfnnv5", features="halfkav2_hm", output_buckets="SFPieceCount<8>",
                   import_checkpoint=import_checkpoint, compiled_ft=SFNNv5Net.compiled_ft)
