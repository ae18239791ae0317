#!/usr/bin/env bash
# Make the real Stockfish 19 available for the tests and for scripts/sf19-uci: installs, with npm,
# into a cache folder outside the repository (NNUE_SF19_CACHE, default
# ${XDG_CACHE_HOME:-~/.cache}/nnue-forge/sf19):
#   - @lichess-org/stockfish-web@0.5.0, Stockfish 19 built to WebAssembly (sf_19.js), and
#   - the official net nn-1a298aa575a0.nnue, taken out of stockfish@19.0.0's
#     stockfish-19-single.wasm (its data section) and checked by its SHA-256; that package is
#     installed into a temporary folder and removed again.
# Prints nothing when all is there. When npm or Node is missing or the registry cannot be reached,
# says why and exits 0: the tests that need Stockfish 19 then skip with the reason.
set -uo pipefail
cd "$(dirname "$0")/.."
cache="${NNUE_SF19_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nnue-forge/sf19}"
net="$cache/nn-1a298aa575a0.nnue"
engine="$cache/node_modules/@lichess-org/stockfish-web/sf_19.js"
if [ -f "$engine" ] && [ -f "$net" ]; then
  exit 0
fi
say() { echo "ensure_sf19: $*; tests that need Stockfish 19 will skip" >&2; }
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  say "Node.js or npm not found (Debian: apt-get install nodejs npm; Node 20 is what it was tested with)"
  exit 0
fi
py="${PYTHON:-.venv/bin/python}"
[ -x "$py" ] || py=python3
if ! mkdir -p "$cache" 2>/dev/null; then
  say "cannot create the cache folder $cache (set NNUE_SF19_CACHE)"
  exit 0
fi
# One installer at a time per cache folder (several clones share it); the others wait for it.
exec 9>"$cache/.lock"
flock 9 2>/dev/null || true
npm_quiet() { npm "$@" --ignore-scripts --no-audit --no-fund --loglevel=error --fetch-retries=1 >"$cache/npm.log" 2>&1; }
if [ ! -f "$engine" ]; then
  echo "ensure_sf19: installing @lichess-org/stockfish-web@0.5.0 into $cache ..." >&2
  [ -f "$cache/package.json" ] || echo '{"private": true}' > "$cache/package.json"
  if ! npm_quiet install --prefix "$cache" "@lichess-org/stockfish-web@0.5.0"; then
    say "npm install @lichess-org/stockfish-web@0.5.0 failed ($(grep -m1 -i 'err' "$cache/npm.log" || echo 'see '"$cache/npm.log"))"
    exit 0
  fi
fi
if [ ! -f "$net" ]; then
  echo "ensure_sf19: taking the official net out of stockfish@19.0.0 (a 161 MB download) ..." >&2
  tmp=$(mktemp -d "$cache/tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo '{"private": true}' > "$tmp/package.json"
  if ! npm_quiet install --prefix "$tmp" "stockfish@19.0.0"; then
    say "npm install stockfish@19.0.0 failed ($(grep -m1 -i 'err' "$cache/npm.log" || echo 'see '"$cache/npm.log"))"
    exit 0
  fi
  if ! err=$("$py" -m nnue.selfplay.sf19 extract "$tmp/node_modules/stockfish/bin/stockfish-19-single.wasm" "$net" 2>&1); then
    say "$err"
    exit 0
  fi
fi
exit 0
