#!/usr/bin/env bash
# Build tests/c/sf_features.cpp against a Stockfish source tree: a program that prints Stockfish's
# own SFNNv16 feature lists (FullThreats, PP_3Wide, HalfKAv2_hm append_active_indices/make_index)
# for FENs, which tests/features/test_threats_stockfish.py compares with ours.
#   bash scripts/build_sf_features.sh STOCKFISH_DIR [OUT]
# STOCKFISH_DIR: a Stockfish checkout (its src/ folder is used; master 762dd1da has SF 19's
# features), or a bare git directory (its HEAD is exported). OUT defaults to
# ${XDG_CACHE_HOME:-~/.cache}/nnue-forge/sf19-features/sf_features, where the test looks.
# Needs g++ (C++20); about 1 CPU-minute.
set -euo pipefail
src=${1:?usage: build_sf_features.sh STOCKFISH_DIR [OUT]}
out=${2:-${XDG_CACHE_HOME:-$HOME/.cache}/nnue-forge/sf19-features/sf_features}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -d "$src/src" ]; then
  cp -r "$src/src" "$work/src"
elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$src" archive HEAD src | tar -x -C "$work"
else
  echo "build_sf_features: $src is neither a Stockfish checkout nor a git directory" >&2
  exit 2
fi
flags=(-O1 -std=c++20 -DNDEBUG -DIS_64BIT -DUSE_POPCNT -DNNUE_EMBEDDING_OFF -mpopcnt -pthread -w -I"$work/src")
objs=()
for f in "$work"/src/*.cpp "$work"/src/nnue/*.cpp "$work"/src/nnue/features/*.cpp "$work"/src/syzygy/*.cpp; do
  [ "$(basename "$f")" = main.cpp ] && continue
  o="$work/$(echo "${f#"$work"/src/}" | tr / _).o"
  g++ "${flags[@]}" -c "$f" -o "$o"
  objs+=("$o")
done
g++ "${flags[@]}" -c "$here/tests/c/sf_features.cpp" -o "$work/harness.o"
mkdir -p "$(dirname "$out")"
g++ -pthread "$work/harness.o" "${objs[@]}" -o "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
