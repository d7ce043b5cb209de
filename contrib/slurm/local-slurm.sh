#!/bin/bash
# A real single-node Slurm on this machine, for trying gossipd.sbatch without
# a cluster: munged, slurmctld and slurmd of Debian's slurm-wlm, this host
# the one node of partition "debug".
#
#   contrib/slurm/local-slurm.sh          set up and start (again: a no-op)
#   contrib/slurm/local-slurm.sh --stop   cancel its jobs, stop what it
#                                         started, remove what it wrote
#
# Why it is shaped so:
# - Containers and CI machines have no systemd as PID 1, so the daemons are
#   started directly and tracked by their pid files, not with systemctl.
# - No accounting (slurmdbd needs a database): sacct does not work; the
#   job's .out file, squeue, and `scontrol show job ID` (for MinJobAge, 300 s
#   after the end) are the record.
# - Nothing here needs cgroups (proctrack/linuxproc, task/none), which a
#   container may not delegate.
# - Running it twice is safe: a running daemon is left alone, and a
#   slurm.conf it did not write is never overwritten (it carries a marker
#   line); --stop stops only the daemons this script started.
# - Slurm refuses more tasks per node than the node has CPUs, --overcommit
#   or not ("Requested node configuration is not available"), and a test of
#   several peers on one node is the point here: the node is declared with
#   at least 8 CPUs (LOCAL_SLURM_CPUS; config_overrides lets slurmd accept
#   more than it finds). The peers then share the real cores.
#
# Needs root. Logs: /var/log/slurm/{slurmctld,slurmd}.log.
set -eu

MARK="# written by gossipd contrib/slurm/local-slurm.sh"
CONF=/etc/slurm/slurm.conf
RUN=/run/gossipd-local-slurm	# what this script started
STATE=/var/spool/slurmctld
SPOOL=/var/spool/slurmd
LOGS=/var/log/slurm
PARTITION=debug

die() { echo "local-slurm: $*" >&2; exit 1; }
say() { echo "local-slurm: $*"; }

[ "$(id -u)" -eq 0 ] || die "needs root (it starts munged, slurmctld and slurmd)"

# alive PIDFILE: the process of that pid file runs.
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_pid NAME PIDFILE: TERM, then KILL after 10 s.
stop_pid() {
	local pid
	alive "$2" || return 0
	pid=$(cat "$2")
	kill -TERM "$pid"
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || { say "stopped $1 (pid $pid)"; return 0; }
		sleep 0.2
	done
	kill -KILL "$pid" 2>/dev/null || true
	say "killed $1 (pid $pid): it did not stop within 10 s"
}

stop() {
	local j
	if [ -f "$CONF" ] && grep -qxF "$MARK" "$CONF" && alive /run/slurmctld.pid; then
		j=$(squeue -h -o %i 2>/dev/null || true)
		if [ -n "$j" ]; then
			say "cancelling jobs: $(echo "$j" | tr '\n' ' ')"
			# shellcheck disable=SC2086 # one job id a word
			scancel $j || true
			sleep 2
		fi
	fi
	[ -e "$RUN/slurmd" ] && stop_pid slurmd /run/slurmd.pid
	[ -e "$RUN/slurmctld" ] && stop_pid slurmctld /run/slurmctld.pid
	[ -e "$RUN/munged" ] && stop_pid munged /run/munge/munged.pid
	if [ -f "$CONF" ] && grep -qxF "$MARK" "$CONF"; then
		rm -f "$CONF"
		rm -rf "$STATE" "$SPOOL"
		say "removed $CONF, $STATE and $SPOOL"
	fi
	rm -rf "$RUN"
}

case "${1:-}" in
--stop) stop; exit 0 ;;
"") ;;
*) echo "usage: $0 [--stop]" >&2; exit 2 ;;
esac

for b in munged slurmctld slurmd sinfo; do
	command -v "$b" >/dev/null && continue
	say "installing slurm-wlm and munge"
	DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge >/dev/null
	break
done

host=$(hostname -s)
cpus=${LOCAL_SLURM_CPUS:-$(nproc --all)}
[ "$cpus" -ge 8 ] || [ -n "${LOCAL_SLURM_CPUS:-}" ] || cpus=8
mkdir -p "$RUN" "$STATE" "$SPOOL" "$LOGS" /etc/slurm

# The key authenticates every Slurm message; made once, readable by munge only.
if [ ! -s /etc/munge/munge.key ]; then
	mkdir -p /etc/munge
	(umask 077 && dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none)
	chown munge:munge /etc/munge/munge.key
	say "made /etc/munge/munge.key"
fi

conf=$(cat <<EOF
$MARK
# A single-node test cluster; see the script for why each choice.
ClusterName=gossipd-local
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=30
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
)
if [ -f "$CONF" ] && ! grep -qxF "$MARK" "$CONF"; then
	die "$CONF exists and was not written by this script; not touching it"
fi
if [ "$(cat "$CONF" 2>/dev/null)" != "$conf" ]; then
	if alive /run/slurmctld.pid || alive /run/slurmd.pid; then
		die "$CONF would change while Slurm runs: run $0 --stop first"
	fi
	echo "$conf" >"$CONF"
	say "wrote $CONF (node $host, $cpus CPUs declared, $(nproc --all) real)"
fi

if ! alive /run/munge/munged.pid; then
	mkdir -p /run/munge /var/lib/munge /var/log/munge
	chown munge:munge /run/munge /var/lib/munge /var/log/munge
	chmod 0755 /run/munge
	runuser -u munge -- /usr/sbin/munged
	touch "$RUN/munged"
	say "started munged"
fi
munge -n | unmunge >/dev/null || die "munge does not work (see /var/log/munge/munged.log)"

if ! alive /run/slurmctld.pid; then
	slurmctld
	touch "$RUN/slurmctld"
	say "started slurmctld"
fi
if ! alive /run/slurmd.pid; then
	slurmd
	touch "$RUN/slurmd"
	say "started slurmd"
fi

# A node that was down (an earlier run killed) comes back with RESUME.
for _ in $(seq 60); do
	st=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
	case "$st" in
	idle | mixed | allocated) break ;;
	down* | drain*) scontrol update NodeName="$host" State=RESUME 2>/dev/null || true ;;
	esac
	sleep 1
done
case "$st" in
idle | mixed | allocated) ;;
*) die "node $host is '${st:-unknown}' after 60 s (see $LOGS/slurmd.log and slurmctld.log)" ;;
esac
sinfo
say "up: sbatch --nodes=1 --ntasks-per-node=4 contrib/slurm/gossipd.sbatch --epochs 1"
