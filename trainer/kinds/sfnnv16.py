"""Net kind ``sfnnv16`` (trainer side): Stockfish 19's network as a float model, its
quantisation, audit, and the dequantisation of an imported ``.nnue``.

The float graph is nnue-pytorch's default model at 9f72946 (``model/model.py``,
``modules/layer_stacks.py``, ``modules/feature_transformer``, ``quantize.py``), which mirrors the
integer one of :mod:`nnue.inference.kinds.sfnnv16`; activations at scale 1.0 ≙ 128:

* feature transformer (86,896, L1 + 8): L1 accumulator columns and 8 PSQT columns, one weight
  matrix and bias; rows 0..64,367 are the int8 rows of the engine (Full_Threats, PP_3Wide: kept
  within ±127/256 by :meth:`SFNNv16Net.clip_weights`, PSQT columns included, as nnue-pytorch does),
  rows 64,368.. the int16 HalfKAv2_hm rows; with the factoriser, the 768 virtual rows of
  nnue-pytorch's HalfKAv2_hm^ (the feature set's map, :func:`nnue.pipeline.features.factor_map`
  with ``partial=True``: piece-square rows shared by every king bucket) folded in at export;
* per perspective ``clamp(a, 0, 255/256)·clamp(b, 0, 255/256)`` for the two L1/2 halves, stm
  first (under QAT floored to the grid of 1/128: the engine's ``>> 9``);
* per layer stack b = (pieces − 1) / 4: ``l1`` (L1 → 32) plus a shared factoriser ``l1_fact``
  (zero at the start, added to every stack at export); its 32 outputs go through ``x²`` and
  ``x`` (each floored to 1/128 under QAT) clamped to 0..127/128 (64 values), ``l2`` (64 → 32),
  the same two activations (64), ``out`` (128 → 1) over both activated layers, plus the skip
  ``l1[30] − l1[31]``;
* ``y = out + skip + (psqt_stm[b] − psqt_nstm[b]) / 2``: the engine's internal value is 600·y;
  ``forward`` returns centipawns / SCALE as every kind does, centipawns as Stockfish 19 converts
  (``100·v / a(material)``, :func:`nnue.inference.kinds.sfnnv16.win_rate_a`, the material read from
  the position's HalfKAv2_hm features).

Quantisation (nnue-pytorch ``quantize.py``; ``shared/SF19.md``): FT weights and bias ×256 →
int16 (HalfKA rows) or int8 (threat and pawn-pair rows); PSQT ×9,600 → int32; l1 weights ×128,
bias ×16,384; l2 weights ×64, bias ×8,192; out weights ×128, bias ×16,384 → int8 / int32; round
half to even. QAT (``model.qat``, on by default for this kind as in nnue-pytorch) trains on these
grids with straight-through gradients, and floors the activations as the engine's shifts do.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from nnue import kernels
from nnue.inference import api as inference_api
from nnue.inference.kinds import sfnnv16 as inference
from nnue.inference.kinds.sfnnv16 import (FC0_OUTPUTS, FC1_INPUTS, FC1_OUTPUTS, FC2_INPUTS, INT8_INPUTS, LAYER_STACKS,
                                    NUM_INPUTS, PSQ_INPUTS, PSQT_BUCKETS, PP_INPUTS, THREAT_INPUTS,
                                    SFNNv16IntegerNet, material_of_indices, win_rate_a_tensor)
from nnue.kernels import layer_stacks, sparse_ft_pair

from ..model import FeatureTransformer, fake_quant
from ..quantise import INT8_MAX, INT16_MAX, ExportError, audit_accumulator
from .spec import TrainerKind

INT32_MAX = (1 << 31) - 1
#: float 1.0 of the net's output is 600 internal units (nnue-pytorch's nnue2score)
NNUE2SCORE = 600
FT_SCALE = 256                        # ft_quantized_one
FT_MAX = 255 / 256                    # ft_quantized_max / ft_quantized_one
PSQT_SCALE = NNUE2SCORE * 16          # 9,600
HIDDEN_ONE = 128                      # hidden_quantized_one
ACT_MAX = 127 / 128
L1_W, L1_B = 128, 128 * 128
L2_W, L2_B = 64, 64 * 128
OUT_W, OUT_B = 128, 128 * 128
#: weight limits of the int8 layers and rows (±127 after scaling)
L1_LIMIT, L2_LIMIT, OUT_LIMIT = 127 / L1_W, 127 / L2_W, 127 / OUT_W
INT8_ROW_LIMIT = 127 / FT_SCALE
#: the output's fixed-point conversion: fwd·9600 / 16384 (network.cpp ``propagate``)
OUT_NUM, OUT_DEN = 9600, 16384
#: nnue-pytorch's PSQT start values of HalfKAv2_hm^ (internal units): the net starts as a
#: material count
PIECE_VALUES = (126, 781, 825, 1276, 2538)
DESCRIPTION = "Network trained with nnue-forge (sfnnv16)."


@dataclass(frozen=True)
class SFNNv16Arch:
    """Stockfish 19's architecture at feature-transformer width ``hidden`` (L1; 1,024 is what
    the engine loads, smaller multiples of 64 are for tests). ``scale``: the SCALE that forward's
    output is in units of (eval_cp = forward · scale)."""

    num_inputs: int
    hidden: int
    num_buckets: int = LAYER_STACKS
    scale: float = 400.0
    activation: str = "pairwise_crelu"
    description: str = DESCRIPTION

    kind = "sfnnv16"

    def __post_init__(self):
        if self.num_inputs != NUM_INPUTS:
            raise ValueError(f"sfnnv16 reads {NUM_INPUTS} inputs (features=sfnnv16), not {self.num_inputs}")
        if self.hidden < 64 or self.hidden % 64:
            raise ValueError(f"model.hidden={self.hidden}: sfnnv16's L1 must be a positive multiple of 64 "
                             "(Stockfish 19 loads 1024)")
        if self.num_buckets != LAYER_STACKS:
            raise ValueError(f"sfnnv16 has {LAYER_STACKS} layer stacks (model.output_buckets=SFPieceCount<8>)")
        if self.activation != "pairwise_crelu":
            raise ValueError(f"model.activation={self.activation}: sfnnv16's feature transformer output is the "
                             "pairwise product (pairwise_crelu)")

    @property
    def l1_inputs(self) -> int:
        return self.hidden

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_config(cls, num_inputs, hidden, activation, num_buckets, layers, product_scale, scale=400.0):
        """``layers``: the ``model.sfnnv16`` group, {"description": the engine file's description}."""
        desc = (layers or {}).get("description", DESCRIPTION)
        if not isinstance(desc, str):
            raise ValueError(f"model.sfnnv16.description={desc!r}: a string")
        return cls(num_inputs, hidden, num_buckets, float(scale), activation, desc)

    def header_args(self) -> dict:
        return {"hidden": self.hidden, "description": self.description}


def psqt_init() -> torch.Tensor:
    """(86,896, 8) float PSQT columns: zero for threat and pawn-pair rows; for the HalfKAv2_hm
    rows +value/600 for the perspective's own pieces, −value/600 for the other side's, 0 for
    kings (nnue-pytorch's ``halfka_psqts``)."""
    plane = (torch.arange(PSQ_INPUTS) % 704) // 64
    vals = torch.zeros(11)
    for t, v in enumerate(PIECE_VALUES):
        vals[2 * t], vals[2 * t + 1] = v / NNUE2SCORE, -v / NNUE2SCORE
    out = torch.zeros(NUM_INPUTS, PSQT_BUCKETS)
    out[INT8_INPUTS:] = vals[plane].view(-1, 1)
    return out


class SFNNv16Net(nn.Module):
    """The float SFNNv16 (see the module docstring). State dict: ``ft.weight`` (86,896, L1 + 8),
    ``ft.bias`` (L1 + 8,), [``ft.factor`` (768, L1 + 8)], ``l1`` (8·32, L1), ``l1_fact`` (32, L1),
    ``l2`` (8·32, 64), ``out`` (8, 128). forward: stm, nstm (B, A) int32 −1 padded ``sfnnv16``
    indices, bucket (B,) int64 -> (B,) float eval / SCALE."""

    qat = None
    #: the trainer sets it with optimizer.sparse_ft=true (row-sparse feature-transformer gradient)
    sparse_grad = False

    @staticmethod
    def compiled_ft(activation: str, qat: bool) -> bool:
        """Whether the numba backend computes the feature transformer compiled: always (its one L0
        activation, under QAT too: :meth:`_ft_outputs`); the kind record's ``compiled_ft``."""
        return True

    def __init__(self, arch: SFNNv16Arch, backend: str = "auto", factors: torch.Tensor | None = None):
        super().__init__()
        self.arch, self.backend = arch, backend
        H, S = arch.hidden, arch.num_buckets
        self.ft = FeatureTransformer(NUM_INPUTS, H + PSQT_BUCKETS)
        with torch.no_grad():  # nnue-pytorch's init: uniform ±sqrt(1/inputs) per feature set
            w = self.ft.weight
            for lo, hi, n in ((0, THREAT_INPUTS, THREAT_INPUTS), (THREAT_INPUTS, INT8_INPUTS, PP_INPUTS),
                              (INT8_INPUTS, NUM_INPUTS, 768 * 32)):
                s = math.sqrt(1 / n)
                w[lo:hi].uniform_(-s, s)
            s = math.sqrt(1 / (THREAT_INPUTS + PP_INPUTS + 768 * 32))
            self.ft.bias.uniform_(-s, s)
            w[:, H:] = psqt_init()
            self.ft.bias[H:] = 0.0  # cancels in (stm − nstm) / 2
        self.l1 = nn.Linear(H, S * FC0_OUTPUTS)
        self.l1_fact = nn.Linear(H, FC0_OUTPUTS)
        self.l2 = nn.Linear(FC1_INPUTS, S * FC1_OUTPUTS)
        self.out = nn.Linear(FC2_INPUTS, S)
        with torch.no_grad():  # every stack starts alike (nnue-pytorch's StackedLinear init)
            for layer, n in ((self.l1, FC0_OUTPUTS), (self.l2, FC1_OUTPUTS), (self.out, 1)):
                w = layer.weight.view(S, n, -1)
                w[:] = w[0:1].clone()
                layer.bias.view(S, n)[:] = layer.bias.view(S, n)[0:1].clone()
            self.out.bias.zero_()
            self.l1_fact.weight.zero_()
            self.l1_fact.bias.zero_()
        if factors is not None:  # the feature set's HalfKAv2_hm^ map: −1 on the int8 rows
            if factors.shape != (NUM_INPUTS,) or bool((factors[:INT8_INPUTS] >= 0).any()) \
                    or bool((factors[INT8_INPUTS:] < 0).any()):
                raise ValueError("sfnnv16's factoriser map: (86,896,) with −1 on the threat and pawn-pair rows and a "
                                 "virtual row for each HalfKAv2_hm row (nnue.pipeline.features.factor_map(..., "
                                 "partial=True))")
            self.register_buffer("full_factor_map", factors.to(torch.int64).clone(), persistent=False)
            self.register_buffer("factor_map", self.full_factor_map[INT8_INPUTS:].clone(), persistent=False)
            self.ft.factor = nn.Parameter(torch.zeros(int(factors.max()) + 1, H + PSQT_BUCKETS))
        else:
            self.factor_map = self.full_factor_map = None
        #: each FT column's QAT grid: 256 for the L1 columns, 9,600 for the PSQT columns
        self.register_buffer("ft_grids", torch.tensor([float(FT_SCALE)] * H + [float(PSQT_SCALE)] * PSQT_BUCKETS),
                             persistent=False)

    def enable_qat(self, scheme) -> None:
        """Train on the export's integer grids (weights, biases and activations; straight-through)."""
        self.qat = scheme

    def folded_ft_weight(self) -> torch.Tensor:
        """(86,896, L1 + 8): the feature transformer's rows with the factoriser added to the
        HalfKAv2_hm rows."""
        if self.factor_map is None:
            return self.ft.weight
        w = self.ft.weight
        return torch.cat([w[:INT8_INPUTS], w[INT8_INPUTS:] + self.ft.factor[self.factor_map]])

    def _q(self, t: torch.Tensor, scale: float) -> torch.Tensor:
        return t if self.qat is None else fake_quant(t, scale)

    def _act_q(self, t: torch.Tensor) -> torch.Tensor:
        """An activation on the engine's grid of 1/128, floored (its right shifts)."""
        return t if self.qat is None else fake_quant(t, HIDDEN_ONE, "floor")

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

    def _numba(self) -> bool:
        return kernels.resolve_backend(self.backend, self.ft.weight.device) == "numba"

    def _numba_args(self) -> tuple:
        """(weight, bias, factor, factor map, qa) for :mod:`nnue.kernels.sparse_ft_numba`: the
        weight unfolded with the factoriser's map over all rows (−1 on the int8 rows), under QAT
        the bias's L1 columns fake-quantised here and each column's grid for the kernel."""
        H = self.arch.hidden
        b, qa = self.ft.bias, None
        if self.qat is not None:
            b, qa = torch.cat([fake_quant(b[:H], FT_SCALE), b[H:]]), self.ft_grids
        fac = fmap = None
        if self.factor_map is not None:
            fac, fmap = self.ft.factor, self.full_factor_map
        return self.ft.weight, b, fac, fmap, qa

    def _accumulators(self, stm: torch.Tensor, nstm: torch.Tensor) -> torch.Tensor:
        """The raw accumulators of both perspectives, (B, 2·(L1 + 8)), stm first (under QAT the
        L1 columns on the grid of 1/256, the PSQT columns on 1/9600). On the numba backend
        (:func:`nnue.kernels.sparse_ft_numba.sparse_ft_pair`) the factoriser goes to the kernel
        unfolded and the gradient can be row-sparse; the same values bit for bit."""
        if self._numba():
            from nnue.kernels import sparse_ft_numba

            w, b, fac, fmap, qa = self._numba_args()
            return sparse_ft_numba.sparse_ft_pair(w, b, stm, nstm, "none", fac, fmap, self.sparse_grad, qa,
                                                  group_by="highest")
        H = self.arch.hidden
        w, b = self.folded_ft_weight(), self.ft.bias
        if self.qat is not None:
            w = torch.cat([fake_quant(w[:, :H], FT_SCALE), fake_quant(w[:, H:], PSQT_SCALE)], 1)
            b = torch.cat([fake_quant(b[:H], FT_SCALE), b[H:]])
        backend = self.backend if self.backend in ("torch", "triton") else "torch"
        if kernels.resolve_backend(self.backend, w.device) == "triton":
            backend = "triton"
        return sparse_ft_pair(w, b, stm, nstm, "none", backend)

    def _ft_outputs(self, stm: torch.Tensor, nstm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the pairwise products of both perspectives' clamped L1/2 halves (B, L1), stm first,
        under QAT floored to the grid of 1/128; the PSQT columns (B, 16), stm's 8 then nstm's).
        On the numba backend one fused kernel pass
        (:func:`nnue.kernels.sparse_ft_numba.sparse_ft_pair_passthrough`: the clamp at 255/256,
        both QAT grids, the factoriser on the HalfKAv2_hm rows only, the floor; the same fp32
        values bit for bit, ``tests/kernels/test_sparse_ft_numba_sfnnv16.py``); else from
        :meth:`_accumulators`."""
        if self._numba():
            from nnue.kernels import sparse_ft_numba

            w, b, fac, fmap, qa = self._numba_args()
            # pairs grouped by their highest feature: a HalfKAv2_hm one, so by king bucket
            return sparse_ft_numba.sparse_ft_pair_passthrough(
                w, b, stm, nstm, "pairwise_crelu", PSQT_BUCKETS, fac, fmap, self.sparse_grad, qa, FT_MAX, "highest",
                None if self.qat is None else HIDDEN_ONE)
        H = self.arch.hidden
        acc = self._accumulators(stm, nstm)
        W = H + PSQT_BUCKETS
        halves = []
        for a in (acc[:, :H], acc[:, W:W + H]):
            c = a.clamp(0.0, FT_MAX)
            halves.append(c[:, :H // 2] * c[:, H // 2:])
        return self._act_q(torch.cat(halves, 1)), torch.cat([acc[:, H:W], acc[:, W + H:]], 1)

    def _activate(self, s: torch.Tensor) -> torch.Tensor:
        """SqrClippedReLU and ClippedReLU of a layer's outputs: (B, n) -> (B, 2n)."""
        return torch.cat([self._act_q(torch.pow(s, 2.0)), self._act_q(s)], 1).clamp(0.0, ACT_MAX)

    def forward_value(self, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        """(B,) float ``y``: the engine's internal value / 600. On the CPU the positions go
        through the net in bucket order (:mod:`nnue.kernels.layer_stacks`: each through its own
        stack's rows only, 1/8 of the dense layers' arithmetic), and ``y`` comes back in batch
        order."""
        perm = offsets = None
        if layer_stacks.use_for(self.ft.weight):
            perm, offsets = layer_stacks.bucket_order(bucket, self.arch.num_buckets)
            if perm is not None:
                stm, nstm, bucket = stm.index_select(0, perm), nstm.index_select(0, perm), bucket.index_select(0, perm)
        x0, psqt_acc = self._ft_outputs(stm, nstm)
        s0 = self._stack(self.l1, x0, bucket, FC0_OUTPUTS, L1_W, L1_B, self.l1_fact, offsets)
        skip = s0[:, FC0_OUTPUTS - 2] - s0[:, FC0_OUTPUTS - 1]
        x1 = self._activate(s0)
        s1 = self._stack(self.l2, x1, bucket, FC1_OUTPUTS, L2_W, L2_B, None, offsets)
        x2 = self._activate(s1)
        o = self._stack(self.out, torch.cat([x1, x2], 1), bucket, 1, OUT_W, OUT_B, None, offsets)[:, 0] + skip
        if self.qat is not None:  # fwd·9600/16384 truncated, as network.cpp does
            q = torch.trunc(torch.round(o * OUT_DEN) * OUT_NUM / OUT_DEN) / OUT_NUM
            o = o + (q - o).detach()
        bk = bucket.view(-1, 1)
        psqt = (psqt_acc.gather(1, bk) - psqt_acc.gather(1, bk + PSQT_BUCKETS))[:, 0] / 2
        return layer_stacks.unpermute(o + psqt, perm)

    def forward(self, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        a = win_rate_a_tensor(material_of_indices(stm)).to(torch.float32)
        return self.forward_value(stm, nstm, bucket) * (NNUE2SCORE * 100) / a / self.arch.scale

    def forward_with_activations(self, stm, nstm, bucket):
        """(eval / SCALE, the stm half of the FT's transformed output) for the trainer's
        activation metrics."""
        y = self.forward(stm, nstm, bucket)
        return y, y.new_zeros((y.shape[0], 1))

    def row_sparse_clamp(self, ft_clip) -> dict:
        """The row-sparse optimiser's clamp of the rows it updates
        (:meth:`nnue.trainer.sparse_optim.RowSparseAdamW.for_model`): the int8 rows (threats and
        pawn pairs) within ±127/256 in every column, the HalfKAv2_hm rows not at all, as
        :meth:`clip_weights` clamps densely (``ft_clip`` is not used: the int16 rows' range is
        audited at export)."""
        rows = torch.zeros(NUM_INPUTS, dtype=torch.bool)
        rows[:INT8_INPUTS] = True
        return {"clamp": INT8_ROW_LIMIT, "clamp_rows": rows.to(self.ft.weight.device), "clamp_offset": None}

    @torch.no_grad()
    def clip_weights(self, ft_limit: float, l1_limit: float, ft_weight: bool = True) -> None:
        """Keep what the engine stores as int8 on the int8 range: the threat and pawn-pair rows
        of the feature transformer within ±127/256 (all columns, as nnue-pytorch; with
        ``ft_weight=False`` left to the row-sparse optimiser, which clamps the rows it updates
        alike: :meth:`row_sparse_clamp`), l1 + l1_fact within ±127/128, l2 within ±127/64, out
        within ±127/128 (the HalfKAv2_hm rows' int16 range is audited at export)."""
        if ft_weight:
            self.ft.weight[:INT8_INPUTS].clamp_(-INT8_ROW_LIMIT, INT8_ROW_LIMIT)
        self.l1_fact.weight.clamp_(-L1_LIMIT, L1_LIMIT)
        f = self.l1_fact.weight.repeat(self.arch.num_buckets, 1)
        torch.clamp(self.l1.weight, -L1_LIMIT - f, L1_LIMIT - f, out=self.l1.weight)
        self.l2.weight.clamp_(-L2_LIMIT, L2_LIMIT)
        self.out.weight.clamp_(-OUT_LIMIT, OUT_LIMIT)


def _r(t: torch.Tensor, k: float) -> torch.Tensor:
    return torch.round(t.double() * k).long()


def quantise(model: SFNNv16Net, scheme) -> dict[str, torch.Tensor]:
    """Float state -> int64 tensors named as :class:`SFNNv16IntegerNet`'s (factorisers folded)."""
    H, S = model.arch.hidden, model.arch.num_buckets
    with torch.no_grad():
        w, b = model.folded_ft_weight(), model.ft.bias
        fc0_w = model.l1.weight.view(S, FC0_OUTPUTS, H) + model.l1_fact.weight
        fc0_b = model.l1.bias.view(S, FC0_OUTPUTS) + model.l1_fact.bias
        return {"ft_bias": _r(b[:H], FT_SCALE),
                "threat_weight": _r(w[:INT8_INPUTS, :H], FT_SCALE), "threat_psqt": _r(w[:INT8_INPUTS, H:], PSQT_SCALE),
                "ft_weight": _r(w[INT8_INPUTS:, :H], FT_SCALE), "psqt": _r(w[INT8_INPUTS:, H:], PSQT_SCALE),
                "fc0_bias": _r(fc0_b, L1_B), "fc0_weight": _r(fc0_w, L1_W),
                "fc1_bias": _r(model.l2.bias.view(S, FC1_OUTPUTS), L2_B),
                "fc1_weight": _r(model.l2.weight.view(S, FC1_OUTPUTS, FC1_INPUTS), L2_W),
                "fc2_bias": _r(model.out.bias.view(S, 1), OUT_B),
                "fc2_weight": _r(model.out.weight.view(S, 1, FC2_INPUTS), OUT_W)}


#: the engine's type of each tensor: its limit
LIMITS = {"ft_bias": INT16_MAX, "threat_weight": INT8_MAX, "threat_psqt": INT32_MAX, "ft_weight": INT16_MAX,
          "psqt": INT32_MAX, "fc0_bias": INT32_MAX, "fc0_weight": INT8_MAX, "fc1_bias": INT32_MAX,
          "fc1_weight": INT8_MAX, "fc2_bias": INT32_MAX, "fc2_weight": INT8_MAX}


def audit(q: dict[str, torch.Tensor], arch, scheme, max_active: int, clip: bool = False):
    """Every tensor within its dtype (int8 weights and threat rows within ±127), and the
    accumulator's static worst case (``|bias| + Σ of the 32 largest |w|`` of the HalfKAv2_hm rows,
    and ``Σ of the 256 largest |w|`` of the int8 rows) reported, not enforced: the engine's int16
    adds wrap and the integer evaluator wraps alike. Returns (tensors, report); raises
    ExportError naming tensor, index and value of a tensor outside its type, unless ``clip``."""
    q = {k: v.clone() for k, v in q.items()}
    problems, clipped = [], {}
    for name, lim in LIMITS.items():
        bad = q[name].abs() > lim
        if bad.any():
            i = int(bad.flatten().nonzero()[0])
            problems.append(f"{name}: {int(bad.sum())} value(s) outside ±{lim}, first {int(q[name].flatten()[i])}")
            if clip:
                clipped[name] = int(bad.sum())
                q[name] = q[name].clamp(-lim, lim)
    if problems and not clip:
        raise ExportError("net would overflow its integer types (use --clip to clip instead):\n  " + "\n  ".join(problems))
    # The accumulator's static bound is reported, not enforced: the engine's int16 adds wrap,
    # the integer evaluator wraps the same way, and Stockfish's own nets exceed it on paper.
    acc_notes: list[str] = []
    worst = audit_accumulator(q, "ft_weight", "ft_bias", 32, False, acc_notes, {}, "ft (HalfKAv2_hm rows)")
    int8_worst = int(q["threat_weight"].abs().topk(min(256, INT8_INPUTS), dim=0).values.sum(0).max())
    note = ("on paper only, not enforced: the engine's int16 adds wrap and the integer evaluator wraps "
            "alike; the official net's bound is over too") if worst > INT16_MAX else None
    return q, {"accumulator_worst_case": worst, "accumulator_worst_case_int8_rows": int8_worst,
               "accumulator_limit": INT16_MAX, "accumulator_notes": acc_notes, "accumulator_note": note,
               "clipped": clipped, "problems": problems}


def calibrate(model, q, net, scheme, stm, nstm, bucket) -> tuple[dict, dict]:
    """No calibration: the integer net must be the function Stockfish computes. Reports the
    mean integer − float offset (centipawns) on the calibration positions instead."""
    with torch.no_grad():
        y = model(stm, nstm, bucket).double() * model.arch.scale
    cp = inference_api.forward_int(net, stm, nstm, bucket).double()
    d = cp - y
    return {}, {"bias_correction": False,
                "skipped": "sfnnv16: the integer net is Stockfish's own arithmetic; nothing to calibrate",
                "mean_int_minus_float_cp": float(d.mean()) if len(y) else 0.0,
                "mean_abs_int_minus_float_cp": float(d.abs().mean()) if len(y) else 0.0}


def dequantise(net: SFNNv16IntegerNet) -> dict[str, torch.Tensor]:
    """The float state dict of :class:`SFNNv16Net` (no factorisers: the weights are already
    folded; ``l1_fact`` zero) whose :func:`quantise` gives back ``net``'s tensors."""
    H = net.arch["hidden"]
    S = LAYER_STACKS
    f = torch.float32
    w = torch.cat([torch.cat([net.threat_weight.to(f) / FT_SCALE, (net.threat_psqt.double() / PSQT_SCALE).to(f)], 1),
                   torch.cat([net.ft_weight.to(f) / FT_SCALE, (net.psqt.double() / PSQT_SCALE).to(f)], 1)])
    b = torch.cat([net.ft_bias.to(f) / FT_SCALE, torch.zeros(PSQT_BUCKETS)])
    return {"ft.weight": w, "ft.bias": b,
            "l1.weight": (net.fc0_weight.to(f) / L1_W).reshape(S * FC0_OUTPUTS, H),
            "l1.bias": (net.fc0_bias.double() / L1_B).to(f).reshape(-1),
            "l1_fact.weight": torch.zeros(FC0_OUTPUTS, H), "l1_fact.bias": torch.zeros(FC0_OUTPUTS),
            "l2.weight": (net.fc1_weight.to(f) / L2_W).reshape(S * FC1_OUTPUTS, FC1_INPUTS),
            "l2.bias": (net.fc1_bias.double() / L2_B).to(f).reshape(-1),
            "out.weight": (net.fc2_weight.to(f) / OUT_W).reshape(S, FC2_INPUTS),
            "out.bias": (net.fc2_bias.double() / OUT_B).to(f).reshape(-1)}


def import_checkpoint(net: SFNNv16IntegerNet) -> tuple[dict[str, torch.Tensor], dict]:
    """``nnue import-net``'s float checkpoint of a Stockfish 19 net: (:func:`dequantise`, the
    hparams of ``model=sfnnv16`` at the net's L1: no factoriser, QAT on, so that a fine-tune stays
    on the engine's grids, the net's description kept). ``init_weights=`` fine-tunes from it;
    ``nnue export`` quantises it back to the same bytes."""
    hparams = {"features": KIND.features, "output_buckets": KIND.output_buckets, "hidden": net.arch["hidden"],
               "activation": "pairwise_crelu", "kind": KIND.name, "factoriser": False, "qat": True,
               "quant": net.scheme.to_dict(), KIND.layers_key: {"description": net.arch["description"]}}
    return dequantise(net), hparams


KIND = TrainerKind("sfnnv16", inference.KIND, SFNNv16Arch, SFNNv16Net, quantise, audit, calibrate,
                   layers_key="sfnnv16", features="sfnnv16", output_buckets="SFPieceCount<8>",
                   import_checkpoint=import_checkpoint, partial_factoriser=True,
                   compiled_ft=SFNNv16Net.compiled_ft)
