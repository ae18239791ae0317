#!/usr/bin/env bash
# A net written by nnue-pytorch's own serializer, for the Stockfish 19 parity tests: a short CPU
# training of nnue-pytorch's default net (SFNNv16: Full_Threats+PP_3Wide+HalfKAv2_hm^, L1 1,024 unless
# L1 is set) on a .binpack, then its serialize.py (LEB128, its defaults) -> OUT.
#
# Usage: NPA=DIR scripts/npa_sf19_net.sh [OUT.nnue]
#   NPA    the folder nnue-pytorch was built in (shared/anchors/nnue-pytorch/setup.sh: DIR/src, DIR/venv)
#   OUT    default ${XDG_CACHE_HOME:-~/.cache}/nnue-forge/npa/sf19-default.nnue (sf19-l<L1>.nnue for
#          another L1), where the tests look (every .nnue there; NNUE_NPA_NET names one file instead)
#   DATA   training data (default ../shared/data/public/small.binpack)
#   STEPS (20), BS (4096), L1 (1024), THREADS (nproc): the run's length and shape
# Prints the commands, the time each took and the file written (size, SHA-256).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
NPA=${NPA:?set NPA to the folder nnue-pytorch was built in (its src/ and venv/)}
STEPS=${STEPS:-20}; BS=${BS:-4096}; L1=${L1:-1024}; THREADS=${THREADS:-$(nproc)}
name=sf19-default.nnue; [ "$L1" = 1024 ] || name=sf19-l$L1.nnue
OUT=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/nnue-forge/npa/$name}
DATA=${DATA:-$repo/../shared/data/public/small.binpack}
[ -f "$NPA/src/train.py" ] && [ -x "$NPA/venv/bin/python" ] || { echo "npa_sf19_net: no nnue-pytorch build in $NPA (src/train.py, venv/)" >&2; exit 2; }
[ -f "$DATA" ] || { echo "npa_sf19_net: no training data at $DATA (set DATA)" >&2; exit 2; }
DATA=$(readlink -f "$DATA")
mkdir -p "$(dirname "$OUT")"
OUT=$(readlink -f "$OUT")
run="$NPA/runs/sf19-l$L1-s$STEPS-b$BS"
rm -rf "$run"; mkdir -p "$run"
cd "$NPA/src"
train=(train.py "$DATA" --l1 "$L1" --accelerator cpu --threads "$THREADS" --num-workers 1 --batch-size "$BS"
       --epoch-size $((STEPS * BS)) --max-epochs 1 --validation-size 0 --network-save-period 1
       --default-root-dir "$run")
echo "+ cd $NPA/src && $NPA/venv/bin/python ${train[*]}" >&2
t0=$(date +%s)
"$NPA/venv/bin/python" "${train[@]}" > "$run/train.log" 2>&1 || { tail -5 "$run/train.log" >&2; exit 1; }
t1=$(date +%s)
ckpt=$(find "$run" -name last.ckpt | head -1)
[ -n "$ckpt" ] || { echo "npa_sf19_net: the training wrote no last.ckpt under $run" >&2; exit 1; }
tmp="$OUT.tmp-$$.nnue"
ser=(serialize.py "$ckpt" "$tmp" --l1 "$L1")
echo "+ $NPA/venv/bin/python ${ser[*]}" >&2
"$NPA/venv/bin/python" "${ser[@]}" > "$run/serialize.log" 2>&1 || { tail -5 "$run/serialize.log" >&2; rm -f "$tmp"; exit 1; }
mv -f "$tmp" "$OUT"
t2=$(date +%s)
echo "trained $STEPS steps of $BS (L1 $L1) in $((t1 - t0)) s, serialized in $((t2 - t1)) s (load $(cut -d' ' -f1-3 /proc/loadavg)): $OUT ($(stat -c %s "$OUT") bytes, SHA-256 $(sha256sum "$OUT" | cut -c1-64))"
