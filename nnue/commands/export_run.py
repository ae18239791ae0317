"""``nnue export``, the work: quantise a checkpoint into an integer net and print its architecture, audit
and cross-check (:func:`nnue.trainer.export.export`). The parser is :mod:`nnue.commands.export`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from nnue.inference import kinds
from nnue.trainer.export import export


def run(args) -> int:
    """``nnue export``: quantise the checkpoint (:func:`nnue.trainer.export.export`); prints the net, its audit and
    the float-vs-int cross-check."""
    r = export(args.checkpoint, args.output, clip=args.clip, data_path=args.data,
               max_positions=args.positions, bias_correction=not args.no_bias_correction,
               alpha=args.alpha, base=args.base, max_bytes=args.max_bytes)
    if args.json:
        print(json.dumps(r, default=float))
        return 0
    c, a = r["cross_check"], r["audit"]
    print(f"wrote {r['net']}, {r['bin']} and {Path(r['net']).parent / 'export.json'}")
    arch = r["architecture"]
    kind = kinds.get(arch.get("kind") or kinds.DEFAULT)
    print(f"  {kind.summary(arch)}")
    if r.get("residual"):
        print(f"  residual net: eval = {r['residual']['base']} + {r['residual']['alpha']:g}·net")
    for line, to_stderr in (kind.engine_notes(arch, Path(r["bin"])) if kind.engine_notes else []):
        print(f"  {line}", file=sys.stderr if to_stderr else sys.stdout)
    print(f"  {r['bytes']['net.safetensors']:,} bytes" + (f" (model.max_bytes {r['bytes']['max_bytes']:,})"
                                                         if r["bytes"]["max_bytes"] else ""))
    note = f"; {a['accumulator_note']}" if a.get("accumulator_note") else ""
    print(f"  audit: accumulator worst case {a['accumulator_worst_case']} (limit {a['accumulator_limit']}{note}), "
          f"clipped {a['clipped'] or 'nothing'}")
    if not c["positions"] and args.positions == 0:
        print("  note: --positions 0: no bias correction and no float-vs-int cross-check", file=sys.stderr)
    elif not c["positions"]:
        print("  warning: no validation positions found, so no bias correction and no float-vs-int "
              "cross-check; pass --data DATASET", file=sys.stderr)
    elif r["calibration"].get("skipped"):
        print(f"  bias correction skipped: {r['calibration']['skipped']}")
    elif not r["calibration"]["bias_correction"] and not args.no_bias_correction:
        print("  warning: too few validation positions for the bias correction", file=sys.stderr)
    if c["positions"]:
        print(f"  float vs int on {c['positions']:,} validation positions: mean |Δ| "
              f"{c['mean_abs_diff_cp']:.2f} cp, max |Δ| {c['max_abs_diff_cp']:.1f} cp, mean Δ "
              f"{c['mean_signed_diff_cp']:+.2f} cp")
    if c.get("warning"):
        print(f"  warning: {c['warning']}", file=sys.stderr)
    return 0
