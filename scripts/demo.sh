#!/usr/bin/env bash
# The main job on the demo's data (data/demo: 2,400 games of our self-play, 268,884 positions):
# pack -> train -> export -> evaluate, then a summary.
# Usage: scripts/demo.sh [OUT]   (default OUT=demo-out; any existing OUT is replaced)
# NNUE_USE_INSTALLED=1 (set in the container image): run the nnue on PATH instead of making .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-demo-out}
if [ "${NNUE_USE_INSTALLED:-}" != 1 ]; then
  bash scripts/setup.sh
  export PATH="$PWD/.venv/bin:$PATH"
fi
rm -rf "$OUT"

# a marker at the end of a demo that ran through, in .venv: the installed mode (a container, where
# the tree may be read-only, as in Apptainer's image) has none and keeps no marker
first=.venv/.nnue-demo-ran
if [ ! -f "$first" ]; then
  echo "(first run: numba compiles the pack, evaluation and training kernels as they are first used and" \
       "caches them; this adds a few minutes, once: later runs start in seconds)"
fi
echo "== pack data/demo -> $OUT/dataset"
nnue pack data/demo -o "$OUT/dataset"
nnue inspect "$OUT/dataset" --fens 2

echo "== train (experiment=demo, CPU)"
nnue train experiment=demo data.path="$OUT/dataset" paths.output_dir="$OUT/run" \
  trainer.enable_progress_bar=false

echo "== export $OUT/run/checkpoints/last.ckpt -> $OUT/net"
nnue export "$OUT/run/checkpoints/last.ckpt" -o "$OUT/net"

echo "== evaluate (centipawns, side to move)"
printf '%s\n' \
  "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1" \
  "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNB1KBNR w KQkq - 0 1" \
  "rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1" \
  "4k3/8/8/8/8/8/4P3/4K3 b - - 0 1" > "$OUT/fens.txt"
paste -d ' ' <(nnue eval "$OUT/net/net.safetensors" --fens "$OUT/fens.txt") "$OUT/fens.txt"

nnue report "$OUT/run" --net "$OUT/net"
if [ -d .venv ]; then touch "$first"; fi
