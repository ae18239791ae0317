"""Test helpers: float perspective nets with chosen weights, written as weights checkpoints."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from nnue.inference.kinds.perspective import IntegerNet, make_arch
from nnue.spec.quant import QuantScheme
from nnue.pipeline.features import get_feature_set
from nnue.trainer.kinds.deep import DeepArch, DeepNet
from nnue.trainer.kinds.perspective import Arch, PerspectiveNet


def make_model(activation: str, hidden: int = 32, buckets: int = 8, seed: int = 0,
               ft_scale: float = 0.3, l1_scale: float = 1.0) -> PerspectiveNet:
    """A random perspective net whose evals spread over both signs (chess768 inputs)."""
    torch.manual_seed(seed)
    m = PerspectiveNet(Arch(768, hidden, activation, buckets), backend="torch")
    with torch.no_grad():
        m.ft.weight.uniform_(-ft_scale, ft_scale)
        m.ft.bias.uniform_(0.0, 0.6)
        m.l1.weight.uniform_(-l1_scale, l1_scale)
        m.l1.bias.uniform_(-0.2, 0.2)
    return m.eval()


def write_weights(model: PerspectiveNet, path: Path, data_path=None, val_fraction: float = 0.2,
                  features: str = "chess768", output_buckets: str | None = None) -> Path:
    """Write ``model`` (a PerspectiveNet or DeepNet) as a weights checkpoint (the trainer's
    WeightsCheckpoint layout)."""
    a = model.arch
    hp = {"hidden": a.hidden, "activation": a.activation, "features": features,
          "output_buckets": output_buckets or f"MaterialCount<{a.num_buckets}>", "quant": None, "loss": None}
    if isinstance(model, DeepNet):
        hp |= {"kind": "deep", "deep": {"l1_outputs": a.l1_outputs, "l2_outputs": a.l2_outputs,
                                        "hidden_activation": a.hidden_activation, "l2_activation": a.l2_act}}
    meta = {"hparams": json.dumps(hp)}
    if data_path is not None:
        meta["data"] = json.dumps({"path": str(data_path), "val_fraction": val_fraction})
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path), meta)
    return path


def make_deep_model(activation: str = "pairwise_crelu", hidden: int = 32, buckets: int = 8, l1_outputs: int = 16,
                    l2_outputs: int = 32, hidden_activation: str = "crelu", seed: int = 0, num_inputs: int = 768,
                    ft_scale: float = 0.3, dense_scale: float = 0.5, l2_activation: str | None = None,
                    bias_scale: float = 1.0) -> DeepNet:
    """A random float deep net whose hidden activations land in every regime (below 0, inside
    [0, 1], clipped) and whose evals spread over both signs. l2_activation: after L2 (default
    hidden_activation); bias_scale widens the L1/L2 biases (pre-activations beyond ±3)."""
    torch.manual_seed(seed)
    m = DeepNet(DeepArch(num_inputs, hidden, activation, buckets, l1_outputs, l2_outputs, hidden_activation,
                         l2_activation=l2_activation), backend="torch")
    with torch.no_grad():
        m.ft.weight.uniform_(-ft_scale, ft_scale)
        m.ft.bias.uniform_(0.0, 0.6)
        for layer in (m.l1, m.l2, m.out):
            layer.weight.uniform_(-dense_scale, dense_scale)
        m.l1.bias.uniform_(-0.3 * bias_scale, 0.5 * bias_scale)
        m.l2.bias.uniform_(-0.3 * bias_scale, 0.5 * bias_scale)
        m.out.bias.uniform_(-0.5, 0.5)
    return m.eval()


def make_int_net(fs_name: str, act: str = "screlu", hidden: int = 64, buckets: int = 8, seed: int = 0,
                 dead: float = 0.0, bias: tuple[int, int] = (-100, 250)) -> IntegerNet:
    """A random integer net with an exported net's magnitudes: FT weights in ±150 (±0.6 at QA),
    biases in ``bias``, L1 weights in ±128 (the screlu audit's limit), bucket biases ±3000. Every
    accumulator fits int16 (250 + 32·150) and every L1 sum int32 (128 · 65025 · 128).
    dead: the fraction of neurons (chosen at random) given a bias of −8000, so they never fire."""
    fs = get_feature_set(fs_name)
    arch = make_arch(fs_name, hidden, act, f"MaterialCount<{buckets}>")
    g = torch.Generator().manual_seed(seed)
    l0w = torch.randint(-150, 151, (fs.num_inputs, hidden), generator=g).to(torch.int16)
    l0b = torch.randint(bias[0], bias[1] + 1, (hidden,), generator=g).to(torch.int16)
    l0b[torch.randperm(hidden, generator=g)[: int(dead * hidden)]] = -8000
    l1w = torch.randint(-128, 129, (buckets, arch["l1_inputs"]), generator=g).to(torch.int16)
    l1b = torch.randint(-3000, 3001, (buckets,), generator=g).to(torch.int16)
    return IntegerNet(arch, QuantScheme(), l0w, l0b, l1w, l1b)


def make_int_net_spec(fs_name: str, act: str = "screlu", hidden: int = 64, output_buckets: str = "MaterialCount<8>",
                      seed: int = 0, ft: int = 150, bias: tuple[int, int] = (-100, 250), l1: int = 128,
                      l1b: int = 3000) -> IntegerNet:
    """Like :func:`make_int_net`, for any output-bucket spec ("SFPieceCount<8>", …) and chosen
    magnitudes: FT weights uniform in ±ft, FT biases in ``bias``, L1 weights in ±l1, L1 biases in
    ±l1b (all inclusive)."""
    fs = get_feature_set(fs_name)
    arch = make_arch(fs_name, hidden, act, output_buckets)
    nb = arch["num_buckets"]
    g = torch.Generator().manual_seed(seed)
    l0w = torch.randint(-ft, ft + 1, (fs.num_inputs, hidden), generator=g).to(torch.int16)
    l0b = torch.randint(bias[0], bias[1] + 1, (hidden,), generator=g).to(torch.int16)
    l1w = torch.randint(-l1, l1 + 1, (nb, arch["l1_inputs"]), generator=g).to(torch.int16)
    l1b_t = torch.randint(-l1b, l1b + 1, (nb,), generator=g).to(torch.int16)
    return IntegerNet(arch, QuantScheme(), l0w, l0b, l1w, l1b_t)


INT16_LIMIT = 32767


def l1_weight_limit(act: str, qa: int = 255) -> int:
    """The export audit's L1 weight limit: int16 for crelu, 32767 // QA (= 128) when the
    activation squares (screlu, pairwise_crelu)."""
    return INT16_LIMIT if act == "crelu" else INT16_LIMIT // qa


def make_adversarial_int_net(fs_name: str, act: str, hidden: int, output_buckets: str = "MaterialCount<8>",
                             seed: int = 0) -> IntegerNet:
    """A perspective net with every weight class at the export audit's limits.

    With k = the feature set's max_active and w = 32767 // k, neuron j is, by j mod 6:

    0. saturating up: every l0w row +w, l0b = 32767 − k·w, so |l0b| + the k largest |l0w| is
       exactly 32767 and a position with k active features (32 pieces; 30 for halfkp) drives
       the accumulator to exactly +32767;
    1. the mirror image, down to exactly −32767;
    2. bias only: l0b = ±32767 (alternating), no weights;
    3. random weights in ±w, l0b = ±(32767 − the k largest |l0w|) (exactly at the limit);
    4. pawns at the limit: own-pawn rows +w, their-pawn rows −w (chess768-style colour halves of
       every king bucket), other rows in ±20, l0b = 32767 − k·w: lands in [0, QA] when the pawn
       counts balance;
    5. small: rows in ±40, l0b in [−200, 400] (the linear range).

    L1 weights are all ±limit (:func:`l1_weight_limit`); for neurons of a constant activation
    (groups 0-2) the signs alternate so that their contribution cancels and the evals take both
    signs; L1 biases are ±32767. H·2·QA²·128 (screlu), H·QA²·128 (pairwise) or
    H·2·QA·32767 (crelu) must fit int32 for the net to pass the audit: H ≤ 128 (256 pairwise).
    """
    fs = get_feature_set(fs_name)
    arch = make_arch(fs_name, hidden, act, output_buckets)
    nb, n_in, k = arch["num_buckets"], fs.num_inputs, fs.max_active
    w = INT16_LIMIT // k
    g = torch.Generator().manual_seed(seed)
    l0w = torch.zeros((n_in, hidden), dtype=torch.int32)
    l0b = torch.zeros(hidden, dtype=torch.int32)
    # which rows are own / their pawns: for chess768-style blocks of 768 (chess768, kb768) the
    # pawn planes are 0..63 (own) and 384..447 (theirs); halfkp: planes 0 (own) and 1 (theirs) of
    # 641-row king blocks, offset 1; halfkav2_hm: planes 0 and 1 of 704-row king blocks.
    rows = torch.arange(n_in)
    if fs_name == "halfkp":
        plane = torch.where(rows % 641 == 0, -1, (rows % 641 - 1) // 64)
        own, their = plane == 0, plane == 1
    elif fs_name == "halfkav2_hm":
        plane = (rows % 704) // 64
        own, their = plane == 0, plane == 1
    else:
        r = rows % 768
        own, their = r < 64, (r >= 384) & (r < 448)
    bias_sign = 1
    for j in range(hidden):
        grp = j % 6
        if grp == 0:
            l0w[:, j] = w
            l0b[j] = INT16_LIMIT - k * w
        elif grp == 1:
            l0w[:, j] = -w
            l0b[j] = -(INT16_LIMIT - k * w)
        elif grp == 2:
            l0b[j] = INT16_LIMIT * bias_sign
            bias_sign = -bias_sign
        elif grp == 3:
            col = torch.randint(-w, w + 1, (n_in,), generator=g, dtype=torch.int32)
            l0w[:, j] = col
            sign = 1 if torch.randint(0, 2, (1,), generator=g).item() else -1
            l0b[j] = sign * (INT16_LIMIT - int(col.abs().topk(k).values.sum()))
        elif grp == 4:
            col = torch.randint(-20, 21, (n_in,), generator=g, dtype=torch.int32)
            col[own] = w
            col[their] = -w
            l0w[:, j] = col
            l0b[j] = INT16_LIMIT - int(col.abs().topk(k).values.sum())
        else:
            l0w[:, j] = torch.randint(-40, 41, (n_in,), generator=g, dtype=torch.int32)
            l0b[j] = int(torch.randint(-200, 401, (1,), generator=g))
    lim = l1_weight_limit(act)
    l1 = arch["l1_inputs"]
    half = l1 // 2
    signs = torch.randint(0, 2, (nb, l1), generator=g) * 2 - 1
    # L1 inputs whose activation is the same (QA or QA²) on every position with a few pieces:
    # their signs alternate, so that their contributions cancel (per half)
    up = torch.tensor([j % 6 == 0 or (j % 6 == 2 and int(l0b[j]) > 0) for j in range(hidden)])
    const = up[: hidden // 2] & up[hidden // 2:] if act == "pairwise_crelu" else up
    idx = const.nonzero().flatten()
    alt = torch.tensor([1 if i % 2 == 0 else -1 for i in range(len(idx))])
    for side in range(2):
        signs[:, side * half + idx] = alt
    l1w = (signs * lim).to(torch.int16)
    l1b = ((torch.randint(0, 2, (nb,), generator=g) * 2 - 1) * INT16_LIMIT).to(torch.int16)
    return IntegerNet(arch, QuantScheme(), l0w.to(torch.int16), l0b.to(torch.int16), l1w, l1b)


def make_deep_int_net(fs_name: str, act: str = "screlu", hidden: int = 32, output_buckets: str = "MaterialCount<8>",
                      l1_outputs: int = 16, l2_outputs: int = 32, hidden_activation: str = "crelu", seed: int = 0,
                      ft: int = 150, bias: tuple[int, int] = (-100, 250), spread: float = 1.5,
                      l2_activation: str | None = None, center: int = 128):
    """A random deep integer net (:class:`~nnue.inference.kinds.deep.DeepIntegerNet`) whose hidden
    pre-activations y = s >> 6 of L1 and L2 land in every regime: below 0, inside [0, 255] and
    clipped above 255.

    FT weights in ±ft, FT biases in ``bias`` (as :func:`make_int_net`). Each dense layer's int8
    weights are uniform in ±R, R chosen from the fan-in K so that the sum's spread is about
    ``spread`` · 64 · 255 (R = spread · 64 · 255 / (√K · 0.58 · 128), at most 127); its int32
    biases uniform in ±64 · 255 · spread/2 (plus 64·128, the middle of the range). Output
    weights in ±127, output biases in ±64·255.
    """
    import math

    from nnue.inference.kinds.deep import DeepIntegerNet, make_deep_arch

    arch = make_deep_arch(fs_name, hidden, act, output_buckets, l1_outputs, l2_outputs, hidden_activation,
                          l2_activation)
    F, B, L1 = arch["num_inputs"], arch["num_buckets"], arch["l1_inputs"]
    R2 = DeepIntegerNet.tensor_specs(arch)["l2w"][1][1]  # 2·N2 rows for a gated unit
    g = torch.Generator().manual_seed(seed)

    def dense(m: int, k: int):
        r = max(1, min(127, round(spread * 64 * 255 / (math.sqrt(k) * 0.58 * 128))))
        w = torch.randint(-r, r + 1, (B, m, k), generator=g).to(torch.int8)
        half = int(64 * 255 * spread / 2)
        b = (torch.randint(-half, half + 1, (B, m), generator=g) + 64 * center).to(torch.int32)
        return w, b

    l0w = torch.randint(-ft, ft + 1, (F, hidden), generator=g).to(torch.int16)
    l0b = torch.randint(bias[0], bias[1] + 1, (hidden,), generator=g).to(torch.int16)
    l1w, l1b = dense(l1_outputs, L1)
    l2w, l2b = dense(R2, l1_outputs)
    outw = torch.randint(-127, 128, (B, l2_outputs), generator=g).to(torch.int8)
    outb = torch.randint(-64 * 255, 64 * 255 + 1, (B,), generator=g).to(torch.int32)
    return DeepIntegerNet(arch, QuantScheme(), l0w, l0b, l1w, l1b, l2w, l2b, outw, outb)


INT32_LIMIT = (1 << 31) - 1


def make_adversarial_deep_int_net(fs_name: str, act: str = "screlu", hidden: int = 48,
                                  output_buckets: str = "MaterialCount<8>", l1_outputs: int = 16,
                                  l2_outputs: int = 32, hidden_activation: str = "crelu", seed: int = 0):
    """A deep integer net at the limits of its integer types.

    L0: :func:`make_adversarial_int_net`'s feature transformer (every neuron's worst-case
    accumulator exactly 32767; real 32-piece positions reach ±32767). Dense layers: half of the
    int8 weights at −128 or +127, the rest uniform in a range that keeps the sums spread over
    every activation regime (as :func:`make_deep_int_net`). Hidden biases by neuron n mod 3:
    0 — ±(2^31 − 1 − Σ_j |w[n][j]|·255), so the neuron's worst-case sum is exactly the int32
    limit; 1 — uniform in ±4·64·255 (large: usually clipped or dead); 2 — centred as in
    :func:`make_deep_int_net`. Output weights all −128 or +127; output biases uniform in
    ±N2·128·255 (evals of both signs)."""
    import math

    from nnue.inference.kinds.deep import DeepIntegerNet, make_deep_arch

    base = make_adversarial_int_net(fs_name, act, hidden, output_buckets, seed)
    arch = make_deep_arch(fs_name, hidden, act, output_buckets, l1_outputs, l2_outputs, hidden_activation)
    B, L1 = arch["num_buckets"], arch["l1_inputs"]
    g = torch.Generator().manual_seed(seed + 1)

    def extremes(*shape):
        return torch.where(torch.rand(shape, generator=g) < 0.5, -128, 127)

    def dense(m: int, k: int):
        r = max(1, min(127, round(1.5 * 64 * 255 / (math.sqrt(k) * 0.58 * 128))))
        w = torch.randint(-r, r + 1, (B, m, k), generator=g)
        w = torch.where(torch.rand((B, m, k), generator=g) < 0.5, extremes(B, m, k), w)
        worst = w.abs().sum(2) * 255
        sign = extremes(B, m).sign()
        b = torch.empty((B, m), dtype=torch.int64)
        for n in range(m):
            if n % 3 == 0:
                b[:, n] = sign[:, n] * (INT32_LIMIT - worst[:, n])
            elif n % 3 == 1:
                b[:, n] = torch.randint(-4 * 64 * 255, 4 * 64 * 255 + 1, (B,), generator=g)
            else:
                b[:, n] = torch.randint(-64 * 255 * 3 // 4, 64 * 255 * 3 // 4 + 1, (B,), generator=g) + 64 * 128
        return w.to(torch.int8), b.to(torch.int32)

    l1w, l1b = dense(l1_outputs, L1)
    l2w, l2b = dense(l2_outputs, l1_outputs)
    outw = extremes(B, l2_outputs).to(torch.int8)
    lim = l2_outputs * 128 * 255
    outb = torch.randint(-lim, lim + 1, (B,), generator=g).to(torch.int32)
    return DeepIntegerNet(arch, QuantScheme(), base.l0w, base.l0b, l1w, l1b, l2w, l2b, outw, outb)
