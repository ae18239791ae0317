#!/usr/bin/env bash
# The residual experiment (issue 11 part 3, seed 003) on all of our own self-play (.plain, ~826k
# positions): pack -> annotate (base_eval = Stockfish 15.1's classical eval, teacher_eval = its
# NNUE static eval; a copy with base_eval = material) -> train the demo recipe (EPOCHS epochs,
# default 3, of 131,072 positions) four ways, in parallel -> Spearman with Stockfish's search
# scores on the held-out games' quiet positions of: the base alone, the net alone, base + net at
# α = 1 and at α = ½ (float nets: trainer/residual_report.py).
#   A: the seed's recipe, MSE in centipawns on teacher_eval − base_eval (NNUE eval − classical eval);
#   B: the WDL loss in σ space of classical base + net against the search score (λ = 0.1);
#   C: B with the material count as base;
#   P: the plain demo net (target=wdl), same schedule: the non-residual reference.
# Writes bench/results/residual_selfplay.json with SAVE=1. Usage: [SAVE=1] [EPOCHS=3] bash bench/residual_selfplay.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/ensure_stockfish.sh
export PATH="$PWD/.venv/bin:$PATH"
W=${1:-$(mktemp -d)}
EPOCHS=${EPOCHS:-3}
SP=../shared/data/selfplay
if [ ! -f "$W/dataset/manifest.json" ]; then
  nnue pack "$SP"/*.plain "$SP"/*.plain.zst -o "$W/dataset" --no-progress
fi
nnue annotate "$W/dataset" --base stockfish-classical --teacher stockfish-nnue --jobs 2 --no-progress --json > "$W/annotate.json"
if [ ! -f "$W/dataset_material/manifest.json" ]; then
  rm -rf "$W/dataset_material.tmp" && cp -r "$W/dataset" "$W/dataset_material.tmp" && mv "$W/dataset_material.tmp" "$W/dataset_material"
fi
nnue annotate "$W/dataset_material" --base material --no-progress --json > "$W/annotate_material.json"
declare -A RECIPES=(
  [A_cp_teacher_eval]="model.loss.target=residual model.loss.residual_space=cp model.loss.wdl_lambda=0 model.loss.teacher=teacher_eval"
  [B_sigma_score]="model.loss.target=residual model.loss.residual_space=sigma model.loss.wdl_lambda=0.1 model.loss.teacher=score"
  [C_material_sigma_score]="model.loss.target=residual model.loss.residual_space=sigma model.loss.wdl_lambda=0.1 model.loss.teacher=score"
  [P_plain]="model.loss.target=wdl"
)
NAMES=(A_cp_teacher_eval B_sigma_score C_material_sigma_score P_plain)
export OMP_NUM_THREADS=1  # four runs side by side, one thread each
for name in "${NAMES[@]}"; do
  data="$W/dataset"; [ "$name" = C_material_sigma_score ] && data="$W/dataset_material"
  (
    if [ ! -f "$W/$name/metrics.json" ]; then
      read -r -a EXTRA <<< "${RECIPES[$name]}"
      nnue train experiment=demo data.path="$data" paths.output_dir="$W/$name" trainer.enable_progress_bar=false \
        trainer.max_epochs="$EPOCHS" "${EXTRA[@]}" > "$W/$name.log" 2>&1
    fi
    python -m nnue.trainer.residual_report "$W/$name/checkpoints/last.ckpt" --json > "$W/$name/residual.json"
  ) &
done
wait
python - "$W" "$EPOCHS" "${NAMES[@]}" <<'PY'
import json, sys
w, epochs, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
out = {"recipe": f"experiment=demo, trainer.max_epochs={epochs}, on all ../shared/data/selfplay/*.plain[.zst], "
                 "annotated with --base stockfish-classical --teacher stockfish-nnue (C: --base material); float nets",
       "annotate": json.load(open(f"{w}/annotate.json"))["columns"]}
for name in names:
    out[name] = json.load(open(f"{w}/{name}/residual.json"))
    out[name]["val_loss"] = json.load(open(f"{w}/{name}/metrics.json")).get("val_loss")
print(json.dumps(out, indent=1))
json.dump(out, open(f"{w}/residual_selfplay.json", "w"), indent=1)
PY
if [ "${SAVE:-0}" = 1 ]; then cp "$W/residual_selfplay.json" bench/results/residual_selfplay.json; fi
