#!/usr/bin/env bash
# Run Apptainer from a Debian sid chroot, for hosts without an Apptainer package (Debian 12 has
# none; sid's `apptainer` needs a newer libc than bookworm's). Made for scripts/container_check.sh
# --apptainer: NNUE_APPTAINER="bash scripts/apptainer_chroot.sh ROOT" runs the check's apptainer
# steps through it.
#
# Usage: scripts/apptainer_chroot.sh ROOT APPTAINER_ARGS...   (as root)
# The first call makes ROOT with debootstrap (sid, minbase + apptainer and squashfs-tools, about
# 400 MB; DEBIAN_MIRROR picks the archive). Each call runs `apptainer APPTAINER_ARGS...` chrooted
# in ROOT, in a mount namespace of its own (its mounts vanish when it ends): ROOT bound on itself
# (Apptainer looks its folders' mount points up in /proc/self/mountinfo, and a chroot that is not
# a mount point has none: "failed to find mount point for /tmp"), /proc, /sys, /dev, and the
# host's /var/tmp and the current folder at the same paths, so paths under them mean the same
# inside. Apptainer's build reads /etc/hosts, which debootstrap does not write: the host's is copied.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 ROOT APPTAINER_ARGS..." >&2; exit 2; }
ROOT=$(realpath -m "$1"); shift
[ "$(id -u)" = 0 ] || { echo "apptainer_chroot: run as root (debootstrap, chroot, mounts)" >&2; exit 2; }
if [ ! -x "$ROOT/usr/bin/apptainer" ]; then
  command -v debootstrap >/dev/null || { echo "apptainer_chroot: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
  echo "apptainer_chroot: debootstrap sid with apptainer into $ROOT ..." >&2
  debootstrap --variant=minbase --include=apptainer,squashfs-tools,ca-certificates sid "$ROOT" \
    "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" > "$ROOT.debootstrap.log" 2>&1 \
    || { tail -20 "$ROOT.debootstrap.log" >&2; echo "apptainer_chroot: debootstrap failed" >&2; exit 1; }
fi
[ -s "$ROOT/etc/hosts" ] || cp /etc/hosts "$ROOT/etc/hosts"
# Run as root, Apptainer's starter asks for every capability ("root default capabilities = full");
# where this process's bounding set lacks some (e.g. CAP_SYS_RESOURCE in some VMs and containers)
# it stops with "Requesting capability set ... while permitted capability set is ...": there root
# gets only the capabilities its configuration files grant ("file").
full=$(( (1 << ($(cat /proc/sys/kernel/cap_last_cap) + 1)) - 1 ))
bnd=$(( 16#$(awk '/^CapBnd/ {print $2}' /proc/self/status) ))
if [ "$bnd" != "$full" ]; then
  sed -i 's/^root default capabilities = full$/root default capabilities = file/' "$ROOT/etc/apptainer/apptainer.conf"
fi
export ROOT HERE=$PWD
exec unshare --mount --propagation private bash -c '
  set -e
  mount --bind "$ROOT" "$ROOT"
  for d in proc sys dev; do mount --rbind "/$d" "$ROOT/$d"; done
  for d in /var/tmp "$HERE"; do
    [ "$d" = / ] && continue
    mkdir -p "$ROOT$d" && mount --bind "$d" "$ROOT$d"
  done
  # pivot_root, not chroot: Apptainer refuses a chroot ("Running inside a weak chrooted environment")
  cd "$ROOT" && mkdir -p .host-root && pivot_root . .host-root
  cd / && umount -l /.host-root
  cd "$HERE"
  exec apptainer "$@"
' - "$@"
