#!/usr/bin/env bash
# Strength inside Stockfish 19: the fine-tuned official net (bench/sf19_finetune.sh WORK: WORK/net/net.nnue)
# against the official net nn-1a298aa575a0.nnue, both in the real engine (scripts/sf19-uci, the net
# through EvalFile), at a fixed node count, paired games from the shipped balanced book, under the
# SPRT with bounds [ELO0, ELO1] normalized Elo (default [-10, 0]: H1 "the fine-tune loses less than
# 10 nElo", H0 "it loses 10 or more"); stops at a bound or after GAMES games. A rerun resumes.
# Writes WORK/m_sf19/match.json and match.pgn; SAVE=1 copies match.json to
# bench/results/sf19_strength/.
# Usage: [NODES=2000] [GAMES=2000] [ELO0=-10] [ELO1=0] [CONCURRENCY=2] [SAVE=1] bash bench/sf19_strength.sh WORK
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
W=$(cd "${1:?usage: bash bench/sf19_strength.sh WORK (the folder of bench/sf19_finetune.sh)}" && pwd)
NET=$W/net/net.nnue
[ -f "$NET" ] || { echo "sf19_strength: no $NET: run bench/sf19_finetune.sh $W first" >&2; exit 2; }
SF=$PWD/scripts/sf19-uci
nnue match --engine "$SF" --engine-option "EvalFile=$NET" --engine "$SF" \
  --nodes "${NODES:-2000}" --max-games "${GAMES:-2000}" --elo0 "${ELO0:--10}" --elo1 "${ELO1:-0}" \
  --concurrency "${CONCURRENCY:-2}" -o "$W/m_sf19" --quiet
if [ "${SAVE:-0}" = 1 ]; then mkdir -p bench/results/sf19_strength && cp "$W/m_sf19/match.json" bench/results/sf19_strength/; fi
