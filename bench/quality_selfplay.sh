#!/usr/bin/env bash
# Quality gate of the demo recipe on all of our own self-play (.plain, ~826k positions):
# pack -> train (experiment=demo) -> export -> report. Prints the report JSON; with SAVE=1 it
# also replaces the tracked bench/results/quality_selfplay.json. 4-10 minutes on 2 cores (the
# pack takes about 70 s, the training about 30 s on an otherwise idle machine, longer when busy).
# Usage: [SAVE=1] [EXPERIMENT=demo] bash bench/quality_selfplay.sh [WORK_DIR]   (default: a fresh
# temporary folder). EXPERIMENT=deep_demo runs the deep-net recipe; its result file is
# bench/results/quality_selfplay_deep_demo.json. OVERRIDES adds Hydra overrides and NAME names the
# result file: OVERRIDES="model.qat=true" NAME=qat -> bench/results/quality_selfplay_qat.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
W=${1:-$(mktemp -d)}
EXPERIMENT=${EXPERIMENT:-demo}
RESULT=bench/results/quality_selfplay.json
if [ "$EXPERIMENT" != demo ]; then RESULT=bench/results/quality_selfplay_$EXPERIMENT.json; fi
if [ -n "${NAME:-}" ]; then RESULT=bench/results/quality_selfplay_$NAME.json; fi
read -r -a EXTRA <<< "${OVERRIDES:-}"
source bench/selfplay_data.sh  # SP, SP_FILES: ../shared/data/selfplay, else data/demo (with a note)
export SP
if [ ! -f "$W/dataset/manifest.json" ]; then
  nnue pack "${SP_FILES[@]}" -o "$W/dataset" --no-progress
fi
start=$(date +%s)
nnue train experiment="$EXPERIMENT" data.path="$W/dataset" paths.output_dir="$W/run" trainer.enable_progress_bar=false "${EXTRA[@]}"
train_s=$(( $(date +%s) - start ))
nnue export "$W/run/checkpoints/last.ckpt" -o "$W/net"
python -m nnue.trainer.report --run "$W/run" --net "$W/net" --json > "$W/report.json"
python - "$W" "$train_s" "$EXPERIMENT ${OVERRIDES:-}" <<'PY'
import json, os, platform, sys, torch
w, train_s, exp = sys.argv[1], int(sys.argv[2]), sys.argv[3].strip()
r = json.load(open(f"{w}/report.json"))
r |= {"recipe": f"experiment={exp} on all {os.environ['SP']}/*.plain[.zst]",
      "train_seconds": train_s, "machine": f"{platform.machine()}, {torch.get_num_threads()} threads",
      "target_spearman_net": 0.85}
print(json.dumps(r, indent=1))
json.dump(r, open(f"{w}/quality_selfplay.json", "w"), indent=1)
PY
if [ "${SAVE:-0}" = 1 ]; then cp "$W/quality_selfplay.json" "$RESULT"; fi
