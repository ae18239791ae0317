#!/usr/bin/env bash
# Strength inside Stockfish 19: the fine-tuned official net (bench/sf19_finetune.sh WORK: WORK/net/net.nnue)
# against the official net nn-1a298aa575a0.nnue, both in the real engine (scripts/sf19-uci, the net
# through EvalFile), at a fixed node count, paired games from the shipped balanced book, under the
# SPRT with bounds [ELO0, ELO1] normalized Elo (default [-10, 0]: H1 "the fine-tune loses less than
# 10 nElo", H0 "it loses 10 or more"); stops at a bound or after GAMES games. A rerun resumes.
# Openings: BOOK (a book in the shipped book's format), default the shipped balanced book (220 lines).
# Stockfish at a fixed node count from a cleared hash (ucinewgame) is deterministic, so an opening
# played again with the same colours replays the same game: GAMES defaults to two per book line
# (a larger budget only repeats games and shrinks the error bars falsely). A book of more lines:
#   python -m nnue.selfplay.book -o RAW -n 1500 --seed 19 --pick-depth 6 --depth 10 --max-cp 35
#   python -m nnue.selfplay.book --recheck RAW --depth 12 --max-cp 40 -o BOOK
# (Stockfish 15.1, as the shipped book was made; bench/results/sf19_strength/book1314.txt is the one used.)
# Writes WORK/m_sf19[_NAME]/match.json and match.pgn (NAME: the book file's stem when BOOK is given);
# SAVE=1 copies match.json (and the book) to bench/results/sf19_strength/.
# Usage: [NODES=2000] [BOOK=FILE] [GAMES=2*lines] [ELO0=-10] [ELO1=0] [CONCURRENCY=2] [SAVE=1] \
#          bash bench/sf19_strength.sh WORK
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
W=$(cd "${1:?usage: bash bench/sf19_strength.sh WORK (the folder of bench/sf19_finetune.sh)}" && pwd)
NET=$W/net/net.nnue
[ -f "$NET" ] || { echo "sf19_strength: no $NET: run bench/sf19_finetune.sh $W first" >&2; exit 2; }
SF=$PWD/scripts/sf19-uci
BOOK=${BOOK:-}
if [ -n "$BOOK" ]; then
  BOOK=$(cd "$(dirname "$BOOK")" && pwd)/$(basename "$BOOK")
  LINES=$(grep -cv '^\(#\|$\)' "$BOOK")
  OUT=$W/m_sf19_$(basename "${BOOK%.*}")
  BOOK_ARGS=(--book "$BOOK")
else
  LINES=220  # the shipped book
  OUT=$W/m_sf19
  BOOK_ARGS=()
fi
rc=0
nnue match --engine "$SF" --engine-option "EvalFile=$NET" --engine "$SF" "${BOOK_ARGS[@]}" \
  --nodes "${NODES:-2000}" --max-games "${GAMES:-$((2 * LINES))}" --elo0 "${ELO0:--10}" --elo1 "${ELO1:-0}" \
  --concurrency "${CONCURRENCY:-2}" -o "$OUT" --quiet || rc=$?
if [ "${SAVE:-0}" = 1 ]; then
  mkdir -p bench/results/sf19_strength
  cp "$OUT/match.json" "bench/results/sf19_strength/$(basename "$OUT").json"
  if [ -n "$BOOK" ] && ! [ "$BOOK" -ef "bench/results/sf19_strength/$(basename "$BOOK")" ]; then
    cp "$BOOK" bench/results/sf19_strength/
  fi
fi
exit $rc
