#!/usr/bin/env bash
# Issue 24 part 7: strength inside the real engine. Stockfish 15.1 plays itself with different
# nets, at fixed nodes, paired games from the shipped balanced book, under the SPRT:
#   A. the official net fine-tuned on our self-play for a short run, against the official net;
#   B. an sfnnv5 net trained from scratch on our self-play, against Stockfish's classical eval
#      (Use NNUE=false).
# Results: bench/results/engine_strength_{finetune,scratch}.json (match.json of each, with the
# training settings) when SAVE=1. Needs Stockfish 15.1 (/usr/games/stockfish); trains on
# ../shared/data/selfplay where it is, else on the repo's data/demo (bench/selfplay_data.sh).
# Usage: [SAVE=1] [NODES=2000] [GAMES=200] [POSITIONS=819200] bash bench/engine_strength.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
W=${1:-$(mktemp -d)}
SF=${STOCKFISH:-/usr/games/stockfish}
NODES=${NODES:-2000}
GAMES=${GAMES:-200}
POSITIONS=${POSITIONS:-819200}
source bench/selfplay_data.sh  # SP, SP_FILES: ../shared/data/selfplay, else data/demo (with a note)
mkdir -p "$W"
[ -f "$W/dataset/manifest.json" ] || nnue pack "${SP_FILES[@]}" -o "$W/dataset" --no-progress
if [ ! -f "$W/sf/import.json" ]; then
  printf 'export_net %s\nquit\n' "$W/builtin.nnue" | "$SF" > /dev/null
  nnue import-net "$W/builtin.nnue" -o "$W/sf" > /dev/null
fi
COMMON=(model=sfnnv5 features=halfkav2_hm data.path="$W/dataset" model.backend=numba optimizer.sparse_ft=true
        data.batch_size=4096 data.positions_per_epoch="$POSITIONS" trainer.max_epochs=1
        trainer.enable_progress_bar=false +overwrite=true)
train() {  # NAME EXTRA...
  local name=$1; shift
  if [ ! -f "$W/net_$name/net.nnue" ]; then
    local start; start=$(date +%s)
    nnue train "${COMMON[@]}" paths.output_dir="$W/run_$name" "$@"
    echo $(( $(date +%s) - start )) > "$W/train_s_$name"
    nnue export "$W/run_$name/checkpoints/last.ckpt" -o "$W/net_$name" > /dev/null
  fi
}
train finetune init_weights="$W/sf/checkpoint.safetensors" optimizer.lr=0.0001 model.factoriser=false
train scratch optimizer.lr=0.001
[ -f "$W/m_finetune/match.json" ] && grep -q '"finished": true' "$W/m_finetune/match.json" || \
  nnue match --engine "$SF" --engine-option "EvalFile=$W/net_finetune/net.nnue" --engine "$SF" \
    --nodes "$NODES" --max-games "$GAMES" -o "$W/m_finetune" --quiet || true
[ -f "$W/m_scratch/match.json" ] && grep -q '"finished": true' "$W/m_scratch/match.json" || \
  nnue match --engine "$SF" --engine-option "EvalFile=$W/net_scratch/net.nnue" --engine "$SF" \
    --engine-option "Use NNUE=false" --nodes "$NODES" --max-games "$GAMES" -o "$W/m_scratch" --quiet || true
python - "$W" "$NODES" "$POSITIONS" <<'PY'
import json, os, sys
w, nodes, positions = sys.argv[1], sys.argv[2], sys.argv[3]
for name, what in (("finetune", "Stockfish 15.1 + its own net fine-tuned on our self-play vs Stockfish 15.1 (built-in net)"),
                   ("scratch", "Stockfish 15.1 + an sfnnv5 net trained from scratch on our self-play vs Stockfish 15.1 classical (Use NNUE=false)")):
    m = json.load(open(f"{w}/m_{name}/match.json"))
    out = {"match": what, "nodes_per_move": int(nodes), "training_positions": int(positions),
           "train_seconds": int(open(f"{w}/train_s_{name}").read()), "load_average": os.getloadavg(),
           "result": m}
    json.dump(out, open(f"{w}/engine_strength_{name}.json", "w"), indent=1)
    print(name, json.dumps({k: m.get(k) for k in ("games", "score", "elo", "elo_ci", "sprt", "wdl") if k in m}))
PY
if [ "${SAVE:-0}" = 1 ]; then cp "$W"/engine_strength_*.json bench/results/; fi
