"""The perspective net as a plain ``nn.Module``: feature transformer → activation → output buckets.

Forward: ``acc_p = bias + Σ W[f]`` for each perspective p (shared weights), ``h = [act(acc_stm),
act(acc_nstm)]``, ``y = L1_b(h)`` for the output bucket b of each position. ``y`` is the eval in
units of SCALE: ``eval_cp = y · SCALE``. State-dict layout (kept identical for every kernel
backend): ``ft.weight (F, H)``, ``ft.bias (H,)``, ``l1.weight (B_out, L1_in)``, ``l1.bias (B_out,)``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from nnue import kernels
from nnue.kernels import layer_stacks, sparse_ft_pair
from nnue.pipeline import features
from nnue.spec import activations as acts

PERSPECTIVE_ACTIVATIONS = acts.allowed("l0")


@dataclass(frozen=True)
class Arch:
    """Architecture of a perspective net. num_inputs: feature count F; hidden: H per
    perspective; activation: crelu|screlu|pairwise_crelu; num_buckets: output buckets."""

    num_inputs: int
    hidden: int
    activation: str
    num_buckets: int

    kind = "perspective"

    def __post_init__(self):
        acts.check(self.activation, "l0", "activation", "model.activation")
        acts.check_l0_width(self.activation, self.hidden)

    @property
    def l1_inputs(self) -> int:
        return acts.l1_inputs(self.activation, self.hidden)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_config(cls, num_inputs: int, hidden: int, activation: str, num_buckets: int, deep: dict,
                    product_scale: float, scale: float = 400.0) -> "Arch":
        """The arch of a ``model`` config (deep: the ``model.deep`` group, unused here)."""
        return cls(num_inputs, hidden, activation, num_buckets)

    def header_args(self) -> dict:
        """Keyword arguments of the kind's arch builder (:mod:`nnue.trainer.kinds`) besides the
        feature set and output buckets."""
        return {"hidden": self.hidden, "activation": self.activation}


class FeatureTransformer(nn.Module):
    def __init__(self, num_inputs: int, hidden: int, max_active: int = 32):
        super().__init__()
        bound = 1.0 / math.sqrt(max_active)
        self.weight = nn.Parameter(torch.empty(num_inputs, hidden).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(hidden).uniform_(-bound, bound))


def factor_map(feature_set: str, num_inputs: int) -> torch.Tensor:
    """The factoriser's virtual feature of every real feature: (num_inputs,) int64, from the
    feature set's spec (its ``factors``, :func:`nnue.pipeline.features.factor_map`: chess768
    ``i // 64``, kb768 ``i % 768``, halfkp ``i % 641``, halfkav2_hm ``i % 704``). Raises
    ValueError for a feature set with no factoriser."""
    return features.factor_map(feature_set, num_inputs)


def fake_quant(t: torch.Tensor, scale: float, mode: str = "round") -> torch.Tensor:
    """Quantisation-aware training: ``t`` on the grid of 1/scale in the forward pass, identity
    in the backward (straight-through estimator, Bengio et al. 2013).

    mode "round": ``round(t·scale)/scale`` (weights, biases, and hidden pre-activations whose
    integer bias carries the rounding half); "floor": ``floor(t·scale + 1e-3)/scale``, the
    integer net's right shifts of products (the 1e-3 absorbs float error: the true fractions
    are multiples of 1/256)."""
    q = t * scale
    q = torch.round(q) if mode == "round" else torch.floor(q + 1e-3)
    return t + (q / scale - t).detach()


class PerspectiveNet(nn.Module):
    """factors: optional (num_inputs,) int64 map of each feature to a virtual feature
    (:func:`factor_map`). The virtual weights ``ft.factor`` (V, H) are added to the real rows
    of their group in every forward pass and folded into ``ft.weight`` at export
    (:meth:`folded_ft_weight`): the exported net has the plain layout.

    ``qat``: a :class:`~nnue.spec.quant.QuantScheme` to train quantisation-aware
    (:meth:`enable_qat`): every weight and bias goes through :func:`fake_quant` on the grid
    export rounds it to, so the loss sees the integer net's weights; None (default) trains in
    plain float."""

    qat = None

    def enable_qat(self, scheme) -> None:
        """Train on fake-quantised weights (and, in deep nets, activations) of ``scheme``."""
        self.qat = scheme

    def _ft_params(self) -> tuple[torch.Tensor, torch.Tensor]:
        w, b = self.folded_ft_weight(), self.ft.bias
        if self.qat is not None:
            w, b = fake_quant(w, self.qat.qa), fake_quant(b, self.qat.qa)
        return w, b

    def _dense(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        """A dense layer (weights at QB, bias at QA·QB under QAT)."""
        w, b = layer.weight, layer.bias
        if self.qat is not None:
            w, b = fake_quant(w, self.qat.qb), fake_quant(b, self.qat.qa * self.qat.qb)
        return torch.nn.functional.linear(x, w, b)

    def __init__(self, arch: Arch, backend: str = "auto", factors: torch.Tensor | None = None):
        super().__init__()
        self.arch, self.backend = arch, backend
        self.ft = FeatureTransformer(arch.num_inputs, arch.hidden)
        self._make_layers(arch)
        if factors is not None:
            if factors.shape != (arch.num_inputs,):
                raise ValueError(f"factor map must be ({arch.num_inputs},), got {tuple(factors.shape)}")
            self.register_buffer("factor_map", factors.long(), persistent=False)
            self.ft.factor = nn.Parameter(torch.zeros(int(factors.max()) + 1, arch.hidden))
        else:
            self.factor_map = None

    def _make_layers(self, arch: Arch) -> None:
        """The layers after the feature transformer: one output per bucket."""
        self.l1 = nn.Linear(arch.l1_inputs, arch.num_buckets)

    def folded_ft_weight(self) -> torch.Tensor:
        """The feature-transformer weights the net really uses: (F, H), virtual rows folded in."""
        if self.factor_map is None:
            return self.ft.weight
        return self.ft.weight + self.ft.factor[self.factor_map]

    #: the feature transformer's weight gradient as a sparse COO tensor of the touched rows (set by
    #: the trainer with optimizer.sparse_ft=true; only the numba backend makes it sparse)
    sparse_grad = False

    @staticmethod
    def compiled_ft(activation: str, qat: bool) -> bool:
        """Whether the numba backend's compiled feature transformer computes this net's L0 with
        ``activation`` (under QAT or not): what ``model.backend=auto`` on the CPU asks
        (:mod:`nnue.trainer.fast_path`)."""
        from nnue.kernels.sparse_ft_numba import ACTIVATIONS

        return activation in ACTIVATIONS

    def _ft(self, stm: torch.Tensor, nstm: torch.Tensor, activation: str | None = None) -> torch.Tensor:
        """Both perspectives through the feature transformer and ``activation`` (default the
        arch's L0 activation; "none": the raw accumulators), (B, 2·H'), stm half first.

        On the numba backend (:mod:`nnue.kernels.sparse_ft_numba`) ``ft.weight``, ``ft.factor``
        and the factor map go to the kernel as they are: the folded (F, H) matrix is never built,
        and with ``sparse_grad`` the weight's gradient holds only the touched rows. Other
        backends: :func:`nnue.kernels.sparse_ft_pair` on the folded (and, under QAT,
        fake-quantised) weight."""
        act = activation or self.arch.activation
        if kernels.resolve_backend(self.backend, self.ft.weight.device) == "numba":
            from nnue.kernels import sparse_ft_numba

            b, qa = self.ft.bias, None
            if self.qat is not None:
                b, qa = fake_quant(b, self.qat.qa), self.qat.qa
            fac = self.ft.factor if self.factor_map is not None else None
            return sparse_ft_numba.sparse_ft_pair(self.ft.weight, b, stm, nstm, act, fac, self.factor_map,
                                                  self.sparse_grad, qa)
        w, b = self._ft_params()
        return sparse_ft_pair(w, b, stm, nstm, act, self.backend)

    def forward(self, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        """stm, nstm: (B, A) int32 −1-padded; bucket: (B,) int64 -> (B,) float eval / SCALE."""
        return self.forward_with_activations(stm, nstm, bucket)[0]

    def forward_with_activations(self, stm: torch.Tensor, nstm: torch.Tensor,
                                 bucket: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(eval / SCALE (B,), the L0 activations (B, L1) in [0, 1], stm half first): the
        activations for the L1 activation penalty and the sparsity metrics."""
        h = self._ft(stm, nstm)
        return self._dense(self.l1, h).gather(1, bucket.view(-1, 1)).squeeze(1), h

    @torch.no_grad()
    def clip_weights(self, ft_limit: float, l1_limit: float, ft_weight: bool = True) -> None:
        """Clamp weights in place so that they stay quantisable (limits from the QuantScheme):
        with a factoriser it is the folded weight that must stay within ``ft_limit``.
        ft_weight=False leaves ``ft.weight`` alone (a dense pass over (F, H)): the row-sparse
        optimiser clamps the rows it updates (:class:`nnue.trainer.sparse_optim.RowSparseAdamW`)."""
        if self.factor_map is None:
            if ft_weight:
                self.ft.weight.clamp_(-ft_limit, ft_limit)
        else:
            self.ft.factor.clamp_(-ft_limit, ft_limit)
            if ft_weight:
                f = self.ft.factor[self.factor_map]
                torch.clamp(self.ft.weight, -ft_limit - f, ft_limit - f, out=self.ft.weight)
        self.ft.bias.clamp_(-ft_limit, ft_limit)
        self.l1.weight.clamp_(-l1_limit, l1_limit)


HIDDEN_ACTIVATIONS = acts.allowed("l1")


@dataclass(frozen=True)
class DeepArch(Arch):
    """Architecture of a deep net (Stockfish-style layer stacks): the perspective feature
    transformer (num_inputs F, hidden H per perspective, L0 activation), then per output bucket
    L1 (l1_inputs → l1_outputs N1), L2 (N1 → l2_outputs N2, or 2·N2 rows for a gated unit) and
    out (N2 → 1), with ``hidden_activation`` after L1 and ``l2_activation`` after L2 (default:
    hidden_activation; :mod:`nnue.spec.activations` says which are allowed where).
    ``product_scale`` multiplies every product of two activation-scale values (QA / 2^l0_shift
    = 255/256), matching the integer net's shifts (:mod:`nnue.inference.deep`)."""

    l1_outputs: int = 16
    l2_outputs: int = 32
    hidden_activation: str = "crelu"
    product_scale: float = 255 / 256
    l2_activation: str | None = None

    kind = "deep"

    def __post_init__(self):
        super().__post_init__()  # the L0 checks
        acts.check(self.hidden_activation, "l1", "hidden activation", "model.deep.hidden_activation")
        acts.check(self.l2_act, "l2", "L2 activation", "model.deep.l2_activation")
        if min(self.l1_outputs, self.l2_outputs) < 1:
            raise ValueError("l1_outputs and l2_outputs must be positive")

    @property
    def l2_act(self) -> str:
        return self.l2_activation or self.hidden_activation

    @property
    def l2_rows(self) -> int:
        """L2's outputs per bucket: N2, or 2·N2 for a gated unit (gate rows, then linear rows)."""
        return self.l2_outputs * (2 if acts.get(self.l2_act).gated else 1)

    @classmethod
    def from_config(cls, num_inputs, hidden, activation, num_buckets, deep, product_scale, scale=400.0) -> "DeepArch":
        return cls(num_inputs, hidden, activation, num_buckets, product_scale=product_scale, **dict(deep))

    def header_args(self) -> dict:
        return super().header_args() | {"l1_outputs": self.l1_outputs, "l2_outputs": self.l2_outputs,
                                        "hidden_activation": self.hidden_activation,
                                        "l2_activation": self.l2_act}


class DeepNet(PerspectiveNet):
    """Feature transformer → L0 activation → per output bucket: L1 → act → L2 → act → out.

    Each bucketed layer is one ``nn.Linear`` holding every bucket's rows (``l1.weight``
    (B·N1, L1), ``l2.weight`` (B·N2, N1), ``out.weight`` (B, N2)); a position uses the rows of
    its bucket (nnue-pytorch's LayerStacks). Activations live in [0, 1]; squared and pairwise
    products are multiplied by ``arch.product_scale`` so that the float net computes what the
    integer net computes (:mod:`nnue.inference.deep`). Forward: (B,) float eval / SCALE.
    """

    def _make_layers(self, arch: DeepArch) -> None:
        B, N1, N2 = arch.num_buckets, arch.l1_outputs, arch.l2_outputs
        self.l1 = nn.Linear(arch.l1_inputs, B * N1)
        self.l2 = nn.Linear(N1, B * arch.l2_rows)
        self.out = nn.Linear(N2, B)

    def _hidden_act(self, y: torch.Tensor, name: str) -> torch.Tensor:
        """The float side of the integer hidden rule ``name`` (:func:`nnue.spec.activations.float_hidden`),
        elementwise ops through the kernels' dispatch (Triton on CUDA); under QAT the input on
        the grid of y = s >> 6 and the output on the grid of the integer rule's floor."""
        qa = None if self.qat is None else self.qat.qa
        if qa is not None:
            y = fake_quant(y, qa)  # y1 = s1 >> 6, the bias carrying the rounding half
        backend = self.backend

        def op(n, x):
            if n in ("crelu", "screlu"):
                return acts.get(n).float_ref(x)
            return kernels.activate(n, x.contiguous(), backend)
        a = acts.get(name)
        if a.gated:
            m = y.shape[-1] // 2
            g = op(a.gate, y[..., :m].clamp(-acts.CLAMP, acts.CLAMP))
            if qa is not None:
                g = fake_quant(g, qa, "floor")
            v = kernels.swiglu(y[..., :m].clamp(-acts.CLAMP, acts.CLAMP).contiguous(),
                               y[..., m:].clamp(-acts.CLAMP, acts.CLAMP).contiguous(), backend, a.gate) \
                if qa is None else g * y[..., m:].clamp(-acts.CLAMP, acts.CLAMP)
            v = v * self.arch.product_scale
        else:
            v = acts.float_hidden(name, y, self.arch.product_scale, op)
        return v if qa is None or acts.get(name).on_grid else fake_quant(v, qa, "floor")

    @staticmethod
    def _bucket_rows(y: torch.Tensor, bucket: torch.Tensor, width: int) -> torch.Tensor:
        """(N, B·width) outputs of every bucket -> (N, width) of each position's bucket."""
        n = y.shape[0]
        return y.view(n, -1, width).gather(1, bucket.view(n, 1, 1).expand(n, 1, width)).squeeze(1)

    def _stacks(self, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor):
        """(stm, nstm, perm, stack): on the CPU the positions in bucket order (perm, None if
        they already are; :mod:`nnue.kernels.layer_stacks`) and ``stack(layer, x, n)`` the
        bucketed layer on that order, each position through its own bucket's rows only; elsewhere
        the batch as it is and every bucket's rows, then a gather."""
        if not layer_stacks.use_for(self.ft.weight):
            return stm, nstm, None, lambda layer, x, n: self._bucket_rows(self._dense(layer, x), bucket, n)
        perm, offsets = layer_stacks.bucket_order(bucket, self.arch.num_buckets)
        if perm is not None:
            stm, nstm = stm.index_select(0, perm), nstm.index_select(0, perm)

        def stack(layer, x, n):
            w, b = layer.weight, layer.bias
            if self.qat is not None:
                w, b = fake_quant(w, self.qat.qb), fake_quant(b, self.qat.qa * self.qat.qb)
            return layer_stacks.stack_linear(x, w, b, offsets, n)
        return stm, nstm, perm, stack

    def forward_with_activations(self, stm: torch.Tensor, nstm: torch.Tensor,
                                 bucket: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """stm, nstm: (B, A) int32 −1-padded; bucket: (B,) int64 -> (eval / SCALE (B,), the L0
        activations x0 (B, L1): on the CPU with its rows in bucket order (:meth:`_stacks`), for
        order-free statistics)."""
        a = self.arch
        stm, nstm, perm, stack = self._stacks(stm, nstm, bucket)
        x0 = self._ft(stm, nstm)
        if acts.get(a.activation).product:
            x0 = x0 * a.product_scale
            if self.qat is not None:
                x0 = fake_quant(x0, self.qat.qa, "floor")  # (v·v) >> 8
        x1 = self._hidden_act(stack(self.l1, x0, a.l1_outputs), a.hidden_activation)
        x2 = self._hidden_act(stack(self.l2, x1, a.l2_rows), a.l2_act)
        return layer_stacks.unpermute(stack(self.out, x2, 1)[:, 0], perm), x0

    @torch.no_grad()
    def clip_weights(self, ft_limit: float, l1_limit: float, ft_weight: bool = True) -> None:
        """As :meth:`PerspectiveNet.clip_weights`, and every dense layer's weights within
        ``l1_limit`` (int8 at QB: 127/64)."""
        super().clip_weights(ft_limit, l1_limit, ft_weight)
        self.l2.weight.clamp_(-l1_limit, l1_limit)
        self.out.weight.clamp_(-l1_limit, l1_limit)


@dataclass(frozen=True)
class TinyArch(Arch):
    """Architecture of a tiny net (the seed's 5 MiB residual MLP): the perspective feature
    transformer on a compact input (num_inputs F, e.g. chess768; hidden H per perspective, L0
    activation), then per output bucket one hidden layer L1 (l1_inputs → l1_outputs N1,
    ``hidden_activation``) and out (N1 → 1): e.g. 2·16 = 32 → 32 → 1 with CReLU. Integer rule:
    :mod:`nnue.inference.tiny` (int16 L0, int8/int32 dense layers, as the deep nets' first and
    last layers). ``product_scale``: as :class:`DeepArch`."""

    l1_outputs: int = 32
    hidden_activation: str = "crelu"
    product_scale: float = 255 / 256

    kind = "tiny"

    def __post_init__(self):
        super().__post_init__()
        acts.check(self.hidden_activation, "l1", "hidden activation", "model.tiny.hidden_activation")
        if self.l1_outputs < 1:
            raise ValueError("model.tiny.l1_outputs must be positive")

    @classmethod
    def from_config(cls, num_inputs, hidden, activation, num_buckets, deep, product_scale, scale=400.0) -> "TinyArch":
        """``deep``: the ``model.tiny`` group here ({"l1_outputs", "hidden_activation"})."""
        return cls(num_inputs, hidden, activation, num_buckets, product_scale=product_scale, **dict(deep))

    def header_args(self) -> dict:
        return super().header_args() | {"l1_outputs": self.l1_outputs, "hidden_activation": self.hidden_activation}


class TinyNet(DeepNet):
    """Feature transformer → L0 activation → per output bucket: L1 → hidden activation → out
    (:class:`TinyArch`). ``l1.weight`` (B·N1, L1), ``out.weight`` (B, N1); QAT as
    :class:`DeepNet`. Forward: (B,) float eval / SCALE."""

    def _make_layers(self, arch: TinyArch) -> None:
        B, N1 = arch.num_buckets, arch.l1_outputs
        self.l1 = nn.Linear(arch.l1_inputs, B * N1)
        self.out = nn.Linear(N1, B)

    def forward_with_activations(self, stm, nstm, bucket):
        a = self.arch
        stm, nstm, perm, stack = self._stacks(stm, nstm, bucket)
        x0 = self._ft(stm, nstm)
        if acts.get(a.activation).product:
            x0 = x0 * a.product_scale
            if self.qat is not None:
                x0 = fake_quant(x0, self.qat.qa, "floor")
        x1 = self._hidden_act(stack(self.l1, x0, a.l1_outputs), a.hidden_activation)
        return layer_stacks.unpermute(stack(self.out, x1, 1)[:, 0], perm), x0

    @torch.no_grad()
    def clip_weights(self, ft_limit: float, l1_limit: float, ft_weight: bool = True) -> None:
        PerspectiveNet.clip_weights(self, ft_limit, l1_limit, ft_weight)
        self.out.weight.clamp_(-l1_limit, l1_limit)
