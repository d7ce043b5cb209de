#!/bin/bash
# Churn soak: N real gossipd peers (job key, Fashion-MNIST shards) train
# together while, at random moments, one is SIGKILLed (and restarted later
# on its address with --resume), one is SIGSTOPped for a few seconds, a
# joiner comes in with --join, or one is asked to leave. The chaos is
# bounded so that the job lives: never fewer than ceil(N/2) running,
# unstopped peers. It counts
#   hangs       a peer that does not answer `gossipctl status` within 2 s
#               in two polls in a row (all running, unstopped peers are
#               polled every second; single misses go to events.log), or
#               does not exit within leave_timeout + 5 s of a leave;
#   crashes     any exit nobody asked for, or a leave that exits non-zero;
#   sanitizer   "ERROR: AddressSanitizer", "ERROR: LeakSanitizer" or
#               "runtime error:" in any peer's log;
# and at the end, after a settling time without chaos,
#   below-target  a running peer whose last evaluation is under --target;
#   stale-dead    a running peer that some peer's view still holds dead.
# Prints one summary line; exits 1 if any count is above 0, 2 on bad usage.
# Logs (one per process, with sanitizer output), checkpoints and events.log
# stay in the directory printed at the start.
#
# Usage: contrib/soak/soak.sh [--peers N (8-12, default 8)] [--minutes M
#   (default 10)] [--build DIR (DIR/src/gossipd and DIR/src/gossipctl, e.g.
#   an ASan build; default: this tree)] [--seed S] [--target ACC (default
#   0.80)]
# Ports are free ones from tests/fleet.sh, which owns every process.
synopsis="usage: soak.sh [--peers N] [--minutes M] [--build DIR] [--seed S] [--target ACC]"
usage() {
	echo "soak.sh: $1" >&2
	echo "$synopsis" >&2
	exit 2
}
peers=8 minutes=10 build=$(cd "$(dirname "$0")/../.." && pwd) seed=$(date +%s) target=0.80
while [ $# -gt 0 ]; do
	case $1 in -h|--help) echo "$synopsis"; exit 0 ;; esac
	[ $# -ge 2 ] || usage "$1: needs a value"
	case $1 in
	--peers) peers=$2 ;;
	--minutes) minutes=$2 ;;
	--build) build=$2 ;;
	--seed) seed=$2 ;;
	--target) target=$2 ;;
	*) usage "unknown option $1" ;;
	esac
	shift 2
done
[[ $peers =~ ^[0-9]+$ ]] && [ "$peers" -ge 8 ] && [ "$peers" -le 12 ] || usage "--peers: 8 to 12"
[[ $minutes =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v m="$minutes" 'BEGIN { exit !(m > 0) }' ||
	usage "--minutes: must be above 0"
[[ $seed =~ ^[0-9]+$ ]] || usage "--seed: a whole number"
[[ $target =~ ^[0-9]*\.?[0-9]+$ ]] || usage "--target: a number"
for f in gossipd gossipctl; do [ -x "$build/src/$f" ] || usage "--build: no executable $build/src/$f"; done
FLEET_BUILD=$(cd "$build" && pwd)
# The logs, checkpoints and events.log are the soak's result.
FLEET_KEEP=1
. "$(dirname "$0")/../../tests/fleet.sh"
[ -f "$FLEET_DATA/train-images-idx3-ubyte.gz" ] ||
	{ echo "soak: Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
trap 'echo "soak: interrupted"; exit 130' INT

N=$peers MIN_LIVE=$(((peers + 1) / 2)) MAX_PEERS=$((peers + 4))
LEAVE_TIMEOUT=2 # gossipd's leave_timeout default, seconds
SETTLE=90       # longest wait for the end checks, seconds
# An epoch of a 1/N shard every 2/3 s: more than 8 peers on 2 cores train,
# so they train through the whole soak (--linger covers the rest);
# evaluations every 100 steps keep each peer's accuracy current.
EPOCHS=$(awk -v m="$minutes" 'BEGIN { e = m * 90; print (e == int(e)) ? e : int(e) + 1 }')
COMMON=(--checkpoint-every 100 --epochs "$EPOCHS" --linger yes --eval-every 100
	--eval-samples 2000 --seed $((seed % 1000 + 1)))
RANDOM=$seed
echo "soak: seed $seed, logs in $FLEET_DIR"
fleet_keygen "$FLEET_DIR/key"
EVENTS=$FLEET_DIR/events.log
: >"$EVENTS"
T0=$(fleet_now)
kills=0 stops=0 restarts=0 joins=0 leaves=0 hangs=0 crashes=0

# Per slot S (an address; a process p S.RUN on it at a time):
declare -A ADDR=() RUNS=() CUR=() EXPECT=() READY=() MISSES=() STOP_UNTIL=() LEAVE_BY=()
declare -A RESTART_AT=() SEED_OF=() SEED_UNTIL=()
SLOTS=0

note() { printf '%8.2f %s\n' "$(fleet_since "$T0")" "$*" >>"$EVENTS"; }
# uniform A B: a moment A to B seconds from now, in microseconds.
uniform() { echo $(($(fleet_now) + $1 * 1000000 + ((RANDOM << 15 | RANDOM) % (($2 - $1) * 1000000)))); }
ctl() { timeout 2 "$GOSSIPCTL" -s "$FLEET_DIR/p$1.sock" --json "${@:2}" 2>/dev/null; }

# start S ARGS...: the next run on slot S.
start() {
	local s=$1
	shift
	RUNS[$s]=$((${RUNS[$s]:-0} + 1))
	CUR[$s]=p$s.${RUNS[$s]}
	fleet_gossipd "${CUR[$s]}" --listen "${ADDR[$s]}" --key-file "$FLEET_DIR/key" --shard "$((s % N))/$N" \
		--control "$FLEET_DIR/p$s.sock" --checkpoint-dir "$FLEET_DIR/p$s.ckpt" "${COMMON[@]}" "$@"
	EXPECT[$s]= READY[$s]= MISSES[$s]=0
	note "start p$s run ${RUNS[$s]} pid $(fleet_pid "${CUR[$s]}"): $*"
}

# up S: whether its run serves its control socket. The socket file appears
# before the fabric endpoint is open (about 2 s with 8 peers starting on 2
# cores), and requests wait in its backlog until then: the log line written
# just before the event loop starts says when.
up() {
	[ -n "${READY[$1]}" ] && return
	[ -n "${CUR[$1]}" ] && grep -Eqs ', control socket |joining through' "$FLEET_LOGS/${CUR[$1]}.log" &&
		READY[$1]=1
}
live() { [ -n "${CUR[$1]}" ] && [ -z "${EXPECT[$1]}${STOP_UNTIL[$1]}" ] && up "$1"; }
lives() {
	local s
	for ((s = 0; s < SLOTS; s++)); do live $s && echo $s; done
}

# reap: notices exits; those asked for end the process, the others are crashes.
reap() {
	local s pid rc
	for ((s = 0; s < SLOTS; s++)); do
		[ -n "${CUR[$s]}" ] || continue
		pid=$(fleet_pid "${CUR[$s]}")
		fleet_alive "$pid" && continue
		rc=0
		fleet_wait_exit "${CUR[$s]}" 1 2>/dev/null || rc=$?
		if [ "${EXPECT[$s]}" = kill ]; then
			note "p$s killed (rc $rc)"
		elif [ "${EXPECT[$s]}" = leave ] && [ $rc = 0 ]; then
			note "p$s left"
		else
			crashes=$((crashes + 1))
			note "CRASH p$s run ${RUNS[$s]} pid $pid: exit $rc (asked: ${EXPECT[$s]:-None})"
		fi
		CUR[$s]= STOP_UNTIL[$s]= LEAVE_BY[$s]=
	done
}

# poll_status: every running, unstopped peer must answer status within 2 s;
# asked all at once.
poll_status() {
	local s i rc pids=() slots=()
	for s in $(lives); do
		timeout 2 "$GOSSIPCTL" -s "$FLEET_DIR/p$s.sock" status >/dev/null 2>&1 &
		pids+=($!)
		slots+=("$s")
	done
	for i in "${!pids[@]}"; do
		s=${slots[i]}
		rc=0
		wait "${pids[i]}" || rc=$?
		if [ $rc != 124 ]; then
			MISSES[$s]=0
		elif live "$s" && fleet_alive "$(fleet_pid "${CUR[$s]}")"; then
			MISSES[$s]=$((MISSES[$s] + 1))
			# One miss can be the host: on 2 cores, a dozen ASan peers
			# starve every loop now and then (load 39 measured). A stuck
			# loop misses every poll.
			note "$([ "${MISSES[$s]}" = 2 ] && echo HANG || echo slow) p$s pid $(fleet_pid "${CUR[$s]}"):" \
				"no status within 2 s, ${MISSES[$s]} polls in a row (load $(cut -d' ' -f1 /proc/loadavg))"
			[ "${MISSES[$s]}" = 2 ] && hangs=$((hangs + 1))
		fi
	done
}

# seeding S NOW: whether a joiner is still joining through S (for at most 30 s).
seeding() {
	local j
	for ((j = 0; j < SLOTS; j++)); do
		[ "${SEED_OF[$j]:-}" = "$1" ] && [ -n "${CUR[$j]}" ] && [ "$2" -lt "${SEED_UNTIL[$j]}" ] || continue
		grep -qs "member: joined the job" "$FLEET_LOGS/${CUR[$j]}.log" || return 0
		SEED_OF[$j]=
	done
	return 1
}

# A slot for a new peer, on a port of its own.
new_slot() {
	local port
	fleet_port port
	ADDR[$SLOTS]=127.0.0.1:$port
	SLOTS=$((SLOTS + 1))
}

chaos() {
	local now=$1 acts=() lv s running=0 act j
	mapfile -t lv < <(lives)
	[ ${#lv[@]} -gt $MIN_LIVE ] && acts+=(kill stop leave)
	for ((s = 0; s < SLOTS; s++)); do [ -n "${CUR[$s]}" ] && running=$((running + 1)); done
	[ $running -lt $MAX_PEERS ] && acts+=(join)
	[ ${#acts[@]} -gt 0 ] || return 0
	act=${acts[RANDOM % ${#acts[@]}]}
	# A member that a joiner is still joining through stays as it is: the
	# joiner knows no other, and one that loses its only seed before it
	# heard of anyone gives up after start_timeout (exit 3), which the soak
	# would count as a failure.
	if [ "$act" != join ]; then
		mapfile -t lv < <(for s in "${lv[@]}"; do seeding "$s" "$now" || echo "$s"; done)
	fi
	[ ${#lv[@]} -gt 0 ] || return 0
	s=${lv[RANDOM % ${#lv[@]}]}
	case $act in
	kill)
		EXPECT[$s]=kill
		fleet_kill KILL "${CUR[$s]}"
		kills=$((kills + 1))
		RESTART_AT[$s]=$(uniform 3 15)
		note "kill -9 p$s"
		;;
	stop)
		fleet_kill STOP "${CUR[$s]}"
		STOP_UNTIL[$s]=$(uniform 1 6)
		stops=$((stops + 1))
		note "stop p$s"
		;;
	leave)
		EXPECT[$s]=leave
		LEAVE_BY[$s]=$((now + (LEAVE_TIMEOUT + 5) * 1000000))
		leaves=$((leaves + 1))
		note "leave p$s: $(ctl "$s" leave || echo None)"
		;;
	join)
		j=$SLOTS
		new_slot
		start "$j" --join "${ADDR[$s]}"
		SEED_OF[$j]=$s SEED_UNTIL[$j]=$((now + 30000000))
		joins=$((joins + 1))
		;;
	esac
}

housekeeping() {
	local now=$1 s via ck
	for ((s = 0; s < SLOTS; s++)); do
		if [ -n "${STOP_UNTIL[$s]}" ] && [ "$now" -ge "${STOP_UNTIL[$s]}" ]; then
			fleet_kill CONT "${CUR[$s]}"
			STOP_UNTIL[$s]=
			note "cont p$s"
		fi
		if [ -n "${LEAVE_BY[$s]}" ] && [ -n "${CUR[$s]}" ] && [ "$now" -gt "${LEAVE_BY[$s]}" ]; then
			hangs=$((hangs + 1))
			note "HANG p$s: still running $((LEAVE_TIMEOUT + 5)) s after leave"
			EXPECT[$s]=kill
			LEAVE_BY[$s]=
			fleet_kill KILL "${CUR[$s]}"
		fi
		if [ -n "${RESTART_AT[$s]:-}" ] && [ -z "${CUR[$s]}" ] && [ "$now" -ge "${RESTART_AT[$s]}" ]; then
			# Back on its address, from its newest checkpoint and knowing
			# every running member; killed before its first checkpoint, as
			# a joiner.
			mapfile -t via < <(lives)
			[ ${#via[@]} -gt 0 ] || continue
			RESTART_AT[$s]=
			ck=$FLEET_DIR/p$s.ckpt
			if compgen -G "$ck/ckpt-*" >/dev/null; then
				start "$s" --resume --peers "$(for v in "${via[@]}"; do printf '%s,' "${ADDR[$v]}"; done)${ADDR[$s]}"
			else
				v=${via[RANDOM % ${#via[@]}]}
				start "$s" --join "${ADDR[$v]}"
				SEED_OF[$s]=$v SEED_UNTIL[$s]=$((now + 30000000))
			fi
			restarts=$((restarts + 1))
		fi
	done
}

# end_checks: until SETTLE s, each running peer's last evaluation >= target,
# none held dead. Sets END_LIVE, BELOW and STALE.
end_checks() {
	local start now s addrs waited=
	start=$(fleet_now)
	while true; do
		now=$(fleet_now)
		reap
		housekeeping "$now"
		mapfile -t END_LIVE < <(lives)
		addrs=$(for s in "${END_LIVE[@]}"; do printf '"%s",' "${ADDR[$s]}"; done)
		BELOW=() STALE=()
		for s in "${END_LIVE[@]}"; do
			mapfile -t -O ${#BELOW[@]} BELOW < <( (ctl "$s" status || echo null) |
				fleet_json 'select(. == null or (.accuracy // -1) < $t) | "p'"$s"':\(.accuracy)"' \
					--argjson t "$target")
			mapfile -t -O ${#STALE[@]} STALE < <(ctl "$s" peers | fleet_json \
				'.peers[] | select(.state == "dead" and (.addr as $x | any($a[]; . == $x)))
				| "p'"$s"' holds \(.addr) dead"' --argjson a "[${addrs%,}]")
		done
		if [ ${#BELOW[@]} = 0 ] && [ ${#STALE[@]} = 0 ] || [ $((now - start)) -gt $((SETTLE * 1000000)) ]; then
			note "end checks after $(printf %.0f "$(fleet_since "$start")") s: ${#END_LIVE[@]} peers," \
				"below target [${BELOW[*]}], stale dead [${STALE[*]}]"
			return
		fi
		if [ -z "$waited" ]; then
			note "end checks waiting: below target [${BELOW[*]}], stale dead [${STALE[*]}]"
			waited=1
		fi
		sleep 2
	done
}

for ((i = 0; i < N; i++)); do
	names+=" p$i.1"
	FLEET_ARGS[p$i.1]="--control $FLEET_DIR/p$i.sock --checkpoint-dir $FLEET_DIR/p$i.ckpt"
done
fleet_job "$names" "${COMMON[@]}"
for ((i = 0; i < N; i++)); do
	ADDR[$i]=127.0.0.1:${FLEET_PORT[p$i.1]}
	RUNS[$i]=1 CUR[$i]=p$i.1 READY[$i]=1 MISSES[$i]=0
	note "start p$i run 1 pid $(fleet_pid "p$i.1"): --peers (all $N)"
done
SLOTS=$N
end=$(($(fleet_now) + $(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 * 1000000 }')))
next_chaos=$(uniform 2 6)
while [ "$(fleet_now)" -lt $end ]; do
	now=$(fleet_now)
	reap
	housekeeping "$now"
	if [ "$now" -ge "$next_chaos" ]; then
		chaos "$now"
		next_chaos=$(uniform 1 6)
	fi
	poll_status
	left=$((now + 1000000 - $(fleet_now)))
	[ $left -gt 0 ] && sleep "$(printf '0.%06d' $left)"
done
# No more chaos: the stopped continue, the killed come back.
for ((s = 0; s < SLOTS; s++)); do
	[ -n "${STOP_UNTIL[$s]}" ] && STOP_UNTIL[$s]=$(fleet_now)
	[ -n "${RESTART_AT[$s]:-}" ] && RESTART_AT[$s]=$(fleet_now)
done
settle_end=$(($(fleet_now) + (2 * LEAVE_TIMEOUT + 10) * 1000000))
while [ "$(fleet_now)" -lt $settle_end ]; do
	reap
	housekeeping "$(fleet_now)"
	poll_status
	sleep 1
done
end_checks
for b in "${BELOW[@]}"; do note "BELOW-TARGET $b"; done
for s in "${STALE[@]}"; do note "STALE-DEAD $s"; done
sanitizer=0
while IFS= read -r line; do
	sanitizer=$((sanitizer + 1))
	note "SANITIZER ${line#"$FLEET_DIR/"}"
done < <(cd "$FLEET_DIR" && grep -E 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' \
	$(ls ./*.log | grep -v '^./events.log$') /dev/null | sed 's|^\./\([^:]*\):|\1: |')
bad=$((hangs + crashes + sanitizer + ${#BELOW[@]} + ${#STALE[@]}))
printf 'soak: %.0f s, %d peers, %d kills, %d stops, %d restarts, %d joins, %d leaves; hangs %d, crashes %d, sanitizer %d, below-target %d, stale-dead %d, %d peers at the end: %s (logs and events.log in %s)\n' \
	"$(awk -v m="$minutes" 'BEGIN { print m * 60 }')" "$N" $kills $stops $restarts $joins $leaves \
	$hangs $crashes $sanitizer ${#BELOW[@]} ${#STALE[@]} ${#END_LIVE[@]} \
	"$([ $bad = 0 ] && echo PASS || echo FAIL)" "$FLEET_DIR"
[ $bad = 0 ]
