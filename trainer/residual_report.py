"""Quality of a residual net (``model.loss.target=residual``) on held-out games, float net.

``python -m nnue.trainer.residual_report CKPT [--data DATASET] [--alphas 1,0.5] [--json]``
streams the validation games of the checkpoint's training data (same split by game id and the
same filters: quiet positions) and prints the Spearman rank correlation with the dataset's score
column (Stockfish's search scores) of: the base alone (``base_eval``), the net alone, and
``base + α·net`` for each α. The net is the *float* model of the checkpoint: the integer
residual net kind (α in the header) is not there yet, so ``nnue eval`` cannot add the base.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from nnue.pipeline.batch import to_sparse_batch
from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.pipeline.stream import Filters, PackedStream

from .export import load_checkpoint
from .metrics import spearman


def residual_report(ckpt: str | Path, data=None, alphas=(1.0, 0.5), max_positions: int = 200_000) -> dict:
    """Returns {"validation_positions", "spearman_base", "spearman_net_alone",
    "spearman_base_plus_net": {α: ρ}, "spearman_teacher_eval" (None without that column),
    "mean_abs_net_cp", "base", "loss"}. Raises ValueError
    when the data has no base_eval column."""
    model, hp, data_hp, _ = load_checkpoint(ckpt)
    paths = data if data is not None else data_hp.get("path")
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    ds = PackedStream(paths, 8192, 0, "val", float(data_hp.get("val_fraction", 0.05)),
                      Filters(**dict(data_hp.get("filters") or {})), drop_last=False)
    if "base_eval" not in ds.extra_columns:
        raise ValueError(f"{paths[0]}: no base_eval column in every part; run 'nnue annotate'")
    fs, buckets = get_feature_set(hp["features"]), parse_output_buckets(hp["output_buckets"])
    scale = float((hp.get("quant") or {}).get("scale", 400))
    nets, bases, scores, teachers, n = [], [], [], [], 0
    with torch.no_grad():
        for b in ds:
            sb = to_sparse_batch(b, fs, buckets)
            keep = torch.isfinite(sb.base_eval)
            y = model(sb.stm_indices, sb.nstm_indices, sb.bucket).reshape(-1) * scale
            nets.append(y[keep].numpy())
            bases.append(sb.base_eval[keep].numpy())
            scores.append(sb.score[keep].numpy())
            if sb.teacher_eval is not None:
                teachers.append(sb.teacher_eval[keep].numpy())
            n += int(keep.sum())
            if n >= max_positions:
                break
    net, base, score = (np.concatenate(a)[:max_positions] for a in (nets, bases, scores))
    m = json.loads(Path(paths[0], "manifest.json").read_text()).get("annotations", {}).get("base_eval", {})
    return {"validation_positions": int(len(score)),
            "base": f"{m.get('source')} ({m.get('version')})",
            "loss": hp.get("loss"),
            "spearman_base": spearman(base, score),
            # the teacher_eval column itself (e.g. Stockfish's NNUE static eval), where annotated
            "spearman_teacher_eval": (spearman(np.concatenate(teachers)[:max_positions], score)
                                      if teachers else None),
            "spearman_net_alone": spearman(net, score),
            "spearman_base_plus_net": {str(a): spearman(base + a * net, score) for a in alphas},
            "mean_abs_net_cp": float(np.abs(net).mean()) if len(net) else None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m nnue.trainer.residual_report", description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="OUT/checkpoints/last.ckpt of a residual run")
    p.add_argument("--data", default=None, help="dataset (default: the training data)")
    p.add_argument("--alphas", default="1,0.5", help="comma-separated α values (default 1,0.5)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    from nnue.pipeline.manifest import ManifestError

    from .export import ExportError

    try:
        r = residual_report(a.checkpoint, a.data, tuple(float(x) for x in a.alphas.split(",")))
    except (ExportError, ManifestError, FileNotFoundError, ValueError) as e:
        print(f"residual_report: error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(r))
        return 0
    print(f"{r['validation_positions']:,} quiet positions of held-out games; base {r['base']}")
    print(f"  Spearman vs score: base {r['spearman_base']:.4f}, net alone {r['spearman_net_alone']:.4f}, "
          + ", ".join(f"base + {k}·net {v:.4f}" for k, v in r["spearman_base_plus_net"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
