#!/usr/bin/env bash
# Make Debian's Stockfish 15.1 (/usr/games/stockfish) available for the tests that drive a real
# UCI engine (nnue datagen, nnue annotate --base stockfish-classical, nnue match --engine).
# Installs it with apt-get when it is missing and we are root; otherwise says why and exits 0,
# and those tests skip with the reason. Prints nothing when the engine is already there.
set -uo pipefail
if [ -x /usr/games/stockfish ] || command -v stockfish >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure_stockfish: not root or no apt-get; tests that need Stockfish will skip" >&2
  exit 0
fi
echo "ensure_stockfish: installing Debian's stockfish package..." >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq stockfish >/dev/null 2>&1; }; then
  echo "ensure_stockfish: apt-get install stockfish failed; tests that need Stockfish will skip" >&2
fi
exit 0
