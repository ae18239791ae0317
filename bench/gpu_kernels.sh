#!/usr/bin/env bash
# One-shot GPU check of the Triton kernels (issue 5), for a CUDA machine (written for an H200):
#   1. the kernel tests marked gpu (Triton on CUDA vs the torch reference at the target sizes,
#      and a net trained with each backend), log in OUT_DIR/gpu_tests.log;
#   2. bench_sparse_ft.py at the target case (batch 16384, F 45056, H 1024, 32 active; fp32 and
#      bf16; crelu, screlu, pairwise_crelu) with the block-size sweep -> OUT_DIR/sparse_ft_gpu.json;
#   3. bench_activations.py at (16384, 2048) -> OUT_DIR/activations_gpu.json;
# then prints a summary against the targets (fused fwd+bwd >= 3x the reference, >= 60 % of the
# bandwidth floor). About 3-5 minutes; the kernels compile on first use.
#
# Usage: bash bench/gpu_kernels.sh [OUT_DIR]     OUT_DIR default: $OUT if set, else bench/results
# Python: $PYTHON, else .venv/bin/python if it sees CUDA, else python3. Needs torch with CUDA,
# triton, pytest, numpy; the project need not be installed (without it, a throwaway import root
# maps nnue.kernels etc. onto the source folders; nothing is fetched). Exit status: non-zero if
# the tests or a benchmark failed (every step runs regardless).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-bench/results}}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
unset TRITON_INTERPRET  # compiled kernels: the interpreter would take hours at these sizes

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ] && .venv/bin/python -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    PY=.venv/bin/python
  else
    PY=python3
  fi
fi
if ! "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
  echo "gpu_kernels.sh: $PY sees no CUDA device" >&2
  exit 2
fi
if ! "$PY" -c 'import nnue.kernels, nnue.trainer.model' 2>/dev/null; then
  ROOT=$(mktemp -d)
  mkdir -p "$ROOT/nnue"
  cp nnue/__init__.py "$ROOT/nnue/"
  for p in pipeline trainer kernels inference conf; do ln -s "$PWD/$p" "$ROOT/nnue/$p"; done
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi

"$PY" - <<'PY' | tee "$OUT_DIR/gpu_env.txt"
import torch, triton
p = torch.cuda.get_device_properties(0)
print(f"gpu {p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs; torch {torch.__version__}, "
      f"cuda {torch.version.cuda}, triton {triton.__version__}")
PY

status=0
echo "== kernel tests (-m gpu)"
"$PY" -m pytest tests/kernels -m gpu -q -p no:cacheprovider -rs 2>&1 | tee "$OUT_DIR/gpu_tests.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== bench_sparse_ft (target case)"
"$PY" bench/bench_sparse_ft.py --device cuda --dtypes fp32,bf16 --sweep --out "$OUT_DIR/sparse_ft_gpu.json" \
  >/dev/null 2>"$OUT_DIR/bench_sparse_ft.err" || { status=1; tail -20 "$OUT_DIR/bench_sparse_ft.err"; }

echo "== bench_activations"
"$PY" bench/bench_activations.py --device cuda --out "$OUT_DIR/activations_gpu.json" \
  >/dev/null 2>"$OUT_DIR/bench_activations.err" || { status=1; tail -20 "$OUT_DIR/bench_activations.err"; }

"$PY" - "$OUT_DIR" <<'PY'
import json, os, sys
out = sys.argv[1]
p = os.path.join(out, "sparse_ft_gpu.json")
if os.path.exists(p):
    r = json.load(open(p))
    print(f"== sparse_ft_pair, {r['environment'].get('gpu')}, copy {r['copy_bandwidth_GB_per_s']:.0f} GB/s")
    for x in r["results"]:
        t, ref = x["triton"]["fwd_bwd"], x["torch"]["fwd_bwd"]
        print(f"{x['activation']:>15} {x['dtype']}: fwd+bwd triton {t['time_ms']:.2f} ms ({t['GB_per_s']:.0f} GB/s, "
              f"{t['fraction_of_bandwidth_floor']:.0%} of floor), torch {ref['time_ms']:.2f} ms, "
              f"speedup {x['speedup_triton_vs_torch']['fwd_bwd']:.2f}x, targets met {x['targets_met']}")
    for act, rows in r.get("sweep_fp32", {}).items():
        print(f"   sweep {act}: fastest {rows[0]}")
p = os.path.join(out, "activations_gpu.json")
if os.path.exists(p):
    r = json.load(open(p))
    for x in r["results"]:
        print(f"== {x['activation']:>9} {x['dtype']}: fwd+bwd speedup {x['speedup_triton_vs_torch']['fwd_bwd']:.2f}x, "
              f"triton {x['triton']['fwd_bwd']['fraction_of_bandwidth_floor']:.0%} of copy bandwidth")
PY
exit $status
