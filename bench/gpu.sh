#!/usr/bin/env bash
# Everything to measure on a lent GPU (issue 23; written for one H200), in under 8 minutes:
#   1. the kernel tests marked gpu (Triton on CUDA against the torch reference at the target sizes)
#        -> OUT_DIR/gpu_tests.log                                                    (limit 110 s)
#   2. the kernel benchmarks: bench_sparse_ft at the target case (batch 16384, F 45056, H 1024;
#      fp32 and bf16; --sweep when GPU_SWEEP=1) and bench_activations
#        -> OUT_DIR/sparse_ft_gpu.json, OUT_DIR/activations_gpu.json                (limit 110 s)
#   3. nnue bench train --suite gpu on CUDA, features encoded on the GPU: chess768 -> 256x2 SCReLU
#      and the Stockfish 15.1 kind (model=sfnnv5: HalfKAv2_hm -> 1,024 + 8 PSQT, layer stacks;
#      TRAIN_OVERRIDES adds overrides to every case) at batch 16,384 and 65,536: Lightning, the
#      plain loop, the naive loop and the torch reference on CUDA
#        -> OUT_DIR/train_gpu.json                                                   (limit 220 s)
# then a summary (positions/s against the issue's goal: >= 4M/s for sfnnv5, HalfKAv2_hm -> 1,024).
#
# Usage: bash bench/gpu.sh [--dry-run] [OUT_DIR]     OUT_DIR default: $OUT if set, else bench/results
#   --dry-run: no GPU needed: the same steps on CPU at toy sizes, to check the script, its imports
#   and the CPU fallbacks (the GPU tests are collected, not run; the benchmarks run on the torch
#   and numba paths): what tests/kernels/test_gpu_script.py runs in the default suite. Its JSON
#   goes to OUT_DIR with a "_dryrun" suffix, never over a GPU result.
# Python: $PYTHON, else .venv/bin/python, else python3. Needs torch (with CUDA unless --dry-run),
# triton, pytest, numpy, and for step 3 the project's dependencies (pytorch-lightning, hydra, pyarrow,
# numba); the project need not be installed: without it a throwaway import root maps the nnue
# packages onto the source folders (nothing is fetched). Each step runs whatever the others did;
# exit status 1 if any failed or ran out of time, 2 on bad usage or no CUDA.
set -uo pipefail
cd "$(dirname "$0")/.."

DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
case "${1:-}" in -*) echo "usage: bash bench/gpu.sh [--dry-run] [OUT_DIR]" >&2; exit 2;; esac
OUT_DIR=${1:-${OUT:-bench/results}}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
SFX=""
[ "$DRY" = 1 ] && SFX="_dryrun"

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
if [ "$DRY" = 0 ]; then
  unset TRITON_INTERPRET  # compiled kernels: the interpreter would take hours at these sizes
  if ! "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
    echo "gpu.sh: $PY sees no CUDA device (bash bench/gpu.sh --dry-run checks the script on CPU)" >&2
    exit 2
  fi
  DEVICE=cuda
else
  DEVICE=cpu
fi
if ! "$PY" -c 'import nnue.kernels, nnue.bench, nnue.conf' 2>/dev/null; then
  ROOT=$(mktemp -d)
  mkdir -p "$ROOT/nnue"
  cp nnue/*.py "$ROOT/nnue/"
  ln -s "$PWD/nnue/spec" "$ROOT/nnue/spec"
  for p in pipeline trainer kernels inference conf bench selfplay; do ln -s "$PWD/$p" "$ROOT/nnue/$p"; done
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi

status=0
step() {  # step NAME LOG LIMIT_S CMD...: run with a time limit, output to OUT_DIR/LOG, carry on
  local name=$1 log="$OUT_DIR/$2" limit=$3; shift 3
  local t0=$SECONDS
  echo "== $name (limit ${limit} s, log $log)"
  timeout "$limit" "$@" >"$log" 2>&1
  local rc=$?
  echo "   $name: exit $rc after $((SECONDS - t0)) s"
  if [ "$rc" -ne 0 ]; then status=1; tail -15 "$log"; fi
}

"$PY" - "$DEVICE" <<'PY' | tee "$OUT_DIR/gpu_env$SFX.txt"
import os, sys, torch
if sys.argv[1] == "cuda":
    import triton
    p = torch.cuda.get_device_properties(0)
    print(f"gpu {p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs; torch {torch.__version__}, "
          f"cuda {torch.version.cuda}, triton {triton.__version__}, {os.cpu_count()} CPUs")
else:
    print(f"dry run on CPU: torch {torch.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
PY

if [ "$DRY" = 0 ]; then
  step "kernel tests (-m gpu)" gpu_tests.log 110 "$PY" -m pytest tests/kernels -m gpu -q -p no:cacheprovider -rs
  SWEEP=""
  [ "${GPU_SWEEP:-0}" = 1 ] && SWEEP="--sweep"
  step "bench_sparse_ft (target case)" bench_sparse_ft_gpu.log 80 "$PY" -m nnue.bench.bench_sparse_ft --device cuda --dtypes fp32,bf16 \
    $SWEEP --out "$OUT_DIR/sparse_ft_gpu.json"
  step "bench_activations" bench_activations_gpu.log 40 "$PY" -m nnue.bench.bench_activations --device cuda \
    --out "$OUT_DIR/activations_gpu.json"
  # shellcheck disable=SC2086
  step "bench train --suite gpu" bench_train_gpu.log 220 "$PY" -m nnue.bench.bench_train --suite gpu --device cuda --steps 8 \
    --warmup 3 --rounds 1 --out "$OUT_DIR/train_gpu.json" ${TRAIN_OVERRIDES:-}
else
  step "kernel tests (collected only)" gpu_tests$SFX.log 120 "$PY" -m pytest tests/kernels -m gpu -q --co \
    -p no:cacheprovider
  step "bench_sparse_ft (toy, cpu)" bench_sparse_ft_gpu$SFX.log 60 "$PY" -m nnue.bench.bench_sparse_ft --device cpu --batch 5 --features 40 \
    --hidden 8 --active 4 --reps 1 --warmup 0 --copy-mib 4 --dtypes fp32,bf16 --backends torch \
    --out "$OUT_DIR/sparse_ft_gpu$SFX.json"
  step "bench_activations (toy, cpu)" bench_activations_gpu$SFX.log 60 "$PY" -m nnue.bench.bench_activations --device cpu --shape 3,70 --reps 1 \
    --warmup 0 --copy-mib 4 --backends torch --out "$OUT_DIR/activations_gpu$SFX.json"
  # shellcheck disable=SC2086
  step "bench train --suite gpu (toy, cpu)" bench_train_gpu$SFX.log 240 "$PY" -m nnue.bench.bench_train --suite gpu --device cpu \
    --data sample --batch 64 --steps 1 --warmup 0 --rounds 1 --variants plain --out "$OUT_DIR/train_gpu$SFX.json" \
    model.hidden=32 data.num_workers=0 ${TRAIN_OVERRIDES:-}
fi

"$PY" - "$OUT_DIR" "$SFX" <<'PY'
import json, os, sys
out, sfx = sys.argv[1], sys.argv[2]
p = os.path.join(out, f"sparse_ft_gpu{sfx}.json")
if os.path.exists(p):
    r = json.load(open(p))
    for x in r["results"]:
        t = x.get("triton", x["torch"])["fwd_bwd"]
        print(f"== sparse_ft {x['activation']:>15} {x['dtype']}: fwd+bwd {t['time_ms']:.2f} ms, {t['GB_per_s']:.0f} GB/s"
              + (f", speedup vs torch {x['speedup_triton_vs_torch']['fwd_bwd']:.2f}x" if "triton" in x else ""))
p = os.path.join(out, f"train_gpu{sfx}.json")
if os.path.exists(p):
    r = json.load(open(p))
    for run in r["runs"]:
        v = run["variants"]
        rates = ", ".join(f"{k} {x['positions_per_s_median']:,.0f}/s" for k, x in v.items() if x.get("steps"))
        goal = run.get("target_positions_per_s")
        print(f"== train {run['name']}: {rates}" + (f" (goal {goal:,}/s: {'met' if run['target_met'] else 'missed'})"
                                                    if goal else ""))
PY
exit $status
