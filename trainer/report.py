"""Quality report of a trained and exported net on held-out games.

``python -m nnue.trainer.report --run OUT --net NETDIR [--data DATASET] [--json]`` prints the
final validation loss, the Spearman rank correlation with the dataset's (Stockfish) scores of the
integer net's evals and of a material count (P N B R Q = 100 300 300 500 900, stm POV) on the
validation games (quiet positions: the training filters), and the float-vs-integer error from
``export.json``. It is the demo's closing summary and the quality gate of the full-data run.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from nnue.inference import evaluate, load
from nnue.pipeline.features.board_tensor import black_to_move, decode_squares

from .export import load_checkpoint, validation_boards
from .metrics import spearman

PIECE_CP = torch.tensor([100, 300, 300, 500, 900, 0])


def material_cp(boards: torch.Tensor) -> torch.Tensor:
    """Material balance of packed boards: (N, 32) uint8 -> (N,) int64 centipawns, stm POV."""
    occupied, code, _ = decode_squares(boards)
    value = PIECE_CP.to(boards.device)[code & 7] * occupied
    sign = torch.where((code >> 3) == 1, -1, 1)
    white = (value * sign).sum(1)
    return torch.where(black_to_move(boards), -white, white)


def report(run_dir: str | Path, net_dir: str | Path, data=None, max_positions: int = 200_000) -> dict:
    run_dir, net_dir = Path(run_dir), Path(net_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text()) if (run_dir / "metrics.json").exists() else {}
    exp = json.loads((net_dir / "export.json").read_text())
    _, _, data_hp, _ = load_checkpoint(exp["provenance"]["checkpoint"])
    if data is not None:
        data_hp = dict(data_hp, path=data)
    boards, scores = validation_boards(data_hp, max_positions)
    net = load(net_dir / "net.safetensors")
    ints = evaluate(net, boards)
    c = exp["cross_check"]
    return {
        "val_loss": metrics.get("val_loss"),
        "validation_positions": int(len(scores)),
        "spearman_net": spearman(ints.numpy(), scores.numpy()),
        "spearman_material": spearman(material_cp(boards).numpy(), scores.numpy()),
        "float_vs_int_mean_abs_cp": c.get("mean_abs_diff_cp"),
        "float_vs_int_max_abs_cp": c.get("max_abs_diff_cp"),
        "float_vs_int_mean_signed_cp": c.get("mean_signed_diff_cp"),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m nnue.trainer.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True, help="training output folder (paths.output_dir)")
    p.add_argument("--net", required=True, help="export folder (holds net.safetensors, export.json)")
    p.add_argument("--data", default=None, help="dataset to report on (default: the training data)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    from nnue.inference.net import NetFormatError
    from nnue.pipeline.manifest import ManifestError

    from .export import ExportError

    try:
        r = report(a.run, a.net, a.data)
    except (ExportError, ManifestError, NetFormatError, FileNotFoundError, ValueError) as e:
        print(f"nnue report: error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(r))
        return 0
    fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
    print("summary")
    print(f"  validation loss                      {fmt(r['val_loss'], '.5f')}")
    print(f"  Spearman vs Stockfish, integer net   {fmt(r['spearman_net'], '.3f')}   "
          f"(material count: {fmt(r['spearman_material'], '.3f')}; {r['validation_positions']:,} "
          f"quiet positions of held-out games)")
    print(f"  float vs integer eval                mean |Δ| {fmt(r['float_vs_int_mean_abs_cp'], '.2f')} cp, "
          f"max |Δ| {fmt(r['float_vs_int_max_abs_cp'], '.1f')} cp, mean Δ "
          f"{fmt(r['float_vs_int_mean_signed_cp'], '+.2f')} cp")
    return 0


if __name__ == "__main__":
    sys.exit(main())
