#!/usr/bin/env bash
# Start a real one-node SLURM cluster on this machine (for `hydra/launcher=submitit_slurm` and the
# tests marked `slurm`): install Debian's slurm-wlm and munge if missing (one apt-get update, only
# when the install needs it), write a one-node slurm.conf for localhost, start munged, slurmctld
# and slurmd, and wait until `sinfo` shows the node idle.
#
# Idempotent: a second call finds the daemons running and the node up, and returns at once.
# Needs root (it installs packages and runs the daemons as root). The configuration is the one
# known to run srun and sbatch in our containers: proctrack/linuxproc, task/none,
# select/cons_tres with CR_CPU, no accounting storage (so `sacct` has no data; submitit reads job
# states from `sacct` and falls back to `squeue`/its own result files).
#
# Exit status: 0 when the node is idle (or mixed/allocated: it runs jobs); 1 with one line on
# stderr saying why not. Logs: /var/log/slurm/{slurmctld,slurmd}.log, /var/log/munge/munged.log.
# Environment: SLURM_UP_TIMEOUT (seconds to wait for the node, default 60).
set -uo pipefail

say() { echo "slurm_up: $*" >&2; }
fail() { say "$*"; exit 1; }

timeout_s=${SLURM_UP_TIMEOUT:-60}
conf=/etc/slurm/slurm.conf
node=localhost

node_state() { sinfo -h -N -n "$node" -o '%t' 2>/dev/null | head -1; }
usable() { case "$(node_state)" in idle*|mix*|alloc*|comp*) return 0 ;; *) return 1 ;; esac; }
running() { pgrep -x "$1" >/dev/null 2>&1; }

# already up: nothing to do
if command -v sinfo >/dev/null 2>&1 && running slurmctld && running slurmd && usable; then
  exit 0
fi

[ "$(id -u)" = 0 ] || fail "not root: cannot install or start SLURM (tests marked slurm will skip)"

# one set-up at a time (parallel test workers may call this together)
exec 9>/tmp/slurm_up.lock
flock -w 600 9 || fail "another slurm_up.sh holds /tmp/slurm_up.lock"
if command -v sinfo >/dev/null 2>&1 && running slurmctld && running slurmd && usable; then
  exit 0
fi

# -- packages -------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
   || ! command -v munged >/dev/null 2>&1 || ! command -v sbatch >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || fail "no apt-get: install slurm-wlm and munge by hand"
  export DEBIAN_FRONTEND=noninteractive
  apt_install() { apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends \
                    slurm-wlm munge >/tmp/slurm_up.apt.log 2>&1; }
  say "installing Debian's slurm-wlm and munge (log: /tmp/slurm_up.apt.log)..."
  if ! apt_install; then
    apt-get update -qq -o DPkg::Lock::Timeout=300 >>/tmp/slurm_up.apt.log 2>&1
    apt_install || fail "apt-get install slurm-wlm munge failed (see /tmp/slurm_up.apt.log)"
  fi
fi

# -- munge ----------------------------------------------------------------------------------
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  if command -v mungekey >/dev/null 2>&1; then
    mungekey --create --keyfile=/etc/munge/munge.key >/dev/null 2>&1
  else
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
fi
if id munge >/dev/null 2>&1; then
  chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
fi
chmod 0700 /etc/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  running munged || rm -f /run/munge/munged.pid /run/munge/munge.socket.2*
  if id munge >/dev/null 2>&1; then
    runuser -u munge -- munged >/dev/null 2>&1 || munged --force >/dev/null 2>&1
  else
    munged --force >/dev/null 2>&1
  fi
  for _ in $(seq 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
  munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || fail "munged did not start (see /var/log/munge/munged.log)"
fi

# -- slurm.conf -----------------------------------------------------------------------------
cpus=$(nproc)
mem_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
mkdir -p /etc/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm /run/slurm
want=$(cat <<EOF
# Written by nnue-forge scripts/slurm_up.sh: one node (this machine), for tests and local sweeps.
ClusterName=nnue-local
SlurmctldHost=$node
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
ReturnToService=2
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
MinJobAge=600
Waittime=0
EOF
)
changed=0
if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "$want" ]; then
  printf '%s\n' "$want" > "$conf.tmp" && mv "$conf.tmp" "$conf"
  changed=1
fi

# -- daemons --------------------------------------------------------------------------------
if [ "$changed" = 1 ]; then  # a new config: restart whatever runs with the old one
  for d in slurmd slurmctld; do
    [ -s /run/slurm/$d.pid ] && kill "$(cat /run/slurm/$d.pid)" 2>/dev/null
  done
  sleep 1
fi
running slurmctld || slurmctld >/dev/null 2>&1 || fail "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
running slurmd || slurmd -N "$node" >/dev/null 2>&1 || fail "slurmd did not start (see /var/log/slurm/slurmd.log)"

deadline=$((SECONDS + timeout_s))
while [ $SECONDS -lt $deadline ]; do
  usable && exit 0
  case "$(node_state)" in
    down*|drain*|fail*) scontrol update nodename="$node" state=resume >/dev/null 2>&1 ;;
  esac
  sleep 1
done
fail "node $node not idle after ${timeout_s}s (sinfo: '$(node_state)'; see /var/log/slurm/*.log)"
