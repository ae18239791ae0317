#!/usr/bin/env bash
# Closing the loop (issue 13 part 4): self-play with the current net -> pack -> train (warm start
# from that net's weights) -> export -> match new vs old with the SPRT result printed.
#
# Usage: [GAMES=200] [NODES=32] [MATCH_GAMES=200] [THREADS=1] [EPOCHS=3] [SAVE=1] \
#        [NET0=NET CKPT0=WEIGHTS] [TRAIN="extra nnue train overrides"] bash bench/loop_selfplay.sh [WORK_DIR]
#   NET0/CKPT0: the old net (net.safetensors) and the float weights it was exported from
#   (weights-*.safetensors); default: the demo net, demo-out/ from scripts/demo.sh (made if missing).
#   WORK_DIR (default: a fresh temporary folder) ends up holding selfplay/, dataset/, run/, net/,
#   match/ (match.pgn, match.json) and loop.json (every step's summary and wall time).
#   SAVE=1 copies loop.json to bench/results/loop_selfplay.json. QUALITY=FILE.plain (default
#   ../shared/data/selfplay/sf15-n2000-s11.plain when present, none: skip) adds both nets'
#   Spearman rho and mean |error| against Stockfish scores of its first 5,000 records
#   (QUALITY_RECORDS to change; bench/loop_quality.py): games neither net was trained on.
# The same sequence by hand (what this script runs, in order):
#   nnue selfplay demo-out/net/net.safetensors -o W/selfplay --games 200 --nodes 32
#   nnue pack W/selfplay -o W/dataset
#   nnue train experiment=demo data.path=W/dataset paths.output_dir=W/run trainer.max_epochs=3 \
#       init_weights=demo-out/run/checkpoints/weights-last.safetensors
#   nnue export W/run/checkpoints/weights-last.safetensors -o W/net
#   nnue match --net W/net/net.safetensors --net demo-out/net/net.safetensors --games 200 --nodes 32 -o W/match
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
W=${1:-$(mktemp -d)}
mkdir -p "$W"
W=$(cd "$W" && pwd)
GAMES=${GAMES:-200}
NODES=${NODES:-32}
MATCH_GAMES=${MATCH_GAMES:-200}
THREADS=${THREADS:-1}
EPOCHS=${EPOCHS:-3}
NET0=${NET0:-demo-out/net/net.safetensors}
CKPT0=${CKPT0:-demo-out/run/checkpoints/weights-last.safetensors}
read -r -a EXTRA <<< "${TRAIN:-}"
if [ ! -f "$NET0" ] || [ ! -f "$CKPT0" ]; then
  [ "$NET0" = demo-out/net/net.safetensors ] || { echo "loop: $NET0 or $CKPT0 missing" >&2; exit 2; }
  bash scripts/demo.sh > "$W/demo.log" 2>&1
fi
t() { date +%s.%N; }

echo "== 1. selfplay: $GAMES games of $NET0 at $NODES nodes" >&2
t0=$(t)
nnue selfplay "$NET0" -o "$W/selfplay" --games "$GAMES" --nodes "$NODES" --threads "$THREADS" --no-progress --json \
  > "$W/selfplay.json"
t1=$(t)
echo "== 2. pack" >&2
nnue pack "$W/selfplay" -o "$W/dataset" --no-progress --json > "$W/pack.json"
t2=$(t)
echo "== 3. train, warm start from $CKPT0" >&2
nnue train experiment=demo data.path="$W/dataset" paths.output_dir="$W/run" trainer.max_epochs="$EPOCHS" \
  init_weights="$(realpath "$CKPT0")" trainer.enable_progress_bar=false "${EXTRA[@]}" > "$W/train.log" 2>&1 \
  || { tail -20 "$W/train.log" >&2; exit 1; }
t3=$(t)
echo "== 4. export" >&2
nnue export "$W/run/checkpoints/weights-last.safetensors" -o "$W/net" --json > "$W/export.json"
t4=$(t)
echo "== 5. match new ($W/net) vs old ($NET0): at most $MATCH_GAMES games at $NODES nodes" >&2
nnue match --net "$W/net/net.safetensors" --net "$NET0" --games "$MATCH_GAMES" --nodes "$NODES" \
  --concurrency "$THREADS" -o "$W/match" --quiet | tee "$W/match.txt"
t5=$(t)
QUALITY=${QUALITY:-../shared/data/selfplay/sf15-n2000-s11.plain}
if [ "$QUALITY" != none ] && [ -f "$QUALITY" ]; then
  echo "== 6. both nets against Stockfish scores: $QUALITY" >&2
  python -m bench.loop_quality "$NET0" "$W/net/net.safetensors" "$QUALITY" --records "${QUALITY_RECORDS:-5000}" \
    > "$W/quality.json"
fi
python - "$W" "$t0" "$t1" "$t2" "$t3" "$t4" "$t5" "$NET0" "$CKPT0" "$EPOCHS" "${TRAIN:-}" <<'PY'
import json, os, platform, sys
w, *ts = sys.argv[1:8]
net0, ckpt0, epochs, extra = sys.argv[8:12]
ts = [float(x) for x in ts]
sp, pk = json.load(open(f"{w}/selfplay.json")), json.load(open(f"{w}/pack.json"))
m = json.load(open(f"{w}/match/match.json"))
metrics = json.load(open(f"{w}/run/metrics.json")) if os.path.exists(f"{w}/run/metrics.json") else {}
r = {"bench": "loop_selfplay", "old_net": net0, "warm_start": ckpt0,
     "selfplay": {k: sp.get(k) for k in ("games", "positions", "nodes", "seconds", "games_per_s", "positions_per_s")},
     "pack": {"read": pk.get("read"), "packed": pk.get("packed"), "rejected": pk.get("rejected")},
     "train": {"recipe": f"experiment=demo trainer.max_epochs={epochs} {extra}".strip(),
               **{k: metrics.get(k) for k in ("val_loss", "val_spearman", "epochs", "global_step")}},
     "match": {k: m.get(k) for k in ("verdict", "llr", "elo", "elo_ci95", "penta", "games", "wdl", "sprt_stopped",
                                     "crashes", "elapsed_s")},
     "match_settings": {k: m["settings"].get(k) for k in ("nodes", "games", "elo0", "elo1", "alpha", "beta",
                                                           "random_plies", "seed", "concurrency")},
     "lines": m.get("lines"),
     "wall_s": {"selfplay": round(ts[1] - ts[0], 1), "pack": round(ts[2] - ts[1], 1), "train": round(ts[3] - ts[2], 1),
                "export": round(ts[4] - ts[3], 1), "match": round(ts[5] - ts[4], 1), "total": round(ts[5] - ts[0], 1)},
     "load_average_1min_at_end": round(os.getloadavg()[0], 2), "machine": f"{platform.machine()}, {os.cpu_count()} cpus"}
if os.path.exists(f"{w}/quality.json"):
    r["quality_vs_stockfish"] = json.load(open(f"{w}/quality.json"))
json.dump(r, open(f"{w}/loop.json", "w"), indent=1)
print(json.dumps(r, indent=1))
PY
if [ "${SAVE:-0}" = 1 ]; then cp "$W/loop.json" bench/results/loop_selfplay.json; fi
