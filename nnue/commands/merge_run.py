"""``nnue merge``, the work: move shard datasets (``nnue pack --shard``) into one dataset and print the
counts. The parser is :mod:`nnue.commands.merge`."""
from __future__ import annotations

import json

from nnue.pipeline.shard import merge_datasets


def run(args) -> int:
    """``nnue merge``: merge the shard datasets into one (:func:`nnue.pipeline.shard.merge_datasets`)."""
    r = merge_datasets(args.shards, args.output)
    if args.json:
        print(json.dumps(r))
    else:
        done = sum(1 for s in r["shards"] if s["status"] == "already merged")
        print(f"merged {r['files']} file(s), {r['positions']:,} positions from {len(r['shards']) - done} shard(s) "
              f"into {args.output} ({done} already merged); it holds {r['dataset_files']} file(s), "
              f"{r['totals']['packed']:,} positions")
    return 0
