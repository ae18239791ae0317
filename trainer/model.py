"""The float building blocks every kind's model is made of: the feature transformer (:class:`FTNet`,
with its factoriser, quantisation-aware training and kernel backends), the layer-stack helpers
(:class:`StackNet`), the factoriser map and fake quantisation.

Each kind's own float model and arch live in its module under :mod:`nnue.trainer.kinds`
(``PerspectiveNet``, ``DeepNet``, ``TinyNet``, ``SFNNv5Net``), built on these. The feature
transformer's state-dict layout is the same for every backend: ``ft.weight (F, H)``,
``ft.bias (H,)`` (and ``ft.factor (V, H)`` with the factoriser).
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


@dataclass(frozen=True)
class FTArch:
    """What every kind built on this feature transformer shares in its architecture: num_inputs:
    feature count F; hidden: H per perspective; activation: the L0 activation (crelu | screlu |
    pairwise_crelu: :func:`nnue.spec.activations.allowed` "l0"); num_buckets: output buckets.
    Each kind's arch subclasses it (and names its ``kind``)."""

    num_inputs: int
    hidden: int
    activation: str
    num_buckets: int

    def __post_init__(self):
        acts.check(self.activation, "l0", "activation", "model.activation")
        acts.check_l0_width(self.activation, self.hidden)

    @property
    def l1_inputs(self) -> int:
        return acts.l1_inputs(self.activation, self.hidden)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_config(cls, num_inputs: int, hidden: int, activation: str, num_buckets: int, layers: dict,
                    product_scale: float, scale: float = 400.0) -> "FTArch":
        """The arch of a ``model`` config (layers: the kind's own ``model.`` group, unused here)."""
        return cls(num_inputs, hidden, activation, num_buckets)

    def header_args(self) -> dict:
        """Keyword arguments of the kind's arch builder (the inference kind's ``arch_builder``)
        besides the feature set and output buckets."""
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


class FTNet(nn.Module):
    """The feature transformer of a kind's float model, and what every such model shares: the
    factoriser, quantisation-aware training, the kernels' backends and the dense-layer helper.
    A kind's model subclasses it and adds its layers after the feature transformer
    (:meth:`_make_layers`), its forward and its :meth:`clip_weights`.

    factors: optional (num_inputs,) int64 map of each feature to a virtual feature
    (:func:`factor_map`). The virtual weights ``ft.factor`` (V, H) are added to the real rows
    of their group in every forward pass and folded into ``ft.weight`` at export
    (:meth:`folded_ft_weight`): the exported net has the plain layout.

    ``qat``: a :class:`~nnue.spec.quant.QuantScheme` to train quantisation-aware
    (:meth:`enable_qat`): every weight and bias goes through :func:`fake_quant` on the grid
    export rounds it to, so the loss sees the integer net's weights; None (default) trains in
    plain float."""

    qat = None
    #: the state-dict keys (prefixes) of the model's factorisers: a warm start from a file without
    #: them starts them at zero (:func:`nnue.trainer.registry.load_weights`)
    FACTORISERS = ("ft.factor",)

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

    def __init__(self, arch: FTArch, backend: str = "auto", factors: torch.Tensor | None = None):
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

    def _make_layers(self, arch: FTArch) -> None:
        """The layers after the feature transformer (the kind's; built after ``ft`` and before the
        factoriser, so that a seed gives every kind's weights in one order)."""
        raise NotImplementedError

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
        ``activation`` (under QAT or not): the kind record's ``compiled_ft`` of the kinds built on
        it (:mod:`nnue.trainer.fast_path`)."""
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

    @torch.no_grad()
    def clip_ft(self, ft_limit: float, ft_weight: bool = True) -> None:
        """Clamp the feature transformer in place so that it stays quantisable (the limit from the
        QuantScheme): with a factoriser it is the folded weight that must stay within
        ``ft_limit``. ft_weight=False leaves ``ft.weight`` alone (a dense pass over (F, H)): the
        row-sparse optimiser clamps the rows it updates
        (:class:`nnue.trainer.sparse_optim.RowSparseAdamW`)."""
        if self.factor_map is None:
            if ft_weight:
                self.ft.weight.clamp_(-ft_limit, ft_limit)
        else:
            self.ft.factor.clamp_(-ft_limit, ft_limit)
            if ft_weight:
                f = self.ft.factor[self.factor_map]
                torch.clamp(self.ft.weight, -ft_limit - f, ft_limit - f, out=self.ft.weight)
        self.ft.bias.clamp_(-ft_limit, ft_limit)


class StackNet(FTNet):
    """An :class:`FTNet` whose layers after the feature transformer are layer stacks: one set of
    rows per output bucket in each ``nn.Linear`` (nnue-pytorch's LayerStacks), with the hidden
    activations of :mod:`nnue.spec.activations` between them (the deep and tiny kinds). Its
    arch has ``product_scale`` (QA / 2^l0_shift, the factor every product of two activations
    carries so that the float net computes what the integer net does)."""

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

    def _l0(self, stm: torch.Tensor, nstm: torch.Tensor) -> torch.Tensor:
        """x0, the L0 activations of both perspectives (B, L1), stm half first: a product
        activation's values times ``product_scale`` (under QAT on the grid of the integer
        net's ``(v·v) >> 8``)."""
        a = self.arch
        x0 = self._ft(stm, nstm)
        if acts.get(a.activation).product:
            x0 = x0 * a.product_scale
            if self.qat is not None:
                x0 = fake_quant(x0, self.qat.qa, "floor")  # (v·v) >> 8
        return x0
