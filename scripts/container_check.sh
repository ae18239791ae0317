#!/usr/bin/env bash
# Build the Dockerfile with podman and run the image: `nnue --version`, the demo (scripts/demo.sh on
# the bundled data/demo) and one test file. No image registry is needed: the base is Debian 12
# (bookworm, python3.11) made with debootstrap from Debian's archive and passed as the BASE build
# argument (the Dockerfile's default stays NVIDIA's public CUDA image); pip reads PyPI, and torch's
# CPU wheel from NNUE_WHEELS (default /opt/wheels) when it is there, else from download.pytorch.org.
#
# Usage: scripts/container_check.sh [--apptainer] [RESULT_JSON]   (default bench/results/container_check.json)
#   --apptainer  then converts the image to Apptainer's .sif as docs/getting-started.md says (podman
#                save --format oci-archive, apptainer build ... oci-archive://...) and runs `nnue --version`
#                and the demo with apptainer exec; its result goes beside RESULT_JSON, as
#                <RESULT_JSON without .json>_apptainer.json. Skipped, saying why, where no apptainer is
#                found. Off by default. Its files (the archive, the .sif, Apptainer's cache and
#                temporary copy, the demo's output: about 7 GB at the peak) go to a new folder under
#                /var/tmp, removed at exit.
# Env:   NNUE_CONTAINER_CACHE  where the base's root file system is cached as a tar
#                              (default ~/.cache/nnue-forge/container)
#        CHECK_TEST            the test file run in the image (default tests/cli/test_thin_cli.py)
#        NNUE_WHEELS           a folder holding torch-2.13.0+cpu's wheel (default /opt/wheels)
#        NNUE_APPTAINER        the apptainer command for --apptainer (default apptainer), e.g.
#                              "bash scripts/apptainer_chroot.sh /work/appt-sid" where the host has no
#                              package (Debian 12): it runs sid's apptainer in a chroot
# Needs podman and debootstrap (installed with apt-get when missing and we are root) and the
# network (Debian's archive, PyPI). Cached: the base (tar and podman image) and podman's layers, so a
# rerun rebuilds only the layers whose files changed. Exit status 0 when every step passed; the
# JSON records each step's seconds and output, and how podman was made to run here.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
START=$(date +%s)
WITH_APPTAINER=0
if [ "${1:-}" = --apptainer ]; then WITH_APPTAINER=1; shift; fi
RESULT=${1:-bench/results/container_check.json}
APPT_RESULT=${RESULT%.json}_apptainer.json
CACHE=${NNUE_CONTAINER_CACHE:-$HOME/.cache/nnue-forge/container}
CHECK_TEST=${CHECK_TEST:-tests/cli/test_thin_cli.py}
WHEELS=${NNUE_WHEELS:-/opt/wheels}
BASE=localhost/nnue-forge-base:bookworm
IMAGE=localhost/nnue-forge:check
TEST_IMAGE=localhost/nnue-forge:check-test
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$CACHE"
LOG=$(mktemp -d)
PODMAN_TMP="" APPT_DIR=""
trap 'rm -rf "$LOG" ${PODMAN_TMP:+"$PODMAN_TMP"} ${APPT_DIR:+"$APPT_DIR"}' EXIT
say() { echo "container_check: $*" >&2; }
die() { say "$*"; exit 1; }

# ---- tools
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || die "needs ${missing[*]} (Debian: apt-get install podman debootstrap)"
  say "installing ${missing[*]} runc with apt-get..."
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman debootstrap runc >/dev/null
fi
[ "$(id -u)" = 0 ] || die "run as root: debootstrap needs it (rootless podman would need subuid ranges too)"

# ---- disk. A build from nothing keeps about 4 GB of layers (base, torch, dependencies) in podman's
# storage; while a step's layer is committed, podman also holds the step's files and two temporary
# copies of the layer (in TMPDIR, /var/tmp by default): about 8 GB at the peak. Where the disk has
# less than 12 GB free and memory has room, the temporary copies go to a folder in /dev/shm
# (memory, removed at exit) instead.
free_gb() { df --output=avail -k "$1" 2>/dev/null | tail -1 | awk '{printf "%.1f", $1 / 1048576}'; }
mkdir -p /var/lib/containers
disk_free_before=$(free_gb /var/lib/containers)
podman_tmp_from=${TMPDIR:+TMPDIR}
if [ -z "${TMPDIR:-}" ]; then
  podman_tmp_from=/var/tmp
  mem_gb=$(awk '/MemAvailable/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)
  if awk -v d="$(free_gb /var/tmp)" -v s="$(free_gb /dev/shm)" -v m="$mem_gb" 'BEGIN {exit !(d < 12 && s > 6 && m > 10)}'; then
    PODMAN_TMP=$(mktemp -d /dev/shm/nnue-forge-podman.XXXXXX)
    export TMPDIR=$PODMAN_TMP
    podman_tmp_from="/dev/shm (disk: $(free_gb /var/tmp) GB free, memory: $mem_gb GB available)"
  fi
fi
awk -v d="$disk_free_before" 'BEGIN {exit !(d < 8)}' \
  && say "warning: $disk_free_before GB free for podman's storage; a build from nothing needs about 8 GB"

# ---- the base: Debian 12 from debootstrap, cached as a tar of its root file system
t0=$(date +%s)
base_from=podman-storage
if ! podman image exists "$BASE"; then
  tarball=$CACHE/debian-bookworm-python3.11.tar
  if [ ! -s "$tarball" ]; then
    base_from=debootstrap
    say "debootstrap bookworm (minbase + python3, python3-venv) into $CACHE ..."
    rm -rf "$CACHE/rootfs"
    debootstrap --variant=minbase --include=ca-certificates,python3,python3-venv bookworm "$CACHE/rootfs" "$MIRROR" \
      > "$LOG/debootstrap.log" 2>&1 || { tail -20 "$LOG/debootstrap.log" >&2; die "debootstrap failed"; }
    # the image's apt reads the same archive (debootstrap leaves only the main suite)
    printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
      "$MIRROR" "$MIRROR" > "$CACHE/rootfs/etc/apt/sources.list"
    rm -rf "$CACHE/rootfs/var/cache/apt/archives/"*.deb "$CACHE/rootfs/var/lib/apt/lists/"*
    tar -C "$CACHE/rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$CACHE/rootfs"
  else
    base_from=cached-tar
  fi
  podman import --quiet --change 'CMD ["/bin/bash"]' "$tarball" "$BASE" >/dev/null
fi
base_s=$(( $(date +%s) - t0 ))

# ---- how podman runs here. Tried in order; the first that runs `true` in the base wins:
#  default; ulimits no higher than ours (without CAP_SYS_RESOURCE the runtime cannot raise
#  RLIMIT_NOFILE/NPROC to podman's defaults); and runc (crun refuses hybrid cgroup v1+v2 hosts).
nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576
nproc=$(ulimit -Hu); pid_max=$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 32768)
{ [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pid_max" ]; } && nproc=$pid_max
ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
GLOBAL=() RUNOPTS=() how=""
for try in default ulimits runc; do
  case $try in
    default) g=(); r=() ;;
    ulimits) g=(); r=("${ULIMITS[@]}") ;;
    runc) command -v runc >/dev/null || continue; g=(--runtime runc); r=("${ULIMITS[@]}") ;;
  esac
  if podman "${g[@]}" run --rm "${r[@]}" "$BASE" true > "$LOG/try-$try.log" 2>&1; then
    GLOBAL=("${g[@]}") RUNOPTS=("${r[@]}") how=$try
    break
  fi
  say "podman run with '$try' settings: $(tail -1 "$LOG/try-$try.log")"
done
[ -n "$how" ] || die "podman cannot run a container here (see the lines above)"
say "podman runs with the '$how' settings: ${GLOBAL[*]} ${RUNOPTS[*]}"
P=(podman "${GLOBAL[@]}")
# what the base holds (Debian point release, Python) and the tools' versions, for the JSON
base_debian=$("${P[@]}" run --rm "${RUNOPTS[@]}" "$BASE" cat /etc/debian_version 2>/dev/null || echo unknown)
base_python=$("${P[@]}" run --rm "${RUNOPTS[@]}" "$BASE" python3 --version 2>/dev/null || echo unknown)
debootstrap_v=$(dpkg-query -W -f='${Version}' debootstrap 2>/dev/null || echo unknown)
runtime_v=$( { [ "$how" = runc ] && runc --version || crun --version; } 2>/dev/null | head -1)

# ---- build (runtime image, then the test stage on top of it)
BUILD=(--build-arg "BASE=$BASE" --build-arg "TORCH=torch==2.13.0+cpu" --network host "${RUNOPTS[@]}")
# pip's settings for the build's RUN steps, as a pip.conf mounted at /etc/pip.conf (a config file
# reaches pip's own subprocesses, e.g. the isolated build of the project, where options do not)
printf '[global]\n' > "$LOG/pip.conf"
if compgen -G "$WHEELS/torch-2.13.0+cpu-*.whl" >/dev/null; then
  BUILD+=(--volume "$WHEELS:/wheels:ro")
  printf 'find-links = /wheels\n' >> "$LOG/pip.conf"
  wheels="$WHEELS (mounted at build time)"
else
  printf 'extra-index-url = https://download.pytorch.org/whl/cpu\n' >> "$LOG/pip.conf"
  wheels="https://download.pytorch.org/whl/cpu"
fi
# a TLS-intercepting proxy's CA (pip's PIP_CERT on this host): the image's CA bundle does not hold it
if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then
  BUILD+=(--volume "$PIP_CERT:/host-ca.crt:ro")
  printf 'cert = /host-ca.crt\n' >> "$LOG/pip.conf"
fi
BUILD+=(--volume "$LOG/pip.conf:/etc/pip.conf:ro")
pip_conf=$(tr '\n' ' ' < "$LOG/pip.conf")
t0=$(date +%s)
"${P[@]}" build "${BUILD[@]}" -t "$IMAGE" . > "$LOG/build.log" 2>&1 || { tail -30 "$LOG/build.log" >&2; die "build failed"; }
"${P[@]}" build "${BUILD[@]}" --target test -t "$TEST_IMAGE" . > "$LOG/build-test.log" 2>&1 \
  || { tail -30 "$LOG/build-test.log" >&2; die "build of the test stage failed"; }
build_s=$(( $(date +%s) - t0 ))
cached_steps=$(grep -c -- '--> Using cache' "$LOG/build.log" || true)
all_steps=$(grep -c 'STEP [0-9]' "$LOG/build.log" || true)

# ---- run
run_cmd() {  # name cmd...: runs, keeps output, seconds and status
  local name=$1; shift
  local t=$(date +%s) rc=0
  "$@" > "$LOG/$name.out" 2>&1 || rc=$?
  echo $(( $(date +%s) - t )) > "$LOG/$name.s"
  echo $rc > "$LOG/$name.rc"
  [ $rc = 0 ] || { tail -30 "$LOG/$name.out" >&2; say "$name failed (status $rc)"; }
  return $rc
}
run_step() {  # name image cmd...: runs cmd in the image
  local name=$1 image=$2; shift 2
  run_cmd "$name" "${P[@]}" run --rm "${RUNOPTS[@]}" "$image" "$@" || true
}
run_step version "$IMAGE" nnue --version
run_step demo "$IMAGE" bash scripts/demo.sh /tmp/demo-out
run_step test "$TEST_IMAGE" python -m pytest -q -p no:cacheprovider "$CHECK_TEST"

# ---- optional (--apptainer): the .sif from the image, as docs/getting-started.md says, and its runs
appt_state=off appt_v="" appt_sif_bytes=0 appt_tar_bytes=0 appt_missing=""
if [ $WITH_APPTAINER = 1 ]; then
  read -ra APPT <<< "${NNUE_APPTAINER:-apptainer}"
  if ! command -v "${APPT[0]}" >/dev/null; then
    appt_state="skipped: no '${APPT[0]}' found (NNUE_APPTAINER names the command)"
    say "--apptainer $appt_state"
  else
    appt_state=ran
    APPT_DIR=$(mktemp -d /var/tmp/nnue-forge-apptainer.XXXXXX)
    # Apptainer's layer cache and temporary root file system in the same folder, removed at exit
    export APPTAINER_CACHEDIR=$APPT_DIR/cache APPTAINER_TMPDIR=$APPT_DIR/tmp
    mkdir -p "$APPTAINER_CACHEDIR" "$APPTAINER_TMPDIR"
    appt_v=$("${APPT[@]}" --version 2>&1 | tail -1)
    say "apptainer ($appt_v): podman save, apptainer build, then nnue --version and the demo with apptainer exec ..."
    SIF=$APPT_DIR/nnue-forge.sif
    run_cmd a_save "${P[@]}" save --format oci-archive -o "$APPT_DIR/nnue-forge.tar" "$IMAGE" \
      && run_cmd a_build "${APPT[@]}" build "$SIF" "oci-archive://$APPT_DIR/nnue-forge.tar" \
      && { run_cmd a_version "${APPT[@]}" exec "$SIF" nnue --version
           run_cmd a_demo "${APPT[@]}" exec "$SIF" bash /opt/nnue-forge/scripts/demo.sh "$APPT_DIR/demo-out"; } || true
    appt_tar_bytes=$(stat -c %s "$APPT_DIR/nnue-forge.tar" 2>/dev/null || echo 0)
    appt_sif_bytes=$(stat -c %s "$SIF" 2>/dev/null || echo 0)
    # the demo's files, written outside the read-only image
    for f in dataset run/checkpoints/last.ckpt net/net.safetensors net/net.bin net/export.json fens.txt; do
      [ -s "$APPT_DIR/demo-out/$f" ] || [ -d "$APPT_DIR/demo-out/$f" ] || appt_missing+="$f "
    done
    [ -z "$appt_missing" ] || say "apptainer demo: missing output: $appt_missing"
    rm -f "$APPT_DIR/nnue-forge.tar"
  fi
fi

# ---- result
size=$("${P[@]}" image inspect "$IMAGE" --format '{{.Size}}')
mkdir -p "$(dirname "$RESULT")"
LOG=$LOG REPO=$REPO python3 - "$RESULT.tmp" <<PYEOF
import json, os, platform, subprocess, sys, time
log = os.environ["LOG"]
def read(name, default=""):
    p = os.path.join(log, name)
    return open(p, errors="replace").read() if os.path.exists(p) else default
def step(name):
    out = read(name + ".out")
    return {"status": int(read(name + ".rc", "1")), "seconds": int(read(name + ".s", "0")), "output": out}
def demo_step(name):
    s = step(name)
    demo = s["output"].splitlines()
    # the demo's evals and summary (what the README shows), not its progress lines
    s["evals_and_summary"] = [l for l in demo if l.split(" ", 1)[0].lstrip("-").isdigit() or l.startswith(("summary", "  "))]
    s["output"] = "\n".join(demo[-60:])
    return s
steps = {"version": step("version"), "demo": demo_step("demo"), "test": step("test")}
tail = [l for l in steps["test"]["output"].splitlines() if l.strip()]
steps["test"]["summary"] = tail[-1] if tail else ""
steps["test"]["file"] = "$CHECK_TEST"
commit = subprocess.run(["git", "-C", os.environ["REPO"], "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
dirty = bool(subprocess.run(["git", "-C", os.environ["REPO"], "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True).stdout.strip())
podman = subprocess.run(["podman", "--version"], capture_output=True, text=True).stdout.strip()
res = {"benchmark": "container: scripts/container_check.sh, podman build of the Dockerfile on a debootstrapped Debian 12 base, "
                "then nnue --version, the demo and one test file in the image",
       "passed": all(s["status"] == 0 for s in steps.values()),
       "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit + ("+dirty" if dirty else ""),
       "host": {"kernel": platform.release(), "cpu_count": os.cpu_count(), "load_average_after": os.getloadavg()},
       "seconds_total": int(time.time()) - $START,
       "podman": podman, "runtime": "$runtime_v", "debootstrap": "$debootstrap_v",
       "disk_free_gb_before": $disk_free_before, "podman_tmpdir": "$podman_tmp_from", "podman_settings": {"tried_first_that_ran": "$how", "global": "${GLOBAL[*]}",
                                             "run_and_build": "${RUNOPTS[*]}"},
       "base": {"image": "$BASE", "made_by": "$base_from", "seconds": $base_s,
                "debian_version": "$base_debian", "python": "$base_python",
                "what": "debootstrap --variant=minbase --include=ca-certificates,python3,python3-venv bookworm"},
       "build": {"seconds": $build_s, "steps_from_cache": $cached_steps, "steps": $all_steps,
                 "build_args": "BASE=$BASE TORCH=torch==2.13.0+cpu", "pip_conf_mounted": "$pip_conf", "torch_wheel_from": "$wheels",
                 "image": "$IMAGE", "image_bytes": int("$size" or 0)},
       "apptainer_step": "$appt_state" + (" (result: $APPT_RESULT)" if "$appt_state" == "ran" else ""),
       "steps": steps}
json.dump(res, open(sys.argv[1], "w"), indent=1)
open(sys.argv[1], "a").write("\n")
print(json.dumps({k: res[k] for k in ("passed", "commit")} | {s: (v["status"], v["seconds"]) for s, v in steps.items()}))
if "$appt_state" == "ran":
    a = {"save": step("a_save"), "build": step("a_build"), "version": step("a_version"), "demo": demo_step("a_demo")}
    missing = "$appt_missing".split()
    ares = {"benchmark": "apptainer: scripts/container_check.sh --apptainer, the podman image saved as an OCI archive, "
                         "apptainer build of a .sif from it, then nnue --version and the demo with apptainer exec",
            "passed": all(v["status"] == 0 for v in a.values()) and not missing,
            "date_utc": res["date_utc"], "commit": res["commit"], "host": res["host"],
            "apptainer": "$appt_v", "apptainer_command": "${APPT[*]:-}", "image": "$IMAGE",
            "commands": ["podman save --format oci-archive -o DIR/nnue-forge.tar $IMAGE",
                         "apptainer build DIR/nnue-forge.sif oci-archive://DIR/nnue-forge.tar",
                         "apptainer exec DIR/nnue-forge.sif nnue --version",
                         "apptainer exec DIR/nnue-forge.sif bash /opt/nnue-forge/scripts/demo.sh DIR/demo-out"],
            "oci_archive_bytes": $appt_tar_bytes, "sif_bytes": $appt_sif_bytes,
            "demo_outputs_missing": missing, "steps": a}
    json.dump(ares, open(sys.argv[1] + ".apptainer", "w"), indent=1)
    open(sys.argv[1] + ".apptainer", "a").write("\n")
    print(json.dumps({"apptainer_passed": ares["passed"]} | {s: (v["status"], v["seconds"]) for s, v in a.items()}))
PYEOF
mv "$RESULT.tmp" "$RESULT"
say "result: $RESULT"
if [ "$appt_state" = ran ]; then
  mv "$RESULT.tmp.apptainer" "$APPT_RESULT"
  say "apptainer result: $APPT_RESULT"
fi
for s in version demo test; do [ "$(cat "$LOG/$s.rc")" = 0 ] || exit 1; done
if [ "$appt_state" = ran ]; then
  for s in a_save a_build a_version a_demo; do [ "$(cat "$LOG/$s.rc" 2>/dev/null)" = 0 ] || exit 1; done
  [ -z "$appt_missing" ] || exit 1
fi
