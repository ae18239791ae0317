#!/usr/bin/env bash
# Our training step beside nnue-pytorch's (Stockfish's trainer) on the same data and cores, in
# alternating pairs: HalfKAv2_hm -> 256 with layer stacks at batch 16,384 on small.binpack.
#   ours:   nnue bench train features=halfkav2_hm model=deep model.hidden=256 model.factoriser=true
#           (nnue train's step under Lightning, and the plain loop with and without data.prefetch)
#   theirs: ../shared/anchors/nnue-pytorch/run_train.sh (its train.py unchanged, HalfKAv2_hm^, L1 256,
#           its C++ loader with one worker, torch.compile, steady window after 20 steps)
# Usage: NPA=DIR bash bench/train_vs_nnue_pytorch.sh [PAIRS] [OUT_JSON]
#   NPA: the folder ../shared/anchors/nnue-pytorch/setup.sh built (venv, src, runs, logs)
#   PAIRS (default 2); OUT_JSON (default bench/results/train_cpu_vs_nnue_pytorch.json)
#   WORK: where the runs' own JSON go (default a temporary folder); PAIRS=0 combines those already there
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-2}
OUT=${2:-bench/results/train_cpu_vs_nnue_pytorch.json}
ANCHOR=../shared/anchors/nnue-pytorch
NPA=${NPA:?set NPA to the folder $ANCHOR/setup.sh built}
WORK=${WORK:-$(mktemp -d)}
STEPS=${NPA_STEPS:-80}
[ -f "$ANCHOR/run_train.sh" ] || { echo "no $ANCHOR/run_train.sh" >&2; exit 2; }
[ -f ../shared/data/public/small.binpack ] || { echo "no ../shared/data/public/small.binpack" >&2; exit 2; }
NNUE=${NNUE:-.venv/bin/nnue}
for i in $(seq 1 "$PAIRS"); do
  echo "pair $i: ours (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  "$NNUE" bench train features=halfkav2_hm model=deep model.hidden=256 model.factoriser=true \
    --steps 24 --warmup 3 --rounds 2 --variants lightning,plain --baseline "data.prefetch=0" \
    --out "$WORK/ours_$i.json" > /dev/null
  echo "pair $i: nnue-pytorch (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  NPA=$NPA bash "$ANCHOR/run_train.sh" "nnue-forge-cmp-$$-$i" 256 "$STEPS" > "$WORK/npa_$i.json"
  cut -d' ' -f1-3 /proc/loadavg > "$WORK/load_after_$i.txt"
done
.venv/bin/python - "$WORK" "$OUT" <<'PY'
import glob, json, os, sys
work, out = sys.argv[1], sys.argv[2]
pairs = []
for ours_f in sorted(glob.glob(os.path.join(work, "ours_*.json"))):
    i = ours_f.rsplit("_", 1)[1].split(".")[0]
    ours = json.load(open(ours_f))
    theirs = json.load(open(os.path.join(work, f"npa_{i}.json")))
    r = ours["runs"][0]
    v = r["variants"]
    pair = {"pair": int(i), "load_average_before_ours": r["load_average_1_5_15min_before"],
            "load_average_after_ours": r["load_average_1_5_15min_after"],
            "nnue_pytorch_load1_min_max": [theirs.get("load1_min"), theirs.get("load1_max")],
            "ours_lightning_positions_per_s": v["lightning"]["window_positions_per_s"],
            "ours_plain_positions_per_s": v["plain"]["window_positions_per_s"],
            "ours_plain_no_prefetch_positions_per_s": v["baseline"]["window_positions_per_s"],
            "ours_cores_used": {k: v[k]["cores_used"] for k in ("lightning", "plain", "baseline")},
            "nnue_pytorch_positions_per_s": theirs.get("pos_per_s"),
            "nnue_pytorch_cores_used": theirs.get("avg_cores_used")}
    if theirs.get("pos_per_s"):
        pair["ratio_ours_lightning_vs_nnue_pytorch"] = pair["ours_lightning_positions_per_s"] / theirs["pos_per_s"]
    pair["prefetch_after_vs_before_plain"] = (pair["ours_plain_positions_per_s"]
                                              / pair["ours_plain_no_prefetch_positions_per_s"])
    pairs.append({"summary": pair, "ours": ours, "nnue_pytorch": theirs})
res = {"benchmark": "train: nnue-forge's training step beside nnue-pytorch's, HalfKAv2_hm -> 256 with layer stacks, "
                    "batch 16,384, small.binpack, alternating pairs on the same cores",
       "ours_command": "nnue bench train features=halfkav2_hm model=deep model.hidden=256 model.factoriser=true "
                       "--steps 24 --warmup 3 --rounds 2 --variants lightning,plain --baseline data.prefetch=0",
       "nnue_pytorch_command": "NPA=... ../shared/anchors/nnue-pytorch/run_train.sh NAME 256 STEPS "
                               "(HalfKAv2_hm^, its train.py unchanged, 1 loader worker, steady window after 20 steps)",
       "rates": "window positions/s (ours: timed positions / timed wall time; nnue-pytorch: its steady window)",
       "pairs": pairs}
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(res, f, indent=1)
    f.write("\n")
os.replace(tmp, out)
print(json.dumps([p["summary"] for p in pairs], indent=1))
PY
