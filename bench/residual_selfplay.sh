#!/usr/bin/env bash
# The residual experiment (issue 11 part 3, seed 003) on our own self-play: pack -> annotate
# (base_eval = Stockfish 15.1's classical eval, teacher_eval = its NNUE static eval; a copy with
# base_eval = material) -> train each recipe (EPOCHS epochs, default 3, of 131,072 positions) ->
# nnue export (integer residual nets, α = model.alpha = ½ in the header) -> Spearman with
# Stockfish's search scores on the held-out games' quiet positions of: the base alone, the net
# alone, base + net at α = 1 and at α = ½, for the float net and the integer net
# (trainer/residual_report.py --net).
#   A: the seed's recipe, MSE in centipawns on teacher_eval − base_eval (NNUE eval − classical eval);
#   B: the WDL loss in σ space of classical base + net against the search score (λ = 0.1);
#   C: B with the material count as base;
#   P: the plain demo net (target=wdl), same schedule: the non-residual reference (no integer residual net);
#   TA, TB: A and B with the tiny net (conf/model/tiny.yaml: 32 -> 32 -> 1 CReLU, QAT, 5 MiB budget).
# A-C and P train the demo recipe (experiment=demo: 2×32 SCReLU perspective net).
# SETS: the self-play files (default: all *.plain[.zst]); NAMES: the recipes (default all); JOBS:
# runs side by side (default 1). Writes bench/results/residual_selfplay.json with SAVE=1.
# Usage: [SAVE=1] [EPOCHS=3] [SETS="a.plain b.plain"] [NAMES="B_sigma_score ..."] bash bench/residual_selfplay.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/ensure_stockfish.sh
export PATH="$PWD/.venv/bin:$PATH"
W=${1:-$(mktemp -d)}
EPOCHS=${EPOCHS:-3}
JOBS=${JOBS:-1}
source bench/selfplay_data.sh  # SP, SP_FILES: ../shared/data/selfplay, else data/demo (with a note)
if [ -n "${SETS:-}" ]; then read -r -a FILES <<< "$SETS"; else FILES=("${SP_FILES[@]##*/}"); fi
if [ ! -f "$W/dataset/manifest.json" ]; then
  nnue pack "${FILES[@]/#/$SP/}" -o "$W/dataset" --no-progress
fi
nnue annotate "$W/dataset" --base stockfish-classical --teacher stockfish-nnue --jobs 2 --no-progress --json > "$W/annotate.json"
if [ ! -f "$W/dataset_material/manifest.json" ]; then
  rm -rf "$W/dataset_material.tmp" && cp -r "$W/dataset" "$W/dataset_material.tmp" && mv "$W/dataset_material.tmp" "$W/dataset_material"
fi
nnue annotate "$W/dataset_material" --base material --no-progress --json > "$W/annotate_material.json"
A="model.loss.target=residual model.loss.residual_space=cp model.loss.wdl_lambda=0 model.loss.teacher=teacher_eval"
B="model.loss.target=residual model.loss.residual_space=sigma model.loss.wdl_lambda=0.1 model.loss.teacher=score"
DEMO="experiment=demo"
# the tiny net with the demo's data and optimiser settings
TINY="model=tiny data.batch_size=256 data.val_batch_size=8192 data.shuffle_buffer=262144 data.val_fraction=0.1 data.positions_per_epoch=131072 optimizer.lr=0.002"
declare -A RECIPES=(
  [A_cp_teacher_eval]="$DEMO $A"
  [B_sigma_score]="$DEMO $B"
  [C_material_sigma_score]="$DEMO $B"
  [P_plain]="$DEMO model.loss.target=wdl"
  [TA_tiny_cp_teacher_eval]="$TINY $A"
  [TB_tiny_sigma_score]="$TINY $B"
)
read -r -a NAMES <<< "${NAMES:-A_cp_teacher_eval B_sigma_score C_material_sigma_score P_plain TA_tiny_cp_teacher_eval TB_tiny_sigma_score}"
export OMP_NUM_THREADS=1  # runs side by side, one thread each
running=0
for name in "${NAMES[@]}"; do
  data="$W/dataset"; [ "$name" = C_material_sigma_score ] && data="$W/dataset_material"
  (
    if [ ! -f "$W/$name/metrics.json" ]; then
      read -r -a EXTRA <<< "${RECIPES[$name]}"
      nnue train data.path="$data" paths.output_dir="$W/$name" trainer.enable_progress_bar=false \
        trainer.max_epochs="$EPOCHS" "${EXTRA[@]}" > "$W/$name.log" 2>&1
    fi
    net=()
    if [ "$name" != P_plain ]; then
      nnue export "$W/$name/checkpoints/last.ckpt" -o "$W/$name/net" --json > "$W/$name/export.json"
      net=(--net "$W/$name/net")
    fi
    python -m nnue.trainer.residual_report "$W/$name/checkpoints/last.ckpt" "${net[@]}" --json > "$W/$name/residual.json"
  ) &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
wait
python - "$W" "$EPOCHS" "${FILES[*]}" "$SP" "${NAMES[@]}" <<'PY'
import json, sys
w, epochs, files, sp, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
out = {"recipe": f"trainer.max_epochs={epochs} of 131,072 positions, on {sp}/{{{files}}}, annotated "
                 "with --base stockfish-classical --teacher stockfish-nnue (C: --base material); A-C, P: experiment=demo; "
                 "TA, TB: model=tiny; float nets and the integer nets nnue export wrote (α = ½ in the header)",
       "annotate": json.load(open(f"{w}/annotate.json"))["columns"]}
for name in names:
    out[name] = json.load(open(f"{w}/{name}/residual.json"))
    out[name]["val_loss"] = json.load(open(f"{w}/{name}/metrics.json")).get("val_loss")
    try:
        e = json.load(open(f"{w}/{name}/export.json"))
        out[name]["export"] = {"bytes": e["bytes"]["net.safetensors"], "kind": e["architecture"]["kind"],
                               "float_vs_int_mean_abs_cp": e["cross_check"].get("mean_abs_diff_cp"),
                               "float_vs_int_mean_signed_cp": e["cross_check"].get("mean_signed_diff_cp")}
    except FileNotFoundError:
        pass
print(json.dumps(out, indent=1))
json.dump(out, open(f"{w}/residual_selfplay.json", "w"), indent=1)
PY
if [ "${SAVE:-0}" = 1 ]; then cp "$W/residual_selfplay.json" bench/results/residual_selfplay_int.json; fi
