#!/usr/bin/env bash
# Issue 24 part 6: what Stockfish 15.1's own net buys as a teacher. On all of our own self-play
# (.plain, ~826k positions): pack -> nnue import-net of the engine's built-in net -> nnue annotate
# --teacher NETDIR (our integer inference, batched) -> the quality recipe (experiment=quality,
# chess768 -> 32x2 SCReLU) trained twice, on the search score and on the teacher -> export ->
# nnue report's Spearman on the held-out games (against the dataset's search scores, as always).
# Writes bench/results/teacher_quality.json with SAVE=1. Needs Stockfish 15.1 (/usr/games/stockfish).
# Usage: [SAVE=1] [OVERRIDES="..."] bash bench/teacher_quality.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
W=${1:-$(mktemp -d)}
read -r -a EXTRA <<< "${OVERRIDES:-}"
source bench/selfplay_data.sh  # SP, SP_FILES: ../shared/data/selfplay, else data/demo (with a note)
export SP
SF=${STOCKFISH:-/usr/games/stockfish}
mkdir -p "$W"
if [ ! -f "$W/dataset/manifest.json" ]; then
  nnue pack "${SP_FILES[@]}" -o "$W/dataset" --no-progress
fi
if [ ! -f "$W/sf/import.json" ]; then
  printf 'export_net %s\nquit\n' "$W/builtin.nnue" | "$SF" > /dev/null
  nnue import-net "$W/builtin.nnue" -o "$W/sf" > /dev/null
fi
nnue annotate "$W/dataset" --teacher "$W/sf" --no-progress --json > "$W/annotate.json"
for teacher in score teacher_eval; do
  if [ ! -f "$W/report_$teacher.json" ]; then
    start=$(date +%s)
    nnue train experiment=quality data.path="$W/dataset" paths.output_dir="$W/run_$teacher" \
      trainer.enable_progress_bar=false model.loss.teacher=$teacher +overwrite=true "${EXTRA[@]}"
    echo $(( $(date +%s) - start )) > "$W/train_s_$teacher"
    nnue export "$W/run_$teacher/checkpoints/last.ckpt" -o "$W/net_$teacher" > /dev/null
    python -m nnue.trainer.report --run "$W/run_$teacher" --net "$W/net_$teacher" --json > "$W/report_$teacher.json"
  fi
done
python - "$W" "${OVERRIDES:-}" <<'PY'
import json, os, platform, sys
w, extra = sys.argv[1], sys.argv[2]
ann = json.load(open(f"{w}/annotate.json"))
out = {"recipe": f"experiment=quality {extra}".strip() + " on all " + os.environ["SP"] + "/*.plain[.zst]",
       "teacher": "Stockfish 15.1's built-in net (nnue import-net), evaluated by nnue's integer inference",
       "annotate": {"positions": ann["positions_annotated"], "seconds": ann["seconds"],
                    "positions_per_s": ann["positions_per_s"]},
       "load_average": os.getloadavg(), "machine": platform.machine(), "goal_spearman_net": 0.94}
for t in ("score", "teacher_eval"):
    r = json.load(open(f"{w}/report_{t}.json"))
    out[t] = {k: r.get(k) for k in ("spearman_net", "spearman_material", "validation_positions", "val_loss")}
    out[t]["train_seconds"] = int(open(f"{w}/train_s_{t}").read())
print(json.dumps(out, indent=1))
json.dump(out, open(f"{w}/teacher_quality.json", "w"), indent=1)
PY
if [ "${SAVE:-0}" = 1 ]; then cp "$W/teacher_quality.json" bench/results/teacher_quality.json; fi
