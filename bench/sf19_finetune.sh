#!/usr/bin/env bash
# Fine-tune Stockfish 19's official net on our self-play, export it, and check it in the real engine.
# From a fresh clone (needs Node.js + npm for the engine and the net; DATA=DATASET, else it packs
# our self-play: bench/selfplay_data.sh picks the folder, the repo's data/demo in a bare clone):
#   1. scripts/ensure_sf19.sh: the engine (WebAssembly, npm) and the official net nn-1a298aa575a0.nnue;
#   2. nnue import-net: the official net's float weights (WORK/sf19/checkpoint.safetensors);
#   3. nnue export of those weights unchanged, with the same data: the official net's own line
#      (float-vs-int gap, Spearman against the data's scores) to compare the fine-tune with;
#   4. nnue train model=sfnnv16 init_weights=... : EPOCHS passes over DATA at a low learning rate,
#      QAT on (the kind's default; QAT=0 trains with model.qat=false to measure what QAT buys);
#   5. nnue export: WORK/net/net.nnue (WORK/net_noqat with QAT=0), its float-vs-int gap;
#   6. bench/sf19_check_net.py: Stockfish 19 (scripts/sf19-uci) loads net.nnue (setoption name
#      EvalFile), and our trace equals the engine's eval on CHECK positions of real games.
# Writes WORK/sf19_finetune[_noqat].json; SAVE=1 copies it to bench/results/.
# Usage: [DATA=DATASET] [EPOCHS=3] [LR=5e-5] [QAT=1] [CHECK=300] [SAVE=1] bash bench/sf19_finetune.sh [WORK]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/ensure_sf19.sh
export PATH="$PWD/.venv/bin:$PATH"
W=${1:-$(mktemp -d)}
EPOCHS=${EPOCHS:-3}
LR=${LR:-5e-5}
QAT=${QAT:-1}
CHECK=${CHECK:-300}
CACHE=${NNUE_SF19_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nnue-forge/sf19}
OFFICIAL=$CACHE/nn-1a298aa575a0.nnue
[ -f "$OFFICIAL" ] || { echo "sf19_finetune: no official net at $OFFICIAL (scripts/ensure_sf19.sh said why)" >&2; exit 2; }
mkdir -p "$W"
W=$(cd "$W" && pwd)
DATA=${DATA:-$W/dataset}
if [ ! -f "$DATA/manifest.json" ]; then  # all of our self-play (825,717 positions), else data/demo, with a note
  source bench/selfplay_data.sh  # SP, SP_FILES
  nnue pack "${SP_FILES[@]}" -o "$DATA" --no-progress
fi
[ -f "$W/sf19/import.json" ] || nnue import-net "$OFFICIAL" -o "$W/sf19"
# the official net, exported again from its float weights with the same data: byte-identical, and
# the cross-check's Spearman on the same validation positions is the line to beat
[ -f "$W/official/export.json" ] || nnue export "$W/sf19/checkpoint.safetensors" --data "$DATA" -o "$W/official"
SUFFIX=$([ "$QAT" = 1 ] && echo "" || echo "_noqat")
RUN=$W/run$SUFFIX
NET=$W/net$SUFFIX
# Fine-tune settings: the official net ended its training at a learning rate near 1e-6 (nnue-pytorch's
# 8.75e-4 decayed by 0.992 per epoch over 800 epochs), so 5e-5 falling to 5e-6 along a cosine moves
# its weights by at most a few of their quantisation steps (FT 1/256, l1 1/128) in a few hundred
# Adam steps; no weight decay (it pulls towards zero, not towards the net we start from); λ 0.1,
# mostly the search score; no factoriser (the imported net has none to start it from).
if [ ! -f "$RUN/checkpoints/last.ckpt" ]; then
  start=$(date +%s)
  nnue train model=sfnnv16 features=sfnnv16 init_weights="$W/sf19/checkpoint.safetensors" model.factoriser=false \
    model.qat=$([ "$QAT" = 1 ] && echo true || echo false) model.backend=numba optimizer.sparse_ft=true \
    data.path="$DATA" data.batch_size=16384 trainer.max_epochs="$EPOCHS" optimizer.lr="$LR" \
    optimizer.weight_decay=0.0 scheduler.final_lr=5e-6 model.loss.wdl_lambda=0.1 \
    trainer.enable_progress_bar=false paths.output_dir="$RUN" +overwrite=true
  echo $(( $(date +%s) - start )) > "$RUN/train_seconds"
fi
[ -f "$NET/export.json" ] || nnue export "$RUN/checkpoints/last.ckpt" -o "$NET"
python -m bench.sf19_check_net "$NET/net.nnue" --positions "$CHECK" --work "$W" --run "$RUN" \
  --out "$W/sf19_finetune$SUFFIX.json"
if [ "${SAVE:-0}" = 1 ]; then cp "$W/sf19_finetune$SUFFIX.json" bench/results/; fi
