#!/bin/bash
# Heterogeneous-network testbed: N peers, each in its own network namespace,
# linked by veth pairs to one bridge that lives in a hub namespace of its own,
# every link shaped with tc (tbf or htb; netem is not needed). Runs one job
# (gossipd peers, or PyTorch DDP workers through ddp_ns.py), samples every
# peer's status into CSV, and tears everything down on exit, Ctrl-C or error.
#
# Why namespaces rather than 127.0.0.1 aliases: traffic then crosses real
# qdiscs on real (virtual) links, one per peer, so a slow peer is slow to
# everybody, and nothing of the host is touched. Every interface, address
# (10.77.0.0/24 by default) and route this script makes exists only inside
# the namespaces it creates; the host's own interfaces and routes are never
# read or changed. Deleting the namespaces destroys the veths and the bridge.
#
# Usage (root; from the build directory or with BUILD set):
#   contrib/testbed/testbed.sh [-n PEERS] [-b BWFILE] [-c PERCENT]
#                              [-o OUTDIR] [-N NAME] [-l LIMIT_S]
#                              gossip|ddp [GOSSIPD OPTION]...
#   contrib/testbed/testbed.sh clean
# clean removes what testbeds that were SIGKILLed left behind (a testbed
#   cleans up after itself on any other exit): namespaces tbPID-* and
#   cgroups tbPID-p* whose testbed.sh (PID) no longer runs, with every
#   process still in them.
# BWFILE, '#' comments allowed, rates in Mbit/s:
#   one number per line (peer 0, 1, ...): that peer's access link, shaped
#     with tbf both ways (its egress, and the hub's egress towards it), so
#     all its flows share it, as behind a real slow uplink;
#   PEERS numbers per line (an N x N matrix): row i column j is the rate of
#     i -> j, shaped with one htb class per destination on i's egress,
#     where GSO is off: htb would let a 64 KB GSO packet through as one.
#   Without -b the links are unshaped.
# PERCENT, an integer from 1 to 100 x the host's cores: each peer's CPU time,
#   in percent of one core, capped with a cgroup of its own (cpu controller:
#   v1 cpu.cfs_quota_us under /sys/fs/cgroup/cpu, or v2 cpu.max), which the
#   peer is in from its first instruction, threads and children included.
#   Every peer then runs as on a node of its own of fixed speed, as in a real
#   deployment; without -c all peers share the host's cores, and a peer that
#   waits for the network hands its CPU to the others, which hides the
#   network's effect.
# Environment (defaults in brackets): BUILD [.], PYTHON [/usr/bin/python3],
#   EPOCHS [20] SEED [1] EVAL_EVERY [40] EVAL_SAMPLES [2000] DDP_LR [0.05]
#   POLL [0.5] seconds between status samples, SUBNET [10.77.0] (a /24),
#   PORT [26000], LINK_POLL [2] seconds between `peers` samples.
# Output, in the layout of contrib/bench/gossip.sh so gossip_report.py reads
# it: OUTDIR/raw/NAME/ (meta.json, pids, p*.log, status.txt, ckpt*/, or
# w*.out for DDP; shaping.txt: the qdiscs as installed and the CPU cap;
# with -c, cpu.txt: every peer's cgroup cpu.stat (throttling) at the end), plus
# OUTDIR/NAME-status.csv (t_s, peer, step, accuracy, bytes_sent, exchanges,
# consensus_distance, state) and OUTDIR/NAME-links.csv (t_s, peer, link,
# bandwidth, rtt, selected, exchanges) from the `status` and `peers` polls.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-.}
python=${PYTHON:-/usr/bin/python3}
epochs=${EPOCHS:-20}
seed=${SEED:-1}
eval_every=${EVAL_EVERY:-40}
eval_samples=${EVAL_SAMPLES:-2000}
ddp_lr=${DDP_LR:-0.05}
poll=${POLL:-0.5}
link_poll=${LINK_POLL:-2}
subnet=${SUBNET:-10.77.0}
port=${PORT:-26000}
npeers=8
bwfile=
out=./testbed-out
name=
limit=300
cpu=
cflag=

# orphan TAG: true if TAG (tbPID) belongs to no running testbed.sh
orphan() {
	! grep -qa testbed.sh "/proc/${1#tb}/cmdline" 2>/dev/null
}

clean_orphans() {
	if [ "$(id -u)" != 0 ]; then
		echo "testbed.sh: needs root (ip netns, cgroups)" >&2
		return 2
	fi
	rc=0
	for s in $(ip netns list 2>/dev/null | awk '{ print $1 }' |
	    grep -E '^tb[0-9]+-(hub|p[0-9]+)$'); do
		orphan "${s%%-*}" || continue
		for p in $(ip netns pids "$s" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
		if ip netns del "$s"; then echo "removed namespace $s"; else rc=1; fi
	done
	for c in /sys/fs/cgroup/cpu/tb*-p* /sys/fs/cgroup/tb*-p*; do
		[ -d "$c" ] || continue
		t=${c##*/}
		echo "$t" | grep -qE '^tb[0-9]+-p[0-9]+$' || continue
		orphan "${t%%-*}" || continue
		n=0
		while read -r p; do kill -9 "$p" 2>/dev/null; done <"$c/cgroup.procs" 2>/dev/null
		until rmdir "$c" 2>/dev/null; do
			n=$((n + 1))
			[ $n -lt 50 ] || break
			sleep 0.1
		done
		if [ -d "$c" ]; then
			echo "testbed.sh: cannot remove cgroup $c" >&2
			rc=1
		else
			echo "removed cgroup $c"
		fi
	done
	return $rc
}

usage() {
	sed -n '/^# Usage/,/^# Output/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while getopts n:b:c:o:N:l:h o; do
	case $o in
	n) npeers=$OPTARG ;;
	b) bwfile=$OPTARG ;;
	c) cpu=$OPTARG cflag=1 ;;
	o) out=$OPTARG ;;
	N) name=$OPTARG ;;
	l) limit=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
job=$1
shift
case $job in gossip|ddp|clean) ;; *) usage ;; esac
if [ "$job" = clean ]; then
	[ $# -eq 0 ] || usage
	clean_orphans
	exit $?
fi
[ -n "$name" ] || name=$job
case $npeers in ''|*[!0-9]*) usage ;; esac
if [ "$npeers" -lt 2 ] || [ "$npeers" -gt 200 ]; then
	echo "testbed.sh: 2..200 peers" >&2
	exit 2
fi
if [ -n "$cflag" ]; then
	cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
	case $cpu in
	''|0*|*[!0-9]*) cpu_ok=0 ;;
	*) cpu_ok=1; [ "$cpu" -le $((100 * cores)) ] || cpu_ok=0 ;;
	esac
	if [ $cpu_ok -eq 0 ]; then
		echo "testbed.sh: -c $cpu: want an integer percent of one core, 1..$((100 * cores))" >&2
		usage
	fi
fi
if [ "$(id -u)" != 0 ]; then
	echo "testbed.sh: needs root (ip netns, tc)" >&2
	exit 2
fi
# The CPU cap: the cgroup cpu controller, v1 (CFS quota) or v2 (cpu.max).
# A 10 ms period: a peer that has spent its quota stalls for at most the
# rest of the period, loop thread included, and with the default 100 ms a
# 20% peer would go deaf to its partners for up to 80 ms at a time, which
# is not what a slower node does.
cg_period=10000
cg_quota=
cg_root=
cg_ver=
if [ -n "$cpu" ]; then
	cg_quota=$((cpu * cg_period / 100))
	if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] &&
	    [ -f /sys/fs/cgroup/cpu/cpu.cfs_period_us ]; then
		cg_ver=1
		cg_root=/sys/fs/cgroup/cpu
	elif [ -f /sys/fs/cgroup/cgroup.controllers ] &&
	    grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
		cg_ver=2
		cg_root=/sys/fs/cgroup
		# Children get cpu.max only if the controller is on below the root.
		if ! grep -qw cpu "$cg_root/cgroup.subtree_control" &&
		    ! echo +cpu >"$cg_root/cgroup.subtree_control"; then
			echo "testbed.sh: -c: cannot enable the cgroup v2 cpu controller in $cg_root/cgroup.subtree_control" >&2
			exit 2
		fi
	else
		echo "testbed.sh: -c: no usable cgroup cpu controller (neither v1 /sys/fs/cgroup/cpu/cpu.cfs_quota_us nor v2 \"cpu\" in /sys/fs/cgroup/cgroup.controllers)" >&2
		exit 2
	fi
fi
FLEET_BUILD=$(cd "$build" && pwd)
. "$here/../../tests/fleet.sh"
if [ "$job" = gossip ]; then
	for f in "$GOSSIPD" "$GOSSIPCTL"; do
		[ -x "$f" ] && continue
		echo "testbed.sh: $f not found: make src/gossipd src/gossipctl, or set BUILD" >&2
		exit 2
	done
fi

mkdir -p "$out/raw"
out=$(cd "$out" && pwd)
dir=$out/raw/$name
rm -rf "${dir:?}"
mkdir -p "$dir"
FLEET_LOGS=$dir
# Unique names, so two testbeds (or a crashed one) never collide.
tag=tb$$
hub=$tag-hub
made=
cgs=

ns() { echo "$tag-p$1"; }
# cg I: peer I's cgroup directory ("" without -c)
cg() { [ -z "$cg_root" ] || echo "$cg_root/$tag-p$1"; }
# Prefix of every peer's command: puts the process into cgroup $1 (none if
# empty), then execs the rest, so the peer is in it from its first
# instruction and keeps the pid that $! gives.
# shellcheck disable=SC2016 # expanded by that sh, not this one
incg='[ -z "$1" ] || echo $$ >"$1/cgroup.procs" || exit 126; shift; exec "$@"'
addr() { echo "$subnet.$(($1 + 1))"; }
now() { date +%s.%N; }

# cg_kill DIR: KILL every process in cgroup DIR
cg_kill() {
	while read -r p; do kill -9 "$p" 2>/dev/null; done 2>/dev/null <"$1/cgroup.procs"
}

teardown() {
	set +e
	# Our own processes: TERM (gossipd leaves cleanly), KILL after 3 s.
	# shellcheck disable=SC2046 # names are single words
	fleet_stop $(fleet_names)
	# Anything else still inside our namespaces was started by us too.
	for s in $made; do
		for p in $(ip netns pids "$s" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
	done
	# And anything still in our cgroups.
	for c in $cgs; do
		cg_kill "$c"
	done
	for s in $made; do ip netns del "$s" 2>/dev/null; done
	made=
	# The cgroups, once empty: a killed process leaves its cgroup only when
	# it is gone, hence the retries.
	for c in $cgs; do
		{ echo "== ${c##*/}"; cat "$c/cpu.stat"; } >>"$dir/cpu.txt" 2>/dev/null
		n=0
		until rmdir "$c" 2>/dev/null || [ ! -d "$c" ]; do
			n=$((n + 1))
			if [ $n -ge 50 ]; then
				echo "testbed.sh: cannot remove cgroup $c" >&2
				break
			fi
			cg_kill "$c"
			sleep 0.1
		done
	done
	cgs=
	fleet_teardown
}
trap teardown EXIT
trap 'echo "testbed.sh: interrupted" >&2; exit 130' INT TERM HUP

# rate_args MBIT: tbf parameters; burst 5 ms of the rate (at least two
# frames) so a 9 KB message cannot slip through in one burst at low rates.
tbf_args() {
	echo "$1" | awk '{ r = $1 * 1e6 / 8; b = r * 0.005; if (b < 3100) b = 3100;
		l = r * 0.2; if (l < 64 * 1024) l = 64 * 1024;
		printf "rate %gmbit burst %d limit %d", $1, b, l + b }'
}

# --- network ---------------------------------------------------------------
ip netns add "$hub"
made=$hub
ip -n "$hub" link set lo up
ip -n "$hub" link add br0 type bridge
ip -n "$hub" link set br0 up
i=0
while [ $i -lt "$npeers" ]; do
	s=$(ns $i)
	ip netns add "$s"
	made="$made $s"
	# Created inside the hub namespace and moved straight into the peer's:
	# neither end ever exists in the host's namespace.
	ip -n "$hub" link add "v$i" type veth peer name eth0 netns "$s"
	ip -n "$hub" link set "v$i" master br0 up
	ip -n "$s" link set lo up
	ip -n "$s" addr add "$(addr $i)/24" dev eth0
	ip -n "$s" link set eth0 up
	i=$((i + 1))
done

if [ -n "$bwfile" ]; then
	rates=$(sed 's/#.*//' "$bwfile" | awk 'NF')
	rows=$(echo "$rates" | wc -l)
	cols=$(echo "$rates" | head -n 1 | awk '{ print NF }')
	if [ "$rows" -ne "$npeers" ] || { [ "$cols" -ne 1 ] && [ "$cols" -ne "$npeers" ]; }; then
		echo "testbed.sh: $bwfile: want $npeers lines of 1 or $npeers rates, got $rows x $cols" >&2
		exit 2
	fi
	i=0
	echo "$rates" | while read -r line; do
		s=$(ns $i)
		if [ "$cols" -eq 1 ]; then
			# shellcheck disable=SC2046 # tbf_args is a list of words
			tc -n "$s" qdisc add dev eth0 root tbf $(tbf_args "$line")
			# shellcheck disable=SC2046
			tc -n "$hub" qdisc add dev "v$i" root tbf $(tbf_args "$line")
		else
			# One frame a packet: htb sends a packet whenever the class
			# has tokens left, so a GSO packet of up to 64 KB would cross
			# at line rate (tbf, above, splits GSO packets itself).
			ip -n "$s" link set eth0 gso_max_segs 1
			# quantum: only silences htb's warning; these classes never
			# borrow (no parent, ceil = rate), so it shapes nothing.
			tc -n "$s" qdisc add dev eth0 root handle 1: htb default 999
			tc -n "$s" class add dev eth0 parent 1: classid 1:999 htb \
				rate 10gbit quantum 60000
			j=0
			for r in $line; do
				if [ $j -ne $i ]; then
					tc -n "$s" class add dev eth0 parent 1: classid "1:$((j + 1))" \
						htb rate "${r}mbit" ceil "${r}mbit" burst 3100 cburst 3100 \
						quantum 60000
					tc -n "$s" filter add dev eth0 parent 1: protocol ip prio 1 u32 \
						match ip dst "$(addr $j)/32" flowid "1:$((j + 1))"
				fi
				j=$((j + 1))
			done
		fi
		i=$((i + 1))
	done
fi
# --- cpu -------------------------------------------------------------------
if [ -n "$cpu" ]; then
	i=0
	while [ $i -lt "$npeers" ]; do
		c=$(cg $i)
		mkdir "$c"
		cgs="$cgs $c"
		if [ "$cg_ver" = 1 ]; then
			echo "$cg_period" >"$c/cpu.cfs_period_us"
			echo "$cg_quota" >"$c/cpu.cfs_quota_us"
		else
			echo "$cg_quota $cg_period" >"$c/cpu.max"
		fi
		i=$((i + 1))
	done
fi

{
	for s in $made; do
		echo "== $s"
		tc -n "$s" qdisc show
		tc -n "$s" class show dev eth0 2>/dev/null || true
		ip -n "$s" -d link show dev eth0 2>/dev/null |
			grep -o 'gso_max_segs [0-9]*' || true
	done
	echo "== cpu"
	if [ -n "$cpu" ]; then
		if [ "$cg_ver" = 1 ]; then
			lim="cpu.cfs_quota_us $cg_quota, cpu.cfs_period_us $cg_period"
		else
			lim="cpu.max $cg_quota $cg_period"
		fi
		echo "each peer capped at $cpu% of one core: cgroup v$cg_ver $(cg I), $lim"
	else
		echo "not capped"
	fi
} >"$dir/shaping.txt"

# --- job -------------------------------------------------------------------
list=
i=0
while [ $i -lt "$npeers" ]; do
	list="$list${list:+,}$(addr $i):$port"
	i=$((i + 1))
done

t0=$(now)
: >"$dir/pids"
if [ "$job" = gossip ]; then
	fleet_keygen "$FLEET_DIR/key"
	echo "== $name: $npeers gossipd peers in namespaces, $* ($epochs epochs)" >&2
	i=0
	while [ $i -lt "$npeers" ]; do
		mkdir -p "$dir/ckpt$i"
		fleet_start "p$i" sh -c "$incg" sh "$(cg $i)" \
			ip netns exec "$(ns $i)" "$GOSSIPD" -f --listen "$(addr $i):$port" \
			--key-file "$FLEET_DIR/key" --peers "$list" --shard "$i/$npeers" \
			--control "$FLEET_DIR/p$i.sock" --job "tb-$name" --seed "$seed" \
			--epochs "$epochs" --eval-every "$eval_every" \
			--eval-samples "$eval_samples" --checkpoint-dir "$dir/ckpt$i" \
			--checkpoint-every 100000000 --checkpoint-keep 1 "$@"
		echo "$i $(fleet_pid "p$i")" >>"$dir/pids"
		i=$((i + 1))
	done
	kind=gossipd
	opts="$*"
else
	echo "== $name: $npeers PyTorch DDP workers (gloo) in namespaces, lr $ddp_lr ($epochs epochs)" >&2
	r=0
	while [ $r -lt "$npeers" ]; do
		# stdout (the evaluations) to w$r.out, stderr to w$r.log
		fleet_start "w$r" env TB_INIT="tcp://$(addr 0):$port" GLOO_SOCKET_IFNAME=eth0 \
			OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
			sh -c "$incg" sh "$(cg $r)" \
			ip netns exec "$(ns $r)" sh -c 'exec "$@" >"$0"' "$dir/w$r.out" \
			"$python" "$here/ddp_ns.py" \
			--rank "$r" --world "$npeers" --port "$port" --epochs "$epochs" \
			--lr "$ddp_lr" --seed "$seed" --eval-every "$eval_every" \
			--eval-samples "$eval_samples"
		echo "$r $(fleet_pid "w$r")" >>"$dir/pids"
		r=$((r + 1))
	done
	kind=ddp
	opts="gloo lr $ddp_lr"
fi
printf '{"system":"%s","kind":"%s","t0":%s,"peers":%d,"epochs":%s,"options":"%s","bwfile":"%s","cpu":%s}\n' \
	"$name" "$kind" "$t0" "$npeers" "$epochs" "$opts" "$bwfile" "${cpu:-null}" >"$dir/meta.json"

: >"$dir/status.txt"
: >"$dir/links.txt"
last_links=0
timeout=0
while fleet_any_alive; do
	t=$(now)
	if [ "$(echo "$t - $t0 > $limit" | bc)" = 1 ]; then
		echo "testbed.sh: $name ran past ${limit}s; stopping it" >&2
		echo timeout >"$dir/timeout"
		timeout=1
		break
	fi
	if [ "$job" = gossip ]; then
		links=$(echo "$t - $last_links >= $link_poll" | bc)
		[ "$links" = 1 ] && last_links=$t
		i=0
		while [ $i -lt "$npeers" ]; do
			if st=$(fleet_ctl "p$i" --json status 2>/dev/null); then
				echo "$(now) $i $st" >>"$dir/status.txt"
			fi
			if [ "$links" = 1 ] &&
			    st=$(fleet_ctl "p$i" --json peers 2>/dev/null); then
				echo "$(now) $i $st" >>"$dir/links.txt"
			fi
			i=$((i + 1))
		done
	fi
	sleep "$poll"
done

# Exit codes, as gossip.sh records them.
: >"$dir/rc"
[ $timeout -eq 1 ] || fleet_reap "$dir/rc"
teardown
trap - EXIT

if [ "$job" = gossip ]; then
	"$python" "$here/status_csv.py" "$dir" "$out/$name-status.csv" "$out/$name-links.csv"
fi
echo "testbed.sh: $name done in $(echo "$(now) - $t0" | bc | cut -c1-6) s; raw output in $dir" >&2
[ $timeout -eq 0 ]
