#!/bin/bash
# A joiner's model pull, timed: two donor peers train MODEL for one step
# and linger; a third peer joins through one of them and pulls the whole
# model from both (the pull's chunks, each a large transport message).
# Reported: seconds from the joiner's "pulling the model" log line to its
# "model pulled" line, the model's bytes over that time, and the joiner's
# peak resident memory (VmHWM) once the model is in. With BASE set
# to another build directory, the same run is made with its binaries
# right after ours, REPEATS times each, alternating, so that the two are
# compared at the same moment on the same machine.
#
#   contrib/bench/pull.sh            (from the build directory)
#   BASE=/path/to/other/build contrib/bench/pull.sh
#
# Env: BUILD (.), BASE (none), MODEL (784-8192-8192-10, 74 M parameters,
# 296 MB), REPEATS (3), PORT (24600), CSV (pull.csv: run,seconds,MBps,
# joiner_peak_MB), KEEP (set: keep the logs, in a directory it names).
set -eu
BUILD=${BUILD:-.}
BASE=${BASE:-}
MODEL=${MODEL:-784-8192-8192-10}
REPEATS=${REPEATS:-3}
PORT=${PORT:-24600}
CSV=${CSV:-pull.csv}
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	[ -n "${KEEP:-}" ] && echo "kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT

# stamp FILE PATTERN: the time (s since the epoch) of the first log line
# matching PATTERN, from its ISO timestamp.
stamp() {
	local line
	line=$(grep -m1 -- "$2" "$1") || return 1
	date -d "$(echo "$line" | awk '{ print $1 }')" +%s.%N
}

# run BUILD TAG: one pull; prints "TAG,seconds,MB/s,peak MB".
run() {
	local b=$1 tag=$2 d="$tmp/$2" i a0 a1 a2 t0 t1 bytes peak
	mkdir -m 700 "$d"
	"$b/src/gossipctl" keygen "$d/key" >/dev/null
	a0=127.0.0.1:$PORT a1=127.0.0.1:$((PORT + 1)) a2=127.0.0.1:$((PORT + 2))
	common=(-f --key-file "$d/key" --job pullbench --model "$MODEL"
	    --close-budget 0 --eval-every 100000 --eval-samples 100)
	for i in 0 1; do
		a=$a0; [ $i = 1 ] && a=$a1
		"$b/src/gossipd" "${common[@]}" --listen "$a" --peers "$a0,$a1" \
		    --control "$d/c$i.sock" --max-steps 1 --linger yes \
		    --shard $i/2 --log-file "$d/p$i.log" &
		pids+=($!)
	done
	# Both donors linger before anyone joins: their step, closing and
	# final evaluations (seconds of the loop's and the trainer's time for
	# a model this large) are over, so the pull has them to itself.
	for i in 0 1; do
		for _ in $(seq 600); do
			grep -q "lingering as a member" "$d/p$i.log" 2>/dev/null && break
			sleep 0.2
		done
	done
	"$b/src/gossipd" "${common[@]}" --listen "$a2" --join "$a0" \
	    --control "$d/c2.sock" --max-steps 2 --shard 1/2 \
	    --log-file "$d/p2.log" &
	pids+=($!)
	for _ in $(seq 300); do
		grep -q "model pulled" "$d/p2.log" 2>/dev/null && break
		sleep 0.2
	done
	t0=$(stamp "$d/p2.log" "pulling the model") || { echo "$tag: no pull" >&2; return 1; }
	t1=$(stamp "$d/p2.log" "model pulled") || { echo "$tag: pull unfinished" >&2; return 1; }
	# The joiner's peak so far; "-" when it is gone already.
	peak=$(awk '$1 == "VmHWM:" { printf "%.0f", $2 / 1024 }' "/proc/${pids[2]}/status" 2>/dev/null) || peak=-
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
	bytes=$(echo "$MODEL" | awk -F- '{ n = 0; for (i = 2; i <= NF; i++) n += ($(i - 1) + 1) * $i; printf "%.0f\n", 4 * n }')
	echo "$tag,$(echo "$t1 - $t0" | bc -l),$(echo "$bytes / ($t1 - $t0) / 1000000" | bc -l),$peak"
}

echo "run,seconds,MBps,joiner_peak_MB" >"$CSV"
for r in $(seq "$REPEATS"); do
	run "$BUILD" "ours-$r"
	if [ -n "$BASE" ]; then run "$BASE" "base-$r"; fi
done | tee -a "$CSV" | awk -F, '{ printf "%-8s pull %7.2f s  %7.0f MB/s  joiner peak %6.0f MB\n", $1, $2, $3, $4 }'
