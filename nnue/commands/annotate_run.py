"""``nnue annotate``, the work: add base_eval / teacher_eval columns to a dataset
(:func:`nnue.pipeline.annotate.annotate`). The parser is :mod:`nnue.commands.annotate`."""
from __future__ import annotations

import json

from nnue.pipeline.annotate import annotate


def run(args) -> int:
    """``nnue annotate``: add the base_eval / teacher_eval columns; prints what each column holds."""
    r = annotate(args.dataset, args.base, args.teacher, args.engine, args.jobs, args.batch,
                 progress=not args.no_progress)
    if args.json:
        print(json.dumps(r))
        return 0
    for c, rec in r["columns"].items():
        print(f"{c}: {rec['source']} ({rec['version']}), {rec['rows']:,} rows, {rec['nulls']:,} null (in check)")
    print(f"  {len(r['parts_annotated'])} part(s) annotated, {len(r['parts_skipped'])} already done")
    return 0
