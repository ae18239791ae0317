"""``nnue analyze NET --dataset DS -o DIR``, the work: what an integer net does on a dataset, as PNGs and JSON
(the parser is :mod:`nnue.commands.analyze`).

Written into DIR (each file atomically):

* ``eval_histogram.png``: the net's eval (cp, stm POV) per output bucket (layer stack);
* ``eval_vs_score.png``: eval scale against the search score, the mean net eval in bins of the
  dataset's score (50 cp wide, |score| ≤ 2,000), with the least-squares slope on |score| ≤ 1,000
  (1.0 = the net's centipawns are the score's centipawns);
* ``block_sparsity.png``: per position, the share of all-zero blocks of 4 among the L1 inputs
  (the L0 activations of both perspectives), what the block-sparse L1 path of inference skips;
* ``dead_neurons.png``: per L0 neuron, how often its activation is nonzero; a neuron that is zero
  on every position (both perspectives) of the sample is *dead*;
* ``analysis.json``: the numbers behind the four plots.

Evals come from :func:`nnue.inference.evaluate`. The L0 activations are recomputed from the
loaded net's public tensors (``l0w``, ``l0b``) and its feature set: accumulator
``l0b + Σ l0w[feature]`` per perspective (exact integers, summed in float64), clamped to
[0, QA]; an SCReLU or CReLU output is nonzero where that is, a pairwise-CReLU product where
both halves are. Positions: the dataset's quiet positions (the training filters), in file order,
up to ``--limit``.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import matplotlib
import numpy as np
import torch

matplotlib.use("Agg")  # PNG files only, no display; set before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402

from nnue.inference import load, residual  # noqa: E402
from nnue.pipeline.annotate import dataset_holds_base, evaluate_with_base, residual_base, residual_fields  # noqa: E402
from nnue.pipeline.atomic import atomic_write_bytes  # noqa: E402
from nnue.pipeline.stream import Filters, PackedStream  # noqa: E402
from nnue.trainer.metrics import spearman  # noqa: E402

SCORE_BIN = 50
SCORE_RANGE = 2000
SLOPE_RANGE = 1000


def _l0_nonzero(net, boards: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    """(N, 32) uint8 -> (N, L1 inputs) bool: which L0 outputs are nonzero, stm half first
    (in chunks: the gathered rows are chunk × features × H float64)."""
    if len(boards) > chunk:
        return torch.cat([_l0_nonzero(net, boards[s:s + chunk], chunk) for s in range(0, len(boards), chunk)])
    t = net.tensors()
    l0w, l0b = t["l0w"].double(), t["l0b"].double()
    stm, nstm = net.features.encode(boards)
    qa, act = net.scheme.qa, net.arch["activation"]
    halves = []
    for idx in (stm, nstm):
        idx = idx.long()
        valid = idx >= 0
        acc = l0b + (l0w[idx.clamp(min=0)] * valid.unsqueeze(-1)).sum(1)
        on = acc.clamp(0, qa) > 0
        if act == "pairwise_crelu":
            h = on.shape[1] // 2
            on = on[:, :h] & on[:, h:]
        halves.append(on)
    return torch.cat(halves, 1)


def _save_png(fig, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


def analyze(net_path: str | Path, dataset: str | Path, out_dir: str | Path, limit: int = 100_000,
            engine: str | None = None) -> dict:
    """Write the four PNGs and ``analysis.json`` into ``out_dir``; returns the JSON's content.

    A residual net's evals are its whole eval, base + alpha * net: a Stockfish base comes from the
    dataset's base_eval column when it holds that base, else from the engine (``engine``, see
    :func:`nnue.pipeline.annotate.residual_base`); positions without one (in check) are left out
    and counted (``positions_without_base``). Raises NetFormatError, ManifestError, EngineError,
    ValueError (no positions)."""
    net = load(net_path)
    ds = PackedStream([dataset], 8192, 0, "all", 0.0, Filters(), drop_last=False)
    r = residual.of(net)
    use_column = r is not None and r["base"] != "material" and dataset_holds_base([dataset], r["base"], ds.extra_columns)
    evals, scores, buckets, block_sparsity = [], [], [], []
    active = None
    n = no_base = 0
    for b in ds:
        boards, score = b["boards"][: limit - n], b["score"][: limit - n]
        column = b["base_eval"][: limit - n].double().numpy() if use_column else None
        ev, keep = evaluate_with_base(net, boards, residual_base(net, boards, column, engine, str(net_path)))
        no_base += int((~keep).sum())
        n += len(boards)
        boards, score = boards[keep], score[keep]
        evals.append(ev.numpy())
        scores.append(score.numpy())
        buckets.append(net.buckets.of(boards).numpy())
        on = _l0_nonzero(net, boards)
        k = on.shape[1] // 4 * 4
        if k:
            block_sparsity.append((~on[:, :k].reshape(len(on), -1, 4).any(-1)).double().mean(1).numpy())
        h = on.shape[1] // 2  # per neuron: nonzero in either perspective
        count = (on[:, :h].long() + on[:, h:].long()).sum(0)
        active = count if active is None else active + count
        if n >= limit:
            break
    n -= no_base  # the positions analyzed
    if n == 0:
        raise ValueError(f"{dataset}: no quiet positions to analyze" + (" that have a base" if no_base else ""))
    ev, sc, bk = np.concatenate(evals), np.concatenate(scores), np.concatenate(buckets)
    bs = np.concatenate(block_sparsity) if block_sparsity else np.zeros(0)
    freq = (active.double() / (2 * n)).numpy()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    # 1. eval histogram per output bucket
    edges = np.linspace(-SCORE_RANGE, SCORE_RANGE, 81)
    per_bucket = {}
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for k in range(net.buckets.count):
        e = ev[bk == k]
        if len(e):
            per_bucket[str(k)] = {"positions": int(len(e)), "mean_cp": float(e.mean()), "std_cp": float(e.std()),
                                  "histogram": np.histogram(np.clip(e, edges[0], edges[-1]), edges)[0].tolist()}
            ax.hist(np.clip(e, edges[0], edges[-1]), edges, histtype="step", label=f"bucket {k} ({len(e):,})")
    ax.set(xlabel="net eval (cp, side to move; clipped to ±2000)", ylabel="positions",
           title=f"eval per output bucket ({net.arch['output_buckets']})")
    ax.legend(fontsize=7)
    _save_png(fig, out / "eval_histogram.png")
    plt.close(fig)

    # 2. eval scale against the search score
    centres = np.arange(-SCORE_RANGE, SCORE_RANGE, SCORE_BIN) + SCORE_BIN / 2
    which = np.floor((sc + SCORE_RANGE) / SCORE_BIN).astype(np.int64)
    ok = (which >= 0) & (which < len(centres))
    cnt = np.bincount(which[ok], minlength=len(centres))
    mean = np.bincount(which[ok], weights=ev[ok], minlength=len(centres)) / np.maximum(cnt, 1)
    near = np.abs(sc) <= SLOPE_RANGE
    slope = float(np.polyfit(sc[near], ev[near], 1)[0]) if near.sum() > 1 else None
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.plot(centres[cnt > 0], mean[cnt > 0], ".-", label=f"net (slope {slope:.2f} on |score| ≤ {SLOPE_RANGE})"
            if slope is not None else "net")
    ax.plot([-SCORE_RANGE, SCORE_RANGE], [-SCORE_RANGE, SCORE_RANGE], "k:", lw=1, label="eval = score")
    ax.set(xlabel="search score (cp, side to move)", ylabel="mean net eval (cp)", title="eval scale vs score")
    ax.legend(fontsize=8)
    _save_png(fig, out / "eval_vs_score.png")
    plt.close(fig)

    # 3. L0 block sparsity
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.hist(bs, np.linspace(0, 1, 41))
    ax.set(xlabel="share of all-zero blocks of 4 in the L1 input", ylabel="positions",
           title=f"L0 block sparsity (mean {bs.mean():.2f})" if len(bs) else "L0 block sparsity")
    _save_png(fig, out / "block_sparsity.png")
    plt.close(fig)

    # 4. dead neurons
    dead = freq == 0
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.hist(freq, np.linspace(0, 1, 41))
    ax.set(xlabel="share of (position, perspective) pairs where the neuron is nonzero", ylabel="L0 neurons",
           title=f"L0 activity: {int(dead.sum())} of {len(freq)} neurons dead")
    _save_png(fig, out / "dead_neurons.png")
    plt.close(fig)

    result = {
        "net": str(net_path), "dataset": str(dataset), "positions": int(n), "architecture": net.arch,
        **residual_fields(r, use_column, no_base),
        "eval": {"mean_cp": float(ev.mean()), "std_cp": float(ev.std()), "spearman_with_score": spearman(ev, sc),
                 "histogram_edges_cp": edges.tolist(), "per_bucket": per_bucket},
        "eval_vs_score": {"bin_cp": SCORE_BIN, "bin_centres_cp": centres[cnt > 0].tolist(),
                          "mean_eval_cp": mean[cnt > 0].tolist(), "positions": cnt[cnt > 0].tolist(),
                          "slope": slope, "slope_range_cp": SLOPE_RANGE},
        "block_sparsity": {"block": 4, "mean": float(bs.mean()) if len(bs) else None,
                           "median": float(np.median(bs)) if len(bs) else None,
                           "histogram": np.histogram(bs, np.linspace(0, 1, 41))[0].tolist()},
        "dead_neurons": {"neurons": int(len(freq)), "dead": int(dead.sum()), "share": float(dead.mean()),
                         "active_share_per_neuron": freq.round(6).tolist()},
        "files": ["eval_histogram.png", "eval_vs_score.png", "block_sparsity.png", "dead_neurons.png",
                  "analysis.json"],
    }
    atomic_write_bytes(out / "analysis.json", (json.dumps(result, indent=1) + "\n").encode())
    return result


def run(args) -> int:
    """``nnue analyze``: write the plots and analysis.json (:func:`analyze`); prints a summary."""
    r = analyze(args.net, args.dataset, args.output, args.limit, engine=args.engine)
    if args.json:
        print(json.dumps({k: v for k, v in r.items() if k != "dead_neurons"} | {
            "dead_neurons": {k: v for k, v in r["dead_neurons"].items() if k != "active_share_per_neuron"}}))
        return 0
    bs, d = r["block_sparsity"], r["dead_neurons"]
    print(f"wrote {', '.join(r['files'])} to {args.output} ({r['positions']:,} quiet positions)")
    slope = r["eval_vs_score"]["slope"]
    print(f"  eval vs score slope {slope:.3f}" if slope is not None else "  eval vs score slope n/a", end="")
    print(f", mean L0 block sparsity {bs['mean']:.3f}, dead neurons {d['dead']} of {d['neurons']}")
    return 0
